"""Evaluation metrics: SQuAD 2.0 EM/F1 (our own: no offline library computes them), accuracy and
macro-F1 from scikit-learn.

``squad_v2`` follows the official SQuAD 2.0 script (``evaluate-v2.0.py``, Rajpurkar et al.
2018) step by step and reproduces its numbers exactly: normalised answers (lower case, no
punctuation, no articles, single spaces); an unanswerable question is right only with ``""``;
each question scores its best gold match; percentages averaged over questions, overall and for
HasAns / NoAns.
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
    """Lower-case, remove punctuation, articles and extra whitespace (official SQuAD); TypeError if
    ``text`` is not a string (``""``, not ``None``, is "no answer").
    """
    if not isinstance(text, str):
        raise TypeError(f"an answer must be a string ('' for no answer), got {text!r}")
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _tokens(text: str) -> list[str]:
    if not isinstance(text, str):  # None would pass for "" below
        raise TypeError(f"an answer must be a string ('' for no answer), got {text!r}")
    return normalize_answer(text).split() if text else []


def exact_match(gold: str, prediction: str) -> int:
    """1 if the normalised strings are equal, else 0; TypeError if either is not a string."""
    return int(normalize_answer(gold) == normalize_answer(prediction))


def token_f1(gold: str, prediction: str) -> float:
    """Bag-of-tokens F1 of the normalised strings, in [0, 1] (1/0 if either side is empty);
    TypeError if either is not a string.
    """
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
    """The ``data`` list (articles) of an official SQuAD JSON: a path (``.json``, ``.json.gz``) or
    the loaded object.

    Raises:
        FileNotFoundError: the path does not exist.
        ValueError: not JSON (file, line and column named), or no ``data`` list.
    """
    if isinstance(dataset, (str, os.PathLike)):
        opener = gzip.open if str(dataset).endswith(".gz") else open
        with opener(dataset, "rt", encoding="utf-8") as handle:
            try:
                dataset = json.load(handle)
            except json.JSONDecodeError as error:
                raise ValueError(f"{dataset} is not JSON ({error.msg}, line {error.lineno} column "
                                 f"{error.colno})") from None
    if not isinstance(dataset, Mapping) or not isinstance(dataset.get("data"), list):
        raise ValueError("dataset must be official SQuAD JSON: an object with a 'data' list")
    return dataset["data"]


def squad_v2(dataset: str | os.PathLike | Mapping, predictions: Mapping[str, str]) -> dict:
    """SQuAD 2.0 exact match and F1, as the official ``evaluate-v2.0.py`` computes them.

    Args:
        dataset: the official SQuAD 2.0 JSON (path or object); every question is scored.
        predictions: question id -> predicted answer text (``""`` = no answer).

    Returns:
        The official keys: ``exact``, ``f1`` (percent, 0-100), ``total``; ``HasAns_exact``,
        ``HasAns_f1``, ``HasAns_total`` (only with answerable questions); ``NoAns_exact``,
        ``NoAns_f1``, ``NoAns_total`` (only with unanswerable ones).

    Raises:
        ValueError: predictions missing for some questions or naming unknown ids (counts and up to
            five ids), no questions, a malformed article, paragraph or question, a prediction that
            is not a string, or ``predictions`` not a mapping.
    """
    questions = _questions(dataset)
    ids = [qa["id"] for qa in questions]
    _check_predictions(predictions)
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


def _questions(dataset) -> list[dict]:
    """Every question (``qas`` entry) of an official SQuAD JSON, its structure checked."""
    questions = []
    for a, article in enumerate(load_squad_json(dataset)):
        where = f"article {a}" + (f" ({article.get('title')!r})"
                                  if isinstance(article, Mapping) and "title" in article else "")
        for p, paragraph in enumerate(_field(article, "paragraphs", where)):
            for q, qa in enumerate(_field(paragraph, "qas", f"{where}, paragraph {p}")):
                here = f"{where}, paragraph {p}, question {q}"
                if not isinstance(_field(qa, "id", here, str), str):
                    raise ValueError(f"{here}: its id must be a string, got {qa['id']!r}")
                for answer in _field(qa, "answers", here):
                    if not isinstance(answer, Mapping) or not isinstance(answer.get("text"), str):
                        raise ValueError(f"{here} ({qa['id']!r}): each answer must be "
                                         f"{{'text': str, ...}}, got {answer!r}")
                questions.append(qa)
    if not questions:
        raise ValueError("dataset holds no questions: there is nothing to score")
    return questions


def _field(item, key: str, where: str, kind: type = list):
    """``item[key]``, which must be of ``kind`` (a list of the official format's entries)."""
    if not isinstance(item, Mapping) or key not in item:
        raise ValueError(f"{where} lacks {key!r} (official SQuAD JSON: data -> articles with "
                         f"'paragraphs' -> paragraphs with 'qas' -> questions with 'id' and "
                         f"'answers')")
    if kind is list and not isinstance(item[key], list):
        raise ValueError(f"{where}: {key!r} must be a list, got {type(item[key]).__name__}")
    return item[key]


def _check_predictions(predictions) -> None:
    if not isinstance(predictions, Mapping):
        raise ValueError(f"predictions must be a mapping {{question id: answer text}}, got "
                         f"{type(predictions).__name__}")
    bad = next(((key, value) for key, value in predictions.items() if not isinstance(value, str)),
               None)
    if bad is not None:
        raise ValueError(f"the prediction of {bad[0]!r} must be a string ('' for no answer), got "
                         f"{bad[1]!r}")


def _averages(exact: dict, f1: dict, ids: list[str]) -> dict:
    total = len(ids)
    return collections.OrderedDict([
        ("exact", 100.0 * sum(exact[i] for i in ids) / total),
        ("f1", 100.0 * sum(f1[i] for i in ids) / total),
        ("total", total),
    ])


def best_thresholds(dataset: str | os.PathLike | Mapping, predictions: Mapping[str, str],
                    no_answer_probabilities: Mapping[str, float]) -> dict:
    """The official script's threshold search (``evaluate-v2.0.py`` ``find_all_best_thresh``, with
    ``--na-prob-file``), step by step.

    Every question starts as "no answer" and is switched to its prediction in increasing order of
    its no-answer score; the best score over all cut-offs is kept. Tuned on the evaluated questions
    themselves, so it is an optimistic upper bound.

    Args:
        predictions: question id -> the non-null answer.
        no_answer_probabilities: question id -> any score that grows with "no answer" (null odds
            in logit units work too).

    Returns:
        ``best_exact``, ``best_exact_thresh``, ``best_f1``, ``best_f1_thresh`` (percent; thresholds
        in the units of ``no_answer_probabilities``).

    Raises:
        ValueError: as :func:`squad_v2`, or a no-answer score missing, not a number, or NaN.
    """
    questions = _questions(dataset)
    squad_v2(dataset, predictions)  # the same checks of the predictions
    _check_probabilities(no_answer_probabilities)
    missing = [qa["id"] for qa in questions if qa["id"] not in no_answer_probabilities]
    if missing:
        raise ValueError(f"{len(missing)} questions have no no-answer probability, e.g. {missing[:5]}")
    has_answer = {qa["id"]: bool(qa["answers"]) for qa in questions}
    exact, f1 = {}, {}
    for qa in questions:
        gold = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])] or [""]
        exact[qa["id"]] = max(exact_match(g, predictions[qa["id"]]) for g in gold)
        f1[qa["id"]] = max(token_f1(g, predictions[qa["id"]]) for g in gold)
    out = {}
    for name, scores in (("exact", exact), ("f1", f1)):
        best, threshold = _find_best_threshold(predictions, scores, no_answer_probabilities,
                                               has_answer)
        out[f"best_{name}"], out[f"best_{name}_thresh"] = best, threshold
    return out


def _check_probabilities(probabilities) -> None:
    import math
    import numbers

    if not isinstance(probabilities, Mapping):
        raise ValueError(f"no_answer_probabilities must be a mapping {{question id: number}}, got "
                         f"{type(probabilities).__name__}")
    for key, value in probabilities.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
            raise ValueError(f"the no-answer probability of {key!r} must be a number (inf "
                             f"allowed), got {value!r}")


def _find_best_threshold(predictions, scores, probabilities, has_answer):
    current = best = sum(1 for answerable in has_answer.values() if not answerable)
    threshold = 0.0
    for question in sorted(probabilities, key=lambda q: probabilities[q]):
        if question not in scores:
            continue
        if has_answer[question]:
            current += scores[question]
        elif predictions[question]:
            current -= 1
        if current > best:
            best, threshold = current, probabilities[question]
    return 100.0 * best / len(scores), threshold
