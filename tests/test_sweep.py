"""The sweep's bookkeeping without training: run keys, the results file, shards, resuming and
merging, with ``finetune`` replaced by a stub that returns the row a real run would key the same
way (tests/test_finetune.py runs the real thing; these run in well under a second, so that
mutation testing, `make mutants`, can afford them for every mutant)."""

import dataclasses
import hashlib
import json
import re

import pytest

from dupbert import finetune as ft
from dupbert.finetune import HyperParameters, ResultsFile, merge_results, run_key, sweep

IDENTITY = dict(model="m", task="uspto50k", duplication="baseline", seed=0,
                hyperparameters={"learning_rate": 1.0}, max_train_samples=8, max_eval_samples=4,
                train_subset_seed=0)


def _stub_finetune(calls):
    """A ``finetune`` that trains nothing: its row is keyed as the real one's, its metric is the
    seed, and each call is recorded in ``calls``."""

    def finetune(model, task, duplication, seed, *, hyperparameters, max_train_samples,
                 max_eval_samples, device, data_dir, outputs_dir, progress):
        calls.append(dict(model=model, task=task, duplication=duplication, seed=seed,
                          hyperparameters=hyperparameters, device=device, data_dir=data_dir,
                          outputs_dir=outputs_dir, progress=progress))
        row = dict(model=model, task=task, duplication=duplication, seed=seed,
                   hyperparameters=dataclasses.asdict(hyperparameters),
                   max_train_samples=max_train_samples, max_eval_samples=max_eval_samples,
                   train_subset_seed=ft.TRAIN_SUBSET_SEED, data_source=ft_data_source(data_dir))
        row["run_key"] = run_key(row)
        row["metrics"] = {"accuracy": seed / 10}
        row["train_time_s"] = 1.5
        return row

    return finetune


def ft_data_source(data_dir):
    from dupbert.tasks import data_source

    return data_source(data_dir)


@pytest.fixture
def calls(monkeypatch):
    """The configurations the sweep trained, in order (``finetune`` is a stub)."""
    made = []
    monkeypatch.setattr(ft, "finetune", _stub_finetune(made))
    return made


def test_run_key_is_the_sha256_of_the_sorted_identity():
    expected = hashlib.sha256(json.dumps(IDENTITY, sort_keys=True).encode()).hexdigest()[:16]
    assert run_key(IDENTITY) == expected
    assert len(expected) == 16
    # local data keeps the key it always had; Hub data is part of the identity
    assert run_key({**IDENTITY, "data_source": "local"}) == expected
    hub = {**IDENTITY, "data_source": "hub"}
    assert run_key(hub) == hashlib.sha256(json.dumps(hub, sort_keys=True).encode()).hexdigest()[:16]
    # the outcome is not part of the identity; each identifying field is
    assert run_key({**IDENTITY, "metrics": {"accuracy": 1.0}}) == expected
    for field, other in [("model", "n"), ("seed", 1), ("train_subset_seed", 1),
                         ("max_eval_samples", 5)]:
        assert run_key({**IDENTITY, field: other}) != expected
    with pytest.raises(KeyError):
        run_key({k: v for k, v in IDENTITY.items() if k != "train_subset_seed"})


def test_results_file_appends_rows_in_order_once_per_key(tmp_path):
    path = tmp_path / "new" / "results.jsonl"
    results = ResultsFile(path)
    assert results.rows() == [] and results.keys() == set()
    results.append({"run_key": "a", "metrics": {"accuracy": 0.5}, "seed": 0})
    results.append({"run_key": "b", "metrics": {"accuracy": 0.25}, "seed": 1})
    results.append({"run_key": "a", "metrics": {"accuracy": 0.0}, "seed": 2})  # ignored
    assert path.read_text() == (
        '{"metrics": {"accuracy": 0.5}, "run_key": "a", "seed": 0}\n'
        '{"metrics": {"accuracy": 0.25}, "run_key": "b", "seed": 1}\n')
    assert ResultsFile(str(path)).rows() == [
        {"run_key": "a", "metrics": {"accuracy": 0.5}, "seed": 0},
        {"run_key": "b", "metrics": {"accuracy": 0.25}, "seed": 1}]
    assert results.keys() == {"a", "b"}
    frame = results.frame()
    assert sorted(frame.columns) == ["metrics.accuracy", "run_key", "seed"]
    assert frame["metrics.accuracy"].tolist() == [0.5, 0.25]


