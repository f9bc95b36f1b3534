"""A pretrained BERT turned into an ALBERT: one shared block, factorised embeddings.

The recursive conversion of Bae et al. (ICLR 2025, "Relaxed Recursive Transformers", section 3):
the shared block is initialised from the average of the original blocks' weights, then the model
is uptrained. ALBERT's factorised embeddings (Lan et al. 2020, section 3.1) come from a truncated
SVD of BERT's word embeddings ``W ~= (U_E S_E) V_E^T``: ``U_E S_E`` is the ``[V, E]`` embedding and
``V_E`` the ``E -> H`` projection; position and token-type embeddings are projected to ``E`` by
``V_E`` as well. Everything else (embedding LayerNorm, MLM head) starts fresh.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import transformers

# ALBERT's shared layer <- each BERT block (``encoder.layer.i.``): parameter name prefixes
_LAYER_NAMES = {
    "attention.query.": "attention.self.query.",
    "attention.key.": "attention.self.key.",
    "attention.value.": "attention.self.value.",
    "attention.dense.": "attention.output.dense.",
    "attention.LayerNorm.": "attention.output.LayerNorm.",
    "ffn.": "intermediate.dense.",
    "ffn_output.": "output.dense.",
    "full_layer_layer_norm.": "output.LayerNorm.",
}


def _body(model: transformers.PreTrainedModel) -> transformers.BertModel:
    body = model.base_model if hasattr(model, "base_model") else model
    if not isinstance(body, transformers.BertModel):
        raise TypeError(f"albert_from_bert needs a BERT (BertModel or BertForMaskedLM), got "
                        f"{type(model).__name__}")
    return body


@torch.no_grad()
def albert_from_bert(bert: transformers.PreTrainedModel, embedding_size: int = 128,
                     blocks: Sequence[int] | None = None,
                     applications: int | None = None) -> transformers.AlbertForMaskedLM:
    """An ``AlbertForMaskedLM`` with one shared block, the average of ``blocks`` of ``bert``
    (default: all), applied ``applications`` times (default: BERT's depth), and factorised
    embeddings of size ``embedding_size`` from a truncated SVD of BERT's word embeddings.

    The MLM head and the embedding LayerNorm are freshly initialised (seed torch's RNG first).

    Raises:
        TypeError: ``bert`` is not a BERT.
        ValueError: ``embedding_size`` not in ``[1, H]``, or a block index out of range.
    """
    body = _body(bert)
    config = body.config
    n_blocks = config.num_hidden_layers
    blocks = list(range(n_blocks)) if blocks is None else list(blocks)
    bad = [b for b in blocks if not (isinstance(b, int) and 0 <= b < n_blocks)]
    if not blocks or bad:
        raise ValueError(f"blocks must be indices 0..{n_blocks - 1} of the BERT's blocks, got "
                         f"{list(blocks)}")
    if not 1 <= embedding_size <= config.hidden_size:
        raise ValueError(f"embedding_size must be in 1..{config.hidden_size} (the hidden size), "
                         f"got {embedding_size}")
    albert = transformers.AlbertForMaskedLM(transformers.AlbertConfig(
        vocab_size=config.vocab_size, embedding_size=embedding_size,
        hidden_size=config.hidden_size, num_hidden_layers=applications or n_blocks,
        num_attention_heads=config.num_attention_heads,
        intermediate_size=config.intermediate_size, hidden_act=config.hidden_act,
        hidden_dropout_prob=config.hidden_dropout_prob,
        attention_probs_dropout_prob=config.attention_probs_dropout_prob,
        max_position_embeddings=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size, layer_norm_eps=config.layer_norm_eps,
        pad_token_id=config.pad_token_id, num_hidden_groups=1, inner_group_num=1,
        tie_word_embeddings=True))
    _factorise_embeddings(body, albert.albert, embedding_size)
    layer = albert.albert.encoder.albert_layer_groups[0].albert_layers[0]
    originals = [dict(block.named_parameters()) for block in body.encoder.layer]
    for name, parameter in layer.named_parameters():
        (prefix,) = [p for p in _LAYER_NAMES if name.startswith(p)]
        source = _LAYER_NAMES[prefix] + name[len(prefix):]
        parameter.copy_(torch.stack([originals[b][source] for b in blocks]).mean(dim=0))
    albert.tie_weights()
    return albert


def _factorise_embeddings(body: transformers.BertModel, albert: transformers.AlbertModel,
                          embedding_size: int) -> None:
    """Word ``[V, H] ~= [V, E] @ [E, H]`` by truncated SVD; positions and token types projected."""
    words = body.embeddings.word_embeddings.weight.float()  # [V, H]
    u, s, vh = torch.linalg.svd(words, full_matrices=False)  # [V, H], [H], [H, H]
    basis = vh[:embedding_size].T  # [H, E]: orthonormal columns
    embeddings = albert.embeddings
    embeddings.word_embeddings.weight.copy_(u[:, :embedding_size] * s[:embedding_size])
    embeddings.position_embeddings.weight.copy_(body.embeddings.position_embeddings.weight @ basis)
    embeddings.token_type_embeddings.weight.copy_(
        body.embeddings.token_type_embeddings.weight @ basis)
    mapping = albert.encoder.embedding_hidden_mapping_in  # Linear(E, H): weight [H, E]
    mapping.weight.copy_(basis)
    mapping.bias.zero_()


def embedding_svd_share(bert: transformers.PreTrainedModel, embedding_size: int) -> float:
    """The share of the word embeddings' squared Frobenius norm that a rank-``embedding_size``
    factorisation keeps (``sum(s[:E]^2) / sum(s^2)``)."""
    s = torch.linalg.svdvals(_body(bert).embeddings.word_embeddings.weight.detach().float())
    return float((s[:embedding_size] ** 2).sum() / (s ** 2).sum())
