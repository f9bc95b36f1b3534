"""The parameters of every chapter notebook, declared once: one frozen dataclass per chapter
(:data:`CHAPTERS`, e.g. :class:`RQ3Parameters`) whose fields carry type, default, bounds, forms
and help (a ``dupbert.study.forms.Parameter`` in each field's metadata; :mod:`dupbert.study.forms` reads each
kind of value). Constructing one reads every value in the forms papermill users type (``-p``,
``-y``, ``-f``), normalised or rejected with the forms to use, then checks the values together. Each notebook calls, in the cell after its parameters cell::

    from dupbert.study.params import notebook_parameters
    globals().update(notebook_parameters("rq2", globals()))

(RQ3 keeps the object, ``chapter_parameters("rq3", globals())``, and plans its runs from it).
``dupbert finetune`` reads ``--profile`` files (:func:`profile_parameters`) and its options,
``dupbert probe`` its options (:func:`option_parameters`), through the same declaration.
Importing this module imports neither torch nor transformers.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from ..core.errors import DeviceNotAvailable, DupbertError, ParameterError
from .forms import TASK_NAMES, FormError, Parameter, forms, option_keywords, read
from ..training.hyperparameters import SEED_MAXIMUM
from ..core.zoo import ZOO, check_model

__all__ = ["notebook_parameters", "chapter_parameters", "profile_parameters", "option_parameters",
           "CHAPTERS", "NOTEBOOK_PARAMETERS", "Parameter", "TASK_NAMES"]


def _corpus_check(spec: str) -> None:
    """A corpus name, a user's file or folder, or a ``hub:`` spec (``dupbert.core.data.read_texts``)."""
    from ..core.data import CorpusNotFound, UnknownCorpus, check_text_source

    try:
        check_text_source(spec)
    except (CorpusNotFound, UnknownCorpus) as error:
        raise ParameterError(str(error)) from None


def _task_check(names: list[str] | Mapping[str, list[str]]) -> None:
    if isinstance(names, Mapping):  # {model: tasks}
        names = [name for tasks in names.values() for name in tasks]
    unknown = [name for name in names if name not in TASK_NAMES]
    if unknown:
        raise ParameterError(f"unknown task{'s' if len(unknown) > 1 else ''} "
                             f"{', '.join(map(repr, unknown))}; tasks are {', '.join(TASK_NAMES)}")


def _translators_check(names: list[str]) -> None:
    from ..tools.translators import TRANSLATOR_FITS

    unknown = [name for name in names if name not in TRANSLATOR_FITS]
    if unknown:
        raise ParameterError(f"unknown translator{'s' if len(unknown) > 1 else ''} "
                             f"{', '.join(map(repr, unknown))}; the fitted translators are "
                             f"{', '.join(TRANSLATOR_FITS)}")


def _files_exist(paths: list[str]) -> None:
    from ..core.results import repository_path

    missing = [path for path in paths if not repository_path(path).is_file()]
    if missing:
        raise ParameterError(f"no file {', '.join(missing)} (paths are relative to the "
                             f"repository root, {repository_path('.').resolve()})")


def _not_zero_steps(value: Any) -> None:
    values = [value] if not isinstance(value, Mapping) else [
        v for inner in value.values()
        for v in (inner.values() if isinstance(inner, Mapping) else [inner])]
    if 0 in values:
        raise ParameterError("0 steps would save an untrained run: give -1 (train for the "
                             "epochs) or a number of steps >= 1")


def _declare(kind: str, default: Any = dataclasses.MISSING, **spec) -> Any:
    """A chapter parameter: a dataclass field whose ``metadata["parameter"]`` says how it is read.
    ``default`` is the value a ``--profile`` file or the command line may leave out (none: the
    parameter is required); lists and mappings are copied for every instance."""
    metadata = {"parameter": Parameter(kind, **spec)}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: copy.deepcopy(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)



