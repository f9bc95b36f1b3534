"""RQ5: the study design of the ensemble comparison, and its tables.

Kao et al. (2020), experiments (ensemble): models fine-tuned with different duplication
configurations, combined by summing their output probabilities, give the paper's best SQuAD 2.0
score (:data:`dupbert.study.paper.PAPER_SCORES`). This module decides which RQ3 runs are combined and
what is compared with what; :mod:`dupbert.study.ensemble` combines and scores them.

Per model and task, on the same runs (methods.md, "RQ5: the ensemble rule"): single models and
the *best single* configuration (chosen on the evaluation data: optimistic); *cross-
configuration* ensembles of ``k`` configurations at ``k`` different seeds; and their matched
*same-configuration* control, each of those configurations alone at the same seeds, so that the
difference isolates what diverse configurations add beyond ensembling seeds
(:func:`matched_ensembles`). Ensembles of overlapping seeds share runs: every ensemble is shown,
but means and tests use one unit per *disjoint seed block* (offsets ``0, k, 2k, ...`` with
``j + k <= n``).

:mod:`dupbert.book.rq5` formats these frames for ``notebooks/rq5.ipynb``; scores are in points
(accuracy x 100, SQuAD EM/F1 as they are).
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.checks import check_columns, check_list, check_number
from .comparisons import run_settings
from .ensemble import RUN_COLUMNS, Evaluator, OutputsMismatch, default_outputs_dir
from ..core.errors import ParameterError
from ..core.results import repository_path
from ..core.significance import mean_ci, paired_p_value
from ..training.tasks import empty_subset, in_points, task_metrics

KINDS = ("single", "cross-configuration", "same-configuration")
"""The kinds of :func:`rq5_ensembles` rows."""


def ensemble_size(n_configurations: int, n_seeds: int) -> int:
    """``k = min(configurations, seeds)``, the default size of both arms; ParameterError for a count
    that is not an integer >= 0."""
    return min(check_number("n_configurations", n_configurations, integer=True, minimum=0),
               check_number("n_seeds", n_seeds, integer=True, minimum=0))


def matched_ensembles(configurations: Sequence[str], seeds: Sequence[int], k: int) -> list[dict]:
    """The RQ5 membership rule: every cross-configuration ensemble with its matched
    same-configuration control.

    With ``s_0 .. s_{n-1}`` the seeds sorted, for every offset ``j = 0 .. n-1``, every
    ``k``-subset ``S`` of ``configurations`` (``itertools.combinations``, in the order given) and
    every rotation ``r = 0 .. k-1``: the cross ensemble is ``[(S[i], s_{(j + (i+r) mod k) mod n})
    for i in 0 .. k-1]``, the controls ``[(c, s_{(j+i) mod n}) for i in 0 .. k-1]`` for each ``c``
    in ``S``. The rotations form a Latin square (every configuration at every seed of the block
    once), so a seed effect cannot pass for diversity. A cross ensemble already seen is skipped
    (only when ``k == n``).

    Args:
        configurations: distinct configuration names, in order of first appearance.
        seeds: distinct seeds (any order; sorted here).
        k: ensemble size, ``2 <= k <= min(len(configurations), len(seeds))``.

    Returns:
        One dict per pair, ``n * C(len(configurations), k) * k`` in all (fewer when ``k == n``):
        ``pair`` (0-based), ``offset`` (``j``), ``rotation`` (``r``), ``seeds`` (the block's
        seeds, in order), ``disjoint`` (``j % k == 0 and j + k <= n``: used by the tests),
        ``cross`` (a list of ``(configuration, seed)``), ``controls`` (``k`` such lists, in the
        order of ``S``), ``control_configurations`` (``S``).

    Raises:
        ValueError: ``k`` not in ``2 .. min(configurations, seeds)``.
        ParameterError (a ValueError): ``configurations`` or ``seeds`` malformed, empty or
            repeated; a seed or ``k`` not an integer.
    """
    configurations = check_list("configurations", configurations, what="configuration names")
    ordered = sorted(check_number(f"seeds[{i}]", s, integer=True)
                     for i, s in enumerate(check_list("seeds", seeds, what="seeds")))
    k = check_number("k", k, integer=True)
    if not 2 <= k <= min(len(configurations), len(ordered)):
        raise ValueError(f"an ensemble needs 2 <= k <= min({len(configurations)} configurations, "
                         f"{len(ordered)} seeds), got k={k}")
    n, pairs, seen = len(ordered), [], set()
    for offset in range(n):
        chosen = tuple(ordered[(offset + i) % n] for i in range(k))
        for subset in itertools.combinations(configurations, k):
            for rotation in range(k):
                cross = [(c, chosen[(i + rotation) % k]) for i, c in enumerate(subset)]
                if frozenset(cross) in seen:
                    continue
                seen.add(frozenset(cross))
                pairs.append({"pair": len(pairs), "offset": offset, "rotation": rotation,
                              "seeds": chosen, "disjoint": offset % k == 0 and offset + k <= n,
                              "cross": cross,
                              "controls": [[(c, s) for s in chosen] for c in subset],
                              "control_configurations": subset})
    return pairs


WAITING_COLUMNS = ["model", "task", "configuration", "seeds", "planned"]


def complete_configurations(runs: pd.DataFrame, plan=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The runs of the configurations whose planned seeds have all landed, and the planned
    configurations still short of them: RQ5 combines a study only at its planned size, as RQ3
    judges it (``dupbert.study.comparisons.comparison``'s ``planned_seeds``).

    Args:
        runs: :func:`dupbert.study.ensemble.read_runs` rows.
        plan: the study's ``dupbert.study.profiles.PlannedSweep`` entries, or ``None`` (keep every run).

    Returns:
        ``(kept, waiting)``: the rows of models and tasks not in the plan and of every complete
        planned configuration (its planned seeds only); one :data:`WAITING_COLUMNS` row per
        planned configuration still short (``seeds`` landed, ``planned``), in plan order.

    Raises:
        ParameterError (a ValueError): ``runs`` not a DataFrame, or (with a plan) lacking a column.
    """
    check_columns(runs, () if plan is None else RUN_COLUMNS[1:], "runs")
    if plan is None:
        return runs, pd.DataFrame(columns=WAITING_COLUMNS)
    waiting, seeds_of = [], {}
    for entry in plan:
        seeds_of[entry.model, entry.task] = set(entry.seeds)
        for configuration in entry.duplications:
            mine = runs[(runs["model"] == entry.model) & (runs["task"] == entry.task)
                        & (runs["duplication"] == configuration)]
            landed = set(mine["seed"].astype(int)) & set(entry.seeds)
            if len(landed) < len(entry.seeds):
                waiting.append({"model": entry.model, "task": entry.task,
                                "configuration": configuration, "seeds": len(landed),
                                "planned": len(entry.seeds)})
    waiting = pd.DataFrame(waiting, columns=WAITING_COLUMNS)
    short = set(zip(waiting["model"], waiting["task"], waiting["configuration"]))
    keep = [(m, t, d) not in short and int(s) in seeds_of.get((m, t), {int(s)})
            for m, t, d, s in zip(runs["model"], runs["task"], runs["duplication"], runs["seed"])]
    return runs[keep], waiting


