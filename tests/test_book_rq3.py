"""The RQ3 notebook's plumbing in dupbert.book.rq3: what each cell displays or glues, from small
hand-made frames (no fine-tuning)."""

import gc
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
from IPython.display import Markdown
from matplotlib.figure import Figure

from dupbert.book import rq3 as book_rq3
from dupbert.study import comparisons, paper

REPO = Path(__file__).resolve().parents[1]


def _parameters(**changed):
    """The RQ3 parameters chapter_setup reads, as the smoke profile sets them."""
    values = dict(results_path=None, outputs_dir=None, confirm_profile=None, decisive_profiles=None,
                  growth_profile=None, paired_profiles=None, run_missing=True, device="cpu",
                  profile="smoke")
    return SimpleNamespace(**{**values, **changed})


def _results(per_config, task="snli", trivial=0.34):
    """ResultsFile-like rows of one model: {configuration: [accuracy per seed]}, ``copy first 3``
    the primary comparison, every other configuration a secondary one."""
    rows = []
    for duplication, values in per_config.items():
        reference, role = {"baseline": (None, "reference"),
                           "copy first 3": ("baseline", "primary")}.get(duplication, ("baseline", "secondary"))
        for seed, value in enumerate(values):
            rows.append({"model": "m", "task": task, "duplication": duplication, "seed": seed,
                         "reference": reference, "role": role, "run_key": f"{duplication}-{seed}",
                         "metrics.accuracy": value, "baselines.accuracy": trivial,
                         "baselines.majority_label": "entailment", "n_train": 3000, "n_eval": 5000,
                         "train_steps": 282, "train_time_s": 600.0})
    return pd.DataFrame(rows)


BASE = [0.800, 0.802, 0.799, 0.801, 0.800]
RESULTS = _results({"baseline": BASE, "copy first 3": [b + 0.010 + 0.0005 * i for i, b in enumerate(BASE)],
                    "copy last": [0.30, 0.81, 0.80, 0.80, 0.80]})


def test_chapter_setup_without_a_results_path_uses_a_temporary_folder_removed_with_it():
    setup = book_rq3.chapter_setup(_parameters())
    folder = Path(setup.scratch.name)
    assert setup.results == folder / "rq3.jsonl" and folder.is_dir() and folder.name.startswith("dupbert-rq3-")
    assert setup.outputs is None and setup.confirm is None and setup.growth is None
    assert setup.decisive == [] and setup.paired == [] and setup.later == []
    assert setup.timed is False
    assert setup.header == "device: cpu\nresults: a temporary file; runs missing from it are run"
    del setup
    gc.collect()
    assert not folder.exists()


def test_chapter_setup_takes_paths_from_the_repository_root(monkeypatch):
    monkeypatch.chdir(REPO / "notebooks")  # where the notebook runs
    growth = "notebooks/params/cpu/rq3-growth.yaml"
    setup = book_rq3.chapter_setup(_parameters(
        results_path="results/cpu/rq3.jsonl", outputs_dir="results/cpu/rq3-outputs",
        confirm_profile="notebooks/params/cpu/rq3-confirm.yaml",
        decisive_profiles=["notebooks/params/cpu/rq3-confirm-first3.yaml"], growth_profile=growth,
        paired_profiles=["notebooks/params/cpu/rq3-minilm-mlm-en.yaml", growth],
        run_missing=False, profile="cpu"))
    params = REPO / "notebooks" / "params" / "cpu"
    assert setup.results == REPO / "results" / "cpu" / "rq3.jsonl" and setup.scratch is None
    assert setup.outputs == REPO / "results" / "cpu" / "rq3-outputs"
    assert setup.confirm == params / "rq3-confirm.yaml" and setup.growth == params / "rq3-growth.yaml"
    assert setup.decisive == [params / "rq3-confirm-first3.yaml"]
    assert setup.paired == [params / "rq3-minilm-mlm-en.yaml", params / "rq3-growth.yaml"]
    # the growth arm's comparisons come from the growth profile, not as a later test
    assert setup.later == [params / "rq3-confirm-first3.yaml", params / "rq3-minilm-mlm-en.yaml"]
    assert setup.timed is True
    assert setup.header == ("device: cpu\nresults: results/cpu/rq3.jsonl; "
                            "only the runs already in it are read")


def test_or_note_keeps_rows_and_notes_their_absence():
    frame = pd.DataFrame({"a": [1]})
    assert book_rq3.or_note(frame, "none") is frame
    note = book_rq3.or_note(frame.iloc[:0], "No pilot rows in this checkout.")
    assert isinstance(note, Markdown) and note.data == "No pilot rows in this checkout."


