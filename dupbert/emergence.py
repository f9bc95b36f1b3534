"""When, during pretraining, does the MLM head start to decode every hidden state? (beyond the paper)

Reads the record :func:`dupbert.pretrain.pretrain` appends to ``results/<profile>/``
(``emergence.csv``: per evaluated step, measure and hidden state, top-1/top-5 on held-out
WikiText-2 valid; ``pretrain-loss.csv``: every step's training loss) and applies the rule the
chapter "Emergence during pretraining" pre-states:

- a hidden state is *decodable* at a step when its reconstruction top-1 >= ``threshold`` (0.5);
- ``s_last``: the first evaluated step at which hidden state ``L`` is decodable; ``s_all``: the
  first at which every block output ``1..L`` is (hidden state 0 is reported apart); ``holds``:
  every block output stays decodable at every later step;
- **emerges with** the last layer when ``s_all`` is ``s_last`` or the next evaluated step
  (steps are log-spaced, about x1.6 apart), **after** when later, **not yet** without ``s_all``;
- the same rule on ``s_all`` of the paper's duplicated variant against the model's says
  whether duplication-robustness **appears with**, **after** or **before** decodability.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

THRESHOLD = 0.5
RECONSTRUCTION, MASKED, DUPLICATED, MLM = ("reconstruction", "masked",
                                           "reconstruction, duplicated", "mlm")


def read_record(tables_dir: str | Path, models: Sequence[str] | None = None
                ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(record, loss)``: ``emergence.csv`` and ``pretrain-loss.csv`` of ``tables_dir``, the rows
    of ``models`` only (default: every model), in that order.

    Raises:
        FileNotFoundError: a missing file (names it and how to make it).
        ValueError: a model of ``models`` without rows (names the models that have some).
    """
    frames = []
    for name in ("emergence.csv", "pretrain-loss.csv"):
        path = Path(tables_dir) / name
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist: scripts/pretrain.sh writes it")
        frames.append(pd.read_csv(path))
    if models is None:
        return frames[0], frames[1]
    missing = [m for m in models if m not in set(frames[0]["model"])]
    if missing:
        raise ValueError(f"the record in {tables_dir} has no rows of {missing}; it has "
                         f"{list(dict.fromkeys(frames[0]['model']))}")
    order = {m: i for i, m in enumerate(models)}
    return tuple(frame[frame["model"].isin(order)]
                 .sort_values("model", key=lambda c: c.map(order), kind="stable")
                 .reset_index(drop=True) for frame in frames)


def _first_decodable(record: pd.DataFrame, measure: str = RECONSTRUCTION,
                    threshold: float = THRESHOLD) -> pd.DataFrame:
    """Per model and hidden state, the first evaluated step with ``top1 >= threshold``: columns
    ``model``, ``layer``, ``first_step`` (NaN: never).
    """
    rows = record[record["measure"] == measure]
    reached = rows[rows["top1"] >= threshold].groupby(["model", "layer"])["step"].min()
    every = rows.groupby(["model", "layer"])["step"].max()
    return reached.reindex(every.index).rename("first_step").reset_index()


def _first_all(record: pd.DataFrame, model: str, measure: str, threshold: float) -> float:
    """First evaluated step at which every block output (hidden states >= 1) is decodable."""
    rows = record[(record["model"] == model) & (record["measure"] == measure)
                  & (record["layer"] >= 1)]
    worst = rows.groupby("step")["top1"].min().sort_index()
    hits = worst[worst >= threshold]
    return float(hits.index[0]) if len(hits) else float("nan")


def _compare(first: float, second: float, steps: list[int], with_: str, after: str,
             before: str | None = None) -> str:
    if np.isnan(first) or np.isnan(second):
        return "not yet"
    gap = steps.index(int(second)) - steps.index(int(first))
    if before is not None and gap < -1:
        return before
    return with_ if gap <= 1 else after


def _holds(record: pd.DataFrame, model: str, measure: str, threshold: float, since: float) -> bool:
    """Every block output decodable at every evaluated step from ``since`` on."""
    rows = record[(record["model"] == model) & (record["measure"] == measure)
                  & (record["layer"] >= 1) & (record["step"] >= since)]
    return bool(len(rows)) and bool((rows.groupby("step")["top1"].min() >= threshold).all())


