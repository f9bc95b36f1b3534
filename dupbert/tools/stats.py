"""RQ2: are the hidden states of different layers distributed similarly enough for one head?

Kao et al. (2020), section 3, conclude from RQ1 that the layers' outputs must be "similar".
This module measures in which sense, on the *same tokens* in every layer:

- per-layer summary statistics (:func:`layer_statistics`), including outlier dimensions
  (Kovaleva et al. 2021) and anisotropy (Ethayarajh 2019);
- the cosine of a token's vector with the same token's vector in another layer
  (:func:`cosine_across_layers`);
- linear CKA between layers (:func:`linear_cka`, :func:`cka_matrix`; Kornblith et al. 2019),
  biased and debiased (Song et al. 2012; Nguyen, Raghu & Kornblith 2021);
- the per-dimension 1-D Wasserstein distance to the last layer (:func:`distribution_distance`);
- their rank correlation with RQ1's reconstruction accuracy, also partial on depth
  (:func:`relate_to_reconstruction`).

Hidden state ``l = 0`` is the embedding output (for ALBERT after the E -> H projection),
``l = 1..L`` the output of block ``l - 1`` (the glossary of book/methods.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd
import scipy.stats
import torch
import transformers
from tqdm import tqdm

from ..core.checks import check_device, check_model_names, check_number
from .duplicate import (block_is_copy, block_sources, duplicate_layers, paper_duplication,
                        standard_duplications)
from .hidden import batch_hidden_states, length_batches, pad_batch, tokenize_for_probe
from .probe import check_max_length, corpus_cache_key, probe_models
from ..core.results import cached_frame, source_fingerprint
from ..core.zoo import check_model

__all__ = [
    "collect_hidden_states", "layer_statistics", "cosine_across_layers", "linear_cka",
    "cka_matrix", "distribution_distance", "relate_to_reconstruction", "partial_spearman",
    "sampled_reconstruction",
    "layer_similarity_report", "SimilarityReport", "STATISTICS_COLUMNS",
    "translator_gap_vs_similarity", "spearman_table",
]

STATISTICS_COLUMNS = ["layer", "mean", "std", "norm_mean", "norm_std", "q01", "q25", "q50",
                      "q75", "q99", "max_abs", "kurtosis", "top_dim", "top_dim_var_frac",
                      "anisotropy"]
_QUANTILES = {"q01": 0.01, "q25": 0.25, "q50": 0.50, "q75": 0.75, "q99": 0.99}


# --------------------------------------------------------------------------------------------------
# Collecting hidden states


def _check_states(states) -> torch.Tensor:
    """``states`` as a float64 CPU tensor ``[L+1, N, H]``; ValueError if not 3-D or empty."""
    states = torch.as_tensor(states)
    if states.ndim != 3:
        raise ValueError(
            f"states must have shape [layers, tokens, hidden], got {tuple(states.shape)}")
    if min(states.shape) == 0:
        raise ValueError(f"states is empty: shape {tuple(states.shape)}")
    return states.detach().to("cpu", torch.float64)


@torch.inference_mode()
def collect_hidden_states(
    model: transformers.PreTrainedModel,
    tokenizer: transformers.PreTrainedTokenizerBase,
    texts: Sequence[str],
    max_tokens: int | None = 4000,
    seed: int = 0,
    batch_size: int = 32,
    max_length: int = 512,
    progress: bool = True,
    device: str | torch.device | None = None,
    return_token_ids: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """The hidden states of every layer for the same seeded sample of tokens (RQ2).

    Texts are tokenised and length-batched as in the RQ1 probe; only counted tokens (non-special,
    non-padding) are kept. ``max_tokens`` of them are drawn uniformly without replacement
    (``torch.Generator`` seeded by ``seed``) and returned in text order, the same tokens in every
    layer; the sample does not depend on ``batch_size``.

    Args:
        model: any encoder whose ``base_model`` accepts ``output_hidden_states=True``, e.g. from
            ``dupbert.load_mlm``.
        texts: the corpus, one sequence per string; truncated to ``max_length`` tokens (special
            tokens included).
        max_tokens: at most this many tokens; ``None`` keeps every counted token.
        device: where to run; default the model's device. The result is always on the CPU.
        return_token_ids: also return the input ids of the sampled tokens.

    Returns:
        float32 CPU tensor ``[L+1, N, H]``, ``N = min(max_tokens, counted tokens)``, in the model's
        hidden-state units. With ``return_token_ids``, ``(states, token_ids)``, ``token_ids`` int64
        ``[N]``.

    Raises:
        ValueError: empty ``texts``, ``max_tokens`` or ``batch_size`` < 1, or no counted token.
    """
    if max_tokens is not None and (isinstance(max_tokens, bool) or int(max_tokens) < 1):
        raise ValueError(f"max_tokens must be a positive integer or None, got {max_tokens!r}")
    examples = tokenize_for_probe(tokenizer, texts, max_length)
    batches = length_batches([len(e["input_ids"]) for e in examples], batch_size)
    counts = np.array([len(e["special_tokens_mask"]) - sum(e["special_tokens_mask"])
                       for e in examples], dtype=np.int64)
    total = int(counts.sum())
    if total == 0:
        raise ValueError("no countable token: every token of every text is special")
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])  # first global id of each text
    n_keep = total if max_tokens is None else min(int(max_tokens), total)
    generator = torch.Generator().manual_seed(seed)
    chosen = torch.randperm(total, generator=generator)[:n_keep].sort().values
    slot = torch.full((total,), -1, dtype=torch.long)  # global token id -> output row, or -1
    slot[chosen] = torch.arange(n_keep)

    device = torch.device(device) if device is not None else next(model.parameters()).device
    model = model.to(device).eval()
    n_states = model.config.num_hidden_layers + 1
    out = torch.empty((n_states, n_keep, model.config.hidden_size), dtype=torch.float32)
    token_ids = torch.empty(n_keep, dtype=torch.long)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    for batch_indices in tqdm(batches, desc="hidden states", unit="batch", disable=not progress):
        # global ids of the batch's counted tokens, in the row-major order of hidden[counted]
        ids = torch.cat([torch.arange(offsets[i], offsets[i] + counts[i]) for i in batch_indices])
        rows = slot[ids]
        keep = rows >= 0
        if not keep.any():
            continue  # none of this batch's tokens was drawn
        batch = pad_batch([examples[i] for i in batch_indices], pad_id)
        hidden_states = batch_hidden_states(model, batch, device)
        counted = batch["counted"].to(device)
        keep_device = keep.to(device)
        token_ids[rows[keep]] = batch["input_ids"][batch["counted"]][keep]
        for layer, hidden in enumerate(hidden_states):
            out[layer, rows[keep]] = hidden[counted][keep_device].float().cpu()
    return (out, token_ids) if return_token_ids else out


@torch.inference_mode()
def sampled_reconstruction(model: transformers.PreTrainedModel, states, token_ids,
                           chunk_size: int = 1024) -> pd.DataFrame:
    """RQ1's reconstruction accuracy (paper section 3) on :func:`collect_hidden_states`' tokens.

    The model's MLM head is applied to each hidden state of the sampled tokens, so similarity and
    accuracy are measured on the same tokens without a second pass. Standard error of an accuracy
    ``p``: ``sqrt(p (1 - p) / N)`` (at most 0.008 for ``N = 4000``).

    Args:
        model: the ``*ForMaskedLM`` the states came from.
        states: ``[L+1, N, H]`` from ``collect_hidden_states(..., return_token_ids=True)``.
        token_ids: ``[N]`` the input ids of those tokens.
        chunk_size: tokens per head application (memory: ``chunk_size x V`` logits).

    Returns:
        One row per hidden state: ``layer``, ``top1``, ``top5`` (fractions in [0, 1]).

    Raises:
        ValueError: ``token_ids`` does not hold one id per token of ``states``.
        MLMHeadMissing: the model has no MLM head.
    """
    from .models import mlm_head

    head = mlm_head(model)
    device = next(model.parameters()).device
    states, token_ids = torch.as_tensor(states), torch.as_tensor(token_ids)
    if states.ndim != 3 or token_ids.shape != (states.shape[1],):
        raise ValueError(f"need states [L+1, N, H] and token_ids [N]; got {tuple(states.shape)} "
                         f"and {tuple(token_ids.shape)}")
    dtype = next(head.parameters()).dtype
    top1 = np.zeros(states.shape[0])
    top5 = np.zeros(states.shape[0])
    for layer, hidden in enumerate(states):
        for start in range(0, hidden.shape[0], chunk_size):
            logits = head(hidden[start:start + chunk_size].to(device, dtype))
            best = logits.topk(min(5, logits.shape[-1]), dim=-1).indices.cpu()
            target = token_ids[start:start + chunk_size]
            top1[layer] += (best[:, 0] == target).sum().item()
            top5[layer] += (best == target[:, None]).any(dim=-1).sum().item()
    n = states.shape[1]
    return pd.DataFrame({"layer": np.arange(states.shape[0]), "top1": top1 / n, "top5": top5 / n})


# --------------------------------------------------------------------------------------------------
# Per-layer statistics


def layer_statistics(states) -> pd.DataFrame:
    """Summary statistics of each hidden state's values (RQ2; paper section 3's "similar").

    Args:
        states: ``[L+1, N, H]`` (tensor or array), e.g. from :func:`collect_hidden_states`.

    Returns:
        One row per hidden state, columns ``STATISTICS_COLUMNS``: ``layer``; ``mean``, ``std``
        (all ``N * H`` values, population std); ``norm_mean``, ``norm_std`` (the tokens' L2 norms);
        ``q01 .. q99`` (quantiles of all values); ``max_abs``; ``kurtosis`` (excess, Fisher: 0 for
        a Gaussian); ``top_dim`` (the dimension of largest variance over tokens) and
        ``top_dim_var_frac`` (its share of the total variance, ``1 / H`` if isotropic; outlier
        dimensions: Kovaleva et al. 2021); ``anisotropy`` (mean cosine between two different
        tokens; Ethayarajh 2019). Hidden-state units except kurtosis, fractions and cosines.

    Raises:
        ValueError: ``states`` is not 3-D or is empty.
    """
    states = _check_states(states)
    rows = []
    for layer, x in enumerate(states):  # x: [N, H]
        values = x.numpy().ravel()
        norms = x.norm(dim=1)
        variance = x.var(dim=0, unbiased=False)
        unit = x / norms.clamp_min(1e-12)[:, None]
        n = x.shape[0]
        anisotropy = ((unit.sum(0).square().sum() - unit.square().sum()) / (n * (n - 1))
                      if n > 1 else torch.tensor(float("nan")))
        quantiles = np.quantile(values, list(_QUANTILES.values()))
        rows.append({
            "layer": layer,
            "mean": values.mean(),
            "std": values.std(),
            "norm_mean": norms.mean().item(),
            "norm_std": norms.std(unbiased=False).item(),
            **dict(zip(_QUANTILES, quantiles)),
            "max_abs": np.abs(values).max(),
            "kurtosis": scipy.stats.kurtosis(values, fisher=True),
            "top_dim": int(variance.argmax()),
            "top_dim_var_frac": (variance.max() / variance.sum().clamp_min(1e-300)).item(),
            "anisotropy": float(anisotropy),
        })
    return pd.DataFrame(rows, columns=STATISTICS_COLUMNS)


# --------------------------------------------------------------------------------------------------
# Similarity between layers


def _square_frame(matrix: np.ndarray) -> pd.DataFrame:
    index = pd.Index(range(matrix.shape[0]), name="layer")
    return pd.DataFrame(matrix, index=index, columns=index.rename("other_layer"))


def cosine_across_layers(states) -> pd.DataFrame:
    """Mean cosine similarity of the *same token* between every pair of hidden states (RQ2).

    ``C[a, b] = mean_n cos(states[a, n], states[b, n])``; unlike CKA, a rotation of a whole layer
    lowers it. Zero vectors count as cosine 0.

    Args:
        states: ``[L+1, N, H]``.

    Returns:
        ``[L+1, L+1]`` frame, index ``layer``, columns ``other_layer``, values in [-1, 1];
        symmetric with a diagonal of 1.

    Raises:
        ValueError: ``states`` is not 3-D or is empty.
    """
    states = _check_states(states)
    unit = states / states.norm(dim=2, keepdim=True).clamp_min(1e-300)
    matrix = torch.einsum("anh,bnh->ab", unit, unit) / states.shape[1]
    return _square_frame(matrix.numpy())


def _centred(x) -> torch.Tensor:
    x = torch.as_tensor(x).detach().to("cpu", torch.float64)
    if x.ndim != 2:
        raise ValueError(f"CKA needs 2-D [tokens, features] inputs, got shape {tuple(x.shape)}")
    if x.shape[0] < 2:
        raise ValueError(f"CKA needs at least 2 tokens (rows), got {x.shape[0]}")
    return x - x.mean(dim=0, keepdim=True)


def _debiased_hsic_terms(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For centred ``x`` ``[N, d]``: ``diag(K)`` and ``K̃ 1`` (``K = x xᵀ``, diagonal zeroed), both
    ``[N]``, without forming ``K``.
    """
    diagonal = x.square().sum(dim=1)
    return diagonal, x @ x.sum(dim=0) - diagonal


def _debiased_hsic(x: torch.Tensor, y: torch.Tensor, tx=None, ty=None) -> float:
    """Song et al. (2012, eq. 5) unbiased HSIC of the linear kernels of ``x`` ``[N, d1]`` and ``y``
    ``[N, d2]`` (N >= 4), in feature space.
    """
    n = x.shape[0]
    dx, kx = tx if tx is not None else _debiased_hsic_terms(x)
    dy, ky = ty if ty is not None else _debiased_hsic_terms(y)
    trace = torch.linalg.matrix_norm(y.T @ x).square() - (dx * dy).sum()
    value = trace + kx.sum() * ky.sum() / ((n - 1) * (n - 2)) - 2 / (n - 2) * (kx * ky).sum()
    return float(value / (n * (n - 3)))


def linear_cka(x, y, debiased: bool = False) -> float:
    """Linear centred kernel alignment between two representations of the same tokens.

    Kornblith et al. (2019), eq. 5, feature-space form on column-centred inputs:
    ``CKA = ||yᵀ x||_F² / (||xᵀ x||_F · ||yᵀ y||_F)``, float64, no ``N x N`` Gram matrix.
    Invariant to orthogonal transforms and isotropic scaling. The biased estimator is about
    ``d / (N + d)`` for unrelated representations (0.20 at N = 1000, d = 256); ``debiased=True``
    uses the unbiased HSIC of Song et al. (2012) (Nguyen, Raghu & Kornblith 2021), about 0 there.

    Args:
        x, y: ``[N, d1]`` and ``[N, d2]`` (tensors or arrays), rows = the same N tokens.
        debiased: the debiased estimator (needs N >= 4).

    Returns:
        A float, 1 for identical representations (up to rotation and scale); biased in [0, 1],
        debiased about 0 for unrelated ones and possibly slightly negative.

    Raises:
        ValueError: not 2-D, different row counts, fewer than 2 rows (4 debiased), or an input
            whose columns are all constant (CKA undefined).
    """
    x, y = _centred(x), _centred(y)
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y must hold the same tokens (rows): {x.shape[0]} != {y.shape[0]}")
    if debiased:
        if x.shape[0] < 4:
            raise ValueError(f"debiased CKA needs at least 4 tokens (rows), got {x.shape[0]}")
        xx, yy = _debiased_hsic(x, x), _debiased_hsic(y, y)
        if xx <= 0 or yy <= 0:
            raise ValueError("CKA is undefined for an input whose columns are all constant")
        return _debiased_hsic(x, y) / float(np.sqrt(xx * yy))
    xx, yy = torch.linalg.matrix_norm(x.T @ x), torch.linalg.matrix_norm(y.T @ y)
    if xx == 0 or yy == 0:
        raise ValueError("CKA is undefined for an input whose columns are all constant")
    return float(torch.linalg.matrix_norm(y.T @ x).square() / (xx * yy))


def cka_matrix(states, debiased: bool = False) -> pd.DataFrame:
    """Linear CKA (:func:`linear_cka`, Kornblith et al. 2019) between every pair of hidden states.

    Args:
        states: ``[L+1, N, H]``; the same tokens in every layer.
        debiased: the debiased estimator (needs N >= 4).

    Returns:
        ``[L+1, L+1]`` frame, index ``layer``, columns ``other_layer``, symmetric, diagonal 1 (NaN
        for a constant layer); values as :func:`linear_cka`.

    Raises:
        ValueError: ``states`` is not 3-D, is empty, or has fewer than 2 tokens (4 debiased).
    """
    states = _check_states(states)
    if states.shape[1] < 2:
        raise ValueError(f"CKA needs at least 2 tokens, got {states.shape[1]}")
    centred = states - states.mean(dim=1, keepdim=True)
    n_states = centred.shape[0]
    if debiased:
        if states.shape[1] < 4:
            raise ValueError(f"debiased CKA needs at least 4 tokens, got {states.shape[1]}")
        terms = [_debiased_hsic_terms(c) for c in centred]
        self_hsic = [_debiased_hsic(c, c, t, t) for c, t in zip(centred, terms)]
        matrix = np.full((n_states, n_states), np.nan)
        for a in range(n_states):
            for b in range(a, n_states):
                if self_hsic[a] > 0 and self_hsic[b] > 0:
                    value = _debiased_hsic(centred[a], centred[b], terms[a], terms[b])
                    matrix[a, b] = matrix[b, a] = value / np.sqrt(self_hsic[a] * self_hsic[b])
        return _square_frame(matrix)
    self_norm = [torch.linalg.matrix_norm(c.T @ c).item() for c in centred]
    matrix = np.full((n_states, n_states), np.nan)
    for a in range(n_states):
        for b in range(a, n_states):
            denominator = self_norm[a] * self_norm[b]
            if denominator > 0:
                cross = torch.linalg.matrix_norm(centred[b].T @ centred[a]).item() ** 2
                matrix[a, b] = matrix[b, a] = cross / denominator
    return _square_frame(matrix)


def distribution_distance(states, reference: int = -1) -> pd.DataFrame:
    """How far each hidden state's per-dimension value distribution is from a reference layer's.

    Per dimension, the 1-D Wasserstein-1 distance between the ``N`` values of layer ``l`` and of
    the reference layer (``scipy.stats.wasserstein_distance``, in closed form: the mean absolute
    difference of the sorted values), averaged over the ``H`` dimensions. It compares marginal
    distributions, not token correspondence (:func:`cosine_across_layers`) or joint geometry
    (:func:`cka_matrix`).

    Args:
        states: ``[L+1, N, H]``.
        reference: the reference hidden state (negative counts back from the last).

    Returns:
        One row per hidden state: ``layer``, ``reference`` (non-negative index), ``w1`` (raw,
        hidden-state units), ``w1_relative`` (``w1`` / the reference layer's std) and
        ``w1_standardised`` (each layer standardised by its own overall mean and std first;
        dimensionless, so pure scaling scores 0). 0 for the reference itself.

    Raises:
        ValueError: ``states`` is not 3-D or is empty. IndexError: ``reference`` out of range.
    """
    states = _check_states(states)
    n_states = states.shape[0]
    if not -n_states <= reference < n_states:
        raise IndexError(f"reference {reference} is out of range for {n_states} hidden states")
    reference = reference % n_states
    # sort every dimension once; standardising a layer is increasing and affine, so it
    # commutes with sorting
    ordered = states.sort(dim=1).values  # [L+1, N, H]
    means = states.mean(dim=(1, 2), keepdim=True)
    stds = states.std(dim=(1, 2), unbiased=False, keepdim=True).clamp_min(1e-300)
    standardised = (ordered - means) / stds
    w1 = (ordered - ordered[reference]).abs().mean(dim=(1, 2))
    w1_standardised = (standardised - standardised[reference]).abs().mean(dim=(1, 2))
    return pd.DataFrame({
        "layer": np.arange(n_states),
        "reference": reference,
        "w1": w1.numpy(),
        "w1_relative": (w1 / stds[reference].squeeze()).numpy(),
        "w1_standardised": w1_standardised.numpy(),
    })


# --------------------------------------------------------------------------------------------------
# Relation to RQ1


def relate_to_reconstruction(similarity_to_last, probe_frame: pd.DataFrame,
                             metric: str = "top1", exclude_last: bool = True
                             ) -> tuple[pd.DataFrame, dict]:
    """Per-layer similarity to the last hidden state against RQ1's reconstruction accuracy.

    Args:
        similarity_to_last: a Series indexed by hidden state (its name, or ``"similarity"``, becomes
            the column), or a frame with a ``layer`` column or index and numeric similarity columns.
        probe_frame: RQ1 rows of *one* model and variant, with ``layer`` and ``metric``.
        metric: the RQ1 column (a fraction in [0, 1]).
        exclude_last: leave the last hidden state out of the correlation (similarity 1 by
            construction); it stays in the returned frame.

    Returns:
        ``(frame, correlations)``: ``frame`` has one row per hidden state in both inputs (``layer``,
        the similarity columns, ``metric``); ``correlations`` maps each similarity column to
        ``{"rho", "p_value", "n_layers", "rho_given_depth", "p_value_given_depth"}``: Spearman
        (two-sided; NaN with fewer than 3 hidden states or a constant side) and the partial Spearman
        given depth (:func:`partial_spearman`). Hidden states of one model are not independent:
        the p-values are descriptive.

    Raises:
        ValueError: ``probe_frame`` lacks ``layer``/``metric``, holds several rows per hidden state,
            or shares no hidden state with ``similarity_to_last``.
    """
    if isinstance(similarity_to_last, pd.Series):
        name = similarity_to_last.name if similarity_to_last.name is not None else "similarity"
        similarity = similarity_to_last.rename(name).rename_axis("layer").reset_index()
    else:
        similarity = similarity_to_last
        if "layer" not in similarity.columns:
            similarity = similarity.rename_axis("layer").reset_index()
    missing = {"layer", metric} - set(probe_frame.columns)
    if missing:
        raise ValueError(f"probe_frame needs columns {sorted(missing)}; "
                         f"it has {list(probe_frame.columns)}")
    if probe_frame["layer"].duplicated().any():
        raise ValueError("probe_frame holds several rows per hidden state: filter it to one model, "
                         "duplication and variant first")
    columns = [c for c in similarity.columns if c != "layer" and c != metric
               and pd.api.types.is_numeric_dtype(similarity[c])]
    frame = similarity[["layer", *columns]].merge(probe_frame[["layer", metric]], on="layer")
    frame = frame.sort_values("layer", ignore_index=True)
    if frame.empty:
        raise ValueError("similarity_to_last and probe_frame share no hidden state")
    used = frame[frame["layer"] != frame["layer"].max()] if exclude_last else frame
    correlations = {}
    for column in columns:
        if len(used) < 3 or used[column].nunique() < 2 or used[metric].nunique() < 2:
            rho, p_value = float("nan"), float("nan")
        else:
            result = scipy.stats.spearmanr(used[column], used[metric])
            rho, p_value = float(result.statistic), float(result.pvalue)
        partial, p_partial = partial_spearman(used[column], used[metric], used["layer"])
        correlations[column] = {"rho": rho, "p_value": p_value, "n_layers": len(used),
                                "rho_given_depth": partial, "p_value_given_depth": p_partial}
    return frame, correlations


def partial_spearman(x, y, z) -> tuple[float, float]:
    """Spearman's partial rank correlation of ``x`` and ``y`` given ``z`` (``n`` values each).

    The partial Pearson correlation of the ranks, ``(r_xy - r_xz r_yz) / sqrt((1 - r_xz²)(1 -
    r_yz²))``, with the two-sided t-test on ``n - 3`` degrees of freedom.

    Returns:
        ``(rho, p_value)``; both NaN when ``n < 4``, a variable is constant, or ``x`` or ``y`` is
        a monotone function of ``z`` (nothing is left once ``z`` is controlled for).
    """
    ranks = [scipy.stats.rankdata(np.asarray(v, dtype=float)) for v in (x, y, z)]
    n = len(ranks[0])
    if n < 4 or any(np.ptp(r) == 0 for r in ranks):
        return float("nan"), float("nan")
    r = np.corrcoef(ranks)
    r_xy, r_xz, r_yz = r[0, 1], r[0, 2], r[1, 2]
    denominator = (1 - r_xz ** 2) * (1 - r_yz ** 2)
    if denominator <= 1e-12:
        return float("nan"), float("nan")
    rho = float(np.clip((r_xy - r_xz * r_yz) / np.sqrt(denominator), -1.0, 1.0))
    if abs(rho) == 1.0:
        return rho, 0.0
    t = rho * np.sqrt((n - 3) / (1 - rho ** 2))
    return rho, float(2 * scipy.stats.t.sf(abs(t), n - 3))


# --------------------------------------------------------------------------------------------------
# Several models at once


class SimilarityReport(NamedTuple):
    """The tidy frames of :func:`layer_similarity_report`."""

    layers: pd.DataFrame
    """One row per (model, duplication, hidden state): statistics, distance, similarity to the
    last hidden state and (optionally) RQ1 accuracy."""
    pairs: pd.DataFrame
    """One row per (model, duplication, hidden state, other hidden state): ``cka``,
    ``cka_debiased``, ``cosine``."""


# The modules whose code determines the statistics: cached results are keyed on their source.
STATS_CODE = ("tools.stats", "tools.probe", "tools.hidden", "tools.models", "tools.duplicate", "core.data",
              "core.zoo")


def _layer_rows(model, states, cka: pd.DataFrame, cka_debiased: pd.DataFrame,
                cosine: pd.DataFrame) -> pd.DataFrame:
    statistics = layer_statistics(states)
    distance = distribution_distance(states).drop(columns="reference")
    frame = statistics.merge(distance, on="layer")
    frame.insert(1, "source_block", [-1, *block_sources(model)])
    frame.insert(2, "is_copy", [False, *block_is_copy(model)])
    return frame.assign(cka_to_last=cka.iloc[:, -1].to_numpy(),
                        cka_debiased_to_last=cka_debiased.iloc[:, -1].to_numpy(),
                        cosine_to_last=cosine.iloc[:, -1].to_numpy(), n_tokens=states.shape[1])


def _pair_rows(model, states, cka: pd.DataFrame, cka_debiased: pd.DataFrame,
               cosine: pd.DataFrame) -> pd.DataFrame:
    return pd.concat([cka.stack().rename("cka"), cka_debiased.stack().rename("cka_debiased"),
                      cosine.stack().rename("cosine")], axis=1).reset_index()


def layer_similarity_report(
    model_names: Sequence[str],
    corpus: str | None = None,
    n_sequences: int = 500,
    max_tokens: int = 4000,
    duplications: str | Mapping[str, Sequence[int]] | None = "paper",
    batch_size: int = 32,
    device: str = "cpu",
    seed: int = 0,
    max_length: int = 512,
    data_dir: str | None = None,
    progress: bool = True,
    cache: bool = True,
    reconstruction: str | None = "sample",
    text_column: str = "text",
) -> SimilarityReport:
    """RQ2 for several models: statistics and layer similarity of each model and its variants.

    Per model and variant, the hidden states of the same ``max_tokens`` tokens are collected once
    (:func:`collect_hidden_states`) and reduced to :func:`layer_statistics`,
    :func:`distribution_distance`, :func:`cka_matrix` and :func:`cosine_across_layers`; each result
    is cached (``$DUPBERT_CACHE/results/stats-layers`` and ``stats-pairs``) as soon as computed.

    Args:
        model_names: zoo names, local folders or Hub ids (each must load with ``load_mlm``).
        corpus: a corpus name or a user's texts (``dupbert.core.data.read_texts``); ``None``: each
            model's own domain corpus.
        n_sequences: the first ``n_sequences`` sequences of the corpus.
        max_tokens: tokens sampled per model (seeded by ``seed``), the same in every layer.
        duplications: ``None``: each model as loaded; ``"paper"``: also
            ``dupbert.tools.duplicate.paper_duplication``; ``"standard"``:
            ``dupbert.tools.duplicate.standard_duplications``; or ``{label: order}`` (0-based blocks)
            for every model (the baseline is added).
        reconstruction: add RQ1's ``top1``/``top5``: ``"sample"`` on the sampled tokens
            (:func:`sampled_reconstruction`), ``"probe"`` on every token (``dupbert.probe_models``,
            cached there), ``None``: no.
        Other arguments as :func:`collect_hidden_states` and ``dupbert.probe_models``.

    Returns:
        :class:`SimilarityReport` ``(layers, pairs)``. ``layers``: ``model``, ``duplication``
        (``"baseline"`` as loaded), ``corpus``, ``STATISTICS_COLUMNS`` with ``source_block`` and
        ``is_copy`` after ``layer``, ``w1, w1_relative, w1_standardised``, ``cka_to_last``,
        ``cka_debiased_to_last``, ``cosine_to_last``, ``n_tokens`` and, with ``reconstruction``,
        ``top1``, ``top5``. ``pairs``: ``model``, ``duplication``, ``corpus``, ``layer``,
        ``other_layer``, ``cka``, ``cka_debiased``, ``cosine``.

    Raises:
        ValueError: a bad argument (named in the message). DeviceNotAvailable, ModelNotAvailable,
            MLMHeadMissing, UnknownCorpus, CorpusNotFound, CorpusUnreadable. All of these before any
            model is loaded; then errors of ``load_mlm`` and ``dupbert.core.data``.
    """
    from ..core.data import check_text_source, default_corpus, is_corpus_name, load_texts
    from .models import load_mlm

    model_names = _check_report_arguments(model_names, duplications, reconstruction, max_tokens,
                                          n_sequences, batch_size, seed, max_length, device)
    user_texts = None  # a user's corpus is read once, now: a bad file fails before any model
    if corpus:
        check_text_source(corpus)
        if not is_corpus_name(corpus):
            user_texts = load_texts(corpus, n_sequences, text_column=text_column)
    for name in model_names:  # every input before the first model is loaded
        check_model(name, mlm_head=True)
    settings = dict(max_tokens=max_tokens, seed=seed, batch_size=batch_size,
                    max_length=max_length, progress=progress, device=device,
                    reconstruction=reconstruction)
    layer_frames, pair_frames = [], []
    for name in model_names:
        corpus_name = corpus or default_corpus(name)
        model, tokenizer = load_mlm(name, device=device)
        texts = user_texts or load_texts(corpus_name, n_sequences, data_dir=data_dir,
                                         text_column=text_column)
        orders = _report_orders(duplications, model)
        identity = list(range(model.config.num_hidden_layers))
        for label, order in orders.items():
            order = None if list(order) == identity else list(order)
            fields = dict(model=name, duplication=label, order=order,
                          n_sequences=n_sequences, max_tokens=int(max_tokens), seed=seed,
                          max_length=max_length, code=source_fingerprint(*STATS_CODE),
                          **corpus_cache_key(name, corpus_name, data_dir, text_column,
                                             user_texts),
                          sampled_reconstruction=reconstruction == "sample")
            layers, pairs = _variant_frames(model, tokenizer, texts, order, fields, cache,
                                            **settings)
            tags = dict(model=name, duplication=label, corpus=corpus_name)
            layer_frames.append(layers.assign(**tags))
            pair_frames.append(pairs.assign(**tags))
        if reconstruction == "probe":
            probed = probe_models([name], corpus=corpus_name, n_sequences=n_sequences,
                                  batch_size=batch_size, device=device, seed=seed,
                                  max_length=max_length, data_dir=data_dir,
                                  include_control=False, duplications=orders,
                                  progress=progress, cache=cache, text_column=text_column)
            accuracy = probed[["duplication", "layer", "top1", "top5"]].assign(model=name)
            for i in range(len(layer_frames) - len(orders), len(layer_frames)):
                layer_frames[i] = layer_frames[i].merge(accuracy, on=["model", "duplication",
                                                                      "layer"], how="left")
    layers = pd.concat(layer_frames, ignore_index=True)
    pairs = pd.concat(pair_frames, ignore_index=True)
    front = ["model", "duplication", "corpus"]
    return SimilarityReport(
        layers[front + [c for c in layers.columns if c not in front]],
        pairs[front + [c for c in pairs.columns if c not in front]],
    )


def _check_report_arguments(model_names, duplications, reconstruction, max_tokens, n_sequences,
                            batch_size, seed, max_length, device) -> list[str]:
    """``layer_similarity_report``'s arguments checked; the model names as a list."""
    model_names = check_model_names("model_names", model_names)
    if not (duplications is None or isinstance(duplications, Mapping)
            or (isinstance(duplications, str) and duplications in ("paper", "standard"))):
        raise ValueError(f"duplications must be None, 'paper', 'standard' or a mapping "
                         f"{{label: [block, ...]}}, got {duplications!r}")
    if reconstruction not in (None, "sample", "probe"):
        raise ValueError(
            f"reconstruction must be None, 'sample' or 'probe', got {reconstruction!r}")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, (int, np.integer)) \
            or max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    if n_sequences is not None:  # None: every row of the corpus
        check_number("n_sequences", n_sequences, integer=True, minimum=1)
    check_number("batch_size", batch_size, integer=True, minimum=1)
    check_number("seed", seed, integer=True, minimum=0)
    check_max_length(max_length)
    check_device(device)
    return model_names


