"""dupbert.training.qa: SQuAD 2.0 features and post-processing on real SQuAD questions with the real
all-MiniLM-L6-v2 (bert-base-uncased vocabulary) fast tokenizer. Counts measured once, pinned."""

import re
from collections import Counter, defaultdict

import numpy as np
import pytest

from dupbert.training import qa
from dupbert.training.metrics import normalize_answer, squad_v2
from dupbert.training.tasks import (SQUAD_V2_FEATURES, squad_columns, strata, stratified_indices,
                           trivial_baselines)


def _official(path):
    """An official SQuAD 2.0 file as a Dataset in the task's schema (this module tests the
    feature processing on the official files, whatever split design `load_task` uses)."""
    import gzip
    import json

    import datasets

    with gzip.open(path, "rt", encoding="utf-8") as handle:
        columns = squad_columns(json.load(handle)["data"])
    return datasets.Dataset.from_dict(columns, features=SQUAD_V2_FEATURES)


@pytest.fixture(scope="module")
def tokenizer(zoo_cache):
    from dupbert.tools.models import load_encoder

    return load_encoder("all-MiniLM-L6-v2", cache=zoo_cache)[1]


@pytest.fixture(scope="module")
def train_batch(shared_data_dir):
    """All 4,719 questions of the staged SQuAD 2.0 train articles, as one batch (dict of lists)."""
    return _official(shared_data_dir / "squad2" / "train-v2.0.first10articles.json.gz")[:]


@pytest.fixture(scope="module")
def dev(shared_data_dir):
    """300 dev questions, stratified over the 35 articles: 149 answerable, 151 unanswerable."""
    full = _official(shared_data_dir / "squad2" / "dev-v2.0.reconstructed.json.gz")
    return full.select(stratified_indices(strata("squad2", full), 300, seed=0))


def _features(examples, tokenizer, **window):
    train = examples.map(lambda b: qa.prepare_train_features(b, tokenizer, **window), batched=True,
                         remove_columns=examples.column_names)
    evaluation = examples.map(lambda b: qa.prepare_eval_features(b, tokenizer, **window),
                              batched=True, remove_columns=examples.column_names)
    return train, evaluation


@pytest.fixture(scope="module")
def dev_features(dev, tokenizer):
    return _features(dev, tokenizer)


def _oracle_logits(train_features, width, big=10.0, pad=-100.0):
    """A large logit exactly at each feature's labelled start/end token (CLS if none), else 0;
    positions beyond a feature's length padded with -100, as ``Trainer.predict`` pads."""
    n = len(train_features)
    start = np.full((n, width), pad, np.float32)
    end = start.copy()
    for i, (ids, s, e) in enumerate(zip(train_features["input_ids"], train_features["start_positions"],
                                        train_features["end_positions"])):
        start[i, :len(ids)] = end[i, :len(ids)] = 0.0
        start[i, s], end[i, e] = big, big
    return start, end


# ---------------------------------------------------------------------------------------- features


@pytest.mark.slow
def test_train_features_round_trip_to_the_gold_answer(train_batch, tokenizer):
    train = qa.prepare_train_features(train_batch, tokenizer)  # max_length 384, stride 128
    evaluation = qa.prepare_eval_features(train_batch, tokenizer)
    assert train["input_ids"] == evaluation["input_ids"]
    n = len(train["input_ids"])
    assert n == 4812
    assert Counter(Counter(evaluation["example_id"]).values()) == {1: 4634, 2: 77, 3: 8}
    lengths = Counter(len(ids) for ids in train["input_ids"])
    assert max(lengths) == 384 and lengths[384] == 93 and len(lengths) > 100  # no padding
    assert all(all(train["attention_mask"][i]) for i in range(n))

    row = {question_id: r for r, question_id in enumerate(train_batch["id"])}
    counts, found = Counter(), set()
    for i, (s, e) in enumerate(zip(train["start_positions"], train["end_positions"])):
        r = row[evaluation["example_id"][i]]
        gold, context = train_batch["answers"][r], train_batch["context"][r]
        if not gold["text"]:
            assert s == e == 0
            counts["unanswerable"] += 1
            continue
        if s == e == 0:
            counts["answer outside this window"] += 1
            continue
        offsets = evaluation["offset_mapping"][i]
        assert offsets[s] is not None and offsets[e] is not None and s <= e
        start_char = gold["answer_start"][0]
        end_char = start_char + len(gold["text"][0])
        # the labelled tokens are the smallest token span covering the gold characters
        assert offsets[s][0] <= start_char < offsets[s][1] and offsets[e][0] < end_char <= offsets[e][1]
        decoded = context[offsets[s][0]:offsets[e][1]]
        counts["inside"] += 1
        counts["decodes exactly"] += decoded == gold["text"][0]
        found.add(r)
    assert counts == {"unanswerable": 361, "answer outside this window": 64, "inside": 4387,
                      "decodes exactly": 4358}
    # every answerable question has a window holding its whole answer; the 29 inexact ones are
    # answers that start or end inside a word piece ('Tibet' in 'Tibetan', '7' in '1817')
    assert len(found) == 4371