# Shared forms, completed per chapter by _declare's keywords
_POSITIVE = dict(kind="int", minimum=1)
_SEED = dict(kind="int", minimum=0, maximum=SEED_MAXIMUM)
_MAX_LENGTH = dict(kind="int", minimum=3)
_OPTIONAL_STR = dict(kind="str", none=True)
_CORPUS = dict(kind="str", none=True, check=_corpus_check)
# an RQ3 parameter file that must exist: the pre-registered study whose runs a chapter reads (its
# planned seeds per model and task; verdicts wait for them), or a confirmatory test it reports
_PROFILE_FILE = dict(kind="str", none=True, check=lambda path: _files_exist([path]))
_PROFILE_FILES = dict(kind="names", none=True, check=_files_exist)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ChapterParameters:
    """The parameters of one chapter notebook, typed and read once: constructing an instance reads
    every field in the forms papermill users type (:func:`notebook_parameters`), checks it against
    its declaration (``dataclasses.fields(cls)[i].metadata["parameter"]``, a :class:`Parameter`),
    then checks the fields together (the models exist, with their MLM head for RQ1 and RQ2; RQ3's
    configurations; ``model``, when set, replaces ``models``).

    Raises:
        ParameterError: every bad field in one message, with the forms that work.
        DeviceNotAvailable, ModelNotAvailable, MLMHeadMissing, ConfigurationNotAvailable: from the
            checks of the fields together, once every field reads.
    """

    notebook: ClassVar[str] = ""

    def __post_init__(self):
        used = _read_values(declared(type(self)), self.values())
        _check_together(self.notebook, used)
        for name, value in used.items():
            object.__setattr__(self, name, value)

    def values(self) -> dict[str, Any]:
        """``{name: value}`` of every field, in the order of the notebook's parameters cell."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}


@dataclasses.dataclass(frozen=True, kw_only=True)
class RQ1Parameters(ChapterParameters):
    """RQ1, reconstruction from every hidden state through the MLM head (``notebooks/rq1.ipynb``,
    ``dupbert probe``: the fields with an ``option``)."""

    notebook: ClassVar[str] = "rq1"
    models: list[str] = _declare("names", option="--model",
                                 help="zoo name, local folder or Hub id; repeat for several models "
                                      "(required)")
    model: str | None = _declare(**_OPTIONAL_STR, default=None)
    corpus: str | None = _declare(
        **_CORPUS, default=None, option="--corpus",
        help="a corpus name, a text file (one sequence per line; .gz too), a .csv/.tsv/.jsonl/"
             ".parquet file, a datasets save_to_disk folder, or hub:NAME[:CONFIG]:SPLIT (default: "
             "each model's own domain corpus)")
    n_sequences: int = _declare(**_POSITIVE, default=500, option="--n-sequences",
                                help="sequences per model (default: 500)")
    batch_size: int = _declare(**_POSITIVE, default=32, option="--batch-size", help="default: 32")
    device: str = _declare("device", default="cpu", option="--device",
                           help="cpu, cuda, cuda:1, ... (default: cpu)")
    seed: int = _declare(**_SEED, default=0, option="--seed",
                         help="seed of the random-init control (default: 0)")
    max_length: int = _declare(**_MAX_LENGTH, default=512, option="--max-length",
                               help="tokens per sequence, special tokens included (default: 512)")
    duplications: str | dict[str, list[int]] | None = _declare("orders", none=True,
                                                               choices=("standard",))
    n_sequences_duplicated: int = _declare(**_POSITIVE)
    n_sequences_masked: int = _declare(**_POSITIVE)
    masking: str = _declare("str", choices=("mask", "80-10-10"))
    mask_rate: float = _declare("float", above=0.0, maximum=1.0)
    lens_positions: int = _declare(**_POSITIVE)
    n_fit_sequences: int = _declare(**_POSITIVE)
    translators: list[str] = _declare("names", default=["linear"], check=_translators_check)
    tables_dir: str | None = _declare(**_OPTIONAL_STR)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RQ2Parameters(ChapterParameters):
    """RQ2, the similarity of the hidden states' distributions (``notebooks/rq2.ipynb``)."""

    notebook: ClassVar[str] = "rq2"
    models: list[str] = _declare("names")
    model: str | None = _declare(**_OPTIONAL_STR, default=None)
    corpus: str | None = _declare(**_CORPUS, default=None)
    n_sequences: int = _declare(**_POSITIVE)
    max_tokens: int = _declare("int", minimum=2)
    batch_size: int = _declare(**_POSITIVE)
    device: str = _declare("device", default="cpu")
    seed: int = _declare(**_SEED, default=0)
    max_length: int = _declare(**_MAX_LENGTH)
    duplications: str | dict[str, list[int]] | None = _declare(
        "orders", none=True, choices=("paper", "standard"))
    reconstruction: str | None = _declare("str", none=True, choices=("sample", "probe"))
    tables_dir: str | None = _declare(**_OPTIONAL_STR)


