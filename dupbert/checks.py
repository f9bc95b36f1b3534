"""Input checks that every entry point runs first, so that a bad input fails in seconds with one
clear message, before any model, data set or heavy library is loaded.

- :func:`check_device`: ``cuda`` on a machine without CUDA, ``cuda:3`` with two GPUs, a typo.
- :func:`check_model` / :func:`load_config`: a model that cannot be loaded gives the same
  :class:`~dupbert.errors.ModelNotAvailable` message as ``dupbert.load_mlm`` (what was tried, why
  each failed, the fix), from the model's config alone.
- :func:`hub_or_offline`: without ``HF_HUB_OFFLINE``, an unreachable Hugging Face Hub costs
  every Hub lookup ~40-50 s of retries before it fails. One HTTP ``HEAD`` request to the Hub
  (``HF_ENDPOINT``, default ``https://huggingface.co``; proxies from the environment honoured)
  with a :data:`HUB_TIMEOUT_S` timeout decides, once per process: when it gets no answer the
  process switches to offline mode, so a model in the local Hugging Face cache still loads and
  any other fails at once.
- :func:`check_configurations`: duplication configurations named for models that lack them.
- :func:`check_number` / :func:`check_list`: a library argument that is not a number in its
  range (``batch_size=0``, ``power=80``, a NaN learning rate), or not a list of distinct items
  (a string where a list of names belongs, seed 0 twice); the message names the argument, its
  value and what is allowed.
- :func:`notebook_parameters`: every parameter of a chapter notebook, in the forms papermill
  users type (``-p``, ``-y``, ``-f``), normalised or rejected with the form to use. Each
  notebook calls it in the cell after its parameters cell::

      from dupbert.checks import notebook_parameters
      globals().update(notebook_parameters("rq2", globals()))

This module imports only the standard library (and PyYAML) at import time; ``transformers`` is
imported only to read the config of a model that is not in the zoo, ``torch`` only for a device
other than ``cpu`` and for :func:`check_configurations`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Callable

from .errors import (ConfigurationNotAvailable, DeviceNotAvailable, DupbertError, MLMHeadMissing,
                     ModelNotAvailable, ParameterError)

__all__ = ["check_device", "check_model", "load_config", "hub_or_offline", "model_not_available",
           "check_configurations", "check_number", "number_from_text", "plain_value", "check_list",
           "check_columns",
           "notebook_parameters", "NOTEBOOK_PARAMETERS", "TASK_NAMES",
           "HUB_TIMEOUT_S"]

# The names of dupbert.tasks.TASKS (importing it imports `datasets`, ~2 s); tests keep them equal.
TASK_NAMES = ("sst2", "snli", "squad2", "uspto50k")

HUB_TIMEOUT_S = 3.0
"""Seconds the one reachability request to the Hugging Face Hub may take (:func:`hub_or_offline`)."""

_TRUE = ("1", "true", "yes", "on")


# --------------------------------------------------------------------------------------------------
# Devices


def _available_devices() -> list[str]:
    import torch

    devices = ["cpu"]
    if torch.cuda.is_available():
        devices += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        devices.append("mps")
    return devices


def check_device(device: Any) -> str:
    """The device string ``device`` if this machine's torch can use it.

    ``"cpu"`` is accepted without importing torch. Anything else is parsed by ``torch.device``
    and checked against what torch reports: ``torch.cuda.is_available()`` and
    ``torch.cuda.device_count()`` for ``cuda``/``cuda:N``, ``torch.backends.mps.is_available()``
    for ``mps``.

    Args:
        device: a device string (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``) or a
            ``torch.device``.

    Returns:
        ``str(device)``, e.g. ``"cuda:1"``.

    Raises:
        DeviceNotAvailable: not a device torch knows, or one this machine does not have; the
            message names the device, what torch reports and the available devices.
    """
    if isinstance(device, str) and device.strip() == "cpu":
        return "cpu"
    if not isinstance(device, str) and type(device).__name__ != "device":
        raise DeviceNotAvailable(f"device must be a string such as 'cpu' or 'cuda:0', got {device!r}")
    import torch

    available = _available_devices()
    try:
        parsed = torch.device(device.strip() if isinstance(device, str) else device)
    except (RuntimeError, ValueError) as error:
        said = str(error).splitlines()[0]
        said = said if len(said) < 80 else said[:77] + "..."
        raise DeviceNotAvailable(
            f"device {device!r} is not a device torch knows (torch.device said: {said}); "
            f"devices look like cpu, cuda, cuda:1, mps; available devices: "
            f"{', '.join(available)}") from None
    name = str(parsed)
    if parsed.type == "cpu":
        return name
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            why = ("this torch was built without CUDA" if torch.version.cuda is None else
                   f"torch is built with CUDA {torch.version.cuda} but sees no GPU "
                   f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')})")
            raise DeviceNotAvailable(
                f"device {name!r} is not available: torch {torch.__version__} reports "
                f"torch.cuda.is_available() = False ({why}); available devices: "
                f"{', '.join(available)}. Use device 'cpu' (papermill -p device cpu, "
                f"dupbert --device cpu) or run on a machine with a GPU.")
        count = torch.cuda.device_count()
        if parsed.index is not None and parsed.index >= count:
            raise DeviceNotAvailable(
                f"device {name!r} is not available: torch {torch.__version__} reports "
                f"torch.cuda.device_count() = {count}; available devices: {', '.join(available)}")
        return name
    if parsed.type == "mps":
        if "mps" not in available:
            raise DeviceNotAvailable(
                f"device {name!r} is not available: torch {torch.__version__} reports "
                f"torch.backends.mps.is_available() = False; available devices: "
                f"{', '.join(available)}")
        return name
    raise DeviceNotAvailable(f"device {name!r} is not supported by dupbert (cpu, cuda, cuda:N or "
                             f"mps); available devices: {', '.join(available)}")


# --------------------------------------------------------------------------------------------------
# Library arguments


def check_number(name: str, value: Any, *, integer: bool = False, minimum: float | None = None,
                 maximum: float | None = None, above: float | None = None,
                 below: float | None = None) -> int | float:
    """``value`` if it is a finite number in the allowed range (an ``int`` when ``integer``).

    Args:
        name: the argument's name, for the message (``"batch_size"``, ``"--epochs"``).
        integer: only whole numbers (``32`` or ``32.0``; not ``2.7``, not ``True``).
        minimum, maximum: the smallest and largest value allowed (inclusive).
        above, below: bounds the value must lie strictly beyond (exclusive).

    Returns:
        The value as ``int`` (``integer``) or ``float``.

    Raises:
        ParameterError: not a number (a bool or a string counts as not a number), NaN or
            infinite, not whole when ``integer``, or out of range; the message names ``name``,
            the value and the allowed range, e.g. ``batch_size must be an integer >= 1, got 0``.
    """
    import math
    import numbers

    bounds = [f">= {minimum:g}" if minimum is not None else "",
              f"> {above:g}" if above is not None else "",
              f"<= {maximum:g}" if maximum is not None else "",
              f"< {below:g}" if below is not None else ""]
    allowed = (f"{'an integer' if integer else 'a number'} "
               f"{' and '.join(bound for bound in bounds if bound)}").strip()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterError(f"{name} must be {allowed}, got {value!r} ({type(value).__name__})")
    number = float(value)
    if not math.isfinite(number) or (integer and not number.is_integer()) \
            or (minimum is not None and number < minimum) \
            or (maximum is not None and number > maximum) \
            or (above is not None and number <= above) or (below is not None and number >= below):
        raise ParameterError(f"{name} must be {allowed}, got {value!r}")
    return int(number) if integer else number


def check_columns(frame: Any, columns: Sequence[str], what: str, *, rows: str = "runs") -> None:
    """Refuse ``frame`` unless it is a pandas DataFrame that has every one of ``columns``.

    Args:
        what: the frame's name, for the message (``"results"``, ``"spearman"``).
        rows: what its rows are, said when it has no columns at all (``"runs"``: ``it has no
            columns (no runs)``); ``""`` says nothing.

    Raises:
        ParameterError: not a DataFrame; or, e.g., ``results: missing column ['task'] (needed:
            ['model', 'task', 'duplication', 'seed']); its columns are [...]``.
    """
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        raise ParameterError(f"{what} must be a pandas DataFrame, got {type(frame).__name__}")
    missing = [column for column in columns if column not in frame]
    if missing:
        has = (f"its columns are {list(frame.columns)}" if len(frame.columns)
               else f"it has no columns{f' (no {rows})' if rows else ''}")
        raise ParameterError(f"{what}: missing column{'s' if len(missing) > 1 else ''} {missing} "
                             f"(needed: {list(columns)}); {has}")


def number_from_text(value: Any) -> Any:
    """A number typed as a string (``"3e-5"``: PyYAML reads ``3e-5``, without a dot, as a
    string) as a ``float``; anything else as it is, for :func:`check_number` to judge."""
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return value
    return value


def plain_value(value: Any) -> Any:
    """A numpy scalar as the Python value it holds, a whole float as an int: ``2``, not
    ``np.int64(2)`` or ``2.0``, when a message names a seed or a model read from a frame."""
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        value = value.item()
    return int(value) if isinstance(value, float) and value.is_integer() else value


def check_list(name: str, value: Any, *, what: str = "names", allow_empty: bool = False) -> list:
    """``value`` as a list if it is a list (or tuple, or other iterable) of distinct items.

    A string is refused, not split into its characters: ``models="rxnfp-bert"`` would otherwise
    run models ``'r'``, ``'x'``, ... and ``seeds=[0, 0, 1]`` would plan three seeds of which two
    can ever land, so a study waits for the third forever.

    Args:
        name: the argument's name, for the message.
        what: what the items are (``"names"``, ``"seeds"``), for the message.
        allow_empty: an empty list is allowed.

    Returns:
        ``list(value)``, in its order.

    Raises:
        ParameterError: a string, a mapping or anything not iterable; an empty list (unless
            ``allow_empty``); an item that appears twice (the message names it).
    """
    if isinstance(value, (str, bytes)):
        raise ParameterError(f"{name} must be a list of {what}, got the string {value!r}; "
                             f"write [{value!r}] for one")
    if isinstance(value, Mapping):
        raise ParameterError(f"{name} must be a list of {what}, got a mapping {dict(value)!r}")
    try:
        items = list(value)
    except TypeError:
        raise ParameterError(f"{name} must be a list of {what}, got {value!r} "
                             f"({type(value).__name__})") from None
    if not items and not allow_empty:
        raise ParameterError(f"{name} is empty: give at least one of the {what}")
    repeated = [item for position, item in enumerate(items) if item in items[:position]]
    if repeated:
        raise ParameterError(f"{name} must be distinct {what}: {repeated[0]!r} appears "
                             f"{items.count(repeated[0])} times in {items!r}")
    return items


# --------------------------------------------------------------------------------------------------
# Models


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "0").strip().lower() in _TRUE


@functools.lru_cache(maxsize=1)
def _hub_answers(endpoint: str, timeout: float) -> bool:
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(urllib.request.Request(endpoint, method="HEAD"), timeout=timeout)
    except urllib.error.HTTPError:
        return True  # it answered, if only with an error status
    except (OSError, ValueError):  # URLError, timeout, refused, no DNS, bad endpoint
        return False
    return True


def _go_offline() -> None:
    import sys

    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    # libraries imported already read the variable at import time
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        constants.HF_HUB_OFFLINE = True
    config = sys.modules.get("datasets.config")
    if config is not None:
        config.HF_HUB_OFFLINE = True


def hub_or_offline(timeout: float = HUB_TIMEOUT_S) -> str:
    """Whether this process may use the Hugging Face Hub; switches it offline when it cannot.

    Without ``HF_HUB_OFFLINE``, transformers tries an unreachable Hub with retries for ~40-50 s
    before each failure. One ``HEAD`` request to ``$HF_ENDPOINT`` (default
    ``https://huggingface.co``; proxies from the environment apply) with ``timeout`` seconds
    decides, once per process: any HTTP answer counts as reachable; no answer sets
    ``HF_HUB_OFFLINE=1`` (and ``HF_DATASETS_OFFLINE=1``) for the rest of the process, so models
    and data sets in the local caches still load and everything else fails at once.

    Returns:
        ``"offline"`` (``HF_HUB_OFFLINE`` was set), ``"reachable"`` or ``"unreachable"`` (the
        process is now offline).
    """
    if _offline():
        return "offline"
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    if _hub_answers(endpoint, float(timeout)):
        return "reachable"
    _go_offline()
    return "unreachable"


def model_not_available(name: str, error: BaseException, hub: str | None = None) -> ModelNotAvailable:
    """The :class:`~dupbert.errors.ModelNotAvailable` that ``dupbert.load_mlm`` raises for
    ``name`` when transformers failed with ``error``, word for word (what was tried, why each
    failed, the fix), so every entry point gives the same message.

    Args:
        hub: what :func:`hub_or_offline` returned; ``"unreachable"`` says so instead of the
            generic Hub clause.
    """
    from .zoo import ZOO

    offline = _offline()
    if hub == "unreachable":
        hub_clause = (f"the Hub did not answer within {HUB_TIMEOUT_S:g} s, so this process runs "
                      f"offline")
    else:
        hub_clause = "HF_HUB_OFFLINE is set" if offline else "Hub not reachable or no such model"
    said = str(error).splitlines()[0] if str(error) else type(error).__name__
    return ModelNotAvailable(
        f"could not load model {name!r}.\nTried: zoo names {sorted(ZOO)} (no match); "
        f"a local folder {name!r} ({'exists' if Path(name).exists() else 'does not exist'}); "
        f"the Hugging Face Hub id {name!r} ({hub_clause}).\n"
        f"transformers said: {said}\n"
        f"Fix: use a zoo name, a folder with config.json and weights, or a Hub id on a machine "
        f"with access to the Hub.")


def load_config(name: str, cache: str | os.PathLike | None = None):
    """The ``transformers`` config of model ``name``, read without loading any weights.

    Args:
        name: a zoo name, a local folder or a Hugging Face Hub id (as ``dupbert.load_mlm``).
        cache: zoo cache folder; default ``$DUPBERT_CACHE`` or ``~/.cache/dupbert``.

    Returns:
        A ``transformers.PretrainedConfig``.

    Raises:
        ModelNotAvailable: the same message as ``dupbert.load_mlm`` for the same name (see
            :func:`model_not_available`); it comes in seconds, also without ``HF_HUB_OFFLINE``
            (:func:`hub_or_offline`).
        ChecksumMismatch: a zoo wheel does not match its pinned sha256.
    """
    from .zoo import resolve_model_path

    path = resolve_model_path(name, cache)
    hub = None if Path(path).is_dir() else hub_or_offline()
    from transformers import AutoConfig
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # "unrecognized model" warnings on stderr
    try:
        return AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as error:
        # the message quotes transformers' first line; its 100-line traceback would bury it
        raise model_not_available(str(name), error, hub) from None
    finally:
        hf_logging.set_verbosity(verbosity)


def check_model(name: Any, *, mlm_head: bool = False, cache: str | os.PathLike | None = None) -> str:
    """``name`` if it names a model that can be loaded (its config is read; no weights are).

    A zoo name is checked without importing transformers (its folder is built on first use);
    anything else by :func:`load_config`.

    Args:
        mlm_head: the entry point needs the pretrained MLM head (RQ1, RQ2): a zoo model without
            one fails here with the message of ``dupbert.load_mlm``.

    Returns:
        ``name`` as a string.

    Raises:
        ModelNotAvailable: as ``dupbert.load_mlm`` (what was tried, why each failed, the fix).
        MLMHeadMissing: ``mlm_head`` and a zoo model without an MLM head.
    """
    from .zoo import ZOO, resolve_model_path, zoo_entry

    if isinstance(name, str) and name in ZOO:
        entry = zoo_entry(name)
        if mlm_head and not entry.has_mlm_head:
            raise MLMHeadMissing(
                f"zoo model {name!r} has no MLM head ({entry.description}). "
                f"Use dupbert.load_encoder({name!r}) to fine-tune it; MLM zoo models are "
                f"{sorted(n for n, e in ZOO.items() if e.has_mlm_head)}")
        resolve_model_path(name, cache)
        return name
    load_config(name, cache)
    return str(name)


def check_configurations(models: Sequence[str], duplications: str | Sequence[str], *,
                         strict: bool = False) -> dict[str, list[str]]:
    """The duplication configurations named for each model, checked against what it has.

    The configurations of a model are ``dupbert.duplicate.finetune_variants`` of its depth (from
    its config; ``dupbert.profiles.configuration_specs``): a 2-block model has no ``copy first
    3``. As in ``dupbert.profiles.plan_sweep``, a name that some models have is kept for those
    and skipped for the others (e.g. ``repeat shared +3``, ALBERT only).

    Args:
        models: model names (each must load: :func:`load_config`).
        duplications: ``"all"`` or configuration names.
        strict: every name must be a configuration of every model (``dupbert finetune --model``
            runs each named configuration of each model; nothing is skipped).

    Returns:
        ``{model: [configuration, ...]}``, the configurations each model will run.

    Raises:
        ConfigurationNotAvailable: a name that no model has (with ``strict``: that some model
            lacks), or a model left with none of the names; the message lists each model's
            configurations (and its depth).
        ParameterError: ``models`` or ``duplications`` is a string other than ``"all"``, empty,
            or names something twice (:func:`check_list`).
    """
    from .profiles import configuration_specs

    models = check_list("models", models, what="models")
    have = {model: list(configuration_specs(model)) for model in models}
    if duplications == "all":
        return have
    wanted = check_list("duplications", duplications, what="configuration names")
    depth = {model: _depth(model) for model in models}
    listing = "; ".join(f"{model} ({depth[model]} blocks): {', '.join(names)}"
                        for model, names in have.items())
    lacking = {model: [name for name in wanted if name not in names] for model, names in have.items()}
    lacking = {model: names for model, names in lacking.items() if names}
    if strict and lacking:
        raise ConfigurationNotAvailable(
            "; ".join(f"{model} ({depth[model]} blocks) has no configuration "
                      f"{', '.join(map(repr, names))}" for model, names in lacking.items())
            + f"; configurations: {listing}")
    unknown = [name for name in wanted if not any(name in names for names in have.values())]
    if unknown:
        raise ConfigurationNotAvailable(
            f"duplication configuration{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(map(repr, unknown))} {'are' if len(unknown) > 1 else 'is'} not a "
            f"configuration of {'any model named' if len(models) > 1 else models[0]}; "
            f"configurations: {listing}")
    chosen = {model: [name for name in wanted if name in names] for model, names in have.items()}
    empty = [model for model, names in chosen.items() if not names]
    if empty:
        raise ConfigurationNotAvailable(
            f"{', '.join(empty)} {'have' if len(empty) > 1 else 'has'} none of the configurations "
            f"named ({', '.join(wanted)}), so nothing would run for "
            f"{'them' if len(empty) > 1 else 'it'}; configurations: {listing}")
    return chosen


@functools.lru_cache(maxsize=None)
def _depth(model: str) -> int:
    return int(load_config(model).num_hidden_layers)


def check_tasks(tasks: Sequence[str]) -> list[str]:
    """``tasks`` as a list if every one is a task of ``dupbert.tasks.TASKS``.

    Raises:
        ParameterError: an unknown task; the message lists the tasks.
    """
    tasks = [tasks] if isinstance(tasks, str) else list(tasks)
    _task_check(tasks)
    return tasks


def check_corpus(name: str) -> str:
    """``name`` if it names texts: a corpus of ``dupbert.data.CORPORA``, an existing file or
    folder, or a ``hub:NAME[:CONFIG]:SPLIT`` spec (``dupbert.data.check_text_source``; the
    file's content is checked when it is read).

    Raises:
        UnknownCorpus: a malformed ``hub:`` spec or not a string.
        CorpusNotFound: none of these; the message lists the corpora and the forms allowed.
    """
    from .data import check_text_source

    return check_text_source(name)


# --------------------------------------------------------------------------------------------------
# Notebook parameters


@dataclasses.dataclass(frozen=True)
class Parameter:
    """How one notebook parameter is read (:func:`notebook_parameters`).

    ``kind`` is one of ``str``, ``int``, ``float``, ``bool``, ``device``, ``names`` (a list of
    strings), ``ints`` (a list of integers), ``ints_per_model_task`` (such a list, or
    ``{task: list}`` / ``{task: {model: list}}``), ``per_task_int`` (an int or ``{task: int}``),
    ``per_model_task`` (a value, ``{task: value}`` or ``{task: {model: value}}``, each value cast
    by ``cast``), ``names_per_model`` (a list of strings, or ``{model: list}``), ``orders``
    (``{label: [block, ...]}``). ``none``: ``None`` (and ``""``, and the
    string ``"None"``) is allowed. ``choices``: allowed strings (besides a mapping for
    ``orders``). ``minimum``, ``maximum``: the smallest and largest number allowed; ``above``:
    numbers must be larger than it (``epochs``: 0 epochs would save an untrained run). The
    items of every list must be distinct (seed 0 twice would plan a run that never lands). Kind
    ``mappings``: a list of mappings (e.g. RQ5's ``smoke_sweeps``), passed on as they are. ``check``: called with the value (after
    parsing; not for ``None``), may raise a :class:`~dupbert.errors.DupbertError`.
    """

    kind: str
    none: bool = False
    choices: tuple = ()
    minimum: float | None = None
    maximum: float | None = None
    above: float | None = None
    check: Callable[[Any], Any] | None = None
    cast: type | None = None


def _corpus_check(name: str) -> None:
    from .data import CORPORA

    if name not in CORPORA:
        raise ParameterError(f"unknown corpus {name!r}; corpora are {', '.join(CORPORA)}")


# What a parameter file (`dupbert finetune --profile`) leaves out means what plan_sweep and the
# command line take for it.
RQ3_DEFAULTS = dict(duplications=["baseline"], seeds=[0], max_steps=None, device="cpu",
                    run_missing=True, profile="smoke")


def _task_check(names: list[str] | Mapping[str, list[str]]) -> None:
    if isinstance(names, Mapping):  # {model: tasks}
        names = [name for tasks in names.values() for name in tasks]
    unknown = [name for name in names if name not in TASK_NAMES]
    if unknown:
        raise ParameterError(f"unknown task{'s' if len(unknown) > 1 else ''} "
                             f"{', '.join(map(repr, unknown))}; tasks are {', '.join(TASK_NAMES)}")


def _files_exist(paths: list[str]) -> None:
    from .results import repository_path

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


_MODELS = Parameter("names")
_MODEL = Parameter("str", none=True)
_CORPUS = Parameter("str", none=True, check=_corpus_check)
_POSITIVE = Parameter("int", minimum=1)
_SEED = Parameter("int", minimum=0)
_DEVICE = Parameter("device")
_FOLDER = Parameter("str", none=True)
_PROFILE = Parameter("str")
# The RQ3 parameter file of the pre-registered study whose runs a chapter reads: its planned seeds
# per model and task (verdicts wait for them); None: judge every comparison at the size it has.
_STUDY = Parameter("str", none=True, check=lambda path: _files_exist([path]))

NOTEBOOK_PARAMETERS: dict[str, dict[str, Parameter]] = {
    "rq1": dict(models=_MODELS, model=_MODEL, corpus=_CORPUS, n_sequences=_POSITIVE,
                batch_size=_POSITIVE, device=_DEVICE, seed=_SEED, max_length=Parameter("int", minimum=3),
                duplications=Parameter("orders", none=True, choices=("standard",)),
                n_sequences_duplicated=_POSITIVE, n_sequences_masked=_POSITIVE,
                masking=Parameter("str", choices=("mask", "80-10-10")),
                mask_rate=Parameter("float", above=0.0, maximum=1.0),
                lens_positions=_POSITIVE, n_fit_sequences=_POSITIVE, tables_dir=_FOLDER),
    "rq2": dict(models=_MODELS, model=_MODEL, corpus=_CORPUS, n_sequences=_POSITIVE,
                max_tokens=Parameter("int", minimum=2), batch_size=_POSITIVE, device=_DEVICE,
                seed=_SEED, max_length=Parameter("int", minimum=3),
                duplications=Parameter("orders", none=True, choices=("default", "standard")),
                reconstruction=Parameter("str", none=True, choices=("sample", "probe")),
                tables_dir=_FOLDER),
    "rq3": dict(models=_MODELS, model=_MODEL,
                tasks=Parameter("names_per_model", none=True, check=_task_check),
                duplications=Parameter("names", choices=("all",)),
                seeds=Parameter("ints_per_model_task", minimum=0),
                max_train_samples=Parameter("per_task_int", none=True, minimum=1),
                max_eval_samples=Parameter("per_task_int", none=True, minimum=1),
                # 0 epochs is refused by HyperParameters unless max_steps >= 1 trains instead
                epochs=Parameter("per_model_task", none=True, cast=float, minimum=0),
                max_steps=Parameter("per_model_task", none=True, cast=int, minimum=-1,
                                    check=_not_zero_steps),
                learning_rate=Parameter("per_model_task", none=True, cast=float, above=0),
                batch_size=Parameter("per_model_task", none=True, cast=int, minimum=1),
                group_by_length=Parameter("per_model_task", none=True, cast=bool),
                device=_DEVICE, results_path=_FOLDER, outputs_dir=_FOLDER,
                run_missing=Parameter("bool"), profile=_PROFILE),
    "rq4": dict(results_paths=Parameter("names", check=_files_exist), baseline=Parameter("str"),
                study_profile=_STUDY, pilot_paths=Parameter("names", none=True, check=_files_exist),
                profile=_PROFILE),
    "rq5": dict(results_paths=Parameter("names", none=True, check=_files_exist),
                outputs_dirs=Parameter("names", none=True), baseline=Parameter("str"),
                ensemble_size=Parameter("int", none=True, minimum=1), study_profile=_STUDY,
                smoke_sweeps=Parameter("mappings"), tables_dir=_FOLDER, profile=_PROFILE),
    "emergence": dict(tables_dir=Parameter("str"),
                      threshold=Parameter("float", above=0.0, maximum=1.0)),
    "glance": dict(tables_dir=Parameter("str"), results_paths=Parameter("names"),
                   study_profile=_STUDY,
                   pilot_paths=Parameter("names", none=True, check=_files_exist), profile=_PROFILE),
}
"""The parameters of each chapter notebook (``notebooks/<name>.ipynb``) and how each is read."""

# Which notebooks load models with their MLM head (RQ1, RQ2) or any encoder (RQ3).
_MODEL_NOTEBOOKS = {"rq1": True, "rq2": True, "rq3": False}

_EXAMPLES = {
    "names": ("-p {name} a,b", "-p {name} '[\"a\", \"b\"]'", "-y '{name}: [a, b]'"),
    "names_per_model": ("-p {name} a,b", "-y '{name}: [a, b]'", "-y '{name}: {{MODEL: [a, b]}}'"),
    "ints": ("-p {name} 0,1,2", "-p {name} '[0, 1, 2]'", "-y '{name}: [0, 1, 2]'"),
    "ints_per_model_task": ("-p {name} 0,1,2", "-p {name} '[0, 1, 2]'", "-y '{name}: [0, 1, 2]'",
                            "-y '{name}: {{snli: [0, 1], squad2: {{MODEL: [0]}}}}'"),
    "per_task_int": ("-p {name} 32", "-y '{name}: {{snli: 32, sst2: 64}}'"),
    "per_model_task": ("-p {name} VALUE", "-y '{name}: {{snli: VALUE}}'",
                       "-y '{name}: {{snli: {{MODEL: VALUE}}}}'"),
    "orders": ("-y '{name}: {{LABEL: [0, 0, 1, 2]}}'",),
    "int": ("-p {name} 8",),
    "float": ("-p {name} 0.5",),
    "bool": ("-p {name} True", "-p {name} False"),
    "device": ("-p {name} cpu", "-p {name} cuda:0"),
    "str": ("-p {name} VALUE",),
    "mappings": ("-y '{name}: [{{KEY: VALUE}}, ...]'", "-f FILE.yaml"),
}


class _Bad(Exception):
    """A parameter value that cannot be used (internal: collected into one ParameterError)."""


def _is_none(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip() in ("", "None", "none", "null"))


def _structured(value: str) -> Any:
    """A string typed as a list or mapping (``'["a", "b"]'``, ``'[a, b]'``, ``'{snli: 32}'``)."""
    import yaml

    try:
        return yaml.safe_load(value)
    except yaml.YAMLError as error:
        raise _Bad(f"{value!r} is neither JSON nor YAML ({str(error).splitlines()[0]})") from None


def _names(value: Any, distinct: bool = True) -> list[str]:
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            value = _structured(text)
        else:
            names = [part.strip() for part in text.split(",") if part.strip()]
            return _distinct(names) if distinct else names
    if isinstance(value, (list, tuple)):
        bad = [item for item in value if not isinstance(item, (str, int, float)) or isinstance(item, bool)]
        if bad:
            raise _Bad(f"{bad[0]!r} in the list is not a name")
        names = [str(item).strip() for item in value]
        if any(not name for name in names):
            raise _Bad("the list holds an empty name")
        return _distinct(names) if distinct else names
    raise _Bad(f"{value!r} ({type(value).__name__}) is not a list of names")


def _number(value: Any, cast: type, spec: Parameter) -> int | float | bool:
    if cast is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in (*_TRUE, "0", "false", "no", "off"):
            return value.strip().lower() in _TRUE
        raise _Bad(f"{value!r} is not True or False")
    if isinstance(value, bool):
        raise _Bad(f"{value!r} is not a number")
    try:
        number = cast(value.strip()) if isinstance(value, str) else value
        if cast is int and not float(number).is_integer():
            raise ValueError
        number = cast(number)
    except (TypeError, ValueError):
        raise _Bad(f"{value!r} is not {'an integer' if cast is int else 'a number'}") from None
    if spec.minimum is not None and number < spec.minimum:
        raise _Bad(f"{number!r} is below the smallest allowed value, {spec.minimum:g}")
    if spec.maximum is not None and number > spec.maximum:
        raise _Bad(f"{number!r} is above the largest allowed value, {spec.maximum:g}")
    if spec.above is not None and number <= spec.above:
        raise _Bad(f"{number!r} is not above {spec.above:g}")
    if cast is float and not math.isfinite(number):
        raise _Bad(f"{value!r} is not a finite number")
    return number


def _mapping(value: Any) -> Any:
    if isinstance(value, str) and value.strip().startswith("{"):
        value = _structured(value.strip())
    return value


def _read(name: str, value: Any, spec: Parameter) -> Any:
    if _is_none(value):
        if spec.none:
            return None
        raise _Bad(f"{value!r} is not allowed (a value is needed)")
    kind = spec.kind
    if spec.choices and isinstance(value, str) and value.strip() in spec.choices:
        return value.strip()
    if kind == "str":
        if not isinstance(value, str):
            raise _Bad(f"{value!r} ({type(value).__name__}) is not a string")
        if spec.choices:
            raise _Bad(f"{value!r} is not one of {', '.join(map(repr, spec.choices))}"
                       + (" or None" if spec.none else ""))
        return value.strip()
    if kind in ("int", "float", "bool"):
        return _number(value, {"int": int, "float": float, "bool": bool}[kind], spec)
    if kind == "device":
        return check_device(value)
    if kind == "names":
        names = _names(value)
        if not names:
            raise _Bad("the list is empty")
        if spec.choices and len(names) == 1 and names[0] in spec.choices:
            return names[0]
        return names
    if kind == "ints":
        return _ints(value, spec)
    if kind == "names_per_model":
        value = _mapping(value)
        if not isinstance(value, Mapping):
            return _read(name, value, dataclasses.replace(spec, kind="names"))
        if not value:
            raise _Bad("the mapping is empty")
        return {str(model): _read(name, names, dataclasses.replace(spec, kind="names", none=False))
                for model, names in value.items()}
    if kind == "ints_per_model_task":
        value = _mapping(value)
        if not isinstance(value, Mapping):
            return _ints(value, spec)
        _task_keys(value)
        return {task: ({str(m): _ints(v, spec) for m, v in inner.items()}
                       if isinstance(inner, Mapping) else _ints(inner, spec))
                for task, inner in value.items()}
    if kind in ("per_task_int", "per_model_task"):
        value = _mapping(value)
        cast = int if kind == "per_task_int" else spec.cast
        if not isinstance(value, Mapping):
            return _number(value, cast, spec)
        _task_keys(value)
        out = {}
        for task, inner in value.items():
            if kind == "per_model_task" and isinstance(inner, Mapping):
                out[task] = {str(m): None if _is_none(v) else _number(v, cast, spec)
                             for m, v in inner.items()}
            else:
                out[task] = None if _is_none(inner) else _number(inner, cast, spec)
        return out
    if kind == "mappings":
        value = _structured(value.strip()) if isinstance(value, str) else value
        if not isinstance(value, (list, tuple)) or not value \
                or not all(isinstance(item, Mapping) for item in value):
            raise _Bad(f"{value!r} is not a list of mappings")
        return list(value)
    if kind == "orders":
        value = _mapping(value)
        if not isinstance(value, Mapping) or not value:
            raise _Bad(f"{value!r} is not one of {', '.join(map(repr, spec.choices))}, None or a "
                       f"mapping {{label: [block, ...]}}")
        orders = {}
        for label, order in value.items():
            order = _names(order, distinct=False) if isinstance(order, str) else order
            if not isinstance(order, (list, tuple)) or not order:
                raise _Bad(f"the order of {label!r} is not a list of 0-based blocks: {order!r}")
            orders[str(label)] = [_number(block, int, Parameter("int", minimum=0)) for block in order]
        return orders
    raise ValueError(f"unknown parameter kind {kind!r}")  # a defect in NOTEBOOK_PARAMETERS


def _ints(value: Any, spec: Parameter) -> list[int]:
    items = [value] if isinstance(value, int) and not isinstance(value, bool) \
        else _names(value, distinct=False)
    if not items:
        raise _Bad("the list is empty")
    return _distinct([_number(item, int, spec) for item in items])


def _distinct(items: list) -> list:
    repeated = [item for position, item in enumerate(items) if item in items[:position]]
    if repeated:
        raise _Bad(f"{repeated[0]!r} appears {items.count(repeated[0])} times; give each once")
    return items



def _task_keys(mapping: Mapping) -> None:
    unknown = [str(task) for task in mapping if task not in TASK_NAMES]
    if unknown:
        raise _Bad(f"unknown task {', '.join(map(repr, unknown))} as a key; tasks are "
                   f"{', '.join(TASK_NAMES)}")


def _forms(name: str, spec: Parameter) -> str:
    forms = [form.format(name=name) for form in _EXAMPLES[spec.kind]]
    forms += [f"-p {name} {choice}" for choice in spec.choices]
    if spec.none:
        forms.append(f"-p {name} None")
    return "; ".join(forms)


def notebook_parameters(notebook: str | Mapping[str, Parameter], values: Mapping[str, Any],
                        *, show: bool = True) -> dict[str, Any]:
    """Every parameter of a chapter notebook, read in the forms papermill users type, checked.

    Accepted forms (papermill ``-p`` parses ``True``/``False``/``None``/numbers and passes
    anything else as a string; ``-y``/``-f`` give YAML values):

    - lists (``models``, ``tasks``, ``seeds``, ``results_paths``, ...): a list, one name or a
      comma-separated string (``-p tasks snli,sst2``), or a JSON/YAML list as a string
      (``-p tasks '["snli", "sst2"]'``, ``-p seeds '[0, 1]'``);
    - optional values: ``None``, the string ``"None"``, or ``""`` (``-p corpus ""``);
    - mappings (``max_train_samples``, ``epochs``, ...; ``duplications`` of RQ1/RQ2): a YAML
      mapping or a string holding one (``-p max_train_samples '{snli: 32}'``);
    - numbers and booleans as papermill parses them, or as strings of them.

    Then: the device (:func:`check_device`), the models (:func:`check_model`; with their MLM head
    for RQ1 and RQ2; ``model``, when set, replaces ``models``), the corpus, the tasks, the results
    files of RQ4/RQ5 (must exist) and, for RQ3, the duplication configurations of each model
    (:func:`check_configurations`).

    Args:
        notebook: a key of :data:`NOTEBOOK_PARAMETERS` (``"rq1"`` ... ``"rq5"``, ``"glance"``)
            or a ``{name: Parameter}`` mapping.
        values: the notebook's variables (``globals()`` in the notebook).
        show: print the parameters used, one per line.

    Returns:
        ``{name: value}`` for every parameter of the notebook, normalised (lists are lists,
        ``""`` is ``None``, numbers are numbers); ``globals().update(...)`` puts them back.

    Raises:
        ParameterError: every bad parameter in one message, each with its value and the forms
            that work. DeviceNotAvailable, ModelNotAvailable, MLMHeadMissing,
            ConfigurationNotAvailable: from the checks above, once the forms are right.
    """
    __tracebackhide__ = True  # IPython: the message, not this frame
    key = notebook if isinstance(notebook, str) else None
    if key is not None and key not in NOTEBOOK_PARAMETERS:
        raise ValueError(f"unknown notebook {notebook!r}; notebooks are {list(NOTEBOOK_PARAMETERS)}")
    spec = NOTEBOOK_PARAMETERS[key] if key is not None else notebook
    missing = [name for name in spec if name not in values]
    if missing:
        raise ParameterError(f"the notebook does not define {missing}: its parameters cell and "
                             f"dupbert.checks.NOTEBOOK_PARAMETERS[{key!r}] disagree")
    used, problems = {}, []
    for name, parameter in spec.items():
        try:
            used[name] = _read(name, values[name], parameter)
            if parameter.check is not None and used[name] is not None:
                parameter.check(used[name])
        except _Bad as error:  # the form: say which forms work
            problems.append(f"  {name} = {values[name]!r}: {error}. Forms that work: "
                            f"{_forms(name, parameter)}")
        except (ParameterError, DeviceNotAvailable) as error:  # the value: the message says
            problems.append(f"  {name} = {values[name]!r}: {error}")
    if problems:
        raise ParameterError(f"{len(problems)} parameter{'s' if len(problems) > 1 else ''} "
                             f"cannot be used:\n" + "\n".join(problems))
    if "models" in spec:
        if used.get("model"):
            used["models"] = [used["model"]]
        for model in used["models"]:
            check_model(model, mlm_head=_MODEL_NOTEBOOKS.get(key, False))
    if key == "rq5" and used["outputs_dirs"] is not None and used["results_paths"] is not None \
            and len(used["outputs_dirs"]) != len(used["results_paths"]):
        raise ParameterError(
            f"outputs_dirs = {values['outputs_dirs']!r} names {len(used['outputs_dirs'])} "
            f"folders for {len(used['results_paths'])} results files: give one per file, or None")
    if key == "rq3":
        check_configurations(used["models"], used["duplications"])
    if show:
        print("parameters used:\n" + "\n".join(f"  {name} = {value!r}" for name, value in used.items()))
    return used


def profile_parameters(parameters: Mapping[str, Any], device: str | None = None) -> dict[str, Any]:
    """An RQ3 parameter file (``dupbert finetune --profile``) checked as the RQ3 notebook checks
    its parameters (:func:`notebook_parameters`); keys it leaves out take the command line's
    defaults (:data:`RQ3_DEFAULTS`), ``device`` (``--device``) replaces the file's.

    Returns:
        The normalised parameters.

    Raises:
        As :func:`notebook_parameters`.
    """
    values = {**dict.fromkeys(NOTEBOOK_PARAMETERS["rq3"]), **RQ3_DEFAULTS,
              **{key: value for key, value in parameters.items() if value is not None}}
    if device:
        values["device"] = device
    if values.get("model") and not values.get("models"):
        values["models"] = [values["model"]]
    return notebook_parameters("rq3", values, show=False)


def _papermill_parameters(path: str | os.PathLike) -> list[str]:
    """The names assigned in the ``parameters`` cell of a notebook (for tests and tools)."""
    import json

    cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    for cell in cells:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            source = "".join(cell["source"])
            return re.findall(r"^([A-Za-z_]\w*)\s*=", source, flags=re.MULTILINE)
    raise DupbertError(f"{path} has no cell tagged 'parameters'")
