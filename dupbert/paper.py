"""What Kao et al. (2020) claim, as data, and our results set beside it.

Kao, Wu, Chi, Hsieh & Lee, *BERT's output layer recognizes all hidden layers? Some Intriguing
Phenomena and a simple way to boost BERT* (arXiv 2001.09309). Every claim is listed once, in
:data:`CLAIMS`, with an id that tables refer to; numbers not in our sources (DESIGN.md, section
1) are :data:`NOT_STATED`. :data:`REPLICATION` is an independent one-seed replication (a course
project, ``source="replication"``), never used as claims.

The rest turns a results frame (:meth:`dupbert.results.ResultsFile.frame`) into the tables of
RQ3/RQ4: metrics in points, mean ± 95% CI over seeds, paired gains, the paper's claim and the
verdict of :func:`dupbert.significance.verdict`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
import pandas as pd

from .checks import check_columns, plain_value as _plain
from .errors import ParameterError
from .tasks import TASKS, UnknownTask, empty_subset, in_points, task_metrics

NOT_STATED = "not stated"
PAPER = "Kao et al. (2020), arXiv 2001.09309"


@dataclasses.dataclass(frozen=True)
class Claim:
    """One claim of the paper.

    Attributes:
        id: stable identifier, e.g. ``"rq3-squad2-f1"``.
        rq: the research question (1-5) of the book that tests it.
        task: a name of :data:`dupbert.tasks.TASKS`, or ``None`` (not about one task).
        metric: the metric (``accuracy``, ``f1``, ``exact``, ...) or a description.
        claimed_gain: the claimed gain over the baseline in percentage points (accuracy × 100,
            SQuAD EM/F1 as they are); ``0.0`` for "no gain"; ``None`` where the paper gives none.
        paper_value: the paper's number(s) as text, or ``"not stated"``.
        source: the part of the paper that carries the claim.
    """

    id: str
    rq: int
    statement: str
    task: str | None
    metric: str
    claimed_gain: float | None
    paper_value: str
    source: str


CLAIMS: tuple[Claim, ...] = (
    Claim("rq1-head-decodes-every-layer", 1,
          "The pretrained MLM output layer, trained only on the last hidden layer, reconstructs "
          "the input tokens when applied to the hidden state of every layer.",
          None, "token reconstruction accuracy", None, NOT_STATED, "abstract; probing section"),
    Claim("rq1-holds-with-duplicated-layers", 1,
          "The reconstruction from every layer still holds when some layers are duplicated.",
          None, "token reconstruction accuracy", None, NOT_STATED, "abstract; probing section"),
    Claim("rq2-layers-distributed-similarly", 2,
          "The hidden states of different layers are distributed similarly enough for one "
          "output layer to decode them all.",
          None, "hidden-state statistics and similarity", None, NOT_STATED,
          "analysis section"),
    Claim("rq3-method", 3,
          "Duplicating pretrained layers (no extra training; in BERT deep copies with no "
          "weight sharing, e.g. the first three layers of BERT-base; in ALBERT more repeats of "
          "its one shared layer) and fine-tuning with the baseline's hyper-parameters improves "
          "downstream results.",
          None, "downstream metric", None, NOT_STATED, "abstract; method section"),
    Claim("rq3-squad2-f1", 3,
          "Layer duplication improves SQuAD 2.0 by up to +1.5 F1.",
          "squad2", "f1", 1.5, "up to +1.5 F1", "experiments (SQuAD 2.0)"),
    Claim("rq3-squad2-exact", 3,
          "Layer duplication improves SQuAD 2.0 exact match (size of the gain not in our "
          "sources).",
          "squad2", "exact", None, NOT_STATED, "experiments (SQuAD 2.0)"),
    Claim("rq3-snli-accuracy", 3,
          "Layer duplication improves SNLI by up to +0.6 accuracy.",
          "snli", "accuracy", 0.6, "up to +0.6 accuracy", "experiments (SNLI)"),
    Claim("rq3-sst2-accuracy", 3,
          "Layer duplication gives no gain on SST-2.",
          "sst2", "accuracy", 0.0, "no gain", "experiments (SST-2)"),
    Claim("rq4-consistent-across-models", 4,
          "The gain from duplication is consistent across BERT-based models (BERT-base; ALBERT "
          "base, large, xlarge, xxlarge) and tasks.",
          None, "downstream metric", None, NOT_STATED, "abstract; experiments"),
    Claim("rq5-ensemble-squad2-exact", 5,
          "An ensemble of models with different duplication configurations (output "
          "probabilities summed), ALBERT-based, reaches 85.50 EM on SQuAD 2.0.",
          "squad2", "exact", None, "85.50 EM", "experiments (ensemble)"),
    Claim("rq5-ensemble-squad2-f1", 5,
          "The same best SQuAD 2.0 ensemble (ALBERT-based) reaches 88.59 F1.",
          "squad2", "f1", None, "88.59 F1", "experiments (ensemble)"),
)

# An absolute score the paper reports (not a gain): claim id -> value in points.
PAPER_SCORES: dict[str, float] = {"rq5-ensemble-squad2-exact": 85.50,
                                  "rq5-ensemble-squad2-f1": 88.59}

# The independent public replication (one seed; SQuAD 2.0 dev half of 6,078 questions; lr 3e-5,
# 3 epochs, batch 32, max_seq 384, stride 128). Not the paper.
REPLICATION_SETUP = ("independent public replication (course project), one seed, SQuAD 2.0 dev "
                     "half (6,078 questions), lr 3e-5, 3 epochs, batch 32, max_seq 384, "
                     "stride 128")
REPLICATION: tuple[dict, ...] = (
    dict(model="bert-base-uncased", configuration="baseline", exact=72.85, f1=76.04),
    dict(model="bert-base-uncased", configuration="duplicate layer 0", exact=71.93, f1=75.15),
    dict(model="bert-base-uncased", configuration="duplicate layer 5", exact=71.82, f1=75.04),
    dict(model="albert-base-v2", configuration="baseline (12 repeats)", exact=78.83, f1=82.00),
    dict(model="albert-base-v2", configuration="13 repeats of the shared layer", exact=79.45,
         f1=82.55),
    dict(model="albert-base-v2", configuration="17 repeats of the shared layer", exact=79.32,
         f1=82.49),
    dict(model="albert-base-v2", configuration="20 repeats of the shared layer", exact=79.30,
         f1=82.49),
)

# More of the same replication: every single layer, and RoBERTa (F1 points, SQuAD 2.0 dev half).
REPLICATION_SINGLE_LAYERS = dict(
    model="bert-base-uncased", configurations="duplicate any one of blocks 0-9", f1_low=74.17,
    f1_high=76.12, baseline_f1=76.04)
REPLICATION_ROBERTA = dict(model="roberta-base", configuration="duplicate the first 3 layers",
                           f1=82.94, baseline_f1=82.67)

# Published seed spread of fine-tuning (accuracy points), to set beside ours. No published seed sd
# was found for SST-2 or SQuAD 2.0.
SEED_SPREAD: tuple[dict, ...] = (
    dict(source="Zhou et al. 2020 (InstabilityAnalysis per-seed results)", model="bert-base",
         task="snli", data="full SNLI train", seeds=10, statistic="sd", value=0.11),
    dict(source="Zhou et al. 2020 (InstabilityAnalysis per-seed results)", model="bert-base",
         task="mnli-m", data="full MNLI train", seeds=10, statistic="sd", value=0.24),
    dict(source="McCoy et al. 2020", model="bert-base", task="mnli", data="full MNLI train",
         seeds=100, statistic="range of dev accuracy", value="83.6-84.8"),
)

# ALBERT paper (Lan et al. 2019, arXiv 1909.11942, appendix): ALBERT-large *pretrained* with 12 / 24 /
# 48 applications of its shared layer (not duplicated after pretraining): SQuAD 2.0 F1.
ALBERT_DEPTH: tuple[dict, ...] = (
    dict(model="albert-large", applications=12, squad2_f1=80.7),
    dict(model="albert-large", applications=24, squad2_f1=81.8),
    dict(model="albert-large", applications=48, squad2_f1=81.8),
)
ALBERT_PAPER = "Lan et al. (2019), arXiv 1909.11942"


def seed_spread() -> pd.DataFrame:
    """:data:`SEED_SPREAD` as a frame (one row per published figure)."""
    return pd.DataFrame(SEED_SPREAD)


# Configurations that are not the paper's method: no claim applies to them.
NOT_THE_METHOD = {"baseline": "the baseline", "unshared baseline": "baseline variant"}
# The depth control *is* compared (with its reference, as a secondary comparison: does depth alone
# help?), but no claim of the paper applies to it.
CONTROLS = {"depth control": "control"}


def claims() -> pd.DataFrame:
    """Every claim, one row each, in :data:`CLAIMS` order (columns = :class:`Claim` fields)."""
    frame = pd.DataFrame([dataclasses.asdict(c) for c in CLAIMS], dtype=object)
    return frame.astype({"rq": int})


def claim(claim_id: str) -> Claim:
    """The claim with id ``claim_id``.

    Raises:
        KeyError: no such claim; the message lists the ids.
    """
    for c in CLAIMS:
        if c.id == claim_id:
            return c
    raise KeyError(f"no claim {claim_id!r}; claims are {[c.id for c in CLAIMS]}")


def replication() -> pd.DataFrame:
    """The public one-seed replication's SQuAD 2.0 EM and F1 (points) with its F1 gain over its own
    baseline; ``source`` is ``"replication"``."""
    frame = pd.DataFrame(REPLICATION)
    base = frame[frame["configuration"].str.startswith("baseline")].set_index("model")["f1"]
    frame["f1_gain"] = (frame["f1"] - frame["model"].map(base)).round(2)
    frame["task"] = "squad2"
    frame["source"] = "replication"
    frame["setup"] = REPLICATION_SETUP
    return frame


def gain_claim(task: str, metric: str) -> Claim | None:
    """The RQ3 claim about a duplication gain on ``task`` measured by ``metric`` (``None`` if
    the paper states none)."""
    for c in CLAIMS:
        if c.rq == 3 and c.task == task and c.metric == metric:
            return c
    return None


# ----------------------------------------------------------------------------- our results


def _refuse_empty_floor_subset(group: pd.DataFrame, task: str, metric: str,
                               empty: pd.Series) -> None:
    """Refuse rows whose evaluation set leaves the learning floor's metric undefined."""
    if task not in LEARNING_FLOORS or LEARNING_FLOORS[task][0] != metric or not empty.any():
        return
    first = group[empty].iloc[0]
    subset = metric.split("_", 1)[0]
    raise ParameterError(
        f"the evaluation set of model {_plain(first['model'])!r} on task {task!r} (duplication "
        f"{_plain(first['duplication'])!r}, seed {_plain(first['seed'])!r}) has no {subset} "
        f"questions, so {metric}, the metric of the task's learning floor, is undefined and "
        f"whether the baseline learned cannot be judged; evaluate on a set with {subset} "
        f"questions (a larger max_eval_samples)")


