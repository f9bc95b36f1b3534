"""The fine-tuning hyper-parameters of RQ3 (``run_glue.py`` / ``run_qa.py`` conventions, book/methods.md
"Measurements"): one frozen value per sweep, checked where it is made. Imports neither torch nor
transformers, so that the parameters of a chapter are checked before anything heavy loads.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..core.checks import check_number, number_from_text
from ..core.errors import ParameterError

__all__ = ["TASK_KINDS", "SEED_MAXIMUM", "HyperParameters", "MIN_MAX_LENGTH", "check_fields"]

TASK_KINDS = ("classification", "qa")
SEED_MAXIMUM = 2**32 - 1
"""The largest seed of a run: ``transformers.set_seed`` takes 0 .. 2**32 - 1."""


@dataclasses.dataclass(frozen=True)
class HyperParameters:
    """Fine-tuning hyper-parameters, identical for every configuration of a sweep. ``batch_size`` is
    the global batch (``batch_size // world_size`` per process).
    """

    learning_rate: float
    batch_size: int
    epochs: float
    max_length: int
    doc_stride: int = 128
    warmup_ratio: float = 0.0
    weight_decay: float = 0.0
    max_steps: int = -1
    eval_batch_size: int = 64
    # run_glue.py's default. Trainer's length grouping sorts each run of 50 batches from longest
    # to shortest; in 30 steps of SST-2 it left MiniLM at chance (0.515 vs 0.758 without it,
    # benchmarks/finetune.py), so it is off unless a profile asks for it.
    group_by_length: bool = False

    def __post_init__(self):
        """Checks every field and normalises its type (1 and 1.0 epochs give the same run key).

        Raises:
            ParameterError: a field out of range (named in the message).
        """
        for field in dataclasses.fields(self):  # "5e-4" from YAML is the number 5e-4
            if field.name != "group_by_length":
                object.__setattr__(self, field.name, number_from_text(getattr(self, field.name)))
        max_steps = check_number("max_steps", self.max_steps, integer=True)
        if max_steps != -1 and max_steps < 1:
            raise ParameterError(f"max_steps must be -1 (train for epochs) or an integer >= 1, "
                                 f"got {self.max_steps!r}")
        values = {
            "learning_rate": check_number("learning_rate", self.learning_rate, above=0),
            "batch_size": check_number("batch_size", self.batch_size, integer=True, minimum=1),
            "epochs": _check_epochs(self.epochs, max_steps),
            "max_length": check_number("max_length", self.max_length, integer=True,
                                       minimum=MIN_MAX_LENGTH),
            "doc_stride": check_number("doc_stride", self.doc_stride, integer=True, minimum=0),
            "warmup_ratio": check_number("warmup_ratio", self.warmup_ratio, minimum=0, below=1),
            "weight_decay": check_number("weight_decay", self.weight_decay, minimum=0),
            "max_steps": max_steps,
            "eval_batch_size": check_number("eval_batch_size", self.eval_batch_size, integer=True,
                                            minimum=1),
        }
        if not isinstance(self.group_by_length, (bool, np.bool_)):
            raise ParameterError(f"group_by_length must be True or False, got "
                                 f"{self.group_by_length!r} ({type(self.group_by_length).__name__})")
        for name, value in values.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "group_by_length", bool(self.group_by_length))

    @classmethod
    def for_task(cls, kind: str, **overrides) -> "HyperParameters":
        """``run_glue.py`` defaults for ``kind="classification"``, ``run_qa.py`` for ``"qa"``.

        Raises:
            ParameterError: another ``kind``, an override that is not a field, a value out of range.
        """
        if kind == "qa":
            defaults = dict(learning_rate=3e-5, batch_size=12, epochs=2.0, max_length=384)
        elif kind == "classification":
            defaults = dict(learning_rate=2e-5, batch_size=32, epochs=3.0, max_length=128)
        else:
            raise ParameterError(f"task kind must be 'classification' or 'qa', got {kind!r}")
        check_fields(overrides, f"hyper-parameters for {kind}")
        return cls(**{**defaults, **overrides})


MIN_MAX_LENGTH = 3
"""The shortest ``max_length``: ``[CLS]``, one token, ``[SEP]`` (a pair of texts needs 5:
:func:`check_for_task`)."""


def _check_epochs(epochs, max_steps: int) -> float:
    if max_steps != -1:  # Trainer trains max_steps steps and ignores epochs
        return check_number("epochs", epochs, minimum=0)
    try:
        return check_number("epochs", epochs, above=0)
    except ParameterError as error:
        raise ParameterError(f"{error} (max_steps is -1: the run trains for epochs, and 0 epochs "
                             f"would save an untrained model as a result; give epochs > 0 or "
                             f"max_steps >= 1)") from None


def check_fields(overrides, what: str = "hyperparameters") -> None:
    """ParameterError if the mapping ``overrides`` has a key that is not a :class:`HyperParameters`
    field (the message lists the fields).
    """
    fields = [field.name for field in dataclasses.fields(HyperParameters)]
    unknown = [name for name in overrides if name not in fields]
    if unknown:
        raise ParameterError(f"{what}: unknown field {unknown[0]!r}; the fields are "
                             f"{', '.join(fields)}")
