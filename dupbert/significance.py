"""RQ3/RQ4 statistics: mean ± confidence interval over seeds, paired gains against each
configuration's reference with the same seeds, the pre-registered primary/secondary split with
Holm's correction on the secondaries, the exact smallest detectable gain, and the verdict rule.

The paper (Kao et al. 2020, section 5) reports single numbers; a one-seed replication cannot
separate gains of a few tenths of a point from seed noise, so every comparison here is paired
by seed: gain_s = metric(configuration, seed s) - metric(reference, seed s).

Pre-registration (RQ3 chapter, "The study, fixed before the runs"): per model and task, one
*primary* comparison (the paper's configuration against the baseline) is tested at level
``ALPHA`` with no multiplicity penalty; every other configuration is *secondary*, and the
secondaries of a model, task and metric form one Holm family (every test counted, also those
that could not be computed).
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
    """``values`` as a 1-D float array, if it is a list (tuple, array, Series) of numbers.

    Raises:
        ParameterError: a string, a mapping, a scalar or a nested list; an item that is not a
            number (a string, a bool, None); a NaN (unless ``nan``) or infinite item. The
            message names ``name``, the item and its position.
    """
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
    """Mean, sample standard deviation and the two-sided Student-t confidence interval.

    Args:
        values: a list (array, Series) of finite numbers.
        confidence: the interval's level, strictly between 0 and 1 (``0.95``, not ``95``).

    Returns:
        ``{"n", "mean", "std", "ci_low", "ci_high"}`` in the units of ``values``; with one
        value the std and the interval are NaN; with zero spread the interval is the mean.

    Raises:
        ValueError: no values.
        ParameterError (a ValueError): ``values`` is a string or not a list of numbers, holds
            NaN or infinity (``values must be finite numbers: item 1 is nan``); ``confidence``
            not in (0, 1) (``confidence must be a number > 0 and < 1, got 95``).
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


def paired_p_value(differences: Sequence[float]) -> float:
    """Two-sided p-value of the paired t-test on per-seed differences (H0: mean 0).

    Zero spread is decided, not left as NaN: every difference 0 -> ``1.0``; every difference
    the same non-zero value -> ``0.0`` (the t statistic is infinite: the configuration changed
    every seed's result by exactly that much). Fewer than 2 differences -> NaN (no test).

    Raises:
        ParameterError (a ValueError): ``differences`` is a string or not a list of numbers, or
            holds NaN or infinity (a missing pair is left out before, never passed as NaN).
    """
    d = _numbers("differences", differences)
    if d.size < 2:
        return float("nan")
    if np.ptp(d) == 0:
        return 1.0 if d[0] == 0 else 0.0
    return float(stats.ttest_1samp(d, 0.0).pvalue)


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (Holm 1979), in the input order.

    The family has ``m = len(p_values)`` tests, *including* those whose p-value is NaN (a test
    that could not be computed still counts: dropping it would make the others look better);
    NaN p-values rank last and stay NaN. The i-th smallest p-value is multiplied by
    ``m - i + 1`` (i from 1), made monotone, capped at 1.

    Raises:
        ParameterError (a ValueError): ``p_values`` is a string or not a list of numbers, or
            holds a value outside [0, 1] (``p_values must be in [0, 1] (NaN for a test not
            computed): item 0 is 5.0``) or an infinite one.
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
    """Power of the two-sided paired t-test at level ``alpha`` over ``n_seeds`` pairs when the
    true mean difference is ``gain`` (exact: noncentral t with df = n - 1 and noncentrality
    ``gain * sqrt(n) / sd``).

    Raises:
        ParameterError (a ValueError): ``gain`` not a finite number; ``std_of_differences`` not
            > 0; ``n_seeds`` not an integer >= 2; ``alpha`` not in (0, 1).
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
    """The smallest true paired gain that a two-sided paired t-test over ``n_seeds`` seeds
    detects with probability ``power``, after the multiplicity correction actually applied.

    Exact, not the normal approximation: the gain solves :func:`paired_t_power` = ``power`` at
    level ``alpha / n_tests`` (the noncentral t distribution). ``n_tests`` is 1 for the primary
    comparison; for a secondary one it is the size of its Holm family, whose strictest step is
    ``alpha / m``, so a gain this large is detected whatever the other p-values are.

    Returns:
        The gain in the metric's units; ``0.0`` when the differences have no spread (any
        non-zero gain is detected); NaN for fewer than 2 seeds or a NaN (or None) std.

    Raises:
        ParameterError (a ValueError): ``alpha`` or ``power`` not in (0, 1) (``power must be a
            number > 0 and < 1, got 80``: a power of 1 is never reached); ``power`` not above
            the test's level ``alpha / n_tests`` (the power at a gain of 0); ``n_tests`` not an
            integer >= 1; ``n_seeds`` not an integer >= 0; a std that is negative or not a
            number.
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
    """The largest standard deviation of the per-seed differences at which a "no gain" claim
    can still be reproduced over ``n_seeds`` seeds: the rule of :func:`verdict` needs the whole
    95% t interval within ``±margin``, i.e. a half-width ``t(0.975, n-1) * sd / sqrt(n) <=
    margin`` (reached only when, besides, the mean difference is 0). A smallest detectable
    *gain* says nothing about such a claim; this is its counterpart.

    Args:
        n_seeds: paired seeds (>= 2).
        margin: the equivalence margin, in the metric's units (points), > 0.
        confidence: the interval's level, in (0, 1).

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
    """Refuse a ``frame`` that is not a DataFrame, lacks one of ``columns``, or (``metric``
    given) lacks the metric's column, holds a non-number in it, or a NaN in it (a run without
    the metric it is judged on: leaving it out would silently change the seeds compared)."""
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
    """Refuse a frame in which some configuration has two runs with the same seed.

    Such rows come from different settings (hyper-parameters, subsets, data source) and must
    never be pooled into one mean: select one setting first (e.g. the run keys of one plan).

    Raises:
        ValueError: names the first duplicated (``by``, duplication, seed) groups.
        ParameterError (a ValueError): ``frame`` not a DataFrame or without a column of
            ``by``, ``duplication``, ``seed``; ``by`` a string or with a column twice.
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
            "Keep the rows of one setting (e.g. dupbert.profiles.planned_run_keys).")