RUN_COLUMNS = ("model", "task", "duplication", "seed")
"""The columns that name a run in a results frame (``ResultsFile.frame()``)."""


def _refuse_nan(points: pd.DataFrame, why: str) -> None:
    """Refuse :func:`points_frame` rows whose value is NaN, naming the first run."""
    undefined = points[points["value"].isna()]
    if undefined.empty:
        return
    first = undefined.iloc[0]
    more = f" (and {len(undefined) - 1} more)" if len(undefined) > 1 else ""
    raise ParameterError(
        f"the run of model {_plain(first['model'])!r}, task {_plain(first['task'])!r}, "
        f"duplication {_plain(first['duplication'])!r}, seed {_plain(first['seed'])!r} has no "
        f"{first['metric']} (metrics.{first['metric']} is NaN){more}: {why}; re-run it or drop "
        f"its row")


# Pre-registered floors (RQ3 chapter, fixed before the runs): a comparison is judged only when
# its baseline's mean beats the trivial baseline clearly. Task -> (metric, floor in points).
# Trivial baselines: SNLI majority 34, SST-2 majority 51, USPTO-50k majority 30.5, SQuAD 2.0
# all-empty HasAns F1 0 (its overall F1 is the unanswerable share, ~50, whatever the model knows).
LEARNING_FLOORS: dict[str, tuple[str, float]] = {
    "snli": ("accuracy", 55.0),
    "sst2": ("accuracy", 80.0),
    "uspto50k": ("accuracy", 80.0),
    "squad2": ("HasAns_f1", 25.0),
    "squad2-split": ("HasAns_f1", 25.0),
}
DID_NOT_LEARN = "did not learn"


def learning_floor(task: str) -> tuple[str, float]:
    """``(metric, floor)`` of ``task`` (:data:`LEARNING_FLOORS`; points).

    Raises:
        KeyError: a task without a pre-registered floor (the message lists them).
    """
    if task not in LEARNING_FLOORS:
        raise KeyError(f"no learning floor for task {task!r}; floors exist for {sorted(LEARNING_FLOORS)}")
    return LEARNING_FLOORS[task]


def learning_status(results: pd.DataFrame, baseline: str = "baseline") -> pd.DataFrame:
    """Did each model's baseline learn each task? The rule applied before judging any comparison
    (RQ3, RQ4, RQ5, results at a glance).

    Args:
        results: ``ResultsFile.frame()`` rows, or a :func:`points_frame`.

    Returns:
        One row per (model, task) with a baseline run: ``floor_metric``, ``floor`` (points),
        ``baseline_mean`` (points, over seeds), ``n_seeds`` and ``learned`` (mean >= floor).

    Raises:
        ParameterError (a ValueError): a missing column; a task dupbert does not know; a
            baseline run whose floor metric is NaN (other metrics may be NaN).
        KeyError: a task without a learning floor (:func:`learning_floor`).
    """
    if isinstance(results, pd.DataFrame) and "value" in results:
        check_columns(results, (*RUN_COLUMNS, "metric", "value"), "results")
        points = results
    else:
        points = points_frame(results)
    rows = []
    for (model, task), group in points.groupby(["model", "task"], sort=False):
        metric, floor = learning_floor(task)
        base = group[(group["duplication"] == baseline) & (group["metric"] == metric)]
        if base.empty:
            continue
        _refuse_nan(base, f"the floor ({metric} >= {floor:g}) is judged on the mean over every "
                          f"baseline seed")
        mean = float(base["value"].mean())
        rows.append({"model": model, "task": task, "floor_metric": metric, "floor": floor,
                     "baseline_mean": mean, "n_seeds": int(len(base)), "learned": mean >= floor})
    return pd.DataFrame(rows, columns=["model", "task", "floor_metric", "floor", "baseline_mean",
                                       "n_seeds", "learned"])


def learned(status: pd.DataFrame, model: str, task: str) -> bool:
    """Whether ``model``'s baseline learned ``task`` in a :func:`learning_status` frame (no baseline
    run: ``False``)."""
    cell = status[(status["model"] == model) & (status["task"] == task)]
    return bool(not cell.empty and cell["learned"].iloc[0])


