"""Running RQ3 fine-tuning: a sweep of configurations into a results file (:func:`sweep`,
resumable, sharded), a planned study in its run order (:func:`run_plan`; the plan comes from
:func:`dupbert.study.profiles.plan_sweep`) and the rows it made (:func:`read_plan_rows`), shard files
merged (:func:`merge_results`), a committed run re-run (:func:`rerun`, :func:`rerun_table`), and
the smoke profile's tiny sweeps that RQ5 combines (:func:`run_smoke_sweeps`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from ..core.checks import check_list
from ..core.errors import ParameterError
from ..core.results import (ResultsFile, ResultsFileError, atomic_write_text, device_description,
                            is_main_process, wait_for_main_process)
from ..tools.duplicate import check_configurations
from ..training.finetuning import (TRAIN_SUBSET_SEED, RunSpec, check_folder, check_name,
                                   check_run_spec, check_seed, check_subset_size, run)
from ..training.hyperparameters import TASK_KINDS, HyperParameters, check_fields
from ..training.tasks import (TASKS, check_for_task, data_source, empty_subset, in_points,
                              task_metrics, task_spec)


def parse_shard(shard: str | tuple[int, int] | None) -> tuple[int, int]:
    """``"i/n"`` (0-based ``i``) or ``(i, n)`` -> ``(i, n)``; ``None`` -> ``(0, 1)``. ValueError
    unless ``0 <= i < n``."""
    if shard is None:
        return 0, 1
    try:
        index, count = (int(x) for x in (shard.split("/") if isinstance(shard, str) else shard))
    except (ValueError, TypeError):
        raise ValueError(f"shard must be 'i/n' with 0 <= i < n, got {shard!r}") from None
    if not 0 <= index < count:
        raise ValueError(f"shard must be 'i/n' with 0 <= i < n, got {shard!r}")
    return index, count


def sweep_configurations(models: Sequence[str], tasks: Sequence[str],
                         duplications: Sequence[str], seeds: Sequence[int]) -> list[dict]:
    """Every (task, model, seed, duplication), tasks in the order given, duplications innermost."""
    return [dict(model=m, task=t, duplication=d, seed=s)
            for t in tasks for m in models for s in seeds for d in duplications]


def sweep(
    models: Sequence[str],
    tasks: Sequence[str],
    duplications: Sequence[str],
    seeds: Sequence[int],
    results_path: str | os.PathLike,
    hyperparameters: dict[str, dict] | None = None,
    max_train_samples: int | None = None,
    max_eval_samples: int | None = None,
    device: str = "cpu",
    data_dir: str | os.PathLike | None = None,
    outputs_dir: str | os.PathLike | None = None,
    shard: str | tuple[int, int] | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Run ``finetune`` for every configuration of this shard that ``results_path`` lacks,
    appending each row as it finishes. Under ``torchrun``/``accelerate launch`` only rank 0
    appends.

    Args:
        hyperparameters: overrides per task kind, e.g. ``{"classification": {"epochs": 1}}``.
        shard: ``"i/n"``: only configurations ``i, i+n, ...``; shards on one machine may share
            ``results_path`` (appends are locked); on several, combine with :func:`merge_results`.

    Returns:
        The results file as a frame (all its rows).

    Raises:
        ParameterError: before training: lists not distinct, a bad seed, subset size,
            ``hyperparameters`` or ``outputs_dir``.
        UnknownTask: a task not in ``dupbert.training.tasks.TASKS``.
        ConfigurationNotAvailable, ModelNotAvailable: a model with runs to do that cannot be
            loaded or lacks a configuration.
        ResultsFileError: ``results_path`` unreadable, or not writable while runs remain (with
            every run done nothing is loaded or written).
        ValueError: a bad ``shard``.
    """

    models, tasks, duplications, seeds = _check_sweep_lists(models, tasks, duplications, seeds)
    per_kind = hyperparameters_per_kind(hyperparameters)
    for task in tasks:
        check_for_task(per_kind[TASKS[task].kind], task)
    check_subset_size("max_train_samples", max_train_samples)
    check_subset_size("max_eval_samples", max_eval_samples)
    check_folder("outputs_dir", outputs_dir, writable=False)
    index, count = parse_shard(shard)
    source = data_source(data_dir)
    runs = [RunSpec(c["model"], c["task"], c["duplication"], c["seed"],
                    per_kind[TASKS[c["task"]].kind], max_train_samples, max_eval_samples, source)
            for c in sweep_configurations(models, tasks, duplications, seeds)[index::count]]
    return _run_missing(runs, results_path, device=device, data_dir=data_dir,
                        outputs_dir=outputs_dir, progress=progress)


