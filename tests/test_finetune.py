"""Fine-tuning on real data: a few steps of the real rxnmapper ALBERT on USPTO-50k classes."""

import json
import re

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import AutoModelForSequenceClassification

from dupbert.training import finetuning as ft
from dupbert.study import sweeps
from dupbert.training.finetuning import HyperParameters, finetune
from dupbert.core.results import ResultsFile
from dupbert.study.sweeps import merge_results, sweep
from dupbert.core.errors import ParameterError
from dupbert.training.tasks import UnknownTask

pytestmark = pytest.mark.slow  # real fine-tuning runs

FEW_STEPS = {"classification": {"max_steps": 6, "learning_rate": 5e-4, "batch_size": 16}}
SMALL = dict(max_train_samples=96, max_eval_samples=48, progress=False)


@pytest.fixture(autouse=True)
def _data(monkeypatch, shared_data_dir, zoo_cache):
    monkeypatch.setenv("DUPBERT_DATA_DIR", str(shared_data_dir))
    monkeypatch.setenv("DUPBERT_CACHE", str(zoo_cache))


@pytest.fixture(scope="module")
def trained(tmp_path_factory, shared_data_dir, zoo_cache):
    """One short real fine-tune of 'copy first 1', with its saved model and outputs."""
    folder = tmp_path_factory.mktemp("run")
    hp = HyperParameters.for_task("classification", **FEW_STEPS["classification"])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DUPBERT_CACHE", str(zoo_cache))
        row = finetune("rxnmapper-albert", "uspto50k", "copy first 1", seed=3, hyperparameters=hp,
                       data_dir=shared_data_dir, outputs_dir=folder / "outputs",
                       models_dir=folder / "models", **SMALL)
    return row, folder


def test_a_real_fine_tune_lowers_the_loss_and_writes_a_full_row(trained):
    row, folder = trained
    losses = row["train_losses"]
    assert row["train_steps"] == 6 and len(losses) == 6
    assert sum(losses[-2:]) / 2 < sum(losses[:2]) / 2
    assert (row["n_train"], row["n_eval"]) == (96, 48)
    assert set(row["metrics"]) == {"accuracy", "macro_f1"}
    assert "diverged" not in row  # only a run that diverged says so: the study's rows are unchanged
    assert row["block_sources"][:3] == [0, 0, 1]
    assert row["data_sha256"]["uspto50k_test_unmapped.csv"].startswith("5e2789ec")
    assert row["model_sha256"].startswith("27876a42")
    assert row["world_size"] == 1 and row["device"] == "cpu"
    assert row["hyperparameters"]["learning_rate"] == 5e-4
    assert row["train_subset_seed"] == 0 and row["seed"] == 3
    # an unsharing copy of the shared ALBERT is compared with the unshared baseline, secondary
    assert (row["reference"], row["role"]) == ("unshared baseline", "secondary")
    assert json.loads(json.dumps(row)) == row  # a JSON row
    outputs = np.load(folder / "outputs" / f"{row['run_key']}.npz")
    assert outputs["probabilities"].shape == (48, 10) and outputs["probabilities"].dtype == np.float16


def test_unshared_copies_diverge_from_their_originals(trained):
    row, folder = trained
    model = AutoModelForSequenceClassification.from_pretrained(folder / "models" / row["run_key"])
    groups = model.albert.encoder.albert_layer_groups
    assert model.config.num_hidden_groups == 13
    original, copy = groups[0].state_dict(), groups[1].state_dict()
    assert any(not torch.equal(original[k], copy[k]) for k in original)


def test_shared_repeats_stay_shared(shared_data_dir, tmp_path):
    hp = HyperParameters.for_task("classification", max_steps=1, batch_size=8)
    row = finetune("rxnmapper-albert", "uspto50k", "repeat shared +3", seed=0, hyperparameters=hp,
                   max_train_samples=16, max_eval_samples=16, models_dir=tmp_path, progress=False)
    model = AutoModelForSequenceClassification.from_pretrained(tmp_path / row["run_key"])
    assert model.config.num_hidden_groups == 1 and model.config.num_hidden_layers == 15
    assert len(model.albert.encoder.albert_layer_groups) == 1


