"""A pre-registered RQ3 study as it stands: how far its plan got (:func:`plan_progress`), one row
per planned model and task with its primary comparison (:func:`study_summary`), the verdicts of
the confirmatory tests that profile files pre-register (:func:`confirmatory_study`,
:func:`confirmatory_studies`), the growth arm's registered comparisons on the runs its profile
file plans (:func:`growth_study`), one model's RQ1 beside its RQ3 cells (:func:`rq1_beside_rq3`),
and the runs of several studies on which the claims are judged together (:func:`judged_runs`).
"""

from __future__ import annotations

import os
from typing import Sequence

import pandas as pd

from .comparisons import CONFIRMATORY_COLUMNS, confirmatory_test, overall, pending, points_frame
from .glance import worst_block_output
from .growth import arm_points, growth_tests
from ..core.errors import ParameterError
from .profiles import PlannedSweep, plan_sweep, planned_seeds, read_profile
from ..core.results import repository_path
from .sweeps import planned_run_keys, read_plan_rows
from ..training.tasks import task_metrics


def plan_progress(plan: Sequence[PlannedSweep], rows: pd.DataFrame) -> pd.DataFrame:
    """How far a plan got, per (model, task) (index): ``seeds``, ``primary`` and ``secondary``
    (``"landed/planned"``), ``planned`` and ``landed`` (counts), ``train_min`` and ``eval_min``
    (mean minutes per landed run; NaN before any)."""
    records = []
    for entry in plan:
        mine = rows[(rows["model"] == entry.model) & (rows["task"] == entry.task)] \
            if not rows.empty else rows
        landed = mine["duplication"].value_counts() if not mine.empty else pd.Series(dtype=int)
        primary = sum(int(landed.get(d, 0)) for d in entry.primary)
        secondary = sum(int(landed.get(d, 0)) for d in entry.duplications if d not in entry.primary)
        n_secondary = len(entry.duplications) - len(entry.primary)
        seeds = entry.seeds
        records.append({
            "model": entry.model, "task": entry.task, "seeds": len(seeds),
            "primary": f"{primary}/{len(entry.primary) * len(seeds)}",
            "secondary": f"{secondary}/{n_secondary * len(seeds)}",
            "planned": len(entry.duplications) * len(seeds), "landed": primary + secondary,
            "train_min": round(mine["train_time_s"].mean() / 60, 1) if len(mine) else float("nan"),
            "eval_min": round(mine["eval_time_s"].mean() / 60, 1) if len(mine) else float("nan"),
        })
    return pd.DataFrame(records).set_index(["model", "task"])


STUDY_SUMMARY_COLUMNS = [
    "model", "task", "metric", "seeds", "runs_primary", "runs_secondary", "baseline_mean",
    "baseline_ci_low", "baseline_ci_high", "trivial", "train_min", "eval_min", "primary", "gain",
    "gain_ci_low", "gain_ci_high", "p_value", "n_pairs", "min_detectable_gain", "verdict"]
"""The columns of :func:`study_summary`."""


