"""What Kao et al. (2020) claim, as data.

Kao, Wu, Chi, Hsieh & Lee, *BERT's output layer recognizes all hidden layers? Some Intriguing
Phenomena and a simple way to boost BERT* (arXiv 2001.09309). Every claim is listed once, in
:data:`CLAIMS`, with an id that tables refer to; numbers not in our sources of the paper are
:data:`NOT_STATED`. :data:`REPLICATION` is an independent one-seed replication (a course
project, ``source="replication"``), never used as claims; :data:`SEED_SPREAD` and
:data:`ALBERT_DEPTH` are published numbers to set beside ours.

:mod:`dupbert.study.comparisons` sets our results beside these claims.
"""

from __future__ import annotations

import dataclasses

import pandas as pd

NOT_STATED = "not stated"
PAPER = "Kao et al. (2020), arXiv 2001.09309"


@dataclasses.dataclass(frozen=True)
class Claim:
    """One claim of the paper.

    Attributes:
        id: stable identifier, e.g. ``"rq3-squad2-f1"``.
        rq: the research question (1-5) of the book that tests it.
        task: a name of :data:`dupbert.training.tasks.TASKS`, or ``None`` (not about one task).
        metric: the metric (``accuracy``, ``f1``, ``exact``, ...) or a description.
        claimed_gain: the claimed gain over the baseline in percentage points (accuracy × 100,
            SQuAD EM/F1 as they are); ``0.0`` for "no gain"; ``None`` where the paper gives none.
        paper_value: the paper's number(s) as text, or ``"not stated"``.
        source: the part of the paper that carries the claim.
    """

    id: str
    rq: int
    statement: str
    task: str | None
    metric: str
    claimed_gain: float | None
    paper_value: str
    source: str


CLAIMS: tuple[Claim, ...] = (
    Claim("rq1-head-decodes-every-layer", 1,
          "The pretrained MLM output layer, trained only on the last hidden layer, reconstructs "
          "the input tokens when applied to the hidden state of every layer.",
          None, "token reconstruction accuracy", None, NOT_STATED, "abstract; probing section"),
    Claim("rq1-holds-with-duplicated-layers", 1,
          "The reconstruction from every layer still holds when some layers are duplicated.",
          None, "token reconstruction accuracy", None, NOT_STATED, "abstract; probing section"),
    Claim("rq2-layers-distributed-similarly", 2,
          "The hidden states of different layers are distributed similarly enough for one "
          "output layer to decode them all.",
          None, "hidden-state statistics and similarity", None, NOT_STATED,
          "analysis section"),
    Claim("rq3-method", 3,
          "Duplicating pretrained layers (no extra training; in BERT deep copies with no "
          "weight sharing, e.g. the first three layers of BERT-base; in ALBERT more repeats of "
          "its one shared layer) and fine-tuning with the baseline's hyper-parameters improves "
          "downstream results.",
          None, "downstream metric", None, NOT_STATED, "abstract; method section"),
    Claim("rq3-squad2-f1", 3,
          "Layer duplication improves SQuAD 2.0 by up to +1.5 F1.",
          "squad2", "f1", 1.5, "up to +1.5 F1", "experiments (SQuAD 2.0)"),
    Claim("rq3-squad2-exact", 3,
          "Layer duplication improves SQuAD 2.0 exact match (size of the gain not in our "
          "sources).",
          "squad2", "exact", None, NOT_STATED, "experiments (SQuAD 2.0)"),
    Claim("rq3-snli-accuracy", 3,
          "Layer duplication improves SNLI by up to +0.6 accuracy.",
          "snli", "accuracy", 0.6, "up to +0.6 accuracy", "experiments (SNLI)"),
    Claim("rq3-sst2-accuracy", 3,
          "Layer duplication gives no gain on SST-2.",
          "sst2", "accuracy", 0.0, "no gain", "experiments (SST-2)"),
    Claim("rq4-consistent-across-models", 4,
          "The gain from duplication is consistent across BERT-based models (BERT-base; ALBERT "
          "base, large, xlarge, xxlarge) and tasks.",
          None, "downstream metric", None, NOT_STATED, "abstract; experiments"),
    Claim("rq5-ensemble-squad2-exact", 5,
          "An ensemble of models with different duplication configurations (output "
          "probabilities summed), ALBERT-based, reaches 85.50 EM on SQuAD 2.0.",
          "squad2", "exact", None, "85.50 EM", "experiments (ensemble)"),
    Claim("rq5-ensemble-squad2-f1", 5,
          "The same best SQuAD 2.0 ensemble (ALBERT-based) reaches 88.59 F1.",
          "squad2", "f1", None, "88.59 F1", "experiments (ensemble)"),
)

# An absolute score the paper reports (not a gain): claim id -> value in points.
PAPER_SCORES: dict[str, float] = {"rq5-ensemble-squad2-exact": 85.50,
                                  "rq5-ensemble-squad2-f1": 88.59}

