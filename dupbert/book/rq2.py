"""The RQ2 chapter's tables and glued numbers (``notebooks/rq2.ipynb``): per-layer statistics,
each hidden state's similarity to the last one beside RQ1's top-1, the rank correlations, the
per-model and per-variant readings its "What the numbers say" section shows, and the linear
translator's gap beside similarity; from the frames of :mod:`dupbert.tools.stats`. The prose is in the
notebook's Markdown. Also the chapter's plumbing: its run summary, the report's arguments, the
models' shown names, the glued numbers and its CSV tables.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ..core.results import read_table, write_table
from ..tools.stats import SimilarityReport, translator_gap_vs_similarity
from .plots import plot_similarity_vs_reconstruction
from .text import cell

SHOWN_NAMES = {"splade-tiny-en": "splade-tiny-en (SPLADE-fine-tuned head)"}
"""Models shown under another name: splade-tiny-en's MLM head was fine-tuned for SPLADE retrieval,
so it is not a pretrained MLM head."""

_SHOWN_STATISTICS = {"norm_mean": "norm", "norm_std": "norm std", "std": "std", "q01": "q01",
                     "q50": "q50", "q99": "q99", "max_abs": "max |x|", "kurtosis": "kurtosis",
                     "top_dim_var_frac": "top dim", "anisotropy": "anisotropy"}

_SHOWN_TO_LAST = {"cka_to_last": "CKA", "cka_debiased_to_last": "CKA (debiased)",
                  "cosine_to_last": "cosine", "w1_standardised": "W1 (std.)", "top1": "top-1"}


def _baseline(layers: pd.DataFrame) -> pd.DataFrame:
    return layers[layers["duplication"] == "baseline"]


def shown_names(models: Sequence[str]) -> list[str]:
    """``models`` as the chapter names them (:data:`SHOWN_NAMES`), in order."""
    return [SHOWN_NAMES.get(name, name) for name in models]


def run_summary(values: Mapping[str, Any]) -> str:
    """The five lines RQ2 prints under its parameters: the models (:func:`shown_names`), the corpus
    (``None`` or ``""``: each model its own domain corpus), the sequences, sampled tokens, seed,
    ``max_length`` and device, the duplicated variants and where RQ1's accuracy is measured.

    Args:
        values: the chapter's parameters (``ChapterParameters.values()``); reads ``models``,
            ``corpus``, ``n_sequences``, ``max_tokens``, ``seed``, ``max_length``, ``device``,
            ``duplications`` and ``reconstruction``.
    """
    duplications = values["duplications"]
    accuracy = ("on the sampled tokens" if values["reconstruction"] == "sample"
                else "on all tokens")
    return (f"models: {', '.join(shown_names(values['models']))}\n"
            f"corpus: {values['corpus'] or 'each model its own domain corpus'}\n"
            f"{values['n_sequences']} sequences per model, {values['max_tokens']} tokens sampled "
            f"(seed {values['seed']}), max_length {values['max_length']}, device {values['device']}\n"
            f"duplicated variants: {'none' if duplications is None else duplications}\n"
            f"RQ1 accuracy: {accuracy}")


def report_arguments(values: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of :func:`dupbert.tools.stats.layer_similarity_report` besides the
    models, taken from the chapter's parameters (``ChapterParameters.values()``) by their names:
    ``corpus``, ``n_sequences``, ``max_tokens``, ``duplications``, ``batch_size``, ``device``,
    ``seed``, ``max_length``, ``reconstruction``; and ``progress=False``."""
    names = ("corpus", "n_sequences", "max_tokens", "duplications", "batch_size", "device", "seed",
             "max_length", "reconstruction")
    return {name: values[name] for name in names} | {"progress": False}


def shown_frames(report: SimilarityReport) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """``(layers, pairs, baseline)``: the report's frames with the models renamed as shown
    (:data:`SHOWN_NAMES`), and the ``baseline`` rows of ``layers`` (the models as loaded); rows and
    columns as in :class:`dupbert.tools.stats.SimilarityReport`."""
    layers = report.layers.replace({"model": SHOWN_NAMES})
    pairs = report.pairs.replace({"model": SHOWN_NAMES})
    return layers, pairs, _baseline(layers)


def glued(name: str, value):
    """``value``, glued under ``name`` first (``myst_nb.glue(name, value, display=False)``), so that
    a cell ending with this call both glues a table and shows it."""
    from myst_nb import glue

    glue(name, value, display=False)
    return value


def cka_scatter(baseline: pd.DataFrame):
    """The chapter's main figure: each hidden state's debiased linear CKA with the last one against
    the head's top-1 on it (:func:`dupbert.book.plots.plot_similarity_vs_reconstruction`), the x
    axis labelled in words.

    Args:
        baseline: the ``baseline`` rows of :attr:`dupbert.tools.stats.SimilarityReport.layers`,
            with ``top1``.
    """
    fig = plot_similarity_vs_reconstruction(baseline, x="cka_debiased_to_last", y="top1")
    fig.axes[0].set_xlabel("debiased linear CKA with the last hidden state")
    return fig


