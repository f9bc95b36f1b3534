"""benchmarks/mutation.py's bookkeeping: how kill rates are counted and how a random
sample of a module's mutants is drawn. Fake mutmut state, no mutmut run."""

import collections
import importlib.util
import json
import os
from pathlib import Path

import pytest
from scipy.stats import binomtest

_SPEC = importlib.util.spec_from_file_location(
    "mutation", Path(__file__).resolve().parents[1] / "benchmarks" / "mutation.py")
mutation = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(mutation)


def _fake_mutants(folder, module, codes):
    meta = mutation.meta_path(module, folder)
    meta.parent.mkdir(parents=True, exist_ok=True)
    meta.write_text(json.dumps({"exit_code_by_key": codes}))
    return folder


def test_every_mutant_not_killed_counts_as_survived_and_a_sample_gets_its_wilson_interval():
    counts = {"probe": collections.Counter({"killed": 40, "timeout": 5, "survived": 3,
                                            "no tests": 2, "not checked": 50})}
    sample = {"probe": collections.Counter({"killed": 36, "timeout": 4, "survived": 2})}
    rates = mutation.kill_rates(counts, sample)["probe"]
    assert {k: rates[k] for k in ("killed", "survived", "total", "not_checked")} == {
        "killed": 45, "survived": 55, "total": 100, "not_checked": 50}
    ci = binomtest(40, 42).proportion_ci(confidence_level=0.95, method="wilson")
    assert rates["sample"] == {"checked": 42, "killed": 40, "kill_rate": round(40 / 42, 4),
                               "ci95": [round(ci.low, 4), round(ci.high, 4)]}
    # all run: no sample entry; none of the sample run yet: none either
    done = mutation.kill_rates({"paper": collections.Counter({"killed": 9, "survived": 1})})
    assert done == {"paper": {"killed": 9, "survived": 1, "total": 10, "not_checked": 0}}
    assert "sample" not in mutation.kill_rates(counts, {"probe": collections.Counter()})["probe"]


def test_the_sample_order_is_fixed_and_covers_every_counted_mutant(tmp_path):
    names = [f"dupbert.tools.probe.x_f__mutmut_{i}" for i in range(1, 41)]
    folder = _fake_mutants(tmp_path, "probe", dict.fromkeys(names))
    order = mutation.sample_order("probe", folder)
    assert sorted(order) == sorted(names) and order != sorted(names)
    assert order == mutation.sample_order("probe", folder)  # seed 0, every time
    assert mutation.unchecked("probe", folder) == names
    with pytest.raises(SystemExit, match="no mutants of duplicate"):
        mutation.sample_order("duplicate", folder)


def test_recheck_judges_each_timeout_by_its_tests_run_without_the_limit(tmp_path):
    """A timed-out mutant whose tests pass is survived, one whose tests fail is killed, one
    still running after RECHECK_FACTOR x the clean duration stays a timeout; other mutants are
    not run; each test set runs once on the original code, and its duration sets the limit."""
    codes = {"dupbert.tools.probe.x_f__mutmut_1": -24, "dupbert.tools.probe.x_f__mutmut_2": 24,
             "dupbert.tools.probe.x_g__mutmut_1": 152, "dupbert.tools.probe.x_g__mutmut_2": 0,
             "dupbert.tools.probe.x_g__mutmut_3": 1, "dupbert.tools.probe.x_h__mutmut_1": None}
    folder = _fake_mutants(tmp_path, "probe", codes)
    (folder / "mutmut-stats.json").write_text(json.dumps({"tests_by_mangled_function_name": {
        "dupbert.tools.probe.x_f": ["tests/test_probe.py::b", "tests/test_probe.py::a"],
        "dupbert.tools.probe.x_g": ["tests/test_probe.py::c"]}}))
    outcome = {"dupbert.tools.probe.x_f__mutmut_1": 0, "dupbert.tools.probe.x_f__mutmut_2": 1,
               "dupbert.tools.probe.x_g__mutmut_1": None}
    calls = []

    def fake_tests(tests, mutant, timeout):
        calls.append((tuple(tests), mutant, timeout))
        return 0 if mutant is None else outcome[mutant]

    result = mutation.recheck_timeouts("probe", folder, run_tests=fake_tests, factor=2.0)
    assert result == {"dupbert.tools.probe.x_f__mutmut_1": "survived",
                      "dupbert.tools.probe.x_f__mutmut_2": "killed",
                      "dupbert.tools.probe.x_g__mutmut_1": "timeout"}
    assert [(tests, mutant) for tests, mutant, _ in calls] == [
        (("tests/test_probe.py::a", "tests/test_probe.py::b"), None),
        (("tests/test_probe.py::a", "tests/test_probe.py::b"), "dupbert.tools.probe.x_f__mutmut_1"),
        (("tests/test_probe.py::a", "tests/test_probe.py::b"), "dupbert.tools.probe.x_f__mutmut_2"),
        (("tests/test_probe.py::c",), None),
        (("tests/test_probe.py::c",), "dupbert.tools.probe.x_g__mutmut_1")]
    assert all(timeout is None for _, mutant, timeout in calls if mutant is None)
    assert all(0 <= timeout < 1 for _, mutant, timeout in calls if mutant is not None)
    assert mutation.exit_codes("probe", folder) == {**codes, "dupbert.tools.probe.x_f__mutmut_1": 0,
                                                    "dupbert.tools.probe.x_f__mutmut_2": 1}

    other = _fake_mutants(tmp_path / "other", "probe", {"dupbert.tools.probe.x_f__mutmut_1": -24})
    (other / "mutmut-stats.json").write_text(json.dumps({"tests_by_mangled_function_name": {}}))
    with pytest.raises(SystemExit, match="x_f__mutmut_1 fail without any mutant"):
        mutation.recheck_timeouts("probe", other, run_tests=lambda tests, mutant, timeout: 1)


