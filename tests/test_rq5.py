"""dupbert.study.rq5's chapter tables and text (the RQ5 study design itself: tests/test_ensemble.py)."""

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from dupbert.book import plots
from dupbert.study import rq5, sweeps
from dupbert.book import rq5 as rq5_book
from dupbert.book.text import interval_text
from test_ensemble import _toy_grid  # classifiers with stored outputs, by RQ3's row fields

STATUS = pd.DataFrame([
    {"model": "a", "task": "sst2", "floor_metric": "accuracy", "floor": 80.0, "baseline_mean": 88.5,
     "n_seeds": 4, "learned": True},
    {"model": "b", "task": "uspto50k", "floor_metric": "accuracy", "floor": 80.0, "baseline_mean": 28.91,
     "n_seeds": 4, "learned": False}])


def test_floor_and_waiting_texts():
    assert rq5_book.floor_text(STATUS, "a", "sst2") == "accuracy 88.50 vs floor 80"
    assert rq5_book.floor_text(STATUS, "b", "uspto50k") == "accuracy 28.91 vs floor 80: did not learn"
    assert rq5_book.floor_text(STATUS, "c", "sst2") == "no baseline runs"
    waiting = pd.DataFrame([{"model": "a", "task": "sst2", "configuration": "copy last", "seeds": 3, "planned": 8},
                            {"model": "b", "task": "snli", "configuration": "copy last", "seeds": 1, "planned": 4}],
                           columns=rq5.WAITING_COLUMNS)
    assert rq5_book.waiting_text(waiting) == "a on sst2: copy last (3/8 seeds); b on snli: copy last (1/4 seeds)"
    assert rq5_book.waiting_text(waiting, "a", "sst2") == "copy last 3/8 seeds"
    assert rq5_book.waiting_text(waiting, "c", "sst2") == ""


def test_trivial_scores_are_in_points_per_metric():
    runs = pd.DataFrame({"model": ["a", "a", "s"], "task": ["sst2", "sst2", "squad2"],
                         "baselines.accuracy": [0.50, 0.52, np.nan], "baselines.exact": [np.nan, np.nan, 48.6]})
    trivial = rq5.trivial_scores(runs)
    assert trivial[("a", "sst2", "accuracy")] == pytest.approx(51.0)
    assert trivial[("s", "squad2", "exact")] == pytest.approx(48.6)  # SQuAD: already points
    assert ("a", "sst2", "macro_f1") not in trivial


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """3 configurations x 4 seeds of toy classifiers, k = 2: runs, ensembles, summary, differences."""
    runs = _toy_grid(tmp_path_factory.mktemp("toy"), seeds=(0, 1, 2, 3)).assign(n_eval=4)
    ensembles = rq5.rq5_ensembles(runs, k=2)
    return runs, ensembles, rq5.rq5_summary(ensembles), rq5.rq5_differences(ensembles)


def test_ensemble_counts_give_each_kind_once_and_the_disjoint_blocks(toy):
    runs, ensembles, _, _ = toy
    counts = rq5_book.ensemble_counts(runs, ensembles).reset_index().to_dict("records")
    # 4 offsets x 3 subsets x 2 rotations; controls: 4 offsets x 3 configurations; blocks {0,1}, {2,3}
    assert counts == [{"model": "toy", "task": "sst2", "k": 2, "seeds": 4, "configurations": 3,
                       "eval examples": 4, "single (count)": 12, "cross-configuration (count)": 24,
                       "same-configuration (count)": 12, "disjoint seed blocks": 2}]


