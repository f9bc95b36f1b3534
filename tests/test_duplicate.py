"""Layer duplication: exact equalities, parameter counts, configs, labels and errors."""

import re

import pytest
import torch
from transformers import (AlbertConfig, AlbertForMaskedLM, AutoModelForMaskedLM,
                          AutoModelForQuestionAnswering, AutoModelForSequenceClassification,
                          BertConfig, BertForQuestionAnswering, BertForSequenceClassification,
                          T5Config, T5EncoderModel)

from dupbert import duplicate_layers, load_mlm, reconstruction_accuracy
from dupbert.tools.duplicate import (block_is_copy, block_sources, encoder_blocks, finetune_variants,
                               order_copy_after, order_repeat_span, single_block_name,
                               standard_duplications, unshare_albert)

TINY = dict(vocab_size=50, hidden_size=16, num_hidden_layers=4, num_attention_heads=2,
            intermediate_size=32, max_position_embeddings=64)


def n_parameters(model):
    return sum(p.numel() for p in model.parameters())


def outputs(model, batch):
    with torch.inference_mode():
        out = model(**batch)
    return out.logits if hasattr(out, "logits") else out.start_logits


@pytest.fixture(scope="module")
def rxnfp(zoo_cache):
    return load_mlm("rxnfp-bert", cache=zoo_cache)


@pytest.fixture(scope="module")
def batch(rxnmapper, uspto_first_64):
    _, tokenizer = rxnmapper  # rxnfp-bert and rxnmapper-albert share the SMILES vocabulary
    return tokenizer(uspto_first_64[:3], return_tensors="pt", padding=True)


