"""RQ3/RQ4: fine-tune a (possibly layer-duplicated) encoder on a task and return one result row.

Kao et al. (2020), section 5: duplicate pretrained layers, then fine-tune with *exactly* the
baseline's hyper-parameters. Every configuration of a sweep therefore shares one
``HyperParameters`` object, taken from the conventions of Hugging Face ``run_glue.py``
(classification: lr 2e-5, batch 32, 3 epochs, max length 128) and ``run_qa.py`` (SQuAD:
lr 3e-5, batch 12, 2 epochs, max length 384, stride 128), no warm-up, no weight decay.

Pairing across configurations: the same seed gives the same data order and the same task-head
initialisation whatever the depth (the head is re-initialised from its own seeded generator
after duplication), so a per-seed difference isolates the duplication.

Results are rows of a JSON-lines file written atomically (``ResultsFile``); a rerun skips rows
already there, so an interrupted sweep resumes with no row lost or doubled.

Data parallelism: under ``torchrun`` or ``accelerate launch`` (``WORLD_SIZE`` > 1) every process
runs the same sweep and trains with Trainer's DistributedDataParallel; ``batch_size`` stays the
global batch (each process takes ``batch_size / WORLD_SIZE``), and only the main process (rank 0)
writes result rows, per-example outputs and models.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import inspect
import json
import numbers
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import torch
import transformers
from transformers.utils import logging as hf_logging

from .checks import check_list, check_number, number_from_text
from .errors import DupbertError, ParameterError
from .results import atomic_write_text

TASK_KINDS = ("classification", "qa")


@dataclasses.dataclass(frozen=True)
class HyperParameters:
    """Fine-tuning hyper-parameters, identical for every configuration of a sweep.

    ``batch_size`` is the *global* batch: under data parallelism each process gets
    ``batch_size // world_size``.
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
        """Checks every field and normalises its type: 1 and 1.0 epochs are the same run, so run
        keys do not depend on how numbers were typed.

        Raises:
            ParameterError: a field out of range, e.g. ``batch_size must be an integer >= 1, got
                0``; ``learning_rate`` not > 0 (or NaN); ``max_steps`` not -1 or >= 1; ``epochs``
                not > 0 while ``max_steps`` is -1 (a run of 0 epochs trains nothing);
                ``max_length`` below 3; ``warmup_ratio`` not in [0, 1); ``weight_decay`` < 0;
                ``group_by_length`` not True or False.
        """
        for field in dataclasses.fields(self):  # "5e-4" from YAML is 5e-4, as it always was
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
            ParameterError: ``kind`` is neither; an override that is not a field (the message
                names it and lists the fields); a value out of range (:meth:`__post_init__`).
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
    """Raises :class:`ParameterError` if ``overrides`` (a mapping) has a key that is not a field
    of :class:`HyperParameters` (e.g. ``max_step``); the message names it and lists the fields."""
    fields = [field.name for field in dataclasses.fields(HyperParameters)]
    unknown = [name for name in overrides if name not in fields]
    if unknown:
        raise ParameterError(f"{what}: unknown field {unknown[0]!r}; the fields are "
                             f"{', '.join(fields)}")


def check_for_task(hp: HyperParameters, task: str) -> None:
    """Checks that ``hp`` can run ``task``: ``max_length`` leaves every input text at least one
    token besides the special tokens (``[CLS] a [SEP]``: 3; a pair ``[CLS] a [SEP] b [SEP]``: 5;
    with less, the tokenizer silently keeps no text, or does not truncate at all), and for
    SQuAD ``doc_stride < max_length``.

    Raises:
        ParameterError: the message names the value, the task and what it needs.
    """
    from .tasks import task_spec

    spec = task_spec(task)
    needed = 2 * len(spec.text_columns) + 1
    if hp.max_length < needed:
        raise ParameterError(
            f"max_length {hp.max_length} is too short for {task}: its inputs "
            f"({', '.join(spec.text_columns)}) need {len(spec.text_columns) + 1} special tokens "
            f"and at least one token each, so max_length >= {needed}")
    if spec.kind == "qa" and hp.doc_stride >= hp.max_length:
        raise ParameterError(f"doc_stride must be < max_length for {task} (windows of max_length "
                             f"tokens overlapping by doc_stride), got doc_stride {hp.doc_stride}, "
                             f"max_length {hp.max_length}")


# ----------------------------------------------------------------------------- results file


# The training subset (``max_train_samples``) is drawn with this seed for every run, whatever the
# run's own seed: seeds then differ as they do in the paper (task-head initialisation, dropout,
# data order), not in which examples they train on.
TRAIN_SUBSET_SEED = 0


def run_key(row: dict) -> str:
    """The identity of a run: everything but its outcome (16 hex digits). ``data_source`` counts
    only when it is not ``"local"`` (Hub data, e.g. the real SNLI train split), so runs on the
    offline data keep the keys they always had.

    Raises:
        KeyError: ``row`` lacks one of the identifying fields (``train_subset_seed`` included).
    """
    fields = {k: row[k] for k in ("model", "task", "duplication", "seed", "hyperparameters",
                                  "max_train_samples", "max_eval_samples", "train_subset_seed")}
    if row.get("data_source", "local") != "local":
        fields["data_source"] = row["data_source"]
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


@contextlib.contextmanager
def _folder_lock(folder: Path):
    """An exclusive advisory lock on ``folder`` (no lock file to leave behind: the file itself
    is replaced on every write, so it cannot carry the lock)."""
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # closing releases the lock


