"""RQ5 ensembles from stored outputs: the combination rule on hand-made cases, the reproduction of
single runs from the committed CPU outputs (results/cpu/rq3*), the RQ5 membership rule, errors."""

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dupbert import ensemble as E
from dupbert import qa
from dupbert.ensemble import OutputsMismatch, OutputsNotFound
from dupbert.errors import DupbertError

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = REPO_ROOT / "results" / "cpu" / "rq3.jsonl"
OUTPUTS = REPO_ROOT / "results" / "cpu" / "rq3-outputs"


@pytest.fixture(scope="module")
def cpu_runs():
    if not RESULTS.is_file():
        pytest.skip("results/cpu/rq3.jsonl is not in this checkout")
    return E.read_runs(RESULTS)


@pytest.fixture(scope="module")
def evaluator(shared_data_dir, zoo_cache):
    """One evaluator for the module: the SQuAD evaluation set is re-derived once."""
    return E._Evaluator(data_dir=shared_data_dir)


def _row(run_key, task="sst2", **fields):
    return {"run_key": run_key, "model": "toy", "task": task, "duplication": "baseline",
            "seed": 0, "max_train_samples": 8, "max_eval_samples": 3,
            "hyperparameters": {"max_length": 128, "doc_stride": 128}, **fields}


def _save(folder, row, **arrays):
    folder.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(folder / f"{row['run_key']}.npz", **arrays)
    return {**row, "outputs_dir": str(folder)}


# ----------------------------------------------------------------------------- loading


def test_the_outputs_folder_follows_the_rq3_convention():
    assert E.default_outputs_dir("results/cpu/rq3.jsonl").as_posix() == "results/cpu/rq3-outputs"


def test_read_runs_attaches_each_runs_outputs_folder(cpu_runs):
    assert len(cpu_runs) == 63 and cpu_runs["run_key"].is_unique
    assert set(cpu_runs["outputs_dir"]) == {str(OUTPUTS)}


def test_a_missing_outputs_file_names_the_file_and_how_to_make_it(tmp_path):
    row = {**_row("0123456789abcdef"), "outputs_dir": str(tmp_path)}
    with pytest.raises(OutputsNotFound, match=r"0123456789abcdef\.npz does not exist") as error:
        E.load_outputs([row])
    assert "--outputs-dir" in str(error.value) and isinstance(error.value, FileNotFoundError)
    assert isinstance(error.value, DupbertError)


# ----------------------------------------------------------------------------- classification


A = np.array([[0.9, 0.1], [0.4, 0.6], [0.45, 0.55]], np.float16)  # predicts 0, 1, 1
B = np.array([[0.2, 0.8], [0.3, 0.7], [0.7, 0.3]], np.float16)  # predicts 1, 1, 0
LABELS = np.array([0, 1, 0])


def test_two_classifiers_summed_probabilities_beat_both(tmp_path):
    rows = [_save(tmp_path, _row("a"), probabilities=A, labels=LABELS),
            _save(tmp_path, _row("b"), probabilities=B, labels=LABELS)]
    # mean: [0.55, 0.45], [0.35, 0.65], [0.575, 0.425] -> 0, 1, 0: all right
    np.testing.assert_allclose(E.mean_probabilities([A, B]),
                               [[0.55, 0.45], [0.35, 0.65], [0.575, 0.425]], atol=1e-3)
    assert E.evaluate_ensemble(rows) == {"accuracy": 1.0, "macro_f1": 1.0}
    alone = E.evaluate_ensemble(rows[:1])
    assert alone["accuracy"] == pytest.approx(2 / 3)
    assert alone["macro_f1"] == pytest.approx(2 / 3)  # F1 of class 0: 2/3, class 1: 2/3


