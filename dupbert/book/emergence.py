"""The emergence chapter's tables (``notebooks/emergence.ipynb``): the pre-stated rules' steps and
verdicts per model and per seed, the final per-layer top-1, the rule past the plateau, and what
each stage cost; from the frames of :mod:`dupbert.training.emergence`. The chapter's prose, and the rules
themselves, are in its Markdown cells.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from .text import cell
from ..training.emergence import across_seeds, baselines, emergence_summary, past_plateau

SUMMARY_HEADINGS = {"last_step": "evaluated to", "s_embedding": "hidden state 0",
                    "s_last": "last hidden state", "s_all": "every block output",
                    "holds": "stays decodable", "worst_layer": "last to get there",
                    "final_worst_top1": "lowest block output at the end",
                    "final_last_top1": "last hidden state at the end",
                    "s_duplicated_all": "duplicated: every block output",
                    "verdict_layers": "verdict", "by_construction": "by construction",
                    "verdict_duplication": "duplication"}
"""The columns of :func:`dupbert.training.emergence.emergence_summary` that the chapter shows, and their
headings; ``by_construction`` is added by :func:`summary_table`."""


def _steps(value) -> str:
    return "never" if pd.isna(value) else f"{int(value):,}"


def summary_table(summary: pd.DataFrame) -> pd.DataFrame:
    """:func:`dupbert.training.emergence.emergence_summary` as the chapter shows it: one row per model, the
    steps at which each part first became decodable (``"never"`` where it did not; thousands
    separators), whether every block output stays decodable after (``"-"`` where it never was),
    the lowest block output and the last hidden state at the last step (3 decimals), the
    verdicts, and ``by construction`` = ``"yes"`` where the last hidden state, the one the head is
    trained on, is itself the last to get there (then "emerges with the last layer" dates when the
    trained-on layer became decodable, not a wait of the middle layers for it)."""
    where = summary.set_index("model")
    shown = pd.DataFrame(index=where.index)
    for column, heading in SUMMARY_HEADINGS.items():
        if column in ("last_step", "s_embedding", "s_last", "s_all", "s_duplicated_all"):
            shown[heading] = where[column].map(_steps)
        elif column == "holds":
            shown[heading] = ["-" if pd.isna(s) else ("yes" if h else "no")
                              for h, s in zip(where["holds"], where["s_all"])]
        elif column.startswith("final_"):
            shown[heading] = where[column].map("{:.3f}".format)
        elif column == "by_construction":
            shown[heading] = ["yes" if w == last and not pd.isna(s) else "no"
                              for w, last, s in zip(where["worst_layer"], where["last_layer"], where["s_all"])]
        else:
            shown[heading] = where[column]
    return shown


def final_table(record: pd.DataFrame) -> pd.DataFrame:
    """Every measure per hidden state (rows) and (model, measure) (columns) at each model's last
    evaluated step, top-1 to 3 decimals (``""`` where not measured); the MLM loss rows left out."""
    last = record[record["step"] == record.groupby("model")["step"].transform("max")]
    table = last[last["measure"] != "mlm"].pivot_table(index="layer", columns=["model", "measure"],
                                                       values="top1")
    return table.map(lambda v: "" if pd.isna(v) else f"{v:.3f}")


PAST_PLATEAU_HEADINGS = {"P": "first predicting step P", "masked_P": "masked top-1 at P",
                         "F": "last step F", "masked_F": "masked top-1 at F",
                         "largest_fall": "largest fall, P to F", "lowest_F": "lowest at F",
                         "verdict": "verdict"}
"""The columns of :func:`dupbert.training.emergence.past_plateau` that the chapter shows."""


def past_plateau_table(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`dupbert.training.emergence.past_plateau` as the chapter shows it: one row per model, steps
    whole, top-1 to 3 decimals (``"-"`` where there is none), the hidden state of the largest
    fall and of the lowest reconstruction beside them."""
    where = table.set_index("model")
    shown = pd.DataFrame(index=where.index)
    for column, heading in PAST_PLATEAU_HEADINGS.items():
        shown[heading] = where[column].map(lambda v: v if isinstance(v, str)
                                           else cell(v, ",.0f" if column in ("P", "F") else ".3f", "-"))
    shown[PAST_PLATEAU_HEADINGS["largest_fall"]] += where["falling_layer"].map(
        lambda layer: "" if pd.isna(layer) else f" (hidden state {int(layer)})")
    shown[PAST_PLATEAU_HEADINGS["lowest_F"]] += where["lowest_layer"].map(
        lambda layer: f" (hidden state {int(layer)})")
    return shown


