"""The sweep's bookkeeping without training: run keys, the results file, shards, resuming and
merging, with ``finetune`` replaced by a stub that returns the row a real run would key the same
way (tests/test_finetune.py runs the real thing; these run in well under a second, so that
mutation testing, `make mutants`, can afford them for every mutant)."""

import dataclasses
import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from dupbert.training import finetuning as ft
from dupbert.study import sweeps
from dupbert.core import results as store
from dupbert.core.errors import ParameterError
from dupbert.training.tasks import UnknownTask
from dupbert.training.finetuning import HyperParameters
from dupbert.core.results import ResultsFile, run_key
from dupbert.study.sweeps import merge_results, sweep

IDENTITY = dict(model="m", task="uspto50k", duplication="baseline", seed=0,
                hyperparameters={"learning_rate": 1.0}, max_train_samples=8, max_eval_samples=4,
                train_subset_seed=0)


def _stub_run(calls):
    """A ``run`` that trains nothing: its row is keyed as the real one's (checked against
    ``run_key`` of the row's fields), its metric is the seed, and each call is recorded in
    ``calls``."""

    def run(spec, *, device, data_dir, outputs_dir, progress):
        calls.append(dict(model=spec.model, task=spec.task, duplication=spec.duplication,
                          seed=spec.seed, hyperparameters=spec.hyperparameters, device=device,
                          data_dir=data_dir, outputs_dir=outputs_dir, progress=progress))
        row = dict(model=spec.model, task=spec.task, duplication=spec.duplication, seed=spec.seed,
                   hyperparameters=dataclasses.asdict(spec.hyperparameters),
                   max_train_samples=spec.max_train_samples,
                   max_eval_samples=spec.max_eval_samples,
                   train_subset_seed=ft.TRAIN_SUBSET_SEED, data_source=ft_data_source(data_dir))
        row["run_key"] = run_key(row)
        assert row["run_key"] == spec.key
        row["metrics"] = {"accuracy": spec.seed / 10}
        row["train_time_s"] = 1.5
        return row

    return run


def ft_data_source(data_dir):
    from dupbert.training.tasks import data_source

    return data_source(data_dir)


@pytest.fixture
def calls(monkeypatch):
    """The configurations the sweep trained, in order (``run`` is a stub)."""
    made = []
    monkeypatch.setattr(sweeps, "run", _stub_run(made))
    # model "m" has no config: the sweep's up-front check of models and configurations (tested
    # with a real model below) is skipped with the training
    monkeypatch.setattr(sweeps, "_check_models", lambda models, duplications: None)
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
    assert sweeps.parse_shard((0, 1)) == (0, 1)
    assert sweeps.parse_shard("0/3") == (0, 3) and sweeps.parse_shard("2/3") == (2, 3)
    for bad in ["-1/2", "1/0", "0/0", "1/2/3", (1, 1), ("a", 2)]:
        message = "^" + re.escape(f"shard must be 'i/n' with 0 <= i < n, got {bad!r}") + "$"
        with pytest.raises(ValueError, match=message):
            sweeps.parse_shard(bad)


def test_configurations_put_tasks_outermost_and_duplications_innermost():
    configurations = sweeps.sweep_configurations(["m1", "m2"], ["t1", "t2"], ["d1", "d2"], [0, 1])
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
    assert set(zip(frame["max_train_samples"], frame["max_eval_samples"])) == {(8, 4)}


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


# ------------------------------------------------------------------ bad input, refused up front


