"""The emergence rule (dupbert.emergence) on constructed records whose answers are known, and on the
committed record of the English models pretrained here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dupbert import emergence
from dupbert.pretrain import MODELS
from dupbert.plots import plot_emergence, plot_pretraining_loss

STEPS = [0, 10, 16, 25, 40]
REPO = Path(__file__).resolve().parents[1]


def record(reconstruction: dict[int, list[float]], duplicated: dict[int, list[float]] | None = None,
           model: str = "m") -> pd.DataFrame:
    """Rows of one model: ``{hidden state: top-1 at each of STEPS}``."""
    rows = []
    for measure, values in (("reconstruction", reconstruction), ("masked", reconstruction),
                            ("reconstruction, duplicated", duplicated or reconstruction)):
        for layer, series in values.items():
            rows += [dict(model=model, step=s, measure=measure, layer=layer, top1=v)
                     for s, v in zip(STEPS, series)]
    return pd.DataFrame(rows)


def test_every_layer_with_the_last_emerges_with_it():
    r = record({0: [0, 0, 0, 0, 0.1], 1: [0, 0, 0.2, 0.6, 0.9], 2: [0, 0, 0.55, 0.7, 0.9]})
    row = emergence.emergence_summary(r).iloc[0]
    assert (row.s_last, row.s_all, row.worst_layer) == (16, 25, 1)
    assert row.verdict_layers == "emerges with the last layer"
    assert np.isnan(row.s_embedding)
    assert row.verdict_duplication == "appears with decodability"  # the same record
    assert row.holds and row.last_step == 40


def test_a_crossing_that_does_not_last_is_reported_and_an_early_duplicate_is_before():
    model = {0: [0] * 5, 1: [0, 0, 0.6, 0.4, 0.2], 2: [0, 0, 0.6, 0.7, 0.9]}
    early = {0: [0] * 5, 1: [0.6] * 5, 2: [0.6] * 5, 3: [0.6] * 5}
    row = emergence.emergence_summary(record(model, early)).iloc[0]
    assert row.s_all == 16 and not row.holds
    assert row.s_duplicated_all == 0 and row.verdict_duplication == "appears before decodability"


def test_a_layer_two_steps_late_emerges_after():
    r = record({0: [0] * 5, 1: [0, 0, 0.1, 0.3, 0.5], 2: [0, 0.5, 0.6, 0.7, 0.9]})
    row = emergence.emergence_summary(r).iloc[0]
    assert (row.s_last, row.s_all) == (10, 40)
    assert row.verdict_layers == "emerges after the last layer"


def test_a_layer_that_never_gets_there_is_not_yet_and_is_the_worst():
    r = record({0: [0.9] * 5, 1: [0, 0, 0.1, 0.2, 0.49], 2: [0, 0.2, 0.3, 0.4, 0.45],
                3: [0, 0.5, 0.6, 0.7, 0.9]})
    row = emergence.emergence_summary(r).iloc[0]
    assert np.isnan(row.s_all) and row.verdict_layers == "not yet"
    assert row.worst_layer == 2  # never decodable, and the lowest at the last step
    assert row.s_embedding == 0
    assert row.final_worst_top1 == pytest.approx(0.45)


def test_the_duplicated_variant_is_judged_against_the_model():
    model = {0: [0] * 5, 1: [0, 0.6, 0.7, 0.8, 0.9], 2: [0, 0.6, 0.7, 0.8, 0.9]}
    late = {**model, 3: [0, 0.1, 0.2, 0.4, 0.6]}
    row = emergence.emergence_summary(record(model, late)).iloc[0]
    assert (row.s_all, row.s_duplicated_all) == (10, 40)
    assert row.verdict_duplication == "appears after decodability"


def test_the_threshold_is_inclusive_and_moves_the_answer():
    r = record({0: [0] * 5, 1: [0, 0.5, 0.6, 0.7, 0.8], 2: [0, 0.5, 0.6, 0.7, 0.8]})
    assert emergence.emergence_summary(r).iloc[0].s_all == 10
    assert emergence.emergence_summary(r, threshold=0.65).iloc[0].s_all == 25


def test_answer_names_the_steps_and_verdicts():
    r = record({0: [0] * 5, 1: [0, 0, 0.2, 0.6, 0.9], 2: [0, 0, 0.55, 0.7, 0.9]})
    text = emergence.answer(emergence.emergence_summary(r))
    assert "first decodable (top-1 >= 0.5) at step 16, every block output at once at step 25 " \
        "and stays so to the last evaluated step" in text
    assert "**emerges with the last layer**" in text
    assert "embedding output is first decodable at no evaluated step" in text


def test_grid_puts_the_last_hidden_state_on_top():
    r = record({0: [0.1] * 5, 1: [0.2] * 5})
    g = emergence.grid(r, "m", "reconstruction")
    assert g.index.tolist() == [1, 0] and g.columns.tolist() == STEPS


def test_the_committed_record_covers_both_models_at_every_step():
    record_, loss = emergence.read_record(REPO / "results/cpu")
    for model in ("bert-en-small", "albert-en-small"):
        rows = record_[record_["model"] == model]
        for step, at_step in rows.groupby("step"):
            counts = at_step["measure"].value_counts().to_dict()
            assert counts == {"reconstruction, duplicated": 10, "reconstruction": 7,
                              "masked": 7, "mlm": 1}, (model, step)
        steps = loss[loss["model"] == model]["step"]
        assert steps.tolist() == list(range(1, steps.max() + 1))  # every step, once
        assert sorted(rows["step"].unique()) == MODELS[model].eval_steps()  # complete, none skipped
        assert steps.max() == MODELS[model].total_steps
    fig = plot_emergence(record_, "bert-en-small")
    assert len(fig.axes) == 6  # three heat maps, three colour bars
    assert len(plot_pretraining_loss(loss, record_).axes) == 2


def test_a_missing_record_names_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="emergence.csv does not exist"):
        emergence.read_record(tmp_path)


def test_beside_rq1_pairs_the_last_step_with_rq1s_baseline():
    r = record({0: [0.1, 0.2, 0.3, 0.4, 0.5], 1: [0, 0, 0.2, 0.6, 0.9]})
    rq1 = pd.DataFrame([dict(model=m, init=v, duplication="baseline", layer=l, top1=t)
                        for m in ("m", "other") for v, t in (("pretrained", 0.7),
                                                             ("random-init control", 0.0))
                        for l in (0, 1)])
    table = emergence.beside_rq1(r, rq1)
    assert table.columns.tolist() == [("m", "record"), ("m", "RQ1")]
    assert table[("m", "record")].tolist() == [0.5, 0.9] and table[("m", "RQ1")].tolist() == [0.7, 0.7]


def test_the_chapter_tables_of_the_committed_record():
    record_, _ = emergence.read_record(REPO / "results/cpu", ["albert-en-small", "bert-en-small"])
    shown = emergence.summary_table(emergence.emergence_summary(record_))
    assert list(shown.columns) == list(emergence.SUMMARY_HEADINGS.values())
    bert = shown.loc["bert-en-small"]
    assert (bert["last hidden state"], bert["every block output"]) == ("631", "631")
    assert bert["verdict"] == "emerges with the last layer"
    final = emergence.final_table(record_)
    # hidden states 0-6 of the models, 0-9 of their duplicated variants (blocks 0-2 copied)
    assert final.index.tolist() == list(range(10))
    assert final.loc[6, ("bert-en-small", "masked")] == "0.049"  # the unigram plateau
    assert final.loc[6, ("bert-en-small", "reconstruction")] == "0.622"
    assert final.loc[9, ("bert-en-small", "reconstruction")] == ""  # not measured there


def test_the_summary_table_writes_never_and_whole_steps():
    r = record({0: [0] * 5, 1: [0, 0, 0.2, 0.6, 0.9], 2: [0, 0, 0.55, 0.7, 0.9]})
    shown = emergence.summary_table(emergence.emergence_summary(r)).loc["m"]
    assert (shown["hidden state 0"], shown["last hidden state"], shown["every block output"],
            shown["last to get there"]) == ("never", "16", "25", 1)


def test_the_answer_says_when_the_trained_on_layer_is_decoded_last():
    record_, _ = emergence.read_record(REPO / "results/cpu", ["albert-en-small", "bert-en-small"])
    text = emergence.answer(emergence.emergence_summary(record_))
    bert = text.split("\n")[1]
    assert "**emerges with the last layer**. The last hidden state, the one the head is trained " \
           "on, is itself the last to get there, so this verdict holds by construction" in bert
    assert "by construction" not in text.split("\n")[0]  # albert-en-small: never decodable
    r = record({0: [0] * 5, 1: [0, 0, 0.2, 0.6, 0.9], 2: [0, 0, 0.55, 0.7, 0.9]})
    assert "by construction" not in emergence.answer(emergence.emergence_summary(r))  # block 1 last

