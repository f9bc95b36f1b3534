"""Pretraining small English BERT and ALBERT MLMs from scratch, with the emergence record.

No English MLM with its head loads offline, so ``bert-en-small`` and ``albert-en-small`` are
pretrained here (book/methods.md, "English BERT and ALBERT pretrained here"). Objective: BERT's
MLM (Devlin et al. 2019, §3.1: 15%, 80/10/10, dynamic masking, tied decoder), no NSP/SOP, on
sequences packed without padding, the decoder on masked positions only (the same loss).
At log-spaced steps the run records, on held-out WikiText-2 valid text, the MLM loss and the
RQ1 probes from every hidden state. Every step is seeded by ``(seed, step)``: a resumed run
continues exactly.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from .checks import check_number
from .emergence import MOST_FREQUENT
from .errors import DupbertError
from .pretrain_corpus import (SPECIAL_TOKENS, CorpusError, pack, pretraining_documents,
                              train_tokenizer)
from .pretrain_publish import STAGE_FILE, publish, write_json
from .results import append_rows, drop_rows_after
from .zoo import BUNDLED as WEIGHTS, cache_dir, weights_dir

ARCHITECTURES = ("bert", "albert")
CORPORA = ("english", "reactions")
LOSS_COLUMNS = ["model", "step", "tokens_seen", "loss", "lr", "elapsed_s"]
EMERGENCE_COLUMNS = ["model", "step", "tokens_seen", "measure", "layer", "top1", "top5",
                     "n_tokens", "loss"]


class CheckpointMismatch(DupbertError, ValueError):
    """A checkpoint to resume from was made with another configuration."""


@dataclass(frozen=True)
class PretrainConfig:
    """One pretraining run; every field is part of the checkpoint's identity.

    ``seq_length`` in tokens (specials included), ``batch_size`` in sequences; ``learning_rate`` is
    AdamW's peak, reached after ``warmup_steps``, decayed linearly to 0 at ``total_steps``. A run
    with ``stage_steps`` is cut into stages of that many steps, each short enough to end within
    one working session: every stage warms up anew, decays to 0 at its end and is published
    there, and the next stage starts from the published weights (:func:`pretrain`).
    """

    name: str
    architecture: str
    vocab_size: int = 16384
    hidden_size: int = 256
    num_layers: int = 6
    num_heads: int = 4
    intermediate_size: int = 1024
    embedding_size: int = 128  # ALBERT's factorised embedding; BERT ignores it
    seq_length: int = 128
    batch_size: int = 32
    learning_rate: float = 5e-4
    warmup_steps: int = 160
    weight_decay: float = 0.01
    total_steps: int = 1000
    mask_rate: float = 0.15
    dropout: float = 0.1
    seed: int = 0
    evals_per_decade: int = 5
    checkpoint_every: int = 100
    init: str | None = None  # zoo name of a pretrained encoder to continue from; None: from scratch
    head_learning_rate: float | None = None  # the MLM head's peak learning rate; None: learning_rate
    freeze_embeddings: bool = False  # keep the (tied) input embeddings as they are
    heldout_unk: str = "keep"  # WikiText's <unk> in the held-out text: "keep" or "[UNK]"
    grow: tuple[int, ...] | None = None  # block order applied to the init model before training
    target_top1: float | None = None  # stop at the first evaluation with masked top-1 >= this
    stage_steps: int | None = None  # steps per stage; None: one stage of total_steps
    stage_gate: float | None = None  # a further stage only if masked top-1 ended >= this
    stage_gate_from: int = 1  # the first stage whose end the gate judges
    corpus: str = "english"  # "reactions": USPTO-50k SMILES, rxnfp-bert's tokenizer
    dense_evals: tuple[int, int, int] | None = None  # (first, last, every): more evaluated steps

    def __post_init__(self):
        if self.architecture not in ARCHITECTURES:
            raise ValueError(f"architecture must be one of {list(ARCHITECTURES)}, got "
                             f"{self.architecture!r}")
        if self.corpus not in CORPORA:
            raise ValueError(f"corpus must be one of {list(CORPORA)}, got {self.corpus!r}")
        if self.corpus == "reactions" and self.init is not None:
            raise ValueError("a reactions run starts from random init: init must be None")
        if self.dense_evals is not None:
            first, last, every = self.dense_evals
            for field, value in (("dense_evals first", first), ("dense_evals every", every)):
                check_number(field, value, integer=True, minimum=1)
            check_number("dense_evals last", last, integer=True, minimum=first,
                         maximum=self.total_steps)
        check_number("vocab_size", self.vocab_size, integer=True, minimum=len(SPECIAL_TOKENS) + 100,
                     maximum=65535)
        for field in ("hidden_size", "num_layers", "num_heads", "intermediate_size",
                      "embedding_size", "batch_size", "total_steps", "evals_per_decade",
                      "checkpoint_every"):
            check_number(field, getattr(self, field), integer=True, minimum=1)
        check_number("seq_length", self.seq_length, integer=True, minimum=8, maximum=512)
        if self.stage_steps is not None:
            check_number("stage_steps", self.stage_steps, integer=True, minimum=1,
                         maximum=self.total_steps)
            if self.total_steps % self.stage_steps:
                raise ValueError(f"total_steps {self.total_steps} is not a multiple of "
                                 f"stage_steps {self.stage_steps}")
        check_number("warmup_steps", self.warmup_steps, integer=True, minimum=0,
                     maximum=self.stage_size)
        check_number("learning_rate", self.learning_rate, above=0, maximum=1)
        check_number("mask_rate", self.mask_rate, above=0, below=1)
        check_number("dropout", self.dropout, minimum=0, below=1)
        check_number("seed", self.seed, integer=True, minimum=0)
        if self.grow and len(self.grow) != self.num_layers:
            raise ValueError(f"grow {list(self.grow)} gives {len(self.grow)} blocks, but "
                             f"num_layers is {self.num_layers}")
        for field in ("target_top1", "stage_gate"):
            if getattr(self, field) is not None:
                check_number(field, getattr(self, field), above=0, maximum=1)
        check_number("stage_gate_from", self.stage_gate_from, integer=True, minimum=1,
                     maximum=self.total_steps // self.stage_size)
        if self.head_learning_rate is not None:
            check_number("head_learning_rate", self.head_learning_rate, above=0, maximum=1)
        if self.heldout_unk not in ("keep", "[UNK]"):
            raise ValueError(f"heldout_unk must be 'keep' or '[UNK]', got {self.heldout_unk!r}")
        if (self.freeze_embeddings or self.grow) and self.init is None:
            raise ValueError("freeze_embeddings and grow need init: a model trained from scratch "
                             "has no embeddings or blocks to keep or copy")
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not a multiple of num_heads "
                             f"{self.num_heads}")

    @property
    def stage_size(self) -> int:
        """Steps per stage: ``stage_steps``, or ``total_steps`` for a run of one stage."""
        return self.stage_steps or self.total_steps

    def stage_end(self, step: int) -> int:
        """The last step of the stage that the step after ``step`` belongs to (steps count from
        1; ``total_steps`` at and past the end)."""
        return min(self.total_steps, (step // self.stage_size + 1) * self.stage_size)

    def eval_steps(self) -> list[int]:
        """Step 0, steps ``round(10 ** (1 + k / evals_per_decade))`` below ``total_steps``
        (10, 16, 25, 40, 63, 100, ... for 5 per decade), every ``dense_evals`` step, and the
        end of every stage."""
        steps, k = {0, *range(self.stage_size, self.total_steps + 1, self.stage_size)}, 0
        if self.dense_evals is not None:
            first, last, every = self.dense_evals
            steps.update(range(first, last + 1, every))
        while (step := int(round(10 ** (1 + k / self.evals_per_decade)))) < self.total_steps:
            steps.add(step)
            k += 1
        return sorted(steps)


MODELS: dict[str, PretrainConfig] = {
    # from scratch: same tokenizer, data, schedule and seed
    "bert-en-small": PretrainConfig(name="bert-en-small", architecture="bert"),
    "albert-en-small": PretrainConfig(name="albert-en-small", architecture="albert"),
    # all-MiniLM-L6-v2's body continued with a new MLM head (Gururangan et al. 2020); its input
    # embeddings, tied to the decoder, stay the wheel's, so only blocks and head are published
    "minilm-mlm-en": PretrainConfig(
        name="minilm-mlm-en", architecture="bert", init="all-MiniLM-L6-v2", vocab_size=30522,
        hidden_size=384, num_layers=6, num_heads=12, intermediate_size=1536,
        learning_rate=2e-4, head_learning_rate=2e-3, warmup_steps=120, total_steps=1200,
        checkpoint_every=50, freeze_embeddings=True, heldout_unk="[UNK]"),
    # the emergence record continued past the plateau: at most 4,000 more steps in stages of
    # 1,000, stopping at the first evaluation where masked top-1 at the output reaches 0.25
    # (emergence chapter); a third stage only if the second ended predicting (masked top-1 at
    # least 0.15), as for the English ALBERT (Methods, 2026-12-05)
    "bert-en-small-continued": PretrainConfig(
        name="bert-en-small-continued", architecture="bert", init="bert-en-small",
        learning_rate=1e-3, warmup_steps=200, total_steps=4000, stage_steps=1000, seed=1,
        heldout_unk="[UNK]", target_top1=0.25, stage_gate=0.15, stage_gate_from=2),
    # English ALBERT, route (a): albert-en-small continued past the plateau with a fresh warm-up,
    # twice the peak learning rate and six times the horizon
    "albert-en-small-continued": PretrainConfig(
        name="albert-en-small-continued", architecture="albert", init="albert-en-small",
        learning_rate=1e-3, warmup_steps=200, total_steps=6000, heldout_unk="[UNK]"),
    # English ALBERT, route (b): all-MiniLM-L6-v2 made recursive (dupbert.recursive), uptrained
    # with minilm-mlm-en's data order; at most 4,000 steps in stages of 1,000 (about 2.5 hours
    # each on a shared core, so that a stage ends, and commits its weights, within one session);
    # a further stage only if the last one ended with masked top-1 >= 0.15 (Methods, 2026-12-05)
    "albert-minilm-en": PretrainConfig(
        name="albert-minilm-en", architecture="albert", init="all-MiniLM-L6-v2", vocab_size=30522,
        hidden_size=384, num_layers=6, num_heads=12, intermediate_size=1536, embedding_size=128,
        learning_rate=5e-4, head_learning_rate=2e-3, warmup_steps=100, total_steps=4000,
        stage_steps=1000, stage_gate=0.15, checkpoint_every=50, heldout_unk="[UNK]"),
}


# The growth arm (RQ3 chapter): minilm-mlm-en with copy first 3, continued for a fixed 400 steps,
# and its control, continued unduplicated for the same steps, both with the head's recipe.
_GROWTH = dict(init="minilm-mlm-en", warmup_steps=40, total_steps=400, seed=1)
MODELS["minilm-mlm-en-grown"] = dataclasses.replace(
    MODELS["minilm-mlm-en"], name="minilm-mlm-en-grown", num_layers=9,
    grow=(0, 0, 1, 1, 2, 2, 3, 4, 5), **_GROWTH)
MODELS["minilm-mlm-en-continued"] = dataclasses.replace(
    MODELS["minilm-mlm-en"], name="minilm-mlm-en-continued", **_GROWTH)


# Reaction SMILES from random init (emergence chapter, registered 2026-12-06 before the first
# step): rxnfp-bert's tokenizer, the USPTO-50k validation reactions, 32 reactions a batch padded
# to the longest, AdamW betas (0.9, 0.98), linear warm-up then decay to 0; evaluated at
# log-spaced steps and densely through the transition on 300 held-out USPTO-50k test reactions.
_REACTIONS = dict(corpus="reactions", vocab_size=591, hidden_size=256, num_layers=6, num_heads=4,
                  intermediate_size=1024, seq_length=256, batch_size=32, checkpoint_every=100)
RXN_SEEDS = (0, 1, 2)
for _seed in RXN_SEEDS:
    _name = "bert-rxn" + (f"-seed{_seed}" if _seed else "")
    MODELS[_name] = PretrainConfig(name=_name, architecture="bert", learning_rate=1e-3,
                                   warmup_steps=75, total_steps=1500, dense_evals=(200, 1000, 50),
                                   seed=_seed, **_REACTIONS)
# The ALBERT's pilot (one shared layer applied 6 times, E = H = 256): not a registered run.
MODELS["albert-rxn-pilot"] = PretrainConfig(
    name="albert-rxn-pilot", architecture="albert", embedding_size=256, learning_rate=5e-4,
    warmup_steps=100, total_steps=3000, dense_evals=(200, 1500, 100), seed=100, **_REACTIONS)


def heldout_texts(data_dir: str | os.PathLike, n: int = 64, unk: str = "keep") -> list[str]:
    """The first ``n`` paragraphs of ``dupbert.data.heldout_paragraphs`` (WikiText-2 valid, 40+
    words, tokenisation undone): the emergence record's held-out text.

    Args:
        unk: ``"keep"`` leaves WikiText's ``<unk>`` as text, as the first record read it;
            ``"[UNK]"`` writes the unknown token, which the probe does not score.

    Raises:
        CorpusError: the file is missing, or ``unk`` is neither.
    """
    from .data import heldout_paragraphs

    if unk not in ("keep", "[UNK]"):
        raise CorpusError(f"unk must be 'keep' or '[UNK]', got {unk!r}")
    path = Path(data_dir) / "wikitext2/wiki.valid.tokens"
    if not path.is_file():
        raise CorpusError(f"the held-out text {path} does not exist (WikiText-2 valid, tokens)")
    return heldout_paragraphs(path.read_text(encoding="utf-8").split("\n"), unk)["text"][:n]


# --------------------------------------------------------------------------------------------------
# Models and the training step.


def build_model(config: PretrainConfig, tokenizer):
    """A freshly initialised ``BertForMaskedLM`` or ``AlbertForMaskedLM`` (one shared layer,
    factorised embeddings), decoder tied to the input embeddings, seeded by ``config.seed``."""
    import torch
    import transformers

    common = dict(vocab_size=config.vocab_size, hidden_size=config.hidden_size,
                  num_hidden_layers=config.num_layers, num_attention_heads=config.num_heads,
                  intermediate_size=config.intermediate_size,
                  max_position_embeddings=config.seq_length, hidden_dropout_prob=config.dropout,
                  attention_probs_dropout_prob=config.dropout,
                  pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True)
    torch.manual_seed(config.seed)
    if config.init is not None:
        return _continued_model(config)
    if config.architecture == "bert":
        return transformers.BertForMaskedLM(transformers.BertConfig(**common))
    albert = transformers.AlbertConfig(embedding_size=config.embedding_size, num_hidden_groups=1,
                                       inner_group_num=1, hidden_act="gelu_new",
                                       bos_token_id=tokenizer.cls_token_id,
                                       eos_token_id=tokenizer.sep_token_id, **common)
    return transformers.AlbertForMaskedLM(albert)


def _continued_model(config: PretrainConfig):
    """The model a continued run starts from, seeded by ``config.seed`` where anything is new:

    - ``init`` has an MLM head of ``config``'s architecture: that model, head and all;
    - ``init`` is a BERT without one and ``architecture`` is ``"bert"``: its body under a freshly
      initialised BERT MLM head (dense, GELU, LayerNorm, decoder tied to the word embeddings);
    - ``init`` is a BERT and ``architecture`` is ``"albert"``: the recursive conversion
      (``dupbert.recursive.albert_from_bert``: one shared block, the average of the six, and
      factorised embeddings of ``embedding_size``) under a fresh ALBERT head.

    ``grow`` then duplicates blocks (``dupbert.duplicate.duplicate_layers``); dropout is
    ``config``'s.

    Raises:
        ValueError: the init model's sizes differ from ``config``'s (names them).
    """
    import transformers

    from .duplicate import duplicate_layers
    from .recursive import albert_from_bert
    from .zoo import zoo_folder

    folder = zoo_folder(config.init)
    source = transformers.AutoConfig.from_pretrained(folder)
    wanted = dict(vocab_size=config.vocab_size, hidden_size=config.hidden_size,
                  num_attention_heads=config.num_heads, intermediate_size=config.intermediate_size)
    if source.model_type == config.architecture:
        wanted["num_hidden_layers"] = config.num_layers if not config.grow else \
            source.num_hidden_layers
    differ = {k: (getattr(source, k), v) for k, v in wanted.items() if getattr(source, k) != v}
    if differ or (source.model_type != config.architecture and source.model_type != "bert"):
        raise ValueError(f"{config.name}: the init model {config.init!r} ({source.model_type}) "
                         f"does not fit the configuration ({differ}, as (init, config))")
    source.update(dict(hidden_dropout_prob=config.dropout,
                       attention_probs_dropout_prob=config.dropout))
    transformers.logging.set_verbosity_error()  # the head is new by design: no "newly initialized"
    try:
        if config.architecture == "albert" and source.model_type == "bert":
            model = albert_from_bert(transformers.BertModel.from_pretrained(folder, config=source),
                                     config.embedding_size, applications=config.num_layers)
        else:
            has_head = any(a.endswith("ForMaskedLM") for a in source.architectures or ())
            source.update(dict(tie_word_embeddings=True))
            if not has_head:
                source.update(dict(architectures=["BertForMaskedLM"]))
            model = transformers.AutoModelForMaskedLM.from_pretrained(folder, config=source)
    finally:
        transformers.logging.set_verbosity_warning()
    return duplicate_layers(model, list(config.grow)) if config.grow else model


def mask_tokens(tokenizer, input_ids, mask_rate: float):
    """BERT's dynamic masking of ``[B, T]`` (15% of non-special positions, 80/10/10), drawn from
    torch's global RNG; returns ``(input_ids, labels)``, labels -100 where not masked.
    """
    from transformers import DataCollatorForLanguageModeling

    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=mask_rate,
                                               return_tensors="pt")
    return collator.torch_mask_tokens(input_ids.clone())


def masked_lm_loss(model, input_ids, labels, attention_mask=None):
    """Mean cross-entropy of the MLM head on the masked positions only (``labels != -100``):
    equal to ``model(input_ids, labels=labels).loss`` at a fraction of the decoder's cost."""
    import torch.nn.functional as F

    hidden = model.base_model(input_ids=input_ids,
                              attention_mask=attention_mask).last_hidden_state  # [B, T, H]
    chosen = labels != -100
    logits = _head(model)(hidden[chosen])  # [masked, V]
    return F.cross_entropy(logits.float(), labels[chosen])


