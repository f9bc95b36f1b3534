"""The RQ3 chapter's tables and glued numbers (``notebooks/rq3.ipynb``): the study's design, its
pilots, per task every configuration against its reference, the study in one row per model and
task, the findings and stalled runs its "What the numbers say" section shows, the confirmatory test
and the growth arm; from the frames of :mod:`dupbert.study.comparisons`, scores in points. The prose is
in the notebook's Markdown. Last, the notebook's plumbing: its files and settings
(:func:`chapter_setup`), and what a cell displays or glues, each from one call.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.results import repository_path
from ..study.comparisons import CONTROLS, LEARNING_FLOORS, learning_floor, learning_status, stalled_runs
from ..study.paper import ALBERT_DEPTH, ALBERT_PAPER, REPLICATION_ROBERTA, REPLICATION_SINGLE_LAYERS
from ..training.tasks import task_metrics
from .text import interval_text, p_text


def study_design(plan) -> pd.DataFrame:
    """RQ3's design table, one row per planned model and task (index ``model, task``): primary and
    secondary configurations, subset sizes, hyper-parameters, seeds, ``detectable (x sd)`` (the
    smallest gain the primary test detects with 80% power, in sds of the per-seed differences)
    and the learning floor.

    Args:
        plan: ``dupbert.study.profiles.PlannedSweep`` entries (``plan_sweep``).
    """
    from ..core.significance import minimum_detectable_gain

    return pd.DataFrame([{
        "model": entry.model, "task": entry.task,
        "primary": " vs ".join(reversed(entry.primary)) if len(entry.primary) == 2 else "none",
        "secondary": ", ".join(d for d in entry.duplications if d not in entry.primary) or "none",
        "train": entry.max_train_samples or "all", "eval": entry.max_eval_samples or "all",
        "lr": f"{entry.hyperparameters.learning_rate:g}", "epochs": f"{entry.hyperparameters.epochs:g}",
        "batch": entry.hyperparameters.batch_size, "seeds": len(entry.seeds),
        "detectable (x sd)": round(minimum_detectable_gain(1.0, len(entry.seeds)), 2),
        "floor": "{} >= {:g}".format(*learning_floor(entry.task)) if entry.task in LEARNING_FLOORS else "none",
    } for entry in plan]).set_index(["model", "task"])


def pilot_table(path, missing: str | None = None) -> pd.DataFrame:
    """RQ3's classification pilots (``scripts/pilot_rq3.py`` JSON lines), one row per pilot:
    sizes, hyper-parameters, ``steps`` (the last evaluated), ``accuracy along the way`` and
    ``final`` (points, the accuracy at the last step, which a floor is judged on) and ``minutes``.
    Where ``path`` (a relative one from the repository root) does not exist: empty, or the
    Markdown output ``missing`` where given."""
    path = repository_path(path)
    if not path.is_file():
        return pd.DataFrame() if missing is None else _markdown(missing)
    pilots = pd.read_json(path, lines=True)
    pilots["steps"] = [curve[-1][0] for curve in pilots["curve"]]
    pilots["accuracy along the way"] = [", ".join(f"{100 * acc:.1f}" for _, acc, _ in curve)
                                        for curve in pilots["curve"]]
    pilots["final"] = [round(100 * curve[-1][1], 1) for curve in pilots["curve"]]
    pilots["minutes"] = (pilots["wall_s"] / 60).round(1)
    return pilots[["model", "task", "n_train", "n_eval", "learning_rate", "epochs", "batch_size",
                   "steps", "accuracy along the way", "final", "minutes"]
                  ].set_index(["model", "task"])


def squad_pilot_table(path, missing: str | None = None) -> pd.DataFrame:
    """RQ3's SQuAD 2.0 pilots (finetune JSON lines), index ``model``: sizes, hyper-parameters, F1s
    (points, one decimal), whether the floor was reached, training minutes. Where ``path`` (a
    relative one from the repository root) does not exist: empty, or the Markdown output
    ``missing`` where given."""
    path = repository_path(path)
    if not path.is_file():
        return pd.DataFrame() if missing is None else _markdown(missing)
    pilots = pd.json_normalize(pd.read_json(path, lines=True).to_dict("records"))
    floor_metric, floor = learning_floor("squad2")
    return pd.DataFrame({
        "model": pilots["model"], "n_train": pilots["n_train"], "n_eval": pilots["n_eval"],
        "learning_rate": pilots["hyperparameters.learning_rate"],
        "epochs": pilots["hyperparameters.epochs"], "steps": pilots["train_steps"],
        "HasAns F1": pilots["metrics.HasAns_f1"].round(1),
        "NoAns F1": pilots["metrics.NoAns_f1"].round(1),
        "F1": pilots["metrics.f1"].round(1),
        "best F1 (tuned threshold)": pilots["metrics.best_f1"].round(1),
        "all-empty F1": pilots["baselines.f1"].round(1),
        f"learned ({floor_metric} >= {floor:.0f})": pilots[f"metrics.{floor_metric}"] >= floor,
        "train minutes": (pilots["train_time_s"] / 60).round(0).astype(int),
    }).set_index("model")


def _bonferroni_text(row) -> str:
    """A secondary's simultaneous interval at 1 - 0.05/m, with its level."""
    if pd.isna(row.bonferroni_ci_low):
        return ""
    return (f"[{row.bonferroni_ci_low:+.2f}, {row.bonferroni_ci_high:+.2f}] "
            f"({100 * row.bonferroni_confidence:g}%)")


