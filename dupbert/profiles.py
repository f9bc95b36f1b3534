"""RQ3 sweeps planned from the notebook's parameters, so that ``notebooks/rq3.ipynb``, the command
line (``dupbert finetune --profile notebooks/params/gpu/rq3.yaml --shard i/n``) and
``scripts/gpu_rq3.sh`` run the same runs under the same run keys (each resumes the others).

Parameters (papermill YAML profiles ``notebooks/params/{cpu,gpu}/rq3.yaml``, or the notebook's
defaults): ``models`` (or ``model``), ``tasks``, ``duplications``, ``seeds``, the subset sizes
:data:`PER_TASK` and the hyper-parameters :data:`PER_MODEL_TASK` (each a value, ``None`` for the
run_glue/run_qa default, ``{task: value}`` or ``{task: {model: value}}``), ``device``,
``results_path``, ``outputs_dir``, ``run_missing`` (``False``: only read the runs already in
the results file) and ``profile``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from collections.abc import Iterable
from typing import Any, Mapping, Sequence

import pandas as pd

from .checks import check_list, check_number, number_from_text as _numeric
from .duplicate import check_configurations, configuration_specs
from .errors import ConfigurationNotAvailable, DupbertError, ParameterError
from .finetune import (TASK_KINDS, TRAIN_SUBSET_SEED, HyperParameters, check_fields, check_folder,
                       check_for_task, check_name, check_seed, check_subset_size, finetune)
from .comparisons import confirmatory_test, overall, pending
from .params import NOTEBOOK_PARAMETERS
from .results import (ResultsFile, ResultsFileError, atomic_write_text, device_description,
                      is_main_process, repository_path, run_key, wait_for_main_process)
from .tasks import (TASKS, UnknownTask, data_source, empty_subset, in_points, task_metrics,
                    task_spec)
from .zoo import ZOO

SWEEP_PARAMETERS = tuple(NOTEBOOK_PARAMETERS["rq3"])
"""The keys an RQ3 parameter file may hold: the RQ3 notebook's parameters."""


@dataclasses.dataclass(frozen=True)
class PlannedSweep:
    """One model on one task: its configurations, subset sizes (None = all), hyper-parameter
    overrides (the same for all its configurations), its primary comparison (reference and the
    paper's configuration) and seeds."""

    model: str
    task: str
    duplications: tuple[str, ...]
    max_train_samples: int | None
    max_eval_samples: int | None
    overrides: tuple[tuple[str, float | int | bool], ...] = ()
    primary: tuple[str, ...] = ()
    seeds: tuple[int, ...] = (0,)

    @property
    def hyperparameters(self):
        """The ``dupbert.finetune.HyperParameters`` of every run of this sweep."""

        return HyperParameters.for_task(TASKS[self.task].kind, **dict(self.overrides))


def load_profile(path: str | os.PathLike) -> dict[str, Any]:
    """A papermill parameter file (YAML mapping) as a dict.

    Raises:
        FileNotFoundError: no such file.
        DupbertError: not YAML, not a mapping, or keys the RQ3 notebook does not take.
    """
    import yaml

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no parameter file {path}; profiles are notebooks/params/<profile>/rq3.yaml")
    try:
        parameters = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        said = " ".join(str(error).split())
        raise DupbertError(f"{path} is not valid YAML: {said}") from None
    if not isinstance(parameters, dict):
        raise DupbertError(f"{path} must hold a YAML mapping of parameter names to values")
    unknown = sorted(set(parameters) - set(SWEEP_PARAMETERS))
    if unknown:
        raise DupbertError(f"{path}: unknown parameters {unknown}; allowed: {list(SWEEP_PARAMETERS)}")
    return parameters


def names(value: str | Sequence | None, name: str = "names") -> list[str]:
    """A list of names from a list or a comma-separated string (``papermill -p tasks "a,b"``);
    ParameterError for anything else."""
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.strip("[]").split(",") if v.strip()]
    if isinstance(value, (Mapping, bytes)) or not isinstance(value, Iterable):
        raise ParameterError(f"{name} must be a list of names or a comma-separated string, got "
                             f"{value!r} ({type(value).__name__})")
    return [str(v) for v in value]


