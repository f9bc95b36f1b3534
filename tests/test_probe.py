"""RQ1 probe on the real pretrained rxnmapper ALBERT over real USPTO-50k reactions."""

import json

import numpy as np
import pandas as pd
import pytest
import torch

from transformers import BertConfig, BertForMaskedLM

import dupbert.tools.probe as probe_module
from dupbert.book import rq1 as rq1_book
from dupbert import (masked_prediction_accuracy, probe_models, random_init_control,
                     reconstruction_accuracy)
from dupbert.core.errors import DeviceNotAvailable
from dupbert.tools.probe import (PROBE_COLUMNS, length_batches, mask_for_probe, paper_duplications,
                           tokenize_for_probe)

# Measured once on the first 64 reactions of USPTO-50k test (6,371 counted tokens), then pinned.
RXNMAPPER_TOP1 = [0.1114, 0.8694, 0.9798, 0.9914, 0.9956, 0.9962, 0.9969, 0.9976, 0.9983,
                  0.9987, 0.9981, 0.9978, 0.9976]
RXNMAPPER_TOP5 = [0.3431, 0.9859, 0.9989, 0.9995, 0.9995, 0.9995, 0.9997, 0.9997, 0.9997,
                  0.9997, 0.9997, 0.9997, 0.9997]


@pytest.fixture(scope="module")
def rxnfp_like_bert():
    """A tiny random 4-block BERT (plumbing only)."""
    torch.manual_seed(0)
    return BertForMaskedLM(BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=4,
                                      num_attention_heads=2, intermediate_size=32)).eval()


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


@pytest.mark.slow
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


@pytest.mark.slow
def test_head_in_small_blocks_gives_the_same_table(rxnmapper, uspto_first_64, pretrained_frame,
                                                  monkeypatch):
    model, tokenizer = rxnmapper
    monkeypatch.setattr("dupbert.tools.probe.LOGITS_BLOCK", 61 * model.config.vocab_size)  # 61 positions
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
    with pytest.raises(ValueError) as refused:
        length_batches([1], 0)
    assert str(refused.value) == "batch_size must be an integer >= 1, got 0"


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


@pytest.mark.slow
def test_probe_models_caches_and_labels_the_control(tmp_path, monkeypatch, shared_data_dir,
                                                    zoo_cache):
    monkeypatch.setenv("DUPBERT_CACHE", str(tmp_path))
    monkeypatch.setenv("DUPBERT_DATA_DIR", str(shared_data_dir))
    # reuse the session's converted zoo folder instead of downloading again
    (tmp_path / "models").symlink_to(zoo_cache / "models")
    first = probe_models(["rxnmapper-albert"], n_sequences=8, progress=False)
    assert len(first) == 26
    assert first["init"].unique().tolist() == ["pretrained", "random-init control"]
    assert first["corpus"].unique().tolist() == ["uspto50k-test"]
    assert list(first.columns) == ["model", "duplication", "init", "corpus", *PROBE_COLUMNS]

    def must_not_run(*args, **kwargs):
        raise AssertionError("a cached result was computed again")

    monkeypatch.setattr("dupbert.tools.probe.reconstruction_accuracy", must_not_run)
    again = probe_models(["rxnmapper-albert"], n_sequences=8, progress=False)
    pd.testing.assert_frame_equal(first, again)
    with pytest.raises(ValueError, match=r"^models is empty: name at least one model, e\.g\. "
                                         r"\['rxnmapper-albert'\]$"):
        probe_models([], progress=False)

    # anything that determines the result misses the cache: count what is computed
    monkeypatch.undo()
    monkeypatch.setenv("DUPBERT_CACHE", str(tmp_path))
    monkeypatch.setenv("DUPBERT_DATA_DIR", str(shared_data_dir))
    computed = []
    real = probe_module.reconstruction_accuracy

    def counting(*args, **kwargs):
        computed.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr("dupbert.tools.probe.reconstruction_accuracy", counting)
    for kwargs in (dict(n_sequences=9), dict(n_sequences=8, corpus="uspto50k-valid"),
                   dict(n_sequences=8, max_length=64), dict(n_sequences=8, seed=1)):
        computed.clear()
        probe_models(["rxnmapper-albert"], progress=False, **kwargs)
        # another size, corpus or length: both variants again; another seed: only the control
        assert len(computed) == (1 if "seed" in kwargs else 2), kwargs
    # the seed is in the control's cache key only (it seeds the control's weights)
    keys = [json.loads(path.read_text()) for path in (tmp_path / "results" / "probe").glob("*.json")]
    assert {key["seed"] for key in keys if key["init"] == "pretrained"} == {None}
    assert {key["seed"] for key in keys if key["init"] == "random-init control"} == {0, 1}
    computed.clear()
    probe_models(["rxnmapper-albert"], n_sequences=8, progress=False,
                 duplications={"first copied": [0, 0] + list(range(1, 12))}, include_control=False)
    assert len(computed) == 1  # the new order (only it was asked for)
    computed.clear()
    monkeypatch.setattr("dupbert.tools.probe.source_fingerprint", lambda *names: "other code")
    probe_models(["rxnmapper-albert"], n_sequences=8, progress=False)
    assert len(computed) == 2  # changed code: nothing cached is reused


# ----------------------------------------------------------------------------- masked prediction
# Measured once on the same 64 reactions, 15% of each reaction's tokens (960) all masked, seed 0.
RXNMAPPER_MASKED_TOP1 = [0.0885, 0.5792, 0.7406, 0.8594, 0.9229, 0.9552, 0.9698, 0.9802, 0.9844,
                         0.9854, 0.9875, 0.9885, 0.9865]


@pytest.fixture(scope="module")
def masked_frame(rxnmapper, uspto_first_64):
    model, tokenizer = rxnmapper
    return masked_prediction_accuracy(model, tokenizer, uspto_first_64, progress=False)


def test_pinned_masked_prediction_per_layer(masked_frame, pretrained_frame):
    assert list(masked_frame.columns) == PROBE_COLUMNS
    assert (masked_frame["n_tokens"] == 960).all()
    np.testing.assert_allclose(masked_frame["top1"], RXNMAPPER_MASKED_TOP1, atol=6e-4)
    # an intermediate hidden state copies unmasked tokens far better than it predicts masked ones
    assert pretrained_frame["top1"][2] - masked_frame["top1"][2] > 0.2


