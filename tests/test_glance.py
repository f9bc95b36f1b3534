"""Results at a glance: one row per claim of the paper, with the verdict its rule gives."""

from pathlib import Path

import pandas as pd
import pytest

from dupbert import glance, paper
from dupbert.finetune import ResultsFile

CPU = Path(__file__).resolve().parents[1] / "results" / "cpu"


def _committed(name):
    return pd.read_csv(CPU / f"{name}.csv")


def test_wilson_interval_matches_the_textbook_value():
    low, high = glance.wilson_interval(0.5, 100)
    assert (round(low, 4), round(high, 4)) == (0.4038, 0.5962)
    assert glance.wilson_interval(1.0, 10)[1] == 1.0
    with pytest.raises(ValueError, match="n=0"):
        glance.wilson_interval(0.5, 0)


def test_committed_cpu_evidence_gives_one_row_per_claim_with_its_verdict():
    table = glance.results_at_a_glance(
        _committed("rq1-reconstruction"), _committed("rq1-duplicated"), _committed("rq2-spearman"),
        ResultsFile(CPU / "rq3.jsonl").frame(), _committed("rq5-summary"))
    assert list(table["id"]) == [c.id for c in paper.CLAIMS]
    verdicts = dict(zip(table["id"], table["verdict"]))
    assert verdicts["rq1-head-decodes-every-layer"] == "reproduced"
    assert verdicts["rq1-holds-with-duplicated-layers"] == "reproduced"
    # antiberty's CKA does not track its top-1 (rho -0.14), the reaction models' does
    assert verdicts["rq2-layers-distributed-similarly"] == "undecided"
    # the cpu runs do not learn the tasks: nothing about the fine-tuning claims is decided
    assert {verdicts[c.id] for c in paper.CLAIMS if c.rq in (3, 4)} == {"undecided"}
    assert {verdicts[c.id] for c in paper.CLAIMS if c.rq == 5} == {"not testable here"}
    assert glance.verdict_counts(table) == {"reproduced": 2, "refuted": 0, "undecided": 7,
                                            "not testable here": 2}
    rq1 = table.set_index("id").loc["rq1-head-decodes-every-layer", "ours"]
    assert "rxnfp-bert: 0.775" in rq1 and "hidden state 6" in rq1


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
