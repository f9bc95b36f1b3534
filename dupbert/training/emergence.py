"""When, during pretraining, does the MLM head start to decode every hidden state? (beyond the paper)

Reads the record :func:`dupbert.training.pretrain.pretrain` appends to ``results/<profile>/``
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

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

THRESHOLD = 0.5
RECONSTRUCTION, MASKED, DUPLICATED, MLM = ("reconstruction", "masked",
                                           "reconstruction, duplicated", "mlm")
MOST_FREQUENT = "most frequent"
"""The record's baseline row (step 0, at the output): top-1 of always answering the most frequent
of the held-out chosen tokens."""


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


def grid(record: pd.DataFrame, model: str, measure: str, value: str = "top1") -> pd.DataFrame:
    """One model and measure as a grid: hidden states (rows, the last on top) x evaluated steps."""
    rows = record[(record["model"] == model) & (record["measure"] == measure)]
    return rows.pivot(index="layer", columns="step", values=value).sort_index(ascending=False)


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


PREDICTING = 0.15
"""Masked top-1 at the output from which a model counts as predicting from context (about twice
the most-frequent-token baseline of the held-out text)."""
STAY, FALL = 0.05, 0.10
"""Past the plateau, a middle hidden state *stays* when its reconstruction falls by at most
``STAY`` from the first predicting step; it *falls* when it falls by more than ``FALL``."""


def at_output(record: pd.DataFrame, measure: str = MASKED) -> pd.DataFrame:
    """The rows of ``measure`` at each model's last hidden state (the output)."""
    rows = record[record["measure"] == measure]
    return rows[rows["layer"] == rows.groupby("model")["layer"].transform("max")]


def output_top1(record: pd.DataFrame, measure: str = MASKED) -> pd.DataFrame:
    """Top-1 of ``measure`` at each model's last hidden state (the output): evaluated steps (rows)
    x models (columns, in the record's order); NaN where a model was not evaluated."""
    rows = at_output(record, measure)
    table = rows.pivot(index="step", columns="model", values="top1")
    return table[list(dict.fromkeys(rows["model"]))]


def past_plateau(record: pd.DataFrame, predicting: float | Mapping[str, float] = PREDICTING,
                 threshold: float = THRESHOLD, stay: float = STAY, fall: float = FALL
                 ) -> pd.DataFrame:
    """The chapter's rule past the plateau (pre-registered 2026-12-02), one row per model.

    *P* is the first evaluated step at which masked top-1 at the output is at least
    ``predicting``, *F* the last evaluated step. Over the middle hidden states ``1..L-1``, the
    reconstruction top-1 at *F* against *P*: **stay decodable** when every one is at least
    ``threshold`` at *F* and none fell by more than ``stay``; **fall as the head specialises**
    when any fell by more than ``fall``; otherwise **mixed**; **not reached** without a *P*, and
    **too early to tell** when *P* is *F* (no step after it yet). ``predicting`` is one level
    for every model, or a level per model (:func:`predicting_levels`).

    Columns: ``model``, ``last_layer``, ``predicting`` (the level), ``P``, ``F`` (NaN: none), ``masked_P``, ``masked_F``
    (output), ``largest_fall`` (reconstruction at *P* minus at *F*, the largest over the middle
    hidden states; negative: all rose) and its ``falling_layer``, ``lowest_F`` and its
    ``lowest_layer``, ``verdict``.
    """
    rows = []
    masked = output_top1(record, MASKED)
    for model in masked.columns:
        series = masked[model].dropna()
        level = float(predicting[model] if isinstance(predicting, Mapping) else predicting)
        hits = series[series >= level]
        p, f = (float(hits.index[0]) if len(hits) else np.nan), float(series.index[-1])
        recon = grid(record, model, RECONSTRUCTION)
        last = int(recon.index.max())
        middle = recon.loc[[layer for layer in recon.index if 0 < layer < last]]
        row = dict(model=model, last_layer=last, predicting=level, P=p, F=f,
                   masked_P=float(series.get(p, np.nan)), masked_F=float(series[f]),
                   largest_fall=np.nan, falling_layer=np.nan,
                   lowest_F=float(middle[f].min()), lowest_layer=int(middle[f].idxmin()))
        if np.isnan(p):
            row["verdict"] = "not reached"
        elif p == f:
            row["verdict"] = "too early to tell"
        else:
            falls = middle[p] - middle[f]
            row.update(largest_fall=float(falls.max()), falling_layer=int(falls.idxmax()))
            row["verdict"] = ("fall as the head specialises" if falls.max() > fall
                              else "stay decodable" if falls.max() <= stay
                              and middle[f].min() >= threshold else "mixed")
        rows.append(row)
    return pd.DataFrame(rows)


