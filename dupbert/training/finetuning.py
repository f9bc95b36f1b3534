"""RQ3/RQ4: fine-tune a (possibly layer-duplicated) encoder on a task and return one result row.

Kao et al. (2020), section 5: duplicate pretrained layers, then fine-tune with the baseline's
hyper-parameters (``HyperParameters``: ``run_glue.py`` / ``run_qa.py`` conventions, book/methods.md
"Measurements"). The same seed gives the same data order and task-head initialisation at any
depth, so per-seed differences are paired (book/methods.md, "Seeds").

Under ``torchrun`` or ``accelerate launch`` (``WORLD_SIZE`` > 1) every process runs the same
sweep with DistributedDataParallel; ``batch_size`` stays the global batch, and only rank 0
writes result rows, per-example outputs and models.
"""

from __future__ import annotations

import dataclasses
import inspect
import numbers
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import datasets
import numpy as np
import torch
import transformers
from transformers.utils import logging as hf_logging

from ..core.checks import check_number
from ..core.errors import ParameterError
from .hyperparameters import SEED_MAXIMUM, TASK_KINDS, HyperParameters
from ..core.results import (environment_fields, is_main_process, model_provenance, run_key,
                            sha256_files, world_size)
from .tasks import check_for_task

# ----------------------------------------------------------------------------- a run's identity


# The training subset (``max_train_samples``) is drawn with this seed for every run, whatever the
# run's own seed: seeds then differ as they do in the paper (task-head initialisation, dropout,
# data order), not in which examples they train on.
TRAIN_SUBSET_SEED = 0


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One fine-tuning run, as planned: everything that identifies it (its outcome aside). A plan
    is a list of them and :func:`run` takes them one by one; :attr:`key` is the run's identity
    in the results file (``dupbert.core.results.run_key``).

    ``data_source`` is where the task data come from (``"local"`` or ``"hub"``:
    ``dupbert.training.tasks.data_source``); the training subset is always drawn with
    :data:`TRAIN_SUBSET_SEED`. Built unchecked; :func:`check_run_spec` checks one where it enters.
    """

    model: str
    task: str
    duplication: str
    seed: int
    hyperparameters: HyperParameters
    max_train_samples: int | None = None
    max_eval_samples: int | None = None
    data_source: str = "local"

    def fields(self) -> dict:
        """The identifying fields as the results row records them."""
        return {"model": self.model, "task": self.task, "duplication": self.duplication,
                "seed": self.seed, "hyperparameters": dataclasses.asdict(self.hyperparameters),
                "max_train_samples": self.max_train_samples,
                "max_eval_samples": self.max_eval_samples, "train_subset_seed": TRAIN_SUBSET_SEED,
                "data_source": self.data_source}

    @property
    def key(self) -> str:
        """The run's key (16 hex digits)."""
        return run_key(self.fields())


# ----------------------------------------------------------------------------- model set-up


@torch.no_grad()
def _seed_task_head(model: transformers.PreTrainedModel, seed: int,
                   fresh_modules: Sequence[str] = ()) -> list[str]:
    """Re-initialise the task head (all parameters outside the base model) and ``fresh_modules``
    from one generator seeded by ``seed``; returns the re-initialised parameter names in draw order.
    """
    from ..tools.duplicate import reinitialize_

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
    """Dotted names of base-model modules that ``from_pretrained`` initialised (e.g.
    ``bert.pooler.dense`` of an MLM checkpoint); the task head is not listed.
    """
    prefix = model.base_model_prefix + "."
    owners = [key.rsplit(".", 1)[0] for key in missing_keys if key.startswith(prefix)]
    return list(dict.fromkeys(owners))


def build_model(model_name: str, kind: str, num_labels: int, duplication: str, seed: int):
    """Load ``model_name`` with a task head, apply ``duplication`` (a name of
    ``dupbert.tools.duplicate.finetune_variants``) and seed every weight the checkpoint lacks from
    ``seed`` (:func:`_seed_task_head`), independent of the global random state.

    Returns:
        ``(model, tokenizer)``.

    Raises:
        ParameterError: ``kind`` not ``"classification"``/``"qa"``, or ``num_labels`` not an
            integer >= 1 for a classifier.
    """
    from ..tools.duplicate import make_variant
    from ..tools.models import resolve_model_path

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
    _seed_task_head(model, seed, fresh_modules=fresh)
    return model, tokenizer


def training_arguments(hp: HyperParameters, seed: int, output_dir: str, device: str,
                       progress: bool) -> transformers.TrainingArguments:
    """``TrainingArguments`` for ``hp`` (transformers 4 and 5): dynamic padding, length grouping if
    ``hp.group_by_length``, bf16 on GPUs that have it, the global batch split over ``WORLD_SIZE``,
    no checkpoints.
    """
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


def _losses(trainer: transformers.Trainer) -> list[float]:
    """The training loss of every optimisation step, rounded to 5 digits."""
    return [round(float(entry["loss"]), 5) for entry in trainer.state.log_history
            if "loss" in entry]


