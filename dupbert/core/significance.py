"""RQ3/RQ4 statistics (Kao et al. 2020, section 5): mean ± CI over seeds, paired gains against
each configuration's reference on the same seeds, Holm's correction, the smallest detectable
gain and the verdict rule.

Every comparison is paired by seed: gain_s = metric(configuration, s) - metric(reference, s).
Pre-registration (RQ3 chapter): per model and task one *primary* comparison (the paper's
configuration against the baseline) is tested at ``ALPHA``; the other, *secondary*, ones of a
model, task and metric form one Holm family (tests not computed count too).
"""

from __future__ import annotations

import difflib
import numbers
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import optimize, stats

from .checks import check_columns, check_list, check_number, plain_value as _plain
from .errors import ParameterError

ALPHA = 0.05
POWER = 0.8
EQUIVALENCE_MARGIN = 0.5  # points: a "no gain" claim holds when the whole 95% CI lies within ±this
PRIMARY, SECONDARY = "primary", "secondary"


def _numbers(name: str, values, *, nan: bool = False) -> np.ndarray:
    """``values`` as a 1-D float array (NaN allowed if ``nan``), else ParameterError."""
    try:
        array = None if isinstance(values, (str, bytes, Mapping)) else np.asarray(values)
    except (TypeError, ValueError):  # ragged lists
        array = None
    if array is None or array.ndim != 1:
        raise ParameterError(f"{name} must be a list of numbers, got {values!r:.80} "
                             f"({type(values).__name__})")
    if array.dtype.kind not in "iuf" or isinstance(values, (list, tuple)):  # [1, True] is int
        for position, item in enumerate(values if isinstance(values, (list, tuple))
                                        else array.tolist()):
            if item is None or item is pd.NA:
                if nan:
                    continue
                raise ParameterError(f"{name} must be finite numbers: item {position} is {item!r}")
            if isinstance(item, bool) or not isinstance(item, numbers.Real):
                raise ParameterError(f"{name} must hold numbers only: item {position} is "
                                     f"{item!r} ({type(item).__name__})")
        if array.dtype.kind == "O":
            array = np.array([np.nan if item is None or item is pd.NA else item
                              for item in array.tolist()], dtype=float)
    array = array.astype(float)
    bad = np.flatnonzero(np.isinf(array) if nan else ~np.isfinite(array))
    if bad.size:
        allowed = "numbers or NaN, not infinite" if nan else "finite numbers"
        raise ParameterError(f"{name} must be {allowed}: item {int(bad[0])} is {array[bad[0]]}")
    return array


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> dict:
    """Mean, sample standard deviation and two-sided Student-t confidence interval.

    Args:
        confidence: strictly between 0 and 1 (``0.95``, not ``95``).

    Returns:
        ``{"n", "mean", "std", "ci_low", "ci_high"}`` in the units of ``values``; with one
        value the std and the interval are NaN.

    Raises:
        ValueError: no values.
        ParameterError (a ValueError): ``values`` not a list of finite numbers; ``confidence``
            not in (0, 1).
    """
    check_number("confidence", confidence, above=0, below=1)
    values = _numbers("values", values)
    if values.size == 0:
        raise ValueError("mean_ci needs at least one value")
    mean = float(values.mean())
    if values.size < 2:
        return {"n": 1, "mean": mean, "std": np.nan, "ci_low": np.nan, "ci_high": np.nan}
    std = float(values.std(ddof=1))
    half = stats.t.ppf(0.5 + confidence / 2, values.size - 1) * std / np.sqrt(values.size)
    return {"n": int(values.size), "mean": mean, "std": std, "ci_low": mean - half,
            "ci_high": mean + half}


BOOTSTRAP_RESAMPLES = 2000