def test_task_head_starts_identically_whatever_the_depth():
    shallow, _ = ft.build_model("rxnmapper-albert", "classification", 10, "baseline", seed=5)
    deep, _ = ft.build_model("rxnmapper-albert", "classification", 10, "copy first 3", seed=5)
    other, _ = ft.build_model("rxnmapper-albert", "classification", 10, "baseline", seed=6)
    assert torch.equal(shallow.classifier.weight, deep.classifier.weight)
    assert not torch.equal(shallow.classifier.weight, other.classifier.weight)


def test_build_model_alone_is_reproducible_whatever_the_global_random_state():
    # the rxnmapper checkpoint has no pooler: it is drawn from the run's seed, not the global RNG
    torch.manual_seed(1)
    first, _ = ft.build_model("rxnmapper-albert", "classification", 10, "baseline", seed=5)
    torch.manual_seed(2)
    second, _ = ft.build_model("rxnmapper-albert", "classification", 10, "baseline", seed=5)
    for (name, a), (_, b) in zip(first.named_parameters(), second.named_parameters()):
        assert torch.equal(a, b), name
    other, _ = ft.build_model("rxnmapper-albert", "classification", 10, "baseline", seed=6)
    assert not torch.equal(first.albert.pooler.weight, other.albert.pooler.weight)
    deep, _ = ft.build_model("rxnmapper-albert", "classification", 10, "copy first 3", seed=5)
    assert torch.equal(first.albert.pooler.weight, deep.albert.pooler.weight)  # paired


def test_the_training_subset_is_the_same_for_every_seed(tmp_path, monkeypatch):
    from dupbert.training import tasks

    drawn = []
    real = tasks.load_task

    def spy(name, split, max_samples=None, seed=0, data_dir=None):
        dataset = real(name, split, max_samples=max_samples, seed=seed, data_dir=data_dir)
        drawn.append((split, tuple(dataset["id"])))
        return dataset

    monkeypatch.setattr(tasks, "load_task", spy)
    hp = HyperParameters.for_task("classification", max_steps=1, batch_size=8)
    rows = [finetune("rxnmapper-albert", "uspto50k", "baseline", seed=seed, hyperparameters=hp,
                     max_train_samples=16, max_eval_samples=8, progress=False) for seed in (0, 7)]
    train = [ids for split, ids in drawn if split == "train"]
    assert len(train) == 2 and train[0] == train[1] and len(train[0]) == 16
    assert rows[0]["run_key"] != rows[1]["run_key"]
    assert train[0] == tuple(real("uspto50k", "train", max_samples=16, seed=0)["id"])


def test_rerun_reproduces_a_committed_row(tmp_path):
    hp = HyperParameters.for_task("classification", max_steps=2, batch_size=8, learning_rate=5e-4)
    row = finetune("rxnmapper-albert", "uspto50k", "repeat shared +3", seed=1, hyperparameters=hp,
                   max_train_samples=16, max_eval_samples=32, progress=False)
    ResultsFile(tmp_path / "r.jsonl").append(row)
    table = sweeps.rerun_table([row])
    assert table["metric"].tolist() == ["accuracy", "macro_f1"]
    assert table["difference"].abs().max() <= 0.5 and table["identical_losses"].all()
    assert table["committed"].iloc[0] == round(100 * row["metrics"]["accuracy"], 4)
    with pytest.raises(ValueError, match="cannot be re-run here"):
        sweeps.rerun({**row, "train_subset_seed": None})
    edited = {**row, "seed": 2}
    with pytest.raises(ValueError, match="do not identify the run"):
        sweeps.rerun(edited)