def _run_missing(runs: Sequence[RunSpec], results_path, device: str, data_dir, outputs_dir,
                 progress: bool) -> pd.DataFrame:
    """Run every one of ``runs`` (checked) whose key ``results_path`` lacks, appending each row as
    it finishes; with every run done nothing is loaded or written. Returns the results file's
    rows. Raises as :func:`sweep`."""
    results = ResultsFile(results_path)
    results.check_path()
    done = results.keys()
    missing = [spec for spec in runs if spec.key not in done]
    if not missing:  # all done: nothing is loaded or written (a read-only checkout, a Hub id
        return results.frame()  # that is not cached here: the finished runs still read)
    results.check_writable()
    check_folder("outputs_dir", outputs_dir)
    for model in dict.fromkeys(spec.model for spec in missing):  # each its own configurations
        _check_models([model], list(dict.fromkeys(spec.duplication for spec in missing
                                                  if spec.model == model)))
    for spec in missing:
        if progress and is_main_process():
            shown = {"model": spec.model, "task": spec.task, "duplication": spec.duplication,
                     "seed": spec.seed}
            print(f"fine-tuning {shown}", flush=True)
        row = run(spec, device=device, data_dir=data_dir, outputs_dir=outputs_dir,
                  progress=progress)
        if is_main_process():
            results.append(row)
        wait_for_main_process()
    return results.frame()


def _check_sweep_lists(models, tasks, duplications, seeds) -> tuple[list, list, list, list]:
    """The four lists of :func:`sweep`, checked."""

    models = check_list("models", models, what="model names")
    tasks = check_list("tasks", tasks, what="task names")
    duplications = check_list("duplications", duplications, what="configuration names")
    seeds = check_list("seeds", seeds, what="seeds")
    for name, items in (("models", models), ("duplications", duplications)):
        for item in items:
            check_name(f"each of {name}", item)
    for task in tasks:
        task_spec(task)
    for seed in seeds:
        check_seed(seed, "each of seeds")
    return models, tasks, duplications, seeds


def hyperparameters_per_kind(hyperparameters) -> dict[str, HyperParameters]:
    """``{task kind: HyperParameters}`` from overrides per task kind (``None``: defaults).

    Raises:
        ParameterError: not a mapping, an unknown task kind, or a bad field or value.
    """
    given = {} if hyperparameters is None else hyperparameters
    if not isinstance(given, Mapping):
        raise ParameterError(f"hyperparameters must be a mapping {{task kind: {{field: value}}}}, "
                             f"e.g. {{'classification': {{'epochs': 1}}}}, got {hyperparameters!r}")
    unknown = [kind for kind in given if kind not in TASK_KINDS]
    if unknown:
        raise ParameterError(f"hyperparameters names unknown task kind {unknown[0]!r}; kinds are "
                             f"{', '.join(map(repr, TASK_KINDS))}")
    per_kind = {}
    for kind in TASK_KINDS:
        overrides = given.get(kind) or {}
        if not isinstance(overrides, Mapping):
            raise ParameterError(f"hyperparameters[{kind!r}] must be a mapping {{field: value}}, "
                                 f"got {overrides!r}")
        check_fields(overrides, f"hyperparameters[{kind!r}]")
        per_kind[kind] = HyperParameters.for_task(kind, **overrides)
    return per_kind


def _check_models(models: Sequence[str], duplications: Sequence[str]) -> None:
    """Every model loads (its config) and has every configuration of ``duplications``."""

    check_configurations(models, duplications, strict=True)


# A planned study: the dupbert.study.profiles.PlannedSweep entries of dupbert.study.profiles.plan_sweep


def plan_runs(plan: Sequence, source: str | None = None) -> list[RunSpec]:
    """Every run of the plan, in :func:`run_order`, with the task data from ``source``
    (``"local"`` or ``"hub"``; None: where this machine reads them)."""

    source = source or data_source()
    return [RunSpec(entry.model, entry.task, duplication, seed, entry.hyperparameters,
                    entry.max_train_samples, entry.max_eval_samples, source)
            for entry, duplications in run_order(plan)
            for seed in entry.seeds for duplication in duplications]


def planned_run_keys(plan: Sequence, source: str | None = None) -> set[str]:
    """The key of every run of the plan (:func:`plan_runs`)."""

    return {spec.key for spec in plan_runs(plan, source)}