def _group_names(by: Sequence[str], key) -> dict:
    """``{column: value}`` of one group of ``frame.groupby(list(by))`` (its key a tuple, or a
    scalar for one column)."""
    return dict(zip(by, key if isinstance(key, tuple) else (key,)))


def summarize_runs(frame: pd.DataFrame, metric: str,
                   by: Sequence[str] = ("model", "task", "duplication")) -> pd.DataFrame:
    """Mean, std and 95% CI of ``metric`` over seeds, one row per group of ``by``.

    Args:
        frame: one row per run, with the columns ``by``, ``seed`` and ``metric``.

    Returns:
        Columns ``by`` + ``n, mean, std, ci_low, ci_high``; a frame with these columns and no
        rows when ``frame`` has its columns but no rows.

    Raises:
        ValueError: two rows of one group share a seed (:func:`check_one_run_per_seed`).
        ParameterError (a ValueError): ``frame`` lacks a column (``by``; ``seed`` when ``by``
            holds ``duplication``; the message lists the missing and the existing ones; a
            frame with no columns: "no runs");
            ``metric`` is not a column (``metric 'acc' is not a column of the frame (did you
            mean 'accuracy'?); its columns are [...]``) or holds a non-number; a run's
            ``metric`` is NaN (the message names the run by ``by`` and ``seed``); ``by`` is a
            string or empty.
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
    """``(configuration, reference, role)`` of one model, task and metric: from the frame's
    ``reference``/``role`` columns where present (see ``dupbert.duplicate.finetune_variants``),
    else every configuration against ``baseline``, all secondary."""
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
    """Refuse a ``family_sizes``/``planned_seeds`` that is not ``{(model, task): integer >= 0}``,
    or one given while ``by`` cannot name a model and task."""
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
            optional ``reference`` (the configuration it is compared with, e.g. ``unshared
            baseline`` for unshared ALBERT variants) and ``role`` (``primary``/``secondary``).
            Without them every configuration is a secondary comparison with ``baseline``.
        baseline: the default reference.
        family_sizes: ``{(model, task): m}``, the planned number of secondary comparisons of a
            pre-registered study (``dupbert.profiles.planned_family_sizes``; ``by`` must then
            hold ``model`` and ``task``): while some have not landed, Holm and the detectable
            gain still count all ``m`` (the missing ones as NaN p-values, :func:`holm`), so a
            partial family never looks stronger than the planned one. ``None``: the family is
            the secondary comparisons present.
        planned_seeds: ``{(model, task): seeds}`` of that study (``by`` must hold ``model`` and
            ``task``): a secondary comparison with fewer seed pairs enters Holm as NaN (a test
            of the family not yet done) and gets no ``p_adjusted``, so that its partial p-value
            never moves the verdict of a complete one.

    Returns:
        One row per (``by``, configuration): ``reference``, ``role``, ``n_pairs``, ``gain`` (mean
        paired difference, metric units), ``gain_ci_low``, ``gain_ci_high`` (95% t interval),
        ``p_value`` (two-sided paired t-test, :func:`paired_p_value`), ``n_tests`` (1 for the
        primary, else the size of the group's secondary family: those present, or the planned
        ``m`` where larger), ``bonferroni_confidence``, ``bonferroni_ci_low``,
        ``bonferroni_ci_high`` (the t interval at ``1 - ALPHA / n_tests``: 95% for the primary,
        the Bonferroni level ``1 - 0.05/m`` for a secondary of a family of ``m``, shown beside
        a Holm p-value, where the 95% interval would look more decisive than the test; a
        simultaneous interval, conservative: Holm's later steps test at ``ALPHA / (m - k)``, so
        it can cover 0 for a secondary that Holm finds significant; the verdict reads the
        pre-registered 95% interval, ``gain_ci_*``), ``p_adjusted`` (the primary's own p; Holm
        over the secondary family of each group of ``by``; NaN for a secondary short of its
        planned seeds),
        ``min_detectable_gain`` (80% power at ``ALPHA / n_tests``) and ``significant``
        (``p_adjusted < ALPHA``). Seeds missing on either side are left out of the pair; a
        reference with no run gives ``n_pairs`` 0. A frame with its columns but no rows, or
        with no comparison (the baseline alone), gives ``by`` + :data:`GAIN_COLUMNS` and no
        rows.

    Raises:
        ValueError: a configuration has two runs with one seed (:func:`check_one_run_per_seed`).
        ParameterError (a ValueError): as :func:`summarize_runs` for the frame, ``metric`` (a
            run whose metric is NaN is refused, never dropped from its pair) and ``by``;
            ``family_sizes`` or ``planned_seeds`` not a mapping of integers >= 0, or given
            while ``by`` lacks ``model`` or ``task``.
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
    (:func:`dupbert.paper.learning_status`).
    """
    # This docstring is the pre-registered rule: the RQ3 chapter prints it, so it must not change.
    # ``claimed_gain`` comes from dupbert.paper.CLAIMS (gains >= 0 or None), not from users.
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