def test_summary_and_difference_tables_show_the_frames(toy):
    _, _, summary, differences = toy
    status = STATUS.assign(model="toy")
    table = rq5_book.summary_table(summary, {("toy", "sst2", "accuracy"): 50.0}, status)
    row = table.loc[("sst2", "toy", "accuracy")]
    assert row["trivial"] == "50.00" and row["baseline vs floor"] == "accuracy 88.50 vs floor 80"
    cross = summary[(summary["kind"] == "cross-configuration") & (summary["metric"] == "accuracy")].iloc[0]
    assert row["cross-configuration ensembles, k = 2"] == (
        interval_text(cross["mean"], cross["ci_low"], cross["ci_high"]) + f"; all 24: {cross['mean_all']:.2f}")
    best = summary[(summary["kind"] == "best single") & (summary["metric"] == "accuracy")].iloc[0]
    assert row["best single configuration"].endswith(f" ({best['configuration']})")
    assert table.loc[("sst2", "toy", "macro_f1"), "trivial"] == "nan"
    shown = rq5_book.difference_table(differences, status)
    matched = differences[(differences["metric"] == "accuracy")
                          & (differences["comparison"] == "cross-configuration − same-configuration")].iloc[0]
    row = shown.loc[("sst2", "toy", "accuracy")]
    assert row["cross-configuration − same-configuration: blocks tested of pairs"] == (
        f"2 of 24 (all: {matched['mean_all']:+.2f})")
    assert row["cross-configuration − same-configuration: p"] == f"{matched['p_value']:.3f}"
    assert list(shown.columns)[0] == "baseline vs floor" and len(shown.columns) == 7


def test_cyclic_partitions_test_each_partition_with_every_rotation_and_rotation_0(toy):
    _, ensembles, _, differences = toy
    partitions = rq5_book.cyclic_partitions(ensembles, {"sst2": "accuracy"})
    assert list(zip(partitions["assignment"], partitions["blocks from"])) == [
        ("every rotation (tested above)", "s0"), ("every rotation", "s1"),
        ("rotation 0 only", "s0"), ("rotation 0 only", "s1")]
    matched = differences[(differences["metric"] == "accuracy")
                          & (differences["comparison"] == "cross-configuration − same-configuration")].iloc[0]
    first = partitions.iloc[0]
    assert first["difference [95% CI]"] == interval_text(
        matched["difference"], matched["ci_low"], matched["ci_high"], signed=True)
    assert first["p"].endswith(" (1 df: descriptive)") and first["blocks"] == 2
    assert partitions["all pairs"].str.split(":").str[0].tolist() == ["24", "24", "12", "12"]
    table = rq5_book.partition_table(partitions)
    assert table.index.names == ["task", "model", "assignment", "blocks from"]
    assert rq5_book.cyclic_partitions(ensembles[ensembles["kind"] == "single"], {"sst2": "accuracy"}).empty


def test_robustness_table_says_whether_the_sign_holds():
    partitions = pd.DataFrame({
        "task": "sst2", "model": "a", "assignment": ["every rotation (tested above)", "every rotation",
                                                     "rotation 0 only"],
        "blocks from": ["s0", "s1", "s0"], "blocks": [4, 4, 4],
        "difference [95% CI]": ["+1.47 [+0.60, +2.33]", "-0.63 [-4.33, +3.07]", "+9.00 [+8.00, +10.00]"],
        "p": ["0.020", "0.400", "0.001"], "all pairs": ["120: +0.42"] * 3})
    assert rq5_book.robustness_table(partitions).reset_index().to_dict("records") == [
        {"task": "sst2", "model": "a", "partitions": 2, "range": "-0.63 to +1.47",
         "sign": "changes: not one to rely on", "nominally significant": "1 of 2"}]
    same = partitions.assign(**{"difference [95% CI]": ["+1.47 [+0.60, +2.33]", "+0.63 [-4.33, +3.07]", ""],
                                "blocks": [2, 2, 2]})
    assert rq5_book.robustness_table(same).reset_index().to_dict("records") == [
        {"task": "sst2", "model": "a", "partitions": 2, "range": "+0.63 to +1.47", "sign": "holds",
         "nominally significant": "too few blocks to test"}]
    assert rq5_book.robustness_table(partitions[:1]).empty  # one partition: nothing to compare


