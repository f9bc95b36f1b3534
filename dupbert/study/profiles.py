"""RQ3 sweeps planned from the notebook's parameters, so that ``notebooks/rq3.ipynb``, the command
line (``dupbert finetune --profile notebooks/params/gpu/rq3.yaml --shard i/n``) and
``scripts/gpu_rq3.sh`` run the same runs under the same run keys (each resumes the others).
Planning only: :mod:`dupbert.study.sweeps` runs a plan, :mod:`dupbert.study.studies` reports on it.

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
from typing import Any, Mapping, Sequence

from ..core.checks import check_list
from ..tools.duplicate import configuration_specs
from ..core.errors import DupbertError
from ..training.hyperparameters import HyperParameters
from .params import (RQ3Parameters, declared, model_duplications, model_tasks, per_model_task,
                     profile_parameters, training_overrides)
from ..training.task_specs import TASK_PRIORITY
from ..training.tasks import TASKS, check_for_task

SWEEP_PARAMETERS = tuple(declared(RQ3Parameters))
"""The keys an RQ3 parameter file may hold: the RQ3 notebook's parameters."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlannedSweep:
    """One model on one task: its configurations, subset sizes (None = all), hyper-parameter
    overrides (the same for all its configurations; none: the run_glue/run_qa defaults), its
    primary comparison (reference and the paper's configuration) and seeds."""

    model: str
    task: str
    duplications: tuple[str, ...]
    max_train_samples: int | None
    max_eval_samples: int | None
    overrides: tuple[tuple[str, float | int | bool], ...] = ()
    primary: tuple[str, ...] = ()
    seeds: tuple[int, ...]

    @property
    def hyperparameters(self):
        """The ``dupbert.training.hyperparameters.HyperParameters`` of every run of this sweep."""

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


def read_profile(path: str | os.PathLike, *, device: str | None = None,
                 models: Sequence[str] | None = None) -> RQ3Parameters:
    """An RQ3 parameter file read and checked (:func:`load_profile`, then
    ``dupbert.study.params.profile_parameters``); ``models`` keeps only those (:func:`restrict_models`),
    ``device`` replaces the file's.

    Raises:
        as :func:`load_profile`, ``dupbert.study.params.RQ3Parameters`` and :func:`restrict_models`.
    """
    parameters = profile_parameters(load_profile(path), device=device)
    return restrict_models(parameters, models) if models else parameters


def restrict_models(parameters: RQ3Parameters, models: Sequence[str]) -> RQ3Parameters:
    """The parameters with only ``models`` (run keys unchanged; per-model values cut too, and the
    configurations to those some of ``models`` have), e.g. to run a profile's models on
    different machines.

    Raises:
        ValueError: a model the parameters do not have.
        ParameterError: ``models`` not a list of distinct names.
    """
    models = check_list("models", models, what="model names")
    missing = [m for m in models if m not in parameters.models]
    if missing:
        raise ValueError(f"models {missing} are not in this profile; it has {parameters.models}")
    tasks = parameters.tasks
    if isinstance(tasks, Mapping):
        tasks = {m: t for m, t in tasks.items() if m in models} or None
    per_model = {name: _only_models(getattr(parameters, name), models)
                 for name in (*PER_TASK, *PER_MODEL_TASK)}
    duplications = parameters.duplications
    if isinstance(duplications, Mapping):
        duplications = {m: names for m, names in duplications.items() if m in models} \
            or ["baseline"]
    elif duplications != "all":
        have = {name for model in models for name in configuration_specs(model)}
        duplications = [name for name in duplications if name in have]
    return dataclasses.replace(parameters, **per_model, model=None, tasks=tasks,
                               duplications=duplications,
                               models=[m for m in parameters.models if m in models])


PER_TASK = ("max_train_samples", "max_eval_samples")
"""Subset sizes, given as a value, ``{task: value}`` or ``{task: {model: value}}``."""

PER_MODEL_TASK = ("seeds", "epochs", "max_steps", "learning_rate", "batch_size", "group_by_length")
"""Parameters given as a value, ``{task: value}`` or ``{task: {model: value}}``
(``dupbert.study.params.per_model_task``)."""


def _only_models(value: Any, models: Sequence[str]) -> Any:
    """``value`` with the ``{model: ...}`` mappings inside ``{task: ...}`` cut to ``models``."""
    if not isinstance(value, Mapping):
        return value
    return {task: ({m: v for m, v in inner.items() if m in models}
                   if isinstance(inner, Mapping) else inner) for task, inner in value.items()}