def show_translator_gaps(tables_dir: str | os.PathLike | None, layers: pd.DataFrame,
                         models: Sequence[str]) -> None:
    """Show, per model, how a linear translator's gain over the identity lens goes with the
    similarity to the last hidden state (:func:`dupbert.tools.stats.translator_gap_vs_similarity`
    on RQ1's ``<tables_dir>/rq1-translator.csv``, shown by :func:`translator_gap_tables`). Prints
    the models in only one of RQ1's table and ``models``, or one line saying that RQ1's table is not
    there (or ``tables_dir`` is None). Returns nothing: it displays (IPython) or prints.

    Args:
        tables_dir: the folder from the repository root, or None.
        layers: :attr:`dupbert.tools.stats.SimilarityReport.layers`, models by their own names.
        models: the chapter's models.

    Raises:
        ValueError: as :func:`dupbert.tools.stats.translator_gap_vs_similarity`.
    """
    from IPython.display import display

    translator = read_table(tables_dir, "rq1-translator") if tables_dir else None
    if translator is None:
        print("RQ1's translator table (rq1-translator.csv in tables_dir) is not there: run RQ1 "
              "first")
        return
    gaps = translator_gap_vs_similarity(translator, layers)
    apart = sorted(set(models) ^ set(translator["model"]))
    if apart:
        print(f"in only one of RQ1's translator table and this chapter: {', '.join(apart)}")
    display(*translator_gap_tables(gaps))  # per model: rho; per hidden state: gap, similarity


def glued_numbers(layers: pd.DataFrame, pairs: pd.DataFrame,
                  correlations: pd.DataFrame) -> dict[str, Any]:
    """What RQ2's prose glues, ``{glue name: value}`` in order: ``rq2_<key>`` for each
    :func:`summary_numbers`, ``rq2_models`` (:func:`model_table`, its models in the order of
    ``correlations``) and ``rq2_duplicated`` (:func:`duplicate_table`, or an IPython ``Markdown``
    note where no variant was probed).

    Args:
        layers, pairs: :class:`dupbert.tools.stats.SimilarityReport`'s frames, with ``top1``.
        correlations: :func:`dupbert.tools.stats.spearman_table` of ``layers``.
    """
    from IPython.display import Markdown

    numbers = {f"rq2_{key}": value
               for key, value in summary_numbers(layers, correlations).items()}
    duplicated = duplicate_table(layers, pairs)
    return {**numbers, "rq2_models": model_table(layers, correlations),
            "rq2_duplicated": duplicated if len(duplicated)
            else Markdown("No duplicated variant in this run.")}


def write_tables(folder: str | os.PathLike | None, layers: pd.DataFrame,
                 correlations: pd.DataFrame) -> list[Path]:
    """Write RQ2's tables as CSV for the results-at-a-glance page
    (:func:`dupbert.core.results.write_table`): ``rq2-layers`` (``layers`` as given) and
    ``rq2-spearman`` (``correlations`` with its index as columns) in ``folder``; ``folder=None``
    writes nothing.

    Returns:
        The paths written, in that order (``[]`` for ``folder=None``).
    """
    written = [write_table(layers, folder, "rq2-layers"),
               write_table(correlations.reset_index(), folder, "rq2-spearman")]
    return [path for path in written if path is not None]


def statistics_table(layers: pd.DataFrame) -> pd.DataFrame:
    """RQ2's per-layer statistics of each model as loaded (chapter RQ2, "Per-layer statistics").

    Args:
        layers: :attr:`dupbert.tools.stats.SimilarityReport.layers` (``baseline`` rows are used).

    Returns:
        Index ``(model, hidden state)``; columns norm, norm std, std, q01, q50, q99, max |x|,
        kurtosis, top dim, anisotropy, as strings (3 significant digits from 100 up, else 3
        decimals).
    """
    statistics = _baseline(layers).set_index(["model", "layer"])[list(_SHOWN_STATISTICS)]
    statistics = statistics.rename(columns=_SHOWN_STATISTICS)
    statistics.index.names = ["model", "hidden state"]
    return statistics.map(lambda value: f"{value:.3g}" if abs(value) >= 100 else f"{value:.3f}")


