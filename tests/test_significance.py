"""Paired statistics over seeds: intervals, Holm, detectable gains and the verdict rule."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dupbert.core.significance import (check_one_run_per_seed, equivalence_sd_limit, holm, mean_ci,
                                  minimum_detectable_gain, paired_gains, paired_p_value,
                                  paired_t_power, summarize_runs, verdict)


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


def test_holm_counts_every_test_of_the_family_also_the_uncomputable():
    # two tests, one of which could not be computed: m is 2, not 1
    np.testing.assert_allclose(holm([0.02, np.nan]), [0.04, np.nan])
    np.testing.assert_allclose(holm([np.nan, 0.01, np.nan]), [np.nan, 0.03, np.nan])


def test_minimum_detectable_gain_is_exact_noncentral_t():
    # 8 seeds, sd 1, alpha 0.05, 80% power: the exact answer (noncentral t, df 7) is 1.1560 sd;
    # the usual shortcut (t quantiles added) gives 1.1528, a gain detected less often than 80%
    gain = minimum_detectable_gain(1.0, 8)
    assert gain == pytest.approx(1.1560, abs=1e-4)
    assert paired_t_power(gain, 1.0, 8) == pytest.approx(0.8, abs=1e-9)
    shortcut = (stats.t.ppf(0.975, 7) + stats.t.ppf(0.8, 7)) / np.sqrt(8)
    assert shortcut == pytest.approx(1.1528, abs=1e-4) and paired_t_power(shortcut, 1.0, 8) < 0.8
    # a simulation of the paired t-test agrees with the power
    rng = np.random.default_rng(0)
    differences = rng.normal(gain, 1.0, size=(40_000, 8))
    rejected = stats.ttest_1samp(differences, 0.0, axis=1).pvalue < 0.05
    assert rejected.mean() == pytest.approx(0.8, abs=0.01)
    # scales with the sd; shrinks with seeds; needs 2 seeds
    assert minimum_detectable_gain(2.5, 8) == pytest.approx(2.5 * gain)
    assert minimum_detectable_gain(1.0, 16) < gain and np.isnan(minimum_detectable_gain(1.0, 1))
    assert minimum_detectable_gain(0.0, 8) == 0.0


def test_minimum_detectable_gain_accounts_for_the_correction():
    # a secondary comparison in a Holm family of 3 is judged at alpha / 3 in the worst case
    three = minimum_detectable_gain(1.0, 8, n_tests=3)
    assert three == pytest.approx(minimum_detectable_gain(1.0, 8, alpha=0.05 / 3))
    assert three > minimum_detectable_gain(1.0, 8)
    assert paired_t_power(three, 1.0, 8, alpha=0.05 / 3) == pytest.approx(0.8, abs=1e-9)


def test_zero_variance_differences_are_decided_not_nan():
    assert paired_p_value([0.5, 0.5, 0.5]) == 0.0  # every seed moved by exactly +0.5
    assert paired_p_value([0.0, 0.0, 0.0]) == 1.0  # no seed moved
    assert np.isnan(paired_p_value([0.3]))  # one pair: no test
    frame = pd.DataFrame([dict(model="m", task="t", duplication=d, seed=s, accuracy=v)
                          for s in range(4) for d, v in (("baseline", 80.0 + s),
                                                         ("copy", 80.5 + s), ("same", 80.0 + s))])
    result = paired_gains(frame, "accuracy").set_index("duplication")
    assert result.loc["copy", "p_value"] == 0.0 and bool(result.loc["copy", "significant"])
    assert result.loc["same", "p_value"] == 1.0 and not bool(result.loc["same", "significant"])
    assert result.loc["copy", "gain_ci_low"] == result.loc["copy", "gain_ci_high"] == 0.5


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
    assert result.loc["copy", "p_adjusted"] == pytest.approx(min(1, 2 * expected_p))
    assert result.loc["copy", "n_tests"] == 2 and result.loc["copy", "role"] == "secondary"
    assert bool(result.loc["copy", "significant"]) and not bool(result.loc["noise", "significant"])
    summary = summarize_runs(frame, "accuracy").set_index("duplication")
    assert summary.loc["baseline", "mean"] == 84.0 and summary.loc["baseline", "n"] == 5


def test_missing_seeds_are_left_out_of_the_pairs():
    frame = _runs([1.0] * 4, [0.0, 0.1, 0.2, 0.3])
    frame = frame.drop(frame.index[(frame.duplication == "copy") & (frame.seed == 0)])
    result = paired_gains(frame, "accuracy").set_index("duplication")
    assert result.loc["copy", "n_pairs"] == 3


def _study(roles, references=None, seeds=range(6)):
    """Runs of one model and task with recorded roles: {configuration: (gain per seed)}."""
    rows = []
    for seed in seeds:
        base = 70.0 + 3 * seed
        rows.append(dict(model="m", task="t", duplication="baseline", seed=seed, value=base,
                         reference=None, role="reference"))
        for name, (gain, role) in roles.items():
            noise = 0.2 * ((seed * 7 + len(name)) % 5 - 2)
            rows.append(dict(model="m", task="t", duplication=name, seed=seed,
                             value=base + gain + noise, role=role,
                             reference=(references or {}).get(name, "baseline")))
    return pd.DataFrame(rows)


def test_primary_is_tested_alone_and_secondaries_are_holm_corrected():
    frame = _study({"copy first 3": (0.6, "primary"), "copy last": (0.6, "secondary"),
                    "depth control": (0.0, "secondary"), "copy middle": (0.1, "secondary")})
    result = paired_gains(frame, "value").set_index("duplication")
    primary, last = result.loc["copy first 3"], result.loc["copy last"]
    assert primary["role"] == "primary" and primary["n_tests"] == 1
    assert primary["p_adjusted"] == primary["p_value"]  # no multiplicity penalty
    raw = [result.loc[c, "p_value"] for c in ("copy last", "depth control", "copy middle")]
    np.testing.assert_allclose(result.loc[["copy last", "depth control", "copy middle"], "p_adjusted"],
                               holm(raw))
    assert last["n_tests"] == 3 and last["p_adjusted"] >= last["p_value"]
    assert last["min_detectable_gain"] == pytest.approx(
        minimum_detectable_gain(_sd(frame, "copy last"), 6, n_tests=3))
    assert primary["min_detectable_gain"] == pytest.approx(
        minimum_detectable_gain(_sd(frame, "copy first 3"), 6, n_tests=1))


def _sd(frame, name):
    wide = frame.pivot_table(index="seed", columns="duplication", values="value")
    return float((wide[name] - wide["baseline"]).std(ddof=1))


def test_unshared_albert_variants_are_compared_with_the_unshared_baseline():
    # unsharing alone gives +2; the copy adds +0.5 on top of it: against `baseline` the copy
    # would wrongly look like +2.5
    frame = _study({"unshared baseline": (2.0, "secondary"), "copy first 3": (2.5, "secondary"),
                    "repeat shared +3": (0.3, "primary")},
                   references={"copy first 3": "unshared baseline"})
    result = paired_gains(frame, "value").set_index("duplication")
    assert result.loc["copy first 3", "reference"] == "unshared baseline"
    assert result.loc["copy first 3", "gain"] == pytest.approx(0.5, abs=0.25)
    assert result.loc["unshared baseline", "gain"] == pytest.approx(2.0, abs=0.25)
    assert result.loc["repeat shared +3", "reference"] == "baseline"


def test_rows_of_two_settings_are_never_pooled():
    frame = _runs([1.0] * 3, [0.0, 0.1, 0.2])
    doubled = pd.concat([frame, frame.assign(accuracy=frame["accuracy"] + 5)], ignore_index=True)
    with pytest.raises(ValueError, match=r"share \(configuration, seed\)"):
        paired_gains(doubled, "accuracy")
    with pytest.raises(ValueError, match="cannot be pooled"):
        summarize_runs(doubled, "accuracy")
    check_one_run_per_seed(frame, ["model", "task"])  # one setting: fine


@pytest.mark.parametrize("gain, low, high, p, claimed, expected", [
    (1.2, 0.5, 1.9, 0.01, 1.5, "reproduced"),
    (0.2, 0.1, 0.3, 0.01, 1.5, "reproduced"),  # significant but far smaller than "up to +1.5"
    (-0.2, -0.3, -0.1, 0.01, 1.5, "refuted"),  # significantly worse, though the CI is narrow
    (1.2, -0.1, 2.5, 0.06, 1.5, "undecided"),
    (0.1, -0.3, 0.5, 0.6, 1.5, "refuted"),
    (0.1, -0.3, 1.5, 0.6, 1.5, "undecided"),  # the CI reaches the claim: not excluded
    (0.1, -0.3, 1.49, 0.6, 1.5, "refuted"),
    (0.8, -0.9, 2.5, 0.3, 1.5, "undecided"),
    (-1.0, -1.5, -0.5, 0.01, 0.6, "refuted"),
    (0.1, -0.2, 0.4, 0.5, 0.0, "reproduced"),
    (0.0, -0.5, 0.5, 0.9, 0.0, "reproduced"),  # the margin's ends are inside
    (0.0, -0.51, 0.4, 0.9, 0.0, "undecided"),
    (0.1, -0.4, 0.6, 0.6, 0.0, "undecided"),
    (0.9, 0.3, 1.5, 0.01, 0.0, "refuted"),
    (-0.3, -0.45, -0.15, 0.01, 0.0, "refuted"),  # a significant loss also refutes "no gain"
    (0.3, 0.1, 0.45, 0.04, 0.0, "refuted"),  # significant, though inside the margin
    (0.1, -1.2, 1.4, 0.8, 0.0, "undecided"),
    (0.1, -1.2, 1.4, 0.8, None, "not stated"),
])
def test_verdict_rule(gain, low, high, p, claimed, expected):
    assert verdict(gain, low, high, p, claimed) == expected


def test_power_scales_with_the_sd_and_is_alpha_without_a_gain():
    # only gain / sd matters (the noncentrality), and a zero gain is rejected at the level itself
    assert paired_t_power(1.0, 2.0, 8) == pytest.approx(paired_t_power(0.5, 1.0, 8), abs=1e-12)
    assert paired_t_power(1.0, 2.0, 8) == pytest.approx(0.23208, abs=1e-5)
    assert paired_t_power(0.0, 1.0, 8) == pytest.approx(0.05, abs=1e-12)  # both tails, 0.025 each
    assert paired_t_power(0.0, 1.0, 8, alpha=0.01) == pytest.approx(0.01, abs=1e-12)
    # noncentrality 10 at df 7: scipy's nct.cdf returns NaN for the far tail, which is ~0
    assert np.isnan(stats.nct.cdf(-stats.t.ppf(0.975, 7), 7, 10.0))
    assert paired_t_power(10.0, np.sqrt(8), 8) == pytest.approx(1.0, abs=1e-9)


def test_minimum_detectable_gain_from_two_seeds_and_without_a_std():
    two = minimum_detectable_gain(1.0, 2)
    assert two == pytest.approx(11.5499, abs=1e-4)  # one degree of freedom: a huge gain
    assert paired_t_power(two, 1.0, 2) == pytest.approx(0.8, abs=1e-9)
    assert np.isnan(minimum_detectable_gain(None, 8)) and np.isnan(minimum_detectable_gain(np.nan, 8))


def test_pooling_refusal_names_the_rows_and_the_first_three_groups():
    frame = pd.DataFrame([dict(model="m", task="t", duplication=d, seed=s)
                          for s in range(3) for d in "ab"])
    with pytest.raises(ValueError) as refused:
        check_one_run_per_seed(pd.concat([frame, frame]), ["model", "task"])
    assert str(refused.value) == (
        "12 rows share (configuration, seed) with another row, e.g. "
        "[{'model': 'm', 'task': 't', 'duplication': 'a', 'seed': 0}, "
        "{'model': 'm', 'task': 't', 'duplication': 'b', 'seed': 0}, "
        "{'model': 'm', 'task': 't', 'duplication': 'a', 'seed': 1}]: runs of different settings "
        "(hyper-parameters, subsets, data source) cannot be pooled. Keep the rows of one setting "
        "(e.g. dupbert.study.sweeps.planned_run_keys).")


def test_rows_come_out_in_the_order_the_groups_first_appear():
    """Not sorted: the study's order (models and configurations as planned) is kept."""
    frame = pd.concat([_runs([1.0] * 3, [0.0, 0.1, 0.2]).assign(model="z"),
                       _runs([2.0] * 3, [0.0, 0.1, 0.2]).assign(model="a")], ignore_index=True)
    frame = frame.iloc[frame["duplication"].map({"noise": 0, "copy": 1, "baseline": 2}).argsort(
        kind="stable")].sort_values("model", key=lambda m: m == "a", kind="stable")
    summary = summarize_runs(frame, "accuracy")
    assert list(zip(summary["model"], summary["duplication"])) == [
        ("z", "noise"), ("z", "copy"), ("z", "baseline"), ("a", "noise"), ("a", "copy"),
        ("a", "baseline")]
    gains = paired_gains(frame, "accuracy")
    assert list(zip(gains["model"], gains["duplication"])) == [
        ("z", "noise"), ("z", "copy"), ("a", "noise"), ("a", "copy")]
    assert gains["gain"].tolist() == pytest.approx([0.1, 1.1, 0.1, 2.1])


