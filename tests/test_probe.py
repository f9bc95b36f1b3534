"""RQ1 probe on the real pretrained rxnmapper ALBERT over real USPTO-50k reactions."""

import numpy as np
import pandas as pd
import pytest
import torch

from dupbert import probe_models, random_init_control, reconstruction_accuracy
from dupbert.probe import PROBE_COLUMNS, length_batches

# Measured once on the first 64 reactions of USPTO-50k test (6,371 counted tokens), then pinned.
RXNMAPPER_TOP1 = [0.1114, 0.8694, 0.9798, 0.9914, 0.9956, 0.9962, 0.9969, 0.9976, 0.9983,
                  0.9987, 0.9981, 0.9978, 0.9976]
RXNMAPPER_TOP5 = [0.3431, 0.9859, 0.9989, 0.9995, 0.9995, 0.9995, 0.9997, 0.9997, 0.9997,
                  0.9997, 0.9997, 0.9997, 0.9997]


@pytest.fixture(scope="module")
def pretrained_frame(rxnmapper, uspto_first_64):
    model, tokenizer = rxnmapper
    return reconstruction_accuracy(model, tokenizer, uspto_first_64, progress=False)


def test_pinned_per_layer_accuracy(pretrained_frame):
    frame = pretrained_frame
    assert list(frame.columns) == PROBE_COLUMNS
    assert frame["layer"].tolist() == list(range(13))
    assert (frame["n_tokens"] == 6371).all() and (frame["n_sequences"] == 64).all()
    np.testing.assert_allclose(frame["top1"], RXNMAPPER_TOP1, atol=6e-4)
    np.testing.assert_allclose(frame["top5"], RXNMAPPER_TOP5, atol=6e-4)


def test_control_is_far_below_from_hidden_state_2(rxnmapper, uspto_first_64, pretrained_frame):
    model, tokenizer = rxnmapper
    control = reconstruction_accuracy(random_init_control(model, seed=0), tokenizer,
                                      uspto_first_64, progress=False)
    assert (control["top1"] < 0.01).all()
    assert (pretrained_frame["top1"][2:] > 0.97).all()


def test_n_tokens_counts_non_special_tokens(rxnmapper, uspto_first_64, pretrained_frame):
    _, tokenizer = rxnmapper
    by_hand = sum(len(ids) - 2 for ids in tokenizer(uspto_first_64)["input_ids"])
    assert pretrained_frame["n_tokens"][0] == by_hand


def test_batch_equals_one_sequence_at_a_time(rxnmapper, uspto_first_64):
    model, tokenizer = rxnmapper
    texts = uspto_first_64[:12]
    batched = reconstruction_accuracy(model, tokenizer, texts, batch_size=5, progress=False)
    singles = [reconstruction_accuracy(model, tokenizer, [t], batch_size=1, progress=False)
               for t in texts]
    n_tokens = sum(int(s["n_tokens"][0]) for s in singles)
    assert int(batched["n_tokens"][0]) == n_tokens
    hits_single = sum(np.rint(s["top1"] * s["n_tokens"]).astype(int) for s in singles)
    hits_batch = np.rint(batched["top1"] * batched["n_tokens"]).astype(int)
    assert hits_batch.tolist() == hits_single.tolist()
    macro = np.mean([s["top1"].to_numpy() for s in singles], axis=0)
    np.testing.assert_allclose(batched["top1_macro"], macro, rtol=1e-12)


def test_head_in_small_blocks_gives_the_same_table(rxnmapper, uspto_first_64, pretrained_frame,
                                                  monkeypatch):
    model, tokenizer = rxnmapper
    monkeypatch.setattr("dupbert.probe.LOGITS_BLOCK", 61 * model.config.vocab_size)  # 61 positions
    blocked = reconstruction_accuracy(model, tokenizer, uspto_first_64, progress=False)
    pd.testing.assert_frame_equal(blocked, pretrained_frame)


def test_padding_changes_hidden_states_only_within_tolerance(rxnmapper, uspto_first_64):
    model, tokenizer = rxnmapper
    short, long = sorted(uspto_first_64[:8], key=len)[0], sorted(uspto_first_64[:8], key=len)[-1]
    alone = tokenizer([short], return_tensors="pt")
    padded = tokenizer([short, long], return_tensors="pt", padding=True)
    n = alone["input_ids"].shape[1]
    assert padded["input_ids"].shape[1] > n
    with torch.inference_mode():
        a = model.base_model(**alone, output_hidden_states=True).hidden_states
        b = model.base_model(**padded, output_hidden_states=True).hidden_states
    for layer, (x, y) in enumerate(zip(a, b)):
        torch.testing.assert_close(x[0], y[0, :n], rtol=1e-4, atol=1e-5, msg=f"layer {layer}")


def test_length_batches_cover_every_index_once_longest_first():
    batches = length_batches([3, 9, 1, 9, 5], batch_size=2)
    assert batches == [[1, 3], [4, 0], [2]]
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got 0"):
        length_batches([1], 0)


@pytest.mark.parametrize("texts, message", [
    ([], "texts is empty"),
    ("CCO>>CCO", "single string"),
])
def test_bad_corpus_is_refused(rxnmapper, texts, message):
    model, tokenizer = rxnmapper
    with pytest.raises(ValueError, match=message):
        reconstruction_accuracy(model, tokenizer, texts, progress=False)


def test_text_of_only_special_tokens_is_refused(rxnmapper):
    model, tokenizer = rxnmapper
    with pytest.raises(ValueError, match="no countable token"):
        reconstruction_accuracy(model, tokenizer, [""], progress=False)


def test_probe_models_caches_and_labels_the_control(tmp_path, monkeypatch, shared_data_dir,
                                                    zoo_cache):
    monkeypatch.setenv("DUPBERT_CACHE", str(tmp_path))
    monkeypatch.setenv("DUPBERT_DATA_DIR", str(shared_data_dir))
    # reuse the session's converted zoo folder instead of downloading again
    (tmp_path / "models").symlink_to(zoo_cache / "models")
    first = probe_models(["rxnmapper-albert"], n_sequences=8, progress=False)
    assert len(first) == 26
    assert first["variant"].unique().tolist() == ["pretrained", "random-init control"]
    assert first["corpus"].unique().tolist() == ["uspto50k-test"]
    assert list(first.columns) == ["model", "duplication", "variant", "corpus", *PROBE_COLUMNS]

    def must_not_run(*args, **kwargs):
        raise AssertionError("a cached result was computed again")

    monkeypatch.setattr("dupbert.probe.reconstruction_accuracy", must_not_run)
    again = probe_models(["rxnmapper-albert"], n_sequences=8, progress=False)
    pd.testing.assert_frame_equal(first, again)
    with pytest.raises(ValueError, match="models is empty"):
        probe_models([], progress=False)