def inherited_tokens(loss: pd.DataFrame, record: pd.DataFrame, inits: dict[str, str]
                     ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(loss, record)`` with ``tokens_seen`` counted from the start of the first run: a model
    continued from another of the record (``inits``: model to the model it started from) adds
    the tokens that model had seen by its last loss row, along chains of ``init``."""
    last = loss.groupby("model")["tokens_seen"].max()

    def offset(model: str, seen: frozenset = frozenset()) -> int:
        parent = inits.get(model)
        if parent is None or parent not in last.index or parent in seen:
            return 0
        return int(last[parent]) + offset(parent, seen | {model})

    shifted = []
    for frame in (loss, record):
        frame = frame.copy()
        frame["tokens_seen"] = frame["tokens_seen"] + frame["model"].map(offset)
        shifted.append(frame)
    return shifted[0], shifted[1]


def stage_costs(loss: pd.DataFrame, record: pd.DataFrame, stage_sizes: dict[str, int]
                ) -> pd.DataFrame:
    """What each stage of each run cost and reached (``stage_sizes``: model to its steps per
    stage; a model left out ran as one stage). Columns ``model``, ``stage`` (1-based),
    ``first_step``, ``last_step``, ``tokens`` (in the stage), ``hours`` (wall clock, from the
    loss rows' ``elapsed_s``), ``masked_top1`` (at the output, at the stage's last evaluated
    step; NaN if none fell within it)."""
    masked = output_top1(record, MASKED)
    rows = []
    for model, own in loss.groupby("model", sort=False):
        own = own.sort_values("step")
        per_step = own["tokens_seen"].iloc[0] / own["step"].iloc[0]
        size = stage_sizes.get(model) or int(own["step"].max())
        before = 0.0
        for k, part in own.groupby((own["step"] - 1) // size + 1):
            first, end = int(part["step"].min()), int(part["step"].max())
            elapsed = float(part["elapsed_s"].max())
            within = masked[model].loc[first:end].dropna() if model in masked else pd.Series()
            reached = within.iloc[-1] if len(within) else np.nan  # its last evaluation
            rows.append(dict(model=model, stage=int(k), first_step=first, last_step=end,
                             tokens=int(round((end - first + 1) * per_step)),
                             hours=(elapsed - before) / 3600, masked_top1=float(reached)))
            before = elapsed
    return pd.DataFrame(rows)


def baselines(record: pd.DataFrame) -> pd.Series:
    """Most-frequent-token top-1 per model (its :data:`MOST_FREQUENT` row), for the models that
    have one, in the record's order."""
    rows = record[record["measure"] == MOST_FREQUENT]
    return rows.groupby("model", sort=False)["top1"].first()


def predicting_levels(record: pd.DataFrame, multiple: float) -> dict[str, float]:
    """Per model, the masked top-1 at the output from which it counts as predicting: ``multiple``
    times its most-frequent-token baseline (:func:`baselines`).

    Raises:
        ValueError: a model of the record has no baseline row (names it).
    """
    found = baselines(record)
    missing = [m for m in dict.fromkeys(record["model"]) if m not in found.index]
    if missing:
        raise ValueError(f"no {MOST_FREQUENT!r} row (step 0) for {missing}: their predicting "
                         "level is unknown")
    return {model: multiple * float(top1) for model, top1 in found.items()}


def across_seeds(verdicts: Mapping[str, str], groups: Mapping[str, Sequence[str]]
                 ) -> dict[str, str]:
    """Per group (an architecture's seeds), the verdict every seed gives; else ``"seeds
    disagree"`` with the count of each verdict (most first). Only finished seeds are in
    ``verdicts``: a group with fewer is ``"pending (k of n seeds)"``."""
    out = {}
    for group, models in groups.items():
        given = pd.Series([verdicts[m] for m in models if m in verdicts], dtype=object)
        counts = given.value_counts(sort=True)
        out[group] = (f"pending ({len(given)} of {len(models)} seeds)" if len(given) < len(models)
                      else str(counts.index[0]) if len(counts) == 1
                      else "seeds disagree (" + ", ".join(f"{n} {v}" for v, n in counts.items())
                      + ")")
    return out