def test_results_file_skips_blank_lines(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text('{"run_key": "a"}\n\n  \n{"run_key": "b"}\n')
    assert ResultsFile(path).rows() == [{"run_key": "a"}, {"run_key": "b"}]


def test_shard_parsing_accepts_pairs_and_names_bad_input():
    assert ft.parse_shard((0, 1)) == (0, 1)
    assert ft.parse_shard("0/3") == (0, 3) and ft.parse_shard("2/3") == (2, 3)
    for bad in ["-1/2", "1/0", "0/0", "1/2/3", (1, 1), ("a", 2)]:
        message = "^" + re.escape(f"shard must be 'i/n' with 0 <= i < n, got {bad!r}") + "$"
        with pytest.raises(ValueError, match=message):
            ft.parse_shard(bad)


def test_configurations_put_tasks_outermost_and_duplications_innermost():
    configurations = ft.sweep_configurations(["m1", "m2"], ["t1", "t2"], ["d1", "d2"], [0, 1])
    assert len(configurations) == 16
    assert configurations[:5] == [
        dict(model="m1", task="t1", duplication="d1", seed=0),
        dict(model="m1", task="t1", duplication="d2", seed=0),
        dict(model="m1", task="t1", duplication="d1", seed=1),
        dict(model="m1", task="t1", duplication="d2", seed=1),
        dict(model="m2", task="t1", duplication="d1", seed=0)]
    assert configurations[8] == dict(model="m1", task="t2", duplication="d1", seed=0)


SWEEP = dict(models=["m"], tasks=["uspto50k", "squad2"], duplications=["baseline", "copy last"],
             seeds=[0, 1], max_train_samples=8, max_eval_samples=4, progress=False)


def test_sweep_trains_each_configuration_once_with_the_task_kinds_hyperparameters(tmp_path, calls):
    frame = sweep(results_path=tmp_path / "r.jsonl", hyperparameters={"qa": {"max_steps": 3}},
                  device="meta", data_dir=tmp_path / "data", outputs_dir=tmp_path / "out", **SWEEP)
    assert [(c["task"], c["seed"], c["duplication"]) for c in calls] == [
        ("uspto50k", 0, "baseline"), ("uspto50k", 0, "copy last"),
        ("uspto50k", 1, "baseline"), ("uspto50k", 1, "copy last"),
        ("squad2", 0, "baseline"), ("squad2", 0, "copy last"),
        ("squad2", 1, "baseline"), ("squad2", 1, "copy last")]
    assert calls[0]["hyperparameters"] == HyperParameters.for_task("classification")
    assert calls[-1]["hyperparameters"] == HyperParameters.for_task("qa", max_steps=3)
    assert {(c["device"], c["progress"]) for c in calls} == {("meta", False)}
    assert {(str(c["data_dir"]), str(c["outputs_dir"])) for c in calls} == {
        (str(tmp_path / "data"), str(tmp_path / "out"))}
    assert frame["seed"].tolist() == [0, 0, 1, 1, 0, 0, 1, 1]
    assert frame["run_key"].is_unique and len(frame) == 8
    assert frame["metrics.accuracy"].tolist() == [0.0, 0.0, 0.1, 0.1, 0.0, 0.0, 0.1, 0.1]


def test_sweep_resumes_training_only_what_the_file_lacks(tmp_path, calls):
    path = tmp_path / "r.jsonl"
    first = sweep(results_path=path, shard="1/3", **SWEEP)
    assert [(c["task"], c["seed"], c["duplication"]) for c in calls] == [
        ("uspto50k", 0, "copy last"), ("squad2", 0, "baseline"), ("squad2", 1, "copy last")]
    calls.clear()
    whole = sweep(results_path=path, **SWEEP)
    assert len(calls) == 5  # the three already there are not trained again
    assert len(whole) == 8 and whole["run_key"].is_unique
    assert whole["run_key"].tolist()[:3] == first["run_key"].tolist()
    calls.clear()
    assert sweep(results_path=path, **SWEEP)["run_key"].tolist() == whole["run_key"].tolist()
    assert calls == []


def test_sweep_announces_each_run_when_asked(tmp_path, calls, capsys):
    sweep(results_path=tmp_path / "r.jsonl", **{**SWEEP, "tasks": ["uspto50k"], "seeds": [0],
                                                "progress": True})
    assert capsys.readouterr().out == (
        "fine-tuning {'model': 'm', 'task': 'uspto50k', 'duplication': 'baseline', 'seed': 0}\n"
        "fine-tuning {'model': 'm', 'task': 'uspto50k', 'duplication': 'copy last', 'seed': 0}\n")


def test_only_the_main_process_appends(tmp_path, calls, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    frame = sweep(results_path=tmp_path / "r.jsonl", **{**SWEEP, "progress": True})
    assert len(calls) == 8 and len(frame) == 0
    assert not (tmp_path / "r.jsonl").exists()


def test_merge_keeps_every_row_once_in_the_order_of_the_files(tmp_path):
    a, b = ResultsFile(tmp_path / "a.jsonl"), ResultsFile(tmp_path / "b.jsonl")
    a.append({"run_key": "k1", "seed": 0, "train_time_s": 1.0})
    a.append({"run_key": "k2", "seed": 1, "train_time_s": 2.0})
    b.append({"run_key": "k3", "seed": 2, "finished_at": "now"})
    b.append({"run_key": "k1", "seed": 0, "train_time_s": 9.0, "eval_time_s": 3.0,
              "finished_at": "later"})  # the same run timed differently
    out = tmp_path / "merged" / "m.jsonl"
    frame = merge_results([a.path, str(b.path)], out)
    assert frame["run_key"].tolist() == ["k1", "k2", "k3"]
    assert frame["train_time_s"].tolist()[:2] == [1.0, 2.0]  # the first file's copy is kept
    assert out.read_text().splitlines()[0] == '{"run_key": "k1", "seed": 0, "train_time_s": 1.0}'
    b.append({"run_key": "k2", "seed": 5})
    with pytest.raises(ValueError, match=r"^run k2 differs between results files \(beyond timings\)$"):
        merge_results([a.path, b.path], out)


def test_sweep_defaults_train_on_the_cpu_and_announce_runs(tmp_path, calls, capsys):
    arguments = {k: v for k, v in SWEEP.items() if k != "progress"}
    sweep(results_path=tmp_path / "r.jsonl", **{**arguments, "tasks": ["uspto50k"], "seeds": [0]})
    assert {(c["device"], c["progress"]) for c in calls} == {("cpu", True)}
    assert capsys.readouterr().out.count("fine-tuning ") == 2


def test_sweep_is_silent_without_progress(tmp_path, calls, capsys):
    sweep(results_path=tmp_path / "r.jsonl", **SWEEP)
    assert len(calls) == 8 and capsys.readouterr().out == ""


@pytest.mark.parametrize("data_dir, source", [("given", "local"), (None, "hub")])
def test_sweep_keys_runs_by_their_data_source(tmp_path, calls, monkeypatch, data_dir, source):
    """Without $DUPBERT_DATA_DIR, a data folder given to the sweep still makes runs local, and
    Hub runs carry their source in the key: a resumed sweep finds both and trains nothing."""
    monkeypatch.delenv("DUPBERT_DATA_DIR", raising=False)
    folder = tmp_path / "data" if data_dir else None
    path = tmp_path / "r.jsonl"
    frame = sweep(results_path=path, data_dir=folder, **SWEEP)
    assert set(frame["data_source"]) == {source}
    calls.clear()
    sweep(results_path=path, data_dir=folder, **SWEEP)
    assert calls == []


def test_results_file_creates_missing_folders(tmp_path):
    path = tmp_path / "a" / "b" / "results.jsonl"
    ResultsFile(path).append({"run_key": "a"})
    assert ResultsFile(path).rows() == [{"run_key": "a"}]


def test_merged_rows_are_written_with_sorted_keys(tmp_path):
    source = tmp_path / "hand.jsonl"
    source.write_text('{"seed": 0, "run_key": "k1", "metrics": {"f1": 1, "exact": 0}}\n')
    merge_results([source], tmp_path / "m.jsonl")
    assert (tmp_path / "m.jsonl").read_text() == (
        '{"metrics": {"exact": 0, "f1": 1}, "run_key": "k1", "seed": 0}\n')