def test_masks_are_seeded_per_sequence_and_skip_special_tokens(rxnmapper, uspto_first_64):
    _, tokenizer = rxnmapper
    examples = tokenize_for_probe(tokenizer, uspto_first_64[:20])
    masked = mask_for_probe(examples, tokenizer, seed=0)
    again = mask_for_probe(examples[:5], tokenizer, seed=0)
    assert [m["labels"] for m in masked[:5]] == [m["labels"] for m in again]
    assert mask_for_probe(examples, tokenizer, seed=1)[0]["labels"] != masked[0]["labels"]
    for example, result in zip(examples, masked):
        chosen = [p for p, label in enumerate(result["labels"]) if label != -100]
        n_real = len(example["input_ids"]) - 2
        assert len(chosen) == max(1, round(0.15 * n_real))
        assert 0 not in chosen and len(example["input_ids"]) - 1 not in chosen  # CLS, SEP
        for p in range(len(example["input_ids"])):
            if p in chosen:
                assert result["labels"][p] == example["input_ids"][p]
                assert result["input_ids"][p] == tokenizer.mask_token_id
            else:
                assert result["input_ids"][p] == example["input_ids"][p]


def test_bert_rule_masks_80_replaces_10_keeps_10(rxnmapper, uspto_first_64):
    _, tokenizer = rxnmapper
    examples = tokenize_for_probe(tokenizer, uspto_first_64)
    kinds = {"mask": 0, "random": 0, "kept": 0}
    for example, result in zip(examples, mask_for_probe(examples, tokenizer, rule="80-10-10")):
        for p, label in enumerate(result["labels"]):
            if label == -100:
                continue
            token = result["input_ids"][p]
            kinds["mask" if token == tokenizer.mask_token_id else
                  "kept" if token == example["input_ids"][p] else "random"] += 1
    n = sum(kinds.values())
    assert n == 960
    assert abs(kinds["mask"] / n - 0.8) < 0.04
    assert abs(kinds["random"] / n - 0.1) < 0.03 and abs(kinds["kept"] / n - 0.1) < 0.03


def test_masked_accuracy_of_the_last_layer_equals_the_model_logits(rxnmapper, uspto_first_64):
    model, tokenizer = rxnmapper
    texts = uspto_first_64[:10]
    frame = masked_prediction_accuracy(model, tokenizer, texts, batch_size=4, progress=False)
    hits = 0
    for result in mask_for_probe(tokenize_for_probe(tokenizer, texts), tokenizer):
        ids, labels = torch.tensor([result["input_ids"]]), torch.tensor(result["labels"])
        with torch.inference_mode():
            guesses = model(input_ids=ids).logits[0].argmax(-1)
        hits += int(((guesses == labels) & (labels != -100)).sum())
    assert int(np.rint(frame["top1"].iloc[-1] * frame["n_tokens"].iloc[-1])) == hits


@pytest.mark.parametrize("kwargs, message", [
    (dict(mask_rate=0), "mask_rate must be in"),
    (dict(rule="all"), "unknown masking rule 'all'"),
])
def test_bad_masking_is_refused(rxnmapper, uspto_first_64, kwargs, message):
    model, tokenizer = rxnmapper
    with pytest.raises(ValueError, match=message):
        masked_prediction_accuracy(model, tokenizer, uspto_first_64[:2], progress=False, **kwargs)


def test_paper_duplications_are_the_primary_configurations(rxnmapper, rxnfp_like_bert):
    model, _ = rxnmapper
    assert paper_duplications(model) == {"baseline": list(range(12)),
                                         "repeat shared +3": list(range(12)) + [11, 11, 11]}
    assert paper_duplications(rxnfp_like_bert) == {
        "baseline": [0, 1, 2, 3], "copy first 3": [0, 0, 1, 1, 2, 2, 3]}


def _probe_rows(model, duplication, top1, copies=(), init="pretrained"):
    """Rows shaped like ``probe_models`` output for hidden states 0..len(top1)-1 (``top5`` is
    ``top1`` + 0.01, the other columns are not read by ``duplication_summary``)."""
    return pd.DataFrame({"model": model, "duplication": duplication, "init": init,
                         "layer": range(len(top1)), "is_copy": [i in copies for i in range(len(top1))],
                         "top1": top1, "top5": [v + 0.01 for v in top1]})


def test_duplication_summary_reads_copies_and_the_last_layer():
    frame = pd.concat([
        _probe_rows("m", "baseline", [0.1, 0.5, 0.9]),
        _probe_rows("m", "two copies", [0.1, 0.5, 0.4, 0.3, 0.6], copies=(2, 4)),
        _probe_rows("m", "baseline", [0.0, 0.0, 0.0], init="random-init control"),
        _probe_rows("n", "baseline", [0.2, 0.7]),
        _probe_rows("n", "one copy", [0.2, 0.6, 0.8], copies=(1,)),
    ]).sample(frac=1.0, random_state=0)  # the summary sorts by layer itself
    summary = probe_module.duplication_summary(frame).set_index(["model", "duplication"])
    assert list(summary.columns) == ["n_blocks", "n_copies", "at_copies", "before_first_copy",
                                     "min_after_first_copy", "last", "last_change"]
    assert sorted(summary.index) == [("m", "baseline"), ("m", "two copies"), ("n", "baseline"),
                                     ("n", "one copy")]
    two = summary.loc[("m", "two copies")]
    assert (two["n_blocks"], two["n_copies"]) == (4, 2)
    assert two["at_copies"] == pytest.approx(0.5)  # mean of hidden states 2 and 4
    assert two["before_first_copy"] == 0.5  # hidden state 1, which the first copy reads
    assert two["min_after_first_copy"] == 0.3
    assert two["last"] == 0.6 and two["last_change"] == pytest.approx(0.6 - 0.9)
    one = summary.loc[("n", "one copy")]
    assert (one["n_blocks"], one["n_copies"], one["before_first_copy"]) == (2, 1, 0.2)
    assert one["min_after_first_copy"] == 0.6  # the first copy's own hidden state counts
    assert one["last_change"] == pytest.approx(0.1)
    base = summary.loc[("m", "baseline")]  # the control's zeros are not pretrained rows
    assert (base["n_blocks"], base["n_copies"], base["last"], base["last_change"]) == (2, 0, 0.9, 0.0)
    assert np.isnan([base["at_copies"], base["before_first_copy"],
                     base["min_after_first_copy"]]).all()
    top5 = probe_module.duplication_summary(frame, metric="top5").set_index(["model", "duplication"])
    assert top5.loc[("m", "two copies"), "min_after_first_copy"] == pytest.approx(0.31)


