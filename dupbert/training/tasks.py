"""Downstream tasks for RQ3-RQ5 fine-tuning as ``datasets.Dataset``: SST-2, SNLI, SQuAD 2.0 and
USPTO-50k reaction classes.

As in :mod:`dupbert.core.data`: local files first (``data_dir``, else ``$DUPBERT_DATA_DIR``; layout
in the data folder's ``SOURCES.md`` / ``SOURCES-domain.md``), the Hub only when no data
directory is configured and the task has a Hub copy (SST-2, SNLI, SQuAD 2.0).

Offline substitutes (each spec's ``note``; book/methods.md, "Deviations from the paper"): SNLI
trains on the official test split and evaluates on dev; SQuAD 2.0 trains on the 10 train
articles plus the odd-numbered dev articles and evaluates on the even-numbered ones
(article-disjoint); USPTO-50k trains on its validation split and tests on its test split.

Subsets (``max_samples``) are fixed-seed, stratified (by label; SQuAD by article and
answerable) and keep the original row order.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import datasets
import numpy as np
import pandas as pd

from ..core.checks import check_number
from ..core.data import (DATA_DIR_ENV, CorpusNotFound, load_from_hub, local_file, read_sst2,
                   read_uspto50k, resolve_data_dir)
from ..core.errors import ParameterError
from .task_specs import SPLITS, TASKS, USPTO50K_CLASSES, TaskSpec, _check_split  # noqa: F401

class UnknownTask(ParameterError):
    """A task name that is not one of :data:`TASKS` (:func:`task_spec`, the one check)."""


def task_spec(name: str) -> TaskSpec:
    """The :class:`TaskSpec` of ``name``; UnknownTask if not in :data:`TASKS`."""
    if not isinstance(name, str) or name not in TASKS:
        raise UnknownTask(f"unknown task {name!r}; the tasks are {', '.join(TASKS)}")
    return TASKS[name]


def check_for_task(hp, task: str) -> None:
    """ParameterError unless ``hp`` (a ``dupbert.training.hyperparameters.HyperParameters``) can
    run ``task``: ``max_length`` leaves at least one text token
    besides the special tokens (3 for one text, 5 for a pair; with less the tokenizer keeps no
    text or does not truncate), and for SQuAD ``doc_stride < max_length``.
    """
    spec = task_spec(task)
    needed = 2 * len(spec.text_columns) + 1
    if hp.max_length < needed:
        raise ParameterError(
            f"max_length {hp.max_length} is too short for {task}: its inputs "
            f"({', '.join(spec.text_columns)}) need {len(spec.text_columns) + 1} special tokens "
            f"and at least one token each, so max_length >= {needed}")
    if spec.kind == "qa" and hp.doc_stride >= hp.max_length:
        raise ParameterError(f"doc_stride must be < max_length for {task} (windows of max_length "
                             f"tokens overlapping by doc_stride), got doc_stride {hp.doc_stride}, "
                             f"max_length {hp.max_length}")


def _counts(values) -> str:
    """``"3,000"``, or ``"2,000 or 3,000"`` where runs differ."""
    distinct = sorted({int(v) for v in values if pd.notna(v)})
    return " or ".join(f"{v:,}" for v in distinct) if distinct else "an unrecorded number of"


def data_note(task: str, runs: pd.DataFrame | None = None) -> str:
    """The task's data note (:attr:`TaskSpec.note`, the files' full sizes) followed by the
    training and evaluation examples the given runs actually used (questions for SQuAD 2.0).

    Args:
        task: a task name of :data:`TASKS`.
        runs: ``ResultsFile.frame()`` rows (``task``, ``n_train``, ``n_eval``); ``None`` or no rows
            of ``task``: the note alone.

    Returns:
        ``"<note> Used by these runs: 3,000 training and 5,000 evaluation examples."``

    Raises:
        UnknownTask: an unknown ``task``.
    """
    note = task_spec(task).note
    if runs is None or "task" not in runs or not (runs["task"] == task).any():
        return note
    mine = runs[runs["task"] == task]
    unit = "questions" if task == "squad2" else "examples"
    train = _counts(mine["n_train"]) if "n_train" in mine else "an unrecorded number of"
    evaluation = _counts(mine["n_eval"]) if "n_eval" in mine else "an unrecorded number of"
    return f"{note} Used by these runs: {train} training and {evaluation} evaluation {unit}."


# --------------------------------------------------------------------------------------------------
# Features (explicit: `datasets` would guess types, e.g. ids as int64)

_S, _I = datasets.Value("string"), datasets.Value("int64")
SQUAD_V2_FEATURES = datasets.Features({  # the Hugging Face `squad_v2` schema
    "id": _S, "title": _S, "context": _S, "question": _S,
    "answers": {"text": datasets.Sequence(_S), "answer_start": datasets.Sequence(datasets.Value("int32"))},
})


def _task_features(name: str) -> datasets.Features:
    """The ``datasets.Features`` of :func:`load_task` for task ``name``."""
    spec = task_spec(name)
    labels = datasets.ClassLabel(names=list(spec.label_names))
    if name == "sst2":
        return datasets.Features({"idx": _I, "text": _S, "label": labels})
    if name == "snli":
        return datasets.Features({"idx": _I, "premise": _S, "hypothesis": _S, "label": labels})
    if name == "uspto50k":
        return datasets.Features({"id": _S, "text": _S, "class": _I, "label": labels})
    return SQUAD_V2_FEATURES


# --------------------------------------------------------------------------------------------------
# Readers: local file -> columns (dict of equal-length lists), file order.


def _read_snli(path: Path) -> dict[str, list]:
    # BECEL TSV: fields containing '"' are CSV-quoted (SOURCES.md), so a plain split is wrong
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t"))
    header, body = rows[0], rows[1:]
    if header != ["premise", "hypothesis", "label"] or any(len(r) != 3 for r in body):
        raise ValueError(f"{path}: expected 3 tab-separated columns premise, hypothesis, label "
                         f"(BECEL format, SOURCES.md); header is {header}")
    return {"idx": list(range(len(body))), "premise": [r[0] for r in body],
            "hypothesis": [r[1] for r in body], "label": [int(r[2]) for r in body]}


def _read_uspto50k(path: Path) -> dict[str, list]:
    columns = read_uspto50k(path)
    classes = columns["class"]
    if any(not 1 <= c <= 10 for c in classes):
        raise ValueError(f"{path}: reaction classes must be 1..10, found {sorted(set(classes))}")
    return {**columns, "label": [c - 1 for c in classes]}


def squad_columns(articles: Sequence[dict]) -> dict[str, list]:
    """Official SQuAD JSON ``data`` (articles -> paragraphs -> qas) flattened, in file order, into
    the HF ``squad_v2`` columns ``id, title, context, question, answers{text, answer_start}``
    (unanswerable: empty lists; ``plausible_answers`` dropped).
    """
    columns: dict[str, list] = {"id": [], "title": [], "context": [], "question": [], "answers": []}
    for article in articles:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                columns["id"].append(qa["id"])
                columns["title"].append(article["title"])
                columns["context"].append(paragraph["context"])
                columns["question"].append(qa["question"])
                columns["answers"].append({"text": [a["text"] for a in qa["answers"]],
                                           "answer_start": [a["answer_start"] for a in qa["answers"]]})
    return columns


def _squad_articles(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(
            path, encoding="utf-8") as handle:
        return json.load(handle)["data"]


def _squad2_article_split(train_articles: Sequence[dict], dev_articles: Sequence[dict],
                         split: str) -> list[dict]:
    """Offline SQuAD 2.0 splits: ``"train"`` = train articles + odd-position dev articles (0-based),
    ``"eval"`` = even-position dev articles.
    """
    if _check_split(split) == "train":
        return [*train_articles, *dev_articles[1::2]]
    return list(dev_articles[0::2])


_READERS: dict[str, Callable[[Path], dict[str, list]]] = {
    "sst2": read_sst2, "snli": _read_snli, "uspto50k": _read_uspto50k,
}


def _snli_from_hub(ds: datasets.Dataset) -> dict[str, list]:
    keep = [i for i, label in enumerate(ds["label"]) if label in (0, 1, 2)]  # -1 = no gold label
    return {"idx": keep, "premise": [ds["premise"][i] for i in keep],
            "hypothesis": [ds["hypothesis"][i] for i in keep], "label": [ds["label"][i] for i in keep]}


_HUB_COLUMNS: dict[str, Callable[[datasets.Dataset], dict[str, list]]] = {
    "sst2": lambda ds: {"idx": list(ds["idx"]), "text": list(ds["sentence"]), "label": list(ds["label"])},
    "snli": _snli_from_hub,
    "squad2": lambda ds: {c: list(ds[c]) for c in SQUAD_V2_FEATURES},
}


def _how_to_get(spec: TaskSpec, split: str) -> str:
    if spec.hub is None:
        return (f"run `dupbert data download --to DIR` (fetches it from its public origin, "
                f"{spec.source}; needs RDKit: pip install 'dupbert[domain]') and set {DATA_DIR_ENV}=DIR")
    hub_path, config, train_split, eval_split = spec.hub
    return (f"e.g. the project's shared data folder ({spec.source}); or unset {DATA_DIR_ENV} to load "
            f"the Hugging Face Hub copy {hub_path!r} ({config}, "
            f"{train_split if split == 'train' else eval_split})")


def _columns_from_hub(spec: TaskSpec, split: str) -> dict[str, list]:
    if spec.hub is None:
        raise CorpusNotFound(
            f"task {spec.name!r} needs a data directory, but no data_dir was given and "
            f"{DATA_DIR_ENV} is not set (it has no Hugging Face Hub copy). Point {DATA_DIR_ENV} at "
            f"a folder that contains {spec.file(split)}: {_how_to_get(spec, split)}.")
    hub_path, config, train_split, eval_split = spec.hub
    hub_split = train_split if split == "train" else eval_split
    ds = load_from_hub(f"task {spec.name!r} ({split})", hub_path, config, hub_split,
                       spec.file(split), spec.source)
    return _HUB_COLUMNS[spec.name](ds)


def data_source(data_dir: str | os.PathLike | None = None) -> str:
    """``"local"`` (a data directory: ``data_dir`` or ``$DUPBERT_DATA_DIR``) or ``"hub"``. Part of a
    run's key when not local, so Hub runs never pass for runs on the offline substitutes.
    """
    return "local" if resolve_data_dir(data_dir) is not None else "hub"


def task_files(name: str, data_dir: str | os.PathLike | None = None) -> list[Path]:
    """The local ``[train file, eval file]`` of task ``name`` (not checked for existence), e.g. to
    record their sha256; ``[]`` without a data directory (the Hub copy is used).

    Raises:
        UnknownTask: unknown ``name``.
    """
    spec = task_spec(name)
    root = resolve_data_dir(data_dir)
    return [] if root is None else [root / spec.train_file, root / spec.eval_file]


# --------------------------------------------------------------------------------------------------
# Stratified subsets


def strata(name: str, dataset: datasets.Dataset) -> list:
    """Each row's stratum for :func:`load_task`'s subsets: the label id (classification) or
    ``(title, answerable)`` (SQuAD).
    """
    if task_spec(name).kind == "qa":
        columns = dataset.select_columns(["title", "answers"])[:]
        return [(title, len(answers["text"]) > 0)
                for title, answers in zip(columns["title"], columns["answers"])]
    return dataset["label"][:]


def stratified_indices(groups: Sequence, n: int, seed: int = 0) -> np.ndarray:
    """Row indices of a fixed-seed stratified random subset of size ``n``, in increasing order.

    Each stratum gets ``n * n_g / N`` rounded by the largest-remainder (Hamilton) method (ties in
    seeded random order), so the total is exactly ``n``; rows are then drawn without replacement
    with ``numpy.random.default_rng(seed)``. Works for any ``1 <= n <= N``, also with fewer rows
    than strata or one-row strata (unlike scikit-learn's ``train_test_split(stratify=...)``).

    Args:
        groups: the stratum of each row (hashable values, length ``N``).
        n: subset size; ``n >= N`` returns every index.

    Raises:
        ParameterError: ``n`` not a positive integer, ``seed`` not an integer >= 0.
        TypeError: ``groups`` has no length.
    """
    total = len(groups)
    try:
        n = check_number("n", n, integer=True, minimum=1)
    except ParameterError:
        raise ParameterError(f"subset size n must be a positive integer, got {n!r}") from None
    seed = check_number("seed", seed, integer=True, minimum=0)
    if n >= total:
        return np.arange(total)
    rng = np.random.default_rng(seed)
    keys, inverse = np.unique(np.asarray([repr(g) for g in groups]), return_inverse=True)
    sizes = np.bincount(inverse, minlength=len(keys))
    quota = n * sizes / total
    counts = np.floor(quota).astype(int)
    remainder = quota - counts
    tiebreak = rng.permutation(len(keys))
    order = np.lexsort((tiebreak, -remainder))  # largest remainder first, seeded ties
    counts[order[: n - counts.sum()]] += 1
    chosen = [rng.choice(np.flatnonzero(inverse == g), size=c, replace=False)
              for g, c in enumerate(counts) if c]
    return np.sort(np.concatenate(chosen))


# --------------------------------------------------------------------------------------------------


def load_task(name: str, split: str, max_samples: int | None = None, seed: int = 0,
              data_dir: str | os.PathLike | None = None) -> datasets.Dataset:
    """Load a split of a fine-tuning task as a ``datasets.Dataset`` with explicit features.

    Columns (``label`` is a ``ClassLabel``; files, sizes and notes in :data:`TASKS`):

    - ``sst2``: ``idx`` (0-based row), ``text`` (GLUE ``sentence``), ``label``
      (negative/positive).
    - ``snli``: ``idx``, ``premise``, ``hypothesis``, ``label`` (entailment/neutral/contradiction
      = 0/1/2); train = the official test split, eval = dev.
    - ``squad2``: the HF ``squad_v2`` schema ``id``, ``title``, ``context``, ``question``,
      ``answers`` ``{text: [str], answer_start: [int32]}`` (empty = unanswerable); splits by
      article (:func:`_squad2_article_split`).
    - ``uspto50k``: ``id`` (patent), ``text`` (reaction SMILES ``reactants>>product``, no atom
      maps), ``class`` (1..10), ``label`` (``class - 1``, :data:`USPTO50K_CLASSES`); train =
      validation split, eval = test split. No Hub copy.

    Args:
        name: a key of :data:`TASKS`.
        split: ``"train"`` or ``"eval"``.
        max_samples: ``None``: all rows in file order; else ``min(max_samples, N)`` rows stratified
            by :func:`strata` (:func:`stratified_indices`), in the original order.
        seed: subset seed; unused without ``max_samples``.
        data_dir: overrides ``$DUPBERT_DATA_DIR``; with a data directory only local files are read.

    Raises:
        UnknownTask: unknown ``name``.
        ValueError: ``split`` not ``"train"``/``"eval"``; no rows.
        ParameterError: ``max_samples`` not None or an integer >= 1; ``seed`` not an integer >= 0.
        CorpusNotFound: the file is missing (names its path), or no data directory and no reachable
            Hub copy.
    """
    spec = task_spec(name)
    _check_split(split)
    if max_samples is not None:
        try:
            check_number("max_samples", max_samples, integer=True, minimum=1)
        except ParameterError:
            raise ParameterError(f"max_samples must be a positive number of rows or None, got "
                                 f"{max_samples!r}") from None
    check_number("seed", seed, integer=True, minimum=0)
    root = resolve_data_dir(data_dir)
    if root is None:
        columns, where = _columns_from_hub(spec, split), f"Hub dataset {spec.hub[0]}"
    else:
        if name == "squad2":  # the article split of the offline design reads both files
            paths = [local_file(root, spec.file(s), data_dir, f"task {name!r} ({s})",
                                _how_to_get(spec, s)) for s in SPLITS]
            columns = squad_columns(_squad2_article_split(*map(_squad_articles, paths), split))
            where = " and ".join(map(str, paths))
        else:
            path = local_file(root, spec.file(split), data_dir, f"task {name!r} ({split})",
                              _how_to_get(spec, split))
            columns, where = _READERS[name](path), str(path)
    if not columns or not next(iter(columns.values())):
        raise ValueError(f"task {name!r} ({split}) has no rows ({where})")
    dataset = datasets.Dataset.from_dict(columns, features=_task_features(name))
    if max_samples is not None and max_samples < len(dataset):
        dataset = dataset.select(stratified_indices(strata(name, dataset), max_samples, seed))
    return dataset


def _check_fits(spec: TaskSpec, dataset) -> None:
    """ValueError unless ``dataset`` has ``spec``'s columns and, for classification, its labels."""
    columns = list(getattr(dataset, "column_names", None) or [])
    needed = ["id", "title", "context", "question", "answers"] if spec.kind == "qa" else ["label"]
    missing = [column for column in needed if column not in columns]
    if missing:
        raise ValueError(f"the evaluation set is not {spec.name}'s: it lacks the column "
                         f"{missing[0]!r} (it has {', '.join(columns) or 'none'}); give a "
                         f"load_task({spec.name!r}, 'eval') split")
    if spec.kind == "qa":
        return
    feature = dataset.features["label"] if hasattr(dataset, "features") else None
    names = getattr(feature, "names", None)
    if names is not None and tuple(names) != spec.label_names:
        raise ValueError(f"the evaluation set's labels are {', '.join(names)}, not {spec.name}'s "
                         f"{', '.join(spec.label_names)}: it is another task's")
    labels = set(np.asarray(dataset["label"]).tolist())
    outside = [label for label in sorted(labels, key=repr)
               if not isinstance(label, int) or not 0 <= label < spec.num_labels]
    if outside:
        raise ValueError(f"the evaluation set has labels {outside[:5]} outside {spec.name}'s "
                         f"0..{spec.num_labels - 1} ({', '.join(spec.label_names)})")


def trivial_baselines(task: str, eval_dataset: datasets.Dataset) -> dict:
    """Scores of a model that ignores its input, on ``eval_dataset`` (a :func:`load_task` split).

    Classification: the majority class of this evaluation set (ties -> lowest label id):
    ``{"majority_label": name, "accuracy", "macro_f1"}``, fractions in [0, 1], macro-F1 as
    ``dupbert.finetune`` scores models (SST-2 dev: 0.5092 accuracy, 0.3374 macro-F1). QA: every
    answer ``""``, scored by :func:`dupbert.training.metrics.squad_v2` (percent; full SQuAD 2.0 dev: 50.07
    EM and F1).

    Raises:
        UnknownTask: unknown ``task``.
        ValueError: empty ``eval_dataset``, or one that is not ``task``'s (other labels or columns).
    """
    from sklearn.metrics import accuracy_score, f1_score

    spec = task_spec(task)
    if len(eval_dataset) == 0:
        raise ValueError(f"trivial_baselines({task!r}): the evaluation set is empty")
    _check_fits(spec, eval_dataset)
    if spec.kind == "qa":
        from .metrics import squad_v2
        from .qa import as_squad_json

        return squad_v2(as_squad_json(eval_dataset), {i: "" for i in eval_dataset["id"]})
    gold = np.asarray(eval_dataset["label"])
    majority = int(np.bincount(gold, minlength=spec.num_labels).argmax())
    predicted = np.full_like(gold, majority)
    return {"majority_label": spec.label_names[majority],
            "accuracy": float(accuracy_score(gold, predicted)),
            "macro_f1": float(f1_score(gold, predicted, average="macro", zero_division=0))}


FRACTION_METRICS = ("accuracy", "macro_f1")  # stored as fractions in [0, 1]


def in_points(metric: str, values):
    """``values`` of ``metric`` in percentage points: fractions × 100, SQuAD metrics as they are."""
    return values * 100 if metric in FRACTION_METRICS else values


def task_metrics(task: str) -> tuple[str, ...]:
    """The metrics reported for ``task``, primary first; UnknownTask if not in :data:`TASKS`."""
    return task_spec(task).metrics


SUBSETS = ("HasAns", "NoAns")
"""The SQuAD 2.0 question subsets whose metrics (``HasAns_f1``, ``NoAns_exact``, ...) exist only
when the evaluation set holds questions of that subset (:func:`dupbert.training.metrics.squad_v2`)."""


def empty_subset(rows: pd.DataFrame, metric: str) -> pd.Series:
    """Per row, whether ``metric`` is a SQuAD 2.0 subset metric (:data:`SUBSETS`, e.g. ``NoAns_f1``)
    whose subset has no question in that row's evaluation set: undefined there, not missing.

    Read from the row's ``baselines.*`` counts, else its ``metrics.*`` ones: empty where
    ``<subset>_total`` is 0, or NaN while ``total`` is there.

    Returns:
        A boolean Series on ``rows``' index; False for other metrics and for rows with neither
        count (their NaN values count as missing).
    """
    subset = metric.split("_", 1)[0]
    if subset not in SUBSETS or "_" not in metric:
        return pd.Series(False, index=rows.index)

    def column(name):
        return pd.to_numeric(rows[name], errors="coerce") if name in rows else \
            pd.Series(np.nan, index=rows.index)

    counts = {source: (column(f"{source}.{subset}_total"), column(f"{source}.total"))
              for source in ("baselines", "metrics")}
    from_baselines = counts["baselines"][0].notna() | counts["baselines"][1].notna()
    count = counts["baselines"][0].where(from_baselines, counts["metrics"][0])
    total = counts["baselines"][1].where(from_baselines, counts["metrics"][1])
    return (count == 0) | (count.isna() & total.notna())