def test_eval_features_keep_example_id_and_context_offsets(dev, dev_features):
    _, evaluation = dev_features
    assert len(evaluation) == 306 and set(evaluation["example_id"]) == set(dev["id"])
    # [CLS] question [SEP] (token type 0) context [SEP] (type 1): offsets only for the context
    for feature in evaluation.select(range(0, 306, 17)):
        offsets, types = feature["offset_mapping"], feature["token_type_ids"]
        assert len(offsets) == len(types) == len(feature["input_ids"])
        assert [o is None for o in offsets] == [t == 0 for t in types[:-1]] + [True]
    first = evaluation[0]
    assert first["offset_mapping"][8] == [0, 3] and dev[0]["context"][:3] == "The"


def test_bad_arguments():
    class Slow:
        is_fast = False

    with pytest.raises(TypeError, match="fast tokenizer"):
        qa.prepare_train_features({"question": ["q"], "context": ["c"], "answers": []}, Slow())


def test_doc_stride_must_be_below_max_length(tokenizer):
    with pytest.raises(ValueError, match="doc_stride"):
        qa.prepare_eval_features({"id": ["x"], "question": ["q"], "context": ["c"]}, tokenizer,
                                 max_length=64, doc_stride=64)


# ---------------------------------------------------------------------------------- post-processing


def test_oracle_logits_recover_the_gold_answers(dev, dev_features):
    train, evaluation = dev_features
    start, end = _oracle_logits(train, width=400)  # wider than any feature: padding is ignored
    predictions = qa.postprocess_predictions(dev, evaluation, start, end)
    assert list(predictions) == dev["id"][:]
    scores = squad_v2(qa.as_squad_json(dev), predictions)
    assert scores == {"exact": 100.0, "f1": 100.0, "total": 300,
                      "HasAns_exact": 100.0, "HasAns_f1": 100.0, "HasAns_total": 149,
                      "NoAns_exact": 100.0, "NoAns_f1": 100.0, "NoAns_total": 151}
    # the texts themselves, not only their normalised form, are the first gold answers
    for row in dev:
        assert predictions[row["id"]] == (row["answers"]["text"][:1] or [""])[0]
    # ragged per-feature logits (no padding) give the same answers
    lengths = [len(ids) for ids in train["input_ids"]]
    ragged = [s[:n] for s, n in zip(start, lengths)], [e[:n] for e, n in zip(end, lengths)]
    assert qa.postprocess_predictions(dev, evaluation, *ragged) == predictions


def test_oracle_with_many_small_windows(dev, tokenizer):
    """max_length 64, stride 24: up to 21 windows per question; the null score is the minimum over
    the windows, so an answer found in one window beats the CLS label of all the others."""
    examples = dev.select(range(60))
    train, evaluation = _features(examples, tokenizer, max_length=64, doc_stride=24)
    assert len(evaluation) == 361 and max(Counter(evaluation["example_id"]).values()) == 21
    predictions = qa.postprocess_predictions(examples, evaluation, *_oracle_logits(train, 64))
    assert squad_v2(qa.as_squad_json(examples), predictions)["exact"] == 100.0


