"""Results at a glance: one row per claim of the paper, with the verdict its rule gives."""

from pathlib import Path

import pandas as pd
import pytest

from dupbert import glance, paper

CPU = Path(__file__).resolve().parents[1] / "results" / "cpu"


def _committed(name):
    return pd.read_csv(CPU / f"{name}.csv")


def test_wilson_interval_matches_the_textbook_value():
    low, high = glance.wilson_interval(0.5, 100)
    assert (round(low, 4), round(high, 4)) == (0.4038, 0.5962)
    assert glance.wilson_interval(1.0, 10)[1] == 1.0
    with pytest.raises(ValueError, match="n=0"):
        glance.wilson_interval(0.5, 0)


def test_committed_rq1_rq2_evidence_gives_one_row_per_claim_with_its_verdict():
    table = glance.results_at_a_glance(
        _committed("rq1-reconstruction"), _committed("rq1-duplicated"), _committed("rq2-spearman"),
        None, _committed("rq5-summary"))
    assert list(table["id"]) == [c.id for c in paper.CLAIMS]
    verdicts = dict(zip(table["id"], table["verdict"]))
    assert verdicts["rq1-head-decodes-every-layer"] == "reproduced"
    assert verdicts["rq1-holds-with-duplicated-layers"] == "reproduced"
    # antiberty's CKA does not track its top-1 (rho -0.14), the reaction models' does
    assert verdicts["rq2-layers-distributed-similarly"] == "undecided"
    assert {verdicts[c.id] for c in paper.CLAIMS if c.rq in (3, 4, 5)} == {"not testable here"}
    assert glance.verdict_counts(table) == {"reproduced": 2, "refuted": 0, "undecided": 1,
                                            "did not learn": 0, "not testable here": 8}
    rq1 = table.set_index("id").loc["rq1-head-decodes-every-layer", "ours"]
    assert "rxnfp-bert: 0.775" in rq1 and "hidden state 6" in rq1


def _runs(model, task, metric, base, gain, trivial=0.34, seeds=6, extra=None):
    """ResultsFile-like rows of one model and task: baseline and its primary configuration
    (``copy first 3``), per-seed noise small against ``gain`` (fractions for accuracy)."""
    rows = []
    for seed in range(seeds):
        wobble = 0.001 * ((seed * 3) % 5 - 2)
        for name, value, reference, role in (
                ("baseline", base + 0.002 * seed, None, "reference"),
                ("copy first 3", base + 0.002 * seed + gain + wobble, "baseline", "primary"),
                *(extra or [])):
            rows.append({"model": model, "task": task, "duplication": name, "seed": seed,
                         "reference": reference, "role": role, "run_key": f"{model}{task}{name}{seed}",
                         f"metrics.{metric}": value if callable(value) is False else value(seed),
                         f"baselines.{metric}": trivial, "baselines.majority_label": "entailment"})
    return pd.DataFrame(rows)


def _rq3(frame):
    return {row["id"]: row for row in glance.rq3_rq4_rows(frame)}


def test_rq3_claims_are_decided_by_every_model_that_learned_not_the_first_one():
    reproduce = _runs("a", "snli", "accuracy", 0.70, +0.010)  # +1.0 point, clearly significant
    refute = _runs("b", "snli", "accuracy", 0.70, -0.010)  # -1.0 point
    flat = _runs("c", "snli", "accuracy", 0.70, 0.0)  # CI far below +0.6
    assert _rq3(reproduce)["rq3-snli-accuracy"]["verdict"] == "reproduced"
    assert _rq3(refute)["rq3-snli-accuracy"]["verdict"] == "refuted"
    assert _rq3(flat)["rq3-snli-accuracy"]["verdict"] == "refuted"
    # models disagree: undecided, whichever comes first
    for frame in (pd.concat([reproduce, refute]), pd.concat([refute, reproduce])):
        assert _rq3(frame)["rq3-snli-accuracy"]["verdict"] == "undecided"
    both = pd.concat([reproduce, _runs("d", "snli", "accuracy", 0.72, +0.012)])
    rows = _rq3(both)
    assert rows["rq3-snli-accuracy"]["verdict"] == "reproduced"
    assert "a: copy first 3 +0.97 [+0.80, +1.14] points" in rows["rq3-snli-accuracy"]["ours"]