def ratio_bootstrap(hits: np.ndarray, counts: np.ndarray, confidence: float = 0.95,
                    n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap interval of ``hits.sum(-1) / counts.sum()`` over resampled *sequences*
    (cluster bootstrap: a sequence's tokens stay together, as they are not independent).

    Args:
        hits: ``[S, N]`` hits per row ``s`` (e.g. hidden state) and sequence ``n``.
        counts: ``[N]`` scored tokens per sequence.

    Returns:
        ``(low, high)``, each ``[S]``; NaN where no sequence has a scored token.

    Raises:
        ParameterError (a ValueError): shapes that disagree, or a bad ``confidence``.
    """
    hits, counts = np.atleast_2d(np.asarray(hits, dtype=float)), np.asarray(counts, dtype=float)
    check_number("confidence", confidence, above=0, below=1)
    if hits.shape[-1] != counts.shape[0] or counts.ndim != 1:
        raise ParameterError(f"hits {hits.shape} and counts {counts.shape} disagree: hits must be "
                             "[rows, sequences] and counts [sequences]")
    n = counts.size
    if n == 0 or counts.sum() == 0:
        return np.full(hits.shape[0], np.nan), np.full(hits.shape[0], np.nan)
    rng = np.random.default_rng(seed)
    ratios = []
    for start in range(0, n_resamples, 250):  # weights [<=250, N]: memory bounded for long corpora
        weights = rng.multinomial(n, np.full(n, 1 / n), size=min(250, n_resamples - start))
        denominator = weights @ counts
        ratios.append((weights @ hits.T) / np.where(denominator > 0, denominator, np.nan)[:, None])
    tail = 100 * (1 - confidence) / 2
    low, high = np.nanpercentile(np.concatenate(ratios), [tail, 100 - tail], axis=0)
    return low, high


def paired_p_value(differences: Sequence[float]) -> float:
    """Two-sided p-value of the paired t-test on per-seed differences (H0: mean 0).

    All differences 0 -> ``1.0``; all the same non-zero value -> ``0.0``; fewer than 2 -> NaN.

    Raises:
        ParameterError (a ValueError): ``differences`` not a list of finite numbers (leave a
            missing pair out, never pass NaN).
    """
    d = _numbers("differences", differences)
    if d.size < 2:
        return float("nan")
    if np.ptp(d) == 0:
        return 1.0 if d[0] == 0 else 0.0
    return float(stats.ttest_1samp(d, 0.0).pvalue)


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (Holm 1979), in the input order.

    The family has ``m = len(p_values)`` tests, *including* NaN ones (a test not computed still
    counts); NaN p-values rank last and stay NaN.

    Raises:
        ParameterError (a ValueError): not a list of numbers, or a value outside [0, 1].
    """
    p = _numbers("p_values", p_values, nan=True)
    outside = np.flatnonzero((p < 0) | (p > 1))
    if outside.size:
        raise ParameterError(f"p_values must be in [0, 1] (NaN for a test not computed): item "
                             f"{int(outside[0])} is {p[outside[0]]}")
    adjusted = np.full(p.shape, np.nan)
    m = p.size
    valid = np.flatnonzero(~np.isnan(p))
    order = valid[np.argsort(p[valid], kind="stable")]
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[index]))
        adjusted[index] = running
    return adjusted


def paired_t_power(gain: float, std_of_differences: float, n_seeds: int, alpha: float = ALPHA) -> float:
    """Power of the two-sided paired t-test at ``alpha`` over ``n_seeds`` pairs for a true mean
    difference ``gain`` (exact, noncentral t).

    Raises:
        ParameterError (a ValueError): an argument out of range (``std_of_differences`` > 0,
            ``n_seeds`` >= 2, ``alpha`` in (0, 1)).
    """
    check_number("gain", gain)
    check_number("std_of_differences", std_of_differences, above=0)
    n_seeds = check_number("n_seeds", n_seeds, integer=True, minimum=2)
    check_number("alpha", alpha, above=0, below=1)
    df = n_seeds - 1
    critical = stats.t.ppf(1 - alpha / 2, df)
    noncentrality = abs(gain) * np.sqrt(n_seeds) / std_of_differences
    # the far tail is below 1e-9 wherever scipy's nct returns NaN for it (large noncentrality)
    far = np.nan_to_num(stats.nct.cdf(-critical, df, noncentrality), nan=0.0)
    return float(stats.nct.sf(critical, df, noncentrality) + far)