def test_every_partition_table_and_what_was_not_partitioned():
    found = pd.DataFrame({"model": "a", "task": "sst2", "metric": "accuracy", "partition": [0, 1, 2],
                          "blocks": "", "n_units": 4, "difference": [0.5, -0.25, 1.0],
                          "ci_low": np.nan, "ci_high": np.nan, "p_value": [0.04, 0.5, 0.01]})
    row = rq5_book.every_partition_table(found, STATUS).reset_index().to_dict("records")[0]
    assert row == {"task": "sst2", "model": "a", "baseline vs floor": "accuracy 88.50 vs floor 80",
                   "partitions": 3, "blocks each": 4, "planned (tested above)": "+0.50",
                   "range": "-0.25 to +1.00", "median": "+0.50", "positive": "2 of 3",
                   "nominal p < 0.05": "2 of 3"}
    differences = pd.DataFrame({"model": ["a", "a", "b"], "task": ["sst2", "sst2", "snli"]})
    assert rq5_book.unpartitioned(found, differences) == "b on snli"
    assert rq5_book.unpartitioned(found, differences[:2]) == "none"


def _squad_summary():
    rows = [("best single", "exact", 40.0), ("best single", "f1", 45.0),
            ("cross-configuration", "exact", 41.0), ("cross-configuration", "f1", 46.5)]
    return pd.DataFrame([{"model": "s", "task": "squad2", "kind": k, "metric": m, "mean": v} for k, m, v in rows])


def test_the_paper_beside_ours_on_squad():
    ensembles = pd.DataFrame({"model": "s", "task": "squad2", "kind": "cross-configuration",
                              "members": ["x (seed 0) + y (seed 1)", "x (seed 1) + y (seed 0)"],
                              "metrics.exact": [40.5, 41.5], "metrics.f1": [46.0, 47.0]})
    table = rq5_book.paper_beside_table(_squad_summary(), ensembles, {("s", "squad2", "exact"): 48.6,
                                                                      ("s", "squad2", "f1"): 48.6})
    assert table.reset_index()[["source", "EM", "F1"]].values.tolist() == [
        ["paper", "85.50", "88.59"], ["paper", "not stated", "not stated"], ["ours", "40.00", "45.00"],
        ["ours", "41.00", "46.50"], ["ours", "41.50", "47.00"], ["ours", "48.60", "48.60"]]
    assert table.index[4][2] == ("best of our 2 cross-configuration ensembles (x (seed 1) + y (seed 0); "
                                 "picked on the evaluation data)")


def test_findings_read_the_differences_or_say_the_baseline_did_not_learn():
    summary = pd.DataFrame({"model": ["a", "b"], "task": ["sst2", "uspto50k"]})
    differences = pd.DataFrame([
        {"model": "a", "task": "sst2", "metric": "accuracy", "comparison": c, "n_pairs": 24, "mean_all": m,
         "n_units": 4, "difference": d, "ci_low": d - 1, "ci_high": d + 1, "p_value": p}
        for c, m, d, p in (("cross-configuration − same-configuration", 0.4, 0.5, 0.03),
                           ("cross-configuration − best single", -0.2, -0.25, 0.6))])
    found = pd.DataFrame({"model": "a", "task": "sst2", "difference": [0.5, -0.1, 0.2], "n_units": 4,
                          "p_value": [0.03, 0.7, 0.2]})
    waiting = pd.DataFrame(columns=rq5.WAITING_COLUMNS)
    table = rq5_book.findings_table(summary, differences, found, waiting, STATUS,
                                    {"sst2": "accuracy", "uspto50k": "accuracy"})
    assert table.reset_index().to_dict("records") == [
        {"model": "a", "task": "sst2", "metric": "accuracy", "baseline vs floor": "accuracy 88.50 vs floor 80",
         "against same-configuration ensembles": "+0.50 [-0.50, +1.50] over 4 blocks (p 0.030, nominally "
                                                 "significant, uncorrected)",
         "over every partition of the seeds": "positive in 2 of 3, nominally significant in 1",
         "against the best single configuration": "-0.25 [-1.25, +0.75] over 4 blocks (p 0.600, not significant)",
         "pending": ""},
        {"model": "b", "task": "uspto50k", "metric": "accuracy",
         "baseline vs floor": "accuracy 28.91 vs floor 80: did not learn",
         "against same-configuration ensembles": "says nothing about RQ5", "over every partition of the seeds": "",
         "against the best single configuration": "", "pending": ""}]


