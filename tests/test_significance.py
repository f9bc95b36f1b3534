"""Paired statistics over seeds: intervals, Holm, detectable gains and the verdict rule."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dupbert.significance import (holm, mean_ci, minimum_detectable_gain, paired_gains,
                                  summarize_runs, verdict)


def test_mean_ci_is_the_student_t_interval():
    summary = mean_ci([1.0, 2.0, 3.0, 4.0])
    low, high = stats.t.interval(0.95, 3, loc=2.5, scale=stats.sem([1, 2, 3, 4]))
    assert summary["mean"] == 2.5 and summary["n"] == 4
    assert summary["ci_low"] == pytest.approx(low) and summary["ci_high"] == pytest.approx(high)
    assert np.isnan(mean_ci([7.0])["ci_low"])
    with pytest.raises(ValueError, match="at least one value"):
        mean_ci([])


def test_holm_matches_the_textbook_example():
    # Holm (1979) style: sorted p 0.01, 0.02, 0.03, 0.04 with m = 4 -> 0.04, 0.06, 0.06, 0.06
    adjusted = holm([0.03, 0.01, 0.04, 0.02])
    np.testing.assert_allclose(adjusted, [0.06, 0.04, 0.06, 0.06])
    np.testing.assert_allclose(holm([0.5, np.nan, 0.9]), [1.0, np.nan, 1.0])


def test_minimum_detectable_gain_shrinks_with_seeds():
    three, ten = minimum_detectable_gain(1.0, 3), minimum_detectable_gain(1.0, 10)
    assert three == pytest.approx((stats.t.ppf(0.975, 2) + stats.t.ppf(0.8, 2)) / np.sqrt(3))
    assert ten < three and np.isnan(minimum_detectable_gain(1.0, 1))


def _runs(gains, noise):
    rows = []
    for seed, (gain, eps) in enumerate(zip(gains, noise)):
        base = 80.0 + 2 * seed  # seed effects cancel in the pairing
        rows += [dict(model="m", task="t", duplication="baseline", seed=seed, accuracy=base),
                 dict(model="m", task="t", duplication="copy", seed=seed, accuracy=base + gain + eps),
                 dict(model="m", task="t", duplication="noise", seed=seed, accuracy=base + eps)]
    return pd.DataFrame(rows)


def test_paired_gains_find_a_consistent_gain_despite_seed_variance():
    frame = _runs([1.0] * 5, [0.1, -0.1, 0.05, -0.05, 0.0])
    result = paired_gains(frame, "accuracy").set_index("duplication")
    assert result.loc["copy", "gain"] == pytest.approx(1.0)
    assert result.loc["copy", "n_pairs"] == 5
    expected_p = stats.ttest_rel(frame.query("duplication == 'copy'")["accuracy"],
                                 frame.query("duplication == 'baseline'")["accuracy"]).pvalue
    assert result.loc["copy", "p_value"] == pytest.approx(expected_p)
    assert result.loc["copy", "p_holm"] == pytest.approx(min(1, 2 * expected_p))
    assert bool(result.loc["copy", "significant"]) and not bool(result.loc["noise", "significant"])
    summary = summarize_runs(frame, "accuracy").set_index("duplication")
    assert summary.loc["baseline", "mean"] == 84.0 and summary.loc["baseline", "n"] == 5


def test_missing_seeds_are_left_out_of_the_pairs():
    frame = _runs([1.0] * 4, [0.0, 0.1, 0.2, 0.3])
    frame = frame.drop(frame.index[(frame.duplication == "copy") & (frame.seed == 0)])
    result = paired_gains(frame, "accuracy").set_index("duplication")
    assert result.loc["copy", "n_pairs"] == 3


@pytest.mark.parametrize("gain, low, high, p, claimed, expected", [
    (1.2, 0.5, 1.9, 0.01, 1.5, "reproduced"),
    (0.1, -0.3, 0.5, 0.6, 1.5, "refuted"),
    (0.8, -0.9, 2.5, 0.3, 1.5, "undecided"),
    (-1.0, -1.5, -0.5, 0.01, 0.6, "refuted"),
    (0.1, -0.2, 0.4, 0.5, 0.0, "reproduced"),
    (0.9, 0.3, 1.5, 0.01, 0.0, "refuted"),
    (0.1, -1.2, 1.4, 0.8, 0.0, "undecided"),
    (0.1, -1.2, 1.4, 0.8, None, "not stated"),
])
def test_verdict_rule(gain, low, high, p, claimed, expected):
    assert verdict(gain, low, high, p, claimed) == expected
