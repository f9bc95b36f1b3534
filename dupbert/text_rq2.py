"""The RQ2 chapter's tables and prose (``notebooks/rq2.ipynb``): per-layer statistics, each hidden
state's similarity to the last one beside RQ1's top-1, the rank correlations as text, what the
numbers say, and the linear translator's gap beside similarity; from the frames of
:mod:`dupbert.stats`.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd


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
        layers: :attr:`dupbert.stats.SimilarityReport.layers` (``baseline`` rows are used).

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
        layers: :attr:`dupbert.stats.SimilarityReport.layers` with ``top1`` (all duplications
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
    """:func:`dupbert.stats.spearman_table` as strings: rho with 3 decimals, p-values with 2
    significant digits."""
    return correlations.assign(
        rho=correlations["rho"].map("{:.3f}".format),
        p_value=correlations["p_value"].map("{:.2g}".format),
        rho_given_depth=correlations["rho_given_depth"].map("{:.3f}".format),
        p_value_given_depth=correlations["p_value_given_depth"].map("{:.2g}".format))


def _correlation(correlations: pd.DataFrame, name: str, measure: str) -> dict:
    row = correlations.loc[(name, measure)].to_dict()
    return {**row, "n_layers": int(row["n_layers"])}


def _describe_one_similarity(layers: pd.DataFrame, correlations: pd.DataFrame, name: str,
                             within: float) -> str:
    baseline = _baseline(layers)
    ours = baseline[baseline["model"] == name].set_index("layer")
    last = int(ours.index.max())
    inner = ours.loc[: last - 1]
    close = inner.index[inner["cka_debiased_to_last"] >= 1 - within].tolist()
    norm, std = ours["norm_mean"], ours["std"]
    rho = _correlation(correlations, name, "cka_debiased_to_last")
    text = (
        f"- **{name}** ({int(ours['n_tokens'].iloc[0])} tokens): the debiased linear CKA of a hidden "
        f"state with the last one ranges from {inner['cka_debiased_to_last'].min():.3f} (hidden "
        f"state {inner['cka_debiased_to_last'].idxmin()}) to {inner['cka_debiased_to_last'].max():.3f} "
        f"(biased: {inner['cka_to_last'].min():.3f} to {inner['cka_to_last'].max():.3f}); "
        f"{len(close)} of the {last} earlier hidden states are within {within} of the last one's "
        f"value 1 (CKA ≥ {1 - within:.1f}{': ' + ', '.join(map(str, close)) if close else ''}). "
        f"The same token's cosine with its last-layer vector ranges from "
        f"{inner['cosine_to_last'].min():.2f} to {inner['cosine_to_last'].max():.2f}. "
        f"The mean token norm varies by a factor {norm.max() / norm.min():.2f} across layers "
        f"({norm.min():.3g} to {norm.max():.3g}), the std of the values by a factor "
        f"{std.max() / std.min():.2f}; after standardising, the distance of the value "
        f"distributions to the last layer's is at most {inner['w1_standardised'].max():.2f} std. "
    )
    if pd.isna(rho["rho"]):
        return text + (f"No rank correlation with top-1 accuracy is computed ({rho['n_layers']} "
                       f"hidden states before the last, or a constant column).")
    cosine = _correlation(correlations, name, "cosine_to_last")["rho"]
    depth = _correlation(correlations, name, "depth")["rho"]
    return text + (
        f"Top-1 accuracy and debiased CKA to the last layer have Spearman rho = "
        f"{rho['rho']:.2f} (p = {rho['p_value']:.2g}, {rho['n_layers']} hidden states); for "
        f"the cosine rho = {cosine:.2f}, and for the depth itself {depth:.2f}. "
        + ("Controlling for depth leaves nothing to correlate (CKA or top-1 is monotone in "
           "depth): these data cannot tell CKA from depth."
           if pd.isna(rho["rho_given_depth"]) else
           f"Controlling for depth, the partial rho is {rho['rho_given_depth']:.2f} "
           f"(p = {rho['p_value_given_depth']:.2g}).")
    )


def _summarise_similarity(layers: pd.DataFrame, correlations: pd.DataFrame) -> str:
    baseline = _baseline(layers)
    scale = baseline.groupby("model")["norm_mean"].agg(lambda norm: norm.max() / norm.min())
    models = list(dict.fromkeys(correlations.index.get_level_values("model")))
    usable = {name: _correlation(correlations, name, "cka_debiased_to_last") for name in models
              if not pd.isna(correlations.loc[(name, "cka_to_last"), "rho"])}
    text = (
        f"**In short.** Within each model the mean token norm changes by a factor of at most "
        f"{scale.max():.2f} across hidden states ({scale.idxmax()}), so the layers share their "
        f"scale; their geometry is another matter: debiased linear CKA with the last hidden state "
        f"falls to {baseline.groupby('model')['cka_debiased_to_last'].min().min():.2f} at the lowest. "
    )
    if usable:
        rhos = [rho["rho"] for rho in usable.values()]
        beyond = [name for name, rho in usable.items()
                  if rho["rho_given_depth"] > 0 and rho["p_value_given_depth"] < 0.05]
        text += (
            f"Over the {len(usable)} model(s) with enough hidden states, Spearman's rho between "
            f"debiased CKA to the last layer and top-1 accuracy ranges from {min(rhos):.2f} "
            f"to {max(rhos):.2f}; controlling for depth it stays positive with p < 0.05 "
            f"for {len(beyond)} of them{' (' + ', '.join(beyond) + ')' if beyond else ''}."
        )
    return text


def _describe_duplicates(layers: pd.DataFrame, pairs: pd.DataFrame) -> list[str]:
    baseline = _baseline(layers)
    lines = []
    for (name, label), rows in layers[layers["duplication"] != "baseline"].groupby(
            ["model", "duplication"], sort=False):
        base = baseline[baseline["model"] == name]
        ours = pairs[(pairs["model"] == name) & (pairs["duplication"] == label)]
        step = ours[ours["other_layer"] == ours["layer"] + 1].set_index("other_layer")["cka"]
        base_pairs = pairs[(pairs["model"] == name) & (pairs["duplication"] == "baseline")]
        base_step = base_pairs[base_pairs["other_layer"] == base_pairs["layer"] + 1]["cka"]
        copies = rows.loc[rows["is_copy"], "layer"].tolist()
        lines.append(
            f"- **{name}, {label}**: the head decodes {rows['top1'].iloc[-1]:.2%} of the tokens "
            f"from the last hidden state (as loaded: {base['top1'].iloc[-1]:.2%}). A copied "
            f"block applied to its original's output (hidden states "
            f"{', '.join(map(str, copies))}) keeps the token cloud at CKA "
            f"{step.loc[copies].min():.3f} to {step.loc[copies].max():.3f} with its input; one "
            f"block of the model as loaded does {base_step.min():.3f} to {base_step.max():.3f}."
        )
    return lines


def describe_similarity(layers: pd.DataFrame, pairs: pd.DataFrame, correlations: pd.DataFrame,
                        models: Sequence[str] | None = None, within: float = 0.1) -> str:
    """What RQ2's numbers say, in Markdown (chapter RQ2, "What the numbers say"; paper section 3).

    One bullet per model (CKA and cosine with the last hidden state, norm and std factors, largest
    standardised W1, Spearman's rho plain and given depth), a summary, and one bullet per
    duplicated variant (its last top-1, each copy's CKA with its input).

    Args:
        layers: :attr:`dupbert.stats.SimilarityReport.layers` with ``top1``.
        pairs: :attr:`dupbert.stats.SimilarityReport.pairs`.
        correlations: :func:`dupbert.stats.spearman_table` of ``layers``.
        models: the models described, in this order; default: those of ``correlations``.
        within: a hidden state is close to the last one when its debiased CKA is >= ``1 - within``.
    """
    if models is None:
        models = list(dict.fromkeys(correlations.index.get_level_values("model")))
    text = "\n".join(_describe_one_similarity(layers, correlations, name, within)
                     for name in models)
    text += "\n\n" + _summarise_similarity(layers, correlations)
    duplicated = _describe_duplicates(layers, pairs)
    if duplicated:
        text += "\n\nWith the duplicated variants:\n\n" + "\n".join(duplicated)
    return text


def translator_gap_tables(gaps: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`dupbert.stats.translator_gap_vs_similarity` as RQ2 shows it, rounded to 3
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
