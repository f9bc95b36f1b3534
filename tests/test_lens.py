"""The per-sequence lens (dupbert.lens), its grid, heat map and command, on the real rxnmapper
ALBERT and a real USPTO-50k reaction."""

import pandas as pd
import pytest
import torch
from matplotlib.figure import Figure

import dupbert
from dupbert.cli import main
from dupbert.tools.lens import LENS_COLUMNS, copy_rate, lens_grid
from dupbert.book.lens_figures import plot_lens

REACTION = "CC(=O)Cl.OCC>>CC(=O)OCC"  # 21 tokens between CLS and SEP
TOKENS = ["C", "C", "(", "=", "O", ")", "Cl", ".", "O", "C", "C", ">>", "C", "C", "(", "=", "O",
          ")", "O", "C", "C"]


@pytest.fixture(scope="module")
def frame(rxnmapper):
    model, tokenizer = rxnmapper
    return dupbert.lens(model, tokenizer, REACTION, k=5)


def test_one_row_per_hidden_state_position_and_guess(frame):
    assert list(frame.columns) == LENS_COLUMNS
    assert len(frame) == 13 * 23 * 5
    assert frame["layer"].unique().tolist() == list(range(13))
    first = frame[(frame["layer"] == 0) & (frame["guess"] == 1)]
    assert first["input_token"].tolist()[:4] == ["[CLS]", "C", "C", "("]
    assert first["special"].tolist() == [True] + [False] * 21 + [True]
    # guesses come in order of probability
    assert (frame.groupby(["layer", "position"])["probability"].diff().dropna() <= 0).all()


