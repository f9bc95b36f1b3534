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

from ..core.data import default_corpus, load_texts
from ..tools.hidden import TruncationWarning, mask_for_probe, tokenize_for_probe
from ..tools.models import load_mlm
from ..tools.probe import masked_prediction_accuracy

ENGLISH_HELDOUT = "wikitext2-valid"
N_SEQUENCES = 200
MAX_LENGTH = 128  # tokens: the positions the English models here were trained on
QUALITY_COLUMNS = ["model", "corpus", "n_sequences", "n_masked", "top1", "top1_low", "top1_high",
                   "top5", "majority_token", "majority_top1"]
"""``top1_low``/``top1_high``: 95% bootstrap interval over resampled sequences."""


def heldout_corpus(model_name: str) -> str:
    """The held-out text a model's MLM quality is measured on: its domain corpus for the domain
    models (``dupbert.core.data.default_corpus``), clean WikiText-2 valid for every other (English)
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
        As ``dupbert.tools.probe.masked_prediction_accuracy``.
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
        As ``dupbert.tools.models.load_mlm`` and ``dupbert.core.data.load_texts``.
    """
    rows = []
    for name in models:
        model, tokenizer = load_mlm(name, device=device)
        corpus = heldout_corpus(name)
        texts = load_texts(corpus, n_sequences)
        rows.append({"model": name, "corpus": corpus,
                     **masked_top1(model, tokenizer, texts, seed=seed, max_length=max_length)})
    return pd.DataFrame(rows, columns=QUALITY_COLUMNS)



WHOLE_COLUMNS = ["model", "corpus", "n_documents", "n_sequences", "n_masked", "top1", "top1_low",
                 "top1_high", "majority_top1"]
"""Of :func:`whole_set_quality`: ``top1_low``/``top1_high`` a 95% bootstrap over documents."""
WHOLE_CORPUS = {"wikitext2-valid": "wikitext2"}
"""The whole held-out set of a registered measure's corpus: English models on every WikiText-2
test paragraph; a domain model on its whole domain corpus."""


def documents(corpus: str, rows) -> list:
    """The document of each row of ``corpus`` (``dupbert.core.data.load_corpus``): WikiText-2 test's
    article (counted at each top-level heading ``= Title =`` of the raw file), USPTO-50k's patent,
    Thera-SAbDab's therapeutic; a corpus without documents: each row its own."""
    from ..core.data import local_file, resolve_data_dir

    if corpus == "wikitext2":
        lines = local_file(resolve_data_dir(), "wikitext2/wiki.test.raw", None, "WikiText-2 test",
                           "the data folder").read_text(encoding="utf-8").split("\n")
        starts = [i for i, line in enumerate(lines)
                  if line.strip().startswith("= ") and not line.strip().startswith("= =")]
        return [sum(start <= line for start in starts) for line in rows["line"]]
    column = {"uspto50k-test": "id", "uspto50k-valid": "id", "therasabdab": "therapeutic"}.get(corpus)
    return list(rows[column]) if column else list(range(len(rows["text"])))


def masked_hits(model: transformers.PreTrainedModel, tokenizer, texts: Sequence[str],
                mask_rate: float = 0.15, seed: int = 0, max_length: int = MAX_LENGTH,
                batch_size: int = 32):
    """Per sequence, ``(hits, counts)`` of masked top-1 at the output (every chosen token masked,
    the positions of :func:`masked_top1`), and the chosen tokens' labels, all as numpy arrays."""
    import numpy as np
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncationWarning)
        examples = mask_for_probe(tokenize_for_probe(tokenizer, list(texts), max_length),
                                  tokenizer, mask_rate, "mask", seed)
    hits, counts, labels = np.zeros(len(examples)), np.zeros(len(examples)), []
    order = sorted(range(len(examples)), key=lambda i: len(examples[i]["input_ids"]))
    model.eval()
    for start in range(0, len(order), batch_size):
        batch = [examples[i] for i in order[start:start + batch_size]]
        width = max(len(e["input_ids"]) for e in batch)
        ids = torch.full((len(batch), width), tokenizer.pad_token_id)
        gold = torch.full((len(batch), width), -100)
        for row, e in enumerate(batch):
            ids[row, :len(e["input_ids"])] = torch.tensor(e["input_ids"])
            gold[row, :len(e["labels"])] = torch.tensor(e["labels"])
        with torch.inference_mode():
            logits = model(input_ids=ids, attention_mask=(ids != tokenizer.pad_token_id).long()
                           if tokenizer.pad_token_id is not None else None).logits
        right = (logits.argmax(-1) == gold) & (gold >= 0)
        for row, i in enumerate(order[start:start + batch_size]):
            hits[i], counts[i] = float(right[row].sum()), float((gold[row] >= 0).sum())
        labels.extend(gold[gold >= 0].tolist())
    return hits, counts, np.asarray(labels)


