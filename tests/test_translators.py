"""Learned linear translators (Din et al. 2023, "Jump to Conclusions"): the ridge solution on
synthetic data, a constructed model whose hidden state is an exact linear image of the last
one, and the real rxnmapper ALBERT on held-out USPTO-50k reactions. The tuned lens' translator
(Belrose et al. 2023, method="cross-entropy"): its plumbing on a tiny random BERT, and one pinned
value on rxnmapper."""

import time

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import BertConfig, BertForMaskedLM

import dupbert
from dupbert import (LinearTranslator, fit_translators, masked_prediction_accuracy,
                     mlm_head, probe_models, reconstruction_accuracy, split_texts)
from dupbert.tools.duplicate import duplicate_layers
from dupbert.tools.translators import RIDGE_GRID, _Moments, fit_affine, lens_kl

pytestmark = pytest.mark.slow  # translators fitted on real hidden states

N_EVAL, N_FIT = 64, 200
# Measured once: rxnmapper-albert, evaluated on the first 64 reactions of USPTO-50k test
# (6,371 tokens), the translator fitted on the next 200; top-1 per hidden state 0..12, rounded.
IDENTITY_TOP1 = [0.111442, 0.869408, 0.979752, 0.991367, 0.995605, 0.996233, 0.996861,
                 0.997646, 0.998273, 0.998744, 0.998116, 0.997803, 0.997646]
LINEAR_TOP1 = [0.999686, 0.999529, 0.999529, 0.999529, 0.999686, 0.999058, 0.999058, 0.999058,
               0.999058, 0.998744, 0.998587, 0.998116, 0.997646]
MASKED_IDENTITY_TOP1_1 = 0.579167  # hidden state 1, 960 masked tokens
MASKED_LINEAR_TOP1_1 = 0.36875


@pytest.fixture(scope="module")
def split(shared_data_dir):
    return split_texts(dupbert.load_texts("uspto50k-test", N_EVAL + N_FIT,
                                          data_dir=shared_data_dir), N_EVAL)


@pytest.fixture(scope="module")
def translator(rxnmapper, split):
    return fit_translators(*rxnmapper, split.fit)


@pytest.fixture(scope="module")
def tables(rxnmapper, split, translator):
    identity = reconstruction_accuracy(*rxnmapper, split.eval, progress=False)
    linear = reconstruction_accuracy(*rxnmapper, split.eval, progress=False, translator="linear",
                                     translators=translator)
    return identity, linear


def test_ridge_recovers_an_exact_affine_map():
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(3000, 12, generator=generator, dtype=torch.float64)
    weight = torch.randn(12, 12, generator=generator, dtype=torch.float64)
    bias = torch.randn(12, generator=generator, dtype=torch.float64)
    y = x @ weight + bias
    moments = _Moments(1, 12)
    moments.gram[0] = torch.cat([x, torch.ones(3000, 1, dtype=torch.float64)], 1).T @ \
        torch.cat([x, torch.ones(3000, 1, dtype=torch.float64)], 1)
    moments.cross[0] = torch.cat([x, torch.ones(3000, 1, dtype=torch.float64)], 1).T @ y
    exact, shrunk = fit_affine(moments.gram[0], moments.cross[0], [1e-12, 1.0])
    torch.testing.assert_close(exact[:-1], weight, rtol=0, atol=1e-8)
    torch.testing.assert_close(exact[-1], bias, rtol=0, atol=1e-8)
    assert shrunk[:-1].norm() < 0.7 * weight.norm()  # a strong ridge shrinks the map


def test_a_hidden_state_that_is_a_linear_image_of_the_last_gets_the_last_ones_accuracy(
        rxnmapper, split, monkeypatch):
    """Known answer: make hidden state 3 = h_L A + c (A invertible, condition number 4). The
    identity lens then reads nonsense there; the fitted map inverts A, so hidden state 3
    reconstructs exactly the tokens the last hidden state does."""
    model, tokenizer = rxnmapper
    real = dupbert.tools.hidden.encoder_hidden_states
    generator = torch.Generator().manual_seed(0)
    q, _ = torch.linalg.qr(torch.randn(256, 256, generator=generator))
    a = q * torch.linspace(0.5, 2.0, 256)
    c = torch.randn(256, generator=generator)

    def image_at_3(model, input_ids, attention_mask):
        states = list(real(model, input_ids, attention_mask))
        states[3] = states[-1] @ a + c
        return tuple(states)

    monkeypatch.setattr("dupbert.tools.hidden.encoder_hidden_states", image_at_3)
    fitted = fit_translators(model, tokenizer, split.fit[:80])
    identity = reconstruction_accuracy(model, tokenizer, split.eval, progress=False)
    linear = reconstruction_accuracy(model, tokenizer, split.eval, progress=False,
                                     translator=fitted)
    assert identity["top1"][3] < 0.05
    hits = (linear["top1"] * linear["n_tokens"]).round().astype(int)
    assert hits[3] == hits[12] == round(identity["top1"][12] * identity["n_tokens"][12])
    assert fitted.validation_mse[3] < 1e-9 < fitted.identity_mse[3]