@pytest.mark.parametrize("overrides, message", [
    (dict(learning_rate=-1), "learning_rate must be a number > 0, got -1"),
    (dict(learning_rate=float("nan")), "learning_rate must be a number > 0, got nan"),
    (dict(batch_size=0), "batch_size must be an integer >= 1, got 0"),
    (dict(batch_size=2.7), "batch_size must be an integer >= 1, got 2.7"),  # was 2, silently
    (dict(batch_size=True), "batch_size must be an integer >= 1, got True (bool)"),
    (dict(epochs=0), "epochs must be a number > 0, got 0 (max_steps is -1: the run trains for "
                     "epochs, and 0 epochs would save an untrained model as a result; give epochs "
                     "> 0 or max_steps >= 1)"),
    (dict(epochs=-2, max_steps=3), "epochs must be a number >= 0, got -2"),
    (dict(max_steps=0), "max_steps must be -1 (train for epochs) or an integer >= 1, got 0"),
    (dict(max_steps=-3), "max_steps must be -1 (train for epochs) or an integer >= 1, got -3"),
    (dict(max_length=0), "max_length must be an integer >= 3, got 0"),
    (dict(doc_stride=-1), "doc_stride must be an integer >= 0, got -1"),
    (dict(warmup_ratio=1.0), "warmup_ratio must be a number >= 0 and < 1, got 1.0"),
    (dict(weight_decay=-0.01), "weight_decay must be a number >= 0, got -0.01"),
    (dict(eval_batch_size=0), "eval_batch_size must be an integer >= 1, got 0"),
    (dict(group_by_length="false"), "group_by_length must be True or False, got 'false' (str)"),
    (dict(max_step=2), "hyper-parameters for classification: unknown field 'max_step'; the fields "
                       "are learning_rate, batch_size, epochs, max_length, doc_stride, "
                       "warmup_ratio, weight_decay, max_steps, eval_batch_size, group_by_length"),
])
def test_hyperparameters_refuse_values_that_cannot_train(overrides, message):
    with pytest.raises(ParameterError, match="^" + re.escape(message) + "$"):
        HyperParameters.for_task("classification", **overrides)


def test_hyperparameters_keep_normalising_what_they_accept():
    hp = HyperParameters(learning_rate=1, batch_size=32.0, epochs=3, max_length=128, max_steps=-1.0,
                         group_by_length=np.bool_(False))
    assert dataclasses.asdict(hp) == {
        "learning_rate": 1.0, "batch_size": 32, "epochs": 3.0, "max_length": 128,
        "doc_stride": 128, "warmup_ratio": 0.0, "weight_decay": 0.0, "max_steps": -1,
        "eval_batch_size": 64, "group_by_length": False}
    assert [type(v) for v in dataclasses.asdict(hp).values()] == [
        float, int, float, int, int, float, float, int, int, bool]
    # max_steps decides the length: epochs 0 is then allowed (Trainer ignores it)
    assert HyperParameters.for_task("qa", epochs=0, max_steps=2).max_steps == 2
    with pytest.raises(ParameterError, match=r"^task kind must be 'classification' or 'qa', got "
                                             r"'clasification'$"):
        HyperParameters.for_task("clasification")


def _committed_rows():
    root = Path(__file__).resolve().parents[1] / "results" / "cpu"
    return [(path.name, json.loads(line)) for path in sorted(root.glob("rq3*.jsonl"))
            for line in path.read_text().splitlines() if line.strip()]


def test_every_committed_row_still_constructs_and_keeps_its_key():
    """The checks refuse bad values only: every committed run of the CPU study and its pilots
    still builds its HyperParameters, unchanged, under the run key it was committed with."""
    rows = _committed_rows()
    assert len([r for name, r in rows if name == "rq3.jsonl"]) >= 78
    for name, row in rows:
        if "hyperparameters" in row:  # result rows
            hp = HyperParameters(**row["hyperparameters"])
            assert dataclasses.asdict(hp) == row["hyperparameters"], (name, row["run_key"])
            assert run_key(row) == row["run_key"], (name, row["run_key"])
        else:  # the pilots' curves (rq3-pilot.jsonl)
            hp = HyperParameters.for_task("classification", learning_rate=row["learning_rate"],
                                          epochs=row["epochs"], batch_size=row["batch_size"])
            assert (hp.learning_rate, hp.epochs, hp.batch_size) == (
                row["learning_rate"], row["epochs"], row["batch_size"])


