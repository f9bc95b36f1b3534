"""Generic input validators, the lowest layer: every entry point checks its inputs with these
first, so a bad input fails in seconds with one message naming the argument, its value and
what is allowed (:func:`check_device`, :func:`check_number`, :func:`check_list`,
:func:`check_columns`).

Models are checked in :mod:`dupbert.core.zoo`, duplication configurations in
:mod:`dupbert.tools.duplicate`, notebook and profile parameters in :mod:`dupbert.study.params`. Imports only
the standard library (``torch`` only for a device other than ``cpu``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import DeviceNotAvailable, ParameterError

__all__ = ["check_device", "check_number", "number_from_text", "plain_value", "check_list",
           "check_columns"]




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
    """``str(device)`` (e.g. ``"cuda:1"``) if this machine's torch can use it.

    ``"cpu"`` is accepted without importing torch; ``cuda``/``cuda:N`` and ``mps`` are checked
    against what torch reports.

    Raises:
        DeviceNotAvailable: not a device torch knows, or one this machine does not have (the
            message lists the available devices).
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
    """``value`` as an ``int`` (``integer``) or ``float`` if it is a finite number in range.

    Args:
        name: the argument's name, for the message (``"batch_size"``, ``"--epochs"``).
        integer: only whole numbers (``32`` or ``32.0``; not ``2.7``, not ``True``).
        minimum, maximum: inclusive bounds; above, below: exclusive bounds.

    Raises:
        ParameterError: not a number (bools and strings are not), NaN or infinite, not whole when
            ``integer``, or out of range, e.g. ``batch_size must be an integer >= 1, got 0``.
    """
    import math
    import numbers

    def shown(bound: float) -> str:  # whole numbers in full: 4294967295, not 4.29497e+09
        return str(int(bound)) if float(bound).is_integer() else f"{bound:g}"

    bounds = [f">= {shown(minimum)}" if minimum is not None else "",
              f"> {shown(above)}" if above is not None else "",
              f"<= {shown(maximum)}" if maximum is not None else "",
              f"< {shown(below)}" if below is not None else ""]
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
    """Refuse ``frame`` unless it is a pandas DataFrame with every one of ``columns``.

    Args:
        what: the frame's name, for the message (``"results"``).
        rows: what its rows are, said when it has no columns (``"runs"``); ``""`` says nothing.

    Raises:
        ParameterError: not a DataFrame, or a column missing (the message names the missing,
            needed and present columns).
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
    """A number typed as a string (PyYAML reads ``3e-5`` as one) as a ``float``; anything else as it
    is.
    """
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return value
    return value


def plain_value(value: Any) -> Any:
    """A numpy scalar as its Python value, a whole float as an int (``2``, not ``np.int64(2)`` or
    ``2.0``), for messages.
    """
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        value = value.item()
    return int(value) if isinstance(value, float) and value.is_integer() else value


def check_model_names(name: str, value: Any) -> list[str]:
    """One model name or a non-empty list of distinct ones, as a list (:func:`check_list`).

    Raises:
        ValueError: an empty list (the message gives an example).
        ParameterError: as :func:`check_list`.
    """
    names = check_list(name, [value] if isinstance(value, str) else value, what="models",
                       allow_empty=True)
    if not names:
        raise ValueError(f"{name} is empty: name at least one model, e.g. ['rxnmapper-albert']")
    return names


def check_list(name: str, value: Any, *, what: str = "names", allow_empty: bool = False) -> list:
    """``list(value)`` if ``value`` is a list (or tuple, or other iterable) of distinct items. A
    string is refused, not split into characters.

    Args:
        name, what: the argument's name and what its items are (``"seeds"``), for the message.
        allow_empty: an empty list is allowed.

    Raises:
        ParameterError: a string, a mapping or anything not iterable; an empty list (unless
            ``allow_empty``); an item that appears twice (named).
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




# --------------------------------------------------------------------------------------------------
# Notebook parameters