def test_orders_for_both_readings_of_the_paper():
    assert order_copy_after([0, 1, 2], 12) == [0, 0, 1, 1, 2, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    assert order_repeat_span(0, 3, 12) == [0, 1, 2, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    assert order_copy_after([11], 12) == list(range(12)) + [11]
    assert order_repeat_span(5, 6, 8) == [0, 1, 2, 3, 4, 5, 5, 6, 7]


@pytest.mark.parametrize("fixture", ["rxnfp", "rxnmapper"])
def test_identity_order_gives_identical_outputs(fixture, request, batch):
    model, _ = request.getfixturevalue(fixture)
    same = duplicate_layers(model, list(range(model.config.num_hidden_layers)))
    assert torch.equal(outputs(same, batch), outputs(model, batch))
    assert same is not model


@pytest.mark.parametrize("model_class", [BertForSequenceClassification, BertForQuestionAnswering])
def test_identity_on_task_heads(model_class):
    torch.manual_seed(0)
    model = model_class(BertConfig(**TINY)).eval()
    ids = {"input_ids": torch.tensor([[1, 5, 7, 9, 2]])}
    assert torch.equal(outputs(duplicate_layers(model, [0, 1, 2, 3]), ids), outputs(model, ids))
    deeper = duplicate_layers(model, order_copy_after([0, 1, 2], 4))
    assert deeper.config.num_hidden_layers == 7 and type(deeper) is model_class


def test_bert_copies_are_independent_and_add_one_block_each(rxnfp, batch):
    model, _ = rxnfp
    one_block = n_parameters(model.bert.encoder.layer[0])
    deeper = duplicate_layers(model, order_copy_after([0, 1, 2], 12))
    assert n_parameters(deeper) == n_parameters(model) + 3 * one_block == 6_675_535 + 1_581_312
    layers = deeper.bert.encoder.layer
    assert layers[0] is not layers[1]
    assert torch.equal(layers[0].output.dense.weight, layers[1].output.dense.weight)
    assert layers[0].output.dense.weight.data_ptr() != layers[1].output.dense.weight.data_ptr()
    with torch.no_grad():
        layers[1].output.dense.weight.add_(1.0)
    assert torch.equal(model.bert.encoder.layer[0].output.dense.weight,
                       layers[0].output.dense.weight)  # neither the original nor its twin moved
    assert [layer.attention.self.layer_idx for layer in layers] == list(range(15))


def test_config_and_labels(rxnfp):
    model, _ = rxnfp
    deeper = duplicate_layers(model, order_repeat_span(0, 3, 12))
    assert deeper.config.num_hidden_layers == 15 == len(encoder_blocks(deeper)[1])
    assert block_sources(deeper) == [0, 1, 2, 0, 1, 2, *range(3, 12)]
    assert block_is_copy(deeper) == [False] * 3 + [True] * 3 + [False] * 9
    assert model.config.num_hidden_layers == 12 and block_sources(model) == list(range(12))
    # composing keeps labels relative to the original model
    twice = duplicate_layers(deeper, [0, 0] + list(range(1, 15)))
    assert block_sources(twice)[:3] == [0, 0, 1] and block_is_copy(twice)[:3] == [False, True, False]


@pytest.mark.parametrize("fixture, unshare", [("rxnfp", False), ("rxnmapper", False),
                                             ("rxnmapper", True)])
def test_duplicated_then_dropped_gives_the_original(fixture, unshare, request, batch):
    model, _ = request.getfixturevalue(fixture)
    deeper = duplicate_layers(model, order_copy_after([0, 5, 11], 12), unshare=unshare)
    originals = [i for i, copy in enumerate(block_is_copy(deeper)) if not copy]
    assert len(originals) == 12
    assert torch.equal(outputs(duplicate_layers(deeper, originals), batch), outputs(model, batch))


@pytest.mark.parametrize("fixture, unshare", [("rxnfp", False), ("rxnmapper", False),
                                             ("rxnmapper", True)])
def test_save_load_round_trip_is_exact(fixture, unshare, request, batch, tmp_path):
    model, _ = request.getfixturevalue(fixture)
    deeper = duplicate_layers(model, order_copy_after([0, 1, 2], 12), unshare=unshare)
    deeper.save_pretrained(tmp_path)
    loaded = AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    assert torch.equal(outputs(loaded, batch), outputs(deeper, batch))
    assert loaded.config.num_hidden_layers == 15
    assert block_sources(loaded) == block_sources(deeper)
    assert block_is_copy(loaded) == block_is_copy(deeper)
    assert n_parameters(loaded) == n_parameters(deeper)


def test_albert_repeats_keep_the_parameter_count(rxnmapper, batch):
    model, _ = rxnmapper
    repeated = duplicate_layers(model, list(range(12)) + [11, 11, 11])
    assert repeated.config.num_hidden_layers == 15 and repeated.config.num_hidden_groups == 1
    assert n_parameters(repeated) == n_parameters(model) == 735_567
    with torch.inference_mode():
        states = repeated.base_model(**batch, output_hidden_states=True).hidden_states
    assert len(states) == 16
    assert not torch.equal(outputs(repeated, batch), outputs(model, batch))


def test_albert_unshared_copies_have_their_own_weights(rxnmapper, batch):
    model, _ = rxnmapper
    group = n_parameters(model.albert.encoder.albert_layer_groups[0])
    unshared = unshare_albert(model)
    assert unshared.config.num_hidden_groups == 12
    assert n_parameters(unshared) == n_parameters(model) + 11 * group
    assert torch.equal(outputs(unshared, batch), outputs(model, batch))
    copied = duplicate_layers(model, order_copy_after([0, 1, 2], 12), unshare=True)
    assert copied.config.num_hidden_groups == 15
    assert n_parameters(copied) == n_parameters(model) + 14 * group
    # unshared copies start from the same weights, so they equal 15 repeats until fine-tuned
    repeats = duplicate_layers(model, list(range(12)) + [0, 0, 0])
    torch.testing.assert_close(outputs(copied, batch), outputs(repeats, batch))


def test_albert_with_several_shared_groups_needs_unshare():
    torch.manual_seed(0)
    model = AlbertForMaskedLM(AlbertConfig(**TINY, embedding_size=8, num_hidden_groups=2)).eval()
    with pytest.raises(ValueError, match="2 shared layer groups .* unshare=True"):
        duplicate_layers(model, [0, 1, 2, 3, 3])
    deeper = duplicate_layers(model, [0, 1, 2, 3, 3], unshare=True)
    assert deeper.config.num_hidden_groups == 5
    ids = {"input_ids": torch.tensor([[1, 5, 7, 9, 2]])}
    same = duplicate_layers(model, [0, 1, 2, 3], unshare=True)
    assert torch.equal(outputs(same, ids), outputs(model, ids))


@pytest.mark.parametrize("order, message", [
    ([], "order is empty"),
    ([0, 12], r"block 12, but the model has blocks 0..11"),
    ([-1, 0], r"block -1, but the model has blocks 0..11"),
    ([0, 1.5], "1.5, which is not an integer"),
    ("0,1", "must be a list"),
])
def test_bad_orders_name_the_problem(rxnfp, order, message):
    model, _ = rxnfp
    with pytest.raises(ValueError, match=message):
        duplicate_layers(model, order)


def test_model_without_known_block_list_lists_what_was_found():
    model = T5EncoderModel(T5Config(vocab_size=20, d_model=8, d_kv=4, d_ff=16, num_layers=2,
                                    num_heads=2))
    with pytest.raises(ValueError, match=r"encoder.block: 2"):
        duplicate_layers(model, [0, 0, 1])


def test_standard_duplications():
    torch.manual_seed(0)
    bert = AutoModelForMaskedLM.from_config(BertConfig(**TINY))
    variants = standard_duplications(bert)
    # named as RQ3 names the same orders, one name per order (block 0 is copy first 1)
    assert list(variants) == ["baseline", "copy first 1", "copy first 2", "copy first 3",
                              "copy block 1", "copy middle", "copy last"]
    assert variants["copy first 2"] == [0, 0, 1, 1, 2, 3]
    albert = AlbertForMaskedLM(AlbertConfig(**TINY, embedding_size=8))
    assert list(standard_duplications(albert)) == ["baseline", "repeat shared +1",
                                                   "repeat shared +2", "repeat shared +3",
                                                   "repeat shared +5", "repeat shared +8"]


def _hits_by_hand(model, tokenizer, texts, order):
    """Top-1 hits per hidden state, applying the *original* model's blocks in ``order`` by hand,
    one unpadded sequence at a time: independent of duplicate_layers and of the probe."""
    blocks = encoder_blocks(model)[1]
    albert = hasattr(model.base_model.encoder, "albert_layer_groups")
    head = model.predictions if albert else model.cls
    hits = torch.zeros(len(order) + 1, dtype=torch.long)
    with torch.inference_mode():
        for text in texts:
            ids = tokenizer(text, return_tensors="pt")["input_ids"]
            hidden = model.base_model.embeddings(input_ids=ids)
            if albert:
                hidden = model.base_model.encoder.embedding_hidden_mapping_in(hidden)
            states = [hidden]
            for index in order:
                hidden = blocks[0 if albert else index](hidden)
                states.append(hidden)
            targets = ids[0, 1:-1]
            for layer, state in enumerate(states):
                hits[layer] += (head(state[0, 1:-1]).argmax(-1) == targets).sum()
    return hits.tolist()


@pytest.mark.parametrize("fixture, order", [
    ("rxnfp", order_copy_after([0, 1, 2], 12)),
    ("rxnmapper", list(range(12)) + [11, 11, 11]),
])
def test_probe_on_duplicated_model_matches_a_separate_computation(fixture, order, request,
                                                                  uspto_first_64):
    model, tokenizer = request.getfixturevalue(fixture)
    texts = uspto_first_64[:6]
    frame = reconstruction_accuracy(duplicate_layers(model, order), tokenizer, texts,
                                    batch_size=4, progress=False)
    assert len(frame) == 16
    probe_hits = (frame["top1"] * frame["n_tokens"]).round().astype(int).tolist()
    assert probe_hits == _hits_by_hand(model, tokenizer, texts, order)
    assert frame["source_block"].tolist() == [-1, *order]


def test_duplicated_task_models_load_by_auto_class(tmp_path):
    torch.manual_seed(0)
    for auto, model_class in [(AutoModelForSequenceClassification, BertForSequenceClassification),
                              (AutoModelForQuestionAnswering, BertForQuestionAnswering)]:
        deeper = duplicate_layers(model_class(BertConfig(**TINY)).eval(), [0, 0, 1, 2, 3])
        deeper.save_pretrained(tmp_path / model_class.__name__)
        loaded = auto.from_pretrained(tmp_path / model_class.__name__).eval()
        ids = {"input_ids": torch.tensor([[1, 5, 7, 9, 2]])}
        assert torch.equal(outputs(loaded, ids), outputs(deeper, ids))


def test_depth_control_inserts_a_fresh_block_where_the_first_copy_goes(rxnfp):
    from dupbert.tools.duplicate import insert_fresh_blocks

    model, _ = rxnfp
    control = insert_fresh_blocks(model, [1], seed=0)
    copied = duplicate_layers(model, order_copy_after([0], 12))
    assert control.config.num_hidden_layers == 13
    assert n_parameters(control) == n_parameters(copied)
    assert block_sources(control)[:3] == [0, None, 1]
    fresh = control.bert.encoder.layer[1].intermediate.dense.weight
    pretrained = model.bert.encoder.layer[0].intermediate.dense.weight
    assert not torch.equal(fresh, pretrained)
    assert abs(fresh.std().item() - model.config.initializer_range) < 0.002
    again = insert_fresh_blocks(model, [1], seed=0).bert.encoder.layer[1].intermediate.dense.weight
    assert torch.equal(fresh, again)  # seeded
    assert torch.equal(control.bert.encoder.layer[2].output.dense.weight,
                       model.bert.encoder.layer[1].output.dense.weight)
    with pytest.raises(ValueError, match="positions 1..12, got 13"):
        insert_fresh_blocks(model, [13])


def test_finetune_variants_cover_the_study_configurations(rxnmapper):
    from dupbert.tools.duplicate import finetune_variants, make_variant

    torch.manual_seed(0)
    bert = BertForSequenceClassification(BertConfig(**TINY)).eval()
    assert list(finetune_variants(bert)) == [
        "baseline", "copy first 1", "copy first 2", "copy first 3", "repeat first 3",
        "copy middle", "copy last", "depth control"]
    assert block_sources(make_variant(bert, "copy middle")) == [0, 1, 2, 2, 3]
    assert block_sources(make_variant(bert, "copy last")) == [0, 1, 2, 3, 3]
    assert block_sources(make_variant(bert, "repeat first 3")) == [0, 1, 2, 0, 1, 2, 3]
    albert, _ = rxnmapper
    variants = finetune_variants(albert)
    assert "repeat shared +3" in variants and "unshared baseline" in variants
    assert n_parameters(make_variant(albert, "repeat shared +3")) == n_parameters(albert)
    assert make_variant(albert, "copy first 1").config.num_hidden_groups == 13
    with pytest.raises(ValueError, match="unknown duplication 'copy everything'"):
        make_variant(bert, "copy everything")


def test_reinitialize_draws_every_weight_from_the_generator_and_resets_layer_norms():
    """``reinitialize_`` (the depth control's fresh blocks): Linear and Embedding weights are the
    generator's next N(0, std²) draws in module order, biases 0, LayerNorm weight 1 and bias 0;
    other modules are left as they were."""
    from dupbert.tools.duplicate import reinitialize_

    module = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Embedding(4, 3),
                                 torch.nn.LayerNorm(3), torch.nn.Linear(2, 2, bias=False),
                                 torch.nn.BatchNorm1d(2))
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.fill_(5.0)
    reinitialize_(module, std=0.5, generator=torch.Generator().manual_seed(7))
    expected = torch.Generator().manual_seed(7)
    linear, embedding, norm, no_bias, batch_norm = module
    assert torch.equal(linear.weight, torch.randn((2, 3), generator=expected) * 0.5)
    assert torch.equal(embedding.weight, torch.randn((4, 3), generator=expected) * 0.5)
    assert torch.equal(no_bias.weight, torch.randn((2, 2), generator=expected) * 0.5)
    assert torch.equal(linear.bias, torch.zeros(2))
    assert torch.equal(norm.weight, torch.ones(3)) and torch.equal(norm.bias, torch.zeros(3))
    assert torch.equal(batch_norm.weight, torch.full((2,), 5.0))
    assert not any(p.requires_grad is False for p in module.parameters())  # still trainable


def test_depth_control_blocks_are_seeded_fresh_weights_and_unmarked_sources():
    """``insert_fresh_blocks`` on a tiny BERT: the fresh block's weights are ``reinitialize_``'s
    with the model's ``initializer_range`` and a generator seeded by ``seed``; the other blocks
    are the originals'."""
    from dupbert.tools.duplicate import insert_fresh_blocks, reinitialize_

    torch.manual_seed(0)
    bert = BertForSequenceClassification(BertConfig(**TINY)).eval()
    fresh = insert_fresh_blocks(bert, [2, 4], seed=3)
    assert block_sources(fresh) == [0, 1, None, 2, None, 3]
    assert block_is_copy(fresh) == [False, False, True, False, True, False]
    expected = encoder_blocks(duplicate_layers(bert, [0, 1, 1, 2, 2, 3], unshare=True))[1]
    generator = torch.Generator().manual_seed(3)
    reinitialize_(expected[2], bert.config.initializer_range, generator)
    reinitialize_(expected[4], bert.config.initializer_range, generator)
    blocks = encoder_blocks(fresh)[1]
    for got, want in zip(blocks, expected, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(got.state_dict().values(),
                                                     want.state_dict().values(), strict=True))
    original = encoder_blocks(bert)[1]
    assert torch.equal(blocks[3].output.dense.weight, original[2].output.dense.weight)
    assert not torch.equal(blocks[4].output.dense.weight, original[2].output.dense.weight)


def _tiny_shared_albert():
    torch.manual_seed(0)
    return AlbertForMaskedLM(AlbertConfig(
        vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=4,
        num_attention_heads=2, intermediate_size=32, max_position_embeddings=64,
        num_hidden_groups=1)).eval()


def test_every_configuration_names_its_reference_and_role():
    """The pre-registered comparisons (RQ3): the paper's configuration is the primary one; a
    shared ALBERT's variants that unshare its layer are compared with `unshared baseline`."""
    from dupbert.tools.duplicate import finetune_variants

    torch.manual_seed(0)
    bert = finetune_variants(BertForSequenceClassification(BertConfig(**TINY)).eval())
    assert {name: (spec["reference"], spec["role"]) for name, spec in bert.items()} == {
        "baseline": (None, "reference"),
        "copy first 1": ("baseline", "secondary"), "copy first 2": ("baseline", "secondary"),
        "copy first 3": ("baseline", "primary"), "repeat first 3": ("baseline", "secondary"),
        "copy middle": ("baseline", "secondary"), "copy last": ("baseline", "secondary"),
        "depth control": ("baseline", "secondary")}
    albert = finetune_variants(_tiny_shared_albert())
    unshared = ("unshared baseline", "secondary")
    assert {name: (spec["reference"], spec["role"]) for name, spec in albert.items()} == {
        "baseline": (None, "reference"), "copy first 1": unshared, "copy first 2": unshared,
        "copy first 3": unshared, "repeat first 3": unshared, "copy middle": unshared,
        "copy last": unshared, "depth control": unshared,
        "unshared baseline": ("baseline", "secondary"), "repeat shared +3": ("baseline", "primary")}
    assert albert["repeat shared +3"]["shared"] is True


def test_make_variant_keeps_a_shared_baseline_shared_and_seeds_the_depth_control_with_0():
    from dupbert.tools.duplicate import insert_fresh_blocks, make_variant

    albert = _tiny_shared_albert()
    ids = {"input_ids": torch.tensor([[1, 5, 7, 9, 2]])}
    baseline = make_variant(albert, "baseline")
    assert baseline is not albert and baseline.config.num_hidden_groups == 1
    assert n_parameters(baseline) == n_parameters(albert)
    assert torch.equal(outputs(baseline, ids), outputs(albert, ids))
    unshared = make_variant(albert, "unshared baseline")
    assert unshared.config.num_hidden_groups == 4 and n_parameters(unshared) > n_parameters(albert)
    torch.manual_seed(0)
    bert = BertForSequenceClassification(BertConfig(**TINY)).eval()
    control = make_variant(bert, "depth control")
    expected = insert_fresh_blocks(bert, [1], seed=0)
    assert all(torch.equal(a, b) for a, b in zip(control.state_dict().values(),
                                                  expected.state_dict().values()))
    other = make_variant(bert, "depth control", seed=1)
    assert not torch.equal(other.bert.encoder.layer[1].output.dense.weight,
                           control.bert.encoder.layer[1].output.dense.weight)


@pytest.mark.parametrize("positions", [[], [1, 1]])
def test_fresh_blocks_need_distinct_positions(positions):
    from dupbert.tools.duplicate import insert_fresh_blocks

    torch.manual_seed(0)
    bert = BertForSequenceClassification(BertConfig(**TINY)).eval()
    with pytest.raises(ValueError, match=re.escape(
            f"positions must be distinct and non-empty, got {positions}")):
        insert_fresh_blocks(bert, positions)


def _tiny_modernbert():
    """A tiny random 4-block ModernBERT, full attention in blocks 0 and 3 (plumbing only)."""
    from transformers import ModernBertConfig, ModernBertForMaskedLM

    torch.manual_seed(0)
    return ModernBertForMaskedLM(ModernBertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=4, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=64, global_attn_every_n_layers=3,
        pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2)).eval()


