"""MLM quality: can a model's head predict a masked word at all?

*Masked top-1*: on held-out text, a seeded 15% of each sequence's non-special tokens are chosen
and **every** chosen token is replaced by the mask token (no 80/10/10, so nothing can be copied);
the score is the top-1 accuracy of the whole model (its head on the last hidden state) at those
positions. Beside it, the *most-frequent-token baseline*: the share of those positions whose token
is the most frequent one among them (always answering that token scores exactly this). An MLM
that predicts from context clears the baseline many times over; one at the unigram plateau
scores about the baseline.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Sequence

import pandas as pd
import transformers

from .data import default_corpus, load_texts
from .hidden import TruncationWarning, mask_for_probe, tokenize_for_probe
from .models import load_mlm
from .probe import masked_prediction_accuracy

ENGLISH_HELDOUT = "wikitext2-valid"
N_SEQUENCES = 200
MAX_LENGTH = 128  # tokens: the positions the English models here were trained on
QUALITY_COLUMNS = ["model", "corpus", "n_sequences", "n_masked", "top1", "top1_low", "top1_high",
                   "top5", "majority_token", "majority_top1"]
"""``top1_low``/``top1_high``: 95% bootstrap interval over resampled sequences."""


def heldout_corpus(model_name: str) -> str:
    """The held-out text a model's MLM quality is measured on: its domain corpus for the domain
    models (``dupbert.data.default_corpus``), clean WikiText-2 valid for every other (English)
    model."""
    domain = default_corpus(model_name)
    return ENGLISH_HELDOUT if domain == "wikitext2" else domain


def masked_top1(model: transformers.PreTrainedModel,
                tokenizer: transformers.PreTrainedTokenizerBase, texts: Sequence[str],
                mask_rate: float = 0.15, seed: int = 0, max_length: int = MAX_LENGTH,
                batch_size: int = 32) -> dict:
    """Masked top-1 of ``model`` on ``texts`` with the most-frequent-token baseline on the same
    positions.

    Returns:
        ``n_sequences, n_masked, top1, top1_low, top1_high, top5, majority_token,
        majority_top1`` (fractions; the interval a 95% bootstrap over sequences).

    Raises:
        As ``dupbert.probe.masked_prediction_accuracy``.
    """
    with warnings.catch_warnings():  # paragraphs are read to max_length tokens, by design
        warnings.simplefilter("ignore", TruncationWarning)
        frame = masked_prediction_accuracy(model, tokenizer, texts, mask_rate=mask_rate,
                                           rule="mask", seed=seed, batch_size=batch_size,
                                           max_length=max_length, progress=False)
        examples = mask_for_probe(tokenize_for_probe(tokenizer, list(texts), max_length),
                                  tokenizer, mask_rate, "mask", seed)
    last = frame.iloc[-1]
    targets = Counter(label for example in examples for label in example["labels"] if label >= 0)
    token, count = targets.most_common(1)[0]
    return {"n_sequences": int(last["n_sequences"]), "n_masked": int(last["n_tokens"]),
            "top1": float(last["top1"]), "top1_low": float(last["top1_low"]),
            "top1_high": float(last["top1_high"]), "top5": float(last["top5"]),
            "majority_token": tokenizer.convert_ids_to_tokens(int(token)),
            "majority_top1": count / sum(targets.values())}


def quality_table(models: Sequence[str], n_sequences: int = N_SEQUENCES, seed: int = 0,
                  max_length: int = MAX_LENGTH, device: str = "cpu") -> pd.DataFrame:
    """:func:`masked_top1` of each model (zoo name, folder or Hub id) on its
    :func:`heldout_corpus`, one row each (:data:`QUALITY_COLUMNS`).

    Raises:
        As ``dupbert.models.load_mlm`` and ``dupbert.data.load_texts``.
    """
    rows = []
    for name in models:
        model, tokenizer = load_mlm(name, device=device)
        corpus = heldout_corpus(name)
        texts = load_texts(corpus, n_sequences)
        rows.append({"model": name, "corpus": corpus,
                     **masked_top1(model, tokenizer, texts, seed=seed, max_length=max_length)})
    return pd.DataFrame(rows, columns=QUALITY_COLUMNS)

