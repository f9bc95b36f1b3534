"""The RQ1 chapter's tables and prose (``notebooks/rq1.ipynb``): reconstruction per hidden state
beside the random-init control, what duplication does, masked prediction against copying, and the
identity lens beside the fitted translators; from the frames of :func:`dupbert.probe.probe_models`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from .model_card import clears_mlm_floor
from .probe import BASELINE, CONTROL, PRETRAINED


TRANSLATOR_COLUMNS = ["model", "measure", "translator", "layer", "top1", "top5", "n_tokens"]


def translator_comparison(lenses: Mapping[str, tuple[pd.DataFrame, pd.DataFrame]]) -> pd.DataFrame:
    """RQ1's lenses side by side, tidy: :data:`TRANSLATOR_COLUMNS`, one row per model, measure
    (``reconstruction``/``masked``), translator and hidden state (top-1/top-5 in [0, 1]).

    Args:
        lenses: ``{translator: (reconstruction, masked)}`` in the order shown, ``"identity"``
            first: :func:`dupbert.probe.probe_models` frames read through that translator (their
            ``baseline``, ``pretrained`` rows are kept).
    """
    frames = []
    for name, pair in lenses.items():
        for measure, frame in zip(("reconstruction", "masked"), pair):
            rows = frame[(frame["duplication"] == BASELINE) & (frame["init"] == PRETRAINED)]
            frames.append(rows.assign(measure=measure, translator=name))
    return pd.concat(frames, ignore_index=True)[TRANSLATOR_COLUMNS]


def translator_curves(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(reconstruction, masked)`` of :func:`translator_comparison` as
    ``dupbert.plots.plot_masked_and_reconstruction`` draws them: the identity lens as the
    baseline, each fitted one as ``"<name> translator"``."""
    shown = frame.assign(duplication=frame["translator"].map(
        lambda name: BASELINE if name == "identity" else f"{name} translator"), init=PRETRAINED)
    return (shown[shown["measure"] == "reconstruction"], shown[shown["measure"] == "masked"])


def _fixed(value, digits: int = 3) -> str:
    """``value`` with ``digits`` decimals, or ``""`` for NaN (a table cell)."""
    return "" if pd.isna(value) else f"{value:.{digits}f}"


def reconstruction_table(frame: pd.DataFrame, models: Sequence[str]) -> pd.DataFrame:
    """RQ1's main table (section 3): index ``hidden state``, one column per model with
    ``"top-1 (top-5)"`` (3 decimals) and one ``"<model> control"`` with the control's top-1;
    ``""`` where a model lacks the hidden state.

    Args:
        frame: :func:`dupbert.probe.probe_models` output with the control and no duplications.
        models: the models, in column order.
    """
    pretrained = frame[frame["init"] == PRETRAINED].set_index(["model", "layer"])
    control = frame[frame["init"] == CONTROL].set_index(["model", "layer"])

    def top1_top5(row):
        return "" if pd.isna(row["top1"]) else f"{row['top1']:.3f} ({row['top5']:.3f})"

    table = pretrained.apply(top1_top5, axis=1).unstack("model")
    controls = control["top1"].unstack("model").map(_fixed)
    table = table.join(controls.rename(columns=lambda name: f"{name} control"))
    table = table.reindex(columns=[*models, *[f"{m} control" for m in models]]).fillna("")
    table.index.name = "hidden state"
    return table


def _steady_from(top1: pd.Series, threshold: float):
    """The first hidden state from which every one has ``top1 >= threshold``, or None."""
    above = top1 >= threshold
    return next((layer for layer in top1.index if above.loc[layer:].all()), None)