def test_study_files_default_to_the_outputs_folder_beside_each_results_file():
    from dupbert.core.results import repository_path

    files = rq5.study_files("results/cpu/rq3.jsonl")
    assert files == [("results/cpu/rq3.jsonl", repository_path("results/cpu/rq3.jsonl"),
                      repository_path("results/cpu/rq3-outputs"))]
    given = rq5.study_files(["a.jsonl", "b.jsonl"], [None, "elsewhere"])
    assert [folder for _, _, folder in given] == [repository_path("a-outputs"), repository_path("elsewhere")]
    with pytest.raises(ValueError):
        rq5.study_files(["a.jsonl", "b.jsonl"], ["one"])


def test_the_rq5_figure_has_a_panel_per_model_and_task(toy):
    _, ensembles, summary, _ = toy
    points = rq5.ensemble_points(rq5.distinct_ensembles(ensembles))
    fig = plots.plot_rq5_ensembles(points, summary, {"sst2": "accuracy"}, {("toy", "sst2", "accuracy"): 50.0})
    assert isinstance(fig, Figure) and [ax.get_title() for ax in fig.axes] == ["toy on sst2"]
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["single\nruns", "best\nsingle",
                                                            "cross-\nconfiguration", "same-\nconfiguration"]
    assert ax.get_ylabel() == "accuracy (points)" and ax.lines[-1].get_ydata()[0] == 50.0  # trivial
    empty = plots.no_runs_figure()
    assert [t.get_text() for t in empty.axes[0].texts] == ["no runs yet"] and not empty.axes[0].axison


# ----------------------------------------------------------------------------- pinned by mutation testing


def test_smoke_sweeps_pass_each_sweeps_arguments_and_write_rq3_outputs_beside_rq3_jsonl(monkeypatch):
    """run_smoke_sweeps: every sweep's own keyword arguments reach sweep(); the outputs folder is rq3-outputs."""
    calls = []
    monkeypatch.setattr(sweeps, "sweep", lambda **kwargs: calls.append(kwargs))
    results, outputs = sweeps.run_smoke_sweeps([{"model": "m", "task": "sst2"}, {"model": "n", "task": "snli"}])
    assert (results.name, outputs.name, outputs.parent) == ("rq3.jsonl", "rq3-outputs", results.parent)
    assert calls == [{"model": "m", "task": "sst2", "results_path": results, "outputs_dir": outputs,
                      "progress": False},
                     {"model": "n", "task": "snli", "results_path": results, "outputs_dir": outputs,
                      "progress": False}]
    results.parent.rmdir()


def test_summary_table_columns_are_trivial_floor_then_each_kind_in_order(toy):
    """summary_table's column order and labels: trivial, baseline vs floor, then the kinds as a reader sees them."""
    _, _, summary, _ = toy
    table = rq5_book.summary_table(summary, {("toy", "sst2", "accuracy"): 50.0}, STATUS.assign(model="toy"))
    assert list(table.columns) == ["trivial", "baseline vs floor", "every single run", "best single configuration",
                                   "cross-configuration ensembles, k = 2",
                                   "same-configuration ensembles (control), k = 2"]


def test_every_partition_table_says_too_few_blocks_without_a_partition_of_3():
    """every_partition_table: partitions of 2 blocks only give "too few blocks", not a count of p-values."""
    found = pd.DataFrame({"model": "a", "task": "sst2", "metric": "accuracy", "partition": [0, 1],
                          "blocks": "", "n_units": 2, "difference": [0.5, 0.25],
                          "ci_low": np.nan, "ci_high": np.nan, "p_value": [0.01, 0.02]})
    row = rq5_book.every_partition_table(found, STATUS).iloc[0]
    assert (row["blocks each"], row["positive"], row["nominal p < 0.05"]) == (2, "2 of 2", "too few blocks")


def test_robustness_table_keeps_the_order_of_first_appearance():
    """robustness_table: one row per task and model, in the partitions' order (sst2 before snli)."""
    partitions = pd.DataFrame({
        "task": ["sst2", "sst2", "snli", "snli"], "model": "a",
        "assignment": ["every rotation (tested above)", "every rotation"] * 2,
        "blocks from": ["s0", "s1"] * 2, "blocks": 2,
        "difference [95% CI]": ["+1.00 [+0.50, +1.50]", "+2.00 [+1.50, +2.50]",
                                "-1.00 [-1.50, -0.50]", "-3.00 [-3.50, -2.50]"],
        "p": ["0.020", "0.030", "0.040", "0.010"], "all pairs": "12: +0.42"})
    shown = rq5_book.robustness_table(partitions)
    assert shown.index.tolist() == [("sst2", "a"), ("snli", "a")]
    assert shown["range"].tolist() == ["+1.00 to +2.00", "-3.00 to -1.00"]
    assert shown["sign"].tolist() == ["holds", "holds"]