def emergence_summary(record: pd.DataFrame, threshold: float = THRESHOLD) -> pd.DataFrame:
    """One row per model: the steps of the pre-stated rule (module docstring) and its verdicts.

    Columns: ``model``, ``last_step``, ``last_layer``, ``s_embedding`` (hidden state 0),
    ``s_last``, ``s_all``, ``holds``, ``worst_layer`` (the block output decodable last; ties: the
    lowest at the last step), ``s_duplicated_all``, ``final_worst_top1`` and ``final_last_top1``
    (at the last step), ``verdict_layers`` and ``verdict_duplication``.
    """
    rows = []
    firsts = _first_decodable(record, RECONSTRUCTION, threshold)
    for model, own in record.groupby("model", sort=False):
        steps = sorted(own["step"].unique().tolist())
        recon = own[own["measure"] == RECONSTRUCTION]
        last_layer = int(recon["layer"].max())
        first = firsts[firsts["model"] == model].set_index("layer")["first_step"]
        blocks = first.drop(index=0)
        final = recon[recon["step"] == steps[-1]].set_index("layer")["top1"]
        s_all = _first_all(record, model, RECONSTRUCTION, threshold)
        s_dup = _first_all(record, model, DUPLICATED, threshold)
        order = pd.DataFrame({"first": blocks.fillna(np.inf), "final": final.drop(index=0)})
        worst = order.sort_values(["first", "final"], ascending=[False, True]).index[0]
        rows.append(dict(
            model=model, last_step=steps[-1], last_layer=last_layer,
            s_embedding=first.get(0, np.nan), s_last=first.get(last_layer, np.nan), s_all=s_all,
            holds=not np.isnan(s_all) and _holds(record, model, RECONSTRUCTION, threshold, s_all),
            worst_layer=int(worst),
            s_duplicated_all=s_dup, final_worst_top1=float(final.drop(index=0).min()),
            final_last_top1=float(final[last_layer]),
            verdict_layers=_compare(first.get(last_layer, np.nan), s_all, steps,
                                    "emerges with the last layer", "emerges after the last layer"),
            verdict_duplication=_compare(s_all, s_dup, steps, "appears with decodability",
                                         "appears after decodability",
                                         "appears before decodability")))
    return pd.DataFrame(rows)


SUMMARY_HEADINGS = {"s_embedding": "hidden state 0", "s_last": "last hidden state",
                    "s_all": "every block output", "worst_layer": "last to get there",
                    "s_duplicated_all": "duplicated: every block output",
                    "verdict_layers": "verdict", "verdict_duplication": "duplication"}
"""The columns of :func:`emergence_summary` that the chapter shows, and their headings."""


def summary_table(summary: pd.DataFrame) -> pd.DataFrame:
    """:func:`emergence_summary` as the chapter shows it: one row per model, the steps at which
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


def grid(record: pd.DataFrame, model: str, measure: str, value: str = "top1") -> pd.DataFrame:
    """One model and measure as a grid: hidden states (rows, the last on top) x evaluated steps."""
    rows = record[(record["model"] == model) & (record["measure"] == measure)]
    return rows.pivot(index="layer", columns="step", values=value).sort_index(ascending=False)


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
    :func:`emergence_summary`."""
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


def beside_rq1(record: pd.DataFrame, rq1: pd.DataFrame) -> pd.DataFrame:
    """Reconstruction top-1 per hidden state at the record's last step beside RQ1's probe of the
    same models (``rq1``: RQ1's ``rq1-reconstruction`` table); columns ``(model, "record")``
    and ``(model, "RQ1")``.
    """
    recon = record[record["measure"] == RECONSTRUCTION]
    last = recon[recon["step"] == recon.groupby("model")["step"].transform("max")]
    ours = rq1[(rq1["init"] == "pretrained")
               & (rq1.get("duplication", pd.Series("baseline", index=rq1.index)) == "baseline")]
    models = [m for m in dict.fromkeys(last["model"]) if m in set(ours["model"])]
    columns = {}
    for model in models:
        columns[(model, "record")] = last[last["model"] == model].set_index("layer")["top1"]
        columns[(model, "RQ1")] = ours[ours["model"] == model].set_index("layer")["top1"]
    frame = pd.DataFrame(columns)
    frame.index.name = "hidden state"
    return frame
