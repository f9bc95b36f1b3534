"""Our RQ3/RQ4 results set beside the paper's claims (:mod:`dupbert.study.paper`).

A results frame (:meth:`dupbert.core.results.ResultsFile.frame`) becomes one row per run and metric in
points (:func:`points_frame`); each model's baseline is held to its task's pre-registered learning
floor (:func:`learning_status`); every configuration is compared with its reference over paired
seeds, with the paper's claim and the verdict of :func:`dupbert.core.significance.verdict` beside it
(:func:`comparison`), and the primary comparison decides per model, task and metric
(:func:`overall`). :func:`confirmatory_test` judges one pre-registered comparison on new seeds.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..core.checks import check_columns, plain_value as _plain
from ..core.errors import ParameterError
from .paper import NOT_STATED, Claim, gain_claim
from ..training.task_specs import LEARNING_FLOORS
from ..training.tasks import TASKS, UnknownTask, empty_subset, in_points, task_metrics


RUN_COLUMNS = ("model", "task", "duplication", "seed")
"""The columns that name a run in a results frame (``ResultsFile.frame()``)."""


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


# Configurations that are not the paper's method: no claim applies to them.
NOT_THE_METHOD = {"baseline": "the baseline", "unshared baseline": "baseline variant"}

# The depth control *is* compared (with its reference, as a secondary comparison: does depth alone
# help?), but no claim of the paper applies to it.
CONTROLS = {"depth control": "control"}

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
    claim beside it and the verdict of :func:`dupbert.core.significance.verdict`.

    Args:
        results: ``ResultsFile.frame()`` rows of one setting.
        planned_seeds: ``{(model, task): seeds}`` of a pre-registered study
            (``dupbert.study.profiles.planned_seeds``): a comparison with fewer seed pairs gets the
            verdict :func:`pending` instead of one read off part of the data (no optional
            stopping), and a secondary one stays out of Holm. ``None``: judged at any size.
        family_sizes: ``{(model, task): m}`` planned secondaries
            (:func:`dupbert.core.significance.paired_gains`).

    Returns:
        :data:`COMPARISON_COLUMNS`, one row per (model, task, metric, duplication), the baseline
        included: the summary over seeds (points) and the paired-gain columns of
        :func:`dupbert.core.significance.paired_gains` (NaN for the baseline itself); ``trivial``,
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
    from ..core.significance import paired_gains, summarize_runs

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
    from ..core.significance import verdict

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
    # on the study's runs the Bonferroni interval gives the same verdicts (methods.md)
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
    from ..core.significance import _check_plan

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


def primary_metrics(frame: pd.DataFrame) -> dict[str, str]:
    """``{task: primary metric}`` for the tasks of ``frame``'s ``task`` column, in order of first
    appearance; ParameterError for a task dupbert does not know."""
    return {task: task_metrics(task)[0] for task in dict.fromkeys(frame["task"])}


def primary_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of a :func:`comparison` table on each task's primary metric."""
    return table[table["metric"] == table["task"].map(primary_metrics(table))]


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


def run_counts(results: pd.DataFrame) -> pd.DataFrame:
    """Per model and task (index): runs, seeds, configurations, largest subsets, steps per run."""
    return results.groupby(["model", "task"], sort=False).agg(
        runs=("run_key", "size"), seeds=("seed", "nunique"), configurations=("duplication", "nunique"),
        train_examples=("n_train", "max"), eval_examples=("n_eval", "max"), steps_per_run=("train_steps", "max"))


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
