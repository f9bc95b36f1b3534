"""RQ5 ensembles from stored outputs: the combination rule on hand-made cases, the reproduction of
single runs from the stored outputs of a tiny study run for the session (conftest ``tiny_study``),
the RQ5 membership rule against hand-listed members, errors."""

import dataclasses
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dupbert.study import ensemble as E
from dupbert.study import rq5 as R
from dupbert.training import qa
from dupbert.study.ensemble import OutputsMismatch, OutputsNotFound
from dupbert.core.errors import DupbertError
from dupbert.training.finetuning import HyperParameters
from dupbert.core.results import run_key


@pytest.fixture(scope="module")
def study_runs(tiny_study):
    return tiny_study.runs


@pytest.fixture(scope="module")
def evaluator(shared_data_dir, zoo_cache):
    """One evaluator for the module: the SQuAD evaluation set is re-derived once."""
    return E.Evaluator(data_dir=shared_data_dir)


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


def test_read_runs_attaches_each_runs_outputs_folder(tiny_study):
    runs = tiny_study.runs
    assert len(runs) == 13 and runs["run_key"].is_unique
    assert set(runs["outputs_dir"]) == {str(tiny_study.outputs)}
    # without a folder, the convention: <results stem>-outputs beside the results file
    assert set(E.read_runs(tiny_study.results)["outputs_dir"]) == {str(tiny_study.outputs)}
    assert sorted(p.stem for p in tiny_study.outputs.glob("*.npz")) == sorted(runs["run_key"])


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


def test_one_classifier_alone_reproduces_its_stored_metrics(study_runs, evaluator):
    """Exactly where fp16 storage leaves no close call; elsewhere at most one prediction per
    close call (top-2 probabilities within one fp16 step) can flip."""
    rows = study_runs[study_runs["task"] != "squad2"].to_dict("records")
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
    # measured on the tiny study: 8 of its 9 USPTO-50k runs have no close call (all 9 reproduce)
    assert len(rows) == 9 and exact == 8


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


def test_a_model_twice_is_the_model_once(study_runs, evaluator):
    """Two identical members (the probability-matrix path) give the one-member scores (the log
    path) back, on the toy models and on a real run."""
    for model in (MODEL_A, MODEL_B):
        once = E.ensemble_spans([model], FEATURES["offset_mapping"])
        twice = E.ensemble_spans([model, model], FEATURES["offset_mapping"])
        for key in ("start_index", "end_index"):
            np.testing.assert_array_equal(once[key], twice[key])
        np.testing.assert_allclose(once["start_logit"], twice["start_logit"], atol=1e-6)
    for task in ("squad2", "uspto50k"):
        row = study_runs[study_runs["task"] == task].iloc[0].to_dict()
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


def test_one_squad_run_alone_reproduces_its_stored_metrics(study_runs, evaluator):
    """The ensemble code on one run's stored fp16 candidates gives the run's own metrics: within
    one question's worth for every run, exactly for most."""
    rows = study_runs[study_runs["task"] == "squad2"].to_dict("records")
    assert len(rows) == 4
    exact = 0
    for row in rows:
        metrics = evaluator([row])
        one_question = 100 / row["metrics.total"]
        for key in ("exact", "f1", "HasAns_f1", "NoAns_f1"):
            assert abs(metrics[key] - row[f"metrics.{key}"]) <= one_question + 1e-9, key
        exact += all(metrics[k] == pytest.approx(row[f"metrics.{k}"], abs=1e-9)
                     for k in ("exact", "f1"))
    assert exact == 4  # measured: every run of the tiny study (one window per question)


def test_one_squad_run_alone_answers_as_its_own_candidates_do(study_runs, evaluator):
    row = study_runs[study_runs["task"] == "squad2"].iloc[1].to_dict()
    examples, features = evaluator.eval_set(row)
    stored = evaluator.outputs(row)
    ours = E.ensemble_squad_predictions([stored], examples, features)
    theirs = qa.select_answers(examples, features, stored)
    same = sum(ours[i] == theirs[i] for i in theirs)
    # one window per question (8 features for 8 questions): the windows are never compared,
    # so the ensemble of one run answers exactly as the run's own selection
    assert len(theirs) == 8 and len(features["example_id"]) == 8 and same == 8


def test_a_squad_run_with_other_example_ids_is_refused(study_runs, evaluator, tmp_path):
    row = study_runs[study_runs["task"] == "squad2"].iloc[0].to_dict()
    stored = dict(np.load(Path(row["outputs_dir"]) / f"{row['run_key']}.npz"))
    stored["example_id"] = stored["example_id"][::-1]
    doctored = _save(tmp_path, row, **stored)
    fresh = E.Evaluator(data_dir=evaluator.data_dir)
    fresh._eval_sets = evaluator._eval_sets  # the same evaluation set, not the cached outputs
    with pytest.raises(OutputsMismatch, match=f"run {row['run_key']}: stored example ids differ"):
        fresh([doctored])


# ----------------------------------------------------------------------------- RQ5 rule

TOY_SETTING = {"model": "toy", "task": "sst2", "hyperparameters": {"max_length": 128, "doc_stride": 128},
               "max_train_samples": 8, "max_eval_samples": 3, "train_subset_seed": 0}


def _toy_key(configuration, seed):
    """The run key of a toy run, by dupbert.core.results.run_key: independent of the RQ5 code."""
    return run_key({**TOY_SETTING, "duplication": configuration, "seed": seed})


def _keys(members):
    """Run keys of hand-listed ``[(configuration, seed), ...]`` members."""
    return " ".join(_toy_key(c, s) for c, s in members)


def _toy_grid(folder, configurations=("baseline", "copy first 3", "copy last"), seeds=(0, 1),
              missing=()):
    """Classifiers on 4 examples, labels [0, 1, 0, 1], one per configuration and seed (except
    ``missing``), with RQ3's row fields (reference, role, train_subset_seed, run_key)."""
    labels = np.array([0, 1, 0, 1])
    rows = []
    rng = np.random.default_rng(0)
    for seed in seeds:
        for configuration in configurations:
            p = rng.dirichlet([1, 1], size=4).astype(np.float16)
            if (configuration, seed) in missing:
                continue
            first = configuration == configurations[0]
            row = {**TOY_SETTING, "duplication": configuration, "seed": seed,
                   "reference": None if first else configurations[0],
                   "role": "reference" if first else "secondary", "metrics": {"accuracy": 0.0},
                   "run_key": _toy_key(configuration, seed)}
            rows.append(_save(folder, row, probabilities=p, labels=labels))
    return pd.json_normalize(rows, sep=".")


def _score(runs, members):
    """Accuracy in points of the ensemble of hand-listed members, straight from the rows."""
    chosen = runs.set_index("run_key").loc[_keys(members).split()].reset_index()
    return 100 * E.evaluate_ensemble(chosen)["accuracy"]


BASE, LAST = "baseline", "copy last"


def test_the_membership_rule_of_three_seeds_and_two_configurations():
    pairs = R.matched_ensembles([BASE, LAST], [2, 0, 1], k=2)
    # every offset, both assignments of its two seeds (rotations 0 and 1)
    assert [p["cross"] for p in pairs] == [
        [(BASE, 0), (LAST, 1)], [(BASE, 1), (LAST, 0)], [(BASE, 1), (LAST, 2)],
        [(BASE, 2), (LAST, 1)], [(BASE, 2), (LAST, 0)], [(BASE, 0), (LAST, 2)]]
    # the control: each configuration of the cross ensemble alone, at the same seeds
    controls = [[[(BASE, 0), (BASE, 1)], [(LAST, 0), (LAST, 1)]],
                [[(BASE, 1), (BASE, 2)], [(LAST, 1), (LAST, 2)]],
                [[(BASE, 2), (BASE, 0)], [(LAST, 2), (LAST, 0)]]]
    assert [p["controls"] for p in pairs] == [c for c in controls for _ in range(2)]
    assert [p["control_configurations"] for p in pairs] == [(BASE, LAST)] * 6
    assert [p["seeds"] for p in pairs] == [(0, 1), (0, 1), (1, 2), (1, 2), (2, 0), (2, 0)]
    assert [p["disjoint"] for p in pairs] == [True, True, False, False, False, False]
    assert [p["offset"] for p in pairs] == [0, 0, 1, 1, 2, 2]
    assert [p["rotation"] for p in pairs] == [0, 1] * 3 and [p["pair"] for p in pairs] == list(range(6))


def test_every_configuration_takes_every_seed_of_its_block_once():
    """Review of the final chapters: with one assignment the earlier configuration
    always took a block's lower seed, so a seed effect could pass for diversity. The rotations
    form a Latin square: within a block each configuration sits at each of its seeds once."""
    configurations, seeds = ["a", "b", "c"], [0, 1, 2, 3, 4, 5]
    pairs = R.matched_ensembles(configurations, seeds, k=3)
    assert len(pairs) == 6 * 1 * 3
    for offset in (0, 3):  # the disjoint blocks
        block = [p for p in pairs if p["offset"] == offset]
        assert all(p["disjoint"] for p in block) and len(block) == 3
        members = [m for p in block for m in p["cross"]]
        assert sorted(members) == sorted((c, s) for c in configurations
                                         for s in seeds[offset:offset + 3])
    # rotation r puts configuration i at the block's seed (i + r) mod k, as documented
    assert [p["cross"] for p in pairs if p["offset"] == 3] == [
        [("a", 3), ("b", 4), ("c", 5)], [("a", 4), ("b", 5), ("c", 3)], [("a", 5), ("b", 3), ("c", 4)]]
    # two seeds, k = 2: the second offset's ensembles are the first's, swapped; kept once
    two = R.matched_ensembles([BASE, LAST], [0, 1], k=2)
    assert [p["cross"] for p in two] == [[(BASE, 0), (LAST, 1)], [(BASE, 1), (LAST, 0)]]
    assert [(p["offset"], p["rotation"], p["disjoint"]) for p in two] == [(0, 0, True), (0, 1, True)]


