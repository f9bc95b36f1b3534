"""The glance page's forest plot: every RQ3/RQ4 gain with its seed-only and its two-way interval,
the paper's claimed gain marked on its task's rows."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

NO_GAIN_MARGIN = 0.5  # the ±0.5-point band in which the registered rule reads "no gain"


def plot_forest(frame: pd.DataFrame, claimed: Mapping[str, float | None]) -> Figure:
    """One row per gain (``frame``: ``model``, ``task``, ``duplication``, ``gain``, ``seed_low``,
    ``seed_high``, ``two_way_low``, ``two_way_high``, points; as ``dupbert.study.variance``
    gives them), grouped by task: a dot at the gain, a thick bar for the registered seed-only 95%
    interval, a thin bar for the interval with the evaluation set's error too; one panel per task,
    each on its own scale. ``claimed``: task to the paper's claimed gain (a dashed red line), 0
    for "no gain" (the ±0.5 band shaded), None or absent for none.

    Raises:
        ValueError: ``frame`` is empty or lacks a column (names them).
    """
    needed = ["model", "task", "duplication", "gain", "seed_low", "seed_high", "two_way_low",
              "two_way_high"]
    missing = [c for c in needed if c not in frame]
    if frame.empty or missing:
        raise ValueError(f"plot_forest: needs rows with {needed}; missing {missing or 'rows'}")
    tasks = list(dict.fromkeys(frame["task"]))
    sizes = [int((frame["task"] == t).sum()) for t in tasks]
    fig = Figure(figsize=(8.6, 1.4 + 0.34 * len(frame) + 0.35 * len(tasks)), dpi=100,
                 layout="constrained")
    axes = fig.subplots(len(tasks), 1, squeeze=False, height_ratios=sizes)[:, 0]
    for ax, task in zip(axes, tasks):
        rows = frame[frame["task"] == task].reset_index(drop=True)
        y = np.arange(len(rows))[::-1]
        ax.hlines(y, rows["two_way_low"], rows["two_way_high"], color="tab:blue", linewidth=1.2,
                  label="95% CI, seeds and examples")
        ax.hlines(y, rows["seed_low"], rows["seed_high"], color="tab:blue", linewidth=4.5,
                  alpha=0.4, label="95% CI, seeds only (registered)")
        ax.plot(rows["gain"], y, "o", color="black", markersize=4, label="gain")
        value = claimed.get(task)
        if value == 0:
            ax.axvspan(-NO_GAIN_MARGIN, NO_GAIN_MARGIN, color="tab:green", alpha=0.15,
                       label="paper: no gain (the ±0.5 band)")
        elif value is not None:
            ax.axvline(value, color="tab:red", linestyle="--", linewidth=1.2,
                       label="paper: claimed gain")
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_yticks(y, [_label(r) for r in rows.to_dict("records")], fontsize="x-small")
        ax.set_ylim(-0.6, len(rows) - 0.4)
        ax.set_title(task, fontsize="small", loc="left")
        ax.grid(axis="x", alpha=0.3)
    axes[-1].set_xlabel("gain over the reference (points; accuracy x 100)")
    handles = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    fig.legend(handles.values(), handles.keys(), loc="outside lower center", ncols=3,
               fontsize="x-small", frameon=False)
    return fig


def _label(row: dict) -> str:
    """``model, configuration [vs its reference] (n seeds)``."""
    reference = row.get("reference")
    versus = f" vs {reference}" if isinstance(reference, str) and reference != "baseline" else ""
    seeds = f" ({int(row['n_pairs'])} seeds)" if pd.notna(row.get("n_pairs")) else ""
    return f"{row['model']}, {row['duplication']}{versus}{seeds}"