def test_the_last_hidden_states_map_is_the_identity(translator, tables, rxnmapper, split):
    identity, linear = tables
    model, tokenizer = rxnmapper
    ids = tokenizer(split.eval[:4], padding=True, return_tensors="pt")
    last = dupbert.tools.hidden.encoder_hidden_states(model, ids["input_ids"],
                                               ids["attention_mask"])[-1].detach()
    mapped = translator.apply(12, last)
    assert float((mapped - last).norm() / last.norm()) < 1e-3
    assert abs(linear["top1"][12] - identity["top1"][12]) <= 1e-3
    assert translator.ridge[12] == RIDGE_GRID[0]


def test_pinned_held_out_accuracy_with_both_translators(tables, translator):
    identity, linear = tables
    assert (identity["n_tokens"] == 6371).all() and (linear["n_tokens"] == 6371).all()
    assert identity["top1"].round(6).tolist() == IDENTITY_TOP1
    assert linear["top1"].round(6).tolist() == LINEAR_TOP1
    assert (linear["top1"][:2] >= identity["top1"][:2]).all()  # earlier hidden states gain
    assert translator.n_sequences == N_FIT and translator.n_tokens == 18985
    # the map's held-out error is below the identity's at every hidden state but the last
    assert all(m < i for m, i in zip(translator.validation_mse[:-1], translator.identity_mse))


def test_masked_prediction_takes_the_translator(rxnmapper, split, translator):
    identity = masked_prediction_accuracy(*rxnmapper, split.eval, progress=False)
    linear = masked_prediction_accuracy(*rxnmapper, split.eval, progress=False,
                                        translator=translator)
    assert round(float(identity["top1"][1]), 6) == MASKED_IDENTITY_TOP1_1
    assert round(float(linear["top1"][1]), 6) == MASKED_LINEAR_TOP1_1
    assert abs(linear["top1"][12] - identity["top1"][12]) <= 1e-3


def test_a_translator_refuses_the_texts_it_was_fitted_on(rxnmapper, split, translator):
    with pytest.raises(ValueError) as refused:
        reconstruction_accuracy(*rxnmapper, split.eval[:3] + split.fit[5:7], progress=False,
                                translator=translator)
    assert str(refused.value) == ("2 of 5 texts were used to fit the translator (the first is "
                                  "texts[3]): evaluate it on held-out sequences only, e.g. "
                                  "dupbert.split_texts(texts, n_eval)")
    with pytest.raises(ValueError, match="texts were used to fit the translator"):
        dupbert.lens(*rxnmapper, split.fit[0], translator=translator)


def test_split_texts_is_deterministic_and_disjoint():
    texts = ["a", "b", "c", "a", "d", "b", "e"]
    assert split_texts(texts, 2) == (["c", "d", "e"], ["a", "b"])
    with pytest.raises(ValueError, match="no text left to fit on"):
        split_texts(["a", "b", "a"], 2)


def test_save_and_load_give_the_same_table(tmp_path, rxnmapper, split, translator, tables):
    path = translator.save(tmp_path / "rxnmapper.pt")
    loaded = LinearTranslator.load(path)
    assert torch.equal(loaded.weight, translator.weight)
    assert loaded.fit_digests == translator.fit_digests and loaded.ridge == translator.ridge
    again = reconstruction_accuracy(*rxnmapper, split.eval, progress=False, translator=loaded)
    pd.testing.assert_frame_equal(again, tables[1])
    (tmp_path / "other.pt").write_bytes(b"")
    torch.save({"weight": torch.zeros(1)}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="is not a translator saved by LinearTranslator.save"):
        LinearTranslator.load(tmp_path / "other.pt")