class _PairedTrainer(transformers.Trainer):
    """``Trainer`` whose length-grouped sampler draws from its own generator seeded by
    ``data_seed``, so paired configurations see the same batches in every epoch
    (book/methods.md, "Measurements").
    """

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
    """Whether a trained model's logits hold NaN or infinities (no class or answer can be read)."""
    return any(not np.isfinite(np.asarray(array, dtype=np.float64)).all() for array in logits)


def _no_metrics(task: str) -> dict[str, float]:
    """The judged metrics of ``task``, each NaN: the metrics of a run that diverged."""
    from .tasks import task_metrics

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
    """``seed`` if it is an integer from 0 to :data:`dupbert.training.hyperparameters.SEED_MAXIMUM`
    (``transformers.set_seed``); else ParameterError.
    """
    allowed = f"{name} must be an integer from 0 to 2**{SEED_MAXIMUM.bit_length()} - 1"
    try:
        value = check_number(name, seed, integer=True)
    except ParameterError:
        number = isinstance(seed, numbers.Real) and not isinstance(seed, bool)
        raise ParameterError(f"{allowed}, got {seed!r}"
                             + ("" if number else f" ({type(seed).__name__})")) from None
    if not 0 <= value <= SEED_MAXIMUM:
        raise ParameterError(f"{allowed}, got {seed!r}")
    return value


def check_subset_size(name: str, value) -> None:
    """ParameterError unless ``value`` is ``None`` (all rows) or an integer >= 1."""
    if value is None:
        return
    try:
        check_number(name, value, integer=True, minimum=1)
    except ParameterError:
        raise ParameterError(f"{name} must be None (all rows) or an integer >= 1, got "
                             f"{value!r}") from None


def check_folder(name: str, folder, writable: bool = True) -> None:
    """ParameterError if ``folder`` (``None``: none) cannot take files: not a path, a file, under a
    file, or (``writable``) its nearest existing folder is not writable.
    """
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


def check_name(name: str, value) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ParameterError(f"{name} must be a non-empty string, got {value!r}")


def check_run_spec(spec: RunSpec) -> None:
    """Every field of ``spec`` checked, before anything is loaded (where a run enters:
    :func:`finetune`, a re-run).

    Raises:
        UnknownTask: an unknown task.
        ParameterError: a bad name, seed, subset size or hyper-parameters
            (:func:`check_for_task`).
    """
    check_name("model_name", spec.model)
    check_name("duplication", spec.duplication)
    check_seed(spec.seed)
    if not isinstance(spec.hyperparameters, HyperParameters):
        raise ParameterError(f"hyperparameters must be a HyperParameters (e.g. "
                             f"HyperParameters.for_task('classification', epochs=1)) or None, got "
                             f"{type(spec.hyperparameters).__name__}")
    check_for_task(spec.hyperparameters, spec.task)
    check_subset_size("max_train_samples", spec.max_train_samples)
    check_subset_size("max_eval_samples", spec.max_eval_samples)


def _check_setting(spec: RunSpec, device, outputs_dir, models_dir) -> dict:
    """What a checked ``spec`` runs on, checked before anything is loaded: the device, the output
    folders, the world size, the model's configuration ``spec.duplication`` and its positions;
    returns the configuration's spec (``reference``, ``role``).
    """
    from ..core.checks import check_device
    from ..core.errors import ConfigurationNotAvailable
    from ..core.zoo import load_config
    from ..tools.duplicate import configuration_specs

    hp = spec.hyperparameters
    check_folder("outputs_dir", outputs_dir)
    check_folder("models_dir", models_dir)
    if hp.batch_size % world_size():
        raise ParameterError(f"batch_size {hp.batch_size} is not divisible by world size "
                             f"{world_size()}: each process takes batch_size / world size")
    is_main_process()  # a bad RANK fails now, not when the finished run is to be written
    check_device(device)
    specs = configuration_specs(spec.model)  # the model's config alone: no weights
    if spec.duplication not in specs:
        raise ConfigurationNotAvailable(f"unknown duplication {spec.duplication!r}; {spec.model} "
                                        f"has: {list(specs)}")
    config = load_config(spec.model)
    positions = usable_positions(config)
    if positions is not None and hp.max_length > positions:
        raise ParameterError(f"max_length {hp.max_length} is more than {spec.model} takes: "
                             f"{positions} positions (max_position_embeddings "
                             f"{config.max_position_embeddings}"
                             + (f", less the {config.max_position_embeddings - positions} "
                                f"below its first position" if
                                positions != config.max_position_embeddings else "") + ")")
    return specs[spec.duplication]


# Families whose position ids start after the padding index (transformers'
# create_position_ids_from_input_ids): roberta-base's 514 positions take 512 tokens.
_POSITIONS_AFTER_PADDING = ("roberta", "xlm-roberta", "camembert", "mpnet")