def run_order(plan: Sequence) -> list[tuple[object, tuple[str, ...]]]:
    """The order in which a plan runs: every primary comparison first, then the secondaries (a study
    cut short has decided the pre-registered comparisons); within each, seeds in order, a seed's
    configurations together."""
    first = [(entry, entry.primary) for entry in plan if entry.primary]
    rest = [(entry, tuple(d for d in entry.duplications if d not in entry.primary))
            for entry in plan]
    return [(entry, duplications) for entry, duplications in [*first, *rest] if duplications]


def run_plan(plan: Sequence, results_path: str | os.PathLike, device: str = "cpu",
             outputs_dir: str | os.PathLike | None = None, shard: str | None = None,
             progress: bool = False) -> pd.DataFrame:
    """Run every run of the plan (:func:`plan_runs`, checked when the plan was made) that the
    results file lacks, in :func:`run_order` (resumable; rows appended as runs finish).
    ``shard="i/n"`` runs runs ``i, i+n, ...`` of that order, so that ``n`` shards share the work
    evenly and no run twice. Returns this plan's rows (:func:`read_plan_rows`). Raises ValueError
    for a bad ``shard``, else as :func:`sweep`."""

    index, count = parse_shard(shard)
    check_folder("outputs_dir", outputs_dir, writable=False)
    _run_missing(plan_runs(plan)[index::count], results_path, device=device, data_dir=None,
                 outputs_dir=outputs_dir, progress=progress)
    return read_plan_rows(plan, results_path)


def read_plan_rows(plan: Sequence, results_path: str | os.PathLike) -> pd.DataFrame:
    """This plan's rows of the results file (other runs left out)."""

    results = ResultsFile(results_path).frame()
    if results.empty:
        return results
    keys = planned_run_keys(plan)
    return results[results["run_key"].isin(keys)].reset_index(drop=True)


def merge_results(paths: Sequence[str | os.PathLike], out: str | os.PathLike) -> pd.DataFrame:
    """Combine shard results files into ``out``: every row once (by ``run_key``), in the order of
    ``paths``; nothing is written unless every file reads.

    Raises:
        FileNotFoundError: a file of ``paths`` does not exist.
        ParameterError: ``paths`` a single path or empty.
        ResultsFileError: ``out`` is a directory; an input line is not a result row.
        ValueError: two files hold different rows under one ``run_key`` (beyond timings).
    """
    if isinstance(paths, (str, bytes, os.PathLike)) or not isinstance(paths, Iterable):
        raise ParameterError(f"paths must be a list of results files, got {paths!r}; write "
                             f"[{str(paths)!r}] for one")
    paths = list(paths)
    if not paths:
        raise ParameterError("paths is empty: give at least one results file to merge")
    missing = [str(path) for path in paths if not Path(path).exists()]
    if missing:
        raise FileNotFoundError(f"no results file {', '.join(missing)}; nothing was written")
    ResultsFile(out).check_writable()
    merged: dict[str, dict] = {}
    for path in paths:
        for key, row in ResultsFile(path).keyed_rows():
            if key in merged and _without_timings(merged[key]) != _without_timings(row):
                raise ValueError(f"run {key} differs between results files (beyond timings)")
            merged.setdefault(key, row)
    text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in merged.values())
    atomic_write_text(out, text)
    return ResultsFile(out).frame()


_TIMING_FIELDS = {"train_time_s", "eval_time_s", "finished_at"}


def _without_timings(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in _TIMING_FIELDS}


def rerun(row: dict, device: str = "cpu", data_dir: str | os.PathLike | None = None,
          progress: bool = False) -> dict:
    """Run again the run that a results ``row`` records; returns the new row (same ``run_key``).

    Raises:
        ValueError: a row of another design (``train_subset_seed``), or the re-run's key differs.
        ResultsFileError: ``row`` not a dict, or lacking a field a re-run needs.
        ParameterError: bad hyperparameters; as :func:`finetune`.
    """
    _check_rerunnable(row)
    if row.get("train_subset_seed") != TRAIN_SUBSET_SEED:
        raise ValueError(f"run {row.get('run_key')} drew its training subset with "
                         f"{row.get('train_subset_seed', 'its run seed')!r}, this version with "
                         f"{TRAIN_SUBSET_SEED}: it cannot be re-run here")
    check_fields(row["hyperparameters"], f"run {row['run_key']}: hyperparameters")
    spec = RunSpec(row["model"], row["task"], row["duplication"], int(row["seed"]),
                   HyperParameters(**row["hyperparameters"]), row.get("max_train_samples"),
                   row.get("max_eval_samples"), data_source(data_dir))
    check_run_spec(spec)
    if spec.key != row["run_key"]:
        raise ValueError(f"re-running {row['run_key']} would give run key {spec.key}: the row's "
                         "fields do not identify the run it records")
    return run(spec, device=device, data_dir=data_dir, progress=progress)


