"""Reaction SMILES for pretraining from random init: the USPTO-50k validation reactions to train
on, a fixed sample of the USPTO-50k test reactions held out of every step, both tokenised with
rxnfp-bert's tokenizer (591 entries: atoms, bonds, ring closures and the arrow are one token each).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

TOKENIZER_MODEL = "rxnfp-bert"
TRAIN_CORPUS, HELDOUT_CORPUS = "uspto50k-valid", "uspto50k-test"
N_HELDOUT = 300
"""Held-out reactions the emergence record is measured on (a seeded sample of the test split)."""


def heldout_reactions(data_dir: str | os.PathLike | None, n: int = N_HELDOUT) -> list[str]:
    """``n`` USPTO-50k test reactions, drawn once with seed 0 and kept in file order.

    Raises:
        CorpusNotFound: the test file is missing (names it).
    """
    from ..core.data import load_corpus

    test = load_corpus(HELDOUT_CORPUS, data_dir=data_dir)["text"]
    chosen = np.sort(np.random.default_rng(0).choice(len(test), size=min(n, len(test)),
                                                     replace=False))
    return [test[i] for i in chosen]


def training_reactions(data_dir: str | os.PathLike | None) -> tuple[list[str], dict]:
    """The USPTO-50k validation reactions less any that also occurs among the test reactions
    (exact string), in file order; and a report of the counts."""
    from ..core.data import load_corpus

    train = load_corpus(TRAIN_CORPUS, data_dir=data_dir)["text"]
    test = set(load_corpus(HELDOUT_CORPUS, data_dir=data_dir)["text"])
    kept = [reaction for reaction in train if reaction not in test]
    return kept, dict(corpus=TRAIN_CORPUS, reactions=len(train), dropped_in_test=len(train) - len(kept))


def reaction_rows(tokenizer, reactions: list[str], seq_length: int) -> np.ndarray:
    """``[n, seq_length]`` uint16 token ids, ``[CLS] reaction [SEP]`` then ``[PAD]``; a reaction
    longer than ``seq_length`` tokens is cut there."""
    encoded = tokenizer(list(reactions), truncation=True, max_length=seq_length,
                        padding="max_length")["input_ids"]
    return np.asarray(encoded, dtype=np.uint16)


def trim(batch, pad_id: int):
    """``(batch, attention_mask)``: a ``[B, T]`` batch cut after its longest row, and its mask
    (1 on real tokens)."""
    real = batch != pad_id
    length = int(real.sum(1).max())
    return batch[:, :length], real[:, :length].long()


def prepare_reactions(seq_length: int, data_dir: str | os.PathLike, work: str | os.PathLike
                      ) -> tuple[object, np.ndarray, dict]:
    """rxnfp-bert's tokenizer (``work/tokenizer-rxnfp-bert``) and the training rows
    (``work/train-reactions-<T>.npy``), built once with atomic writes; and the corpus report
    (reactions, dropped, tokens without padding, longest, cut)."""
    from transformers import AutoTokenizer

    from ..core.results import atomic_folder, atomic_save_npy
    from ..core.zoo import zoo_folder

    work = Path(work)
    tok_dir, rows_path = work / f"tokenizer-{TOKENIZER_MODEL}", work / f"train-reactions-{seq_length}.npy"
    if not tok_dir.is_dir():
        with atomic_folder(tok_dir) as tmp:
            AutoTokenizer.from_pretrained(zoo_folder(TOKENIZER_MODEL)).save_pretrained(tmp)
    tokenizer = AutoTokenizer.from_pretrained(tok_dir)
    reactions, report = training_reactions(data_dir)
    lengths = [len(ids) for ids in tokenizer(reactions)["input_ids"]]
    report.update(tokens=int(sum(min(n, seq_length) for n in lengths)), longest=max(lengths),
                  cut=sum(n > seq_length for n in lengths))
    if rows_path.is_file():
        return tokenizer, np.load(rows_path), report
    rows = reaction_rows(tokenizer, reactions, seq_length)
    atomic_save_npy(rows_path, rows)
    return tokenizer, rows, report