def study_summary(plan: Sequence[PlannedSweep], rows: pd.DataFrame,
                  table: pd.DataFrame) -> pd.DataFrame:
    """A pre-registered study in one row per planned (model, task), on the task's primary metric.

    Args:
        plan: :func:`dupbert.study.profiles.plan_sweep`'s plan.
        rows: the plan's runs (:func:`dupbert.study.sweeps.read_plan_rows`).
        table: ``dupbert.study.comparisons.comparison`` of ``rows`` with the plan's seeds and families
            (empty while nothing has landed).

    Returns:
        :data:`STUDY_SUMMARY_COLUMNS` in plan order: runs landed/planned (:func:`plan_progress`),
        the baseline mean and 95% CI and the trivial baseline (points), minutes per run, and the
        primary comparison as ``dupbert.study.comparisons.overall`` gives it (``pending (k/n seeds)``
        until complete). NaN/None where nothing has landed.

    Raises:
        ParameterError (a ValueError): ``table`` not empty and lacking a column.
    """

    progress = plan_progress(plan, rows)
    decisions = overall(table) if not table.empty else pd.DataFrame(columns=["model", "task"])
    nothing = float("nan")
    records = []
    for entry in plan:
        metric = task_metrics(entry.task)[0]
        landed = progress.loc[(entry.model, entry.task)]
        record = {"model": entry.model, "task": entry.task, "metric": metric,
                  "seeds": len(entry.seeds), "runs_primary": landed["primary"],
                  "runs_secondary": landed["secondary"], "train_min": landed["train_min"],
                  "eval_min": landed["eval_min"], "baseline_mean": nothing,
                  "baseline_ci_low": nothing, "baseline_ci_high": nothing, "trivial": nothing,
                  "primary": None, "gain": nothing, "gain_ci_low": nothing,
                  "gain_ci_high": nothing, "p_value": nothing, "n_pairs": 0,
                  "min_detectable_gain": nothing, "verdict": pending(0, len(entry.seeds))}
        if not table.empty:
            base = table[(table["model"] == entry.model) & (table["task"] == entry.task)
                         & (table["metric"] == metric) & (table["duplication"] == "baseline")]
            if not base.empty:
                record.update(baseline_mean=float(base["mean"].iloc[0]),
                              baseline_ci_low=float(base["ci_low"].iloc[0]),
                              baseline_ci_high=float(base["ci_high"].iloc[0]),
                              trivial=float(base["trivial"].iloc[0]))
        decided = decisions[(decisions["model"] == entry.model) & (decisions["task"] == entry.task)
                            & (decisions["metric"] == metric)] if not decisions.empty else decisions
        if not decided.empty:
            row = decided.iloc[0]
            record.update({field: row[field] for field in (
                "primary", "gain", "gain_ci_low", "gain_ci_high", "p_value",
                "min_detectable_gain", "verdict")})
            record["n_pairs"] = 0 if pd.isna(row["n_pairs"]) else int(row["n_pairs"])
        records.append(record)
    summary = pd.DataFrame(records, columns=STUDY_SUMMARY_COLUMNS)
    # an object column: a missing primary stays None (pandas makes it NaN beside a name)
    summary["primary"] = pd.Series([r["primary"] for r in records], dtype=object)
    return summary


def confirmatory_study(path: str | os.PathLike) -> pd.DataFrame:
    """The confirmatory test that an RQ3 profile file pre-registers (e.g.
    ``notebooks/params/cpu/rq3-confirm.yaml``): its plan's rows of its ``results_path``, judged
    by ``dupbert.study.comparisons.confirmatory_test`` at its planned seeds; the configuration tested
    is the plan's one configuration besides the baseline.

    Raises:
        ParameterError: a profile without a ``results_path``, or that plans other than one
            configuration besides the baseline; as :func:`dupbert.study.profiles.read_profile` and
            :func:`dupbert.study.profiles.plan_sweep`.
    """
    parameters = read_profile(path, device="cpu")  # its rows are read, nothing runs
    plan = plan_sweep(parameters)[0]
    configurations = sorted({name for entry in plan for name in entry.duplications})
    tested = [name for name in configurations if name != "baseline"]
    if len(tested) != 1 or not parameters.results_path \
            or any("baseline" not in entry.duplications for entry in plan):
        raise ParameterError(f"{path} must plan the baseline and one configuration to test, and "
                             f"name a results_path; it plans {', '.join(configurations)} "
                             f"and results_path {parameters.results_path!r}")
    rows = read_plan_rows(plan, repository_path(parameters.results_path))
    return confirmatory_test(rows, planned_seeds(plan), configuration=tested[0])


