"""RQ3: deepen a pretrained encoder by duplicating some of its blocks, with no training.

Kao et al. (2020), section 5: insert deep copies of pretrained layers (no weight sharing with
their originals), then fine-tune with the baseline's hyper-parameters.

Indices are **0-based encoder blocks**, not hidden states: block ``i`` produces hidden state
``i + 1`` (hidden state 0 is the embedding output). A duplication is a layer *order*: the
source blocks the new encoder applies, in sequence. The paper's "duplicate the first three
layers" has two readings: :func:`order_copy_after` (each copy after its original) and
:func:`order_repeat_span` (the three repeated as a span).

ALBERT applies one shared layer group ``num_hidden_layers`` times: a shared ALBERT is deepened
by *repeats* (no new parameters) unless ``unshare=True`` first gives every block its own group.
"""

from __future__ import annotations

import copy
import functools
import numbers
from collections.abc import Sequence

import torch
import transformers

from ..core.checks import check_list
from ..core.errors import ConfigurationNotAvailable
from ..core.zoo import load_config

# Attribute paths, from the base model, of encoder block lists we know: BERT, RoBERTa, ELECTRA,
# ConvBERT, DeBERTa, MPNet, MobileBERT ``encoder.layer``; ALBERT's groups; DistilBERT
# ``transformer.layer``; ``encoder.layers``; ModernBERT ``layers``.
_LAYER_LISTS = ("encoder.layer", "encoder.albert_layer_groups", "transformer.layer",
                "encoder.layers", "layers")
# Per-block config lists that must follow the new order (ModernBERT's sliding/full attention).
_PER_BLOCK_CONFIG = ("layer_types",)


def _get_submodule_or_none(module: torch.nn.Module, path: str):
    """The submodule at dotted ``path``, or ``None`` when any part is missing."""
    for part in path.split("."):
        module = getattr(module, part, None)
        if module is None:
            return None
    return module


def _is_albert(model: transformers.PreTrainedModel) -> bool:
    """True when the model's encoder is ALBERT's (shared layer groups)."""
    return _get_submodule_or_none(model.base_model, "encoder.albert_layer_groups") is not None


def encoder_blocks(model: transformers.PreTrainedModel) -> tuple[str, torch.nn.ModuleList]:
    """The encoder's block list (ALBERT: its layer *groups*) and its attribute path from
    ``model.base_model``.

    Raises:
        ValueError: no known block list; the message lists the model's ``ModuleList``s.
    """
    for path in _LAYER_LISTS:
        found = _get_submodule_or_none(model.base_model, path)
        if isinstance(found, torch.nn.ModuleList):
            return path, found
    lists = ", ".join(f"{name or '<root>'}: {len(m)}" for name, m in model.base_model.named_modules()
                      if isinstance(m, torch.nn.ModuleList))
    raise ValueError(
        f"cannot find the encoder's block list in {type(model).__name__}: looked for "
        f"{list(_LAYER_LISTS)} under {type(model.base_model).__name__}; ModuleLists found "
        f"(path: length): {lists or 'none'}"
    )


def block_sources(model: transformers.PreTrainedModel) -> list[int]:
    """For each current block, the index of the *original* model's block it came from (``None``
    for a fresh block)."""
    sources = getattr(model.config, "dupbert_source_blocks", None)
    return list(sources) if sources is not None else list(range(model.config.num_hidden_layers))


def block_is_copy(model: transformers.PreTrainedModel) -> list[bool]:
    """For each current block, whether it is a copy (or ALBERT repeat) of an earlier occurrence."""
    flags = getattr(model.config, "dupbert_is_copy", None)
    return list(flags) if flags is not None else [False] * model.config.num_hidden_layers


def order_copy_after(blocks: Sequence[int], num_layers: int) -> list[int]:
    """Layer order with a copy of each of ``blocks`` right after its original.

    ``order_copy_after([0, 1, 2], 12)`` = ``[0, 0, 1, 1, 2, 2, 3, 4, ..., 11]`` (15 blocks).

    Raises:
        ValueError: a block outside ``0..num_layers-1``.
    """
    _check_indices(blocks, num_layers, "blocks")
    wanted = set(blocks)
    order = []
    for block in range(num_layers):
        order += [block, block] if block in wanted else [block]
    return order


