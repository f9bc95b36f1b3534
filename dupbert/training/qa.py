"""SQuAD 2.0 span processing: examples -> token features -> logits -> answer texts.

Our own code following Hugging Face ``run_qa.py`` / ``utils_qa.py`` (same argument names and
defaults): question first, context second, ``truncation="only_second"``, windows of
``max_length`` tokens overlapping by ``doc_stride``; a missing answer is labelled CLS (index 0).
Post-processing takes the ``n_best_size`` best start and end tokens per feature, valid spans
only (in the context, ``end >= start``, at most ``max_answer_length`` tokens), the best span
over an example's features, the *minimum* null score ``start_logits[0] + end_logits[0]`` over
them, and answers ``""`` when ``null - best > null_score_diff_threshold`` (0.0, never tuned).

Deliberate differences from ``run_qa.py`` (book/methods.md, "Measurements"): no padding here
(the collator pads; logits beyond a feature's length are ignored); candidates among context
tokens only, ties to the lower index; a training answer's tokens found by binary search within
the context; ``""`` (not ``"empty"``) for an example without a valid span.

Tokenizers must be fast (``offset_mapping``, ``sequence_ids``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import datasets
import numpy as np

from ..core.checks import check_number

CLS_INDEX = 0  # BERT/ALBERT put [CLS] first; run_qa.py's null score reads position 0


def _tokenize(examples: Mapping, tokenizer, max_length: int, doc_stride: int):
    if not getattr(tokenizer, "is_fast", False):
        raise TypeError(f"{type(tokenizer).__name__} is not a fast tokenizer: SQuAD features need "
                        "offset mappings and sequence ids (load it with AutoTokenizer, use_fast=True)")
    check_number("max_length", max_length, integer=True, minimum=5)  # [CLS] q [SEP] c [SEP]
    check_number("doc_stride", doc_stride, integer=True, minimum=0)
    if not 0 <= doc_stride < max_length:
        raise ValueError(f"need 0 <= doc_stride < max_length, got doc_stride={doc_stride}, "
                         f"max_length={max_length}")
    # run_qa.py: some questions have lots of leading whitespace, which wastes window space
    questions = [q.lstrip() for q in examples["question"]]
    return tokenizer(questions, list(examples["context"]), truncation="only_second",
                     max_length=max_length, stride=doc_stride, return_overflowing_tokens=True,
                     return_offsets_mapping=True, padding=False)


def _context_bounds(sequence_ids: Sequence) -> tuple[int, int]:
    context = [k for k, s in enumerate(sequence_ids) if s == 1]
    return context[0], context[-1]


def prepare_train_features(examples: Mapping, tokenizer, max_length: int = 384,
                           doc_stride: int = 128) -> dict[str, list]:
    """Tokenize a batch of SQuAD examples into training features (``Dataset.map(batched=True)``).

    Args:
        examples: a batch in the HF ``squad_v2`` schema (``question``, ``context``, ``answers``;
            only the first answer is used, as in ``run_qa.py``).
        tokenizer: a fast tokenizer.
        max_length: tokens per feature, specials included.
        doc_stride: tokens shared by consecutive windows of one context.

    Returns:
        One row per feature (one or more per example), unpadded length ``T <= max_length``:
        ``input_ids``, ``token_type_ids`` (if made), ``attention_mask`` (``T`` ints each),
        ``start_positions``, ``end_positions`` (inclusive token indices; 0 = CLS for no answer in
        this window). Use with ``remove_columns=examples' columns``.

    Raises:
        TypeError: not a fast tokenizer.
        ValueError: ``doc_stride >= max_length``; a column missing.
        ParameterError: ``max_length`` not an integer >= 5, ``doc_stride`` not an integer >= 0.
    """
    _require_columns(examples, ("question", "context", "answers"), "examples")
    encoded = _tokenize(examples, tokenizer, max_length, doc_stride)
    sample_map = encoded.pop("overflow_to_sample_mapping")
    offset_mapping = encoded.pop("offset_mapping")
    starts, ends = [], []
    for i, offsets in enumerate(offset_mapping):
        answers = examples["answers"][sample_map[i]]
        if not answers["answer_start"]:
            starts.append(CLS_INDEX), ends.append(CLS_INDEX)
            continue
        start_char = answers["answer_start"][0]
        end_char = start_char + len(answers["text"][0])
        first, last = _context_bounds(encoded.sequence_ids(i))
        context = np.asarray(offsets[first:last + 1])  # [n_context, 2] char offsets, non-decreasing
        if not (context[0, 0] <= start_char and context[-1, 1] >= end_char):
            starts.append(CLS_INDEX), ends.append(CLS_INDEX)  # answer (partly) outside the window
            continue
        # start: last context token beginning at or before start_char; end: first ending at/after end_char
        starts.append(first + int(np.searchsorted(context[:, 0], start_char, side="right")) - 1)
        ends.append(first + int(np.searchsorted(context[:, 1], end_char, side="left")))
    encoded["start_positions"], encoded["end_positions"] = starts, ends
    return dict(encoded)


def prepare_eval_features(examples: Mapping, tokenizer, max_length: int = 384,
                          doc_stride: int = 128) -> dict[str, list]:
    """Tokenize a batch of SQuAD examples (``id``, ``question``, ``context``) into evaluation
    features; other arguments as :func:`prepare_train_features` (use the same values).

    Returns:
        One row per feature, unpadded length ``T``: ``input_ids``, ``token_type_ids``,
        ``attention_mask``, ``example_id``, ``offset_mapping`` (``T`` entries: ``[char_start,
        char_end)`` into the context for context tokens, ``None`` for the rest).

    Raises:
        As :func:`prepare_train_features`.
    """
    _require_columns(examples, ("id", "question", "context"), "examples")
    encoded = _tokenize(examples, tokenizer, max_length, doc_stride)
    sample_map = encoded.pop("overflow_to_sample_mapping")
    encoded["example_id"] = [examples["id"][s] for s in sample_map]
    encoded["offset_mapping"] = [
        [list(o) if s == 1 else None for o, s in zip(offsets, encoded.sequence_ids(i))]
        for i, offsets in enumerate(encoded["offset_mapping"])]
    return dict(encoded)


# --------------------------------------------------------------------------------------------------
# Logits -> candidates -> answers


def _as_matrix(logits) -> np.ndarray:
    """``[F, S]`` float32 from a matrix or from ``F`` ragged 1-D arrays (padded with -inf)."""
    try:
        matrix = np.asarray(logits, dtype=np.float32)
    except ValueError:  # ragged
        matrix = None
    if matrix is None or matrix.dtype == object or matrix.ndim != 2:
        rows = [np.asarray(r, dtype=np.float32).ravel() for r in logits]
        matrix = np.full((len(rows), max(map(len, rows), default=0)), -np.inf, np.float32)
        for i, row in enumerate(rows):
            matrix[i, :len(row)] = row
    return matrix


def _require_columns(batch, names: Sequence[str], what: str) -> None:
    """ValueError if the batch (a mapping of columns) lacks one of ``names``."""
    if not isinstance(batch, Mapping):
        raise ValueError(f"{what} must be a batch of columns ({{name: list}}, as Dataset.map("
                         f"batched=True) gives), got {type(batch).__name__}")
    missing = [name for name in names if name not in batch]
    if missing:
        raise ValueError(f"{what} lack the column {missing[0]!r}; they have "
                         f"{', '.join(map(str, batch)) or 'none'}")


def _column(rows, name: str, what: str = "rows") -> list:
    """Column ``name`` of a Dataset, a dict of sequences or a list of row dicts, as a list;
    ValueError if it is missing or ``rows`` is none of those.
    """
    if isinstance(rows, datasets.Dataset):
        if name not in rows.column_names:
            raise ValueError(f"{what} lack the column {name!r}; they have "
                             f"{', '.join(rows.column_names)}")
        return rows.select_columns([name])[:][name]
    if isinstance(rows, Mapping):
        _require_columns(rows, (name,), what)
        column = rows[name]
        return column if isinstance(column, list) else list(column)
    if isinstance(rows, Sequence) and not isinstance(rows, (str, bytes)) \
            and all(isinstance(row, Mapping) for row in rows):
        lacking = next((i for i, row in enumerate(rows) if name not in row), None)
        if lacking is not None:
            raise ValueError(f"{what}: row {lacking} lacks {name!r}; it has "
                             f"{', '.join(map(str, rows[lacking]))}")
        return [row[name] for row in rows]
    raise ValueError(f"{what} must be a datasets.Dataset, a dict of columns or a list of row "
                     f"dicts, got {type(rows).__name__}")


def _check_logits(name: str, matrix: np.ndarray) -> None:
    """ValueError if ``matrix`` holds NaN or +inf (every answer would silently be ``""``)."""
    bad = np.isnan(matrix) | np.isposinf(matrix)
    if bad.any():
        feature, position = (int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"{name} holds {int(bad.sum())} values that are NaN or +inf (the first "
                         f"in feature {feature} at position {position}: "
                         f"{matrix[feature, position]}); a model whose outputs are not numbers "
                         f"(a diverged run?) has no answers to select")


def _check_threshold(threshold) -> float:
    """``null_score_diff_threshold`` if it is a number (``inf`` allowed), not NaN."""
    import numbers

    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) \
            or np.isnan(threshold):
        raise ValueError(f"null_score_diff_threshold must be a number (inf: never abstain), got "
                         f"{threshold!r}")
    return float(threshold)


def _offsets_list(offset_mapping) -> list:
    return offset_mapping if isinstance(offset_mapping, list) else list(offset_mapping)


def _context_mask(offsets: list, width: int) -> np.ndarray:
    """``[F, width]`` bool: True at context tokens (offset not ``None``)."""
    mask = np.zeros((len(offsets), width), dtype=bool)
    for i, feature_offsets in enumerate(offsets):
        n = min(len(feature_offsets), width)
        mask[i, :n] = [o is not None for o in feature_offsets[:n]]
    return mask


def top_candidates(start_logits, end_logits, k: int = 20, offset_mapping=None,
                   dtype=np.float16) -> dict[str, np.ndarray]:
    """The compact per-feature form of QA logits: top-``k`` start and end tokens plus the null score
    (stored for RQ5 ensembles).

    Args:
        start_logits, end_logits: ``[F, S]`` (``Trainer.predict`` output) or ``F`` 1-D arrays.
        k: candidates per feature (``run_qa.py``'s ``n_best_size``).
        offset_mapping: the features' column (:func:`prepare_eval_features`): candidates and
            log-normalisers over each feature's ``T`` context/real tokens; ``None``: all ``S``.
        dtype: float type of the scores (fp16 to store).

    Returns:
        A dict of numpy arrays (``np.savez``-ready), candidates by descending logit (ties: lower
        index first): ``start_index``, ``end_index`` ``[F, k]`` int16 (``-1`` pads);
        ``start_logit``, ``end_logit`` ``[F, k]`` (``-inf`` at -1); ``null_score`` ``[F]`` (CLS
        start + end); ``start_logsumexp``, ``end_logsumexp`` ``[F]`` (``exp(logit - logsumexp)`` is
        a probability).

    Raises:
        ValueError: shapes disagree; logits that are NaN or +inf.
        ParameterError: ``k`` not an integer >= 1.
    """
    k = check_number("k", k, integer=True, minimum=1)
    start, end = _as_matrix(start_logits), _as_matrix(end_logits)
    if start.shape != end.shape:
        raise ValueError(f"start_logits {start.shape} and end_logits {end.shape} differ in shape")
    _check_logits("start_logits", start)
    _check_logits("end_logits", end)
    n_features, width = start.shape
    positions = np.arange(width)
    if offset_mapping is None:
        real = np.ones_like(start, dtype=bool)
        candidate = real
    else:
        offsets = _offsets_list(offset_mapping)
        if len(offsets) != n_features:
            raise ValueError(f"{len(offsets)} offset mappings for {n_features} features")
        lengths = np.fromiter(map(len, offsets), int, n_features)
        if (lengths > width).any():
            raise ValueError(f"a feature has {lengths.max()} tokens but the logits only {width}")
        real = positions[None, :] < lengths[:, None]
        candidate = _context_mask(offsets, width)
    out: dict[str, np.ndarray] = {}
    for name, logits in (("start", start), ("end", end)):
        masked = np.where(candidate, logits, -np.inf)
        index = np.argsort(-masked, axis=1, kind="stable")[:, :k]
        value = np.take_along_axis(masked, index, axis=1)
        index = np.where(np.isfinite(value), index, -1)
        if index.shape[1] < k:  # fewer than k positions at all
            pad = k - index.shape[1]
            index = np.pad(index, ((0, 0), (0, pad)), constant_values=-1)
            value = np.pad(value, ((0, 0), (0, pad)), constant_values=-np.inf)
        out[f"{name}_index"] = index.astype(np.int16)
        out[f"{name}_logit"] = value.astype(dtype)
        shifted = np.where(real, logits, -np.inf)
        peak = shifted.max(axis=1, initial=-np.inf)
        out[f"{name}_logsumexp"] = (peak + np.log(np.exp(shifted - peak[:, None]).sum(axis=1))).astype(dtype)
    out["null_score"] = (start[:, CLS_INDEX] + end[:, CLS_INDEX]).astype(dtype)
    return out


def best_spans(candidates: Mapping[str, np.ndarray], max_answer_length: int = 30
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The best valid span of every feature from its :func:`top_candidates` (over ``k x k`` pairs).

    Valid: both indices candidates, ``end >= start``, ``end - start + 1 <= max_answer_length``;
    score ``start_logit + end_logit`` (for an ensemble, logs of summed probabilities).

    Returns:
        ``(start, end, score)``: ``[F]`` int token indices (-1 without a valid span) and ``[F]``
        float32 scores (``-inf``). Ties: the higher-ranked start, then end.

    Raises:
        ParameterError: ``max_answer_length`` not an integer >= 1.
        ValueError: ``candidates`` lack a key, or hold NaN scores.
    """
    max_answer_length = check_number("max_answer_length", max_answer_length, integer=True,
                                     minimum=1)
    _check_candidates(candidates)
    s_idx, e_idx = candidates["start_index"].astype(int), candidates["end_index"].astype(int)
    s_val = candidates["start_logit"].astype(np.float32)
    e_val = candidates["end_logit"].astype(np.float32)
    n_features, k = s_idx.shape
    length = e_idx[:, None, :] - s_idx[:, :, None] + 1  # [F, k, k]
    valid = ((s_idx >= 0)[:, :, None] & (e_idx >= 0)[:, None, :]
             & (length >= 1) & (length <= max_answer_length))
    score = np.where(valid, s_val[:, :, None] + e_val[:, None, :], -np.inf).reshape(n_features, -1)
    flat = score.argmax(axis=1)
    best = score[np.arange(n_features), flat]
    found = np.isfinite(best)
    start = np.where(found, s_idx[np.arange(n_features), flat // k], -1)
    end = np.where(found, e_idx[np.arange(n_features), flat % k], -1)
    return start, end, best


_CANDIDATE_KEYS = ("start_index", "end_index", "start_logit", "end_logit", "null_score")


def _check_candidates(candidates) -> None:
    if not isinstance(candidates, Mapping):
        raise ValueError(f"candidates must be the dict of top_candidates, got "
                         f"{type(candidates).__name__}")
    _require_columns(candidates, _CANDIDATE_KEYS, "candidates")
    for key in ("start_logit", "end_logit", "null_score"):
        if np.isnan(np.asarray(candidates[key], dtype=np.float32)).any():
            raise ValueError(f"candidates[{key!r}] holds NaN: a model whose outputs are not "
                             f"numbers has no answers to select")


def select_answers(examples, features, candidates: Mapping[str, np.ndarray],
                   max_answer_length: int = 30, null_score_diff_threshold: float = 0.0
                   ) -> dict[str, str]:
    """Answer texts from per-feature candidates (:func:`top_candidates`) by the ``run_qa.py`` rules
    (module docstring); candidates outside their feature's context are dropped first.

    Args:
        examples: rows with ``id`` and ``context`` (a ``load_task("squad2", ...)`` split).
        features: rows with ``example_id`` and ``offset_mapping``, in candidate-row order.

    Returns:
        ``{example id: answer text}`` for every example, in example order.

    Raises:
        ValueError: features, examples and candidates do not match; a column missing; bad or NaN
            candidates; a NaN threshold.
        ParameterError: ``max_answer_length`` not an integer >= 1.
    """
    return _select(examples, features, _column(features, "offset_mapping"), candidates,
                   max_answer_length, null_score_diff_threshold)


def _select(examples, features, offsets: list, candidates, max_answer_length, threshold):
    return _select_with_null_odds(examples, features, offsets, candidates, max_answer_length,
                                  threshold)[0]


def _select_with_null_odds(examples, features, offsets: list, candidates, max_answer_length,
                           threshold):
    """``(answers, best non-null answers, null odds)``, as :func:`predictions_with_null_odds`."""
    threshold = _check_threshold(threshold)
    max_answer_length = check_number("max_answer_length", max_answer_length, integer=True,
                                     minimum=1)
    _check_candidates(candidates)
    example_ids = _column(examples, "id", "examples")
    feature_example = _column(features, "example_id", "features")
    if len(feature_example) != len(candidates["null_score"]):
        raise ValueError(f"{len(feature_example)} features but {len(candidates['null_score'])} "
                         "rows of logits/candidates")
    row_of = {example_id: row for row, example_id in enumerate(example_ids)}
    unknown = set(feature_example) - set(row_of)
    if unknown:
        raise ValueError(f"{len(unknown)} features belong to no example, e.g. {sorted(unknown)[:3]}")
    owner = np.fromiter((row_of[e] for e in feature_example), int, len(feature_example))
    # candidates saved without offsets may point at question/special tokens: drop those
    candidates = dict(candidates)
    width = 1 + max(int(candidates["start_index"].max(initial=0)),
                    int(candidates["end_index"].max(initial=0)))
    mask = _context_mask(offsets, width)
    rows = np.arange(len(offsets))[:, None]
    for name in ("start", "end"):
        index = candidates[f"{name}_index"].astype(int)
        keep = (index >= 0) & mask[rows, np.maximum(index, 0)]
        candidates[f"{name}_index"] = np.where(keep, index, -1)
    start, end, score = best_spans(candidates, max_answer_length)
    null = candidates["null_score"].astype(np.float32)
    # per example: the feature with the best span (first on ties) and the minimum null score
    order = np.lexsort((np.arange(len(owner)), -score, owner))  # by example, best score first
    first_of_example = np.ones(len(order), bool)
    first_of_example[1:] = owner[order][1:] != owner[order][:-1]
    best_feature = order[first_of_example]
    if len(best_feature) != len(example_ids):
        missing = sorted(set(range(len(example_ids))) - set(owner))
        raise ValueError(f"{len(missing)} examples have no feature, e.g. "
                         f"{[example_ids[m] for m in missing[:3]]}")
    min_null = np.full(len(example_ids), np.inf, np.float32)
    np.minimum.at(min_null, owner, null)
    contexts = _column(examples, "context", "examples")
    answers, best, null_odds = {}, {}, {}
    for row, f in enumerate(best_feature):
        example = example_ids[row]
        if not np.isfinite(score[f]):
            answers[example] = best[example] = ""
            null_odds[example] = float("inf")
            continue
        feature_offsets = offsets[int(f)]
        best[example] = contexts[row][feature_offsets[start[f]][0]:feature_offsets[end[f]][1]]
        null_odds[example] = float(min_null[row] - score[f])
        answers[example] = "" if null_odds[example] > threshold else best[example]
    return answers, best, null_odds


def postprocess_predictions(examples, features, start_logits, end_logits, n_best_size: int = 20,
                            max_answer_length: int = 30,
                            null_score_diff_threshold: float = 0.0) -> dict[str, str]:
    """SQuAD 2.0 predictions from start/end logits, as ``utils_qa.postprocess_qa_predictions`` with
    ``version_2_with_negative=True`` (differences: module docstring).

    Args:
        examples: the evaluation examples (``id``, ``context``): a Dataset, a dict of columns or a
            list of row dicts.
        features: their :func:`prepare_eval_features` rows, in one of the same forms.
        start_logits, end_logits: ``[F, S]`` in feature order
            (``Trainer.predict(...).predictions[:2]``), or ``F`` 1-D arrays.
        max_answer_length: longest answer in tokens.
        null_score_diff_threshold: answer ``""`` when ``min null score - best span score``
            exceeds it (logit units).

    Returns:
        ``{example id: answer text}`` (``""`` = no answer), for :func:`dupbert.training.metrics.squad_v2`.

    Raises:
        ValueError: features, logits and examples do not match; a column missing; NaN or +inf
            logits; a NaN threshold.
        ParameterError: ``n_best_size`` or ``max_answer_length`` not an integer >= 1.
    """
    _check_postprocessing(n_best_size, max_answer_length, null_score_diff_threshold)
    offsets = _column(features, "offset_mapping", "features")
    candidates = top_candidates(start_logits, end_logits, k=n_best_size, offset_mapping=offsets,
                                dtype=np.float32)
    return _select(examples, features, offsets, candidates, max_answer_length,
                   null_score_diff_threshold)


def predictions_with_null_odds(examples, features, start_logits, end_logits,
                               n_best_size: int = 20, max_answer_length: int = 30,
                               null_score_diff_threshold: float = 0.0
                               ) -> tuple[dict[str, str], dict[str, str], dict[str, float]]:
    """:func:`postprocess_predictions`, plus what the official SQuAD 2.0 script's threshold search
    needs (``--na-prob-file``; ``run_qa.py``'s ``null_odds.json``).

    Returns:
        ``(answers, best_answers, null_odds)``: the answers; every example's best non-null answer
        (``""`` only without a valid span); ``min null score - best span score`` in logit units
        (``inf`` without a valid span; higher: likelier "no answer").

    Raises:
        As :func:`postprocess_predictions`.
    """
    _check_postprocessing(n_best_size, max_answer_length, null_score_diff_threshold)
    offsets = _column(features, "offset_mapping", "features")
    candidates = top_candidates(start_logits, end_logits, k=n_best_size, offset_mapping=offsets,
                                dtype=np.float32)
    return _select_with_null_odds(examples, features, offsets, candidates, max_answer_length,
                                  null_score_diff_threshold)


def _check_postprocessing(n_best_size, max_answer_length, threshold) -> None:
    """The post-processing settings, checked before any logits are read."""
    check_number("n_best_size", n_best_size, integer=True, minimum=1)
    check_number("max_answer_length", max_answer_length, integer=True, minimum=1)
    _check_threshold(threshold)


def as_squad_json(dataset) -> dict:
    """The official SQuAD JSON (``{"version", "data": [articles]}``) of rows in the HF ``squad_v2``
    schema, for :func:`dupbert.training.metrics.squad_v2`; consecutive rows with one title form an article,
    with one context a paragraph.

    Raises:
        ValueError: a column (``id``, ``title``, ``context``, ``question``, ``answers``) missing.
    """
    articles: list[dict] = []
    columns = [_column(dataset, c, "dataset")
               for c in ("id", "title", "context", "question", "answers")]
    for qid, title, context, question, gold in zip(*columns):
        if not articles or articles[-1]["title"] != title:
            articles.append({"title": title, "paragraphs": []})
        paragraphs = articles[-1]["paragraphs"]
        if not paragraphs or paragraphs[-1]["context"] != context:
            paragraphs.append({"context": context, "qas": []})
        answers = [{"text": t, "answer_start": s}
                   for t, s in zip(gold["text"], gold["answer_start"])]
        paragraphs[-1]["qas"].append({"id": qid, "question": question, "answers": answers,
                                      "is_impossible": not answers})
    return {"version": "v2.0", "data": articles}
