"""Tokenise texts for the probes and run a model for its hidden states in length-grouped batches,
shared by RQ1's probe, RQ2's statistics and the linear translator. Hidden state 0 is the
embedding output, ``l`` the output of block ``l - 1``, read before any final norm.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import torch
import transformers

from ..core.checks import check_number

IGNORE = -100  # label of a position that does not count (transformers' convention)


def check_max_length(max_length: int) -> int:
    """``max_length`` if it is a whole number of tokens >= 3 (CLS, a token, SEP; tokenizers read 0
    or ``None`` as no truncation).

    Raises:
        ParameterError: not an integer.
        ValueError: below 3.
    """
    max_length = check_number("max_length", max_length, integer=True)
    if max_length < 3:
        raise ValueError(f"max_length must be at least 3 (CLS, a token, SEP), got {max_length}")
    return max_length


class TruncationWarning(UserWarning):
    """Sequences longer than ``max_length`` tokens were cut to it (the probe and the lens)."""


def warn_if_truncated(tokenizer: transformers.PreTrainedTokenizerBase, texts: Sequence[str],
                      max_length: int) -> int:
    """Warn (:class:`TruncationWarning`) how many of ``texts`` exceed ``max_length`` tokens
    (specials included) and are cut; returns that number.
    """
    untruncated = tokenizer(list(texts), add_special_tokens=False, verbose=False)["input_ids"]
    lengths = [len(ids) + tokenizer.num_special_tokens_to_add(pair=False) for ids in untruncated]
    n_cut = sum(length > max_length for length in lengths)
    if n_cut:
        warnings.warn(f"{n_cut} of {len(lengths)} sequences are longer than max_length="
                      f"{max_length} tokens (special tokens included; the longest has "
                      f"{max(lengths)}) and were cut to their first {max_length} tokens",
                      TruncationWarning, stacklevel=3)
    return n_cut


def tokenize_for_probe(
    tokenizer: transformers.PreTrainedTokenizerBase, texts: Sequence[str], max_length: int = 512
) -> list[dict[str, list[int]]]:
    """Tokenise ``texts`` (any iterable of strings) one by one with special tokens, truncated to
    ``max_length`` (or the tokenizer's smaller ``model_max_length``).

    Returns:
        One dict per text: ``input_ids`` and ``special_tokens_mask`` (lists of equal length; 1 at
        special tokens and at the unknown token, which no probe scores).

    Warns:
        TruncationWarning: how many texts were cut.

    Raises:
        ValueError: ``texts`` empty or a string, an item not a string (position given), or a bad
            ``max_length``.
    """
    if isinstance(texts, str):
        raise ValueError("texts must be a sequence of strings, got a single string")
    max_length = check_max_length(max_length)
    texts = list(texts)
    if len(texts) == 0:
        raise ValueError("texts is empty: the probe needs at least one sequence")
    not_text = [(position, text) for position, text in enumerate(texts) if not isinstance(text, str)]
    if not_text:
        position, text = not_text[0]
        raise ValueError(f"texts must all be strings: texts[{position}] is {text!r} "
                         f"({type(text).__name__}); {len(not_text)} of {len(texts)} are not")
    # a model that takes fewer positions (its tokenizer's model_max_length) gets that many
    max_length = min(max_length, tokenizer.model_max_length or max_length)
    warn_if_truncated(tokenizer, texts, max_length)
    encoded = tokenizer(
        texts, truncation=True, max_length=max_length, return_special_tokens_mask=True
    )
    unknown = tokenizer.unk_token_id  # the word it stands for is lost: nothing to score there
    return [
        {"input_ids": ids,
         "special_tokens_mask": [int(bool(s) or i == unknown) for i, s in zip(ids, special)]}
        for ids, special in zip(encoded["input_ids"], encoded["special_tokens_mask"])
    ]


def length_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Every index once, in batches of at most ``batch_size`` of similar length (longest first);
    ParameterError (a ValueError) if ``batch_size`` is not an integer >= 1.
    """
    batch_size = check_number("batch_size", batch_size, integer=True, minimum=1)
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    return [order[start:start + batch_size] for start in range(0, len(order), batch_size)]


def pad_batch(examples: list[dict[str, list[int]]], pad_id: int) -> dict[str, torch.Tensor]:
    """Pad examples (``tokenize_for_probe`` or ``mask_for_probe``) to ``[B, T]`` tensors
    ``input_ids``, ``attention_mask``, ``counted`` (positions that count) and ``labels`` (the
    token a counted position should give; ``-100`` elsewhere).
    """
    width = max(len(e["input_ids"]) for e in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(examples), width), dtype=torch.long)
    labels = torch.full((len(examples), width), IGNORE, dtype=torch.long)
    for row, example in enumerate(examples):
        n = len(example["input_ids"])
        ids[row, :n] = torch.tensor(example["input_ids"])
        attention[row, :n] = 1
        if "labels" in example:
            labels[row, :n] = torch.tensor(example["labels"])
        else:
            special = torch.tensor(example["special_tokens_mask"]) != 0
            labels[row, :n] = ids[row, :n].masked_fill(special, IGNORE)
    return {"input_ids": ids, "attention_mask": attention, "counted": labels != IGNORE,
            "labels": labels}