def test_three_configurations_at_k_two_use_every_subset_at_every_offset():
    pairs = R.matched_ensembles(["a", "b", "c"], [0, 1, 2, 3], k=2)
    assert len(pairs) == 4 * 3 * 2
    assert [p["cross"] for p in pairs[6:12]] == [
        [("a", 1), ("b", 2)], [("a", 2), ("b", 1)], [("a", 1), ("c", 2)], [("a", 2), ("c", 1)],
        [("b", 1), ("c", 2)], [("b", 2), ("c", 1)]]
    assert [p["control_configurations"] for p in pairs[6:12:2]] == [("a", "b"), ("a", "c"), ("b", "c")]
    assert pairs[10]["controls"] == pairs[11]["controls"] == [[("b", 1), ("b", 2)], [("c", 1), ("c", 2)]]
    # every disjoint block's controls weigh each configuration as often as its cross ensembles do
    block = [p for p in pairs if p["offset"] == 2]
    assert sorted(c for p in block for c, _ in p["cross"]) == sorted(
        c for p in block for c in p["control_configurations"]) == ["a"] * 4 + ["b"] * 4 + ["c"] * 4
    assert [p["offset"] for p in pairs if p["disjoint"]] == [0] * 6 + [2] * 6


@pytest.mark.parametrize("k", [1, 3])
def test_k_must_leave_every_member_its_own_seed_and_configuration(k):
    with pytest.raises(ValueError, match="k <= min"):
        R.matched_ensembles([BASE, LAST, "copy first 3"], [0, 1], k)