def test_duplication_summary_needs_a_baseline_and_no_variant_column():
    plain = _probe_rows("m", "baseline", [0.1, 0.5]).drop(columns="init")
    assert probe_module.duplication_summary(plain)["last"].tolist() == [0.5]
    copied = _probe_rows("m", "one copy", [0.1, 0.5, 0.4], copies=(2,))
    with pytest.raises(ValueError, match="^no baseline rows for model 'm': probe with a baseline$"):
        probe_module.duplication_summary(copied)


def test_masked_probe_keys_its_cache_on_the_mask_rate_and_uses_the_given_seed_and_data(
        tmp_path, monkeypatch, shared_data_dir, zoo_cache):
    """probe_models with masking (RQ1's masked-prediction form): another mask_rate misses the
    cache; the masks are seeded with ``seed``; the corpus is read from ``data_dir`` when given
    (here $DUPBERT_DATA_DIR points nowhere)."""
    monkeypatch.setenv("DUPBERT_CACHE", str(tmp_path))
    monkeypatch.setenv("DUPBERT_DATA_DIR", str(tmp_path / "no-data-here"))
    (tmp_path / "models").symlink_to(zoo_cache / "models")
    calls = []
    real = probe_module.masked_prediction_accuracy

    def recording(*args, **kwargs):
        assert (kwargs["device"], kwargs["batch_size"]) == ("cpu", 32)
        calls.append((kwargs["mask_rate"], kwargs["seed"]))
        return real(*args, **kwargs)

    monkeypatch.setattr("dupbert.tools.probe.masked_prediction_accuracy", recording)
    for rate, seed in ((0.15, 3), (0.3, 3), (0.15, 3), (0.15, 4)):
        probe_models(["rxnmapper-albert"], n_sequences=4, seed=seed, masking="mask",
                     mask_rate=rate, data_dir=shared_data_dir, progress=False)
    # pretrained and control at 0.15, both again at 0.3, nothing at 0.15 again (cached), both
    # again with another seed (it draws the masks, not only the control's weights)
    assert calls == [(0.15, 3), (0.15, 3), (0.3, 3), (0.3, 3), (0.15, 4), (0.15, 4)]


@pytest.mark.slow
def test_standard_duplications_probed_without_the_cache(tmp_path, monkeypatch, shared_data_dir,
                                                        zoo_cache):
    """``duplications="standard"`` probes every variant of ``standard_duplications`` (for the
    shared ALBERT: the baseline and 13, 14, 15, 17 and 20 repeats of its layer), each repeat read
    from the shared block 11, on the device and in the batches asked for; ``cache=False`` computes every variant
    each time and writes nothing to the cache."""
    monkeypatch.setenv("DUPBERT_CACHE", str(tmp_path))
    monkeypatch.setenv("DUPBERT_DATA_DIR", str(shared_data_dir))
    (tmp_path / "models").symlink_to(zoo_cache / "models")
    computed = []
    real = probe_module.reconstruction_accuracy

    def counting(*args, **kwargs):
        computed.append((kwargs["device"], kwargs["batch_size"]))
        return real(*args, **kwargs)

    monkeypatch.setattr("dupbert.tools.probe.reconstruction_accuracy", counting)
    settings = dict(n_sequences=4, duplications="standard", include_control=False, cache=False,
                    batch_size=3, progress=False)
    first = probe_models(["rxnmapper-albert"], **settings)
    sizes = first.groupby("duplication", sort=False).size().to_dict()
    assert sizes == {"baseline": 13, "repeat shared +1": 14, "repeat shared +2": 15,
                     "repeat shared +3": 16, "repeat shared +5": 18, "repeat shared +8": 21}
    twenty = first[first["duplication"] == "repeat shared +8"]
    assert twenty["source_block"].tolist() == [-1, *range(12), *[11] * 8]
    assert twenty["is_copy"].tolist() == [False] * 13 + [True] * 8
    assert computed == [("cpu", 3)] * 6  # every variant on the device and batch size asked for
    again = probe_models(["rxnmapper-albert"], **settings)
    assert len(computed) == 12  # nothing was cached
    pd.testing.assert_frame_equal(first, again)
    assert not (tmp_path / "results").exists()


def test_a_sequence_with_no_counted_token_is_left_out(rxnmapper, uspto_first_64):
    """A text that tokenises to special tokens only (``""``) adds no token and no sequence: the
    frame equals the one without it, ``top1_macro`` included. One sequence per batch, so the
    empty text is a batch with no counted position at all."""
    model, tokenizer = rxnmapper
    texts = uspto_first_64[:3]
    alone = reconstruction_accuracy(model, tokenizer, texts, batch_size=1, progress=False)
    with_empty = reconstruction_accuracy(model, tokenizer, [texts[0], "", *texts[1:]],
                                         batch_size=1, progress=False)
    pd.testing.assert_frame_equal(alone, with_empty)
    assert alone["n_sequences"].unique().tolist() == [3]


def test_max_length_keeps_one_token_at_3_and_defaults_to_512(rxnmapper):
    """``max_length`` counts the special tokens: 3 keeps CLS, one token and SEP; below 3 is
    refused; the default truncates a long reaction to 512 tokens."""
    _, tokenizer = rxnmapper
    (short,) = tokenize_for_probe(tokenizer, ["CCO>>CCO"], max_length=3)
    assert short["special_tokens_mask"] == [1, 0, 1]
    assert short["input_ids"][1] == tokenizer("CCO>>CCO")["input_ids"][1]
    with pytest.raises(ValueError, match="max_length must be at least 3 .*, got 2"):
        tokenize_for_probe(tokenizer, ["CCO>>CCO"], max_length=2)
    long_reaction = ".".join(["CCO"] * 300) + ">>CCO"
    assert len(tokenizer(long_reaction)["input_ids"]) > 513
    (truncated,) = tokenize_for_probe(tokenizer, [long_reaction])
    assert len(truncated["input_ids"]) == 512


def test_a_model_with_the_wrong_number_of_hidden_states_is_refused(rxnfp_like_bert, monkeypatch):
    """The probe needs ``num_hidden_layers + 1`` hidden states; a model returning another number
    is refused, naming both numbers."""
    def too_few(model, input_ids, attention_mask):
        return tuple(torch.zeros(1, 3, 16) for _ in range(4))

    monkeypatch.setattr("dupbert.tools.hidden.encoder_hidden_states", too_few)
    batch = {"input_ids": torch.tensor([[1, 2, 3]]), "attention_mask": torch.ones(1, 3)}
    with pytest.raises(ValueError) as refused:
        probe_module.batch_hidden_states(rxnfp_like_bert, batch, torch.device("cpu"))
    assert str(refused.value) == ("model returned 4 hidden states, config says 5 "
                                  "(num_hidden_layers + 1)")