def rq5_ensembles(runs: pd.DataFrame, data_dir: str | os.PathLike | None = None,
                  k: int | None = None) -> pd.DataFrame:
    """Every single run and every RQ5 ensemble of the runs, per model and task, scored from the
    stored outputs.

    ``single``: every run alone (through the ensemble code, so comparable); ``cross-configuration``
    and ``same-configuration``: the pairs of :func:`matched_ensembles` (``k`` control rows per
    cross ensemble, sharing its ``pair``), ``k`` = :func:`ensemble_size` unless given. No
    ensembles with fewer than ``k`` configurations or seeds; a pair with a missing run is left out.

    Args:
        runs: :func:`dupbert.study.ensemble.read_runs` rows of one setting per model and task (filter
            with :func:`dupbert.study.comparisons.keep_main_setting`).
        data_dir: overrides ``$DUPBERT_DATA_DIR``.
        k: ensemble size (>= 2).

    Returns:
        One row per single run or ensemble: ``model, task, kind, k`` (members), ``pair`` (Int64;
        NA for single runs; a control recurs in every pair of its configuration at its offset:
        :func:`distinct_ensembles`), ``offset``, ``rotation`` (Int64), ``disjoint`` (boolean),
        ``seed`` (Int64, single runs only), ``seeds`` (``"0 + 1"``), ``configuration`` (None for
        cross ensembles), ``members`` (``"baseline (seed 0) + copy last (seed 1)"``),
        ``run_keys`` (space-separated), and ``metrics.<name>`` in the results rows' units
        (fractions; SQuAD percent).

    Raises:
        OutputsNotFound, OutputsMismatch: as :func:`dupbert.study.ensemble.evaluate_ensemble`;
            OutputsMismatch also for several settings, or two runs of one configuration and seed.
        ParameterError (a ValueError): ``k`` not an integer >= 2; ``runs`` lacking a column.
    """

    if k is not None:
        k = check_number("k", k, integer=True, minimum=2)
    check_columns(runs, RUN_COLUMNS, "runs")
    evaluate = Evaluator(data_dir)
    records = []
    for (model, task), group in runs.groupby(["model", "task"], sort=False):
        rows = group.to_dict("records")
        _check_one_setting(model, task, group)
        scored = {}  # a control belongs to every pair of its configuration at those seeds
        for record in _memberships(rows, k):
            members = record.pop("members")
            keys = tuple(m["run_key"] for m in members)
            if keys not in scored:
                scored[keys] = evaluate(members)
            metrics = scored[keys]
            records.append({"model": model, "task": task, **record, "k": len(members),
                            "members": " + ".join(_member_label(m) for m in members),
                            "run_keys": " ".join(m["run_key"] for m in members),
                            **{f"metrics.{name}": value for name, value in metrics.items()}})
    return _typed(pd.DataFrame(records))