def test_rq5_ensembles_have_the_hand_listed_members(tmp_path):
    runs = _toy_grid(tmp_path, configurations=(BASE, LAST), seeds=(0, 1, 2))
    ensembles = R.rq5_ensembles(runs)
    cross = ensembles[ensembles["kind"] == "cross-configuration"]
    same = ensembles[ensembles["kind"] == "same-configuration"]
    assert cross["run_keys"].tolist() == [_keys(m) for m in (
        [(BASE, 0), (LAST, 1)], [(BASE, 1), (LAST, 0)], [(BASE, 1), (LAST, 2)],
        [(BASE, 2), (LAST, 1)], [(BASE, 2), (LAST, 0)], [(BASE, 0), (LAST, 2)])]
    blocks = ((0, 1), (1, 2), (2, 0))
    assert same["run_keys"].tolist() == [_keys([(c, s), (c, t)]) for s, t in blocks
                                         for _ in range(2) for c in (BASE, LAST)]
    assert same["configuration"].tolist() == [BASE, LAST] * 6 and cross["configuration"].isna().all()
    assert cross["members"].iloc[4] == "baseline (seed 2) + copy last (seed 0)"
    assert cross["members"].iloc[1] == "baseline (seed 1) + copy last (seed 0)"
    for kind, times in ((cross, 1), (same, 2)):  # each cross ensemble, then its two controls
        assert kind["pair"].tolist() == [p for p in range(6) for _ in range(times)]
        assert kind["offset"].tolist() == [p // 2 for p in range(6) for _ in range(times)]
        assert kind["rotation"].tolist() == [p % 2 for p in range(6) for _ in range(times)]
        assert kind["seeds"].tolist() == [s for s in ("0 + 1", "1 + 2", "2 + 0")
                                          for _ in range(2 * times)]
        assert kind["disjoint"].tolist() == [d for d in (True, False, False)
                                             for _ in range(2 * times)]
        assert set(kind["k"]) == {2}
    assert ensembles["kind"].tolist()[6:9] == ["cross-configuration", "same-configuration",
                                               "same-configuration"]
    singles = ensembles[ensembles["kind"] == "single"]
    assert singles["run_keys"].tolist() == [_toy_key(c, s) for s in (0, 1, 2) for c in (BASE, LAST)]
    assert singles["seed"].tolist() == [0, 0, 1, 1, 2, 2] and singles["rotation"].isna().all()
    # every ensemble's metric is the ensemble of its hand-listed members
    assert 100 * cross["metrics.accuracy"].iloc[4] == _score(runs, [(BASE, 2), (LAST, 0)])
    assert 100 * cross["metrics.accuracy"].iloc[1] == _score(runs, [(BASE, 1), (LAST, 0)])
    assert 100 * same["metrics.accuracy"].iloc[5] == _score(runs, [(LAST, 1), (LAST, 2)])
    assert R.rq5_ensembles(runs).equals(ensembles)  # deterministic


@pytest.mark.parametrize("missing, offset", [
    # (LAST, 2) is in offset 1 (cross B1 + L2) and in offset 2's control L2 + L0: only 0 stays
    ((LAST, 2), 0),
    # (LAST, 0) is in offset 0's control L0 + L1 and offset 2's cross B2 + L0: only 1 stays
    # (a pair lacking a run is skipped, not the end of the pairs)
    ((LAST, 0), 1)])
def test_a_missing_run_drops_the_pairs_that_need_it_from_both_arms(tmp_path, missing, offset):
    runs = _toy_grid(tmp_path, configurations=(BASE, LAST), seeds=(0, 1, 2), missing=[missing])
    ensembles = R.rq5_ensembles(runs)
    s, t = offset, offset + 1  # both assignments of the block that stays
    assert ensembles.loc[ensembles["kind"] == "cross-configuration", "run_keys"].tolist() == [
        _keys([(BASE, s), (LAST, t)]), _keys([(BASE, t), (LAST, s)])]
    assert ensembles.loc[ensembles["kind"] == "same-configuration", "run_keys"].tolist() == [
        _keys([(BASE, s), (BASE, t)]), _keys([(LAST, s), (LAST, t)])] * 2
    assert ensembles["pair"].dropna().tolist() == [0, 0, 0, 1, 1, 1]
    assert ensembles["offset"].dropna().tolist() == [offset] * 6


def test_two_runs_of_one_configuration_and_seed_are_refused(tmp_path):
    runs = _toy_grid(tmp_path, configurations=(BASE, LAST), seeds=(0, 1))
    twice = pd.concat([runs, runs.iloc[[0]].assign(run_key="feedfacefeedface")])
    with pytest.raises(OutputsMismatch, match="two runs of 'baseline' at seed 0"):
        R.rq5_ensembles(twice)


def test_summary_and_differences_test_only_disjoint_seed_blocks(tmp_path):
    """3 configurations x 4 seeds, k = 2: 4 offsets x 3 subsets x 2 assignments = 24 pairs, each
    with 2 controls; blocks j = 0 (seeds 0, 1) and j = 2 (seeds 2, 3); the other partition
    (``start=1``) j = 1 (seeds 1, 2) and j = 3 (seeds 3, 0)."""
    a, b, c = "baseline", "copy first 3", "copy last"
    runs = _toy_grid(tmp_path, configurations=(a, b, c), seeds=(0, 1, 2, 3))
    ensembles = R.rq5_ensembles(runs, k=2)
    assert ensembles["kind"].value_counts().to_dict() == {
        "single": 12, "cross-configuration": 24, "same-configuration": 48}
    subsets = ((a, b), (a, c), (b, c))

    def block(s, t):  # each cross ensemble, and the mean of its two configurations alone
        cross = [_score(runs, members) for x, y in subsets
                 for members in ([(x, s), (y, t)], [(x, t), (y, s)])]
        alone = {x: _score(runs, [(x, s), (x, t)]) for x in (a, b, c)}
        control = [(alone[x] + alone[y]) / 2 for x, y in subsets for _ in range(2)]
        return np.array(cross), np.array(control)

    (cross0, control0), (cross2, control2) = block(0, 1), block(2, 3)
    summary = R.rq5_summary(ensembles, baseline=a)
    accuracy = summary[summary["metric"] == "accuracy"].set_index("kind")
    assert accuracy["n"].to_dict() == {"single": 12, "baseline": 4, "best single": 4,
                                       "cross-configuration": 2, "same-configuration": 2}
    assert accuracy.loc["cross-configuration", "mean"] == pytest.approx(
        (cross0.mean() + cross2.mean()) / 2)
    assert accuracy.loc["same-configuration", "mean"] == pytest.approx(
        (control0.mean() + control2.mean()) / 2)
    all_cross = 100 * ensembles.loc[ensembles["kind"] == "cross-configuration", "metrics.accuracy"]
    assert accuracy.loc["cross-configuration", "n_all"] == 24
    # each control ensemble once: 4 offsets x 3 configurations, though 48 rows pair them
    assert accuracy.loc["same-configuration", "n_all"] == 12
    distinct = R.distinct_ensembles(ensembles)
    assert distinct["kind"].value_counts().to_dict() == {
        "single": 12, "cross-configuration": 24, "same-configuration": 12}
    assert not distinct.duplicated(["kind", "run_keys"]).any()
    assert list(distinct.columns) == list(ensembles.columns) and distinct.index.tolist() == list(range(48))
    same_rows = ensembles[ensembles["kind"] == "same-configuration"]
    assert same_rows.groupby("run_keys")["metrics.accuracy"].nunique().eq(1).all()  # scored alike
    assert accuracy.loc["cross-configuration", "mean_all"] == pytest.approx(all_cross.mean())
    single = ensembles[ensembles["kind"] == "single"]
    means = single.groupby("configuration", sort=False)["metrics.accuracy"].mean()
    assert accuracy.loc["best single", "configuration"] == means.idxmax()
    assert accuracy.loc["baseline", "mean"] == pytest.approx(100 * means[a])
    assert accuracy.loc["single", "mean"] == pytest.approx(100 * single["metrics.accuracy"].mean())

    differences = R.rq5_differences(ensembles)
    differences = differences[differences["metric"] == "accuracy"].set_index("comparison")
    matched = differences.loc["cross-configuration − same-configuration"]
    units = np.array([(cross0 - control0).mean(), (cross2 - control2).mean()])
    assert (matched["n_pairs"], matched["n_units"]) == (24, 2)
    assert matched["difference"] == pytest.approx(units.mean())
    assert matched["test"] == "paired t over disjoint seed blocks"
    expected_p = (float(stats.ttest_1samp(units, 0.0).pvalue) if np.ptp(units) > 0
                  else (1.0 if units[0] == 0 else 0.0))
    assert matched["p_value"] == pytest.approx(expected_p)
    best = single[single["configuration"] == means.idxmax()].set_index("seed")["metrics.accuracy"]
    versus_best = differences.loc["cross-configuration − best single"]
    best_units = [cross0.mean() - 100 * best[[0, 1]].mean(), cross2.mean() - 100 * best[[2, 3]].mean()]
    assert versus_best["difference"] == pytest.approx(np.mean(best_units))
    assert (versus_best["n_pairs"], versus_best["n_units"]) == (24, 2)
    # the other partition of the seeds into disjoint blocks: {1, 2} and {3, 0}, wrapping round
    other = R.rq5_differences(ensembles, start=1).set_index(["metric", "comparison"]).loc[
        ("accuracy", "cross-configuration − same-configuration")]
    (cross1, control1), (cross3, control3) = block(1, 2), block(3, 0)
    assert other["n_units"] == 2 and other["n_pairs"] == 24
    assert other["difference"] == pytest.approx(np.mean([(cross1 - control1).mean(),
                                                        (cross3 - control3).mean()]))
    with pytest.raises(ParameterError, match=r"^start must be below k = 2 of toy on sst2, got 2$"):
        R.rq5_differences(ensembles, start=2)


def test_seed_partitions_are_every_way_to_cut_the_seeds_into_disjoint_blocks():
    assert R.seed_partitions([3, 1, 2, 0], 2) == [((0, 1), (2, 3)), ((0, 2), (1, 3)),
                                                  ((0, 3), (1, 2))]
    eight = R.seed_partitions(list(range(8)), 2)
    assert len(eight) == len(set(eight)) == 105  # 8! / (2^4 4!)
    assert all(sorted(s for block in p for s in block) == list(range(8)) for p in eight)
    assert eight[0] == ((0, 1), (2, 3), (4, 5), (6, 7))  # the planned partition first
    assert len(R.seed_partitions(list(range(6)), 3)) == 10
    assert len(R.seed_partitions(list(range(10)), 2)) == 945
    assert R.seed_partitions([5], 1) == [((5,),)]
    with pytest.raises(ValueError, match=r"^7 seeds cannot be cut into disjoint blocks of 2: "
                                         r"give a multiple of 2 seeds$"):
        R.seed_partitions(list(range(7)), 2)
    for seeds, k, message in (([1, 1], 2, "seeds must be distinct seeds: 1 appears 2 times in "
                                          "[1, 1]"),
                              ([0.5], 1, "seeds[0] must be an integer, got 0.5"),
                              ([0, 1], 0, "k must be an integer >= 1, got 0")):
        with pytest.raises(ParameterError, match="^" + re.escape(message) + "$"):
            R.seed_partitions(seeds, k)
    assert type(R.count_partitions(8, 2)) is int  # an exact count, not a float


def test_every_partition_of_the_seeds_tests_the_blocks_it_is_made_of(tmp_path):
    """3 configurations x 4 seeds, k = 2: the partitions {0 1, 2 3}, {0 2, 1 3}, {0 3, 1 2}.
    Each block's unit, scored by hand: over the 3 subsets x 2 assignments, the cross ensemble
    minus the mean of its two configurations alone at the block's seeds. The two cyclic
    partitions are those of rq5_differences' start 0 and 1."""
    a, b, c = "baseline", "copy first 3", "copy last"
    runs = _toy_grid(tmp_path, configurations=(a, b, c), seeds=(0, 1, 2, 3))
    subsets = ((a, b), (a, c), (b, c))

    def unit(s, t):
        alone = {x: _score(runs, [(x, s), (x, t)]) for x in (a, b, c)}
        return np.mean([_score(runs, members) - (alone[x] + alone[y]) / 2 for x, y in subsets
                        for members in ([(x, s), (y, t)], [(x, t), (y, s)])])

    found = R.rq5_partition_differences(runs, k=2)
    assert list(found.columns) == R.PARTITION_COLUMNS
    assert set(found["model"]) == {"toy"} and set(found["task"]) == {"sst2"}
    assert set(found["metric"]) == {"accuracy"}  # the task's primary metric
    assert found["blocks"].tolist() == ["0 + 1 | 2 + 3", "0 + 2 | 1 + 3", "0 + 3 | 1 + 2"]
    assert found["partition"].tolist() == [0, 1, 2] and set(found["n_units"]) == {2}
    for row, blocks in zip(found.itertuples(), (((0, 1), (2, 3)), ((0, 2), (1, 3)),
                                                ((0, 3), (1, 2)))):
        units = np.array([unit(*block) for block in blocks])
        assert row.difference == pytest.approx(units.mean())
        assert (row.ci_low, row.ci_high) == pytest.approx(
            stats.t.interval(0.95, 1, units.mean(), stats.sem(units)))
        assert row.p_value == pytest.approx(float(stats.ttest_1samp(units, 0.0).pvalue))
    ensembles = R.rq5_ensembles(runs, k=2)
    for start, partition in ((0, 0), (1, 2)):
        cyclic = R.rq5_differences(ensembles, start=start).set_index(["metric", "comparison"]).loc[
            ("accuracy", "cross-configuration − same-configuration")]
        assert found.loc[partition, "difference"] == pytest.approx(cyclic["difference"])
        assert found.loc[partition, "p_value"] == pytest.approx(cyclic["p_value"])
    # a missing run drops only the pairs that need it: without copy last at seed 3, a block
    # with seed 3 is scored on (baseline, copy first 3) alone
    partial = runs[runs["run_key"] != _toy_key(c, 3)]
    alone = {x: _score(runs, [(x, 2), (x, 3)]) for x in (a, b)}
    unit23 = np.mean([_score(runs, m) - (alone[a] + alone[b]) / 2
                      for m in ([(a, 2), (b, 3)], [(a, 3), (b, 2)])])
    first = R.rq5_partition_differences(partial, k=2).iloc[0]
    assert first["blocks"] == "0 + 1 | 2 + 3"
    assert first["difference"] == pytest.approx((unit(0, 1) + unit23) / 2)
    # every block with seed 3 then lacks every pair: no partition is whole
    two = _toy_grid(tmp_path / "two", configurations=(a, c), seeds=(0, 1, 2, 3),
                    missing={(c, 3)})
    assert R.rq5_partition_differences(two, k=2).empty
    # three seeds cannot be cut into pairs; two seeds make one partition, rq5_differences'
    # own; one configuration makes no cross ensemble
    assert R.rq5_partition_differences(runs[runs["seed"] < 3], k=2).empty
    assert R.rq5_partition_differences(runs[runs["seed"] < 2], k=2).empty
    assert R.rq5_partition_differences(runs[runs["duplication"] == a]).empty
    with pytest.raises(ParameterError, match=r"^k must be an integer >= 2, got 1"):
        R.rq5_partition_differences(runs, k=1)
    with pytest.raises(ParameterError, match="^" + re.escape(
            "toy on sst2: 4 seeds in blocks of 2 make 3 partitions, more than max_partitions=2 "
            "(each costs about half a millisecond, and every block its ensembles): raise "
            "max_partitions, or give fewer seeds") + "$"):
        R.rq5_partition_differences(runs, k=2, max_partitions=2)
    assert len(R.rq5_partition_differences(runs, k=2, max_partitions=3)) == 3  # at the cap
    with pytest.raises(ParameterError, match=r"^max_partitions must be an integer >= 1, got 0$"):
        R.rq5_partition_differences(runs, k=2, max_partitions=0)
    other = runs.copy()
    other.loc[0, "max_eval_samples"] = 4
    with pytest.raises(OutputsMismatch, match="^" + re.escape(
            "toy on sst2: runs of 2 settings (hyper-parameters, subset sizes or seed, data "
            "source); keep one") + "$"):
        R.rq5_partition_differences(other, k=2)
    # a model and task that cannot be partitioned does not stop the next one
    first = runs[runs["seed"] < 2].assign(model="alone")  # two seeds: one partition only
    lone = runs[runs["duplication"] == a].assign(model="lone")  # one configuration
    after = R.rq5_partition_differences(pd.concat([first, lone, runs.assign(model="zz"), runs]),
                                        k=2)
    assert after["model"].tolist() == ["zz"] * 3 + ["toy"] * 3  # in the order given
    nothing = R.rq5_partition_differences(first, k=2)
    assert nothing.empty and list(nothing.columns) == R.PARTITION_COLUMNS
    with pytest.raises(ParameterError, match=r"^runs: missing columns "):
        R.rq5_partition_differences(pd.DataFrame())
    # a partition with an empty block is left out, the later ones kept: without baseline at
    # seed 0 and copy first 3 at seed 1, block {0, 1} has no pair whose runs all exist
    holes = runs[~runs["run_key"].isin([_toy_key(a, 0), _toy_key(b, 1)])]
    assert R.rq5_partition_differences(holes, k=2)["partition"].tolist() == [1, 2]


# 4 toy examples: two blocks can differ by one ulp, which scipy's t-test warns about
@pytest.mark.filterwarnings("ignore:Precision loss occurred:RuntimeWarning")
def test_partitions_into_blocks_of_three_contain_the_cyclic_ones(tmp_path):
    """3 configurations x 6 seeds, k = 3: 10 partitions; the cyclic ones from s1 ({1 2 3},
    {4 5 0}) and s2 ({2 3 4}, {5 0 1}) are partitions 9 and 3, and give rq5_differences'
    start 1 and 2."""
    runs = _toy_grid(tmp_path, seeds=(0, 1, 2, 3, 4, 5))
    found = R.rq5_partition_differences(runs, k=3).set_index("partition")
    assert len(found) == R.count_partitions(6, 3) == 10
    assert (found.loc[9, "blocks"], found.loc[3, "blocks"]) == ("0 + 4 + 5 | 1 + 2 + 3",
                                                                "0 + 1 + 5 | 2 + 3 + 4")
    ensembles = R.rq5_ensembles(runs, k=3)
    for start, partition in ((0, 0), (1, 9), (2, 3)):
        cyclic = R.rq5_differences(ensembles, start=start).set_index(["metric", "comparison"]).loc[
            ("accuracy", "cross-configuration − same-configuration")]
        assert found.loc[partition, "difference"] == pytest.approx(cyclic["difference"])
    assert [R.count_partitions(n, k) for n, k in ((8, 2), (16, 2), (7, 2), (5, 5))] == [
        105, 2027025, 0, 1]


def test_one_disjoint_block_gives_no_test_but_every_pair_described(tmp_path):
    runs = _toy_grid(tmp_path, configurations=(BASE, LAST), seeds=(0, 1, 2))
    differences = R.rq5_differences(R.rq5_ensembles(runs)).set_index(["metric", "comparison"])
    matched = differences.loc[("accuracy", "cross-configuration − same-configuration")]
    pairs = [(cross, [(BASE, s), (BASE, t)], [(LAST, s), (LAST, t)])
             for s, t in ((0, 1), (1, 2), (2, 0))
             for cross in ([(BASE, s), (LAST, t)], [(BASE, t), (LAST, s)])]
    each = [_score(runs, x) - (_score(runs, y) + _score(runs, z)) / 2 for x, y, z in pairs]
    assert (matched["n_pairs"], matched["n_units"]) == (6, 1)
    assert matched["mean_all"] == pytest.approx(np.mean(each))
    assert matched["difference"] == pytest.approx(np.mean(each[:2]))  # offset 0, both assignments
    assert np.isnan(matched["p_value"]) and np.isnan(matched["ci_low"])


def test_one_seed_gives_single_runs_only_and_k_below_2_is_refused(tmp_path):
    ensembles = R.rq5_ensembles(_toy_grid(tmp_path, seeds=(0,)))
    assert set(ensembles["kind"]) == {"single"}
    with pytest.raises(ValueError, match=r"^k must be an integer >= 2, got 1$"):
        R.rq5_ensembles(_toy_grid(tmp_path), k=1)


def test_runs_of_two_settings_are_refused(tmp_path):
    runs = _toy_grid(tmp_path)
    runs.loc[0, "max_eval_samples"] = 4
    with pytest.raises(OutputsMismatch, match=r"^toy on sst2: runs of 2 settings "
                                              r"\(hyper-parameters, subset sizes or seed, "
                                              r"data source\); keep one$"):
        R.rq5_ensembles(runs)


def test_rq5_ensembles_keep_the_models_in_their_order_and_no_runs_give_the_columns(tmp_path):
    grid = _toy_grid(tmp_path, configurations=(BASE, LAST), seeds=(0, 1))
    both = R.rq5_ensembles(pd.concat([grid.assign(model="zz"), grid.assign(model="aa")]))
    assert both.drop_duplicates("model")["model"].tolist() == ["zz", "aa"]
    one = R.rq5_ensembles(grid)
    for model in ("zz", "aa"):  # each model's rows are the one-model result under its name
        part = both[both["model"] == model].reset_index(drop=True)
        pd.testing.assert_frame_equal(part, one.assign(model=model))
    none = R.rq5_ensembles(grid.iloc[:0])
    assert none.empty and list(none.columns) == [
        "model", "task", "kind", "k", "pair", "offset", "rotation", "disjoint", "seed", "seeds",
        "configuration", "members", "run_keys"]


def _study_key(sweeps, model, task, configuration, seed):
    """The run key the tiny study's sweep gives a run, rebuilt from its arguments by
    dupbert.core.results.run_key: independent of the RQ5 code."""
    part = next(p for p in sweeps if p["models"] == [model] and p["tasks"] == [task])
    kind = "qa" if task == "squad2" else "classification"
    hp = HyperParameters.for_task(kind, **part["hyperparameters"][kind])
    return run_key({"model": model, "task": task, "duplication": configuration, "seed": seed,
                    "hyperparameters": dataclasses.asdict(hp),
                    "max_train_samples": part["max_train_samples"],
                    "max_eval_samples": part["max_eval_samples"], "train_subset_seed": 0})


def test_rq5_on_the_tiny_study(tiny_study):
    """USPTO-50k: 3 configurations x 3 seeds, k = 3; SQuAD 2.0: 2 x 2, k = 2."""
    study_runs = tiny_study.runs

    def key(*run):
        return _study_key(tiny_study.sweeps, *run)

    ensembles = R.rq5_ensembles(study_runs)
    counts = ensembles.groupby(["model", "task", "kind"], sort=False).size().to_dict()
    albert, minilm = ("rxnmapper-albert", "uspto50k"), ("all-MiniLM-L6-v2", "squad2")
    assert counts == {(*albert, "single"): 9, (*albert, "cross-configuration"): 3,
                      (*albert, "same-configuration"): 9, (*minilm, "single"): 4,
                      (*minilm, "cross-configuration"): 2, (*minilm, "same-configuration"): 4}
    r, s, c = "baseline", "repeat shared +3", "copy last"
    # k = n = 3: the three rotations of offset 0 are every assignment the later offsets would
    # repeat, so all pairs are at offset 0 (one disjoint block)
    expected = {  # (kind, pair, configuration): members, by the rule written out by hand
        ("cross-configuration", 0, None): [(r, 0), (s, 1), (c, 2)],
        ("cross-configuration", 1, None): [(r, 1), (s, 2), (c, 0)],
        ("cross-configuration", 2, None): [(r, 2), (s, 0), (c, 1)],
        **{("same-configuration", pair, x): [(x, 0), (x, 1), (x, 2)]
           for pair in (0, 1, 2) for x in (r, s, c)}}
    found = ensembles[(ensembles["model"] == albert[0]) & (ensembles["kind"] != "single")]
    assert {(kind, pair, x if isinstance(x, str) else None): keys.split() for kind, pair, x, keys in
            zip(found["kind"], found["pair"], found["configuration"], found["run_keys"])} == {
        slot: [key(*albert, x, seed) for x, seed in members]
        for slot, members in expected.items()}
    assert set(found["offset"]) == {0} and found["disjoint"].all()
    squad = ensembles[(ensembles["model"] == minilm[0]) & (ensembles["kind"] != "single")]
    d = "copy first 3"
    assert squad["run_keys"].str.split().tolist() == [
        [key(*minilm, x, seed) for x, seed in members]
        for members in ([(r, 0), (d, 1)], [(r, 0), (r, 1)], [(d, 0), (d, 1)],
                        [(r, 1), (d, 0)], [(r, 0), (r, 1)], [(d, 0), (d, 1)])]
    assert squad["disjoint"].tolist() == [True] * 6 and squad["rotation"].tolist() == [0] * 3 + [1] * 3
    # a single run scores as its row says (the one-model ensemble reproduces the run)
    singles = ensembles[ensembles["kind"] == "single"].set_index("run_keys")
    stored = study_runs.set_index("run_key")
    for metric in ("accuracy", "f1"):
        rows = singles[f"metrics.{metric}"].dropna()
        assert rows.to_dict() == stored.loc[rows.index, f"metrics.{metric}"].to_dict()

    summary = R.rq5_summary(ensembles, baseline="baseline")
    assert len(summary) == 2 * 5 + 4 * 5  # (USPTO 2 metrics + SQuAD 4) x 5 kinds
    cell = summary[(summary["task"] == "uspto50k") & (summary["metric"] == "accuracy")]
    cell = cell.set_index("kind")
    assert cell["n"].to_dict() == {"single": 9, "baseline": 3, "best single": 3,
                                   "cross-configuration": 1, "same-configuration": 1}
    assert cell.loc["baseline", "mean"] == pytest.approx(
        100 * stored.loc[[key(*albert, r, x) for x in (0, 1, 2)], "metrics.accuracy"].mean())
    block = found[(found["kind"] == "cross-configuration") & (found["offset"] == 0)]
    assert cell.loc["cross-configuration", "mean"] == pytest.approx(
        100 * block["metrics.accuracy"].mean())
    assert json.loads(summary.to_json())  # plain values
    differences = R.rq5_differences(ensembles)
    assert set(differences["n_units"]) == {1} and differences["p_value"].isna().all()
    assert set(differences.loc[differences["task"] == "uspto50k", "n_pairs"]) == {3}


# ----------------------------------------------------------------------------- fast reading tests
# (the tiny study's tests read real runs; these pin the same rules on hand-written files, fast
# enough for mutation testing to run them for every mutant)


def _results_file(path, *rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in rows))
    return path