def _report_orders(duplications, model) -> dict:
    """``{label: order}`` for one loaded model, the baseline (as loaded) first."""
    identity = list(range(model.config.num_hidden_layers))
    if duplications is None:
        return {"baseline": identity}
    if duplications == "paper":
        return {"baseline": identity, **paper_duplication(model)}
    if duplications == "standard":
        return standard_duplications(model)
    return {"baseline": identity, **dict(duplications)}


def _variant_frames(model, tokenizer, texts, order, fields, cache, *, max_tokens, seed,
                    batch_size, max_length, progress, device, reconstruction):
    """The cached ``(layers, pairs)`` frames of one variant; hidden states collected at most once.
    """
    memo = {}

    def computed():
        if not memo:  # once per variant, shared by the two cached frames
            probed = model if order is None else duplicate_layers(model, order)
            states, token_ids = collect_hidden_states(
                probed, tokenizer, texts, max_tokens=max_tokens, seed=seed,
                batch_size=batch_size, max_length=max_length, progress=progress,
                device=device, return_token_ids=True)
            memo["args"] = (probed, states, cka_matrix(states), cka_matrix(states, debiased=True),
                            cosine_across_layers(states))
            memo["accuracy"] = (sampled_reconstruction(probed, states, token_ids)
                                if reconstruction == "sample" else None)
        return memo["args"]

    def layer_rows():
        frame = _layer_rows(*computed())
        accuracy = memo["accuracy"]
        return frame if accuracy is None else frame.merge(accuracy, on="layer")

    layers = cached_frame("stats-layers", fields, layer_rows, enabled=cache)
    pairs = cached_frame("stats-pairs", fields, lambda: _pair_rows(*computed()), enabled=cache)
    return layers, pairs


