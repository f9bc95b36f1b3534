"""Intervals with both sources of error (dupbert.study.variance): the seed-only part equals the
registered paired t-interval, the crossed-design estimate matches a hand computation, and the
committed study's evaluation-set errors are what the RQ3 chapter reports."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dupbert.study import variance
from dupbert.core.errors import ParameterError
from dupbert.core.significance import mean_ci

REPO = Path(__file__).resolve().parents[1]


def test_the_seed_only_interval_is_the_paired_t_interval_over_per_seed_means():
    d = np.random.default_rng(0).normal(0.3, 1.0, size=(5, 40))
    out = variance.two_way(d)
    reference = mean_ci(d.mean(1))
    assert out["gain"] == pytest.approx(reference["mean"])
    assert (out["seed_low"], out["seed_high"]) == pytest.approx(
        (reference["ci_low"], reference["ci_high"]))
    assert out["two_way_low"] <= out["seed_low"] and out["two_way_high"] >= out["seed_high"]


def test_the_crossed_design_estimate_by_hand():
    # seeds 2 x examples 3: seed means 1, 2; example means 1, 1.5, 2; grand 1.5
    d = np.array([[0.0, 1.0, 2.0], [2.0, 2.0, 2.0]])
    ms_seed = 3 * ((1 - 1.5) ** 2 + (2 - 1.5) ** 2) / 1  # 1.5
    ms_example = 2 * ((1 - 1.5) ** 2 + 0 + (2 - 1.5) ** 2) / 2  # 0.5
    residual = d - np.array([[1.0], [2.0]]) - np.array([[1.0, 1.5, 2.0]]) + 1.5
    ms_residual = (residual ** 2).sum() / 2  # 0.5
    out = variance.two_way(d)
    assert out["se_two_way"] == pytest.approx(np.sqrt((ms_seed + ms_example - ms_residual) / 6))
    assert out["se_example"] == pytest.approx(0.0)  # MS_example = MS_residual: no example part
    assert out["df"] == pytest.approx(1.5 ** 2 / (1.5 ** 2 + 0.5 ** 2 / 2 + 0.5 ** 2 / 2))


def test_bad_differences_are_refused():
    with pytest.raises(ParameterError, match=r"\[seeds, examples\].*shape \(3,\)"):
        variance.two_way([1.0, 2.0, 3.0])
    with pytest.raises(ParameterError, match="finite"):
        variance.two_way([[1.0, np.nan], [0.0, 1.0]])


def test_a_borrowed_error_never_narrows_the_seed_only_interval():
    low, high = variance.widened(1.0, 0.0, 2.0, 8, 0.0)
    assert (low, high) == pytest.approx((0.0, 2.0))
    low, high = variance.widened(1.0, 0.0, 2.0, 8, 0.5)
    assert low < 0.0 and high > 2.0 and high - 1.0 == pytest.approx(1.0 - low)


@pytest.mark.parametrize("low, high, verdict", [
    (0.1, 0.7, "reproduced"), (0.1, 0.5, "smaller than claimed"), (-0.3, 0.2, "refuted"),
    (-0.3, 0.8, "undecided"), (-1.0, -0.2, "refuted"), (0.7, 1.2, "reproduced")])
def test_the_symmetric_rule(low, high, verdict):
    assert variance.symmetric_verdict(low, high, 0.6) == verdict
    assert variance.symmetric_verdict(low, high, 0.0) is None
    assert variance.symmetric_verdict(low, high, None) is None


def test_the_committed_studys_evaluation_set_errors():
    """all-MiniLM-L6-v2, copy first 3 against the baseline, 8 seeds: the evaluation set alone
    leaves 0.19 points on SNLI (5,000 pairs) and 0.43 on SST-2 (872 sentences), so SST-2's
    claim of no gain cannot be shown within 0.5 at any number of seeds."""
    from dupbert.study import comparisons
    from dupbert.core.results import ResultsFile

    results = ResultsFile(REPO / "results/cpu/rq3.jsonl").frame()
    table = variance.two_way_table(comparisons.comparison(results), results,
                                   REPO / "results/cpu/rq3-outputs")
    cells = table.set_index(["model", "task", "duplication"])
    snli = cells.loc[("all-MiniLM-L6-v2", "snli", "copy first 3")]
    sst2 = cells.loc[("all-MiniLM-L6-v2", "sst2", "copy first 3")]
    assert round(snli.se_example, 3) == 0.189 and round(sst2.se_example, 3) == 0.426
    assert (round(snli.two_way_low, 2), round(snli.two_way_high, 2)) == (-0.21, 0.85)
    assert (snli.verdict, snli.verdict_two_way) == ("undecided", "undecided")
    assert (sst2.verdict, sst2.verdict_two_way) == ("undecided", variance.UNDECIDABLE)
    assert round(sst2.decidable_margin, 2) == 0.83
    assert table["two_way_low"].notna().all() and len(table) == 14  # every cell its own outputs