# The independent public replication (one seed; SQuAD 2.0 dev half of 6,078 questions; lr 3e-5,
# 3 epochs, batch 32, max_seq 384, stride 128). Not the paper.
REPLICATION_SETUP = ("independent public replication (course project), one seed, SQuAD 2.0 dev "
                     "half (6,078 questions), lr 3e-5, 3 epochs, batch 32, max_seq 384, "
                     "stride 128")
REPLICATION: tuple[dict, ...] = (
    dict(model="bert-base-uncased", configuration="baseline", exact=72.85, f1=76.04),
    dict(model="bert-base-uncased", configuration="duplicate layer 0", exact=71.93, f1=75.15),
    dict(model="bert-base-uncased", configuration="duplicate layer 5", exact=71.82, f1=75.04),
    dict(model="albert-base-v2", configuration="baseline (12 repeats)", exact=78.83, f1=82.00),
    dict(model="albert-base-v2", configuration="13 repeats of the shared layer", exact=79.45,
         f1=82.55),
    dict(model="albert-base-v2", configuration="17 repeats of the shared layer", exact=79.32,
         f1=82.49),
    dict(model="albert-base-v2", configuration="20 repeats of the shared layer", exact=79.30,
         f1=82.49),
)

# More of the same replication: every single layer, and RoBERTa (F1 points, SQuAD 2.0 dev half).
REPLICATION_SINGLE_LAYERS = dict(
    model="bert-base-uncased", configurations="duplicate any one of blocks 0-9", f1_low=74.17,
    f1_high=76.12, baseline_f1=76.04)
REPLICATION_ROBERTA = dict(model="roberta-base", configuration="duplicate the first 3 layers",
                           f1=82.94, baseline_f1=82.67)

# Published seed spread of fine-tuning (accuracy points), to set beside ours. No published seed sd
# was found for SST-2 or SQuAD 2.0.
SEED_SPREAD: tuple[dict, ...] = (
    dict(source="Zhou et al. 2020 (InstabilityAnalysis per-seed results)", model="bert-base",
         task="snli", data="full SNLI train", seeds=10, statistic="sd", value=0.11),
    dict(source="Zhou et al. 2020 (InstabilityAnalysis per-seed results)", model="bert-base",
         task="mnli-m", data="full MNLI train", seeds=10, statistic="sd", value=0.24),
    dict(source="McCoy et al. 2020", model="bert-base", task="mnli", data="full MNLI train",
         seeds=100, statistic="range of dev accuracy", value="83.6-84.8"),
)

# ALBERT paper (Lan et al. 2019, arXiv 1909.11942, appendix): ALBERT-large *pretrained* with 12 / 24 /
# 48 applications of its shared layer (not duplicated after pretraining): SQuAD 2.0 F1.
ALBERT_DEPTH: tuple[dict, ...] = (
    dict(model="albert-large", applications=12, squad2_f1=80.7),
    dict(model="albert-large", applications=24, squad2_f1=81.8),
    dict(model="albert-large", applications=48, squad2_f1=81.8),
)
ALBERT_PAPER = "Lan et al. (2019), arXiv 1909.11942"


def seed_spread() -> pd.DataFrame:
    """:data:`SEED_SPREAD` as a frame (one row per published figure)."""
    return pd.DataFrame(SEED_SPREAD)


def claims() -> pd.DataFrame:
    """Every claim, one row each, in :data:`CLAIMS` order (columns = :class:`Claim` fields)."""
    frame = pd.DataFrame([dataclasses.asdict(c) for c in CLAIMS], dtype=object)
    return frame.astype({"rq": int})


def claim(claim_id: str) -> Claim:
    """The claim with id ``claim_id``.

    Raises:
        KeyError: no such claim; the message lists the ids.
    """
    for c in CLAIMS:
        if c.id == claim_id:
            return c
    raise KeyError(f"no claim {claim_id!r}; claims are {[c.id for c in CLAIMS]}")


def replication() -> pd.DataFrame:
    """The public one-seed replication's SQuAD 2.0 EM and F1 (points) with its F1 gain over its own
    baseline; ``source`` is ``"replication"``."""
    frame = pd.DataFrame(REPLICATION)
    base = frame[frame["configuration"].str.startswith("baseline")].set_index("model")["f1"]
    frame["f1_gain"] = (frame["f1"] - frame["model"].map(base)).round(2)
    frame["task"] = "squad2"
    frame["source"] = "replication"
    frame["setup"] = REPLICATION_SETUP
    return frame


def gain_claim(task: str, metric: str) -> Claim | None:
    """The RQ3 claim about a duplication gain on ``task`` measured by ``metric`` (``None`` if
    the paper states none)."""
    for c in CLAIMS:
        if c.rq == 3 and c.task == task and c.metric == metric:
            return c
    return None


def rq3_claims(tasks) -> pd.DataFrame:
    """The paper's RQ3 claims on ``tasks`` (index ``id``; ``task, metric, paper_value,
    claimed_gain``)."""
    claimed = claims()
    claimed = claimed[(claimed["rq"] == 3) & claimed["task"].isin(set(tasks))]
    return claimed[["id", "task", "metric", "paper_value", "claimed_gain"]].set_index("id")