@pytest.mark.parametrize("call, message", [
    (dict(translator="linear"), "translator='linear' needs a fitted translator"),
    (dict(translator="logit"), "translator must be 'identity', 'linear', 'linear-masked', "
                               "'tuned', 'tuned-token' or a fitted translator"),
    (dict(translator="identity", translators="T"), "translators= is given but "
                                                   "translator='identity'"),
])
def test_bad_translator_arguments_are_named(rxnmapper, split, translator, call, message):
    call = {k: translator if v == "T" else v for k, v in call.items()}
    with pytest.raises(ValueError, match=message):
        reconstruction_accuracy(*rxnmapper, split.eval[:2], progress=False, **call)


def test_a_translator_of_another_depth_is_refused(rxnmapper, split, translator):
    model, tokenizer = rxnmapper
    deeper = duplicate_layers(model, [0] * 15)
    with pytest.raises(ValueError, match="the translator maps 13 hidden states of size 256, "
                                         "the model has 16 of size 256"):
        reconstruction_accuracy(deeper, tokenizer, split.eval[:2], progress=False,
                                translator=translator)


def test_probe_models_fits_on_the_sequences_after_the_evaluated_ones(
        tmp_path, monkeypatch, shared_data_dir, zoo_cache, rxnmapper):
    monkeypatch.setenv("DUPBERT_CACHE", str(tmp_path))
    (tmp_path / "models").symlink_to(zoo_cache / "models")
    frame = probe_models(["rxnmapper-albert"], n_sequences=8, fit_sequences=24,
                         translator="linear", data_dir=shared_data_dir, progress=False)
    assert list(frame.columns[:5]) == ["model", "duplication", "init", "translator", "corpus"]
    assert set(frame["translator"]) == {"linear"} and len(frame) == 26
    texts = split_texts(dupbert.load_texts("uspto50k-test", 32, data_dir=shared_data_dir), 8)
    direct = reconstruction_accuracy(*rxnmapper, texts.eval, progress=False,
                                     translator=fit_translators(*rxnmapper, texts.fit))
    pretrained = frame[frame["init"] == "pretrained"].reset_index(drop=True)
    np.testing.assert_allclose(pretrained["top1"], direct["top1"], rtol=0, atol=1e-12)
    # the identity table of the same call shape is the same sequences' (evaluation unchanged)
    plain = probe_models(["rxnmapper-albert"], n_sequences=8, include_control=False,
                         data_dir=shared_data_dir, progress=False)
    assert plain["n_tokens"].tolist() == pretrained["n_tokens"].tolist()
    with pytest.raises(ValueError, match="needs either fit_sequences"):
        probe_models(["rxnmapper-albert"], translator="linear", progress=False)
    with pytest.raises(ValueError, match=r"pass include_control=False and duplications=None"):
        probe_models(["rxnmapper-albert"], translator="linear", progress=False,
                     translators={"rxnmapper-albert": None})


def test_a_translator_fitted_at_masked_positions_sees_only_them(rxnmapper, split, translator,
                                                                tmp_path):
    """Din et al. fit at [MASK] positions: the fit reads the masked positions of masked inputs
    (the probe's seeded selection), so it counts exactly those, and keeps how it was fitted."""
    from dupbert.tools.hidden import mask_for_probe, tokenize_for_probe

    model, tokenizer = rxnmapper
    masked = fit_translators(model, tokenizer, split.fit, fit_at="masked", seed=3)
    examples = mask_for_probe(tokenize_for_probe(tokenizer, split.fit, 512), tokenizer, 0.15,
                              "mask", 3)
    assert masked.n_tokens == sum(sum(label >= 0 for label in e["labels"]) for e in examples)
    unmasked = translator  # fitted on the same reactions, at every position
    assert masked.fit_at == "masked" and unmasked.fit_at == "unmasked"
    assert masked.n_tokens < unmasked.n_tokens / 5
    assert not torch.allclose(masked.weight[1], unmasked.weight[1])
    assert LinearTranslator.load(masked.save(tmp_path / "m.pt")).fit_at == "masked"
    with pytest.raises(ValueError, match=r"fit_at must be one of \['unmasked', 'masked'\], got 'mask'"):
        fit_translators(model, tokenizer, split.fit, fit_at="mask")