def _head(model):
    """The MLM head of a ``BertForMaskedLM`` (``cls``) or ``AlbertForMaskedLM``
    (``predictions``): hidden states ``[..., H]`` to logits ``[..., V]``."""
    return model.cls if hasattr(model, "cls") else model.predictions


def _step_seed(seed: int, step: int) -> int:
    return seed * 1_000_003 + step


def batch_rows(config: PretrainConfig, n_rows: int, step: int) -> np.ndarray:
    """Row indices of step ``step``'s batch: epochs are seeded permutations of ``n_rows``."""
    start = step * config.batch_size
    out = []
    while len(out) < config.batch_size:
        epoch, offset = divmod(start + len(out), n_rows)
        order = np.random.default_rng([config.seed, epoch]).permutation(n_rows)
        out.extend(order[offset:offset + config.batch_size - len(out)].tolist())
    return np.asarray(out)


# --------------------------------------------------------------------------------------------------
# The run: prepared data, checkpoints, the emergence record.


def prepare(config: PretrainConfig, data_dir: str | os.PathLike, work: str | os.PathLike,
            progress: bool = True) -> tuple[object, np.ndarray]:
    """The tokenizer (``work/tokenizer-<V>``) and packed rows (``work/train-<V>-<T>.npy``), built
    once (atomic writes). The published model's tokenizer is reused when there is one: WordPiece
    training breaks ties in no fixed order.

    A ``corpus="reactions"`` run takes rxnfp-bert's tokenizer and one padded row per reaction
    (``dupbert.pretrain_reactions.prepare_reactions``).

    Raises:
        CorpusError: as :func:`pretraining_documents`.
    """
    from transformers import AutoTokenizer

    work = Path(work)
    if config.corpus == "reactions":
        from .pretrain_reactions import prepare_reactions

        tokenizer, rows, report = prepare_reactions(config.seq_length, data_dir, work)
        write_json(work / "corpus-reactions.json", report)
        return tokenizer, rows
    vocabulary = config.init or config.vocab_size  # a continued model keeps its tokenizer
    tok_dir = work / f"tokenizer-{vocabulary}"
    rows_path = work / f"train-{vocabulary}-{config.seq_length}.npy"
    report_path = work / "corpus.json"
    if tok_dir.is_dir() and rows_path.is_file():
        return AutoTokenizer.from_pretrained(tok_dir), np.load(rows_path)
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    documents, report = pretraining_documents(data_dir, on_overlap="drop")
    if progress:
        print(f"corpus: {report} ({time.time() - t0:.0f} s)", flush=True)
    published = WEIGHTS / config.name / "tokenizer.json"
    if not tok_dir.is_dir():
        tmp = tok_dir.with_name(tok_dir.name + ".tmp")
        if config.init is not None:
            from .zoo import zoo_folder

            AutoTokenizer.from_pretrained(zoo_folder(config.init)).save_pretrained(tmp)
        elif published.is_file():  # WordPiece training breaks ties in no fixed order: reuse it
            tmp.mkdir(parents=True, exist_ok=True)
            for name in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copy(published.with_name(name), tmp / name)
        else:
            train_tokenizer(documents, config.vocab_size, tmp)
        os.replace(tmp, tok_dir)
    tokenizer = AutoTokenizer.from_pretrained(tok_dir)
    rows = pack(tokenizer, documents, config.seq_length)
    if rows.shape[0] < config.batch_size:
        raise CorpusError(f"the corpus fills {rows.shape[0]} sequences of {config.seq_length} "
                          f"tokens, fewer than one batch ({config.batch_size}): it needs more text")
    report.update(tokens=int(rows.size), sequences=int(rows.shape[0]))
    write_json(report_path, report)
    tmp = rows_path.with_name(rows_path.name + ".tmp.npy")
    np.save(tmp, rows)
    os.replace(tmp, rows_path)
    if progress:
        print(f"packed {rows.shape[0]} sequences of {config.seq_length} tokens "
              f"({time.time() - t0:.0f} s)", flush=True)
    return tokenizer, rows