def test_classifiers_scored_on_different_examples_are_refused(tmp_path):
    rows = [_save(tmp_path, _row("a"), probabilities=A, labels=LABELS),
            _save(tmp_path, _row("b"), probabilities=B, labels=np.array([1, 1, 0]))]
    with pytest.raises(OutputsMismatch, match="labels differ"):
        E.evaluate_ensemble(rows)


def test_runs_of_different_tasks_are_refused(tmp_path):
    rows = [_save(tmp_path, _row("a"), probabilities=A, labels=LABELS),
            _save(tmp_path, _row("b", task="snli"), probabilities=A, labels=LABELS)]
    with pytest.raises(OutputsMismatch, match=r"one task, got \['snli', 'sst2'\]"):
        E.evaluate_ensemble(rows)


def test_one_classifier_alone_reproduces_its_stored_metrics(cpu_runs, evaluator):
    """Exactly where fp16 storage leaves no close call; elsewhere at most one prediction per
    close call (top-2 probabilities within one fp16 step) can flip."""
    rows = cpu_runs[cpu_runs["task"] != "squad2"].to_dict("records")
    exact = 0
    for row in rows:
        metrics = evaluator([row])
        probabilities = np.sort(evaluator.outputs(row)["probabilities"], axis=1)
        top, second = probabilities[:, -1], probabilities[:, -2]
        close = int((top.astype(np.float32) - second <= np.spacing(top)).sum())
        flipped = abs(metrics["accuracy"] - row["metrics.accuracy"]) * len(probabilities)
        assert round(flipped) <= close, row["run_key"]
        if close == 0:
            assert metrics == {"accuracy": row["metrics.accuracy"],
                               "macro_f1": pytest.approx(row["metrics.macro_f1"], abs=1e-12)}
            exact += 1
    assert len(rows) == 51 and exact >= 10


# ----------------------------------------------------------------------------- SQuAD 2.0

CONTEXT = "alpha beta gamma delta epsilon zeta"
# token 0 = [CLS], 1..6 = the context words, 7 = [SEP]
OFFSETS = [None, [0, 5], [6, 10], [11, 16], [17, 22], [23, 30], [31, 35], None]


def _candidates(features):
    """top_candidates-form arrays from ``[{"start": {token: p}, "end": {token: p}, "null": q}]``
    (log-normalisers 0, so the stored logits are log probabilities)."""
    k = 3
    out = {name: np.full((len(features), k), -1, np.int16) for name in ("start_index", "end_index")}
    out.update({name: np.full((len(features), k), -np.inf, np.float16)
                for name in ("start_logit", "end_logit")})
    for f, feature in enumerate(features):
        for name in ("start", "end"):
            ranked = sorted(feature[name].items(), key=lambda item: -item[1])
            for c, (token, p) in enumerate(ranked):
                out[f"{name}_index"][f, c] = token
                out[f"{name}_logit"][f, c] = math.log(p)
    out["start_logsumexp"] = np.zeros(len(features), np.float16)
    out["end_logsumexp"] = np.zeros(len(features), np.float16)
    out["null_score"] = np.array([math.log(f["null"]) for f in features], np.float16)
    out["example_id"] = np.array([f"q{i}" for i in range(len(features))])
    return out


# question q0: A prefers "alpha beta" (0.6 * 0.6), B "gamma delta" (0.9 * 0.9) and does not list
# tokens 1, 2 at all (probability 0 for B); the mean: (3,4) 0.485, (1,2) 0.18, (1,4) 0.12.
# question q1: A says no answer (0.9 * 0.9 = 0.81), B answers "gamma delta" (0.25 > null 0.16);
# the mean: null 0.485 > best span 0.125 -> no answer.
MODEL_A = _candidates([
    {"start": {1: 0.6, 3: 0.4}, "end": {2: 0.6, 4: 0.4}, "null": 0.0001},
    {"start": {1: 0.1}, "end": {2: 0.1}, "null": 0.81}])