def test_read_runs_keeps_each_run_once_with_its_outputs_folder(tmp_path):
    first = _results_file(tmp_path / "a" / "rq3.jsonl",
                          {"run_key": "k1", "seed": 0, "metrics": {"accuracy": 0.5}},
                          {"run_key": "k2", "seed": 1, "metrics": {"accuracy": 0.75}})
    second = _results_file(tmp_path / "b.jsonl",
                           {"run_key": "k2", "seed": 9, "metrics": {"accuracy": 0.0}},
                           {"run_key": "k3", "seed": 2, "metrics": {"accuracy": 1.0}})
    runs = E.read_runs([first, str(second)])
    assert runs["run_key"].tolist() == ["k1", "k2", "k3"]
    assert runs["seed"].tolist() == [0, 1, 2]  # the first file's k2 wins
    assert runs["metrics.accuracy"].tolist() == [0.5, 0.75, 1.0]
    assert runs["outputs_dir"].tolist() == [str(tmp_path / "a" / "rq3-outputs")] * 2 + [
        str(tmp_path / "b-outputs")]
    assert list(runs.index) == [0, 1, 2]
    chosen = E.read_runs([first, second], [tmp_path / "x", None])
    assert chosen["outputs_dir"].tolist() == [str(tmp_path / "x")] * 2 + [str(tmp_path / "b-outputs")]
    one = E.read_runs(second, tmp_path / "y")
    assert one["outputs_dir"].tolist() == [str(tmp_path / "y")] * 2
    assert E.read_runs(str(second))["outputs_dir"].tolist() == [str(tmp_path / "b-outputs")] * 2


def test_read_runs_refuses_missing_files_and_unmatched_folders(tmp_path):
    present = _results_file(tmp_path / "r.jsonl", {"run_key": "k1"})
    with pytest.raises(ValueError, match=r"^2 outputs folders for 1 results files$"):
        E.read_runs([present], [tmp_path, tmp_path])
    missing = tmp_path / "none.jsonl"
    with pytest.raises(FileNotFoundError, match=(
            rf"^no results file {missing}: run RQ3 first \(dupbert finetune --results \.\.\. "
            r"--outputs-dir \.\.\., or make book\)$")):
        E.read_runs([present, missing])


@pytest.mark.parametrize("row, max_length, n_features", [
    ({"model": "all-MiniLM-L6-v2", "max_eval_samples": 4,
      "hyperparameters": {"max_length": 128, "doc_stride": 64}}, 128, 9),
    ({"model": "all-MiniLM-L6-v2", "max_eval_samples": np.float64(4.0),
      "hyperparameters.max_length": 64, "hyperparameters.doc_stride": 32}, 64, 31),
], ids=["nested", "flattened"])
def test_squad_eval_set_rederives_the_scored_features(row, max_length, n_features,
                                                      shared_data_dir, zoo_cache):
    examples, features = E.squad_eval_set(row, data_dir=shared_data_dir)
    ids = ['572a0ecb1d0469140077971a', '572ff07304bcaa1900d76ef5', '5ad4dc755b96ef001a10a471',
           '5733a6ac4776f41900660f5c']
    assert examples["id"] == ids  # the first 4 of the seeded subset, as the run scored them
    assert set(features["example_id"]) == set(ids)
    lengths = [len(f) for f in features["input_ids"]]  # the row's max_length and doc_stride
    assert max(lengths) == max_length and len(lengths) == n_features
    assert len(features["offset_mapping"]) == n_features