def test_probe_models_fits_a_masked_translator_when_asked(tmp_path, monkeypatch, shared_data_dir,
                                                          zoo_cache, rxnmapper):
    monkeypatch.setenv("DUPBERT_CACHE", str(tmp_path))
    (tmp_path / "models").symlink_to(zoo_cache / "models")
    frame = probe_models(["rxnmapper-albert"], n_sequences=8, fit_sequences=24,
                         translator="linear-masked", include_control=False,
                         data_dir=shared_data_dir, progress=False)
    assert set(frame["translator"]) == {"linear-masked"}
    texts = split_texts(dupbert.load_texts("uspto50k-test", 32, data_dir=shared_data_dir), 8)
    fitted = fit_translators(*rxnmapper, texts.fit, fit_at="masked")
    direct = reconstruction_accuracy(*rxnmapper, texts.eval, progress=False, translator=fitted)
    np.testing.assert_allclose(frame["top1"], direct["top1"], rtol=0, atol=1e-12)


# --- the tuned lens (Belrose et al. 2023): method="cross-entropy", translator="tuned" ---

# Measured once (one CPU thread): rxnmapper-albert, "tuned" fitted on the first N_TUNED fitting
# reactions (the defaults: 8 epochs, seed 0), evaluated on the same N_EVAL reactions as above.
N_TUNED = 40
TUNED_TOP1_1 = 0.996233  # hidden state 1; the identity's is IDENTITY_TOP1[1]
TUNED_VALIDATION_KL_1 = 0.030184  # nats, on the held-out fitting reactions
TUNED_IDENTITY_KL_1 = 0.418691  # the same for the identity
TOKEN_TOP1_1 = 0.998116  # hidden state 1, fitted by the cross-entropy of the input token
TOKEN_VALIDATION_CE_1 = 0.048505  # nats, that cross-entropy on the held-out fitting reactions
TOKEN_IDENTITY_CE_1 = 0.443919  # the same for the identity


@pytest.fixture(scope="module")
def tiny_bert(rxnmapper):
    """A tiny random 4-block BERT over rxnmapper's vocabulary (plumbing only). Initialised with
    std 0.2, not BERT's 0.02, so that its hidden states read through its head differ by a KL of
    about 1 nat, not 1e-6."""
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(rxnmapper[1]), hidden_size=32, num_hidden_layers=4,
                        num_attention_heads=2, intermediate_size=64, initializer_range=0.2)
    return BertForMaskedLM(config).eval()


@pytest.fixture(scope="module")
def tiny_tuned(tiny_bert, rxnmapper, split):
    return fit_translators(tiny_bert, rxnmapper[1], split.fit[:24], method="cross-entropy",
                           head=mlm_head(tiny_bert))


def test_the_tuned_lens_keeps_the_last_state_and_never_reads_worse(tiny_bert, rxnmapper, split,
                                                                   tiny_tuned):
    """The last hidden state's map is exactly the identity; on the fitting positions the KL to
    the model's own output is, at every hidden state, at most the identity's, and below it at
    the middle ones; the held-out KL it reports is never above the identity's."""
    fitted = tiny_tuned
    assert fitted.method == "cross-entropy" and fitted.fit_at == "unmasked"
    assert fitted.ridge == [] and len(fitted.epochs) == fitted.n_states == 5
    assert torch.equal(fitted.weight[-1], torch.eye(32))
    assert torch.equal(fitted.bias[-1], torch.zeros(32))
    assert fitted.epochs[-1] == 0 and fitted.validation_kl[-1] == fitted.identity_kl[-1] == 0
    assert all(v <= i for v, i in zip(fitted.validation_kl, fitted.identity_kl))
    identity = lens_kl(tiny_bert, rxnmapper[1], split.fit[:24], mlm_head(tiny_bert))
    tuned = lens_kl(tiny_bert, rxnmapper[1], split.fit[:24], mlm_head(tiny_bert), fitted)
    assert all(t <= i for t, i in zip(tuned, identity)) and tuned[-1] == identity[-1] == 0
    assert all(t < 0.5 * i for t, i in zip(tuned[1:-1], identity[1:-1]))