def test_mutmut_children_get_one_torch_thread_unless_told_otherwise(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "4")
    monkeypatch.setenv("DUPBERT_DATA_DIR", "/data")
    env = mutation.one_thread_environment()
    assert (env["OMP_NUM_THREADS"], env["MKL_NUM_THREADS"]) == ("1", "4")
    assert env["PATH"] == os.environ["PATH"]


def test_mutmut_children_find_the_data_and_models_from_inside_mutants(monkeypatch, tmp_path):
    """mutmut runs the tests one folder deeper (mutants/), where ../shared/data is not the data:
    the children get its absolute path, and without any data folder the run is refused."""
    monkeypatch.delenv("DUPBERT_DATA_DIR", raising=False)
    monkeypatch.delenv("DUPBERT_MODELS", raising=False)
    (tmp_path / "shared" / "data").mkdir(parents=True)
    monkeypatch.setattr(mutation, "REPO", tmp_path / "repo")
    assert mutation.one_thread_environment()["DUPBERT_DATA_DIR"] == str(tmp_path / "shared" / "data")
    assert mutation.one_thread_environment()["DUPBERT_MODELS"] == str(tmp_path / "repo" / "models")
    monkeypatch.setenv("DUPBERT_DATA_DIR", "/elsewhere")
    assert mutation.one_thread_environment()["DUPBERT_DATA_DIR"] == "/elsewhere"
    monkeypatch.delenv("DUPBERT_DATA_DIR")
    monkeypatch.setattr(mutation, "REPO", tmp_path / "nowhere" / "repo")
    with pytest.raises(SystemExit, match="no data folder at .*nowhere/shared/data: set DUPBERT_DATA_DIR"):
        mutation.one_thread_environment()


def test_only_the_results_file_and_sweep_code_counts_in_results_and_sweeps():
    """The code that was the "finetune" entry lives in results.py and sweeps.py since the
    layering; the rest of those modules is not mutated."""
    assert mutation.counted("core.results", "dupbert.core.results.x_run_key__mutmut_3")
    assert mutation.counted("core.results", "dupbert.core.results.xǁResultsFileǁappend__mutmut_1")
    assert not mutation.counted("core.results", "dupbert.core.results.x_atomic_write_text__mutmut_1")
    assert mutation.counted("study.sweeps", "dupbert.study.sweeps.x_sweep__mutmut_12")
    assert not mutation.counted("study.sweeps", "dupbert.study.sweeps.x_sweep_configurations_x__mutmut_1")
    assert not mutation.counted("study.sweeps", "dupbert.study.sweeps.x_rerun__mutmut_1")
    assert mutation.counted("study.comparisons", "dupbert.study.comparisons.x_comparison__mutmut_1")
    assert mutation.module_patterns("core.results") == ["dupbert.core.results.x_run_key__mutmut_*",
                                                   "dupbert.core.results.xǁResultsFileǁ*"]


def test_a_sample_of_two_modules_goes_to_mutmut_in_batches_of_its_random_order(monkeypatch):
    """`run --sample 5 --batch 2` over two modules: per module, its first 5 not-yet-run mutants of
    the fixed random order, in mutmut calls of at most 2 (the second module too)."""
    names = {m: [f"dupbert.{m}.x_f__mutmut_{i}" for i in range(1, 9)] for m in ("paper", "glance")}
    monkeypatch.setattr(mutation, "unchecked", lambda module: names[module][1:])  # first one ran
    monkeypatch.setattr(mutation, "sample_order", lambda module: names[module][::-1])
    calls = []
    monkeypatch.setattr(mutation.subprocess, "run", lambda command, **kw: calls.append(command[4:]))
    mutation.run(1, ("paper", "glance"), sample=5, batch=2)
    expected = []
    for module in ("paper", "glance"):
        first = names[module][::-1][:5]  # all not yet run: the one that ran is last in this order
        expected += [first[0:2], first[2:4], first[4:5]]
    assert calls == expected


def test_a_report_of_some_modules_keeps_every_other_modules_recorded_entry():
    recorded = {"paper": {"killed": 86, "total": 100, "measured": "2026-12-02"},
                "probe": {"killed": 29, "total": 30, "measured": "2026-12-02"}}
    rates = {"paper": {"killed": 95, "total": 100}, "probe": {"killed": 0, "total": 30}}
    merged = mutation.merge_rates(recorded, rates, ("paper",), measured="re-run")
    assert merged == {"paper": {"killed": 95, "total": 100, "measured": "re-run"},
                      "probe": recorded["probe"]}
    assert mutation.merge_rates(recorded, {}, ("paper",)) == recorded  # nothing run: unchanged
    assert mutation.merge_rates(recorded, rates, ("paper",))["paper"] == rates["paper"]


def test_a_subpackage_modules_mutants_are_read_from_its_folder(tmp_path):
    """mutmut 3 writes mutants/dupbert/book/rq3.py.meta for dupbert/book/rq3.py."""
    assert mutation.meta_path("book.rq3", tmp_path) == tmp_path / "dupbert" / "book" / "rq3.py.meta"
    assert mutation.meta_path("results", tmp_path) == tmp_path / "dupbert" / "results.py.meta"