def test_all_zero_logits(dev, dev_features):
    """All scores tie at 0: the null difference 0 is not above the threshold 0.0, so every
    question gets the best-ranked span, the first context token of its first window."""
    _, evaluation = dev_features
    zeros = np.zeros((len(evaluation), 384), np.float32)
    predictions = qa.postprocess_predictions(dev, evaluation, zeros, zeros)
    first_feature = {}
    for feature in evaluation:
        first_feature.setdefault(feature["example_id"], feature["offset_mapping"])
    for row in dev:
        offsets = first_feature[row["id"]]
        first = next(o for o in offsets if o is not None)
        assert predictions[row["id"]] == row["context"][first[0]:first[1]]
    assert Counter(predictions.values()).most_common(2) == [("The", 73), ("In", 26)]
    scores = squad_v2(qa.as_squad_json(dev), predictions)
    # "The" normalises to "" (articles are removed), which counts as a correct "no answer"
    no_answer = [r for r in dev if not r["answers"]["text"]]
    assert scores["NoAns_exact"] == pytest.approx(
        100 * sum(normalize_answer(predictions[r["id"]]) == "" for r in no_answer) / len(no_answer))
    assert round(scores["NoAns_exact"], 2) == 21.19 and scores["HasAns_exact"] == 0.0
    # any negative threshold turns every tie into "no answer": the all-empty baseline
    empty = qa.postprocess_predictions(dev, evaluation, zeros, zeros, null_score_diff_threshold=-0.5)
    assert set(empty.values()) == {""}
    assert squad_v2(qa.as_squad_json(dev), empty) == trivial_baselines("squad2", dev)


def _reference(examples, features, start, end, n_best=20, max_len=30, threshold=0.0):
    """The run_qa.py rules written as plain loops (context-only n-best, min null over windows)."""
    windows = defaultdict(list)
    for f, example_id in enumerate(features["example_id"]):
        windows[example_id].append(f)
    offsets_of = features["offset_mapping"]
    answers = {}
    for row in examples:
        best, min_null = None, None
        for f in windows[row["id"]]:
            offsets = offsets_of[f]
            s_log, e_log = start[f][:len(offsets)], end[f][:len(offsets)]
            null = s_log[0] + e_log[0]
            min_null = null if min_null is None or null < min_null else min_null
            context = [j for j, o in enumerate(offsets) if o is not None]
            for s in sorted(context, key=lambda j: (-s_log[j], j))[:n_best]:
                for e in sorted(context, key=lambda j: (-e_log[j], j))[:n_best]:
                    if e < s or e - s + 1 > max_len:
                        continue
                    if best is None or s_log[s] + e_log[e] > best[0]:
                        best = (s_log[s] + e_log[e], row["context"][offsets[s][0]:offsets[e][1]])
        answers[row["id"]] = "" if best is None or min_null - best[0] > threshold else best[1]
    return answers


@pytest.mark.parametrize("n_best, threshold, every", [(20, 0.0, 3), (5, 1.0, 3), (400, -1.0, 12)])
def test_matches_a_plain_loop_reference_on_random_logits(dev, tokenizer, n_best, threshold, every):
    """n_best 400 > any window: the best of *all* valid spans, an exhaustive check."""
    examples = dev.select(range(0, 300, every))
    _, evaluation = _features(examples, tokenizer, max_length=128, doc_stride=48)  # many windows
    rng = np.random.default_rng(n_best)
    start, end = (rng.normal(size=(len(evaluation), 130)).astype(np.float32) for _ in range(2))
    start[:, 0] += 2.5  # a CLS bonus, so that some questions get "no answer" and some a span
    end[:, 0] += 2.5
    ours = qa.postprocess_predictions(examples, evaluation, start, end, n_best_size=n_best,
                                      null_score_diff_threshold=threshold)
    assert ours == _reference(examples, evaluation, start, end, n_best, 30, threshold)
    assert 0 < sum(a == "" for a in ours.values()) < len(ours)


# ---------------------------------------------------------------------------------------- candidates