def translator_gap_vs_similarity(translator: pd.DataFrame, layers: pd.DataFrame,
                                 similarity: str = "cka_debiased_to_last",
                                 lens: str = "linear") -> pd.DataFrame:
    """Each hidden state's similarity to the last one against a linear translator's gain over the
    identity lens there (RQ2 beside RQ1's translator; Din et al. 2023).

    Args:
        translator: ``dupbert.book.rq1.translator_comparison`` rows (RQ1's ``rq1-translator``).
        layers: :func:`layer_similarity_report`'s per-layer frame (``baseline`` rows are used).
        similarity: the column of ``layers`` to relate the gap to.
        lens: the fitted translator whose gain is related (its rows are called ``linear`` below).

    Returns:
        One row per model and hidden state ``0..L-1`` in both: ``model``, ``layer``, ``identity``,
        ``linear`` (top-1), ``gap`` (linear - identity, in [-1, 1]), ``similarity``, ``rho``,
        ``p_value`` (Spearman of gap and similarity per model, repeated on its rows; NaN with fewer
        than 3 hidden states).

    Raises:
        ValueError: ``translator`` has no reconstruction rows of ``lens`` (names those it has).
    """
    recon = translator[translator["measure"] == "reconstruction"]
    present = sorted(set(recon["translator"]) - {"identity"})
    if lens not in present:
        raise ValueError(f"the translator table has no {lens!r} reconstruction rows (it has "
                         f"{present}): RQ1 writes them when its parameter translators includes "
                         f"{lens!r}")
    recon = recon[recon["translator"].isin(["identity", lens])]
    recon = recon.assign(translator=recon["translator"].replace({lens: "linear"}))
    top1 = recon.pivot_table(index=["model", "layer"], columns="translator", values="top1")
    base = layers[layers["duplication"] == "baseline"].set_index(["model", "layer"])[similarity]
    joined = top1.join(base.rename("similarity"), how="inner").reset_index()
    last = joined.groupby("model")["layer"].transform("max")
    joined = joined[joined["layer"] < last].assign(gap=lambda f: f["linear"] - f["identity"])
    for model, rows in joined.groupby("model"):
        rho, p = (scipy.stats.spearmanr(rows["gap"], rows["similarity"]) if len(rows) >= 3
                  else (np.nan, np.nan))
        joined.loc[rows.index, ["rho", "p_value"]] = [rho, p]
    return joined[["model", "layer", "identity", "linear", "gap", "similarity", "rho",
                   "p_value"]].reset_index(drop=True)