def test_last_layer_is_the_model_output(frame, rxnmapper):
    model, tokenizer = rxnmapper
    ids = tokenizer(REACTION, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        probabilities = model(input_ids=ids).logits[0].softmax(-1)
    last = frame[(frame["layer"] == 12) & (frame["guess"] == 1)]
    assert last["token_id"].tolist() == probabilities.argmax(-1).tolist()
    torch.testing.assert_close(torch.tensor(last["probability"].to_numpy()),
                               probabilities.max(-1).values, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(torch.tensor(last["input_probability"].to_numpy()),
                               probabilities.gather(1, ids[0, :, None])[:, 0], rtol=1e-5, atol=1e-6)


def test_input_rank_is_one_exactly_where_the_top1_is_the_input(frame):
    top1 = frame[frame["guess"] == 1]
    assert ((top1["input_rank"] == 1) == (top1["token_id"] == top1["input_id"])).all()
    in_top5 = frame.groupby(["layer", "position"]).apply(
        lambda g: (g["token_id"] == g["input_id"]).any(), include_groups=False)
    rank = top1.set_index(["layer", "position"])["input_rank"]
    assert ((rank <= 5) == in_top5).all()


def test_pinned_reconstruction_of_the_reaction(frame):
    """Measured once: the head reads the input tokens back from hidden state 2 on (cf. RQ1)."""
    real = frame[(frame["guess"] == 1) & ~frame["special"]]
    hits = (real["token_id"] == real["input_id"]).groupby(real["layer"]).sum()
    assert hits.tolist() == [7, 19, 19, 19, 19, 19, 19, 19, 20, 20, 20, 20, 20]  # of 21
    rate = copy_rate(frame)  # what the RQ1 chapter prints per model
    assert rate.index.tolist() == list(range(13))
    assert rate.tolist() == [n / 21 for n in hits.tolist()]
    with pytest.raises(ValueError, match=r"copy_rate needs a lens frame; it lacks \['guess'\]"):
        copy_rate(frame.drop(columns="guess"))


def test_grid_is_layers_by_positions(frame):
    grid = lens_grid(frame)
    assert grid.shape == (13, 21)
    assert [token for _, token in grid.columns] == TOKENS
    assert lens_grid(frame, include_special=True).shape == (13, 23)
    with pytest.raises(ValueError, match="value must be a column"):
        lens_grid(frame, value="logit")


@pytest.mark.parametrize("text, message", [
    ("", "text must be a non-empty string"),
    ("   ", "text must be a non-empty string"),
    (["CCO"], "text must be a non-empty string"),
])
def test_bad_text_is_refused(rxnmapper, text, message):
    with pytest.raises(ValueError, match=message):
        dupbert.lens(*rxnmapper, text)


@pytest.mark.parametrize("k", [0, 592, 2.0])
def test_bad_k_is_refused(rxnmapper, k):
    with pytest.raises(ValueError, match=r"k must be an integer in 1\.\.591"):
        dupbert.lens(*rxnmapper, REACTION, k=k)


def test_lens_stays_the_function_after_its_module_was_imported(rxnmapper):
    import dupbert.tools.lens  # the module lives in its folder: dupbert.lens stays the function

    assert dupbert.lens is dupbert.tools.lens.lens
    pd.testing.assert_frame_equal(dupbert.lens(*rxnmapper, "CCO>>CC=O", k=2),
                                  dupbert.tools.lens.lens(*rxnmapper, "CCO>>CC=O", k=2))


def test_heat_map_writes_the_top1_token_in_every_cell(frame):
    figure = plot_lens(frame, title="rxnmapper-albert")
    assert isinstance(figure, Figure)
    ax = figure.axes[0]
    assert len(ax.texts) == 13 * 21
    assert ax.texts[0].get_text() == frame[(frame["layer"] == 0) & (frame["position"] == 1)
                                           & (frame["guess"] == 1)]["token"].iloc[0]
    cut = plot_lens(frame, value="input_rank", max_positions=5, title="x").axes[0]
    assert len(cut.texts) == 13 * 5 and cut.get_title() == "x (first 5 of 21 positions)"
    with pytest.raises(ValueError, match="value must be 'probability' or 'input_rank'"):
        plot_lens(frame, value="token")


def test_heat_map_draws_a_square_for_a_character_the_font_lacks(frame):
    """The English models' top-1 tokens include Devanagari and Katakana, which DejaVu Sans
    lacks: each such character is drawn as MISSING_GLYPH, with no warning on rendering."""
    import io
    import warnings

    from dupbert.book.lens_figures import MISSING_GLYPH

    odd = frame.copy()
    first = (odd["layer"] == 0) & (odd["position"] == 1) & (odd["guess"] == 1)
    odd.loc[first, "token"] = "\u0920a"  # DEVANAGARI LETTER TTHA, then a Latin letter
    odd.loc[odd["position"] == 2, "input_token"] = "\u30e4"  # KATAKANA LETTER YA
    figure = plot_lens(odd)
    ax = figure.axes[0]
    assert ax.texts[0].get_text() == MISSING_GLYPH + "a"
    assert ax.get_xticklabels()[1].get_text() == MISSING_GLYPH
    assert ax.texts[1].get_text() == odd[(odd["layer"] == 0) & (odd["position"] == 2)
                                         & (odd["guess"] == 1)]["token"].iloc[0]  # drawable: kept
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        figure.savefig(io.BytesIO(), format="png")


def test_command_prints_the_grid(rxnmapper, capsys):
    assert main(["lens", "--model", "rxnmapper-albert", "--text", REACTION]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 14  # header + hidden states 0..12
    assert lines[0].split() == TOKENS
    assert [line.split()[0] for line in lines[1:]] == [f"h{layer}" for layer in range(13)]


def test_command_refuses_empty_text(capsys):
    assert main(["lens", "--model", "rxnmapper-albert", "--text", " "]) == 2
    assert "--text must be a non-empty sequence" in capsys.readouterr().err


@pytest.mark.parametrize("max_length, message", [
    (0, "max_length must be at least 3 (CLS, a token, SEP), got 0"),  # 0: "no truncation"
    (1, "max_length must be at least 3 (CLS, a token, SEP), got 1"),
    (2, "max_length must be at least 3 (CLS, a token, SEP), got 2"),
    (3.5, "max_length must be an integer, got 3.5"),
])
def test_a_max_length_that_leaves_no_token_is_refused(rxnmapper, max_length, message):
    model, tokenizer = rxnmapper
    with pytest.raises(ValueError) as refused:
        dupbert.lens(model, tokenizer, "CCO>>CC=O", max_length=max_length)
    assert str(refused.value) == message


def test_max_length_3_keeps_one_token(rxnmapper):
    model, tokenizer = rxnmapper
    frame = dupbert.lens(model, tokenizer, "CCO>>CC=O", k=1, max_length=3)
    assert frame["position"].nunique() == 3
    assert frame["special"].tolist() == [True, False, True] * (model.config.num_hidden_layers + 1)


def test_an_unknown_device_is_named(rxnmapper):
    from dupbert.core.errors import DeviceNotAvailable

    model, tokenizer = rxnmapper
    with pytest.raises(DeviceNotAvailable, match="device 'gpu' is not a device torch knows"):
        dupbert.lens(model, tokenizer, "CCO>>CC=O", device="gpu")
