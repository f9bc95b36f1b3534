"""Weights committed as an overlay on a zoo model's body (a continued MLM whose input embeddings
stayed frozen): written, composed with the body, refused on another body. Tiny random models."""

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM, BertModel

from dupbert.core.errors import ChecksumMismatch
from dupbert.core.zoo import OVERLAY, compose_overlay, write_overlay


@pytest.fixture()
def base(tmp_path):
    torch.manual_seed(0)
    body = BertModel(BertConfig(vocab_size=60, hidden_size=16, num_hidden_layers=2,
                                num_attention_heads=2, intermediate_size=32))
    body.save_pretrained(tmp_path / "base")
    return tmp_path / "base"


def test_an_overlay_gives_the_continued_model_back_with_the_bodys_embeddings(base, tmp_path):
    torch.manual_seed(1)
    model = BertForMaskedLM.from_pretrained(base)  # a fresh head on the body
    with torch.no_grad():
        model.bert.encoder.layer[1].output.dense.weight.add_(0.5)  # "continued"
        model.cls.predictions.bias.add_(1.0)
    path = write_overlay(model, base, "tiny", tmp_path / "overlay")
    model.config.save_pretrained(tmp_path / "overlay")
    assert path.name == OVERLAY
    folder = compose_overlay(base, tmp_path / "overlay", tmp_path / "composed")
    again = BertForMaskedLM.from_pretrained(folder).eval()
    expected = model.eval().state_dict()
    for name, value in again.state_dict().items():
        if name.startswith("bert.embeddings.") or name == "cls.predictions.decoder.weight":
            assert torch.equal(value, expected[name]), name  # the body's (the decoder is tied)
        else:
            torch.testing.assert_close(value, expected[name].half().float(), rtol=0, atol=0)
    ids = torch.tensor([[2, 5, 7, 3]])
    torch.testing.assert_close(again(ids).logits, model(ids).logits, atol=2e-2, rtol=1e-2)


def test_an_overlay_is_refused_on_another_body(base, tmp_path):
    model = BertForMaskedLM.from_pretrained(base)
    write_overlay(model, base, "tiny", tmp_path / "overlay")
    other = BertModel(BertConfig(vocab_size=60, hidden_size=16, num_hidden_layers=2,
                                 num_attention_heads=2, intermediate_size=32))
    other.save_pretrained(tmp_path / "other")
    with pytest.raises(ChecksumMismatch, match="it is another body"):
        compose_overlay(tmp_path / "other", tmp_path / "overlay", tmp_path / "composed")
    assert not (tmp_path / "composed").exists()


def test_a_model_too_large_to_commit_is_read_from_its_rebuild(base, tmp_path, monkeypatch):
    """A zoo model trained here but not committed (``committed=False``) is looked for in the
    cache, named with the commands that rebuild it when missing, and used with a warning when
    its bits differ from the pin (rebuilt on another CPU kind)."""
    import dataclasses
    import warnings

    from dupbert.core import zoo
    from dupbert.core.errors import ModelNotAvailable

    entry = dataclasses.replace(zoo.ZOO["bert-en-small"], name="tiny-rebuilt", committed=False,
                                wheel_sha256="0" * 64)
    monkeypatch.setitem(zoo.ZOO, entry.name, entry)
    cache = tmp_path / "cache"
    assert zoo.weights_dir("tiny-rebuilt", cache) == cache / "weights" / "tiny-rebuilt"
    assert zoo.weights_dir("bert-en-small", cache) == zoo.BUNDLED / "bert-en-small"
    assert entry.source == "rebuilt here (python -m dupbert.training.pretrain tiny-rebuilt --publish)"
    with pytest.raises(ModelNotAvailable, match=r"rebuilt on each machine.*"
                                                r"MODELS=tiny-rebuilt bash scripts/pretrain.sh"):
        zoo.zoo_folder("tiny-rebuilt", cache)
    # its name passes the parameter checks (a profile may only read its committed results)
    assert zoo.check_model("tiny-rebuilt", mlm_head=True, cache=cache) == "tiny-rebuilt"
    BertForMaskedLM.from_pretrained(base).save_pretrained(cache / "weights" / "tiny-rebuilt")
    with pytest.warns(UserWarning, match="not the pinned 0000"):
        assert zoo.zoo_folder("tiny-rebuilt", cache) == cache / "weights" / "tiny-rebuilt"
    pinned = zoo.sha256_of(cache / "weights" / "tiny-rebuilt" / "model.safetensors")
    assert zoo.weights_sha256("tiny-rebuilt", cache) == pinned  # the bits used, not the pin
    assert zoo.weights_sha256("bert-en-small", cache) == zoo.ZOO["bert-en-small"].wheel_sha256
    monkeypatch.setitem(zoo.ZOO, entry.name, dataclasses.replace(entry, wheel_sha256=pinned))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert zoo.zoo_folder("tiny-rebuilt", cache) == cache / "weights" / "tiny-rebuilt"


def test_a_model_rebuilt_on_each_machine_has_its_committed_config_before_the_rebuild(
        base, tmp_path, monkeypatch):
    """Profiles naming a model too large to commit are checked (configurations from its depth)
    on machines that have not rebuilt it: its config is committed beside its card."""
    import dataclasses
    import shutil

    from dupbert.core import zoo
    from dupbert.tools.duplicate import check_configurations
    from dupbert.core.errors import ModelNotAvailable

    entry = dataclasses.replace(zoo.ZOO["bert-en-small"], name="tiny-rebuilt", committed=False)
    monkeypatch.setitem(zoo.ZOO, entry.name, entry)
    monkeypatch.setattr(zoo, "BUNDLED", tmp_path / "weights")
    cache = tmp_path / "cache"
    with pytest.raises(ModelNotAvailable, match="rebuilt on each machine"):
        zoo.load_config("tiny-rebuilt", cache)  # neither weights nor a committed config
    (tmp_path / "weights" / "tiny-rebuilt").mkdir(parents=True)
    shutil.copy(base / "config.json", tmp_path / "weights" / "tiny-rebuilt" / "config.json")
    config = zoo.load_config("tiny-rebuilt", cache)
    assert config.num_hidden_layers == BertForMaskedLM.from_pretrained(base).config.num_hidden_layers
    assert check_configurations(["tiny-rebuilt"], ["baseline", "copy first 1"]) == {
        "tiny-rebuilt": ["baseline", "copy first 1"]}
    with pytest.raises(ModelNotAvailable, match="rebuilt on each machine"):
        zoo.zoo_folder("tiny-rebuilt", cache)  # the weights themselves still need the rebuild


def test_a_published_overlay_is_measured_composed_with_its_body(base, tmp_path):
    """The model card's quality is measured on what a user loads: the overlay on its body."""
    from dupbert.training.pretrain_publish import _measure_published

    torch.manual_seed(1)
    model = BertForMaskedLM.from_pretrained(base)
    with torch.no_grad():
        model.cls.predictions.bias.add_(1.0)
    write_overlay(model, base, "tiny", tmp_path / "overlay")
    model.config.save_pretrained(tmp_path / "overlay")
    seen = []

    def measure(folder):
        seen.append(BertForMaskedLM.from_pretrained(folder).state_dict())
        return {"top1": 0.5}

    assert _measure_published(measure, tmp_path / "overlay", base) == {"top1": 0.5}
    (measured,) = seen
    assert torch.equal(measured["bert.embeddings.word_embeddings.weight"],
                       model.state_dict()["bert.embeddings.word_embeddings.weight"])  # the body's
    assert torch.equal(measured["cls.predictions.bias"],
                       model.state_dict()["cls.predictions.bias"].half().float())  # as stored