def test_seeds_are_checked_with_their_value():
    assert ft.check_seed(0) == 0 and ft.check_seed(2**32 - 1) == 2**32 - 1
    for bad, shown in [(-1, "-1"), (2**32, "4294967296"), (1.5, "1.5")]:
        with pytest.raises(ParameterError, match="^" + re.escape(
                f"seed must be an integer from 0 to 2**32 - 1, got {shown}") + "$"):
            ft.check_seed(bad)
    with pytest.raises(ParameterError, match=r"^seed must be an integer from 0 to 2\*\*32 - 1, "
                                             r"got '0' \(str\)$"):
        ft.check_seed("0")


def test_task_specific_limits():
    classification = HyperParameters.for_task("classification", max_length=4)
    ft.check_for_task(classification, "uspto50k")  # one text: [CLS] a b [SEP]
    with pytest.raises(ParameterError, match="^" + re.escape(
            "max_length 4 is too short for snli: its inputs (premise, hypothesis) need 3 special "
            "tokens and at least one token each, so max_length >= 5") + "$"):
        ft.check_for_task(classification, "snli")
    with pytest.raises(ParameterError, match="^" + re.escape(
            "doc_stride must be < max_length for squad2 (windows of max_length tokens overlapping "
            "by doc_stride), got doc_stride 128, max_length 128") + "$"):
        ft.check_for_task(HyperParameters.for_task("qa", max_length=128), "squad2")


@pytest.mark.parametrize("change, error, message", [
    (dict(models="rxnmapper-albert"), ParameterError,
     "models must be a list of model names, got the string 'rxnmapper-albert'; write "
     "['rxnmapper-albert'] for one"),
    (dict(duplications="baseline"), ParameterError,
     "duplications must be a list of configuration names, got the string 'baseline'; write "
     "['baseline'] for one"),
    (dict(tasks="uspto50k"), ParameterError,
     "tasks must be a list of task names, got the string 'uspto50k'; write ['uspto50k'] for one"),
    (dict(tasks=["uspto50k", "mnli"]), UnknownTask,
     "unknown task 'mnli'; the tasks are sst2, snli, squad2, uspto50k"),
    (dict(seeds=[0, 0, 1]), ParameterError,
     "seeds must be distinct seeds: 0 appears 2 times in [0, 0, 1]"),
    (dict(seeds=[0, -1]), ParameterError,
     "each of seeds must be an integer from 0 to 2**32 - 1, got -1"),
    (dict(duplications=["baseline", "copy last", "copy last"]), ParameterError,
     "duplications must be distinct configuration names: 'copy last' appears 2 times in "
     "['baseline', 'copy last', 'copy last']"),
    (dict(models=[]), ParameterError, "models is empty: give at least one of the model names"),
    (dict(hyperparameters={"clasification": {"max_steps": 2}}), ParameterError,
     "hyperparameters names unknown task kind 'clasification'; kinds are 'classification', 'qa'"),
    (dict(hyperparameters={"classification": {"max_step": 2}}), ParameterError,
     "hyperparameters['classification']: unknown field 'max_step'; the fields are learning_rate, "
     "batch_size, epochs, max_length, doc_stride, warmup_ratio, weight_decay, max_steps, "
     "eval_batch_size, group_by_length"),
    (dict(hyperparameters={"classification": {"batch_size": 0}}), ParameterError,
     "batch_size must be an integer >= 1, got 0"),
    (dict(hyperparameters={"qa": {"max_length": 100}}), ParameterError,
     "doc_stride must be < max_length for squad2 (windows of max_length tokens overlapping by "
     "doc_stride), got doc_stride 128, max_length 100"),
    (dict(max_train_samples=2.5), ParameterError,
     "max_train_samples must be None (all rows) or an integer >= 1, got 2.5"),
    (dict(max_eval_samples=0), ParameterError,
     "max_eval_samples must be None (all rows) or an integer >= 1, got 0"),
])
def test_sweep_refuses_bad_input_before_training_anything(tmp_path, calls, change, error, message):
    path = tmp_path / "r.jsonl"
    with pytest.raises(error, match="^" + re.escape(message) + "$"):
        sweep(results_path=path, **{**SWEEP, **change})
    assert calls == [] and not path.exists()