def test_a_model_that_did_not_learn_is_not_counted_and_none_learning_says_so():
    learned = _runs("a", "snli", "accuracy", 0.70, +0.010)
    stuck = _runs("b", "snli", "accuracy", 0.40, -0.050)  # below the SNLI floor of 55: ignored
    rows = _rq3(pd.concat([stuck, learned]))
    assert rows["rq3-snli-accuracy"]["verdict"] == "reproduced"
    assert "b: did not learn (baseline accuracy 40.50 < floor 55)" in rows["rq3-snli-accuracy"]["ours"]
    rows = _rq3(stuck)
    assert rows["rq3-snli-accuracy"]["verdict"] == "did not learn"
    assert rows["rq3-method"]["verdict"] == "did not learn"
    assert rows["rq4-consistent-across-models"]["verdict"] == "did not learn"


def test_a_model_short_of_its_planned_seeds_is_pending_not_judged():
    reproduce = _runs("a", "snli", "accuracy", 0.70, +0.010)  # 6 seeds
    refute = _runs("b", "snli", "accuracy", 0.70, -0.010)
    rows = {row["id"]: row for row in glance.rq3_rq4_rows(
        pd.concat([reproduce, refute]), planned_seeds={("a", "snli"): 6, ("b", "snli"): 8})}
    # b's clear loss at 6 of 8 seeds is shown, not judged, and the claim waits for it
    assert rows["rq3-snli-accuracy"]["verdict"] == "undecided"
    assert "b: pending (6/8 seeds), copy first 3 -1.03" in rows["rq3-snli-accuracy"]["ours"]
    rows = {row["id"]: row for row in glance.rq3_rq4_rows(
        reproduce, planned_seeds={("a", "snli"): 8})}
    assert rows["rq3-snli-accuracy"]["verdict"] == "undecided"
    assert rows["rq3-method"]["verdict"] == "undecided"
    rows = {row["id"]: row for row in glance.rq3_rq4_rows(
        reproduce, planned_seeds={("a", "snli"): 6})}  # complete: judged
    assert rows["rq3-snli-accuracy"]["verdict"] == "reproduced"


def test_no_gain_claim_and_the_method_and_rq4_rows():
    snli = _runs("a", "snli", "accuracy", 0.70, +0.010)
    sst2 = _runs("a", "sst2", "accuracy", 0.85, +0.00001, trivial=0.51)
    rows = _rq3(pd.concat([snli, sst2]))
    assert rows["rq3-sst2-accuracy"]["verdict"] == "reproduced"  # CI within +-0.5 points
    assert rows["rq3-method"]["verdict"] == "reproduced"  # SNLI, the only claimed gain tested
    assert rows["rq4-consistent-across-models"]["verdict"] == "reproduced"
    lost = _runs("a", "sst2", "accuracy", 0.85, -0.02, trivial=0.51)
    rows = _rq3(pd.concat([snli, lost]))
    assert rows["rq3-sst2-accuracy"]["verdict"] == "refuted"  # a significant loss refutes "no gain"
    assert rows["rq4-consistent-across-models"]["verdict"] == "refuted"
    assert rows["rq3-method"]["verdict"] == "reproduced"  # the method's claim is about gains


def test_rq1_is_refuted_when_a_hidden_state_decodes_no_better_than_the_control():
    rows = [dict(model="m", variant=v, layer=layer, top1=t, n_tokens=1000)
            for v, tops in (("pretrained", [0.9, 0.9, 0.02, 0.95]),
                            ("random-init control", [0.01, 0.01, 0.01, 0.01]))
            for layer, t in enumerate(tops)]
    (row, _) = glance.rq1_rows(pd.DataFrame(rows))
    assert row["verdict"] == "refuted" and "0.020" in row["ours"]


def test_rq2_is_refuted_by_a_significant_negative_correlation():
    spearman = pd.DataFrame([dict(model="a", similarity="cka_to_last", rho=-0.9, p_value=0.001, n_layers=12),
                             dict(model="b", similarity="cka_to_last", rho=0.9, p_value=0.001, n_layers=12)])
    assert glance.rq2_row(spearman)["verdict"] == "refuted"
    assert glance.rq2_row(spearman.iloc[1:])["verdict"] == "reproduced"


def test_missing_evidence_is_not_testable_and_still_one_row_per_claim():
    table = glance.results_at_a_glance(None, None, None, None, None)
    assert len(table) == len(paper.CLAIMS)
    assert set(table["verdict"]) == {"not testable here"}
    empty = glance.results_at_a_glance(None, None, None, pd.DataFrame(), None)
    assert set(empty["verdict"]) == {"not testable here"}
