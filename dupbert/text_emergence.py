"""The emergence chapter's tables and prose (``notebooks/emergence.ipynb``): the pre-stated rules'
steps and verdicts as tables and text, the final per-layer top-1, the rule past the plateau,
and what each stage cost; from the frames of :mod:`dupbert.emergence`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .emergence import FALL, PREDICTING, STAY, THRESHOLD

SUMMARY_HEADINGS = {"s_embedding": "hidden state 0", "s_last": "last hidden state",
                    "s_all": "every block output", "worst_layer": "last to get there",
                    "s_duplicated_all": "duplicated: every block output",
                    "verdict_layers": "verdict", "verdict_duplication": "duplication"}
"""The columns of :func:`dupbert.emergence.emergence_summary` that the chapter shows, and their headings."""


def summary_table(summary: pd.DataFrame) -> pd.DataFrame:
    """:func:`dupbert.emergence.emergence_summary` as the chapter shows it: one row per model, the steps at which
    each part first became decodable (``"never"`` where it did not; steps with thousands
    separators) and the verdicts, under :data:`SUMMARY_HEADINGS`."""
    shown = summary.set_index("model")[list(SUMMARY_HEADINGS)].rename(columns=SUMMARY_HEADINGS)
    return shown.map(lambda v: "never" if pd.isna(v)
                     else (f"{int(v):,}" if isinstance(v, float) else v))


def final_table(record: pd.DataFrame) -> pd.DataFrame:
    """Every measure per hidden state (rows) and (model, measure) (columns) at each model's last
    evaluated step, top-1 to 3 decimals (``""`` where not measured); the MLM loss rows left out."""
    last = record[record["step"] == record.groupby("model")["step"].transform("max")]
    table = last[last["measure"] != "mlm"].pivot_table(index="layer", columns=["model", "measure"],
                                                       values="top1")
    return table.map(lambda v: "" if pd.isna(v) else f"{v:.3f}")


def _step(value: float) -> str:
    return "no evaluated step" if np.isnan(value) else f"step {int(value):,}"


def _trained_on_last(row) -> str:
    """The caveat when the last hidden state, the one the head is trained on, is itself the
    last to become decodable: then "emerges with the last layer" holds by construction."""
    if row.worst_layer != row.last_layer or np.isnan(row.s_all):
        return ""
    return (" The last hidden state, the one the head is trained on, is itself the last to get "
            "there, so this verdict holds by construction: it dates when the trained-on layer "
            "became decodable, not a wait of the middle layers for it.")


def answer(summary: pd.DataFrame, threshold: float = THRESHOLD) -> str:
    """The chapter's stated answer, one Markdown bullet per model, from
    :func:`dupbert.emergence.emergence_summary`."""
    lines = []
    for row in summary.itertuples():
        holds = ("and stays so to the last evaluated step" if row.holds
                 else "though not at every later step")
        lines.append(
            f"- **{row.model}** (evaluated to step {row.last_step:,}): the last hidden state "
            f"({row.last_layer}) is first decodable (top-1 >= {threshold:g}) at "
            f"{_step(row.s_last)}, every block output at once at {_step(row.s_all)}"
            f"{'' if np.isnan(row.s_all) else ' ' + holds} (the last to get there: hidden state "
            f"{row.worst_layer}; at the last step the lowest block output is decoded at "
            f"{row.final_worst_top1:.3f} against {row.final_last_top1:.3f} at the last): "
            f"**{row.verdict_layers}**.{_trained_on_last(row)} The embedding output is first "
            f"decodable at "
            f"{_step(row.s_embedding)}. Every block output of the "
            f"duplicated variant is first decodable at {_step(row.s_duplicated_all)}: duplication-"
            f"robustness **{row.verdict_duplication}**.")
    return "\n".join(lines)


PAST_PLATEAU_HEADINGS = {"P": "first predicting step P", "masked_P": "masked top-1 at P",
                         "F": "last step F", "masked_F": "masked top-1 at F",
                         "largest_fall": "largest fall, P to F", "lowest_F": "lowest at F",
                         "verdict": "verdict"}
"""The columns of :func:`dupbert.emergence.past_plateau` that the chapter shows."""


def _number(value, digits: int = 3) -> str:
    if pd.isna(value):
        return "-"
    return f"{int(value):,}" if digits == 0 else f"{value:.{digits}f}"


def past_plateau_table(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`dupbert.emergence.past_plateau` as the chapter shows it: one row per model, steps
    whole, top-1 to 3 decimals (``"-"`` where there is none), the hidden state of the largest
    fall and of the lowest reconstruction beside them."""
    where = table.set_index("model")
    shown = pd.DataFrame(index=where.index)
    for column, heading in PAST_PLATEAU_HEADINGS.items():
        shown[heading] = where[column].map(lambda v: v if isinstance(v, str)
                                           else _number(v, 0 if column in ("P", "F") else 3))
    shown[PAST_PLATEAU_HEADINGS["largest_fall"]] += where["falling_layer"].map(
        lambda layer: "" if pd.isna(layer) else f" (hidden state {int(layer)})")
    shown[PAST_PLATEAU_HEADINGS["lowest_F"]] += where["lowest_layer"].map(
        lambda layer: f" (hidden state {int(layer)})")
    return shown