# per (model, task) values: a value, {task: value} or {task: {model: value}}
_PER_MODEL_TASK = dict(kind="per_model_task", none=True)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RQ3Parameters(ChapterParameters):
    """RQ3, fine-tuning duplicated models (``notebooks/rq3.ipynb``, ``dupbert finetune``, the
    ``--profile`` files ``notebooks/params/*/rq3*.yaml``); ``dupbert.study.profiles.plan_sweep`` plans
    its runs. The subset sizes and hyper-parameters are a value, ``{task: value}`` or
    ``{task: {model: value}}``; ``None`` is all rows, or the run_glue/run_qa default."""

    notebook: ClassVar[str] = "rq3"
    models: list[str] = _declare("names", option="--model",
                                 help="zoo name, local folder or Hub id; repeat for several models")
    model: str | None = _declare(**_OPTIONAL_STR, default=None)
    tasks: list[str] | dict[str, list[str]] | None = _declare(
        "names_per_model", default=None, none=True, check=_task_check, option="--task",
        help="sst2, snli, squad2 or uspto50k; repeat for several tasks")
    # a list (or "all") for every model, or {model: list}; a model the mapping leaves out: baseline
    duplications: str | list[str] | dict[str, list[str]] = _declare(
        "names_per_model", default=["baseline"], choices=("all",), option="--duplication",
        help="configuration name, e.g. baseline, 'copy first 3', 'depth control'; repeat for "
             "several (default: baseline)")
    seeds: list[int] | dict = _declare("ints_per_model_task", default=[0], minimum=0,
                                       maximum=SEED_MAXIMUM, option="--seed",
                                       help="repeat for several (default: 0)")
    max_train_samples: int | dict | None = _declare(
        "per_task_int", default=None, none=True, minimum=1, option="--max-train-samples",
        help="stratified fixed-seed training subset (default: all)")
    max_eval_samples: int | dict | None = _declare(
        "per_task_int", default=None, none=True, minimum=1, option="--max-eval-samples",
        help="stratified evaluation subset, the same for every run (default: all)")
    # 0 epochs is refused by HyperParameters unless max_steps >= 1 trains instead
    epochs: float | dict | None = _declare(**_PER_MODEL_TASK, default=None, cast=float, minimum=0,
                                           option="--epochs",
                                           help="default: 3 (classification), 2 (SQuAD)")
    max_steps: int | dict | None = _declare(
        **_PER_MODEL_TASK, default=None, cast=int, minimum=-1, check=_not_zero_steps,
        option="--max-steps", help="optimisation steps; overrides --epochs (default: -1, use "
                                   "epochs)")
    learning_rate: float | dict | None = _declare(
        **_PER_MODEL_TASK, default=None, cast=float, above=0, option="--learning-rate",
        help="default: 2e-5 (classification), 3e-5 (SQuAD)")
    batch_size: int | dict | None = _declare(
        **_PER_MODEL_TASK, default=None, cast=int, minimum=1, option="--batch-size",
        help="global batch size (default: 32 classification, 12 SQuAD)")
    group_by_length: bool | dict | None = _declare(
        **_PER_MODEL_TASK, default=None, cast=bool, option="--group-by-length",
        help="Trainer's length-grouped batches (default: off, as run_glue.py)")
    device: str = _declare("device", default="cpu", option="--device",
                           help="cpu, cuda, cuda:1, ... (default: the profile's, else cpu)")
    results_path: str | None = _declare(
        **_OPTIONAL_STR, default=None, option="--results",
        help="JSON-lines results file; runs already in it are skipped (with --profile, default: "
             "the profile's results_path)")
    outputs_dir: str | None = _declare(
        **_OPTIONAL_STR, default=None, option="--outputs-dir",
        help="save per-example outputs (for RQ5 ensembles) here (with --profile, default: the "
             "profile's outputs_dir)")
    run_missing: bool = _declare("bool", default=True)
    profile: str = _declare("str", default="smoke")
    confirm_profile: str | None = _declare(**_PROFILE_FILE, default=None)
    decisive_profiles: list[str] | None = _declare(**_PROFILE_FILES, default=None)
    growth_profile: str | None = _declare(**_PROFILE_FILE, default=None)
    paired_model: str | None = _declare(**_OPTIONAL_STR, default=None)
    paired_profiles: list[str] | None = _declare(**_PROFILE_FILES, default=None)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RQ4Parameters(ChapterParameters):
    """RQ4, consistency across models and tasks (``notebooks/rq4.ipynb``)."""

    notebook: ClassVar[str] = "rq4"
    results_paths: list[str] = _declare("names", check=_files_exist)
    baseline: str = _declare("str", default="baseline")
    study_profiles: list[str] | None = _declare(**_PROFILE_FILES, default=None)
    pilot_paths: list[str] | None = _declare(**_PROFILE_FILES, default=None)
    profile: str = _declare("str")
    decisive_profiles: list[str] | None = _declare(**_PROFILE_FILES, default=None)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RQ5Parameters(ChapterParameters):
    """RQ5, ensembles of the fine-tuned runs (``notebooks/rq5.ipynb``)."""

    notebook: ClassVar[str] = "rq5"
    results_paths: list[str] | None = _declare("names", none=True, check=_files_exist)
    outputs_dirs: list[str] | None = _declare("names", none=True)
    baseline: str = _declare("str", default="baseline")
    ensemble_size: int | None = _declare("int", none=True, minimum=1)
    study_profile: str | None = _declare(**_PROFILE_FILE, default=None)
    smoke_sweeps: list[dict] = _declare("mappings")
    tables_dir: str | None = _declare(**_OPTIONAL_STR)
    profile: str = _declare("str")


