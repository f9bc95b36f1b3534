"""The RQ1 chapter's tables (``notebooks/rq1.ipynb``): reconstruction per hidden state beside the
random-init control, what duplication does, masked prediction against copying, and the identity
lens beside the fitted translators; from the frames of :func:`dupbert.tools.probe.probe_models`. The
prose is in the notebook's Markdown; fractions are shown with 3 decimals (4 where a change of a
tenth of a point matters). Also the chapter's plumbing: its run summary and shared probe
arguments, the lens of one sequence per model, the translators' probes, and its CSV tables.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ..core.data import default_corpus, load_texts
from ..core.results import read_table, write_table
from ..study.glance import rq1_rows, with_mlm_floor
from ..training.model_card import clears_mlm_floor
from ..training.quality import beside_whole_set
from ..tools.lens import copy_rate, lens
from ..tools.models import load_mlm
from ..tools.probe import BASELINE, CONTROL, PRETRAINED, duplication_summary, probe_models
from .lens_figures import lens_html, plot_lens_panels
from .text import cell


TRANSLATOR_COLUMNS = ["model", "measure", "translator", "layer", "top1", "top5", "n_tokens"]


def run_summary(values: Mapping[str, Any]) -> str:
    """The three lines RQ1 prints under its parameters: the models, the corpus (``None`` or ``""``:
    each model its own domain corpus), and the sequences, ``max_length``, seed and device.

    Args:
        values: the chapter's parameters (``ChapterParameters.values()``); reads ``models``,
            ``corpus``, ``n_sequences``, ``max_length``, ``seed`` and ``device``.
    """
    return (f"models: {', '.join(values['models'])}\n"
            f"corpus: {values['corpus'] or 'each model its own domain corpus'}\n"
            f"{values['n_sequences']} sequences per model, max_length {values['max_length']}, "
            f"seed {values['seed']}, device {values['device']}")


def probe_arguments(values: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments every probe of RQ1 shares (:func:`dupbert.tools.probe.probe_models`):
    ``corpus``, ``batch_size``, ``device``, ``seed`` and ``max_length`` from the chapter's
    parameters (``ChapterParameters.values()``), and ``progress=False``."""
    return {name: values[name] for name in ("corpus", "batch_size", "device", "seed",
                                             "max_length")} | {"progress": False}


def show_whole_set(quality: pd.DataFrame, tables_dir: str | os.PathLike | None) -> None:
    """Show the registered MLM quality beside the whole held-out set
    (:func:`dupbert.training.quality.beside_whole_set`), the latter read from
    ``<tables_dir>/rq1-mlm-quality-whole.csv``; print one line saying so where that table is not
    there (or ``tables_dir`` is None). Returns nothing: it displays (IPython) or prints.

    Args:
        quality: :func:`dupbert.training.quality.quality_table` of the chapter's models.
        tables_dir: the folder from the repository root, or None.
    """
    from IPython.display import display

    whole = read_table(tables_dir, "rq1-mlm-quality-whole") if tables_dir else None
    if whole is None:
        print("no whole-set table in tables_dir (rq1-mlm-quality-whole.csv)")
    else:
        display(beside_whole_set(quality, whole))


def lens_frames(models: Sequence[str], corpus: str | None, *, device: str = "cpu",
                max_length: int = 512, n_texts: int = 20, k: int = 5) -> dict[str, pd.DataFrame]:
    """The lens (:func:`dupbert.tools.lens.lens`, top-``k``) of one real sequence per model: the
    shortest of the first ``n_texts`` of ``corpus`` (``None`` or ``""``: the model's own domain
    corpus, :func:`dupbert.core.data.default_corpus`), read by the model's own MLM head.

    Returns:
        ``{"<model>: <n> tokens": lens frame}`` in ``models``' order, ``n`` the sequence's
        non-special positions; each frame has :data:`dupbert.tools.lens.LENS_COLUMNS`, one row per
        hidden state, position and guess.

    Raises:
        As :func:`dupbert.core.data.load_texts`, :func:`dupbert.tools.models.load_mlm` and
        :func:`dupbert.tools.lens.lens`.
    """
    frames = {}
    for name in models:
        text = min(load_texts(corpus or default_corpus(name), n_texts), key=len)
        model, tokenizer = load_mlm(name, device=device)
        frame = lens(model, tokenizer, text, k=k, max_length=max_length)
        frames[f"{name}: {frame.loc[~frame['special'], 'position'].nunique()} tokens"] = frame
    return frames


