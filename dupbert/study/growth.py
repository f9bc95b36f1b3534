"""The growth arm of RQ3, beyond the paper: duplicate layers, continue MLM pretraining, then
fine-tune, against the same model continued without duplicating (its control) and against the
paper's recipe (duplicate, fine-tune at once). The arms, comparisons, sizes and verdict rule below
were fixed before any of their runs (RQ3 chapter, "Growth: duplicate, continue pretraining, then
fine-tune"); the arms are runs of different models, so they are paired by seed across models.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..core.checks import check_columns
from .comparisons import DID_NOT_LEARN, learning_floor, pending
from ..core.significance import ALPHA, holm, mean_ci, minimum_detectable_gain, paired_p_value


@dataclass(frozen=True)
class Arm:
    """One arm: the runs of ``configuration`` of ``model``, shown as ``label``."""

    label: str
    model: str
    configuration: str


ARMS = (
    Arm("baseline", "minilm-mlm-en", "baseline"),
    Arm("copy first 3, fine-tuned at once", "minilm-mlm-en", "copy first 3"),
    Arm("continued", "minilm-mlm-en-continued", "baseline"),
    Arm("grown and continued", "minilm-mlm-en-grown", "baseline"),
)
"""The four registered arms, fine-tuned on SNLI at the study's hyper-parameters."""

COMPARISONS = (
    ("grown and continued", "continued", "primary"),
    ("grown and continued", "copy first 3, fine-tuned at once", "secondary"),
)
"""``(arm, reference, role)``: the primary comparison (growth against its control), then the
secondary ones, Holm-corrected among themselves with the primary left out."""

TASK, METRIC, PLANNED_SEEDS = "snli", "accuracy", 8

GROWTH_COLUMNS = ["arm", "reference", "role", "n_pairs", "arm_mean", "reference_mean", "gain",
                  "gain_ci_low", "gain_ci_high", "p_value", "p_adjusted", "min_detectable_gain",
                  "verdict"]
"""The columns of :func:`growth_tests`."""

ARM_MODEL = "minilm-mlm-en, growth arm"
"""The ``model`` of :func:`arm_points`' rows: the arms as one panel of
``dupbert.book.plots.plot_paired_seeds``."""


def arm_points(points: pd.DataFrame, arms: Sequence[Arm] = ARMS, task: str = TASK,
               metric: str = METRIC) -> pd.DataFrame:
    """The runs of ``arms`` in a points frame (``dupbert.study.comparisons.points_frame``) on ``task``
    and ``metric``, each row's ``model`` set to :data:`ARM_MODEL` and its ``duplication`` to its
    arm's label (arms in order), so that ``dupbert.book.plots.plot_paired_seeds`` draws each seed's
    accuracy across the arms. Values in points; an arm with no run yet has no rows.

    Raises:
        ParameterError: ``points`` lacks a column.
    """
    check_columns(points, ("model", "task", "duplication", "seed", "metric", "value"), "points")
    frames = []
    for arm in arms:
        rows = points[(points["model"] == arm.model) & (points["duplication"] == arm.configuration)
                      & (points["task"] == task) & (points["metric"] == metric)]
        frames.append(rows.assign(model=ARM_MODEL, duplication=arm.label,
                                  reference=np.nan, role=np.nan))
    return pd.concat(frames, ignore_index=True) if frames else points.iloc[:0]


def growth_tests(points: pd.DataFrame, arms: Sequence[Arm] = ARMS,
                 comparisons: Sequence[tuple[str, str, str]] = COMPARISONS, task: str = TASK,
                 metric: str = METRIC, planned_seeds: int = PLANNED_SEEDS) -> pd.DataFrame:
    """The registered comparisons of the growth arm, each the mean of the per-seed paired
    differences (arm minus reference, seeds both have) with its 95% t-interval and paired t-test.

    Verdict, in this order: ``pending (n/planned seeds)`` until ``planned_seeds`` pairs have
    landed; ``did not learn`` if either arm's mean misses the task's floor
    (``dupbert.study.comparisons.learning_floor``); otherwise, on ``p_adjusted`` (the primary's own p,
    the secondaries' Holm-adjusted among themselves), ``"growth helps"`` if it is below 0.05 and
    the gain positive, ``"growth hurts"`` if below 0.05 and negative, else
    ``"no difference shown"`` (for the primary, the same as its interval lying above 0, below 0,
    or covering 0).

    ``min_detectable_gain`` (reported, not part of the verdict): the smallest true gain the
    comparison's paired t-test detects with 80% power (``dupbert.core.significance.
    minimum_detectable_gain`` at the standard deviation of its differences), at 0.05 for the
    primary and at 0.05/m for a secondary of m (Holm's strictest step); NaN below 2 pairs.

    Returns:
        One row per comparison, :data:`GROWTH_COLUMNS`, means and gains in points.

    Raises:
        ParameterError: ``points`` lacks a column.
        KeyError: a comparison names an arm not in ``arms``; a task without a floor.
    """
    wide = arm_points(points, arms, task, metric).pivot_table(
        index="seed", columns="duplication", values="value")
    labels = {arm.label for arm in arms}
    unknown = [name for name, reference, _ in comparisons for name in (name, reference)
               if name not in labels]
    if unknown:
        raise KeyError(f"comparison names arm {unknown[0]!r}; the arms are {sorted(labels)}")
    floor = learning_floor(task)[1]
    n_secondary = sum(role != "primary" for _, _, role in comparisons)
    rows = []
    for name, reference, role in comparisons:
        pairs = wide[[name, reference]].dropna() if {name, reference} <= set(wide) \
            else pd.DataFrame(columns=[name, reference])
        difference = (pairs[name] - pairs[reference]).to_numpy(float)
        summary = mean_ci(difference) if difference.size else {
            "n": 0, "mean": np.nan, "std": np.nan, "ci_low": np.nan, "ci_high": np.nan}
        means = [float(wide[arm].mean()) if arm in wide else np.nan for arm in (name, reference)]
        rows.append({"arm": name, "reference": reference, "role": role, "n_pairs": summary["n"],
                     "arm_mean": means[0], "reference_mean": means[1], "gain": summary["mean"],
                     "gain_ci_low": summary["ci_low"], "gain_ci_high": summary["ci_high"],
                     "p_value": paired_p_value(difference),
                     "min_detectable_gain": minimum_detectable_gain(
                         summary["std"], summary["n"],
                         n_tests=1 if role == "primary" else n_secondary)})
    table = pd.DataFrame(rows, columns=[c for c in GROWTH_COLUMNS
                                        if c not in ("p_adjusted", "verdict")])
    table["p_adjusted"] = table["p_value"]
    secondary = table["role"] != "primary"
    if secondary.any():
        table.loc[secondary, "p_adjusted"] = holm(table.loc[secondary, "p_value"].to_numpy(float))
    table["verdict"] = [_verdict(row, floor, planned_seeds) for row in table.itertuples()]
    return table[GROWTH_COLUMNS]


def _verdict(row, floor: float, planned_seeds: int) -> str:
    if row.n_pairs < planned_seeds:
        return pending(row.n_pairs, planned_seeds)
    if row.arm_mean < floor or row.reference_mean < floor:
        return DID_NOT_LEARN
    if row.p_adjusted < ALPHA:
        return "growth helps" if row.gain > 0 else "growth hurts"
    return "no difference shown"