_ENSEMBLE_COLUMNS = ["model", "task", "kind", "k", "pair", "offset", "disjoint", "seed", "seeds",
                     "configuration", "members", "run_keys"]


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    """:func:`rq5_ensembles` columns in order, with nullable integer and boolean types."""
    columns = [*_ENSEMBLE_COLUMNS[:6], "rotation", *_ENSEMBLE_COLUMNS[6:]]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    metrics = [c for c in frame.columns if c.startswith("metrics.")]
    frame = frame[columns + metrics].copy()
    for column in ("pair", "offset", "rotation", "seed"):
        frame[column] = frame[column].astype("Int64")
    frame["disjoint"] = frame["disjoint"].astype("boolean")
    return frame


def _check_one_setting(model: str, task: str, group: pd.DataFrame) -> None:
    """Ensembles combine runs of one setting (:func:`dupbert.study.comparisons.run_settings`)."""
    settings = set(run_settings(group))
    if len(settings) > 1:
        raise OutputsMismatch(f"{model} on {task}: runs of {len(settings)} settings "
                              "(hyper-parameters, subset sizes or seed, data source); keep one")


def _has_runs(pair: Mapping, run: Mapping) -> bool:
    """Whether every member of a :func:`matched_ensembles` pair, both arms, has a run."""
    return all(member in run for members in (pair["cross"], *pair["controls"])
               for member in members)


def _member_label(row: Mapping) -> str:
    return f"{row['duplication']} (seed {int(row['seed'])})"


def _memberships(rows: Sequence[Mapping], k: int | None):
    """One dict per single run and RQ5 ensemble of one model and task (:func:`rq5_ensembles`), with
    the member rows under ``members``."""
    configurations = list(dict.fromkeys(r["duplication"] for r in rows))
    seeds = sorted({int(r["seed"]) for r in rows})
    run = _run_index(rows)
    for seed in seeds:
        for configuration in configurations:
            if (configuration, seed) in run:
                yield {"kind": "single", "pair": None, "offset": None, "rotation": None,
                       "disjoint": None,
                       "seed": seed, "seeds": str(seed), "configuration": configuration,
                       "members": [run[configuration, seed]]}
    size = k if k is not None else ensemble_size(len(configurations), len(seeds))
    if not 2 <= size <= min(len(configurations), len(seeds)):
        return
    number = 0
    for pair in matched_ensembles(configurations, seeds, size):
        if not _has_runs(pair, run):
            continue
        common = {"pair": number, "offset": pair["offset"], "rotation": pair["rotation"],
                  "disjoint": pair["disjoint"],
                  "seed": None, "seeds": " + ".join(map(str, pair["seeds"]))}
        yield {"kind": "cross-configuration", **common, "configuration": None,
               "members": [run[m] for m in pair["cross"]]}
        for configuration, control in zip(pair["control_configurations"], pair["controls"]):
            yield {"kind": "same-configuration", **common, "configuration": configuration,
                   "members": [run[m] for m in control]}
        number += 1