def usable_positions(config) -> int | None:
    """The longest input, in tokens, a model's absolute position embeddings take
    (``max_position_embeddings``, less ``pad_token_id + 1`` where positions start after the padding
    index: RoBERTa 514 -> 512); ``None`` without absolute positions (e.g. DeBERTa, relative only).
    """
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

    Every argument is checked before any data or model is loaded, and every output folder before
    training.

    Args:
        model_name: zoo name (e.g. ``all-MiniLM-L6-v2``), folder or Hub id.
        task: a name of ``dupbert.training.tasks.TASKS``.
        duplication: a name of ``dupbert.tools.duplicate.finetune_variants`` (``baseline``, ``copy first
            3``, ``depth control``, ...).
        seed: seeds the data order, dropout and the task head (not the subsets).
        hyperparameters: default ``HyperParameters.for_task(kind)``.
        max_train_samples, max_eval_samples: stratified subsets with fixed seeds
            (``TRAIN_SUBSET_SEED``, 0), the same for every run.
        outputs_dir: per-example outputs for RQ5 as ``<run_key>.npz``: classification probabilities
            ``[N, C]`` fp16; SQuAD top-20 start/end candidates per feature and the null score, fp16.
        models_dir: the fine-tuned model and tokenizer as ``<run_key>/`` (``save_pretrained``).

    Returns:
        One result row (a dict): ``run_key``, model, task, duplication, ``reference`` and ``role``
        (``dupbert.tools.duplicate.finetune_variants``), ``block_sources``, seed, ``hyperparameters``,
        subset sizes, ``metrics`` (accuracy and macro_f1 as fractions, or the official SQuAD 2.0
        keys in percent, plus ``best_f1``/``best_exact`` and thresholds:
        :func:`dupbert.training.metrics.best_thresholds`), ``baselines`` (majority class or all-empty),
        ``train_time_s``/``eval_time_s`` (seconds), ``n_parameters``, ``train_steps``,
        ``train_losses`` (per step, averaged over processes), ``per_device_train_batch_size``,
        device, world size, versions, git commit, sha256 of the data files and the model wheel.
        Every process returns it; only rank 0 writes ``outputs_dir`` and ``models_dir``. A run
        whose evaluation logits hold NaN or infinities is kept with ``diverged: True``, judged
        metrics NaN and no outputs (book/methods.md, "Statistics").

    Raises:
        UnknownTask: an unknown task.
        ParameterError: a bad argument (named in the message), e.g. a seed, subset size,
            hyper-parameters that cannot run the task or model (:func:`check_for_task`), a
            ``batch_size`` not divisible by the world size, an unwritable output folder.
        ConfigurationNotAvailable: ``duplication`` is not a configuration of the model.
        ModelNotAvailable, DeviceNotAvailable: from ``dupbert.core.checks``; then errors of the loaders.
    """
    from .tasks import data_source, task_spec

    hp = hyperparameters or HyperParameters.for_task(task_spec(task).kind)
    spec = RunSpec(model_name, task, duplication, seed, hp, max_train_samples, max_eval_samples,
                   data_source(data_dir))
    check_run_spec(spec)
    return run(spec, device=device, data_dir=data_dir, outputs_dir=outputs_dir,
               models_dir=models_dir, progress=progress)


def run(spec: RunSpec, device: str = "cpu", data_dir: str | os.PathLike | None = None,
        outputs_dir: str | os.PathLike | None = None,
        models_dir: str | os.PathLike | None = None, progress: bool = True) -> dict:
    """Fine-tune and evaluate the run ``spec`` (checked where it entered:
    :func:`check_run_spec`); the device, folders and the model's configuration are checked
    before anything is loaded. Arguments and the row returned as :func:`finetune`'s.
    """
    from ..tools.duplicate import block_sources
    from .tasks import load_task, task_files, task_spec, trivial_baselines

    configuration = _check_setting(spec, device, outputs_dir, models_dir)
    model_name, task, duplication, seed = spec.model, spec.task, spec.duplication, spec.seed
    hp, max_train_samples, max_eval_samples = (spec.hyperparameters, spec.max_train_samples,
                                               spec.max_eval_samples)
    row = {**spec.fields(), "run_key": spec.key}
    spec_ = task_spec(task)
    train = load_task(task, "train", max_samples=max_train_samples, seed=TRAIN_SUBSET_SEED,
                      data_dir=data_dir)
    evaluation = load_task(task, "eval", max_samples=max_eval_samples, seed=0, data_dir=data_dir)
    if not progress:
        datasets.disable_progress_bars()
    transformers.set_seed(seed)
    model, tokenizer = build_model(model_name, spec_.kind, spec_.num_labels, duplication, seed)
    train_and_evaluate = _question_answering if spec_.kind == "qa" else _classification
    with tempfile.TemporaryDirectory(prefix="dupbert-trainer-") as workdir:
        trainer, train_time, eval_time, metrics, outputs = train_and_evaluate(
            model, tokenizer, spec_, train, evaluation, hp, seed, device, progress, workdir)
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
        data_sha256=sha256_files(task_files(task, data_dir)), **model_provenance(model_name),
        **environment_fields(device), finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    )
    return row