def copy_rates(frames: Mapping[str, pd.DataFrame]) -> str:
    """One line per lens of :func:`lens_frames`: ``"<model>: top-1 = input token at hidden states
    0..L: r_0 r_1 ... r_L"``, the share (2 decimals) of its non-special positions whose top-1 is the
    input token at each hidden state (:func:`dupbert.tools.lens.copy_rate`).

    Args:
        frames: ``{"<model>: <n> tokens": lens frame}``.
    """
    lines = []
    for label, frame in frames.items():
        copied = copy_rate(frame)
        lines.append(f"{label.rsplit(': ', 1)[0]}: top-1 = input token at hidden states "
                     f"0..{copied.index.max()}: " + " ".join(f"{v:.2f}" for v in copied))
    return "\n".join(lines)


def lens_panels(frames: Mapping[str, pd.DataFrame], max_positions: int | None = None):
    """The lenses of :func:`lens_frames` as one figure
    (:func:`dupbert.book.lens_figures.plot_lens_panels`, coloured by the head's probability), a
    panel per lens titled by its label, at most ``max_positions`` positions each."""
    return plot_lens_panels(frames, value="probability", max_positions=max_positions)


def lens_pages(frames: Mapping[str, pd.DataFrame], max_positions: int | None = None) -> list:
    """The lenses of :func:`lens_frames` as interactive HTML pages
    (:func:`dupbert.book.lens_figures.lens_html`, coloured by probability), one per lens in order,
    each titled by its label and showing at most ``max_positions`` positions."""
    return [lens_html(frame, title=label, max_positions=max_positions)
            for label, frame in frames.items()]


def translator_lenses(models: Sequence[str], translators: Sequence[str],
                      reconstruction: pd.DataFrame, masked: pd.DataFrame, masking: str,
                      **probe: Any) -> pd.DataFrame:
    """The identity lens beside each fitted translator, as :func:`translator_comparison`.

    Each translator in ``translators`` is fitted and read by
    :func:`dupbert.tools.probe.probe_models` (``translator=<name>``) twice, with the same fit: on
    unmasked sequences (reconstruction) and with ``masking`` (masked prediction).

    Args:
        models: the models.
        translators: fitted lenses beside the identity (``"linear"``, ``"linear-masked"``,
            ``"tuned"``, ``"tuned-token"``), in the order shown.
        reconstruction, masked: the identity lens, :func:`~dupbert.tools.probe.probe_models`
            frames on unmasked and masked sequences.
        masking: the masking rule of the masked measure.
        probe: the other :func:`~dupbert.tools.probe.probe_models` arguments of both measures
            (``n_sequences``, ``fit_sequences``, ``mask_rate``, ``include_control=False``, ...).

    Returns:
        :data:`TRANSLATOR_COLUMNS` rows, the identity first.
    """
    lenses = {"identity": (reconstruction, masked)}
    for name in translators:
        lenses[name] = tuple(
            probe_models(models, translator=name, **masks, **probe)
            for masks in ({}, {"masking": masking}))
    return translator_comparison(lenses)


def write_tables(folder: str | os.PathLike | None, reconstruction: pd.DataFrame,
                 quality: pd.DataFrame, duplicated: pd.DataFrame | None, masked: pd.DataFrame,
                 translator: pd.DataFrame) -> list[Path]:
    """Write RQ1's tables as CSV for the results-at-a-glance page
    (:func:`dupbert.core.results.write_table`): ``rq1-reconstruction``, ``rq1-mlm-quality``,
    ``rq1-duplicated`` (not where ``duplicated`` is None), ``rq1-masked`` and ``rq1-translator``
    in ``folder``; ``folder=None`` writes nothing.

    Returns:
        The paths written, in that order (``[]`` for ``folder=None``).
    """
    tables = {"rq1-reconstruction": reconstruction, "rq1-mlm-quality": quality,
              "rq1-duplicated": duplicated, "rq1-masked": masked, "rq1-translator": translator}
    if folder is None:
        return []
    return [write_table(frame, folder, name) for name, frame in tables.items()
            if frame is not None]