MODEL_B = _candidates([
    {"start": {3: 0.9, 5: 0.05}, "end": {4: 0.9, 6: 0.05}, "null": 0.0001},
    {"start": {3: 0.5}, "end": {4: 0.5}, "null": 0.16}])
EXAMPLES = {"id": ["q0", "q1"], "context": [CONTEXT, CONTEXT]}
FEATURES = {"example_id": ["q0", "q1"], "offset_mapping": [OFFSETS, OFFSETS]}


def test_each_toy_model_alone_gives_its_own_answer():
    assert E.ensemble_squad_predictions([MODEL_A], EXAMPLES, FEATURES) == {"q0": "alpha beta",
                                                                           "q1": ""}
    assert E.ensemble_squad_predictions([MODEL_B], EXAMPLES, FEATURES) == {"q0": "gamma delta",
                                                                           "q1": "gamma delta"}
    # the same as run_qa-style selection on the logits themselves
    for model in (MODEL_A, MODEL_B):
        assert qa.select_answers(EXAMPLES, FEATURES, model) == E.ensemble_squad_predictions(
            [model], EXAMPLES, FEATURES)


def test_the_summed_probabilities_pick_the_span_and_the_null():
    spans = E.ensemble_spans([MODEL_A, MODEL_B], FEATURES["offset_mapping"])
    assert spans["start_index"][:, 0].tolist() == [3, 3]
    assert spans["end_index"][:, 0].tolist() == [4, 4]
    np.testing.assert_allclose(np.exp(spans["start_logit"][:, 0]), [0.485, 0.125], rtol=2e-3)
    np.testing.assert_allclose(np.exp(spans["null_score"]), [0.0001, 0.485], rtol=2e-3)
    assert E.ensemble_squad_predictions([MODEL_A, MODEL_B], EXAMPLES, FEATURES) == {
        "q0": "gamma delta", "q1": ""}


def test_a_model_twice_is_the_model_once(cpu_runs, evaluator):
    """Two identical members (the probability-matrix path) give the one-member scores (the log
    path) back, on the toy models and on a real run."""
    for model in (MODEL_A, MODEL_B):
        once = E.ensemble_spans([model], FEATURES["offset_mapping"])
        twice = E.ensemble_spans([model, model], FEATURES["offset_mapping"])
        for key in ("start_index", "end_index"):
            np.testing.assert_array_equal(once[key], twice[key])
        np.testing.assert_allclose(once["start_logit"], twice["start_logit"], atol=1e-6)
    row = cpu_runs[cpu_runs["task"] == "squad2"].iloc[0].to_dict()
    assert evaluator([row, row]) == evaluator([row])


def test_spans_are_context_only_ordered_and_at_most_max_answer_length():
    # the best pair by probability is (3, 2): reversed, so (3, 4) wins; [SEP] (7) is no candidate
    model = _candidates([{"start": {3: 0.7, 7: 0.2}, "end": {2: 0.8, 4: 0.1}, "null": 0.0001}])
    spans = E.ensemble_spans([model], [OFFSETS])
    assert (spans["start_index"][0, 0], spans["end_index"][0, 0]) == (3, 4)
    short = E.ensemble_spans([model], [OFFSETS], max_answer_length=1)
    assert short["start_index"][0, 0] == -1 and short["start_logit"][0, 0] == -np.inf


def test_mismatched_example_ids_are_refused():
    other = {**MODEL_B, "example_id": np.array(["q0", "q9"])}
    with pytest.raises(OutputsMismatch, match=r"member 1: .*feature 1, stored 'q9', expected 'q1'"):
        E.ensemble_squad_predictions([MODEL_A, other], EXAMPLES, FEATURES)