class ResultsFileError(DupbertError, ValueError):
    """A results file that cannot be read as results: a directory, a line that is not a JSON
    object, a row without its ``run_key``; the message names the file and the line."""


class ResultsFile:
    """Rows of results, one JSON object per line, appended atomically.

    Each append rewrites the file through a temporary file and ``os.replace``, so a reader or
    an interrupted run never sees half a row. Rows are identified by ``run_key``. An append
    holds an exclusive ``flock`` on the file's folder while it reads and rewrites, so processes
    that share one results file (the shards of ``scripts/cpu_study.sh``) never drop each
    other's rows.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def rows(self) -> list[dict]:
        """All rows, in the order they were written ([] if the file does not exist).

        Raises:
            ResultsFileError: the path is a directory, or a line is not a JSON object, e.g.
                ``results.jsonl line 2 is not JSON (Expecting property name enclosed in double
                quotes, column 2): '{x'``.
        """
        return [row for _, row in self._numbered_rows()]

    def _numbered_rows(self) -> list[tuple[int, dict]]:
        """``(line number, row)`` of every non-blank line, counting from 1."""
        self.check_path()
        if not self.path.is_file():
            return []
        numbered = []
        for number, line in enumerate(self.path.read_text().splitlines(), 1):
            if line.strip():
                numbered.append((number, self._parse(number, line)))
        return numbered

    def _parse(self, number: int, line: str) -> dict:
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            shown = line if len(line) <= 60 else line[:57] + "..."
            raise ResultsFileError(f"{self.path} line {number} is not JSON ({error.msg}, column "
                                   f"{error.colno}): {shown!r}; fix or remove that line") from None
        if not isinstance(row, dict):
            raise ResultsFileError(f"{self.path} line {number} is not a JSON object but a "
                                   f"{type(row).__name__}: each line must be one result row")
        return row

    def check_path(self) -> None:
        """Raises :class:`ResultsFileError` if the path is a directory, or lies under a file (so
        that no row could ever be written to it), before anything runs."""
        if self.path.is_dir():
            raise ResultsFileError(f"results file {self.path} is a directory; give the path of a "
                                   f"JSON-lines file, e.g. {self.path / 'rq3.jsonl'}")
        blocking = next((parent for parent in self.path.parents if parent.exists()), None)
        if blocking is not None and not blocking.is_dir():
            raise ResultsFileError(f"results file {self.path} cannot be written: {blocking} is a "
                                   f"file, not a folder")

    def check_writable(self) -> None:
        """Raises :class:`ResultsFileError` if rows could not be appended: the path is as
        :meth:`check_path` refuses it, or its folder (the nearest one that exists) is not
        writable. A sweep calls it before it trains anything, so that no finished run is lost."""
        self.check_path()
        folder = next(parent for parent in self.path.parents if parent.exists())
        if not os.access(folder, os.W_OK):
            raise ResultsFileError(f"results file {self.path} cannot be written: no write "
                                   f"permission in {folder}")

    def keyed_rows(self) -> list[tuple[str, dict]]:
        """``(run_key, row)`` of every row, in file order.

        Raises:
            ResultsFileError: as :meth:`rows`, or a row without a ``run_key`` (e.g.
                ``results.jsonl line 3 lacks run_key``).
        """
        keyed = []
        for number, row in self._numbered_rows():
            if not isinstance(row.get("run_key"), str):
                raise ResultsFileError(f"{self.path} line {number} lacks run_key (a string): "
                                       f"it is not a result row of dupbert.finetune")
            keyed.append((row["run_key"], row))
        return keyed

    def keys(self) -> set[str]:
        """The ``run_key`` of every row. Raises: as :meth:`keyed_rows`."""
        return {key for key, _ in self.keyed_rows()}

    def append(self, row: dict) -> None:
        """Add ``row`` (must hold ``run_key``) unless a row with that key is already there.

        Raises:
            ResultsFileError: ``row`` has no ``run_key``; the file is as :meth:`keyed_rows`
                refuses it.
        """
        if not isinstance(row, dict) or not isinstance(row.get("run_key"), str):
            raise ResultsFileError(f"a row appended to {self.path} must be a dict with a run_key "
                                   f"(a string), got {type(row).__name__} without one")
        self.check_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with _folder_lock(self.path.parent):
            keyed = self.keyed_rows()
            if any(key == row["run_key"] for key, _ in keyed):
                return
            text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in [*(r for _, r in keyed), row])
            atomic_write_text(self.path, text)

    def frame(self) -> pd.DataFrame:
        """The rows as a flat frame: hyper-parameters and metrics become columns.

        Raises:
            ResultsFileError: as :meth:`rows`.
        """
        return pd.json_normalize(self.rows(), sep=".")


# ----------------------------------------------------------------------------- processes


def _environment_int(name: str, default: str, minimum: int) -> int:
    """The whole number in environment variable ``name`` (``default`` when unset).

    Raises:
        ParameterError: not a whole number >= ``minimum`` (``WORLD_SIZE must be a whole number
            >= 1, got 'two'``).
    """
    text = os.environ.get(name, default)
    try:
        value = int(text.strip())
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise ParameterError(f"{name} must be a whole number >= {minimum}, got {text!r} (set by "
                             f"torchrun or accelerate launch; unset it to run alone)")
    return value


def world_size() -> int:
    """Processes of a data-parallel run (``WORLD_SIZE``, set by torchrun/accelerate); 1 alone.

    Raises:
        ParameterError: ``WORLD_SIZE`` is not a whole number >= 1.
    """
    return _environment_int("WORLD_SIZE", "1", 1)


def is_main_process() -> bool:
    """Whether this process writes results: rank 0 of a data-parallel run, or the only one.

    Raises:
        ParameterError: ``RANK`` is not a whole number >= 0.
    """
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank() == 0
    return _environment_int("RANK", "0", 0) == 0


def _wait_for_main_process() -> None:
    """Barrier of a data-parallel run (no-op alone), e.g. until rank 0 has written a row."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()


