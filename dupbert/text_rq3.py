"""The RQ3 chapter's tables and prose (``notebooks/rq3.ipynb``): the study's design, its pilots,
per task every configuration against its reference, the study in one row per model and task, what
the numbers say, and the confirmatory test; from the frames of :mod:`dupbert.comparisons`, scores
in points.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .comparisons import CONTROLS, LEARNING_FLOORS, learning_floor, learning_status, stalled_runs
from .paper import ALBERT_DEPTH, ALBERT_PAPER, REPLICATION_ROBERTA, REPLICATION_SINGLE_LAYERS
from .tasks import task_metrics
from .text import interval_text, p_text


def verdict_rule_text() -> str:
    """The pre-registered verdict rule (:func:`dupbert.significance.verdict`'s docstring, as
    printed in RQ3) and what the design table's ``detectable (x sd)`` column means."""
    from .significance import ALPHA, verdict

    return (verdict.__doc__.strip().replace("\n    ", "\n")
            + "\n\nThe column 'detectable (x sd)' below: the smallest true gain the primary paired t-test "
            f"at alpha = {ALPHA} detects with 80% power, in standard deviations of the per-seed "
            "differences (exact, noncentral t); a secondary comparison in a Holm family of m needs "
            "more (alpha / m).")


def study_design(plan) -> pd.DataFrame:
    """RQ3's design table, one row per planned model and task (index ``model, task``): primary and
    secondary configurations, subset sizes, hyper-parameters, seeds, ``detectable (x sd)`` (the
    smallest gain the primary test detects with 80% power, in sds of the per-seed differences)
    and the learning floor.

    Args:
        plan: ``dupbert.profiles.PlannedSweep`` entries (``plan_sweep``).
    """
    from .significance import minimum_detectable_gain

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


def pilot_table(path) -> pd.DataFrame:
    """RQ3's classification pilots (``scripts/pilot_rq3.py`` JSON lines), one row per pilot:
    sizes, hyper-parameters, ``steps`` (the last evaluated), ``accuracy along the way`` and
    ``final`` (points, the accuracy at the last step, which a floor is judged on) and ``minutes``.
    Empty where ``path`` does not exist."""
    from pathlib import Path

    if not Path(path).is_file():
        return pd.DataFrame()
    pilots = pd.read_json(path, lines=True)
    pilots["steps"] = [curve[-1][0] for curve in pilots["curve"]]
    pilots["accuracy along the way"] = [", ".join(f"{100 * acc:.1f}" for _, acc, _ in curve)
                                        for curve in pilots["curve"]]
    pilots["final"] = [round(100 * curve[-1][1], 1) for curve in pilots["curve"]]
    pilots["minutes"] = (pilots["wall_s"] / 60).round(1)
    return pilots[["model", "task", "n_train", "n_eval", "learning_rate", "epochs", "batch_size",
                   "steps", "accuracy along the way", "final", "minutes"]
                  ].set_index(["model", "task"])


