"""Model loading: the offline zoo, the MLM-head check and clear errors for bad names."""

import json
from pathlib import Path

import numpy as np

import pytest
import torch
from transformers import (CONFIG_MAPPING, AlbertConfig, AlbertForMaskedLM, AutoModelForMaskedLM,
                          BertConfig, BertForMaskedLM, BertModel, RobertaConfig,
                          RobertaForMaskedLM)

import dupbert
from dupbert.tools.duplicate import duplicate_layers
from dupbert.tools.probe import reconstruction_accuracy
from dupbert import ChecksumMismatch, MLMHeadMissing, ModelNotAvailable, load_mlm
from dupbert.core.data import load_texts
from dupbert.tools.hidden import encoder_hidden_states
from dupbert.tools.models import (MLM_FAMILIES, REFUSED_FAMILIES, check_mlm_head, mlm_head,
                            mlm_head_modules, random_init_control, support_table)
from dupbert.core.zoo import ZOO, _move_into_place, fetch_wheel, sha256_of, zoo_folder

TINY_BERT = dict(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=32, max_position_embeddings=64)


def _save_with_tokenizer(model, folder, rxnmapper):
    model.save_pretrained(folder)
    rxnmapper[1].save_pretrained(folder)
    return folder


@pytest.mark.parametrize("name, corpus", [
    ("rxnmapper-albert", "uspto50k-test"),
    ("rxnfp-bert", "uspto50k-test"),
    ("antiberty", "therasabdab"),
])
def test_zoo_tokenizers_keep_real_tokens(name, corpus, zoo_cache, shared_data_dir):
    model, tokenizer = load_mlm(name, cache=zoo_cache)
    texts = load_texts(corpus, 200, data_dir=shared_data_dir)
    ids = tokenizer(texts)["input_ids"]
    n_unknown = sum(row.count(tokenizer.unk_token_id) for row in ids)
    assert n_unknown == 0
    # one token per residue / SMILES atom: the inner tokens spell the text again
    inner = tokenizer.convert_ids_to_tokens(ids[0][1:-1])
    assert "".join(inner) == texts[0]
    assert ids[0][0] == tokenizer.cls_token_id and ids[0][-1] == tokenizer.sep_token_id
    assert model.config.vocab_size == len(tokenizer)


def test_zoo_models_have_documented_shapes(zoo_cache):
    shapes = {}
    for name in ["antiberty", "rxnfp-bert", "rxnmapper-albert"]:
        model, _ = load_mlm(name, cache=zoo_cache)
        shapes[name] = (type(model).__name__, mlm_head_modules(model), model.config.num_hidden_layers,
                        model.config.hidden_size, sum(p.numel() for p in model.parameters()))
    assert shapes == {
        "antiberty": ("BertForMaskedLM", ("cls",), 8, 512, 25_759_769),
        "rxnfp-bert": ("BertForMaskedLM", ("cls",), 12, 256, 6_675_535),
        "rxnmapper-albert": ("AlbertForMaskedLM", ("predictions",), 12, 256, 735_567),
    }


def test_zoo_folder_is_a_plain_transformers_folder_with_provenance(zoo_cache):
    folder = zoo_folder("rxnmapper-albert", zoo_cache)
    provenance = json.loads((folder / "dupbert-zoo.json").read_text())
    assert provenance["wheel_sha256"] == ZOO["rxnmapper-albert"].wheel_sha256
    assert (folder / "model.safetensors").is_file() and not (folder / "pytorch_model.bin").exists()
    by_folder, _ = load_mlm(str(folder))
    by_name, _ = load_mlm("rxnmapper-albert", cache=zoo_cache)
    for (key, a), (_, b) in zip(by_folder.state_dict().items(), by_name.state_dict().items()):
        assert torch.equal(a, b), key