def _describe_one_reconstruction(ours: pd.DataFrame, ctrl: pd.DataFrame, name: str,
                                 threshold: float) -> str:
    last = int(ours.index.max())
    inner = ours.loc[1 : last - 1]  # the hidden states the head was never trained on
    steady = _steady_from(ours["top1"], threshold)
    text = (
        f"- **{name}** ({int(ours['n_sequences'].iloc[0])} sequences, "
        f"{int(ours['n_tokens'].iloc[0])} tokens): the pretrained head decodes "
        f"{ours.loc[last, 'top1']:.1%} of the tokens (top-1) from the last hidden state, "
        f"{last}, the one it was trained on. "
    )
    if len(inner) == 1:
        text += (f"From the one intermediate hidden state, 1, it decodes {inner['top1'].iloc[0]:.1%} "
                 f"(top-5 {inner['top5'].iloc[0]:.1%}), ")
    else:
        text += (f"From the intermediate hidden states 1 to {last - 1} it decodes between "
                 f"{inner['top1'].min():.1%} (hidden state {inner['top1'].idxmin()}) and "
                 f"{inner['top1'].max():.1%} (mean {inner['top1'].mean():.1%}; top-5 mean "
                 f"{inner['top5'].mean():.1%}), ")
    text += f"and {ours.loc[0, 'top1']:.1%} from the embedding output. "
    if steady is None:
        text += f"Even the last hidden state is decoded below {threshold:.0%}."
    else:
        text += f"From hidden state {steady} on, every hidden state is decoded at {threshold:.0%} or more."
    return text + (
        f" The random-init control decodes {ctrl['top1'].mean():.1%} on average over its "
        f"hidden states (at most {ctrl['top1'].max():.1%})."
    )


def describe_reconstruction(frame: pd.DataFrame, models: Sequence[str],
                            threshold: float = 0.9) -> str:
    """What RQ1's reconstruction numbers say, one Markdown bullet per model (section 3).

    Args:
        frame: :func:`dupbert.probe.probe_models` output with the control and no duplications.
        models: the models described, in this order.
        threshold: the top-1 (a fraction) from which a hidden state counts as decoded.
    """
    pretrained = frame[frame["init"] == PRETRAINED].set_index(["model", "layer"])
    control = frame[frame["init"] == CONTROL].set_index(["model", "layer"])
    return "\n".join(_describe_one_reconstruction(pretrained.loc[name], control.loc[name], name,
                                                  threshold) for name in models)


def duplication_table(summary: pd.DataFrame) -> pd.DataFrame:
    """:func:`dupbert.probe.duplication_summary` as RQ1 shows it: index ``(model, duplication)``,
    readable column names, accuracies to 4 decimals, the last hidden state's change signed."""
    shown = summary.set_index(["model", "duplication"]).rename(columns={
        "n_blocks": "blocks", "n_copies": "copies", "at_copies": "top-1 at copies",
        "before_first_copy": "top-1 before 1st copy", "min_after_first_copy": "min top-1 after",
        "last": "top-1 last", "last_change": "change of last"})
    for column in ["top-1 at copies", "top-1 before 1st copy", "min top-1 after", "top-1 last"]:
        shown[column] = shown[column].map(lambda v: _fixed(v, 4))
    shown["change of last"] = shown["change of last"].map(lambda v: f"{v:+.4f}")
    return shown


def describe_duplication(summary: pd.DataFrame, models: Sequence[str]) -> str:
    """What duplication does to reconstruction (section 5), one Markdown bullet per model.

    Args:
        summary: :func:`dupbert.probe.duplication_summary`; each model with a variant besides
            ``baseline``.
        models: the models described, in this order.
    """
    lines = []
    for name in models:
        rows = summary[(summary["model"] == name) & (summary["duplication"] != BASELINE)]
        worst = rows.loc[rows["last_change"].idxmin()]
        copies = rows["at_copies"]
        lines.append(
            f"- **{name}**: over {len(rows)} duplicated variants, the hidden states that copies produce "
            f"are decoded at {copies.min():.1%} to {copies.max():.1%} top-1; the last hidden state "
            f"changes by {rows['last_change'].min():+.1%} to {rows['last_change'].max():+.1%} against "
            f"the baseline (largest drop: {worst['duplication']})."
        )
    return "\n".join(lines)


def masked_table(masked: pd.DataFrame, models: Sequence[str]) -> tuple[str, pd.DataFrame]:
    """RQ1's masked-prediction table of each model as loaded: ``(caption, table)``, the caption
    naming each model's masked tokens, the table top-1 per hidden state (rows) and model.

    Args:
        masked: :func:`dupbert.probe.probe_models` output with ``masking`` set.
        models: the models, in column order.
    """
    table = masked[masked["duplication"] == BASELINE].pivot(index="layer", columns="model",
                                                            values="top1")
    table = table.reindex(columns=models).map(_fixed)
    table.index.name = "hidden state"
    n_masked = masked.groupby("model")["n_tokens"].first()
    counts = ", ".join(f"{name}: {n_masked[name]} masked tokens" for name in models)
    return f"Masked-token top-1 accuracy per hidden state, each model as loaded ({counts}):", table


