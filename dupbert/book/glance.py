"""The results-at-a-glance page's plumbing (``notebooks/glance.ipynb``): the chapters' tables and the
fine-tuning runs it reads, the later readings' inputs, its forest plot and the confirmatory test
shown below the table. The verdict rules are in :mod:`dupbert.study.glance`; the page's prose is in
its Markdown cells.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from ..core.results import read_results, read_table, repository_path
from ..study import glance, paper, studies
from ..study.profiles import planned_seeds

TABLES = ("rq1-reconstruction", "rq1-duplicated", "rq2-spearman", "rq5-summary")
"""The chapters' tables the page judges (``<tables_dir>/<name>.csv``; RQ1, RQ2 and RQ5 write them)."""
MLM_QUALITY = ("rq1-mlm-quality", "rq1-mlm-quality-whole")
"""RQ1's MLM-quality tables: the registered measure (2026-12-02), on the whole held-out set
(2026-12-06)."""


def read_tables(tables_dir: str | Path, names: Sequence[str] = TABLES) -> dict[str, pd.DataFrame | None]:
    """``{name: table}`` for each of ``names`` in ``tables_dir`` (from the repository root), None
    where the chapter that writes it has not (:func:`dupbert.core.results.read_table`); prints a
    line for each missing one that says how to make it."""
    tables = {name: read_table(tables_dir, name) for name in names}
    for name in [name for name, frame in tables.items() if frame is None]:
        print(f"missing {tables_dir}/{name}.csv: run its chapter with tables_dir set (make book)")
    return tables


def fine_tuning_evidence(results_paths: Sequence[str], study_profiles: Sequence[str] | None,
                         pilot_paths: Sequence[str] | None, decisive_profiles: Sequence[str] | None
                         ) -> tuple[pd.DataFrame | None, dict | None, pd.DataFrame | None, dict | None]:
    """The RQ3/RQ4 inputs of :func:`dupbert.study.glance.results_at_a_glance` (paths from the
    repository root).

    Returns:
        ``(runs, planned_seeds, pilots, decisive)``: the runs of ``results_paths`` (None where no
        file exists), with ``study_profiles`` only those the studies plan for a comparison
        (:func:`dupbert.study.studies.judged_runs`: no pilots, no continued arms) and their
        :func:`~dupbert.study.profiles.planned_seeds` (else None); the runs of ``pilot_paths`` (None
        for none); :func:`dupbert.study.glance.decisive_tests` of the confirmatory tests
        ``decisive_profiles`` pre-register (None for none).

    Raises:
        ParameterError, FileNotFoundError: as :func:`~dupbert.study.studies.judged_runs` and
            :func:`~dupbert.study.studies.confirmatory_studies` (a bad profile file).
    """
    runs, plan = read_results(results_paths), None
    if study_profiles:
        runs, plan = studies.judged_runs(runs, [repository_path(path) for path in study_profiles])
    decisive = (glance.decisive_tests(studies.confirmatory_studies(
        [repository_path(path) for path in decisive_profiles])) if decisive_profiles else None)
    return (runs, planned_seeds(plan) if plan else None,
            read_results(pilot_paths) if pilot_paths else None, decisive)


def verdict_line(table: pd.DataFrame) -> str:
    """``"**11 claims: 2 reproduced, 0 refuted, ...**"``: how many claims ``table``
    (:func:`~dupbert.study.glance.results_at_a_glance` rows) holds and how many got each verdict
    (:func:`~dupbert.study.glance.verdict_counts`, in :data:`~dupbert.study.glance.VERDICTS` order,
    zeros included), as Markdown."""
    counts = glance.verdict_counts(table)
    return f"**{len(table)} claims: " + ", ".join(f"{n} {verdict}" for verdict, n in counts.items()) + ".**"


def mlm_floors(tables_dir: str | Path, tables: dict[str, pd.DataFrame | None]) -> list[pd.DataFrame | None]:
    """RQ1's and RQ2's claims judged with the MLM floor (:func:`dupbert.study.glance.with_mlm_floor`),
    once per measure of :data:`MLM_QUALITY` read from ``tables_dir``: a list of two, each None
    where that measure's table or ``tables["rq1-reconstruction"]`` (:func:`read_tables`) is
    missing.

    Raises:
        ParameterError: as :func:`~dupbert.study.glance.with_mlm_floor` (a judged model without a
            quality row).
    """
    reconstruction = tables["rq1-reconstruction"]
    return [glance.with_mlm_floor(reconstruction, tables["rq1-duplicated"], tables["rq2-spearman"], quality)
            if quality is not None and reconstruction is not None else None
            for quality in (read_table(tables_dir, name) for name in MLM_QUALITY)]


def gains_with_both_errors(study: str | None, tests: Sequence[str] | None = None,
                           growth: str | None = None) -> pd.DataFrame | None:
    """:func:`dupbert.study.studies.gains_with_both_errors` of the RQ3 parameter files ``study``,
    ``tests`` and ``growth`` (from the repository root): every registered gain with its seed-only
    and its two-way interval; None where ``study`` is None.

    Raises:
        as :func:`dupbert.study.studies.gains_with_both_errors`.
    """
    if not study:
        return None
    return studies.gains_with_both_errors(repository_path(study), [repository_path(p) for p in tests or []],
                                          repository_path(growth) if growth else None)


NO_GAINS = "no gains with stored per-example outputs"
"""What the forest plot says where there is no gain to draw."""


def forest_figure(gains: pd.DataFrame | None):
    """The page's forest plot (:func:`dupbert.book.forest.plot_forest`) of ``gains``
    (:func:`gains_with_both_errors`), tasks in the order they first appear, with the paper's
    claimed accuracy gain per RQ3 task; where ``gains`` is None or empty, a figure that says
    :data:`NO_GAINS`."""
    from .forest import plot_forest
    from .plots import no_runs_figure

    if gains is None or not len(gains):
        return no_runs_figure(NO_GAINS)
    claimed = {c.task: c.claimed_gain for c in paper.CLAIMS if c.rq == 3 and c.metric == "accuracy"}
    return plot_forest(gains.sort_values("task", kind="stable"), claimed)


CONFIRMED_COLUMNS = ["verdict", "gain [95% CI]", "p"]
"""The columns of :func:`dupbert.book.rq3.confirmatory_table` shown below the glance table."""


def confirmed(confirm_profile: str | None):
    """The confirmatory test that ``confirm_profile`` (an RQ3 parameter file, from the repository
    root) pre-registers (:func:`dupbert.study.studies.confirmatory_study`), as the RQ3 chapter
    shows it (:func:`dupbert.book.rq3.confirmatory_table`) with :data:`CONFIRMED_COLUMNS` only;
    an IPython ``Markdown`` "None in this profile." where ``confirm_profile`` is None.

    Raises:
        as :func:`dupbert.study.studies.confirmatory_study`.
    """
    from IPython.display import Markdown

    from .rq3 import confirmatory_table

    if not confirm_profile:
        return Markdown("None in this profile.")
    return confirmatory_table(studies.confirmatory_study(repository_path(confirm_profile)))[CONFIRMED_COLUMNS]
