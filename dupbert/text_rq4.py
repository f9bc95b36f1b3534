"""The RQ4 chapter's tables and prose (``notebooks/rq4.ipynb``): the grid of gains over models and
tasks, the paper beside ours, and what the numbers say about consistency; from the frames of
:mod:`dupbert.comparisons`, scores in points.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from .comparisons import DID_NOT_LEARN, learned
from .text import interval_text


def _gain_cell(model, task, gain, low, high, level, p, role, verdict, status) -> str:
    if verdict.startswith("pending"):
        return f"{interval_text(gain, low, high, signed=True)} ({verdict})"
    if not learned(status, model, task):
        return DID_NOT_LEARN
    return (interval_text(gain, low, high, signed=True) + (" *" if p < 0.05 else "")
            + (" (primary)" if role == "primary" else f" ({100 * level:g}%)"))


def gain_grid(main: pd.DataFrame, status: pd.DataFrame) -> pd.DataFrame:
    """RQ4's grid of gains: rows ``task, duplication, vs``, one column per model; each cell the
    paired gain [CI] (points; 95% for the primary, the Bonferroni level for a secondary), ``*``
    when significant, ``did not learn`` or the pending verdict; ``""`` where a model lacks it.

    Args:
        main: :func:`dupbert.comparisons.primary_rows` of a
            :func:`dupbert.comparisons.comparison` table.
        status: :func:`dupbert.comparisons.learning_status` of the same runs.
    """
    gains = main[main["n_pairs"].notna()]
    gains = gains.assign(
        cell=[_gain_cell(*values, status=status) for values in zip(
            gains["model"], gains["task"], gains["gain"], gains["bonferroni_ci_low"],
            gains["bonferroni_ci_high"], gains["bonferroni_confidence"],
            gains["p_adjusted"].fillna(1.0), gains["role"], gains["verdict"])],
        vs=gains["reference"])
    grid = gains.pivot_table(index=["task", "duplication", "vs"], columns="model", values="cell",
                             aggfunc="first", sort=False).fillna("")
    grid.columns.name = None
    return grid


def beside_table(summary: pd.DataFrame, status: pd.DataFrame) -> pd.DataFrame:
    """RQ4's paper-beside-ours table (index ``task, metric, paper, model``): baseline learned,
    primary and its gain [95% CI] (points), secondary gains / losses, verdict.

    Args:
        summary: :func:`dupbert.comparisons.overall` of the primary-metric rows.
        status: :func:`dupbert.comparisons.learning_status` of the same runs.
    """
    rows = []
    for row in summary.itertuples():
        rows.append({
            "task": row.task, "metric": row.metric, "paper": row.paper_value, "model": row.model,
            "baseline learned the task": "yes" if learned(status, row.model, row.task) else "no",
            "primary configuration": row.primary or "",
            "its gain [95% CI]": interval_text(row.gain, row.gain_ci_low, row.gain_ci_high, signed=True),
            "secondary gains / losses": f"{row.n_secondary_gains} / {row.n_secondary_losses} of {row.n_secondary}"
                                        + (f" ({row.n_secondary_pending} pending)" if row.n_secondary_pending else ""),
            "verdict": row.verdict,
        })
    return pd.DataFrame(rows).set_index(["task", "metric", "paper", "model"])


def consistency_text(summary: pd.DataFrame, main: pd.DataFrame, status: pd.DataFrame,
                     claim_rows: Mapping[str, Mapping],
                     decisive: Mapping[tuple[str, str], tuple[str, str | None]] | None = None
                     ) -> str:
    """RQ4's "what the numbers say" as Markdown bullets, ending with the RQ4 claim's verdict.

    Args:
        summary: :func:`dupbert.comparisons.overall` of ``main``.
        main: :func:`dupbert.comparisons.primary_rows` of a
            :func:`dupbert.comparisons.comparison` table.
        status: :func:`dupbert.comparisons.learning_status` of the same runs.
        claim_rows: ``dupbert.glance.rq3_rq4_rows`` by ``id`` (``rq4-consistent-across-models``:
            ``verdict``; ``rq3-method``: ``ours``).
        decisive: ``dupbert.glance.decisive_tests``: a cell's pre-registered confirmatory test,
            whose verdict, once decided, is that cell's (shown beside the study's).

    Raises:
        KeyError: ``claim_rows`` without those two ids.
    """
    lines = []
    is_learned = [learned(status, m, t) for m, t in zip(summary["model"], summary["task"])]
    skipped = [(m, t) for (m, t), ok in zip(zip(summary["model"], summary["task"]), is_learned) if not ok]
    if skipped:
        lines.append(
            f"- In {len(skipped)} of {len(summary)} model × task cells the baseline misses its pre-registered floor "
            f"({'; '.join(f'{m} on {t}' for m, t in skipped)}): it did not learn the task, and those runs say "
            f"nothing about duplication.")
    if any(is_learned):
        cells = summary[is_learned]
        # a comparison short of its planned seeds is shown in the grid, never counted here
        waiting = cells["verdict"].astype(str).str.startswith("pending")
        decided = cells[cells["primary"].notna() & ~waiting]
        significant = decided["p_value"] < 0.05
        lines.append(
            f"- Of the {len(cells)} cells whose baseline learned, {len(decided)} have all their planned primary "
            f"runs" + (f" ({int(waiting.sum())} pending)" if waiting.any() else "") + ": the paper's "
            f"configuration is significantly better in {int((significant & (decided['gain'] > 0)).sum())} and "
            f"significantly worse in {int((significant & (decided['gain'] < 0)).sum())}.")
        gains = main[main["n_pairs"].notna()]
        complete = gains[~gains["verdict"].astype(str).str.startswith("pending")]
        informative = set(zip(cells["model"], cells["task"]))
        mine = complete[[(m, t) in informative for m, t in zip(complete["model"], complete["task"])]]
        for name, group in mine.groupby("duplication", sort=False):
            lines.append(
                f"- *{name}* ({', '.join(sorted(set(group['role'])))}): gain positive in {int((group['gain'] > 0).sum())} "
                f"of {len(group)} cells, significantly in {int(((group['gain'] > 0) & (group['p_adjusted'] < 0.05)).sum())}, "
                f"significantly negative in {int(((group['gain'] < 0) & (group['p_adjusted'] < 0.05)).sum())} "
                "(comparisons with all their planned seeds).")
        for row in cells[cells["claimed_gain"].notna()].itertuples():
            text, verdict = (decisive or {}).get((row.model, row.task), (None, None))
            lines.append(f"- {row.model} on {row.task}: the paper claims {row.paper_value}; verdict **{row.verdict}**"
                         + ("." if verdict is None else f" on the study's seeds; {text}."))
    else:
        lines.append("- No cell's baseline learned its task: the RQ4 claim can be neither supported nor refuted with these runs.")
    rq4_row = claim_rows["rq4-consistent-across-models"]
    lines.append(
        f"- Consistency across models and tasks (the paper's RQ4 claim, which states no number): "
        f"**{rq4_row['verdict']}** (the rule: Methods, Results at a glance; per claim: "
        f"{claim_rows['rq3-method']['ours']}).")
    return "\n".join(lines)
