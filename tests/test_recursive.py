"""The recursive conversion of a BERT into an ALBERT (one shared block, factorised embeddings),
on tiny random BERTs (plumbing: shapes and exact identities, not results)."""

import pytest
import torch
from transformers import AlbertForMaskedLM, BertConfig, BertModel

from dupbert.tools.recursive import albert_from_bert, embedding_svd_share


@pytest.fixture(scope="module")
def bert():
    torch.manual_seed(0)
    return BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=3,
                                num_attention_heads=2, intermediate_size=32,
                                max_position_embeddings=20)).eval()


def test_the_shared_block_is_the_average_of_the_chosen_blocks(bert):
    torch.manual_seed(0)
    albert = albert_from_bert(bert, embedding_size=8, blocks=[0, 2], applications=5)
    assert isinstance(albert, AlbertForMaskedLM) and albert.config.num_hidden_layers == 5
    shared = albert.albert.encoder.albert_layer_groups[0].albert_layers[0]
    blocks = bert.encoder.layer
    torch.testing.assert_close(
        shared.ffn.weight, (blocks[0].intermediate.dense.weight + blocks[2].intermediate.dense.weight) / 2)
    torch.testing.assert_close(
        shared.attention.LayerNorm.bias,
        (blocks[0].attention.output.LayerNorm.bias + blocks[2].attention.output.LayerNorm.bias) / 2)
    assert len(albert.albert.encoder.albert_layer_groups) == 1


def test_full_rank_factorised_embeddings_give_the_words_back_exactly(bert):
    albert = albert_from_bert(bert, embedding_size=16)
    embeddings, mapping = albert.albert.embeddings, albert.albert.encoder.embedding_hidden_mapping_in
    rebuilt = mapping(embeddings.word_embeddings.weight)  # [V, E] -> [V, H]
    torch.testing.assert_close(rebuilt, bert.embeddings.word_embeddings.weight, atol=1e-5, rtol=1e-4)
    positions = mapping(embeddings.position_embeddings.weight)
    torch.testing.assert_close(positions, bert.embeddings.position_embeddings.weight, atol=1e-5, rtol=1e-4)
    assert embedding_svd_share(bert, 16) == pytest.approx(1.0)
    assert embedding_svd_share(bert, 4) < embedding_svd_share(bert, 8) < 1.0
    assert albert.predictions.decoder.weight is embeddings.word_embeddings.weight  # tied


def test_bad_conversions_say_what_is_allowed(bert):
    with pytest.raises(ValueError, match=r"blocks must be indices 0\.\.2 of the BERT's blocks, got \[0, 3\]"):
        albert_from_bert(bert, 8, blocks=[0, 3])
    with pytest.raises(ValueError, match=r"embedding_size must be in 1\.\.16 \(the hidden size\), got 17"):
        albert_from_bert(bert, 17)
    with pytest.raises(TypeError, match="needs a BERT"):
        albert_from_bert(albert_from_bert(bert, 8), 8)