def past_plateau_answer(table: pd.DataFrame, predicting: float = PREDICTING,
                        threshold: float = THRESHOLD, stay: float = STAY,
                        fall: float = FALL) -> str:
    """One Markdown bullet per model: the rule past the plateau and its verdict."""
    lines = []
    for row in table.itertuples():
        head = f"- **{row.model}** (evaluated to step {int(row.F):,}): "
        if row.verdict == "not reached":
            lines.append(f"{head}masked top-1 at the output never reached {predicting:g} "
                         f"({row.masked_F:.3f} at the last evaluated step): **not reached**; "
                         "the model has not started to predict from context.")
            continue
        if row.verdict == "too early to tell":
            lines.append(f"{head}masked top-1 at the output first reached {predicting:g} at the "
                         f"last evaluated step ({row.masked_P:.3f}): **too early to tell**.")
            continue
        change = (f"fell by at most {row.largest_fall:.3f} (hidden state {int(row.falling_layer)})"
                  if row.largest_fall > 0 else
                  f"rose, the least by {-row.largest_fall:.3f} (hidden state "
                  f"{int(row.falling_layer)})")
        lines.append(
            f"{head}it predicts from step {int(row.P):,} on (masked top-1 at the output "
            f"{row.masked_P:.3f}, {row.masked_F:.3f} at step {int(row.F):,}). From there to the "
            f"last step the middle hidden states' reconstruction {change}; the lowest at the last "
            f"step is {row.lowest_F:.3f} (hidden state {int(row.lowest_layer)}; decodable from "
            f"{threshold:g}, stays within {stay:g}, falls beyond {fall:g}): "
            f"**{row.verdict}**.")
    return "\n".join(lines)


def stage_cost_table(costs: pd.DataFrame) -> pd.DataFrame:
    """:func:`dupbert.emergence.stage_costs` as the chapter shows it: one row per model and
    stage, steps as a range, tokens in millions, hours to 2 decimals, top-1 to 3."""
    shown = pd.DataFrame({
        "model": costs["model"], "stage": costs["stage"],
        "steps": [f"{a:,}-{b:,}" for a, b in zip(costs["first_step"], costs["last_step"])],
        "tokens (M)": (costs["tokens"] / 1e6).map(lambda v: f"{v:.2f}"),
        "hours": costs["hours"].map(lambda v: f"{v:.2f}"),
        "masked top-1 at its end": costs["masked_top1"].map(_number)})
    return shown.set_index(["model", "stage"])


def sharing_table(top1: pd.DataFrame, shared: str, unshared: str) -> pd.DataFrame:
    """Masked top-1 at the output, step for step, of a recursive model (``shared``) beside the
    unshared body it was made from (``unshared``), at the steps both were evaluated, with the
    difference; ``top1``: :func:`dupbert.emergence.output_top1`."""
    both = top1[[unshared, shared]].dropna()
    shown = both.map(lambda v: f"{v:.3f}")
    shown["shared - unshared"] = (both[shared] - both[unshared]).map(lambda v: f"{v:+.3f}")
    shown.index = pd.Index([f"{int(step):,}" for step in both.index], name="step")
    return shown