def seeds_list(value: str | int | Sequence) -> list[int]:
    """Seeds from a list, an int or a string such as ``"[0, 1, 2]"`` or ``"0,1,2"``.

    Raises:
        ValueError: an entry is not an integer, or there are none.
        ParameterError: a seed twice, or one ``dupbert.finetune.check_seed`` refuses.
    """

    items = [value] if isinstance(value, int) else names(value, "seeds")
    try:
        seeds = [int(s) for s in items]
    except ValueError:
        raise ValueError(f"seeds must be integers, got {value!r}") from None
    if not seeds:
        raise ValueError("seeds is empty; give at least one seed, e.g. [0, 1, 2]")
    for seed in check_list("seeds", seeds, what="seeds"):
        check_seed(seed, "each of seeds")
    return seeds


def profile_models(parameters: Mapping[str, Any]) -> list[str]:
    """``[model]`` if ``model`` is set, else ``models`` (ParameterError if malformed)."""
    return [parameters["model"]] if parameters.get("model") else names(parameters.get("models"),
                                                                       "models")


def restrict_models(parameters: Mapping[str, Any], models: Sequence[str]) -> dict[str, Any]:
    """The parameter set with only ``models`` (run keys unchanged; per-model values cut too), e.g.
    to run a profile's models on different machines.

    Raises:
        ValueError: a model the parameter set does not have.
        ParameterError: ``models`` not a list of distinct names.
    """
    models = check_list("models", models, what="model names")
    have = profile_models(parameters)
    missing = [m for m in models if m not in have]
    if missing:
        raise ValueError(f"models {missing} are not in this profile; it has {have}")
    tasks = parameters.get("tasks")
    if isinstance(tasks, Mapping):
        tasks = {m: t for m, t in tasks.items() if m in models}
    per_model = {name: _only_models(parameters[name], models)
                 for name in (*PER_TASK, *PER_MODEL_TASK) if name in parameters}
    return {**parameters, **per_model, "model": None, "models": [m for m in have if m in models],
            "tasks": tasks or None}


PER_TASK = ("max_train_samples", "max_eval_samples")
"""Subset sizes, given as a value, ``{task: value}`` or ``{task: {model: value}}``
(:func:`per_task`)."""

PER_MODEL_TASK = ("seeds", "epochs", "max_steps", "learning_rate", "batch_size", "group_by_length")
"""Parameters given as a value, ``{task: value}`` or ``{task: {model: value}}``
(:func:`per_model_task`)."""


def _only_models(value: Any, models: Sequence[str]) -> Any:
    """``value`` with the ``{model: ...}`` mappings inside ``{task: ...}`` cut to ``models``."""
    if not isinstance(value, Mapping):
        return value
    return {task: ({m: v for m, v in inner.items() if m in models}
                   if isinstance(inner, Mapping) else inner) for task, inner in value.items()}


def _default_tasks(model: str) -> list[str]:
    """USPTO-50k for the zoo's SMILES models, the paper's three tasks for every other model."""

    entry = ZOO.get(model)
    return ["uspto50k"] if entry is not None and entry.tokenizer == "smiles" else ["snli", "squad2", "sst2"]


def model_tasks(tasks: str | Sequence[str] | Mapping[str, Sequence[str]] | None, model: str) -> list[str]:
    """The tasks of ``model`` from a profile's ``tasks``: a list, ``{model: list}`` or ``None``
    (defaults: USPTO-50k for SMILES models, else the paper's three tasks)."""
    if isinstance(tasks, Mapping):
        tasks = tasks.get(model)
    return names(tasks, "tasks") or _default_tasks(model)