def task_table(table: pd.DataFrame, task: str, metric: str) -> pd.DataFrame:
    """RQ3's table of one task and metric (index ``model, configuration``; strings, points): per
    model its trivial baseline, then every configuration's mean, gain, Bonferroni CI (secondary),
    p, deciding p, smallest detectable gain, paper value and verdict.

    Args:
        table: :func:`dupbert.study.comparisons.comparison` output.
    """
    rows = []
    for name in dict.fromkeys(table.loc[table["task"] == task, "model"]):
        cell = table[(table["model"] == name) & (table["task"] == task) & (table["metric"] == metric)]
        if cell.empty:
            continue
        rows.append({"model": name, "configuration": f"trivial: {cell['trivial_name'].iloc[0]}",
                     "role": "", "seeds": "", f"{metric} [95% CI]": f"{cell['trivial'].iloc[0]:.2f}",
                     "gain [95% CI]": "", "Bonferroni CI": "", "vs": "", "p": "", "deciding p": "",
                     "smallest detectable gain": "", "paper": "", "verdict": ""})
        for row in cell.itertuples():
            compared = pd.notna(row.n_pairs)
            rows.append({
                "model": name, "configuration": row.duplication,
                "role": row.role if compared else "reference", "seeds": str(row.n),
                f"{metric} [95% CI]": interval_text(row.mean, row.ci_low, row.ci_high),
                "gain [95% CI]": interval_text(row.gain, row.gain_ci_low, row.gain_ci_high, signed=True),
                "Bonferroni CI": _bonferroni_text(row) if compared and row.role == "secondary" else "",
                "vs": row.reference if compared else "",
                "p": p_text(row.p_value), "deciding p": p_text(row.p_adjusted),
                "smallest detectable gain": "" if pd.isna(row.min_detectable_gain) else f"{row.min_detectable_gain:.2f}",
                "paper": row.paper_value if compared and row.duplication not in CONTROLS else "",
                "verdict": (f"{row.verdict} (secondary)" if row.role == "secondary"
                            and row.verdict in ("reproduced", "refuted", "undecided") else row.verdict),
            })
    return pd.DataFrame(rows).set_index(["model", "configuration"])


def study_table(study: pd.DataFrame, timed: bool = True) -> pd.DataFrame:
    """RQ3's one row per model and task from ``dupbert.study.studies.study_summary``, as strings; the
    minutes column only if ``timed``."""
    shown = pd.DataFrame({
        "model": study["model"], "task": study["task"], "metric": study["metric"], "seeds": study["seeds"],
        "runs (primary; secondary)": study["runs_primary"] + "; " + study["runs_secondary"],
        "baseline [95% CI]": [interval_text(*v) for v in zip(study["baseline_mean"], study["baseline_ci_low"],
                                                             study["baseline_ci_high"])],
        "trivial": [interval_text(v, np.nan, np.nan) for v in study["trivial"]],
        "minutes per run (train + eval)": [f"{t:.0f} + {e:.1f}" if pd.notna(t) else ""
                                           for t, e in zip(study["train_min"], study["eval_min"])],
        "primary": study["primary"].fillna(""),
        "gain [95% CI]": [interval_text(g, lo, hi, signed=True) for g, lo, hi in zip(
            study["gain"], study["gain_ci_low"], study["gain_ci_high"])],
        "p": [p_text(v) for v in study["p_value"]],
        "smallest detectable gain": [interval_text(v, np.nan, np.nan) for v in study["min_detectable_gain"]],
        "verdict": study["verdict"],
    }).set_index(["model", "task"])
    return shown if timed else shown.drop(columns="minutes per run (train + eval)")


