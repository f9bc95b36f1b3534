"""RQ3 sweeps planned from the notebook's parameters, so that ``notebooks/rq3.ipynb``, the command
line (``dupbert finetune --profile notebooks/params/gpu/rq3.yaml --shard i/n``) and
``scripts/gpu_rq3.sh`` run the same runs under the same run keys (each resumes the others).
Planning only: :mod:`dupbert.sweeps` runs a plan, :mod:`dupbert.studies` reports on it.

Parameters (papermill YAML profiles ``notebooks/params/{cpu,gpu}/rq3.yaml``, or the notebook's
defaults): ``models`` (or ``model``), ``tasks``, ``duplications``, ``seeds``, the subset sizes
:data:`PER_TASK` and the hyper-parameters :data:`PER_MODEL_TASK` (each a value, ``None`` for the
run_glue/run_qa default, ``{task: value}`` or ``{task: {model: value}}``), ``device``,
``results_path``, ``outputs_dir``, ``run_missing`` (``False``: only read the runs already in
the results file) and ``profile``.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from collections.abc import Iterable
from typing import Any, Mapping, Sequence

from .checks import check_list, check_number, number_from_text as _numeric
from .duplicate import configuration_specs
from .errors import ConfigurationNotAvailable, DupbertError, ParameterError
from .finetune import HyperParameters, check_for_task, check_seed
from .params import NOTEBOOK_PARAMETERS
from .tasks import TASKS, UnknownTask, task_spec
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