def test_mask_rate_bounds_and_one_masked_token_at_least(rxnmapper):
    """``mask_rate`` 1 masks every non-special position, above 1 is refused with the value;
    a sequence of 3 tokens at 15% still gets one mask (``max(1, round(0.45))``); the examples
    keep their ``special_tokens_mask``."""
    _, tokenizer = rxnmapper
    (example,) = tokenize_for_probe(tokenizer, ["CCO>>CCO"])
    (every,) = mask_for_probe([example], tokenizer, mask_rate=1)
    n = len(example["input_ids"])
    assert every["labels"] == [-100] + example["input_ids"][1:-1] + [-100]
    assert every["input_ids"] == ([example["input_ids"][0]] + [tokenizer.mask_token_id] * (n - 2)
                                  + [example["input_ids"][-1]])
    assert every["special_tokens_mask"] == example["special_tokens_mask"]
    with pytest.raises(ValueError) as refused:
        mask_for_probe([example], tokenizer, mask_rate=1.5)
    assert str(refused.value) == "mask_rate must be in (0, 1], got 1.5"
    (short,) = tokenize_for_probe(tokenizer, ["CCO>>CCO"], max_length=5)
    assert short["special_tokens_mask"] == [1, 0, 0, 0, 1]
    (masked,) = mask_for_probe([short], tokenizer, mask_rate=0.15)
    assert sum(label != -100 for label in masked["labels"]) == 1


def test_a_tokenizer_without_a_mask_token_is_refused_by_name():
    class WordPieceWithoutMask:
        mask_token_id = None

    with pytest.raises(ValueError) as refused:
        mask_for_probe([{"input_ids": [1, 5, 2], "special_tokens_mask": [1, 0, 1]}],
                       WordPieceWithoutMask())
    assert str(refused.value) == ("WordPieceWithoutMask has no mask token: masked prediction "
                                  "needs one (tokenizer.mask_token)")


def test_bert_rule_replacements_are_vocabulary_tokens(rxnmapper, uspto_first_64):
    """The 10% "random" tokens of the 80-10-10 rule are token ids of the vocabulary."""
    _, tokenizer = rxnmapper
    examples = tokenize_for_probe(tokenizer, uspto_first_64)
    replaced = [result["input_ids"][p]
                for example, result in zip(examples, mask_for_probe(examples, tokenizer,
                                                                    rule="80-10-10"))
                for p, label in enumerate(result["labels"])
                if label != -100 and result["input_ids"][p] not in (tokenizer.mask_token_id,
                                                                   example["input_ids"][p])]
    assert len(replaced) > 50
    assert all(isinstance(token, int) and 0 <= token < len(tokenizer) for token in replaced)


def test_probe_models_arguments_reach_the_cache_key(tmp_path, monkeypatch, shared_data_dir,
                                                    zoo_cache):
    """Without computing anything (``cached_frame`` recorded): one model given as a string,
    ``max_length`` 512 and ``n_sequences`` 500 by default, ``duplications="paper"`` (the shared
    ALBERT's baseline and 15 repeats), the key's fields by name, and the full messages for an
    unknown masking rule and an unknown ``duplications`` string."""
    monkeypatch.setenv("DUPBERT_CACHE", str(tmp_path))
    monkeypatch.setenv("DUPBERT_DATA_DIR", str(shared_data_dir))
    (tmp_path / "models").symlink_to(zoo_cache / "models")
    keys = []

    def recorded(kind, fields, run, enabled=True):
        keys.append(fields)
        return pd.DataFrame({column: [0] for column in PROBE_COLUMNS})

    monkeypatch.setattr("dupbert.tools.probe.cached_frame", recorded)
    frame = probe_models("rxnmapper-albert", n_sequences=2, include_control=False, progress=False)
    assert frame["model"].tolist() == ["rxnmapper-albert"]
    assert [(k["model"], k["max_length"]) for k in keys] == [("rxnmapper-albert", 512)]
    keys.clear()
    paper = probe_models(["rxnmapper-albert"], n_sequences=2, duplications="paper",
                         include_control=False, progress=False)
    assert paper["duplication"].tolist() == ["baseline", "repeat shared +3"]
    assert [k["order"] for k in keys] == [None, list(range(12)) + [11, 11, 11]]
    with pytest.raises(ValueError) as refused:
        probe_models(["rxnmapper-albert"], masking="random", progress=False)
    assert str(refused.value) == ("masking must be None or one of ['mask', '80-10-10'], "
                                  "got 'random'")
    with pytest.raises(ValueError) as refused:
        probe_models(["rxnmapper-albert"], duplications="all", progress=False)
    assert str(refused.value) == ("duplications must be None, 'standard', 'paper' or a mapping "
                                  "{label: [block, ...]}, got 'all'")
    # the key's fields, under the names its JSON keeps; with no data folder both corpora read
    # from the Hub ("hub"), so only the corpus name tells them apart; n_sequences defaults to 500
    monkeypatch.delenv("DUPBERT_DATA_DIR")
    keys.clear()
    for corpus in ("uspto50k-test", "uspto50k-valid"):
        probe_models(["rxnmapper-albert"], corpus=corpus, include_control=False, progress=False)
    assert [set(key) for key in keys] == [{
        "model", "duplication", "order", "init", "corpus", "n_sequences", "max_length", "seed",
        "code", "model_weights", "corpus_file"}] * 2
    assert [(k["corpus"], k["corpus_file"], k["n_sequences"], k["duplication"]) for k in keys] == [
        ("uspto50k-test", "hub", 500, "baseline"), ("uspto50k-valid", "hub", 500, "baseline")]
    assert keys[0]["code"] == probe_module.source_fingerprint(*probe_module.PROBE_CODE)


def test_duplication_summary_keeps_the_order_of_the_frame():
    """One row per (model, duplication) in the order they first appear, not sorted."""
    frame = pd.concat([
        _probe_rows("n", "one copy", [0.2, 0.6, 0.8], copies=(1,)),
        _probe_rows("n", "baseline", [0.2, 0.7]),
        _probe_rows("m", "baseline", [0.1, 0.5, 0.9]),
    ])
    summary = probe_module.duplication_summary(frame)
    assert list(zip(summary["model"], summary["duplication"])) == [
        ("n", "one copy"), ("n", "baseline"), ("m", "baseline")]