def _emergence_rows(model, tokenizer, config: PretrainConfig, step: int, texts: Sequence[str],
                   heldout, seen: int) -> list[dict]:
    """The emergence record at one step: held-out MLM loss and masked top-1 at the last hidden state
    (``measure="mlm"``), and per hidden state ``"reconstruction"``, ``"masked"`` and
    ``"reconstruction, duplicated"`` (:func:`dupbert.probe.paper_duplications`).
    """
    import torch

    from .duplicate import duplicate_layers
    from .probe import BASELINE, TruncationWarning, masked_prediction_accuracy, \
        paper_duplications, reconstruction_accuracy

    base = dict(model=config.name, step=step, tokens_seen=seen)
    model.eval()
    with torch.random.fork_rng(), torch.inference_mode():
        torch.manual_seed(12345)
        batch, attention = _batch(config, tokenizer, heldout)
        inputs, labels = mask_tokens(tokenizer, batch, config.mask_rate)
        hidden = model.base_model(input_ids=inputs, attention_mask=attention).last_hidden_state
        chosen = labels != -100
        logits = _head(model)(hidden[chosen])
        loss = float(torch.nn.functional.cross_entropy(logits, labels[chosen]))
        best = logits.topk(5, dim=-1).indices
        target = labels[chosen]
    rows = [dict(base, measure="mlm", layer=config.num_layers,
                 top1=float((best[:, 0] == target).float().mean()),
                 top5=float((best == target[:, None]).any(-1).float().mean()),
                 n_tokens=int(chosen.sum()), loss=loss)]
    if step == 0:  # always answering the most frequent of the chosen tokens scores this
        counts = torch.bincount(target).sort(descending=True).values
        rows.append(dict(base, measure=MOST_FREQUENT, layer=config.num_layers,
                         top1=float(counts[0] / len(target)),
                         top5=float(counts[:5].sum() / len(target)), n_tokens=len(target),
                         loss=float("nan")))
    kwargs = dict(batch_size=16, max_length=config.seq_length, progress=False)
    (order,) = [o for label, o in paper_duplications(model).items() if label != BASELINE]
    duplicated = duplicate_layers(model, order)
    with warnings.catch_warnings():  # the held-out paragraphs are read to seq_length, by design
        warnings.simplefilter("ignore", TruncationWarning)
        frames = (
            ("reconstruction", reconstruction_accuracy(model, tokenizer, texts, **kwargs)),
            ("masked", masked_prediction_accuracy(model, tokenizer, texts, rule="mask", **kwargs)),
            ("reconstruction, duplicated",
             reconstruction_accuracy(duplicated, tokenizer, texts, **kwargs)))
    for measure, frame in frames:
        rows += [dict(base, measure=measure, layer=int(r.layer), top1=r.top1, top5=r.top5,
                      n_tokens=int(r.n_tokens), loss=float("nan")) for r in frame.itertuples()]
    model.train()
    return rows


