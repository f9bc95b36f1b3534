"""The lens (:func:`dupbert.lens`) drawn: a matplotlib heat map of one sequence
(:func:`plot_lens`, stacked by :func:`plot_lens_panels`) and the same heat map as a self-contained
interactive HTML table (:func:`lens_html`; no script, nothing fetched: CSS hover only).
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from .plots import _require

__all__ = ["plot_lens", "plot_lens_panels", "lens_html", "LensHTML"]


MISSING_GLYPH = "\u25a1"  # WHITE SQUARE, in DejaVu Sans: stands for a character the font lacks


def _drawable(text: str) -> str:
    """``text`` with characters the default font cannot draw replaced by ``MISSING_GLYPH`` (an
    empty box and a warning otherwise).
    """
    from matplotlib import font_manager

    font = font_manager.get_font(font_manager.findfont(font_manager.FontProperties()))
    return "".join(ch if ch.isspace() or font.get_char_index(ord(ch)) else MISSING_GLYPH
                   for ch in text)


def plot_lens(frame: pd.DataFrame, value: str = "probability", include_special: bool = False,
              max_positions: int | None = 48, title: str = "", ax=None) -> Figure:
    """The lens of one sequence as a heat map: hidden states (rows, 0 at the bottom) x positions
    (columns, the input tokens); each cell the head's top-1 token, bold when it is the input token,
    coloured by ``value``. Undrawable characters show as ``MISSING_GLYPH`` (:func:`lens_html`
    shows them).

    Parameters
    ----------
    frame
        :func:`dupbert.lens` output for one text.
    value
        ``"probability"`` (of the top-1 token, 0 to 1) or ``"input_rank"`` (of the input token
        among all V logits, 1 = top-1, log scale).
    include_special
        Also show special-token positions.
    max_positions
        Show only the first this many positions (the title says so); ``None``: all.
    ax
        Axes to draw into; otherwise a new figure, wider with more positions.

    Raises
    ------
    KeyError
        A required column is missing.
    ValueError
        A bad ``value``, or no position is left.
    """
    import numpy as np
    from matplotlib.colors import LogNorm

    _require(frame, ["layer", "position", "input_token", "special", "guess", "token",
                     "probability", "input_rank"], "plot_lens")
    if value not in ("probability", "input_rank"):
        raise ValueError(f"value must be 'probability' or 'input_rank', got {value!r}")
    top1 = frame[frame["guess"] == 1]
    if not include_special:
        top1 = top1[~top1["special"].astype(bool)]
    positions = sorted(top1["position"].unique())
    if not positions:
        raise ValueError("plot_lens: no position to show (only special tokens)")
    shown = positions if max_positions is None else positions[:max_positions]
    top1 = top1[top1["position"].isin(shown)]
    tokens = top1.pivot(index="layer", columns="position", values="token")
    values = top1.pivot(index="layer", columns="position", values=value).to_numpy(dtype=float)
    hits = (top1.pivot(index="layer", columns="position", values="token")
            == top1.pivot(index="layer", columns="position", values="input_token")).to_numpy()
    inputs = top1.drop_duplicates("position").set_index("position")["input_token"]
    n_layers, n_positions = values.shape
    if ax is None:
        fig = Figure(figsize=(1.6 + 0.32 * n_positions, 1.2 + 0.3 * n_layers), dpi=100,
                     layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    if value == "probability":
        image = ax.imshow(values, cmap="viridis", vmin=0, vmax=1, origin="lower", aspect="auto",
                          interpolation="nearest")
        label, bright = "probability of the top-1 token", values > 0.5
    else:
        image = ax.imshow(values, cmap="viridis_r", norm=LogNorm(vmin=1, vmax=max(10, values.max())),
                          origin="lower", aspect="auto", interpolation="nearest")
        label, bright = "rank of the input token (1 = top-1)", values <= np.sqrt(max(10, values.max()))
    for i in range(n_layers):
        for j in range(n_positions):
            ax.text(j, i, _drawable(str(tokens.iat[i, j])), ha="center", va="center", fontsize=6,
                    fontweight="bold" if hits[i, j] else "normal",
                    color="black" if bright[i, j] else "white")
    ax.set_xticks(range(n_positions), [_drawable(str(inputs[p])) for p in tokens.columns], fontsize=6.5,
                  rotation=90 if max(len(str(t)) for t in inputs) > 2 else 0)
    ax.set_yticks(range(n_layers), [str(layer) for layer in tokens.index], fontsize="small")
    ax.set_xlabel("input token (position)")
    ax.set_ylabel("hidden state")
    if len(shown) < len(positions):
        title = f"{title} (first {len(shown)} of {len(positions)} positions)".strip()
    if title:
        ax.set_title(title, fontsize="medium")
    fig.colorbar(image, ax=ax, shrink=0.9, pad=0.01, label=label)
    return fig


def plot_lens_panels(frames: dict[str, pd.DataFrame], value: str = "probability",
                     max_positions: int | None = 48) -> Figure:
    """Lens heat maps (:func:`plot_lens`) stacked, one panel per ``{title: dupbert.lens frame}``.

    Other arguments as :func:`plot_lens`.

    Raises
    ------
    ValueError
        ``frames`` is empty; as :func:`plot_lens`.
    """
    if not frames:
        raise ValueError("plot_lens_panels needs at least one lens frame")
    sizes = []
    for frame in frames.values():
        shown = frame.loc[(frame["guess"] == 1) & ~frame["special"].astype(bool), "position"]
        n_positions = shown.nunique() if max_positions is None else min(max_positions,
                                                                         shown.nunique())
        sizes.append((n_positions, frame["layer"].nunique()))
    width = 1.6 + 0.32 * max(n for n, _ in sizes)
    fig = Figure(figsize=(width, sum(1.2 + 0.3 * layers for _, layers in sizes)), dpi=100,
                 layout="constrained")
    axes = fig.subplots(len(frames), 1, squeeze=False,
                        gridspec_kw={"height_ratios": [1.2 + 0.3 * layers for _, layers in sizes]})
    for ax, (title, frame) in zip(axes[:, 0], frames.items()):
        plot_lens(frame, value=value, max_positions=max_positions, title=title, ax=ax)
    return fig


# The lens as an interactive HTML figure


_LENS_CSS = """
.dupbert-lens{font:11px/1.3 monospace;overflow-x:auto;padding-bottom:10em}
.dupbert-lens table{border-collapse:collapse}
.dupbert-lens th{font-weight:normal;padding:1px 3px;vertical-align:bottom}
.dupbert-lens td{position:relative;padding:2px 4px;min-width:1.2em;text-align:center;
white-space:nowrap}
.dupbert-lens td.hit{font-weight:bold}
.dupbert-lens .tip{display:none;position:absolute;z-index:9;left:0;top:100%;background:#fff;
color:#000;border:1px solid #777;padding:3px 6px;text-align:left;font-weight:normal;
white-space:pre}
.dupbert-lens td:hover .tip{display:block}
.dupbert-lens td:hover{outline:2px solid #f0f}
"""


class LensHTML(str):
    """An HTML fragment (a ``str``) a notebook shows as HTML; :meth:`document` makes a whole page.
    """

    def _repr_html_(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return f"<dupbert lens HTML, {len(self):,} characters>"

    def document(self, title: str = "dupbert lens") -> str:
        """A complete, self-contained HTML page holding the fragment."""
        import html

        return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
                f"<title>{html.escape(title)}</title></head><body>\n{self}\n</body></html>\n")


def _lens_colours(values, value: str):
    """Background and text colour (hex) per cell, as :func:`plot_lens` colours them."""
    import numpy as np
    from matplotlib import colormaps
    from matplotlib.colors import LogNorm, Normalize, to_hex

    if value == "probability":
        cmap, norm = colormaps["viridis"], Normalize(vmin=0, vmax=1)
    else:
        cmap, norm = colormaps["viridis_r"], LogNorm(vmin=1, vmax=max(10, float(np.max(values))))
    rgba = cmap(norm(values))
    luminance = rgba[..., :3] @ np.array([0.299, 0.587, 0.114])
    backgrounds = np.vectorize(lambda i, j: to_hex(rgba[i, j]), otypes=[str])(
        *np.indices(values.shape))
    return backgrounds, np.where(luminance > 0.5, "#000", "#fff")


def lens_html(frame: pd.DataFrame, title: str = "", value: str = "probability",
              include_special: bool = False, max_positions: int | None = None) -> LensHTML:
    """The lens heat map of :func:`plot_lens` as a self-contained HTML table (inline CSS only).

    Columns are headed by position and input token; hovering a cell shows its top-k tokens with
    probabilities and the input token's rank and probability. Arguments as :func:`plot_lens`;
    ``title`` is a line above the table.

    Returns
    -------
    LensHTML
        The HTML fragment (``.document()`` is a whole page).

    Raises
    ------
    KeyError
        A required column is missing.
    ValueError
        A bad ``value``, or no position is left.
    """
    import html

    _require(frame, ["layer", "position", "input_token", "special", "guess", "token",
                     "probability", "input_rank", "input_probability"], "lens_html")
    if value not in ("probability", "input_rank"):
        raise ValueError(f"value must be 'probability' or 'input_rank', got {value!r}")
    data = frame if include_special else frame[~frame["special"].astype(bool)]
    positions = sorted(data["position"].unique())
    if not positions:
        raise ValueError("lens_html: no position to show (only special tokens)")
    shown = positions if max_positions is None else positions[:max_positions]
    data = data[data["position"].isin(shown)].sort_values(["layer", "position", "guess"])
    top1 = data[data["guess"] == 1]
    values = top1.pivot(index="layer", columns="position", values=value).to_numpy(dtype=float)
    backgrounds, colours = _lens_colours(values, value)
    layers = sorted(top1["layer"].unique())
    inputs = top1.drop_duplicates("position").set_index("position")["input_token"]
    cells = {key: group for key, group in data.groupby(["layer", "position"], sort=False)}
    escape = html.escape
    header = "".join(f'<th data-position="{p}">{p}<br>{escape(str(inputs[p]))}</th>'
                     for p in shown)
    rows = []
    for i in reversed(range(len(layers))):
        tds = []
        for j, position in enumerate(shown):
            guesses = cells[(layers[i], position)]
            best = guesses.iloc[0]
            tip = "\n".join(
                [f"h{layers[i]} pos {position} input {escape(str(best['input_token']))}"]
                + [f"{int(g.guess)}. {escape(str(g.token))} {g.probability:.3f}"
                   for g in guesses.itertuples()]
                + [f"input rank {int(best['input_rank'])} p={best['input_probability']:.3f}"])
            hit = ' class="hit"' if best["token"] == best["input_token"] else ""
            tds.append(f'<td{hit} data-layer="{layers[i]}" data-position="{position}" '
                       f'style="background:{backgrounds[i, j]};color:{colours[i, j]}">'
                       f'{escape(str(best["token"]))}<span class="tip">{tip}</span></td>')
        rows.append(f"<tr><th>{layers[i]}</th>{''.join(tds)}</tr>")
    legend = ("colour: probability of the top-1 token" if value == "probability"
              else "colour: rank of the input token (1 = top-1, log scale)")
    cut = (f" (first {len(shown)} of {len(positions)} positions)"
           if len(shown) < len(positions) else "")
    return LensHTML(
        f'<div class="dupbert-lens"><style>{_LENS_CSS.strip()}</style>'
        f'<p class="lens-title">{escape(title)}{cut}</p>'
        f"<p>rows: hidden state (0 = embedding output); columns: position and input token; "
        f"cell: the MLM head's top-1 token, bold = the input token; {legend}; hover a cell "
        f"for its top-{int(data['guess'].max())}.</p>"
        f"<table><thead><tr><th>hidden state</th>{header}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>")