def test_the_tuned_lens_is_deterministic_and_saved_with_its_method(tiny_bert, rxnmapper, split,
                                                                   tiny_tuned, tmp_path):
    again = fit_translators(tiny_bert, rxnmapper[1], split.fit[:24], method="cross-entropy",
                            head=mlm_head(tiny_bert))
    assert torch.equal(again.weight, tiny_tuned.weight) and torch.equal(again.bias,
                                                                        tiny_tuned.bias)
    assert again.epochs == tiny_tuned.epochs and again.validation_kl == tiny_tuned.validation_kl
    other = fit_translators(tiny_bert, rxnmapper[1], split.fit[:24], method="cross-entropy",
                            head=mlm_head(tiny_bert), seed=1)
    assert not torch.equal(other.weight, tiny_tuned.weight)  # the seed orders the mini-batches
    loaded = LinearTranslator.load(tiny_tuned.save(tmp_path / "tuned.pt"))
    assert loaded.method == "cross-entropy" and torch.equal(loaded.weight, tiny_tuned.weight)
    assert (loaded.epochs, loaded.validation_kl, loaded.identity_kl) == (
        tiny_tuned.epochs, tiny_tuned.validation_kl, tiny_tuned.identity_kl)
    assert "cross-entropy against the output, epochs=" in repr(loaded)


def test_a_translator_saved_before_the_method_field_loads_as_ridge(tmp_path):
    torch.save({"format": "dupbert-linear-translator/1", "weight": torch.zeros(2, 3, 3),
                "bias": torch.zeros(2, 3), "ridge": [1e-8, 1e-8], "validation_mse": [0.1, 0.0],
                "identity_mse": [0.2, 0.0], "n_tokens": 10, "n_sequences": 2,
                "fit_digests": ["0123456789abcdef"], "fit_at": "unmasked"}, tmp_path / "old.pt")
    old = LinearTranslator.load(tmp_path / "old.pt")
    assert old.method == "ridge" and old.epochs == old.validation_kl == old.identity_kl == []
    assert old.fit_digests == frozenset({"0123456789abcdef"})


def test_the_tuned_name_takes_only_a_tuned_translator(tiny_bert, rxnmapper, split, tiny_tuned):
    model, tokenizer = tiny_bert, rxnmapper[1]
    named = reconstruction_accuracy(model, tokenizer, split.eval[:4], progress=False,
                                    translator="tuned", translators=tiny_tuned)
    itself = reconstruction_accuracy(model, tokenizer, split.eval[:4], progress=False,
                                     translator=tiny_tuned)
    pd.testing.assert_frame_equal(named, itself)
    with pytest.raises(ValueError, match="translator='linear' reads a translator fitted with "
                                         "method='ridge', this one was fitted with "
                                         "method='cross-entropy': pass translator='tuned'"):
        reconstruction_accuracy(model, tokenizer, split.eval[:4], progress=False,
                                translator="linear", translators=tiny_tuned)
    with pytest.raises(ValueError, match=r"translator='tuned' needs a fitted translator: "
                                         r"translators=dupbert.fit_translators\(model, "
                                         r"tokenizer, fit_texts, method='cross-entropy', "
                                         r"head=dupbert.mlm_head\(model\)\)"):
        reconstruction_accuracy(model, tokenizer, split.eval[:4], progress=False,
                                translator="tuned")
    with pytest.raises(ValueError, match="method must be one of"):
        fit_translators(model, tokenizer, split.fit[:4], method="tuned")
    with pytest.raises(ValueError, match="epochs must be an integer >= 1, got 0"):
        fit_translators(model, tokenizer, split.fit[:4], method="cross-entropy", epochs=0,
                        head=mlm_head(model))
    with pytest.raises(ValueError, match=r"method='cross-entropy' trains through the model's MLM "
                                         r"head: pass head=dupbert.mlm_head\(model\), got "
                                         r"head=NoneType"):
        fit_translators(model, tokenizer, split.fit[:4], method="cross-entropy")