# ----------------------------------------------------------------------------- provenance


def _git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def cpu_model() -> str | None:
    """The CPU's model name: ``model name`` of ``/proc/cpuinfo`` on Linux (``"AMD EPYC"``),
    else ``platform.processor()``; None when neither says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith("model name") and ":" in line:
                    return line.split(":", 1)[1].strip() or None
    except OSError:
        pass
    return platform.processor() or None


def device_description(row: Mapping) -> str:
    """Where a row ran, for set-ups that compare runs: ``device_name`` with its
    ``cpu_capability`` (``"AMD EPYC (AVX512)"``); rows from before 2026-12-01 lack the
    capability (``"x86_64 (capability not recorded)"``)."""
    name = row.get("device_name") or row.get("device") or "unknown device"
    if str(row.get("device", "cpu")).startswith("cuda"):
        return str(name)
    return f"{name} ({row.get('cpu_capability') or 'capability not recorded'})"


def environment_fields(device: str) -> dict:
    """Versions, device, torch's intra-op thread count, world size and commit recorded with every
    row. ``device_name`` is the GPU's name, or the CPU's model name (:func:`cpu_model`; rows
    from before 2026-12-01 have the machine type, ``x86_64``); ``cpu_capability`` the SIMD
    kernels torch picks on this CPU (``torch.backends.cpu.get_cpu_capability()``: ``AVX2``,
    ``AVX512``, ...): CPU runs are bit-identical only where both, and the thread count, agree."""
    import datasets

    from . import __version__

    name = torch.cuda.get_device_name() if device.startswith("cuda") else cpu_model()
    return {
        "device": device,
        "device_name": name or platform.machine(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch_threads": torch.get_num_threads(),  # CPU results are bit-identical per thread count
        "world_size": world_size(),
        "versions": {"dupbert": __version__, "torch": torch.__version__,
                     "transformers": transformers.__version__, "datasets": datasets.__version__,
                     "python": platform.python_version()},
        "git_commit": _git_commit(),
    }


# ----------------------------------------------------------------------------- model set-up


@torch.no_grad()
def seed_task_head(model: transformers.PreTrainedModel, seed: int,
                   fresh_modules: Sequence[str] = ()) -> list[str]:
    """Re-initialise the task head (every parameter outside the base model) and the modules
    ``fresh_modules`` (dotted names of modules that the checkpoint lacked, e.g. the pooler of an
    MLM checkpoint) from one generator seeded by ``seed``, so they start the same whatever the
    encoder's depth and whatever the global random state was.

    Returns:
        The names of the re-initialised parameters, in the order they were drawn.
    """
    from .duplicate import reinitialize_

    generator = torch.Generator().manual_seed(seed)
    modules = [(name, child) for name, child in model.named_children()
               if name != model.base_model_prefix]
    modules += [(name, model.get_submodule(name)) for name in fresh_modules]
    names = []
    for module_name, module in modules:
        reinitialize_(module, model.config.initializer_range, generator)
        names += [f"{module_name}.{n}" for n, _ in module.named_parameters()]
    return names


def _fresh_base_modules(model: transformers.PreTrainedModel, missing_keys: Sequence[str]) -> list[str]:
    """The modules of the base model that ``from_pretrained`` initialised because the
    checkpoint lacked their weights (e.g. ``bert.pooler.dense`` for an MLM checkpoint), as
    dotted names of the modules that own those parameters; the task head (outside the base
    model) is not listed."""
    prefix = model.base_model_prefix + "."
    owners = [key.rsplit(".", 1)[0] for key in missing_keys if key.startswith(prefix)]
    return list(dict.fromkeys(owners))


def build_model(model_name: str, kind: str, num_labels: int, duplication: str, seed: int):
    """Load ``model_name`` with a task head, apply the duplication ``duplication`` (a name of
    ``dupbert.duplicate.finetune_variants``) and seed the head.

    Every weight the checkpoint does not hold (the task head, and e.g. the pooler of an MLM
    checkpoint) is drawn from a generator seeded by ``seed`` (:func:`seed_task_head`), so the
    result depends on the arguments alone, not on the global random state.

    Returns:
        ``(model, tokenizer)``.

    Raises:
        ParameterError: ``kind`` is not ``"classification"`` or ``"qa"`` (anything else was
            built as a classifier), or ``num_labels`` is not an integer >= 1 for a classifier.
    """
    from .duplicate import make_variant
    from .models import resolve_model_path

    if kind not in TASK_KINDS:
        raise ParameterError(f"kind must be 'classification' or 'qa', got {kind!r}")
    if kind == "classification":
        check_number("num_labels", num_labels, integer=True, minimum=1)
    path = resolve_model_path(model_name)
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # "newly initialized: classifier" is expected here
    try:
        if kind == "qa":
            model, info = transformers.AutoModelForQuestionAnswering.from_pretrained(
                path, output_loading_info=True)
        else:
            model, info = transformers.AutoModelForSequenceClassification.from_pretrained(
                path, num_labels=num_labels, output_loading_info=True)
    finally:
        hf_logging.set_verbosity(verbosity)
    fresh = _fresh_base_modules(model, info.get("missing_keys", []))
    model = make_variant(model, duplication, seed=seed)
    seed_task_head(model, seed, fresh_modules=fresh)
    return model, tokenizer


def training_arguments(hp: HyperParameters, seed: int, output_dir: str, device: str,
                       progress: bool) -> transformers.TrainingArguments:
    """``TrainingArguments`` for ``hp``: dynamic padding (length grouping if
    ``hp.group_by_length``), bf16 on GPUs that have it, the global batch split over
    ``WORLD_SIZE`` processes, no checkpoints.
    Compatible with transformers 4 and 5 (argument names differ)."""
    processes = world_size()
    if hp.batch_size % processes:
        raise ValueError(f"batch_size {hp.batch_size} is not divisible by world size {processes}")
    accepted = inspect.signature(transformers.TrainingArguments).parameters
    kwargs = dict(
        output_dir=output_dir, learning_rate=hp.learning_rate, num_train_epochs=hp.epochs,
        max_steps=hp.max_steps, per_device_train_batch_size=hp.batch_size // processes,
        per_device_eval_batch_size=hp.eval_batch_size, weight_decay=hp.weight_decay,
        seed=seed, data_seed=seed, report_to=[], save_strategy="no", eval_strategy="no",
        logging_strategy="steps", logging_steps=1, disable_tqdm=not progress,
        use_cpu=not device.startswith("cuda"),
        bf16=device.startswith("cuda") and torch.cuda.is_bf16_supported(),
        dataloader_num_workers=0,
    )
    if "train_sampling_strategy" in accepted:
        kwargs["train_sampling_strategy"] = "group_by_length" if hp.group_by_length else "random"
    else:
        kwargs["group_by_length"] = hp.group_by_length
    if "warmup_ratio" in accepted:
        kwargs["warmup_ratio"] = hp.warmup_ratio
    else:
        kwargs["warmup_steps"] = hp.warmup_ratio
    return transformers.TrainingArguments(**{k: v for k, v in kwargs.items() if k in accepted})


# ----------------------------------------------------------------------------- one run


def _sha256_files(paths: Iterable[Path]) -> dict[str, str]:
    from .zoo import sha256_of

    return {str(p.name): sha256_of(p) for p in paths if p.is_file()}


def _model_provenance(model_name: str) -> dict:
    from .zoo import ZOO

    entry = ZOO.get(model_name)
    if entry is None:
        return {"model_source": model_name, "model_sha256": None}
    return {"model_source": entry.source,
            "model_sha256": entry.wheel_sha256}


def _losses(trainer: transformers.Trainer) -> list[float]:
    """The training loss of every optimisation step, rounded to 5 digits."""
    return [round(float(entry["loss"]), 5) for entry in trainer.state.log_history
            if "loss" in entry]


class _PairedTrainer(transformers.Trainer):
    """``Trainer`` whose length-grouped sampler draws from its own generator seeded by
    ``data_seed``. Trainer's ``LengthGroupedSampler`` for training takes no generator and so
    draws from torch's global random state, which dropout and initialisation consume differently
    at different depths: paired configurations would see different batches from the second epoch
    on. With its own generator every configuration sees the same batches in every epoch."""

    def _get_train_sampler(self, *args, **kwargs):
        sampler = super()._get_train_sampler(*args, **kwargs)
        if isinstance(sampler, transformers.trainer_pt_utils.LengthGroupedSampler) \
                and sampler.generator is None:
            seed = self.args.data_seed if self.args.data_seed is not None else self.args.seed
            sampler.generator = torch.Generator().manual_seed(seed)
        return sampler


def _train(model, tokenizer, train_features, hp, seed, device, progress, workdir):
    args = training_arguments(hp, seed, workdir, device, progress)
    trainer = _PairedTrainer(
        model=model, args=args, train_dataset=train_features,
        data_collator=transformers.DataCollatorWithPadding(tokenizer),
    )
    if not progress:  # with the bar disabled, Trainer prints every log line instead
        trainer.remove_callback(transformers.trainer_callback.PrinterCallback)
    started = time.perf_counter()
    trainer.train()
    return trainer, time.perf_counter() - started


def _classification(model, tokenizer, spec, train, evaluation, hp, seed, device, progress, workdir):
    from sklearn.metrics import accuracy_score, f1_score

    columns = list(spec.text_columns)

    def encode(batch):
        return tokenizer(*[batch[c] for c in columns], truncation=True, max_length=hp.max_length)

    def features(dataset):
        encoded = dataset.map(encode, batched=True, remove_columns=columns)
        return encoded.rename_column("label", "labels")

    trainer, train_time = _train(model, tokenizer, features(train), hp, seed, device, progress,
                                 workdir)
    started = time.perf_counter()
    logits = trainer.predict(features(evaluation)).predictions
    eval_time = time.perf_counter() - started
    if _diverged(logits):
        return trainer, train_time, eval_time, _no_metrics(spec.name), None
    probabilities = torch.softmax(torch.as_tensor(logits, dtype=torch.float32), dim=-1).numpy()
    predicted, gold = probabilities.argmax(-1), np.asarray(evaluation["label"])
    metrics = {"accuracy": float(accuracy_score(gold, predicted)),
               "macro_f1": float(f1_score(gold, predicted, average="macro"))}
    outputs = {"probabilities": probabilities.astype(np.float16), "labels": gold}
    return trainer, train_time, eval_time, metrics, outputs


def _diverged(*logits: np.ndarray) -> bool:
    """Whether a trained model's logits hold NaN or infinities: the run diverged, and no class
    or answer can be read from them (an arg-max of NaN is class 0; every SQuAD span scores NaN,
    so every answer would be "")."""
    return any(not np.isfinite(np.asarray(array, dtype=np.float64)).all() for array in logits)


def _no_metrics(task: str) -> dict[str, float]:
    """The judged metrics of ``task`` (``dupbert.paper.task_metrics``), each NaN: the metrics
    of a run that diverged."""
    from .paper import task_metrics

    return dict.fromkeys(task_metrics(task), float("nan"))


def _question_answering(model, tokenizer, spec, train, evaluation, hp, seed, device, progress,
                        workdir):
    from . import qa
    from .metrics import best_thresholds, squad_v2

    train_features = train.map(
        lambda batch: qa.prepare_train_features(batch, tokenizer, hp.max_length, hp.doc_stride),
        batched=True, remove_columns=train.column_names)
    trainer, train_time = _train(model, tokenizer, train_features, hp, seed, device, progress,
                                 workdir)
    eval_features = evaluation.map(
        lambda batch: qa.prepare_eval_features(batch, tokenizer, hp.max_length, hp.doc_stride),
        batched=True, remove_columns=evaluation.column_names)
    started = time.perf_counter()
    start_logits, end_logits = trainer.predict(eval_features).predictions[:2]
    if _diverged(start_logits, end_logits):
        return trainer, train_time, time.perf_counter() - started, _no_metrics(spec.name), None
    predictions, best_answers, null_odds = qa.predictions_with_null_odds(
        evaluation, eval_features, start_logits, end_logits)
    eval_time = time.perf_counter() - started
    reference = qa.as_squad_json(evaluation)
    metrics = {**squad_v2(reference, predictions),
               **best_thresholds(reference, best_answers, null_odds)}
    outputs = qa.top_candidates(start_logits, end_logits,
                                offset_mapping=eval_features["offset_mapping"])
    outputs["example_id"] = np.asarray(eval_features["example_id"])
    return trainer, train_time, eval_time, metrics, outputs


def check_seed(seed, name: str = "seed") -> int:
    """``seed`` if it is an integer that ``transformers.set_seed`` takes (0 to 2**32 - 1).

    Raises:
        ParameterError: e.g. ``seed must be an integer from 0 to 2**32 - 1, got -1``.
    """
    allowed = f"{name} must be an integer from 0 to 2**32 - 1"
    try:
        value = check_number(name, seed, integer=True)
    except ParameterError:
        number = isinstance(seed, numbers.Real) and not isinstance(seed, bool)
        raise ParameterError(f"{allowed}, got {seed!r}"
                             + ("" if number else f" ({type(seed).__name__})")) from None
    if not 0 <= value < 2**32:
        raise ParameterError(f"{allowed}, got {seed!r}")
    return value


def check_subset_size(name: str, value) -> None:
    """Raises :class:`ParameterError` unless ``value`` is ``None`` (all rows) or an integer >= 1
    (``max_train_samples``, ``max_eval_samples``)."""
    if value is None:
        return
    try:
        check_number(name, value, integer=True, minimum=1)
    except ParameterError:
        raise ParameterError(f"{name} must be None (all rows) or an integer >= 1, got "
                             f"{value!r}") from None


def check_folder(name: str, folder, writable: bool = True) -> None:
    """Raises :class:`ParameterError` if ``folder`` (``None``: none) could not take files: it
    is not a path, is a file, lies under a file, or (``writable``) its nearest existing folder
    is not writable."""
    if folder is None:
        return
    if not isinstance(folder, (str, os.PathLike)) or not str(folder):
        raise ParameterError(f"{name} must be a folder path or None, got {folder!r}")
    path = Path(folder)
    existing = next(p for p in [path, *path.parents] if p.exists())
    if not existing.is_dir():
        raise ParameterError(f"{name} {str(folder)!r} cannot be a folder: {existing} is a file")
    if writable and not os.access(existing, os.W_OK):
        raise ParameterError(f"{name} {str(folder)!r} cannot be written: no write permission "
                             f"in {existing}")


def _check_name(name: str, value) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ParameterError(f"{name} must be a non-empty string, got {value!r}")


def _check_run(model_name, task, duplication, seed, hp, max_train_samples, max_eval_samples,
               device, outputs_dir, models_dir) -> dict:
    """Every input of :func:`finetune`, checked before anything is loaded; returns the
    configuration's spec (``reference``, ``role``: ``dupbert.duplicate.finetune_variants``)."""
    from .checks import check_device, load_config
    from .errors import ConfigurationNotAvailable
    from .profiles import configuration_specs

    _check_name("model_name", model_name)
    _check_name("duplication", duplication)
    check_seed(seed)
    if not isinstance(hp, HyperParameters):
        raise ParameterError(f"hyperparameters must be a HyperParameters (e.g. "
                             f"HyperParameters.for_task('classification', epochs=1)) or None, got "
                             f"{type(hp).__name__}")
    check_for_task(hp, task)
    check_subset_size("max_train_samples", max_train_samples)
    check_subset_size("max_eval_samples", max_eval_samples)
    check_folder("outputs_dir", outputs_dir)
    check_folder("models_dir", models_dir)
    if hp.batch_size % world_size():
        raise ParameterError(f"batch_size {hp.batch_size} is not divisible by world size "
                             f"{world_size()}: each process takes batch_size / world size")
    is_main_process()  # a bad RANK fails now, not when the finished run is to be written
    check_device(device)
    specs = configuration_specs(model_name)  # the model's config alone: no weights
    if duplication not in specs:
        raise ConfigurationNotAvailable(f"unknown duplication {duplication!r}; {model_name} has: "
                                        f"{list(specs)}")
    config = load_config(model_name)
    positions = usable_positions(config)
    if positions is not None and hp.max_length > positions:
        raise ParameterError(f"max_length {hp.max_length} is more than {model_name} takes: "
                             f"{positions} positions (max_position_embeddings "
                             f"{config.max_position_embeddings}"
                             + (f", less the {config.max_position_embeddings - positions} "
                                f"below its first position" if
                                positions != config.max_position_embeddings else "") + ")")
    return specs[duplication]


