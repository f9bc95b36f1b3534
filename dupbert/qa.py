"""SQuAD 2.0 span processing: examples -> token features -> logits -> answer texts.

Follows the conventions of Hugging Face ``run_qa.py`` / ``utils_qa.py``
(``examples/pytorch/question-answering``; our own code, same argument names and defaults):

- features: question first, context second, ``truncation="only_second"``, long contexts split
  into windows of ``max_length`` tokens overlapping by ``doc_stride`` tokens; an unanswerable
  question, or an answer not wholly inside a window, is labelled with the CLS token (index 0);
- post-processing: the ``n_best_size`` best start and end tokens of each feature, valid spans
  only (inside the context, ``end >= start``, at most ``max_answer_length`` tokens), the best
  span over all features of an example; the null score is the *minimum* over the features of
  ``start_logits[0] + end_logits[0]``; the answer is ``""`` when
  ``null score - best span score > null_score_diff_threshold`` (0.0, never tuned on dev).

Differences from ``run_qa.py``, all deliberate:

- no padding here: features have variable length, padding happens in the collator
  (``DataCollatorWithPadding``); logits padded by ``Trainer.predict`` (value -100) or any other
  value are ignored beyond each feature's length;
- the top-``n_best_size`` starts/ends are taken among *context* tokens only (``run_qa.py`` takes
  them over all positions and then drops the invalid ones, so it may look at fewer than 20 valid
  candidates); ties are broken by the lower token index (stable sort);
- the start/end token of a training answer is found by binary search within the context tokens
  (``run_qa.py``'s forward scan can run past the last context token into ``[SEP]``/padding when
  the answer starts in the window's last token);
- an example without any valid span gets ``""`` (``run_qa.py`` inserts the text ``"empty"``).

Data: SQuAD 2.0 in the HF ``squad_v2`` schema (:func:`dupbert.tasks.load_task`, SOURCES.md).
Tokenizers must be fast (``offset_mapping``, ``sequence_ids``), e.g. ``all-MiniLM-L6-v2``'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import datasets
import numpy as np

from .checks import check_number

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
    """Tokenize a batch of SQuAD examples into training features (for ``Dataset.map(batched=True)``).

    Args:
        examples: a batch in the HF ``squad_v2`` schema: ``question``, ``context`` (str) and
            ``answers`` (``{"text": [str], "answer_start": [int]}``, empty = unanswerable; only the
            first answer is used, as in ``run_qa.py``). Other columns are ignored.
        tokenizer: a fast tokenizer (question first, context second).
        max_length: tokens per feature, specials included (``run_qa.py`` 384).
        doc_stride: tokens shared by consecutive windows of one context (``run_qa.py`` 128).

    Returns:
        One row per feature (``>= 1`` per example, more for long contexts), variable length ``T
        <= max_length``, no padding: ``input_ids``, ``token_type_ids`` (if the tokenizer makes
        them), ``attention_mask`` (lists of ``T`` ints), ``start_positions``, ``end_positions``
        (token indices into the feature, inclusive; ``0`` = CLS for an unanswerable question or an
        answer not wholly inside this window). Use with ``remove_columns=examples' columns``.

    Raises:
        TypeError: not a fast tokenizer. ValueError: ``doc_stride >= max_length``; a column
            missing. ParameterError: ``max_length`` not an integer >= 5 or ``doc_stride`` not
            an integer >= 0.
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
    """Tokenize a batch of SQuAD examples into evaluation features (``Dataset.map(batched=True)``).

    Args:
        examples: a batch with ``id``, ``question``, ``context`` (str). Other columns are ignored.
        tokenizer, max_length, doc_stride: as :func:`prepare_train_features` (use the same values).

    Returns:
        One row per feature, variable length ``T``, no padding: ``input_ids``, ``token_type_ids``,
        ``attention_mask``; ``example_id`` (the example's ``id``); ``offset_mapping``: ``T``
        entries, ``[char_start, char_end)`` into the context for context tokens and ``None`` for
        the question and special tokens (so only context tokens can be chosen as spans).

    Raises:
        TypeError: not a fast tokenizer. ValueError: ``doc_stride >= max_length``; a column
            missing. ParameterError: as :func:`prepare_train_features`.
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
    """``[F, S]`` float32 from a matrix or from ``F`` 1-D arrays of different lengths (padded -inf)."""
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
    """Raises ValueError if the batch (a mapping of columns) lacks one of ``names``."""
    if not isinstance(batch, Mapping):
        raise ValueError(f"{what} must be a batch of columns ({{name: list}}, as Dataset.map("
                         f"batched=True) gives), got {type(batch).__name__}")
    missing = [name for name in names if name not in batch]
    if missing:
        raise ValueError(f"{what} lack the column {missing[0]!r}; they have "
                         f"{', '.join(map(str, batch)) or 'none'}")


def _column(rows, name: str, what: str = "rows") -> list:
    """Column ``name`` of a ``datasets.Dataset``, a dict of sequences or a list of row dicts,
    as a list (fast path for a Dataset).

    Raises:
        ValueError: ``rows`` lacks the column (the message names it and what ``rows`` has), or
            is none of those forms.
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
    """Raises ValueError if ``matrix`` holds NaN or +inf (``-inf`` pads ragged features): with
    them every span scores NaN, and every question would silently get ``""``."""
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
    """The compact per-feature form of QA logits: top-``k`` start and end tokens plus the null
    score, e.g. to save for RQ5 ensembles (sum probabilities over models, then select spans).

    Args:
        start_logits, end_logits: ``[F, S]`` (``Trainer.predict`` output, padding ignored when
            ``offset_mapping`` is given) or ``F`` 1-D arrays of varying length.
        k: candidates per feature (``run_qa.py``'s ``n_best_size``).
        offset_mapping: the features' ``offset_mapping`` column (:func:`prepare_eval_features`).
            If given, candidates are context tokens only and the log-normalisers run over each
            feature's ``T`` real tokens; if ``None``, over all ``S`` positions.
        dtype: float type of the scores (fp16 to store; :func:`postprocess_predictions` uses fp32).

    Returns:
        A dict of numpy arrays (``np.savez``-ready), ``F`` features, ``k`` candidates sorted by
        descending logit (ties: lower token index first):

        - ``start_index``, ``end_index``: ``[F, k]`` int16 token indices; ``-1`` pads a feature
          with fewer than ``k`` candidate tokens;
        - ``start_logit``, ``end_logit``: ``[F, k]`` ``dtype``, ``-inf`` where the index is -1;
        - ``null_score``: ``[F]`` ``dtype``, ``start_logits[0] + end_logits[0]`` (CLS);
        - ``start_logsumexp``, ``end_logsumexp``: ``[F]`` ``dtype``, log of the softmax
          normaliser over the feature's tokens, so ``exp(logit - logsumexp)`` is a probability.

    Raises:
        ValueError: shapes of ``start_logits``/``end_logits``/``offset_mapping`` disagree; logits
            that are NaN or +inf (every answer would silently be ``""``).
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
    """The best valid span of every feature from its candidates (vectorised over ``k x k`` pairs).

    A pair is valid if both indices are candidates (not -1), ``end >= start`` and
    ``end - start + 1 <= max_answer_length``; its score is ``start_logit + end_logit`` (for an
    ensemble, pass summed probabilities' logs as logits).

    Returns:
        ``(start, end, score)``: ``[F]`` int token indices (-1 if the feature has no valid span)
        and ``[F]`` float32 scores (``-inf`` if none). Ties: the higher-ranked start, then end.

    Raises:
        ParameterError: ``max_answer_length`` not an integer >= 1 (0 would allow no span at all:
            every answer ``""``, a plausible ~50 F1 on SQuAD 2.0).
        ValueError: ``candidates`` lack a key of :func:`top_candidates`, or hold NaN scores.
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
    """Answer texts from per-feature candidates (:func:`top_candidates`), ``run_qa.py`` rules.

    Candidates that are not context tokens of their feature (possible when they were made without
    ``offset_mapping``) are dropped first. Per example: the best valid span over its features
    (:func:`best_spans`); the null score is
    the minimum ``null_score`` over its features; the answer is ``""`` if
    ``null - best > null_score_diff_threshold`` or no feature has a valid span, else
    ``context[offsets[start][0]:offsets[end][1]]``.

    Args:
        examples: rows with ``id`` and ``context`` (a ``load_task("squad2", ...)`` split).
        features: rows with ``example_id`` and ``offset_mapping`` (:func:`prepare_eval_features`),
            in the order of the candidates' rows.
        candidates: :func:`top_candidates` output for those features.

    Returns:
        ``{example id: answer text}`` for every example, in example order.

    Raises:
        ValueError: a feature names an example not in ``examples``, an example has no feature, or
            the number of features and candidate rows differ; a column missing; candidates
            that are not :func:`top_candidates` output or hold NaN; a NaN threshold.
        ParameterError: ``max_answer_length`` not an integer >= 1.
    """
    return _select(examples, features, _column(features, "offset_mapping"), candidates,
                   max_answer_length, null_score_diff_threshold)


def _select(examples, features, offsets: list, candidates, max_answer_length, threshold):
    return _select_with_null_odds(examples, features, offsets, candidates, max_answer_length,
                                  threshold)[0]


def _select_with_null_odds(examples, features, offsets: list, candidates, max_answer_length,
                           threshold):
    """``(answers, best non-null answers, null odds)``: the thresholded answers; every example's
    best valid span regardless of the null score (``""`` only without one); and
    ``min null score - best span score`` (``inf`` without a valid span)."""
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
    """SQuAD 2.0 predictions from start/end logits, as ``utils_qa.postprocess_qa_predictions``
    with ``version_2_with_negative=True`` (see the module notes for the small differences).

    Args:
        examples: the evaluation examples (``id``, ``context``), e.g. ``load_task("squad2", "eval")``
            (a ``datasets.Dataset``, a dict of columns or a list of row dicts).
        features: their :func:`prepare_eval_features` rows (``example_id``, ``offset_mapping``),
            in one of the same forms.
        start_logits, end_logits: ``[F, S]`` model outputs for the features, in feature order
            (``Trainer.predict(...).predictions[:2]``; positions beyond a feature's length are
            ignored), or ``F`` 1-D arrays.
        n_best_size: start and end candidates per feature (20).
        max_answer_length: longest answer in tokens (30).
        null_score_diff_threshold: predict ``""`` when ``min null score - best span score`` exceeds
            it (0.0, fixed: never tuned on dev).

    Returns:
        ``{example id: answer text}`` (``""`` = no answer) for every example, ready for
        :func:`dupbert.metrics.squad_v2`.

    Raises:
        ValueError: features and logits disagree, or features and examples do not match; a
            column missing (the message names it); logits that are NaN or +inf; a NaN threshold.
        ParameterError: ``n_best_size`` or ``max_answer_length`` not an integer >= 1 (0 would
            answer ``""`` everywhere).
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
    """:func:`postprocess_predictions`, plus what the official SQuAD 2.0 script's threshold
    search needs (its ``--na-prob-file``; ``run_qa.py`` writes the same as ``null_odds.json``).

    Returns:
        ``(answers, best_answers, null_odds)``: the answers of :func:`postprocess_predictions`;
        every example's best non-null answer (``""`` only when it has no valid span); and its
        null odds ``min null score - best span score`` in logit units (``inf`` without a valid
        span), the higher the likelier "no answer".

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
    """The official SQuAD JSON (``{"version", "data": [articles]}``) of rows in the HF
    ``squad_v2`` schema, for :func:`dupbert.metrics.squad_v2`.

    Consecutive rows with the same title form one article, consecutive rows with the same context
    one paragraph (so a ``load_task("squad2", ...)`` split, subset or not, regains its structure).

    Raises:
        ValueError: ``dataset`` lacks a column (``id``, ``title``, ``context``, ``question``,
            ``answers``).
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