def per_task(value: int | None | Mapping[str, Any], task: str, name: str = "max_train_samples",
             model: str | None = None) -> int | None:
    """A subset size for ``model`` on ``task`` (:func:`per_model_task`; missing = all rows).
    ParameterError unless None or an integer >= 1."""
    size = per_model_task(value, model, task)
    if size is None:
        return None
    try:
        return check_number(f"{name} for {task}", _numeric(size), integer=True, minimum=1)
    except ParameterError:
        raise ParameterError(f"{name} for {task} must be None (all rows) or an integer >= 1, got "
                             f"{size!r}") from None


def per_model_task(value: Any, model: str, task: str) -> Any:
    """A parameter's value for ``model`` on ``task`` from a plain value, ``{task: value}`` or
    ``{task: {model: value}}`` (missing: ``None``, the default)."""
    if isinstance(value, Mapping):
        value = value.get(task)
    if isinstance(value, Mapping):
        value = value.get(model)
    return value


# Run order when `tasks` is not given: the paper's claims ordered by what a CPU-hour decides. SNLI
# (claimed +0.6) first; SST-2 (claimed no gain; short sentences, cheap); USPTO-50k (the method on
# the real pretrained reaction MLMs, the ALBERT form among them); SQuAD 2.0 (claimed +1.5 F1, but
# 384-token windows make it the dearest) last. A study cut short has the cheap decisions.
TASK_PRIORITY = ("snli", "sst2", "uspto50k", "squad2")


def plan_sweep(parameters: Mapping[str, Any]) -> tuple[list[PlannedSweep], list[str]]:
    """The (model, task) sweeps of an RQ3 parameter set, in run order: by task (``tasks`` if a list,
    else ``TASK_PRIORITY``), then models as given, each with the configurations it has.

    Returns:
        ``(plan, notes)``: notes name configurations skipped for a model that lacks them, and
        models named in ``tasks`` or per-model values but absent from ``models``.

    Raises:
        ValueError: no models, an unknown task (also as a ``{task: ...}`` key), or no
            ``duplications``.
        ParameterError: lists not distinct; a subset size, seed or hyper-parameter that cannot
            train (model and task named).
        ConfigurationNotAvailable: a model has none of the configurations asked for.
        ModelNotAvailable: a model that cannot be found.
    """

    models = check_list("models", profile_models(parameters), what="model names",
                        allow_empty=True)
    if not models:
        raise ValueError("no models: give `models` (a list) or `model` (one name)")
    _check_task_keys(parameters)
    duplications = parameters.get("duplications", ["baseline"])
    given = parameters.get("tasks")
    plan, notes = [], []
    strangers = [m for m in given if m not in models] if isinstance(given, Mapping) else []
    if strangers:  # said, not raised: `-p model X` on a profile that names others is fine
        notes.append(f"tasks names {', '.join(map(repr, strangers))}, not a model run here: "
                     f"ignored (the models are {', '.join(models)})")
    notes += _stranger_models(parameters, models)
    for model in models:
        specs = configuration_specs(model)
        available = list(specs)
        wanted = available if duplications == "all" else names(duplications, "duplications")
        if not wanted:
            raise ValueError("duplications is empty; give configuration names or 'all'")
        check_list("duplications", wanted, what="configuration names")
        chosen = tuple(d for d in wanted if d in available)
        skipped = [d for d in wanted if d not in available]
        if skipped:
            notes.append(f"{model}: skipping {', '.join(skipped)} (not a configuration of this model; "
                         f"it has {', '.join(available)})")
        if not chosen:
            raise ConfigurationNotAvailable(f"{model} has none of the configurations asked for ({', '.join(wanted)}); "
                             f"it has {', '.join(available)}: nothing would run")
        for task in check_list(f"tasks of {model}", model_tasks(parameters.get("tasks"), model),
                               what="task names"):
            task_spec(task)
            overrides = _hyperparameter_overrides(parameters, model, task)
            _check_overrides(model, task, overrides)
            primary = tuple(d for d in chosen if specs[d]["role"] in ("reference", "primary"))
            seeds = per_model_task(parameters.get("seeds", [0]), model, task)
            if seeds is None:
                raise ValueError(f"seeds gives no seeds for {model} on {task}: give a list, or "
                                 "{task: list} / {task: {model: list}} covering every model and task")
            seeds = seeds_list(seeds)
            plan.append(PlannedSweep(model, task, chosen,
                                     per_task(parameters.get("max_train_samples"), task,
                                              "max_train_samples", model),
                                     per_task(parameters.get("max_eval_samples"), task,
                                              "max_eval_samples", model),
                                     tuple(sorted(overrides.items())), primary, tuple(seeds)))
    order = (names(given) if not isinstance(given, Mapping) else []) or list(TASK_PRIORITY)
    plan.sort(key=lambda entry: order.index(entry.task) if entry.task in order else len(order))
    return plan, notes


