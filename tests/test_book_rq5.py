"""The RQ5 chapter's plumbing (dupbert.book.rq5): the paper's claims quoted, the runs it combines,
the partitions shown, each task's data notes, and the numbers its "What the numbers say" glues."""

import json

import IPython.display
import pandas as pd
import pytest

from dupbert.book import rq5 as rq5_book
from dupbert.core.results import repository_path
from dupbert.study import rq5

SMOKE = "notebooks/data/rq3-smoke-example.jsonl"  # 32 smoke runs (2 seeds each), committed
LEFT_OUT = "runs of other settings left out (each model and task keeps its most frequent setting)"


def test_claim_quotes_quote_the_papers_best_ensemble():
    assert rq5_book.claim_quotes() == (
        "> *An ensemble of models with different duplication configurations (output probabilities summed), "
        "ALBERT-based, reaches 85.50 EM on SQuAD 2.0.* (Kao et al. (2020), arXiv 2001.09309, experiments "
        "(ensemble))\n"
        "> *The same best SQuAD 2.0 ensemble (ALBERT-based) reaches 88.59 F1.* (Kao et al. (2020), "
        "arXiv 2001.09309, experiments (ensemble))")


def test_study_runs_read_a_results_file_with_its_outputs_folder(capsys):
    runs, waiting = rq5_book.study_runs(SMOKE)
    assert capsys.readouterr().out == f"{SMOKE}: outputs in notebooks/data/rq3-smoke-example-outputs\n"
    assert len(runs) == 32 and "setting" in runs
    assert set(runs["outputs_dir"]) == {str(repository_path("notebooks/data/rq3-smoke-example-outputs"))}
    assert waiting.empty and list(waiting.columns) == rq5.WAITING_COLUMNS


def test_study_runs_keep_each_cells_main_setting(tmp_path, capsys):
    rows = [json.loads(line) for line in repository_path(SMOKE).read_text().splitlines() if line.strip()]
    rows[0]["max_train_samples"] = 64  # one run of its own setting
    path = tmp_path / "rq3.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    runs, _ = rq5_book.study_runs([str(path)], ["notebooks/data/elsewhere"])
    assert capsys.readouterr().out == f"{path}: outputs in notebooks/data/elsewhere\n1 {LEFT_OUT}\n"
    assert len(runs) == 31 and rows[0]["run_key"] not in set(runs["run_key"])


def test_study_runs_combine_a_study_only_at_its_planned_size(capsys):
    """The CPU study plans 8 seeds (rxnfp-bert 4) where the smoke runs have 2: every planned
    configuration waits; SQuAD 2.0, which the study does not plan, is kept."""
    runs, waiting = rq5_book.study_runs([SMOKE], study_profile="notebooks/params/cpu/rq3.yaml")
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 2 and printed[1].startswith(
        "waiting for their planned seeds, left out until they have all landed: all-MiniLM-L6-v2 on snli: "
        "baseline (2/8 seeds); all-MiniLM-L6-v2 on snli: copy first 3 (2/8 seeds); ")
    assert printed[1].endswith("rxnfp-bert on uspto50k: depth control (0/4 seeds)")
    assert runs.groupby(["model", "task"]).size().to_dict() == {("all-MiniLM-L6-v2", "squad2"): 6}
    assert len(waiting) == 18 and waiting.iloc[0].to_dict() == {
        "model": "all-MiniLM-L6-v2", "task": "snli", "configuration": "baseline", "seeds": 2, "planned": 8}


def test_study_runs_need_one_outputs_folder_per_results_file():
    with pytest.raises(ValueError):
        rq5_book.study_runs([SMOKE], ["a", "b"])


PARTITIONS = pd.DataFrame([
    {"task": "sst2", "model": "a", "assignment": "every rotation (tested above)", "blocks from": "s0",
     "blocks": 2, "difference [95% CI]": "+0.50 [-1.00, +2.00]", "p": "0.400 (1 df: descriptive)",
     "all pairs": "4: +0.50"},
    {"task": "sst2", "model": "a", "assignment": "every rotation", "blocks from": "s1",
     "blocks": 2, "difference [95% CI]": "-0.25 [-1.00, +0.50]", "p": "0.500 (1 df: descriptive)",
     "all pairs": "4: -0.25"}])


def test_show_partitions_displays_both_tables_or_says_there_are_none(monkeypatch, capsys):
    shown = []
    monkeypatch.setattr(IPython.display, "display", shown.append)
    rq5_book.show_partitions(PARTITIONS)
    assert len(shown) == 2 and capsys.readouterr().out == ""
    assert shown[0].index.names == ["task", "model", "assignment", "blocks from"] and len(shown[0]) == 2
    assert shown[1].reset_index().to_dict("records") == [
        {"task": "sst2", "model": "a", "partitions": 2, "range": "-0.25 to +0.50",
         "sign": "changes: not one to rely on", "nominally significant": "too few blocks to test"}]
    rq5_book.show_partitions(PARTITIONS.iloc[:0])
    assert len(shown) == 2
    assert capsys.readouterr().out == "No cross-configuration ensembles: nothing to partition.\n"


def test_glued_numbers_count_the_cells_and_those_whose_baseline_learned():
    findings = pd.DataFrame(
        [{"model": m, "task": t, "metric": "accuracy", "baseline vs floor": f"{m} floor",
          "against same-configuration ensembles": f"{m} vs same", "pending": ""}
         for m, t in (("a", "sst2"), ("b", "uspto50k"), ("s", "squad2"))]).set_index(["model", "task"])
    summary = pd.DataFrame({"model": ["a", "a", "b", "s", "s", "t"], "task": ["sst2", "sst2", "uspto50k",
                                                                            "squad2", "squad2", "squad2"]})
    status = pd.DataFrame({"model": ["a", "b", "s"], "task": ["sst2", "uspto50k", "squad2"],
                           "learned": [True, False, True]})
    numbers = rq5_book.glued_numbers(findings, summary, status)
    assert list(numbers) == ["rq5_findings", "rq5_answer", "rq5_cells", "rq5_informative", "rq5_squad_cells",
                             "rq5_paper_exact", "rq5_paper_f1"]
    assert numbers["rq5_findings"] is findings
    assert numbers["rq5_answer"].to_dict("list") == {"baseline vs floor": ["a floor", "b floor", "s floor"],
                                                     "against same-configuration ensembles": [
                                                         "a vs same", "b vs same", "s vs same"]}
    assert (numbers["rq5_cells"], numbers["rq5_informative"], numbers["rq5_squad_cells"]) == (3, 2, 2)
    assert (numbers["rq5_paper_exact"], numbers["rq5_paper_f1"]) == ("85.50", "88.59")