def test_one_squad_run_alone_reproduces_its_stored_metrics(cpu_runs, evaluator):
    """The ensemble code on one run's stored fp16 candidates gives the run's own metrics: within
    one question's worth for every run, exactly for most."""
    rows = cpu_runs[cpu_runs["task"] == "squad2"].to_dict("records")
    assert len(rows) == 12
    exact = 0
    for row in rows:
        metrics = evaluator([row])
        one_question = 100 / row["metrics.total"]
        for key in ("exact", "f1", "HasAns_f1", "NoAns_f1"):
            assert abs(metrics[key] - row[f"metrics.{key}"]) <= one_question + 1e-9, key
        exact += all(metrics[k] == pytest.approx(row[f"metrics.{k}"], abs=1e-9)
                     for k in ("exact", "f1"))
    assert exact >= 10


def test_one_squad_run_alone_answers_as_its_own_candidates_do(cpu_runs, evaluator):
    row = cpu_runs[cpu_runs["task"] == "squad2"].iloc[1].to_dict()
    examples, features = evaluator.eval_set(row)
    stored = evaluator.outputs(row)
    ours = E.ensemble_squad_predictions([stored], examples, features)
    theirs = qa.select_answers(examples, features, stored)
    same = sum(ours[i] == theirs[i] for i in theirs)
    assert len(theirs) == 64 and same >= 62


def test_a_squad_run_with_other_example_ids_is_refused(cpu_runs, evaluator, tmp_path):
    row = cpu_runs[cpu_runs["task"] == "squad2"].iloc[0].to_dict()
    stored = dict(np.load(OUTPUTS / f"{row['run_key']}.npz"))
    stored["example_id"] = stored["example_id"][::-1]
    doctored = _save(tmp_path, row, **stored)
    fresh = E._Evaluator(data_dir=evaluator.data_dir)
    fresh._eval_sets = evaluator._eval_sets  # the same evaluation set, not the cached outputs
    with pytest.raises(OutputsMismatch, match=f"run {row['run_key']}: stored example ids differ"):
        fresh([doctored])


# ----------------------------------------------------------------------------- RQ5 rule


def _toy_grid(folder, configurations=("baseline", "copy first 3", "copy last"), seeds=(0, 1)):
    """A 3-configuration x 2-seed grid of classifiers on 4 examples, labels [0, 1, 0, 1]."""
    labels = np.array([0, 1, 0, 1])
    rows = []
    rng = np.random.default_rng(0)
    for seed in seeds:
        for c, configuration in enumerate(configurations):
            p = rng.dirichlet([1, 1], size=4).astype(np.float16)
            row = _row(f"{c}{seed}" * 4, duplication=configuration, seed=seed,
                       metrics={"accuracy": 0.0})
            rows.append(_save(folder, row, probabilities=p, labels=labels))
    return pd.json_normalize(rows, sep=".")


def test_the_rq5_rule_uses_every_subset_of_size_k(tmp_path):
    runs = _toy_grid(tmp_path)
    ensembles = E.rq5_ensembles(runs)
    counts = ensembles["kind"].value_counts().to_dict()
    # k = min(3 configurations, 2 seeds) = 2: C(3, 2) = 3 per seed; C(2, 2) = 1 per configuration
    assert counts == {"single": 6, "cross-configuration": 6, "same-configuration": 3}
    cross = ensembles[ensembles["kind"] == "cross-configuration"]
    assert cross["members"].tolist()[:3] == ["baseline + copy first 3", "baseline + copy last",
                                            "copy first 3 + copy last"]
    assert cross["seed"].tolist() == [0, 0, 0, 1, 1, 1] and set(cross["k"]) == {2}
    same = ensembles[ensembles["kind"] == "same-configuration"]
    assert same["configuration"].tolist() == ["baseline", "copy first 3", "copy last"]
    assert same["members"].tolist() == ["seeds 0 + 1"] * 3 and same["seed"].isna().all()
    # every ensemble's metric is the ensemble of its members
    first = cross.iloc[0]
    members = runs[runs["run_key"].isin(first["run_keys"].split())]
    assert first["metrics.accuracy"] == E.evaluate_ensemble(members)["accuracy"]
    assert E.rq5_ensembles(runs).equals(ensembles)  # deterministic