# ----------------------------------------------------------------------------- span helpers, exact


def test_log_probabilities_scatter_candidates_and_leave_the_rest_impossible():
    member = {"start_index": np.array([[2, 0, -1]]), "start_logit": np.array([[1.0, 0.5, 9.0]]),
              "start_logsumexp": np.array([2.0])}
    dense = E._log_probabilities(member, "start", 4)
    assert dense.tolist() == [[-1.5, -math.inf, -1.0, -math.inf]]  # -1 pads: no candidate


def test_logmeanexp_averages_probabilities_stably():
    inf = math.inf
    stack = np.array([[0.0, -inf, math.log(3), 1000.0],
                      [math.log(3), -inf, -inf, 1000.0 + math.log(3)]])
    assert E._logmeanexp(stack) == pytest.approx(
        [math.log(2), -inf, math.log(1.5), 1000.0 + math.log(2)])


def test_ranked_union_orders_by_mean_probability_and_pads():
    log = np.log
    with np.errstate(divide="ignore"):
        members = np.array([[[log(.5), log(.5), 0.0, 0.0], [log(.9), 0.0, 0.0, 0.0]],
                            [[log(.2), 0.0, log(.8), 0.0], [log(.1), 0.0, 0.0, 0.0]]])
        members[0, 0, 2] = members[1, 0, 1] = -math.inf  # each start token of only one member
        members[:, 1, 1:] = -math.inf
    context = np.array([[True, True, True, False], [True, True, True, False]])
    index, found = E._ranked_union(members, context, 4)
    # feature 0: mean probabilities .35, .25, .4 (token 3 is not context); feature 1: token 0 only
    assert index.tolist() == [[2, 0, 1], [0, -1, -1]]
    assert found.tolist() == [[True, True, True], [True, False, False]]
    index, found = E._ranked_union(members, context, 2)
    assert index.tolist() == [[2, 0], [0, -1]]
    nothing, none_found = E._ranked_union(np.full((1, 1, 2), -math.inf), np.ones((1, 2), bool), 2)
    assert nothing.tolist() == [[-1]] and none_found.tolist() == [[False]]


def test_joint_scores_of_one_member_are_log_and_of_several_the_mean_probability():
    log = np.log
    one, is_log = E._joint_scores(log(np.array([[[0.5, 0.25]]])), log(np.array([[[0.5, 0.5]]])))
    assert is_log and np.allclose(one, log([[[0.25, 0.25], [0.125, 0.125]]]))
    starts = log(np.array([[[0.5, 0.25]], [[1.0, 0.5]]]))  # 2 members, 1 feature, 2 candidates
    ends = log(np.array([[[0.5, 0.5]], [[0.25, 1.0]]]))
    joint, is_log = E._joint_scores(starts, ends)
    assert not is_log and joint.shape == (1, 2, 2)
    assert np.allclose(joint, [[[(0.25 + 0.25) / 2, (0.25 + 1.0) / 2],
                                [(0.125 + 0.125) / 2, (0.125 + 0.5) / 2]]])


# ----------------------------------------------------------------------------- loading and settings


def test_the_missing_outputs_message_names_the_run_and_the_fix(tmp_path):
    row = {**_row("0123456789abcdef", duplication="copy last", seed=3), "model": "m"}
    with pytest.raises(OutputsNotFound) as error:
        E.load_outputs([row], outputs_dir=tmp_path)  # the folder given, not one in the row
    path = tmp_path / "0123456789abcdef.npz"
    assert str(error.value) == (
        f"no stored outputs for run 0123456789abcdef (m, sst2, 'copy last', seed 3): {path} does "
        "not exist. Ensembles need the per-example outputs of every member: re-run it with outputs "
        f"saved (dupbert finetune ... --outputs-dir {tmp_path}, or finetune(..., outputs_dir=...), "
        "or the rq3 notebook's outputs_dir parameter).")


def test_outputs_load_from_a_given_folder_and_a_frame_of_rows(tmp_path):
    rows = [_save(tmp_path, _row("a"), probabilities=A, labels=LABELS),
            _save(tmp_path, _row("b"), probabilities=B, labels=LABELS)]
    bare = [{k: v for k, v in row.items() if k != "outputs_dir"} for row in rows]
    loaded = E.load_outputs(pd.DataFrame(bare), outputs_dir=tmp_path)
    assert [sorted(m) for m in loaded] == [["labels", "probabilities"]] * 2
    np.testing.assert_array_equal(loaded[1]["probabilities"], B)
    assert E.evaluate_ensemble(pd.DataFrame(bare), outputs_dir=tmp_path) == {
        "accuracy": 1.0, "macro_f1": 1.0}
    with pytest.raises(ValueError, match=r"^run a: no outputs folder given and none in the row$"):
        E.outputs_path(bare[0])


def test_runs_combine_only_on_one_evaluation_setting(tmp_path):
    assert E._setting(_row("a")) == ("sst2", None, 3, 128, 128)  # the model does not matter
    assert E._setting({**_row("a", task="squad2"), "max_eval_samples": float("nan")}) == (
        "squad2", "toy", None, 128, 128)  # for SQuAD it does: its tokenizer makes the features
    assert E._setting({**_row("a", task="mine"), "max_eval_samples": None}) == (
        "mine", None, None, 128, 128)
    rows = [_save(tmp_path, _row("a"), probabilities=A, labels=LABELS),
            _save(tmp_path, _row("b", max_eval_samples=4), probabilities=B, labels=LABELS)]
    with pytest.raises(OutputsMismatch) as error:
        E.evaluate_ensemble(rows)
    assert str(error.value) == (
        "the members were not evaluated on the same inputs (task, model for SQuAD, "
        "max_eval_samples, max_length, doc_stride differ): [('sst2', None, 3, 128, 128), "
        "('sst2', None, 4, 128, 128)]")
    with pytest.raises(ValueError, match="^an ensemble needs at least one member$"):
        E.evaluate_ensemble([])


def test_rq5_tables_have_their_documented_columns_sizes_and_configurations(tmp_path):
    runs = _toy_grid(tmp_path, configurations=(BASE, LAST), seeds=(0, 1, 2))
    ensembles = R.rq5_ensembles(runs)
    summary = R.rq5_summary(ensembles, baseline=BASE)
    assert list(summary.columns) == ["model", "task", "metric", "kind", "k", "n", "mean", "std",
                                     "ci_low", "ci_high", "configuration", "n_all", "mean_all"]
    assert set(summary["model"]) == {"toy"} and set(summary["task"]) == {"sst2"}
    accuracy = summary[summary["metric"] == "accuracy"]
    best = ensembles[ensembles["kind"] == "single"].groupby("configuration")[
        "metrics.accuracy"].mean().idxmax()
    assert accuracy[["kind", "k", "n", "n_all"]].values.tolist() == [
        ["single", 1, 6, 6], ["baseline", 1, 3, 3], ["best single", 1, 3, 3],
        ["cross-configuration", 2, 1, 6], ["same-configuration", 2, 1, 6]]
    assert accuracy["configuration"].tolist()[1:3] == [BASE, best]
    assert accuracy["configuration"].isna().tolist() == [True, False, False, True, True]
    assert summary["metric"].tolist() == ["accuracy"] * 5 + ["macro_f1"] * 5
    one_unit = accuracy.set_index("kind").loc["cross-configuration"]
    assert np.isnan(one_unit["std"]) and np.isnan(one_unit["ci_low"]) and np.isnan(one_unit["ci_high"])
    differences = R.rq5_differences(ensembles)
    assert list(differences.columns) == R.DIFFERENCE_COLUMNS
    assert differences[["model", "task", "metric"]].drop_duplicates().values.tolist() == [
        ["toy", "sst2", "accuracy"], ["toy", "sst2", "macro_f1"]]
    assert differences["n_units"].tolist() == [1] * 4
    assert differences["ci_low"].isna().all() and differences["ci_high"].isna().all()


def test_classifier_members_must_agree_in_shape_and_labels():
    with pytest.raises(ValueError, match="^an ensemble needs at least one member$"):
        E.mean_probabilities([])
    with pytest.raises(ValueError, match="^an ensemble needs at least one member$"):
        E.ensemble_classification([])
    with pytest.raises(OutputsMismatch, match=r"^members' probabilities must all be \[N, C\] of one "
                                              r"shape, got \{\(3, 2\), \(2, 2\)\}$|^members' "
                                              r"probabilities must all be \[N, C\] of one shape, "
                                              r"got \{\(2, 2\), \(3, 2\)\}$"):
        E.mean_probabilities([A, A[:2]])
    with pytest.raises(OutputsMismatch, match=r"got \{\(3,\)\}$"):
        E.mean_probabilities([LABELS.astype(float)])
    assert E.mean_probabilities([A.astype(np.float64)]).dtype == np.float32
    with pytest.raises(OutputsMismatch) as error:
        E.ensemble_classification([{"probabilities": A, "labels": LABELS},
                                   {"probabilities": B, "labels": np.array([1, 1, 0])}])
    assert str(error.value) == ("the members' labels differ: they were not evaluated on the same "
                                "examples (same task and max_eval_samples needed)")


def test_macro_f1_averages_both_classes():
    # class 0: precision 1, recall 2/3 -> F1 0.8; class 1: precision 1/2, recall 1 -> F1 2/3
    probabilities = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.1, 0.9]])
    metrics = E.classification_metrics(np.array([0, 0, 0, 1]), probabilities)
    assert metrics == {"accuracy": 0.75, "macro_f1": pytest.approx((0.8 + 2 / 3) / 2)}


def test_runs_of_another_learning_rate_or_subset_seed_are_another_setting(tmp_path):
    runs = _toy_grid(tmp_path)
    for column, value in (("hyperparameters.learning_rate", 1e-4), ("train_subset_seed", 1)):
        other = runs.assign(**{column: runs.get(column)})
        other.loc[0, column] = value
        with pytest.raises(OutputsMismatch, match="^toy on sst2: runs of 2 settings "):
            R.rq5_ensembles(other)


