"""The RQ4 chapter's tables and glued numbers (``notebooks/rq4.ipynb``): the grid of gains over
models and tasks, the paper beside ours, and the counts its "What the numbers say" section glues;
from the frames of :mod:`dupbert.study.comparisons`, scores in points. Also the chapter's plumbing:
the runs it judges (:func:`judged_results`) and everything it glues (:func:`glued_numbers`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import pandas as pd

from ..core.results import ResultsFile, read_results, repository_path
from ..study.comparisons import DID_NOT_LEARN, keep_main_setting, learned
from ..study.glance import decisive_tests, rq3_rq4_rows
from ..study.profiles import planned_family_sizes, planned_seeds
from ..study.studies import confirmatory_studies, judged_runs
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


# The chapter's plumbing: the runs it judges, and the numbers its "What the numbers say" glues


def judged_results(results_paths: Sequence[str | os.PathLike],
                   study_profiles: Sequence[str | os.PathLike] | None = None
                   ) -> tuple[pd.DataFrame, dict | None, dict | None]:
    """The runs RQ4 judges, read as the chapter shows them, and their studies' planned sizes.

    Reads every results file (prints ``"<path>: <n> runs"`` for each) and keeps each run once (by
    ``run_key``, first file wins); with ``study_profiles``, only the runs those RQ3 studies plan
    for a comparison (:func:`dupbert.study.studies.judged_runs`); then per model and task only its
    most frequent setting (:func:`dupbert.study.comparisons.keep_main_setting`). Prints how many
    runs each step left out, when it left any out.

    Args:
        results_paths: JSON-lines results files, from the repository root (at least one).
        study_profiles: RQ3 parameter files, from the repository root; None or empty: every run.

    Returns:
        ``(results, planned_seeds, family_sizes)``: the kept ``ResultsFile.frame()`` rows (plus
        ``setting``, index renumbered), and the studies' ``{(model, task): int}`` of
        :func:`dupbert.study.profiles.planned_seeds` and
        :func:`~dupbert.study.profiles.planned_family_sizes` (both None without a plan).

    Raises:
        ValueError: ``results_paths`` empty; as ``judged_runs`` and ``keep_main_setting``.
    """
    frames = []
    for given in results_paths:
        frame = ResultsFile(repository_path(given)).frame()
        print(f"{given}: {len(frame)} runs")
        frames.append(frame)
    results = pd.concat(frames, ignore_index=True).drop_duplicates("run_key")
    plan = None
    if study_profiles:
        kept, plan = judged_runs(results, [repository_path(path) for path in study_profiles])
        if len(kept) < len(results):
            print(f"{len(results) - len(kept)} runs that no study plans for a comparison left out")
        results = kept
    results, dropped = keep_main_setting(results)
    if dropped:
        print(f"{dropped} runs of other settings left out (each model and task keeps its most "
              "frequent setting)")
    if not plan:
        return results, None, None
    return results, planned_seeds(plan), planned_family_sizes(plan)


NO_CELL_LEARNED = ("None: no cell's baseline learned its task, so RQ4 can be neither supported nor "
                   "refuted here.")
"""What :func:`glued_numbers` glues for an empty table (as Markdown)."""


def glued_numbers(results: pd.DataFrame, planned: Mapping[tuple[str, str], int] | None,
                  summary: pd.DataFrame, main: pd.DataFrame, status: pd.DataFrame,
                  pilot_paths: Sequence[str | os.PathLike] | None = None,
                  decisive_profiles: Sequence[str | os.PathLike] | None = None) -> dict:
    """Everything the chapter's "What the numbers say" glues, ``{glue name: value}`` in the
    chapter's order: ``rq4_<name>`` for each of :func:`cell_counts`; ``rq4_configurations`` and
    ``rq4_claimed`` (:func:`configuration_table`, :func:`claimed_table`, or
    :data:`NO_CELL_LEARNED` as IPython Markdown when empty); ``rq4_verdict``, the RQ4 claim's
    verdict, and ``rq4_method``, the RQ3 method claim's, by the rule of the results-at-a-glance
    page (:func:`dupbert.study.glance.rq3_rq4_rows`, with the pilots and the confirmatory tests'
    :func:`~dupbert.study.glance.decisive_tests`).

    Args:
        results, planned: :func:`judged_results`' runs and planned seeds.
        summary, main, status: as :func:`configuration_table`.
        pilot_paths: pilot runs' results files (from the repository root; missing ones skipped).
        decisive_profiles: confirmatory RQ3 parameter files, from the repository root.

    Raises:
        as :func:`~dupbert.study.studies.confirmatory_studies` and ``rq3_rq4_rows``.
    """
    from IPython.display import Markdown

    pilots = read_results(pilot_paths) if pilot_paths else None
    decisive = decisive_tests(confirmatory_studies(
        [repository_path(path) for path in decisive_profiles or []]))
    claims = {row["id"]: row for row in rq3_rq4_rows(results, planned, pilots, decisive)}
    numbers = {f"rq4_{name}": value for name, value in cell_counts(summary, status).items()}
    for name, shown in (("configurations", configuration_table(summary, main, status)),
                        ("claimed", claimed_table(summary, status, decisive))):
        numbers[f"rq4_{name}"] = shown if len(shown) else Markdown(NO_CELL_LEARNED)
    numbers["rq4_verdict"] = claims["rq4-consistent-across-models"]["verdict"]
    numbers["rq4_method"] = claims["rq3-method"]["ours"]
    return numbers
