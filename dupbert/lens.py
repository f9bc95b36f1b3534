"""The per-sequence lens: what the MLM head reads from every hidden state of one input.

The RQ1 probe (``dupbert.probe``) averages over a corpus; the lens shows one sequence, position
by position, the picture readers of logit-lens work expect (nostalgebraist 2020, "interpreting
GPT: the logit lens", for decoders; here the encoder's own MLM head, Kao et al. 2020, section 3,
on an unmasked input). For every hidden state ``l = 0..L`` (0 = the embedding output) and
position, the head maps the hidden state to vocabulary logits, and we keep the top-k tokens with
their probabilities and the rank of the input token.

Cost: one forward pass, then the head once per hidden state on ``[T, H]`` (``T x V`` logits at
a time, never all hidden states' logits together).
"""

from __future__ import annotations

import sys
import types

import pandas as pd
import torch
import transformers

from .checks import check_device
from .hidden import encoder_hidden_states
from .models import mlm_head
from .probe import check_max_length, resolve_translator, warn_if_truncated

LENS_COLUMNS = ["layer", "position", "input_token", "input_id", "special", "guess", "token",
                "token_id", "probability", "input_rank", "input_probability"]


@torch.inference_mode()
def lens(
    model: transformers.PreTrainedModel,
    tokenizer: transformers.PreTrainedTokenizerBase,
    text: str,
    k: int = 5,
    max_length: int = 512,
    device: str | torch.device | None = None,
    translator="identity",
    translators=None,
) -> pd.DataFrame:
    """The MLM head's top-``k`` guesses at every hidden state and position of one text.

    The text is tokenised with special tokens (truncated to ``max_length``) and run unmasked
    through the encoder; every hidden state ``h_l`` ``[T, H]`` (``dupbert.models.
    encoder_hidden_states``: ``l = 0`` the embedding output, ``l`` the output of block
    ``l - 1``, before any final norm) goes through ``dupbert.mlm_head`` to logits ``[T, V]``;
    probabilities are their softmax over the vocabulary.

    Args:
        model: a ``*ForMaskedLM`` of a family in ``dupbert.models.MLM_FAMILIES``.
        tokenizer: its tokenizer.
        text: one input sequence (not empty).
        k: guesses kept per hidden state and position, ``1 <= k <= V``.
        max_length: truncation length in tokens, special tokens included, at least 3 (CLS, a
            token, SEP).
        device: where to run; default the model's device.
        translator, translators: ``"identity"`` (``h_l`` as it is), or ``"linear"`` with a
            fitted ``dupbert.LinearTranslator`` in ``translators`` (or the translator itself):
            ``h_l`` mapped to the last hidden state's space before the head (Din et al. 2023,
            ``dupbert.fit_translators``); ``text`` must not be one it was fitted on.

    Returns:
        A tidy frame, one row per (hidden state, position, guess): ``(L + 1) x T x k`` rows,
        columns ``layer`` (hidden state), ``position`` (0-based token position, special tokens
        included), ``input_token`` / ``input_id`` (the token at that position), ``special``
        (a special token such as CLS/SEP), ``guess`` (1..k, 1 = the head's arg-max), ``token``
        / ``token_id`` (the guess), ``probability`` (its softmax probability, in [0, 1]),
        ``input_rank`` (rank of the input token among all ``V`` logits: 1 = arg-max; ties
        rank optimistically) and ``input_probability``.

    Warns:
        TruncationWarning: the text has more than ``max_length`` tokens and was cut (the
            message gives its length).

    Raises:
        ValueError: ``text`` is not a string or is empty/blank, ``k`` is not in ``1..V``, or
            ``max_length`` is not an integer >= 3 (tokenizers read 0 as "do not truncate").
        DeviceNotAvailable: ``device`` is not one this machine's torch can use.
        MLMHeadMissing: the model has no MLM head (``dupbert.mlm_head``).
        ValueError: as ``dupbert.probe.resolve_translator``.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"text must be a non-empty string, got {text!r}")
    vocab_size = model.config.vocab_size
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= vocab_size:
        raise ValueError(f"k must be an integer in 1..{vocab_size} (the vocabulary size), "
                         f"got {k!r}")
    max_length = check_max_length(max_length)
    mapper = resolve_translator(translator, translators, model, [text])
    head = mlm_head(model)
    device = torch.device(check_device(device)) if device is not None \
        else next(model.parameters()).device
    model = model.to(device).eval()
    max_length = min(max_length, tokenizer.model_max_length or max_length)
    warn_if_truncated(tokenizer, [text], max_length)
    encoded = tokenizer(text, truncation=True, max_length=max_length,
                        return_special_tokens_mask=True)
    ids = torch.tensor([encoded["input_ids"]], device=device)  # [1, T]
    hidden_states = encoder_hidden_states(model, ids, torch.ones_like(ids))
    input_tokens = tokenizer.convert_ids_to_tokens(encoded["input_ids"])
    n_positions = ids.shape[1]
    frames = []
    for layer, hidden in enumerate(hidden_states):
        hidden = hidden[0] if mapper is None else mapper.apply(layer, hidden[0])  # [T, H]
        logits = head(hidden).float()  # [T, V]
        probabilities = logits.softmax(dim=-1)
        top = probabilities.topk(k, dim=-1)  # [T, k]
        input_logit = logits.gather(1, ids[0, :, None])  # [T, 1]
        input_rank = 1 + (logits > input_logit).sum(dim=-1)  # [T]
        input_probability = probabilities.gather(1, ids[0, :, None])[:, 0]
        guesses = top.indices.cpu()
        frames.append(pd.DataFrame({
            "layer": layer,
            "position": torch.arange(n_positions).repeat_interleave(k).numpy(),
            "guess": torch.arange(1, k + 1).repeat(n_positions).numpy(),
            "token_id": guesses.reshape(-1).numpy(),
            "probability": top.values.cpu().reshape(-1).numpy(),
            "input_rank": input_rank.cpu().repeat_interleave(k).numpy(),
            "input_probability": input_probability.cpu().repeat_interleave(k).numpy(),
        }))
    frame = pd.concat(frames, ignore_index=True)
    frame["input_id"] = [encoded["input_ids"][p] for p in frame["position"]]
    frame["input_token"] = [input_tokens[p] for p in frame["position"]]
    frame["special"] = [bool(encoded["special_tokens_mask"][p]) for p in frame["position"]]
    frame["token"] = tokenizer.convert_ids_to_tokens(frame["token_id"].tolist())
    return frame[LENS_COLUMNS]


def lens_grid(frame: pd.DataFrame, value: str = "token", include_special: bool = False
              ) -> pd.DataFrame:
    """The lens as a grid: one row per hidden state, one column per position, each cell the
    head's top-1 guess (``value="token"``), its ``probability`` or the ``input_rank``.

    Args:
        frame: ``lens`` output.
        value: a column of ``lens`` (``token``, ``probability``, ``input_rank``, ...).
        include_special: keep the special-token positions (CLS, SEP, ...).

    Returns:
        ``[L + 1, positions]`` frame indexed by ``layer`` (hidden state), columns a
        ``MultiIndex`` of (``position``, ``input_token``).

    Raises:
        ValueError: ``value`` is not a column of ``frame``, or no position is left.
    """
    if value not in frame.columns:
        raise ValueError(f"value must be a column of the lens frame, got {value!r}; columns are "
                         f"{list(frame.columns)}")
    top1 = frame[frame["guess"] == 1]
    if not include_special:
        top1 = top1[~top1["special"]]
    if top1.empty:
        raise ValueError("no position to show: the text has only special tokens")
    return top1.pivot(index="layer", columns=["position", "input_token"], values=value)


class _CallableModule(types.ModuleType):
    """``dupbert.lens`` names both this module and its function: once the module is imported,
    Python binds the package attribute ``dupbert.lens`` to the module, so calling the module
    calls ``lens``."""

    def __call__(self, *args, **kwargs) -> pd.DataFrame:
        return lens(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