def order_repeat_span(start: int, stop: int, num_layers: int) -> list[int]:
    """Layer order that applies blocks ``start..stop-1`` twice in a row, as a span.

    ``order_repeat_span(0, 3, 12)`` = ``[0, 1, 2, 0, 1, 2, 3, ..., 11]``.

    Raises:
        ValueError: not integers with ``0 <= start < stop <= num_layers``.
    """
    whole = [isinstance(v, numbers.Integral) and not isinstance(v, bool)
             for v in (start, stop, num_layers)]
    if not all(whole) or not 0 <= start < stop <= num_layers:
        raise ValueError(
            f"need 0 <= start < stop <= num_layers, got start={start}, stop={stop}, "
            f"num_layers={num_layers}"
        )
    span = list(range(start, stop))
    return list(range(stop)) + span + list(range(stop, num_layers))


def _check_indices(order: Sequence[int], num_layers: int, what: str = "order") -> None:
    if isinstance(order, (str, bytes)) or not isinstance(order, Sequence):
        raise ValueError(f"{what} must be a list of 0-based block indices, got {order!r}")
    if len(order) == 0:
        raise ValueError(f"{what} is empty: give at least one 0-based block index")
    for index in order:
        if isinstance(index, bool) or not isinstance(index, int):
            raise ValueError(f"{what} holds {index!r}, which is not an integer block index")
        if not 0 <= index < num_layers:
            raise ValueError(
                f"{what} holds block {index}, but the model has blocks 0..{num_layers - 1} "
                f"({num_layers} blocks; block i produces hidden state i + 1)"
            )


def duplicate_layers(
    model: transformers.PreTrainedModel,
    order: Sequence[int],
    *,
    unshare: bool = False,
) -> transformers.PreTrainedModel:
    """A deeper (or shallower) copy of ``model`` that applies its blocks in ``order``.

    The first occurrence of a block keeps the original's weights; each later one is an
    independent deep copy (section 5). ``model`` is not changed. ``config.num_hidden_layers``
    becomes ``len(order)``; ``config.dupbert_source_blocks`` and ``config.dupbert_is_copy``
    record each block's source and whether it is a copy (they survive ``save_pretrained``).
    Duplicating a duplicated model composes (indices refer to the model passed in).

    ALBERT with one shared group and ``unshare=False``: the shared layer is *repeated*
    ``len(order)`` times; ``unshare=True``: every block gets its own group first, then as BERT.

    Args:
        model: a BERT-like or ALBERT ``*ForMaskedLM``, ``*ForSequenceClassification``,
            ``*ForQuestionAnswering`` or base model.
        order: 0-based source blocks, e.g. ``[0, 0, 1, 1, 2, 2, 3, ..., L-1]``.
        unshare: ALBERT only: unshare the layer groups first.

    Returns:
        A new model (same class, device, dtype and train/eval mode).

    Raises:
        ValueError: a bad ``order`` (empty, non-integer, past the last block), no block list
            found, or an ALBERT with several shared groups and ``unshare=False``.
    """
    num_layers = model.config.num_hidden_layers
    _check_indices(order, num_layers)
    order = list(order)
    new = copy.deepcopy(model)
    path, groups = encoder_blocks(new)
    sources, copies = block_sources(model), block_is_copy(model)
    new_sources = [sources[i] for i in order]
    new_copies = [copies[i] or i in order[:position] for position, i in enumerate(order)]
    if _is_albert(new):
        num_groups = new.config.num_hidden_groups
        if num_groups != num_layers and not unshare:
            if num_groups != 1:
                raise ValueError(
                    f"this ALBERT has {num_groups} shared layer groups for {num_layers} blocks; "
                    "repeats are defined for one shared group only: pass unshare=True"
                )
            new.config.num_hidden_layers = len(order)
            _record(new, new_sources, new_copies)
            return new
        if num_groups != num_layers:
            groups = _unshare_albert(new, groups)
    blocks = []
    for position, index in enumerate(order):
        first = index not in order[:position]
        blocks.append(groups[index] if first else copy.deepcopy(groups[index]))
    for position, block in enumerate(blocks):
        for module in block.modules():
            if hasattr(module, "layer_idx"):
                module.layer_idx = position
    parent_path, _, attribute = path.rpartition(".")
    parent = _get_submodule_or_none(new.base_model, parent_path) if parent_path else new.base_model
    setattr(parent, attribute, torch.nn.ModuleList(blocks))
    for name in _PER_BLOCK_CONFIG:
        values = getattr(new.config, name, None)
        if isinstance(values, (list, tuple)) and len(values) == num_layers:
            setattr(new.config, name, [values[i] for i in order])
    new.config.num_hidden_layers = len(order)
    if _is_albert(new):
        new.config.num_hidden_groups = len(order)
    _record(new, new_sources, new_copies)
    return new