# Families whose position ids start after the padding index (transformers'
# create_position_ids_from_input_ids): roberta-base's 514 positions take 512 tokens.
_POSITIONS_AFTER_PADDING = ("roberta", "xlm-roberta", "camembert", "mpnet")


def usable_positions(config) -> int | None:
    """The longest input, in tokens, that a model's absolute position embeddings take: its
    ``max_position_embeddings``, less ``pad_token_id + 1`` for the families whose positions
    start after the padding index (RoBERTa: 514 -> 512); ``None`` when the model has no
    absolute positions to run out of (DeBERTa with ``position_biased_input=False``: relative
    positions only)."""
    if getattr(config, "position_biased_input", True) is False:
        return None
    positions = getattr(config, "max_position_embeddings", None)
    if not isinstance(positions, int):
        return None
    if config.model_type in _POSITIONS_AFTER_PADDING:
        return positions - (config.pad_token_id or 0) - 1
    return positions


def finetune(
    model_name: str,
    task: str,
    duplication: str = "baseline",
    seed: int = 0,
    hyperparameters: HyperParameters | None = None,
    max_train_samples: int | None = None,
    max_eval_samples: int | None = None,
    device: str = "cpu",
    data_dir: str | os.PathLike | None = None,
    outputs_dir: str | os.PathLike | None = None,
    models_dir: str | os.PathLike | None = None,
    progress: bool = True,
) -> dict:
    """Fine-tune ``model_name`` with duplication ``duplication`` on ``task`` and evaluate it.

    Args:
        model_name: zoo name (e.g. ``all-MiniLM-L6-v2``, ``rxnfp-bert``), folder or Hub id.
        task: a name of ``dupbert.tasks.TASKS`` (``sst2``, ``snli``, ``squad2``, ``uspto50k``).
        duplication: a name of ``dupbert.duplicate.finetune_variants`` (``baseline``,
            ``copy first 3``, ``depth control``, ...).
        seed: seeds the data order, dropout and the task head (not the subsets).
        hyperparameters: default ``HyperParameters.for_task(kind)``.
        max_train_samples, max_eval_samples: stratified subsets drawn with fixed seeds
            (``TRAIN_SUBSET_SEED`` for training, 0 for evaluation), the same for every run
            whatever its ``seed``.
        outputs_dir: where to save per-example outputs for ensembles (RQ5) as
            ``<run_key>.npz``: classification probabilities ``[N, C]`` fp16; SQuAD top-20
            start/end candidates per feature and the null score, fp16.
        models_dir: where to save the fine-tuned model and tokenizer, as ``<run_key>/``
            (``save_pretrained`` format; reload with the ``AutoModelFor...`` classes).

    Returns:
        One result row (a dict): ``run_key``, model, task, duplication, ``reference`` and
        ``role`` (what RQ3 compares it with, and whether it is the primary comparison:
        ``dupbert.duplicate.finetune_variants``), ``block_sources``,
        seed, ``hyperparameters`` (dict), subset sizes, ``metrics`` (accuracy and macro_f1, or
        the official SQuAD 2.0 keys in percent), ``baselines`` (majority class or all-empty),
        SQuAD metrics add the official threshold search's ``best_f1``/``best_exact`` and their
        thresholds (:func:`dupbert.metrics.best_thresholds`, on each question's best non-null
        answer and its null odds); ``train_time_s``/``eval_time_s`` (seconds), ``n_parameters``, ``train_steps``,
        ``train_losses`` (one per step, averaged over processes), ``per_device_train_batch_size``,
        device, world size, versions, git commit, sha256 of the data files and of the model wheel.
        Every process of a data-parallel run returns the row; only rank 0 writes
        ``outputs_dir`` and ``models_dir``. A run that diverged (its evaluation logits hold NaN
        or infinities) is kept, with ``diverged: True``, every judged metric NaN and no outputs,
        so that a queue moves on and the statistics (which refuse a NaN metric, naming the run)
        cannot average around it.

    Every argument is checked before any data or model is loaded, and every folder the run
    writes to before it trains, so that a bad input fails in seconds and no finished run is lost.

    Raises:
        ValueError: unknown task (``unknown task 'mnli'; tasks are [...]``).
        ParameterError: a bad seed (``seed must be an integer from 0 to 2**32 - 1, got -1``),
            subset size (``max_train_samples must be None (all rows) or an integer >= 1, got
            2.5``), ``hyperparameters`` that is not a :class:`HyperParameters`, one that cannot
            run the task or model (:func:`check_for_task`; ``max_length`` above the model's
            positions), a ``batch_size`` not divisible by the world size, an argument of the wrong
            type; ``outputs_dir``/``models_dir`` that is a file or not writable.
        ConfigurationNotAvailable: ``duplication`` is not a configuration of the model (``unknown
            duplication 'copy all'; rxnmapper-albert has: [...]``).
        ModelNotAvailable, DeviceNotAvailable: from ``dupbert.checks``. Errors of the loaders.
    """
    from .duplicate import block_sources
    from .tasks import TASKS, data_source, load_task, task_files, trivial_baselines

    if not isinstance(task, str) or task not in TASKS:
        raise ValueError(f"unknown task {task!r}; tasks are {sorted(TASKS)}")
    spec = TASKS[task]
    hp = hyperparameters or HyperParameters.for_task(spec.kind)
    configuration = _check_run(model_name, task, duplication, seed, hp, max_train_samples,
                               max_eval_samples, device, outputs_dir, models_dir)
    row = {"model": model_name, "task": task, "duplication": duplication, "seed": seed,
           "hyperparameters": dataclasses.asdict(hp), "max_train_samples": max_train_samples,
           "max_eval_samples": max_eval_samples, "train_subset_seed": TRAIN_SUBSET_SEED,
           "data_source": data_source(data_dir)}
    row["run_key"] = run_key(row)
    train = load_task(task, "train", max_samples=max_train_samples, seed=TRAIN_SUBSET_SEED,
                      data_dir=data_dir)
    evaluation = load_task(task, "eval", max_samples=max_eval_samples, seed=0, data_dir=data_dir)
    if not progress:
        datasets.disable_progress_bars()
    transformers.set_seed(seed)
    model, tokenizer = build_model(model_name, spec.kind, spec.num_labels, duplication, seed)
    run = _question_answering if spec.kind == "qa" else _classification
    with tempfile.TemporaryDirectory(prefix="dupbert-trainer-") as workdir:
        trainer, train_time, eval_time, metrics, outputs = run(
            model, tokenizer, spec, train, evaluation, hp, seed, device, progress, workdir)
    losses = _losses(trainer)
    main = is_main_process()  # in a data-parallel run, all ranks train and evaluate; rank 0 writes
    if models_dir is not None and main:
        trainer.model.save_pretrained(Path(models_dir) / row["run_key"])
        tokenizer.save_pretrained(Path(models_dir) / row["run_key"])
    if outputs is None:  # diverged: the row is kept, so the queue moves on and the loss is seen
        row["diverged"] = True
        print(f"dupbert: {model_name} on {task} ({duplication}, seed {seed}) diverged: its "
              f"logits are not all numbers, so its metrics are NaN and no outputs are written",
              file=sys.stderr)
    if outputs_dir is not None and main and outputs is not None:
        path = Path(outputs_dir) / f"{row['run_key']}.npz"
        path.parent.mkdir(parents=True, exist_ok=True)
        # a hidden temporary name (.gitignore: .*.tmp), so that a run killed mid-write leaves
        # nothing that looks like outputs, nor anything the study script would commit
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp",
                                         delete=False) as handle:
            np.savez_compressed(handle, **outputs)
        os.replace(handle.name, path)
    row.update(
        reference=configuration["reference"], role=configuration["role"], block_sources=block_sources(model), n_train=len(train), n_eval=len(evaluation),
        metrics=metrics, baselines=trivial_baselines(task, evaluation),
        train_time_s=round(train_time, 3), eval_time_s=round(eval_time, 3),
        n_parameters=sum(p.numel() for p in model.parameters()),
        train_steps=trainer.state.global_step, train_losses=losses,
        per_device_train_batch_size=trainer.args.per_device_train_batch_size,
        data_sha256=_sha256_files(task_files(task, data_dir)), **_model_provenance(model_name),
        **environment_fields(device), finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    )
    return row