_CORRELATED = ["cka_debiased_to_last", "cka_to_last", "cosine_to_last"]


def spearman_table(layers: pd.DataFrame, models: Sequence[str] | None = None) -> pd.DataFrame:
    """Spearman's rho of each similarity to the last hidden state with RQ1's top-1, per model as
    loaded (:func:`relate_to_reconstruction`; chapter RQ2, beyond the paper).

    Args:
        layers: :attr:`SimilarityReport.layers` with ``top1`` (``baseline`` rows are used).
        models: the models, in this order; default: in the order of ``layers``.

    Returns:
        Index ``(model, similarity)``, similarity ``cka_debiased_to_last``, ``cka_to_last``,
        ``cosine_to_last`` and ``depth`` (the index itself); columns ``rho``, ``p_value``,
        ``n_layers``, ``rho_given_depth``, ``p_value_given_depth`` (NaN where undefined).
    """
    baseline = layers[layers["duplication"] == "baseline"]
    if models is None:
        models = list(dict.fromkeys(baseline["model"]))
    correlations = []
    for name in models:
        rows = baseline[baseline["model"] == name]
        similarity = rows[["layer", *_CORRELATED]].assign(depth=rows["layer"])
        _, rho = relate_to_reconstruction(similarity, rows[["layer", "top1"]])
        for measure, result in rho.items():
            correlations.append({"model": name, "similarity": measure, **result})
    return pd.DataFrame(correlations).set_index(["model", "similarity"])