def _unshare_albert(model, groups: torch.nn.ModuleList) -> torch.nn.ModuleList:
    """Give each of ALBERT's blocks its own deep copy of the group it applies."""
    num_layers, num_groups = model.config.num_hidden_layers, model.config.num_hidden_groups
    per_block = [groups[int(i / (num_layers / num_groups))] for i in range(num_layers)]
    seen: set[int] = set()
    unshared = []
    for group in per_block:
        unshared.append(group if id(group) not in seen else copy.deepcopy(group))
        seen.add(id(group))
    return torch.nn.ModuleList(unshared)


def _record(model, sources: list[int], copies: list[bool]) -> None:
    model.config.dupbert_source_blocks = sources
    model.config.dupbert_is_copy = copies


def unshare_albert(model: transformers.PreTrainedModel) -> transformers.PreTrainedModel:
    """An ALBERT whose blocks have independent weights, with outputs identical to ``model``'s.

    Raises:
        ValueError: ``model`` is not an ALBERT.
    """
    if not _is_albert(model):
        raise ValueError(f"{type(model).__name__} is not an ALBERT model: nothing to unshare")
    return duplicate_layers(model, list(range(model.config.num_hidden_layers)), unshare=True)


def standard_duplications(model: transformers.PreTrainedModel) -> dict[str, list[int]]:
    """The duplication configurations RQ1 probes, as ``{name: order}``, named as RQ3 names the
    same order (:func:`finetune_variants`), one name per order.

    BERT-like (L blocks): ``baseline``; ``copy first k`` (k = 1, 2, 3); then every other block
    copied once: ``copy middle`` (block ``L // 2``), ``copy last`` (block ``L - 1``) and
    ``copy block b`` for the rest (block 0 is ``copy first 1``). A shared ALBERT: ``baseline``
    and ``repeat shared +e`` for e = 1, 2, 3, 5, 8 more applications of the shared layer (with
    one shared group only the depth matters).
    """
    num_layers = model.config.num_hidden_layers
    identity = list(range(num_layers))
    orders = {"baseline": identity}
    if _is_albert(model) and model.config.num_hidden_groups == 1:
        for extra in (1, 2, 3, 5, 8):
            orders[f"repeat shared +{extra}"] = identity + [num_layers - 1] * extra
        return orders
    for k in range(1, min(3, num_layers) + 1):
        orders[f"copy first {k}"] = order_copy_after(range(k), num_layers)
    for block in range(1, num_layers):
        orders[single_block_name(block, num_layers)] = order_copy_after([block], num_layers)
    return orders


def single_block_name(block: int, num_layers: int) -> str:
    """The name of the order that copies one block (0-based) right after itself, as RQ3 names it:
    ``copy first 1`` (block 0), ``copy last``, ``copy middle`` (block ``L // 2``), else
    ``copy block b``."""
    if block == 0:
        return "copy first 1"
    if block == num_layers - 1:
        return "copy last"
    return "copy middle" if block == num_layers // 2 else f"copy block {block}"



def paper_duplication(model: transformers.PreTrainedModel) -> dict[str, list[int]]:
    """The paper's configuration (section 5, "duplicate the first three layers") as ``{name:
    order}`` in :func:`standard_duplications` names: ``copy first 3`` (``copy first L`` below 3
    blocks), or ``repeat shared +3`` for a shared ALBERT."""
    orders = standard_duplications(model)
    num_layers = model.config.num_hidden_layers
    name = ("repeat shared +3" if "repeat shared +3" in orders
            else f"copy first {min(3, num_layers)}")
    return {name: orders[name]}