def _decidable(row, pairs: int) -> str:
    """What the seeds can decide: the detectable gain, or for "no gain" the largest standard
    deviation of the paired differences at which the 95% interval fits within the margin."""
    from ..core.significance import EQUIVALENCE_MARGIN, equivalence_sd_limit

    if row.claimed_gain != 0:
        return f"a gain of {row.min_detectable_gain:.2f}"
    return (f"within ±{EQUIVALENCE_MARGIN:g} if sd <= {equivalence_sd_limit(pairs):.2f} "
            f"(half-width now {row.gain_ci_high - row.gain:.2f})")


def _secondary(row) -> str:
    if not row.n_secondary:
        return f"{row.n_secondary_pending} pending" if row.n_secondary_pending else "none"
    return (f"{row.n_secondary_gains} better, {row.n_secondary_losses} worse of {row.n_secondary}"
            + (f" (largest gain: {row.best_secondary}, {row.best_secondary_gain:+.2f})" if row.best_secondary else "")
            + (f"; {row.n_secondary_pending} pending" if row.n_secondary_pending else ""))


FINDINGS_COLUMNS = ["metric", "baseline [95% CI]", "seeds", "trivial", "floor", "primary",
                    "gain [95% CI]", "p", "the seeds can decide", "secondary (Holm)", "paper", "verdict"]
"""The columns of :func:`findings_table`."""


def findings_table(summary: pd.DataFrame, table: pd.DataFrame, results: pd.DataFrame) -> pd.DataFrame:
    """RQ3's findings, one row per model and task on its primary metric (index ``model, task``):
    the baseline [95% CI] over its seeds beside the trivial baseline and the floor, the primary
    comparison's gain [95% CI] over its paired seeds with p, what those seeds can decide, the
    secondary configurations significantly better and worse after Holm, the paper's claim and the
    verdict. A model whose baseline missed its floor reads ``did not learn``; one without a
    baseline or primary run says so in ``verdict``. Empty without rows.

    Args:
        summary: :func:`dupbert.study.comparisons.overall` of ``table``.
        table: :func:`dupbert.study.comparisons.comparison` of ``results``.
        results: ``ResultsFile.frame()`` rows (for
            :func:`dupbert.study.comparisons.learning_status`).
    """
    rows = []
    status = learning_status(results) if len(results) else pd.DataFrame()
    for row in summary.itertuples():
        if row.metric != task_metrics(row.task)[0]:
            continue
        shown = dict.fromkeys(FINDINGS_COLUMNS, "")
        shown.update(model=row.model, task=row.task, metric=row.metric)
        base = table[(table["model"] == row.model) & (table["task"] == row.task)
                     & (table["metric"] == row.metric) & (table["duplication"] == "baseline")]
        if base.empty:
            rows.append({**shown, "verdict": "no baseline run yet"})
            continue
        base = base.iloc[0]
        floor = status[(status["model"] == row.model) & (status["task"] == row.task)].iloc[0]
        shown.update({"baseline [95% CI]": interval_text(base["mean"], base["ci_low"], base["ci_high"]),
                      "seeds": int(base["n"]), "trivial": f"{base['trivial']:.2f}",
                      "floor": f"{floor['floor_metric']} >= {floor['floor']:g}"})
        if not floor["learned"]:
            rows.append({**shown, "verdict": "did not learn"})
            continue
        if row.primary is None:
            rows.append({**shown, "verdict": "no primary run yet"})
            continue
        pairs = int(row.n_pairs)
        shown.update({"primary": row.primary,
                      "gain [95% CI]": interval_text(row.gain, row.gain_ci_low, row.gain_ci_high, signed=True)
                                       + f" ({pairs} pair{'s' if pairs != 1 else ''})",
                      "p": p_text(row.p_value) if pairs >= 2 else "no test before a second seed",
                      "the seeds can decide": _decidable(row, pairs) if pairs >= 2 else "",
                      "secondary (Holm)": _secondary(row),
                      "paper": row.paper_value if row.claimed_gain is not None else "states nothing",
                      "verdict": row.verdict if row.claimed_gain is not None else "not stated"})
        rows.append(shown)
    return pd.DataFrame(rows, columns=["model", "task", *FINDINGS_COLUMNS]).set_index(["model", "task"])