def test_the_tuned_lens_reads_rxnmappers_hidden_state_1_better(rxnmapper, split):
    """Real model, pinned: the tuned lens fitted on 40 reactions reconstructs more of the held-out
    tokens at hidden state 1 than the head reading it unchanged (0.869), and its held-out KL to
    the model's own output is below the identity's there."""
    started = time.perf_counter()
    fitted = fit_translators(*rxnmapper, split.fit[:N_TUNED], method="cross-entropy",
                             head=mlm_head(rxnmapper[0]))
    tuned = reconstruction_accuracy(*rxnmapper, split.eval, progress=False, translator=fitted)
    print(f"tuned lens fit + probe: {time.perf_counter() - started:.1f} s; top1[1] "
          f"{tuned['top1'][1]:.6f}, KL[1] {fitted.validation_kl[1]:.6f} (identity "
          f"{fitted.identity_kl[1]:.6f}), epochs {fitted.epochs}")
    assert tuned["n_tokens"][1] == 6371
    assert tuned["top1"][1] > IDENTITY_TOP1[1] + 0.1
    assert tuned["top1"][1] == pytest.approx(TUNED_TOP1_1, abs=1e-3)
    assert fitted.validation_kl[1] == pytest.approx(TUNED_VALIDATION_KL_1, rel=1e-2)
    assert fitted.identity_kl[1] == pytest.approx(TUNED_IDENTITY_KL_1, rel=1e-4)
    assert fitted.validation_kl[1] < fitted.identity_kl[1]


def test_probe_models_fits_a_tuned_translator_when_asked(tmp_path, monkeypatch, shared_data_dir,
                                                         zoo_cache, rxnmapper):
    monkeypatch.setenv("DUPBERT_CACHE", str(tmp_path))
    (tmp_path / "models").symlink_to(zoo_cache / "models")
    frame = probe_models(["rxnmapper-albert"], n_sequences=8, fit_sequences=24,
                         translator="tuned", include_control=False,
                         data_dir=shared_data_dir, progress=False)
    assert set(frame["translator"]) == {"tuned"}
    texts = split_texts(dupbert.load_texts("uspto50k-test", 32, data_dir=shared_data_dir), 8)
    fitted = fit_translators(*rxnmapper, texts.fit, method="cross-entropy",
                             head=mlm_head(rxnmapper[0]))
    direct = reconstruction_accuracy(*rxnmapper, texts.eval, progress=False, translator=fitted)
    np.testing.assert_allclose(frame["top1"], direct["top1"], rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="translator='tuned' reads translators fitted with "
                                         "method='cross-entropy'"):
        probe_models(["rxnmapper-albert"], n_sequences=8, translator="tuned",
                     include_control=False, progress=False,
                     translators={"rxnmapper-albert": fit_translators(*rxnmapper, texts.fit)})
    with pytest.raises(ValueError, match=r"fit_sequences and translators are for the fitted "
                                         r"translators, translator in \['linear', "
                                         r"'linear-masked', 'tuned', 'tuned-token'\]"):
        probe_models(["rxnmapper-albert"], fit_sequences=3, progress=False)


@pytest.fixture(scope="module")
def tiny_tuned_token(tiny_bert, rxnmapper, split):
    return fit_translators(tiny_bert, rxnmapper[1], split.fit[:24], method="cross-entropy",
                           head=mlm_head(tiny_bert), target="token")


def test_the_token_target_trains_on_the_input_token(tiny_bert, rxnmapper, split,
                                                    tiny_tuned_token, tmp_path):
    """target="token": the maps are trained and chosen by the cross-entropy of the input token;
    the last map stays the identity, whose loss is the last state's own (not 0, unlike KL); no
    hidden state reads worse than through the identity; the target is saved."""
    fitted = tiny_tuned_token
    assert fitted.target == "token" and fitted.method == "cross-entropy"
    assert torch.equal(fitted.weight[-1], torch.eye(32))
    assert fitted.validation_kl[-1] == fitted.identity_kl[-1] > 0
    assert all(v <= i for v, i in zip(fitted.validation_kl, fitted.identity_kl))
    assert any(v < i for v, i in zip(fitted.validation_kl[:-1], fitted.identity_kl[:-1]))
    output = fit_translators(tiny_bert, rxnmapper[1], split.fit[:24], method="cross-entropy",
                             head=mlm_head(tiny_bert))
    assert not torch.equal(output.weight, fitted.weight)  # another target, other maps
    loaded = LinearTranslator.load(fitted.save(tmp_path / "token.pt"))
    assert loaded.target == "token" and torch.equal(loaded.weight, fitted.weight)
    assert "cross-entropy against the token" in repr(loaded)
    with pytest.raises(ValueError, match=r"target must be one of \['output', 'token'\], got 'x'"):
        fit_translators(tiny_bert, rxnmapper[1], split.fit[:4], method="cross-entropy",
                        head=mlm_head(tiny_bert), target="x")
    with pytest.raises(ValueError, match="target='token' is what method='cross-entropy' trains "
                                         "against; method='ridge' regresses"):
        fit_translators(tiny_bert, rxnmapper[1], split.fit[:4], target="token")


