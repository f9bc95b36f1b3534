"""RQ3/RQ4 statistics: mean ± confidence interval over seeds, paired gains against the
baseline with the same seeds, Holm-corrected p-values, and the verdict rule.

The paper (Kao et al. 2020, section 5) reports single numbers; a one-seed replication cannot
separate gains of a few tenths of a point from seed noise, so every comparison here is paired
by seed: gain_s = metric(configuration, seed s) - metric(baseline, seed s).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

ALPHA = 0.05


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> dict:
    """Mean, sample standard deviation and the two-sided Student-t confidence interval.

    Returns:
        ``{"n", "mean", "std", "ci_low", "ci_high"}`` in the units of ``values``; with one
        value the std and the interval are NaN.

    Raises:
        ValueError: no values.
    """
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        raise ValueError("mean_ci needs at least one value")
    mean = float(values.mean())
    if values.size < 2:
        return {"n": 1, "mean": mean, "std": np.nan, "ci_low": np.nan, "ci_high": np.nan}
    std = float(values.std(ddof=1))
    half = stats.t.ppf(0.5 + confidence / 2, values.size - 1) * std / np.sqrt(values.size)
    return {"n": int(values.size), "mean": mean, "std": std, "ci_low": mean - half,
            "ci_high": mean + half}


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (Holm 1979), in the input order; NaN stays NaN.

    The i-th smallest of m p-values is multiplied by (m - i + 1), made monotone, capped at 1.
    """
    p = np.asarray(p_values, dtype=float)
    adjusted = np.full(p.shape, np.nan)
    valid = np.flatnonzero(~np.isnan(p))
    order = valid[np.argsort(p[valid], kind="stable")]
    m = order.size
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[index]))
        adjusted[index] = running
    return adjusted


def minimum_detectable_gain(std_of_differences: float, n_seeds: int, alpha: float = ALPHA,
                            power: float = 0.8) -> float:
    """The smallest true paired gain that a two-sided paired t-test over ``n_seeds`` seeds
    detects with probability ``power``: (t_{1-α/2} + t_{power}) · sd / √n, df = n - 1.

    Returns:
        The gain in the metric's units; NaN for fewer than 2 seeds.
    """
    if n_seeds < 2:
        return float("nan")
    df = n_seeds - 1
    return float((stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(power, df))
                 * std_of_differences / np.sqrt(n_seeds))


def summarize_runs(frame: pd.DataFrame, metric: str,
                   by: Sequence[str] = ("model", "task", "duplication")) -> pd.DataFrame:
    """Mean, std and 95% CI of ``metric`` over seeds, one row per group of ``by``.

    Args:
        frame: one row per run, with the columns ``by``, ``seed`` and ``metric``.

    Returns:
        Columns ``by`` + ``n, mean, std, ci_low, ci_high``.
    """
    rows = [{**dict(zip(by, key if isinstance(key, tuple) else (key,))),
             **mean_ci(group[metric])}
            for key, group in frame.groupby(list(by), sort=False)]
    return pd.DataFrame(rows)


def paired_gains(frame: pd.DataFrame, metric: str, baseline: str = "baseline",
                 by: Sequence[str] = ("model", "task")) -> pd.DataFrame:
    """Every configuration against ``baseline`` on the same seeds (paired t-test).

    Args:
        frame: one row per run with columns ``by``, ``duplication``, ``seed`` and ``metric``.
        baseline: the ``duplication`` value of the baseline.

    Returns:
        One row per (``by``, configuration): ``n_pairs``, ``gain`` (mean paired difference,
        metric units), ``gain_ci_low``, ``gain_ci_high`` (95% t interval), ``p_value``
        (two-sided paired t-test, ``scipy.stats.ttest_rel``), ``p_holm`` (Holm-adjusted within
        each group of ``by``), ``min_detectable_gain`` (80% power) and ``significant``
        (``p_holm < 0.05``). Seeds missing for either side are left out of the pair.
    """
    rows = []
    for key, group in frame.groupby(list(by), sort=False):
        wide = group.pivot_table(index="seed", columns="duplication", values=metric)
        if baseline not in wide:
            continue
        for configuration in [c for c in group["duplication"].unique() if c != baseline]:
            pairs = wide[[baseline, configuration]].dropna()
            difference = (pairs[configuration] - pairs[baseline]).to_numpy()
            summary = mean_ci(difference) if difference.size else {"n": 0, "mean": np.nan,
                                                                   "std": np.nan,
                                                                   "ci_low": np.nan,
                                                                   "ci_high": np.nan}
            p_value = (float(stats.ttest_rel(pairs[configuration], pairs[baseline]).pvalue)
                       if difference.size >= 2 and np.ptp(difference) > 0 else np.nan)
            rows.append({
                **dict(zip(by, key if isinstance(key, tuple) else (key,))),
                "duplication": configuration, "n_pairs": summary["n"], "gain": summary["mean"],
                "gain_ci_low": summary["ci_low"], "gain_ci_high": summary["ci_high"],
                "p_value": p_value,
                "min_detectable_gain": minimum_detectable_gain(summary["std"], summary["n"]),
            })
    result = pd.DataFrame(rows)
    if result.empty:
        return result
    result["p_holm"] = np.nan
    for _, index in result.groupby(list(by), sort=False).groups.items():
        result.loc[index, "p_holm"] = holm(result.loc[index, "p_value"])
    result["significant"] = result["p_holm"] < ALPHA
    return result


def verdict(gain: float, ci_low: float, ci_high: float, p_holm: float,
            claimed_gain: float | None) -> str:
    """The verdict rule, fixed before any run and printed in the RQ3 notebook.

    All numbers in percentage points (accuracy × 100, SQuAD EM/F1 as they are).

    - The paper claims a gain of ``claimed_gain > 0``: ``reproduced`` when the gain is positive
      and significant (Holm-adjusted p < 0.05); ``refuted`` when it is not, and the 95% CI's
      upper end lies below ``claimed_gain`` (the data exclude a gain as large as claimed);
      otherwise ``undecided``.
    - The paper claims no gain (``claimed_gain == 0``): ``refuted`` when the difference is
      significant (either sign); ``reproduced`` when the whole CI lies within ±0.5 points;
      otherwise ``undecided``.
    - ``claimed_gain is None``: the paper states nothing for this case: ``not stated``.
    """
    if claimed_gain is None:
        return "not stated"
    significant = p_holm < ALPHA if not np.isnan(p_holm) else False
    if claimed_gain > 0:
        if significant and gain > 0:
            return "reproduced"
        if not np.isnan(ci_high) and ci_high < claimed_gain:
            return "refuted"
        return "undecided"
    if significant:
        return "refuted"
    if not np.isnan(ci_low) and -0.5 <= ci_low and ci_high <= 0.5:
        return "reproduced"
    return "undecided"