def test_a_reference_without_runs_gives_no_pairs():
    frame = _study({"copy first 3": (1.0, "secondary")},
                   references={"copy first 3": "unshared baseline"})
    row = paired_gains(frame, "value").set_index("duplication").loc["copy first 3"]
    assert row["n_pairs"] == 0 and np.isnan(row["gain"]) and np.isnan(row["p_value"])
    assert np.isnan(row["min_detectable_gain"]) and not row["significant"]


@pytest.mark.parametrize("gain, low, high, p, claimed, expected", [
    (1.2, 0.5, 1.9, 0.05, 1.5, "undecided"),  # p must be below 0.05, not equal
    (0.0, -0.1, 0.1, 0.01, 1.5, "refuted"),  # significant, but no positive gain
    (0.3, 0.1, 0.45, 0.05, 0.0, "reproduced"),  # p = 0.05 is not significant
])
def test_verdict_rule_at_its_boundaries(gain, low, high, p, claimed, expected):
    assert verdict(gain, low, high, p, claimed) == expected


def test_mean_ci_of_nothing_says_what_it_needs():
    with pytest.raises(ValueError, match="^mean_ci needs at least one value$"):
        mean_ci([])
    assert mean_ci([3.0, 3.0, 3.0]) == {"n": 3, "mean": 3.0, "std": 0.0, "ci_low": 3.0,
                                         "ci_high": 3.0}