def minimum_detectable_gain(std_of_differences: float, n_seeds: int, alpha: float = ALPHA,
                            power: float = POWER, n_tests: int = 1) -> float:
    """The smallest true paired gain that a two-sided paired t-test over ``n_seeds`` seeds detects
    with probability ``power`` at level ``alpha / n_tests`` (exact, via :func:`paired_t_power`).

    ``n_tests`` is 1 for the primary comparison, the Holm family's size for a secondary one (its
    strictest step).

    Returns:
        The gain in the metric's units; ``0.0`` when the differences have no spread; NaN for
        fewer than 2 seeds or a NaN (or None) std.

    Raises:
        ParameterError (a ValueError): ``alpha`` or ``power`` not in (0, 1), ``power`` not above
            ``alpha / n_tests``, or another argument out of range.
    """
    check_number("alpha", alpha, above=0, below=1)
    check_number("power", power, above=0, below=1)
    n_tests = check_number("n_tests", n_tests, integer=True, minimum=1)
    level = alpha / n_tests
    if power <= level:
        raise ParameterError(f"power must be above the test's level alpha / n_tests = {level:g} "
                             f"(the power at a gain of 0), got {power!r}")
    n_seeds = check_number("n_seeds", n_seeds, integer=True, minimum=0)
    if std_of_differences is None or (isinstance(std_of_differences, numbers.Real)
                                      and np.isnan(std_of_differences)):
        return float("nan")
    check_number("std_of_differences", std_of_differences, minimum=0)
    if n_seeds < 2:
        return float("nan")
    if std_of_differences == 0:
        return 0.0

    def shortfall(gain_in_sd: float) -> float:
        return paired_t_power(gain_in_sd, 1.0, n_seeds, level) - power

    upper = 1.0
    while shortfall(upper) < 0:
        upper *= 2
    return float(optimize.brentq(shortfall, 0.0, upper, xtol=1e-10) * std_of_differences)


def equivalence_sd_limit(n_seeds: int, margin: float = EQUIVALENCE_MARGIN,
                         confidence: float = 0.95) -> float:
    """The largest standard deviation of the per-seed differences at which a "no gain" claim can
    still be reproduced over ``n_seeds`` seeds (:func:`verdict`: the whole 95% t interval within
    ``±margin``); the counterpart of :func:`minimum_detectable_gain` for such claims.

    Returns:
        ``margin * sqrt(n) / t(1 - (1 - confidence) / 2, n - 1)`` in the metric's units (0.60
        points at 8 seeds, 0.5 margin); NaN for fewer than 2 seeds.

    Raises:
        ParameterError (a ValueError): ``n_seeds`` not an integer >= 0; ``margin`` not > 0;
            ``confidence`` not in (0, 1).
    """
    n_seeds = check_number("n_seeds", n_seeds, integer=True, minimum=0)
    check_number("margin", margin, above=0)
    check_number("confidence", confidence, above=0, below=1)
    if n_seeds < 2:
        return float("nan")
    return float(margin * np.sqrt(n_seeds) / stats.t.ppf(1 - (1 - confidence) / 2, n_seeds - 1))


def _check_frame(frame, columns: Sequence[str], metric: str | None = None) -> None:
    """Refuse a non-DataFrame, a missing column, or a ``metric`` column with a non-number or NaN."""
    if metric is not None and not isinstance(metric, str):
        raise ParameterError(f"metric must be a column name (a string), got {metric!r}")
    if isinstance(frame, pd.DataFrame) and len(frame.columns) and metric is not None \
            and metric not in frame:
        existing = [str(c) for c in frame.columns]
        close = difflib.get_close_matches(metric, existing, n=1, cutoff=0.5)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ParameterError(f"metric {metric!r} is not a column of the frame{hint}; its "
                             f"columns are {list(frame.columns)}")
    check_columns(frame, [*columns, *([metric] if metric is not None else [])], "the frame")
    if metric is None:
        return
    if frame.empty:  # e.g. pd.DataFrame(columns=[...]): object dtype, and nothing to average
        return
    if not pd.api.types.is_numeric_dtype(frame[metric]) or pd.api.types.is_bool_dtype(frame[metric]):
        raise ParameterError(f"metric {metric!r} must be a column of numbers, got dtype "
                             f"{frame[metric].dtype}")
    undefined = frame[frame[metric].isna()]
    if not undefined.empty:
        first = undefined.iloc[0]
        run = ", ".join(f"{c} {_plain(first[c])!r}" for c in columns)
        more = f" (and {len(undefined) - 1} more)" if len(undefined) > 1 else ""
        raise ParameterError(f"{metric} is NaN for the run with {run}{more}: a run without its "
                             f"metric cannot be averaged or paired (leaving it out would change "
                             f"the seeds compared); re-run it or drop its row")


