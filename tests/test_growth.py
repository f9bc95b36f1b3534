"""The growth arm's registered comparisons (dupbert.study.growth), on hand-made runs."""

import numpy as np
import pandas as pd
import pytest

from dupbert.study import growth
from dupbert.book.plots import plot_paired_seeds

# per-seed SNLI accuracy (points) of the four arms, seeds 0-7
ACCURACY = {
    ("minilm-mlm-en", "baseline"): [70.0, 71.0, 69.0, 70.5, 70.0, 71.5, 69.5, 70.0],
    ("minilm-mlm-en", "copy first 3"): [70.2, 71.1, 69.4, 70.4, 70.3, 71.2, 69.9, 70.1],
    ("minilm-mlm-en-continued", "baseline"): [71.0, 72.0, 70.0, 71.0, 71.0, 72.0, 70.0, 71.0],
    ("minilm-mlm-en-grown", "baseline"): [72.0, 72.5, 71.0, 72.5, 71.5, 73.0, 71.5, 71.5],
}


def _points(accuracy=ACCURACY, seeds=range(8)):
    rows = [{"model": model, "task": "snli", "duplication": configuration, "seed": seed,
             "metric": "accuracy", "value": values[seed], "trivial": 33.4}
            for (model, configuration), values in accuracy.items() for seed in seeds]
    return pd.DataFrame(rows)


def test_growth_is_judged_against_its_control_and_the_papers_recipe():
    table = growth.growth_tests(_points())
    primary, secondary = table.iloc[0], table.iloc[1]
    # grown - continued: 1.0 0.5 1.0 1.5 0.5 1.0 1.5 0.5 -> mean 0.9375
    assert (primary["arm"], primary["reference"], primary["role"]) == (
        "grown and continued", "continued", "primary")
    assert primary["n_pairs"] == 8 and primary["gain"] == pytest.approx(0.9375)
    differences = np.array([1.0, 0.5, 1.0, 1.5, 0.5, 1.0, 1.5, 0.5])
    half = 2.3646242510102993 * differences.std(ddof=1) / np.sqrt(8)  # t(0.975, 7)
    assert (primary["gain_ci_low"], primary["gain_ci_high"]) == pytest.approx(
        (0.9375 - half, 0.9375 + half))
    assert primary["p_adjusted"] == primary["p_value"] < 0.05
    assert primary["verdict"] == "growth helps"
    # one secondary: Holm over a family of one leaves its p as it is
    assert secondary["reference"] == "copy first 3, fine-tuned at once"
    assert secondary["p_adjusted"] == secondary["p_value"]
    assert secondary["arm_mean"] == pytest.approx(np.mean(ACCURACY["minilm-mlm-en-grown", "baseline"]))
    assert secondary["verdict"] == "growth helps"


def test_the_smallest_detectable_gain_of_each_comparison():
    """80% power at 0.05 for the primary, at 0.05/m for a secondary of m: 1.156 and, in a family
    of two, 1.339 standard deviations of the paired differences at 8 pairs."""
    table = growth.growth_tests(_points())
    differences = np.array([1.0, 0.5, 1.0, 1.5, 0.5, 1.0, 1.5, 0.5])  # grown - continued
    assert table["min_detectable_gain"].iloc[0] == pytest.approx(
        1.1560347 * differences.std(ddof=1), abs=1e-6)
    three = growth.growth_tests(
        _points(), comparisons=[*growth.COMPARISONS, ("continued", "baseline", "secondary")])
    recipe = (np.array(ACCURACY["minilm-mlm-en-grown", "baseline"])
              - np.array(ACCURACY["minilm-mlm-en", "copy first 3"]))
    assert three["min_detectable_gain"].iloc[1] == pytest.approx(
        1.3391712 * recipe.std(ddof=1), abs=1e-6)
    assert three["min_detectable_gain"].iloc[0] == table["min_detectable_gain"].iloc[0]
    assert table["min_detectable_gain"].iloc[1] < three["min_detectable_gain"].iloc[1]
    assert np.isnan(growth.growth_tests(_points(seeds=range(1)))["min_detectable_gain"]).all()


def test_growth_waits_for_its_seeds_and_its_floor():
    assert growth.growth_tests(_points(seeds=range(5)))["verdict"].tolist() == [
        "pending (5/8 seeds)"] * 2
    low = {key: [v - 20 for v in values] if key[0] == "minilm-mlm-en-continued" else values
           for key, values in ACCURACY.items()}  # the control below the SNLI floor (55)
    assert growth.growth_tests(_points(low))["verdict"].tolist() == [
        "did not learn", "growth helps"]
    hurt = {**ACCURACY, ("minilm-mlm-en-grown", "baseline"):
            [v - 2 for v in ACCURACY["minilm-mlm-en-continued", "baseline"]]}
    assert growth.growth_tests(_points(hurt))["verdict"].iloc[0] == "growth hurts"
    same = {**ACCURACY, ("minilm-mlm-en-grown", "baseline"):
            [v + d for v, d in zip(ACCURACY["minilm-mlm-en-continued", "baseline"],
                                   [0.5, -0.5, 0.2, -0.2, 0.1, -0.1, 0.3, -0.3])]}
    assert growth.growth_tests(_points(same))["verdict"].iloc[0] == "no difference shown"
    empty = growth.growth_tests(_points().iloc[:0])
    assert empty["verdict"].tolist() == ["pending (0/8 seeds)"] * 2


def test_the_arms_are_one_panel_of_the_paired_seeds_figure():
    arms = growth.arm_points(_points())
    assert list(dict.fromkeys(arms["duplication"])) == [arm.label for arm in growth.ARMS]
    assert set(arms["model"]) == {growth.ARM_MODEL} and len(arms) == 32
    fig = plot_paired_seeds(arms)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == [arm.label for arm in growth.ARMS]
    assert len(ax.lines) == 8 + 1  # one line per seed, the trivial baseline
    with pytest.raises(KeyError, match="comparison names arm 'grown'"):
        growth.growth_tests(_points(), comparisons=[("grown", "continued", "primary")])


def test_the_chapter_table_of_the_growth_arm():
    from dupbert.book import rq3 as book_rq3

    table = book_rq3.growth_table(growth.growth_tests(_points()))
    primary = table.iloc[0]
    assert primary["against"] == "continued" and primary["pairs"] == 8
    assert primary["arm mean"] == "71.94" and primary["reference mean"] == "71.00"
    assert primary["gain [95% CI]"].startswith("+0.94 [+0.")
    assert primary["smallest detectable gain"] == "0.48"
    assert primary["verdict"] == "growth helps"
    pending = book_rq3.growth_table(growth.growth_tests(_points().iloc[:0]))
    assert pending["arm mean"].tolist() == ["", ""] and pending["gain [95% CI]"].tolist() == ["", ""]
    assert pending["smallest detectable gain"].tolist() == ["", ""]


def test_the_growth_study_reads_its_profile(tmp_path, monkeypatch, shared_data_dir, zoo_cache):
    """A profile of the arms' models whose runs have not landed: every comparison pending."""
    from dupbert.study import studies

    monkeypatch.setenv("DUPBERT_CACHE", str(zoo_cache))
    monkeypatch.setenv("DUPBERT_DATA_DIR", str(shared_data_dir))
    profile = tmp_path / "growth.yaml"
    profile.write_text(f"models: [rxnmapper-albert]\ntasks: [snli]\nseeds: [0, 1]\n"
                       f"results_path: {tmp_path / 'r.jsonl'}\n")
    arms, tests = studies.growth_study(profile)
    assert arms.empty and tests["verdict"].tolist() == ["pending (0/8 seeds)"] * 2