def test_the_equivalence_sd_limit_is_where_the_t_interval_just_fits_the_margin():
    # 8 seeds: t(0.975, 7) = 2.3646; 0.5 * sqrt(8) / 2.3646 = 0.598
    assert round(equivalence_sd_limit(8), 3) == 0.598
    assert round(equivalence_sd_limit(4), 3) == 0.314  # 0.5 * 2 / 3.1824
    assert round(equivalence_sd_limit(8, margin=1.0), 3) == 1.196
    # at the limit, the interval of differences with that sd and mean 0 spans exactly +-margin
    sd = equivalence_sd_limit(8)
    differences = np.array([1.0, -1.0] * 4) * sd * np.sqrt(7 / 8)  # sample sd exactly `sd`
    low, high = stats.t.interval(0.95, 7, 0.0, stats.sem(differences))
    assert (low, high) == pytest.approx((-0.5, 0.5))
    assert np.isnan(equivalence_sd_limit(1))
    assert round(equivalence_sd_limit(2), 4) == 0.0557  # 0.5 * sqrt(2) / 12.706


def test_a_planned_family_counts_its_secondary_comparisons_that_have_not_landed():
    """Planned: 3 secondary comparisons; landed: one. Holm multiplies its p by 3, not 1, and its
    detectable gain is the one at alpha / 3 (every test of the family)."""
    base = [80.0, 81.0, 79.5, 80.5, 80.2]
    gain = [0.9, 0.5, 1.4, 0.2, 1.1]
    primary = [0.1, 0.6, 0.2, 0.5, 0.3]
    rows = [{"model": "m", "task": "t", "duplication": d, "seed": s, "value": v,
             "reference": r, "role": role}
            for s in range(5)
            for d, v, r, role in (("baseline", base[s], None, None),
                                  ("copy first 3", base[s] + primary[s], "baseline", "primary"),
                                  ("copy last", base[s] + gain[s], "baseline", "secondary"))]
    frame = pd.DataFrame(rows)
    p = stats.ttest_rel(np.array(base) + gain, base).pvalue  # 0.0211
    planned = paired_gains(frame, "value", family_sizes={("m", "t"): 3}).set_index("duplication")
    alone = paired_gains(frame, "value").set_index("duplication")
    assert alone.loc["copy last", "p_adjusted"] == pytest.approx(p)
    assert (planned.loc["copy last", "n_tests"], alone.loc["copy last", "n_tests"]) == (3, 1)
    assert planned.loc["copy last", "p_adjusted"] == pytest.approx(3 * p)
    assert not planned.loc["copy last", "significant"] and alone.loc["copy last", "significant"]
    sd = np.std(gain, ddof=1)
    assert planned.loc["copy last", "min_detectable_gain"] == pytest.approx(
        minimum_detectable_gain(sd, 5, n_tests=3))
    # the primary is untouched: its own p, one test, its detectable gain at alpha
    p_primary = stats.ttest_rel(np.array(base) + primary, base).pvalue
    assert planned.loc["copy first 3", "p_adjusted"] == pytest.approx(p_primary)
    assert planned.loc["copy first 3", "n_tests"] == 1
    assert planned.loc["copy first 3", "min_detectable_gain"] == pytest.approx(
        minimum_detectable_gain(np.std(primary, ddof=1), 5))
    # a family planned for another model and task changes nothing here
    other = paired_gains(frame, "value", family_sizes={("x", "t"): 5}).set_index("duplication")
    assert other.loc["copy last", "n_tests"] == 1
    assert other.loc["copy last", "p_adjusted"] == pytest.approx(p)
    # a family larger than planned keeps its own size
    assert paired_gains(frame, "value", family_sizes={("m", "t"): 0}).set_index(
        "duplication").loc["copy last", "n_tests"] == 1