def check_one_run_per_seed(frame: pd.DataFrame, by: Sequence[str]) -> None:
    """Refuse a frame in which some configuration has two runs with the same seed (runs of
    different settings must never be pooled).

    Raises:
        ValueError: names the first duplicated (``by``, duplication, seed) groups.
        ParameterError (a ValueError): ``frame`` not a DataFrame or lacking a column.
    """
    by = check_list("by", by, what="column names", allow_empty=True)
    keys = [*by, "duplication", "seed"]
    _check_frame(frame, keys)
    duplicated = frame[frame.duplicated(keys, keep=False)]
    if not duplicated.empty:
        examples = duplicated[keys].drop_duplicates().head(3).to_dict("records")
        raise ValueError(
            f"{len(duplicated)} rows share (configuration, seed) with another row, e.g. {examples}: "
            "runs of different settings (hyper-parameters, subsets, data source) cannot be pooled. "
            "Keep the rows of one setting (e.g. dupbert.study.sweeps.planned_run_keys).")


def _group_names(by: Sequence[str], key) -> dict:
    """``{column: value}`` of one group key of ``frame.groupby(list(by))``."""
    return dict(zip(by, key if isinstance(key, tuple) else (key,)))


def summarize_runs(frame: pd.DataFrame, metric: str,
                   by: Sequence[str] = ("model", "task", "duplication")) -> pd.DataFrame:
    """Mean, std and 95% CI of ``metric`` over seeds, one row per group of ``by``.

    Args:
        frame: one row per run, with the columns ``by``, ``seed`` and ``metric``.

    Returns:
        Columns ``by`` + ``n, mean, std, ci_low, ci_high`` (no rows for a frame without rows).

    Raises:
        ValueError: two rows of one group share a seed (:func:`check_one_run_per_seed`).
        ParameterError (a ValueError): a missing column, ``metric`` not a numeric column (the
            message suggests a close name), a run whose ``metric`` is NaN, ``by`` a string or
            empty.
    """
    by = check_list("by", by, what="column names")
    _check_frame(frame, [*by, *(["seed"] if "duplication" in by and "seed" not in by else [])],
                 metric)
    group_keys = [c for c in by if c != "duplication"]
    if "duplication" in by:
        check_one_run_per_seed(frame, group_keys)
    rows = [{**_group_names(by, key),
             **mean_ci(group[metric])}
            for key, group in frame.groupby(list(by), sort=False)]
    return pd.DataFrame(rows, columns=[*by, "n", "mean", "std", "ci_low", "ci_high"])


def _comparisons(group: pd.DataFrame, baseline: str) -> list[tuple[str, str, str]]:
    """``(configuration, reference, role)`` per configuration: from ``reference``/``role``
    columns, else each against ``baseline``, secondary."""
    out = []
    for configuration, rows in group.groupby("duplication", sort=False):
        first = rows.iloc[0]
        reference = first["reference"] if "reference" in rows and pd.notna(first["reference"]) \
            else (None if configuration == baseline else baseline)
        role = first["role"] if "role" in rows and pd.notna(first["role"]) else SECONDARY
        if reference is not None and reference != configuration:
            out.append((configuration, reference, role))
    return out


GAIN_COLUMNS = ["duplication", "reference", "role", "n_pairs", "gain", "gain_ci_low",
                "gain_ci_high", "p_value", "n_tests", "bonferroni_confidence", "bonferroni_ci_low",
                "bonferroni_ci_high", "min_detectable_gain", "p_adjusted", "significant"]