def plan_sweep(parameters: RQ3Parameters) -> tuple[list[PlannedSweep], list[str]]:
    """The (model, task) sweeps of RQ3's parameters, in run order: by task (``tasks`` if a list,
    else ``TASK_PRIORITY``), then models as given, each with the configurations it has. The values
    were read and checked when ``parameters`` was made; what is checked here is what needs the
    model and task together.

    Returns:
        ``(plan, notes)``: notes name configurations skipped for a model that lacks them, and
        models named in ``tasks`` or per-model values but absent from ``models``.

    Raises:
        TypeError: ``parameters`` is not an ``RQ3Parameters`` (read a file with
            :func:`read_profile`, a mapping with ``dupbert.study.params.profile_parameters``).
        ValueError: ``seeds`` gives none for a model and task.
    """
    if not isinstance(parameters, RQ3Parameters):
        raise TypeError(f"plan_sweep takes dupbert.study.params.RQ3Parameters, got "
                        f"{type(parameters).__name__}: read a profile file with read_profile, a "
                        f"mapping with dupbert.study.params.profile_parameters")
    models, given = parameters.models, parameters.tasks
    plan, notes = [], []
    for name, value in (("tasks", given), ("duplications", parameters.duplications)):
        strangers = [m for m in value if m not in models] if isinstance(value, Mapping) else []
        if strangers:  # said, not raised: `-p model X` on a profile that names others is fine
            notes.append(f"{name} names {', '.join(map(repr, strangers))}, not a model run "
                         f"here: ignored (the models are {', '.join(models)})")
    notes += _stranger_models(parameters, models)
    for model in models:
        chosen, primary, skipped = _configurations(
            model, model_duplications(parameters.duplications, model))
        if skipped:
            notes.append(skipped)
        for task in model_tasks(given, model):
            overrides = training_overrides(parameters.values(), model, task)
            seeds = per_model_task(parameters.seeds, model, task)
            if seeds is None:
                raise ValueError(f"seeds gives no seeds for {model} on {task}: give a list, or "
                                 "{task: list} / {task: {model: list}} covering every model and task")
            plan.append(PlannedSweep(
                model=model, task=task, duplications=chosen,
                max_train_samples=per_model_task(parameters.max_train_samples, model, task),
                max_eval_samples=per_model_task(parameters.max_eval_samples, model, task),
                overrides=tuple(sorted(overrides.items())), primary=primary, seeds=tuple(seeds)))
            check_for_task(plan[-1].hyperparameters, task)  # the values together, once
    order = (given if not isinstance(given, Mapping) else None) or list(TASK_PRIORITY)
    plan.sort(key=lambda entry: order.index(entry.task) if entry.task in order else len(order))
    return plan, notes


def _configurations(model: str, duplications: str | Sequence[str]
                    ) -> tuple[tuple[str, ...], tuple[str, ...], str | None]:
    """``(chosen, primary, note)``: the configurations of ``duplications`` (or ``"all"``) that
    ``model`` has (at least one: ``RQ3Parameters`` checked it), those among them in its primary
    comparison, and a note naming those skipped."""
    specs = configuration_specs(model)
    available = list(specs)
    wanted = available if duplications == "all" else list(duplications)
    chosen = tuple(d for d in wanted if d in available)
    skipped = [d for d in wanted if d not in available]
    note = (f"{model}: skipping {', '.join(skipped)} (not a configuration of this model; it has "
            f"{', '.join(available)})") if skipped else None
    return chosen, tuple(d for d in chosen if specs[d]["role"] in ("reference", "primary")), note


def _stranger_models(parameters: RQ3Parameters, models: Sequence[str]) -> list[str]:
    """Notes for models that a ``{task: {model: value}}`` value names but ``models`` lacks."""
    notes = []
    for name in (*PER_TASK, *PER_MODEL_TASK):
        value = getattr(parameters, name)
        if not isinstance(value, Mapping):
            continue
        for task, inner in value.items():
            strangers = [m for m in inner if m not in models] if isinstance(inner, Mapping) else []
            if strangers:
                notes.append(f"{name} names {', '.join(map(repr, strangers))} for {task}, not a "
                             f"model run here: ignored (the models are {', '.join(models)})")
    return notes


def planned_seeds(plan: Sequence[PlannedSweep] | str | os.PathLike) -> dict[tuple[str, str], int]:
    """``{(model, task): number of seeds}`` of a plan or of its RQ3 profile file: the sizes at which
    ``dupbert.study.comparisons.comparison`` judges (before them: ``pending``).

    Raises:
        FileNotFoundError: no such profile; as :func:`read_profile` and :func:`plan_sweep`.
    """
    if isinstance(plan, (str, os.PathLike)):
        plan = plan_sweep(read_profile(plan, device="cpu"))[0]  # planning only
    return {(entry.model, entry.task): len(entry.seeds) for entry in plan}


def planned_family_sizes(plan: Sequence[PlannedSweep] | str | os.PathLike) -> dict[tuple[str, str], int]:
    """``{(model, task): m}``, the secondary comparisons of a plan or of its RQ3 profile file (every
    configuration but the baseline and the primary one): the Holm family size.

    Raises:
        FileNotFoundError: no such profile; as :func:`read_profile` and :func:`plan_sweep`.
    """
    if isinstance(plan, (str, os.PathLike)):
        plan = plan_sweep(read_profile(plan, device="cpu"))[0]  # planning only
    return {(entry.model, entry.task): sum(d != "baseline" and d not in entry.primary
                                           for d in entry.duplications)
            for entry in plan}