def test_a_secondary_short_of_its_planned_seeds_stays_out_of_holm():
    """Two secondaries: `copy last` complete (5 of 5 seeds, p 0.0211), `depth control` at 3 of
    5 seeds with a tiny p. Holm over both would rank the partial one first and leave `copy
    last` at its raw p; the partial one is a test not yet done: NaN, ranked last."""
    base = [80.0, 81.0, 79.5, 80.5, 80.2]
    gain = [0.9, 0.5, 1.4, 0.2, 1.1]
    rows = [{"model": "m", "task": "t", "duplication": d, "seed": s, "value": v,
             "reference": "baseline" if d != "baseline" else None,
             "role": "secondary" if d != "baseline" else None}
            for s in range(5)
            for d, v in (("baseline", base[s]), ("copy last", base[s] + gain[s]),
                         *((("depth control", base[s] - 5.0 - 0.01 * s),) if s < 3 else ()))]
    frame = pd.DataFrame(rows)
    p = stats.ttest_rel(np.array(base) + gain, base).pvalue
    pooled = paired_gains(frame, "value").set_index("duplication")
    assert pooled.loc["copy last", "p_adjusted"] == pytest.approx(p)  # ranked second: x 1
    waiting = paired_gains(frame, "value", planned_seeds={("m", "t"): 5}).set_index("duplication")
    assert waiting.loc["copy last", "p_adjusted"] == pytest.approx(2 * p)  # ranked first of 2
    assert np.isnan(waiting.loc["depth control", "p_adjusted"])
    assert not waiting.loc["depth control", "significant"]
    assert waiting.loc["depth control", "p_value"] == pooled.loc["depth control", "p_value"]
    # two complete secondaries are ranked as Holm ranks them
    both = paired_gains(frame[frame["duplication"] != "depth control"].pipe(
        lambda f: pd.concat([f, f[f["duplication"] == "copy last"].assign(
            duplication="copy middle", value=lambda g: g["value"] + 0.01 * g["seed"])])),
        "value", planned_seeds={("m", "t"): 5}).set_index("duplication")
    raw = both.loc[["copy last", "copy middle"], "p_value"]
    assert both.loc[["copy last", "copy middle"], "p_adjusted"].tolist() == pytest.approx(
        holm(raw.tolist()).tolist())