def test_rerun_command_prints_committed_and_rerun_metrics(tmp_path, capsys):
    from dupbert.cli import main

    hp = HyperParameters.for_task("classification", max_steps=1, batch_size=8)
    row = finetune("rxnmapper-albert", "uspto50k", "baseline", seed=0, hyperparameters=hp,
                   max_train_samples=8, max_eval_samples=16, progress=False)
    results = tmp_path / "r.jsonl"
    ResultsFile(results).append(row)
    capsys.readouterr()  # what the direct finetune call printed
    assert main(["rerun", str(results), row["run_key"]]) == 0
    out, err = capsys.readouterr()
    assert row["run_key"] in out and "agrees within 0.5 points" in err
    assert "Loading weights" not in err and "it/s" not in err  # no progress bars
    ResultsFile(results).path.write_text(json.dumps(
        {**row, "metrics": {**row["metrics"], "accuracy": row["metrics"]["accuracy"] + 0.01}}) + "\n")
    assert main(["rerun", str(results), row["run_key"]]) == 1  # 1 point off: disagrees
    assert "DISAGREES" in capsys.readouterr().err
    assert main(["rerun", str(results), "0123456789abcdef"]) == 2
    assert "are not in" in capsys.readouterr().err


def test_sweep_resumes_without_losing_or_doubling_rows(tmp_path, monkeypatch):
    results = tmp_path / "results.jsonl"
    real = ft.run
    calls = []

    def dies_after_one(*args, **kwargs):
        if calls:
            raise KeyboardInterrupt("killed")
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(sweeps, "run", dies_after_one)
    arguments = dict(models=["rxnmapper-albert"], tasks=["uspto50k"],
                     duplications=["baseline", "copy last"], seeds=[0],
                     results_path=results, hyperparameters={"classification": {"max_steps": 1}},
                     max_train_samples=16, max_eval_samples=16, progress=False)
    with pytest.raises(KeyboardInterrupt):
        sweep(**arguments)
    first = ResultsFile(results).rows()
    assert [r["duplication"] for r in first] == ["baseline"]
    trained = []

    def counting(spec, **kwargs):  # a spy: the append's own duplicate guard would hide a rerun
        trained.append(spec.duplication)
        return real(spec, **kwargs)

    monkeypatch.setattr(sweeps, "run", counting)
    frame = sweep(**arguments)
    rows = ResultsFile(results).rows()
    assert [r["duplication"] for r in rows] == ["baseline", "copy last"]
    assert trained == ["copy last"]  # the finished run was not trained again
    assert rows[0] == first[0]
    assert frame["run_key"].is_unique and len(frame) == 2
    assert sweep(**arguments)["run_key"].tolist() == frame["run_key"].tolist()
    assert trained == ["copy last"]  # nothing to do: nothing trained