STALLED_COLUMNS = ["model", "task", "duplication", "seed", "metric", "value", "trivial", "floor",
                   "cutoff"]
"""The columns of :func:`stalled_runs`."""


def stalled_runs(points: pd.DataFrame) -> pd.DataFrame:
    """Single runs, of any configuration, that ended below the midpoint of their trivial baseline
    and their task's learning floor, on the floor's metric. Exploratory: no verdict uses it.

    Args:
        points: a :func:`points_frame`.

    Returns:
        :data:`STALLED_COLUMNS`, one row per such run in ``points``' order (``value``,
        ``trivial``, ``floor``, ``cutoff``: points).

    Raises:
        ParameterError (a ValueError): ``points`` not a DataFrame or lacking a column.
    """
    check_columns(points, ("model", "task", "duplication", "seed", "metric", "value", "trivial"),
                  "points")
    floors = points["task"].map(lambda task: LEARNING_FLOORS.get(task, (None, np.nan)))
    on_floor_metric = points["metric"] == floors.str[0]
    rows = points[on_floor_metric].assign(floor=floors[on_floor_metric].str[1].astype(float))
    rows = rows.assign(cutoff=(rows["trivial"].astype(float) + rows["floor"]) / 2)
    stalled = rows[rows["value"].astype(float) < rows["cutoff"]]
    return stalled[STALLED_COLUMNS].reset_index(drop=True)


SETTING_COLUMNS = ("max_train_samples", "max_eval_samples", "train_subset_seed", "data_source")


def run_settings(results: pd.DataFrame) -> pd.Series:
    """Each run's setting as one string, ``name=value`` for every ``hyperparameters.*`` column and
    :data:`SETTING_COLUMNS` present (runs of different settings are never pooled), on
    ``results``' index."""
    columns = sorted(c for c in results.columns if c.startswith("hyperparameters.")) + [
        c for c in SETTING_COLUMNS if c in results.columns]
    text = results[columns].map(lambda value: "None" if pd.isna(value) else str(value))
    return pd.Series([" ".join(f"{c}={v}" for c, v in zip(columns, row)) for row in text.to_numpy()],
                     index=results.index, dtype=object)