# ----------------------------------------------------------------------------- bad input


from dupbert.core.errors import ParameterError  # noqa: E402
from dupbert.core.significance import GAIN_COLUMNS  # noqa: E402


@pytest.mark.parametrize("call, message", [
    (lambda: mean_ci([1, 2, 3], confidence=95), "confidence must be a number > 0 and < 1, got 95"),
    (lambda: mean_ci("123"), "values must be a list of numbers, got '123' (str)"),
    (lambda: mean_ci(5), "values must be a list of numbers, got 5 (int)"),
    (lambda: mean_ci([[1, 2], [3, 4]]), "values must be a list of numbers, got [[1, 2], [3, 4]] (list)"),
    (lambda: mean_ci([1, "2"]), "values must hold numbers only: item 1 is '2' (str)"),
    (lambda: mean_ci([1, True]), "values must hold numbers only: item 1 is True (bool)"),
    (lambda: mean_ci([1.0, np.nan]), "values must be finite numbers: item 1 is nan"),
    (lambda: mean_ci(np.array([1.0, np.inf])), "values must be finite numbers: item 1 is inf"),
    (lambda: minimum_detectable_gain(1, 5, power=1.0), "power must be a number > 0 and < 1, got 1.0"),
    (lambda: minimum_detectable_gain(1, 5, power=80), "power must be a number > 0 and < 1, got 80"),
    (lambda: minimum_detectable_gain(1, 5, alpha=5), "alpha must be a number > 0 and < 1, got 5"),
    (lambda: minimum_detectable_gain(-1, 5), "std_of_differences must be a number >= 0, got -1"),
    (lambda: minimum_detectable_gain(1, 5, power=0.01),
     "power must be above the test's level alpha / n_tests = 0.05 (the power at a gain of 0), got 0.01"),
    (lambda: minimum_detectable_gain(1, 5, n_tests=0), "n_tests must be an integer >= 1, got 0"),
    (lambda: minimum_detectable_gain(1, 2.5), "n_seeds must be an integer >= 0, got 2.5"),
    (lambda: paired_t_power(1, 0, 8), "std_of_differences must be a number > 0, got 0"),
    (lambda: paired_t_power(1, 1, 1), "n_seeds must be an integer >= 2, got 1"),
    (lambda: paired_t_power(1, 1, 8, alpha=0), "alpha must be a number > 0 and < 1, got 0"),
    (lambda: paired_t_power(np.nan, 1, 8), "gain must be a number, got nan"),
    (lambda: equivalence_sd_limit(8, margin=-0.5), "margin must be a number > 0, got -0.5"),
    (lambda: equivalence_sd_limit(8, confidence=95), "confidence must be a number > 0 and < 1, got 95"),
    (lambda: equivalence_sd_limit("8"), "n_seeds must be an integer >= 0, got '8' (str)"),
    (lambda: holm([5, 0.1]), "p_values must be in [0, 1] (NaN for a test not computed): item 0 is 5.0"),
    (lambda: holm([0.1, -0.01]), "p_values must be in [0, 1] (NaN for a test not computed): item 1 is -0.01"),
    (lambda: holm("0.1"), "p_values must be a list of numbers, got '0.1' (str)"),
    (lambda: paired_p_value([0.1, np.nan, 0.2]), "differences must be finite numbers: item 1 is nan"),
    (lambda: paired_p_value("12"), "differences must be a list of numbers, got '12' (str)"),
])
def test_bad_arguments_name_their_value_and_what_is_allowed(call, message):
    with pytest.raises(ParameterError) as refused:
        call()
    assert str(refused.value) == message