def translator_comparison(lenses: Mapping[str, tuple[pd.DataFrame, pd.DataFrame]]) -> pd.DataFrame:
    """RQ1's lenses side by side, tidy: :data:`TRANSLATOR_COLUMNS`, one row per model, measure
    (``reconstruction``/``masked``), translator and hidden state (top-1/top-5 in [0, 1]).

    Args:
        lenses: ``{translator: (reconstruction, masked)}`` in the order shown, ``"identity"``
            first: :func:`dupbert.tools.probe.probe_models` frames read through that translator (their
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
    ``dupbert.book.plots.plot_masked_and_reconstruction`` draws them: the identity lens as the
    baseline, each fitted one as ``"<name> translator"``."""
    shown = frame.assign(duplication=frame["translator"].map(
        lambda name: BASELINE if name == "identity" else f"{name} translator"), init=PRETRAINED)
    return (shown[shown["measure"] == "reconstruction"], shown[shown["measure"] == "masked"])


def reconstruction_table(frame: pd.DataFrame, models: Sequence[str]) -> pd.DataFrame:
    """RQ1's main table (section 3): index ``hidden state``, one column per model with
    ``"top-1 (top-5)"`` (3 decimals) and one ``"<model> control"`` with the control's top-1;
    ``""`` where a model lacks the hidden state.

    Args:
        frame: :func:`dupbert.tools.probe.probe_models` output with the control and no duplications.
        models: the models, in column order.
    """
    pretrained = frame[frame["init"] == PRETRAINED].set_index(["model", "layer"])
    control = frame[frame["init"] == CONTROL].set_index(["model", "layer"])

    def top1_top5(row):
        return "" if pd.isna(row["top1"]) else f"{row['top1']:.3f} ({row['top5']:.3f})"

    table = pretrained.apply(top1_top5, axis=1).unstack("model")
    controls = control["top1"].unstack("model").map(cell)
    table = table.join(controls.rename(columns=lambda name: f"{name} control"))
    table = table.reindex(columns=[*models, *[f"{m} control" for m in models]]).fillna("")
    table.index.name = "hidden state"
    return table


def _steady_from(top1: pd.Series, threshold: float):
    """The first hidden state from which every one has ``top1 >= threshold``, or None."""
    above = top1 >= threshold
    return next((layer for layer in top1.index if above.loc[layer:].all()), None)


def reconstruction_summary(frame: pd.DataFrame, models: Sequence[str],
                           threshold: float = 0.9) -> pd.DataFrame:
    """What RQ1's reconstruction numbers say, one row per model (section 3): the last hidden state
    (the one the head was trained on), the intermediate ones 1..L-1 (lowest, where, mean, top-5
    mean), the embedding output, the first hidden state from which every one is decoded at
    ``threshold`` or more ("none" when even the last is not), and the random-init control's
    mean and best; fractions with 3 decimals.

    Args:
        frame: :func:`dupbert.tools.probe.probe_models` output with the control and no duplications.
        models: the models, in row order.
        threshold: the top-1 (a fraction) from which a hidden state counts as decoded.
    """
    pretrained = frame[frame["init"] == PRETRAINED].set_index(["model", "layer"])
    control = frame[frame["init"] == CONTROL].set_index(["model", "layer"])
    rows = []
    for name in models:
        ours, ctrl = pretrained.loc[name], control.loc[name]
        last = int(ours.index.max())
        inner = ours.loc[1 : last - 1]  # the hidden states the head was never trained on
        steady = _steady_from(ours["top1"], threshold)
        rows.append({
            "sequences": int(ours["n_sequences"].iloc[0]), "tokens": int(ours["n_tokens"].iloc[0]),
            "last hidden state": last, "top-1 there": cell(ours.loc[last, "top1"]),
            "intermediate: lowest": cell(inner["top1"].min()),
            "at hidden state": "" if inner.empty else int(inner["top1"].idxmin()),
            "intermediate: mean": cell(inner["top1"].mean()),
            "top-5 mean": cell(inner["top5"].mean()),
            "embedding output": cell(ours.loc[0, "top1"]),
            f"all >= {threshold:.2f} from": "none" if steady is None else int(steady),
            "control: mean": cell(ctrl["top1"].mean()), "control: best": cell(ctrl["top1"].max())})
    return pd.DataFrame(rows, index=pd.Index(list(models), name="model"))


