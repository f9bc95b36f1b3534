"""Results at a glance: one row per claim of the paper, with the verdict its rule gives."""

from pathlib import Path

import pandas as pd
import pytest

from dupbert.study import glance, paper

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
    # the English ALBERT pretrained here (an early MLM) decodes its last block output at 0.411:
    # every model must reach 0.5, so the others' success cannot decide
    assert verdicts["rq1-head-decodes-every-layer"] == "undecided"
    assert verdicts["rq1-holds-with-duplicated-layers"] == "undecided"
    # antiberty's CKA does not track its top-1 (rho -0.14), the reaction models' does
    assert verdicts["rq2-layers-distributed-similarly"] == "undecided"
    assert {verdicts[c.id] for c in paper.CLAIMS if c.rq in (3, 4, 5)} == {"not testable here"}
    assert glance.verdict_counts(table) == {"reproduced": 0, "refuted": 0, "undecided": 3,
                                            "did not learn": 0, "not testable here": 8}
    rq1 = table.set_index("id").loc["rq1-head-decodes-every-layer", "ours"]
    assert "rxnfp-bert: 0.775" in rq1 and "hidden state 6" in rq1
    assert "bert-en-small: 0.602 [0.597, 0.607]" in rq1
    assert "albert-en-small: 0.411 [0.405, 0.417] at hidden state 6" in rq1
    assert "minilm-mlm-en: 0.919 [0.916, 0.922] at hidden state 3" in rq1
    assert "bert-rxn: 0.817 [0.808, 0.826] at hidden state 4" in rq1  # pretrained here
    assert "albert-rxn: 0.973 [0.971, 0.975] at hidden state 1" in rq1
    # without the two English models at the unigram plateau, the domain MLMs and minilm-mlm-en
    # reproduce the claim, with and without duplicated layers
    plateau = ["bert-en-small", "albert-en-small"]
    kept = [_committed(name) for name in ("rq1-reconstruction", "rq1-duplicated")]
    kept = [frame[~frame["model"].isin(plateau)] for frame in kept]
    assert "minilm-mlm-en" in set(kept[0]["model"]) and "minilm-mlm-en" in set(kept[1]["model"])
    assert [row["verdict"] for row in glance.rq1_rows(*kept)] == ["reproduced", "reproduced"]


def test_committed_rq1_rq2_under_the_mlm_floor_judge_the_six_heads_that_predict():
    table = glance.with_mlm_floor(_committed("rq1-reconstruction"), _committed("rq1-duplicated"),
                                  _committed("rq2-spearman"), _committed("rq1-mlm-quality"))
    rows = table.set_index("id")
    assert list(rows["registered rule"]) == ["undecided", "undecided", "undecided"]
    assert list(rows["with the MLM floor"]) == ["reproduced", "reproduced", "undecided"]
    assert set(rows["judged on"]) == {
        "antiberty, rxnfp-bert, rxnmapper-albert, minilm-mlm-en, bert-rxn, albert-rxn"}
    assert set(rows[glance.DID_NOT_LEARN_MLM]) == {"bert-en-small, albert-en-small"}


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
    # one model, judged: RQ4 names it, and needs a second model
    assert (rows["rq4-consistent-across-models"]["ours"],
            rows["rq4-consistent-across-models"]["verdict"]) == (
        "1 models (a); judged on the paper's tasks (baseline learned; primary complete or "
        "pending): a (snli); across models needs two such models: not testable with one",
        "not testable here")
    # a pending cell counts among those RQ4 is judged on (it may still be judged)
    waiting = {row["id"]: row for row in glance.rq3_rq4_rows(
        pd.concat([reproduce, refute]), planned_seeds={("a", "snli"): 6, ("b", "snli"): 8})}
    assert "pending): a (snli); b (snli); per-claim" in waiting["rq4-consistent-across-models"]["ours"]


def test_a_planned_model_and_task_without_runs_is_pending_not_untestable():
    snli = _runs("a", "snli", "accuracy", 0.70, +0.010)  # 6 seeds, complete: reproduced
    rows = {row["id"]: row for row in glance.rq3_rq4_rows(
        snli, planned_seeds={("a", "snli"): 6, ("m", "squad2"): 4})}
    for claim in ("rq3-squad2-f1", "rq3-squad2-exact"):
        assert (rows[claim]["ours"], rows[claim]["verdict"]) == ("m: pending (0/4 seeds)", "undecided")
    assert rows["rq3-snli-accuracy"]["verdict"] == "reproduced"
    assert rows["rq3-method"]["verdict"] == "undecided"  # one claimed gain still waits
    assert rows["rq4-consistent-across-models"]["verdict"] == "undecided"
    unplanned = {row["id"]: row for row in glance.rq3_rq4_rows(snli, planned_seeds={("a", "snli"): 6})}
    assert (unplanned["rq3-squad2-f1"]["ours"], unplanned["rq3-squad2-f1"]["verdict"]) == (
        "no runs", "not testable here")
    assert unplanned["rq3-method"]["verdict"] == "reproduced"


def _pilots(*rows):
    return pd.DataFrame([{"model": m, "task": t, "duplication": "baseline", "seed": 100,
                          f"metrics.{metric}": v} for m, t, metric, v in rows])


