"""Parameter values in the forms papermill users type (``-p``, ``-y``, ``-f``) and the command line
gives, read into Python values by *kind*, or refused with the forms that work.

Each kind is one entry of :data:`KINDS`: how it is read, the forms a message shows, and the
argparse keywords of its option. A new kind is one new entry. Imports neither torch nor
transformers.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, Callable

from ..core.checks import check_device
from ..training.task_specs import TASK_NAMES

__all__ = ["Parameter", "FormError", "KINDS", "TASK_NAMES", "read", "forms", "option_keywords"]


_TRUE = ("1", "true", "yes", "on")


@dataclasses.dataclass(frozen=True)
class Parameter:
    """How one parameter is read (:func:`read`).

    ``kind``: a key of :data:`KINDS`. ``none``: ``None``, ``"None"`` and ``""`` allowed.
    ``choices``: allowed strings (``orders`` also takes a mapping). ``minimum``/``maximum``:
    bounds; ``above``: a strict lower bound. List items must be distinct. ``check``: called with
    the read value (not ``None``), may raise a :class:`~dupbert.core.errors.DupbertError`. ``cast``:
    the type of a ``per_model_task`` value. ``option``: the command-line flag that sets it
    (``dupbert finetune`` for RQ3, ``dupbert probe`` for RQ1), with ``help``.
    """

    kind: str
    none: bool = False
    choices: tuple = ()
    minimum: float | None = None
    maximum: float | None = None
    above: float | None = None
    check: Callable[[Any], Any] | None = None
    cast: type | None = None
    option: str | None = None
    help: str = ""


class FormError(Exception):
    """A value not in a form its kind reads (collected by the caller into one ParameterError,
    with :func:`forms`)."""


def _plain(bound: float) -> str:
    """A bound as a user reads it: whole numbers in full (4294967295, not 4.29497e+09)."""
    return str(int(bound)) if float(bound).is_integer() else f"{bound:g}"


def _is_none(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip() in ("", "None", "none", "null"))


def _structured(value: str) -> Any:
    """A string typed as a list or mapping (``'["a", "b"]'``, ``'[a, b]'``, ``'{snli: 32}'``)."""
    import yaml

    try:
        return yaml.safe_load(value)
    except yaml.YAMLError as error:
        raise FormError(f"{value!r} is neither JSON nor YAML ({str(error).splitlines()[0]})") \
            from None


def _mapping(value: Any) -> Any:
    if isinstance(value, str) and value.strip().startswith("{"):
        value = _structured(value.strip())
    return value


def _distinct(items: list) -> list:
    repeated = [item for position, item in enumerate(items) if item in items[:position]]
    if repeated:
        raise FormError(f"{repeated[0]!r} appears {items.count(repeated[0])} times; give each once")
    return items


def _names(value: Any, distinct: bool = True) -> list[str]:
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            value = _structured(text)
        else:
            names = [part.strip() for part in text.split(",") if part.strip()]
            return _distinct(names) if distinct else names
    if isinstance(value, (list, tuple)):
        bad = [item for item in value
               if not isinstance(item, (str, int, float)) or isinstance(item, bool)]
        if bad:
            raise FormError(f"{bad[0]!r} in the list is not a name")
        names = [str(item).strip() for item in value]
        if any(not name for name in names):
            raise FormError("the list holds an empty name")
        return _distinct(names) if distinct else names
    raise FormError(f"{value!r} ({type(value).__name__}) is not a list of names")


def _number(value: Any, cast: type, spec: Parameter) -> int | float | bool:
    if cast is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in (*_TRUE, "0", "false", "no", "off"):
            return value.strip().lower() in _TRUE
        raise FormError(f"{value!r} is not True or False")
    if isinstance(value, bool):
        raise FormError(f"{value!r} is not a number")
    try:
        number = cast(value.strip()) if isinstance(value, str) else value
        if cast is int and not float(number).is_integer():
            raise ValueError
        number = cast(number)
    except (TypeError, ValueError):
        raise FormError(f"{value!r} is not {'an integer' if cast is int else 'a number'}") \
            from None
    if spec.minimum is not None and number < spec.minimum:
        raise FormError(f"{number!r} is below the smallest allowed value, {_plain(spec.minimum)}")
    if spec.maximum is not None and number > spec.maximum:
        raise FormError(f"{number!r} is above the largest allowed value, {_plain(spec.maximum)}")
    if spec.above is not None and number <= spec.above:
        raise FormError(f"{number!r} is not above {spec.above:g}")
    if cast is float and not math.isfinite(number):
        raise FormError(f"{value!r} is not a finite number")
    return number


def _task_keys(mapping: Mapping) -> None:
    unknown = [str(task) for task in mapping if task not in TASK_NAMES]
    if unknown:
        raise FormError(f"unknown task {', '.join(map(repr, unknown))} as a key; tasks are "
                        f"{', '.join(TASK_NAMES)}")


# -- one reader per kind: (value, spec) -> value; ``None`` forms and choices are handled by read()

def _read_str(value: Any, spec: Parameter) -> str:
    if not isinstance(value, str):
        raise FormError(f"{value!r} ({type(value).__name__}) is not a string")
    if spec.choices:
        raise FormError(f"{value!r} is not one of {', '.join(map(repr, spec.choices))}"
                        + (" or None" if spec.none else ""))
    return value.strip()


def _read_names(value: Any, spec: Parameter) -> list[str] | str:
    names = _names(value)
    if not names:
        raise FormError("the list is empty")
    if spec.choices and len(names) == 1 and names[0] in spec.choices:
        return names[0]
    return names


def _read_ints(value: Any, spec: Parameter) -> list[int]:
    items = [value] if isinstance(value, int) and not isinstance(value, bool) \
        else _names(value, distinct=False)
    if not items:
        raise FormError("the list is empty")
    return _distinct([_number(item, int, spec) for item in items])


def _read_names_per_model(value: Any, spec: Parameter) -> list[str] | str | dict:
    value = _mapping(value)
    names = dataclasses.replace(spec, kind="names", none=False)
    if not isinstance(value, Mapping):
        return read(value, names)
    if not value:
        raise FormError("the mapping is empty")
    return {str(model): read(inner, names) for model, inner in value.items()}


def _read_ints_per_model_task(value: Any, spec: Parameter) -> list[int] | dict:
    value = _mapping(value)
    if not isinstance(value, Mapping):
        return _read_ints(value, spec)
    _task_keys(value)
    return {task: ({str(m): _read_ints(v, spec) for m, v in inner.items()}
                   if isinstance(inner, Mapping) else _read_ints(inner, spec))
            for task, inner in value.items()}


def _per_task_reader(cast: type | None) -> Callable[[Any, Parameter], Any]:
    """A value, ``{task: value}`` or ``{task: {model: value}}`` (``None`` inside: the default),
    each cast by ``cast`` (``None``: the spec's ``cast``)."""
    def reader(value: Any, spec: Parameter) -> Any:
        kind = cast or spec.cast
        value = _mapping(value)
        if not isinstance(value, Mapping):
            return _number(value, kind, spec)
        _task_keys(value)
        one = lambda v: None if _is_none(v) else _number(v, kind, spec)  # noqa: E731
        return {task: ({str(m): one(v) for m, v in inner.items()}
                       if isinstance(inner, Mapping) else one(inner))
                for task, inner in value.items()}
    return reader


def _read_mappings(value: Any, spec: Parameter) -> list:
    value = _structured(value.strip()) if isinstance(value, str) else value
    if not isinstance(value, (list, tuple)) or not value \
            or not all(isinstance(item, Mapping) for item in value):
        raise FormError(f"{value!r} is not a list of mappings")
    return list(value)


def _read_orders(value: Any, spec: Parameter) -> dict[str, list[int]]:
    value = _mapping(value)
    if not isinstance(value, Mapping) or not value:
        raise FormError(f"{value!r} is not one of {', '.join(map(repr, spec.choices))}, None or "
                        f"a mapping {{label: [block, ...]}}")
    orders = {}
    block = Parameter("int", minimum=0)
    for label, order in value.items():
        order = _names(order, distinct=False) if isinstance(order, str) else order
        if not isinstance(order, (list, tuple)) or not order:
            raise FormError(f"the order of {label!r} is not a list of 0-based blocks: {order!r}")
        orders[str(label)] = [_number(item, int, block) for item in order]
    return orders


@dataclasses.dataclass(frozen=True)
class Kind:
    """One kind of parameter: ``read`` turns a typed value into the value used; ``examples`` are
    the forms a message names (``{name}`` the parameter); ``option`` the argparse keywords of its
    command-line option (``cast``: ``type=`` the spec's ``cast``)."""

    read: Callable[[Any, Parameter], Any]
    examples: tuple[str, ...]
    option: dict = dataclasses.field(default_factory=dict)


KINDS: dict[str, Kind] = {
    "str": Kind(_read_str, ("-p {name} VALUE",)),
    "int": Kind(lambda v, spec: _number(v, int, spec), ("-p {name} 8",), dict(type=int)),
    "float": Kind(lambda v, spec: _number(v, float, spec), ("-p {name} 0.5",), dict(type=float)),
    "bool": Kind(lambda v, spec: _number(v, bool, spec), ("-p {name} True", "-p {name} False"),
                 dict(action="store_true")),
    "device": Kind(lambda v, spec: check_device(v), ("-p {name} cpu", "-p {name} cuda:0")),
    "names": Kind(_read_names, ("-p {name} a,b", "-p {name} '[\"a\", \"b\"]'",
                                "-y '{name}: [a, b]'"), dict(action="append")),
    "names_per_model": Kind(_read_names_per_model, (
        "-p {name} a,b", "-y '{name}: [a, b]'", "-y '{name}: {{MODEL: [a, b]}}'"),
        dict(action="append")),
    "ints": Kind(_read_ints, ("-p {name} 0,1,2", "-p {name} '[0, 1, 2]'",
                              "-y '{name}: [0, 1, 2]'"), dict(action="append", type=int)),
    "ints_per_model_task": Kind(_read_ints_per_model_task, (
        "-p {name} 0,1,2", "-p {name} '[0, 1, 2]'", "-y '{name}: [0, 1, 2]'",
        "-y '{name}: {{snli: [0, 1], squad2: {{MODEL: [0]}}}}'"), dict(action="append", type=int)),
    "per_task_int": Kind(_per_task_reader(int), (
        "-p {name} 32", "-y '{name}: {{snli: 32, sst2: 64}}'",
        "-y '{name}: {{snli: {{MODEL: 32}}}}'"), dict(type=int)),
    "per_model_task": Kind(_per_task_reader(None), (
        "-p {name} VALUE", "-y '{name}: {{snli: VALUE}}'",
        "-y '{name}: {{snli: {{MODEL: VALUE}}}}'"), dict(type="cast")),
    "mappings": Kind(_read_mappings, ("-y '{name}: [{{KEY: VALUE}}, ...]'", "-f FILE.yaml")),
    "orders": Kind(_read_orders, ("-y '{name}: {{LABEL: [0, 0, 1, 2]}}'",)),
}
"""Every kind of parameter value, by name (:class:`Parameter`'s ``kind``)."""


def read(value: Any, spec: Parameter) -> Any:
    """``value`` as its kind reads it: ``None`` forms (``None``, ``"None"``, ``""``) where
    allowed, one of ``spec.choices`` as it is, else :data:`KINDS`' reader.

    Raises:
        FormError: a value in no form of the kind (the caller adds :func:`forms`).
        DeviceNotAvailable: a ``device`` this machine cannot use.
    """
    if _is_none(value):
        if spec.none:
            return None
        raise FormError(f"{value!r} is not allowed (a value is needed)")
    if spec.choices and isinstance(value, str) and value.strip() in spec.choices:
        return value.strip()
    return KINDS[spec.kind].read(value, spec)


def forms(name: str, spec: Parameter) -> str:
    """The forms that work for parameter ``name``, ``"; "``-separated, as a message shows them."""
    shown = [form.format(name=name) for form in KINDS[spec.kind].examples]
    shown += [f"-p {name} {choice}" for choice in spec.choices]
    if spec.none:
        shown.append(f"-p {name} None")
    return "; ".join(shown)


def option_keywords(spec: Parameter) -> dict:
    """The argparse keywords of ``spec``'s option: lists are repeated options (``--seed 0 --seed
    1``), a ``per_model_task`` value takes the spec's ``cast`` (a bool one is a flag)."""
    keywords = dict(KINDS[spec.kind].option)
    if keywords.get("type") == "cast":
        keywords = dict(action="store_true") if spec.cast is bool else dict(type=spec.cast)
    return keywords