def stalled_table(points: pd.DataFrame) -> pd.DataFrame:
    """:func:`dupbert.study.comparisons.stalled_runs` per model and task (index ``model, task``): the
    floor's metric, the trivial baseline and the cutoff (points), and the stalled runs
    (``"copy last at seeds 0 (31.00), 1 (32.00)"``, configurations joined by ``"; "``)."""
    stalled = stalled_runs(points)
    rows = []
    for (name, task), runs in stalled.groupby(["model", "task"], sort=False):
        listed = "; ".join(
            f"{duplication} at seed{'s' if len(group) > 1 else ''} "
            + ", ".join(f"{int(r.seed)} ({r.value:.2f})" for r in group.itertuples())
            for duplication, group in runs.groupby("duplication", sort=False))
        rows.append({"model": name, "task": task, "metric": runs["metric"].iloc[0],
                     "trivial": f"{runs['trivial'].iloc[0]:.2f}", "cutoff": f"{runs['cutoff'].iloc[0]:.2f}",
                     "stalled runs": listed})
    return pd.DataFrame(rows, columns=["model", "task", "metric", "trivial", "cutoff", "stalled runs"]
                        ).set_index(["model", "task"])


def replication_table() -> pd.DataFrame:
    """:data:`dupbert.study.paper.REPLICATION_SINGLE_LAYERS`, :data:`dupbert.study.paper.REPLICATION_ROBERTA`
    and :data:`dupbert.study.paper.ALBERT_DEPTH` as one table of SQuAD 2.0 F1 (index ``source, model,
    what``; columns ``F1`` and ``baseline F1``, as the sources print them)."""
    single, roberta = REPLICATION_SINGLE_LAYERS, REPLICATION_ROBERTA
    rows = [{"source": "replication", "model": single["model"], "what": single["configurations"],
             "F1": f"{single['f1_low']}-{single['f1_high']}", "baseline F1": str(single["baseline_f1"])},
            {"source": "replication", "model": roberta["model"], "what": roberta["configuration"],
             "F1": str(roberta["f1"]), "baseline F1": str(roberta["baseline_f1"])}]
    rows += [{"source": ALBERT_PAPER, "model": f"{r['model']} (pretrained, not duplicated)",
              "what": f"{r['applications']} applications of its shared layer",
              "F1": str(r["squad2_f1"]), "baseline F1": ""} for r in ALBERT_DEPTH]
    return pd.DataFrame(rows).set_index(["source", "model", "what"])


def confirmatory_table(tests: pd.DataFrame) -> pd.DataFrame:
    """:func:`dupbert.study.comparisons.confirmatory_test` as the chapter shows it (index ``model, task,
    comparison``): metric, verdict, the paired gain [95% CI], p and seeds, and the baseline [95%
    CI] beside its floor (points); a pending test shows its verdict only (nothing is judged before
    every planned pair has landed)."""
    rows = []
    for row in tests.itertuples():
        shown = {"model": row.model, "task": row.task, "comparison": f"{row.configuration} - {row.reference}",
                 "metric": row.metric, "verdict": row.verdict, "gain [95% CI]": "", "p": "", "seeds": "",
                 "baseline [95% CI]": "", "floor": ""}
        if not str(row.verdict).startswith("pending"):
            shown.update({"gain [95% CI]": interval_text(row.gain, row.gain_ci_low, row.gain_ci_high, signed=True),
                          "p": p_text(row.p_value), "seeds": str(row.seeds),
                          "baseline [95% CI]": interval_text(row.baseline_mean, row.baseline_ci_low,
                                                             row.baseline_ci_high),
                          "floor": f"{row.floor:g}"})
        rows.append(shown)
    return pd.DataFrame(rows, columns=["model", "task", "comparison", "metric", "verdict", "gain [95% CI]", "p",
                                       "seeds", "baseline [95% CI]", "floor"]
                        ).set_index(["model", "task", "comparison"])


