"""The staged English pretraining text, kept apart from every text the book evaluates on, and
turned into training rows: an uncased WordPiece tokenizer and sequences packed without padding.

Texts are compared in :func:`normalise` form; a pretraining paragraph that equals, contains or
shares a 13-token run with an evaluation text is refused or dropped (the data folder's
SOURCES-english.md describes the same check).
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import re
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from ..core.errors import DupbertError

EVALUATION_FILES = ("wikitext2/wiki.test.raw", "wikitext2/wiki.valid.tokens", "sst2/dev.tsv",
                    "snli/snli_dev.becel.tsv", "squad2/dev-v2.0.reconstructed.json.gz")
PRETRAIN_FILES = ("english/wikipedia.txt.gz", "english/gutenberg.txt.gz")


class CorpusError(DupbertError, ValueError):
    """A pretraining corpus file is missing or empty, or overlaps an evaluation text."""


_WORD = re.compile(r"[a-z0-9]+")
_WIKITEXT_MARKUP = re.compile(r" @(.)@ ")


def normalise(text: str) -> tuple[str, ...]:
    """Lower-cased ``[a-z0-9]+`` tokens, WikiText's ``@-@``/``@,@``/``@.@`` undone, ``<unk>``
    dropped: the form in which texts are compared for overlap (SOURCES-english.md)."""
    text = _WIKITEXT_MARKUP.sub(r"\1", text.replace("<unk>", " "))
    return tuple(_WORD.findall(text.lower()))


def read_documents(path: str | os.PathLike) -> list[list[str]]:
    """Documents of a staged corpus file (one paragraph per line, an empty line between documents;
    ``.gz`` or plain), each a list of paragraphs; CorpusError if missing or empty.
    """
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"pretraining corpus file {path} does not exist; expected a text file "
                          f"with one paragraph per line (the staged files are {list(PRETRAIN_FILES)} "
                          "in the data directory)")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        documents, current = [], []
        for line in handle:
            line = line.strip()
            if line:
                current.append(line)
            elif current:
                documents.append(current)
                current = []
        if current:
            documents.append(current)
    if not documents:
        raise CorpusError(f"pretraining corpus file {path} is empty: it holds no line of text")
    return documents


def evaluation_texts(data_dir: str | os.PathLike) -> dict[str, list[str]]:
    """Every text the book evaluates on, by name (WikiText-2 test and valid, SST-2 dev, SNLI dev,
    SQuAD 2.0 dev contexts and questions): never pretrain on these.
    """
    root = Path(data_dir)
    missing = [r for r in EVALUATION_FILES if not (root / r).is_file()]
    if missing:
        raise CorpusError(f"evaluation files missing under {root}: {missing}; the overlap check "
                          "needs every text the book evaluates on (the shared data folder)")
    texts = {}
    for name, relative in (("wikitext2-test", "wikitext2/wiki.test.raw"),
                           ("wikitext2-valid", "wikitext2/wiki.valid.tokens")):
        texts[name] = [line for line in (root / relative).read_text(encoding="utf-8").split("\n")
                       if line.strip()]
    sst2 = pd.read_csv(root / "sst2/dev.tsv", sep="\t", quoting=3, dtype=str,
                       keep_default_na=False)
    texts["sst2-dev"] = sst2["sentence"].tolist()
    snli = pd.read_csv(root / "snli/snli_dev.becel.tsv", sep="\t", quoting=3, dtype=str,
                       keep_default_na=False)
    texts["snli-dev"] = sorted({*snli["premise"], *snli["hypothesis"]})
    with gzip.open(root / "squad2/dev-v2.0.reconstructed.json.gz", "rt", encoding="utf-8") as f:
        squad = json.load(f)["data"]
    texts["squad2-dev"] = [text for article in squad for paragraph in article["paragraphs"]
                           for text in (paragraph["context"],
                                        *(qa["question"] for qa in paragraph["qas"]))]
    return texts


def overlapping_paragraphs(paragraphs: Sequence[str], evaluation: dict[str, list[str]],
                           min_tokens: int = 8, ngram: int = 13) -> dict[int, str]:
    """Paragraphs that equal an evaluation text (of 4+ tokens), contain one of ``min_tokens``+
    tokens, or share a run of ``ngram`` (>= ``min_tokens``) tokens with one, in :func:`normalise`
    form.

    Only paragraphs holding a run of ``min_tokens`` tokens whose hash is one of the evaluation
    texts' (every such match starts with one) are compared token by token.

    Returns:
        ``{paragraph index: name of the evaluation set it overlaps}``.
    """
    if ngram < min_tokens:
        raise ValueError(f"ngram must be at least min_tokens ({min_tokens}), got {ngram}")
    whole, starts, grams, vocabulary, known = {}, {}, {}, {}, []
    for name, texts in evaluation.items():
        for text in texts:
            tokens = normalise(text)
            if len(tokens) >= 4:
                whole.setdefault(tokens, name)
            if len(tokens) >= min_tokens:
                starts.setdefault(tokens[:min_tokens], []).append((tokens, name))
                ids = [vocabulary.setdefault(t, len(vocabulary) + 1) for t in tokens]
                known.append(_run_hashes(np.asarray(ids, dtype=np.uint64), min_tokens))
            for i in range(len(tokens) - ngram + 1):
                grams.setdefault(hash(tokens[i:i + ngram]), name)
    normalised = [normalise(p) for p in paragraphs]
    found = {index: whole[tokens] for index, tokens in enumerate(normalised) if tokens in whole}
    for index in _candidates(normalised, vocabulary, known, min_tokens):
        tokens = normalised[index]
        for i in range(len(tokens) - min_tokens + 1):
            if index in found:
                break
            for item, name in starts.get(tokens[i:i + min_tokens], ()):
                if tokens[i:i + len(item)] == item:
                    found[index] = name
                    break
            if index not in found and i + ngram <= len(tokens) and \
                    hash(tokens[i:i + ngram]) in grams:
                found[index] = grams[hash(tokens[i:i + ngram])]
    return dict(sorted(found.items()))


def _run_hashes(ids: np.ndarray, n: int) -> np.ndarray:
    """A polynomial hash (uint64, wrapping) of every run of ``n`` consecutive ids: ``[len - n + 1]``."""
    hashes = np.zeros(max(len(ids) - n + 1, 0), dtype=np.uint64)
    for k in range(n):
        hashes = hashes * np.uint64(1_000_003) + ids[k:len(ids) - n + 1 + k]
    return hashes


def _candidates(normalised: Sequence[tuple[str, ...]], vocabulary: dict[str, int],
                known: list[np.ndarray], n: int) -> list[int]:
    """Indices of the paragraphs with a run of ``n`` tokens whose :func:`_run_hashes` value is
    in ``known`` (tokens outside ``vocabulary`` read as 0, which no evaluation run holds)."""
    if not known:
        return []
    lengths = np.fromiter(map(len, normalised), dtype=np.int64, count=len(normalised))
    stream = np.fromiter(map(vocabulary.get, itertools.chain.from_iterable(normalised),
                             itertools.repeat(0)), dtype=np.uint64, count=int(lengths.sum()))
    known = np.unique(np.concatenate(known))
    hashes = _run_hashes(stream, n)
    low = np.zeros(1 << 25, dtype=bool)  # a first pass on the hashes' low 25 bits
    low[known & np.uint64((1 << 25) - 1)] = True
    hits = np.flatnonzero(low[hashes & np.uint64((1 << 25) - 1)])
    at = np.minimum(np.searchsorted(known, hashes[hits]), len(known) - 1)
    hits = hits[known[at] == hashes[hits]]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    # a run across two paragraphs makes both candidates: the comparison token by token decides
    return sorted(set((np.searchsorted(starts, hits, side="right") - 1).tolist()))


def pretraining_documents(data_dir: str | os.PathLike, files: Sequence[str] = PRETRAIN_FILES,
                          on_overlap: str = "error") -> tuple[list[list[str]], dict]:
    """The documents of ``files`` (under ``data_dir``), checked against :func:`evaluation_texts`.

    Args:
        on_overlap: ``"error"`` refuses any overlapping paragraph; ``"drop"`` removes them.

    Returns:
        ``(documents, report)``; the report counts files, documents, paragraphs, words and the
        dropped paragraphs by evaluation set.

    Raises:
        CorpusError: a file (or an evaluation file) is missing or empty, or (``"error"``) a
            paragraph overlaps an evaluation text.
    """
    if on_overlap not in ("error", "drop"):
        raise ValueError(f"on_overlap must be 'error' or 'drop', got {on_overlap!r}")
    documents = [doc for relative in files for doc in read_documents(Path(data_dir) / relative)]
    flat = [(d, p) for d, doc in enumerate(documents) for p in range(len(doc))]
    found = overlapping_paragraphs([documents[d][p] for d, p in flat], evaluation_texts(data_dir))
    if found and on_overlap == "error":
        examples = "; ".join(f"{documents[flat[i][0]][flat[i][1]][:80]!r} ({name})"
                             for i, name in list(found.items())[:3])
        raise CorpusError(f"{len(found)} pretraining paragraph(s) overlap evaluation text, e.g. "
                          f"{examples}. Remove them, or pass on_overlap='drop' to drop them.")
    drop = {flat[i] for i in found}
    kept = [[p for j, p in enumerate(doc) if (d, j) not in drop] for d, doc in enumerate(documents)]
    kept = [doc for doc in kept if doc]
    report = {
        "files": list(files), "documents": len(kept),
        "paragraphs": sum(map(len, kept)),
        "words": sum(len(p.split()) for doc in kept for p in doc),
        "dropped_paragraphs": pd.Series(list(found.values()), dtype=str).value_counts().to_dict(),
    }
    return kept, report


# --------------------------------------------------------------------------------------------------
# Tokenizer and packed sequences.

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def train_tokenizer(documents: Sequence[Sequence[str]], vocab_size: int, out: str | os.PathLike):
    """Train and save an uncased WordPiece ``PreTrainedTokenizerFast`` (BERT's normaliser and
    pre-tokeniser) loadable by ``AutoTokenizer.from_pretrained(out)``.
    """
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizerFast

    wordpiece = BertWordPieceTokenizer(lowercase=True, strip_accents=True, clean_text=True)
    wordpiece.train_from_iterator((p for doc in documents for p in doc), vocab_size=vocab_size,
                                  min_frequency=2, special_tokens=list(SPECIAL_TOKENS),
                                  show_progress=False)
    tokenizer = BertTokenizerFast(tokenizer_object=wordpiece._tokenizer, do_lower_case=True,
                                  model_max_length=512)
    tokenizer.save_pretrained(out)
    return tokenizer


def pack(tokenizer, documents: Iterable[Sequence[str]], seq_length: int) -> np.ndarray:
    """Token ids packed without padding: ``[n, seq_length]`` uint16 rows ``[CLS] ... [SEP]``;
    documents joined with ``[SEP]``, the last short piece dropped.
    """
    body = seq_length - 2
    stream: list[int] = []
    for doc in documents:
        for ids in tokenizer(list(doc), add_special_tokens=False)["input_ids"]:
            stream.extend(ids)
        stream.append(tokenizer.sep_token_id)
    n = len(stream) // body
    rows = np.asarray(stream[:n * body], dtype=np.uint16).reshape(n, body)
    cls = np.full((n, 1), tokenizer.cls_token_id, dtype=np.uint16)
    sep = np.full((n, 1), tokenizer.sep_token_id, dtype=np.uint16)
    return np.concatenate([cls, rows, sep], axis=1)