def test_rq5_differences_give_the_t_interval_over_disjoint_blocks(tmp_path):
    runs = _toy_grid(tmp_path, configurations=(BASE, LAST), seeds=(0, 1, 2, 3))
    differences = R.rq5_differences(R.rq5_ensembles(runs, k=2)).set_index(["metric", "comparison"])
    matched = differences.loc[("accuracy", "cross-configuration − same-configuration")]

    def unit(s, t):  # block of seeds s, t: both cross ensembles minus their controls' mean
        cross = (_score(runs, [(BASE, s), (LAST, t)]) + _score(runs, [(BASE, t), (LAST, s)])) / 2
        return cross - (
            _score(runs, [(BASE, s), (BASE, t)]) + _score(runs, [(LAST, s), (LAST, t)])) / 2

    from dupbert.core.significance import mean_ci
    expected = mean_ci([unit(0, 1), unit(2, 3)])
    assert matched["n_units"] == 2
    assert (matched["difference"], matched["ci_low"], matched["ci_high"]) == pytest.approx(
        (expected["mean"], expected["ci_low"], expected["ci_high"]))


def test_span_outputs_have_the_top_candidates_form_in_blocks_of_features():
    """130 features (more than one block of 128): every feature gets its own best span; the
    arrays are the one-candidate top_candidates form; no valid span gives -1 and -inf."""
    spans = E.ensemble_spans([MODEL_A, MODEL_B], FEATURES["offset_mapping"])
    assert {k: (v.dtype, v.shape) for k, v in spans.items()} == {
        "start_index": (np.int64, (2, 1)), "end_index": (np.int64, (2, 1)),
        "start_logit": (np.float32, (2, 1)), "end_logit": (np.float32, (2, 1)),
        "null_score": (np.float32, (2,))}
    assert not spans["end_logit"].any()
    many = [{"start": {3: 0.9}, "end": {4: 0.9}, "null": 0.01}] * 129 + [
        {"start": {5: 0.9}, "end": {4: 0.9}, "null": 0.01}]  # the last one only reversed: none
    member = _candidates(many)
    spans = E.ensemble_spans([member, member], [OFFSETS] * 130)
    assert spans["start_index"][:, 0].tolist() == [3] * 129 + [-1]
    assert spans["end_index"][:, 0].tolist() == [4] * 129 + [-1]
    np.testing.assert_allclose(np.exp(spans["start_logit"][:129, 0]), 0.81, rtol=2e-3)
    assert spans["start_logit"][129, 0] == -np.inf


def test_span_inputs_must_match_the_features():
    with pytest.raises(ValueError, match="^an ensemble needs at least one member$"):
        E.ensemble_spans([], FEATURES["offset_mapping"])
    with pytest.raises(OutputsMismatch, match="^a member has 2 features, the evaluation set 1$"):
        E.ensemble_spans([MODEL_A], FEATURES["offset_mapping"][:1])
    with pytest.raises(OutputsMismatch, match="^a stored candidate points at token 4, but the "
                                              "longest feature has 4 tokens$"):
        E.ensemble_spans([MODEL_A], [OFFSETS[:4], OFFSETS[:4]])


def test_a_squad_ensemble_is_scored_on_the_rederived_evaluation_set(tmp_path, shared_data_dir,
                                                                    zoo_cache):
    """The SQuAD path of evaluate_ensemble without training: two members that store no span
    candidate (every feature says "no answer") score as the all-empty prediction does; the
    evaluation set is re-derived once per setting."""
    from dupbert.training.metrics import squad_v2

    row = {**_row("s1", task="squad2"), "model": "all-MiniLM-L6-v2", "max_eval_samples": 4,
           "hyperparameters": {"max_length": 128, "doc_stride": 64}}
    evaluator = E.Evaluator(data_dir=shared_data_dir, outputs_dir=tmp_path)
    examples, features = evaluator.eval_set(row)
    assert evaluator.eval_set({**row, "run_key": "s2"}) is evaluator._eval_sets[E._setting(row)]
    n = len(features["example_id"])
    silent = dict(start_index=np.full((n, 3), -1, np.int16), end_index=np.full((n, 3), -1, np.int16),
                  start_logit=np.full((n, 3), -np.inf, np.float16),
                  end_logit=np.full((n, 3), -np.inf, np.float16),
                  start_logsumexp=np.zeros(n, np.float16), end_logsumexp=np.zeros(n, np.float16),
                  null_score=np.zeros(n, np.float16), example_id=np.array(features["example_id"]))
    rows = [_save(tmp_path, row, **silent), _save(tmp_path, {**row, "run_key": "s2"}, **silent)]
    expected = dict(squad_v2(qa.as_squad_json(examples), {i: "" for i in examples["id"]}))
    assert evaluator(rows) == expected and evaluator(rows[:1]) == expected
    assert expected["exact"] == 25.0  # one of the four questions has no answer


def test_stored_features_must_be_as_many_as_the_rederived_ones():
    short = {**MODEL_B, "example_id": np.array(["q0"])}
    with pytest.raises(OutputsMismatch) as error:
        E.check_example_ids([MODEL_A, short], FEATURES)
    assert str(error.value) == (
        "member 1: 1 stored features but 2 re-derived ones; the run was scored on other examples "
        "or with another tokenizer, max_length or doc_stride than its row says")
    with pytest.raises(OutputsMismatch, match="^run b: 1 stored features"):
        E.check_example_ids([MODEL_A, short], FEATURES, ["run a", "run b"])


def test_answers_of_one_token_up_to_the_longest_allowed_and_the_null_threshold():
    one_token = _candidates([{"start": {3: 0.9}, "end": {3: 0.9}, "null": 0.0001},
                             {"start": {1: 0.9}, "end": {2: 0.9}, "null": 0.0001}])
    assert E.ensemble_squad_predictions([one_token], EXAMPLES, FEATURES) == {
        "q0": "gamma", "q1": "alpha beta"}
    # two tokens are allowed at max_answer_length 2, not at 1
    assert E.ensemble_squad_predictions([one_token], EXAMPLES, FEATURES, max_answer_length=2) == {
        "q0": "gamma", "q1": "alpha beta"}
    assert E.ensemble_squad_predictions([one_token], EXAMPLES, FEATURES, max_answer_length=1) == {
        "q0": "gamma", "q1": ""}
    # no answer when null > best span + threshold (run_qa.py): log(0.0001) - log(0.81) = -9.0
    assert E.ensemble_squad_predictions([one_token], EXAMPLES, FEATURES,
                                        null_score_diff_threshold=-9.5) == {"q0": "", "q1": ""}
    assert E.ensemble_squad_predictions([one_token], EXAMPLES, FEATURES,
                                        null_score_diff_threshold=-8.5) == {"q0": "gamma",
                                                                           "q1": "alpha beta"}


def test_sample_counts_read_from_a_frame_are_whole_numbers():
    """A frame column with a missing value stores 3 as 3.0: it is the same setting as 3."""
    assert E._setting({**_row("a"), "max_eval_samples": 3.0}) == E._setting(_row("a"))
    assert E._none_if_nan(3.0) == 3 and E._none_if_nan(float("nan")) is None
    assert E._none_if_nan(None) is None and E._none_if_nan(np.int64(5)) == 5


def _ensembles(rows):
    """An rq5_ensembles-like frame from ``(model, kind, configuration, seed, accuracy, macro_f1)``."""
    return pd.DataFrame([dict(model=m, task="sst2", kind=kind, k=1 if kind == "single" else 2,
                              pair=None, offset=None, disjoint=None, seed=seed, seeds=str(seed),
                              configuration=c, members=c, run_keys=f"{m}{c}{seed}",
                              **{"metrics.accuracy": acc, "metrics.macro_f1": f1})
                         for m, kind, c, seed, acc, f1 in rows])


def test_best_single_is_chosen_on_the_primary_metric_over_single_runs_only():
    ensembles = _ensembles([
        ("z", "single", "z-first", 0, 0.6, 0.9), ("z", "single", "a-second", 0, 0.6, 0.5),
        ("z", "single", "mid", 0, 0.5, 0.99), ("z", "cross-configuration", "x", 0, 0.99, 0.99),
        ("a", "single", "only", 0, 0.1, 0.1)])
    best = R.best_single(ensembles)
    # accuracy decides (not macro-F1); a tie keeps the first configuration; ensembles never count
    assert best.values.tolist() == [["z", "sst2", "z-first"], ["a", "sst2", "only"]]
    none = R.best_single(ensembles[ensembles["kind"] != "single"])
    assert none.empty and list(none.columns) == ["model", "task", "configuration"]


def test_best_single_is_a_configuration_with_every_seed():
    """A configuration with one lucky seed of three does not beat one with all three."""
    ensembles = _ensembles([
        ("m", "single", "baseline", 0, 0.80, 0.8), ("m", "single", "baseline", 1, 0.82, 0.8),
        ("m", "single", "baseline", 2, 0.81, 0.8), ("m", "single", "copy last", 0, 0.90, 0.9),
        ("m", "single", "copy first 3", 0, 0.79, 0.8), ("m", "single", "copy first 3", 1, 0.85, 0.8),
        ("m", "single", "copy first 3", 2, 0.83, 0.8)])
    assert R.best_single(ensembles).values.tolist() == [["m", "sst2", "copy first 3"]]
    alone = ensembles[ensembles["configuration"] == "copy last"]
    assert R.best_single(alone).values.tolist() == [["m", "sst2", "copy last"]]


def test_ensemble_points_are_one_row_per_run_and_metric_in_points():
    ensembles = _ensembles([("z", "single", "c", 0, 0.5, 0.25), ("a", "single", "c", 1, 1.0, 0.75)])
    points = R.ensemble_points(ensembles)
    assert list(points.columns) == ["model", "task", "kind", "k", "pair", "offset", "disjoint",
                                    "seed", "seeds", "configuration", "members", "metric", "value"]
    assert list(points.index) == [0, 1, 2, 3]
    assert points[["model", "metric", "value"]].values.tolist() == [
        ["z", "accuracy", 50.0], ["z", "macro_f1", 25.0], ["a", "accuracy", 100.0],
        ["a", "macro_f1", 75.0]]
    only_f1 = R.ensemble_points(ensembles.drop(columns=["metrics.accuracy"]))
    assert only_f1["metric"].tolist() == ["macro_f1", "macro_f1"]


def test_rq5_summary_without_a_baseline_keeps_the_other_kinds(tmp_path):
    runs = _toy_grid(tmp_path, configurations=(BASE, LAST), seeds=(0, 1, 2))
    summary = R.rq5_summary(R.rq5_ensembles(runs))
    assert summary.loc[summary["metric"] == "accuracy", "kind"].tolist() == [
        "single", "best single", "cross-configuration", "same-configuration"]