def _run_index(rows: Sequence[Mapping]) -> dict[tuple[str, int], Mapping]:
    """``{(configuration, seed): row}``; two runs of one configuration and seed are refused."""
    run = {}
    for row in rows:
        key = (row["duplication"], int(row["seed"]))
        if key in run:
            raise OutputsMismatch(f"{row['model']} on {row['task']}: two runs of {key[0]!r} at "
                                  f"seed {key[1]} ({run[key]['run_key']}, {row['run_key']})")
        run[key] = row
    return run


def distinct_ensembles(ensembles: pd.DataFrame) -> pd.DataFrame:
    """:func:`rq5_ensembles` rows with each same-configuration control once (first row kept): for
    counts, means and plots; the pairing (:func:`rq5_differences`) needs them all.

    Raises:
        ParameterError (a ValueError): ``ensembles`` lacking ``model, task, kind, run_keys``.
    """
    check_columns(ensembles, ["model", "task", "kind", "run_keys"], "ensembles")
    control = ensembles["kind"] == "same-configuration"
    repeated = control & ensembles.duplicated(["model", "task", "kind", "run_keys"])
    return ensembles[~repeated].reset_index(drop=True)


def ensemble_points(ensembles: pd.DataFrame) -> pd.DataFrame:
    """:func:`rq5_ensembles` rows as one row per single run or ensemble and task metric, in points,
    metrics in the task's order (primary first).

    Returns:
        The :func:`rq5_ensembles` columns without ``run_keys`` and metrics, plus ``metric,
        value``. A SQuAD 2.0 subset metric is left out where the set has no question of it.

    Raises:
        ParameterError (a ValueError): a missing column; an unknown task.
    """
    columns = [c for c in _ENSEMBLE_COLUMNS if c != "run_keys"]
    check_columns(ensembles, columns, "ensembles")
    if "rotation" in ensembles:  # rq5_ensembles' frames have it; hand-made ones may not
        columns.insert(columns.index("offset") + 1, "rotation")
    parts = []
    for (_, task), group in ensembles.groupby(["model", "task"], sort=False):
        for metric in task_metrics(task):
            column = f"metrics.{metric}"
            if column not in group:
                continue
            measured = group[~empty_subset(group, metric)]  # no NoAns_f1 without NoAns questions
            part = measured[columns].copy()
            part["metric"] = metric
            part["value"] = in_points(metric, measured[column].astype(float))
            parts.append(part)
    if not parts:
        return pd.DataFrame(columns=[*columns, "metric", "value"])
    return pd.concat(parts, ignore_index=True)


def best_single(ensembles: pd.DataFrame) -> pd.DataFrame:
    """The best single configuration per model and task: the highest mean over seeds of the primary
    metric (ties: first), among the configurations with the most seeds. Optimistic (chosen on the
    evaluation data).

    Returns:
        ``model, task, configuration`` (one row per model and task with single runs).

    Raises:
        ParameterError (a ValueError): a missing column; single runs without their primary metric
            or with NaN in it.
    """
    check_columns(ensembles, ["model", "task", "kind", "configuration", "seed"], "ensembles")
    rows = []
    singles = ensembles[ensembles["kind"] == "single"]
    for (model, task), group in singles.groupby(["model", "task"], sort=False):
        primary = f"metrics.{task_metrics(task)[0]}"
        if primary not in group:
            raise ParameterError(
                f"{model} on {task}: no {primary} column, the primary metric that picks the best "
                f"single configuration; the metric columns are "
                f"{[c for c in group.columns if str(c).startswith('metrics.')]}")
        undefined = group[group[primary].isna()]
        if not undefined.empty:
            first = undefined.iloc[0]
            raise ParameterError(
                f"{model} on {task}: the single run of {first['configuration']!r} at seed "
                f"{int(first['seed'])} has no {primary} (NaN): the best single configuration is "
                f"chosen on the mean over every seed; re-run it or drop its row")
        by_configuration = group.groupby("configuration", sort=False)
        seeds = by_configuration["seed"].nunique()
        means = by_configuration[primary].mean()[seeds == seeds.max()]
        rows.append({"model": model, "task": task, "configuration": means.idxmax()})
    return pd.DataFrame(rows, columns=["model", "task", "configuration"])