# ----------------------------------------------------------------------------- sweeps


def parse_shard(shard: str | tuple[int, int] | None) -> tuple[int, int]:
    """``"i/n"`` (0-based ``i``) or ``(i, n)`` -> ``(i, n)``; ``None`` -> ``(0, 1)``.

    Raises:
        ValueError: not of that form, or not ``0 <= i < n``.
    """
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
    """Every (task, model, seed, duplication), tasks in the order given (put the slow,
    informative ones first), duplications innermost so paired runs finish together."""
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
    appending each row as soon as it exists.

    Under ``torchrun``/``accelerate launch`` every process runs this same sweep (all train each
    configuration together); only rank 0 appends rows, and the others wait for it.

    Args:
        hyperparameters: overrides per task kind, e.g. ``{"classification": {"epochs": 1}}``;
            the same for every configuration.
        shard: ``"i/n"``: run only configurations ``i, i+n, i+2n, ...``; shards on one machine
            may share ``results_path`` (appends are locked); on several machines, write each to
            its own results file and combine them with ``merge_results``.

    Returns:
        The results file as a frame (all rows in it, not just this call's).

    Raises:
        ParameterError: before anything is trained: ``models``, ``tasks``, ``duplications`` or
            ``seeds`` not a list of distinct items (a string, ``[0, 0, 1]``: :func:`check_list`);
            a bad seed (:func:`check_seed`) or subset size; ``hyperparameters`` with an unknown
            task kind (``hyperparameters names unknown task kind 'clasification'; kinds are
            'classification', 'qa'``), an unknown field or a bad value (:class:`HyperParameters`);
            an ``outputs_dir`` that is not a folder path, or (runs still to do) cannot be written.
        UnknownTask: a task that is not in ``dupbert.tasks.TASKS`` (the message lists them).
        ConfigurationNotAvailable, ModelNotAvailable: a model with runs still to do that cannot
            be loaded, or lacks one of ``duplications``.
        ResultsFileError: ``results_path`` is a directory or lies under a file, or holds a line
            that is not a result row; runs are still to do and it cannot be written. A sweep
            with every run already in ``results_path`` loads no model and writes nothing: it
            returns the file's rows.
        ValueError: a bad ``shard``.
    """
    from .tasks import TASKS, data_source

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
        _wait_for_main_process()
    return results.frame()


def _check_sweep_lists(models, tasks, duplications, seeds) -> tuple[list, list, list, list]:
    """The four lists of :func:`sweep`, checked (:func:`check_list`; tasks known, seeds valid)."""
    from .tasks import task_spec

    models = check_list("models", models, what="model names")
    tasks = check_list("tasks", tasks, what="task names")
    duplications = check_list("duplications", duplications, what="configuration names")
    seeds = check_list("seeds", seeds, what="seeds")
    for name, items in (("models", models), ("duplications", duplications)):
        for item in items:
            _check_name(f"each of {name}", item)
    for task in tasks:
        task_spec(task)
    for seed in seeds:
        check_seed(seed, "each of seeds")
    return models, tasks, duplications, seeds


def hyperparameters_per_kind(hyperparameters) -> dict[str, HyperParameters]:
    """``{task kind: HyperParameters}`` from a sweep's overrides per task kind (``None``: the
    defaults), e.g. ``{"classification": {"epochs": 1}}``.

    Raises:
        ParameterError: not a mapping; a key that is not a task kind (``hyperparameters names
            unknown task kind 'clasification'; kinds are 'classification', 'qa'``); overrides
            that are not a mapping of fields; an unknown field or a bad value
            (:meth:`HyperParameters.for_task`).
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
    from .checks import check_configurations

    check_configurations(models, duplications, strict=True)