NO_DUPLICATIONS = "No duplicated variants in this run (the parameter `duplications` is None)."


def _no_duplications():
    """The note shown in place of a duplication table when no variant was probed."""
    from IPython.display import Markdown

    return Markdown(NO_DUPLICATIONS)


def duplication_table(duplicated: pd.DataFrame | None):
    """:func:`dupbert.tools.probe.duplication_summary` of ``duplicated`` as RQ1 shows it: index
    ``(model, duplication)``, readable column names, accuracies to 4 decimals, the last hidden
    state's change signed.

    Args:
        duplicated: :func:`dupbert.tools.probe.probe_models` output with ``duplications``; None
            (none probed) gives the note :data:`NO_DUPLICATIONS` (an IPython ``Markdown``).
    """
    if duplicated is None:
        return _no_duplications()
    shown = duplication_summary(duplicated).set_index(["model", "duplication"]).rename(columns={
        "n_blocks": "blocks", "n_copies": "copies", "at_copies": "top-1 at copies",
        "before_first_copy": "top-1 before 1st copy", "min_after_first_copy": "min top-1 after",
        "last": "top-1 last", "last_change": "change of last"})
    for column in ["top-1 at copies", "top-1 before 1st copy", "min top-1 after", "top-1 last"]:
        shown[column] = shown[column].map(lambda v: cell(v, ".4f"))
    shown["change of last"] = shown["change of last"].map(lambda v: f"{v:+.4f}")
    return shown


def duplication_overview(duplicated: pd.DataFrame | None, models: Sequence[str]):
    """What duplication does to reconstruction (section 5), one row per model: how many
    duplicated variants, the range of top-1 at the hidden states copies produce, the range of the
    last hidden state's change against the baseline (signed), and the variant with the largest
    drop (from :func:`dupbert.tools.probe.duplication_summary`).

    Args:
        duplicated: :func:`dupbert.tools.probe.probe_models` output with ``duplications``, each
            model with a variant besides ``baseline``; None (none probed) gives the note
            :data:`NO_DUPLICATIONS` (an IPython ``Markdown``).
        models: the models, in row order.
    """
    if duplicated is None:
        return _no_duplications()
    summary = duplication_summary(duplicated)
    rows = []
    for name in models:
        variants = summary[(summary["model"] == name) & (summary["duplication"] != BASELINE)]
        change = variants["last_change"]
        rows.append({"variants": len(variants),
                     "top-1 at copies": f"{variants['at_copies'].min():.3f} to "
                                        f"{variants['at_copies'].max():.3f}",
                     "change of last": f"{change.min():+.4f} to {change.max():+.4f}",
                     "largest drop": variants.loc[change.idxmin(), "duplication"]})
    return pd.DataFrame(rows, index=pd.Index(list(models), name="model"))


def masked_table(masked: pd.DataFrame, models: Sequence[str]) -> pd.DataFrame:
    """RQ1's masked-prediction table of each model as loaded: top-1 per hidden state (rows) and
    model, with a last row ``masked tokens`` giving each model's count.

    Args:
        masked: :func:`dupbert.tools.probe.probe_models` output with ``masking`` set.
        models: the models, in column order.
    """
    table = masked[masked["duplication"] == BASELINE].pivot(index="layer", columns="model",
                                                            values="top1")
    table = table.reindex(columns=models).map(cell)
    table.index.name = "hidden state"
    n_masked = masked.groupby("model")["n_tokens"].first()
    table.loc["masked tokens"] = [f"{n_masked[name]:,}" for name in models]
    return table