@dataclasses.dataclass(frozen=True, kw_only=True)
class EmergenceParameters(ChapterParameters):
    """The emergence record of the pretraining runs (``notebooks/emergence.ipynb``)."""

    notebook: ClassVar[str] = "emergence"
    tables_dir: str = _declare("str")
    models: list[str] = _declare("names")
    threshold: float = _declare("float", above=0.0, maximum=1.0)
    past_plateau_models: list[str] = _declare("names", default=[])
    reaction_models: list[str] | None = _declare("names", none=True, default=None)
    predicting_multiple: float = _declare("float", default=2.0, above=1.0, maximum=10.0)


@dataclasses.dataclass(frozen=True, kw_only=True)
class GlanceParameters(ChapterParameters):
    """The results at a glance (``notebooks/glance.ipynb``)."""

    notebook: ClassVar[str] = "glance"
    tables_dir: str = _declare("str")
    results_paths: list[str] = _declare("names")
    study_profiles: list[str] | None = _declare(**_PROFILE_FILES, default=None)
    pilot_paths: list[str] | None = _declare(**_PROFILE_FILES, default=None)
    profile: str = _declare("str")
    confirm_profile: str | None = _declare(**_PROFILE_FILE, default=None)
    decisive_profiles: list[str] | None = _declare(**_PROFILE_FILES, default=None)
    two_way_study: str | None = _declare(**_PROFILE_FILE, default=None)
    two_way_tests: list[str] | None = _declare(**_PROFILE_FILES, default=None)
    growth_profile: str | None = _declare(**_PROFILE_FILE, default=None)


CHAPTERS: dict[str, type[ChapterParameters]] = {
    cls.notebook: cls for cls in (RQ1Parameters, RQ2Parameters, RQ3Parameters, RQ4Parameters,
                                  RQ5Parameters, EmergenceParameters, GlanceParameters)}
"""The parameter class of each chapter notebook (``notebooks/<name>.ipynb``)."""


def declared(chapter: str | type[ChapterParameters]) -> dict[str, Parameter]:
    """``{name: Parameter}`` of a chapter's fields, in their order (how each is read)."""
    cls = CHAPTERS[chapter] if isinstance(chapter, str) else chapter
    return {field.name: field.metadata["parameter"] for field in dataclasses.fields(cls)}


def default(chapter: str | type[ChapterParameters], name: str) -> Any:
    """The value of ``name`` when a ``--profile`` file or the command line leaves it out; raises
    ParameterError if the parameter has none (it is required)."""
    cls = CHAPTERS[chapter] if isinstance(chapter, str) else chapter
    field = next(field for field in dataclasses.fields(cls) if field.name == name)
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    if field.default is dataclasses.MISSING:
        raise ParameterError(f"{field.metadata['parameter'].option or name} is required")
    return field.default


NOTEBOOK_PARAMETERS: dict[str, dict[str, Parameter]] = {name: declared(cls)
                                                        for name, cls in CHAPTERS.items()}
"""``{notebook: {name: Parameter}}``: a view of :data:`CHAPTERS`' declarations."""