def test_probe_models_rows_are_the_direct_computations(tmp_path, monkeypatch, shared_data_dir,
                                                       zoo_cache, capsys):
    """Without the cache: the pretrained rows are ``reconstruction_accuracy`` of the model at
    the ``max_length`` asked for, the control's rows that of ``random_init_control`` with the
    given seed, and with ``masking="80-10-10"`` the rows are ``masked_prediction_accuracy``
    with that rule, rate and seed; one 0-based index; nothing on stderr without progress."""
    monkeypatch.setenv("DUPBERT_CACHE", str(tmp_path))
    monkeypatch.setenv("DUPBERT_DATA_DIR", str(shared_data_dir))
    (tmp_path / "models").symlink_to(zoo_cache / "models")
    from dupbert import load_mlm
    from dupbert.core.data import load_texts

    model, tokenizer = load_mlm("rxnmapper-albert")
    texts = load_texts("uspto50k-test", 4)
    settings = dict(n_sequences=4, seed=3, max_length=24, cache=False, progress=False)
    frame = probe_models(["rxnmapper-albert"], **settings)
    pretrained = frame[frame["init"] == "pretrained"][PROBE_COLUMNS].reset_index(drop=True)
    control = frame[frame["init"] == "random-init control"][PROBE_COLUMNS].reset_index(drop=True)
    pd.testing.assert_frame_equal(pretrained, reconstruction_accuracy(
        model, tokenizer, texts, max_length=24, progress=False))
    pd.testing.assert_frame_equal(control, reconstruction_accuracy(
        random_init_control(model, seed=3), tokenizer, texts, max_length=24, progress=False))
    assert frame.index.tolist() == list(range(26))
    masked = probe_models(["rxnmapper-albert"], masking="80-10-10", mask_rate=0.5,
                          include_control=False, **settings)
    pd.testing.assert_frame_equal(masked[PROBE_COLUMNS], masked_prediction_accuracy(
        model, tokenizer, texts, mask_rate=0.5, rule="80-10-10", seed=3, max_length=24,
        progress=False))
    assert capsys.readouterr().err == ""
    for masking, bar in ((None, "probe: "), ("mask", "masked: ")):
        probe_models(["rxnmapper-albert"], n_sequences=2, include_control=False, cache=False,
                     masking=masking, progress=True)
        assert capsys.readouterr().err.lstrip("\r").startswith(bar)


def test_the_cache_key_holds_the_masking_rule_and_the_data_folder_read(
        tmp_path, monkeypatch, shared_data_dir, zoo_cache):
    """Another masking rule at the same rate and seed misses the cache; so does the same corpus
    name read from another data folder (``data_dir``, not only ``$DUPBERT_DATA_DIR``), whose
    file the key names."""
    monkeypatch.setenv("DUPBERT_CACHE", str(tmp_path))
    monkeypatch.delenv("DUPBERT_DATA_DIR", raising=False)
    (tmp_path / "models").symlink_to(zoo_cache / "models")
    computed = []
    real = probe_module.masked_prediction_accuracy

    def counting(*args, **kwargs):
        computed.append(kwargs["rule"])
        return real(*args, **kwargs)

    monkeypatch.setattr("dupbert.tools.probe.masked_prediction_accuracy", counting)
    settings = dict(n_sequences=2, include_control=False, progress=False)
    for rule in ("mask", "80-10-10", "mask"):
        probe_models(["rxnmapper-albert"], masking=rule, data_dir=shared_data_dir, **settings)
    assert computed == ["mask", "80-10-10"]
    # the same corpus, its first two reactions in the other order, in another folder
    other = tmp_path / "other-data"
    lines = (shared_data_dir / "reactions" / "uspto50k_test_unmapped.csv").read_text().splitlines()
    (other / "reactions").mkdir(parents=True)
    (other / "reactions" / "uspto50k_test_unmapped.csv").write_text(
        "\n".join([lines[0], lines[2], lines[1], *lines[3:6]]) + "\n")
    probe_models(["rxnmapper-albert"], masking="mask", data_dir=other, **settings)
    assert computed == ["mask", "80-10-10", "mask"]
    keys = [json.loads(path.read_text()) for path in (tmp_path / "results" / "probe").glob("*.json")]
    assert sorted(key["corpus_file"][0] for key in keys) == sorted(
        [str(shared_data_dir / "reactions" / "uspto50k_test_unmapped.csv")] * 2
        + [str(other / "reactions" / "uspto50k_test_unmapped.csv")])


def test_macro_accuracy_is_the_mean_of_each_sequences_accuracy(rxnmapper, uspto_first_64):
    """``top1_macro`` per hidden state = the mean over sequences of each sequence's own top-1
    accuracy (each computed alone); a sequence with one counted token counts as one."""
    model, tokenizer = rxnmapper
    texts = [*uspto_first_64[:3], "CCO>>CCO"]
    together = reconstruction_accuracy(model, tokenizer, texts, max_length=40, progress=False)
    alone = [reconstruction_accuracy(model, tokenizer, [text], max_length=40, progress=False)
             for text in texts]
    np.testing.assert_allclose(together["top1_macro"],
                               np.mean([frame["top1"] for frame in alone], axis=0), rtol=1e-12)
    short = reconstruction_accuracy(model, tokenizer, ["CCO>>CCO"], max_length=3, progress=False)
    assert (short["n_tokens"] == 1).all() and (short["n_sequences"] == 1).all()
    np.testing.assert_array_equal(short["top1_macro"], short["top1"])


def test_the_head_in_chunks_of_three_positions_gives_the_same_hits(rxnfp_like_bert,
                                                                     monkeypatch):
    """``LOGITS_BLOCK`` bounds the logits held at once: with chunks of 3 positions (fewer than
    the top-5, and far fewer than the hidden size) every count equals the unchunked one. A tiny
    random BERT (plumbing) on hand-made token ids."""
    class Tokenizer:
        pad_token_id = 0

    generator = torch.Generator().manual_seed(0)
    examples = []
    for length in (12, 12, 9, 11):
        ids = [2, *torch.randint(5, 40, (length - 2,), generator=generator).tolist(), 3]
        examples.append({"input_ids": ids, "special_tokens_mask": [1] + [0] * (length - 2) + [1]})
    whole = probe_module._probe_examples(rxnfp_like_bert, Tokenizer(), examples, 8, "cpu", False,
                                         "probe")
    monkeypatch.setattr(probe_module, "LOGITS_BLOCK", 3 * rxnfp_like_bert.config.vocab_size)
    chunked = probe_module._probe_examples(rxnfp_like_bert, Tokenizer(), examples, 8, "cpu",
                                           False, "probe")
    pd.testing.assert_frame_equal(whole, chunked)
    assert whole["n_tokens"].iloc[0] == 36 and whole["top5"].iloc[-1] > whole["top1"].iloc[-1]