def test_top_candidates_compact_form(dev, dev_features):
    train, evaluation = dev_features
    start, end = _oracle_logits(train, width=384)
    offsets = evaluation["offset_mapping"][:]
    candidates = qa.top_candidates(start, end, k=20, offset_mapping=offsets)
    n = len(evaluation)
    assert {k: (v.shape, v.dtype.name) for k, v in candidates.items()} == {
        "start_index": ((n, 20), "int16"), "start_logit": ((n, 20), "float16"),
        "end_index": ((n, 20), "int16"), "end_logit": ((n, 20), "float16"),
        "start_logsumexp": ((n,), "float16"), "end_logsumexp": ((n,), "float16"),
        "null_score": ((n,), "float16")}
    # unanswerable features: CLS labelled, so the null score is 20 and no candidate scores 10
    labelled_cls = np.asarray(train["start_positions"]) == 0
    assert np.array_equal(candidates["null_score"] == 20, labelled_cls)
    answerable = ~labelled_cls
    gold_starts = np.asarray(train["start_positions"])
    assert np.array_equal(candidates["start_index"][answerable, 0], gold_starts[answerable])
    # every candidate is a context token; logsumexp over each feature's real tokens
    for i in range(0, n, 37):
        assert all(offsets[i][j] is not None for j in candidates["start_index"][i])
        real = start[i, :len(offsets[i])].astype(np.float64)
        assert float(candidates["start_logsumexp"][i]) == pytest.approx(
            np.log(np.exp(real).sum()), rel=1e-3)
    # fp16 candidates select the same answers as the fp32 post-processing
    assert qa.select_answers(dev, evaluation, candidates) == qa.postprocess_predictions(
        dev, evaluation, start, end)
    # candidates saved without offsets: non-context tokens are dropped before span selection
    assert qa.select_answers(dev, evaluation, qa.top_candidates(start, end)) == qa.select_answers(
        dev, evaluation, candidates)


def test_top_candidates_pads_short_features():
    start = [np.array([5.0, 1.0, 3.0]), np.array([0.0, 2.0])]
    end = [np.array([4.0, 2.0, 2.0]), np.array([1.0, 0.0])]
    c = qa.top_candidates(start, end, k=4, dtype=np.float32)
    assert c["start_index"].tolist() == [[0, 2, 1, -1], [1, 0, -1, -1]]
    assert c["end_index"].tolist() == [[0, 1, 2, -1], [0, 1, -1, -1]]  # ties: lower index first
    assert np.isneginf(c["start_logit"][0, 3]) and c["null_score"].tolist() == [9.0, 1.0]
    assert c["start_logsumexp"][1] == pytest.approx(np.log(np.exp(0) + np.exp(2)))
    start_idx, end_idx, score = qa.best_spans(c, max_answer_length=2)
    assert start_idx.tolist() == [0, 1] and end_idx.tolist() == [0, 1] and score.tolist() == [9.0, 2.0]
    start_idx, end_idx, score = qa.best_spans(c, max_answer_length=1)
    assert (start_idx.tolist(), end_idx.tolist(), score.tolist()) == ([0, 1], [0, 1], [9.0, 2.0])


def test_mismatched_inputs_raise(dev, dev_features):
    _, evaluation = dev_features
    zeros = np.zeros((len(evaluation) - 1, 384), np.float32)
    with pytest.raises(ValueError, match="306 offset mappings for 305 features"):
        qa.postprocess_predictions(dev, evaluation, zeros, zeros)
    without_first = evaluation.filter(lambda f: f["example_id"] != dev[0]["id"])
    zeros = np.zeros((len(without_first), 384), np.float32)
    with pytest.raises(ValueError, match=f"1 examples have no feature, e.g. \\['{dev[0]['id']}'\\]"):
        qa.postprocess_predictions(dev, without_first, zeros, zeros)
    with pytest.raises(ValueError, match="features belong to no example"):
        qa.postprocess_predictions(dev.select(range(1, 300)), evaluation,
                                   *np.zeros((2, len(evaluation), 384), np.float32))
    with pytest.raises(ValueError, match="differ in shape"):
        qa.top_candidates(zeros, zeros[:, :10])


def test_null_odds_give_the_thresholded_answers_and_the_best_spans(dev, dev_features):
    train, evaluation = dev_features
    rng = np.random.default_rng(0)
    width = max(len(ids) for ids in evaluation["input_ids"])
    start = rng.normal(size=(len(evaluation), width)).astype(np.float32)
    end = rng.normal(size=(len(evaluation), width)).astype(np.float32)
    answers, best, null_odds = qa.predictions_with_null_odds(dev, evaluation, start, end)
    assert answers == qa.postprocess_predictions(dev, evaluation, start, end)
    for question, answer in answers.items():
        assert answer == ("" if null_odds[question] > 0 else best[question])
    # with the threshold at +infinity every question gets its best span
    never = qa.postprocess_predictions(dev, evaluation, start, end,
                                       null_score_diff_threshold=float("inf"))
    assert never == best and sum(v == "" for v in best.values()) == 0


# ---------------------------------------------------------------------------------- bad settings


