"""RQ5: the study design of the ensemble comparison, and its tables.

Kao et al. (2020), experiments (ensemble): models fine-tuned with different duplication
configurations, combined by summing their output probabilities, give the paper's best SQuAD 2.0
score (85.50 EM / 88.59 F1, ALBERT-based; :data:`dupbert.paper.PAPER_SCORES`). This module decides
which RQ3 runs are combined and what is compared with what; :mod:`dupbert.ensemble` combines and
scores them from their stored outputs.

The RQ5 comparison (:func:`rq5_ensembles`, :func:`rq5_summary`, :func:`rq5_differences`), per
model and task, on the same runs: (a) single models, and the *best single* configuration (best
mean over seeds of the task's primary metric, chosen on the evaluation data itself, which favours
it); (b) *cross-configuration* ensembles: ``k`` different configurations, each member from a
different seed; (c) the *same-configuration* control: each configuration of the cross ensemble
alone, at the same ``k`` seeds. Both arms draw their members from the same ``k`` different seeds
and have the same size, so that (b) − (c) isolates what the diversity of configurations adds
beyond ensembling runs of different seeds; and both weigh
the same configurations equally, so that it is not a better or worse configuration swapped in.

The membership rule (:func:`matched_ensembles`): with the seeds sorted ``s_0 .. s_{n-1}`` and
``k = min(configurations, seeds)`` unless given, for every seed offset ``j = 0 .. n-1`` and every
``k``-subset ``S = (c_1 .. c_k)`` of the configurations (``itertools.combinations`` in order of
first appearance) and every rotation ``r = 0 .. k-1``, the cross-configuration ensemble takes
member ``i`` from configuration ``c_i`` at seed ``s_{(j + (i+r) mod k) mod n}`` (``i = 0 ..
k-1``, ``c`` 0-based here): over its rotations every configuration sits at every seed of the
block once (a Latin square); its matched control is the ``k`` same-configuration ensembles of
``c_0 .. c_{k-1}``, each at the same seeds, and the paired difference is the cross ensemble
minus their mean. Nothing is picked. Ensembles of nearby
offsets share runs, so they are dependent: each cross ensemble is compared with its own control
(a paired difference), and the tests use only the *disjoint seed blocks*, offsets ``j = 0, k,
2k, ...`` with ``j + k <= n`` (one unit per block: the mean paired difference of its
ensembles); every ensemble is shown descriptively.
:func:`rq5_differences` with ``start`` tests the other cyclic partitions of the seeds into disjoint
blocks, and :func:`rq5_partition_differences` every partition, as robustness checks
(``book/methods.md`` gives the history of the rule).

The chapter's tables (:func:`ensemble_counts`, :func:`summary_table`, :func:`difference_table`,
:func:`cyclic_partitions`, :func:`every_partition_table`, :func:`paper_beside_table`,
:func:`findings_text`) format these frames for ``notebooks/rq5.ipynb``; scores are in points
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

from .checks import check_columns, check_list, check_number
from .ensemble import RUN_COLUMNS, Evaluator, OutputsMismatch, default_outputs_dir
from .errors import ParameterError
from .paper import (DID_NOT_LEARN, NOT_STATED, PAPER_SCORES, interval_text, learned,
                    run_settings)
from .profiles import sweep
from .results import repository_path
from .significance import mean_ci, paired_p_value
from .tasks import empty_subset, in_points, task_metrics

KINDS = ("single", "cross-configuration", "same-configuration")
"""The kinds of :func:`rq5_ensembles` rows."""


def ensemble_size(n_configurations: int, n_seeds: int) -> int:
    """``k = min(configurations, seeds)``: the size of both the cross-configuration ensembles and
    the same-configuration control, each member from a different seed.

    Raises:
        ParameterError (a ValueError): a count that is not an integer >= 0.
    """
    return min(check_number("n_configurations", n_configurations, integer=True, minimum=0),
               check_number("n_seeds", n_seeds, integer=True, minimum=0))


def matched_ensembles(configurations: Sequence[str], seeds: Sequence[int], k: int) -> list[dict]:
    """The RQ5 membership rule (module notes; Kao et al. 2020, ensemble experiment): every
    cross-configuration ensemble with its matched same-configuration control.

    With ``s_0 .. s_{n-1}`` the seeds sorted, for every offset ``j = 0 .. n-1`` (outer loop),
    every ``k``-subset ``S`` of ``configurations`` (``itertools.combinations``, in the order
    given) and every rotation ``r = 0 .. k-1`` (inner loop): the cross ensemble is
    ``[(S[i], s_{(j + (i+r) mod k) mod n}) for i in 0 .. k-1]``, the controls
    ``[(c, s_{(j+i) mod n}) for i in 0 .. k-1]`` for each ``c`` in ``S``: the same ``k``
    different seeds, every configuration of the cross ensemble weighed equally. The ``k``
    rotations form a Latin square, so that within a block every configuration sits at every one
    of its seeds once: with rotation 0 alone the earlier configuration would always take the
    block's lower seed, and a seed effect could pass for one of diversity. A cross
    ensemble whose members an earlier pair already has is skipped (only when ``k == n``, where
    the offsets are themselves rotations).

    Args:
        configurations: distinct configuration names, in order of first appearance.
        seeds: distinct seeds (any order; sorted here).
        k: ensemble size, ``2 <= k <= min(len(configurations), len(seeds))``.

    Returns:
        One dict per pair, ``n * C(len(configurations), k) * k`` in all (fewer when ``k == n``):
        ``pair`` (0-based, in order), ``offset`` (``j``), ``rotation`` (``r``), ``seeds``
        (tuple, ``s_{(j+i) mod n}`` for ``i = 0..k-1``: the block's seeds, in order),
        ``disjoint`` (``j % k == 0 and j + k <= n``: the blocks whose seed sets do not overlap,
        used by the tests), ``cross`` (a list of ``(configuration, seed)``), ``controls`` (``k``
        such lists, one per configuration of ``S``, in its order), ``control_configurations``
        (``S``).

    Raises:
        ValueError: ``k < 2``; ``k`` above the number of configurations or of seeds (members
            must differ in configuration, and in seed).
        ParameterError (a ValueError): ``configurations`` or ``seeds`` a string, empty or with
            an item twice (``seeds must be distinct seeds: 1 appears 2 times in [1, 1]``); a seed
            or ``k`` that is not an integer.
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
    configurations still short of them: RQ5 combines a study that runs in the background only
    at its planned size, as RQ3 judges it (``dupbert.paper.comparison``'s ``planned_seeds``), so
    that no ensemble mixes complete configurations with one whose seeds are still landing (its
    disjoint seed blocks would then differ in what they contain).

    Args:
        runs: :func:`dupbert.ensemble.read_runs` rows (``model``, ``task``, ``duplication``, ``seed``).
        plan: the study's ``dupbert.profiles.PlannedSweep`` entries (``plan_sweep`` of its RQ3
            profile), or ``None``: every run is kept and nothing waits.

    Returns:
        ``(kept, waiting)``: ``kept`` the rows of ``runs`` of every model and task not in the
        plan, and of every planned configuration with runs at all of its planned seeds (those
        seeds only); ``waiting`` one row per planned configuration
        that has fewer (:data:`WAITING_COLUMNS`: ``model, task, configuration``, ``seeds``
        landed, ``planned``), in plan order.

    Raises:
        ParameterError (a ValueError): ``runs`` not a DataFrame, or (with a plan) without a
            column of ``model, task, duplication, seed``.
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
    """Every single run and every RQ5 ensemble of the runs, per model and task, scored.

    Rule, per (model, task), over its configurations (order of first appearance) and seeds:

    - ``single``: every run alone (scored through the ensemble code, i.e. from the stored
      outputs, so that it is comparable with the ensembles);
    - ``cross-configuration`` and ``same-configuration`` (the control): the pairs of
      :func:`matched_ensembles`: member ``i`` of a cross ensemble is configuration ``c_i`` at
      seed ``s_{(j + (i+r) mod k) mod n}`` (every rotation ``r``), its control each of
      ``c_0 .. c_{k-1}`` alone at the same seeds
      (``k`` same-configuration ensembles per cross ensemble, one row each, sharing its
      ``pair``); both arms have the same size and the same seeds, and weigh the same
      configurations equally;
    - ``k`` = :func:`ensemble_size` unless given; no ensembles for a model and task with fewer
      than ``k`` configurations or seeds (or ``k < 2``). A pair is left out, cross ensemble
      and controls together, when one of their runs is missing.

    Args:
        runs: :func:`dupbert.ensemble.read_runs` rows (``run_key``, ``model``, ``task``, ``duplication``,
            ``seed``, ``outputs_dir``, settings; ``reference``/``role`` are carried but not
            used). Runs of one model and task must share one setting
            (:func:`dupbert.paper.run_settings`: hyper-parameters, subset sizes and seed, data
            source): filter first (:func:`dupbert.paper.keep_main_setting`).
        data_dir: overrides ``$DUPBERT_DATA_DIR``.
        k: ensemble size (>= 2), default the rule above.

    Returns:
        One row per single run or ensemble: ``model, task, kind, k`` (members), ``pair`` (Int64:
        the index of a cross ensemble and its controls within the model and task; NA for single
        runs; a control recurs, scored once, in every pair of its configuration at its offset:
        :func:`distinct_ensembles` keeps one of each), ``offset`` (Int64, ``j``), ``rotation``
        (Int64, ``r``), ``disjoint``
        (boolean: in a disjoint seed block),
        ``seed`` (Int64, single runs only), ``seeds`` (the block's seeds, ``"0 + 1"``),
        ``configuration`` (of a single run or control; None for cross ensembles), ``members``
        (``"baseline (seed 0) + copy last (seed 1)"``), ``run_keys`` (space-separated, member
        order), and ``metrics.<name>`` in the units of the results rows (fractions; SQuAD
        percent).

    Raises:
        OutputsNotFound, OutputsMismatch: as :func:`dupbert.ensemble.evaluate_ensemble`; OutputsMismatch also
            when one model and task has runs of several settings, or two runs of one
            configuration and seed.
        ParameterError (a ValueError): ``k`` not an integer >= 2 (``k must be an integer >= 2,
            got 1``); ``runs`` not a DataFrame or without a column of ``run_key, model, task,
            duplication, seed`` (``pd.DataFrame()``: "no runs"; with the columns but no rows
            the result is the columns and no rows).
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
    """:func:`rq5_ensembles` columns in order (``rotation`` after ``offset``), nullable integer
    and boolean types."""
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
    """Ensembles combine runs of one setting (:func:`dupbert.paper.run_settings`)."""
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
    """One dict per single run and RQ5 ensemble of one model and task (the rule of
    :func:`rq5_ensembles`), in a fixed order: singles by seed then configuration, then each
    pair's cross ensemble followed by its ``k`` controls. Keys: ``kind, pair, offset, disjoint,
    seed, seeds, configuration, members`` (the member rows)."""
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
    """:func:`rq5_ensembles` rows with each ensemble once: a same-configuration control recurs in
    every pair of its configuration at its offset (``C(m-1, k-1)`` pairs of ``m``
    configurations); the first row of each (model, task, members) is kept, in order, and every
    other row. For counts, means and plots of ensembles; the pairing (:func:`rq5_differences`)
    needs them all.

    Raises:
        ParameterError (a ValueError): ``ensembles`` not a DataFrame or without a column of
            ``model, task, kind, run_keys``.
    """
    check_columns(ensembles, ["model", "task", "kind", "run_keys"], "ensembles")
    control = ensembles["kind"] == "same-configuration"
    repeated = control & ensembles.duplicated(["model", "task", "kind", "run_keys"])
    return ensembles[~repeated].reset_index(drop=True)


def ensemble_points(ensembles: pd.DataFrame) -> pd.DataFrame:
    """:func:`rq5_ensembles` rows as one row per single run or ensemble and task metric, in
    points (accuracy × 100; SQuAD as it is), the task's metrics in order (primary first).

    Returns:
        Columns ``model, task, kind, k, pair, offset, disjoint, seed, seeds, configuration,
        members, metric, value``; no rows when ``ensembles`` has none, or none of its tasks'
        ``metrics.<name>`` columns. A SQuAD 2.0 subset metric is left out where the evaluation
        set has no question of its subset (:func:`dupbert.tasks.empty_subset`).

    Raises:
        ParameterError (a ValueError): ``ensembles`` not a DataFrame or without a column of
            :func:`rq5_ensembles` (named; ``pd.DataFrame()``: no runs); an unknown task
            (:func:`dupbert.tasks.task_metrics`).
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
    """The best single configuration per model and task: the highest mean over seeds of the
    task's primary metric (:data:`dupbert.tasks.TASKS` ``metrics[0]``; ties: first configuration),
    among the configurations with the most seeds (a configuration whose seeds are still landing
    cannot win on its first few). Chosen on the evaluation data itself, so its score is
    optimistic.

    Returns:
        ``model, task, configuration`` (one row per model and task with single runs).

    Raises:
        ParameterError (a ValueError): ``ensembles`` not a DataFrame or without a column of
            ``model, task, kind, configuration, seed``; single runs without their task's primary
            metric column, or with NaN in it (the message names the model, task, configuration
            and seed: a mean over fewer seeds would pick the best on other seeds).
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
    """Mean and 95% CI (:func:`dupbert.significance.mean_ci`, Student t) per model, task, metric
    and kind, in points (accuracy × 100; SQuAD as it is).

    Units of the mean (independent replications): ``single``: every run; ``baseline`` (only when
    ``baseline`` names a configuration) and ``best single`` (:func:`best_single`): that
    configuration's run at each seed; ``cross-configuration`` and ``same-configuration``: each
    disjoint seed block (offsets ``0, k, 2k, ...`` with ``j + k <= n``; the mean of the block's
    ensembles of the kind), since ensembles of overlapping seeds share runs. ``n_all`` and
    ``mean_all`` describe every run or ensemble of the kind, overlapping ones included, each
    distinct ensemble once (:func:`distinct_ensembles`).

    Args:
        ensembles: :func:`rq5_ensembles` output.
        baseline: the configuration to report on its own as ``baseline`` (e.g. ``"baseline"``).

    Returns:
        ``model, task, metric, kind, k, n`` (units), ``mean, std, ci_low, ci_high`` (points;
        NaN where there are no units, std and CI NaN with one unit), ``configuration`` (of a
        ``baseline``/``best single`` row, else None), ``n_all``, ``mean_all``; kinds in the order
        of :data:`SUMMARY_KINDS`, metrics in the task's order (primary first); these columns
        (:data:`SUMMARY_COLUMNS`) and no rows for ``ensembles`` with no rows.

    Raises:
        ParameterError (a ValueError): ``ensembles`` not a DataFrame or without a column of
            :func:`rq5_ensembles` (``pd.DataFrame()``: no runs); ``baseline`` not a
            configuration of any single run (the message lists them); as :func:`best_single`.
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
    """The RQ5 comparisons per model, task and metric, in points, with 95% CIs and p-values.

    Both are paired per cross-configuration ensemble, then tested over independent units:

    - ``cross-configuration − same-configuration``: each cross ensemble minus the mean of its
      ``k`` matched controls (same seeds, same size, each of its configurations alone;
      :func:`matched_ensembles`);
    - ``cross-configuration − best single``: each cross ensemble minus the mean of the best
      single configuration's runs at the ensemble's seeds (chosen on the evaluation data:
      optimistic for it); an ensemble with a seed lacking that run is left out.

    ``n_pairs`` and ``mean_all``: every such paired difference (overlapping seed sets, so
    dependent: descriptive only). The test uses the disjoint seed blocks (offsets ``0, k, 2k,
    ...`` with ``j + k <= n``, the planned partition; with ``start = p`` the offsets ``p, p + k,
    ...`` with ``j - p + k <= n``, the seeds cut into blocks from ``s_p`` on, wrapping round, a
    robustness check): one unit per block, the mean of its paired differences;
    ``n_units`` of them; ``difference`` is their mean with a Student-t 95% CI, ``p_value`` the
    two-sided paired t-test (:func:`dupbert.significance.paired_p_value`: NaN with fewer than 2
    units; zero spread decided as 1 or 0). No correction for multiple comparisons.

    Args:
        ensembles: :func:`rq5_ensembles` output (or a subset of its rows, e.g. one rotation).
        start: the first offset of the tested blocks, ``0 <= start < k``; 0 (the default) is the
            planned partition, the one the chapter's verdicts use.

    Returns:
        :data:`DIFFERENCE_COLUMNS`: ``model, task, metric, comparison, n_pairs, mean_all,
        n_units, difference, ci_low, ci_high, p_value, test`` (points; rows only for model and
        task with cross-configuration ensembles; none for ``ensembles`` with no rows).

    Raises:
        ParameterError (a ValueError): ``ensembles`` not a DataFrame or without a column of
            :func:`rq5_ensembles` (``pd.DataFrame()``: no runs); ``start`` not an integer
            ``>= 0``, or not below a model and task's ``k`` (``start must be below k = 2 of
            rxnfp-bert on uspto50k, got 2``); as :func:`best_single`.
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
    """Whether each cross ensemble (``offset``, ``k``, ``seeds``) is in a block of the partition
    that starts at offset ``start`` (:func:`rq5_differences`); ``n`` is the number of seeds the
    cross ensembles use."""
    k = int(cross["k"].max())
    if start >= k:
        raise ParameterError(f"start must be below k = {k} of {where}, got {start}")
    n = len({s for text in cross["seeds"] for s in str(text).split(" + ")})
    offset = cross["offset"].astype(int)
    return ((offset - start) % k == 0) & (offset >= start) & (offset - start + k <= n)


def _at_seeds(seeds: pd.Series, runs: pd.DataFrame) -> pd.Series:
    """The mean value of ``runs`` (one per seed) at each entry's seeds (``"0 + 1"``); NaN where
    a seed has no run."""
    by_seed = runs.set_index(runs["seed"].astype(int))["value"]
    return seeds.map(lambda text: by_seed.reindex([int(s) for s in text.split(" + ")]).mean(
        skipna=False))


def _paired_test(pairs: pd.DataFrame) -> dict:
    """``value - other`` per pair (rows with ``offset``, ``disjoint``), described over all pairs
    and tested over the disjoint seed blocks (:func:`rq5_differences`)."""
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
    ``n! / ((k!)^(n/k) (n/k)!)`` (105 for 8 seeds in pairs, 2,027,025 for 16); 0 when ``k``
    does not divide ``n_seeds``."""
    if n_seeds % k:
        return 0
    blocks = n_seeds // k
    return math.factorial(n_seeds) // (math.factorial(k) ** blocks * math.factorial(blocks))


def seed_partitions(seeds: Sequence[int], k: int) -> list[tuple[tuple[int, ...], ...]]:
    """Every partition of ``seeds`` into disjoint blocks of ``k`` seeds,
    :func:`count_partitions` of them (3 for 4 seeds and ``k = 2``, 105 for 8, 945 for 10; 10
    for 6 seeds and ``k = 3``). Each block is sorted, the blocks of a partition are ordered by
    their first seed, and the partitions come in lexicographic order: the first is the planned
    one of :func:`rq5_differences` (``s_0 s_1, s_2 s_3, ...``).

    Raises:
        ParameterError (a ValueError): ``seeds`` a string, empty, not integers or with a seed
            twice; ``k`` not an integer >= 1.
        ValueError: the number of seeds is not a multiple of ``k`` (``7 seeds cannot be cut
            into disjoint blocks of 2``).
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
    """How much RQ5's cross − same-configuration test depends on which seeds are paired into
    blocks: the difference of :func:`rq5_differences` on *every* partition of a model and
    task's seeds into disjoint blocks (:func:`seed_partitions`), not only the ``k`` cyclic ones
    that ``start`` gives. Exploratory (no verdict reads it).

    Per block (every ``k``-subset of the seeds), its unit is that of :func:`rq5_differences`:
    the pairs of :func:`matched_ensembles` on the block's seeds (every ``k``-subset of the
    configurations, every rotation) whose runs all exist, each cross-configuration ensemble
    minus the mean of its ``k`` same-configuration controls, averaged. Per partition: the mean
    of its ``n / k`` units with a Student-t 95% CI and the paired t-test's p
    (:func:`dupbert.significance.paired_p_value`). The partitions share blocks, so they are not
    independent samples: the share of them with a positive difference, or with p < 0.05,
    describes how much the planned result owes to its pairing; it is not a test. The task's
    primary metric only (:func:`dupbert.tasks.task_metrics`), in points.

    Args:
        runs: :func:`dupbert.ensemble.read_runs` rows of one setting per model and task (as
            :func:`rq5_ensembles`), with every run of the configurations combined
            (:func:`complete_configurations`).
        data_dir: overrides ``$DUPBERT_DATA_DIR`` (SQuAD 2.0: to re-derive the features).
        k: block and ensemble size, default :func:`ensemble_size` (as :func:`rq5_ensembles`).
        max_partitions: refuse a model and task with more partitions than this
            (:func:`count_partitions`; :data:`MAX_PARTITIONS`).

    Returns:
        :data:`PARTITION_COLUMNS`: ``model, task, metric, partition`` (0-based, the order of
        :func:`seed_partitions`: 0 is the planned one), ``blocks`` (``"0 + 1 | 2 + 3"``),
        ``n_units`` (``n / k``, at least 2), ``difference``, ``ci_low``, ``ci_high``,
        ``p_value`` (points). No rows for a model and task with fewer than ``k``
        configurations or seeds, with one partition only (``n = k``: it is
        :func:`rq5_differences`' own), or whose number of seeds is not a multiple of ``k``
        (:func:`rq5_differences` still tests its ``n // k`` blocks); a partition with a block
        none of whose pairs has all its runs is left out.

    Raises:
        OutputsNotFound, OutputsMismatch, OutputsInvalid: as :func:`dupbert.ensemble.evaluate_ensemble`;
            OutputsMismatch also for runs of several settings in one model and task, or two
            runs of one configuration and seed.
        ParameterError (a ValueError): ``runs`` not a DataFrame or without a column of
            ``run_key, model, task, duplication, seed``; ``k`` not an integer >= 2;
            ``max_partitions`` not an integer >= 1, or exceeded (the message gives the count);
            an unknown task (:func:`dupbert.tasks.task_metrics`).
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


# ----------------------------------------------------------------------------- the chapter
# What notebooks/rq5.ipynb shows: the runs it reads, and its tables and text (points).


def run_smoke_sweeps(sweeps: Sequence[Mapping]) -> tuple[Path, Path]:
    """Run the smoke profile's tiny RQ3 sweeps into a fresh temporary folder, on one torch
    thread (deterministic, and faster on small shared CPUs), with Trainer's log lines (which
    hold timings) captured.

    Args:
        sweeps: ``dupbert.profiles.sweep`` keyword arguments, one dict per sweep (without
            ``results_path``, ``outputs_dir``, ``progress``).

    Returns:
        ``(results_file, outputs_dir)``: ``<tmp>/rq3.jsonl`` and ``<tmp>/rq3-outputs``, for
        :func:`dupbert.ensemble.read_runs`. The folder is left for the caller.

    Raises:
        What ``dupbert.profiles.sweep`` raises for a bad argument.
    """
    import contextlib
    import io
    import tempfile

    import torch

    folder = Path(tempfile.mkdtemp(prefix="dupbert-rq5-"))
    results, outputs = folder / "rq3.jsonl", folder / "rq3-outputs"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            for arguments in sweeps:
                sweep(**arguments, results_path=results, outputs_dir=outputs, progress=False)
    finally:
        torch.set_num_threads(threads)
    return results, outputs


def study_files(results_paths: str | Sequence[str],
                outputs_dirs: str | Sequence[str | None] | None = None) -> list[tuple[str, Path, Path]]:
    """The results files of a study and their outputs folders, both from the repository root.

    Args:
        results_paths: one results file or a list, relative to the repository root.
        outputs_dirs: one outputs folder per results file; ``None`` (or a ``None`` entry):
            :func:`dupbert.ensemble.default_outputs_dir`, ``<results stem>-outputs`` beside it.

    Returns:
        ``[(given, results_file, outputs_folder), ...]`` in the order given: the path as given,
        then both as absolute paths.

    Raises:
        ValueError: not one outputs folder per results file.
    """
    paths = [results_paths] if isinstance(results_paths, str) else list(results_paths)
    folders = [None] * len(paths) if outputs_dirs is None else (
        [outputs_dirs] if isinstance(outputs_dirs, str) else list(outputs_dirs))
    return [(p, repository_path(p),
             default_outputs_dir(repository_path(p)) if f is None else repository_path(f))
            for p, f in zip(paths, folders, strict=True)]


def waiting_text(waiting: pd.DataFrame, model: str | None = None, task: str | None = None) -> str:
    """The configurations of :func:`complete_configurations`' ``waiting`` (of one model and task
    if given) as ``"copy last 3/8 seeds; ..."``; with neither given, prefixed with the model and
    task (``"MiniLM on snli: copy last (3/8 seeds)"``). ``""`` when none waits."""
    if model is None:
        return "; ".join(f"{r.model} on {r.task}: {r.configuration} ({r.seeds}/{r.planned} seeds)"
                         for r in waiting.itertuples())
    rows = waiting[(waiting["model"] == model) & (waiting["task"] == task)]
    return "; ".join(f"{r.configuration} {r.seeds}/{r.planned} seeds" for r in rows.itertuples())


def ensemble_counts(runs: pd.DataFrame, ensembles: pd.DataFrame) -> pd.DataFrame:
    """Per model and task (index): ``k``, seeds, configurations, evaluation examples, the number
    of distinct ensembles of each of :data:`KINDS` (``"<kind> (count)"``; a control shared by
    several pairs once) and of disjoint seed blocks. Integers, 0 where none.

    Args:
        runs: the :func:`dupbert.ensemble.read_runs` rows that were combined.
        ensembles: :func:`rq5_ensembles` of them.
    """
    groups = runs.groupby(["model", "task"], sort=False)
    counts = distinct_ensembles(ensembles).pivot_table(
        index=["model", "task"], columns="kind", values="k", aggfunc="size", sort=False
    ).reindex(columns=list(KINDS)).fillna(0).astype(int)
    cross = ensembles[ensembles["kind"] == "cross-configuration"]
    counts.insert(0, "k", cross.groupby(["model", "task"], sort=False)["k"].max())
    counts.insert(1, "seeds", groups["seed"].nunique())
    counts.insert(2, "configurations", groups["duplication"].nunique())
    counts.insert(3, "eval examples", groups["n_eval"].max())
    counts["disjoint seed blocks"] = (cross[cross["disjoint"].astype(bool)]
                                      .groupby(["model", "task"], sort=False)["offset"].nunique())
    counts.columns.name = None
    return counts.fillna(0).astype(int).rename(columns={k: f"{k} (count)" for k in KINDS})


def trivial_scores(runs: pd.DataFrame) -> dict[tuple[str, str, str], float]:
    """``{(model, task, metric): points}``: the trivial baseline (majority class; SQuAD 2.0 no
    answer to every question) of each model and task's evaluation set, the mean of the runs'
    ``baselines.<metric>``, for every metric of the task that the runs carry."""
    trivial = {}
    for (model, task), group in runs.groupby(["model", "task"], sort=False):
        for metric in task_metrics(task):
            column = f"baselines.{metric}"
            if column in group:
                trivial[model, task, metric] = float(in_points(metric, group[column].astype(float).mean()))
    return trivial


def floor_text(status: pd.DataFrame, model: str, task: str) -> str:
    """``"accuracy 28.91 vs floor 80: did not learn"``: a model and task's baseline mean against
    its learning floor (:func:`dupbert.paper.learning_status`), ``"no baseline runs"`` without."""
    cell = status[(status["model"] == model) & (status["task"] == task)]
    if cell.empty:
        return "no baseline runs"
    row = cell.iloc[0]
    text = f"{row['floor_metric']} {row['baseline_mean']:.2f} vs floor {row['floor']:g}"
    return text + ("" if row["learned"] else f": {DID_NOT_LEARN}")


def _summary_cell(row: Mapping) -> str:
    text = interval_text(row["mean"], row["ci_low"], row["ci_high"])
    if row["kind"] == "best single":
        return f"{text} ({row['configuration']})"
    if row["kind"].endswith("configuration"):
        return f"{text}; all {row['n_all']}: {row['mean_all']:.2f}"
    return text


def summary_table(summary: pd.DataFrame, trivial: Mapping, status: pd.DataFrame,
                  baseline: str = "baseline") -> pd.DataFrame:
    """RQ5's table of single models and ensembles: rows ``task, model, metric``; the trivial
    baseline, the baseline against its floor, then one column per kind of :func:`rq5_summary`
    (``"cross-configuration ensembles, k = 2"``): mean [95% CI] (points), the best single's
    configuration in brackets, the ensembles' count and mean over all of them after ``all``.

    Args:
        summary: :func:`rq5_summary`.
        trivial: :func:`trivial_scores`.
        status: ``dupbert.paper.learning_status`` of the runs.
        baseline: the configuration :func:`rq5_summary` reported as the baseline.
    """
    labels = {"single": "every single run", "baseline": f"{baseline} (single)",
              "best single": "best single configuration",
              "cross-configuration": "cross-configuration ensembles",
              "same-configuration": "same-configuration ensembles (control)"}
    cells = summary.assign(
        cell=[_summary_cell(row) for _, row in summary.iterrows()],
        column=[labels[k] + (f", k = {n}" if k.endswith("configuration") else "")
                for k, n in zip(summary["kind"], summary["k"])])
    table = cells.pivot_table(index=["task", "model", "metric"], columns="column", values="cell",
                              aggfunc="first", sort=False).fillna("")
    table.insert(0, "trivial", [f"{trivial.get((model, task, metric), np.nan):.2f}"
                                for task, model, metric in table.index])
    table.insert(1, "baseline vs floor", [floor_text(status, model, task) for task, model, _ in table.index])
    table.columns.name = None
    return table


def difference_table(differences: pd.DataFrame, status: pd.DataFrame) -> pd.DataFrame:
    """RQ5's comparisons table: rows ``task, model, metric``; the baseline against its floor,
    then per comparison of :func:`rq5_differences` its difference [95% CI] (points), p, and
    ``"<blocks> of <pairs> (all: <mean of every pair>)"``.

    Args:
        differences: :func:`rq5_differences`.
        status: ``dupbert.paper.learning_status`` of the runs.
    """
    shown = differences.assign(
        cell=[interval_text(d, lo, hi, signed=True) for d, lo, hi in
              zip(differences["difference"], differences["ci_low"], differences["ci_high"])],
        p=[("" if pd.isna(p) else f"{p:.3f}") for p in differences["p_value"]],
        units=[f"{row['n_units']} of {row['n_pairs']} (all: {row['mean_all']:+.2f})"
               for _, row in differences.iterrows()])
    table = shown.pivot_table(index=["task", "model", "metric"], columns="comparison",
                              values=["cell", "p", "units"], aggfunc="first", sort=False).fillna("")
    table = table.swaplevel(0, 1, axis=1).sort_index(axis=1, level=0, sort_remaining=False)
    names = {"cell": "difference [95% CI]", "p": "p", "units": "blocks tested of pairs"}
    table.columns = [f"{c}: {names[v]}" for c, v in table.columns]
    table.insert(0, "baseline vs floor", [floor_text(status, model, task) for task, model, _ in table.index])
    return table


_CROSS_VS_SAME = "cross-configuration − same-configuration"


def cyclic_partitions(ensembles: pd.DataFrame, metrics: Mapping[str, str]) -> pd.DataFrame:
    """The cross − same-configuration difference (:func:`rq5_differences`) of every model and
    task on ``metrics[task]``, on each of the ``k`` cyclic partitions of the seeds into blocks
    (``blocks from`` ``s0``, ``s1``, ...), with every rotation and with rotation 0 alone: columns
    ``task, model, assignment, blocks from, blocks, difference [95% CI]`` (points), ``p`` (``"(1
    df: descriptive)"`` appended below 3 blocks), ``all pairs`` (``"<n>: <mean>"``). Strings,
    in :func:`rq5_differences` order; no rows without cross-configuration ensembles.
    """
    cross = ensembles[ensembles["kind"] == "cross-configuration"]
    first = set(zip(cross.loc[cross["rotation"] == 0, "model"], cross.loc[cross["rotation"] == 0, "task"],
                    cross.loc[cross["rotation"] == 0, "pair"]))
    in_first = [kind == "single" or (m, t, p) in first
                for kind, m, t, p in zip(ensembles["kind"], ensembles["model"], ensembles["task"], ensembles["pair"])]
    rows = []
    for assignment, frame in (("every rotation", ensembles), ("rotation 0 only", ensembles[in_first])):
        for start in range(int(cross["k"].min())) if len(cross) else []:
            found = rq5_differences(frame, start=start)
            found = found[(found["comparison"] == _CROSS_VS_SAME)
                          & (found["metric"] == found["task"].map(metrics))]
            for row in found.itertuples():
                rows.append({"task": row.task, "model": row.model,
                             "assignment": assignment + (" (tested above)" if assignment == "every rotation"
                                                         and start == 0 else ""),
                             "blocks from": f"s{start}", "blocks": row.n_units,
                             "difference [95% CI]": interval_text(row.difference, row.ci_low, row.ci_high,
                                                                  signed=True),
                             "p": "" if pd.isna(row.p_value) else f"{row.p_value:.3f}"
                                  + (" (1 df: descriptive)" if row.n_units < 3 else ""),
                             "all pairs": f"{row.n_pairs}: {row.mean_all:+.2f}"})
    return pd.DataFrame(rows)


def partition_table(partitions: pd.DataFrame) -> pd.DataFrame:
    """:func:`cyclic_partitions` sorted by task and model (stable), indexed by ``task, model,
    assignment, blocks from``."""
    return partitions.sort_values(["task", "model"], kind="stable").set_index(
        ["task", "model", "assignment", "blocks from"])


def robustness_text(partitions: pd.DataFrame) -> str:
    """Per model and task of :func:`cyclic_partitions` (every rotation), a Markdown bullet: the
    range of the difference over the partitions, whether its sign holds, and in how many
    partitions of at least 3 blocks it is nominally significant."""
    lines = []
    balanced = partitions[partitions["assignment"].str.startswith("every rotation")]
    for (task, model), group in balanced.groupby(["task", "model"], sort=False):
        group = group[group["difference [95% CI]"] != ""]
        values = [float(text.split()[0]) for text in group["difference [95% CI]"]]
        if len(values) < 2:
            continue
        holds = all(v > 0 for v in values) or all(v < 0 for v in values)
        tested = [float(p) for p, blocks in zip(group["p"], group["blocks"]) if p and blocks >= 3]
        significant = (f" (nominally significant in {sum(p < 0.05 for p in tested)} of {len(tested)})"
                       if tested else " (too few blocks to test)")
        lines.append(f"- *{model} on {task}*: from {min(values):+.2f} to {max(values):+.2f} points over the "
                     f"{len(values)} partitions: " + ("the sign holds" if holds else "**the sign changes**, "
                                                      "so the difference is not one to rely on")
                     + significant + ".")
    return "\n".join(lines)


def every_partition_table(found: pd.DataFrame, status: pd.DataFrame) -> pd.DataFrame:
    """Per model and task (index ``task, model``) of :func:`rq5_partition_differences`: the
    baseline against its floor, the number of partitions and blocks each, the planned
    partition's difference, the range and median over all partitions (points), how many are
    positive and how many of those with at least 3 blocks have p < 0.05."""
    rows = []
    for (model, task), group in found.groupby(["model", "task"], sort=False):
        tested = group[group["n_units"] >= 3]
        planned = group[group["partition"] == 0]
        rows.append({
            "task": task, "model": model, "baseline vs floor": floor_text(status, model, task),
            "partitions": len(group),
            "blocks each": int(group["n_units"].iloc[0]),
            "planned (tested above)": "" if planned.empty else f"{planned['difference'].iloc[0]:+.2f}",
            "range": f"{group['difference'].min():+.2f} to {group['difference'].max():+.2f}",
            "median": f"{group['difference'].median():+.2f}",
            "positive": f"{(group['difference'] > 0).sum()} of {len(group)}",
            "nominal p < 0.05": (f"{(tested['p_value'] < 0.05).sum()} of {len(tested)}" if len(tested)
                                 else "too few blocks"),
        })
    return pd.DataFrame(rows).set_index(["task", "model"])


def unpartitioned_text(found: pd.DataFrame, differences: pd.DataFrame) -> str:
    """The models and tasks of :func:`rq5_differences` with no row in
    :func:`rq5_partition_differences` (seeds not a multiple of ``k``, or one partition only), as
    a Markdown sentence; ``""`` when every one was partitioned."""
    shown = set(zip(found["model"], found["task"]))
    left = [f"{m} on {t}" for m, t in dict.fromkeys(zip(differences["model"], differences["task"]))
            if (m, t) not in shown]
    if not left:
        return ""
    return "Not partitioned (seeds not a multiple of k, or one partition only): " + ", ".join(left) + "."


def paper_beside_table(summary: pd.DataFrame, ensembles: pd.DataFrame, trivial: Mapping) -> pd.DataFrame:
    """SQuAD 2.0 exact match and F1 (index ``source, model, what``): the paper's best ensemble
    (:data:`dupbert.paper.PAPER_SCORES`) and its best single model (not stated), then per model
    of ours the best single configuration, the cross- and same-configuration ensembles (means),
    the best cross-configuration ensemble (picked on the evaluation data) and the trivial
    no-answer baseline. Strings, two decimals.

    Args:
        summary: :func:`rq5_summary`.
        ensembles: :func:`rq5_ensembles`.
        trivial: :func:`trivial_scores`.
    """
    rows = []
    for model, group in summary[summary["task"] == "squad2"].groupby("model", sort=False):
        stats = group.set_index(["kind", "metric"])
        cross = ensembles[(ensembles["model"] == model) & (ensembles["task"] == "squad2")
                          & (ensembles["kind"] == "cross-configuration")]
        for what, kind in (("best single configuration (mean over seeds)", "best single"),
                           ("cross-configuration ensembles (mean over disjoint seed blocks)", "cross-configuration"),
                           ("same-configuration ensembles (mean over disjoint seed blocks)", "same-configuration")):
            if (kind, "f1") in stats.index:
                rows.append({"source": "ours", "model": model, "what": what,
                             "EM": f"{stats.loc[(kind, 'exact'), 'mean']:.2f}",
                             "F1": f"{stats.loc[(kind, 'f1'), 'mean']:.2f}"})
        if len(cross):
            top = cross.loc[cross["metrics.f1"].idxmax()]
            rows.append({"source": "ours", "model": model,
                         "what": f"best of our {len(cross)} cross-configuration ensembles ({top['members']}; "
                                 "picked on the evaluation data)",
                         "EM": f"{top['metrics.exact']:.2f}", "F1": f"{top['metrics.f1']:.2f}"})
        rows.append({"source": "ours", "model": model, "what": "no answer to every question (trivial)",
                     "EM": f"{trivial.get((model, 'squad2', 'exact'), np.nan):.2f}",
                     "F1": f"{trivial.get((model, 'squad2', 'f1'), np.nan):.2f}"})
    rows.insert(0, {"source": "paper", "model": "ALBERT-based", "what": "best ensemble of duplication configurations",
                    "EM": f"{PAPER_SCORES['rq5-ensemble-squad2-exact']:.2f}",
                    "F1": f"{PAPER_SCORES['rq5-ensemble-squad2-f1']:.2f}"})
    rows.insert(1, {"source": "paper", "model": "ALBERT-based", "what": "its best single model",
                    "EM": NOT_STATED, "F1": NOT_STATED})
    return pd.DataFrame(rows).set_index(["source", "model", "what"])


def _comparison_text(row: Mapping, name: str, pending: str) -> str:
    found = interval_text(row["difference"], row["ci_low"], row["ci_high"], signed=True)
    blocks = f"{row['n_units']} disjoint seed block{'s' if row['n_units'] != 1 else ''}"
    if pd.isna(row["p_value"]):
        return (f"against {name}: {found} points on {blocks} (no test: fewer than 2 blocks; all "
                f"{row['n_pairs']} pairs: {row['mean_all']:+.2f})")
    verdict = ("so far: more configurations are planned" if pending
               else "1 degree of freedom: descriptive only" if row["n_units"] < 3
               else "nominally significant, uncorrected" if row["p_value"] < 0.05 else "not significant")
    return f"against {name}: {found} points over {blocks} (p = {row['p_value']:.3f}, {verdict})"


def _partitions_text(found: pd.DataFrame, model: str, task: str) -> str:
    """The first comparison over every partition of the seeds (exploratory)."""
    cell = found[(found["model"] == model) & (found["task"] == task)]
    if len(cell) < 2:
        return ""
    tested = cell[cell["n_units"] >= 3]
    text = (f"; over all {len(cell)} partitions of the seeds into blocks it is positive in "
            f"{(cell['difference'] > 0).sum()}")
    return text + (f" and nominally significant in {(tested['p_value'] < 0.05).sum()}"
                   if len(tested) else "")


def findings_text(summary: pd.DataFrame, differences: pd.DataFrame, partitions: pd.DataFrame,
                  waiting: pd.DataFrame, status: pd.DataFrame, metrics: Mapping[str, str]) -> str:
    """RQ5's "what the numbers say", one Markdown bullet per model and task on ``metrics[task]``:
    below the floor, that its ensembles say nothing; else the cross-configuration ensembles
    against their same-configuration controls (with the share of positive partitions) and
    against the best single configuration, with p and how to read it, and the configurations
    still waiting for seeds. A closing bullet when no cell is informative.

    Args:
        summary: :func:`rq5_summary`; differences: :func:`rq5_differences`; partitions:
            :func:`rq5_partition_differences`; waiting: :func:`complete_configurations`' second
            frame; status: ``dupbert.paper.learning_status``.
    """
    lines = []
    for (model, task), group in summary.groupby(["model", "task"], sort=False):
        metric = metrics[task]
        head = f"- *{model} on {task}* ({metric}): "
        if not learned(status, model, task):
            lines.append(head + f"{floor_text(status, model, task)}; its ensembles say nothing about RQ5.")
            continue
        found = differences[(differences["model"] == model) & (differences["task"] == task)
                            & (differences["metric"] == metric)].set_index("comparison")
        if found.empty:
            lines.append(head + "too few seeds or configurations for ensembles.")
            continue
        pending = waiting_text(waiting, model, task)
        parts = [_comparison_text(found.loc[comparison], name, pending) for comparison, name in
                 ((_CROSS_VS_SAME, "same-configuration ensembles of the same seeds"),
                  ("cross-configuration − best single", "the best single configuration"))
                 if comparison in found.index]
        if parts and _CROSS_VS_SAME in found.index:
            parts[0] += _partitions_text(partitions, model, task)
        lines.append(head + "cross-configuration ensembles " + "; ".join(parts) + "."
                     + (f" Pending: {pending} (not yet combined)." if pending else ""))
    if all(DID_NOT_LEARN in line for line in lines):
        lines.append("- No cell is informative: RQ5 can be neither supported nor refuted with these runs. "
                     "The tables above check the pipeline (every run, ensemble and control is scored from "
                     "the stored outputs), not the claim.")
    return "\n".join(lines)


def comparability_text(summary: pd.DataFrame) -> str:
    """Why the paper's RQ5 score is not comparable with ours, and where its direction is checked."""
    squad = (summary["task"] == "squad2").any()
    return ("The paper's RQ5 number (85.50 EM / 88.59 F1) is an absolute score of full-scale ALBERT runs; it is "
            "**not comparable** with runs of this profile. What can be checked here is the direction of its claim, "
            "that summing the probabilities of differently duplicated models helps: "
            + ("see the SQuAD 2.0 rows above." if squad else "this profile has no SQuAD 2.0 runs."))