def test_a_task_dropped_after_pilots_that_missed_the_floor_did_not_learn():
    snli = _runs("a", "snli", "accuracy", 0.70, +0.010)  # 6 seeds, reproduced
    pilots = _pilots(("m", "squad2", "HasAns_f1", 2.39), ("m", "squad2", "HasAns_f1", 23.36),
                     ("p", "sst2", "accuracy", 0.70))
    assert glance.pilot_shortfalls(pilots) == {
        ("m", "squad2"): "did not learn in 2 pilots (best HasAns_f1 23.36 < floor 25); not run",
        ("p", "sst2"): "did not learn in 1 pilot (best accuracy 70.00 < floor 80); not run"}
    rows = {row["id"]: row for row in glance.rq3_rq4_rows(
        snli, planned_seeds={("a", "snli"): 6}, pilots=pilots)}
    for claim in ("rq3-squad2-f1", "rq3-squad2-exact"):
        assert rows[claim]["ours"] == ("m: did not learn in 2 pilots (best HasAns_f1 23.36 < floor "
                                       "25); not run")
        assert rows[claim]["verdict"] == "did not learn"
    # p's SST-2 pilot failed but a ran SST-2 and decided nothing yet: no runs of p, a's text stays
    assert rows["rq3-snli-accuracy"]["verdict"] == "reproduced"
    # over the claimed gains that learned: SQuAD did not learn and is left out, SNLI reproduced
    assert rows["rq3-method"]["verdict"] == "reproduced"
    # only a learned a paper task: consistency across models cannot be seen in one
    assert rows["rq4-consistent-across-models"]["verdict"] == "not testable here"
    alone = glance.rq3_rq4_rows(pd.DataFrame(), pilots=pilots)
    assert {r["id"]: r["verdict"] for r in alone}["rq3-method"] == "did not learn"
    two = _pilots(("zz", "squad2", "HasAns_f1", 3.0), ("aa", "squad2", "HasAns_f1", 4.0))
    assert list(glance.pilot_shortfalls(two)) == [("zz", "squad2"), ("aa", "squad2")]  # as given
    learned = _pilots(("m", "squad2", "HasAns_f1", 2.39), ("m", "squad2", "HasAns_f1", 25.0))
    assert glance.pilot_shortfalls(learned) == {} and glance.pilot_shortfalls(None) == {}
    # a pilot that missed the floor says nothing of a model and task that is planned or ran
    planned = {row["id"]: row for row in glance.rq3_rq4_rows(
        snli, planned_seeds={("a", "snli"): 6, ("m", "squad2"): 4}, pilots=pilots)}
    assert planned["rq3-squad2-f1"]["ours"] == "m: pending (0/4 seeds)"
    table = glance.results_at_a_glance(None, None, None, snli, None, {("a", "snli"): 6}, pilots)
    assert table.set_index("id").loc["rq3-squad2-f1", "verdict"] == "did not learn"


def test_no_gain_claim_and_the_method_and_rq4_rows():
    snli = _runs("a", "snli", "accuracy", 0.70, +0.010)
    sst2 = _runs("a", "sst2", "accuracy", 0.85, +0.00001, trivial=0.51)
    rows = _rq3(pd.concat([snli, sst2]))
    assert rows["rq3-sst2-accuracy"]["verdict"] == "reproduced"  # CI within +-0.5 points
    assert rows["rq3-method"]["verdict"] == "reproduced"  # SNLI, the only claimed gain tested
    # one model: across models is not testable, however well it agrees with itself
    assert rows["rq4-consistent-across-models"]["verdict"] == "not testable here"
    assert rows["rq4-consistent-across-models"]["ours"].endswith(
        "across models needs two such models: not testable with one")
    lost = _runs("a", "sst2", "accuracy", 0.85, -0.02, trivial=0.51)
    rows = _rq3(pd.concat([snli, lost]))
    assert rows["rq3-sst2-accuracy"]["verdict"] == "refuted"  # a significant loss refutes "no gain"
    # one model, but a refuted task claim: the gain is not consistent across tasks
    assert rows["rq4-consistent-across-models"]["verdict"] == "refuted"
    assert rows["rq3-method"]["verdict"] == "reproduced"  # the method's claim is about gains