def confirmatory_studies(paths: Sequence[str | os.PathLike],
                         configuration: str | None = None) -> pd.DataFrame:
    """The :func:`confirmatory_study` of each profile file in ``paths``, one frame in file order
    (``dupbert.study.comparisons.CONFIRMATORY_COLUMNS``; empty for no files): the tests that decide
    their claims (``decisive_profiles`` of the RQ3, RQ4 and glance notebooks, read by
    ``dupbert.study.glance.decisive_tests``) or one model's cells (:func:`rq1_beside_rq3`).

    Args:
        configuration: the configuration every file must test; None: any.

    Raises:
        ParameterError: a (model, task) tested by two files, or a file given twice, whose
            verdicts would otherwise replace one another; a file testing another configuration
            than ``configuration``; as :func:`confirmatory_study`.
    """
    tests, tested_in = [], {}
    for path in paths:
        test = confirmatory_study(path)
        if configuration is not None and not (test["configuration"] == configuration).all():
            raise ParameterError(f"{path} tests {sorted(set(test['configuration']))}, not "
                                 f"{configuration!r}")
        for cell in zip(test["model"], test["task"]):
            if cell in tested_in:
                raise ParameterError(f"{cell[0]} on {cell[1]} is tested by both {tested_in[cell]} "
                                     f"and {path}: give one confirmatory test per model and task")
            tested_in[cell] = path
        tests.append(test)
    return pd.concat(tests, ignore_index=True) if tests \
        else pd.DataFrame(columns=CONFIRMATORY_COLUMNS)