def squad_pilot_table(path) -> pd.DataFrame:
    """RQ3's SQuAD 2.0 pilots (finetune JSON lines), index ``model``: sizes, hyper-parameters, F1s
    (points, one decimal), whether the floor was reached, training minutes. Empty where ``path``
    does not exist."""
    from pathlib import Path

    if not Path(path).is_file():
        return pd.DataFrame()
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
        table: :func:`dupbert.comparisons.comparison` output.
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
    """RQ3's one row per model and task from ``dupbert.studies.study_summary``, as strings; the
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


def _power_text(row, pairs: int) -> str:
    """What the seeds can decide: the detectable gain, or for "no gain" the equivalence limit."""
    from .significance import ALPHA, EQUIVALENCE_MARGIN, equivalence_sd_limit

    if row.claimed_gain != 0:
        return f"smallest detectable gain {row.min_detectable_gain:.2f}"
    limit = equivalence_sd_limit(pairs)
    return (f"\"no gain\" needs the whole 95% CI within ±{EQUIVALENCE_MARGIN:g}: its "
            f"half-width is {row.gain_ci_high - row.gain:.2f}, and at {pairs} seeds it fits only when the "
            f"paired differences' standard deviation is at most {limit:.2f}; by the pre-registered rule a "
            "significant difference refutes \"no gain\" before equivalence is checked, even one inside "
            f"±{EQUIVALENCE_MARGIN:g}" + (" (not the case here)" if row.p_value >= ALPHA else ""))


def _secondary_text(row) -> str:
    if row.n_secondary:
        return (f"Secondary: {row.n_secondary_gains} of {row.n_secondary} configurations significantly better and "
                f"{row.n_secondary_losses} significantly worse after Holm correction"
                + (f" (largest gain: *{row.best_secondary}*, {row.best_secondary_gain:+.2f})" if row.best_secondary else "")
                + (f"; {row.n_secondary_pending} more still short of {'their' if row.n_secondary_pending > 1 else 'its'} "
                   "planned seeds" if row.n_secondary_pending else "")
                + ". ")
    if row.n_secondary_pending:
        return (f"Secondary: {row.n_secondary_pending} configuration{'s' if row.n_secondary_pending > 1 else ''}, "
                "still short of the planned seeds. ")
    return ""


def findings_text(summary: pd.DataFrame, table: pd.DataFrame, results: pd.DataFrame) -> str:
    """RQ3's "what the numbers say", one Markdown bullet per model and task on its primary metric
    (baseline against floor, primary gain, p and power, secondary counts, claim and verdict);
    ``"No runs yet."`` without rows.

    Args:
        summary: :func:`dupbert.comparisons.overall` of ``table``.
        table: :func:`dupbert.comparisons.comparison` of ``results``.
        results: ``ResultsFile.frame()`` rows (for
            :func:`dupbert.comparisons.learning_status`).
    """
    lines = []
    status = learning_status(results) if len(results) else pd.DataFrame()
    for row in summary.itertuples():
        if row.metric != task_metrics(row.task)[0]:
            continue
        base = table[(table["model"] == row.model) & (table["task"] == row.task)
                     & (table["metric"] == row.metric) & (table["duplication"] == "baseline")]
        text = f"- **{row.model} on {row.task}** ({row.metric}): "
        if base.empty:
            lines.append(text + "no baseline run yet, nothing to compare.")
            continue
        base = base.iloc[0]
        seeds_text = f"{base['n']} seed{'s' if base['n'] != 1 else ''}"
        text += (f"the baseline scores {interval_text(base['mean'], base['ci_low'], base['ci_high'])} over "
                 f"{seeds_text} (trivial baseline {base['trivial']:.2f}). ")
        floor = status[(status["model"] == row.model) & (status["task"] == row.task)].iloc[0]
        if not floor["learned"]:
            lines.append(text + f"Its {floor['floor_metric']} ({floor['baseline_mean']:.2f}) misses the "
                         f"pre-registered floor of {floor['floor']:g}: **did not learn**, so nothing is decided.")
            continue
        if row.primary is None:
            lines.append(text + "The primary configuration has no run yet: nothing is decided.")
            continue
        pairs = int(row.n_pairs)
        text += (f"The primary comparison, *{row.primary}*, changes it by "
                 f"{interval_text(row.gain, row.gain_ci_low, row.gain_ci_high, signed=True)} points over {pairs} "
                 f"paired seed{'s' if pairs != 1 else ''}"
                 + (f" (p {p_text(row.p_value)}; {_power_text(row, pairs)}). "
                    if pairs >= 2 else " so far: no test is possible before a second seed has landed. "))
        text += _secondary_text(row)
        text += (f"The paper: {row.paper_value}; verdict: **{row.verdict}**." if row.claimed_gain is not None
                 else "The paper states nothing for this task: no verdict.")
        lines.append(text)
    return "\n".join(lines) if lines else "No runs yet."


def stalled_text(points: pd.DataFrame, n_runs: int) -> str:
    """RQ3's exploratory list of :func:`dupbert.comparisons.stalled_runs`, as Markdown."""
    stalled = stalled_runs(points)
    lines = []
    for (name, task), runs in stalled.groupby(["model", "task"], sort=False):
        listed = "; ".join(
            f"*{duplication}* at seed{'s' if len(group) > 1 else ''} "
            + ", ".join(f"{int(r.seed)} ({r.value:.2f})" for r in group.itertuples())
            for duplication, group in runs.groupby("duplication", sort=False))
        lines.append(f"- {name} on {task} ({runs['metric'].iloc[0]}; trivial "
                     f"{runs['trivial'].iloc[0]:.2f}, cutoff {runs['cutoff'].iloc[0]:.2f}): {listed}")
    return ("**Stalled runs** (exploratory, not part of the rule): single runs that ended below the midpoint "
            "of their trivial baseline and their task's floor (the cutoff), on the floor's metric. "
            + ("They stay in every comparison above.\n\n" + "\n".join(lines)
               if lines else f"None of the {n_runs} runs did."))