def test_the_paper_beside_ours_names_every_row_and_a_missing_trivial_is_nan():
    """paper_beside_table: the 'what' of every row (same-configuration included); no trivial F1 gives "nan"."""
    same = pd.DataFrame([{"model": "s", "task": "squad2", "kind": "same-configuration", "metric": m, "mean": v}
                         for m, v in (("exact", 39.0), ("f1", 44.25))])
    ensembles = pd.DataFrame({"model": "s", "task": "squad2", "kind": "cross-configuration",
                              "members": ["x (seed 0) + y (seed 1)"], "metrics.exact": [40.5], "metrics.f1": [46.0]})
    table = rq5_book.paper_beside_table(pd.concat([_squad_summary(), same], ignore_index=True), ensembles,
                                        {("s", "squad2", "exact"): 48.6})
    assert table.reset_index().values.tolist() == [
        ["paper", "ALBERT-based", "best ensemble of duplication configurations", "85.50", "88.59"],
        ["paper", "ALBERT-based", "its best single model", "not stated", "not stated"],
        ["ours", "s", "best single configuration (mean over seeds)", "40.00", "45.00"],
        ["ours", "s", "cross-configuration ensembles (mean over disjoint seed blocks)", "41.00", "46.50"],
        ["ours", "s", "same-configuration ensembles (mean over disjoint seed blocks)", "39.00", "44.25"],
        ["ours", "s", "best of our 1 cross-configuration ensembles (x (seed 0) + y (seed 1); picked on the "
                      "evaluation data)", "40.50", "46.00"],
        ["ours", "s", "no answer to every question (trivial)", "48.60", "nan"]]


def _difference(model, task, comparison, mean_all, n_units, difference, p_value):
    return {"model": model, "task": task, "metric": "accuracy", "comparison": comparison, "n_pairs": 24,
            "mean_all": mean_all, "n_units": n_units, "difference": difference, "ci_low": difference - 1,
            "ci_high": difference + 1, "p_value": p_value}


def test_findings_keep_the_summary_order_and_say_what_is_missing_or_pending():
    """findings_table: cells in the summary's order (b before a); no differences; one block (no test); pending."""
    status = pd.concat([STATUS, STATUS.assign(model="c"),
                        STATUS[:1].assign(model="b", task="snli")], ignore_index=True)
    summary = pd.DataFrame({"model": ["b", "a", "c"], "task": ["snli", "sst2", "sst2"]})
    differences = pd.DataFrame([
        _difference("b", "snli", rq5_book._CROSS_VS_SAME, 0.4, 1, 0.5, np.nan),
        _difference("a", "sst2", "cross-configuration − best single", -0.2, 4, -0.25, 0.6)])
    waiting = pd.DataFrame([{"model": "a", "task": "sst2", "configuration": "copy last", "seeds": 3, "planned": 8}],
                           columns=rq5.WAITING_COLUMNS)
    found = pd.DataFrame(columns=["model", "task", "difference", "n_units", "p_value"])
    table = rq5_book.findings_table(summary, differences, found, waiting, status,
                                    {"sst2": "accuracy", "snli": "accuracy"})
    assert table.index.tolist() == [("b", "snli"), ("a", "sst2"), ("c", "sst2")]
    assert table["against same-configuration ensembles"].tolist() == [
        "+0.50 [-0.50, +1.50] on 1 block (no test: fewer than 2 blocks; all 24 pairs: +0.40)", "",
        "too few seeds or configurations for ensembles"]
    assert table.loc[("a", "sst2"), "against the best single configuration"] == (
        "-0.25 [-1.25, +0.75] over 4 blocks (p 0.600, so far: more configurations are planned)")
    assert table["pending"].tolist() == ["", "copy last 3/8 seeds", ""]