def test_progress_bars_only_when_asked(rxnmapper, uspto_first_64, capsys):
    model, tokenizer = rxnmapper
    reconstruction_accuracy(model, tokenizer, uspto_first_64[:2], progress=False)
    assert capsys.readouterr().err == ""
    reconstruction_accuracy(model, tokenizer, uspto_first_64[:2], progress=True)
    bar = capsys.readouterr().err
    assert bar.lstrip("\r").startswith("probe: ") and "| 1/1 [" in bar and "batch/s]" in bar


def test_bad_texts_and_no_countable_token_messages_in_full(rxnmapper):
    model, tokenizer = rxnmapper
    for texts, message in [("CCO>>CCO", "texts must be a sequence of strings, got a single string"),
                           ([], "texts is empty: the probe needs at least one sequence")]:
        with pytest.raises(ValueError) as refused:
            tokenize_for_probe(tokenizer, texts)
        assert str(refused.value) == message
    with pytest.raises(ValueError) as refused:
        reconstruction_accuracy(model, tokenizer, [""], progress=False)
    assert str(refused.value) == ("no countable token: every token of every text is special or "
                                  "padding")


@pytest.mark.parametrize("call, error, message", [
    (lambda m, t, texts: reconstruction_accuracy(m, t, [texts[0], None], progress=False),
     ValueError, "texts must all be strings: texts[1] is None (NoneType); 1 of 2 are not"),
    (lambda m, t, texts: reconstruction_accuracy(m, t, texts, max_length=3.5, progress=False),
     ValueError, "max_length must be an integer, got 3.5"),
    (lambda m, t, texts: reconstruction_accuracy(m, t, texts, max_length=0, progress=False),
     ValueError, "max_length must be at least 3 (CLS, a token, SEP), got 0"),
    (lambda m, t, texts: reconstruction_accuracy(m, t, texts, batch_size=2.5, progress=False),
     ValueError, "batch_size must be an integer >= 1, got 2.5"),
    (lambda m, t, texts: masked_prediction_accuracy(m, t, texts, seed=-1, progress=False),
     ValueError, "seed must be an integer >= 0, got -1"),
    (lambda m, t, texts: masked_prediction_accuracy(m, t, texts, mask_rate="0.15", progress=False),
     ValueError, "mask_rate must be in (0, 1], got '0.15'"),
    (lambda m, t, texts: reconstruction_accuracy(m, t, texts, device="gpu", progress=False),
     DeviceNotAvailable, "device 'gpu' is not a device torch knows"),
])
def test_bad_arguments_of_the_probe_are_named(rxnmapper, uspto_first_64, call, error, message):
    model, tokenizer = rxnmapper
    with pytest.raises(error) as refused:
        call(model, tokenizer, uspto_first_64[:2])
    assert str(refused.value).startswith(message)


@pytest.mark.slow
def test_texts_may_come_from_a_generator(rxnmapper, uspto_first_64, pretrained_frame):
    model, tokenizer = rxnmapper
    from_generator = reconstruction_accuracy(model, tokenizer, (t for t in uspto_first_64),
                                             progress=False)
    pd.testing.assert_frame_equal(from_generator, pretrained_frame)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(duplications=[0, 0, 1]), ValueError,
     "duplications must be None, 'standard', 'paper' or a mapping {label: [block, ...]}, "
     "got [0, 0, 1]"),
    (dict(models=["rxnmapper-albert", "rxnmapper-albert"]), ValueError,
     "models must be distinct models: 'rxnmapper-albert' appears 2 times"),
    (dict(n_sequences=2.5), ValueError, "n_sequences must be an integer >= 1, got 2.5"),
    (dict(batch_size=0), ValueError, "batch_size must be an integer >= 1, got 0"),
    (dict(max_length=1), ValueError, "max_length must be at least 3 (CLS, a token, SEP), got 1"),
    (dict(seed=-1), ValueError, "seed must be an integer >= 0, got -1"),
    (dict(masking="mask", mask_rate=0), ValueError, "mask_rate must be in (0, 1], got 0"),
    (dict(device="gpu"), DeviceNotAvailable, "device 'gpu' is not a device torch knows"),
])
def test_probe_models_refuses_bad_arguments_before_loading_or_reading_the_cache(
        monkeypatch, kwargs, error, message):
    def must_not_run(*args, **kwargs):
        raise AssertionError("a cached result or a model was read before the arguments were checked")

    monkeypatch.setattr(probe_module, "cached_frame", must_not_run)
    monkeypatch.setattr("dupbert.tools.models.load_mlm", must_not_run)
    arguments = dict(models=["rxnmapper-albert"], progress=False) | kwargs
    with pytest.raises(error) as refused:
        probe_models(**arguments)
    assert str(refused.value).startswith(message)


def test_translator_comparison_keeps_the_baseline_of_each_lens():
    from dupbert.book.rq1 import translator_comparison, translator_curves

    def frame(value, duplications=("baseline", "first 1 copied")):
        return pd.DataFrame([dict(model="m", duplication=d, init="pretrained", layer=l,
                                  top1=value + l / 10, top5=1.0, n_tokens=10)
                             for d in duplications for l in range(3)])

    table = translator_comparison({
        "identity": (frame(0.1), frame(0.2)),
        "linear": (frame(0.5, ("baseline",)), frame(0.6, ("baseline",))),
        "tuned": (frame(0.7, ("baseline",)), frame(0.4, ("baseline",)))})
    assert len(table) == 18
    assert table["translator"].unique().tolist() == ["identity", "linear", "tuned"]
    got = table.set_index(["measure", "translator", "layer"])["top1"]
    assert got[("reconstruction", "identity", 2)] == pytest.approx(0.3)
    assert got[("masked", "linear", 0)] == pytest.approx(0.6)
    assert got[("masked", "tuned", 1)] == pytest.approx(0.5)
    reconstruction, masked = translator_curves(table)
    assert reconstruction["duplication"].unique().tolist() == [
        "baseline", "linear translator", "tuned translator"]
    assert (masked["measure"] == "masked").all()


# --------------------------------------------------------------------------------------------------
# The RQ1 chapter's tables and prose, on hand-made frames (expected text computed by hand)