def similarity_to_last_table(layers: pd.DataFrame) -> pd.DataFrame:
    """Each hidden state's similarity to the last one beside RQ1's top-1, per model and
    duplication
    (chapter RQ2, "Similarity to the last layer and reconstruction").

    Args:
        layers: :attr:`dupbert.tools.stats.SimilarityReport.layers` with ``top1`` (all duplications
            are shown).

    Returns:
        Index ``hidden state``, columns ``(model, duplication, measure)`` in order of appearance,
        measures CKA, CKA (debiased), cosine, W1 (std.), top-1; strings with 3 decimals, ``""``
        where a duplication has no such hidden state.
    """
    measures = list(_SHOWN_TO_LAST)
    to_last = layers.pivot(index="layer", columns=["model", "duplication"], values=measures)
    to_last = to_last.reorder_levels([1, 2, 0], axis=1).sort_index(axis=1, level=[0, 1],
                                                                     sort_remaining=False)
    to_last = to_last.reindex(columns=pd.MultiIndex.from_tuples(
        [(m, d, v) for m, d in dict.fromkeys(zip(layers["model"], layers["duplication"]))
         for v in measures]))
    to_last = to_last.rename(columns=_SHOWN_TO_LAST, level=2)
    to_last.index.name = "hidden state"
    to_last.columns.names = ["model", "duplication", "measure"]
    return to_last.map(lambda value: "" if pd.isna(value) else f"{value:.3f}")


def format_correlations(correlations: pd.DataFrame) -> pd.DataFrame:
    """:func:`dupbert.tools.stats.spearman_table` as strings: rho with 3 decimals, p-values with 2
    significant digits."""
    return correlations.assign(
        rho=correlations["rho"].map("{:.3f}".format),
        p_value=correlations["p_value"].map("{:.2g}".format),
        rho_given_depth=correlations["rho_given_depth"].map("{:.3f}".format),
        p_value_given_depth=correlations["p_value_given_depth"].map("{:.2g}".format))


def _correlation(correlations: pd.DataFrame, name: str, measure: str) -> dict:
    row = correlations.loc[(name, measure)].to_dict()
    return {**row, "n_layers": int(row["n_layers"])}


def _range(values: pd.Series, digits: int) -> str:
    return f"{values.min():.{digits}f} to {values.max():.{digits}f}"


def model_table(layers: pd.DataFrame, correlations: pd.DataFrame,
                models: Sequence[str] | None = None, within: float = 0.1) -> pd.DataFrame:
    """One row per model as loaded (index, in ``models``' order), over the hidden states before
    the last: the tokens sampled, the debiased linear CKA with the last hidden state (lowest, with
    its hidden state, and highest), the biased CKA's range, the hidden states within ``within`` of
    the last one's value 1 (debiased), the same token's cosine with its last-layer vector, the
    factor by which the mean token norm and the std of the values vary across all hidden states,
    the largest standardised W1 to the last layer, and Spearman's rho of top-1 with debiased CKA,
    the cosine and the depth, and given depth (``"-"`` where it cannot be computed: too few hidden
    states, a constant column, or CKA / top-1 monotone in depth). Paper section 3.

    Args:
        layers: :attr:`dupbert.tools.stats.SimilarityReport.layers` with ``top1``.
        correlations: :func:`dupbert.tools.stats.spearman_table` of ``layers``.
        models: default: those of ``correlations``.
        within: a hidden state is close to the last one when its debiased CKA is >= ``1 - within``.
    """
    if models is None:
        models = list(dict.fromkeys(correlations.index.get_level_values("model")))
    baseline = _baseline(layers)
    rows = {}
    for name in models:
        ours = baseline[baseline["model"] == name].set_index("layer")
        inner = ours.loc[: int(ours.index.max()) - 1]
        debiased = inner["cka_debiased_to_last"]
        close = inner.index[debiased >= 1 - within].tolist()
        rho = {measure: _correlation(correlations, name, measure)
               for measure in ("cka_debiased_to_last", "cosine_to_last", "depth")}
        rows[name] = {
            "tokens": int(ours["n_tokens"].iloc[0]),
            "CKA (debiased), lowest": f"{debiased.min():.3f} (hidden state {debiased.idxmin()})",
            "CKA (debiased), highest": f"{debiased.max():.3f}",
            "CKA (biased)": _range(inner["cka_to_last"], 3),
            f"within {within:g} of the last": f"{len(close)} of {len(inner)}"
                                               + (f" ({', '.join(map(str, close))})" if close else ""),
            "cosine": _range(inner["cosine_to_last"], 2),
            "norm factor": f"{ours['norm_mean'].max() / ours['norm_mean'].min():.2f}",
            "std factor": f"{ours['std'].max() / ours['std'].min():.2f}",
            "largest W1 (std.)": f"{inner['w1_standardised'].max():.2f}",
            "rho, CKA": cell(rho["cka_debiased_to_last"]["rho"], ".2f", "-"),
            "p": cell(rho["cka_debiased_to_last"]["p_value"], ".2g", "-"),
            "rho, cosine": cell(rho["cosine_to_last"]["rho"], ".2f", "-"),
            "rho, depth": cell(rho["depth"]["rho"], ".2f", "-"),
            "rho given depth": cell(rho["cka_debiased_to_last"]["rho_given_depth"], ".2f", "-"),
            "p given depth": cell(rho["cka_debiased_to_last"]["p_value_given_depth"], ".2g", "-")}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("model")