def whole_set_quality(models: Sequence[str], seed: int = 0, max_length: int = MAX_LENGTH,
                      device: str = "cpu") -> pd.DataFrame:
    """Masked top-1 of each model on the whole of its held-out set (:data:`WHOLE_CORPUS`), with a
    95% percentile bootstrap over *documents* (articles, patents, therapeutics; 2,000 resamples,
    seed 0): sequences of one document are not independent, and a few consecutive sequences come
    from a few documents, so a bootstrap over sequences is too narrow. One row each
    (:data:`WHOLE_COLUMNS`).

    Raises:
        As ``dupbert.tools.models.load_mlm`` and ``dupbert.core.data.load_corpus``.
    """
    import numpy as np

    from ..core.data import load_corpus
    from ..core.significance import ratio_bootstrap

    rows = []
    for name in models:
        corpus = heldout_corpus(name)
        corpus = WHOLE_CORPUS.get(corpus, corpus)
        data = load_corpus(corpus)
        model, tokenizer = load_mlm(name, device=device)
        hits, counts, labels = masked_hits(model, tokenizer, data["text"], seed=seed,
                                           max_length=max_length)
        doc = pd.Series(documents(corpus, data)).astype(str)
        per_doc = pd.DataFrame({"doc": doc, "hits": hits, "counts": counts}).groupby(
            "doc", sort=False).sum()
        low, high = ratio_bootstrap(per_doc["hits"].to_numpy()[None, :], per_doc["counts"].to_numpy())
        rows.append(dict(model=name, corpus=corpus, n_documents=len(per_doc),
                         n_sequences=int((counts > 0).sum()), n_masked=int(counts.sum()),
                         top1=hits.sum() / counts.sum(), top1_low=float(low[0]),
                         top1_high=float(high[0]),
                         majority_top1=float(np.bincount(labels).max() / len(labels))))
    return pd.DataFrame(rows, columns=WHOLE_COLUMNS)


def beside_whole_set(registered: pd.DataFrame, whole: pd.DataFrame) -> pd.DataFrame:
    """The registered measure (:func:`quality_table`) beside the whole held-out set
    (:func:`whole_set_quality`), one row per model of both, with the MLM-quality floor's verdict
    under each (``dupbert.training.model_card.clears_mlm_floor``); top-1 to 3 decimals."""
    from .model_card import clears_mlm_floor

    both = registered.merge(whole, on="model", suffixes=("", "_whole"))
    both.index = pd.Index(both["model"], name="model")

    def cell(top1, low, high):
        return f"{top1:.3f} [{low:.3f}, {high:.3f}]"

    def floor(top1, baseline):
        return "clears" if clears_mlm_floor(top1, baseline) else "below"

    # lists and Series on both.index, so that every column lines up with its model

    return pd.DataFrame({
        "registered: sequences": both["n_sequences"],
        "registered: masked top-1 [95% CI, sequences]": [
            cell(*r) for r in zip(both["top1"], both["top1_low"], both["top1_high"])],
        "registered: floor": [floor(*r) for r in zip(both["top1"], both["majority_top1"])],
        "whole set": [f"{c}: {d:,} documents, {n:,} masked" for c, d, n in
                      zip(both["corpus_whole"], both["n_documents"], both["n_masked_whole"])],
        "whole set: masked top-1 [95% CI, documents]": [
            cell(*r) for r in zip(both["top1_whole"], both["top1_low_whole"],
                                  both["top1_high_whole"])],
        "whole set: baseline": both["majority_top1_whole"].map("{:.3f}".format),
        "whole set: floor": [floor(*r) for r in zip(both["top1_whole"], both["majority_top1_whole"])],
    }, index=both.index)
