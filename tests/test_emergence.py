"""The emergence rule (dupbert.training.emergence) on constructed records whose answers are known, and on the
committed record of the English models pretrained here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dupbert.training import emergence
from dupbert.book import emergence as book_emergence
from dupbert.training.pretrain import MODELS
from dupbert.book.plots import plot_emergence, plot_pretraining_loss

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


def test_the_summary_table_names_the_steps_and_verdicts():
    r = record({0: [0] * 5, 1: [0, 0, 0.2, 0.6, 0.9], 2: [0, 0, 0.55, 0.7, 0.9]})
    shown = book_emergence.summary_table(emergence.emergence_summary(r)).loc["m"]
    assert shown.to_dict() == {
        "evaluated to": "40", "hidden state 0": "never", "last hidden state": "16",
        "every block output": "25", "stays decodable": "yes", "last to get there": 1,
        "lowest block output at the end": "0.900", "last hidden state at the end": "0.900",
        "duplicated: every block output": "25", "verdict": "emerges with the last layer",
        "by construction": "no", "duplication": "appears with decodability"}


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
    bert = plot_pretraining_loss(loss[loss["model"] == "bert-en-small"], record_)
    # the right panel: every chosen token masked at the output (0.049), not 80/10/10 (about 0.10)
    assert bert.axes[1].lines[0].get_ydata()[-1] == pytest.approx(0.049496, abs=1e-6)


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
    shown = book_emergence.summary_table(emergence.emergence_summary(record_))
    assert list(shown.columns) == list(book_emergence.SUMMARY_HEADINGS.values())
    bert = shown.loc["bert-en-small"]
    assert (bert["last hidden state"], bert["every block output"]) == ("631", "631")
    assert bert["verdict"] == "emerges with the last layer"
    final = book_emergence.final_table(record_)
    # hidden states 0-6 of the models, 0-9 of their duplicated variants (blocks 0-2 copied)
    assert final.index.tolist() == list(range(10))
    assert final.loc[6, ("bert-en-small", "masked")] == "0.049"  # the unigram plateau
    assert final.loc[6, ("bert-en-small", "reconstruction")] == "0.622"
    assert final.loc[9, ("bert-en-small", "reconstruction")] == ""  # not measured there


def test_the_summary_table_says_when_the_trained_on_layer_is_decoded_last():
    record_, _ = emergence.read_record(REPO / "results/cpu", ["albert-en-small", "bert-en-small"])
    shown = book_emergence.summary_table(emergence.emergence_summary(record_))
    assert shown["by construction"].to_dict() == {"albert-en-small": "no", "bert-en-small": "yes"}
    assert shown.loc["albert-en-small", "stays decodable"] == "-"  # never decodable
    r = record({0: [0] * 5, 1: [0, 0, 0.2, 0.6, 0.9], 2: [0, 0, 0.55, 0.7, 0.9]})
    assert book_emergence.summary_table(emergence.emergence_summary(r)).loc["m", "by construction"] == "no"


def plateau_record(masked: list[float], middle: dict[int, list[float]]) -> pd.DataFrame:
    """One model with hidden states 0-3: masked top-1 at the output (hidden state 3) at each of
    STEPS, reconstruction of the middle hidden states ``middle`` (the others 0.9)."""
    rows = []
    for layer in range(4):
        recon = middle.get(layer, [0.9] * len(STEPS))
        rows += [dict(model="m", step=s, measure="reconstruction", layer=layer, top1=v)
                 for s, v in zip(STEPS, recon)]
        rows += [dict(model="m", step=s, measure="masked", layer=layer,
                      top1=masked[i] if layer == 3 else 0.0) for i, s in enumerate(STEPS)]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("masked, middle, verdict, p, fall", [
    # predicting from step 16; hidden state 2 falls 0.04 (within STAY), all >= 0.5 at the end
    ([0.05, 0.1, 0.15, 0.2, 0.3], {1: [0.9] * 5, 2: [0.5, 0.6, 0.64, 0.62, 0.60]},
     "stay decodable", 16, 0.04),
    # hidden state 1 falls 0.11 from P: beyond FALL
    ([0.05, 0.2, 0.2, 0.2, 0.3], {1: [0.9, 0.9, 0.8, 0.7, 0.79], 2: [0.9] * 5},
     "fall as the head specialises", 10, 0.11),
    # a fall of exactly 0.10 is not beyond FALL, but beyond STAY: mixed
    ([0.05, 0.2, 0.2, 0.2, 0.3], {1: [0.9, 0.9, 0.8, 0.7, 0.80], 2: [0.9] * 5}, "mixed", 10, 0.10),
    # no fall, but hidden state 2 ends below 0.5: mixed
    ([0.05, 0.2, 0.2, 0.2, 0.3], {1: [0.9] * 5, 2: [0.3, 0.4, 0.45, 0.45, 0.49]}, "mixed", 10,
     0.0),
    ([0.05, 0.1, 0.1, 0.14, 0.149], {}, "not reached", None, None),
    ([0.05, 0.1, 0.1, 0.14, 0.15], {}, "too early to tell", 40, None),
])
def test_the_rule_past_the_plateau(masked, middle, verdict, p, fall):
    row = emergence.past_plateau(plateau_record(masked, middle)).iloc[0]
    assert row.verdict == verdict and row.F == 40 and row.last_layer == 3
    assert (np.isnan(row.P) if p is None else row.P == p)
    assert (np.isnan(row.largest_fall) if fall is None else row.largest_fall == pytest.approx(fall))


def test_the_committed_record_past_the_plateau():
    """minilm-mlm-en predicts from step 100 (0.190) and its middle hidden states rise to the end;
    the two models from scratch never predict."""
    record_, _ = emergence.read_record(REPO / "results/cpu", ["bert-en-small", "minilm-mlm-en"])
    table = emergence.past_plateau(record_).set_index("model")
    assert table.loc["bert-en-small", "verdict"] == "not reached"
    minilm = table.loc["minilm-mlm-en"]
    assert (minilm.P, minilm.F, minilm.verdict) == (100, 1200, "stay decodable")
    assert round(minilm.masked_P, 3) == 0.190 and round(minilm.lowest_F, 3) == 0.941
    assert minilm.lowest_layer == 3 and minilm.largest_fall < -0.4
    shown = book_emergence.past_plateau_table(table.reset_index())
    assert shown.loc["minilm-mlm-en", "first predicting step P"] == "100"
    assert shown.loc["minilm-mlm-en", "verdict"] == "stay decodable"
    assert shown.loc["bert-en-small", "verdict"] == "not reached"
    assert shown.loc["minilm-mlm-en", "lowest at F"] == "0.941 (hidden state 3)"
    assert shown.loc["bert-en-small", "first predicting step P"] == "-"


def test_stage_costs_and_inherited_tokens_follow_the_loss_rows():
    loss = pd.DataFrame(dict(model=["a"] * 4 + ["b"] * 2, step=[1, 2, 3, 4, 1, 2],
                             tokens_seen=[10, 20, 30, 40, 10, 20],
                             elapsed_s=[3600, 7200, 9000, 10800, 360, 720], loss=1.0))
    record_ = pd.DataFrame(dict(model=["a", "a", "b"], step=[2, 4, 2], measure="masked",
                                layer=1, top1=[0.1, 0.2, 0.3], tokens_seen=[20, 40, 20]))
    costs = emergence.stage_costs(loss, record_, {"a": 2})
    assert costs[["model", "stage", "first_step", "last_step", "tokens"]].values.tolist() == \
        [["a", 1, 1, 2, 20], ["a", 2, 3, 4, 20], ["b", 1, 1, 2, 20]]
    assert costs["hours"].tolist() == pytest.approx([2.0, 1.0, 0.2])
    assert costs["masked_top1"].tolist() == [0.1, 0.2, 0.3]
    shifted, shifted_record = emergence.inherited_tokens(loss, record_, {"b": "a", "a": "x"})
    assert shifted["tokens_seen"].tolist() == [10, 20, 30, 40, 50, 60]
    assert shifted_record["tokens_seen"].tolist() == [20, 40, 60]
    shown = book_emergence.stage_cost_table(costs)
    assert shown.loc[("a", 2), "steps"] == "3-4" and shown.loc[("b", 1), "hours"] == "0.20"


def test_the_sharing_table_compares_at_steps_both_evaluated():
    top1 = pd.DataFrame({"body": [0.1, 0.2, 0.3], "shared": [0.05, np.nan, 0.31]},
                        index=[10, 16, 1000])
    shown = book_emergence.sharing_table(top1, "shared", "body")
    assert shown.index.tolist() == ["10", "1,000"]
    assert shown["shared - unshared"].tolist() == ["-0.050", "+0.010"]


def test_the_rule_past_the_plateau_at_its_exact_bounds():
    """Falls exact in binary: one of exactly ``fall`` is not beyond it (mixed), one of exactly
    ``stay`` is within it (stays), and a hidden state at exactly ``threshold`` is decodable."""
    masked = [0.05, 0.2, 0.2, 0.2, 0.3]
    at_fall = plateau_record(masked, {1: [0.75, 0.75, 0.6, 0.55, 0.5], 2: [0.9] * 5})
    at_stay = plateau_record(masked, {1: [0.625, 0.625, 0.6, 0.55, 0.5], 2: [0.9] * 5})
    assert emergence.past_plateau(at_fall, stay=0.125, fall=0.25).iloc[0].verdict == "mixed"
    assert emergence.past_plateau(at_fall, stay=0.125, fall=0.125).iloc[0].verdict == \
        "fall as the head specialises"
    assert emergence.past_plateau(at_stay, stay=0.125, fall=0.25).iloc[0].verdict == \
        "stay decodable"
    assert emergence.past_plateau(at_stay, stay=0.0625, fall=0.25).iloc[0].verdict == "mixed"


def with_baseline(frame: pd.DataFrame, model: str, top1: float) -> pd.DataFrame:
    row = dict(model=model, step=0, tokens_seen=0, measure=emergence.MOST_FREQUENT, layer=3,
               top1=top1, top5=np.nan, n_tokens=100, loss=np.nan)
    return pd.concat([frame, pd.DataFrame([row])], ignore_index=True)


def test_the_predicting_level_is_a_multiple_of_each_models_baseline():
    masked = [0.05, 0.2, 0.39, 0.41, 0.5]  # at steps 0, 10, 16, 25, 40
    frame = with_baseline(plateau_record(masked, {1: [0.9] * 5, 2: [0.9] * 5}), "m", 0.2)
    levels = emergence.predicting_levels(frame, 2.0)
    assert levels == {"m": pytest.approx(0.4)}
    row = emergence.past_plateau(frame, levels).iloc[0]
    assert (row.P, row.predicting, row.verdict) == (25, pytest.approx(0.4), "stay decodable")
    # the English rule's single level still applies where no mapping is given
    assert emergence.past_plateau(frame).iloc[0].P == 10
    with pytest.raises(ValueError, match=r"no 'most frequent' row .*\['m'\]"):
        emergence.predicting_levels(plateau_record(masked, {1: [0.9] * 5}), 2.0)


def test_across_seeds_gives_the_shared_verdict_or_counts_a_disagreement():
    verdicts = {"a0": "stay decodable", "a1": "stay decodable", "b0": "mixed",
                "b1": "stay decodable", "b2": "mixed"}
    assert emergence.across_seeds(verdicts, {"A": ["a0", "a1"], "B": ["b0", "b1", "b2"],
                                             "C": ["c0"], "D": ["a0", "d1"]}) == {
        "A": "stay decodable", "B": "seeds disagree (2 mixed, 1 stay decodable)",
        "C": "pending (0 of 1 seeds)", "D": "pending (1 of 2 seeds)"}


def test_the_seeds_figure_draws_every_hidden_state_and_marks_where_each_seed_predicts():
    from dupbert.book.emergence_figures import plot_seeds

    masked = [0.05, 0.2, 0.39, 0.41, 0.5]
    frame = with_baseline(plateau_record(masked, {1: [0.9] * 5, 2: [0.9] * 5}), "m", 0.2)
    fig = plot_seeds(frame, {"BERT": ["m", "not run"]}, {"m": 0.4})
    (ax,) = fig.axes
    assert len(ax.lines) == 4 + 1 + 1 + 2  # hidden states 0-3, the output, P, two levels
    assert ax.lines[5].get_xdata()[0] == 25
    with pytest.raises(ValueError, match="no rows of any model"):
        plot_seeds(frame, {"ALBERT": ["x"]}, {})


def test_the_seed_tables_of_the_committed_reaction_bert():
    """bert-rxn (seed 0) as published: predicting from step 750 (0.503), 0.713 at step 1,500,
    every block output decodable from step 63; a run short of its registered steps says how far
    it got and waits in the across-seed answer."""
    record_, _ = emergence.read_record(REPO / "results/cpu", ["bert-rxn"])
    levels = emergence.predicting_levels(record_, 2.0)
    per_seed, across = book_emergence.seed_tables(record_, {"BERT": ["bert-rxn"]}, levels,
                                                  {"bert-rxn": 1500}, 0.5)
    assert per_seed.loc["bert-rxn"].to_dict() == {
        "baseline": "0.247", "P (predicting)": "750", "masked top-1 at P": "0.503",
        "last step F": "1,500", "masked top-1 at F": "0.713", "every block output decodable from": "63",
        "first question": "emerges with the last layer", "largest fall, P to F": "-0.001",
        "second question": "stay decodable"}
    assert across.to_dict("index") == {"BERT": {"first question": "emerges with the last layer",
                                                "second question": "stay decodable"}}
    per_seed, across = book_emergence.seed_tables(record_, {"BERT": ["bert-rxn"]}, levels,
                                                  {"bert-rxn": 2000}, 0.5)
    assert per_seed.loc["bert-rxn", "second question"] == "running (step 1,500 of 2,000)"
    assert across.loc["BERT", "first question"] == "pending (0 of 1 seeds)"