def growth_study(path: str | os.PathLike) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The growth arm as its RQ3 profile file plans it: ``(arms, tests)``, the arms' runs
    (``dupbert.study.growth.arm_points``, points; for ``dupbert.book.plots.plot_paired_seeds``) and the
    registered comparisons (``dupbert.study.growth.growth_tests``; pending until every run has landed).

    Raises:
        ParameterError: a profile without a ``results_path``; as
            :func:`dupbert.study.profiles.read_profile`.
    """
    parameters = read_profile(path, device="cpu")  # its rows are read, nothing runs
    if not parameters.results_path:
        raise ParameterError(f"{path} names no results_path: the growth arm's runs are read "
                             f"from it")
    rows = read_plan_rows(plan_sweep(parameters)[0], repository_path(parameters.results_path))
    points = points_frame(rows) if len(rows) else pd.DataFrame(
        columns=["model", "task", "duplication", "seed", "metric", "value"])
    return arm_points(points), growth_tests(points)


def rq1_beside_rq3(model: str, tables_dir: str | os.PathLike, profiles: Sequence[str | os.PathLike],
                   configuration: str = "copy first 3") -> tuple[pd.DataFrame, pd.DataFrame]:
    """One model's RQ1 beside its RQ3, the paper's pairing (the head decodes a duplicated model's
    hidden states; the duplicated model is then fine-tuned): ``(rq1, cells)``.

    ``rq1``: one row per configuration (``baseline``, ``configuration``), RQ1's worst block output
    (``top1``, ``low``, ``high``, ``layer``) read from ``tables_dir``'s ``rq1-reconstruction.csv``
    (the baseline, pretrained) and ``rq1-duplicated.csv``; NaN where the model was not probed.
    ``cells``: the rows of ``model`` in each profile's :func:`confirmatory_study` (its
    pre-registered cells testing ``configuration`` against the baseline), one per task.

    Raises:
        as :func:`confirmatory_studies` with ``configuration``.
    """
    tables = {"baseline": ("rq1-reconstruction.csv", "baseline"),
              configuration: ("rq1-duplicated.csv", configuration)}
    rq1 = []
    for name, (file, duplication) in tables.items():
        path = repository_path(tables_dir) / file
        rows = pd.read_csv(path) if path.is_file() else pd.DataFrame(
            columns=["model", "duplication", "init", "layer", "top1"])
        rows = rows[(rows["model"] == model) & (rows["duplication"] == duplication)
                    & (rows.get("init", "pretrained") == "pretrained")]
        worst = worst_block_output(rows, f"{model} ({name})") if len(rows) else (float("nan"),) * 4
        rq1.append(dict(zip(["configuration", "top1", "low", "high", "layer"], [name, *worst])))
    cells = confirmatory_studies(profiles, configuration)
    return pd.DataFrame(rq1), cells[cells["model"] == model].reset_index(drop=True)


def compared_plan(paths: Sequence[str | os.PathLike]) -> list[PlannedSweep]:
    """The entries of several pre-registered RQ3 profile files that compare a configuration with
    the baseline (a primary comparison), in file order: the (model, task) cells on which RQ4 and
    the results-at-a-glance page judge the paper's claims. A growth arm's continued models, each
    planned as a baseline only, are arms of one comparison, not models of the study: left out.

    Raises:
        ParameterError: two files that plan one (model, task); as
            :func:`dupbert.study.profiles.read_profile` and :func:`dupbert.study.profiles.plan_sweep`.
    """
    plan, planned_in = [], {}
    for path in paths:
        for entry in plan_sweep(read_profile(path, device="cpu"))[0]:  # planning only
            if len(entry.primary) < 2:  # a reference alone: nothing compared with it
                continue
            cell = (entry.model, entry.task)
            if cell in planned_in:
                raise ParameterError(f"{entry.model} on {entry.task} is planned by both "
                                     f"{planned_in[cell]} and {path}: give each cell's study once")
            planned_in[cell] = path
            plan.append(entry)
    return plan


def judged_runs(results: pd.DataFrame | None, paths: Sequence[str | os.PathLike]
                ) -> tuple[pd.DataFrame | None, list[PlannedSweep]]:
    """``(rows, plan)``: the runs of ``results`` (``ResultsFile.frame()`` rows; None: no runs)
    that the :func:`compared_plan` of the profile files ``paths`` plans, each run once (by
    ``run_key``, under the data source each row records; pilots, other settings and a growth
    arm's continued models left out), and that plan (for ``dupbert.study.profiles.planned_seeds`` and
    ``planned_family_sizes``).

    Raises:
        as :func:`compared_plan`.
    """
    plan = compared_plan(paths)
    if results is None or results.empty:
        return results, plan
    sources = results["data_source"].fillna("local").unique() \
        if "data_source" in results else ["local"]
    keys = set().union(*(planned_run_keys(plan, source) for source in sources))
    rows = results[results["run_key"].isin(keys)].drop_duplicates("run_key")
    return rows.reset_index(drop=True), plan


def later_two_way(se_by_task: dict[str, float], tests: Sequence[str | os.PathLike],
                  growth: str | os.PathLike | None = None) -> pd.DataFrame:
    """The cells judged after the study, whose runs stored no per-example outputs, with two-way
    intervals from an evaluation-set error borrowed from the study (``se_by_task``, points;
    ``dupbert.study.variance.with_borrowed``): each profile file of ``tests`` (a configuration against
    the baseline, :func:`confirmatory_study`) and the growth arm's comparisons (``growth``).

    The ``verdict`` of a claimed gain is the paper's rule on the seed-only interval
    (``dupbert.core.significance.verdict``), ``verdict_two_way`` the same on the two-way interval;
    ``verdict_symmetric`` the symmetric rule on the seed-only interval
    (``dupbert.study.variance.symmetric_verdict``). The growth arm's are its own rule's (interval above,
    below or covering 0). A task missing from ``se_by_task`` is left out.
    """
    from .paper import gain_claim
    from ..core.significance import verdict
    from .variance import symmetric_verdict, undecidable, with_borrowed

    rows = []
    for test in (confirmatory_studies(tests).to_dict("records") if tests else []):
        claim = gain_claim(test["task"], test["metric"])
        rows.append(dict(model=test["model"], task=test["task"], duplication=test["configuration"],
                         n_pairs=test["n_pairs"], gain=test["gain"], gain_ci_low=test["gain_ci_low"],
                         gain_ci_high=test["gain_ci_high"], p_value=test["p_value"],
                         claimed_gain=claim.claimed_gain if claim else None))
    if growth is not None:
        for test in growth_study(growth)[1].to_dict("records"):
            rows.append(dict(model="minilm-mlm-en", task="snli",
                             duplication=f"{test['arm']} vs {test['reference']}",
                             n_pairs=test["n_pairs"], gain=test["gain"],
                             gain_ci_low=test["gain_ci_low"], gain_ci_high=test["gain_ci_high"],
                             p_value=test["p_adjusted"], growth_verdict=test["verdict"]))
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    frame = frame[frame["task"].isin(se_by_task) & frame["n_pairs"].ge(2)]
    parts = [with_borrowed(part, se_by_task[task]) for task, part in frame.groupby("task", sort=False)]
    frame = pd.concat(parts).sort_index() if parts else frame
    growth_rows = frame["claimed_gain"].isna() if "claimed_gain" in frame else True

    def by_interval(low, high):
        return "growth helps" if low > 0 else "growth hurts" if high < 0 else "no difference shown"

    frame["verdict"] = [r.growth_verdict if g else verdict(r.gain, r.gain_ci_low, r.gain_ci_high,
                                                           r.p_value, r.claimed_gain)
                        for r, g in zip(frame.itertuples(), growth_rows)]
    frame["verdict_two_way"] = [
        by_interval(r.two_way_low, r.two_way_high) if g else undecidable(
            verdict(r.gain, r.two_way_low, r.two_way_high, r.p_two_way, r.claimed_gain),
            r.claimed_gain, r.decidable_margin) for r, g in zip(frame.itertuples(), growth_rows)]
    frame["verdict_symmetric"] = [None if g else symmetric_verdict(r.gain_ci_low, r.gain_ci_high,
                                                                   r.claimed_gain)
                                  for r, g in zip(frame.itertuples(), growth_rows)]
    return frame.rename(columns={"gain_ci_low": "seed_low", "gain_ci_high": "seed_high"})


def gains_with_both_errors(study: str | os.PathLike, tests: Sequence[str | os.PathLike] = (),
                           growth: str | os.PathLike | None = None) -> pd.DataFrame:
    """Every registered gain of the study that ``study`` (an RQ3 profile file whose runs stored
    per-example outputs in its ``outputs_dir``) plans, with both intervals
    (``dupbert.study.variance.two_way_table``), then the later cells (:func:`later_two_way`) with the
    evaluation-set error of the study's all-MiniLM-L6-v2 ``copy first 3`` cell on each task.
    Controls and baseline variants are left out.

    Raises:
        ParameterError: ``study`` names no ``results_path``; as :func:`dupbert.study.profiles.read_profile`.
    """
    from .comparisons import comparison
    from .profiles import planned_family_sizes
    from .variance import evaluation_errors, two_way_table

    parameters = read_profile(study, device="cpu")
    if not parameters.results_path:
        raise ParameterError(f"{study} names no results_path: its runs are read from it")
    plan = plan_sweep(parameters)[0]
    rows = read_plan_rows(plan, repository_path(parameters.results_path))
    table = comparison(rows, planned_seeds=planned_seeds(plan),
                       family_sizes=planned_family_sizes(plan))
    outputs = repository_path(parameters.outputs_dir) if parameters.outputs_dir else None
    own = two_way_table(table, rows, outputs)
    later = later_two_way(evaluation_errors(own), tests, growth) if len(own) else own
    frame = pd.concat([p for p in (own, later) if len(p)], ignore_index=True) if len(own) else own
    return frame[~frame["verdict"].isin(["control", "baseline variant"])].reset_index(drop=True) \
        if len(frame) else frame