def test_the_edges_that_stay_allowed_keep_their_results():
    assert holm([]).size == 0 and np.isnan(holm([np.nan])[0])
    assert np.isnan(minimum_detectable_gain(np.nan, 5)) and np.isnan(minimum_detectable_gain(None, 5))
    assert np.isnan(minimum_detectable_gain(1.0, 1)) and np.isnan(equivalence_sd_limit(1))
    # a power just short of 1 is reachable (power 1 is not): the exact gain, not 8.0 or a crash
    gain = minimum_detectable_gain(1.0, 5, power=0.999)
    assert paired_t_power(gain, 1.0, 5) == pytest.approx(0.999, abs=1e-9) and gain > 3
    assert mean_ci(pd.Series([1, 2, 3], dtype="Int64"))["mean"] == 2.0
    assert mean_ci((2.0, 4.0))["mean"] == 3.0 and mean_ci(np.array([1, 3]))["n"] == 2
    assert verdict(0.1, -0.2, 0.4, 0.5, 0) == "reproduced"


def _runs_frame():
    return pd.DataFrame([dict(model="m", task="t", duplication=d, seed=s,
                              accuracy=0.5 + 0.01 * s + (0.02 if d == "copy" else 0.0))
                         for s in range(3) for d in ("baseline", "copy")])