SUMMARY_KINDS = ("single", "baseline", "best single", "cross-configuration", "same-configuration")


def _single_units(points: pd.DataFrame, best: pd.DataFrame, baseline: str | None) -> list:
    """Single runs, the best single configuration and the baseline, one unit per run."""
    single = points[points["kind"] == "single"]
    chosen = single.merge(best, on=["model", "task", "configuration"])
    parts = [single, chosen.assign(kind="best single")]
    if baseline is not None:
        parts.append(single[single["configuration"] == baseline].assign(kind="baseline"))
    return [part.assign(all_value=part["value"]) for part in parts]


def _block_units(points: pd.DataFrame) -> list:
    """Ensembles, one unit per disjoint seed block (the mean of its ensembles of the kind)."""
    keys = ["model", "task", "metric", "kind"]
    ensembles = points[points["kind"] != "single"]
    if ensembles.empty:
        return []
    blocks = (ensembles[ensembles["disjoint"].fillna(False).astype(bool)]
              .groupby([*keys, "offset"], sort=False)["value"].mean().reset_index())
    return [blocks, ensembles[keys].assign(all_value=ensembles["value"])]


SUMMARY_COLUMNS = ["model", "task", "metric", "kind", "k", "n", "mean", "std", "ci_low", "ci_high",
                   "configuration", "n_all", "mean_all"]
"""The columns of :func:`rq5_summary`."""


def rq5_summary(ensembles: pd.DataFrame, baseline: str | None = None) -> pd.DataFrame:
    """Mean and 95% CI (:func:`dupbert.core.significance.mean_ci`) per model, task, metric and kind, in
    points.

    Units: ``single``: every run; ``baseline`` (if ``baseline`` is given) and ``best single``: its
    run at each seed; ensembles: each disjoint seed block. ``n_all`` and ``mean_all`` describe
    every distinct run or ensemble of the kind, overlapping ones included.

    Args:
        ensembles: :func:`rq5_ensembles` output.
        baseline: the configuration to report on its own as ``baseline``.

    Returns:
        :data:`SUMMARY_COLUMNS`: ``n`` (units), ``mean, std, ci_low, ci_high`` (points; NaN
        without units), ``configuration`` (of ``baseline``/``best single`` rows); kinds in
        :data:`SUMMARY_KINDS` order, metrics primary first.

    Raises:
        ParameterError (a ValueError): a missing column; ``baseline`` not a configuration of any
            single run; as :func:`best_single`.
    """
    check_columns(ensembles, _ENSEMBLE_COLUMNS, "ensembles")
    configurations = list(dict.fromkeys(
        ensembles.loc[ensembles["kind"] == "single", "configuration"]))
    if baseline is not None and configurations and baseline not in configurations:
        raise ParameterError(f"baseline {baseline!r} is not a configuration of the single runs; "
                             f"they are {configurations}")
    points = ensemble_points(distinct_ensembles(ensembles))
    parts = _single_units(points, best_single(ensembles), baseline) + _block_units(points)
    units = pd.concat(parts, ignore_index=True)
    sizes = points.groupby(["model", "task", "kind"], sort=False)["k"].max()
    empty = {"n": 0, "mean": np.nan, "std": np.nan, "ci_low": np.nan, "ci_high": np.nan}
    rows = []
    for (model, task, metric), group in units.groupby(["model", "task", "metric"], sort=False):
        for kind in SUMMARY_KINDS:
            chosen = group[group["kind"] == kind]
            if chosen.empty:
                continue
            values, described = chosen["value"].dropna(), chosen["all_value"].dropna()
            single = kind in ("single", "baseline", "best single")
            rows.append({"model": model, "task": task, "metric": metric, "kind": kind,
                         "k": 1 if single else int(sizes[model, task, kind]),
                         **(mean_ci(values) if len(values) else empty),
                         "configuration": chosen["configuration"].iloc[0]
                         if kind in ("baseline", "best single") else None,
                         "n_all": int(len(described)), "mean_all": float(described.mean())})
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