def test_rq1_is_refuted_when_a_hidden_state_decodes_no_better_than_the_control():
    rows = [dict(model="m", init=v, layer=layer, top1=t, n_tokens=1000)
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


def _probe(model, variant, tops, n_tokens=400, column="init"):
    return [{"model": model, column: variant, "layer": layer, "top1": top1, "n_tokens": n_tokens}
            for layer, top1 in enumerate(tops)]


def test_rq1_rows_name_each_models_worst_hidden_state_and_its_control():
    reconstruction = pd.DataFrame(
        _probe("m", "pretrained", [0.3, 0.9, 0.8, 0.95])
        + _probe("m", "random-init control", [0.05, 0.1, 0.02, 0.01])
        + _probe("splade-tiny-en", "pretrained", [0.0] * 4)  # not a pretrained head: not judged
        + _probe("splade-tiny-en", "random-init control", [0.0] * 4))
    duplicated = pd.DataFrame(
        _probe("m", "baseline", [0.3, 0.9, 0.8, 0.95], column="duplication")
        + _probe("m", "copy first 1", [0.3, 0.9, 0.85, 0.7, 0.9], column="duplication")
        + _probe("m", "copy block 2", [0.3, 0.9, 0.8, 0.75, 0.6], column="duplication")
        + _probe("other", "copy first 1", [0.0] * 3, column="duplication"))  # no control: skipped
    every, with_copies = glance.rq1_rows(reconstruction, duplicated)
    low, high = glance.wilson_interval(0.8, 400)
    assert (round(low, 3), round(high, 3)) == (0.758, 0.836)
    assert every == {
        "id": "rq1-head-decodes-every-layer", "rq": 1,
        "claim": paper.claim("rq1-head-decodes-every-layer").statement, "paper": "not stated",
        "ours": "hidden states 1..L of m; top-1 at the worst one: m: 0.800 [0.758, 0.836] at "
                "hidden state 2 (control at most 0.100; embedding output 0.300)",
        "verdict": "reproduced", "evidence": "rq1", "section": "what-the-numbers-say",
        "headline": "weakest of 1 models: m 0.800 [0.758, 0.836] at hidden state 2; random-init "
                    "controls at most 0.100"}
    assert with_copies["ours"] == ("top-1 at the worst hidden state 1..L of any duplicated variant: "
                                   "m: 0.600 [0.551, 0.647] (copy block 2, hidden state 4; "
                                   "2 variants)")
    assert (with_copies["verdict"], with_copies["section"]) == (
        "reproduced", "reconstruction-through-duplicated-models")
    (_, none) = glance.rq1_rows(reconstruction, duplicated.iloc[:0])
    assert (none["ours"], none["verdict"]) == ("no duplicated models probed", "undecided")
    assert glance.rq1_rows(reconstruction)[1]["ours"] == "no duplicated models probed"


@pytest.mark.parametrize("checks, expected", [
    ([], "not testable here"),
    ([(0.5, 0.6, 0.4)], "reproduced"),  # both bounds met exactly
    ([(0.49, 0.6, 0.1)], "undecided"),  # below 0.5
    ([(0.55, 0.7, 0.5)], "undecided"),  # not 0.1 above the control
    ([(0.3, 0.5, 0.4)], "refuted"),  # the upper bound reaches control + 0.1
    ([(0.9, 1.0, 0.1), (0.3, 0.45, 0.4)], "refuted"),  # one model is enough
    ([(0.9, 1.0, 0.1), (0.45, 0.6, 0.1)], "undecided"),
])
def test_rq1_verdict_bounds(checks, expected):
    assert glance._rq1_verdict(checks) == expected


def _spearman(*rows):
    columns = ["model", "similarity", "rho", "p_value", "n_layers", "rho_given_depth",
               "p_value_given_depth"]
    return pd.DataFrame([dict(zip(columns, row)) for row in rows])


NAN = float("nan")
SPEARMAN = _spearman(("a", "cka_to_last", 0.9, 0.001, 12, 0.5, 0.04),
                     ("b (shared)", "cka_to_last", 0.7, 0.01, 13, NAN, NAN),
                     ("a", "cka_debiased_to_last", 0.8, 0.002, 12, 0.6, 0.03),
                     ("splade-tiny-en x", "cka_debiased_to_last", -0.9, 0.001, 3, -0.9, 0.001),
                     ("c", "cka_debiased_to_last", NAN, NAN, 3, NAN, NAN))


def test_rq2_prefers_debiased_cka_and_the_partial_correlation():
    row = glance.rq2_row(SPEARMAN)  # splade's head is not judged; c has no correlation
    assert row["ours"] == "a: rho +0.80 (p 0.002, 12 hidden states), given depth +0.60 (p 0.03)"
    assert row["verdict"] == "reproduced"
    assert (row["evidence"], row["section"]) == ("rq2", "what-the-numbers-say")
    biased = glance.rq2_row(SPEARMAN, "cka_to_last")
    assert biased["ours"] == ("a: rho +0.90 (p 0.001, 12 hidden states), given depth +0.50 (p 0.04); "
                              "b (shared): rho +0.70 (p 0.01, 13 hidden states), given depth: none "
                              "(monotone in depth)")
    assert biased["verdict"] == "undecided"  # b's CKA cannot be told from depth


def test_rq2_without_partial_correlations_or_any_correlation():
    plain = glance.rq2_row(SPEARMAN.drop(columns=["rho_given_depth", "p_value_given_depth"]).iloc[:2])
    assert plain["ours"] == ("a: rho +0.90 (p 0.001, 12 hidden states); b (shared): rho +0.70 "
                             "(p 0.01, 13 hidden states)")
    assert plain["verdict"] == "reproduced"
    weak = SPEARMAN.iloc[:1].assign(p_value_given_depth=0.05)  # p must be below 0.05
    assert glance.rq2_row(weak)["verdict"] == "undecided"
    none = glance.rq2_row(SPEARMAN.iloc[4:])
    assert (none["ours"], none["verdict"]) == ("no correlations", "not testable here")


def test_rq5_rows_show_our_ensembles_beside_the_papers_numbers():
    summary = pd.DataFrame(
        [dict(model="x", task="squad2", metric=metric, kind=kind, mean=mean, ci_low=mean - 1,
              ci_high=mean + 1)
         for metric in ("exact", "f1")
         for kind, mean in (("cross-configuration", 60.0), ("same-configuration", 59.5),
                            ("best single", 58.25), ("single", 57.0))]
        + [dict(model="x", task="uspto50k", metric="exact", kind="cross-configuration", mean=1.0,
                ci_low=0.0, ci_high=2.0)])
    exact, f1 = glance.rq5_rows(summary)
    shown = ("x: cross-configuration 60.00 [59.00, 61.00], same-configuration 59.50 [58.50, 60.50], "
             "best single 58.25 [57.25, 59.25]")
    assert (exact["id"], exact["ours"], exact["verdict"]) == (
        "rq5-ensemble-squad2-exact", shown, "not testable here")
    assert (f1["id"], f1["ours"]) == ("rq5-ensemble-squad2-f1", shown)
    assert (exact["evidence"], exact["section"]) == ("rq5", "the-paper-beside-ours")
    assert [r["ours"] for r in glance.rq5_rows(None)] == ["no SQuAD 2.0 ensembles"] * 2
    assert [r["ours"] for r in glance.rq5_rows(summary.iloc[8:])] == ["no SQuAD 2.0 ensembles"] * 2


def test_rq3_rq4_rows_texts_and_links():
    rows = _rq3(pd.concat([_runs("a", "snli", "accuracy", 0.70, +0.010),
                           _runs("b", "sst2", "accuracy", 0.85, +0.00001, trivial=0.51)]))
    assert list(rows) == ["rq3-method", "rq3-squad2-f1", "rq3-squad2-exact", "rq3-snli-accuracy",
                          "rq3-sst2-accuracy", "rq4-consistent-across-models"]
    assert rows["rq3-method"]["ours"] == (
        "rq3-squad2-f1: not testable here; rq3-squad2-exact: not testable here; "
        "rq3-snli-accuracy: reproduced; rq3-sst2-accuracy: reproduced")
    assert (rows["rq3-squad2-f1"]["ours"], rows["rq3-squad2-f1"]["verdict"]) == (
        "no runs", "not testable here")
    assert rows["rq3-snli-accuracy"]["ours"] == (
        "a: copy first 3 +0.97 [+0.80, +1.14] points (p 2.82e-05, 6 seeds)")
    assert rows["rq3-sst2-accuracy"]["ours"] == (
        "b: copy first 3 -0.03 [-0.20, +0.14] points (p 0.648, 6 seeds)")
    assert {(row["evidence"], row["section"]) for row in rows.values()} == {
        ("rq3", "what-the-numbers-say"), ("rq4", "what-the-numbers-say")}
    rq4 = rows["rq4-consistent-across-models"]
    assert (rq4["ours"], rq4["verdict"]) == (
        "2 models (a, b); judged on the paper's tasks (baseline learned; primary complete or "
        "pending): a (snli); b (sst2); per-claim verdicts as above", "reproduced")
    assert rq4["evidence"] == "rq4"
    empty = {row["id"]: row for row in glance.rq3_rq4_rows(pd.DataFrame())}
    assert (empty["rq4-consistent-across-models"]["ours"],
            empty["rq4-consistent-across-models"]["verdict"]) == (
        "0 models (); judged on the paper's tasks (baseline learned; primary complete or "
        "pending): none; per-claim verdicts as above", "not testable here")
    mixed = _rq3(pd.concat([_runs("r", "uspto50k", "accuracy", 0.85, -0.01, trivial=0.30),
                            _runs("b", "sst2", "accuracy", 0.85, 0.0, trivial=0.51),
                            _runs("a", "snli", "accuracy", 0.70, +0.010),
                            _runs("a", "sst2", "accuracy", 0.85, 0.0, trivial=0.51)]))
    assert mixed["rq4-consistent-across-models"]["ours"] == (  # models and tasks sorted
        "3 models (a, b, r); judged on the paper's tasks (baseline learned; primary complete or "
        "pending): a (snli, sst2); b (sst2); per-claim verdicts as above")
    # a model's task whose baseline missed its floor (SST-2 at 60 < 80) is not named as judged
    missed = _rq3(pd.concat([_runs("a", "snli", "accuracy", 0.70, +0.010),
                             _runs("a", "sst2", "accuracy", 0.60, 0.0, trivial=0.51),
                             _runs("b", "sst2", "accuracy", 0.85, 0.0, trivial=0.51)]))
    assert missed["rq3-sst2-accuracy"]["ours"].startswith("a: did not learn")
    assert missed["rq4-consistent-across-models"]["ours"] == (
        "2 models (a, b); judged on the paper's tasks (baseline learned; primary complete or "
        "pending): a (snli); b (sst2); per-claim verdicts as above")
    assert {row["verdict"] for row in empty.values()} == {"not testable here"}


def test_combining_model_verdicts():
    assert glance._combine([]) == "not testable here"
    assert glance._combine(["did not learn"]) == "did not learn"
    assert glance._combine(["reproduced", "did not learn", "reproduced"]) == "reproduced"
    assert glance._combine(["refuted"]) == "refuted"
    assert glance._combine(["reproduced", "undecided"]) == "undecided"
    assert glance._combine(["undecided", "did not learn"]) == "undecided"


def test_intervals_and_verdict_counts_and_unknown_verdicts():
    assert glance._interval(NAN, 0.0, 1.0) == "n/a"
    assert glance._interval(1.0, NAN, NAN) == "+1.00"
    assert glance._interval(-1.0, -1.5, -0.25) == "-1.00 [-1.50, -0.25]"
    table = pd.DataFrame({"verdict": ["refuted", "refuted", "undecided"]})
    assert glance.verdict_counts(table) == {"reproduced": 0, "refuted": 2, "undecided": 1,
                                            "did not learn": 0, "not testable here": 0}
    with pytest.raises(ValueError, match=r"^verdict 'maybe' is not one of \('reproduced', "):
        glance._row("rq3-method", "", "maybe")
    table = glance.results_at_a_glance(None, None, None, None, None)
    assert list(table.columns) == glance.COLUMNS
    not_run = table[table["rq"] != 5]  # RQ5's rows are always written: not testable here
    assert set(not_run["ours"]) == {"not run"}
    assert table["evidence"].tolist() == [f"rq{c.rq}" for c in paper.CLAIMS]
    assert table["section"].tolist() == [glance.SECTIONS.get(c.id, "what-the-numbers-say")
                                         for c in paper.CLAIMS]


def test_rq1_texts_join_every_judged_model_and_pick_the_first_worst_variant():
    reconstruction = pd.DataFrame(
        _probe("m", "pretrained", [0.3, 0.7, 0.8, 0.95])  # worst at hidden state 1
        + _probe("m", "random-init control", [0.05, 0.1, 0.02, 0.01])
        + _probe("n", "pretrained", [0.2, 0.9, 0.9])
        + _probe("n", "random-init control", [0.0, 0.0, 0.0]))
    duplicated = pd.DataFrame(
        _probe("m", "z copied", [0.3, 0.9, 0.6, 0.9], column="duplication")  # tie: first wins
        + _probe("m", "a copied", [0.3, 0.6, 0.9, 0.9], column="duplication"))
    every, with_copies = glance.rq1_rows(reconstruction, duplicated)
    assert every["ours"] == (
        "hidden states 1..L of m, n; top-1 at the worst one: m: 0.700 [0.653, 0.743] at hidden "
        "state 1 (control at most 0.100; embedding output 0.300); n: 0.900 [0.867, 0.926] at "
        "hidden state 1 (control at most 0.000; embedding output 0.200)")
    assert with_copies["ours"].startswith(
        "top-1 at the worst hidden state 1..L of any duplicated variant: m: 0.600 [0.551, 0.647] "
        "(z copied, hidden state 2; 2 variants)")
    (_, none) = glance.rq1_rows(reconstruction)
    assert (none["ours"], none["verdict"]) == ("no duplicated models probed", "undecided")


def test_glance_html_has_one_short_escaped_row_per_claim_and_the_detail_below():
    table = glance.results_at_a_glance(None, None, None, None, None)
    table.loc[0, "headline"] = "a <b> & c"
    table.loc[0, "ours"] = "every model's detail"
    page = glance.glance_html(table, {"rq1-head-decodes-every-layer": "floor: x"})
    assert page.startswith('<table class="results-at-a-glance table"><thead><tr><th>claim</th>'
                           "<th>paper</th><th>ours (95% CI)</th>"
                           '<th>verdict (<a href="methods.html#methods-glance-rules">rules</a>)'
                           "</th><th>later readings</th></tr></thead><tbody>")
    assert page.count("<tr class=") == len(paper.CLAIMS)
    assert page.count('<tr class="verdict-not-testable-here">') == len(paper.CLAIMS)
    assert "<td>a &lt;b&gt; &amp; c</td>" in page and "<td>floor: x</td>" in page
    first = paper.CLAIMS[0]
    assert f"<td>{glance.SHORT_CLAIMS[first.id]}</td><td>{first.paper_value}</td>" in page
    assert set(glance.SHORT_CLAIMS) == {c.id for c in paper.CLAIMS}
    assert '(<a href="rq1.html#reconstruction-through-duplicated-models">RQ1</a>)' in page
    assert page.count('<a href="rq5.html#the-paper-beside-ours">RQ5</a>') == 2
    table_part, details = page.split("</table>")
    assert details.startswith('<details class="glance-detail"><summary>')
    assert f"<dt><code>{first.id}</code> " in details and "<dd>every model&#x27;s detail</dd>" in details
    with pytest.raises(ValueError, match="section"):
        glance.glance_html(table.drop(columns=["section"]))


def test_later_readings_name_each_dated_rule():
    table = glance.results_at_a_glance(None, None, None, None, None)
    table.loc[table["id"] == "rq4-consistent-across-models", "headline"] = \
        "judged on 2 models of 1 pretrained body (all-MiniLM-L6-v2)"
    floor = pd.DataFrame([{"id": "rq1-head-decodes-every-layer", "with the MLM floor": "reproduced",
                           "judged on": "a, b"}])
    gains = pd.DataFrame([dict(model="all-MiniLM-L6-v2", task="sst2", duplication="copy first 3",
                               n_pairs=8, verdict_two_way="undecidable on this evaluation set",
                               two_way_low=-1.0, two_way_high=1.1, decidable_margin=0.83,
                               verdict_symmetric=None)])
    later = glance.later_readings(floor, None, gains, table)
    assert later == {
        "rq1-head-decodes-every-layer": "MLM floor (2026-12-02): reproduced on 2 models",
        "rq3-sst2-accuracy": "both errors (2026-12-06): undecidable here, no margin under 0.83 points",
        "rq4-consistent-across-models": "in pretrained bodies (2026-12-06): not testable here, one body"}
    snli = pd.concat([gains, gains.assign(task="snli", verdict_two_way="refuted", two_way_low=-2.5,
                                          two_way_high=-0.5, verdict_symmetric="refuted")])
    later = glance.later_readings(None, None, snli, None)
    assert later == {
        "rq3-sst2-accuracy": "both errors (2026-12-06): undecidable here, no margin under 0.83 points",
        "rq3-snli-accuracy": "both errors (2026-12-06): refuted [-2.50, -0.50]; symmetric rule: refuted",
        "rq3-method": "scoped (2026-12-06): refuted for copy first 3 on all-MiniLM-L6-v2 "
                      "(NLI-trained) x SNLI"}
    assert glance.pretrained_body("minilm-mlm-en") == "all-MiniLM-L6-v2"
    assert glance.pretrained_body("rxnfp-bert") == "rxnfp-bert"


def test_wilson_interval_bounds_of_its_inputs():
    assert glance.wilson_interval(1.0, 1) == pytest.approx((0.2065, 1.0), abs=1e-4)
    assert glance.wilson_interval(0.0, 4) == pytest.approx((0.0, 0.4899), abs=1e-4)
    for fraction, n in [(1.01, 10), (-0.1, 10), (0.5, -1)]:
        with pytest.raises(ValueError, match=rf"^need n >= 1 and 0 <= fraction <= 1, got n={n}, "):
            glance.wilson_interval(fraction, n)


@pytest.mark.parametrize("rho, p, expected", [
    (-0.5, 0.3, "undecided"),  # negative but not significant
    (0.0, 0.01, "undecided"),  # neither sign
    (-0.5, 0.05, "undecided"),  # p must be below 0.05
    (-0.5, 0.049, "refuted"),
])
def test_rq2_signs_and_levels(rho, p, expected):
    spearman = _spearman(("a", "cka_to_last", rho, p, 12, NAN, NAN)).drop(
        columns=["rho_given_depth", "p_value_given_depth"])
    assert glance.rq2_row(spearman)["verdict"] == expected


def test_pending_texts_show_the_gain_so_far_only_when_there_is_one():
    reproduce = _runs("a", "snli", "accuracy", 0.70, +0.010)
    refute = _runs("b", "snli", "accuracy", 0.70, -0.010)
    rows = {row["id"]: row for row in glance.rq3_rq4_rows(
        pd.concat([reproduce, refute]), planned_seeds={("a", "snli"): 6, ("b", "snli"): 8})}
    assert rows["rq3-snli-accuracy"]["ours"] == (
        "a: copy first 3 +0.97 [+0.80, +1.14] points (p 2.82e-05, 6 seeds); b: pending (6/8 "
        "seeds), copy first 3 -1.03 [-1.20, -0.86] points so far")
    apart = reproduce[(reproduce["duplication"] == "baseline") | (reproduce["seed"] < 2)].assign(
        seed=lambda f: f["seed"].where(f["duplication"] == "baseline", f["seed"] + 10))
    rows = {row["id"]: row for row in glance.rq3_rq4_rows(apart, planned_seeds={("a", "snli"): 8})}
    assert rows["rq3-snli-accuracy"]["ours"] == "a: pending (2/8 seeds)"  # no pair: no gain yet


def _squad_exact(model, gain):
    """SQuAD 2.0 runs with EM (points) and the HasAns F1 that decides learning (60 > floor 25)."""
    return _runs(model, "squad2", "exact", 70.0, gain, trivial=50.0).assign(
        **{"metrics.HasAns_f1": 60.0, "baselines.HasAns_f1": 0.0})


@pytest.mark.parametrize("gain, expected", [(0.5, "reproduced"), (-0.5, "refuted"),
                                            (0.0005, "undecided")])
def test_squad2_exact_without_a_stated_size_is_decided_by_sign_and_significance(gain, expected):
    row = _rq3(_squad_exact("a", gain))["rq3-squad2-exact"]
    assert row["verdict"] == expected
    assert row["ours"].startswith("a: copy first 3 ") and row["ours"].endswith(", 6 seeds)")


def test_rq3_texts_after_a_model_that_did_not_learn_or_waits():
    learned = _runs("a", "snli", "accuracy", 0.70, +0.010)
    stuck = _runs("b", "snli", "accuracy", 0.40, -0.050)
    assert _rq3(pd.concat([learned, stuck]))["rq3-snli-accuracy"]["ours"] == (
        "a: copy first 3 +0.97 [+0.80, +1.14] points (p 2.82e-05, 6 seeds); b: did not learn "
        "(baseline accuracy 40.50 < floor 55)")
    assert _rq3(pd.concat([stuck, learned]))["rq3-snli-accuracy"]["ours"] == (
        "b: did not learn (baseline accuracy 40.50 < floor 55); a: copy first 3 +0.97 [+0.80, "
        "+1.14] points (p 2.82e-05, 6 seeds)")
    waiting = _runs("c", "snli", "accuracy", 0.70, -0.010, seeds=3)
    rows = {row["id"]: row for row in glance.rq3_rq4_rows(
        pd.concat([waiting, learned]), planned_seeds={("c", "snli"): 6})}
    assert rows["rq3-snli-accuracy"]["ours"].startswith("c: pending (3/6 seeds), copy first 3 ")
    assert rows["rq3-snli-accuracy"]["ours"].endswith(
        " points so far; a: copy first 3 +0.97 [+0.80, +1.14] points (p 2.82e-05, 6 seeds)")
    assert rows["rq3-snli-accuracy"]["verdict"] == "undecided"
    no_primary = _runs("d", "snli", "accuracy", 0.70, 0.0).query("duplication == 'baseline'")
    alone = _rq3(no_primary)["rq3-snli-accuracy"]
    assert (alone["ours"], alone["verdict"]) == ("d: no primary run yet", "undecided")


def test_the_method_is_refuted_by_one_refuted_gain_and_rq4_waits_for_agreement():
    learned = _runs("a", "snli", "accuracy", 0.70, +0.010)
    refute = _runs("b", "snli", "accuracy", 0.70, -0.010)
    assert _rq3(refute)["rq3-method"]["verdict"] == "refuted"
    rows = _rq3(pd.concat([learned, refute]))  # the models disagree
    assert (rows["rq3-method"]["verdict"], rows["rq4-consistent-across-models"]["verdict"]) == (
        "undecided", "undecided")


def test_results_at_a_glance_keeps_every_chapters_rows_and_passes_the_plan_on():
    reconstruction = pd.DataFrame(_probe("m", "pretrained", [0.3, 0.9, 0.8])
                                  + _probe("m", "random-init control", [0.0, 0.0, 0.0]))
    runs = _runs("a", "snli", "accuracy", 0.70, +0.010)
    ensembles = pd.DataFrame([dict(model="x", task="squad2", metric=metric, kind="cross-configuration",
                                   mean=mean, ci_low=mean - 1, ci_high=mean + 1)
                              for metric, mean in (("exact", 60.0), ("f1", 65.0))])
    table = glance.results_at_a_glance(reconstruction, None, SPEARMAN, runs, ensembles,
                                       planned_seeds={("a", "snli"): 8}).set_index("id")
    assert table.loc["rq1-head-decodes-every-layer", "verdict"] == "reproduced"
    assert table.loc["rq2-layers-distributed-similarly", "verdict"] == "reproduced"
    assert table.loc["rq3-snli-accuracy", "ours"].startswith("a: pending (6/8 seeds)")
    assert table.loc["rq5-ensemble-squad2-exact", "ours"] == (
        "x: cross-configuration 60.00 [59.00, 61.00]")
    assert table.loc["rq5-ensemble-squad2-f1", "ours"] == "x: cross-configuration 65.00 [64.00, 66.00]"


def test_rq5_texts_keep_the_models_order_and_rq1_the_lowest_top1():
    ensembles = pd.DataFrame([dict(model=model, task="squad2", metric="f1", kind="best single",
                                   mean=mean, ci_low=mean, ci_high=mean)
                              for model, mean in (("z", 1.0), ("a", 2.0))])
    assert glance.rq5_rows(ensembles)[1]["ours"] == (
        "z: best single 1.00 [1.00, 1.00]; a: best single 2.00 [2.00, 2.00]")
    reconstruction = pd.DataFrame(
        _probe("m", "pretrained", [0.3, 0.9, 0.9]) + _probe("m", "random-init control", [0.0] * 3)
        + _probe("n", "pretrained", [0.3, 0.9, 0.9]) + _probe("n", "random-init control", [0.0] * 3))
    duplicated = pd.DataFrame(  # 0.58 is below 0.6 but above 0.6's lower bound (0.551)
        _probe("m", "first", [0.3, 0.9, 0.6, 0.9], column="duplication")
        + _probe("m", "second", [0.3, 0.9, 0.58, 0.9], column="duplication")
        + _probe("n", "only", [0.3, 0.9, 0.7, 0.9], column="duplication"))
    ours = glance.rq1_rows(reconstruction, duplicated)[1]["ours"]
    assert "m: 0.580 [" in ours and "(second, hidden state 2; 2 variants); n: 0.700 [" in ours


def test_partial_studies_and_probes_do_not_break_the_page():
    """What a study part-way through, or a probe of baselines only, hands the page (found by
    mutation testing: each raised before)."""
    # one model with its primary, one with only a baseline: overall() stores the second's
    # primary as NaN, which must read "no primary run yet", not raise
    learned = _runs("a", "snli", "accuracy", 0.70, +0.010)
    base_only = _runs("b", "snli", "accuracy", 0.70, 0.0)
    base_only = base_only[base_only["duplication"] == "baseline"]
    ours = _rq3(pd.concat([learned, base_only]))["rq3-snli-accuracy"]
    assert ours["verdict"] == "undecided" and "b: no primary run yet" in ours["ours"]
    first = _rq3(pd.concat([base_only, learned]))["rq3-snli-accuracy"]  # the models after it count
    assert first["ours"] == ("b: no primary run yet; a: copy first 3 +0.97 [+0.80, +1.14] points "
                             "(p 2.82e-05, 6 seeds)")
    # a primary without any baseline run: nothing shows learning, and the page says why
    no_base = _runs("c", "snli", "accuracy", 0.70, +0.010)
    no_base = no_base[no_base["duplication"] != "baseline"]
    ours = _rq3(no_base)["rq3-snli-accuracy"]
    assert (ours["ours"], ours["verdict"]) == ("c: no baseline run", "did not learn")
    # a duplicated-probe table whose model has only its baseline: no variant to judge
    reconstruction = pd.DataFrame(_probe("m", "pretrained", [0.3, 0.9, 0.95])
                                  + _probe("m", "random-init control", [0.0, 0.0, 0.0]))
    duplicated = pd.DataFrame(_probe("m", "baseline", [0.3, 0.9, 0.95], column="duplication"))
    (_, copies) = glance.rq1_rows(reconstruction, duplicated)
    assert (copies["ours"], copies["verdict"]) == (
        "top-1 at the worst hidden state 1..L of any duplicated variant: m: no duplicated "
        "variant probed", "not testable here")
    # ... and the models after such a model are still judged
    reconstruction = pd.concat([reconstruction, pd.DataFrame(
        _probe("n", "pretrained", [0.3, 0.9, 0.95]) + _probe("n", "random-init control", [0.0] * 3))])
    duplicated = pd.concat([duplicated, pd.DataFrame(
        _probe("n", "first", [0.3, 0.9, 0.7, 0.9], column="duplication"))])
    (_, copies) = glance.rq1_rows(reconstruction, duplicated)
    assert copies["ours"].startswith("top-1 at the worst hidden state 1..L of any duplicated "
                                     "variant: m: no duplicated variant probed; n: 0.700 [")
    # a model whose SQuAD ensemble means are all NaN is left out, not shown as "y: "
    summary = pd.DataFrame([dict(model=m, task="squad2", metric="f1", kind="cross-configuration",
                                 mean=v, ci_low=v, ci_high=v) for m, v in (("x", 60.0), ("y", NAN))])
    assert glance.rq5_rows(summary)[1]["ours"] == "x: cross-configuration 60.00 [60.00, 60.00]"


def test_tasks_the_paper_says_nothing_about_are_shown_beside_the_method_and_never_judged():
    snli = _runs("a", "snli", "accuracy", 0.70, +0.010)  # reproduced
    loss = _runs("r", "uspto50k", "accuracy", 0.85, -0.010, trivial=0.30)  # a clear loss
    stuck = _runs("s", "uspto50k", "accuracy", 0.50, +0.050, trivial=0.30)  # below the floor 80
    waiting = _runs("w", "uspto50k", "accuracy", 0.85, -0.010, trivial=0.30, seeds=3)
    bare = _runs("b", "uspto50k", "accuracy", 0.85, 0.0, trivial=0.30).query(
        "duplication == 'baseline'")
    # r's per-seed gains are -1.2, -0.9, -1.1, -0.8, -1.0, -1.2 points, w's the first three:
    # scipy.stats.ttest_1samp / t.interval give p 2.03e-05, [-1.20, -0.86] and [-1.45, -0.69]
    rows = {row["id"]: row for row in glance.rq3_rq4_rows(
        pd.concat([snli, loss, stuck, waiting, bare]),
        planned_seeds={("a", "snli"): 6, ("w", "uspto50k"): 6, ("b", "uspto50k"): 4})}
    assert rows["rq3-method"]["ours"] == (
        "rq3-squad2-f1: not testable here; rq3-squad2-exact: not testable here; "
        "rq3-snli-accuracy: reproduced; rq3-sst2-accuracy: not testable here; "
        "beyond the paper's tasks (shown, not judged): "
        "r on uspto50k: copy first 3 -1.03 [-1.20, -0.86] points (p 2.03e-05, 6 seeds); "
        "s on uspto50k: did not learn (baseline accuracy 50.50 < floor 80); "
        "w on uspto50k: pending (3/6 seeds), copy first 3 -1.07 [-1.45, -0.69] points so far; "
        "b on uspto50k: pending (0/4 seeds)")
    # the significant loss on a task without a claim moves no verdict; of the paper's tasks only
    # a's was judged, so RQ4 (across models) is not testable
    assert rows["rq3-method"]["verdict"] == "reproduced"
    assert rows["rq4-consistent-across-models"]["verdict"] == "not testable here"
    nothing_yet = {row["id"]: row for row in glance.rq3_rq4_rows(
        snli, planned_seeds={("a", "snli"): 6, ("z", "uspto50k"): 8})}
    assert nothing_yet["rq3-method"]["ours"].endswith(
        "rq3-sst2-accuracy: not testable here; beyond the paper's tasks (shown, not judged): "
        "z on uspto50k: pending (0/8 seeds)")
    no_runs = {row["id"]: row for row in glance.rq3_rq4_rows(
        pd.DataFrame(), planned_seeds={("z", "uspto50k"): 8})}
    assert no_runs["rq3-method"]["ours"].endswith("(shown, not judged): z on uspto50k: pending (0/8 seeds)")
    alone = {row["id"]: row for row in glance.rq3_rq4_rows(bare)}
    assert alone["rq3-method"]["ours"].endswith(
        "(shown, not judged): b on uspto50k: no primary run yet")
    assert _rq3(snli)["rq3-method"]["ours"].endswith("rq3-sst2-accuracy: not testable here")


def test_a_model_with_runs_but_no_baseline_says_so():
    only_copies = _runs("e", "snli", "accuracy", 0.70, +0.010).query("duplication != 'baseline'")
    row = _rq3(only_copies)["rq3-snli-accuracy"]
    assert (row["ours"], row["verdict"]) == ("e: no baseline run", "did not learn")


# ----------------------------------------------------------------------------- bad input


from dupbert.core.errors import ParameterError  # noqa: E402


@pytest.mark.parametrize("call, message", [
    (lambda: glance.wilson_interval(NAN, 10), "fraction must be a number, got nan"),
    (lambda: glance.wilson_interval("0.5", 10), "fraction must be a number, got '0.5' (str)"),
    (lambda: glance.wilson_interval(0.5, 2.5), "n must be an integer, got 2.5"),
    (lambda: glance.rq2_row(SPEARMAN, measure="cka"),
     "measure 'cka' is not a similarity of the table; it has ['cka_to_last', 'cka_debiased_to_last']"),
    (lambda: glance.rq2_row(SPEARMAN.drop(columns=["n_layers"])),
     "spearman: missing column ['n_layers'] (needed: ['model', 'similarity', 'rho', 'p_value', "
     "'n_layers']); its columns are ['model', 'similarity', 'rho', 'p_value', 'rho_given_depth', "
     "'p_value_given_depth']"),
    (lambda: glance.rq1_rows(pd.DataFrame()),
     "reconstruction: missing columns ['model', 'init', 'layer', 'top1', 'n_tokens'] (needed: "
     "['model', 'init', 'layer', 'top1', 'n_tokens']); it has no columns"),
    (lambda: glance.rq1_rows(pd.DataFrame(_probe("m", "random-init control", [0.0, 0.0]))),
     "m (pretrained): no hidden state 1..L (layer >= 1) in the table, nothing to judge"),
    (lambda: glance.rq1_rows(pd.DataFrame(_probe("m", "pretrained", [0.3, 0.9, NAN, 0.8])
                                          + _probe("m", "random-init control", [0.0] * 4))),
     "m (pretrained): top1 is NaN at hidden state 2; the worst hidden state cannot be chosen "
     "without it"),
    (lambda: glance.pilot_shortfalls(_pilots(("m", "squad2", "HasAns_f1", 2.39),
                                             ("m", "squad2", "HasAns_f1", NAN))),
     "the pilot of m on squad2 (seed 100) has no HasAns_f1 (NaN): the best pilot cannot be told "
     "without it"),
    (lambda: glance.pilot_shortfalls(_pilots(("m", "squad2", "f1", 40.0))),
     "the pilots of m on squad2 have no metrics.HasAns_f1 column, the floor metric of squad2"),
    # a set without answerable questions: the official keys leave HasAns_* out (only NoAns_*)
    (lambda: glance.pilot_shortfalls(_pilots(("m", "squad2", "f1", 40.0)).assign(
        **{"baselines.total": 2000, "baselines.NoAns_total": 2000})),
     "the pilot of m on squad2 (seed 100) was evaluated on a set without HasAns questions: its "
     "HasAns_f1, the floor metric, is undefined; evaluate on a set that has them"),
    (lambda: glance.pilot_shortfalls(_pilots(("m", "squad2", "f1", 40.0)).assign(
        **{"baselines.total": 2000, "baselines.NoAns_total": 2000}).drop(columns="seed")),
     "the pilot of m on squad2 was evaluated on a set without HasAns questions: its HasAns_f1, "
     "the floor metric, is undefined; evaluate on a set that has them"),
    (lambda: glance.pilot_shortfalls(_pilots(("m", "squad2", "HasAns_f1", NAN)).drop(
        columns="seed")),
     "the pilot of m on squad2 has no HasAns_f1 (NaN): the best pilot cannot be told without it"),
    (lambda: glance.pilot_shortfalls(pd.DataFrame({"model": ["m"]})),
     "pilots: missing column ['task'] (needed: ['model', 'task']); its columns are ['model']"),
    (lambda: glance.rq5_rows(pd.DataFrame([dict(model="x", task="squad2", metric="f1", mean=60.0,
                                                ci_low=59.0, ci_high=61.0)])),
     "summary: missing column ['kind'] (needed: ['model', 'task', 'metric', 'kind', 'mean', "
     "'ci_low', 'ci_high']); its columns are ['model', 'task', 'metric', 'mean', 'ci_low', "
     "'ci_high']"),
    (lambda: glance.verdict_counts(pd.DataFrame()),
     "table: missing column ['verdict'] (needed: ['verdict']); it has no columns"),
])
def test_bad_tables_and_values_are_refused_by_name(call, message):
    with pytest.raises(ParameterError) as refused:
        call()
    assert str(refused.value) == message


def test_the_page_refuses_a_run_without_its_metric_instead_of_judging_the_rest():
    runs = _runs("a", "snli", "accuracy", 0.70, +0.010)
    runs.loc[(runs["duplication"] == "copy first 3") & (runs["seed"] == 4), "metrics.accuracy"] = NAN
    with pytest.raises(ParameterError) as refused:
        glance.rq3_rq4_rows(runs)
    assert str(refused.value).startswith("the run of model 'a', task 'snli', duplication 'copy "
                                         "first 3', seed 4 has no accuracy (metrics.accuracy is NaN)")


def _test_row(verdict, gain=float("nan"), low=float("nan"), high=float("nan"), p=float("nan"),
              n_pairs=20, model="a"):
    return pd.DataFrame([{"model": model, "task": "snli", "metric": "accuracy",
                          "configuration": "copy first 3", "n_pairs": n_pairs, "gain": gain,
                          "gain_ci_low": low, "gain_ci_high": high, "p_value": p,
                          "verdict": verdict}])


def test_a_complete_confirmatory_test_decides_its_claim_by_the_studys_rule():
    flat = _runs("a", "snli", "accuracy", 0.70, 0.0)  # the study alone: refuted (CI below +0.6)
    assert _rq3(flat)["rq3-snli-accuracy"]["verdict"] == "refuted"
    cases = [(_test_row("confirmed", 0.40, 0.10, 0.70, 0.01), "reproduced"),  # significant gain
             (_test_row("not confirmed", 0.10, -0.10, 0.30, 0.30), "refuted"),  # ends below +0.6
             (_test_row("not confirmed", 0.30, -0.10, 0.70, 0.12), "undecided"),
             (_test_row("refuted", -0.40, -0.70, -0.10, 0.01), "refuted")]
    for test, expected in cases:
        decisive = glance.decisive_tests(test)
        assert decisive[("a", "snli")][1] == expected
        rows = {r["id"]: r for r in glance.rq3_rq4_rows(flat, decisive=decisive)}
        assert rows["rq3-snli-accuracy"]["verdict"] == expected
        assert "decided by the confirmatory test of copy first 3 on 20 new seeds" in \
            rows["rq3-snli-accuracy"]["ours"]
        assert rows["rq3-snli-accuracy"]["ours"].startswith("a: copy first 3 ")  # the study stays
    undecided = glance.decisive_tests(cases[2][0])
    assert undecided[("a", "snli")][0].endswith("+0.30 [-0.10, +0.70] (p 0.12), undecided")


def test_a_complete_confirmatory_test_decides_its_claim_whatever_another_models_cell_says():
    """As registered: the test's verdict becomes the claim's; a second model's cell is shown."""
    flat = _runs("a", "snli", "accuracy", 0.70, 0.0)
    second = _runs("b", "snli", "accuracy", 0.70, +0.010)  # alone it would reproduce the claim
    assert _rq3(pd.concat([flat, second]))["rq3-snli-accuracy"]["verdict"] == "undecided"
    decisive = glance.decisive_tests(_test_row("not confirmed", 0.10, -0.10, 0.30, 0.30))
    both = pd.concat([flat, second])
    rows = {r["id"]: r for r in glance.rq3_rq4_rows(both, decisive=decisive)}
    assert rows["rq3-snli-accuracy"]["verdict"] == "refuted"
    assert rows["rq3-snli-accuracy"]["ours"].endswith(
        "; b: copy first 3 +0.97 [+0.80, +1.14] points (p 2.82e-05, 6 seeds)")
    pending = {r["id"]: r for r in glance.rq3_rq4_rows(
        both, planned_seeds={("a", "snli"): 6, ("b", "snli"): 8},
        decisive=decisive)}
    assert pending["rq3-snli-accuracy"]["verdict"] == "refuted"
    assert pending["rq3-snli-accuracy"]["ours"].endswith(
        "; b: pending (6/8 seeds), copy first 3 +0.97 [+0.80, +1.14] points so far")
    both_tested = {**decisive, **glance.decisive_tests(_test_row("confirmed", 0.9, 0.7, 1.1, 0.001,
                                                                 model="b"))}
    rows = {r["id"]: r for r in glance.rq3_rq4_rows(both, decisive=both_tested)}
    assert rows["rq3-snli-accuracy"]["verdict"] == "undecided"  # two tests that disagree


def test_a_pending_confirmatory_test_is_shown_and_the_studys_verdict_stands():
    flat = _runs("a", "snli", "accuracy", 0.70, 0.0)
    decisive = glance.decisive_tests(_test_row("pending (3/20 seeds)"))
    assert decisive == {("a", "snli"): ("confirmatory test of copy first 3: pending (3/20 seeds)",
                                        None)}
    rows = {r["id"]: r for r in glance.rq3_rq4_rows(flat, decisive=decisive)}
    assert rows["rq3-snli-accuracy"]["verdict"] == "refuted"
    assert rows["rq3-snli-accuracy"]["ours"].endswith(
        "; confirmatory test of copy first 3: pending (3/20 seeds)")
    other = glance.decisive_tests(_test_row("confirmed", 0.4, 0.1, 0.7, 0.01, model="b"))
    assert _rq3(flat) == {r["id"]: r for r in glance.rq3_rq4_rows(flat, decisive=other)}