@torch.no_grad()
def reinitialize_(module: torch.nn.Module, std: float, generator: torch.Generator) -> None:
    """Fresh BERT-style initialisation of every ``Linear``/``Embedding``/``LayerNorm`` in
    ``module``, in place: weights ~ N(0, std²), biases 0, LayerNorm weight 1 (Devlin et al. 2019).
    Explicit because ``model._init_weights`` can silently skip loaded weights."""
    for sub in module.modules():
        if isinstance(sub, (torch.nn.Linear, torch.nn.Embedding)):
            sub.weight.copy_(torch.randn(sub.weight.shape, generator=generator) * std)
            if getattr(sub, "bias", None) is not None:
                sub.bias.zero_()
        elif isinstance(sub, torch.nn.LayerNorm):
            sub.weight.fill_(1.0)
            sub.bias.zero_()


def insert_fresh_blocks(
    model: transformers.PreTrainedModel, positions: Sequence[int], seed: int = 0
) -> transformers.PreTrainedModel:
    """The depth control of RQ3: freshly initialised blocks inserted into the encoder ("a pretrained
    copy helps" against "more depth helps").

    ``positions`` are 0-based positions in the *new* encoder, each in ``1..L``; ``[1]`` puts a
    block where ``order_copy_after([0], L)`` puts its copy. Weights from :func:`reinitialize_`
    seeded by ``seed``; ``block_sources`` marks them ``None``. A shared ALBERT is unshared first.

    Raises:
        ValueError: ``positions`` not a list of distinct integers in range.
    """
    if isinstance(positions, (str, bytes)) or not isinstance(positions, Sequence) \
            or any(isinstance(p, bool) or not isinstance(p, numbers.Integral) for p in positions):
        raise ValueError(f"positions must be a list of integer positions in the new encoder, "
                         f"got {positions!r}")
    positions = sorted(positions)
    if len(set(positions)) != len(positions) or not positions:
        raise ValueError(f"positions must be distinct and non-empty, got {positions}")
    order = list(range(model.config.num_hidden_layers))
    for position in positions:
        if not 1 <= position <= len(order):
            raise ValueError(f"a fresh block can go at positions 1..{len(order)}, got {position}")
        order.insert(position, order[position - 1])
    new = duplicate_layers(model, order, unshare=True)
    blocks = encoder_blocks(new)[1]
    generator = torch.Generator().manual_seed(seed)
    sources, copies = block_sources(new), block_is_copy(new)
    for position in positions:
        reinitialize_(blocks[position], new.config.initializer_range, generator)
        sources[position], copies[position] = None, True
    _record(new, sources, copies)
    return new


PRIMARY_CONFIGURATION = {"bert": "copy first 3", "shared albert": "repeat shared +3"}