def growth_table(tests: pd.DataFrame) -> pd.DataFrame:
    """The growth arm's comparisons (``dupbert.study.growth.growth_tests``) as the chapter shows them:
    means, the gain with its 95% interval and the smallest detectable gain, in points to 2
    decimals; p to 3."""
    two = lambda v: "" if pd.isna(v) else f"{v:.2f}"  # noqa: E731
    shown = pd.DataFrame({
        "arm": tests["arm"], "against": tests["reference"], "role": tests["role"],
        "pairs": tests["n_pairs"], "arm mean": tests["arm_mean"].map(two),
        "reference mean": tests["reference_mean"].map(two),
        "gain [95% CI]": [interval_text(g, lo, hi, signed=True) for g, lo, hi in
                          zip(tests["gain"], tests["gain_ci_low"], tests["gain_ci_high"])],
        "p (Holm for the secondary)": tests["p_adjusted"].map(p_text),
        "smallest detectable gain": tests["min_detectable_gain"].map(two),
        "verdict": tests["verdict"]})
    return shown.set_index("arm")


def landed_numbers(progress: pd.DataFrame, results: pd.DataFrame) -> dict[str, int | str]:
    """How far a plan got (``dupbert.study.studies.plan_progress``, the plan's ``results``): ``landed``
    and ``planned`` runs, their optimisation ``steps``, and their ``cpu_hours`` of training (one
    decimal; wall times differ between executions, so not for outputs ``pytest --nbval``
    compares)."""
    return {"landed": len(results), "planned": int(progress["planned"].sum()),
            "steps": int(results["train_steps"].sum()) if len(results) else 0,
            "cpu_hours": f"{results['train_time_s'].sum() / 3600:.1f}" if len(results) else "0.0"}


def rq1_beside_rq3_table(rq1: pd.DataFrame, cells: pd.DataFrame,
                         decided: dict[tuple[str, str], tuple[str, str | None]]) -> pd.DataFrame:
    """One model's RQ1 beside its RQ3 (``dupbert.study.studies.rq1_beside_rq3``), as the chapter shows
    it: rows ``baseline``, the tested configuration and their difference (RQ1's left blank); a
    column for RQ1's worst block output (top-1 [95% CI], hidden state) and one per RQ3 cell (its
    metric's mean over the planned seeds, points; the paired gain [95% CI], p and the claim's
    verdict under the study's rule, ``decided``: ``dupbert.study.glance.decisive_tests``), each pending
    until its runs land."""
    baseline, configuration = rq1["configuration"].tolist()
    shown = {}
    worst = rq1.set_index("configuration")
    shown["RQ1: worst block output"] = [
        "not probed" if pd.isna(worst.loc[c, "top1"]) else
        f"{worst.loc[c, 'top1']:.3f} [{worst.loc[c, 'low']:.3f}, {worst.loc[c, 'high']:.3f}] "
        f"(hidden state {int(worst.loc[c, 'layer'])})" for c in (baseline, configuration)] + [""]
    for cell in cells.itertuples():
        heading = f"RQ3: {cell.task} {cell.metric}"
        if str(cell.verdict).startswith("pending"):
            shown[heading] = [cell.verdict, cell.verdict, ""]
            continue
        verdict = decided.get((cell.model, cell.task), (None, None))[1] or cell.verdict
        shown[heading] = [
            interval_text(cell.baseline_mean, cell.baseline_ci_low, cell.baseline_ci_high),
            f"{cell.mean:.2f}",
            f"{interval_text(cell.gain, cell.gain_ci_low, cell.gain_ci_high, signed=True)} "
            f"(p {p_text(cell.p_value)}; {cell.n_pairs} seeds): {verdict}"]
    return pd.DataFrame(shown, index=pd.Index(
        [baseline, configuration, f"{configuration} - {baseline}"], name="configuration"))


