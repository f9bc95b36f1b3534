"""Evaluation metrics. SQuAD 2.0 EM/F1 are our own, because no offline library does them
right: ``evaluate.load("squad_v2")`` fetches its script from the Hub, torchmetrics' SQuAD is
v1.1 only, and transformers 5 dropped ``squad_metrics``. Accuracy and macro-F1 come from
scikit-learn.

``squad_v2`` follows the official SQuAD 2.0 evaluation script (``evaluate-v2.0.py``,
Rajpurkar et al. 2018) step by step, so it reproduces its numbers exactly: answers are
normalised (lower case, no punctuation, no articles ``a/an/the``, single spaces); a question
without gold answers is answered correctly only by the empty string; each question scores its
best match over the gold answers; scores are percentages averaged over questions, overall and
split into HasAns (answerable) and NoAns (unanswerable).
"""

from __future__ import annotations

import collections
import gzip
import json
import os
import re
import string
from collections.abc import Mapping

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower-case, remove punctuation, articles and extra whitespace (official SQuAD)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _tokens(text: str) -> list[str]:
    return normalize_answer(text).split() if text else []


def exact_match(gold: str, prediction: str) -> int:
    """1 if the normalised strings are equal, else 0."""
    return int(normalize_answer(gold) == normalize_answer(prediction))


def token_f1(gold: str, prediction: str) -> float:
    """Bag-of-tokens F1 of the normalised strings; 1/0 if either side is empty."""
    gold_tokens, predicted_tokens = _tokens(gold), _tokens(prediction)
    if not gold_tokens or not predicted_tokens:
        return float(gold_tokens == predicted_tokens)
    common = collections.Counter(gold_tokens) & collections.Counter(predicted_tokens)
    n_same = sum(common.values())
    if n_same == 0:
        return 0.0
    precision, recall = n_same / len(predicted_tokens), n_same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def load_squad_json(dataset: str | os.PathLike | Mapping) -> list[dict]:
    """The ``data`` list (articles) of an official-format SQuAD JSON: a path (``.json`` or
    ``.json.gz``) or the loaded object.

    Raises:
        FileNotFoundError: the path does not exist.
        ValueError: the object has no ``data`` list.
    """
    if isinstance(dataset, (str, os.PathLike)):
        opener = gzip.open if str(dataset).endswith(".gz") else open
        with opener(dataset, "rt", encoding="utf-8") as handle:
            dataset = json.load(handle)
    if not isinstance(dataset, Mapping) or not isinstance(dataset.get("data"), list):
        raise ValueError("dataset must be official SQuAD JSON: an object with a 'data' list")
    return dataset["data"]


def squad_v2(dataset: str | os.PathLike | Mapping, predictions: Mapping[str, str]) -> dict:
    """SQuAD 2.0 exact match and F1, as the official ``evaluate-v2.0.py`` computes them.

    Args:
        dataset: the official SQuAD 2.0 JSON (path or loaded object); every question in it
            is scored.
        predictions: question id -> predicted answer text (``""`` = no answer).

    Returns:
        The official keys: ``exact``, ``f1`` (percent, 0-100), ``total``; ``HasAns_exact``,
        ``HasAns_f1``, ``HasAns_total`` (present when there are answerable questions);
        ``NoAns_exact``, ``NoAns_f1``, ``NoAns_total`` (when there are unanswerable ones).

    Raises:
        ValueError: a question of ``dataset`` has no prediction, or ``predictions`` holds ids
            that are not in ``dataset`` (the message names up to five of them and the counts).
    """
    questions = [qa for article in load_squad_json(dataset) for paragraph in article["paragraphs"]
                 for qa in paragraph["qas"]]
    ids = [qa["id"] for qa in questions]
    missing = [i for i in ids if i not in predictions]
    unknown = sorted(set(predictions) - set(ids))
    if missing or unknown:
        raise ValueError(
            f"predictions do not match the dataset: {len(missing)} of {len(ids)} questions have no "
            f"prediction (e.g. {missing[:5]}), {len(unknown)} predicted ids are not in the dataset "
            f"(e.g. {unknown[:5]}). Predict every question id, with '' for no answer."
        )
    exact, f1, has_answer = {}, {}, {}
    for qa in questions:
        gold = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])] or [""]
        prediction = predictions[qa["id"]]
        exact[qa["id"]] = max(exact_match(g, prediction) for g in gold)
        f1[qa["id"]] = max(token_f1(g, prediction) for g in gold)
        has_answer[qa["id"]] = bool(qa["answers"])
    scores = _averages(exact, f1, ids)
    for prefix, subset in (("HasAns", [i for i in ids if has_answer[i]]),
                           ("NoAns", [i for i in ids if not has_answer[i]])):
        if subset:
            scores.update({f"{prefix}_{key}": value
                           for key, value in _averages(exact, f1, subset).items()})
    return scores


def _averages(exact: dict, f1: dict, ids: list[str]) -> dict:
    total = len(ids)
    return collections.OrderedDict([
        ("exact", 100.0 * sum(exact[i] for i in ids) / total),
        ("f1", 100.0 * sum(f1[i] for i in ids) / total),
        ("total", total),
    ])