_RERUN_FIELDS = ("run_key", "model", "task", "duplication", "seed", "hyperparameters")


def _check_rerunnable(row) -> None:
    if not isinstance(row, Mapping):
        raise ResultsFileError(f"a row to re-run must be a dict (a results row), got "
                               f"{type(row).__name__}")
    missing = [field for field in _RERUN_FIELDS if field not in row]
    if missing:
        raise ResultsFileError(f"run {row.get('run_key', '(no run_key)')} lacks "
                               f"{', '.join(missing)}; a re-run needs {', '.join(_RERUN_FIELDS)}")
    if not isinstance(row["hyperparameters"], Mapping):
        raise ResultsFileError(f"run {row['run_key']}: hyperparameters must be a mapping of "
                               f"fields, got {row['hyperparameters']!r}")
    if not isinstance(row["task"], str) or row["task"] not in TASKS:
        raise ResultsFileError(f"run {row['run_key']} has task {row['task']!r}, not one of "
                               f"{', '.join(TASKS)}")


def _compared_metrics(row: Mapping) -> list[str]:
    """The metrics of ``row``'s task that its evaluation set defines (``empty_subset``)."""

    counts = pd.json_normalize([{field: row.get(field) for field in ("metrics", "baselines")
                                 if isinstance(row.get(field), Mapping)}])
    return [metric for metric in task_metrics(row["task"])
            if not empty_subset(counts, metric).iloc[0]]


def rerun_table(rows: Sequence[dict], device: str = "cpu",
                data_dir: str | os.PathLike | None = None, progress: bool = False) -> pd.DataFrame:
    """Re-run each row (:func:`rerun`) and set committed beside re-run metrics.

    Returns:
        One row per run and defined metric: ``run_key, model, task, duplication, seed, metric,
        committed, rerun, difference`` (points; rerun - committed), ``identical_losses`` (every
        step's loss equal to 5 digits), ``committed_on`` and ``rerun_on``
        (:func:`device_description`: CPU kinds differ in floating-point kernels).

    Raises:
        ResultsFileError: before any re-run, a row lacking a field or a metric of its task.
        As :func:`rerun`.
    """

    for row in rows:  # all rows first: a bad last row must not waste the re-runs before it
        _check_rerunnable(row)
        metrics = row.get("metrics")
        missing = [m for m in _compared_metrics(row)
                   if not isinstance(metrics, Mapping) or m not in metrics]
        if missing:
            raise ResultsFileError(f"run {row['run_key']} lacks metrics {', '.join(missing)}: "
                                   f"nothing to compare a re-run with")
    records = []
    for row in rows:
        new = rerun(row, device=device, data_dir=data_dir, progress=progress)
        for metric in _compared_metrics(row):
            committed = in_points(metric, float(row["metrics"][metric]))
            again = in_points(metric, float(new["metrics"][metric]))
            records.append({"run_key": row["run_key"], "model": row["model"], "task": row["task"],
                            "duplication": row["duplication"], "seed": row["seed"],
                            "metric": metric, "committed": round(committed, 4),
                            "rerun": round(again, 4), "difference": round(again - committed, 4),
                            "identical_losses": new["train_losses"] == row.get("train_losses"),
                            "committed_on": device_description(row),
                            "rerun_on": device_description(new)})
    return pd.DataFrame(records)


# The smoke profile of RQ5: tiny sweeps whose runs a notebook combines


def run_smoke_sweeps(sweeps: Sequence[Mapping]) -> tuple[Path, Path]:
    """Run the smoke profile's tiny RQ3 sweeps into a fresh temporary folder, on one torch thread,
    with Trainer's log lines captured.

    Args:
        sweeps: :func:`sweep` keyword arguments, one dict per sweep (without
            ``results_path``, ``outputs_dir``, ``progress``).

    Returns:
        ``(results_file, outputs_dir)``: ``<tmp>/rq3.jsonl`` and ``<tmp>/rq3-outputs``. The
        folder is left for the caller.

    Raises:
        What :func:`sweep` raises for a bad argument.
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