def answer_table(findings: pd.DataFrame, intervals: pd.DataFrame) -> pd.DataFrame:
    """The chapter's opening answer, one row per model and task of ``findings`` (index ``model,
    task``): the primary configuration, its gain [95% CI over seeds] (the registered interval), the
    95% interval over seeds and evaluation examples (``"-"`` without stored per-example outputs),
    and the verdict under each (``"registered / both errors"`` where they differ). A cell without
    a primary comparison (its baseline did not learn, or no run yet) keeps its verdict with
    ``"-"`` in the other columns.

    Args:
        findings: :func:`findings_table`.
        intervals: ``dupbert.study.variance.interval_table`` of the study's two-way table (may be empty).
    """
    rows = []
    for (model, task), row in findings.iterrows():
        key = (model, task, row["primary"])
        both = intervals.loc[key] if row["primary"] and len(intervals) and key in intervals.index else None
        registered = row["verdict"]
        rows.append({"model": model, "task": task, "primary": row["primary"] or "-",
                     "gain [95% CI over seeds]": row["gain [95% CI]"].split(" (")[0] or "-",
                     "95% CI over seeds and examples": "-" if both is None else both["seeds and examples"],
                     "verdict": registered if both is None or both["verdict, both errors"] == registered
                     else f"{registered} / {both['verdict, both errors']}"})
    return pd.DataFrame(rows, columns=["model", "task", "primary", "gain [95% CI over seeds]",
                                       "95% CI over seeds and examples", "verdict"]).set_index(["model", "task"])


# The notebook's plumbing: what its cells display or glue, each from one call.

def _markdown(text: str):
    """``IPython.display.Markdown(text)``: a Markdown cell output (IPython comes with the kernel
    that runs the notebook, not with dupbert)."""
    from IPython.display import Markdown

    return Markdown(text)


def or_note(frame: pd.DataFrame, note: str):
    """``frame`` where it has rows, else ``note`` as a Markdown output (``IPython.display.Markdown``)."""
    return frame if len(frame) else _markdown(note)


@dataclasses.dataclass(frozen=True)
class ChapterSetup:
    """The RQ3 notebook's files and settings, from its parameters (:func:`chapter_setup`).

    Attributes:
        results: the results file (JSON lines), absolute.
        outputs: the per-example outputs folder, absolute; None: none stored.
        confirm: the confirmatory test's profile file (``confirm_profile``); None: none.
        decisive: the profile files of the tests that decide a claim (``decisive_profiles``).
        growth: the growth arm's profile file (``growth_profile``); None: none.
        paired: the profile files of ``paired_model``'s cells (``paired_profiles``).
        later: the later cells shown with a borrowed evaluation-set error: ``decisive``, then
            ``paired`` but for the growth arm (whose comparisons come from ``growth``).
        timed: wall times are shown (every profile but ``smoke``: they differ between executions).
        header: ``"device: cpu\\nresults: ..."``, what the notebook prints under the plan's notes.
        scratch: the temporary folder holding ``results`` where ``results_path`` is None; it is
            removed with this object (so with the kernel that holds it).
    """

    results: Path
    outputs: Path | None
    confirm: Path | None
    decisive: list[Path]
    growth: Path | None
    paired: list[Path]
    later: list[Path]
    timed: bool
    header: str
    scratch: tempfile.TemporaryDirectory | None = dataclasses.field(default=None, repr=False)


def chapter_setup(parameters) -> ChapterSetup:
    """The :class:`ChapterSetup` of the RQ3 notebook's checked parameters
    (``dupbert.study.params.RQ3Parameters``): every path taken from the repository root (a
    ``results_path`` of None: ``rq3.jsonl`` in a fresh temporary folder, nothing left in /tmp
    once it is garbage-collected). Creates that folder; reads nothing."""
    scratch = None
    if parameters.results_path is None:
        scratch = tempfile.TemporaryDirectory(prefix="dupbert-rq3-")
        results = Path(scratch.name) / "rq3.jsonl"
    else:
        results = repository_path(parameters.results_path)
    growth = repository_path(parameters.growth_profile) if parameters.growth_profile else None
    decisive = [repository_path(path) for path in parameters.decisive_profiles or []]
    paired = [repository_path(path) for path in parameters.paired_profiles or []]
    runs = ("runs missing from it are run" if parameters.run_missing
            else "only the runs already in it are read")
    return ChapterSetup(
        results=results,
        outputs=repository_path(parameters.outputs_dir) if parameters.outputs_dir else None,
        confirm=repository_path(parameters.confirm_profile) if parameters.confirm_profile else None,
        decisive=decisive, growth=growth, paired=paired,
        later=[*decisive, *(path for path in paired if path != growth)],
        timed=parameters.profile != "smoke",
        header=f"device: {parameters.device}\nresults: {parameters.results_path or 'a temporary file'}; {runs}",
        scratch=scratch)