DIFFERENCE_COLUMNS = ["model", "task", "metric", "comparison", "n_pairs", "mean_all", "n_units",
                      "difference", "ci_low", "ci_high", "p_value", "test"]


def rq5_differences(ensembles: pd.DataFrame, start: int = 0) -> pd.DataFrame:
    """The RQ5 comparisons per model, task and metric, in points: ``cross-configuration −
    same-configuration`` (each cross ensemble minus the mean of its ``k`` controls) and
    ``cross-configuration − best single`` (minus the best single configuration's mean at its
    seeds; a seed without that run leaves the ensemble out).

    ``n_pairs`` and ``mean_all`` describe every paired difference (dependent). The test has one
    unit per disjoint seed block (the mean of its differences): ``difference`` with a Student-t
    95% CI and the paired t-test's ``p_value`` (:func:`dupbert.core.significance.paired_p_value`), over
    ``n_units`` blocks. Uncorrected.

    Args:
        ensembles: :func:`rq5_ensembles` output (or a subset, e.g. one rotation).
        start: first offset of the tested blocks, ``0 <= start < k``: 0 is the planned partition
            (the chapter's verdicts); ``p`` cuts the seeds into blocks from ``s_p`` on, wrapping
            round (a robustness check).

    Returns:
        :data:`DIFFERENCE_COLUMNS`; rows only for models and tasks with cross ensembles.

    Raises:
        ParameterError (a ValueError): a missing column; ``start`` not an integer in
            ``0 .. k-1``; as :func:`best_single`.
    """
    start = check_number("start", start, integer=True, minimum=0)
    points = ensemble_points(ensembles)
    best = best_single(ensembles)
    rows = []
    for (model, task, metric), group in points.groupby(["model", "task", "metric"], sort=False):
        cross = group[group["kind"] == "cross-configuration"].set_index("pair")
        if cross.empty:
            continue
        if start:
            cross = cross.assign(disjoint=_blocks_from(cross, start, f"{model} on {task}"))
        base = {"model": model, "task": task, "metric": metric}
        control = (group[group["kind"] == "same-configuration"].groupby("pair")["value"]
                   .agg(lambda values: values.mean(skipna=False)))  # a missing control: no pair
        rows.append({**base, "comparison": "cross-configuration − same-configuration",
                     **_paired_test(cross.assign(other=control))})
        chosen = best.loc[(best["model"] == model) & (best["task"] == task), "configuration"]
        runs = group[(group["kind"] == "single") & (group["configuration"] == chosen.iloc[0])]
        rows.append({**base, "comparison": "cross-configuration − best single",
                     **_paired_test(cross.assign(other=_at_seeds(cross["seeds"], runs)))})
    return pd.DataFrame(rows, columns=DIFFERENCE_COLUMNS)


def _blocks_from(cross: pd.DataFrame, start: int, where: str) -> pd.Series:
    """Whether each cross ensemble is in a block of the partition starting at offset ``start``."""
    k = int(cross["k"].max())
    if start >= k:
        raise ParameterError(f"start must be below k = {k} of {where}, got {start}")
    n = len({s for text in cross["seeds"] for s in str(text).split(" + ")})
    offset = cross["offset"].astype(int)
    return ((offset - start) % k == 0) & (offset >= start) & (offset - start + k <= n)


def _at_seeds(seeds: pd.Series, runs: pd.DataFrame) -> pd.Series:
    """The mean of ``runs`` at each entry's seeds (``"0 + 1"``); NaN where a seed has no run."""
    by_seed = runs.set_index(runs["seed"].astype(int))["value"]
    return seeds.map(lambda text: by_seed.reindex([int(s) for s in text.split(" + ")]).mean(
        skipna=False))