def test_per_block_attention_types_follow_the_new_order():
    """ModernBERT alternates full and sliding-window attention per block (config.layer_types):
    a copied block keeps its own kind."""
    model = _tiny_modernbert()
    assert model.config.layer_types == ["full_attention", "sliding_attention",
                                        "sliding_attention", "full_attention"]
    deeper = duplicate_layers(model, [0, 0, 1, 2, 3])
    assert deeper.config.layer_types == ["full_attention", "full_attention", "sliding_attention",
                                         "sliding_attention", "full_attention"]
    assert model.config.layer_types[1] == "sliding_attention"  # the original is left alone


def test_a_model_without_a_known_block_list_is_refused_with_the_lists_it_has():
    """``encoder_blocks`` names the model, the paths it looked for and every ``ModuleList`` the
    model has (``none`` when it has none)."""
    from dupbert.tools.duplicate import _LAYER_LISTS

    class NoBlocks(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.base_model = torch.nn.Sequential(torch.nn.Linear(2, 2))

    model = NoBlocks()
    looked = f"looked for {list(_LAYER_LISTS)} under Sequential; ModuleLists found (path: length)"
    with pytest.raises(ValueError) as refused:
        encoder_blocks(model)
    assert str(refused.value) == f"cannot find the encoder's block list in NoBlocks: {looked}: none"
    model.base_model.stages = torch.nn.ModuleList([torch.nn.Linear(2, 2)] * 2)
    with pytest.raises(ValueError) as refused:
        encoder_blocks(model)
    assert str(refused.value).endswith(f"{looked}: stages: 2")


def test_errors_of_the_order_helpers_name_the_bad_value_in_full():
    """``order_copy_after`` names its argument ``blocks``; ``order_repeat_span`` refuses an
    empty span and one past the last block, and accepts a span that ends at the last block."""
    with pytest.raises(ValueError) as refused:
        order_copy_after([12], 12)
    assert str(refused.value) == ("blocks holds block 12, but the model has blocks 0..11 "
                                  "(12 blocks; block i produces hidden state i + 1)")
    for start, stop in [(3, 3), (2, 13), (-1, 2)]:
        with pytest.raises(ValueError) as refused:
            order_repeat_span(start, stop, 12)
        assert str(refused.value) == (f"need 0 <= start < stop <= num_layers, got start={start}, "
                                      f"stop={stop}, num_layers=12")
    assert order_repeat_span(10, 12, 12) == list(range(12)) + [10, 11]
    assert order_repeat_span(0, 1, 1) == [0, 0]


def test_albert_errors_in_full():
    """Several shared groups without ``unshare``, and ``unshare_albert`` of a BERT."""
    torch.manual_seed(0)
    model = AlbertForMaskedLM(AlbertConfig(**TINY, embedding_size=8, num_hidden_groups=2)).eval()
    with pytest.raises(ValueError) as refused:
        duplicate_layers(model, [0, 1, 2, 3, 3])
    assert str(refused.value) == ("this ALBERT has 2 shared layer groups for 4 blocks; repeats "
                                  "are defined for one shared group only: pass unshare=True")
    with pytest.raises(ValueError) as refused:
        unshare_albert(BertForSequenceClassification(BertConfig(**TINY)))
    assert str(refused.value) == ("BertForSequenceClassification is not an ALBERT model: "
                                  "nothing to unshare")


def test_a_block_list_at_the_root_of_the_base_model_is_replaced():
    """ModernBERT keeps its blocks at ``layers`` (no dot in the path): the duplicated model
    really applies five blocks, the copy its own weights."""
    model = _tiny_modernbert()
    deeper = duplicate_layers(model, [0, 0, 1, 2, 3])
    path, blocks = encoder_blocks(deeper)
    assert path == "layers" and len(blocks) == 5 and len(deeper.model.layers) == 5
    assert blocks[1] is not blocks[0]
    assert torch.equal(blocks[1].mlp.Wo.weight, encoder_blocks(model)[1][0].mlp.Wo.weight)
    ids = {"input_ids": torch.tensor([[1, 5, 7, 9, 2]])}
    assert not torch.equal(outputs(deeper, ids), outputs(model, ids))


def test_standard_duplications_copy_each_block_once():
    torch.manual_seed(0)
    variants = standard_duplications(AutoModelForMaskedLM.from_config(BertConfig(**TINY)))
    assert variants["baseline"] == [0, 1, 2, 3]
    assert variants["copy first 3"] == [0, 0, 1, 1, 2, 2, 3]
    names = [single_block_name(b, 4) for b in range(4)]
    assert names == ["copy first 1", "copy block 1", "copy middle", "copy last"]
    assert [variants[name] for name in names] == [
        [0, 0, 1, 2, 3], [0, 1, 1, 2, 3], [0, 1, 2, 2, 3], [0, 1, 2, 3, 3]]
    # one name per order, the name RQ3 gives it
    specs = finetune_variants(AutoModelForMaskedLM.from_config(BertConfig(**TINY)))
    assert all(variants[name] == specs[name]["order"] for name in variants if name in specs)
    assert len({tuple(order) for order in variants.values()}) == len(variants)
    albert = standard_duplications(_tiny_shared_albert())
    assert albert["repeat shared +1"] == [0, 1, 2, 3, 3]
    assert albert["repeat shared +8"] == [0, 1, 2, 3] + [3] * 8


def test_every_configuration_spec_in_full():
    """``finetune_variants`` of a 4-block BERT and a 4-block shared ALBERT, every spec pinned:
    orders, the depth control's position, the shared repeats and references and roles."""
    from dupbert.tools.duplicate import finetune_variants

    torch.manual_seed(0)
    bert = finetune_variants(BertForSequenceClassification(BertConfig(**TINY)).eval())
    base = ("baseline", "secondary")
    expected = {
        "baseline": ({"order": [0, 1, 2, 3]}, (None, "reference")),
        "copy first 1": ({"order": [0, 0, 1, 2, 3]}, base),
        "copy first 2": ({"order": [0, 0, 1, 1, 2, 3]}, base),
        "copy first 3": ({"order": [0, 0, 1, 1, 2, 2, 3]}, ("baseline", "primary")),
        "repeat first 3": ({"order": [0, 1, 2, 0, 1, 2, 3]}, base),
        "copy middle": ({"order": [0, 1, 2, 2, 3]}, base),
        "copy last": ({"order": [0, 1, 2, 3, 3]}, base),
        "depth control": ({"fresh_at": [1]}, base),
    }
    assert bert == {name: {**spec, "reference": ref, "role": role}
                    for name, (spec, (ref, role)) in expected.items()}
    albert = finetune_variants(_tiny_shared_albert())
    assert albert["repeat shared +3"] == {"order": [0, 1, 2, 3, 3, 3, 3], "shared": True,
                                          "reference": "baseline", "role": "primary"}
    assert albert["unshared baseline"] == {"order": [0, 1, 2, 3], "reference": "baseline",
                                           "role": "secondary"}
    assert albert["copy last"] == {"order": [0, 1, 2, 3, 3], "reference": "unshared baseline",
                                   "role": "secondary"}
    assert albert["copy first 1"]["reference"] == "unshared baseline"


@pytest.mark.parametrize("num_layers, names", [
    (2, ["baseline", "copy first 1", "copy first 2", "copy middle", "copy last", "depth control"]),
    (3, ["baseline", "copy first 1", "copy first 2", "copy first 3", "repeat first 3",
         "copy middle", "copy last", "depth control"]),
])
def test_configurations_that_exist_at_a_shallow_depth(num_layers, names):
    """``copy first 3`` and ``repeat first 3`` need three blocks, and exist with exactly
    three."""
    from dupbert.tools.duplicate import finetune_variants

    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(**{**TINY, "num_hidden_layers": num_layers}))
    variants = finetune_variants(model)
    assert list(variants) == names
    if num_layers == 3:
        assert variants["copy first 3"]["order"] == [0, 0, 1, 1, 2, 2]
        assert variants["repeat first 3"]["order"] == [0, 1, 2, 0, 1, 2]


