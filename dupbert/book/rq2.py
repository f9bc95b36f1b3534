"""The RQ2 chapter's tables and glued numbers (``notebooks/rq2.ipynb``): per-layer statistics,
each hidden state's similarity to the last one beside RQ1's top-1, the rank correlations, the
per-model and per-variant readings its "What the numbers say" section shows, and the linear
translator's gap beside similarity; from the frames of :mod:`dupbert.tools.stats`. The prose is in the
notebook's Markdown.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from .text import cell

_SHOWN_STATISTICS = {"norm_mean": "norm", "norm_std": "norm std", "std": "std", "q01": "q01",
                     "q50": "q50", "q99": "q99", "max_abs": "max |x|", "kurtosis": "kurtosis",
                     "top_dim_var_frac": "top dim", "anisotropy": "anisotropy"}

_SHOWN_TO_LAST = {"cka_to_last": "CKA", "cka_debiased_to_last": "CKA (debiased)",
                  "cosine_to_last": "cosine", "w1_standardised": "W1 (std.)", "top1": "top-1"}


def _baseline(layers: pd.DataFrame) -> pd.DataFrame:
    return layers[layers["duplication"] == "baseline"]


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
