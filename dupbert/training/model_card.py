"""The model card of an MLM trained here (``dupbert.training.pretrain_publish.publish``): where it started, what
was trained, on what, at what cost, and how well it predicts a masked word: masked top-1 with
every chosen token masked (nothing to copy) beside the most-frequent-token baseline and the
MLM-quality floor of RQ1, declared here (book, Methods). Text only: the numbers come from the
caller.
"""

from __future__ import annotations

import math

MLM_FLOOR = 0.30
"""The MLM-quality floor of RQ1 and RQ2 (book, Methods): masked top-1 at least this ..."""
MLM_FLOOR_RATIO = 3.0
"""... and at least this many times the most-frequent-token baseline on the same positions."""


def clears_mlm_floor(top1: float, baseline: float) -> bool:
    """Whether masked top-1 ``top1`` clears the MLM-quality floor given the most-frequent-token
    baseline ``baseline`` (fractions; both bounds included, float rounding aside)."""
    def at_least(value: float, bound: float) -> bool:
        return value >= bound or math.isclose(value, bound, rel_tol=1e-9)

    return at_least(top1, MLM_FLOOR) and at_least(top1, MLM_FLOOR_RATIO * baseline)


def origin(config) -> str:
    """Where the model started (``config``: a ``dupbert.training.pretrain.PretrainConfig``)."""
    if config.init is None:
        return ("pretrained from scratch by dupbert, so that the paper's questions can be asked "
                "of an English MLM with its pretrained head offline")
    grown = (f", its blocks duplicated to the order {list(config.grow)} (0-based)"
             if config.grow else "")
    if config.architecture == "albert" and config.init == "all-MiniLM-L6-v2":
        return ("made by dupbert from the English BERT body of all-MiniLM-L6-v2 (its pinned "
                "wheel), converted into a recursive ALBERT (`dupbert.tools.recursive`: the one shared "
                f"layer the mean of the {config.num_layers} blocks, the factorised embeddings "
                f"(E {config.embedding_size}) from a truncated SVD of the word embeddings) and "
                "trained with BERT's masked-language-model objective")
    if config.init == "all-MiniLM-L6-v2":
        return ("made by dupbert from the English BERT body of all-MiniLM-L6-v2 (its pinned "
                "wheel; its own training never filled `[MASK]`), with BERT's MLM head (dense, "
                "GELU, LayerNorm, decoder tied to the word embeddings, bias) added and trained "
                "with the masked-language-model objective")
    return (f"made by dupbert from `{config.init}`{grown}, its masked-language-model training "
            f"continued")


def trained(config) -> str:
    if config.init is None:
        return "every weight, from a random initialisation"
    if config.freeze_embeddings:
        return ("every block and the MLM head; the input embeddings (tied to the decoder) kept as "
                f"they are in `{config.init}`")
    return "every weight"


def stage_line(config, done: dict) -> str:
    """Which stage of a staged run (``config.stage_steps``) the weights end (``done``: the
    ``dupbert.training.pretrain.STAGE_FILE`` of the run); empty for a run of one stage."""
    if done["stages"] == 1:
        return ""
    first = (done["stage"] - 1) * config.stage_size + 1
    return (f"; these weights end stage {done['stage']} of at most {done['stages']} (steps "
            f"{first:,}-{done['step']:,}; every stage warms up anew from the weights the one "
            f"before published, then decays to 0 at its end)")


def tokenizer_line(config) -> str:
    if config.init is None:
        return (f"uncased WordPiece, {config.vocab_size:,} entries, trained on the same text")
    return f"`{config.init}`'s ({config.vocab_size:,} entries)"


def rates(config) -> str:
    if config.head_learning_rate is None:
        return f"peak learning rate {config.learning_rate:g}"
    return (f"peak learning rate {config.learning_rate:g} for the body, "
            f"{config.head_learning_rate:g} for the head")