def pretrain(config: PretrainConfig, data_dir: str | os.PathLike, work: str | os.PathLike,
             results: str | os.PathLike, out: str | os.PathLike | None = None,
             stop_after: int | None = None, progress: bool = True,
             published: str | os.PathLike | None = None) -> Path | None:
    """Pretrain one stage of ``config``, append per-step loss rows to ``results/pretrain-loss.csv``
    and the emergence record to ``results/emergence.csv``, and save the stage's final model (with
    :data:`STAGE_FILE`) to ``out`` (default ``work/<name>/final``).

    Where the stage starts: ``work/<name>/checkpoint.pt`` if it is further on than the published
    model; else the published model (``published``, default ``dupbert.zoo.weights_dir(name)``) if
    its :data:`STAGE_FILE` says it ended an earlier stage, with a fresh optimizer and warm-up (its
    evaluation at that step, made before it was published, is kept); else ``init`` (or a random
    initialisation) at step 0. Every stage after the first thus starts from the published weights
    (committed, for a model the repository takes), and a staged run is the same wherever it
    resumes. A run whose published stage finished it (its last step, or ``target_top1`` reached)
    does nothing and returns the published folder; so does one whose last stage ended with masked
    top-1 at the output below ``stage_gate`` (in the emergence record).

    Loss rows: the step's training loss (masked tokens, nats), ``tokens_seen`` including the step,
    ``lr`` after the step's update, ``elapsed_s`` counted across stages.

    Args:
        stop_after: stop (with a checkpoint) after this step.

    Returns:
        The final model's folder, or ``None`` when ``stop_after`` stopped the stage.

    Raises:
        CheckpointMismatch: the checkpoint, or the published stage, was made with another
            configuration (names the fields).
        CorpusError: as :func:`prepare`.
    """
    import torch

    torch.set_num_threads(int(os.environ.get("DUPBERT_THREADS", "1")))
    run_dir = Path(work) / config.name
    published = Path(published) if published is not None else weights_dir(config.name)
    step, saved, done = _resume_point(config, run_dir / "checkpoint.pt", published)
    if saved is None and done is not None and (done["finished"]
                                                or gate_closed(config, done["step"], results)):
        return published  # nothing left to train
    tokenizer, rows = prepare(config, data_dir, work, progress)
    if config.corpus == "reactions":
        from .pretrain_reactions import heldout_reactions, reaction_rows

        texts = heldout_reactions(data_dir)
        heldout = reaction_rows(tokenizer, texts, config.seq_length)
    else:
        paragraphs = heldout_texts(data_dir, 400, config.heldout_unk)  # the first 64: the probe's
        heldout = pack(tokenizer, [paragraphs], config.seq_length)[:64]
        texts = paragraphs[:64]
    seen = tokens_seen(config, rows, tokenizer.pad_token_id)
    results = Path(results)
    results.mkdir(parents=True, exist_ok=True)
    loss_path, emergence_path = results / "pretrain-loss.csv", results / "emergence.csv"
    fresh = saved is None and done is not None  # a new stage, from the published weights
    elapsed = saved["elapsed_s"] if saved else done["elapsed_s"] if fresh else 0.0
    model = _starting_model(config, tokenizer, saved, published if fresh else None)
    optimizer, schedule = _optimizer(model, config, saved)
    drop_rows_after(loss_path, LOSS_COLUMNS, config.name, step)
    drop_rows_after(emergence_path, EMERGENCE_COLUMNS, config.name,
                    step if fresh else step - 1)
    end = config.stage_end(step - 1 if saved else step)  # a checkpoint's stage, else the next
    last, reached = end if stop_after is None else min(stop_after, end), False
    eval_steps, identity = set(config.eval_steps()) - ({step} if fresh else set()), \
        _identity(config, end)

    def checkpoint():
        _save_checkpoint(run_dir / "checkpoint.pt", model, optimizer, schedule, step, identity,
                         time.time() - started)

    pending: list[dict] = []
    started = time.time() - elapsed
    from tqdm.auto import tqdm
    bar = tqdm(total=end, initial=step, desc=f"{config.name} ({_stage_label(config, end)})",
               unit="step", disable=not progress, mininterval=30)
    while True:
        if step in eval_steps:
            evaluated = _emergence_rows(model, tokenizer, config, step, texts, heldout,
                                        int(seen[step]))
            append_rows(emergence_path, evaluated, EMERGENCE_COLUMNS)
            reached = _target_reached(evaluated, config)
            if reached and step < last:  # done: flush the loss rows and keep this model
                last = step
                append_rows(loss_path, pending, LOSS_COLUMNS)
                pending = []
                checkpoint()
        if step >= last:
            break
        pending.append(_train_step(model, optimizer, schedule, config, tokenizer, rows, step,
                                   int(seen[step + 1])))
        step += 1
        pending[-1]["elapsed_s"] = round(time.time() - started, 1)
        bar.update(1)
        if step % config.checkpoint_every == 0 or step == last:
            append_rows(loss_path, pending, LOSS_COLUMNS)
            pending = []
            checkpoint()
    bar.close()
    if step < end and not reached:
        return None  # stopped early (stop_after): the checkpoint holds the run
    out = Path(out) if out is not None else run_dir / "final"
    model.eval()
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    write_json(out / STAGE_FILE, dict(step=step, stage=end // config.stage_size,
                                       stages=config.total_steps // config.stage_size,
                                       finished=reached or step == config.total_steps,
                                       elapsed_s=round(time.time() - started, 1),
                                       config=identity))
    return out