def _paired_test(pairs: pd.DataFrame) -> dict:
    """``value - other`` per pair, described over all pairs and tested over disjoint seed blocks."""
    pairs = pairs.assign(difference=pairs["value"] - pairs["other"]).dropna(subset=["difference"])
    blocks = (pairs[pairs["disjoint"].fillna(False).astype(bool)]
              .groupby("offset", sort=True)["difference"].mean().to_numpy(float))
    summary = mean_ci(blocks) if blocks.size else {"mean": np.nan, "ci_low": np.nan,
                                                    "ci_high": np.nan}
    return {"n_pairs": int(len(pairs)), "mean_all": float(pairs["difference"].mean()),
            "n_units": int(blocks.size), "difference": summary["mean"],
            "ci_low": summary["ci_low"], "ci_high": summary["ci_high"],
            "p_value": paired_p_value(blocks), "test": "paired t over disjoint seed blocks"}


PARTITION_COLUMNS = ["model", "task", "metric", "partition", "blocks", "n_units", "difference",
                     "ci_low", "ci_high", "p_value"]
"""The columns of :func:`rq5_partition_differences`."""

MAX_PARTITIONS = 10_000
"""The most partitions :func:`rq5_partition_differences` tests per model and task by default
(12 seeds in pairs make 10,395; each costs about half a millisecond)."""


def count_partitions(n_seeds: int, k: int) -> int:
    """The number of partitions of ``n_seeds`` seeds into disjoint blocks of ``k``:
    ``n! / ((k!)^(n/k) (n/k)!)`` (105 for 8 seeds in pairs); 0 when ``k`` does not divide it."""
    if n_seeds % k:
        return 0
    blocks = n_seeds // k
    return math.factorial(n_seeds) // (math.factorial(k) ** blocks * math.factorial(blocks))


def seed_partitions(seeds: Sequence[int], k: int) -> list[tuple[tuple[int, ...], ...]]:
    """Every partition of ``seeds`` into disjoint blocks of ``k`` (:func:`count_partitions`),
    blocks sorted, partitions in lexicographic order: the first is the planned one of
    :func:`rq5_differences`.

    Raises:
        ParameterError (a ValueError): ``seeds`` malformed, empty or repeated; ``k`` not an
            integer >= 1.
        ValueError: the number of seeds is not a multiple of ``k``.
    """
    ordered = tuple(sorted(check_number(f"seeds[{i}]", s, integer=True)
                           for i, s in enumerate(check_list("seeds", seeds, what="seeds"))))
    k = check_number("k", k, integer=True, minimum=1)
    if len(ordered) % k:
        raise ValueError(f"{len(ordered)} seeds cannot be cut into disjoint blocks of {k}: "
                         f"give a multiple of {k} seeds")

    def split(rest: tuple[int, ...]):
        if not rest:
            yield ()
            return
        first, others = rest[0], rest[1:]
        for partners in itertools.combinations(others, k - 1):
            remaining = tuple(s for s in others if s not in partners)
            for tail in split(remaining):
                yield ((first, *partners), *tail)

    return list(split(ordered))