def test_frames_without_their_columns_or_metric_are_refused_by_name():
    frame = _runs_frame()
    for call in (summarize_runs, paired_gains):
        with pytest.raises(ParameterError) as refused:
            call(pd.DataFrame(), "accuracy")
        assert str(refused.value) == (
            "the frame: missing columns ['model', 'task', 'duplication', 'seed', 'accuracy'] "
            "(needed: ['model', 'task', 'duplication', 'seed', 'accuracy']); it has no columns "
            "(no runs)")
        with pytest.raises(ParameterError) as refused:
            call(frame, "acc")
        assert str(refused.value) == (
            "metric 'acc' is not a column of the frame (did you mean 'accuracy'?); its columns are "
            "['model', 'task', 'duplication', 'seed', 'accuracy']")
        with pytest.raises(ParameterError) as refused:
            call(frame.drop(columns=["seed"]), "accuracy")
        assert str(refused.value) == (
            "the frame: missing column ['seed'] (needed: ['model', 'task', 'duplication', "
            "'seed', 'accuracy']); its columns are ['model', 'task', 'duplication', 'accuracy']")
        with pytest.raises(ParameterError) as refused:
            call(frame, "accuracy", by="model")
        assert str(refused.value) == ("by must be a list of column names, got the string 'model'; "
                                      "write ['model'] for one")
        with pytest.raises(ParameterError, match="^metric 'accuracy' must be a column of numbers, "
                                                 "got dtype "):
            call(frame.assign(accuracy="0.5"), "accuracy")
    with pytest.raises(ParameterError, match="^by must be a list of column names, got the string"):
        check_one_run_per_seed(pd.DataFrame(), "model")
    with pytest.raises(ParameterError) as refused:
        check_one_run_per_seed(pd.DataFrame(), ["model"])
    assert str(refused.value) == ("the frame: missing columns ['model', 'duplication', 'seed'] "
                                  "(needed: ['model', 'duplication', 'seed']); it has no columns "
                                  "(no runs)")


def test_a_run_with_a_nan_metric_is_refused_not_dropped_from_its_pair():
    frame = _runs_frame()
    frame.loc[(frame["duplication"] == "copy") & (frame["seed"] == 1), "accuracy"] = np.nan
    message = ("accuracy is NaN for the run with model 'm', task 't', duplication 'copy', seed 1: a "
               "run without its metric cannot be averaged or paired (leaving it out would change "
               "the seeds compared); re-run it or drop its row")
    for call in (summarize_runs, paired_gains):
        with pytest.raises(ParameterError) as refused:
            call(frame, "accuracy")
        assert str(refused.value) == message