def gate_closed(config: PretrainConfig, step: int, results: str | os.PathLike) -> bool:
    """Whether ``config.stage_gate`` stops the run after the stage that ended at ``step``: masked
    top-1 at the output there (``results/emergence.csv``) is below it. False without a gate,
    before the end of stage ``config.stage_gate_from``, or without that row."""
    from .emergence import output_top1

    path = Path(results) / "emergence.csv"
    if config.stage_gate is None or step < config.stage_gate_from * config.stage_size \
            or not path.is_file():
        return False
    record = pd.read_csv(path)
    top1 = output_top1(record[record["model"] == config.name])
    return step in top1.index and float(top1.loc[step, config.name]) < config.stage_gate


def _stage_label(config: PretrainConfig, end: int) -> str:
    return f"stage {end // config.stage_size} of {config.total_steps // config.stage_size}"


def _resume_point(config: PretrainConfig, checkpoint: Path, published: Path
                  ) -> tuple[int, dict | None, dict | None]:
    """``(step, checkpoint, stage)``: the checkpoint when it is further on than the published
    model, else ``(its step, None, its STAGE_FILE)``, else ``(0, None, None)``; read before any
    work.

    Raises:
        CheckpointMismatch: the checkpoint, or the published stage, was made with another
            configuration.
    """
    import torch

    stage_file = published / STAGE_FILE
    done = json.loads(stage_file.read_text(encoding="utf-8")) if stage_file.is_file() else None
    if done is not None and "config" in done:
        _refuse_another(done["config"], _identity(config, config.stage_end(done["step"] - 1)),
                        f"the published stage {stage_file}")
    saved = torch.load(checkpoint, weights_only=True) if checkpoint.is_file() else None
    if saved is None or saved["step"] <= (done["step"] if done else 0):
        return (done["step"], None, done) if done else (0, None, None)
    _refuse_another(saved["config"], _identity(config, config.stage_end(saved["step"] - 1)),
                    f"checkpoint {checkpoint}")
    return saved["step"], saved, None


