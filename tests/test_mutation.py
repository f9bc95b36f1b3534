"""benchmarks/mutation.py's bookkeeping (issue 13): how kill rates are counted and how a random
sample of a module's mutants is drawn. Fake mutmut state, no mutmut run."""

import collections
import importlib.util
import json
from pathlib import Path

import pytest
from scipy.stats import binomtest

_SPEC = importlib.util.spec_from_file_location(
    "mutation", Path(__file__).resolve().parents[1] / "benchmarks" / "mutation.py")
mutation = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(mutation)


def _fake_mutants(folder, module, codes):
    meta = folder / "dupbert" / f"{module}.py.meta"
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
    names = [f"dupbert.probe.x_f__mutmut_{i}" for i in range(1, 41)]
    folder = _fake_mutants(tmp_path, "probe", dict.fromkeys(names))
    order = mutation.sample_order("probe", folder)
    assert sorted(order) == sorted(names) and order != sorted(names)
    assert order == mutation.sample_order("probe", folder)  # seed 0, every time
    assert mutation.unchecked("probe", folder) == names
    with pytest.raises(SystemExit, match="no mutants of duplicate"):
        mutation.sample_order("duplicate", folder)
