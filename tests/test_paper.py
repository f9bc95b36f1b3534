"""dupbert.paper: the paper's claims as data, and our results set beside them."""

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dupbert import paper
from dupbert.tasks import TASKS

DESIGN = Path(__file__).resolve().parents[2] / "shared" / "docs" / "DESIGN.md"


def test_claim_ids_are_unique_and_fields_complete():
    frame = paper.claims()
    assert frame["id"].is_unique
    assert list(frame.columns) == ["id", "rq", "statement", "task", "metric", "claimed_gain",
                                   "paper_value", "source"]
    assert set(frame["rq"]) == {1, 2, 3, 4, 5}
    for c in paper.CLAIMS:
        assert c.task is None or c.task in TASKS
        assert c.statement and c.metric and c.source and c.paper_value
        if c.claimed_gain is None and c.id not in paper.PAPER_SCORES:
            assert c.paper_value == paper.NOT_STATED
        assert re.fullmatch(r"rq[1-5]-[a-z0-9-]+", c.id) and c.id.startswith(f"rq{c.rq}-")


def test_every_number_of_the_paper_is_there():
    assert paper.claim("rq3-squad2-f1").claimed_gain == 1.5
    assert paper.claim("rq3-snli-accuracy").claimed_gain == 0.6
    assert paper.claim("rq3-sst2-accuracy").claimed_gain == 0.0
    assert paper.PAPER_SCORES == {"rq5-ensemble-squad2-exact": 85.50,
                                  "rq5-ensemble-squad2-f1": 88.59}
    assert "85.50" in paper.claim("rq5-ensemble-squad2-exact").paper_value
    assert "88.59" in paper.claim("rq5-ensemble-squad2-f1").paper_value
    assert "ALBERT" in paper.claim("rq5-ensemble-squad2-f1").statement
    assert paper.claim("rq1-head-decodes-every-layer").claimed_gain is None
    assert paper.claim("rq4-consistent-across-models").paper_value == "not stated"
    # Claims without a number say so, in the frame too (None, not NaN).
    frame = paper.claims().set_index("id")
    assert frame.loc["rq3-squad2-exact", "claimed_gain"] is None
    assert frame.loc["rq1-head-decodes-every-layer", "task"] is None


def test_replication_numbers_are_design_md_and_marked():
    frame = paper.replication()
    assert set(frame["source"]) == {"replication"}
    pairs = {(r.exact, r.f1) for r in frame.itertuples()}
    assert pairs == {(72.85, 76.04), (71.93, 75.15), (71.82, 75.04), (78.83, 82.00),
                     (79.45, 82.55), (79.32, 82.49), (79.30, 82.49)}
    assert frame.loc[frame["configuration"] == "duplicate layer 0", "f1_gain"].item() == -0.89
    # None of the replication's numbers is presented as a claim of the paper.
    values = " ".join(paper.claims()["paper_value"])
    assert "72.85" not in values and "82.55" not in values


def test_numbers_in_design_md_are_all_recorded():
    if not DESIGN.is_file():
        pytest.skip(f"no {DESIGN}")
    section = DESIGN.read_text().split("## 2.")[0]
    numbers = set(re.findall(r"\d+\.\d+", section)) - {"2001.09309", "2.0"}  # arXiv id, SQuAD 2.0
    recorded = {f"{v:.2f}" for r in paper.REPLICATION for v in (r["exact"], r["f1"])}
    recorded |= {f"{v:.2f}" for v in paper.PAPER_SCORES.values()}
    recorded |= {str(c.claimed_gain) for c in paper.CLAIMS if c.claimed_gain is not None}
    assert numbers <= recorded, f"DESIGN.md numbers missing from dupbert.paper: {numbers - recorded}"


def test_unknown_claim_lists_the_ids():
    with pytest.raises(KeyError, match="rq3-squad2-f1"):
        paper.claim("rq9-nothing")


def test_gain_claim_per_task_and_metric():
    assert paper.gain_claim("squad2", "f1").claimed_gain == 1.5
    assert paper.gain_claim("squad2", "exact").claimed_gain is None
    assert paper.gain_claim("sst2", "accuracy").claimed_gain == 0.0
    assert paper.gain_claim("uspto50k", "accuracy") is None
    assert paper.gain_claim("sst2", "macro_f1") is None


def _results(task, metric, per_config, trivial=0.5, majority="positive"):
    """A ResultsFile-like frame: {configuration: [value per seed]}."""
    rows = []
    for duplication, values in per_config.items():
        for seed, value in enumerate(values):
            row = {"model": "m", "task": task, "duplication": duplication, "seed": seed,
                   "run_key": f"{duplication}-{seed}", f"metrics.{metric}": value,
                   f"baselines.{metric}": trivial}
            if TASKS[task].kind == "classification":
                row["baselines.majority_label"] = majority
            rows.append(row)
    return pd.DataFrame(rows)


