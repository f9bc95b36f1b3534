"""The emergence chapter's plumbing (dupbert.book.emergence, dupbert.book.emergence_figures): the
record read once for the chapter, the reaction SMILES section, the RQ1 table beside it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from IPython.display import Markdown

from dupbert.book import emergence as book_emergence
from dupbert.book.emergence_figures import PASTED, run_figures
from dupbert.training import emergence

REPO = Path(__file__).resolve().parents[1]


def rows(model: str, steps: list[int], layers: int = 2) -> list[dict]:
    """Reconstruction and masked rows of ``model`` at ``steps``, hidden states 0..layers."""
    return [dict(model=model, step=s, tokens_seen=10 * s, measure=measure, layer=layer,
                 top1=0.1 * layer + s / 1000, top5=np.nan, n_tokens=100, loss=np.nan)
            for s in steps for measure in ("reconstruction", "masked") for layer in range(layers + 1)]


@pytest.fixture
def tables_dir(tmp_path: Path) -> Path:
    """A record of bert-en-small (steps 0, 1000) and bert-en-small-continued (1000, 2000), the
    latter's rows first; albert-en-small with loss rows only."""
    record = pd.DataFrame(rows("bert-en-small-continued", [1000, 2000]) + rows("bert-en-small", [0, 1000]))
    record.to_csv(tmp_path / "emergence.csv", index=False)
    loss = pd.DataFrame({"model": ["bert-en-small-continued", "bert-en-small", "albert-en-small"],
                         "step": [1001, 1, 1], "tokens_seen": [10010, 10, 10], "loss": [2.0, 9.0, 9.5]})
    loss.to_csv(tmp_path / "pretrain-loss.csv", index=False)
    return tmp_path


def test_read_runs_shows_the_models_then_the_runs_past_the_plateau_that_have_rows(tables_dir):
    runs = book_emergence.read_runs(tables_dir, ["bert-en-small"],
                                    ["albert-minilm-en", "bert-en-small-continued"])
    assert runs.shown == ["bert-en-small", "bert-en-small-continued"]
    assert (runs.running, runs.pending) == (["bert-en-small-continued"], ["albert-minilm-en"])
    assert set(runs.record["model"]) == {"bert-en-small"} and len(runs.record) == 12
    assert len(runs.everything) == 24
    assert list(dict.fromkeys(runs.rows["model"])) == runs.shown  # in the order shown
    assert runs.loss["loss"].tolist() == [9.0, 2.0]
    assert set(runs.later["model"]) == {"bert-en-small-continued"} and len(runs.later) == 12
    assert runs.inits == {"bert-en-small-continued": "bert-en-small"}
    assert runs.stage_sizes == {"bert-en-small": 1000, "bert-en-small-continued": 1000}
    assert book_emergence.steps_evaluated(runs) == (
        "bert-en-small: evaluated at steps 0, 1,000\n"
        "bert-en-small-continued: evaluated at steps 1,000, 2,000\n"
        "no rows yet: albert-minilm-en")


def test_read_runs_names_a_shown_model_without_rows(tables_dir):
    with pytest.raises(ValueError, match=r"no rows of \['albert-en-small'\]"):
        book_emergence.read_runs(tables_dir, ["albert-en-small"], [])
    with pytest.raises(FileNotFoundError, match="emergence.csv"):
        book_emergence.read_runs(tables_dir / "nowhere", ["bert-en-small"], [])


def test_run_figures_draws_the_runs_shown_and_a_placeholder_for_the_others(tables_dir):
    runs = book_emergence.read_runs(tables_dir, ["bert-en-small"], ["albert-minilm-en"])
    figures = run_figures(runs.rows, runs.shown, runs.pending)
    assert list(figures) == ["bert-en-small", "albert-minilm-en",
                             *[name for name in PASTED if name not in ("bert-en-small", "albert-minilm-en")]]
    assert len(figures["bert-en-small"].axes) >= 3  # a heat map per measure
    texts = {name: [t.get_text() for t in fig.axes[0].texts] for name, fig in figures.items()
             if name != "bert-en-small"}
    assert texts["albert-minilm-en"] == ["albert-minilm-en: no rows yet"]
    assert texts["albert-en-small"] == ["albert-en-small: not in this profile"]


