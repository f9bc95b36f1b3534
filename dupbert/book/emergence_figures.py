"""The emergence chapter's figure of the runs from random init: masked prediction at the output and
every hidden state's reconstruction against pretraining steps, seeds overlaid."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .plots import no_runs_figure, plot_emergence
from ..training.emergence import MASKED, RECONSTRUCTION, THRESHOLD, grid, output_top1

_STYLES = ("-", "--", ":", "-.")

PASTED = ("bert-en-small", "albert-en-small", "bert-en-small-continued", "minilm-mlm-en",
          "albert-minilm-en")
"""The runs whose figure the chapter's text pastes (``emergence_<run>``), whatever the profile."""


def run_figures(record: pd.DataFrame, shown: Sequence[str], pending: Sequence[str] = (),
                pasted: Sequence[str] = PASTED) -> dict[str, Figure]:
    """``{run: figure}`` for every run of ``shown``, ``pending`` and ``pasted`` (in that order,
    each once): its heat maps (``dupbert.book.plots.plot_emergence`` of ``record``) where it is
    shown, else a placeholder that says ``"<run>: no rows yet"`` (pending) or ``"<run>: not in this
    profile"``."""
    return {name: plot_emergence(record, name) if name in shown
            else no_runs_figure(f"{name}: {'no rows yet' if name in pending else 'not in this profile'}")
            for name in dict.fromkeys([*shown, *pending, *pasted])}


def plot_seeds(record: pd.DataFrame, groups: Mapping[str, Sequence[str]],
               levels: Mapping[str, float], threshold: float = THRESHOLD) -> Figure:
    """One panel per group (an architecture's seeds, ``groups``: title to model names): top-1
    against step (log axis; step 0 at the left edge) of masked prediction at the output (black)
    and reconstruction from each hidden state (viridis, the embedding output darkest), one line
    style per seed; an orange vertical line where each seed starts to predict (masked top-1 at the
    output >= its ``levels`` entry), dotted horizontal lines at the predicting level and at the
    decodable ``threshold``.

    Raises:
        ValueError: no group has a model with rows (names the groups).
    """
    present = {g: [m for m in ms if m in set(record["model"])] for g, ms in groups.items()}
    present = {g: ms for g, ms in present.items() if ms}
    if not present:
        raise ValueError(f"plot_seeds: no rows of any model of {dict(groups)}")
    fig = Figure(figsize=(4.3 * len(present) + 0.6, 3.9), dpi=100, layout="constrained")
    axes = fig.subplots(1, len(present), squeeze=False, sharey=True)[0]
    masked = output_top1(record, MASKED)
    for ax, (title, models) in zip(axes, present.items()):
        for style, model in zip(_STYLES, models):
            recon = grid(record, model, RECONSTRUCTION)
            colours = _layer_colours(int(recon.index.max()))
            for layer, row in recon.iterrows():
                ax.plot(row.index, row.to_numpy(), style, color=colours[layer], linewidth=1.0,
                        alpha=0.8)
            series = masked[model].dropna()
            ax.plot(series.index, series.to_numpy(), style, color="black", linewidth=2.0)
            hits = series[series >= levels[model]]
            if len(hits):
                ax.axvline(hits.index[0], color="tab:orange", linestyle="-", linewidth=1.0)
        level = float(np.mean([levels[m] for m in models]))
        ax.axhline(level, color="black", linestyle=":", linewidth=0.8)
        ax.axhline(threshold, color="tab:red", linestyle=":", linewidth=0.8)
        ax.set_xscale("symlog", linthresh=10)
        ax.set_xlim(left=0)
        ax.set_ylim(0, 1.02)
        ax.set_title(f"{title} ({len(models)} seed{'s' * (len(models) > 1)})", fontsize="medium")
        ax.set_xlabel("pretraining step (log axis)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("top-1 on held-out reactions")
    last = int(record.loc[record["measure"] == RECONSTRUCTION, "layer"].max())
    _legend(fig, _layer_colours(last), present)
    return fig


def _layer_colours(last: int) -> dict[int, tuple]:
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    return {layer: cmap(0.9 * layer / max(last, 1)) for layer in range(last + 1)}


def _legend(fig: Figure, colours: dict[int, tuple], groups: Mapping[str, Sequence[str]]) -> None:
    from matplotlib.lines import Line2D

    seeds = max(len(models) for models in groups.values())
    handles = [Line2D([], [], color="black", linewidth=2.0, label="masked top-1, output")]
    handles += [Line2D([], [], color=c, label=f"reconstruction, hidden state {layer}")
                for layer, c in colours.items() if layer in (0, max(colours)) or layer % 2 == 0]
    handles += [Line2D([], [], color="grey", linestyle=_STYLES[k], label=f"seed {k + 1} of {seeds}")
                for k in range(seeds)]
    handles += [Line2D([], [], color="tab:orange", label="starts to predict (P)"),
                Line2D([], [], color="black", linestyle=":", label="predicting level"),
                Line2D([], [], color="tab:red", linestyle=":", label="decodable")]
    fig.legend(handles=handles, loc="outside right center", fontsize="x-small", frameon=False)