def test_zoo_cache_is_reused_without_pip(zoo_cache, monkeypatch):
    folder = zoo_folder("rxnmapper-albert", zoo_cache)
    stamp = (folder / "model.safetensors").stat().st_mtime_ns

    def no_pip(*args, **kwargs):
        raise AssertionError("pip must not run when the zoo folder is cached")

    monkeypatch.setattr("dupbert.core.zoo.subprocess.run", no_pip)
    assert zoo_folder("rxnmapper-albert", zoo_cache) == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp
    # the wheel itself is also reused, and checked again
    assert sha256_of(fetch_wheel(ZOO["rxnmapper-albert"], zoo_cache)) == \
        ZOO["rxnmapper-albert"].wheel_sha256


def test_a_folder_built_by_two_processes_at_once_keeps_the_first(tmp_path, monkeypatch):
    # two processes sharing a cache (test workers, two notebooks) may finish the same build
    # together: the second keeps the first's folder and fails on nothing
    target, staging = tmp_path / "model", tmp_path / "staging"
    for folder, name in ((target, "theirs"), (staging, "ours")):
        folder.mkdir()
        (folder / name).write_text(name)
    monkeypatch.setattr(Path, "exists", lambda self: False)  # theirs landed after our check
    _move_into_place(staging, target)
    assert [p.name for p in target.iterdir()] == ["theirs"]
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    with pytest.raises(OSError):  # anything else in the way is an error
        _move_into_place(staging, blocked)