def test_members_need_distinct_configurations_and_seeds_and_single_runs_name_their_seed(tmp_path):
    for configurations, seeds, message in (
            (["a", "a"], [0, 1], "configurations must be distinct configuration names: 'a' "
                                 "appears 2 times in ['a', 'a']"),
            (["a", "b"], [1, 1], "seeds must be distinct seeds: 1 appears 2 times in [1, 1]")):
        with pytest.raises(ValueError) as refused:
            R.matched_ensembles(configurations, seeds, k=2)
        assert str(refused.value) == message
    ensembles = R.rq5_ensembles(_toy_grid(tmp_path, configurations=(BASE, LAST), seeds=(0, 1)))
    single = ensembles[ensembles["kind"] == "single"]
    assert (single["seeds"] == single["seed"].astype(str)).all()


def test_the_null_score_is_normalised_by_both_log_normalisers():
    member = {**MODEL_A, "start_logsumexp": np.array([1.0, 0.5], np.float16),
              "end_logsumexp": np.array([0.25, 2.0], np.float16)}
    spans = E.ensemble_spans([member], FEATURES["offset_mapping"])
    expected = np.log([0.0001, 0.81]) - np.array([1.25, 2.5])
    np.testing.assert_allclose(spans["null_score"], expected, rtol=1e-3)


def _hand_study():
    """Three models in non-alphabetical order, as rq5_ensembles rows (accuracy = macro-F1):
    ``zz``: single runs of one seed, no ensembles; ``b``: the best single configuration
    (copy last) lacks a run at every cross ensemble's seeds; ``a``: 5 seeds, k = 2, disjoint
    blocks at offsets 0 and 2, copy last (best) and baseline missing at seed 1 (so that copy last
    has the most seeds), and no macro-F1 for its same-configuration ensembles."""
    rows = [("zz", "single", "baseline", 0, None, 0.50), ("zz", "single", "zz-best", 0, None, 0.60)]
    rows += [("b", "single", "baseline", s, None, v) for s, v in ((0, .70), (1, .72))]
    rows += [("b", "single", "copy last", s, None, v) for s, v in ((2, .80), (3, .82))]
    rows += [("b", kind, None, None, p, v) for kind, values in (
        ("cross-configuration", (.90, .91)), ("same-configuration", (.85, .86)))
        for p, v in enumerate(values)]
    rows += [("a", "single", "baseline", s, None, .60 + .02 * s) for s in (0, 2, 3, 4)]
    rows += [("a", "single", "copy last", s, None, v) for s, v in ((0, .70), (2, .74), (3, .76), (4, .78))]
    rows += [("a", "cross-configuration", None, None, p, .80 + .01 * p) for p in range(5)]
    rows += [("a", "same-configuration", None, None, p, .78 + .005 * p) for p in range(5)]
    n_seeds = {"zz": 1, "b": 4, "a": 5}
    frame = []
    for model, kind, configuration, seed, pair, value in rows:
        single = kind == "single"
        seeds = str(seed) if single else f"{pair} + {(pair + 1) % n_seeds[model]}"
        frame.append(dict(
            model=model, task="sst2", kind=kind, k=1 if single else 2, pair=pair, offset=pair,
            disjoint=None if single else (pair % 2 == 0 and pair + 2 <= n_seeds[model]),
            seed=seed, seeds=seeds, configuration=configuration, members=seeds, run_keys=seeds,
            **{"metrics.accuracy": value,
               "metrics.macro_f1": np.nan if (model, kind) == ("a", "same-configuration") else value}))
    return pd.DataFrame(frame)


def test_rq5_summary_of_several_models_keeps_their_order_and_empty_kinds():
    summary = R.rq5_summary(_hand_study(), baseline="baseline")
    assert list(summary.columns) == ["model", "task", "metric", "kind", "k", "n", "mean", "std",
                                     "ci_low", "ci_high", "configuration", "n_all", "mean_all"]
    assert summary.drop_duplicates("model")["model"].tolist() == ["zz", "b", "a"]
    zz = summary[(summary["model"] == "zz") & (summary["metric"] == "accuracy")].set_index("kind")
    assert zz.index.tolist() == ["single", "baseline", "best single"]
    assert zz["configuration"].tolist()[1:] == ["baseline", "zz-best"]
    assert pd.isna(zz.loc["single", "configuration"])
    assert zz.loc["best single", ["n", "mean"]].tolist() == [1, 60.0]
    a = summary[summary["model"] == "a"].set_index(["metric", "kind"])
    got = a.loc["accuracy"][["n", "mean", "n_all", "mean_all"]].round(6).values.tolist()
    assert got == [[8, 69.5, 8, 69.5],  # 60, 64, 66, 68 and 70, 74, 76, 78
                   [4, 64.5, 4, 64.5], [4, 74.5, 4, 74.5],
                   [2, 81.0, 5, 82.0],  # blocks at offsets 0, 2: 80, 82
                   [2, 78.5, 5, 79.0]]  # blocks 78, 79
    assert a.loc[("accuracy", "best single"), "configuration"] == "copy last"
    empty = a.loc[("macro_f1", "same-configuration")]  # every value NaN: no unit, nothing invented
    assert (empty["n"], empty["n_all"], empty["k"]) == (0, 0, 2)
    assert empty[["mean", "std", "ci_low", "ci_high", "mean_all"]].isna().all()


def test_rq5_differences_of_several_models_pair_each_with_its_own_best_single():
    differences = R.rq5_differences(_hand_study())
    assert differences[["model", "metric"]].drop_duplicates().values.tolist() == [
        ["b", "accuracy"], ["b", "macro_f1"], ["a", "accuracy"], ["a", "macro_f1"]]
    table = differences.set_index(["model", "metric", "comparison"])
    cols = ["n_pairs", "mean_all", "n_units", "difference"]
    same, best = "cross-configuration − same-configuration", "cross-configuration − best single"
    # a: cross - same = 2 + 0.5 p (p = 0..4); blocks at offsets 0 and 2
    np.testing.assert_allclose(table.loc[("a", "accuracy", same), cols].astype(float), [5, 3.0, 2, 2.5])
    # a: copy last at the ensemble's seeds; "0 + 1" and "1 + 2" lack seed 1 and are left out:
    # 82 - 75, 83 - 77, 84 - 74; only the block at offset 2 is left: one unit, no interval
    row = table.loc[("a", "accuracy", best)]
    np.testing.assert_allclose(row[cols].astype(float), [3, 23 / 3, 1, 7.0])
    assert np.isnan(row["ci_low"]) and np.isnan(row["p_value"])
    # a's macro-F1 has no control values: nothing to pair
    assert table.loc[("a", "macro_f1", same), ["n_pairs", "n_units"]].tolist() == [0, 0]
    # b: its best single configuration has no run at any ensemble's seeds: no pair, no unit
    np.testing.assert_allclose(table.loc[("b", "accuracy", same), cols].astype(float), [2, 5.0, 1, 5.0])
    empty = table.loc[("b", "accuracy", best)]
    assert (empty["n_pairs"], empty["n_units"]) == (0, 0)
    assert empty[["mean_all", "difference", "ci_low", "ci_high", "p_value"]].isna().all()
    none = R.rq5_differences(_hand_study().query("model == 'zz'"))
    assert none.empty and list(none.columns) == R.DIFFERENCE_COLUMNS


def test_ranked_union_breaks_ties_by_token_index_on_wide_features():
    """Forty context tokens, four probability levels, shuffled: tied tokens keep index order
    (numpy's default sort is not stable beyond 16 entries)."""
    levels = np.repeat(np.log([.04, .03, .02, .01]), 10)[np.random.default_rng(0).permutation(40)]
    index, found = E._ranked_union(levels[None, None, :], np.ones((1, 40), bool), 40)
    expected = sorted(range(40), key=lambda token: (-levels[token], token))
    assert index[0].tolist() == expected and found.all()


def test_rq5_keeps_only_configurations_whose_planned_seeds_have_all_landed():
    from dupbert.study.profiles import PlannedSweep

    plan = [PlannedSweep(model="m", task="snli", duplications=("baseline", "copy first 3", "copy last",
                                                              "depth control"),
                         max_train_samples=None, max_eval_samples=None, seeds=(0, 1, 2, 3)),
            PlannedSweep(model="r", task="uspto50k", duplications=("baseline",),
                         max_train_samples=None, max_eval_samples=None, seeds=(0, 1))]
    runs = pd.DataFrame(
        [{"model": "m", "task": "snli", "duplication": d, "seed": s}
         for d, seeds in (("baseline", range(4)), ("copy first 3", range(4)), ("copy last", (0, 1)))
         for s in seeds]
        + [{"model": "m", "task": "snli", "duplication": "copy last", "seed": 7},  # not a planned seed
           {"model": "r", "task": "uspto50k", "duplication": "baseline", "seed": 0},
           {"model": "m", "task": "snli", "duplication": "baseline", "seed": 9},  # complete, unplanned seed
           {"model": "x", "task": "sst2", "duplication": "baseline", "seed": 0}])  # not planned
    kept, waiting = R.complete_configurations(runs, plan)
    assert waiting.values.tolist() == [["m", "snli", "copy last", 2, 4], ["m", "snli", "depth control", 0, 4],
                                       ["r", "uspto50k", "baseline", 1, 2]]
    assert list(waiting.columns) == R.WAITING_COLUMNS
    assert kept.index.tolist() == list(range(8)) + [13]  # m's complete two at their planned seeds, and x
    same, none = R.complete_configurations(runs, None)
    assert same is runs and none.empty and list(none.columns) == R.WAITING_COLUMNS


def test_a_complete_plan_leaves_nothing_waiting():
    from dupbert.study.profiles import PlannedSweep

    plan = [PlannedSweep(model="m", task="snli", duplications=("baseline",), max_train_samples=None,
                         max_eval_samples=None, seeds=(0, 1))]
    runs = pd.DataFrame([{"model": "m", "task": "snli", "duplication": "baseline", "seed": s}
                         for s in (0, 1)])
    kept, waiting = R.complete_configurations(runs, plan)
    assert kept.equals(runs) and waiting.empty and list(waiting.columns) == R.WAITING_COLUMNS


