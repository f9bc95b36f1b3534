"""Ensembles of fine-tuned models from their stored outputs, with no retraining (RQ5).

Kao et al. (2020), experiments (ensemble): models with *different duplication configurations*
combined by summing their output probabilities give the paper's best SQuAD 2.0 score
(:data:`dupbert.study.paper.PAPER_SCORES`). RQ3 runs (:func:`dupbert.training.finetuning.finetune` with
``outputs_dir``) store per-example outputs as ``<outputs_dir>/<run_key>.npz``; this module
reads, combines and scores them. The study design is :mod:`dupbert.study.rq5`.

The combination rule (summing probabilities = averaging them; methods.md, "RQ5: the ensemble
rule"):

- classification: the mean of the members' class probabilities ``[N, C]``, then the argmax.
- SQuAD 2.0, combined *before* span selection. Member ``m`` gives span ``(i, j)`` the
  probability ``p_m(i, j) = exp(start_logit_i - start_logsumexp + end_logit_j -
  end_logsumexp)`` (0 outside its stored top-20 candidates) and the null ``q_m =
  exp(null_score - start_logsumexp - end_logsumexp)``. Spans (union of candidates, ``j >= i``,
  at most 30 context tokens) score ``log mean_m p_m(i, j)``, the null ``log mean_m q_m``; then
  selection as ``run_qa.py`` (:func:`dupbert.training.qa.select_answers`, threshold 0.0, never tuned).
  A one-model ensemble reproduces its run except on examples split into several windows
  (compared here by probability, by raw logits in ``run_qa.py``) and fp16-rounded close calls.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.checks import check_list
from ..core.errors import DupbertError, ParameterError

MAX_ANSWER_LENGTH = 30  # run_qa.py's max_answer_length, in tokens
NULL_SCORE_DIFF_THRESHOLD = 0.0  # run_qa.py's default; fixed, never tuned
_CHUNK = 128  # features per block of the span computation (bounds memory on the full dev set)


class OutputsNotFound(DupbertError, FileNotFoundError):
    """The stored per-example outputs of a run (``<outputs_dir>/<run_key>.npz``) are missing."""


class OutputsMismatch(DupbertError, ValueError):
    """Runs cannot be combined: different tasks or evaluation sets, or stored outputs that do not
    match the evaluation examples they should belong to."""


class OutputsInvalid(DupbertError, ValueError):
    """Stored outputs that cannot be scored: NaN probabilities or logits (a run that diverged)."""


RUN_COLUMNS = ("run_key", "model", "task", "duplication", "seed")
"""The columns of a :func:`read_runs` frame that RQ5 needs."""




def _refuse_nan_outputs(outputs: Sequence[Mapping[str, np.ndarray]],
                        names: Sequence[str] | None = None) -> None:
    """Refuse members whose float outputs hold NaN (``-inf`` padding allowed), naming the member."""
    for index, member in enumerate(outputs):
        for key, value in member.items():
            value = np.asarray(value)
            if value.dtype.kind != "f" or value.ndim == 0 or value.size == 0:
                continue
            bad = np.isnan(value).reshape(value.shape[0], -1).any(axis=1)
            if bad.any():
                name = names[index] if names is not None else f"member {index}"
                rows = "examples" if key == "probabilities" else "features"
                raise OutputsInvalid(
                    f"{name}: its stored {key} are NaN at {int(bad.sum())} of {bad.size} {rows} "
                    f"(first: {rows[:-1]} {int(np.flatnonzero(bad)[0])}): a run with NaN outputs "
                    "(a fine-tuning that diverged) cannot be scored or combined; re-run it")


# ----------------------------------------------------------------------------- loading


def default_outputs_dir(results_path: str | os.PathLike) -> Path:
    """Where RQ3 stores the outputs of ``results_path``'s runs: ``results/cpu/rq3.jsonl`` ->
    ``results/cpu/rq3-outputs``."""
    path = Path(results_path)
    return path.with_name(f"{path.stem}-outputs")


def read_runs(results_paths: str | os.PathLike | Sequence[str | os.PathLike],
              outputs_dirs: str | os.PathLike | Sequence[str | os.PathLike | None] | None = None
              ) -> pd.DataFrame:
    """The rows of RQ3 results files, each with the folder that holds its stored outputs.

    Args:
        results_paths: JSON-lines results files (:class:`dupbert.core.results.ResultsFile`).
        outputs_dirs: one outputs folder per results file (``None``: :func:`default_outputs_dir`).

    Returns:
        ``ResultsFile.frame()`` rows of all files, each run once (first file wins, by
        ``run_key``), plus ``outputs_dir`` (str).

    Raises:
        FileNotFoundError: a results file does not exist.
        ValueError: ``outputs_dirs`` is not one folder per results file.
        ParameterError (a ValueError): ``results_paths`` empty or repeated; a results file with
            no runs, or rows without ``run_key``.
    """
    from ..core.results import ResultsFile

    single = isinstance(results_paths, (str, os.PathLike))
    paths = [results_paths] if single else check_list("results_paths", results_paths,
                                                       what="results files")
    if outputs_dirs is None or isinstance(outputs_dirs, (str, os.PathLike)):
        dirs = [outputs_dirs] * len(paths)
    else:
        dirs = list(outputs_dirs)
    if len(dirs) != len(paths):
        raise ValueError(f"{len(dirs)} outputs folders for {len(paths)} results files")
    frames = []
    for path, folder in zip(paths, dirs):
        if not Path(path).is_file():
            raise FileNotFoundError(f"no results file {path}: run RQ3 first (dupbert finetune "
                                    "--results ... --outputs-dir ..., or make book)")
        frame = ResultsFile(path).frame()
        if frame.empty:
            raise ParameterError(f"results file {path} holds no runs: run RQ3 first (dupbert "
                                 "finetune --results ..., or make book), or leave it out")
        if "run_key" not in frame:
            raise ParameterError(f"results file {path} is not an RQ3 results file: its rows have "
                                 f"no run_key (dupbert finetune writes one per run); its fields "
                                 f"are {list(frame.columns)}")
        frame["outputs_dir"] = str(folder if folder is not None else default_outputs_dir(path))
        frames.append(frame)
    return pd.concat(frames, ignore_index=True).drop_duplicates("run_key", ignore_index=True)


def outputs_path(row: Mapping, outputs_dir: str | os.PathLike | None = None) -> Path:
    """``<outputs_dir>/<run_key>.npz`` of a result row (default: the row's ``outputs_dir``)."""
    folder = outputs_dir if outputs_dir is not None else row.get("outputs_dir")
    if folder is None:
        raise ValueError(f"run {row['run_key']}: no outputs folder given and none in the row")
    return Path(folder) / f"{row['run_key']}.npz"


def load_outputs(rows: Sequence[Mapping] | pd.DataFrame,
                 outputs_dir: str | os.PathLike | None = None) -> list[dict[str, np.ndarray]]:
    """The stored per-example outputs of result rows, in row order.

    Args:
        rows: result rows (dicts or a :func:`read_runs` frame) with ``run_key``.
        outputs_dir: the folder of the ``.npz`` files; default each row's ``outputs_dir``.

    Returns:
        One dict of numpy arrays per row. Classification: ``probabilities`` ``[N, C]`` fp16,
        ``labels`` ``[N]`` int64. SQuAD: :func:`dupbert.training.qa.top_candidates` arrays (``[F, 20]``
        start/end indices and logits, ``[F]`` log-normalisers and null scores) and
        ``example_id`` ``[F]``.

    Raises:
        OutputsNotFound: a file is missing (the message says how to produce it).
    """
    records = rows.to_dict("records") if isinstance(rows, pd.DataFrame) else list(rows)
    loaded = []
    for row in records:
        path = outputs_path(row, outputs_dir)
        if not path.is_file():
            raise OutputsNotFound(
                f"no stored outputs for run {row['run_key']} ({row.get('model')}, "
                f"{row.get('task')}, {row.get('duplication')!r}, seed {row.get('seed')}): "
                f"{path} does not exist. Ensembles need the per-example outputs of every member: "
                f"re-run it with outputs saved (dupbert finetune ... --outputs-dir {path.parent}, "
                "or finetune(..., outputs_dir=...), or the rq3 notebook's outputs_dir parameter).")
        with np.load(path) as data:
            loaded.append({name: data[name] for name in data.files})
    return loaded


# ----------------------------------------------------------------------------- classification


def mean_probabilities(probabilities: Sequence[np.ndarray]) -> np.ndarray:
    """The probability-sum ensemble of classifiers: ``[N, C]`` float32 mean of ``M >= 1`` arrays
    ``[N, C]``.

    Raises:
        ValueError: no members. OutputsMismatch: members of different shapes.
    """
    arrays = [np.asarray(p, dtype=np.float32) for p in probabilities]
    if not arrays:
        raise ValueError("an ensemble needs at least one member")
    shapes = {a.shape for a in arrays}
    if len(shapes) != 1 or arrays[0].ndim != 2:
        raise OutputsMismatch(f"members' probabilities must all be [N, C] of one shape, got "
                              f"{shapes}")
    return np.mean(arrays, axis=0)


def classification_metrics(labels: np.ndarray, probabilities: np.ndarray) -> dict[str, float]:
    """Accuracy and macro-F1 (fractions, scikit-learn; a never-predicted class scores 0) of the
    argmax of ``probabilities`` ``[N, C]`` against ``labels`` ``[N]``, as
    :func:`dupbert.training.finetuning.finetune` rows (ties: the lowest class id).

    Raises:
        OutputsMismatch: wrong shapes. OutputsInvalid: NaN probabilities.
    """
    import sklearn
    from sklearn.metrics import accuracy_score, f1_score

    probabilities, labels = np.asarray(probabilities), np.asarray(labels)
    if probabilities.ndim != 2 or labels.shape != probabilities.shape[:1]:
        raise OutputsMismatch(f"probabilities must be [N, C] and labels [N], got probabilities "
                              f"of shape {probabilities.shape} and labels of shape {labels.shape}")
    bad = (np.isnan(probabilities).any(axis=1) if probabilities.dtype.kind == "f"
           else np.zeros(len(probabilities), bool))
    if bad.any():
        raise OutputsInvalid(f"probabilities are NaN at {int(bad.sum())} of {bad.size} examples "
                             f"(first: example {int(np.flatnonzero(bad)[0])}): their argmax would "
                             "be class 0 and the accuracy meaningless")
    predicted = probabilities.argmax(axis=-1)
    with sklearn.config_context(skip_parameter_validation=True):  # ~30 ms a call otherwise
        return {"accuracy": float(accuracy_score(labels, predicted)),
                "macro_f1": float(f1_score(labels, predicted, average="macro", zero_division=0))}


def ensemble_classification(outputs: Sequence[Mapping[str, np.ndarray]],
                            names: Sequence[str] | None = None) -> dict[str, float]:
    """Metrics of the probability-sum ensemble of classifiers' stored outputs.

    Args:
        outputs: :func:`load_outputs` dicts (``probabilities`` ``[N, C]``, ``labels`` ``[N]``).
        names: one name per member for messages; default ``member i``.

    Returns:
        ``{"accuracy", "macro_f1"}`` as fractions (:func:`classification_metrics`).

    Raises:
        OutputsMismatch: members scored on different examples or with different shapes.
        OutputsInvalid: a member's probabilities hold NaN.
    """
    if not outputs:
        raise ValueError("an ensemble needs at least one member")
    _refuse_nan_outputs(outputs, names)
    labels = np.asarray(outputs[0]["labels"])
    for member in outputs[1:]:
        if not np.array_equal(member["labels"], labels):
            raise OutputsMismatch("the members' labels differ: they were not evaluated on the same "
                                  "examples (same task and max_eval_samples needed)")
    return classification_metrics(labels, mean_probabilities([m["probabilities"] for m in outputs]))


# ----------------------------------------------------------------------------- SQuAD 2.0


def squad_eval_set(row: Mapping, data_dir: str | os.PathLike | None = None):
    """The evaluation examples and features a SQuAD 2.0 run was scored on, re-derived
    deterministically (offsets are not stored): ``load_task("squad2", "eval", seed=0)`` and
    :func:`dupbert.training.qa.prepare_eval_features` with the row's settings and the model's tokenizer.

    Args:
        row: a result row (``model``, ``max_eval_samples``, ``hyperparameters`` as a dict or
            flattened ``hyperparameters.*`` columns).
        data_dir: overrides ``$DUPBERT_DATA_DIR``.

    Returns:
        ``(examples, features)``: a ``datasets.Dataset`` and a dict of lists (``example_id``,
        ``offset_mapping``, ...), one entry per feature.

    Raises:
        The loaders' errors (``CorpusNotFound``, ``ModelNotAvailable``).
    """
    import transformers

    from ..tools.models import resolve_model_path
    from ..training.qa import prepare_eval_features
    from ..training.tasks import load_task

    max_length, doc_stride = (int(_hyperparameter(row, "max_length")),
                              int(_hyperparameter(row, "doc_stride")))
    max_samples = row.get("max_eval_samples")
    max_samples = None if max_samples is None or pd.isna(max_samples) else int(max_samples)
    examples = load_task("squad2", "eval", max_samples=max_samples, seed=0, data_dir=data_dir)
    tokenizer = transformers.AutoTokenizer.from_pretrained(resolve_model_path(row["model"]))
    features = prepare_eval_features(examples[:], tokenizer, max_length, doc_stride)
    return examples, features


def _hyperparameter(row: Mapping, name: str):
    if isinstance(row.get("hyperparameters"), Mapping):
        return row["hyperparameters"][name]
    return row[f"hyperparameters.{name}"]


def check_example_ids(outputs: Sequence[Mapping[str, np.ndarray]], features: Mapping,
                      names: Sequence[str] | None = None) -> None:
    """Check that every member's stored ``example_id`` ``[F]`` equals the features' column.

    Raises:
        OutputsMismatch: a different number of features or other ids (member and feature named).
    """
    expected = np.asarray(features["example_id"])
    for index, member in enumerate(outputs):
        name = names[index] if names is not None else f"member {index}"
        stored = np.asarray(member["example_id"])
        if stored.shape != expected.shape:
            raise OutputsMismatch(
                f"{name}: {stored.size} stored features but {expected.size} re-derived ones; the "
                "run was scored on other examples or with another tokenizer, max_length or "
                "doc_stride than its row says")
        differ = np.flatnonzero(stored != expected)
        if differ.size:
            f = int(differ[0])
            raise OutputsMismatch(
                f"{name}: stored example ids differ from the re-derived features at {differ.size} "
                f"of {expected.size} features (first: feature {f}, stored {str(stored[f])!r}, "
                f"expected {str(expected[f])!r})")


def _log_probabilities(member: Mapping[str, np.ndarray], name: str, width: int) -> np.ndarray:
    """``[F, width]`` log softmax of a member's start or end tokens; -inf outside its candidates."""
    index = member[f"{name}_index"].astype(np.int64)
    value = (member[f"{name}_logit"].astype(np.float64)
             - member[f"{name}_logsumexp"].astype(np.float64)[:, None])
    dense = np.full((index.shape[0], width), -np.inf)
    rows, columns = np.nonzero(index >= 0)
    dense[rows, index[rows, columns]] = value[rows, columns]
    return dense


def _logmeanexp(stack: np.ndarray) -> np.ndarray:
    """``log mean exp`` over axis 0, -inf where every member is -inf."""
    peak = stack.max(axis=0)
    safe = np.where(np.isfinite(peak), peak, 0.0)
    with np.errstate(divide="ignore"):
        return safe + np.log(np.exp(stack - safe).mean(axis=0))


def _ranked_union(log_probabilities: np.ndarray, context: np.ndarray, n: int):
    """Union of the members' candidate tokens ``[f, K]`` (-1 padded) ranked by mean probability,
    and the mask of real entries."""
    marginal = np.where(context, _logmeanexp(log_probabilities), -np.inf)  # [f, W]
    order = np.argsort(-marginal, axis=1, kind="stable")[:, :n]
    found = np.isfinite(np.take_along_axis(marginal, order, axis=1))
    width = max(int(found.sum(axis=1).max(initial=0)), 1)
    return np.where(found, order, -1)[:, :width], found[:, :width]


def _joint_scores(s_lp: np.ndarray, e_lp: np.ndarray) -> tuple[np.ndarray, bool]:
    """``mean_m exp(s_lp[m, f, u] + e_lp[m, f, v])`` as ``[f, K, K]``, or its log.

    One member: the log, exact (ranks equal the run's own); several: the probability by a batched
    matmul (faster; no underflow above 1e-300). Returns ``(scores, is_log)``.
    """
    if s_lp.shape[0] == 1:
        return s_lp[0][:, :, None] + e_lp[0][:, None, :], True
    starts = np.exp(s_lp).transpose(1, 2, 0)  # [f, K, M]
    ends = np.exp(e_lp).transpose(1, 0, 2)  # [f, M, K]
    return np.matmul(starts, ends) / s_lp.shape[0], False


def _best_pairs(log_start: np.ndarray, log_end: np.ndarray, context: np.ndarray, n: int,
                max_answer_length: int):
    """Best span per feature of a block: ``(start [f], end [f], log probability [f])``."""
    s_idx, s_ok = _ranked_union(log_start, context, n)
    e_idx, e_ok = _ranked_union(log_end, context, n)
    rows = np.arange(s_idx.shape[0])[:, None]
    joint, is_log = _joint_scores(log_start[:, rows, np.maximum(s_idx, 0)],  # [M, f, K]
                                  log_end[:, rows, np.maximum(e_idx, 0)])
    length = e_idx[:, None, :] - s_idx[:, :, None] + 1
    valid = (s_ok[:, :, None] & e_ok[:, None, :] & (length >= 1)
             & (length <= max_answer_length) & (joint > (-np.inf if is_log else 0.0)))
    score = np.where(valid, joint, -np.inf).reshape(len(s_idx), -1)
    flat = score.argmax(axis=1)  # first maximum: the higher-ranked start, then end
    features = np.arange(len(flat))
    best = score[features, flat]
    if not is_log:
        with np.errstate(divide="ignore"):
            best = np.log(np.maximum(best, 0.0))
    ok = np.isfinite(best)
    k = e_idx.shape[1]
    return (np.where(ok, s_idx[features, flat // k], -1),
            np.where(ok, e_idx[features, flat % k], -1), best)


def ensemble_spans(outputs: Sequence[Mapping[str, np.ndarray]], offset_mapping: Sequence,
                   max_answer_length: int = MAX_ANSWER_LENGTH) -> dict[str, np.ndarray]:
    """The best span of every feature under the probability-sum rule (module docstring), and the
    ensemble's null score, in the :func:`dupbert.training.qa.top_candidates` form with one candidate.

    Candidates are ranked by the mean start (end) probability (ties: lower token index); the best
    valid pair wins (ties as :func:`dupbert.training.qa.best_spans`).

    Args:
        outputs: ``M >= 1`` members' :func:`load_outputs` dicts for the same ``F`` features.
        offset_mapping: the features' ``offset_mapping`` (:func:`squad_eval_set`): ``None`` at
            tokens that are not context.
        max_answer_length: longest span in tokens (``run_qa.py``: 30).

    Returns:
        ``start_index``, ``end_index`` ``[F, 1]`` int64 (-1: no valid span), ``start_logit``
        ``[F, 1]`` float32 = the span's ensemble log probability (``<= 0``; ``-inf`` if none),
        ``end_logit`` ``[F, 1]`` zeros, ``null_score`` ``[F]`` float32 = the log no-answer
        probability: ready for :func:`dupbert.training.qa.select_answers`.

    Raises:
        ValueError: no members. OutputsMismatch: members with different numbers of features or
            candidates outside a feature. OutputsInvalid: NaN in a member's stored outputs.
    """
    from ..training.qa import _context_mask

    if not outputs:
        raise ValueError("an ensemble needs at least one member")
    _refuse_nan_outputs(outputs)
    n_features = len(offset_mapping)
    for member in outputs:
        if member["start_index"].shape[0] != n_features:
            raise OutputsMismatch(f"a member has {member['start_index'].shape[0]} features, the "
                                  f"evaluation set {n_features}")
    offsets = list(offset_mapping)
    width = max(map(len, offsets), default=0)
    biggest = max(int(max(m["start_index"].max(initial=-1), m["end_index"].max(initial=-1)))
                  for m in outputs)
    if biggest >= width:
        raise OutputsMismatch(f"a stored candidate points at token {biggest}, but the longest "
                              f"feature has {width} tokens")
    context = _context_mask(offsets, width)  # [F, W]
    null = _logmeanexp(np.stack([
        m["null_score"].astype(np.float64) - m["start_logsumexp"].astype(np.float64)
        - m["end_logsumexp"].astype(np.float64) for m in outputs]))
    n_candidates = sum(m["start_index"].shape[1] for m in outputs)
    start_out = np.full(n_features, -1, np.int64)
    end_out = np.full(n_features, -1, np.int64)
    score_out = np.full(n_features, -np.inf, np.float64)
    for lo in range(0, n_features, _CHUNK):
        block = slice(lo, min(lo + _CHUNK, n_features))
        chunk = [{k: v[block] for k, v in m.items() if k != "example_id"} for m in outputs]
        start_out[block], end_out[block], score_out[block] = _best_pairs(
            np.stack([_log_probabilities(m, "start", width) for m in chunk]),
            np.stack([_log_probabilities(m, "end", width) for m in chunk]),
            context[block], n_candidates, max_answer_length)
    return {"start_index": start_out[:, None], "end_index": end_out[:, None],
            "start_logit": score_out.astype(np.float32)[:, None],
            "end_logit": np.zeros((n_features, 1), np.float32),
            "null_score": null.astype(np.float32)}


def ensemble_squad_predictions(outputs: Sequence[Mapping[str, np.ndarray]], examples,
                               features: Mapping,
                               max_answer_length: int = MAX_ANSWER_LENGTH,
                               null_score_diff_threshold: float = NULL_SCORE_DIFF_THRESHOLD
                               ) -> dict[str, str]:
    """SQuAD 2.0 answers of the probability-sum ensemble (:func:`ensemble_spans`, then
    :func:`dupbert.training.qa.select_answers`): ``{question id: answer text}``, ``""`` = no answer.

    Args:
        outputs: the members' :func:`load_outputs` dicts.
        examples, features: :func:`squad_eval_set` of the members' runs.

    Raises:
        OutputsMismatch: a member's stored example ids differ from the features'.
    """
    from ..training.qa import select_answers

    check_example_ids(outputs, features)
    spans = ensemble_spans(outputs, features["offset_mapping"], max_answer_length)
    return select_answers(examples, features, spans, max_answer_length=max_answer_length,
                          null_score_diff_threshold=null_score_diff_threshold)


# ----------------------------------------------------------------------------- one ensemble


def _setting(row: Mapping) -> tuple:
    """What must agree for runs to be combined: task, evaluation set, inputs (QA: the model too)."""
    from ..training.tasks import TASKS

    qa_task = row["task"] in TASKS and TASKS[row["task"]].kind == "qa"
    return (row["task"], row["model"] if qa_task else None,
            _none_if_nan(row.get("max_eval_samples")), int(_hyperparameter(row, "max_length")),
            int(_hyperparameter(row, "doc_stride")))


def _none_if_nan(value):
    return None if value is None or (isinstance(value, float) and np.isnan(value)) else int(value)


class Evaluator:
    """Scores ensembles of result rows, loading each run's outputs and each evaluation set once."""

    def __init__(self, data_dir=None, outputs_dir=None):
        self.data_dir, self.outputs_dir = data_dir, outputs_dir
        self._outputs: dict[str, dict] = {}
        self._eval_sets: dict[tuple, tuple] = {}

    def outputs(self, row: Mapping) -> dict:
        if row["run_key"] not in self._outputs:
            self._outputs[row["run_key"]] = load_outputs([row], self.outputs_dir)[0]
        return self._outputs[row["run_key"]]

    def eval_set(self, row: Mapping) -> tuple:
        key = _setting(row)
        if key not in self._eval_sets:
            self._eval_sets[key] = squad_eval_set(row, self.data_dir)
        return self._eval_sets[key]

    def __call__(self, rows: Sequence[Mapping]) -> dict:
        from ..training.metrics import squad_v2
        from ..training.qa import as_squad_json
        from ..training.tasks import TASKS

        if not rows:
            raise ValueError("an ensemble needs at least one member")
        tasks = sorted({row["task"] for row in rows})
        if len(tasks) > 1:
            raise OutputsMismatch(f"an ensemble combines runs of one task, got {tasks}")
        settings = {_setting(row) for row in rows}
        if len(settings) > 1:
            raise OutputsMismatch(
                "the members were not evaluated on the same inputs (task, model for SQuAD, "
                f"max_eval_samples, max_length, doc_stride differ): {sorted(settings, key=str)}")
        outputs = [self.outputs(row) for row in rows]
        names = [f"run {row['run_key']} ({row.get('model')}, {row.get('task')}, "
                 f"{row.get('duplication')!r}, seed {row.get('seed')})" for row in rows]
        _refuse_nan_outputs(outputs, names)
        if TASKS[tasks[0]].kind != "qa":
            return ensemble_classification(outputs, names)
        examples, features = self.eval_set(rows[0])
        check_example_ids(outputs, features, [f"run {row['run_key']}" for row in rows])
        predictions = ensemble_squad_predictions(outputs, examples, features)
        return dict(squad_v2(as_squad_json(examples), predictions))


def evaluate_ensemble(rows: Sequence[Mapping] | pd.DataFrame,
                      outputs_dir: str | os.PathLike | None = None,
                      data_dir: str | os.PathLike | None = None) -> dict:
    """The metrics of the probability-sum ensemble of result rows (one row = that run alone).

    Args:
        rows: result rows of one task and evaluation set (dicts or a :func:`read_runs` frame).
        outputs_dir: the folder of the ``<run_key>.npz`` files (default: each row's
            ``outputs_dir``).
        data_dir: overrides ``$DUPBERT_DATA_DIR`` (SQuAD: to re-derive the features).

    Returns:
        The keys of :func:`dupbert.training.finetuning.finetune` rows' ``metrics``: classification
        ``accuracy``, ``macro_f1`` (fractions); SQuAD 2.0 the official keys (percent; ``exact``,
        ``f1``, ``total``, ``HasAns_*``, ``NoAns_*``).

    Raises:
        OutputsNotFound: a member's outputs file is missing.
        OutputsMismatch: mixed tasks or evaluation sets, or stored example ids that do not
            match the re-derived features.
        OutputsInvalid: a member's stored outputs hold NaN (the message names its run).
    """
    records = rows.to_dict("records") if isinstance(rows, pd.DataFrame) else list(rows)
    return Evaluator(data_dir, outputs_dir)(records)
