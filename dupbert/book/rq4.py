"""The RQ4 chapter's tables and glued numbers (``notebooks/rq4.ipynb``): the grid of gains over
models and tasks, the paper beside ours, and the counts its "What the numbers say" section glues;
from the frames of :mod:`dupbert.study.comparisons`, scores in points.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ..study.comparisons import DID_NOT_LEARN, learned
from .text import interval_text


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
        main: :func:`dupbert.study.comparisons.primary_rows` of a
            :func:`dupbert.study.comparisons.comparison` table.
        status: :func:`dupbert.study.comparisons.learning_status` of the same runs.
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
        summary: :func:`dupbert.study.comparisons.overall` of the primary-metric rows.
        status: :func:`dupbert.study.comparisons.learning_status` of the same runs.
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


def _learned_cells(summary: pd.DataFrame, status: pd.DataFrame) -> pd.Series:
    return pd.Series([learned(status, m, t) for m, t in zip(summary["model"], summary["task"])],
                     index=summary.index, dtype=bool)


def _pending(verdicts: pd.Series) -> pd.Series:
    return verdicts.astype(str).str.startswith("pending")


def cell_counts(summary: pd.DataFrame, status: pd.DataFrame) -> dict[str, int | str]:
    """The counts that open "What the numbers say": ``cells`` (model × task), ``learned`` (the
    baseline reached its floor), ``not_learned_cells`` (``"m on t; ..."``,
    ``"none"``), ``decided`` (learned, with all planned primary runs), ``pending``, and of the
    decided primaries ``better`` and ``worse`` (p < 0.05). A comparison short of its planned seeds
    is shown in the grid, never counted here.

    Args:
        summary: :func:`dupbert.study.comparisons.overall` of the primary-metric rows.
        status: :func:`dupbert.study.comparisons.learning_status` of the same runs.
    """
    ok = _learned_cells(summary, status)
    skipped = summary[~ok]
    cells = summary[ok]
    waiting = _pending(cells["verdict"])
    decided = cells[cells["primary"].notna() & ~waiting]
    significant = decided["p_value"] < 0.05
    return {"cells": len(summary), "learned": len(cells),
            "not_learned_cells": "; ".join(f"{m} on {t}" for m, t in zip(skipped["model"], skipped["task"]))
            or "none",
            "decided": len(decided), "pending": int(waiting.sum()),
            "better": int((significant & (decided["gain"] > 0)).sum()),
            "worse": int((significant & (decided["gain"] < 0)).sum())}


CONFIGURATION_COLUMNS = ["role", "cells", "gain > 0", "significantly > 0", "significantly < 0"]
"""The columns of :func:`configuration_table`."""


def configuration_table(summary: pd.DataFrame, main: pd.DataFrame,
                        status: pd.DataFrame) -> pd.DataFrame:
    """Per duplication configuration (index, in the table's order), over the cells whose baseline
    learned and whose comparison has all its planned seeds: its role(s), the number of cells, and
    in how many the gain is positive, significantly positive and significantly negative (Holm).

    Args: as :func:`cell_counts`, and ``main``, the rows ``summary`` was made from.
    """
    gains = main[main["n_pairs"].notna() & ~_pending(main["verdict"])]
    informative = {(m, t) for m, t, ok in zip(summary["model"], summary["task"],
                                              _learned_cells(summary, status)) if ok}
    mine = gains[[(m, t) in informative for m, t in zip(gains["model"], gains["task"])]]
    rows = {name: [", ".join(sorted(set(group["role"]))), len(group), int((group["gain"] > 0).sum()),
                   int(((group["gain"] > 0) & (group["p_adjusted"] < 0.05)).sum()),
                   int(((group["gain"] < 0) & (group["p_adjusted"] < 0.05)).sum())]
            for name, group in mine.groupby("duplication", sort=False)}
    return pd.DataFrame.from_dict(rows, orient="index", columns=CONFIGURATION_COLUMNS).rename_axis("duplication")


def claimed_table(summary: pd.DataFrame, status: pd.DataFrame,
                  decisive: Mapping[tuple[str, str], tuple[str, str | None]] | None = None
                  ) -> pd.DataFrame:
    """The learned cells for which the paper states a number (index ``model, task``): the paper's
    claim, the verdict on the study's seeds, and the cell's pre-registered confirmatory test once
    it decides (else ``""``).

    Args:
        summary, status: as :func:`cell_counts`.
        decisive: ``dupbert.study.glance.decisive_tests``: ``{(model, task): (description, verdict)}``.
    """
    cells = summary[_learned_cells(summary, status) & summary["claimed_gain"].notna()]
    rows = []
    for row in cells.itertuples():
        text, verdict = (decisive or {}).get((row.model, row.task), (None, None))
        rows.append({"model": row.model, "task": row.task, "the paper claims": row.paper_value,
                     "verdict on the study's seeds": row.verdict,
                     "confirmatory test": "" if verdict is None else text})
    return pd.DataFrame(rows, columns=["model", "task", "the paper claims", "verdict on the study's seeds",
                                       "confirmatory test"]).set_index(["model", "task"])