def test_points_frame_scales_fractions_only():
    sst = paper.points_frame(_results("sst2", "accuracy", {"baseline": [0.9, 0.91]}))
    assert np.allclose(sst["value"], [90.0, 91.0]) and np.allclose(sst["trivial"], 50.0)
    assert sst["trivial_name"].iloc[0] == "majority class (positive)"
    squad = paper.points_frame(_results("squad2", "f1", {"baseline": [70.0, 71.0]}, trivial=50.07))
    assert np.allclose(squad["value"], [70.0, 71.0]) and np.allclose(squad["trivial"], 50.07)
    assert squad["trivial_name"].iloc[0] == "no answer to every question"


def test_comparison_reproduces_a_clear_snli_gain():
    base = [0.800, 0.802, 0.799, 0.801, 0.800]
    better = [b + 0.010 + 0.0005 * i for i, b in enumerate(base)]
    table = paper.comparison(_results("snli", "accuracy", {"baseline": base,
                                                           "copy first 3": better,
                                                           "depth control": base}))
    row = table[(table["duplication"] == "copy first 3")].iloc[0]
    assert row["gain"] == pytest.approx(1.1, abs=1e-9)  # points, not fractions
    assert row["p_holm"] < 0.05 and row["verdict"] == "reproduced"
    assert row["claim_id"] == "rq3-snli-accuracy" and row["claimed_gain"] == 0.6
    verdicts = dict(zip(table["duplication"], table["verdict"]))
    assert verdicts["baseline"] == "the baseline" and verdicts["depth control"] == "control"
    summary = paper.overall(table)
    assert summary["verdict"].iloc[0] == "reproduced"
    assert summary["best"].iloc[0] == "copy first 3" and summary["n_configurations"].iloc[0] == 1


def test_comparison_refutes_and_reproduces_no_gain():
    base = [70.0, 71.0, 72.0, 70.5, 71.5]
    same = [b + d for b, d in zip(base, [0.05, -0.05, 0.0, 0.02, -0.02])]
    squad = paper.comparison(_results("squad2", "f1", {"baseline": base, "copy last": same}))
    row = squad[(squad["metric"] == "f1") & (squad["duplication"] == "copy last")].iloc[0]
    assert row["gain_ci_high"] < 1.5 and row["verdict"] == "refuted"
    sst = paper.comparison(_results("sst2", "accuracy", {"baseline": [b / 100 for b in base],
                                                         "copy last": [s / 100 for s in same]}))
    assert sst.loc[sst["duplication"] == "copy last", "verdict"].item() == "reproduced"
    assert sst.loc[sst["metric"] == "macro_f1", "claim_id"].isna().all()


def test_one_seed_is_undecided_not_an_error():
    table = paper.comparison(_results("snli", "accuracy", {"baseline": [0.8],
                                                           "copy first 3": [0.81]}))
    row = table[table["duplication"] == "copy first 3"].iloc[0]
    assert row["n_pairs"] == 1 and math.isnan(row["gain_ci_low"])
    assert row["verdict"] == "undecided"


@pytest.mark.parametrize("verdicts, claimed, expected", [
    (["undecided", "reproduced"], 1.5, "reproduced"),
    (["refuted", "refuted", "control"], 1.5, "refuted"),
    (["refuted", "undecided"], 0.6, "undecided"),
    (["reproduced", "refuted"], 0.0, "refuted"),
    (["reproduced", "reproduced", "the baseline"], 0.0, "reproduced"),
    (["reproduced", "undecided"], 0.0, "undecided"),
    (["reproduced"], None, "not stated"),
    (["control"], 1.5, "no data"),
])
def test_overall_verdict(verdicts, claimed, expected):
    assert paper.overall_verdict(verdicts, claimed) == expected


def test_rq3_rq4_plots_draw_the_frames():
    from matplotlib.figure import Figure

    from dupbert.plots import plot_gain_grid, plot_paired_seeds

    frame = pd.concat([
        _results("snli", "accuracy", {"baseline": [0.80, 0.81, 0.79], "copy first 3": [0.81, 0.82, 0.8],
                                      "copy last": [0.8, 0.8, 0.8]}, trivial=0.34),
        _results("squad2", "f1", {"baseline": [60.0, 61.0, 62.0], "copy first 3": [61.0, 61.5, 62.0]},
                 trivial=50.07),
    ], ignore_index=True)
    points = paper.points_frame(frame)
    fig = plot_paired_seeds(points, metrics={"snli": "accuracy", "squad2": "f1"})
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["baseline", "copy first 3",
                                                                       "copy last"]
    table = paper.comparison(frame)
    fig = plot_gain_grid(table, metrics={"snli": "accuracy", "squad2": "f1"})
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    with pytest.raises(ValueError):
        plot_gain_grid(table[table["duplication"] == "baseline"])