def test_sweep_refuses_a_results_path_it_could_not_write_before_training(tmp_path, calls):
    folder = tmp_path / "results"
    folder.mkdir()
    with pytest.raises(store.ResultsFileError, match="^" + re.escape(
            f"results file {folder} is a directory; give the path of a JSON-lines file, e.g. "
            f"{folder / 'rq3.jsonl'}") + "$"):
        sweep(results_path=folder, **SWEEP)
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(store.ResultsFileError, match="^" + re.escape(
            f"results file {blocker / 'r.jsonl'} cannot be written: {blocker} is a file, not a "
            f"folder") + "$"):
        sweep(results_path=blocker / "r.jsonl", **SWEEP)
    with pytest.raises(ParameterError, match="^" + re.escape(
            f"outputs_dir {str(blocker / 'out')!r} cannot be a folder: {blocker} is a file") + "$"):
        sweep(results_path=tmp_path / "r.jsonl", outputs_dir=blocker / "out", **SWEEP)
    assert calls == []


def test_sweep_checks_models_and_configurations_before_training(tmp_path, monkeypatch, zoo_cache):
    from dupbert.core.errors import ConfigurationNotAvailable

    monkeypatch.setenv("DUPBERT_CACHE", str(zoo_cache))
    made = []
    monkeypatch.setattr(sweeps, "run", _stub_run(made))
    with pytest.raises(ConfigurationNotAvailable, match=r"^rxnmapper-albert \(12 blocks\) has no "
                                                        r"configuration 'copy al'; configurations: "):
        sweep(results_path=tmp_path / "r.jsonl", **{**SWEEP, "models": ["rxnmapper-albert"],
                                                    "duplications": ["baseline", "copy al"]})
    assert made == [] and not (tmp_path / "r.jsonl").exists()


def test_a_finished_sweep_loads_no_model_and_writes_nothing(tmp_path, calls, monkeypatch):
    """All runs in the file: the rows are read back without a model config (a Hub id that is
    not cached offline) or write permission (a read-only checkout). A missing run checks both,
    for its own model only, before it trains."""
    path = tmp_path / "r.jsonl"
    done = sweep(results_path=path, **SWEEP)
    checked, writable = [], []
    monkeypatch.setattr(sweeps, "_check_models", lambda models, duplications: checked.append(models))
    monkeypatch.setattr(ResultsFile, "check_writable", lambda self: writable.append(self.path))
    monkeypatch.setattr(sweeps, "check_folder", lambda name, folder, writable=True: None)
    before = path.read_bytes()
    again = sweep(results_path=path, outputs_dir=tmp_path / "out", **{**SWEEP, "models": ["m"]})
    assert (checked, writable, len(calls)) == ([], [], 8) and path.read_bytes() == before
    assert again["run_key"].tolist() == done["run_key"].tolist()
    sweep(results_path=path, **{**SWEEP, "models": ["m", "n"]})
    assert (checked, writable) == ([["n"]], [path])  # "m" is done: its config is not read
    assert [c["model"] for c in calls[8:]] == ["n"] * 8