def test_reaction_runs_groups_the_registered_seeds_by_architecture():
    everything = pd.DataFrame(rows("bert-rxn", [0]) + rows("bert-en-small", [0]))
    record, groups, missing = book_emergence.reaction_runs(
        everything, ["albert-rxn", "bert-rxn", "bert-rxn-seed1"])
    assert set(record["model"]) == {"bert-rxn"} and len(record) == 6
    assert groups == {"BERT": ["bert-rxn", "bert-rxn-seed1"], "ALBERT": ["albert-rxn"]}
    assert missing == ["albert-rxn", "bert-rxn-seed1"]
    record, groups, missing = book_emergence.reaction_runs(everything, None)
    assert (len(record), groups, missing) == (0, {}, [])
    with pytest.raises(KeyError):
        book_emergence.reaction_runs(everything, ["not-a-run"])


def test_reaction_results_of_the_committed_reaction_bert_and_of_none():
    everything, _ = emergence.read_record(REPO / "results/cpu", ["bert-rxn"])
    figure, per_seed, across, missing = book_emergence.reaction_results(
        everything, ["bert-rxn", "bert-rxn-seed1", "albert-rxn"], 2.0, 0.5)
    assert missing == ["bert-rxn-seed1", "albert-rxn"]
    assert per_seed.index.tolist() == ["bert-rxn"]
    assert per_seed.loc["bert-rxn", "P (predicting)"] == "750"  # 1,500 registered steps: finished
    assert per_seed.loc["bert-rxn", "second question"] == "stay decodable"
    assert across.to_dict("index") == {
        "BERT": {"first question": "pending (1 of 2 seeds)", "second question": "pending (1 of 2 seeds)"},
        "ALBERT": {"first question": "pending (0 of 1 seeds)", "second question": "pending (0 of 1 seeds)"}}
    assert [ax.get_title() for ax in figure.axes] == ["BERT (1 seed)"]  # seeds with rows only

    figure, per_seed, across, missing = book_emergence.reaction_results(everything, None, 2.0, 0.5)
    assert per_seed is None and missing == []
    assert isinstance(across, Markdown) and across.data == book_emergence.NO_REACTION_ROWS[1]
    assert [t.get_text() for t in figure.axes[0].texts] == [book_emergence.NO_REACTION_ROWS[0]]


def test_rq1_reconstruction_reads_the_table_or_gives_no_rows(tmp_path):
    empty = book_emergence.rq1_reconstruction(tmp_path)
    assert empty.empty and {"model", "init", "layer", "top1"} <= set(empty.columns)
    record = pd.DataFrame(rows("m", [0, 10], layers=1))
    assert emergence.beside_rq1(record, empty).empty  # what the chapter then says it lacks
    pd.DataFrame({"model": ["m", "m"], "init": ["pretrained"] * 2, "duplication": ["baseline"] * 2,
                  "layer": [0, 1], "top1": [0.25, 0.5]}).to_csv(tmp_path / "rq1-reconstruction.csv",
                                                                  index=False)
    table = book_emergence.rq1_reconstruction(tmp_path)
    shown = book_emergence.decimals(emergence.beside_rq1(record, table))
    assert shown.to_dict("list") == {("m", "record"): ["0.010", "0.110"], ("m", "RQ1"): ["0.250", "0.500"]}


def test_decimals_and_show(capsys):
    frame = pd.DataFrame({"a": [0.12345, np.nan]})
    assert book_emergence.decimals(frame)["a"].tolist() == ["0.123", ""]
    assert book_emergence.decimals(frame, 1)["a"].tolist() == ["0.1", ""]
    book_emergence.show(None, "nothing here")
    book_emergence.show(frame.iloc[:0], "empty")
    book_emergence.show(frame, "not printed")
    out = capsys.readouterr().out
    assert out.startswith("nothing here\nempty\n") and "not printed" not in out and "0.12345" in out


def test_the_sharing_table_is_none_without_both_runs():
    top1 = pd.DataFrame({"body": [0.1, 0.2]}, index=[10, 20])
    assert book_emergence.sharing_table(top1, "shared", "body") is None
    top1["shared"] = [0.15, 0.1]
    assert book_emergence.sharing_table(top1, "shared", "body")["shared - unshared"].tolist() == [
        "+0.050", "-0.100"]
