"""The pretraining runs of ``dupbert.training.pretrain``: one frozen configuration per run
(:class:`PretrainConfig`, every field part of the checkpoint's identity) and the registered runs
(:data:`MODELS`), English and reaction SMILES, each with the day its recipe was fixed."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..core.checks import check_number
from .pretrain_corpus import SPECIAL_TOKENS

ARCHITECTURES = ("bert", "albert")
CORPORA = ("english", "reactions")

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
    # English ALBERT, route (b): all-MiniLM-L6-v2 made recursive (dupbert.tools.recursive), uptrained
    # with minilm-mlm-en's data order; at most 4,000 steps in stages of 1,000 (about 2.5 hours
    # each on a shared core, so that a stage ends, and commits its weights, within one session);
    # a further stage only if the last one ended with masked top-1 >= 0.15 (Methods, 2026-12-05)
    "albert-minilm-en": PretrainConfig(
        name="albert-minilm-en", architecture="albert", init="all-MiniLM-L6-v2", vocab_size=30522,
        hidden_size=384, num_layers=6, num_heads=12, intermediate_size=1536, embedding_size=128,
        learning_rate=5e-4, head_learning_rate=2e-3, warmup_steps=100, total_steps=4000,
        stage_steps=1000, stage_gate=0.15, checkpoint_every=50, heldout_unk="[UNK]"),
    # The English ALBERT for a GPU (registered 2026-12-07, not run: these cores cannot pay for
    # it, Methods, "The English ALBERT: every route measured"): albert-en-small's recipe from
    # random init with a horizon of 7,500 steps (30.7M tokens, 2.3 passes over the corpus),
    # evaluated densely from step 1,000; read by the rule past the plateau (emergence chapter)
    "albert-en-30m": PretrainConfig(
        name="albert-en-30m", architecture="albert", warmup_steps=750, total_steps=7500,
        checkpoint_every=500, dense_evals=(1000, 7500, 250)),
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
# The ALBERT, registered 2026-12-06 after its pilot predicted from step 1,100 and before any of
# these seeds' first step: the pilot's recipe, evaluated densely to step 2,000. Changed on
# 2026-12-06, before any seed had finished a stage: a seed takes about 3.3 hours on one core
# (3.9 s a step), longer than a working session, and a checkpoint does not reach the next
# machine; so each seed runs in 3 stages of 1,000 steps, each published and resumed from its
# weights with a fresh AdamW, 100 warm-up steps and decay to 0 at the stage's end.
for _seed in RXN_SEEDS:
    _name = "albert-rxn" + (f"-seed{_seed}" if _seed else "")
    MODELS[_name] = PretrainConfig(name=_name, architecture="albert", embedding_size=256,
                                   learning_rate=5e-4, warmup_steps=100, total_steps=3000,
                                   stage_steps=1000, dense_evals=(200, 2000, 100), seed=_seed,
                                   **_REACTIONS)
