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
import os
import platform
import subprocess
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import torch
import transformers
from transformers.utils import logging as hf_logging

from .results import atomic_write_text


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
        # 1 and 1.0 epochs are the same run: keep run keys independent of how numbers were typed
        for name in ("learning_rate", "epochs", "warmup_ratio", "weight_decay"):
            object.__setattr__(self, name, float(getattr(self, name)))
        for name in ("batch_size", "max_length", "doc_stride", "max_steps", "eval_batch_size"):
            object.__setattr__(self, name, int(getattr(self, name)))
        object.__setattr__(self, "group_by_length", bool(self.group_by_length))

    @classmethod
    def for_task(cls, kind: str, **overrides) -> "HyperParameters":
        """``run_glue.py`` defaults for ``kind="classification"``, ``run_qa.py`` for ``"qa"``."""
        if kind == "qa":
            defaults = dict(learning_rate=3e-5, batch_size=12, epochs=2.0, max_length=384)
        elif kind == "classification":
            defaults = dict(learning_rate=2e-5, batch_size=32, epochs=3.0, max_length=128)
        else:
            raise ValueError(f"task kind must be 'classification' or 'qa', got {kind!r}")
        return cls(**{**defaults, **overrides})


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
        """All rows, in the order they were written ([] if the file does not exist)."""
        if not self.path.is_file():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]

    def keys(self) -> set[str]:
        return {row["run_key"] for row in self.rows()}

    def append(self, row: dict) -> None:
        """Add ``row`` (must hold ``run_key``) unless a row with that key is already there."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with _folder_lock(self.path.parent):
            rows = self.rows()
            if any(existing["run_key"] == row["run_key"] for existing in rows):
                return
            text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in [*rows, row])
            atomic_write_text(self.path, text)

    def frame(self) -> pd.DataFrame:
        """The rows as a flat frame: hyper-parameters and metrics become columns."""
        return pd.json_normalize(self.rows(), sep=".")


# ----------------------------------------------------------------------------- processes


def world_size() -> int:
    """Processes of a data-parallel run (``WORLD_SIZE``, set by torchrun/accelerate); 1 alone."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def is_main_process() -> bool:
    """Whether this process writes results: rank 0 of a data-parallel run, or the only one."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank() == 0
    return int(os.environ.get("RANK", "0")) == 0


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


def environment_fields(device: str) -> dict:
    """Versions, device, torch's intra-op thread count, world size and commit recorded with every
    row."""
    import datasets

    from . import __version__

    name = torch.cuda.get_device_name() if device.startswith("cuda") else platform.processor()
    return {
        "device": device,
        "device_name": name or platform.machine(),
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
    """
    from .duplicate import make_variant
    from .models import resolve_model_path

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
    return {"model_source": f"{entry.package}=={entry.version}",
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
    probabilities = torch.softmax(torch.as_tensor(logits, dtype=torch.float32), dim=-1).numpy()
    predicted, gold = probabilities.argmax(-1), np.asarray(evaluation["label"])
    metrics = {"accuracy": float(accuracy_score(gold, predicted)),
               "macro_f1": float(f1_score(gold, predicted, average="macro"))}
    outputs = {"probabilities": probabilities.astype(np.float16), "labels": gold}
    return trainer, train_time, eval_time, metrics, outputs


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
        ``outputs_dir`` and ``models_dir``.

    Raises:
        ValueError: unknown task or duplication, bad hyper-parameters. Errors of the loaders.
    """
    from .duplicate import block_sources
    from .profiles import configuration_specs
    from .tasks import TASKS, data_source, load_task, task_files, trivial_baselines

    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; tasks are {sorted(TASKS)}")
    spec = TASKS[task]
    hp = hyperparameters or HyperParameters.for_task(spec.kind)
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
    if outputs_dir is not None and main:
        path = Path(outputs_dir) / f"{row['run_key']}.npz"
        path.parent.mkdir(parents=True, exist_ok=True)
        # a hidden temporary name (.gitignore: .*.tmp), so that a run killed mid-write leaves
        # nothing that looks like outputs, nor anything the study script would commit
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp",
                                         delete=False) as handle:
            np.savez_compressed(handle, **outputs)
        os.replace(handle.name, path)
    spec = configuration_specs(model_name)[duplication]
    row.update(
        reference=spec["reference"], role=spec["role"], block_sources=block_sources(model), n_train=len(train), n_eval=len(evaluation),
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
    """
    from .tasks import TASKS, data_source

    index, count = parse_shard(shard)
    source = data_source(data_dir)
    results = ResultsFile(results_path)
    done = results.keys()
    configurations = sweep_configurations(models, tasks, duplications, seeds)[index::count]
    for configuration in configurations:
        kind = TASKS[configuration["task"]].kind
        hp = HyperParameters.for_task(kind, **(hyperparameters or {}).get(kind, {}))
        key = run_key({**configuration, "hyperparameters": dataclasses.asdict(hp),
                       "max_train_samples": max_train_samples,
                       "max_eval_samples": max_eval_samples,
                       "train_subset_seed": TRAIN_SUBSET_SEED, "data_source": source})
        if key in done:
            continue
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


def merge_results(paths: Sequence[str | os.PathLike], out: str | os.PathLike) -> pd.DataFrame:
    """Combine shard results files into ``out``: every row once (by ``run_key``), in the order
    of ``paths``.

    Raises:
        ValueError: two files hold different rows under the same ``run_key``, except for timings.
    """
    merged: dict[str, dict] = {}
    for path in paths:
        for row in ResultsFile(path).rows():
            key = row["run_key"]
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
    """
    if row.get("train_subset_seed") != TRAIN_SUBSET_SEED:
        raise ValueError(f"run {row.get('run_key')} drew its training subset with "
                         f"{row.get('train_subset_seed', 'its run seed')!r}, this version with "
                         f"{TRAIN_SUBSET_SEED}: it cannot be re-run here")
    hp = HyperParameters(**row["hyperparameters"])
    new = finetune(row["model"], row["task"], row["duplication"], int(row["seed"]),
                   hyperparameters=hp, max_train_samples=row.get("max_train_samples"),
                   max_eval_samples=row.get("max_eval_samples"), device=device,
                   data_dir=data_dir, progress=progress)
    if new["run_key"] != row["run_key"]:
        raise ValueError(f"re-running {row['run_key']} gave run key {new['run_key']}: the row's "
                         "fields do not identify the run it records")
    return new


def rerun_table(rows: Sequence[dict], device: str = "cpu",
                data_dir: str | os.PathLike | None = None, progress: bool = False) -> pd.DataFrame:
    """Re-run each row (:func:`rerun`) and set committed beside re-run metrics.

    Returns:
        One row per run and metric of its task: ``run_key, model, task, duplication, seed,
        metric, committed, rerun, difference`` (points: accuracy × 100, SQuAD as it is;
        ``difference`` = rerun - committed), and ``identical_losses`` (every training step's loss
        equal to 5 digits).
    """
    from .paper import in_points, task_metrics

    records = []
    for row in rows:
        new = rerun(row, device=device, data_dir=data_dir, progress=progress)
        for metric in task_metrics(row["task"]):
            committed = in_points(metric, float(row["metrics"][metric]))
            again = in_points(metric, float(new["metrics"][metric]))
            records.append({"run_key": row["run_key"], "model": row["model"], "task": row["task"],
                            "duplication": row["duplication"], "seed": row["seed"],
                            "metric": metric, "committed": round(committed, 4),
                            "rerun": round(again, 4), "difference": round(again - committed, 4),
                            "identical_losses": new["train_losses"] == row.get("train_losses")})
    return pd.DataFrame(records)
