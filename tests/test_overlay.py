"""Weights committed as an overlay on a zoo model's body (a continued MLM whose input embeddings
stayed frozen): written, composed with the body, refused on another body. Tiny random models."""

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM, BertModel

from dupbert.errors import ChecksumMismatch
from dupbert.zoo import OVERLAY, compose_overlay, write_overlay


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
