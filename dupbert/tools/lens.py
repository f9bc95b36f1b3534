"""The per-sequence lens: what the MLM head reads from every hidden state of one input.

The RQ1 probe averages over a corpus; the lens shows one sequence position by position, like
the logit lens (nostalgebraist 2020) but with the encoder's own MLM head on an unmasked input
(Kao et al. 2020, section 3). Cost: one forward pass, then the head once per hidden state on
``[T, H]``.
"""

from __future__ import annotations


import pandas as pd
import torch
import transformers

from ..core.checks import check_device
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

    The text is tokenised with special tokens, run unmasked, and every hidden state ``h_l``
    ``[T, H]`` (``encoder_hidden_states``, 0 = embedding output) goes through ``dupbert.mlm_head``
    to logits ``[T, V]``, softmaxed over the vocabulary.

    Args:
        model: a ``*ForMaskedLM`` of a family in ``dupbert.tools.models.MLM_FAMILIES``.
        text: one non-empty input sequence.
        k: guesses kept per hidden state and position, ``1 <= k <= V``.
        max_length: truncation length in tokens, special tokens included (>= 3).
        device: where to run; default the model's device.
        translator, translators: ``"identity"``, or ``"linear"`` with a fitted
            ``dupbert.LinearTranslator`` (in ``translators``, or itself): ``h_l`` mapped to the last
            hidden state's space first (Din et al. 2023); ``text`` must not be one it was fitted on.

    Returns:
        A tidy frame of ``(L + 1) x T x k`` rows: ``layer``, ``position`` (0-based, specials
        included), ``input_token``, ``input_id``, ``special``, ``guess`` (1..k, 1 = arg-max),
        ``token``, ``token_id``, ``probability`` (in [0, 1]), ``input_rank`` (of the input token
        among all ``V`` logits, 1 = arg-max, ties optimistic), ``input_probability``.

    Warns:
        TruncationWarning: the text was cut to ``max_length``.

    Raises:
        ValueError: a bad argument (named in the message), or as
            ``dupbert.tools.probe.resolve_translator``.
        DeviceNotAvailable: ``device`` is not one this machine's torch can use.
        MLMHeadMissing: the model has no MLM head.
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
    """The lens as a grid ``[L + 1, positions]``: index ``layer``, columns ``(position,
    input_token)``, each cell the top-1 guess's ``value`` (a column of ``lens``: ``token``,
    ``probability``, ``input_rank``, ...); specials dropped unless ``include_special``.

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


def copy_rate(frame: pd.DataFrame) -> pd.Series:
    """Per hidden state (index ``layer``), the share of the non-special positions of a
    :func:`lens` frame whose top-1 guess is the input token itself: how often a hidden state,
    read through the head, gives back the token it holds (RQ1's reconstruction, on one text).

    Raises:
        ValueError: ``frame`` lacks a :data:`LENS_COLUMNS` column used here.
    """
    missing = [c for c in ("layer", "guess", "special", "token_id", "input_id") if c not in frame]
    if missing:
        raise ValueError(f"copy_rate needs a lens frame; it lacks {missing}")
    top1 = frame[(frame["guess"] == 1) & ~frame["special"]]
    return (top1["token_id"] == top1["input_id"]).groupby(top1["layer"]).mean().rename("copy_rate")