def test_checksum_mismatch_names_the_file_and_keeps_it(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    fake = wheels / "rxnmapper-0.4.3-py3-none-any.whl"
    fake.write_bytes(b"not the real wheel")
    with pytest.raises(ChecksumMismatch) as error:
        load_mlm("rxnmapper-albert", cache=tmp_path)
    message = str(error.value)
    assert str(fake) in message and ZOO["rxnmapper-albert"].wheel_sha256 in message
    assert sha256_of(fake) in message
    assert fake.read_bytes() == b"not the real wheel"  # nothing lost
    assert not (tmp_path / "models" / "rxnmapper-albert-0.4.3").exists()


def test_unknown_name_says_what_was_tried(tmp_path):
    with pytest.raises(ModelNotAvailable) as error:
        load_mlm("no-such-model-xyz", cache=tmp_path)
    message = str(error.value)
    assert "no-such-model-xyz" in message
    for zoo_name in ZOO:
        assert zoo_name in message
    assert "local folder" in message and "Hub" in message


def test_offline_hub_id_fails_with_advice_and_no_network(tmp_path, monkeypatch):
    import socket

    def no_network(*args, **kwargs):
        raise AssertionError("an offline Hub id must not open a connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)  # how the time would be lost
    with pytest.raises(ModelNotAvailable) as error:
        load_mlm("bert-base-uncased", cache=tmp_path)
    assert "HF_HUB_OFFLINE is set" in str(error.value)


@pytest.mark.parametrize("bad", ["", "   ", None])
def test_empty_name_is_refused(bad):
    with pytest.raises(ModelNotAvailable, match="zoo name"):
        load_mlm(bad)


def test_encoder_without_head_is_refused_by_name():
    with pytest.raises(MLMHeadMissing, match="load_encoder"):
        load_mlm("all-MiniLM-L6-v2")


def test_checkpoint_without_head_weights_is_refused(tmp_path, rxnmapper):
    torch.manual_seed(0)
    encoder_only = _save_with_tokenizer(BertModel(BertConfig(**TINY_BERT)), tmp_path / "enc",
                                        rxnmapper)
    with pytest.raises(MLMHeadMissing) as error:
        load_mlm(str(encoder_only))
    assert "cls.predictions" in str(error.value)


def test_checkpoint_with_part_of_the_head_is_refused(tmp_path, rxnmapper):
    from safetensors.torch import load_file, save_file

    torch.manual_seed(0)
    folder = _save_with_tokenizer(BertForMaskedLM(BertConfig(**TINY_BERT)), tmp_path / "mlm",
                                  rxnmapper)
    load_mlm(str(folder))  # complete: loads
    weights = load_file(folder / "model.safetensors")
    del weights["cls.predictions.transform.dense.weight"]
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(MLMHeadMissing, match="cls.predictions.transform.dense.weight"):
        load_mlm(str(folder))


def test_head_modules_of_the_paper_families_and_refusals():
    torch.manual_seed(0)
    roberta = RobertaForMaskedLM(RobertaConfig(**TINY_BERT, pad_token_id=1))
    albert = AlbertForMaskedLM(AlbertConfig(**TINY_BERT, embedding_size=8))
    assert mlm_head_modules(roberta) == ("lm_head",)
    assert mlm_head_modules(albert) == ("predictions",)
    assert mlm_head(albert) is albert.predictions
    assert mlm_head_modules(BertForMaskedLM(BertConfig(**TINY_BERT))) == ("cls",)
    with pytest.raises(MLMHeadMissing, match="has no MLM head: top-level children"):
        mlm_head_modules(BertModel(BertConfig(**TINY_BERT)))


def test_random_init_control_reinitialises_everything_reproducibly(rxnmapper):
    model, _ = rxnmapper
    first = random_init_control(model, seed=3)
    again = random_init_control(model, seed=3)
    other = random_init_control(model, seed=4)
    original = model.state_dict()
    for key, value in first.state_dict().items():
        assert torch.equal(value, again.state_dict()[key]), key
        if value.dtype.is_floating_point and value.numel() > 1 and value.std() > 0:
            assert not torch.equal(value, original[key]), f"{key} was not reinitialised"
    assert not torch.equal(first.predictions.dense.weight, other.predictions.dense.weight)
    assert not first.training
    assert dupbert.mlm_head(first) is first.predictions


# ----------------------------------------------------------------------------- every MLM family
# A tiny random-weight model per family of dupbert.tools.models.MLM_FAMILIES (shapes and plumbing only,
# never results), with the rxnmapper SMILES tokenizer's 591-token vocabulary, so the probe can run
# on real reactions. Norm weights are perturbed so that a missing or doubled final norm shows.

_COMMON = dict(hidden_size=16, num_hidden_layers=3, num_attention_heads=2, intermediate_size=32,
               max_position_embeddings=128)
_IDS = dict(pad_token_id=0, bos_token_id=12, eos_token_id=13)  # the SMILES tokenizer's PAD/CLS/SEP
TINY_FAMILIES = {
    "bert": dict(_COMMON),
    "albert": dict(_COMMON, embedding_size=8),
    "roberta": dict(_COMMON, **_IDS),
    "xlm-roberta": dict(_COMMON, **_IDS),
    "camembert": dict(_COMMON, **_IDS),
    "distilbert": dict(dim=16, n_layers=3, n_heads=2, hidden_dim=32, max_position_embeddings=128),
    "electra": dict(_COMMON, embedding_size=8),
    "convbert": dict(_COMMON, embedding_size=8, head_ratio=1, conv_kernel_size=3),
    "deberta": dict(_COMMON, relative_attention=True, pos_att_type=["p2c", "c2p"]),
    "deberta-v2": dict(_COMMON, relative_attention=True, position_buckets=8,
                       pos_att_type=["p2c", "c2p"], conv_kernel_size=3),
    "mpnet": dict(_COMMON, **_IDS),
    "mobilebert": dict(_COMMON, embedding_size=8, intra_bottleneck_size=8, true_hidden_size=8,
                       num_feedforward_networks=2),
    "modernbert": dict(_COMMON, global_attn_every_n_layers=2, local_attention=4,
                       cls_token_id=12, sep_token_id=13, **_IDS),
    "roberta-prelayernorm": dict(_COMMON, **_IDS),
    "xlm-roberta-xl": dict(_COMMON, **_IDS),
    "ernie": dict(_COMMON),
    "data2vec-text": dict(_COMMON, **_IDS),
}
# DeBERTa-v2/v3 with the non-legacy head (config.legacy=False), besides the legacy one.
TINY_CASES = {**TINY_FAMILIES, "deberta-v2 (legacy=False)": dict(TINY_FAMILIES["deberta-v2"],
                                                                  legacy=False)}


def tiny_mlm(case: str, vocab_size: int = 591, seed: int = 0):
    """A tiny random *ForMaskedLM of the family ``case`` (seeded), norms perturbed."""
    family = case.split(" ")[0]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForMaskedLM.from_config(
            CONFIG_MAPPING[family](vocab_size=vocab_size, **TINY_CASES[case])).eval()
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if "norm" in name.lower():
                    parameter.add_(torch.randn_like(parameter) * 0.3)
    return model


def _logits(model, ids, mask):
    with torch.inference_mode():
        return model(input_ids=ids, attention_mask=mask).logits


SHORT_REACTION = "CCO>>CC=O"  # 8 tokens: with it, batches of truncated reactions are padded


def _batch(tokenizer, texts):
    texts = [*texts, SHORT_REACTION]
    batch = tokenizer(texts, padding=True, truncation=True, max_length=40, return_tensors="pt")
    return batch["input_ids"], batch["attention_mask"]


def test_every_listed_family_has_a_tiny_model_here():
    assert set(TINY_FAMILIES) == set(MLM_FAMILIES)
    table = support_table()
    assert set(table.loc[table["status"] == "tested", "family"]) == set(MLM_FAMILIES)
    assert set(table.loc[table["status"].str.startswith("refused"), "family"]) == \
        {*REFUSED_FAMILIES, "any other"}


@pytest.mark.parametrize("case", TINY_CASES)
def test_head_on_the_last_hidden_state_gives_the_logits(case, rxnmapper, uspto_first_64):
    model = tiny_mlm(case)
    ids, mask = _batch(rxnmapper[1], uspto_first_64[:3])
    assert mask.min() == 0  # the batch is padded
    with torch.inference_mode():
        states = encoder_hidden_states(model, ids, mask)
        head = mlm_head(model)
        assert isinstance(head, torch.nn.Module)
        assert len(states) == model.config.num_hidden_layers + 1 == 4
        assert all(state.shape == (*ids.shape, 16) for state in states)
        torch.testing.assert_close(head(states[-1]), _logits(model, ids, mask),
                                   rtol=1e-5, atol=1e-5)
    assert check_mlm_head(model) < 1e-4
    assert not hasattr(model.config, "tie_last_hidden_states")  # restored after the call


@pytest.mark.parametrize("case", ["modernbert", "roberta-prelayernorm", "xlm-roberta-xl"])
def test_pre_ln_states_are_all_read_before_the_final_norm(case, rxnmapper, uspto_first_64):
    """transformers puts the post-norm state last in hidden_states; the head would then apply the
    final norm twice to it."""
    model = tiny_mlm(case)
    ids, mask = _batch(rxnmapper[1], uspto_first_64[:2])
    with torch.inference_mode():
        tied = model.base_model(input_ids=ids, attention_mask=mask,
                                output_hidden_states=True).hidden_states
        ours = encoder_hidden_states(model, ids, mask)
        for layer in range(len(ours) - 1):
            torch.testing.assert_close(ours[layer], tied[layer], rtol=0, atol=0)
        assert (ours[-1] - tied[-1]).abs().max() > 0.1
        assert (mlm_head(model)(tied[-1]) - _logits(model, ids, mask)).abs().max() > 1e-3


@pytest.mark.parametrize("case", TINY_CASES)
def test_probe_counts_only_real_tokens_of_every_family(case, rxnmapper, uspto_first_64):
    """Batched with padding, the probe's hits equal a reference made one unpadded sequence at a
    time (the last hidden state's from model(...).logits), over non-special positions only."""
    model, tokenizer = tiny_mlm(case), rxnmapper[1]
    texts = [*uspto_first_64[:6], SHORT_REACTION]
    frame = reconstruction_accuracy(model, tokenizer, texts, batch_size=4, max_length=40,
                                    progress=False)
    hits, n_tokens = torch.zeros(4, dtype=torch.long), 0
    for text in texts:
        encoded = tokenizer(text, truncation=True, max_length=40, return_tensors="pt",
                            return_special_tokens_mask=True)
        ids, real = encoded["input_ids"], encoded["special_tokens_mask"][0] == 0
        with torch.inference_mode():
            states = encoder_hidden_states(model, ids, torch.ones_like(ids))
            guesses = [mlm_head(model)(s[0]).argmax(-1) for s in states[:-1]]
            guesses.append(_logits(model, ids, torch.ones_like(ids))[0].argmax(-1))
        hits += torch.stack([((g == ids[0]) & real).sum() for g in guesses])
        n_tokens += int(real.sum())
    assert n_tokens == 6 * 38 + 8  # 40 tokens minus CLS and SEP: the six reactions are longer
    assert (frame["n_tokens"] == n_tokens).all()
    assert np.rint(frame["top1"] * n_tokens).astype(int).tolist() == hits.tolist()


@pytest.mark.parametrize("case", TINY_CASES)
def test_duplication_and_save_load_round_trip_of_every_family(case, rxnmapper, uspto_first_64,
                                                              tmp_path):
    model = tiny_mlm(case)
    ids, mask = _batch(rxnmapper[1], uspto_first_64[:3])
    # block 1 copied (ModernBERT's block 0 cannot be copied through save/load: next test)
    deeper = duplicate_layers(model, [0, 1, 1, 2])
    assert deeper.config.num_hidden_layers == 4
    assert len(encoder_hidden_states(deeper, ids, mask)) == 5
    assert not torch.allclose(_logits(deeper, ids, mask), _logits(model, ids, mask))
    torch.testing.assert_close(_logits(duplicate_layers(deeper, [0, 1, 3]), ids, mask),
                               _logits(model, ids, mask), rtol=0, atol=0)
    deeper.save_pretrained(tmp_path)
    loaded = AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    assert loaded.config.dupbert_source_blocks == [0, 1, 1, 2]
    torch.testing.assert_close(_logits(loaded, ids, mask), _logits(deeper, ids, mask),
                               rtol=0, atol=0)
    assert check_mlm_head(loaded) < 1e-4


def test_modernbert_copy_of_block_0_is_rebuilt_with_an_attention_norm(tmp_path):
    model = tiny_mlm("modernbert")
    deeper = duplicate_layers(model, [0, 0, 1, 2])
    assert deeper.config.layer_types == ["full_attention", "full_attention",
                                         "sliding_attention", "full_attention"]
    assert isinstance(deeper.model.layers[1].attn_norm, torch.nn.Identity)
    deeper.save_pretrained(tmp_path)
    loaded = AutoModelForMaskedLM.from_pretrained(tmp_path)
    assert isinstance(loaded.model.layers[1].attn_norm, torch.nn.LayerNorm)
    assert [layer.attention_type for layer in loaded.model.layers] == deeper.config.layer_types


@pytest.mark.parametrize("family, config, reason", [
    ("bart", dict(d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                  decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
                  max_position_embeddings=64), "encoder-decoder"),
    ("funnel", dict(d_model=16, n_head=2, d_head=8, d_inner=32, block_sizes=[1, 1]),
     "pools the sequence"),
    ("megatron-bert", dict(TINY_BERT), "after the final LayerNorm"),
    ("nystromformer", dict(TINY_BERT, segment_means_seq_len=8, num_landmarks=4),
     "not a family dupbert has checked"),
])
def test_families_that_cannot_work_are_refused_with_the_reason(family, config, reason):
    config = {**config, "vocab_size": 40}
    model = AutoModelForMaskedLM.from_config(CONFIG_MAPPING[family](**config))
    with pytest.raises(MLMHeadMissing, match=reason) as error:
        mlm_head(model)
    assert family in str(error.value) and "modernbert" in str(error.value)


@pytest.mark.parametrize("case", ["distilbert", "modernbert"])
def test_load_mlm_loads_families_that_were_refused_before(case, rxnmapper, tmp_path):
    model = tiny_mlm(case)
    _save_with_tokenizer(model, tmp_path / case, rxnmapper)
    loaded, tokenizer = load_mlm(str(tmp_path / case))
    assert type(loaded) is type(model) and len(tokenizer) == 591
    for (key, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), key