def quality_line(quality: dict | None, where: str = "clean WikiText-2 valid sequences") -> str:
    """The card's masked top-1 (every chosen token masked: nothing can be copied) on ``where``
    beside the most-frequent-token baseline, and whether the model clears the floor
    (:func:`clears_mlm_floor`)."""
    if quality is None:
        return "not measured (`dupbert.training.quality.quality_table`)"
    top1, baseline = quality["top1"], quality["majority_top1"]
    clears = clears_mlm_floor(top1, baseline)
    return (f"{top1:.3f} [{quality['top1_low']:.3f}, {quality['top1_high']:.3f}] (top-5 "
            f"{quality['top5']:.3f}) on {quality['n_masked']:,} positions of "
            f"{quality['n_sequences']} {where}, every chosen token "
            f"replaced by the mask token, so nothing can be copied; always answering "
            f"\"{quality['majority_token']}\" scores {baseline:.3f} on the same positions. It "
            f"{'clears' if clears else 'does not clear'} the MLM-quality floor of RQ1 (at least "
            f"{MLM_FLOOR:.2f} and {MLM_FLOOR_RATIO:g} times that baseline)")


MODEL_CARD = """# {name}

An English {architecture} with a pretrained MLM head, {origin}. Not a substitute for
bert-base-uncased or albert-base-v2: {parameters:,} parameters, {tokens:,} tokens seen here.

- **Trained here**: {trained}.
- **Data**: {corpus[words]:,} words of English prose ({corpus[documents]:,} documents:
  Wikipedia (CC BY-SA) and 38 public-domain Project Gutenberg books), packed into
  {corpus[sequences]:,} sequences of {length} tokens. Every text the book evaluates on is kept
  out (WikiText-2 test and valid, SST-2 dev, SNLI dev, SQuAD 2.0 dev); paragraphs dropped for
  overlap: {corpus[dropped_paragraphs]}.
- **Tokenizer**: {tokenizer}.
- **Objective**: BERT's masked language model (15% of tokens, 80/10/10, dynamic masking, decoder
  tied to the input embeddings); no next-sentence or sentence-order prediction (a deviation from
  both papers). The decoder runs on masked positions only (the same loss).
- **Training**: {sequences:,} sequences ({tokens:,} tokens, {passes:.0%} of one pass over the
  text), AdamW (betas 0.9/0.98, eps 1e-6, {learning_rate}), {warmup} warm-up steps then linear
  decay, seed {seed}, one torch thread. {hours:.2f} hours of wall-clock time on {cpu}, cores
  shared with other runs.
- **Masked top-1**: {quality}.
- **Held-out MLM loss**: {loss:.3f} (64 WikiText-2 valid sequences of {length} tokens,
  {n_masked} positions, BERT's 80/10/10; WikiText's `<unk>` {unk}).
- **Weights**: {storage}.
- **Rebuild**: `MODELS={name} bash scripts/pretrain.sh` (one stage per call; it publishes each).

Configuration (`dupbert.training.pretrain.PretrainConfig`):

```json
{config}
```
"""


REACTION_CARD = """# {name}

A {architecture} with a pretrained MLM head, pretrained here from random init on reaction SMILES
(the emergence chapter's runs from random init; seed {seed}). {parameters:,} parameters,
{tokens:,} tokens seen.

- **Data**: the {corpus[reactions]:,} USPTO-50k validation reactions (atom maps removed), less
  the {corpus[dropped_in_test]} that also occur among the test reactions; one reaction a
  sequence, `[CLS] reaction [SEP]`, {batch} a batch padded to the longest. The test reactions are
  held out of every step.
- **Tokenizer**: rxnfp-bert's (591 entries; one token per atom, bond, branch, ring closure and
  the arrow).
- **Objective**: BERT's masked language model (15% of tokens, 80/10/10, dynamic masking, decoder
  tied to the input embeddings); no next-sentence prediction.
- **Training**: {steps:,} steps{stage}, AdamW (betas 0.9/0.98, eps 1e-6, {learning_rate}),
  {warmup} warm-up steps then linear decay, one torch thread. {hours:.2f} hours of wall-clock time on
  {cpu}, cores shared with other runs.
- **Masked top-1**: {quality}.
- **Held-out MLM loss**: {loss:.3f} (300 USPTO-50k test reactions, {n_masked} positions, BERT's
  80/10/10).
- **Weights**: {storage}.
- **Rebuild**: `MODELS={name} PUBLISH=1 bash scripts/pretrain.sh` (one stage per call; it publishes
  each).

Configuration (`dupbert.training.pretrain.PretrainConfig`):

```json
{config}
```
"""