def _describe_one_masked(reconstruction: pd.DataFrame, masked: pd.DataFrame, name: str,
                         share: float) -> str:
    base_r = reconstruction[(reconstruction["model"] == name)
                            & (reconstruction["duplication"] == BASELINE)].set_index("layer")
    rows = masked[masked["model"] == name]
    base_m = rows[rows["duplication"] == BASELINE].set_index("layer")
    last = int(base_m.index.max())
    best = base_m["top1"].max()
    copy_at = next(layer for layer in base_r.index
                   if base_r.loc[layer, "top1"] >= share * base_r["top1"].max())
    predict_at = next(layer for layer in base_m.index if base_m.loc[layer, "top1"] >= share * best)
    other = rows[rows["duplication"] != BASELINE]
    label = other["duplication"].iloc[0]
    change = other.sort_values("layer")["top1"].iloc[-1] - base_m.loc[last, "top1"]
    return (
        f"- **{name}**: the head reconstructs unmasked tokens at {share:.0%} of its best from hidden "
        f"state {copy_at} on, but predicts masked tokens at {share:.0%} of its best "
        f"({best:.1%}) only from hidden state {predict_at} on; at hidden state {copy_at} it predicts "
        f"{base_m.loc[copy_at, 'top1']:.1%} of the masked tokens against {base_r.loc[copy_at, 'top1']:.1%} "
        f"reconstructed. From the last hidden state it predicts {base_m.loc[last, 'top1']:.1%} of the "
        f"masked tokens; with `{label}` the last hidden state predicts {abs(change) * 100:.1f} "
        f"points {'more' if change >= 0 else 'fewer'}."
    )


def describe_masked(reconstruction: pd.DataFrame, masked: pd.DataFrame, models: Sequence[str],
                    share: float = 0.9) -> str:
    """Copying against predicting, one Markdown bullet per model (RQ1, beyond the paper): where
    reconstruction and masked top-1 reach ``share`` of their best, and how the duplicated
    variant changes the last hidden state's masked top-1.

    Args:
        reconstruction: :func:`dupbert.probe.probe_models` on unmasked sequences, with
            ``baseline`` rows.
        masked: the same with ``masking``, with ``baseline`` rows and one duplicated variant per
            model (e.g. ``duplications="paper"``).
        models: the models described, in this order.
        share: the fraction of its best top-1 a curve must reach.
    """
    return "\n".join(_describe_one_masked(reconstruction, masked, name, share) for name in models)


def translator_table(comparison: pd.DataFrame) -> pd.DataFrame:
    """:func:`translator_comparison` as RQ1 shows it: top-1 per hidden state, columns ``(model,
    measure, translator)`` (Din et al. 2023)."""
    return comparison.pivot(index="layer", columns=["model", "measure", "translator"],
                            values="top1").map(_fixed)


def quality_table_view(quality: pd.DataFrame) -> pd.DataFrame:
    """A ``dupbert.quality.quality_table`` as RQ1 shows it: index ``model``; masked top-1 with its
    95% interval, top-5, the most-frequent token and its share of the masked positions, the ratio
    of the two top-1s, and whether the model clears the MLM-quality floor
    (``dupbert.model_card.clears_mlm_floor``); 3 decimals, ratio 1."""
    return pd.DataFrame({
        "held-out text": quality["corpus"].to_numpy(),
        "masked positions": quality["n_masked"].map("{:,}".format).to_numpy(),
        "masked top-1 [95% CI]": [f"{r.top1:.3f} [{r.top1_low:.3f}, {r.top1_high:.3f}]"
                                  for r in quality.itertuples()],
        "top-5": quality["top5"].map(_fixed).to_numpy(),
        "most frequent token": quality["majority_token"].to_numpy(),
        "its share": quality["majority_top1"].map(_fixed).to_numpy(),
        "ratio": [f"{r.top1 / r.majority_top1:.1f}" for r in quality.itertuples()],
        "clears the floor": ["yes" if clears_mlm_floor(r.top1, r.majority_top1) else "no"
                             for r in quality.itertuples()],
    }, index=pd.Index(quality["model"], name="model"))
