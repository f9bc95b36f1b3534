"""The results-at-a-glance page's plumbing (dupbert.book.glance): the tables and runs it reads, the
later readings' inputs, its forest plot and the confirmatory test shown below the table."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from IPython.display import Markdown

from dupbert.book import glance as book_glance
from dupbert.core.results import read_results

REPO = Path(__file__).resolve().parents[1]
SMOKE_RUNS = "notebooks/data/rq3-smoke-example.jsonl"


def reconstruction(models: dict[str, float]) -> pd.DataFrame:
    """Hidden states 0-2 of each model at ``top1`` (pretrained) and 0.01 (its control), 1,000
    tokens each."""
    return pd.DataFrame([dict(model=model, init=init, layer=layer, n_tokens=1000,
                              top1=top1 if init == "pretrained" else 0.01)
                         for model, top1 in models.items()
                         for init in ("pretrained", "random-init control") for layer in range(3)])


def test_read_tables_reads_what_exists_and_says_what_is_missing(tmp_path, capsys):
    reconstruction({"a": 0.9}).to_csv(tmp_path / "rq1-reconstruction.csv", index=False)
    tables = book_glance.read_tables(tmp_path)
    assert list(tables) == list(book_glance.TABLES)
    assert len(tables["rq1-reconstruction"]) == 6
    assert [name for name, frame in tables.items() if frame is None] == [
        "rq1-duplicated", "rq2-spearman", "rq5-summary"]
    assert capsys.readouterr().out.splitlines() == [
        f"missing {tmp_path}/{name}.csv: run its chapter with tables_dir set (make book)"
        for name in ("rq1-duplicated", "rq2-spearman", "rq5-summary")]


def test_fine_tuning_evidence_without_studies_is_every_run_and_nothing_else():
    runs, planned, pilots, decisive = book_glance.fine_tuning_evidence(
        [SMOKE_RUNS, "results/nowhere.jsonl"], None, None, None)
    assert len(runs) == len(read_results([SMOKE_RUNS])) == 32
    assert (planned, pilots, decisive) == (None, None, None)
    runs, planned, pilots, decisive = book_glance.fine_tuning_evidence(
        ["results/nowhere.jsonl"], [], [SMOKE_RUNS], None)
    assert runs is None and planned is None and len(pilots) == 32


def test_verdict_line_counts_every_verdict():
    table = pd.DataFrame({"verdict": ["reproduced", "undecided", "undecided"]})
    assert book_glance.verdict_line(table) == (
        "**3 claims: 1 reproduced, 0 refuted, 2 undecided, 0 did not learn, 0 not testable here.**")


def test_mlm_floors_judge_only_the_models_that_clear_the_floor(tmp_path):
    tables = {"rq1-reconstruction": reconstruction({"a": 0.9, "b": 0.05}), "rq1-duplicated": None,
              "rq2-spearman": None}
    assert book_glance.mlm_floors(tmp_path, tables) == [None, None]  # no quality table yet
    pd.DataFrame({"model": ["a", "b"], "top1": [0.9, 0.05], "majority_top1": [0.1, 0.1]}).to_csv(
        tmp_path / "rq1-mlm-quality.csv", index=False)
    floor, whole = book_glance.mlm_floors(tmp_path, tables)
    assert whole is None
    row = floor.set_index("id").loc["rq1-head-decodes-every-layer"]
    # b's worst hidden state (0.05) is within 0.1 of its control: refuted with b, reproduced without
    assert (row["registered rule"], row["with the MLM floor"]) == ("refuted", "reproduced")
    assert (row["judged on"], row["did not learn (MLM)"]) == ("a", "b")
    assert book_glance.mlm_floors(tmp_path, {**tables, "rq1-reconstruction": None}) == [None, None]


def test_gains_need_a_study():
    assert book_glance.gains_with_both_errors(None, ["x.yaml"], "y.yaml") is None


def test_the_forest_figure_draws_each_task_with_its_claim_or_says_there_is_none():
    gains = pd.DataFrame({"model": ["m", "m", "n"], "task": ["sst2", "snli", "sst2"],
                          "duplication": ["copy first 3"] * 3, "gain": [0.1, 1.0, -0.2],
                          "seed_low": [-0.3, 0.2, -0.6], "seed_high": [0.5, 1.8, 0.2],
                          "two_way_low": [-0.5, 0.0, -0.8], "two_way_high": [0.7, 2.0, 0.4]})
    fig = book_glance.forest_figure(gains)
    snli, sst2 = fig.axes
    assert (snli.get_title(loc="left"), sst2.get_title(loc="left")) == ("snli", "sst2")  # tasks sorted
    assert len(sst2.get_yticks()) == 2 and len(snli.get_yticks()) == 1
    assert 0.6 in [line.get_xdata()[0] for line in snli.lines]  # the paper's claimed SNLI gain
    assert len(sst2.patches) == 1  # SST-2: the paper claims no gain, the ±0.5 band
    for empty in (None, gains.iloc[:0]):
        (ax,) = book_glance.forest_figure(empty).axes
        assert [t.get_text() for t in ax.texts] == [book_glance.NO_GAINS]


def test_confirmed_without_a_test_says_so():
    shown = book_glance.confirmed(None)
    assert isinstance(shown, Markdown) and shown.data == "None in this profile."


def test_confirmed_shows_the_committed_confirmatory_test():
    shown = book_glance.confirmed("notebooks/params/cpu/rq3-confirm.yaml")
    assert list(shown.columns) == book_glance.CONFIRMED_COLUMNS
    assert shown.index.names == ["model", "task", "comparison"]
    assert shown.index.tolist() == [("all-MiniLM-L6-v2", "snli", "copy last - baseline")]