@contextlib.contextmanager
def captured_output():
    """A block whose stdout and stderr (warnings, a trainer's log lines, which hold timings that
    differ between executions) go to the ``io.StringIO`` it yields instead of the notebook."""
    log = io.StringIO()
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        yield log


MINUTES_NOTE = "train_min, eval_min: mean wall-clock minutes per landed run (one niced thread, cores shared)"
"""What :func:`progress_table`'s minutes are, printed under it where they are shown."""


def progress_table(progress: pd.DataFrame, timed: bool) -> pd.DataFrame:
    """``dupbert.study.studies.plan_progress`` as the chapter shows it: without its wall-time columns
    ``train_min`` and ``eval_min`` unless ``timed``."""
    return progress if timed else progress.drop(columns=["train_min", "eval_min"])


def landed_glue(progress: pd.DataFrame, results: pd.DataFrame, timed: bool) -> dict[str, int | str]:
    """The numbers under "The runs", by glue name: ``rq3_landed``, ``rq3_planned``, ``rq3_steps``
    (:func:`landed_numbers`) and ``rq3_cpu_hours`` (``"5.9 CPU-hours"``; ``"not shown for smoke
    runs"`` unless ``timed``)."""
    landed = landed_numbers(progress, results)
    landed["cpu_hours"] = f"{landed['cpu_hours']} CPU-hours" if timed else "not shown for smoke runs"
    return {f"rq3_{key}": value for key, value in landed.items()}


def task_sections(table: pd.DataFrame, results: pd.DataFrame) -> list:
    """The outputs of "Baseline and duplicated configurations, per task", in order: per task of
    ``table`` a Markdown heading with its description and data note
    (``dupbert.training.tasks.data_note`` of ``results``), then per metric with rows a Markdown
    label and its :func:`task_table`. A Markdown note alone where ``table`` is empty.

    Args:
        table: :func:`dupbert.study.comparisons.comparison` of ``results`` (may be empty).
        results: the plan's ``ResultsFile.frame()`` rows.
    """
    from ..training.tasks import TASKS, data_note

    if table.empty:
        return [_markdown("No runs of this plan have landed yet.")]
    shown = []
    for task in dict.fromkeys(table["task"]):
        shown.append(_markdown(f"### {task}: {TASKS[task].description}\n\n*Data used.* {data_note(task, results)}"))
        for metric in task_metrics(task):
            if (table["task"].eq(task) & table["metric"].eq(metric)).any():
                shown += [_markdown(f"**{metric}** (points)"), task_table(table, task, metric)]
    return shown


def two_way_tables(two_way: pd.DataFrame, setup: ChapterSetup) -> list:
    """The outputs of "Both sources of error", in order: the study's cells with both intervals
    (``dupbert.study.variance.interval_table`` of ``two_way``; none where it is empty), then, where
    the study has an evaluation-set error (``variance.evaluation_errors``) and ``setup`` names later
    cells or a growth arm, a Markdown label and those cells (``dupbert.study.studies.later_two_way``,
    the error borrowed from the study's all-MiniLM-L6-v2 cell on the same evaluation set).

    Args:
        two_way: ``dupbert.study.variance.two_way_table`` of the study (may be empty).

    Raises:
        as ``later_two_way`` (reading the later cells' profile files and runs).
    """
    from ..study.studies import later_two_way
    from ..study.variance import evaluation_errors, interval_table

    shown = [] if two_way.empty else [interval_table(two_way)]
    errors = evaluation_errors(two_way)
    if errors and (setup.later or setup.growth):
        shown += [_markdown("**The later cells** (evaluation-set error borrowed from the study's "
                            "all-MiniLM-L6-v2 cell on the same evaluation set):"),
                  interval_table(later_two_way(errors, setup.later, setup.growth))]
    return shown