"""The columns of :func:`paired_gains` after its ``by`` columns."""


def _check_plan(name: str, plan: Mapping | None, by: Sequence[str]) -> None:
    """Refuse a plan not ``{(model, task): integer >= 0}``, or while ``by`` lacks model or task."""
    if plan is None:
        return
    if not isinstance(plan, Mapping):
        raise ParameterError(f"{name} must be a mapping {{(model, task): number}}, got "
                             f"{plan!r:.80} ({type(plan).__name__})")
    if plan and ("model" not in by or "task" not in by):
        raise ParameterError(f"{name} is given per (model, task), so by must hold 'model' and "
                             f"'task', got by={list(by)}")
    for key, value in plan.items():
        check_number(f"{name}[{key!r}]", value, integer=True, minimum=0)


def paired_gains(frame: pd.DataFrame, metric: str, baseline: str = "baseline",
                 by: Sequence[str] = ("model", "task"),
                 family_sizes: Mapping[tuple[str, str], int] | None = None,
                 planned_seeds: Mapping[tuple[str, str], int] | None = None) -> pd.DataFrame:
    """Every configuration against its reference on the same seeds (paired t-test).

    Args:
        frame: one row per run with columns ``by``, ``duplication``, ``seed`` and ``metric``;
            optional ``reference`` and ``role`` (``primary``/``secondary``), as
            ``dupbert.tools.duplicate.finetune_variants`` gives; without them every configuration is a
            secondary comparison with ``baseline``.
        baseline: the default reference.
        family_sizes: ``{(model, task): m}``, the planned number of secondary comparisons
            (``dupbert.study.profiles.planned_family_sizes``): Holm and the detectable gain count all
            ``m``, the missing ones as NaN, so a partial family never looks stronger. ``None``:
            the secondaries present.
        planned_seeds: ``{(model, task): seeds}``: a secondary with fewer seed pairs enters Holm
            as NaN and gets no ``p_adjusted``.

    Returns:
        One row per (``by``, configuration), columns :data:`GAIN_COLUMNS`: ``n_pairs``, ``gain``
        (mean paired difference, metric units), ``gain_ci_low/high`` (95% t interval, the one the
        verdict reads), ``p_value`` (:func:`paired_p_value`), ``n_tests`` (1 for the primary,
        else the family size), ``bonferroni_confidence`` and ``bonferroni_ci_low/high`` (the t
        interval at ``1 - ALPHA / n_tests``; methods.md), ``min_detectable_gain`` (80% power at
        ``ALPHA / n_tests``), ``p_adjusted`` (the primary's own p; Holm over each secondary
        family) and ``significant`` (``p_adjusted < ALPHA``). Seeds missing on either side are
        left out of the pair. No comparison: the columns and no rows.

    Raises:
        ValueError: a configuration has two runs with one seed (:func:`check_one_run_per_seed`).
        ParameterError (a ValueError): as :func:`summarize_runs`; ``family_sizes`` or
            ``planned_seeds`` not a mapping of integers >= 0, or given while ``by`` lacks
            ``model`` or ``task``.
    """
    by = check_list("by", by, what="column names")
    _check_frame(frame, [*by, *[c for c in ("duplication", "seed") if c not in by]], metric)
    for name, plan in (("family_sizes", family_sizes), ("planned_seeds", planned_seeds)):
        _check_plan(name, plan, by)
    check_one_run_per_seed(frame, by)
    rows = []
    for key, group in frame.groupby(list(by), sort=False):
        wide = group.pivot_table(index="seed", columns="duplication", values=metric)
        comparisons = _comparisons(group, baseline)
        n_secondary = sum(role != PRIMARY for _, _, role in comparisons)
        if family_sizes:
            named = _group_names(by, key)
            n_secondary = max(n_secondary, family_sizes.get((named["model"], named["task"]), 0))
        for configuration, reference, role in comparisons:
            if reference in wide:
                pairs = wide[[reference, configuration]].dropna()
                difference = (pairs[configuration] - pairs[reference]).to_numpy()
            else:
                difference = np.array([])
            n_tests = 1 if role == PRIMARY else n_secondary
            nothing = {"n": 0, "mean": np.nan, "std": np.nan, "ci_low": np.nan, "ci_high": np.nan}
            summary = mean_ci(difference) if difference.size else nothing
            family = mean_ci(difference, 1 - ALPHA / n_tests) if difference.size else nothing
            rows.append({
                **_group_names(by, key),
                "duplication": configuration, "reference": reference, "role": role,
                "n_pairs": summary["n"], "gain": summary["mean"],
                "gain_ci_low": summary["ci_low"], "gain_ci_high": summary["ci_high"],
                "p_value": paired_p_value(difference), "n_tests": n_tests,
                "bonferroni_confidence": 1 - ALPHA / n_tests, "bonferroni_ci_low": family["ci_low"],
                "bonferroni_ci_high": family["ci_high"],
                "min_detectable_gain": minimum_detectable_gain(summary["std"], summary["n"],
                                                               n_tests=n_tests),
            })
    result = pd.DataFrame(rows)
    if result.empty:
        return pd.DataFrame(columns=[*by, *GAIN_COLUMNS])
    result["p_adjusted"] = result["p_value"]
    for key, index in result[result["role"] != PRIMARY].groupby(list(by), sort=False).groups.items():
        landed = result.loc[index, "p_value"].to_numpy(float).copy()
        if planned_seeds:
            named = _group_names(by, key)
            planned = planned_seeds.get((named["model"], named["task"]), 0)
            landed[result.loc[index, "n_pairs"].to_numpy() < planned] = np.nan  # not yet a test
        missing = int(result.loc[index, "n_tests"].max()) - len(landed)  # planned, not landed
        result.loc[index, "p_adjusted"] = holm([*landed, *[np.nan] * missing])[:len(landed)]
    result["significant"] = result["p_adjusted"] < ALPHA
    return result