def test_a_control_without_the_metric_drops_its_pair_instead_of_half_a_control():
    study = _hand_study()
    a = study[study["model"] == "a"]
    # pair 0 of model a gets a second control, whose macro-F1 is known while the first one's is not
    extra = a[(a["kind"] == "same-configuration") & (a["pair"] == 0)].assign(
        **{"metrics.macro_f1": 0.70, "configuration": "copy last"})
    differences = R.rq5_differences(pd.concat([a, extra], ignore_index=True)).set_index(
        ["metric", "comparison"])
    matched = differences.loc[("macro_f1", "cross-configuration − same-configuration")]
    assert matched["n_pairs"] == 0  # every pair has a control without macro-F1
    accuracy = differences.loc[("accuracy", "cross-configuration − same-configuration")]
    # pair 0's control: the mean of its two controls, 78 and 78 points
    assert (accuracy["n_pairs"], accuracy["mean_all"]) == (5, pytest.approx(3.0))


# ----------------------------------------------------------------------------- bad input


from dupbert.study.ensemble import OutputsInvalid  # noqa: E402
from dupbert.core.errors import ParameterError  # noqa: E402

NAN_B = np.array([[0.2, 0.8], [np.nan, np.nan], [0.7, 0.3]], np.float16)


def test_a_member_with_nan_probabilities_is_refused_by_its_run_not_scored_as_class_0(tmp_path):
    rows = [_save(tmp_path, _row("a"), probabilities=A, labels=LABELS),
            _save(tmp_path, _row("b", seed=3), probabilities=NAN_B, labels=LABELS)]
    message = ("run b (toy, sst2, 'baseline', seed 3): its stored probabilities are NaN at 1 of 3 "
               "examples (first: example 1): a run with NaN outputs (a fine-tuning that diverged) "
               "cannot be scored or combined; re-run it")
    for members in (rows, rows[1:]):  # in an ensemble, and alone (its argmax would be class 0)
        with pytest.raises(OutputsInvalid) as refused:
            E.evaluate_ensemble(members)
        assert str(refused.value) == message
    with pytest.raises(OutputsInvalid) as refused:
        E.ensemble_classification([{"probabilities": A, "labels": LABELS},
                                   {"probabilities": NAN_B, "labels": LABELS}])
    assert str(refused.value).startswith("member 1: its stored probabilities are NaN at 1 of 3 ")
    with pytest.raises(OutputsInvalid) as refused:
        E.classification_metrics(LABELS, NAN_B)
    assert str(refused.value) == ("probabilities are NaN at 1 of 3 examples (first: example 1): "
                                  "their argmax would be class 0 and the accuracy meaningless")
    with pytest.raises(OutputsMismatch) as refused:
        E.classification_metrics(LABELS[:2], A)
    assert str(refused.value) == ("probabilities must be [N, C] and labels [N], got probabilities "
                                  "of shape (3, 2) and labels of shape (2,)")
    assert isinstance(refused.value, ValueError) and issubclass(OutputsInvalid, DupbertError)


def test_a_squad_member_with_nan_scores_is_refused():
    broken = {**MODEL_A, "null_score": np.array([0.0, np.nan], np.float32)}
    with pytest.raises(OutputsInvalid) as refused:
        E.ensemble_spans([MODEL_A, broken], FEATURES["offset_mapping"])
    assert str(refused.value) == (
        "member 1: its stored null_score are NaN at 1 of 2 features (first: feature 1): a run "
        "with NaN outputs (a fine-tuning that diverged) cannot be scored or combined; re-run it")
    # -inf pads the candidates of a feature with fewer tokens: allowed
    assert np.isneginf(MODEL_A["start_logit"]).any()
    assert E.ensemble_spans([MODEL_A], FEATURES["offset_mapping"])["start_index"].shape == (2, 1)


def test_read_runs_refuses_no_files_an_empty_file_and_a_file_that_is_not_rq3(tmp_path):
    with pytest.raises(ParameterError) as refused:
        E.read_runs([])
    assert str(refused.value) == "results_paths is empty: give at least one of the results files"
    empty = _results_file(tmp_path / "empty.jsonl")
    with pytest.raises(ParameterError) as refused:
        E.read_runs(empty)
    assert str(refused.value) == (f"results file {empty} holds no runs: run RQ3 first (dupbert "
                                  "finetune --results ..., or make book), or leave it out")
    pilot = _results_file(tmp_path / "pilot.jsonl", {"model": "m", "task": "snli", "seed": 100})
    with pytest.raises(ParameterError) as refused:
        E.read_runs(pilot)
    assert str(refused.value) == (
        f"results file {pilot} is not an RQ3 results file: its rows have no run_key (dupbert "
        "finetune writes one per run); its fields are ['model', 'seed', 'task']")  # sorted keys
    present = _results_file(tmp_path / "r.jsonl", {"run_key": "k1"})
    with pytest.raises(ParameterError, match="^results_paths must be distinct results files: "):
        E.read_runs([str(present), str(present)])


def test_rq5_tables_refuse_frames_without_their_columns_and_name_them():
    with pytest.raises(ParameterError) as refused:
        R.rq5_ensembles(pd.DataFrame())
    assert str(refused.value) == (
        "runs: missing columns ['run_key', 'model', 'task', 'duplication', 'seed'] (needed: "
        "['run_key', 'model', 'task', 'duplication', 'seed']); it has no columns (no runs)")
    for call in (R.rq5_summary, R.rq5_differences, R.ensemble_points):
        with pytest.raises(ParameterError, match=r"^ensembles: missing columns \['model', 'task', "
                                                 r"'kind', .*; it has no columns \(no runs\)$"):
            call(pd.DataFrame())
    with pytest.raises(ParameterError) as refused:
        R.distinct_ensembles(pd.DataFrame({"model": []}))
    assert str(refused.value) == ("ensembles: missing columns ['task', 'kind', 'run_keys'] "
                                  "(needed: ['model', 'task', 'kind', 'run_keys']); its columns "
                                  "are ['model']")


def test_rq5_tables_of_no_ensembles_have_their_columns():
    none = _hand_study().iloc[:0]
    summary = R.rq5_summary(none, baseline="baseline")
    assert summary.empty and list(summary.columns) == R.SUMMARY_COLUMNS
    assert list(R.rq5_summary(_hand_study()).columns) == R.SUMMARY_COLUMNS
    differences = R.rq5_differences(none)
    assert differences.empty and list(differences.columns) == R.DIFFERENCE_COLUMNS
    points = R.ensemble_points(none)
    assert points.empty and list(points.columns) == [
        "model", "task", "kind", "k", "pair", "offset", "disjoint", "seed", "seeds",
        "configuration", "members", "metric", "value"]
    no_metrics = R.ensemble_points(_hand_study().drop(columns=["metrics.accuracy",
                                                               "metrics.macro_f1"]))
    assert no_metrics.empty and list(no_metrics.columns) == list(points.columns)


def test_a_misspelt_baseline_and_a_best_single_without_its_metric_are_refused():
    study = _hand_study()
    with pytest.raises(ParameterError) as refused:
        R.rq5_summary(study, baseline="basline")
    assert str(refused.value) == ("baseline 'basline' is not a configuration of the single runs; "
                                  "they are ['baseline', 'zz-best', 'copy last']")
    with pytest.raises(ParameterError) as refused:
        R.best_single(study.drop(columns=["metrics.accuracy"]))
    assert str(refused.value) == ("zz on sst2: no metrics.accuracy column, the primary metric that "
                                  "picks the best single configuration; the metric columns are "
                                  "['metrics.macro_f1']")
    nan = study.copy()
    nan.loc[(nan["model"] == "a") & (nan["kind"] == "single") & (nan["seed"] == 3)
            & (nan["configuration"] == "copy last"), "metrics.accuracy"] = np.nan
    with pytest.raises(ParameterError) as refused:
        R.best_single(nan)
    assert str(refused.value) == ("a on sst2: the single run of 'copy last' at seed 3 has no "
                                  "metrics.accuracy (NaN): the best single configuration is chosen "
                                  "on the mean over every seed; re-run it or drop its row")


@pytest.mark.parametrize("call, message", [
    (lambda: R.ensemble_size(3, -1), "n_seeds must be an integer >= 0, got -1"),
    (lambda: R.ensemble_size(2.5, 3), "n_configurations must be an integer >= 0, got 2.5"),
    (lambda: R.matched_ensembles("abc", [0, 1], 2),
     "configurations must be a list of configuration names, got the string 'abc'; write ['abc'] for one"),
    (lambda: R.matched_ensembles(["a", "b"], "01", 2),
     "seeds must be a list of seeds, got the string '01'; write ['01'] for one"),
    (lambda: R.matched_ensembles(["a", "b"], [0, 1.5], 2), "seeds[1] must be an integer, got 1.5"),
    (lambda: R.matched_ensembles(["a", "b"], [0, 1], "2"), "k must be an integer, got '2' (str)"),
    (lambda: R.rq5_ensembles(pd.DataFrame(), k=2.5), "k must be an integer >= 2, got 2.5"),
])
def test_sizes_and_lists_are_refused_with_their_value(call, message):
    with pytest.raises(ParameterError) as refused:
        call()
    assert str(refused.value) == message


def test_ensemble_points_leave_out_a_squad_subset_metric_the_evaluation_set_lacks():
    """An ensemble's SQuAD 2.0 metrics (official keys) on a set without unanswerable questions
    have no NoAns_f1: beside a model whose set has them, that NaN is left out, not a value."""
    rows = [dict(model=m, task="squad2", kind="single", k=1, pair=None, offset=None,
                 disjoint=None, seed=0, seeds="0", configuration="baseline", members="baseline",
                 run_keys=m, **{"metrics.f1": f1, "metrics.exact": f1, "metrics.total": 4,
                                "metrics.HasAns_f1": f1, "metrics.HasAns_total": has,
                                "metrics.NoAns_f1": noans, "metrics.NoAns_total": n_noans})
            for m, f1, has, noans, n_noans in (("answers-only", 50.0, 4, np.nan, np.nan),
                                               ("mixed", 60.0, 2, 80.0, 2))]
    points = R.ensemble_points(pd.DataFrame(rows))
    assert points[["model", "metric", "value"]].values.tolist() == [
        ["answers-only", "f1", 50.0], ["answers-only", "exact", 50.0],
        ["answers-only", "HasAns_f1", 50.0], ["mixed", "f1", 60.0], ["mixed", "exact", 60.0],
        ["mixed", "HasAns_f1", 60.0], ["mixed", "NoAns_f1", 80.0]]