def merge_results(paths: Sequence[str | os.PathLike], out: str | os.PathLike) -> pd.DataFrame:
    """Combine shard results files into ``out``: every row once (by ``run_key``), in the order
    of ``paths``. Nothing is written unless every file reads.

    Raises:
        FileNotFoundError: a file of ``paths`` does not exist (``no results file typo.jsonl;
            nothing was written``).
        ParameterError: ``paths`` is a single path or empty, not a list of paths.
        ResultsFileError: ``out`` is a directory; a line of an input is not a result row (the
            message names the file and line).
        ValueError: two files hold different rows under the same ``run_key``, except for timings.
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


# ----------------------------------------------------------------------------- re-checking


def rerun(row: dict, device: str = "cpu", data_dir: str | os.PathLike | None = None,
          progress: bool = False) -> dict:
    """Run again the run that ``row`` (a results row) records: same model, task,
    configuration, seed, hyper-parameters and subsets.

    Returns:
        The new row (its ``run_key`` equals ``row["run_key"]``).

    Raises:
        ValueError: the row was made under another design (its ``train_subset_seed`` is not
            ``TRAIN_SUBSET_SEED``, or it has none), or the re-run's key differs (the row's fields
            do not reproduce its key: edited, or from an incompatible version).
        ResultsFileError: ``row`` is not a dict, or lacks a field a re-run needs (``run
            0123456789abcdef lacks hyperparameters; a re-run needs run_key, model, task, ...``).
        ParameterError: its hyperparameters have an unknown field or a bad value. As
            :func:`finetune`, before anything is loaded.
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
    if not isinstance(row["task"], str) or row["task"] not in _task_names():
        raise ResultsFileError(f"run {row['run_key']} has task {row['task']!r}, not one of "
                               f"{', '.join(_task_names())}")