@pytest.mark.parametrize("setting, message", [
    (dict(max_answer_length=0), "max_answer_length must be an integer >= 1, got 0"),
    (dict(max_answer_length=-3), "max_answer_length must be an integer >= 1, got -3"),
    (dict(max_answer_length=2.5), "max_answer_length must be an integer >= 1, got 2.5"),
    (dict(n_best_size=0), "n_best_size must be an integer >= 1, got 0"),
    (dict(null_score_diff_threshold=float("nan")),
     "null_score_diff_threshold must be a number (inf: never abstain), got nan"),
])
def test_settings_that_would_answer_nothing_are_refused(dev, dev_features, setting, message):
    """max_answer_length 0 allowed no span at all: every answer "", a plausible ~50 F1."""
    _, evaluation = dev_features
    zeros = np.zeros((len(evaluation), 384), np.float32)
    for postprocess in (qa.postprocess_predictions, qa.predictions_with_null_odds):
        with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
            postprocess(dev, evaluation, zeros, zeros, **setting)
    if "max_answer_length" in setting:
        candidates = qa.top_candidates(zeros, zeros)
        with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
            qa.select_answers(dev, evaluation, candidates, **setting)
        with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
            qa.best_spans(candidates, **setting)


def test_logits_that_are_not_numbers_are_refused(dev, dev_features):
    _, evaluation = dev_features
    start = np.zeros((len(evaluation), 384), np.float32)
    end = start.copy()
    start[3, 17] = np.nan
    start[5, 2] = np.inf
    with pytest.raises(ValueError, match="^" + re.escape(
            "start_logits holds 2 values that are NaN or +inf (the first in feature 3 at position "
            "17: nan); a model whose outputs are not numbers (a diverged run?) has no answers to "
            "select") + "$"):
        qa.postprocess_predictions(dev, evaluation, start, end)
    candidates = qa.top_candidates(end, end)
    candidates["null_score"] = candidates["null_score"].copy()
    candidates["null_score"][0] = np.nan
    with pytest.raises(ValueError, match="^" + re.escape(
            "candidates['null_score'] holds NaN: a model whose outputs are not numbers has no "
            "answers to select") + "$"):
        qa.select_answers(dev, evaluation, candidates)
    with pytest.raises(ValueError, match="^candidates lack the column 'null_score'; they have "
                                         "start_index, "):
        qa.select_answers(dev, evaluation, {k: v for k, v in candidates.items() if k != "null_score"})
    with pytest.raises(ValueError, match="^k must be an integer >= 1, got 0$"):
        qa.top_candidates(end, end, k=0)


def test_rows_as_a_list_of_dicts_give_the_same_answers(dev, dev_features):
    """The docstring says "rows with id": a list of row dicts works as a Dataset does."""
    train, evaluation = dev_features
    start, end = _oracle_logits(train, width=400)
    expected = qa.postprocess_predictions(dev, evaluation, start, end)
    rows = [dict(row) for row in dev]
    assert qa.postprocess_predictions(rows, list(evaluation), start, end) == expected
    assert qa.as_squad_json(rows) == qa.as_squad_json(dev)
    without_context = [{k: v for k, v in row.items() if k != "context"} for row in rows]
    with pytest.raises(ValueError, match="^examples: row 0 lacks 'context'; it has id, title, "
                                         "question, answers$"):
        qa.postprocess_predictions(without_context, evaluation, start, end)
    with pytest.raises(ValueError, match="^features lack the column 'offset_mapping'; they have "
                                         "input_ids, "):
        qa.postprocess_predictions(dev, evaluation.remove_columns("offset_mapping"), start, end)
    with pytest.raises(ValueError, match="^examples must be a datasets.Dataset, a dict of columns "
                                         "or a list of row dicts, got str$"):
        qa.postprocess_predictions("dev", evaluation, start, end)


def test_feature_settings_are_checked(tokenizer):
    batch = {"id": ["x"], "question": ["q"], "context": ["c"]}
    with pytest.raises(ValueError, match="^max_length must be an integer >= 5, got 4$"):
        qa.prepare_eval_features(batch, tokenizer, max_length=4, doc_stride=1)
    with pytest.raises(ValueError, match="^doc_stride must be an integer >= 0, got 1.5$"):
        qa.prepare_eval_features(batch, tokenizer, max_length=64, doc_stride=1.5)
    with pytest.raises(ValueError, match="^examples lack the column 'answers'; they have id, "
                                         "question, context$"):
        qa.prepare_train_features(batch, tokenizer)
