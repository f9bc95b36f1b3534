"""Model loading: the offline zoo, the MLM-head check and clear errors for bad names."""

import json
import time

import pytest
import torch
from transformers import (AlbertConfig, AlbertForMaskedLM, BertConfig, BertForMaskedLM,
                          BertModel, DistilBertConfig, DistilBertForMaskedLM, RobertaConfig,
                          RobertaForMaskedLM)

import dupbert
from dupbert import ChecksumMismatch, MLMHeadMissing, ModelNotAvailable, load_mlm
from dupbert.data import load_texts
from dupbert.models import mlm_head_name, random_init_control
from dupbert.zoo import ZOO, fetch_wheel, sha256_of, zoo_folder

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
        shapes[name] = (type(model).__name__, mlm_head_name(model), model.config.num_hidden_layers,
                        model.config.hidden_size, sum(p.numel() for p in model.parameters()))
    assert shapes == {
        "antiberty": ("BertForMaskedLM", "cls", 8, 512, 25_759_769),
        "rxnfp-bert": ("BertForMaskedLM", "cls", 12, 256, 6_675_535),
        "rxnmapper-albert": ("AlbertForMaskedLM", "predictions", 12, 256, 735_567),
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

    monkeypatch.setattr("dupbert.zoo.subprocess.run", no_pip)
    started = time.perf_counter()
    assert zoo_folder("rxnmapper-albert", zoo_cache) == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp
    # the wheel itself is also reused, and checked again
    assert sha256_of(fetch_wheel(ZOO["rxnmapper-albert"], zoo_cache)) == \
        ZOO["rxnmapper-albert"].wheel_sha256
    assert time.perf_counter() - started < 30


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


def test_offline_hub_id_fails_fast_with_advice(tmp_path):
    started = time.perf_counter()
    with pytest.raises(ModelNotAvailable) as error:
        load_mlm("bert-base-uncased", cache=tmp_path)
    assert time.perf_counter() - started < 20
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


def test_head_is_found_generically():
    torch.manual_seed(0)
    roberta = RobertaForMaskedLM(RobertaConfig(**TINY_BERT, pad_token_id=1))
    albert = AlbertForMaskedLM(AlbertConfig(**TINY_BERT, embedding_size=8))
    assert mlm_head_name(roberta) == "lm_head"
    assert mlm_head_name(albert) == "predictions"
    assert mlm_head_name(BertForMaskedLM(BertConfig(**TINY_BERT))) == "cls"
    distil = DistilBertForMaskedLM(DistilBertConfig(vocab_size=40, dim=16, n_layers=1, n_heads=2,
                                                    hidden_dim=32, max_position_embeddings=64))
    with pytest.raises(MLMHeadMissing, match="vocab_transform"):
        mlm_head_name(distil)
    with pytest.raises(MLMHeadMissing, match="top-level children"):
        mlm_head_name(BertModel(BertConfig(**TINY_BERT)))


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