def finetune_variants(model: transformers.PreTrainedModel) -> dict[str, dict]:
    """The duplication configurations of RQ3, as ``{name: spec}`` for :func:`make_variant`.

    BERT-like (L blocks): ``baseline``; ``copy first k`` (k = 1, 2, 3 up to L); ``repeat first
    3`` (L >= 3); ``copy middle`` (block ``L // 2``); ``copy last``; ``depth control``
    (:func:`insert_fresh_blocks` at 1). A shared ALBERT adds ``repeat shared +3`` and ``unshared
    baseline``.

    Each spec holds its ``reference`` and ``role``, fixed before the runs (RQ3 chapter): the
    *primary* comparison is :data:`PRIMARY_CONFIGURATION` against ``baseline``; the rest are
    *secondary*; a shared ALBERT's unsharing variants are compared with ``unshared baseline`` (so a
    gain cannot come from unsharing alone). Below 3 blocks there is no primary.
    """
    num_layers = model.config.num_hidden_layers
    shared = _is_albert(model) and model.config.num_hidden_groups == 1
    variants = {
        "baseline": {"order": list(range(num_layers))},
        **{f"copy first {k}": {"order": order_copy_after(range(k), num_layers)}
           for k in (1, 2, 3) if k <= num_layers},
    }
    if num_layers >= 3:
        variants["repeat first 3"] = {"order": order_repeat_span(0, 3, num_layers)}
    variants.update({
        "copy middle": {"order": order_copy_after([num_layers // 2], num_layers)},
        "copy last": {"order": order_copy_after([num_layers - 1], num_layers)},
        "depth control": {"fresh_at": [1]},
    })
    if shared:
        variants["unshared baseline"] = {"order": list(range(num_layers))}
        variants["repeat shared +3"] = {"order": list(range(num_layers)) + [num_layers - 1] * 3,
                                        "shared": True}
    primary = PRIMARY_CONFIGURATION["shared albert" if shared else "bert"]
    for name, spec in variants.items():
        unshares = shared and name not in ("baseline", "unshared baseline") \
            and not spec.get("shared", False)
        spec["reference"] = None if name == "baseline" else (
            "unshared baseline" if unshares else "baseline")
        spec["role"] = "reference" if name == "baseline" else (
            "primary" if name == primary else "secondary")
    return variants


def make_variant(model: transformers.PreTrainedModel, name: str,
                 seed: int = 0) -> transformers.PreTrainedModel:
    """Apply the :func:`finetune_variants` configuration ``name`` to ``model`` (a new model).

    Raises:
        ValueError: ``name`` is not a configuration of this model (the message lists them).
    """
    variants = finetune_variants(model)
    if name not in variants:
        raise ValueError(f"unknown duplication {name!r}; a model with "
                         f"{model.config.num_hidden_layers} blocks has: {list(variants)}")
    spec = variants[name]
    if "fresh_at" in spec:
        return insert_fresh_blocks(model, spec["fresh_at"], seed=seed)
    if name == "baseline":
        return copy.deepcopy(model)
    return duplicate_layers(model, spec["order"], unshare=not spec.get("shared", False))


def check_configurations(models: Sequence[str], duplications: str | Sequence[str], *,
                         strict: bool = False) -> dict[str, list[str]]:
    """The duplication configurations named for each model, checked against what it has
    (:func:`configuration_specs`). As in ``dupbert.study.profiles.plan_sweep``, a name some models
    lack is skipped for those.

    Args:
        models: model names (each must load: :func:`load_config`).
        duplications: ``"all"`` or configuration names.
        strict: every name must be a configuration of every model.

    Returns:
        ``{model: [configuration, ...]}``, the configurations each model will run.

    Raises:
        ConfigurationNotAvailable: a name that no model has (``strict``: some model lacks), or a
            model left with none; the message lists each model's configurations.
        ParameterError: ``models`` or ``duplications`` malformed (:func:`check_list`).
    """

    models = check_list("models", models, what="models")
    have = {model: list(configuration_specs(model)) for model in models}
    if duplications == "all":
        return have
    wanted = check_list("duplications", duplications, what="configuration names")
    depth = {model: _depth(model) for model in models}
    listing = "; ".join(f"{model} ({depth[model]} blocks): {', '.join(names)}"
                        for model, names in have.items())
    lacking = {model: [name for name in wanted if name not in names] for model, names in have.items()}
    lacking = {model: names for model, names in lacking.items() if names}
    if strict and lacking:
        raise ConfigurationNotAvailable(
            "; ".join(f"{model} ({depth[model]} blocks) has no configuration "
                      f"{', '.join(map(repr, names))}" for model, names in lacking.items())
            + f"; configurations: {listing}")
    unknown = [name for name in wanted if not any(name in names for names in have.values())]
    if unknown:
        raise ConfigurationNotAvailable(
            f"duplication configuration{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(map(repr, unknown))} {'are' if len(unknown) > 1 else 'is'} not a "
            f"configuration of {'any model named' if len(models) > 1 else models[0]}; "
            f"configurations: {listing}")
    chosen = {model: [name for name in wanted if name in names] for model, names in have.items()}
    empty = [model for model, names in chosen.items() if not names]
    if empty:
        raise ConfigurationNotAvailable(
            f"{', '.join(empty)} {'have' if len(empty) > 1 else 'has'} none of the configurations "
            f"named ({', '.join(wanted)}), so nothing would run for "
            f"{'them' if len(empty) > 1 else 'it'}; configurations: {listing}")
    return chosen


@functools.lru_cache(maxsize=None)
def _depth(model: str) -> int:
    return int(load_config(model).num_hidden_layers)


def configuration_specs(model: str) -> dict[str, dict]:
    """:func:`finetune_variants` of ``model`` from its config alone (built on the meta device).

    Raises:
        ModelNotAvailable: ``model`` cannot be loaded (``dupbert.core.zoo.load_config``).
    """
    config = load_config(model)
    with torch.device("meta"):
        skeleton = transformers.AutoModel.from_config(config)
    return finetune_variants(skeleton)