def rq5_partition_differences(runs: pd.DataFrame, data_dir: str | os.PathLike | None = None,
                              k: int | None = None,
                              max_partitions: int = MAX_PARTITIONS) -> pd.DataFrame:
    """The cross − same-configuration difference of :func:`rq5_differences` on *every* partition
    of a model and task's seeds into disjoint blocks (:func:`seed_partitions`). Exploratory: the
    partitions share blocks, so their counts describe how much the planned result owes to its
    pairing and are not tests. Primary metric only, in points.

    Args:
        runs: :func:`dupbert.study.ensemble.read_runs` rows as :func:`rq5_ensembles` takes them, with
            every run of the configurations combined (:func:`complete_configurations`).
        data_dir: overrides ``$DUPBERT_DATA_DIR``.
        k: block and ensemble size, default :func:`ensemble_size`.
        max_partitions: refuse a model and task with more partitions (:data:`MAX_PARTITIONS`).

    Returns:
        :data:`PARTITION_COLUMNS`: ``partition`` (0-based, :func:`seed_partitions` order: 0 is
        the planned one), ``blocks`` (``"0 + 1 | 2 + 3"``), ``n_units``, ``difference``,
        ``ci_low``, ``ci_high``, ``p_value``. No rows where seeds are fewer than ``k``, not a
        multiple of ``k``, or make one partition; a partition with an unusable block is left out.

    Raises:
        OutputsNotFound, OutputsMismatch, OutputsInvalid: as :func:`rq5_ensembles`.
        ParameterError (a ValueError): a missing column; ``k`` not an integer >= 2;
            ``max_partitions`` not an integer >= 1, or exceeded; an unknown task.
    """
    if k is not None:
        k = check_number("k", k, integer=True, minimum=2)
    max_partitions = check_number("max_partitions", max_partitions, integer=True, minimum=1)
    check_columns(runs, RUN_COLUMNS, "runs")
    evaluate, scored, rows = Evaluator(data_dir), {}, []

    def value(members: Sequence[Mapping], metric: str) -> float:
        keys = tuple(m["run_key"] for m in members)
        if keys not in scored:
            scored[keys] = evaluate(members)
        return float(in_points(metric, scored[keys][metric]))

    for (model, task), group in runs.groupby(["model", "task"], sort=False):
        _check_one_setting(model, task, group)
        records = group.to_dict("records")
        run = _run_index(records)
        configurations = list(dict.fromkeys(r["duplication"] for r in records))
        seeds = sorted({int(r["seed"]) for r in records})
        size = k if k is not None else ensemble_size(len(configurations), len(seeds))
        if not 2 <= size <= min(len(configurations), len(seeds)):
            continue
        count = count_partitions(len(seeds), size)
        if count > max_partitions:
            raise ParameterError(
                f"{model} on {task}: {len(seeds)} seeds in blocks of {size} make {count:,} "
                f"partitions, more than max_partitions={max_partitions:,} (each costs about "
                "half a millisecond, and every block its ensembles): raise max_partitions, or "
                "give fewer seeds")
        if count < 2:
            continue
        metric = task_metrics(task)[0]
        units = {}
        for block in itertools.combinations(seeds, size):
            differences = [
                value([run[m] for m in pair["cross"]], metric)
                - np.mean([value([run[m] for m in control], metric)
                           for control in pair["controls"]])
                for pair in matched_ensembles(configurations, block, size) if _has_runs(pair, run)]
            if differences:
                units[block] = float(np.mean(differences))
        for number, partition in enumerate(seed_partitions(seeds, size)):
            if not all(block in units for block in partition):
                continue
            found = np.array([units[block] for block in partition])
            summary = mean_ci(found)
            rows.append({"model": model, "task": task, "metric": metric, "partition": number,
                         "blocks": " | ".join(" + ".join(map(str, b)) for b in partition),
                         "n_units": len(found), "difference": summary["mean"],
                         "ci_low": summary["ci_low"], "ci_high": summary["ci_high"],
                         "p_value": paired_p_value(found)})
    return pd.DataFrame(rows, columns=PARTITION_COLUMNS)


# The runs the chapter reads, and their trivial baselines


def study_files(results_paths: str | Sequence[str],
                outputs_dirs: str | Sequence[str | None] | None = None) -> list[tuple[str, Path, Path]]:
    """``[(given, results_file, outputs_folder), ...]``: the results files of a study and their
    outputs folders (default :func:`dupbert.study.ensemble.default_outputs_dir`), absolute, from the
    repository root. ValueError if not one outputs folder per results file."""
    paths = [results_paths] if isinstance(results_paths, str) else list(results_paths)
    folders = [None] * len(paths) if outputs_dirs is None else (
        [outputs_dirs] if isinstance(outputs_dirs, str) else list(outputs_dirs))
    return [(p, repository_path(p),
             default_outputs_dir(repository_path(p)) if f is None else repository_path(f))
            for p, f in zip(paths, folders, strict=True)]


def trivial_scores(runs: pd.DataFrame) -> dict[tuple[str, str, str], float]:
    """``{(model, task, metric): points}``: the trivial baseline of each model and task's evaluation
    set (mean of the runs' ``baselines.<metric>``)."""
    trivial = {}
    for (model, task), group in runs.groupby(["model", "task"], sort=False):
        for metric in task_metrics(task):
            column = f"baselines.{metric}"
            if column in group:
                trivial[model, task, metric] = float(in_points(metric, group[column].astype(float).mean()))
    return trivial