def test_pilot_tables_read_paths_from_the_repository_root(monkeypatch):
    monkeypatch.chdir(REPO / "notebooks")
    relative = book_rq3.pilot_table("results/cpu/rq3-pilot.jsonl")
    pd.testing.assert_frame_equal(relative, book_rq3.pilot_table(REPO / "results/cpu/rq3-pilot.jsonl"))
    assert len(relative) > 0 and relative.index.names == ["model", "task"]
    squad = book_rq3.squad_pilot_table("results/cpu/rq3-pilot-squad2.jsonl")
    assert list(squad["HasAns F1"]) == list(book_rq3.squad_pilot_table(
        REPO / "results/cpu/rq3-pilot-squad2.jsonl")["HasAns F1"]) and len(squad) > 0


def test_pilot_tables_give_their_note_where_the_file_is_missing(tmp_path):
    note = book_rq3.pilot_table(tmp_path / "none.jsonl", "No pilot rows in this checkout.")
    assert isinstance(note, Markdown) and note.data == "No pilot rows in this checkout."
    squad = book_rq3.squad_pilot_table(tmp_path / "none.jsonl", "No SQuAD 2.0 pilot rows in this checkout.")
    assert squad.data == "No SQuAD 2.0 pilot rows in this checkout."
    assert book_rq3.pilot_table(tmp_path / "none.jsonl").empty  # no note: an empty frame, as before


def test_glue_all_glues_every_value_in_order_without_displaying(monkeypatch):
    import myst_nb

    from dupbert.book import text

    glued = []
    monkeypatch.setattr(myst_nb, "glue", lambda name, value, display=True: glued.append((name, value, display)))
    text.glue_all({"rq3_landed": 15, "rq3_cpu_hours": "2.5 CPU-hours"})
    assert glued == [("rq3_landed", 15, False), ("rq3_cpu_hours", "2.5 CPU-hours", False)]


def test_captured_output_keeps_stdout_and_stderr_out_of_the_cell(capsys):
    import sys

    with book_rq3.captured_output() as log:
        print("{'loss': 2.1, 'train_runtime': 12.3}")
        sys.stderr.write("Map: 100%\n")
    print("after")
    assert capsys.readouterr() == ("after\n", "")
    assert log.getvalue() == "{'loss': 2.1, 'train_runtime': 12.3}\nMap: 100%\n"


def test_progress_table_shows_wall_times_only_when_timed():
    progress = pd.DataFrame({"seeds": [5], "planned": [15], "landed": [15], "train_min": [10.0],
                             "eval_min": [1.5]})
    assert list(book_rq3.progress_table(progress, timed=True).columns) == [
        "seeds", "planned", "landed", "train_min", "eval_min"]
    assert list(book_rq3.progress_table(progress, timed=False).columns) == ["seeds", "planned", "landed"]


def test_landed_glue_names_the_numbers_and_hides_smoke_hours():
    progress = pd.DataFrame({"planned": [16, 16]})
    assert book_rq3.landed_glue(progress, RESULTS, timed=True) == {
        "rq3_landed": 15, "rq3_planned": 32, "rq3_steps": 15 * 282, "rq3_cpu_hours": "2.5 CPU-hours"}
    assert book_rq3.landed_glue(progress, RESULTS.iloc[:0], timed=False) == {
        "rq3_landed": 0, "rq3_planned": 32, "rq3_steps": 0, "rq3_cpu_hours": "not shown for smoke runs"}


def test_task_sections_give_a_heading_then_each_metric_with_rows():
    table = comparisons.comparison(RESULTS)
    shown = book_rq3.task_sections(table, RESULTS)
    assert [type(item) for item in shown] == [Markdown, Markdown, pd.DataFrame]  # snli has accuracy only here
    assert shown[0].data.startswith("### snli: ")
    assert shown[0].data.endswith("Used by these runs: 3,000 training and 5,000 evaluation examples.")
    assert shown[1].data == "**accuracy** (points)"
    pd.testing.assert_frame_equal(shown[2], book_rq3.task_table(table, "snli", "accuracy"))
    (note,) = book_rq3.task_sections(pd.DataFrame(), RESULTS.iloc[:0])
    assert note.data == "No runs of this plan have landed yet."


def _two_way(model="all-MiniLM-L6-v2"):
    """A one-row ``variance.two_way_table``."""
    return pd.DataFrame([{"model": model, "task": "snli", "duplication": "copy first 3",
                          "reference": "baseline", "role": "primary", "n_pairs": 8, "gain": 0.32,
                          "seed_low": -0.10, "seed_high": 0.74, "two_way_low": -0.30, "two_way_high": 0.94,
                          "se_example": 0.28, "decidable_margin": 0.55, "verdict": "undecided",
                          "verdict_two_way": "undecided", "verdict_symmetric": "undecided"}])