def verdict(gain: float, ci_low: float, ci_high: float, p_adjusted: float,
            claimed_gain: float | None) -> str:
    """The verdict rule, fixed before any run and printed in the RQ3 notebook.

    All numbers in percentage points (accuracy × 100, SQuAD EM/F1 as they are); ``p_adjusted``
    is the primary comparison's own p-value, a secondary one's Holm-adjusted p-value.

    - The paper claims a gain of (up to) ``claimed_gain > 0``: ``reproduced`` when the gain is
      positive and significant (p < 0.05), also when it is significantly smaller than claimed
      ("up to" states the best case; the size is reported beside the verdict); ``refuted`` when
      the gain is significantly negative, or when it is not significant and the 95% CI's upper
      end lies below ``claimed_gain`` (the data exclude a gain as large as claimed); otherwise
      ``undecided``.
    - The paper claims no gain (``claimed_gain == 0``): ``refuted`` when the difference is
      significant (either sign); ``reproduced`` when the whole 95% CI lies within ±0.5 points
      (``EQUIVALENCE_MARGIN``, ends included); otherwise ``undecided``.
    - ``claimed_gain is None``: the paper states nothing for this case: ``not stated``.

    The caller decides first whether the comparison may be judged at all: a baseline that did
    not beat the trivial baseline by the pre-registered floor gives ``did not learn``
    (:func:`dupbert.study.paper.learning_status`).
    """
    # This docstring is the pre-registered rule: the RQ3 chapter prints it, so it must not change.
    # ``claimed_gain`` comes from dupbert.study.paper.CLAIMS (gains >= 0 or None), not from users.
    if claimed_gain is None:
        return "not stated"
    significant = bool(p_adjusted < ALPHA) if not np.isnan(p_adjusted) else False
    if claimed_gain > 0:
        if significant:
            return "reproduced" if gain > 0 else "refuted"
        if not np.isnan(ci_high) and ci_high < claimed_gain:
            return "refuted"
        return "undecided"
    if significant:
        return "refuted"
    if (not np.isnan(ci_low) and -EQUIVALENCE_MARGIN <= ci_low
            and ci_high <= EQUIVALENCE_MARGIN):
        return "reproduced"
    return "undecided"