def _refuse_another(saved: dict, identity: dict, what: str) -> None:
    differences = _differences(saved, identity)
    if differences:
        raise CheckpointMismatch(
            f"{what} was made with another configuration ({differences}, as (then, now)); "
            "resume with its configuration, or move it away to start anew")


def _starting_model(config: PretrainConfig, tokenizer, saved: dict | None,
                    published: Path | None):
    """The model as the stage starts: built (:func:`build_model`) and, resuming, given the
    checkpoint's weights; or, after an earlier stage, loaded from its ``published`` folder (a
    zoo overlay is composed first, ``dupbert.zoo.zoo_folder``)."""
    import torch
    import transformers

    if saved is None and published is not None:
        from .zoo import zoo_folder

        folder = published if (published / "model.safetensors").is_file() else \
            zoo_folder(config.name)
        return transformers.AutoModelForMaskedLM.from_pretrained(
            folder, dtype=torch.float32, hidden_dropout_prob=config.dropout,
            attention_probs_dropout_prob=config.dropout)
    model = build_model(config, tokenizer)
    if saved is not None:
        model.load_state_dict(saved["model"])
    return model


def _optimizer(model, config: PretrainConfig, saved: dict | None):
    """AdamW (:func:`_parameter_groups`) and a linear schedule over one stage: ``warmup_steps`` up
    to the peak, down to 0 at the stage's end; their state from ``saved`` when resuming."""
    import torch
    import transformers

    optimizer = torch.optim.AdamW(_parameter_groups(model, config), lr=config.learning_rate,
                                  betas=(0.9, 0.98), eps=1e-6)
    schedule = transformers.get_linear_schedule_with_warmup(optimizer, config.warmup_steps,
                                                            config.stage_size)
    if saved is not None:
        optimizer.load_state_dict(saved["optimizer"])
        schedule.load_state_dict(saved["schedule"])
    return optimizer, schedule