def batch_hidden_states(model: transformers.PreTrainedModel, batch: dict[str, torch.Tensor],
                        device: torch.device) -> tuple[torch.Tensor, ...]:
    """All hidden states of a :func:`pad_batch` batch: ``L + 1`` tensors ``[B, T, H]``, as
    :func:`encoder_hidden_states`; ValueError if the model returns another number of them.
    """
    hidden_states = encoder_hidden_states(model, batch["input_ids"].to(device),
                                          batch["attention_mask"].to(device))
    n_states = model.config.num_hidden_layers + 1
    if len(hidden_states) != n_states:
        raise ValueError(
            f"model returned {len(hidden_states)} hidden states, config says "
            f"{n_states} (num_hidden_layers + 1)"
        )
    return hidden_states


def encoder_hidden_states(model: transformers.PreTrainedModel, input_ids: torch.Tensor,
                          attention_mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """All hidden states of the encoder, ``L + 1`` tensors ``[B, T, H]``: 0 is the input of the
    first block (``MLMFamily.hidden_state_0``), ``l`` the output of block ``l - 1``, each
    *before* any final norm (which ``mlm_head`` applies). Sets
    ``config.tie_last_hidden_states = False`` for the call, so transformers 5 does not replace the
    last one (book/methods.md, "Model families").
    """
    config = model.config
    before = config.__dict__.get("tie_last_hidden_states", _UNSET)
    config.tie_last_hidden_states = False
    try:
        outputs = model.base_model(input_ids=input_ids, attention_mask=attention_mask,
                                   output_hidden_states=True)
    finally:
        if before is _UNSET:
            del config.tie_last_hidden_states
        else:
            config.tie_last_hidden_states = before
    return outputs.hidden_states


_UNSET = object()


MASKING_RULES = ("mask", "80-10-10")


def check_mask_rate(mask_rate: float) -> None:
    if isinstance(mask_rate, bool) or not isinstance(mask_rate, (int, float, np.number)) \
            or not 0 < mask_rate <= 1:
        raise ValueError(f"mask_rate must be in (0, 1], got {mask_rate!r}")


def mask_for_probe(
    examples: list[dict[str, list[int]]],
    tokenizer: transformers.PreTrainedTokenizerBase,
    mask_rate: float = 0.15,
    rule: str = "mask",
    seed: int = 0,
) -> list[dict[str, list[int]]]:
    """Mask a seeded ``mask_rate`` of the non-special positions of each example (the selection of
    Devlin et al. 2019, section 3.1).

    Per sequence ``i``, ``max(1, round(mask_rate * n))`` of its ``n`` non-special positions are
    drawn by ``numpy.random.default_rng([seed, i])`` (independent of batching). ``"mask"``: every
    chosen token becomes the mask token; ``"80-10-10"``: BERT's rule (80% mask, 10% a random
    token, 10% unchanged).

    Args:
        examples: from ``tokenize_for_probe`` (``input_ids``, ``special_tokens_mask``).

    Returns:
        New examples with masked ``input_ids`` and ``labels`` (the original token at chosen
        positions, ``-100`` elsewhere).

    Raises:
        ValueError: ``mask_rate`` not in (0, 1], ``seed`` not an integer >= 0, an unknown
            ``rule``, or a tokenizer without a mask token.
    """
    check_mask_rate(mask_rate)
    seed = check_number("seed", seed, integer=True, minimum=0)
    if rule not in MASKING_RULES:
        raise ValueError(f"unknown masking rule {rule!r}; rules are {list(MASKING_RULES)}")
    if tokenizer.mask_token_id is None:
        raise ValueError(f"{type(tokenizer).__name__} has no mask token: masked prediction needs "
                         "one (tokenizer.mask_token)")
    masked = []
    for index, example in enumerate(examples):
        ids = list(example["input_ids"])
        labels = [IGNORE] * len(ids)
        candidates = [p for p, special in enumerate(example["special_tokens_mask"]) if not special]
        rng = np.random.default_rng([seed, index])
        if candidates:
            n_masked = max(1, int(round(mask_rate * len(candidates))))
            for position in sorted(rng.choice(candidates, size=n_masked, replace=False).tolist()):
                labels[position] = ids[position]
                draw = rng.random() if rule == "80-10-10" else 0.0
                if draw < 0.8:
                    ids[position] = tokenizer.mask_token_id
                elif draw < 0.9:
                    ids[position] = int(rng.integers(len(tokenizer)))
        masked.append({"input_ids": ids, "special_tokens_mask": example["special_tokens_mask"],
                       "labels": labels})
    return masked