def copy_and_predict(reconstruction: pd.DataFrame, masked: pd.DataFrame, models: Sequence[str],
                     share: float = 0.9) -> pd.DataFrame:
    """Copying against predicting, one row per model (RQ1, beyond the paper): the first hidden
    state at which reconstruction reaches ``share`` of its best ("copies from"), the first at which
    masked top-1 does ("predicts from", with that best), masked and reconstructed top-1 at the
    first, masked top-1 at the last hidden state, and its change in points with the one
    duplicated variant (named).

    Args:
        reconstruction: :func:`dupbert.tools.probe.probe_models` on unmasked sequences, with
            ``baseline`` rows.
        masked: the same with ``masking``, with ``baseline`` rows and one duplicated variant per
            model (e.g. ``duplications="paper"``).
        models: the models, in row order.
        share: the fraction of its best top-1 a curve must reach.
    """
    rows = []
    for name in models:
        base_r = reconstruction[(reconstruction["model"] == name)
                                & (reconstruction["duplication"] == BASELINE)].set_index("layer")
        variants = masked[masked["model"] == name]
        base_m = variants[variants["duplication"] == BASELINE].set_index("layer")
        last, best = int(base_m.index.max()), base_m["top1"].max()
        copy_at = next(layer for layer in base_r.index
                       if base_r.loc[layer, "top1"] >= share * base_r["top1"].max())
        predict_at = next(layer for layer in base_m.index
                          if base_m.loc[layer, "top1"] >= share * best)
        other = variants[variants["duplication"] != BASELINE]
        change = other.sort_values("layer")["top1"].iloc[-1] - base_m.loc[last, "top1"]
        rows.append({"copies from": int(copy_at), "predicts from": int(predict_at),
                     "best masked top-1": cell(best),
                     "masked there (copies from)": cell(base_m.loc[copy_at, "top1"]),
                     "reconstructed there": cell(base_r.loc[copy_at, "top1"]),
                     "masked at the last": cell(base_m.loc[last, "top1"]),
                     "duplicated": other["duplication"].iloc[0],
                     "its change (points)": f"{change * 100:+.1f}"})
    return pd.DataFrame(rows, index=pd.Index(list(models), name="model"))


def translator_table(comparison: pd.DataFrame) -> pd.DataFrame:
    """:func:`translator_comparison` as RQ1 shows it: top-1 per hidden state, columns ``(model,
    measure, translator)`` (Din et al. 2023)."""
    return comparison.pivot(index="layer", columns=["model", "measure", "translator"],
                            values="top1").map(cell)


def quality_table_view(quality: pd.DataFrame) -> pd.DataFrame:
    """A ``dupbert.training.quality.quality_table`` as RQ1 shows it: index ``model``; masked top-1 with its
    95% interval, top-5, the most-frequent token and its share of the masked positions, the ratio
    of the two top-1s, and whether the model clears the MLM-quality floor
    (``dupbert.training.model_card.clears_mlm_floor``); 3 decimals, ratio 1."""
    return pd.DataFrame({
        "held-out text": quality["corpus"].to_numpy(),
        "masked positions": quality["n_masked"].map("{:,}".format).to_numpy(),
        "masked top-1 [95% CI]": [f"{r.top1:.3f} [{r.top1_low:.3f}, {r.top1_high:.3f}]"
                                  for r in quality.itertuples()],
        "top-5": quality["top5"].map(cell).to_numpy(),
        "most frequent token": quality["majority_token"].to_numpy(),
        "its share": quality["majority_top1"].map(cell).to_numpy(),
        "ratio": [f"{r.top1 / r.majority_top1:.1f}" for r in quality.itertuples()],
        "clears the floor": ["yes" if clears_mlm_floor(r.top1, r.majority_top1) else "no"
                             for r in quality.itertuples()],
    }, index=pd.Index(quality["model"], name="model"))


def answer_table(reconstruction: pd.DataFrame, duplicated: pd.DataFrame | None,
                 quality: pd.DataFrame) -> pd.DataFrame:
    """RQ1's answer, one row per claim (index the claim): the weakest model's worst hidden state
    1..L (top-1 with its 95% interval), the verdict under the registered rule and with the
    MLM-quality floor, and the models the floor judges (:func:`dupbert.study.glance.rq1_rows`,
    :func:`dupbert.study.glance.with_mlm_floor`).

    Raises:
        ParameterError (a ValueError): as :func:`dupbert.study.glance.with_mlm_floor`.
    """
    floor = with_mlm_floor(reconstruction, duplicated, None, quality).set_index("id")
    return pd.DataFrame([{
        "claim": row["claim"], "ours: the weakest hidden state 1..L": row["headline"],
        "registered rule": row["verdict"],
        "with the MLM floor": floor.loc[row["id"], "with the MLM floor"],
        "judged with the floor": floor.loc[row["id"], "judged on"]}
        for row in rq1_rows(reconstruction, duplicated)]).set_index("claim")