def summary_numbers(layers: pd.DataFrame, correlations: pd.DataFrame) -> dict[str, str | int]:
    """The numbers of RQ2's short answer, as the chapter glues them: ``norm_factor`` (the largest
    factor by which a model's mean token norm varies across its hidden states) and
    ``norm_factor_model``; ``lowest_cka`` (the lowest debiased CKA with the last hidden state of
    any model); over the models whose rho can be computed, ``usable`` (their count),
    ``rho_low`` and ``rho_high`` (Spearman's rho of debiased CKA with top-1; ``"-"`` without
    one), and ``beyond_depth`` (how many keep a positive rho given depth at p < 0.05) with
    ``beyond_depth_models`` (``"none"`` without one)."""
    baseline = _baseline(layers)
    scale = baseline.groupby("model")["norm_mean"].agg(lambda norm: norm.max() / norm.min())
    models = list(dict.fromkeys(correlations.index.get_level_values("model")))
    usable = {name: _correlation(correlations, name, "cka_debiased_to_last") for name in models
              if not pd.isna(correlations.loc[(name, "cka_to_last"), "rho"])}
    rhos = [rho["rho"] for rho in usable.values()]
    beyond = [name for name, rho in usable.items()
              if rho["rho_given_depth"] > 0 and rho["p_value_given_depth"] < 0.05]
    return {"norm_factor": f"{scale.max():.2f}", "norm_factor_model": str(scale.idxmax()),
            "lowest_cka": f"{baseline.groupby('model')['cka_debiased_to_last'].min().min():.2f}",
            "usable": len(usable),
            "rho_range": f"{min(rhos):.2f} to {max(rhos):.2f}" if rhos else "none computed",
            "beyond_depth": len(beyond),
            "beyond_depth_models": ", ".join(beyond) or "none"}


def duplicate_table(layers: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """One row per duplicated variant (index ``model, duplication``): the head's top-1 from its
    last hidden state and from the model as loaded (3 decimals), the hidden states a copied block
    writes, the linear CKA (biased) of each such hidden state with its input (range), and of
    one block of the model as loaded with its input (range); empty without a variant.

    Args:
        layers: :attr:`dupbert.tools.stats.SimilarityReport.layers` with ``top1``.
        pairs: :attr:`dupbert.tools.stats.SimilarityReport.pairs`.
    """
    baseline = _baseline(layers)
    rows = []
    for (name, label), variant in layers[layers["duplication"] != "baseline"].groupby(
            ["model", "duplication"], sort=False):
        base = baseline[baseline["model"] == name]
        ours = pairs[(pairs["model"] == name) & (pairs["duplication"] == label)]
        step = ours[ours["other_layer"] == ours["layer"] + 1].set_index("other_layer")["cka"]
        base_pairs = pairs[(pairs["model"] == name) & (pairs["duplication"] == "baseline")]
        base_step = base_pairs[base_pairs["other_layer"] == base_pairs["layer"] + 1]["cka"]
        copies = variant.loc[variant["is_copy"], "layer"].tolist()
        rows.append({"model": name, "duplication": label,
                     "top-1 at the last hidden state": f"{variant['top1'].iloc[-1]:.3f}",
                     "as loaded": f"{base['top1'].iloc[-1]:.3f}",
                     "copies write hidden states": ", ".join(map(str, copies)),
                     "CKA of a copy with its input": _range(step.loc[copies], 3),
                     "CKA of a block as loaded with its input": _range(base_step, 3)})
    return pd.DataFrame(rows, columns=["model", "duplication", "top-1 at the last hidden state", "as loaded",
                                       "copies write hidden states", "CKA of a copy with its input",
                                       "CKA of a block as loaded with its input"]
                        ).set_index(["model", "duplication"])


def translator_gap_tables(gaps: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`dupbert.tools.stats.translator_gap_vs_similarity` as RQ2 shows it, rounded to 3
    decimals.

    Returns:
        ``(per_model, per_layer)``: per model ``rho``, ``p_value``, ``hidden_states`` (count); per
        hidden state the ``gap`` and ``similarity`` of each model (columns ``(gap | similarity,
        model)``).
    """
    per_model = gaps.groupby("model")[["rho", "p_value"]].first().assign(
        hidden_states=gaps.groupby("model").size()).round(3)
    per_layer = gaps.pivot(index="layer", columns="model", values=["gap", "similarity"]).round(3)
    return per_model, per_layer