def test_each_translator_name_takes_only_its_own_fit(tiny_bert, rxnmapper, split,
                                                      tiny_tuned_token, translator):
    """A fitted translator read under the name of another fit is refused, naming what differs
    and the name that fits it."""
    model, tokenizer = tiny_bert, rxnmapper[1]
    with pytest.raises(ValueError, match="translator='tuned' reads a translator fitted with "
                                         "target='output', this one was fitted with "
                                         "target='token': pass translator='tuned-token'"):
        reconstruction_accuracy(model, tokenizer, split.eval[:4], progress=False,
                                translator="tuned", translators=tiny_tuned_token)
    masked = fit_translators(*rxnmapper, split.fit[:24], fit_at="masked")
    with pytest.raises(ValueError, match="translator='linear' reads a translator fitted with "
                                         "fit_at='unmasked', this one was fitted with "
                                         "fit_at='masked': pass translator='linear-masked'"):
        reconstruction_accuracy(*rxnmapper, split.eval[:4], progress=False,
                                translator="linear", translators=masked)
    named = reconstruction_accuracy(model, tokenizer, split.eval[:4], progress=False,
                                    translator="tuned-token", translators=tiny_tuned_token)
    itself = reconstruction_accuracy(model, tokenizer, split.eval[:4], progress=False,
                                     translator=tiny_tuned_token)
    pd.testing.assert_frame_equal(named, itself)


def test_the_token_target_reads_rxnmappers_hidden_state_1(rxnmapper, split):
    """Real model, pinned: fitted by the cross-entropy of the input token on 40 reactions, the
    lens reconstructs more held-out tokens at hidden state 1 than the identity (0.869)."""
    fitted = fit_translators(*rxnmapper, split.fit[:N_TUNED], method="cross-entropy",
                             head=mlm_head(rxnmapper[0]), target="token")
    tuned = reconstruction_accuracy(*rxnmapper, split.eval, progress=False, translator=fitted)
    print(f"token target: top1[1] {tuned['top1'][1]:.6f}, CE[1] {fitted.validation_kl[1]:.6f} "
          f"(identity {fitted.identity_kl[1]:.6f}), epochs {fitted.epochs}")
    assert tuned["top1"][1] > IDENTITY_TOP1[1] + 0.1
    assert tuned["top1"][1] == pytest.approx(TOKEN_TOP1_1, abs=1e-3)
    assert fitted.validation_kl[1] == pytest.approx(TOKEN_VALIDATION_CE_1, rel=1e-2)
    assert fitted.identity_kl[1] == pytest.approx(TOKEN_IDENTITY_CE_1, rel=1e-4)


def test_reconstruction_and_masked_prediction_read_one_fit(tmp_path, monkeypatch, shared_data_dir,
                                                            zoo_cache):
    """probe_models fits a translator once per model, duplication and fit: the masked call reads
    the reconstruction call's fit (RQ1 asks for both), unless its masks differ (linear-masked)."""
    import dupbert.tools.probe as probe_module
    import dupbert.tools.translators as translators_module

    monkeypatch.setenv("DUPBERT_CACHE", str(tmp_path))
    (tmp_path / "models").symlink_to(zoo_cache / "models")
    monkeypatch.setattr(probe_module, "_FITTED", {})
    fits = []
    real = translators_module.fit_translators
    monkeypatch.setattr(translators_module, "fit_translators",
                        lambda *a, **k: fits.append(k["fit_at"]) or real(*a, **k))
    common = dict(n_sequences=4, fit_sequences=12, include_control=False,
                  data_dir=shared_data_dir, progress=False)
    for translator in ("linear", "linear-masked"):
        probe_models(["rxnmapper-albert"], translator=translator, mask_rate=0.2, **common)
        probe_models(["rxnmapper-albert"], translator=translator, masking="mask", mask_rate=0.2,
                     **common)
    assert fits == ["unmasked", "masked"]
    probe_models(["rxnmapper-albert"], translator="linear-masked", masking="mask", mask_rate=0.3,
                 **common)
    assert fits == ["unmasked", "masked", "masked"]  # other masks, another fit