def _reconstruction_frame():
    """Model ``m``: hidden states 0..4; model ``n``: 0..2; each with a random-init control."""
    rows = []
    for model, top1, top5, control, n_sequences, n_tokens in (
            ("m", [0.10, 0.80, 0.95, 0.85, 0.97], [0.30, 0.90, 0.99, 0.95, 0.99],
             [0.01, 0.02, 0.03, 0.0, 0.04], 8, 120),
            ("n", [0.2, 0.5, 0.9], [0.4, 0.7, 0.95], [0.0, 0.001, 0.02], 2, 30)):
        for variant, values, fives in (("pretrained", top1, top5),
                                       ("random-init control", control, control)):
            rows += [dict(model=model, init=variant, duplication="baseline", layer=layer,
                          top1=value, top5=five, n_sequences=n_sequences, n_tokens=n_tokens)
                     for layer, (value, five) in enumerate(zip(values, fives))]
    return pd.DataFrame(rows)


def test_reconstruction_table_puts_top1_top5_then_the_controls_per_model():
    table = rq1_book.reconstruction_table(_reconstruction_frame(), ["n", "m"])
    assert list(table.columns) == ["n", "m", "n control", "m control"]
    assert table.index.name == "hidden state" and table.index.tolist() == [0, 1, 2, 3, 4]
    assert table.loc[0, "m"] == "0.100 (0.300)" and table.loc[4, "m"] == "0.970 (0.990)"
    assert table.loc[1, "n"] == "0.500 (0.700)" and table.loc[1, "n control"] == "0.001"
    assert table.loc[3, "n"] == "" and table.loc[3, "n control"] == ""  # n has 3 hidden states
    assert table.loc[4, "m control"] == "0.040"


def test_reconstruction_summary_gives_each_model_one_row():
    """Hand-computed: m's intermediate hidden states 1..3 are 0.80, 0.95, 0.85 (lowest at 1, mean
    0.867, top-5 mean 0.947); hidden state 3 (0.85) breaks the run above 0.90, so it starts at 4;
    n has one intermediate hidden state."""
    frame = _reconstruction_frame()
    table = rq1_book.reconstruction_summary(frame, ["m", "n"])
    assert table.index.tolist() == ["m", "n"] and table.index.name == "model"
    m = table.loc["m"]
    assert (m["sequences"], m["tokens"], m["last hidden state"], m["top-1 there"]) == (8, 120, 4,
                                                                                      "0.970")
    assert (m["intermediate: lowest"], m["at hidden state"], m["intermediate: mean"],
            m["top-5 mean"], m["embedding output"]) == ("0.800", 1, "0.867", "0.947", "0.100")
    assert (m["all >= 0.90 from"], m["control: mean"], m["control: best"]) == (4, "0.020", "0.040")
    n = table.loc["n"]
    assert (n["intermediate: lowest"], n["at hidden state"], n["intermediate: mean"],
            n["all >= 0.90 from"], n["control: mean"]) == ("0.500", 1, "0.500", 2, "0.007")
    assert rq1_book.reconstruction_summary(frame, ["m"], threshold=0.8).loc[
        "m", "all >= 0.80 from"] == 1
    assert rq1_book.reconstruction_summary(frame, ["m"], threshold=0.98).loc[
        "m", "all >= 0.98 from"] == "none"


def _summary():
    columns = ["model", "duplication", "n_blocks", "n_copies", "at_copies", "before_first_copy",
               "min_after_first_copy", "last", "last_change"]
    return pd.DataFrame([("m", "baseline", 4, 0, np.nan, np.nan, np.nan, 0.9, 0.0),
                         ("m", "block 1 copied", 5, 1, 0.85, 0.8, 0.7, 0.88, -0.02),
                         ("m", "first 2 copied", 6, 2, 0.75, 0.8, 0.6, 0.93, 0.03)],
                        columns=columns)


def test_duplication_table_names_the_columns_and_signs_the_change(monkeypatch):
    # the tables summarise a probe frame with duplication_summary (tested above): given its summary
    monkeypatch.setattr(rq1_book, "duplication_summary", lambda frame: frame)
    table = rq1_book.duplication_table(_summary())
    assert table.index.names == ["model", "duplication"]
    assert list(table.columns) == ["blocks", "copies", "top-1 at copies", "top-1 before 1st copy",
                                   "min top-1 after", "top-1 last", "change of last"]
    base, one, two = (table.loc[("m", d)] for d in ("baseline", "block 1 copied", "first 2 copied"))
    assert (base["top-1 at copies"], base["top-1 last"], base["change of last"]) == ("", "0.9000",
                                                                                     "+0.0000")
    assert (one["blocks"], one["min top-1 after"], one["change of last"]) == (5, "0.7000", "-0.0200")
    assert two["change of last"] == "+0.0300"


def test_duplication_overview_gives_ranges_and_the_largest_drop(monkeypatch):
    monkeypatch.setattr(rq1_book, "duplication_summary", lambda frame: frame)
    table = rq1_book.duplication_overview(_summary(), ["m"])
    assert table.loc["m"].tolist() == [2, "0.750 to 0.850", "-0.0200 to +0.0300", "block 1 copied"]


def _masked_frames():
    def rows(model, duplication, top1, n_tokens=17):
        return [dict(model=model, duplication=duplication, init="pretrained", layer=layer,
                     top1=value, n_tokens=n_tokens) for layer, value in enumerate(top1)]
    reconstruction = pd.DataFrame(rows("m", "baseline", [0.2, 0.85, 0.9, 0.99, 1.0])
                                  + rows("m", "first 1 copied", [0.99] * 6))
    # reconstruction reaches 90% of its best (1.0) at hidden state 2 exactly, masked prediction 50%
    # of its best (0.95) at hidden state 2 exactly; the duplicated variant's rows come last layer
    # first: its last hidden state is read by layer
    masked = pd.DataFrame(rows("m", "baseline", [0.05, 0.3, 0.475, 0.92, 0.95])
                          + rows("m", "first 1 copied", [0.05, 0.3, 0.6, 0.6, 0.9, 0.91])[::-1]
                          + rows("n", "baseline", [0.2, 0.6], n_tokens=9))
    return reconstruction, masked


def test_masked_table_shows_the_models_as_loaded():
    table = rq1_book.masked_table(_masked_frames()[1], ["m", "n"])
    assert list(table.columns) == ["m", "n"] and table.index.name == "hidden state"
    # not the duplicated variant's hidden state 5; the masked tokens counted in the last row
    assert table.index.tolist() == [0, 1, 2, 3, 4, "masked tokens"]
    assert table.loc[1, "m"] == "0.300" and table.loc[1, "n"] == "0.600" and table.loc[2, "n"] == ""
    assert table.loc["masked tokens"].tolist() == ["17", "9"]