def test_results_file_names_the_file_and_line_of_a_bad_row(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text('{"run_key": "a"}\n{x\n')
    with pytest.raises(store.ResultsFileError, match="^" + re.escape(
            f"{path} line 2 is not JSON (Expecting property name enclosed in double quotes, "
            f"column 2): '{{x'; fix or remove that line") + "$"):
        ResultsFile(path).rows()
    path.write_text('\n{"run_key": "a"}\n\n[1, 2]\n')  # blank lines count
    with pytest.raises(store.ResultsFileError, match="^" + re.escape(
            f"{path} line 4 is not a JSON object but a list: each line must be one result row")
            + "$"):
        ResultsFile(path).rows()
    path.write_text('{"run_key": "a"}\n\n{"seed": 1}\n')
    assert ResultsFile(path).rows() == [{"run_key": "a"}, {"seed": 1}]  # e.g. a pilot's curves
    for read in (ResultsFile(path).keys, lambda: ResultsFile(path).append({"run_key": "b"})):
        with pytest.raises(store.ResultsFileError, match="^" + re.escape(
                f"{path} line 3 lacks run_key (a string): it is not a result row of "
                f"dupbert.finetune") + "$"):
            read()
    with pytest.raises(store.ResultsFileError, match="must be a dict with a run_key"):
        ResultsFile(tmp_path / "new.jsonl").append({"seed": 0})
    assert not (tmp_path / "new.jsonl").exists()


def test_merge_refuses_a_missing_file_before_writing_anything(tmp_path):
    good = ResultsFile(tmp_path / "good.jsonl")
    good.append({"run_key": "k1"})
    out = tmp_path / "out.jsonl"
    with pytest.raises(FileNotFoundError, match="^" + re.escape(
            f"no results file {tmp_path / 'typo.jsonl'}; nothing was written") + "$"):
        merge_results([good.path, tmp_path / "typo.jsonl"], out)
    assert not out.exists()
    with pytest.raises(ParameterError, match="^" + re.escape(
            f"paths must be a list of results files, got {str(good.path)!r}; write "
            f"[{str(good.path)!r}] for one") + "$"):
        merge_results(str(good.path), out)
    with pytest.raises(ParameterError, match="^paths is empty"):
        merge_results([], out)
    (tmp_path / "bad.jsonl").write_text('{"seed": 0}\n')
    with pytest.raises(store.ResultsFileError, match="bad.jsonl line 1 lacks run_key"):
        merge_results([good.path, tmp_path / "bad.jsonl"], out)
    assert not out.exists()
    with pytest.raises(store.ResultsFileError, match="is a directory"):
        merge_results([good.path], tmp_path)


def test_rerun_refuses_rows_it_cannot_rerun_before_training(monkeypatch):
    trained = []
    monkeypatch.setattr(sweeps, "run", lambda *args, **kwargs: trained.append(args))
    row = dict(run_key="0123456789abcdef", model="m", task="uspto50k", duplication="baseline",
               seed=0, train_subset_seed=0, metrics={"accuracy": 0.5, "macro_f1": 0.5},
               hyperparameters=dataclasses.asdict(HyperParameters.for_task("classification")))
    without = {k: v for k, v in row.items() if k != "hyperparameters"}
    with pytest.raises(store.ResultsFileError, match="^" + re.escape(
            "run 0123456789abcdef lacks hyperparameters; a re-run needs run_key, model, task, "
            "duplication, seed, hyperparameters") + "$"):
        sweeps.rerun(without)
    with pytest.raises(ParameterError, match="^" + re.escape(
            "run 0123456789abcdef: hyperparameters: unknown field 'lr'; the fields are ")):
        sweeps.rerun({**row, "hyperparameters": {**row["hyperparameters"], "lr": 1.0}})
    with pytest.raises(store.ResultsFileError, match="^run 0123456789abcdef has task 'mnli', not one of"):
        sweeps.rerun({**row, "task": "mnli"})
    # a table checks every row before it re-runs the first
    with pytest.raises(store.ResultsFileError, match="^" + re.escape(
            "run 0123456789abcdef lacks metrics macro_f1: nothing to compare a re-run with") + "$"):
        sweeps.rerun_table([row, {**row, "metrics": {"accuracy": 0.5}}])
    assert trained == []


def test_rerun_compares_the_squad_metrics_its_evaluation_set_defines(monkeypatch):
    """A SQuAD 2.0 row from a set without unanswerable questions has no NoAns_f1 (the official
    keys): it was refused as lacking it; a set with them still needs it."""
    counts = {"total": 2, "HasAns_total": 2}
    row = dict(run_key="0123456789abcdef", model="m", task="squad2", duplication="baseline",
               seed=0, train_subset_seed=0, baselines={"f1": 0.0, "exact": 0.0, **counts},
               metrics={"f1": 50.0, "exact": 50.0, "HasAns_f1": 50.0, **counts},
               hyperparameters=dataclasses.asdict(HyperParameters.for_task("qa")))
    monkeypatch.setattr(sweeps, "rerun", lambda r, **kwargs: {
        **r, "metrics": {**r["metrics"], "f1": 50.25}, "train_losses": None})
    table = sweeps.rerun_table([row])
    assert table[["metric", "committed", "rerun", "difference"]].values.tolist() == [
        ["f1", 50.0, 50.25, 0.25], ["exact", 50.0, 50.0, 0.0], ["HasAns_f1", 50.0, 50.0, 0.0]]
    assert set(table["committed_on"]) == set(table["rerun_on"]) == {
        "unknown device (capability not recorded)"}
    mixed = {**row, "baselines": {**row["baselines"], "total": 3, "NoAns_total": 1}}
    with pytest.raises(store.ResultsFileError, match="^" + re.escape(
            "run 0123456789abcdef lacks metrics NoAns_f1: nothing to compare a re-run with")):
        sweeps.rerun_table([mixed])


def test_rows_say_which_cpu_kind_ran_them():
    """CPU runs are bit-identical only on one CPU kind (2026-12-01: a row of rxnmapper-albert
    re-run on another machine differed by 1.15 points): every row names the CPU model and the
    SIMD kernels torch uses on it."""
    import platform

    fields = store.environment_fields("cpu")
    assert fields["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        names = [line.split(":", 1)[1].strip() for line in info if line.startswith("model name")]
    assert fields["device_name"] == (names[0] if names else platform.processor()
                                     or platform.machine())
    assert store.device_description({"device": "cpu", "device_name": "x86_64"}) == (
        "x86_64 (capability not recorded)")
    assert store.device_description({"device": "cpu", "device_name": "AMD EPYC",
                                  "cpu_capability": "AVX512"}) == "AMD EPYC (AVX512)"
    assert store.device_description({"device": "cuda", "device_name": "NVIDIA H200",
                                  "cpu_capability": "AVX512"}) == "NVIDIA H200"


def test_process_variables_are_checked(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(ParameterError, match="^" + re.escape(
            "WORLD_SIZE must be a whole number >= 1, got 'two' (set by torchrun or accelerate "
            "launch; unset it to run alone)") + "$"):
        store.world_size()
    monkeypatch.setenv("WORLD_SIZE", "0")  # batch_size % 0 was a ZeroDivisionError
    with pytest.raises(ParameterError, match="^WORLD_SIZE must be a whole number >= 1, got '0'"):
        store.world_size()
    monkeypatch.setenv("WORLD_SIZE", " 2 ")
    assert store.world_size() == 2
    monkeypatch.setenv("RANK", "-1")
    with pytest.raises(ParameterError, match="^RANK must be a whole number >= 0, got '-1'"):
        store.is_main_process()


def test_build_model_refuses_a_kind_it_would_build_as_a_classifier():
    with pytest.raises(ParameterError, match="^kind must be 'classification' or 'qa', got 'QA'$"):
        ft.build_model("rxnmapper-albert", "QA", 0, "baseline", seed=0)
    with pytest.raises(ParameterError, match="^num_labels must be an integer >= 1, got 0$"):
        ft.build_model("rxnmapper-albert", "classification", 0, "baseline", seed=0)


def test_a_finished_sweep_still_refuses_an_outputs_dir_that_is_no_folder(tmp_path, calls):
    path = tmp_path / "r.jsonl"
    sweep(results_path=path, **SWEEP)
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for bad, message in ((5, "outputs_dir must be a folder path or None, got 5"),
                         (blocker / "out", f"outputs_dir {str(blocker / 'out')!r} cannot be a "
                                           f"folder: {blocker} is a file")):
        with pytest.raises(ParameterError, match="^" + re.escape(message) + "$"):
            sweep(results_path=path, outputs_dir=bad, **SWEEP)  # nothing to do, still refused
    assert len(calls) == 8


def test_without_write_permission_only_a_sweep_with_runs_to_do_is_refused(tmp_path, calls,
                                                                          monkeypatch):
    """Run as root, os.access grants everything: a folder without write permission is played by
    an os.access that refuses writing."""
    import os

    path, outputs = tmp_path / "r.jsonl", tmp_path / "out"
    done = sweep(results_path=path, **SWEEP)
    readable = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, *a, **k: mode != os.W_OK and readable(p, mode))
    again = sweep(results_path=path, outputs_dir=outputs, **SWEEP)
    assert again["run_key"].tolist() == done["run_key"].tolist() and len(calls) == 8
    with pytest.raises(store.ResultsFileError, match="^" + re.escape(
            f"results file {path} cannot be written: no write permission in {tmp_path}") + "$"):
        sweep(results_path=path, outputs_dir=outputs, **{**SWEEP, "seeds": [0, 1, 2]})
    monkeypatch.setattr(ResultsFile, "check_writable", lambda self: None)
    with pytest.raises(ParameterError, match="^" + re.escape(
            f"outputs_dir {str(outputs)!r} cannot be written: no write permission in "
            f"{tmp_path}") + "$"):
        sweep(results_path=path, outputs_dir=outputs, **{**SWEEP, "seeds": [0, 1, 2]})
    assert len(calls) == 8  # nothing trained


def test_every_committed_run_is_the_run_spec_its_row_names():
    """The key of a RunSpec built from a committed row's fields is that row's run key, for every
    run of every committed results file (so plans, sweeps and re-runs name the same runs)."""
    import json
    from pathlib import Path

    from dupbert.training.finetuning import RunSpec
    from dupbert.training.hyperparameters import HyperParameters

    rows = [json.loads(line) for path in sorted(Path(__file__).parents[1].glob("results/cpu/rq3*.jsonl"))
            for line in path.read_text().splitlines() if line.strip()]
    rows = [row for row in rows if "run_key" in row]  # two pilots record curves, not runs
    assert len(rows) >= 226  # the study, the SQuAD pilot, the tests and the growth arm
    for row in rows:
        spec = RunSpec(row["model"], row["task"], row["duplication"], row["seed"],
                       HyperParameters(**row["hyperparameters"]), row["max_train_samples"],
                       row["max_eval_samples"], row.get("data_source", "local"))
        assert spec.key == row["run_key"], row["run_key"]
    changed = RunSpec(**{**spec.__dict__, "seed": spec.seed + 1})
    assert changed.key != spec.key


def test_a_plan_of_two_families_checks_each_model_against_its_own_configurations(
        tmp_path, monkeypatch, zoo_cache):
    """rxnfp-bert has no `repeat shared +3`, rxnmapper-albert no `copy first 3`: a plan that
    gives each its own runs them all (each model is checked against its configurations only),
    in run order, primaries first."""
    from dupbert.study.profiles import PlannedSweep

    monkeypatch.setenv("DUPBERT_CACHE", str(zoo_cache))
    made = []
    monkeypatch.setattr(sweeps, "run", _stub_run(made))
    common = dict(task="uspto50k", max_train_samples=8, max_eval_samples=4, seeds=(0,))
    plan = [PlannedSweep(model="rxnfp-bert", duplications=("baseline", "copy first 3", "copy last"),
                         primary=("baseline", "copy first 3"), **common),
            PlannedSweep(model="rxnmapper-albert", duplications=("baseline", "repeat shared +3"),
                         primary=("baseline", "repeat shared +3"), **common)]
    rows = sweeps.run_plan(plan, tmp_path / "r.jsonl")
    assert [(c["model"], c["duplication"]) for c in made] == [
        ("rxnfp-bert", "baseline"), ("rxnfp-bert", "copy first 3"),
        ("rxnmapper-albert", "baseline"), ("rxnmapper-albert", "repeat shared +3"),
        ("rxnfp-bert", "copy last")]
    assert len(rows) == 5 and set(rows["run_key"]) == sweeps.planned_run_keys(plan)