def _train_step(model, optimizer, schedule, config: PretrainConfig, tokenizer, rows, step: int,
                tokens_seen: int) -> dict:
    """Step ``step + 1``: its seeded batch and masking, one AdamW update; its loss row
    (``tokens_seen``: through this step)."""
    import torch

    model.train()
    torch.manual_seed(_step_seed(config.seed, step))
    batch, attention = _batch(config, tokenizer, rows[batch_rows(config, len(rows), step)])
    inputs, labels = mask_tokens(tokenizer, batch, config.mask_rate)
    loss = masked_lm_loss(model, inputs, labels, attention)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    schedule.step()
    optimizer.zero_grad(set_to_none=True)
    return dict(model=config.name, step=step + 1, tokens_seen=tokens_seen,
                loss=float(loss.detach()), lr=schedule.get_last_lr()[0])


def _batch(config: PretrainConfig, tokenizer, rows: np.ndarray):
    """``(input_ids, attention_mask)`` of uint16 ``rows``: packed English rows as they are (no
    mask); padded reaction rows cut after the longest, with their mask."""
    import torch

    batch = torch.as_tensor(rows.astype(np.int64))
    if config.corpus != "reactions":
        return batch, None
    from .pretrain_reactions import trim

    return trim(batch, tokenizer.pad_token_id)


def tokens_seen(config: PretrainConfig, rows: np.ndarray, pad_id: int) -> np.ndarray:
    """Tokens trained on through each step, ``[total_steps + 1]`` (index 0: none): every
    position of packed English rows; the real (not padding) tokens of reaction rows."""
    steps = np.arange(config.total_steps + 1, dtype=np.int64)
    if config.corpus != "reactions":
        return steps * config.batch_size * config.seq_length
    real = (rows != pad_id).sum(1)
    per_step = [int(real[batch_rows(config, len(rows), s)].sum()) for s in steps[:-1]]
    return np.concatenate([[0], np.cumsum(per_step)])


def _identity(config: PretrainConfig, stage_end: int) -> dict:
    """What a checkpoint shares with the stage that resumes it: the configuration with the
    stage's last step in place of the horizon (``total_steps``, ``stage_steps``) and without the
    gate between stages, so a run later cut into stages resumes a checkpoint of its first stage."""
    identity = dataclasses.asdict(config)
    for field in ("total_steps", "stage_steps", "stage_gate", "stage_gate_from"):
        del identity[field]
    return dict(identity, stage_end=stage_end)


def _target_reached(evaluated: list[dict], config: PretrainConfig) -> bool:
    """Masked top-1 at the output (the last hidden state's ``"masked"`` row) >= ``target_top1``."""
    if config.target_top1 is None:
        return False
    masked = [row for row in evaluated if row["measure"] == "masked"]
    return max(masked, key=lambda row: row["layer"])["top1"] >= config.target_top1