# Which notebooks load models with their MLM head (RQ1, RQ2) or any encoder (RQ3).
_MODEL_NOTEBOOKS = {"rq1": True, "rq2": True, "rq3": False}


def _read_values(spec: Mapping[str, Parameter], values: Mapping[str, Any]) -> dict[str, Any]:
    """Every value of ``spec`` read and checked on its own; ParameterError lists every bad one."""
    __tracebackhide__ = True  # IPython: the message, not this frame
    used, problems = {}, []
    for name, parameter in spec.items():
        try:
            used[name] = read(values[name], parameter)
            if parameter.check is not None and used[name] is not None:
                parameter.check(used[name])
        except FormError as error:  # the form: say which forms work
            problems.append(f"  {name} = {values[name]!r}: {error}. Forms that work: "
                            f"{forms(name, parameter)}")
        except (ParameterError, DeviceNotAvailable) as error:  # the value: the message says
            problems.append(f"  {name} = {values[name]!r}: {error}")
    if problems:
        raise ParameterError(f"{len(problems)} parameter{'s' if len(problems) > 1 else ''} "
                             f"cannot be used:\n" + "\n".join(problems))
    return used


def _check_together(notebook: str, used: dict[str, Any]) -> None:
    """The checks of a chapter's values together (``used`` is updated: ``model`` replaces
    ``models``)."""
    __tracebackhide__ = True
    if "models" in used and used.get("model"):
        used["models"] = [used["model"]]
    if notebook == "rq3":  # before the models: these need nothing loaded
        _check_training(used)
    if "models" in used:
        for model in used["models"]:
            check_model(model, mlm_head=_MODEL_NOTEBOOKS.get(notebook, False))
    if notebook == "rq5" and used["outputs_dirs"] is not None \
            and used["results_paths"] is not None \
            and len(used["outputs_dirs"]) != len(used["results_paths"]):
        raise ParameterError(
            f"outputs_dirs = {used['outputs_dirs']!r} names {len(used['outputs_dirs'])} "
            f"folders for {len(used['results_paths'])} results files: give one per file, or None")
    if notebook == "rq3":
        from ..tools.duplicate import check_configurations  # imports torch: only for RQ3

        if isinstance(used["duplications"], Mapping):  # each model its own
            for model in used["models"]:
                check_configurations([model], model_duplications(used["duplications"], model))
        else:
            check_configurations(used["models"], used["duplications"])


def per_model_task(value: Any, model: str, task: str) -> Any:
    """An RQ3 value for ``model`` on ``task`` from a plain value, ``{task: value}`` or
    ``{task: {model: value}}`` (missing: ``None``, the default)."""
    if isinstance(value, Mapping):
        value = value.get(task)
    if isinstance(value, Mapping):
        value = value.get(model)
    return value


def model_tasks(tasks: Sequence[str] | Mapping[str, Sequence[str]] | None, model: str) -> list[str]:
    """The tasks of ``model`` from RQ3's ``tasks``: a list, ``{model: list}`` or ``None`` (the
    defaults: USPTO-50k for the zoo's SMILES models, the paper's three tasks for the others)."""
    if isinstance(tasks, Mapping):
        tasks = tasks.get(model)
    if tasks:
        return list(tasks)
    entry = ZOO.get(model)
    return ["uspto50k"] if entry is not None and entry.tokenizer == "smiles" \
        else ["snli", "squad2", "sst2"]


def model_duplications(duplications: str | Sequence[str] | Mapping[str, Sequence[str]],
                       model: str) -> str | list[str]:
    """The configurations of ``model`` from RQ3's ``duplications``: a list or ``"all"`` for every
    model, or ``{model: list}`` (a model it leaves out: ``["baseline"]``)."""
    if isinstance(duplications, Mapping):
        return list(duplications.get(model, ["baseline"]))
    return duplications


# the run_glue/run_qa hyper-parameters RQ3's parameters may override, per model and task
TRAINING = ("epochs", "max_steps", "learning_rate", "batch_size", "group_by_length")


def training_overrides(values: Mapping[str, Any], model: str, task: str) -> dict[str, Any]:
    """``{name: value}`` of the :data:`TRAINING` hyper-parameters that RQ3's (read) ``values`` set
    for ``model`` on ``task``; the others keep the run_glue/run_qa defaults."""
    return {name: value for name in TRAINING
            if (value := per_model_task(values[name], model, task)) is not None}


