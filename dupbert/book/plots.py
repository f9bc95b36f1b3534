"""Matplotlib figures for the book: one function per figure kind.

Functions take the tidy frames that the rest of :mod:`dupbert` returns and return a
:class:`matplotlib.figure.Figure` built with the object-oriented API (no pyplot, no GUI
backend), so it works headless and a notebook shows it once (``display(fig)`` or
``myst_nb.glue``). Its text repr, which nbval compares, is stable.
"""

from __future__ import annotations

import matplotlib
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

__all__ = ["plot_reconstruction", "plot_duplication_effect"]

_PRETRAINED = "pretrained"
_CONTROL = "random-init control"
_BASELINE = "baseline"


def _single_block(name) -> bool:
    """Whether a configuration name copies one block other than the first (the per-block
    configurations of ``dupbert.tools.duplicate.standard_duplications``)."""
    return str(name).startswith("copy block ") or name in ("copy middle", "copy last")
_METRIC_LABELS = {
    "top1": "top-1 reconstruction accuracy",
    "top5": "top-5 reconstruction accuracy",
    "top1_macro": "top-1 reconstruction accuracy (mean over sequences)",
}


def plot_reconstruction(frame: pd.DataFrame, metric: str = "top1", ax=None) -> Figure:
    """Token reconstruction accuracy against hidden state, one line per model and init.

    Parameters
    ----------
    frame
        :func:`dupbert.probe_models` (or :func:`dupbert.reconstruction_accuracy`) output: ``layer``
        (0 = embedding output) and ``metric``; optional ``model``, ``duplication`` (one colour each)
        and ``init`` (``"random-init control"`` dashed).
    metric
        E.g. ``"top1"``, ``"top5"``, ``"top1_macro"``; values in [0, 1].
    ax
        Axes to draw into; a new figure if ``None``.
    """
    missing = {"layer", metric} - set(frame.columns)
    if missing:
        raise KeyError(
            f"plot_reconstruction needs columns {sorted(missing)}; the frame has {list(frame.columns)}"
        )
    if frame.empty:
        raise ValueError("plot_reconstruction got an empty frame")

    data = frame.copy()
    for column, default in (("model", "model"), ("duplication", _BASELINE), ("init", _PRETRAINED)):
        if column not in data.columns:
            data[column] = default

    if ax is None:
        fig = Figure(figsize=(8, 5.2), dpi=110, layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure

    # One colour per (model, duplication) in order of first appearance; the control dashed.
    series = list(dict.fromkeys(zip(data["model"], data["duplication"])))
    colours = matplotlib.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    inits = sorted(set(data["init"]), key=lambda v: (v == _CONTROL, str(v)))
    for i, (model, duplication) in enumerate(series):
        name = str(model) if duplication == _BASELINE else f"{model}, {duplication}"
        for init in inits:
            rows = data[
                (data["model"] == model) & (data["duplication"] == duplication) & (data["init"] == init)
            ].sort_values("layer")
            if rows.empty:
                continue
            control = init == _CONTROL
            ax.plot(
                rows["layer"],
                rows[metric],
                color=colours[i % len(colours)],
                linestyle="--" if control else "-",
                marker="x" if control else "o",
                markersize=4,
                linewidth=1.2 if control else 1.8,
                alpha=0.8 if control else 1.0,
                label=f"{name} ({init})" if len(inits) > 1 else name,
            )

    ax.set_xlabel("hidden state (0 = embedding output)")
    ax.set_ylabel(_METRIC_LABELS.get(metric, metric))
    ax.set_ylim(0, 1.02)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlim(data["layer"].min() - 0.3, data["layer"].max() + 0.3)
    ax.grid(True, alpha=0.3)
    # Below the axes, so it never hides a curve and the plot keeps the page's width.
    n_curves = len(ax.get_lines())
    ax.legend(fontsize="small" if n_curves <= 12 else "x-small", ncols=2 if n_curves <= 12 else 3,
              loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False)
    return fig


def plot_duplication_effect(frame: pd.DataFrame, model: str, metric: str = "top1",
                            variants: list[str] | None = None) -> Figure:
    """RQ1 on duplicated models: reconstruction per hidden state of one model's baseline and
    duplicated variants, hidden states made by copies ringed.

    Parameters
    ----------
    frame
        :func:`dupbert.probe_models` output with ``duplications=...``: ``model``, ``duplication``,
        ``layer``, ``is_copy``, ``metric`` (optional ``init``).
    variants
        Names drawn after ``"baseline"``; default: all but the single-block copies (``"copy
        block b"``, ``"copy middle"``, ``"copy last"``; summarised by
        :func:`dupbert.tools.probe.duplication_summary`).
    """
    data = frame[frame["model"] == model]
    if "init" in data:
        data = data[data["init"] == _PRETRAINED]
    if data.empty:
        raise ValueError(f"no rows for model {model!r}; models in the frame: "
                         f"{sorted(frame['model'].unique())}")
    labels = list(dict.fromkeys(data["duplication"]))
    if variants is None:
        variants = [v for v in labels if v != _BASELINE and not _single_block(v)]
    fig = Figure(figsize=(8.5, 4.2), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    colours = matplotlib.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    for i, label in enumerate([_BASELINE, *variants]):
        rows = data[data["duplication"] == label].sort_values("layer")
        if rows.empty:
            continue
        colour = colours[i % len(colours)]
        ax.plot(rows["layer"], rows[metric], color=colour, marker="o", markersize=3,
                linewidth=2.2 if label == _BASELINE else 1.4, label=str(label))
        copies = rows[rows["is_copy"].astype(bool)]
        ax.scatter(copies["layer"], copies[metric], s=70, facecolors="none", edgecolors=colour,
                   linewidths=1.5)
    ax.scatter([], [], s=70, facecolors="none", edgecolors="grey", label="made by a copy / repeat")
    ax.set_title(f"{model}: reconstruction through duplicated models")
    ax.set_xlabel("hidden state (0 = embedding output)")
    ax.set_ylabel(_METRIC_LABELS.get(metric, metric))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return fig


# --------------------------------------------------------------------------------------------------
# RQ2: per-layer statistics and layer similarity (frames of dupbert.tools.stats)

__all__ += ["plot_layer_statistics", "plot_similarity_heatmap", "plot_similarity_heatmaps",
            "plot_distribution_distance", "plot_similarity_vs_reconstruction"]


def _require(frame: pd.DataFrame, columns, who: str) -> None:
    missing = set(columns) - set(frame.columns)
    if missing:
        raise KeyError(
            f"{who} needs columns {sorted(missing)}; the frame has {list(frame.columns)}")
    if frame.empty:
        raise ValueError(f"{who} got an empty frame")


def _with_defaults(frame: pd.DataFrame) -> pd.DataFrame:
    data = frame.copy()
    if "model" not in data.columns:
        data["model"] = "model"
    if "duplication" not in data.columns:
        data["duplication"] = _BASELINE
    return data


def _layer_axis(ax, layers) -> None:
    ax.set_xlabel("hidden state (0 = embedding output)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlim(min(layers) - 0.3, max(layers) + 0.3)
    ax.grid(True, alpha=0.3)


def plot_layer_statistics(frame: pd.DataFrame) -> Figure:
    """Per-layer statistics, one row of panels per model: token L2 norm (mean ± std), std of all
    values, value quantiles (q01–q99, q25–q75, median); duplicated variants dashed.

    Parameters
    ----------
    frame
        ``dupbert.tools.stats.layer_statistics`` or ``layer_similarity_report(...).layers``: ``layer,
        norm_mean, norm_std, std, q01, q25, q50, q75, q99`` (hidden-state units); optional
        ``model``, ``duplication``.
    """
    _require(frame, ["layer", "norm_mean", "norm_std", "std", "q01", "q25", "q50", "q75", "q99"],
             "plot_layer_statistics")
    data = _with_defaults(frame)
    models = list(dict.fromkeys(data["model"]))
    fig = Figure(figsize=(10, 2.7 * len(models) + 0.4), dpi=100, layout="constrained")
    axes = fig.subplots(len(models), 3, squeeze=False)
    colours = matplotlib.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    for row, model in enumerate(models):
        ours = data[data["model"] == model]
        variants = sorted(set(ours["duplication"]), key=lambda v: (v != _BASELINE, str(v)))
        for k, variant in enumerate(variants):
            rows = ours[ours["duplication"] == variant].sort_values("layer")
            style = dict(color=colours[k % len(colours)], marker="o", markersize=3,
                         linestyle="-" if variant == _BASELINE else "--", label=str(variant))
            axes[row, 0].plot(rows["layer"], rows["norm_mean"], **style)
            axes[row, 0].fill_between(rows["layer"], rows["norm_mean"] - rows["norm_std"],
                                      rows["norm_mean"] + rows["norm_std"],
                                      color=style["color"], alpha=0.15, linewidth=0)
            axes[row, 1].plot(rows["layer"], rows["std"], **style)
        base = ours[ours["duplication"] == variants[0]].sort_values("layer")
        axes[row, 2].fill_between(base["layer"], base["q01"], base["q99"], color="C0", alpha=0.2,
                                  linewidth=0, label="q01–q99")
        axes[row, 2].fill_between(base["layer"], base["q25"], base["q75"], color="C0", alpha=0.45,
                                  linewidth=0, label="q25–q75")
        axes[row, 2].plot(base["layer"], base["q50"], color="C0", label="median")
        axes[row, 0].set_ylabel(f"{model}\nL2 norm of a token")
        axes[row, 1].set_ylabel("std of all values")
        axes[row, 2].set_ylabel(f"value quantiles ({variants[0]})")
        for ax in axes[row]:
            _layer_axis(ax, ours["layer"])
        axes[row, 0].legend(fontsize="small", frameon=False)
        axes[row, 2].legend(fontsize="small", frameon=False)
    return fig


def plot_similarity_heatmap(matrix: pd.DataFrame, title: str = "", ax=None,
                            vmin: float = 0.0, vmax: float = 1.0, label: str = "",
                            annotate: bool | None = None) -> Figure:
    """A square layer-by-layer similarity matrix as a heat map (hidden state 0 at the top left).

    Parameters
    ----------
    matrix
        ``[L+1, L+1]`` frame indexed by hidden states, e.g. ``dupbert.tools.stats.cka_matrix`` or
        ``cosine_across_layers``.
    vmin, vmax, label
        Colour scale limits and colour bar label.
    annotate
        Write the values (2 decimals) into the cells; default: only for at most 13 layers.
    """
    if matrix.empty or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(
            f"plot_similarity_heatmap needs a non-empty square matrix, got {matrix.shape}")
    if ax is None:
        fig = Figure(figsize=(5.2, 4.4), dpi=100, layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    values = matrix.to_numpy(dtype=float)
    image = ax.imshow(values, vmin=vmin, vmax=vmax, cmap="viridis", origin="upper",
                      interpolation="nearest")
    n = values.shape[0]
    ticks = list(range(n)) if n <= 16 else list(range(0, n, max(1, n // 8)))
    ax.set_xticks(ticks, [str(matrix.columns[t]) for t in ticks], fontsize="small")
    ax.set_yticks(ticks, [str(matrix.index[t]) for t in ticks], fontsize="small")
    ax.set_xlabel("hidden state")
    ax.set_ylabel("hidden state")
    if title:
        ax.set_title(title, fontsize="medium")
    if annotate if annotate is not None else n <= 13:
        middle = (vmin + vmax) / 2
        for i in range(n):
            for j in range(n):
                ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center", fontsize=5.5,
                        color="black" if values[i, j] > middle else "white")
    fig.colorbar(image, ax=ax, shrink=0.85, label=label)
    return fig


def plot_similarity_heatmaps(pairs: pd.DataFrame, value: str = "cka", label: str = "") -> Figure:
    """Heat maps (:func:`plot_similarity_heatmap`), one row per model, one column per duplication.

    Parameters
    ----------
    pairs
        ``layer_similarity_report(...).pairs``: ``layer``, ``other_layer``, ``value``; optional
        ``model``, ``duplication``.
    value
        The column shown, e.g. ``"cka"``; colour scale [0, 1], or [-1, 1] if a value is negative.
    """
    _require(pairs, ["layer", "other_layer", value], "plot_similarity_heatmaps")
    data = _with_defaults(pairs)
    models = list(dict.fromkeys(data["model"]))
    variants = sorted(set(data["duplication"]), key=lambda v: (v != _BASELINE, str(v)))
    columns = max(len(set(data.loc[data["model"] == m, "duplication"])) for m in models)
    fig = Figure(figsize=(4.8 * columns, 4.1 * len(models)), dpi=100, layout="constrained")
    axes = fig.subplots(len(models), columns, squeeze=False)
    vmin = 0.0 if data[value].min() >= 0 else -1.0
    for row, model in enumerate(models):
        ours = data[data["model"] == model]
        present = [v for v in variants if v in set(ours["duplication"])]
        for column in range(columns):
            ax = axes[row, column]
            if column >= len(present):
                ax.set_axis_off()
                continue
            rows = ours[ours["duplication"] == present[column]]
            matrix = rows.pivot(index="layer", columns="other_layer", values=value)
            plot_similarity_heatmap(matrix, title=f"{model}: {present[column]}", ax=ax,
                                    vmin=vmin, vmax=1.0, label=label or value)
    return fig


def plot_distribution_distance(frame: pd.DataFrame) -> Figure:
    """Distance of each hidden state's per-dimension value distribution to the last one.

    Two panels: ``w1_relative`` (Wasserstein-1 in units of the last layer's std: scale and shape)
    and ``w1_standardised`` (shape only); duplicated variants dashed.

    Parameters
    ----------
    frame
        ``dupbert.tools.stats.distribution_distance`` or ``layer_similarity_report(...).layers``:
        ``layer, w1_relative, w1_standardised``; optional ``model``, ``duplication``.
    """
    _require(frame, ["layer", "w1_relative", "w1_standardised"], "plot_distribution_distance")
    data = _with_defaults(frame)
    fig = Figure(figsize=(10, 3.8), dpi=100, layout="constrained")
    axes = fig.subplots(1, 2)
    colours = matplotlib.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    for i, model in enumerate(dict.fromkeys(data["model"])):
        ours = data[data["model"] == model]
        for variant in sorted(set(ours["duplication"]), key=lambda v: (v != _BASELINE, str(v))):
            rows = ours[ours["duplication"] == variant].sort_values("layer")
            dashed = variant != _BASELINE
            for ax, column in zip(axes, ["w1_relative", "w1_standardised"]):
                ax.plot(rows["layer"], rows[column], color=colours[i % len(colours)],
                        linestyle="--" if dashed else "-", marker="x" if dashed else "o",
                        markersize=3, alpha=0.7 if dashed else 1.0,
                        label=f"{model} ({variant})" if dashed else str(model))
    axes[0].set_ylabel("W1 to the last hidden state\n(÷ its std; scale and shape)")
    axes[1].set_ylabel("W1 to the last hidden state\n(each layer standardised; shape)")
    for ax in axes:
        _layer_axis(ax, data["layer"])
        ax.set_ylim(bottom=0)
    axes[1].legend(fontsize="small", frameon=False)
    return fig


def plot_similarity_vs_reconstruction(frame: pd.DataFrame, x: str = "cka_to_last",
                                      y: str = "top1", ax=None) -> Figure:
    """Scatter of a hidden state's similarity to the last one against its RQ1 accuracy, one colour
    per model, points labelled by hidden state; ``"baseline"`` rows only.

    Parameters
    ----------
    frame
        ``layer_similarity_report(...).layers`` (or ``relate_to_reconstruction``'s frame):
        ``layer``, ``x``, ``y``; optional ``model``, ``duplication``.
    x, y
        Columns for the axes, e.g. ``cka_to_last`` and ``top1``.
    """
    _require(frame, ["layer", x, y], "plot_similarity_vs_reconstruction")
    data = _with_defaults(frame)
    data = data[data["duplication"] == _BASELINE]
    if ax is None:
        fig = Figure(figsize=(6.5, 4.4), dpi=100, layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    colours = matplotlib.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    for i, model in enumerate(dict.fromkeys(data["model"])):
        rows = data[data["model"] == model]
        colour = colours[i % len(colours)]
        ax.scatter(rows[x], rows[y], color=colour, s=18, label=str(model))
        for _, row in rows.iterrows():
            ax.annotate(str(int(row["layer"])), (row[x], row[y]), fontsize=6, color=colour,
                        xytext=(3, 2), textcoords="offset points")
    ax.set_xlabel({"cka_to_last": "linear CKA with the last hidden state",
                   "cosine_to_last": "cosine with the same token in the last hidden state"}
                  .get(x, x))
    ax.set_ylabel(_METRIC_LABELS.get(y, y))
    ax.set_ylim(-0.02, 1.02)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", frameon=False)
    return fig


# ----------------------------------------------------------------------------- RQ3 / RQ4


def _configuration_order(names) -> list[str]:
    """Configurations in order of first appearance, ``"baseline"`` first."""
    names = list(dict.fromkeys(names))
    return sorted(names, key=lambda n: n != _BASELINE)


def plot_paired_seeds(points: pd.DataFrame, metrics: dict[str, str] | None = None,
                      ylabels: dict[str, str] | None = None) -> Figure:
    """RQ3: every run's metric, one panel per (model, task), configurations along x, one line per
    seed (its slope is the seed's gain); the trivial baseline dashed grey.

    Parameters
    ----------
    points
        :func:`dupbert.study.comparisons.points_frame`: ``model, task, duplication, seed, metric, value``;
        optional ``trivial``.
    metrics
        ``{task: metric}`` (default: each task's first metric in ``points``).
    ylabels
        ``{task: y-axis label}`` (default: ``"<metric> (points)"``).
    """
    _require(points, ["model", "task", "duplication", "seed", "metric", "value"],
             "plot_paired_seeds")
    if points.empty:
        raise ValueError("plot_paired_seeds got an empty frame")
    metrics = dict(metrics or {})
    for task in dict.fromkeys(points["task"]):
        metrics.setdefault(task, points.loc[points["task"] == task, "metric"].iloc[0])
    panels = list(dict.fromkeys(zip(points["model"], points["task"])))
    columns = min(3, len(panels))
    rows_ = -(-len(panels) // columns)
    fig = Figure(figsize=(4.4 * columns, 3.6 * rows_), dpi=100, layout="constrained")
    axes = fig.subplots(rows_, columns, squeeze=False)
    colours = matplotlib.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    for index, (model, task) in enumerate(panels):
        ax = axes[index // columns, index % columns]
        metric = metrics[task]
        data = points[(points["model"] == model) & (points["task"] == task)
                      & (points["metric"] == metric)]
        order = _configuration_order(data["duplication"])
        x = {name: i for i, name in enumerate(order)}
        for j, seed in enumerate(sorted(data["seed"].unique())):
            rows = data[data["seed"] == seed].copy()
            rows["x"] = rows["duplication"].map(x)
            rows = rows.sort_values("x")
            ax.plot(rows["x"], rows["value"], marker="o", markersize=4, linewidth=1.1,
                    alpha=0.85, color=colours[j % len(colours)], label=f"seed {seed}")
        means = data.groupby("duplication")["value"].mean()
        ax.scatter([x[n] for n in order], [means[n] for n in order], marker="_", s=400,
                   color="black", zorder=3, label="mean over seeds")
        if "trivial" in data and data["trivial"].notna().any():
            ax.axhline(data["trivial"].mean(), color="grey", linestyle="--", linewidth=1,
                       label="trivial baseline")
        ax.set_xticks(range(len(order)), order, rotation=30, ha="right", fontsize="small")
        ax.set_title(f"{model} on {task}", fontsize="medium")
        ax.set_ylabel((ylabels or {}).get(task, f"{metric} (points)"))
        ax.grid(True, axis="y", alpha=0.3)
    for index in range(len(panels), rows_ * columns):
        axes[index // columns, index % columns].set_axis_off()
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right center", fontsize="small", frameon=False)
    return fig


def plot_training_loss(results: pd.DataFrame, window: int = 10,
                       stalled: pd.DataFrame | None = None) -> Figure:
    """RQ3: training loss against optimisation step, one panel per (model, task), one colour per
    configuration: a thin line per run and a thick one for the mean, both a centred moving
    average over ``window`` steps; ``stalled`` runs dashed black on top.

    Parameters
    ----------
    results
        ``ResultsFile.frame()`` rows: ``model, task, duplication, seed, train_losses`` (per step,
        cross-entropy in nats). Rows without a non-empty loss list are left out.
    window
        Steps per moving average (1: the raw losses).
    stalled
        Optional ``model, task, duplication, seed`` frame
        (:func:`dupbert.study.comparisons.stalled_runs`).

    Raises
    ------
    KeyError
        ``results`` (or ``stalled``) lacks a column (named).
    ValueError
        No row with losses, or a bad ``window``.
    """
    from ..core.checks import check_number

    window = check_number("window", window, integer=True, minimum=1)
    _require(results, ["model", "task", "duplication", "seed", "train_losses"],
             "plot_training_loss")
    with_losses = results[results["train_losses"].map(lambda v: isinstance(v, list) and len(v) > 0)]
    if with_losses.empty:
        raise ValueError("plot_training_loss got no run with train_losses")
    marked = set()
    if stalled is not None:
        missing = {"model", "task", "duplication", "seed"} - set(stalled.columns)
        if missing:
            raise KeyError(f"plot_training_loss: stalled needs columns {sorted(missing)}; it "
                           f"has {list(stalled.columns)}")
        marked = set(zip(stalled["model"], stalled["task"], stalled["duplication"],
                         stalled["seed"].astype(int)))
    panels = list(dict.fromkeys(zip(with_losses["model"], with_losses["task"])))
    columns = min(3, len(panels))
    rows_ = -(-len(panels) // columns)
    fig = Figure(figsize=(4.4 * columns, 3.4 * rows_), dpi=100, layout="constrained")
    axes = fig.subplots(rows_, columns, squeeze=False)
    colours = matplotlib.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])

    def smooth(losses):
        return pd.Series(losses, dtype=float).rolling(window, min_periods=1, center=True).mean()

    for index, (model, task) in enumerate(panels):
        ax = axes[index // columns, index % columns]
        data = with_losses[(with_losses["model"] == model) & (with_losses["task"] == task)]
        stalled_curves = []
        for j, name in enumerate(_configuration_order(data["duplication"])):
            colour = colours[j % len(colours)]
            runs = data[data["duplication"] == name]
            curves = pd.DataFrame({int(seed): smooth(losses) for seed, losses
                                   in zip(runs["seed"], runs["train_losses"])})
            steps = curves.index + 1
            for seed in curves.columns:
                ax.plot(steps, curves[seed], color=colour, linewidth=0.6, alpha=0.35)
                if (model, task, name, seed) in marked:
                    stalled_curves.append((f"stalled: {name}, seed {seed}", steps, curves[seed]))
            ax.plot(steps, curves.mean(axis=1), color=colour, linewidth=2,
                    label=f"{name} (mean of {curves.shape[1]})")
        for label, steps, curve in stalled_curves:  # on top, and last in the legend
            ax.plot(steps, curve, color="black", linestyle="--", linewidth=1, label=label,
                    zorder=3)
        ax.set_title(f"{model} on {task}", fontsize="medium")
        ax.set_xlabel("optimisation step")
        ax.set_ylabel(f"training loss (nats; mean of {window} steps)" if window > 1
                      else "training loss (nats)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="x-small", frameon=False, loc="upper center", ncols=2,
                  bbox_to_anchor=(0.5, -0.18))  # below the panel: never over a curve
    for index in range(len(panels), rows_ * columns):
        axes[index // columns, index % columns].set_axis_off()
    return fig


def plot_gain_grid(table: pd.DataFrame, metrics: dict[str, str] | None = None) -> Figure:
    """RQ4: the model × task grid of paired gains over the baseline (points), one panel per cell
    that ran, one bar per configuration: mean gain (dot) and interval (line), filled when
    significant (primary at 0.05, secondaries after Holm); the paper's claim dashed red ("no
    gain": a ±0.5 band).

    Parameters
    ----------
    table
        :func:`dupbert.study.comparisons.comparison`: ``model, task, metric, duplication, gain,
        gain_ci_low, gain_ci_high, p_adjusted, claimed_gain``; with
        ``bonferroni_ci_low``/``_high`` the line is that interval (``1 - 0.05/m`` for a
        secondary; it can cover 0 where Holm is significant, so the fill says what is
        significant), else the 95% one.
    metrics
        ``{task: metric}`` (default: each task's first metric).
    """
    _require(table, ["model", "task", "metric", "duplication", "gain", "gain_ci_low",
                     "gain_ci_high", "p_adjusted", "claimed_gain"], "plot_gain_grid")
    data = table[table["duplication"] != _BASELINE]
    if data.empty:
        raise ValueError("plot_gain_grid got no configuration besides the baseline")
    metrics = dict(metrics or {})
    for task in dict.fromkeys(data["task"]):
        metrics.setdefault(task, data.loc[data["task"] == task, "metric"].iloc[0])
    models = list(dict.fromkeys(data["model"]))
    tasks = list(dict.fromkeys(data["task"]))
    ran = list(dict.fromkeys(zip(data["model"], data["task"])))
    if len(ran) == len(models) * len(tasks):  # every model ran every task: the full grid
        places = {(m, t): (r, c) for r, m in enumerate(models) for c, t in enumerate(tasks)}
        rows_, columns = len(models), len(tasks)
    else:  # a sparse grid: only the cells that ran, in rows of up to three
        columns = min(3, len(ran))
        places = {cell: divmod(i, columns) for i, cell in enumerate(ran)}
        rows_ = -(-len(ran) // columns)
    height = max(2.2, 0.42 * data.groupby(["model", "task"])["duplication"].nunique().max() + 1)
    fig = Figure(figsize=(3.8 * columns + 1, height * rows_), dpi=100, layout="constrained")
    axes = fig.subplots(rows_, columns, squeeze=False)
    for index in range(len(places), rows_ * columns):
        axes[index // columns, index % columns].set_axis_off()
    for (model, task), (r, c) in places.items():
        ax = axes[r, c]
        cell = data[(data["model"] == model) & (data["task"] == task)
                    & (data["metric"] == metrics[task])]
        if cell.empty:
            ax.set_axis_off()
            ax.set_title(f"{model} on {task}: no {metrics[task]}", fontsize="small")
            continue
        names = list(dict.fromkeys(cell["duplication"]))[::-1]
        for y, name in enumerate(names):
            row = cell[cell["duplication"] == name].iloc[0]
            significant = bool(row["p_adjusted"] < 0.05) if pd.notna(row["p_adjusted"]) else False
            colour = "C0" if row["gain"] >= 0 else "C3"
            low, high = (("bonferroni_ci_low", "bonferroni_ci_high")
                         if "bonferroni_ci_low" in row else ("gain_ci_low", "gain_ci_high"))
            if pd.notna(row[low]):
                ax.plot([row[low], row[high]], [y, y], color=colour, linewidth=2)
            ax.plot([row["gain"]], [y], marker="o", markersize=6, color=colour,
                    markerfacecolor=colour if significant else "white")
        ax.axvline(0, color="black", linewidth=0.8)
        claimed = cell["claimed_gain"].iloc[0]
        if claimed is not None and pd.notna(claimed):
            if float(claimed) > 0:
                ax.axvline(float(claimed), color="C3", linestyle="--", linewidth=1.2)
            else:
                ax.axvspan(-0.5, 0.5, color="C2", alpha=0.15, linewidth=0)
        ax.set_yticks(range(len(names)), names, fontsize="small")
        ax.set_ylim(-0.6, len(names) - 0.4)
        ax.set_title(f"{model} on {task}", fontsize="medium")
        ax.set_xlabel(f"gain in {metrics[task]} (points)", fontsize="small")
        ax.grid(True, axis="x", alpha=0.3)
    return fig


__all__ += ["plot_paired_seeds", "plot_gain_grid"]


# --------------------------------------------------------------------------------------------------
# RQ1 beyond the paper: masked prediction per layer (dupbert.book.lens_figures draws the lens)


def plot_masked_and_reconstruction(reconstruction: pd.DataFrame, masked: pd.DataFrame,
                                   metric: str = "top1") -> Figure:
    """RQ1's two curves side by side, as :func:`plot_reconstruction`: reconstruction of unmasked
    tokens (left; control rows dropped) and prediction of masked tokens (right, ``masked``:
    ``probe_models(..., masking=...)``).

    Parameters
    ----------
    metric
        ``"top1"``, ``"top5"`` or ``"top1_macro"`` (fractions in [0, 1]).

    Raises
    ------
    KeyError, ValueError
        As :func:`plot_reconstruction` (missing columns, empty frames).
    """
    fig = Figure(figsize=(11, 5), dpi=100, layout="constrained")
    left, right = fig.subplots(1, 2, sharey=True)
    for ax, frame, name in ((left, reconstruction, "unmasked input tokens (reconstruction)"),
                            (right, masked, "masked tokens (prediction)")):
        if "init" in frame.columns:
            frame = frame[frame["init"] == _PRETRAINED]
        plot_reconstruction(frame, metric=metric, ax=ax)
        ax.set_title(name, fontsize="medium")
        ax.set_ylabel(f"{metric.replace('top', 'top-').replace('_macro', ' (macro)')} accuracy")
    left.get_legend().remove()
    return fig


__all__ += ["plot_masked_and_reconstruction"]


def plot_emergence(record: pd.DataFrame, model: str,
                   measures: tuple[str, ...] = ("reconstruction", "masked",
                                                "reconstruction, duplicated")) -> Figure:
    """One pretrained model's emergence record (``dupbert.training.emergence.read_record``): per ``measures``
    entry a heat map of top-1, hidden state (rows, last on top) x evaluated step (log-spaced,
    equal-width columns), values written in.
    """
    from ..training.emergence import grid

    _require(record, ["model", "step", "measure", "layer", "top1"], "plot_emergence")
    grids = [(m, grid(record, model, m)) for m in measures]
    grids = [(m, g) for m, g in grids if not g.empty]
    if not grids:
        raise ValueError(f"plot_emergence: no rows of model {model!r} for {list(measures)}")
    fig = Figure(figsize=(8.6, 2.0 + 0.9 * sum(0.45 * len(g) for _, g in grids)), dpi=100,
                 layout="constrained")
    axes = fig.subplots(len(grids), 1, squeeze=False,
                        height_ratios=[len(g) for _, g in grids])[:, 0]
    for ax, (measure, values) in zip(axes, grids):
        image = ax.imshow(values.to_numpy(dtype=float), vmin=0, vmax=1, cmap="viridis",
                          aspect="auto", interpolation="nearest")
        ax.set_xticks(range(values.shape[1]), [str(s) for s in values.columns], fontsize="small")
        ax.set_yticks(range(values.shape[0]), [str(l) for l in values.index], fontsize="small")
        ax.set_ylabel("hidden state")
        ax.set_title(f"{model}: {measure} top-1", fontsize="medium")
        for (i, j), v in pd.DataFrame(values.to_numpy()).stack().items():
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=6,
                    color="black" if v > 0.5 else "white")
        fig.colorbar(image, ax=ax, shrink=0.9, pad=0.01)
    axes[-1].set_xlabel("pretraining step (log-spaced evaluation points)")
    return fig


def plot_pretraining_loss(loss: pd.DataFrame, record: pd.DataFrame, window: int = 25) -> Figure:
    """Pretraining loss (nats) against tokens seen, one colour per model: training loss (moving
    average over ``window`` steps) and held-out MLM loss (points); right, held-out masked top-1
    at the output with every chosen token masked (the record's ``"masked"`` rows at the last
    hidden state: nothing to copy).
    """
    _require(loss, ["model", "tokens_seen", "loss"], "plot_pretraining_loss")
    fig = Figure(figsize=(9.0, 3.4), dpi=100, layout="constrained")
    left, right = fig.subplots(1, 2)
    heldout = record[record["measure"] == "mlm"]
    from ..training.emergence import at_output

    masked = at_output(record, "masked")
    for j, (model, rows) in enumerate(loss.groupby("model", sort=False)):
        colour = f"C{j}"
        smooth = rows["loss"].rolling(window, min_periods=1, center=True).mean()
        left.plot(rows["tokens_seen"] / 1e6, smooth, color=colour, linewidth=1.2,
                  label=f"{model}: training")
        points = heldout[heldout["model"] == model]
        left.plot(points["tokens_seen"] / 1e6, points["loss"], "o", color=colour, markersize=4,
                  label=f"{model}: held-out")
        output = masked[masked["model"] == model]
        right.plot(output["tokens_seen"] / 1e6, output["top1"], "o-", color=colour,
                   markersize=4, label=model)
    left.set_xlabel("tokens seen (millions)")
    left.set_ylabel("MLM loss (nats)")
    left.legend(fontsize="x-small", frameon=False)
    right.set_xlabel("tokens seen (millions)")
    right.set_ylabel("masked top-1 at the output\n(every chosen token masked)")
    right.legend(fontsize="x-small", frameon=False)
    for ax in (left, right):
        ax.grid(True, alpha=0.3)
    return fig


def no_runs_figure(text: str = "no runs yet") -> Figure:
    """A small empty figure that says ``text``: what a chapter shows where nothing has landed."""
    fig = Figure(figsize=(4, 1))
    ax = fig.subplots()
    ax.set_axis_off()
    ax.text(0.5, 0.5, text, ha="center", va="center")
    return fig


_RQ5_KINDS = ["single", "best single", "cross-configuration", "same-configuration"]
_RQ5_NAMES = ["single\nruns", "best\nsingle", "cross-\nconfiguration", "same-\nconfiguration"]
_RQ5_COLOURS = ["C7", "C2", "C0", "C1"]


def _rq5_panel(ax, data: pd.DataFrame, stats: pd.DataFrame) -> None:
    """One model and task of :func:`plot_rq5_ensembles`: dots per kind, the mean and CI beside."""
    import numpy as np

    best = stats["configuration"].get("best single")
    for x, (kind, colour) in enumerate(zip(_RQ5_KINDS, _RQ5_COLOURS)):
        if kind == "best single":
            values = data.loc[(data["kind"] == "single") & (data["configuration"] == best), "value"]
        else:
            values = data.loc[data["kind"] == kind, "value"]
        if values.empty:
            continue
        jitter = np.linspace(-0.18, 0.18, len(values)) if len(values) > 1 else [0.0]
        ax.scatter(x + np.asarray(jitter), values, s=14, alpha=0.6, color=colour)
        row = stats.loc[kind]
        if not pd.isna(row["ci_low"]):
            ax.errorbar([x + 0.3], [row["mean"]], yerr=[[row["mean"] - row["ci_low"]],
                        [row["ci_high"] - row["mean"]]], fmt="o", color="black", capsize=3,
                        markersize=4)
        else:
            ax.plot([x + 0.3], [row["mean"]], "o", color="black", markersize=4)


def plot_rq5_ensembles(points: pd.DataFrame, summary: pd.DataFrame, metrics: dict[str, str],
                       trivial: dict | None = None) -> Figure:
    """RQ5: one panel per model and task on ``metrics[task]`` (points): single runs, the best single
    configuration, cross- and same-configuration ensembles as dots, each kind's mean and 95% CI
    in black; the trivial baseline dashed grey.

    Args:
        points: ``dupbert.study.rq5.ensemble_points`` of the distinct ensembles.
        summary: ``dupbert.study.rq5.rq5_summary``.
        trivial: ``{(model, task, metric): points}``.
    """
    trivial = trivial or {}
    points = points[points["metric"] == points["task"].map(metrics)]
    panels = list(dict.fromkeys(zip(points["model"], points["task"])))
    columns = min(3, len(panels))
    rows_ = -(-len(panels) // columns)
    fig = Figure(figsize=(4.4 * columns, 3.6 * rows_), dpi=100, layout="constrained")
    axes = fig.subplots(rows_, columns, squeeze=False)
    for index, (model, task) in enumerate(panels):
        ax = axes[index // columns, index % columns]
        metric = metrics[task]
        stats = summary[(summary["model"] == model) & (summary["task"] == task)
                        & (summary["metric"] == metric)].set_index("kind")
        _rq5_panel(ax, points[(points["model"] == model) & (points["task"] == task)], stats)
        if (model, task, metric) in trivial:
            ax.axhline(trivial[model, task, metric], color="grey", linestyle="--", linewidth=1)
        ax.set_xticks(range(len(_RQ5_KINDS)), _RQ5_NAMES, fontsize="small")
        ax.set_title(f"{model} on {task}", fontsize="medium")
        ax.set_ylabel(f"{metric} (points)")
        ax.grid(True, axis="y", alpha=0.3)
    for index in range(len(panels), rows_ * columns):
        axes[index // columns, index % columns].set_axis_off()
    return fig
