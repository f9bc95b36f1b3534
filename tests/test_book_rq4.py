"""The RQ4 chapter's plumbing (dupbert.book.rq4): the runs it judges, read from results files, the
notes on each task's data, and the numbers its "What the numbers say" section glues."""

import json

import pandas as pd
import pytest

from dupbert.book import rq4 as book_rq4, text
from dupbert.core.results import repository_path
from dupbert.study import comparisons

SMOKE = "notebooks/data/rq3-smoke-example.jsonl"  # 32 smoke runs, committed; no baseline learned


def test_judged_results_reads_each_run_once_and_prints_what_it_read(capsys):
    results, planned, families = book_rq4.judged_results([SMOKE, SMOKE])
    assert capsys.readouterr().out == f"{SMOKE}: 32 runs\n{SMOKE}: 32 runs\n"
    assert len(results) == 32 and results["run_key"].is_unique and results.index.tolist() == list(range(32))
    assert results.groupby(["model", "task"], sort=False).size().to_dict() == {
        ("rxnmapper-albert", "uspto50k"): 8, ("rxnfp-bert", "uspto50k"): 6, ("all-MiniLM-L6-v2", "sst2"): 6,
        ("all-MiniLM-L6-v2", "snli"): 6, ("all-MiniLM-L6-v2", "squad2"): 6}
    assert "setting" in results and (planned, families) == (None, None)


def test_judged_results_keeps_each_cells_main_setting_and_says_how_many_it_left_out(tmp_path, capsys):
    rows = [json.loads(line) for line in repository_path(SMOKE).read_text().splitlines() if line.strip()]
    rows[0]["hyperparameters"]["learning_rate"] = 1e-3  # one run of its own setting
    path = tmp_path / "rq3.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    results, _, _ = book_rq4.judged_results([str(path)])
    assert capsys.readouterr().out == (f"{path}: 32 runs\n1 runs of other settings left out (each model and "
                                       "task keeps its most frequent setting)\n")
    assert len(results) == 31 and rows[0]["run_key"] not in set(results["run_key"])


def test_judged_results_keeps_only_the_runs_a_study_plans_and_returns_its_sizes(capsys):
    """The CPU study plans other subset sizes than the smoke runs': none of them is judged."""
    results, planned, families = book_rq4.judged_results([SMOKE], ["notebooks/params/cpu/rq3.yaml"])
    assert capsys.readouterr().out == (f"{SMOKE}: 32 runs\n"
                                       "32 runs that no study plans for a comparison left out\n")
    assert results.empty
    assert planned == {("all-MiniLM-L6-v2", "snli"): 8, ("all-MiniLM-L6-v2", "sst2"): 8,
                       ("rxnmapper-albert", "uspto50k"): 8, ("rxnfp-bert", "uspto50k"): 4}
    assert families == {("all-MiniLM-L6-v2", "snli"): 2, ("all-MiniLM-L6-v2", "sst2"): 2,
                        ("rxnmapper-albert", "uspto50k"): 4, ("rxnfp-bert", "uspto50k"): 2}


def test_judged_results_needs_a_results_file():
    with pytest.raises(ValueError):
        book_rq4.judged_results([])


def test_data_notes_give_each_task_once_with_what_the_runs_used():
    runs = pd.DataFrame({"task": ["sst2", "sst2"], "n_train": [3000, 3000], "n_eval": [872, 872]})
    notes = text.data_notes(["sst2", "snli", "sst2"], runs).split("\n\n")
    assert len(notes) == 2 and notes[0].startswith("*sst2.* SST-2: ") and notes[1].startswith("*snli.* SNLI: ")
    assert notes[0].endswith("Used by these runs: 3,000 training and 872 evaluation examples.")
    assert "Used by these runs" not in notes[1]  # no run of snli


def _glued(results, planned=None, **paths):
    table = comparisons.comparison(results, planned_seeds=planned)
    main = comparisons.primary_rows(table)
    summary, status = comparisons.overall(main), comparisons.learning_status(results)
    return book_rq4.glued_numbers(results, planned, summary, main, status, **paths)


def test_glued_numbers_where_no_baseline_learned_say_so():
    results, planned, _ = book_rq4.judged_results([SMOKE])
    numbers = _glued(results, planned, pilot_paths=["results/cpu/missing-pilots.jsonl"])
    assert list(numbers) == ["rq4_cells", "rq4_learned", "rq4_not_learned_cells", "rq4_decided", "rq4_pending",
                             "rq4_better", "rq4_worse", "rq4_configurations", "rq4_claimed", "rq4_verdict",
                             "rq4_method"]
    assert [numbers[f"rq4_{name}"] for name in ("cells", "learned", "decided", "pending", "better", "worse")] == [
        5, 0, 0, 0, 0, 0]
    assert numbers["rq4_not_learned_cells"] == ("rxnmapper-albert on uspto50k; rxnfp-bert on uspto50k; "
                                                "all-MiniLM-L6-v2 on sst2; all-MiniLM-L6-v2 on snli; "
                                                "all-MiniLM-L6-v2 on squad2")
    assert numbers["rq4_configurations"].data == numbers["rq4_claimed"].data == book_rq4.NO_CELL_LEARNED
    assert numbers["rq4_verdict"] == "did not learn"
    assert numbers["rq4_method"].startswith("rq3-squad2-f1: did not learn; rq3-squad2-exact: did not learn; "
                                            "rq3-snli-accuracy: did not learn; rq3-sst2-accuracy: did not learn")


def _snli(model, per_configuration):
    return pd.DataFrame([
        {"model": model, "task": "snli", "duplication": duplication, "seed": seed,
         "reference": None if duplication == "baseline" else "baseline",
         "role": {"baseline": "reference", "copy first 3": "primary"}.get(duplication, "secondary"),
         "run_key": f"{model}-{duplication}-{seed}", "metrics.accuracy": value,
         "baselines.accuracy": 0.34, "baselines.majority_label": "entailment"}
        for duplication, values in per_configuration.items() for seed, value in enumerate(values)])


def test_glued_numbers_count_the_learned_cells_and_table_their_configurations():
    """Model a's baseline (50.00) misses SNLI's floor; b's (80.00) learns, its primary gains +0.50
    (not significant) and its secondary +0.00: one model judged, too few for RQ4's verdict."""
    results = pd.concat([
        _snli("a", {"baseline": [0.50, 0.51, 0.49, 0.50], "copy first 3": [0.53, 0.54, 0.52, 0.53]}),
        _snli("b", {"baseline": [0.80, 0.81, 0.79, 0.80], "copy first 3": [0.81, 0.80, 0.80, 0.81],
                    "copy 2": [0.80, 0.80, 0.80, 0.80]})], ignore_index=True)
    numbers = _glued(results)
    assert {name: numbers[f"rq4_{name}"] for name in ("cells", "learned", "not_learned_cells", "decided",
                                                      "pending", "better", "worse")} == {
        "cells": 2, "learned": 1, "not_learned_cells": "a on snli", "decided": 1, "pending": 0,
        "better": 0, "worse": 0}
    assert numbers["rq4_configurations"].to_dict("list") == {
        "role": ["primary", "secondary"], "cells": [1, 1], "gain > 0": [1, 0], "significantly > 0": [0, 0],
        "significantly < 0": [0, 0]}
    assert numbers["rq4_claimed"].index.tolist() == [("b", "snli")]
    assert numbers["rq4_claimed"]["confirmatory test"].tolist() == [""]  # no decisive test given
    assert numbers["rq4_verdict"] == "not testable here"  # RQ4 needs two models with a judged primary