def replication_text() -> str:
    """:data:`dupbert.paper.REPLICATION_SINGLE_LAYERS`, :data:`dupbert.paper.REPLICATION_ROBERTA`
    and :data:`dupbert.paper.ALBERT_DEPTH` in two sentences (SQuAD 2.0 F1)."""
    single, roberta = REPLICATION_SINGLE_LAYERS, REPLICATION_ROBERTA
    return (f"Same replication: {single['configurations']} of {single['model']} gave F1 {single['f1_low']}-"
            f"{single['f1_high']} against {single['baseline_f1']}; {roberta['model']}, {roberta['configuration']}: "
            f"{roberta['f1']} against {roberta['baseline_f1']}.\n"
            f"{ALBERT_PAPER}, ALBERT-large pretrained (not duplicated) with 12 / 24 / 48 applications of its "
            f"shared layer: SQuAD 2.0 F1 " + " / ".join(str(r["squad2_f1"]) for r in ALBERT_DEPTH) + ".")


def confirmatory_text(tests: pd.DataFrame) -> str:
    """One Markdown line per row of :func:`dupbert.comparisons.confirmatory_test`: the verdict,
    the paired gain with its 95% interval and p-value, and the baseline's mean beside its floor
    (points)."""
    lines = []
    for row in tests.itertuples():
        head = f"- {row.model} x {row.task}, {row.configuration} - {row.reference} ({row.metric}): "
        if str(row.verdict).startswith("pending"):
            lines.append(f"{head}**{row.verdict}**; nothing is judged before every planned pair "
                         f"has landed.")
            continue
        lines.append(
            f"{head}**{row.verdict}**: "
            f"{interval_text(row.gain, row.gain_ci_low, row.gain_ci_high, signed=True)} points "
            f"(p {p_text(row.p_value)}, seeds {row.seeds}); baseline "
            f"{interval_text(row.baseline_mean, row.baseline_ci_low, row.baseline_ci_high)} "
            f"against a floor of {row.floor:g}.")
    return "\n".join(lines)


def growth_table(tests: pd.DataFrame) -> pd.DataFrame:
    """The growth arm's comparisons (``dupbert.growth.growth_tests``) as the chapter shows them:
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


def landed_text(progress: pd.DataFrame, results: pd.DataFrame, timed: bool) -> str:
    """How many of a plan's runs have landed (``dupbert.studies.plan_progress``, the plan's
    ``results``), their optimisation steps and, if ``timed``, their CPU-hours of training (wall
    times differ between executions: not in outputs that ``pytest --nbval`` compares)."""
    text = f"{len(results)} of {int(progress['planned'].sum())} planned runs have landed"
    if not len(results):
        return text
    cost = f", {results['train_time_s'].sum() / 3600:.1f} CPU-hours of training" if timed else ""
    return f"{text} ({int(results['train_steps'].sum())} optimisation steps{cost})"


def rq1_beside_rq3_table(rq1: pd.DataFrame, cells: pd.DataFrame,
                         decided: dict[tuple[str, str], tuple[str, str | None]]) -> pd.DataFrame:
    """One model's RQ1 beside its RQ3 (``dupbert.studies.rq1_beside_rq3``), as the chapter shows
    it: rows ``baseline``, the tested configuration and their difference (RQ1's left blank); a
    column for RQ1's worst block output (top-1 [95% CI], hidden state) and one per RQ3 cell (its
    metric's mean over the planned seeds, points; the paired gain [95% CI], p and the claim's
    verdict under the study's rule, ``decided``: ``dupbert.glance.decisive_tests``), each pending
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