def keep_main_setting(results: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Per model and task, only the runs of its most frequent setting (:func:`run_settings`; a tie
    keeps the one seen first).

    Returns:
        ``(kept, n_left_out)``: the kept rows (plus a ``setting`` column; index renumbered, file
        order kept) and how many runs were left out.

    Raises:
        ParameterError (a ValueError): ``results`` not a DataFrame or without ``model``/``task``.
    """
    check_columns(results, (), "results")
    if not results.empty:
        check_columns(results, ("model", "task"), "results")
    if results.empty:
        return results.assign(setting=pd.Series(dtype=object)), 0
    results = results.assign(setting=run_settings(results))
    sizes = results.groupby(["model", "task", "setting"], sort=False).size().reset_index(name="n")
    main = sizes.sort_values("n", ascending=False, kind="stable").drop_duplicates(["model", "task"])
    kept = results.merge(main[["model", "task", "setting"]], how="inner")
    return kept.reset_index(drop=True), len(results) - len(kept)


def points_frame(results: pd.DataFrame) -> pd.DataFrame:
    """A results frame (``ResultsFile.frame()``) as one row per run and metric, in points.

    Returns:
        Columns ``model, task, duplication, reference, role, seed, metric, value, trivial,
        trivial_name``; ``trivial`` is the trivial baseline (majority class / all-empty answers)
        on the same evaluation set. A metric without a ``metrics.<name>`` column is left out, as
        is a SQuAD 2.0 subset metric on a set without questions of that subset
        (:func:`empty_subset`); any other NaN is kept.

    Raises:
        ParameterError (a ValueError): a missing run column; rows of an unknown task
            (``UnknownTask``); a run whose set leaves its learning-floor metric undefined.
    """
    check_columns(results, RUN_COLUMNS, "results")
    unknown = [t for t in dict.fromkeys(results["task"]) if t not in TASKS]
    if unknown:
        count = int(results["task"].isin(unknown).sum())
        raise UnknownTask(f"results have {count} row{'s' if count > 1 else ''} of unknown "
                             f"task{'s' if len(unknown) > 1 else ''} "
                             f"{', '.join(repr(_plain(t)) for t in unknown)}; the tasks are "
                             f"{', '.join(TASKS)}")
    rows = []
    for task, group in results.groupby("task", sort=False):
        for metric in task_metrics(task):
            column = f"metrics.{metric}"
            empty = empty_subset(group, metric)
            _refuse_empty_floor_subset(group, task, metric, empty)  # with or without the column
            if column not in group:
                continue
            measured = group[~empty]
            frame = measured[["model", "task", "duplication", "seed"]].copy()
            for field in ("reference", "role"):
                frame[field] = measured[field] if field in measured else None
            frame["metric"] = metric
            frame["value"] = in_points(metric, measured[column].astype(float))
            trivial = f"baselines.{metric}"
            frame["trivial"] = (in_points(metric, measured[trivial].astype(float))
                                if trivial in measured else np.nan)
            if ("baselines.majority_label" in measured
                    and measured["baselines.majority_label"].notna().all()):
                frame["trivial_name"] = "majority class (" + measured[
                    "baselines.majority_label"].astype(str) + ")"
            else:
                frame["trivial_name"] = "no answer to every question"
            rows.append(frame)
    columns = ["model", "task", "duplication", "reference", "role", "seed", "metric", "value",
               "trivial", "trivial_name"]
    if not rows:
        return pd.DataFrame(columns=columns)
    return pd.concat(rows, ignore_index=True)[columns]


def pending(n_pairs: int, planned: int) -> str:
    """The verdict of a comparison whose pre-registered seeds have not all landed."""
    return f"pending ({n_pairs}/{planned} seeds)"


COMPARISON_COLUMNS = [
    "model", "task", "metric", "duplication", "n", "mean", "std", "ci_low", "ci_high", "reference",
    "role", "n_pairs", "gain", "gain_ci_low", "gain_ci_high", "p_value", "n_tests",
    "bonferroni_confidence", "bonferroni_ci_low", "bonferroni_ci_high", "min_detectable_gain",
    "p_adjusted", "significant", "trivial", "trivial_name", "learned",
    "claim_id", "claimed_gain", "paper_value", "verdict"]
"""The columns of a :func:`comparison` table with gains (a baseline alone puts ``trivial``,
``trivial_name`` before ``reference``, and has no ``significant``)."""


def comparison(results: pd.DataFrame, baseline: str = "baseline",
               planned_seeds: Mapping[tuple[str, str], int] | None = None,
               family_sizes: Mapping[tuple[str, str], int] | None = None) -> pd.DataFrame:
    """Every configuration against its reference, per model, task and metric, with the paper's
    claim beside it and the verdict of :func:`dupbert.significance.verdict`.

    Args:
        results: ``ResultsFile.frame()`` rows of one setting.
        planned_seeds: ``{(model, task): seeds}`` of a pre-registered study
            (``dupbert.profiles.planned_seeds``): a comparison with fewer seed pairs gets the
            verdict :func:`pending` instead of one read off part of the data (no optional
            stopping), and a secondary one stays out of Holm. ``None``: judged at any size.
        family_sizes: ``{(model, task): m}`` planned secondaries
            (:func:`dupbert.significance.paired_gains`).

    Returns:
        :data:`COMPARISON_COLUMNS`, one row per (model, task, metric, duplication), the baseline
        included: the summary over seeds (points) and the paired-gain columns of
        :func:`dupbert.significance.paired_gains` (NaN for the baseline itself); ``trivial``,
        ``trivial_name``; ``learned`` (:func:`learning_status`); ``claim_id``, ``claimed_gain``
        (``None`` where the paper claims nothing), ``paper_value``; ``verdict``
        (``"did not learn"``, ``"baseline"``/``"control"`` where no claim applies, or
        ``"pending (k/n seeds)"`` besides the rule's verdicts).

    Raises:
        ValueError: two runs of one configuration and seed (different settings pooled).
        ParameterError (a ValueError): as :func:`points_frame`; a task with none of its metric
            columns; a run whose metric is NaN (never dropped); bad
            ``planned_seeds``/``family_sizes``.
    """
    from .significance import paired_gains, summarize_runs

    points = points_frame(results)
    by = ["model", "task", "metric"]
    for task in dict.fromkeys(results["task"]):
        if not (points["task"] == task).any():
            count = int((results["task"] == task).sum())
            raise ParameterError(
                f"the {count} run{'s' if count > 1 else ''} of task {task!r} have none of its "
                f"metrics as a column ({', '.join(f'metrics.{m}' for m in task_metrics(task))}): "
                f"nothing to compare; the metric columns are "
                f"{[c for c in results.columns if str(c).startswith('metrics.')]}")
    _refuse_nan(points, "a comparison pairs every run with its reference at the same seed and "
                        "averages over seeds")
    if points.empty:
        return pd.DataFrame(columns=COMPARISON_COLUMNS)
    summary = summarize_runs(points, "value", by=[*by, "duplication"])
    gains = paired_gains(points, "value", baseline=baseline, by=by, family_sizes=family_sizes,
                         planned_seeds=planned_seeds)
    table = summary.merge(gains, on=[*by, "duplication"], how="left") if not gains.empty \
        else summary
    trivial = points.groupby(by, sort=False).agg(trivial=("trivial", "mean"),
                                                  trivial_name=("trivial_name", "first"))
    table = table.merge(trivial.reset_index(), on=by, how="left")
    for column in ("reference", "role", "gain", "gain_ci_low", "gain_ci_high", "p_value",
                   "n_tests", "bonferroni_confidence", "bonferroni_ci_low", "bonferroni_ci_high",
                   "p_adjusted", "min_detectable_gain", "n_pairs"):
        if column not in table:
            table[column] = np.nan
    status = learning_status(points, baseline)
    table["learned"] = [learned(status, m, t) for m, t in zip(table["model"], table["task"])]
    claims_ = [gain_claim(t, m) for t, m in zip(table["task"], table["metric"])]
    # object columns: a missing claim stays None (pandas makes it NaN beside a claimed one)
    table["claim_id"] = pd.Series([c.id if c else None for c in claims_], index=table.index,
                                  dtype=object)
    table["claimed_gain"] = pd.Series([c.claimed_gain if c else None for c in claims_],
                                      index=table.index, dtype=object)
    table["paper_value"] = [c.paper_value if c else NOT_STATED for c in claims_]
    table["verdict"] = [_verdict(row, c, planned_seeds)
                        for row, c in zip(table.to_dict("records"), claims_)]
    return table


def _verdict(row: dict, c: Claim | None,
             planned_seeds: Mapping[tuple[str, str], int] | None = None) -> str:
    from .significance import verdict

    if row["duplication"] == "baseline":
        return NOT_THE_METHOD["baseline"]
    has_pairs = row.get("n_pairs") is not None and bool(row["n_pairs"]) \
        and not np.isnan(row["n_pairs"])
    planned = (planned_seeds or {}).get((row["model"], row["task"]))
    landed = int(row["n_pairs"]) if has_pairs else int(row["n"])  # without pairs: its own runs
    if planned is not None and landed < planned:
        return pending(landed, int(planned))  # before the floor and the labels, too
    labels = {**NOT_THE_METHOD, **CONTROLS}
    if row["duplication"] in labels:
        return labels[row["duplication"]]
    if not row["learned"]:
        return DID_NOT_LEARN
    if not has_pairs:
        return "no reference run"
    p = row["p_adjusted"]
    # the pre-registered rule reads the 95% interval, for the secondaries too (their p is Holm's);
    # for a few hours on 2026-12-01, after all runs, it read the Bonferroni interval instead: no
    # verdict differed (methods.md)
    return verdict(row["gain"], row["gain_ci_low"], row["gain_ci_high"],
                   float(p) if p is not None else np.nan, c.claimed_gain if c else None)


OVERALL_COLUMNS = [
    "model", "task", "metric", "primary", "gain", "gain_ci_low", "gain_ci_high", "p_value",
    "min_detectable_gain", "n_pairs", "n_secondary", "n_secondary_pending", "n_secondary_gains",
    "n_secondary_losses", "best_secondary", "best_secondary_gain", "learned", "paper_value",
    "claimed_gain", "verdict"]
"""The columns of :func:`overall`."""
_OVERALL_NEEDS = ("model", "task", "metric", "duplication", "role", "n_pairs", "gain",
                  "gain_ci_low", "gain_ci_high", "p_value", "p_adjusted", "min_detectable_gain",
                  "learned", "paper_value", "claimed_gain", "verdict")


def overall(table: pd.DataFrame,
            family_sizes: Mapping[tuple[str, str], int] | None = None) -> pd.DataFrame:
    """Per model, task and metric of a :func:`comparison` table: the pre-registered primary
    comparison decides (``verdict`` is its verdict; ``no primary run`` without one), and the
    secondary configurations are counted beside it (significant after Holm).

    Args:
        table: :func:`comparison` output.
        family_sizes: ``{(model, task): m}`` planned secondaries: one with no run yet counts in
            ``n_secondary_pending``.

    Returns:
        :data:`OVERALL_COLUMNS`; the secondary counts and the best secondary are over the
        secondaries with all their planned seeds (``n_secondary``), pending ones are only
        counted (``n_secondary_pending``); ``primary``, ``best_secondary`` and ``claimed_gain``
        are ``None`` where there is none.

    Raises:
        ParameterError (a ValueError): ``table`` lacks a needed column; bad ``family_sizes``.
    """
    from .significance import _check_plan

    check_columns(table, _OVERALL_NEEDS, "the comparison table")
    _check_plan("family_sizes", family_sizes, ("model", "task"))
    if table.empty:
        return pd.DataFrame(columns=OVERALL_COLUMNS)
    rows = []
    for (model, task, metric), group in table.groupby(["model", "task", "metric"], sort=False):
        compared = group[group["n_pairs"].notna()]  # every configuration with a reference
        primary = compared[compared["role"] == "primary"]
        secondary = compared[compared["role"] != "primary"]
        waiting = secondary["verdict"].astype(str).str.startswith("pending")
        # planned secondaries with no row at all (no run landed) wait too
        unseen = (family_sizes or {}).get((model, task), 0) - len(secondary)
        n_pending = int(waiting.sum()) + max(0, unseen)
        secondary = secondary[~waiting]  # judged once complete (Holm leaves them out until then)
        claimed = group["claimed_gain"].iloc[0]
        claimed = None if claimed is None or pd.isna(claimed) else float(claimed)
        first = primary.iloc[0] if not primary.empty else None
        best = secondary.loc[secondary["gain"].idxmax()] if secondary["gain"].notna().any() else None
        significant = secondary["p_adjusted"] < 0.05
        if first is not None:
            verdict = first["verdict"]
        else:
            verdict = DID_NOT_LEARN if not bool(group["learned"].iloc[0]) else "no primary run"
        if claimed is None and verdict not in (DID_NOT_LEARN, "no primary run") \
                and not verdict.startswith("pending"):
            verdict = NOT_STATED
        rows.append({
            "model": model, "task": task, "metric": metric,
            "primary": first["duplication"] if first is not None else None,
            **{k: (first[k] if first is not None else np.nan)
               for k in ("gain", "gain_ci_low", "gain_ci_high", "p_value", "min_detectable_gain",
                         "n_pairs")},
            "n_secondary": len(secondary), "n_secondary_pending": n_pending,
            "n_secondary_gains": int((significant & (secondary["gain"] > 0)).sum()),
            "n_secondary_losses": int((significant & (secondary["gain"] < 0)).sum()),
            "best_secondary": best["duplication"] if best is not None else None,
            "best_secondary_gain": best["gain"] if best is not None else np.nan,
            "learned": bool(group["learned"].iloc[0]),
            "paper_value": group["paper_value"].iloc[0],
            "claimed_gain": claimed,
            "verdict": verdict,
        })
    table = pd.DataFrame(rows)
    # None stays None (pandas turns it into NaN beside numbers, or in a column of strings)
    for column in ("primary", "best_secondary", "claimed_gain"):
        if column in table:
            table[column] = pd.Series([row[column] for row in rows], index=table.index, dtype=object)
    return table


# ----------------------------------------------------------------------------- chapter tables
# The tables and text of the RQ3 and RQ4 chapters, from the frames above; scores in points.


def interval_text(mean, low, high, signed: bool = False) -> str:
    """``"12.34 [11.00, 13.68]"`` (``signed``: ``"+0.50 [-0.10, +1.10]"``); the mean alone where
    ``low`` is NaN, ``""`` where ``mean`` is NaN."""
    if pd.isna(mean):
        return ""
    sign = "+" if signed else ""
    text = f"{mean:{sign}.2f}"
    return text if pd.isna(low) else f"{text} [{low:{sign}.2f}, {high:{sign}.2f}]"


def p_text(p) -> str:
    """A p-value to three decimals, ``"<0.001"`` below 0.001, ``""`` for NaN."""
    return "" if pd.isna(p) else ("<0.001" if p < 0.001 else f"{p:.3f}")


def primary_metrics(frame: pd.DataFrame) -> dict[str, str]:
    """``{task: primary metric}`` for the tasks of ``frame``'s ``task`` column, in order of first
    appearance; ParameterError for a task dupbert does not know."""
    return {task: task_metrics(task)[0] for task in dict.fromkeys(frame["task"])}


def primary_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of a :func:`comparison` table on each task's primary metric."""
    return table[table["metric"] == table["task"].map(primary_metrics(table))]


def study_design(plan) -> pd.DataFrame:
    """RQ3's design table, one row per planned model and task (index ``model, task``): primary and
    secondary configurations, subset sizes, hyper-parameters, seeds, ``detectable (x sd)`` (the
    smallest gain the primary test detects with 80% power, in sds of the per-seed differences)
    and the learning floor.

    Args:
        plan: ``dupbert.profiles.PlannedSweep`` entries (``plan_sweep``).
    """
    from .significance import minimum_detectable_gain

    return pd.DataFrame([{
        "model": entry.model, "task": entry.task,
        "primary": " vs ".join(reversed(entry.primary)) if len(entry.primary) == 2 else "none",
        "secondary": ", ".join(d for d in entry.duplications if d not in entry.primary) or "none",
        "train": entry.max_train_samples or "all", "eval": entry.max_eval_samples or "all",
        "lr": f"{entry.hyperparameters.learning_rate:g}", "epochs": f"{entry.hyperparameters.epochs:g}",
        "batch": entry.hyperparameters.batch_size, "seeds": len(entry.seeds),
        "detectable (x sd)": round(minimum_detectable_gain(1.0, len(entry.seeds)), 2),
        "floor": "{} >= {:g}".format(*learning_floor(entry.task)) if entry.task in LEARNING_FLOORS else "none",
    } for entry in plan]).set_index(["model", "task"])


def verdict_rule_text() -> str:
    """The pre-registered verdict rule (:func:`dupbert.significance.verdict`'s docstring, as
    printed in RQ3) and what the design table's ``detectable (x sd)`` column means."""
    from .significance import ALPHA, verdict

    return (verdict.__doc__.strip().replace("\n    ", "\n")
            + "\n\nThe column 'detectable (x sd)' below: the smallest true gain the primary paired t-test "
            f"at alpha = {ALPHA} detects with 80% power, in standard deviations of the per-seed "
            "differences (exact, noncentral t); a secondary comparison in a Holm family of m needs "
            "more (alpha / m).")


def rq3_claims(tasks) -> pd.DataFrame:
    """The paper's RQ3 claims on ``tasks`` (index ``id``; ``task, metric, paper_value,
    claimed_gain``)."""
    claimed = claims()
    claimed = claimed[(claimed["rq"] == 3) & claimed["task"].isin(set(tasks))]
    return claimed[["id", "task", "metric", "paper_value", "claimed_gain"]].set_index("id")


def pilot_table(path) -> pd.DataFrame:
    """RQ3's classification pilots (``scripts/pilot_rq3.py`` JSON lines), one row per pilot:
    sizes, hyper-parameters, ``steps`` (the last evaluated), ``accuracy along the way`` and
    ``final`` (points, the accuracy at the last step, which a floor is judged on) and ``minutes``.
    Empty where ``path`` does not exist."""
    from pathlib import Path

    if not Path(path).is_file():
        return pd.DataFrame()
    pilots = pd.read_json(path, lines=True)
    pilots["steps"] = [curve[-1][0] for curve in pilots["curve"]]
    pilots["accuracy along the way"] = [", ".join(f"{100 * acc:.1f}" for _, acc, _ in curve)
                                        for curve in pilots["curve"]]
    pilots["final"] = [round(100 * curve[-1][1], 1) for curve in pilots["curve"]]
    pilots["minutes"] = (pilots["wall_s"] / 60).round(1)
    return pilots[["model", "task", "n_train", "n_eval", "learning_rate", "epochs", "batch_size",
                   "steps", "accuracy along the way", "final", "minutes"]
                  ].set_index(["model", "task"])


def squad_pilot_table(path) -> pd.DataFrame:
    """RQ3's SQuAD 2.0 pilots (finetune JSON lines), index ``model``: sizes, hyper-parameters, F1s
    (points, one decimal), whether the floor was reached, training minutes. Empty where ``path``
    does not exist."""
    from pathlib import Path

    if not Path(path).is_file():
        return pd.DataFrame()
    pilots = pd.json_normalize(pd.read_json(path, lines=True).to_dict("records"))
    floor_metric, floor = learning_floor("squad2")
    return pd.DataFrame({
        "model": pilots["model"], "n_train": pilots["n_train"], "n_eval": pilots["n_eval"],
        "learning_rate": pilots["hyperparameters.learning_rate"],
        "epochs": pilots["hyperparameters.epochs"], "steps": pilots["train_steps"],
        "HasAns F1": pilots["metrics.HasAns_f1"].round(1),
        "NoAns F1": pilots["metrics.NoAns_f1"].round(1),
        "F1": pilots["metrics.f1"].round(1),
        "best F1 (tuned threshold)": pilots["metrics.best_f1"].round(1),
        "all-empty F1": pilots["baselines.f1"].round(1),
        f"learned ({floor_metric} >= {floor:.0f})": pilots[f"metrics.{floor_metric}"] >= floor,
        "train minutes": (pilots["train_time_s"] / 60).round(0).astype(int),
    }).set_index("model")


def _bonferroni_text(row) -> str:
    """A secondary's simultaneous interval at 1 - 0.05/m, with its level."""
    if pd.isna(row.bonferroni_ci_low):
        return ""
    return (f"[{row.bonferroni_ci_low:+.2f}, {row.bonferroni_ci_high:+.2f}] "
            f"({100 * row.bonferroni_confidence:g}%)")


def task_table(table: pd.DataFrame, task: str, metric: str) -> pd.DataFrame:
    """RQ3's table of one task and metric (index ``model, configuration``; strings, points): per
    model its trivial baseline, then every configuration's mean, gain, Bonferroni CI (secondary),
    p, deciding p, smallest detectable gain, paper value and verdict.

    Args:
        table: :func:`comparison` output.
    """
    rows = []
    for name in dict.fromkeys(table.loc[table["task"] == task, "model"]):
        cell = table[(table["model"] == name) & (table["task"] == task) & (table["metric"] == metric)]
        if cell.empty:
            continue
        rows.append({"model": name, "configuration": f"trivial: {cell['trivial_name'].iloc[0]}",
                     "role": "", "seeds": "", f"{metric} [95% CI]": f"{cell['trivial'].iloc[0]:.2f}",
                     "gain [95% CI]": "", "Bonferroni CI": "", "vs": "", "p": "", "deciding p": "",
                     "smallest detectable gain": "", "paper": "", "verdict": ""})
        for row in cell.itertuples():
            compared = pd.notna(row.n_pairs)
            rows.append({
                "model": name, "configuration": row.duplication,
                "role": row.role if compared else "reference", "seeds": str(row.n),
                f"{metric} [95% CI]": interval_text(row.mean, row.ci_low, row.ci_high),
                "gain [95% CI]": interval_text(row.gain, row.gain_ci_low, row.gain_ci_high, signed=True),
                "Bonferroni CI": _bonferroni_text(row) if compared and row.role == "secondary" else "",
                "vs": row.reference if compared else "",
                "p": p_text(row.p_value), "deciding p": p_text(row.p_adjusted),
                "smallest detectable gain": "" if pd.isna(row.min_detectable_gain) else f"{row.min_detectable_gain:.2f}",
                "paper": row.paper_value if compared and row.duplication not in CONTROLS else "",
                "verdict": (f"{row.verdict} (secondary)" if row.role == "secondary"
                            and row.verdict in ("reproduced", "refuted", "undecided") else row.verdict),
            })
    return pd.DataFrame(rows).set_index(["model", "configuration"])


def study_table(study: pd.DataFrame, timed: bool = True) -> pd.DataFrame:
    """RQ3's one row per model and task from ``dupbert.profiles.study_summary``, as strings; the
    minutes column only if ``timed``."""
    shown = pd.DataFrame({
        "model": study["model"], "task": study["task"], "metric": study["metric"], "seeds": study["seeds"],
        "runs (primary; secondary)": study["runs_primary"] + "; " + study["runs_secondary"],
        "baseline [95% CI]": [interval_text(*v) for v in zip(study["baseline_mean"], study["baseline_ci_low"],
                                                             study["baseline_ci_high"])],
        "trivial": [interval_text(v, np.nan, np.nan) for v in study["trivial"]],
        "minutes per run (train + eval)": [f"{t:.0f} + {e:.1f}" if pd.notna(t) else ""
                                           for t, e in zip(study["train_min"], study["eval_min"])],
        "primary": study["primary"].fillna(""),
        "gain [95% CI]": [interval_text(g, lo, hi, signed=True) for g, lo, hi in zip(
            study["gain"], study["gain_ci_low"], study["gain_ci_high"])],
        "p": [p_text(v) for v in study["p_value"]],
        "smallest detectable gain": [interval_text(v, np.nan, np.nan) for v in study["min_detectable_gain"]],
        "verdict": study["verdict"],
    }).set_index(["model", "task"])
    return shown if timed else shown.drop(columns="minutes per run (train + eval)")


def _power_text(row, pairs: int) -> str:
    """What the seeds can decide: the detectable gain, or for "no gain" the equivalence limit."""
    from .significance import ALPHA, EQUIVALENCE_MARGIN, equivalence_sd_limit

    if row.claimed_gain != 0:
        return f"smallest detectable gain {row.min_detectable_gain:.2f}"
    limit = equivalence_sd_limit(pairs)
    return (f"\"no gain\" needs the whole 95% CI within ±{EQUIVALENCE_MARGIN:g}: its "
            f"half-width is {row.gain_ci_high - row.gain:.2f}, and at {pairs} seeds it fits only when the "
            f"paired differences' standard deviation is at most {limit:.2f}; by the pre-registered rule a "
            "significant difference refutes \"no gain\" before equivalence is checked, even one inside "
            f"±{EQUIVALENCE_MARGIN:g}" + (" (not the case here)" if row.p_value >= ALPHA else ""))


def _secondary_text(row) -> str:
    if row.n_secondary:
        return (f"Secondary: {row.n_secondary_gains} of {row.n_secondary} configurations significantly better and "
                f"{row.n_secondary_losses} significantly worse after Holm correction"
                + (f" (largest gain: *{row.best_secondary}*, {row.best_secondary_gain:+.2f})" if row.best_secondary else "")
                + (f"; {row.n_secondary_pending} more still short of {'their' if row.n_secondary_pending > 1 else 'its'} "
                   "planned seeds" if row.n_secondary_pending else "")
                + ". ")
    if row.n_secondary_pending:
        return (f"Secondary: {row.n_secondary_pending} configuration{'s' if row.n_secondary_pending > 1 else ''}, "
                "still short of the planned seeds. ")
    return ""


def findings_text(summary: pd.DataFrame, table: pd.DataFrame, results: pd.DataFrame) -> str:
    """RQ3's "what the numbers say", one Markdown bullet per model and task on its primary metric
    (baseline against floor, primary gain, p and power, secondary counts, claim and verdict);
    ``"No runs yet."`` without rows.

    Args:
        summary: :func:`overall` of ``table``.
        table: :func:`comparison` of ``results``.
        results: ``ResultsFile.frame()`` rows (for :func:`learning_status`).
    """
    lines = []
    status = learning_status(results) if len(results) else pd.DataFrame()
    for row in summary.itertuples():
        if row.metric != task_metrics(row.task)[0]:
            continue
        base = table[(table["model"] == row.model) & (table["task"] == row.task)
                     & (table["metric"] == row.metric) & (table["duplication"] == "baseline")]
        text = f"- **{row.model} on {row.task}** ({row.metric}): "
        if base.empty:
            lines.append(text + "no baseline run yet, nothing to compare.")
            continue
        base = base.iloc[0]
        seeds_text = f"{base['n']} seed{'s' if base['n'] != 1 else ''}"
        text += (f"the baseline scores {interval_text(base['mean'], base['ci_low'], base['ci_high'])} over "
                 f"{seeds_text} (trivial baseline {base['trivial']:.2f}). ")
        floor = status[(status["model"] == row.model) & (status["task"] == row.task)].iloc[0]
        if not floor["learned"]:
            lines.append(text + f"Its {floor['floor_metric']} ({floor['baseline_mean']:.2f}) misses the "
                         f"pre-registered floor of {floor['floor']:g}: **did not learn**, so nothing is decided.")
            continue
        if row.primary is None:
            lines.append(text + "The primary configuration has no run yet: nothing is decided.")
            continue
        pairs = int(row.n_pairs)
        text += (f"The primary comparison, *{row.primary}*, changes it by "
                 f"{interval_text(row.gain, row.gain_ci_low, row.gain_ci_high, signed=True)} points over {pairs} "
                 f"paired seed{'s' if pairs != 1 else ''}"
                 + (f" (p {p_text(row.p_value)}; {_power_text(row, pairs)}). "
                    if pairs >= 2 else " so far: no test is possible before a second seed has landed. "))
        text += _secondary_text(row)
        text += (f"The paper: {row.paper_value}; verdict: **{row.verdict}**." if row.claimed_gain is not None
                 else "The paper states nothing for this task: no verdict.")
        lines.append(text)
    return "\n".join(lines) if lines else "No runs yet."


def stalled_text(points: pd.DataFrame, n_runs: int) -> str:
    """RQ3's exploratory list of :func:`stalled_runs`, as Markdown."""
    stalled = stalled_runs(points)
    lines = []
    for (name, task), runs in stalled.groupby(["model", "task"], sort=False):
        listed = "; ".join(
            f"*{duplication}* at seed{'s' if len(group) > 1 else ''} "
            + ", ".join(f"{int(r.seed)} ({r.value:.2f})" for r in group.itertuples())
            for duplication, group in runs.groupby("duplication", sort=False))
        lines.append(f"- {name} on {task} ({runs['metric'].iloc[0]}; trivial "
                     f"{runs['trivial'].iloc[0]:.2f}, cutoff {runs['cutoff'].iloc[0]:.2f}): {listed}")
    return ("**Stalled runs** (exploratory, not part of the rule): single runs that ended below the midpoint "
            "of their trivial baseline and their task's floor (the cutoff), on the floor's metric. "
            + ("They stay in every comparison above.\n\n" + "\n".join(lines)
               if lines else f"None of the {n_runs} runs did."))


def observed_seed_spread(points: pd.DataFrame) -> pd.DataFrame:
    """Our seed spread per model and task (index), on the primary metric (points): the sd over
    seeds of the baseline and of the primary's paired differences with it."""
    spread = []
    on_primary = points[points["metric"] == points["task"].map(lambda t: task_metrics(t)[0])]
    for (name, task), group in on_primary.groupby(["model", "task"], sort=False):
        wide = group.pivot_table(index="seed", columns="duplication", values="value")
        row = {"model": name, "task": task, "seeds": len(wide),
               "baseline sd": round(float(wide["baseline"].std(ddof=1)), 2) if "baseline" in wide else None}
        primary_name = next((d for d in group["duplication"].unique()
                             if (group.loc[group["duplication"] == d, "role"] == "primary").any()), None)
        if primary_name and "baseline" in wide:
            row["primary"] = primary_name
            row["sd of paired differences"] = round(float((wide[primary_name] - wide["baseline"]).std(ddof=1)), 2)
        spread.append(row)
    return pd.DataFrame(spread).set_index(["model", "task"])


def replication_text() -> str:
    """:data:`REPLICATION_SINGLE_LAYERS`, :data:`REPLICATION_ROBERTA` and :data:`ALBERT_DEPTH` in
    two sentences (SQuAD 2.0 F1)."""
    single, roberta = REPLICATION_SINGLE_LAYERS, REPLICATION_ROBERTA
    return (f"Same replication: {single['configurations']} of {single['model']} gave F1 {single['f1_low']}-"
            f"{single['f1_high']} against {single['baseline_f1']}; {roberta['model']}, {roberta['configuration']}: "
            f"{roberta['f1']} against {roberta['baseline_f1']}.\n"
            f"{ALBERT_PAPER}, ALBERT-large pretrained (not duplicated) with 12 / 24 / 48 applications of its "
            f"shared layer: SQuAD 2.0 F1 " + " / ".join(str(r["squad2_f1"]) for r in ALBERT_DEPTH) + ".")


def run_counts(results: pd.DataFrame) -> pd.DataFrame:
    """Per model and task (index): runs, seeds, configurations, largest subsets, steps per run."""
    return results.groupby(["model", "task"], sort=False).agg(
        runs=("run_key", "size"), seeds=("seed", "nunique"), configurations=("duplication", "nunique"),
        train_examples=("n_train", "max"), eval_examples=("n_eval", "max"), steps_per_run=("train_steps", "max"))


def _gain_cell(model, task, gain, low, high, level, p, role, verdict, status) -> str:
    if verdict.startswith("pending"):
        return f"{interval_text(gain, low, high, signed=True)} ({verdict})"
    if not learned(status, model, task):
        return DID_NOT_LEARN
    return (interval_text(gain, low, high, signed=True) + (" *" if p < 0.05 else "")
            + (" (primary)" if role == "primary" else f" ({100 * level:g}%)"))


def gain_grid(main: pd.DataFrame, status: pd.DataFrame) -> pd.DataFrame:
    """RQ4's grid of gains: rows ``task, duplication, vs``, one column per model; each cell the
    paired gain [CI] (points; 95% for the primary, the Bonferroni level for a secondary), ``*``
    when significant, ``did not learn`` or the pending verdict; ``""`` where a model lacks it.

    Args:
        main: :func:`primary_rows` of a :func:`comparison` table.
        status: :func:`learning_status` of the same runs.
    """
    gains = main[main["n_pairs"].notna()]
    gains = gains.assign(
        cell=[_gain_cell(*values, status=status) for values in zip(
            gains["model"], gains["task"], gains["gain"], gains["bonferroni_ci_low"],
            gains["bonferroni_ci_high"], gains["bonferroni_confidence"],
            gains["p_adjusted"].fillna(1.0), gains["role"], gains["verdict"])],
        vs=gains["reference"])
    grid = gains.pivot_table(index=["task", "duplication", "vs"], columns="model", values="cell",
                             aggfunc="first", sort=False).fillna("")
    grid.columns.name = None
    return grid


def beside_table(summary: pd.DataFrame, status: pd.DataFrame) -> pd.DataFrame:
    """RQ4's paper-beside-ours table (index ``task, metric, paper, model``): baseline learned,
    primary and its gain [95% CI] (points), secondary gains / losses, verdict.

    Args:
        summary: :func:`overall` of the primary-metric rows.
        status: :func:`learning_status` of the same runs.
    """
    rows = []
    for row in summary.itertuples():
        rows.append({
            "task": row.task, "metric": row.metric, "paper": row.paper_value, "model": row.model,
            "baseline learned the task": "yes" if learned(status, row.model, row.task) else "no",
            "primary configuration": row.primary or "",
            "its gain [95% CI]": interval_text(row.gain, row.gain_ci_low, row.gain_ci_high, signed=True),
            "secondary gains / losses": f"{row.n_secondary_gains} / {row.n_secondary_losses} of {row.n_secondary}"
                                        + (f" ({row.n_secondary_pending} pending)" if row.n_secondary_pending else ""),
            "verdict": row.verdict,
        })
    return pd.DataFrame(rows).set_index(["task", "metric", "paper", "model"])


def consistency_text(summary: pd.DataFrame, main: pd.DataFrame, status: pd.DataFrame,
                     claim_rows: Mapping[str, Mapping]) -> str:
    """RQ4's "what the numbers say" as Markdown bullets, ending with the RQ4 claim's verdict.

    Args:
        summary: :func:`overall` of ``main``.
        main: :func:`primary_rows` of a :func:`comparison` table.
        status: :func:`learning_status` of the same runs.
        claim_rows: ``dupbert.glance.rq3_rq4_rows`` by ``id`` (``rq4-consistent-across-models``:
            ``verdict``; ``rq3-method``: ``ours``).

    Raises:
        KeyError: ``claim_rows`` without those two ids.
    """
    lines = []
    is_learned = [learned(status, m, t) for m, t in zip(summary["model"], summary["task"])]
    skipped = [(m, t) for (m, t), ok in zip(zip(summary["model"], summary["task"]), is_learned) if not ok]
    if skipped:
        lines.append(
            f"- In {len(skipped)} of {len(summary)} model × task cells the baseline misses its pre-registered floor "
            f"({'; '.join(f'{m} on {t}' for m, t in skipped)}): it did not learn the task, and those runs say "
            f"nothing about duplication.")
    if any(is_learned):
        cells = summary[is_learned]
        # a comparison short of its planned seeds is shown in the grid, never counted here
        waiting = cells["verdict"].astype(str).str.startswith("pending")
        decided = cells[cells["primary"].notna() & ~waiting]
        significant = decided["p_value"] < 0.05
        lines.append(
            f"- Of the {len(cells)} cells whose baseline learned, {len(decided)} have all their planned primary "
            f"runs" + (f" ({int(waiting.sum())} pending)" if waiting.any() else "") + ": the paper's "
            f"configuration is significantly better in {int((significant & (decided['gain'] > 0)).sum())} and "
            f"significantly worse in {int((significant & (decided['gain'] < 0)).sum())}.")
        gains = main[main["n_pairs"].notna()]
        complete = gains[~gains["verdict"].astype(str).str.startswith("pending")]
        informative = set(zip(cells["model"], cells["task"]))
        mine = complete[[(m, t) in informative for m, t in zip(complete["model"], complete["task"])]]
        for name, group in mine.groupby("duplication", sort=False):
            lines.append(
                f"- *{name}* ({', '.join(sorted(set(group['role'])))}): gain positive in {int((group['gain'] > 0).sum())} "
                f"of {len(group)} cells, significantly in {int(((group['gain'] > 0) & (group['p_adjusted'] < 0.05)).sum())}, "
                f"significantly negative in {int(((group['gain'] < 0) & (group['p_adjusted'] < 0.05)).sum())} "
                "(comparisons with all their planned seeds).")
        for row in cells[cells["claimed_gain"].notna()].itertuples():
            lines.append(f"- {row.model} on {row.task}: the paper claims {row.paper_value}; verdict **{row.verdict}**.")
    else:
        lines.append("- No cell's baseline learned its task: the RQ4 claim can be neither supported nor refuted with these runs.")
    rq4_row = claim_rows["rq4-consistent-across-models"]
    lines.append(
        f"- Consistency across models and tasks (the paper's RQ4 claim, which states no number): "
        f"**{rq4_row['verdict']}** (the rule: Methods, Results at a glance; per claim: "
        f"{claim_rows['rq3-method']['ours']}).")
    return "\n".join(lines)


CONFIRMATORY_COLUMNS = [
    "model", "task", "metric", "configuration", "reference", "seeds", "n_pairs", "baseline_mean",
    "baseline_ci_low", "baseline_ci_high", "mean", "gain", "gain_ci_low", "gain_ci_high",
    "p_value", "floor", "verdict"]
"""The columns of :func:`confirmatory_test`."""


def confirmatory_test(results: pd.DataFrame, planned_seeds: Mapping[tuple[str, str], int],
                      configuration: str = "copy last", metric: str = "accuracy",
                      baseline: str = "baseline") -> pd.DataFrame:
    """One pre-registered comparison put to a test on new seeds (RQ3 chapter, "A finding put to
    a test"; ``notebooks/params/cpu/rq3-confirm.yaml``): ``configuration`` against ``baseline``
    (whatever reference its runs record), one test, no multiplicity correction.

    The statistic is the mean of the per-seed paired differences (points) with its two-sided 95%
    t-interval (:func:`comparison`). Verdict, in this order: :func:`pending` until the
    ``planned_seeds`` pairs of the model and task have landed; :data:`DID_NOT_LEARN` if the
    baseline's mean misses the task's floor (:func:`learning_floor`); ``"no interval (1 pair)"``
    for a plan of one seed; ``"confirmed"`` if the interval lies above 0, ``"refuted"`` if below,
    ``"not confirmed"`` if it covers 0.

    Returns:
        One row per planned model and task, in ``planned_seeds`` order
        (:data:`CONFIRMATORY_COLUMNS`): means and gains in points (NaN before their runs),
        ``seeds`` the paired seeds as text.

    Raises:
        ParameterError: as :func:`comparison`; a ``metric`` that is not one of a task's; runs of a
            model and task that ``planned_seeds`` lacks.
    """
    if results.empty:  # no run yet (a results file with no rows reads as a frame without columns)
        results = pd.DataFrame(columns=["model", "task", "duplication", "seed"])
    runs = results[results["duplication"].isin([baseline, configuration])]
    # every run against the baseline: an ALBERT's copies record the unshared baseline instead
    runs = runs.drop(columns=[c for c in ("reference", "role") if c in runs])
    stranger = sorted(set(zip(runs["model"], runs["task"])) - set(planned_seeds))
    if stranger:
        raise ParameterError(f"results hold runs of {stranger}, which planned_seeds lacks "
                             f"(it plans {sorted(planned_seeds)})")
    table = comparison(runs, baseline=baseline) if len(runs) else pd.DataFrame(
        columns=COMPARISON_COLUMNS)
    rows = []
    for (model, task), planned in planned_seeds.items():
        if metric not in task_metrics(task):
            raise ParameterError(f"metric {metric!r} is not one of {task}'s: "
                                 f"{', '.join(task_metrics(task))}")
        cell = table[(table["model"] == model) & (table["task"] == task)
                     & (table["metric"] == metric)]
        base = cell[cell["duplication"] == baseline]
        tested = cell[cell["duplication"] == configuration]
        mine = runs[(runs["model"] == model) & (runs["task"] == task)]
        seeds = sorted(set(mine.loc[mine["duplication"] == baseline, "seed"])
                       & set(mine.loc[mine["duplication"] == configuration, "seed"]))
        row = tested.iloc[0] if len(tested) and len(seeds) else None
        if len(seeds) < int(planned):
            verdict = pending(len(seeds), int(planned))
        elif not base.iloc[0]["learned"]:
            verdict = DID_NOT_LEARN
        elif pd.isna(row["gain_ci_low"]):
            verdict = f"no interval ({len(seeds)} pair)"
        elif row["gain_ci_low"] > 0:
            verdict = "confirmed"
        elif row["gain_ci_high"] < 0:
            verdict = "refuted"
        else:
            verdict = "not confirmed"
        base_values = [base.iloc[0][c] for c in ("mean", "ci_low", "ci_high")] if len(base) \
            else [np.nan] * 3
        gain = [row[c] for c in ("mean", "gain", "gain_ci_low", "gain_ci_high", "p_value")] \
            if row is not None else [np.nan] * 5
        rows.append([model, task, metric, configuration, baseline,
                     ", ".join(map(str, seeds)) if seeds else "none", len(seeds), *base_values,
                     *gain, learning_floor(task)[1], verdict])
    return pd.DataFrame(rows, columns=CONFIRMATORY_COLUMNS)


def confirmatory_text(tests: pd.DataFrame) -> str:
    """One Markdown line per row of :func:`confirmatory_test`: the verdict, the paired gain with
    its 95% interval and p-value, and the baseline's mean beside its floor (points)."""
    lines = []
    for row in tests.itertuples():
        head = f"- {row.model} x {row.task}, {row.configuration} - {row.reference} ({row.metric}): "
        if str(row.verdict).startswith("pending"):
            lines.append(f"{head}**{row.verdict}**; nothing is judged before every planned pair "
                         f"has landed.")
            continue
        lines.append(
            f"{head}**{row.verdict}**: "
            f"{interval_text(row.gain, row.gain_ci_low, row.gain_ci_high, signed=True)} points "
            f"(p {p_text(row.p_value)}, seeds {row.seeds}); baseline "
            f"{interval_text(row.baseline_mean, row.baseline_ci_low, row.baseline_ci_high)} "
            f"against a floor of {row.floor:g}.")
    return "\n".join(lines)