def summary_glue(plan, table: pd.DataFrame, results: pd.DataFrame, points: pd.DataFrame,
                 two_way: pd.DataFrame, decisive) -> dict:
    """What "What the numbers say" and the chapter's opening glue, by glue name, in this order:

    - ``rq3_findings``: :func:`findings_table` of ``dupbert.study.comparisons.overall`` (Holm counting
      every planned secondary, ``dupbert.study.profiles.planned_family_sizes``); Markdown "No runs
      yet." without rows;
    - ``rq3_stalled``: :func:`stalled_table` of ``points`` (exploratory; no verdict uses it);
      Markdown "None." without stalled runs;
    - ``rq3_runs``: the number of distinct runs;
    - ``rq3_answer``: :func:`answer_table` of the findings and the two-way intervals
      (``dupbert.study.variance.interval_table`` of ``two_way``); "No runs yet." without findings;
    - ``rq3_decisive``: the decisive tests' texts (``dupbert.study.glance.decisive_tests`` of
      ``dupbert.study.studies.confirmatory_studies(decisive)``), joined by ``"; "``; ``"none in this
      profile"`` without any.

    Args:
        plan: ``dupbert.study.profiles.plan_sweep``'s entries.
        table: :func:`dupbert.study.comparisons.comparison` of ``results`` (may be empty).
        points: :func:`dupbert.study.comparisons.points_frame` of ``results`` (may be empty).
        two_way: ``dupbert.study.variance.two_way_table`` (may be empty).
        decisive: the decisive tests' profile files (:attr:`ChapterSetup.decisive`).
    """
    from ..study.comparisons import overall
    from ..study.glance import decisive_tests
    from ..study.profiles import planned_family_sizes
    from ..study.studies import confirmatory_studies
    from ..study.variance import interval_table

    summary = overall(table, family_sizes=planned_family_sizes(plan)) if not table.empty else pd.DataFrame()
    findings = findings_table(summary, table, results) if len(summary) else pd.DataFrame()
    stalled = stalled_table(points) if len(points) else pd.DataFrame()
    both = interval_table(two_way) if not two_way.empty else pd.DataFrame()
    tests = decisive_tests(confirmatory_studies(decisive)) if decisive else {}
    return {"rq3_findings": or_note(findings, "No runs yet."),
            "rq3_stalled": or_note(stalled, "None."),
            "rq3_runs": results["run_key"].nunique() if len(results) else 0,
            "rq3_answer": answer_table(findings, both) if len(findings) else _markdown("No runs yet."),
            "rq3_decisive": "; ".join(text for text, _ in tests.values()) or "none in this profile"}


def spread_tables(points: pd.DataFrame) -> list:
    """The seed spreads shown side by side, in order: ours
    (``dupbert.study.comparisons.observed_seed_spread`` of ``points``; left out without rows), then
    the published ones (``dupbert.study.paper.seed_spread``, index ``source, task``)."""
    from ..study.comparisons import observed_seed_spread
    from ..study.paper import seed_spread

    published = seed_spread().set_index(["source", "task"])
    return [observed_seed_spread(points), published] if len(points) else [published]


def replication_tables() -> list:
    """The public one-seed replication (``dupbert.study.paper.replication``: ``exact``, ``f1``,
    ``f1_gain`` by ``model, configuration``), then :func:`replication_table`."""
    from ..study.paper import replication

    shown = replication()[["model", "configuration", "exact", "f1", "f1_gain"]]
    return [shown.set_index(["model", "configuration"]), replication_table()]


def paired_seeds_figure(points: pd.DataFrame):
    """The chapter's main figure: ``dupbert.book.plots.plot_paired_seeds`` of ``points`` on each
    task's primary metric (``dupbert.study.comparisons.primary_metrics``); ``plots.no_runs_figure``
    without rows."""
    from ..study.comparisons import primary_metrics
    from .plots import no_runs_figure, plot_paired_seeds

    return plot_paired_seeds(points, metrics=primary_metrics(points)) if len(points) else no_runs_figure()


def loss_figure(results: pd.DataFrame, points: pd.DataFrame):
    """``dupbert.book.plots.plot_training_loss`` of ``results`` (moving average over 10 steps), the
    stalled runs of ``points`` dashed (``dupbert.study.comparisons.stalled_runs``);
    ``plots.no_runs_figure`` without rows."""
    from .plots import no_runs_figure, plot_training_loss

    if not len(results):
        return no_runs_figure()
    return plot_training_loss(results, window=10, stalled=stalled_runs(points))