def test_summary_and_differences_follow_their_units(tmp_path):
    ensembles = E.rq5_ensembles(_toy_grid(tmp_path))
    summary = E.rq5_summary(ensembles)
    accuracy = summary[summary["metric"] == "accuracy"].set_index("kind")
    assert accuracy["n"].to_dict() == {"single": 6, "best single": 2, "cross-configuration": 2,
                                       "same-configuration": 3}
    single = ensembles[ensembles["kind"] == "single"]
    means = single.groupby("configuration", sort=False)["metrics.accuracy"].mean()
    assert accuracy.loc["best single", "configuration"] == means.idxmax()
    with_baseline = E.rq5_summary(ensembles, baseline="copy last").set_index(["metric", "kind"])
    assert with_baseline.loc[("accuracy", "baseline"), "mean"] == pytest.approx(
        100 * single.loc[single["configuration"] == "copy last", "metrics.accuracy"].mean())
    assert with_baseline.loc[("accuracy", "baseline"), "n"] == 2
    assert accuracy.loc["single", "mean"] == pytest.approx(100 * single["metrics.accuracy"].mean())
    cross = ensembles[ensembles["kind"] == "cross-configuration"]
    per_seed = 100 * cross.groupby("seed")["metrics.accuracy"].mean()
    assert accuracy.loc["cross-configuration", "mean"] == pytest.approx(per_seed.mean())
    differences = E.rq5_differences(ensembles).set_index(["metric", "comparison"])
    best_runs = 100 * single[single["configuration"] == means.idxmax()].set_index("seed")[
        "metrics.accuracy"]
    paired = differences.loc[("accuracy", "cross-configuration − best single")]
    assert paired["difference"] == pytest.approx((per_seed - best_runs).mean())
    assert paired["n_a"] == 2 and paired["test"] == "paired t (seeds)"
    welch = differences.loc[("accuracy", "cross-configuration − same-configuration")]
    assert welch["difference"] == pytest.approx(
        accuracy.loc["cross-configuration", "mean"] - accuracy.loc["same-configuration", "mean"])


def test_one_seed_gives_single_runs_only_and_k_below_2_is_refused(tmp_path):
    ensembles = E.rq5_ensembles(_toy_grid(tmp_path, seeds=(0,)))
    assert set(ensembles["kind"]) == {"single"}
    with pytest.raises(ValueError, match="k >= 2"):
        E.rq5_ensembles(_toy_grid(tmp_path), k=1)


def test_runs_of_two_settings_are_refused(tmp_path):
    runs = _toy_grid(tmp_path)
    runs.loc[0, "max_eval_samples"] = 4
    with pytest.raises(OutputsMismatch, match="2 settings"):
        E.rq5_ensembles(runs)


def test_rq5_on_the_committed_cpu_runs(cpu_runs):
    """The classification cells of results/cpu (SQuAD is covered above): k = 3 everywhere."""
    runs = cpu_runs[cpu_runs["task"].isin(["sst2", "uspto50k"])]
    ensembles = E.rq5_ensembles(runs)
    counts = ensembles.groupby(["model", "task", "kind"]).size().to_dict()
    assert counts[("all-MiniLM-L6-v2", "sst2", "cross-configuration")] == 3 * 4  # C(4, 3) a seed
    assert counts[("all-MiniLM-L6-v2", "sst2", "same-configuration")] == 4
    assert counts[("rxnmapper-albert", "uspto50k", "cross-configuration")] == 3 * 10  # C(5, 3)
    assert counts[("rxnmapper-albert", "uspto50k", "same-configuration")] == 5
    assert set(ensembles.loc[ensembles["kind"] != "single", "k"]) == {3}
    summary = E.rq5_summary(ensembles)
    assert len(summary) == 3 * 2 * 4  # cells x metrics x kinds
    assert json.loads(summary.to_json())  # plain values