def _check_training(used: Mapping[str, Any]) -> None:
    """ParameterError, naming model and task, for RQ3 hyper-parameters that could not train one
    of the planned (model, task) pairs (e.g. 0 epochs with no steps). Loads nothing."""
    from ..training.hyperparameters import HyperParameters
    from ..training.tasks import TASKS  # imports datasets: only for RQ3

    for model in used["models"]:
        for task in model_tasks(used["tasks"], model):
            try:
                HyperParameters.for_task(TASKS[task].kind, **training_overrides(used, model, task))
            except ParameterError as error:
                raise ParameterError(f"{model} on {task}: {error}") from None


def _compact(value: Any, nested: bool = False) -> str:
    """A parameter value as the parameters table writes it: a run of three or more consecutive
    integers as ``first-last``; a list comma-separated (nested: in brackets; empty: ``[]``); a
    mapping as ``key: value; ...`` (nested: ``{key: value, ...}``); anything else as ``str``."""
    if isinstance(value, Mapping):
        items = [f"{key}: {_compact(item, nested=True)}" for key, item in value.items()]
        return "{" + ", ".join(items) + "}" if nested else "; ".join(items)
    if isinstance(value, (list, tuple)):
        whole = [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
        if len(value) > 2 and len(whole) == len(value) and list(value) == list(range(value[0], value[-1] + 1)):
            return f"{value[0]}-{value[-1]}"
        listed = ", ".join(_compact(item, nested=True) for item in value)
        return f"[{listed}]" if nested or not value else listed
    return str(value)


def parameters_table(used: Mapping[str, Any]):
    """``{name: value}`` as a one-column ``pandas.DataFrame`` (index ``parameter``, column
    ``value``, each value written by :func:`_compact`): the compact table a chapter opens with."""
    import pandas as pd

    return pd.DataFrame({"value": [_compact(value) for value in used.values()]},
                        index=pd.Index(list(used), name="parameter"))


def _show(used: Mapping[str, Any]) -> None:
    """The parameters used: a table in a notebook, ``name = value`` lines elsewhere."""
    table = parameters_table(used)
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # pragma: no cover - IPython comes with the book extra
        get_ipython = None
    if get_ipython is not None and get_ipython() is not None:
        display(table)
    else:
        print("parameters used:\n" + "\n".join(f"  {name} = {value}" for name, value in table["value"].items()))


def chapter_parameters(notebook: str, values: Mapping[str, Any], *,
                       show: bool = True) -> ChapterParameters:
    """A chapter notebook's parameters as its :class:`ChapterParameters` (read and checked once).

    Args:
        notebook: a key of :data:`CHAPTERS` (``"rq1"`` ... ``"rq5"``, ``"emergence"``,
            ``"glance"``).
        values: the notebook's variables (``globals()``); only the chapter's fields are read.
        show: show the parameters used (:func:`parameters_table`; one per line outside a notebook).

    Raises:
        ParameterError: a field the notebook does not define; every bad value in one message,
            with the forms that work.
        DeviceNotAvailable, ModelNotAvailable, MLMHeadMissing, ConfigurationNotAvailable: from the
            checks, once the forms are right.
    """
    __tracebackhide__ = True
    if notebook not in CHAPTERS:
        raise ValueError(f"unknown notebook {notebook!r}; notebooks are {list(CHAPTERS)}")
    names = list(declared(notebook))
    missing = [name for name in names if name not in values]
    if missing:
        raise ParameterError(f"the notebook does not define {missing}: its parameters cell and "
                             f"dupbert.study.params.{CHAPTERS[notebook].__name__} disagree")
    parameters = CHAPTERS[notebook](**{name: values[name] for name in names})
    if show:
        _show(parameters.values())
    return parameters


def notebook_parameters(notebook: str | Mapping[str, Parameter], values: Mapping[str, Any],
                        *, show: bool = True) -> dict[str, Any]:
    """Every parameter of a chapter notebook, read in the forms papermill users type, checked.

    Accepted forms: lists as a list, one name, a comma-separated string (``-p tasks snli,sst2``) or
    a JSON/YAML list in a string; optional values as ``None``, ``"None"`` or ``""``; mappings as
    YAML or a string holding one (``-p max_train_samples '{snli: 32}'``); numbers and booleans as
    papermill parses them, or as strings. For a chapter, the values are then checked together
    (:class:`ChapterParameters`).

    Args:
        notebook: a key of :data:`CHAPTERS`, or a ``{name: Parameter}`` mapping (read each value on
            its own, nothing checked together).
        values: the notebook's variables (``globals()``).
        show: show the parameters used (:func:`parameters_table`; one per line outside a notebook).

    Returns:
        ``{name: value}`` for every parameter, normalised (lists are lists, ``""`` is ``None``).

    Raises:
        as :func:`chapter_parameters`.
    """
    __tracebackhide__ = True
    if isinstance(notebook, str):
        return chapter_parameters(notebook, values, show=show).values()
    used = _read_values(notebook, values)
    if show:
        _show(used)
    return used


def profile_parameters(parameters: Mapping[str, Any], device: str | None = None) -> RQ3Parameters:
    """An RQ3 parameter file's mapping (``dupbert finetune --profile``) as :class:`RQ3Parameters`:
    a key left out or ``None`` takes the field's default, ``model`` alone names the models,
    ``device`` replaces the file's. Raises as :class:`ChapterParameters`."""
    values = {key: value for key, value in parameters.items() if value is not None}
    if device:
        values["device"] = device
    if values.get("model") and not values.get("models"):
        values["models"] = [values["model"]]
    return RQ3Parameters(**values)


def _papermill_parameters(path: str | os.PathLike) -> list[str]:
    """The names assigned in the ``parameters`` cell of a notebook (for tests and tools)."""
    import json

    cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    for cell in cells:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            source = "".join(cell["source"])
            return re.findall(r"^([A-Za-z_]\w*)\s*=", source, flags=re.MULTILINE)
    raise DupbertError(f"{path} has no cell tagged 'parameters'")


def add_options(parser, notebook: str = "rq3") -> None:
    """Add the options (``option``, ``help``) of ``notebook``'s parameters to an argparse parser.
    Lists are repeated options (``--seed 0 --seed 1``); every option defaults to ``None``.
    """
    for parameter in NOTEBOOK_PARAMETERS[notebook].values():
        if parameter.option is None:
            continue
        kwargs = option_keywords(parameter)
        parser.add_argument(parameter.option, default=None, help=parameter.help, **kwargs)


def _option_value(args, parameter: Parameter) -> Any:
    return getattr(args, parameter.option.lstrip("-").replace("-", "_"))


def given_options(args, notebook: str = "rq3") -> dict[str, str]:
    """``{parameter: option}`` of the options that ``args`` (from :func:`add_options`) sets."""
    return {name: parameter.option for name, parameter in NOTEBOOK_PARAMETERS[notebook].items()
            if parameter.option is not None and _option_value(args, parameter) is not None}


def option_parameters(args, notebook: str, *, check_models: bool = True) -> dict[str, Any]:
    """The parameters of ``notebook`` that have an option, from ``args`` (:func:`add_options`):
    each option's value, else the field's default (:func:`default`), checked against the declaration in its
    order, then (``check_models``) the models (with their MLM head for RQ1 and RQ2), the slowest
    check, last.

    Returns:
        ``{name: value}`` for every parameter with an option.

    Raises:
        ParameterError: a missing or bad option, named as typed, e.g. ``--n-sequences must be an
            integer >= 1, got 0``.
        DeviceNotAvailable, ModelNotAvailable, MLMHeadMissing: from the checks.
    """
    from ..core.checks import check_number

    used = {}
    for name, parameter in NOTEBOOK_PARAMETERS[notebook].items():
        if parameter.option is None:
            continue
        value = _option_value(args, parameter)
        value = default(notebook, name) if value is None else value
        if value is None and not parameter.none:
            raise ParameterError(f"{parameter.option} is required")
        if value is not None and parameter.kind in ("int", "float"):
            value = check_number(parameter.option, value, integer=parameter.kind == "int",
                                 minimum=parameter.minimum, maximum=parameter.maximum,
                                 above=parameter.above)
        elif value is not None:
            try:
                value = read(value, parameter)
            except FormError as error:
                raise ParameterError(f"{parameter.option} {value!r}: {error}") from None
        if value is not None and parameter.check is not None:
            try:
                parameter.check(value)
            except ParameterError as error:
                raise ParameterError(f"{parameter.option} {value!r}: {error}") from None
        used[name] = value
    for model in used.get("models", []) if check_models else []:
        check_model(model, mlm_head=_MODEL_NOTEBOOKS.get(notebook, False))
    return used