def test_two_shards_merged_equal_one_run(tmp_path):
    arguments = dict(models=["rxnmapper-albert"], tasks=["uspto50k"],
                     duplications=["baseline", "copy last", "depth control"], seeds=[0],
                     hyperparameters={"classification": {"max_steps": 1}},
                     max_train_samples=16, max_eval_samples=16, progress=False)
    whole = sweep(results_path=tmp_path / "all.jsonl", **arguments)
    first = sweep(results_path=tmp_path / "s0.jsonl", shard="0/2", **arguments)
    second = sweep(results_path=tmp_path / "s1.jsonl", shard="1/2", **arguments)
    assert (first["duplication"].tolist(), second["duplication"].tolist()) == (
        ["baseline", "depth control"], ["copy last"])  # every other configuration, disjoint
    merged = merge_results([tmp_path / "s0.jsonl", tmp_path / "s1.jsonl"], tmp_path / "m.jsonl")
    # when and at which commit each row was made: a commit landing between the sweeps (a
    # background queue commits its rows as they land) moves git_commit, not the results
    timing = ["train_time_s", "eval_time_s", "finished_at", "git_commit"]
    key = "run_key"
    left = whole.drop(columns=timing).sort_values(key).reset_index(drop=True)
    right = merged.drop(columns=timing).sort_values(key).reset_index(drop=True)
    assert len(right) == 3
    pd.testing.assert_frame_equal(left[sorted(left.columns)], right[sorted(right.columns)])


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(task="mnli"), UnknownTask, "unknown task 'mnli'; the tasks are sst2, snli, squad2, "
                                     "uspto50k"),
    (dict(task=["uspto50k"]), UnknownTask, "unknown task ['uspto50k']; the tasks are sst2, snli, "
                                           "squad2, uspto50k"),
    (dict(duplication="copy all"), ValueError, "unknown duplication 'copy all'; rxnmapper-albert "
                                               "has: ['baseline', 'copy first 1', "),
    (dict(max_train_samples=0), ValueError, "max_train_samples must be None (all rows) or an "
                                            "integer >= 1, got 0"),
    (dict(max_eval_samples=2.5), ValueError, "max_eval_samples must be None (all rows) or an "
                                             "integer >= 1, got 2.5"),
    (dict(seed=-1), ValueError, "seed must be an integer from 0 to 2**32 - 1, got -1"),
    (dict(model_name=""), ValueError, "model_name must be a non-empty string, got ''"),
    (dict(hyperparameters={"max_steps": 1}), ValueError,
     "hyperparameters must be a HyperParameters (e.g. HyperParameters.for_task('classification', "
     "epochs=1)) or None, got dict"),
    (dict(hyperparameters=HyperParameters.for_task("classification", max_length=600)), ValueError,
     "max_length 600 is more than rxnmapper-albert takes: 512 positions (max_position_embeddings 512)"),
    (dict(device="cuda:7"), ValueError, "device 'cuda:7' is not available: "),
    (dict(outputs_dir=__file__), ValueError, f"outputs_dir {__file__!r} cannot be a folder: "
                                             f"{__file__} is a file"),
    (dict(models_dir=f"{__file__}/models"), ValueError,
     f"models_dir '{__file__}/models' cannot be a folder: {__file__} is a file"),
])
def test_bad_inputs_fail_before_any_data_or_model_is_loaded(kwargs, error, message, monkeypatch):
    from dupbert.training import tasks

    def never(*args, **kwargs):
        raise AssertionError("loaded before the inputs were checked")

    monkeypatch.setattr(tasks, "load_task", never)
    monkeypatch.setattr(ft, "build_model", never)
    arguments = dict(model_name="rxnmapper-albert", task="uspto50k", progress=False,
                     max_train_samples=8, max_eval_samples=8,
                     hyperparameters=HyperParameters.for_task("classification", max_steps=1))
    with pytest.raises(error, match="^" + re.escape(message)):
        finetune(**{**arguments, **kwargs})


def test_a_batch_that_the_processes_cannot_share_fails_before_loading(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "3")
    with pytest.raises(ValueError, match="^" + re.escape(
            "batch_size 8 is not divisible by world size 3: each process takes batch_size / "
            "world size") + "$"):
        finetune("rxnmapper-albert", "uspto50k", hyperparameters=HyperParameters.for_task(
            "classification", max_steps=1, batch_size=8), max_train_samples=8, progress=False)


def test_shard_parsing():
    assert sweeps.parse_shard("1/4") == (1, 4) and sweeps.parse_shard(None) == (0, 1)
    for bad in ["4/4", "a/b", "1", (2, 1)]:
        with pytest.raises(ValueError, match="shard must be 'i/n'"):
            sweeps.parse_shard(bad)


def test_length_grouping_gives_paired_runs_the_same_batches_in_every_epoch(tmp_path):
    """Trainer's length-grouped training sampler draws from the global random state, which
    configurations of different depth consume differently; ours has its own seeded generator."""
    from datasets import Dataset

    hp = HyperParameters.for_task("classification", group_by_length=True, batch_size=4)
    data = Dataset.from_dict({"input_ids": [[1] * (3 + i % 7) for i in range(40)],
                              "labels": [i % 2 for i in range(40)]})

    def epochs(consume):
        model, tokenizer = ft.build_model("rxnmapper-albert", "classification", 10, "baseline", seed=1)
        trainer = ft._PairedTrainer(model=model, args=ft.training_arguments(hp, 1, str(tmp_path), "cpu", False),
                                    train_dataset=data)
        sampler = trainer._get_train_sampler()
        first = list(sampler)
        torch.randn(consume)  # what dropout and initialisation would draw in between
        return first, list(sampler)

    a, b = epochs(1), epochs(1000)
    assert a == b  # the same batches in both epochs, whatever the global state consumed
    assert a[0] != a[1]  # and the epochs are reshuffled, not repeated