def test_the_shared_albert_primary_applies_the_shared_layer_three_more_times():
    """``repeat shared +3``: 4 + 3 applications of the one shared layer, recorded as repeats of
    the last block, no new parameters, and the original model left as it was."""
    from dupbert.tools.duplicate import make_variant

    albert = _tiny_shared_albert()
    repeated = make_variant(albert, "repeat shared +3")
    assert repeated.config.num_hidden_layers == 7 and repeated.config.num_hidden_groups == 1
    assert block_sources(repeated) == [0, 1, 2, 3, 3, 3, 3]
    assert block_is_copy(repeated) == [False] * 4 + [True] * 3
    assert n_parameters(repeated) == n_parameters(albert)
    assert albert.config.num_hidden_layers == 4


def test_the_baseline_variant_owns_its_weights():
    """Fine-tuning the ``baseline`` variant must not change the loaded model: a deep copy."""
    from dupbert.tools.duplicate import make_variant

    torch.manual_seed(0)
    bert = BertForSequenceClassification(BertConfig(**TINY)).eval()
    before = {name: p.clone() for name, p in bert.named_parameters()}
    baseline = make_variant(bert, "baseline")
    assert not any(a.data_ptr() == b.data_ptr()
                   for a, b in zip(baseline.parameters(), bert.parameters()))
    with torch.no_grad():
        for parameter in baseline.parameters():
            parameter.add_(1.0)
    assert all(torch.equal(p, before[name]) for name, p in bert.named_parameters())