def _check_task_keys(parameters: Mapping[str, Any]) -> None:
    """Raises UnknownTask for a ``{task: ...}`` key that is not a task (it would take defaults)."""

    for name in (*PER_TASK, *PER_MODEL_TASK):
        value = parameters.get(name)
        unknown = [str(task) for task in value if task not in TASKS] \
            if isinstance(value, Mapping) else []
        if unknown:
            raise UnknownTask(f"{name} names unknown task {unknown[0]!r}; the tasks are "
                              f"{', '.join(TASKS)}")


def _stranger_models(parameters: Mapping[str, Any], models: Sequence[str]) -> list[str]:
    """Notes for models that a ``{task: {model: value}}`` value names but ``models`` lacks."""
    notes = []
    for name in (*PER_TASK, *PER_MODEL_TASK):
        value = parameters.get(name)
        if not isinstance(value, Mapping):
            continue
        for task, inner in value.items():
            strangers = [m for m in inner if m not in models] if isinstance(inner, Mapping) else []
            if strangers:
                notes.append(f"{name} names {', '.join(map(repr, strangers))} for {task}, not a "
                             f"model run here: ignored (the models are {', '.join(models)})")
    return notes


def _check_overrides(model: str, task: str, overrides: Mapping[str, Any]) -> None:
    """Raises ParameterError, naming model and task, for hyper-parameters that could not train."""

    try:
        check_for_task(HyperParameters.for_task(TASKS[task].kind, **overrides), task)
    except ParameterError as error:
        raise ParameterError(f"{model} on {task}: {error}") from None


def _hyperparameter_overrides(parameters: Mapping[str, Any], model: str | None = None,
                             task: str | None = None) -> dict[str, float | int]:
    """The run_glue/run_qa overrides for ``model`` on ``task`` (:data:`PER_MODEL_TASK` but seeds;
    ``None`` = default). ParameterError for a non-number, a non-integer where one is needed, or a
    non-bool ``group_by_length``; ranges are checked later."""
    integers = {"epochs": False, "max_steps": True, "learning_rate": False, "batch_size": True}
    overrides = {}
    for name in (*integers, "group_by_length"):
        value = per_model_task(parameters.get(name), model, task)
        where = f"{name} for {task}" if task is not None else name
        if value is None:
            continue
        if name == "group_by_length":
            if not isinstance(value, bool):
                raise ParameterError(f"{where} must be True or False, got {value!r} "
                                     f"({type(value).__name__})")
            overrides[name] = value
        else:
            overrides[name] = check_number(where, _numeric(value), integer=integers[name])
    return overrides


def planned_seeds(plan: Sequence[PlannedSweep] | str | os.PathLike) -> dict[tuple[str, str], int]:
    """``{(model, task): number of seeds}`` of a plan or of its RQ3 profile file: the sizes at which
    ``dupbert.comparisons.comparison`` judges (before them: ``pending``).

    Raises:
        FileNotFoundError: no such profile; as :func:`plan_sweep`.
    """
    if isinstance(plan, (str, os.PathLike)):
        plan = plan_sweep(load_profile(plan))[0]
    return {(entry.model, entry.task): len(entry.seeds) for entry in plan}