def stage_cost_table(costs: pd.DataFrame) -> pd.DataFrame:
    """:func:`dupbert.training.emergence.stage_costs` as the chapter shows it: one row per model and
    stage, steps as a range, tokens in millions, hours to 2 decimals, top-1 to 3."""
    shown = pd.DataFrame({
        "model": costs["model"], "stage": costs["stage"],
        "steps": [f"{a:,}-{b:,}" for a, b in zip(costs["first_step"], costs["last_step"])],
        "tokens (M)": (costs["tokens"] / 1e6).map(lambda v: f"{v:.2f}"),
        "hours": costs["hours"].map(lambda v: f"{v:.2f}"),
        "masked top-1 at its end": costs["masked_top1"].map(lambda v: cell(v, ".3f", "-"))})
    return shown.set_index(["model", "stage"])


def sharing_table(top1: pd.DataFrame, shared: str, unshared: str) -> pd.DataFrame:
    """Masked top-1 at the output, step for step, of a recursive model (``shared``) beside the
    unshared body it was made from (``unshared``), at the steps both were evaluated, with the
    difference; ``top1``: :func:`dupbert.training.emergence.output_top1`."""
    both = top1[[unshared, shared]].dropna()
    shown = both.map(lambda v: f"{v:.3f}")
    shown["shared - unshared"] = (both[shared] - both[unshared]).map(lambda v: f"{v:+.3f}")
    shown.index = pd.Index([f"{int(step):,}" for step in both.index], name="step")
    return shown


SEED_HEADINGS = {"baseline": "baseline", "P": "P (predicting)", "masked_P": "masked top-1 at P",
                 "F": "last step F", "masked_F": "masked top-1 at F",
                 "s_all": "every block output decodable from", "first": "first question",
                 "largest_fall": "largest fall, P to F", "second": "second question"}
"""The columns of :func:`seed_tables`' per-seed table."""


def seed_tables(record: pd.DataFrame, groups: Mapping[str, list[str]], levels: Mapping[str, float],
                total_steps: Mapping[str, int], threshold: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both questions per seed and across seeds, for runs registered with several seeds.

    Args:
        record: the rows of the runs (:func:`dupbert.training.emergence.read_record`).
        groups: ``{architecture label: [run, ...]}``, one run per seed.
        levels: :func:`dupbert.training.emergence.predicting_levels` of ``record``.
        total_steps: each run's registered last step: a run short of it is ``running (step s of
            n)`` in both verdict columns and waits in the across-seed answer.
        threshold: reconstruction top-1 at which a hidden state counts as decodable.

    Returns:
        ``(per_seed, across)``: one row per run under :data:`SEED_HEADINGS` (steps whole, top-1 to
        3 decimals, ``"never"``/``"-"`` where there is none); one row per architecture, its
        :func:`dupbert.training.emergence.across_seeds` answer to each question.
    """
    first = emergence_summary(record, threshold).set_index("model")
    past = past_plateau(record, levels, threshold).set_index("model")
    running = {m: f"running (step {int(past.loc[m, 'F']):,} of {total_steps[m]:,})"
               for m in past.index if past.loc[m, "F"] < total_steps[m]}
    first_verdicts = {m: running.get(m, v) for m, v in first["verdict_layers"].items()}
    second_verdicts = {m: running.get(m, v) for m, v in past["verdict"].items()}
    per_seed = pd.DataFrame({
        SEED_HEADINGS["baseline"]: baselines(record).map("{:.3f}".format),
        SEED_HEADINGS["P"]: past["P"].map(_steps),
        SEED_HEADINGS["masked_P"]: past["masked_P"].map(lambda v: cell(v, ".3f", "-")),
        SEED_HEADINGS["F"]: past["F"].map(_steps),
        SEED_HEADINGS["masked_F"]: past["masked_F"].map("{:.3f}".format),
        SEED_HEADINGS["s_all"]: first["s_all"].map(_steps),
        SEED_HEADINGS["first"]: pd.Series(first_verdicts),
        SEED_HEADINGS["largest_fall"]: past["largest_fall"].map(lambda v: "-" if pd.isna(v) else f"{v:+.3f}"),
        SEED_HEADINGS["second"]: pd.Series(second_verdicts)})
    across = pd.DataFrame({question: across_seeds({m: v for m, v in verdicts.items() if m not in running}, groups)
                           for question, verdicts in (("first question", first_verdicts),
                                                      ("second question", second_verdicts))})
    return per_seed, across.rename_axis("across seeds")