def test_copy_and_predict_separates_copying_from_predicting():
    reconstruction, masked = _masked_frames()
    row = rq1_book.copy_and_predict(reconstruction, masked, ["m"]).loc["m"]
    assert row.tolist() == [2, 3, "0.950", "0.475", "0.900", "0.950", "first 1 copied", "-4.0"]
    half = rq1_book.copy_and_predict(reconstruction, masked, ["m"], share=0.5).loc["m"]
    assert half.tolist()[:5] == [1, 2, "0.950", "0.300", "0.850"]
    better = masked.assign(top1=masked["top1"].where(masked["top1"] != 0.91, 0.97))
    assert rq1_book.copy_and_predict(reconstruction, better, ["m"]).loc[
        "m", "its change (points)"] == "+2.0"


def test_translator_table_is_top1_per_hidden_state_and_lens():
    comparison = pd.DataFrame([dict(model="m", measure=measure, translator=translator, layer=layer,
                                    top1=np.nan if (layer, translator) == (1, "linear") else value)
                               for layer, value in ((0, 0.1234), (1, 0.5))
                               for measure in ("reconstruction", "masked")
                               for translator in ("identity", "linear")])
    table = rq1_book.translator_table(comparison)
    assert table.index.tolist() == [0, 1]
    assert table.loc[0, ("m", "masked", "identity")] == "0.123"
    assert table.loc[1, ("m", "reconstruction", "identity")] == "0.500"
    assert table.loc[1, ("m", "reconstruction", "linear")] == ""


def test_quality_view_reads_the_floor_of_each_model():
    """The committed MLM-quality table: the domain models clear the floor; bert-en-small's 0.070
    is 1.04 times "the" (0.067), at the unigram plateau."""
    from pathlib import Path

    quality = pd.read_csv(Path(__file__).parents[1] / "results" / "cpu" / "rq1-mlm-quality.csv")
    view = rq1_book.quality_table_view(quality)
    assert view.loc["antiberty", "clears the floor"] == "yes"
    assert view.loc["bert-en-small", "clears the floor"] == "no"
    assert view.loc["bert-en-small", "masked top-1 [95% CI]"] == "0.070 [0.061, 0.079]"
    assert view.loc["bert-en-small", "ratio"] == "1.0"
    assert view.loc["rxnfp-bert", "masked positions"] == "2,771"


@pytest.mark.parametrize("top1, baseline, clears", [
    (0.30, 0.10, True), (0.3 - 1e-6, 0.05, False), (0.45, 0.15, True), (0.45, 0.1500001, False),
    (0.95, 0.24, True)])
def test_the_mlm_floor_includes_both_bounds(top1, baseline, clears):
    from dupbert.training.model_card import clears_mlm_floor

    assert clears_mlm_floor(top1, baseline) is clears


def test_a_short_corpus_says_how_many_sequences_it_holds(zoo_cache, tmp_path):
    from dupbert.tools.probe import ShortCorpusWarning, probe_models

    corpus = tmp_path / "one.txt"
    corpus.write_text("CC(=O)Cl.OCC>>CC(=O)OCC\n", encoding="utf-8")
    with pytest.warns(ShortCorpusWarning, match=r"one\.txt holds 1 sequence\(s\), fewer than the "
                                                r"5 asked for: all 1 are probed"):
        frame = probe_models(["rxnmapper-albert"], corpus=str(corpus), n_sequences=5,
                             include_control=False, progress=False, cache=False)
    assert set(frame["n_sequences"]) == {1}


@pytest.mark.parametrize("name", ["rxnfp-bert", "bert-rxn", "rxnmapper-albert", "albert-rxn"])
def test_the_probe_equals_an_independent_reference(name, zoo_cache, uspto_first_64):
    """Reconstruction top-1 per hidden state, recomputed the plain way: one reaction at a time, no
    padding, transformers' own hidden states through the model's own head (BERT's ``cls``,
    ALBERT's ``predictions``), the arg-max compared with the input ids at the non-special
    positions. The counts must be equal."""
    import torch

    from dupbert import load_mlm, reconstruction_accuracy
    from dupbert.core.zoo import ZOO

    if ZOO[name].wheel_sha256 == "unpublished":
        pytest.skip(f"{name} is not published yet")
    model, tokenizer = load_mlm(name, cache=zoo_cache)
    texts = uspto_first_64[:16]
    ours = reconstruction_accuracy(model, tokenizer, texts, progress=False)
    head = model.cls if hasattr(model, "cls") else model.predictions
    hits = np.zeros(model.config.num_hidden_layers + 1)
    counted = 0
    with torch.no_grad():
        for text in texts:
            encoded = tokenizer(text, return_tensors="pt", truncation=True, max_length=512)
            ids = encoded["input_ids"][0]
            keep = ~torch.isin(ids, torch.tensor(tokenizer.all_special_ids))
            states = model(**encoded, output_hidden_states=True).hidden_states
            for layer, state in enumerate(states):
                guess = head(state)[0].argmax(-1)
                hits[layer] += int((guess[keep] == ids[keep]).sum())
            counted += int(keep.sum())
    assert ours["n_tokens"].tolist() == [counted] * len(states)
    np.testing.assert_allclose(ours["top1"].to_numpy(), hits / counted, rtol=0, atol=1e-12)


def test_rq1_answer_reads_the_committed_tables_under_both_rules():
    """The committed cpu tables: under the registered rule albert-en-small's hidden state 6 (0.411)
    is the weakest and leaves both claims undecided; with the MLM floor only the six models
    that predict a masked token are judged, and both claims are reproduced."""
    from pathlib import Path

    tables = Path(__file__).parents[1] / "results" / "cpu"
    answer = rq1_book.answer_table(pd.read_csv(tables / "rq1-reconstruction.csv"),
                                   pd.read_csv(tables / "rq1-duplicated.csv"),
                                   pd.read_csv(tables / "rq1-mlm-quality.csv"))
    assert answer["registered rule"].tolist() == ["undecided", "undecided"]
    assert answer["with the MLM floor"].tolist() == ["reproduced", "reproduced"]
    assert set(answer["judged with the floor"]) == {
        "antiberty, rxnfp-bert, rxnmapper-albert, minilm-mlm-en, bert-rxn, albert-rxn"}
    assert answer["ours: the weakest hidden state 1..L"].iloc[0].startswith(
        "weakest of 8 models: albert-en-small 0.411 [0.405, 0.417] at hidden state 6")