def test_depth_control_at_position_1_and_at_the_end():
    """A fresh block after block 0 marks no other block as a copy; one at position L (after the
    last block) is allowed; one past it is refused with the range; the default seed is 0."""
    from dupbert.tools.duplicate import insert_fresh_blocks

    torch.manual_seed(0)
    bert = BertForSequenceClassification(BertConfig(**TINY)).eval()
    first = insert_fresh_blocks(bert, [1])
    assert block_sources(first) == [0, None, 1, 2, 3]
    assert block_is_copy(first) == [False, True, False, False, False]
    seeded = insert_fresh_blocks(bert, [1], seed=0)
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(),
                                                  seeded.state_dict().values(), strict=True))
    last = insert_fresh_blocks(bert, [4])
    assert block_sources(last) == [0, 1, 2, 3, None]
    assert block_is_copy(last) == [False, False, False, False, True]
    with pytest.raises(ValueError) as refused:
        insert_fresh_blocks(bert, [5])
    assert str(refused.value) == "a fresh block can go at positions 1..4, got 5"


def test_depth_control_of_a_shared_albert_unshares_it_first():
    """The shared ALBERT's depth control: five blocks of their own; the four pretrained ones
    equal the shared layer, the fresh one does not; the original stays shared."""
    from dupbert.tools.duplicate import insert_fresh_blocks

    albert = _tiny_shared_albert()
    control = insert_fresh_blocks(albert, [1])
    assert control.config.num_hidden_groups == 5 and control.config.num_hidden_layers == 5
    assert block_sources(control) == [0, None, 1, 2, 3]
    shared = albert.albert.encoder.albert_layer_groups[0].state_dict()
    groups = control.albert.encoder.albert_layer_groups
    for position in (0, 2, 3, 4):
        assert all(torch.equal(a, b) for a, b in zip(groups[position].state_dict().values(),
                                                      shared.values(), strict=True))
    assert not torch.equal(groups[1].albert_layers[0].ffn.weight,
                           albert.albert.encoder.albert_layer_groups[0].albert_layers[0].ffn.weight)
    assert albert.config.num_hidden_groups == 1 and len(albert.albert.encoder.albert_layer_groups) == 1