def test_two_way_tables_show_the_study_then_the_later_cells_with_the_borrowed_error(monkeypatch):
    from dupbert.study import studies, variance

    calls = []
    later = _two_way(model="minilm-mlm-en").assign(gain=-2.36)

    def later_two_way(errors, tests, growth):
        calls.append((errors, tests, growth))
        return later

    monkeypatch.setattr(studies, "later_two_way", later_two_way)
    study = _two_way()
    plain = book_rq3.chapter_setup(_parameters())
    (alone,) = book_rq3.two_way_tables(study, plain)  # no later cells named: none read
    pd.testing.assert_frame_equal(alone, variance.interval_table(study))
    assert calls == []
    setup = book_rq3.ChapterSetup(results=Path("r.jsonl"), outputs=None, confirm=None, decisive=[],
                                  growth=Path("growth.yaml"), paired=[], later=[Path("test.yaml")],
                                  timed=True, header="")
    first, label, cells = book_rq3.two_way_tables(study, setup)
    assert calls == [({"snli": 0.28}, [Path("test.yaml")], Path("growth.yaml"))]
    assert label.data.startswith("**The later cells** (evaluation-set error borrowed")
    assert cells["gain"].tolist() == ["-2.36"]
    # the study without outputs: nothing to show, nothing borrowed
    assert book_rq3.two_way_tables(pd.DataFrame(), setup) == [] and len(calls) == 1


def test_summary_glue_gives_every_glued_value_in_order():
    plan = [SimpleNamespace(model="m", task="snli", duplications=("baseline", "copy first 3", "copy last"),
                            primary=("baseline", "copy first 3"))]
    table = comparisons.comparison(RESULTS)
    points = comparisons.points_frame(RESULTS)
    glued = book_rq3.summary_glue(plan, table, RESULTS, points, pd.DataFrame(), [])
    assert list(glued) == ["rq3_findings", "rq3_stalled", "rq3_runs", "rq3_answer", "rq3_decisive"]
    summary = comparisons.overall(table, family_sizes={("m", "snli"): 1})
    pd.testing.assert_frame_equal(glued["rq3_findings"], book_rq3.findings_table(summary, table, RESULTS))
    assert glued["rq3_findings"].loc[("m", "snli"), "verdict"] == "reproduced"
    assert glued["rq3_stalled"]["stalled runs"].tolist() == ["copy last at seed 0 (30.00)"]
    assert glued["rq3_runs"] == 15
    assert glued["rq3_answer"].loc[("m", "snli"), "95% CI over seeds and examples"] == "-"
    assert glued["rq3_answer"].loc[("m", "snli"), "verdict"] == "reproduced"
    assert glued["rq3_decisive"] == "none in this profile"
    empty = book_rq3.summary_glue(plan, pd.DataFrame(), RESULTS.iloc[:0], pd.DataFrame(), pd.DataFrame(), [])
    assert [getattr(v, "data", v) for v in empty.values()] == [
        "No runs yet.", "None.", 0, "No runs yet.", "none in this profile"]


def test_spread_and_replication_tables():
    points = comparisons.points_frame(RESULTS)
    ours, published = book_rq3.spread_tables(points)
    pd.testing.assert_frame_equal(ours, comparisons.observed_seed_spread(points))
    assert published.index.names == ["source", "task"] and len(published) == len(paper.seed_spread())
    (alone,) = book_rq3.spread_tables(points.iloc[:0])
    pd.testing.assert_frame_equal(alone, published)
    replication, ours_too = book_rq3.replication_tables()
    assert replication.index.names == ["model", "configuration"]
    assert list(replication.columns) == ["exact", "f1", "f1_gain"]
    assert len(replication) == len(paper.replication())
    pd.testing.assert_frame_equal(ours_too, book_rq3.replication_table())


def test_figures_draw_the_runs_or_say_there_are_none():
    points = comparisons.points_frame(RESULTS)
    seeds = book_rq3.paired_seeds_figure(points)
    assert isinstance(seeds, Figure) and len([ax for ax in seeds.axes if ax.has_data()]) == 1
    for empty in (book_rq3.paired_seeds_figure(points.iloc[:0]),
                  book_rq3.loss_figure(RESULTS.iloc[:0], points.iloc[:0])):
        assert isinstance(empty, Figure)
        assert [t.get_text() for ax in empty.axes for t in ax.texts] == ["no runs yet"]
    losses = RESULTS.assign(train_losses=[[2.0 - 0.01 * step for step in range(30)]] * len(RESULTS))
    loss = book_rq3.loss_figure(losses, points)
    assert isinstance(loss, Figure) and len([ax for ax in loss.axes if ax.has_data()]) == 1

