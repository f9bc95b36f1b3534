"""The fine-tuning tasks as data, registered once: each :class:`TaskSpec` holds its files, columns,
metrics, its pre-registered learning floor and its place in the run order, with no heavy import
(``dupbert.training.tasks`` reads and scores the tasks; the parameter forms, the planner and the comparisons
read these specs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

SPLITS = ("train", "eval")


@dataclass(frozen=True)
class TaskSpec:
    """A fine-tuning task: what its rows look like, where they live, how it is scored.

    Attributes:
        name: registry key (``sst2``, ``snli``, ``squad2``, ``uspto50k``).
        kind: ``"classification"`` or ``"qa"`` (extractive, SQuAD 2.0 style).
        label_names: class names in label-id order (``()`` for QA).
        text_columns: model-input columns in tokenizer order (QA: question, then context).
        train_file, eval_file: paths under the data directory.
        hub: Hub fallback ``(path, config, train split, eval split)`` or ``None``.
        metrics: metric names, primary first. Classification: ``accuracy``, ``macro_f1``
            (fractions in [0, 1]); QA: the official SQuAD 2.0 ``f1``, ``exact``, ``HasAns_f1``,
            ``NoAns_f1`` (percent, :func:`dupbert.training.metrics.squad_v2`).
        max_length: tokens per input (``run_glue.py`` 128, ``run_qa.py`` 384).
        doc_stride: overlap of consecutive QA windows in tokens (``run_qa.py`` 128); ``None``.
        n_train, n_eval: rows of the local files (SOURCES.md), checked by the tests.
        source: SOURCES entry of the local files.
        note: what the book must say about the splits used.
        description: one line for tables and messages.
        floor: the pre-registered learning floor ``(metric, points)``: a comparison is judged only
            when its baseline's mean reaches it (RQ3 chapter, fixed before the runs).
        priority: the place in the run order when ``tasks`` is not given (lower first).
    """

    name: str
    kind: str
    label_names: tuple[str, ...]
    text_columns: tuple[str, ...]
    train_file: str
    eval_file: str
    hub: tuple[str, str | None, str, str] | None
    metrics: tuple[str, ...]
    max_length: int
    doc_stride: int | None
    n_train: int
    n_eval: int
    source: str
    note: str
    description: str = field(default="")
    floor: tuple[str, float] | None = None
    priority: int = 99

    @property
    def num_labels(self) -> int:
        """Number of classes (0 for QA)."""
        return len(self.label_names)

    def file(self, split: str) -> str:
        """The path of ``split`` (``"train"``/``"eval"``) under the data directory."""
        return self.train_file if _check_split(split) == "train" else self.eval_file


USPTO50K_CLASSES = (  # Schneider, Stiefl & Landrum (2016) superclasses 1..10 -> labels 0..9
    "heteroatom alkylation and arylation", "acylation and related processes", "C-C bond formation",
    "heterocycle formation", "protections", "deprotections", "reductions", "oxidations",
    "functional group interconversion", "functional group addition",
)

TASKS: dict[str, TaskSpec] = {
    t.name: t
    for t in [
        TaskSpec(
            name="sst2", kind="classification", label_names=("negative", "positive"),
            text_columns=("text",), train_file="sst2/train.tsv.gz", eval_file="sst2/dev.tsv",
            hub=("nyu-mll/glue", "sst2", "train", "validation"), metrics=("accuracy", "macro_f1"),
            max_length=128, doc_stride=None, n_train=67349, n_eval=872, source="SOURCES.md, SST-2",
            description="SST-2 (GLUE) binary sentiment of movie-review sentences",
            floor=("accuracy", 80.0), priority=1,
            note="SST-2: the complete GLUE train split (67,349 sentences) and dev split (872; the "
                 "GLUE test split has no labels)."),
        TaskSpec(
            name="snli", kind="classification",
            label_names=("entailment", "neutral", "contradiction"),
            text_columns=("premise", "hypothesis"), train_file="snli/snli_test.becel.tsv",
            eval_file="snli/snli_dev.becel.tsv",
            hub=("stanfordnlp/snli", "plain_text", "train", "validation"),
            metrics=("accuracy", "macro_f1"), max_length=128, doc_stride=None, n_train=9824,
            n_eval=9842, source="SOURCES.md, SNLI",
            description="SNLI 1.0 natural language inference (premise, hypothesis) -> 3 classes",
            floor=("accuracy", 55.0), priority=0,
            note="SNLI: no train split is available offline, so we train on the official SNLI "
                 "*test* split (9,824 labelled pairs) and evaluate on the official dev split "
                 "(9,842). The paper trained on the 550k-pair train split, so our SNLI numbers are "
                 "lower and not comparable to it in absolute terms; the comparison that matters is "
                 "baseline vs duplicated under the same data. With the Hugging Face Hub (no data "
                 "directory set), stanfordnlp/snli train and validation are used instead."),
        TaskSpec(
            name="squad2", kind="qa", label_names=(), text_columns=("question", "context"),
            train_file="squad2/train-v2.0.first10articles.json.gz",
            eval_file="squad2/dev-v2.0.reconstructed.json.gz",
            hub=("rajpurkar/squad_v2", None, "train", "validation"),
            metrics=("f1", "exact", "HasAns_f1", "NoAns_f1"),
            max_length=384, doc_stride=128, n_train=10671, n_eval=5921,
            source="SOURCES.md, SQuAD 2.0",
            description="SQuAD 2.0 extractive question answering with unanswerable questions",
            floor=("HasAns_f1", 25.0), priority=3,
            note="SQuAD 2.0: only the first 10 official train articles are available offline "
                 "(4,719 questions, 7% unanswerable, against 130,319 and 33% in the full train "
                 "split); trained on them alone a model rarely abstains and cannot beat the "
                 "all-empty F1 of 50 on dev (50% unanswerable). So we split the official dev set "
                 "(rebuilt from the official explorer pages; EM/F1 are exact) *by article*: the "
                 "17 odd-numbered dev articles (5,952 questions) join the 10 train articles for "
                 "training (10,671 questions, 32% unanswerable), and we evaluate on the 18 "
                 "even-numbered ones (5,921 questions, 49% unanswerable); no article is in both. "
                 "Absolute scores are therefore not comparable with the paper's. With the Hugging "
                 "Face Hub, rajpurkar/squad_v2 train and validation are used instead."),
        TaskSpec(
            name="uspto50k", kind="classification", label_names=USPTO50K_CLASSES,
            text_columns=("text",), train_file="reactions/uspto50k_valid_unmapped.csv",
            eval_file="reactions/uspto50k_test_unmapped.csv", hub=None,
            metrics=("accuracy", "macro_f1"), max_length=128, doc_stride=None, n_train=5001,
            n_eval=5001, source="SOURCES-domain.md B3/B4",
            description="USPTO-50k reaction class (10 superclasses) from atom-map-free reaction "
                        "SMILES, for the SMILES models rxnfp-bert and rxnmapper-albert",
            floor=("accuracy", 80.0), priority=2,
            note="USPTO-50k: the train split is not available offline, so we train on the "
                 "validation split (5,001 reactions) and test on the test split (5,001). Classes "
                 "are strongly imbalanced (class 1: 30% of test, class 10: 0.5%): report macro-F1 "
                 "next to accuracy. Reactions longer than 128 SMILES tokens are truncated."),
    ]
}


def _check_split(split: str) -> str:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    return split


TASK_NAMES: tuple[str, ...] = tuple(TASKS)
"""The task names, in :data:`TASKS`' order."""

# Run order when `tasks` is not given: the paper's claims ordered by what a CPU-hour decides. SNLI
# (claimed +0.6) first; SST-2 (claimed no gain; short sentences, cheap); USPTO-50k (the method on
# the real pretrained reaction MLMs, the ALBERT form among them); SQuAD 2.0 (claimed +1.5 F1, but
# 384-token windows make it the dearest) last. A study cut short has the cheap decisions.
TASK_PRIORITY: tuple[str, ...] = tuple(sorted(TASKS, key=lambda name: TASKS[name].priority))

# Pre-registered floors (RQ3 chapter, fixed before the runs): a comparison is judged only when
# its baseline's mean beats the trivial baseline clearly. Task -> (metric, floor in points).
# Trivial baselines: SNLI majority 34, SST-2 majority 51, USPTO-50k majority 30.5, SQuAD 2.0
# all-empty HasAns F1 0 (its overall F1 is the unanswerable share, ~50, whatever the model knows).
LEARNING_FLOORS: dict[str, tuple[str, float]] = {
    name: spec.floor for name, spec in TASKS.items() if spec.floor is not None}