def planned_family_sizes(plan: Sequence[PlannedSweep] | str | os.PathLike) -> dict[tuple[str, str], int]:
    """``{(model, task): m}``, the secondary comparisons of a plan or of its RQ3 profile file (every
    configuration but the baseline and the primary one): the Holm family size.

    Raises:
        FileNotFoundError: no such profile; as :func:`plan_sweep`.
    """
    if isinstance(plan, (str, os.PathLike)):
        plan = plan_sweep(load_profile(plan))[0]
    return {(entry.model, entry.task): sum(d != "baseline" and d not in entry.primary
                                           for d in entry.duplications)
            for entry in plan}


def planned_run_keys(plan: Sequence[PlannedSweep]) -> set[str]:
    """The ``run_key`` of every run of the plan."""

    source = data_source()
    keys = set()
    for entry in plan:
        hp = dataclasses.asdict(entry.hyperparameters)
        for duplication in entry.duplications:
            for seed in entry.seeds:
                keys.add(run_key(dict(model=entry.model, task=entry.task, duplication=duplication,
                                      seed=seed, hyperparameters=hp,
                                      max_train_samples=entry.max_train_samples,
                                      max_eval_samples=entry.max_eval_samples,
                                      train_subset_seed=TRAIN_SUBSET_SEED, data_source=source)))
    return keys


def run_order(plan: Sequence[PlannedSweep]) -> list[tuple[PlannedSweep, tuple[str, ...]]]:
    """The order in which a plan runs: every primary comparison first, then the secondaries (a study
    cut short has decided the pre-registered comparisons); within each, seeds in order, a seed's
    configurations together."""
    first = [(entry, entry.primary) for entry in plan if entry.primary]
    rest = [(entry, tuple(d for d in entry.duplications if d not in entry.primary))
            for entry in plan]
    return [(entry, duplications) for entry, duplications in [*first, *rest] if duplications]


def read_plan_rows(plan: Sequence[PlannedSweep], results_path: str | os.PathLike) -> pd.DataFrame:
    """This plan's rows of the results file (other runs left out)."""

    results = ResultsFile(results_path).frame()
    if results.empty:
        return results
    keys = planned_run_keys(plan)
    return results[results["run_key"].isin(keys)].reset_index(drop=True)