def test_a_plan_must_be_whole_numbers_per_model_and_task():
    frame = _runs_frame()
    with pytest.raises(ParameterError) as refused:
        paired_gains(frame, "accuracy", family_sizes={("m", "t"): "3"})
    assert str(refused.value) == "family_sizes[('m', 't')] must be an integer >= 0, got '3' (str)"
    with pytest.raises(ParameterError) as refused:
        paired_gains(frame, "accuracy", by=["model"], planned_seeds={("m", "t"): 3})
    assert str(refused.value) == ("planned_seeds is given per (model, task), so by must hold "
                                  "'model' and 'task', got by=['model']")
    with pytest.raises(ParameterError) as refused:
        paired_gains(frame, "accuracy", family_sizes=[3])
    assert str(refused.value) == "family_sizes must be a mapping {(model, task): number}, got [3] (list)"
    # a valid plan still counts: 1 secondary landed of 2 planned
    planned = paired_gains(frame, "accuracy", family_sizes={("m", "t"): 2})
    assert planned["n_tests"].tolist() == [2]


def test_columns_without_rows_give_the_documented_columns_and_no_rows():
    frame = _runs_frame()
    summary = summarize_runs(frame.iloc[:0], "accuracy")
    assert summary.empty and list(summary.columns) == [
        "model", "task", "duplication", "n", "mean", "std", "ci_low", "ci_high"]
    for rows in (frame.iloc[:0], frame[frame["duplication"] == "baseline"]):  # nothing to compare
        gains = paired_gains(rows, "accuracy")
        assert gains.empty and list(gains.columns) == ["model", "task", *GAIN_COLUMNS]
    # GAIN_COLUMNS are the columns a comparison has, in order
    assert list(paired_gains(frame, "accuracy").columns) == ["model", "task", *GAIN_COLUMNS]


def test_a_frame_with_the_columns_and_no_rows_gives_the_columns_and_no_rows():
    empty = pd.DataFrame(columns=["model", "task", "duplication", "seed", "accuracy"])  # object dtype
    for call in (summarize_runs, paired_gains):
        result = call(empty, "accuracy")
        assert result.empty
        assert list(result.columns) == list(call(_runs_frame(), "accuracy").columns)


from dupbert.core.significance import ratio_bootstrap  # noqa: E402


def test_ratio_bootstrap_is_exact_where_every_sequence_agrees_and_widens_with_spread():
    counts = np.array([10, 20, 30, 40])
    same = np.array([[5, 10, 15, 20]])  # every sequence at 0.5
    low, high = ratio_bootstrap(same, counts)
    assert low[0] == pytest.approx(0.5) and high[0] == pytest.approx(0.5)
    spread = np.array([[0, 20, 0, 40], [10, 20, 30, 40]])  # 0.6 overall; the second row is 1.0
    low, high = ratio_bootstrap(spread, counts)
    assert low[0] < 0.6 < high[0] and low[1] == high[1] == 1.0
    again = ratio_bootstrap(spread, counts)
    assert (again[0] == low).all() and (again[1] == high).all()  # seeded
    hits, many = np.arange(30)[None, :] % 7, np.full(30, 8)  # no resample reaches 0 or 1
    first, again, other = (np.concatenate(ratio_bootstrap(hits, many, seed=s)) for s in (1, 1, 0))
    assert (first == again).all() and (first != other).any()  # the seed given is the one used


def test_ratio_bootstrap_of_one_sequence_is_its_ratio_and_of_none_nan_per_row():
    low, high = ratio_bootstrap(np.array([[3.0], [1.0]]), np.array([4]))
    assert low.tolist() == high.tolist() == [0.75, 0.25]
    for counts in (np.zeros(0), np.zeros(3)):  # no sequence, or no scored token
        low, high = ratio_bootstrap(np.zeros((2, counts.size)), counts)
        assert low.shape == high.shape == (2,) and np.isnan(low).all() and np.isnan(high).all()


def test_ratio_bootstrap_refuses_shapes_that_disagree():
    with pytest.raises(ParameterError, match=r"hits \(1, 3\) and counts \(4,\) disagree"):
        ratio_bootstrap(np.ones((1, 3)), np.ones(4))