def _append_many(path: str, prefix: str, count: int, start) -> None:
    results = ResultsFile(path)
    start.wait()  # a barrier: both append at once (spawn's imports take seconds, unevenly)
    for i in range(count):
        results.append({"run_key": f"{prefix}{i}", "value": i})


def test_processes_sharing_one_results_file_lose_no_rows(tmp_path):
    """Shards of one study append to one file (scripts/cpu_study.sh): every read-and-rewrite
    holds the folder's lock, so no process overwrites another's row (without the lock, two
    processes appending 200 rows each at once lose some every time)."""
    import multiprocessing

    path = str(tmp_path / "shared.jsonl")
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(2)
    workers = [context.Process(target=_append_many, args=(path, prefix, 200, start))
               for prefix in "ab"]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [worker.exitcode for worker in workers] == [0, 0]
    keys = [row["run_key"] for row in ResultsFile(path).rows()]
    assert sorted(keys) == sorted(f"{p}{i}" for p in "ab" for i in range(200))


def test_numbers_typed_as_text_are_the_numbers_they_spell():
    # PyYAML reads 5e-4 (no dot) as the string '5e-4': RQ5's smoke_sweeps pass it on as it is
    typed = HyperParameters(learning_rate="5e-4", batch_size="32", epochs="2", max_length="128")
    assert typed == HyperParameters(learning_rate=5e-4, batch_size=32, epochs=2, max_length=128)
    assert type(typed.batch_size) is int and type(typed.epochs) is float
    with pytest.raises(ParameterError) as refused:
        HyperParameters(learning_rate="fast", batch_size=32, epochs=2, max_length=128)
    assert str(refused.value) == "learning_rate must be a number > 0, got 'fast' (str)"


@pytest.mark.parametrize("task, metrics", [("uspto50k", {"accuracy", "macro_f1"})])
def test_a_run_that_diverged_is_kept_with_nan_metrics_and_no_outputs(task, metrics, tmp_path,
                                                                      monkeypatch, capsys):
    predict = ft._PairedTrainer.predict

    def nan_logits(self, dataset, *args, **kwargs):
        prediction = predict(self, dataset, *args, **kwargs)
        return prediction._replace(predictions=np.full_like(prediction.predictions, np.nan))

    monkeypatch.setattr(ft._PairedTrainer, "predict", nan_logits)
    hp = HyperParameters.for_task("classification", max_steps=2, batch_size=8)
    row = finetune("rxnmapper-albert", task, "baseline", seed=0, hyperparameters=hp,
                   max_train_samples=16, max_eval_samples=8, outputs_dir=tmp_path, progress=False)
    assert row["diverged"] is True
    assert set(row["metrics"]) == metrics and all(np.isnan(v) for v in row["metrics"].values())
    assert list(tmp_path.iterdir()) == []  # no outputs: there is nothing to ensemble
    assert "diverged: its logits are not all numbers" in capsys.readouterr().err
    # the statistics refuse it by name instead of averaging around it
    from dupbert.study import comparisons

    frame = pd.json_normalize([row], sep=".")
    with pytest.raises(ValueError, match="seed 0 has no accuracy"):
        comparisons.comparison(frame)


def test_usable_positions_follow_each_family_s_position_ids():
    from transformers import AlbertConfig, BertConfig, DebertaV2Config, RobertaConfig

    assert ft.usable_positions(BertConfig()) == 512
    assert ft.usable_positions(AlbertConfig()) == 512
    # roberta-base: 514 positions, padding index 1, so positions 2..513 take 512 tokens
    assert ft.usable_positions(RobertaConfig(max_position_embeddings=514, pad_token_id=1)) == 512
    assert ft.usable_positions(DebertaV2Config(position_biased_input=False)) is None
    assert ft.usable_positions(DebertaV2Config(position_biased_input=True,
                                               max_position_embeddings=512)) == 512