def confirmatory_study(path: str | os.PathLike) -> pd.DataFrame:
    """The confirmatory test that an RQ3 profile file pre-registers (e.g.
    ``notebooks/params/cpu/rq3-confirm.yaml``): its plan's rows of its ``results_path``, judged
    by ``dupbert.comparisons.confirmatory_test`` at its planned seeds; the configuration tested
    is the plan's one configuration besides the baseline.

    Raises:
        ParameterError: a profile without a ``results_path``, or that plans other than one
            configuration besides the baseline; as :func:`load_profile` and :func:`plan_sweep`.
    """
    parameters = load_profile(path)
    plan = plan_sweep(parameters)[0]
    configurations = sorted({name for entry in plan for name in entry.duplications})
    tested = [name for name in configurations if name != "baseline"]
    if len(tested) != 1 or not parameters.get("results_path") \
            or any("baseline" not in entry.duplications for entry in plan):
        raise ParameterError(f"{path} must plan the baseline and one configuration to test, and "
                             f"name a results_path; it plans {', '.join(configurations)} "
                             f"and results_path {parameters.get('results_path')!r}")
    rows = read_plan_rows(plan, repository_path(parameters["results_path"]))
    return confirmatory_test(rows, planned_seeds(plan), configuration=tested[0])


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
        plan: :func:`plan_sweep`'s plan.
        rows: the plan's runs (:func:`read_plan_rows`).
        table: ``dupbert.comparisons.comparison`` of ``rows`` with the plan's seeds and families
            (empty while nothing has landed).

    Returns:
        :data:`STUDY_SUMMARY_COLUMNS` in plan order: runs landed/planned (:func:`plan_progress`),
        the baseline mean and 95% CI and the trivial baseline (points), minutes per run, and the
        primary comparison as ``dupbert.comparisons.overall`` gives it (``pending (k/n seeds)``
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


def run_plan(plan: Sequence[PlannedSweep], results_path: str | os.PathLike, device: str = "cpu",
             outputs_dir: str | os.PathLike | None = None, shard: str | None = None,
             progress: bool = False) -> pd.DataFrame:
    """Run every planned sweep with :func:`sweep` in :func:`run_order` (resumable; rows appended as
    runs finish). ``shard="i/n"`` runs configurations ``i, i+n, ...`` of every (model, task).
    Returns this plan's rows (:func:`read_plan_rows`)."""

    for entry, duplications in run_order(plan):
        overrides = dict(entry.overrides)
        sweep([entry.model], [entry.task], list(duplications), list(entry.seeds), results_path,
              hyperparameters={TASKS[entry.task].kind: overrides},
              max_train_samples=entry.max_train_samples,
              max_eval_samples=entry.max_eval_samples, device=device, outputs_dir=outputs_dir,
              shard=shard, progress=progress)
    return read_plan_rows(plan, results_path)


PROFILE_NOTES = {
    "smoke": ("the notebook's own defaults: a few optimisation steps on tiny subsets, for "
              "`pytest --nbval`; these numbers test the code, not the paper"),
    "cpu": ("the `cpu` profile: for RQ3-RQ5 the pre-registered CPU study (real models and data, "
            "subsets and learning rates sized in pilots so that the baselines learn, 8 seeds, 4 for "
            "the dearest cell; SQuAD 2.0 left out after its pilots missed the floor): 128 runs, "
            "about 36 CPU-hours, all committed and re-read by the chapters; a model and task is "
            "judged only once all its planned seeds are in and its baseline reaches its floor"),
    "gpu": ("the `gpu` profile: the training sets available offline (SST-2 cut to 8,000), full "
            "evaluation sets, 5 seeds, run_glue/run_qa hyper-parameters, on one GPU"),
}


def profile_note(profile: str) -> str:
    """A Markdown sentence naming the profile behind a chapter's numbers."""
    note = PROFILE_NOTES.get(profile, f"the `{profile}` profile")
    return f"**These numbers come from {note}.**"


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
        UnknownTask: a task not in ``dupbert.tasks.TASKS``.
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
    results = ResultsFile(results_path)
    results.check_path()
    done = results.keys()
    source = data_source(data_dir)
    missing = []
    for configuration in sweep_configurations(models, tasks, duplications, seeds)[index::count]:
        hp = per_kind[TASKS[configuration["task"]].kind]
        key = run_key({**configuration, "hyperparameters": dataclasses.asdict(hp),
                       "max_train_samples": max_train_samples,
                       "max_eval_samples": max_eval_samples,
                       "train_subset_seed": TRAIN_SUBSET_SEED, "data_source": source})
        if key not in done:
            missing.append((configuration, hp))
    if not missing:  # all done: nothing is loaded or written (a read-only checkout, a Hub id
        return results.frame()  # that is not cached here: the finished runs still read)
    results.check_writable()
    check_folder("outputs_dir", outputs_dir)
    _check_models(list(dict.fromkeys(c["model"] for c, _ in missing)), duplications)
    for configuration, hp in missing:
        if progress and is_main_process():
            print(f"fine-tuning {configuration}", flush=True)
        row = finetune(configuration["model"], configuration["task"],
                       configuration["duplication"], configuration["seed"], hyperparameters=hp,
                       max_train_samples=max_train_samples, max_eval_samples=max_eval_samples,
                       device=device, data_dir=data_dir, outputs_dir=outputs_dir,
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
    hp = HyperParameters(**row["hyperparameters"])
    new = finetune(row["model"], row["task"], row["duplication"], int(row["seed"]),
                   hyperparameters=hp, max_train_samples=row.get("max_train_samples"),
                   max_eval_samples=row.get("max_eval_samples"), device=device,
                   data_dir=data_dir, progress=progress)
    if new["run_key"] != row["run_key"]:
        raise ValueError(f"re-running {row['run_key']} gave run key {new['run_key']}: the row's "
                         "fields do not identify the run it records")
    return new


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