def _task_names() -> list[str]:
    from .tasks import TASKS

    return list(TASKS)


def _compared_metrics(row: Mapping) -> list[str]:
    """The metrics of ``row``'s task that its evaluation set defines: without SQuAD 2.0
    unanswerable questions there is no ``NoAns_f1`` (:func:`dupbert.paper.empty_subset`)."""
    from .paper import empty_subset, task_metrics

    counts = pd.json_normalize([{field: row.get(field) for field in ("metrics", "baselines")
                                 if isinstance(row.get(field), Mapping)}])
    return [metric for metric in task_metrics(row["task"])
            if not empty_subset(counts, metric).iloc[0]]


def rerun_table(rows: Sequence[dict], device: str = "cpu",
                data_dir: str | os.PathLike | None = None, progress: bool = False) -> pd.DataFrame:
    """Re-run each row (:func:`rerun`) and set committed beside re-run metrics.

    Returns:
        One row per run and metric of its task that its evaluation set defines (no SQuAD 2.0
        ``NoAns_*`` without unanswerable questions): ``run_key, model, task, duplication, seed,
        metric, committed, rerun, difference`` (points: accuracy × 100, SQuAD as it is;
        ``difference`` = rerun - committed), ``identical_losses`` (every training step's loss
        equal to 5 digits), and where each ran, ``committed_on`` and ``rerun_on``
        (:func:`device_description`): across CPU kinds the floating-point kernels differ, and a
        run's trajectory with them.

    Raises:
        ResultsFileError: before any re-run, a row that :func:`rerun` would refuse for a missing
            field, or that lacks a metric of its task (nothing to compare the re-run with).
        As :func:`rerun`.
    """
    from .paper import in_points

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