def _differences(saved: dict, identity: dict) -> dict:
    """Fields where a checkpoint's configuration and ``identity`` (:func:`_identity`) differ, as
    ``(saved, now)``; a field newer than the checkpoint counts only when set away from its
    default, and a checkpoint from before stages had its horizon as its stage's end."""
    defaults = {f.name: f.default for f in dataclasses.fields(PretrainConfig)}
    if "stage_end" not in saved:
        saved = dict(saved, stage_end=saved["total_steps"])
        for field in ("total_steps", "stage_steps", "stage_gate", "stage_gate_from"):
            saved.pop(field, None)
    saved = {k: (list(v) if isinstance(v, tuple) else v) for k, v in saved.items()}
    now = {k: (list(v) if isinstance(v, tuple) else v) for k, v in identity.items()}
    return {k: (saved.get(k, defaults.get(k)), v) for k, v in now.items()
            if saved.get(k, defaults.get(k)) != v}


def _parameter_groups(model, config: PretrainConfig) -> list[dict]:
    """AdamW's groups: weight decay except on biases and LayerNorm weights; the head at
    ``head_learning_rate`` (when set); the input embeddings frozen (``freeze_embeddings``)."""
    if config.freeze_embeddings:
        model.base_model.embeddings.requires_grad_(False)
    head = {id(p) for p in _head(model).parameters()} - \
        {id(p) for p in model.base_model.parameters()}  # the tied decoder weight is the body's
    parts = [(lambda p: True, config.learning_rate)] if config.head_learning_rate is None else \
        [(lambda p: id(p) not in head, config.learning_rate),
         (lambda p: id(p) in head, config.head_learning_rate)]
    no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight")
    groups = []
    for belongs, lr in parts:
        for decay in (True, False):
            params = [p for n, p in model.named_parameters()
                      if p.requires_grad and belongs(p) and n.endswith(no_decay) != decay]
            if params:
                groups.append({"params": params, "lr": lr,
                               "weight_decay": config.weight_decay if decay else 0.0})
    return groups


def _save_checkpoint(path: Path, model, optimizer, schedule, step: int, identity: dict,
                     elapsed: float) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "schedule": schedule.state_dict(), "step": step, "config": identity,
                "elapsed_s": elapsed}, tmp)
    os.replace(tmp, path)


def _measure_quality(folder: str | os.PathLike) -> dict:
    """``dupbert.quality.masked_top1`` of the finished model in ``folder`` on its held-out English
    text (the measure RQ1's MLM-quality floor reads)."""
    import transformers

    from .data import load_texts
    from .quality import ENGLISH_HELDOUT, N_SEQUENCES, masked_top1

    model = transformers.AutoModelForMaskedLM.from_pretrained(folder).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    return masked_top1(model, tokenizer, load_texts(ENGLISH_HELDOUT, N_SEQUENCES))


def main(argv: list[str] | None = None) -> int:
    """``python -m dupbert.pretrain NAME [--data-dir D] [--work W] [--results R] [--out O]``:
    pretrain (or resume) one of :data:`MODELS`."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m dupbert.pretrain", description=main.__doc__)
    parser.add_argument("name", choices=sorted(MODELS))
    parser.add_argument("--data-dir", default=os.environ.get("DUPBERT_DATA_DIR"))
    parser.add_argument("--work", default=None,
                        help="checkpoints and prepared data (default: the dupbert cache's "
                             "pretrain/, which outlives the working tree)")
    parser.add_argument("--results", default="results/cpu")
    parser.add_argument("--out", default=None)
    parser.add_argument("--stop-after", type=int, default=None)
    parser.add_argument("--publish", action="store_true",
                        help="copy the finished model into models/NAME with its card")
    args = parser.parse_args(argv)
    if not args.data_dir:
        parser.error("no data directory: pass --data-dir or set DUPBERT_DATA_DIR")
    config = MODELS[args.name]
    args.work = args.work or str(cache_dir() / "pretrain")
    legacy = Path(".cache/pretrain") / args.name / "checkpoint.pt"  # where checkpoints were kept
    if legacy.is_file() and not (Path(args.work) / args.name / "checkpoint.pt").is_file():
        parser.error(f"{legacy} is a checkpoint of {args.name} in the old place: move the folder "
                     f"{legacy.parent} into {args.work} to resume it, or pass --work .cache/pretrain")
    out = pretrain(config, args.data_dir, args.work, args.results, args.out, args.stop_after)
    if out is None:
        print(f"{args.name}: stopped at step {args.stop_after}; run again to resume")
        return 0
    done = json.loads((out / STAGE_FILE).read_text(encoding="utf-8"))
    if out.resolve() == weights_dir(args.name).resolve():
        why = "finished" if done["finished"] else \
            f"stopped by its stage gate (masked top-1 below {config.stage_gate:g})"
        print(f"{args.name}: {why} at step {done['step']:,}, published in {out}; nothing to do")
        return 0
    if args.publish:
        report = json.loads((Path(args.work) / "corpus.json").read_text(encoding="utf-8"))
        out = publish(config, out, weights_dir(args.name), args.results, report,
                      quality=_measure_quality(out))
    print(f"{args.name}: {out}")
    if not done["finished"]:
        first = "commit its published weights" if args.publish else \
            "publish it (--publish) and commit its weights"
        print(f"{args.name}: stage {done['stage']} of {done['stages']} ended at step "
              f"{done['step']:,}; {first}, then run again for stage {done['stage'] + 1}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