def test_a_block_applied_three_times_has_three_independent_weights():
    """Every occurrence of a block after the first is its own copy, however many there are."""
    torch.manual_seed(0)
    bert = BertForSequenceClassification(BertConfig(**TINY)).eval()
    deeper = duplicate_layers(bert, [0, 0, 0, 1, 2, 3])
    blocks = encoder_blocks(deeper)[1]
    pointers = [block.output.dense.weight.data_ptr() for block in blocks]
    assert len(set(pointers)) == 6
    block_size = n_parameters(encoder_blocks(bert)[1][0])
    assert n_parameters(deeper) == n_parameters(bert) + 2 * block_size
    assert block_is_copy(deeper) == [False, True, True, False, False, False]


def test_the_block_list_message_names_every_list_and_the_root():
    """A base model that is itself a ``ModuleList`` is named ``<root>``; several lists are
    separated by commas."""
    class RootList(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.base_model = torch.nn.ModuleList([torch.nn.Linear(2, 2),
                                                   torch.nn.ModuleList([torch.nn.Linear(2, 2)])])

    with pytest.raises(ValueError) as refused:
        encoder_blocks(RootList())
    assert str(refused.value).endswith("ModuleLists found (path: length): <root>: 2, 1: 1")


@pytest.mark.parametrize("positions", ["1", [1.5], [True], 1])
def test_fresh_block_positions_must_be_a_list_of_integers(positions):
    from dupbert.tools.duplicate import insert_fresh_blocks

    torch.manual_seed(0)
    bert = BertForSequenceClassification(BertConfig(**TINY)).eval()
    with pytest.raises(ValueError) as refused:
        insert_fresh_blocks(bert, positions)
    assert str(refused.value) == ("positions must be a list of integer positions in the new "
                                  f"encoder, got {positions!r}")


def test_a_span_of_fractional_blocks_is_refused():
    from dupbert.tools.duplicate import order_repeat_span

    with pytest.raises(ValueError) as refused:
        order_repeat_span(0, 2.5, 12)
    assert str(refused.value) == "need 0 <= start < stop <= num_layers, got start=0, stop=2.5, num_layers=12"


def test_numpy_integers_are_block_indices_and_positions():
    import numpy as np

    from dupbert.tools.duplicate import insert_fresh_blocks, order_repeat_span

    assert order_repeat_span(np.int64(0), np.int64(2), 4) == [0, 1, 0, 1, 2, 3]
    torch.manual_seed(0)
    bert = BertForSequenceClassification(BertConfig(**TINY)).eval()
    assert insert_fresh_blocks(bert, [np.int64(1)]).config.num_hidden_layers == TINY["num_hidden_layers"] + 1
