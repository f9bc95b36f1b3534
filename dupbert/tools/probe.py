"""RQ1: token reconstruction from every hidden state through the model's own MLM head.

Kao et al. (2020), section 3: the pretrained MLM head, trained only on the last hidden state, is
applied unchanged to the hidden state ``h_l`` of every layer ``l = 0..L`` of an *unmasked*
input; we count how often it returns the input token (top-1) or has it among its five best
guesses (top-5). Beyond the paper, :func:`masked_prediction_accuracy` asks from which hidden
state the head predicts *masked* tokens (which cannot be copied).

Every ``*ForMaskedLM`` family of ``dupbert.tools.models.MLM_FAMILIES`` works (hidden states are read
before any final norm; ``dupbert.mlm_head`` applies it). The head's vocabulary projection
dominates the cost, so it is applied one hidden state at a time, to counted positions only, in
blocks of at most ``LOGITS_BLOCK`` logits (``benchmarks/probe.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import torch
import transformers
from tqdm import tqdm

from ..core.checks import check_device, check_model_names, check_number
from .duplicate import (block_is_copy, block_sources, duplicate_layers, paper_duplication,
                        standard_duplications)
from .hidden import (IGNORE, MASKING_RULES, TruncationWarning, batch_hidden_states,  # noqa: F401
                     check_mask_rate, check_max_length, length_batches, mask_for_probe,
                     pad_batch, tokenize_for_probe, warn_if_truncated)
from .models import mlm_head, random_init_control
from ..core.results import cached_frame, input_fingerprint, source_fingerprint
from ..core.significance import ratio_bootstrap
from .translators import TRANSLATOR_FITS, TRANSLATORS

# The head's logits are computed for at most this many (position, vocabulary) entries at once
# (64 MB in fp32): BERT-base's 30,522-token head then takes 549 positions per call, enough to
# keep the matrix product efficient, while a batch's full logits would take GBs.
LOGITS_BLOCK = 1 << 24

PROBE_COLUMNS = ["layer", "source_block", "is_copy", "top1", "top5", "top1_macro", "n_tokens",
                 "n_sequences", "top1_low", "top1_high"]
"""``top1_low``/``top1_high``: 95% bootstrap interval of ``top1`` over resampled sequences."""


_ALLOWED = ", ".join(map(repr, TRANSLATORS))  # for messages: 'identity', 'linear', ...
_FIT_DEFAULTS = dict(method="ridge", fit_at="unmasked", target="output")  # fit_translators'


def _fit_mismatch(translator: str, fitted) -> tuple[str, str, str] | None:
    """``None`` if ``fitted`` was fitted as the name ``translator`` says (:data:`TRANSLATOR_FITS`),
    else ``(what the name wants, what it has, the name that fits it)`` for a message (only the
    fields that differ; a translator saved before a field existed has its default)."""
    wanted = {**_FIT_DEFAULTS, **TRANSLATOR_FITS[translator]}
    how = {key: getattr(fitted, key, default) for key, default in _FIT_DEFAULTS.items()}
    differ = [key for key in wanted if wanted[key] != how[key]]
    if not differ:
        return None
    names = [name for name, fit in TRANSLATOR_FITS.items() if {**_FIT_DEFAULTS, **fit} == how]
    return (", ".join(f"{key}={wanted[key]!r}" for key in differ),
            ", ".join(f"{key}={how[key]!r}" for key in differ), (names or ["<it>"])[0])


def resolve_translator(translator, translators, model: transformers.PreTrainedModel,
                       texts: Sequence[str]):
    """The map applied to each hidden state before the head: ``None`` for ``"identity"``; for
    ``"linear"``, ``"linear-masked"`` or ``"tuned"`` the fitted ``translators`` (or
    ``translator`` itself when fitted), checked against the model and the texts (none may be a
    fitting text).

    Raises:
        ValueError: an unknown or inconsistent ``translator``/``translators`` (a name given with a
            translator fitted by another ``method``: :data:`TRANSLATOR_FITS`), a translator for
            another shape of model, or a text it was fitted on.
    """
    if isinstance(translator, str):
        if translator not in TRANSLATORS:
            raise ValueError(f"translator must be {_ALLOWED} or a fitted translator "
                             f"(dupbert.fit_translators), got {translator!r}")
        if translator == "identity":
            if translators is not None:
                raise ValueError("translators= is given but translator='identity': pass "
                                 "translator='linear' (or the name it was fitted for) to use it")
            return None
        fit = TRANSLATOR_FITS[translator]
        if translators is None:
            arguments = "".join(f", {key}={value!r}" for key, value in fit.items()
                                if value not in ("ridge", "unmasked"))  # not the defaults
            if fit["method"] == "cross-entropy":
                arguments += ", head=dupbert.mlm_head(model)"
            raise ValueError(f"translator={translator!r} needs a fitted translator: translators="
                             f"dupbert.fit_translators(model, tokenizer, fit_texts{arguments}), "
                             f"fitted on texts other than these (dupbert.split_texts)")
        mismatch = _fit_mismatch(translator, translators)
        if mismatch:
            wanted, got, name = mismatch
            raise ValueError(f"translator={translator!r} reads a translator fitted with {wanted}, "
                             f"this one was fitted with {got}: pass translator={name!r}")
        translator = translators
    elif translators is not None:
        raise ValueError("give the fitted translator once: translator=<it> or "
                         "translator='linear', translators=<it>")
    if not all(hasattr(translator, name) for name in ("apply", "check_model", "check_held_out")):
        raise ValueError(f"translator must be {_ALLOWED} or a fitted translator "
                         f"(dupbert.fit_translators), got {type(translator).__name__}")
    translator.check_model(model)
    translator.check_held_out(list(texts))
    return translator


@torch.inference_mode()
def reconstruction_accuracy(
    model: transformers.PreTrainedModel,
    tokenizer: transformers.PreTrainedTokenizerBase,
    texts: Sequence[str],
    batch_size: int = 32,
    device: str | torch.device | None = None,
    max_length: int = 512,
    progress: bool = True,
    translator="identity",
    translators=None,
) -> pd.DataFrame:
    """Per-hidden-state token reconstruction accuracy through the model's MLM head (RQ1, section 3).

    Hidden state ``l = 0`` is the embedding output (ALBERT: after its projection), ``l = 1..L`` the
    output of block ``l - 1``. The head maps ``h_l`` ``[tokens, H]`` to logits ``[tokens, V]``; a
    token is reconstructed when its id is the arg-max (top-1) or among the 5 largest (top-5). Only
    non-special, non-padding tokens count; inputs are not masked.

    Args:
        model: a ``*ForMaskedLM`` of ``dupbert.tools.models.MLM_FAMILIES`` (e.g. ``dupbert.load_mlm``).
        texts: the corpus, one sequence per string; truncated to ``max_length`` tokens (special
            tokens included).
        batch_size: sequences per forward pass (grouped by length).
        device: default the model's device.
        progress: a tqdm bar over batches (stderr).
        translator: ``"identity"`` (the paper), ``"linear"`` (``h_l`` first mapped to the last
            hidden state's space by ``translators``, from ``dupbert.fit_translators``: Din et al.
            2023), or a fitted translator.
        translators: the fitted translator for ``"linear"``; not fitted on any of ``texts``.

    Returns:
        :data:`PROBE_COLUMNS`, one row per hidden state (``L + 1``): ``layer``, ``source_block``
        (the original model's block that produced it; -1 for the embedding output), ``is_copy``
        (a copy or ALBERT repeat, ``duplicate_layers``), ``top1`` and ``top5`` (micro-averaged,
        in [0, 1]), ``top1_macro`` (per-sequence top-1 averaged over sequences), ``n_tokens`` and
        ``n_sequences`` (with at least one counted token).

    Raises:
        ValueError: bad ``texts``, ``batch_size`` or ``max_length`` (>= 3), no countable token,
            or as :func:`resolve_translator`.
        DeviceNotAvailable: ``device`` unusable (``dupbert.core.checks.check_device``).
        MLMHeadMissing: the model has no MLM head.
    """
    texts = _listed(texts)
    examples = tokenize_for_probe(tokenizer, texts, max_length)
    mapper = resolve_translator(translator, translators, model, texts)
    return _probe_examples(model, tokenizer, examples, batch_size, device, progress, "probe",
                           mapper)


def _listed(texts) -> list:
    """``texts`` as a list (a generator read once); a single string is left to be refused."""
    return texts if isinstance(texts, str) else list(texts)


@torch.inference_mode()
def masked_prediction_accuracy(
    model: transformers.PreTrainedModel,
    tokenizer: transformers.PreTrainedTokenizerBase,
    texts: Sequence[str],
    mask_rate: float = 0.15,
    rule: str = "mask",
    seed: int = 0,
    batch_size: int = 32,
    device: str | torch.device | None = None,
    max_length: int = 512,
    progress: bool = True,
    translator="identity",
    translators=None,
) -> pd.DataFrame:
    """Per-hidden-state accuracy of the MLM head at predicting *masked* tokens (beyond the paper,
    which probes unmasked inputs: section 3).

    Sequences are masked by :func:`mask_for_probe`; a masked position counts as predicted when
    the *original* token is the arg-max (top-1) or among the 5 largest (top-5). Only masked
    positions count. Other arguments as :func:`reconstruction_accuracy`.

    Returns:
        ``L + 1`` rows with the columns of :func:`reconstruction_accuracy`, on masked tokens.

    Raises:
        As :func:`reconstruction_accuracy` and :func:`mask_for_probe`.
    """
    texts = _listed(texts)
    examples = tokenize_for_probe(tokenizer, texts, max_length)
    mapper = resolve_translator(translator, translators, model, texts)
    examples = mask_for_probe(examples, tokenizer, mask_rate, rule, seed)
    return _probe_examples(model, tokenizer, examples, batch_size, device, progress, "masked",
                           mapper)


def _probe_examples(model, tokenizer, examples, batch_size, device, progress,
                    desc, translator=None) -> pd.DataFrame:
    """The streaming core of the probe: the :data:`PROBE_COLUMNS` frame of ``examples``."""
    head = mlm_head(model)
    device = torch.device(check_device(device)) if device is not None \
        else next(model.parameters()).device
    model = model.to(device).eval()
    batches = length_batches([len(e["input_ids"]) for e in examples], batch_size)
    n_states = model.config.num_hidden_layers + 1
    top1 = np.zeros((n_states, len(examples)), dtype=np.int64)
    top5 = np.zeros((n_states, len(examples)), dtype=np.int64)
    counted_per_sequence = np.zeros(len(examples), dtype=np.int64)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    chunk = max(1, LOGITS_BLOCK // model.config.vocab_size)  # positions per head call
    for batch_indices in tqdm(batches, desc=desc, unit="batch", disable=not progress):
        batch = pad_batch([examples[i] for i in batch_indices], pad_id)
        counted = batch["counted"].to(device)
        hidden_states = batch_hidden_states(model, batch, device)
        targets = batch["labels"].to(device)[counted]  # [n_counted]
        rows = counted.nonzero()[:, 0]  # batch row of each counted token
        columns = torch.tensor(batch_indices, device=device)[rows]
        counted_per_sequence[batch_indices] = counted.sum(dim=1).cpu().numpy()
        for layer, hidden in enumerate(hidden_states):
            hidden = hidden[counted]
            if translator is not None:
                hidden = translator.apply(layer, hidden)
            hit1, hit5 = _head_hits(head, hidden, targets, chunk)
            top1[layer] += _per_sequence(hit1, columns, len(examples))
            top5[layer] += _per_sequence(hit5, columns, len(examples))
        del hidden_states  # free this batch's L + 1 hidden states before the next forward
    n_tokens = int(counted_per_sequence.sum())
    if n_tokens == 0:
        raise ValueError("no countable token: every token of every text is special or padding")
    with_tokens = counted_per_sequence > 0
    low, high = ratio_bootstrap(top1, counted_per_sequence)
    return pd.DataFrame(
        {
            "layer": np.arange(n_states),
            "source_block": [-1, *block_sources(model)],
            "is_copy": [False, *block_is_copy(model)],
            "top1": top1.sum(axis=1) / n_tokens,
            "top5": top5.sum(axis=1) / n_tokens,
            "top1_macro": (top1[:, with_tokens] / counted_per_sequence[with_tokens]).mean(axis=1),
            "n_tokens": n_tokens,
            "n_sequences": int(with_tokens.sum()),
            "top1_low": low,
            "top1_high": high,
        },
        columns=PROBE_COLUMNS,
    )


def _head_hits(head: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor,
               chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-1 and top-5 hits ``[n]`` of the head on ``[n, H]``, ``chunk`` positions at a time."""
    hits1, hits5 = [], []
    for start in range(0, hidden.shape[0], chunk):
        logits = head(hidden[start:start + chunk])  # [<= chunk, V]
        best = logits.topk(min(5, logits.shape[-1]), dim=-1).indices
        del logits
        target = targets[start:start + chunk]
        hits1.append((best[:, 0] == target).long())
        hits5.append((best == target[:, None]).any(dim=-1).long())
    if not hits1:
        return targets.new_zeros(0), targets.new_zeros(0)
    return torch.cat(hits1), torch.cat(hits5)


def _per_sequence(hits: torch.Tensor, columns: torch.Tensor, n: int) -> np.ndarray:
    """Sum ``hits`` per sequence index ``columns`` into an array of length ``n``."""
    return torch.bincount(columns, weights=hits.double(), minlength=n).long().cpu().numpy()


# The modules whose code determines a probe result: cached results are keyed on their source.
PROBE_CODE = ("tools.probe", "tools.hidden", "tools.models", "tools.duplicate", "core.data", "core.zoo",
              "core.significance")
BASELINE = "baseline"
PRETRAINED = "pretrained"
CONTROL = "random-init control"


def paper_duplications(model: transformers.PreTrainedModel) -> dict[str, list[int]]:
    """The baseline and the paper's configuration (``dupbert.tools.duplicate.paper_duplication``) as
    ``{label: order}``."""
    return {BASELINE: list(range(model.config.num_hidden_layers)), **paper_duplication(model)}


class ShortCorpusWarning(UserWarning):
    """A user's corpus holds fewer sequences than were asked for."""


def probe_models(
    models: Sequence[str],
    corpus: str | None = None,
    n_sequences: int = 500,
    batch_size: int = 32,
    device: str = "cpu",
    seed: int = 0,
    max_length: int = 512,
    data_dir: str | None = None,
    include_control: bool = True,
    duplications: str | Mapping[str, Sequence[int]] | None = None,
    progress: bool = True,
    cache: bool = True,
    masking: str | None = None,
    mask_rate: float = 0.15,
    text_column: str = "text",
    translator: str = "identity",
    fit_sequences: int | None = None,
    translators: Mapping[str, object] | None = None,
) -> pd.DataFrame:
    """RQ1 for several models: :func:`reconstruction_accuracy` (with ``masking``,
    :func:`masked_prediction_accuracy`) of each pretrained model, of its random-init control
    (``dupbert.random_init_control``) and, optionally, of duplicated variants, on each model's
    corpus.

    Each result is cached (``$DUPBERT_CACHE/results/probe``) as soon as computed; a user's
    texts are keyed on their content (``dupbert.core.data.texts_digest``), not their path.

    Args:
        models: zoo names, local folders or Hub ids.
        corpus: a ``dupbert.core.data`` corpus name or any user text source
            (``dupbert.core.data.read_texts``: text, table or Hub); ``None``: each model's own
            (``dupbert.core.data.default_corpus``).
        n_sequences: the first ``n_sequences`` sequences of the corpus.
        text_column: the column holding the texts (tables, saved datasets, the Hub).
        seed: seeds the control's initialisation and the masks.
        include_control: also probe the random-init control (of the model as loaded only).
        duplications: ``None`` (as loaded), ``"standard"``
            (``dupbert.tools.duplicate.standard_duplications``), ``"paper"``
            (:func:`paper_duplications`) or ``{label: order}`` (0-based blocks).
        masking: ``None`` (reconstruction, the paper), or ``"mask"``/``"80-10-10"`` with
            ``mask_rate`` (:func:`mask_for_probe`).
        translator: one of :data:`TRANSLATORS`: ``"identity"``, or ``"linear"``/``"linear-masked"``
            (ridge: Din et al. 2023) or ``"tuned"`` (the tuned lens: Belrose et al. 2023, fitted
            at unmasked positions), with either ``fit_sequences`` (fit one per probed model on
            the sequences after the first ``n_sequences``, as :data:`TRANSLATOR_FITS`) or
            ``translators`` (``{model name: fitted translator}``, models as loaded only, each
            fitted by the name's ``method``).
        Other arguments as :func:`reconstruction_accuracy`.

    Returns:
        One row per (model, duplication, init, hidden state): ``model``, ``duplication``
        (``"baseline"`` for the model as loaded), ``init`` (``"pretrained"`` or
        ``"random-init control"``), [``translator``, unless identity], ``corpus``, then
        :data:`PROBE_COLUMNS`.

    Raises:
        ValueError: a bad argument or combination, or a user's corpus that cannot be read; all
            before any model is loaded or cached result read.
        DeviceNotAvailable: ``device`` unusable.
        Errors of ``load_mlm`` and ``dupbert.core.data``.
    """
    from ..core.data import default_corpus, load_texts
    from .models import load_mlm

    models = _check_probe_arguments(models, duplications, masking, n_sequences, batch_size,
                                    max_length, seed, device, mask_rate)
    _check_translator_options(models, n_sequences, include_control, duplications, translator,
                              fit_sequences, translators)
    n_texts = None if n_sequences is None else n_sequences + (fit_sequences or 0)
    user_texts = _user_texts(corpus, n_texts, text_column)
    settings = dict(seed=seed, masking=masking, mask_rate=mask_rate, batch_size=batch_size,
                    max_length=max_length, device=device, progress=progress)
    frames = []
    linear = translator != "identity"
    code = source_fingerprint(*PROBE_CODE, *(["tools.translators"] if linear else []))
    for name in models:
        corpus_name = corpus or default_corpus(name)
        texts = user_texts or (load_texts(corpus_name, n_texts, data_dir=data_dir,
                                          text_column=text_column)
                               if fit_sequences else None)
        split = _evaluation_split(texts, n_sequences, fit_sequences)
        corpus_key = corpus_cache_key(name, corpus_name, data_dir, text_column,
                                      split.eval if user_texts else None)
        fitted = translators[name] if translators else None
        loaded: dict = {}

        def load(name=name, corpus_name=corpus_name, loaded=loaded, split=split) -> dict:
            """Model and texts, loaded only when a result is not cached."""
            if not loaded:
                loaded["model"], loaded["tokenizer"] = load_mlm(name, device=device)
                loaded["texts"] = split.eval if split is not None else load_texts(
                    corpus_name, n_sequences, data_dir=data_dir, text_column=text_column)
            return loaded

        for label, order in _orders(duplications, load).items():
            if loaded and list(order or []) == list(range(loaded["model"].config.num_hidden_layers)):
                order = None  # the model as loaded: share its cached result
            inits = [PRETRAINED, CONTROL] if include_control and label == BASELINE else [PRETRAINED]
            for init in inits:
                # keyed on what determines the result: the code, the inputs and the settings
                fields = dict(model=name, duplication=label, order=order, init=init,
                              n_sequences=n_sequences, max_length=max_length,
                              seed=seed if init == CONTROL else None, code=code, **corpus_key)
                if masking is not None:  # reconstruction's cache keys name no masking
                    fields.update(masking=masking, mask_rate=mask_rate, mask_seed=seed)
                fit = TRANSLATOR_FITS.get(translator, {})
                at_masks = fit.get("fit_at") == "masked"
                if linear:
                    fields.update(translator=_translator_key(fit_sequences, split, fitted))
                    # keys of "linear" results stay as they were; the others name what differs
                    fields.update({key: value for key, value in fit.items()
                                   if value != _FIT_DEFAULTS[key]})
                    if at_masks and fitted is None:  # the masks it is fitted at
                        fields.update(fit_mask_rate=mask_rate, fit_seed=seed)

                def run(order=order, init=init, load=load, split=split, fitted=fitted, fit=fit,
                        at_masks=at_masks) -> pd.DataFrame:
                    model, tokenizer, texts = (load()[k] for k in ("model", "tokenizer", "texts"))
                    memo = None if not fit_sequences else (
                        name, tuple(order or ()), init, translator, tuple(split.fit),
                        mask_rate if at_masks else None, seed, max_length)
                    return _probe_variant(
                        model, tokenizer, texts, order, init,
                        "identity" if translator == "identity" else fitted,
                        fit_texts=split.fit if fit_sequences else None, memo=memo, **fit,
                        **settings)

                frame = cached_frame("probe", fields, run, enabled=cache)
                frames.append(frame.assign(model=name, duplication=label, init=init,
                                           corpus=str(corpus_name), translator=translator))
    result = pd.concat(frames, ignore_index=True)
    front = ["model", "duplication", "init"] + (["translator"] if linear else [])
    return result[[*front, "corpus", *PROBE_COLUMNS]]


def _user_texts(corpus, n_texts: int | None, text_column) -> list[str] | None:
    """A user's corpus (a file or ``hub:``), read once, before any model, so that a bad file fails
    at once; ``None`` for a corpus name (each model reads it) or no corpus. Warns
    (:class:`ShortCorpusWarning`) when it holds fewer than ``n_texts`` sequences."""
    from ..core.data import check_text_source, is_corpus_name, load_texts

    if corpus is None:
        return None
    check_text_source(corpus)
    if is_corpus_name(corpus):
        return None
    texts = load_texts(corpus, n_texts, text_column=text_column)
    if n_texts is not None and len(texts) < n_texts:
        import warnings

        warnings.warn(f"{corpus} holds {len(texts)} sequence(s), fewer than the {n_texts} asked "
                      f"for: all {len(texts)} are probed", ShortCorpusWarning, stacklevel=3)
    return texts


def _check_probe_arguments(models, duplications, masking, n_sequences, batch_size, max_length,
                           seed, device, mask_rate) -> list[str]:
    """:func:`probe_models`' arguments checked before anything loads; the model names as a list."""
    models = check_model_names("models", models)
    if not (duplications is None or isinstance(duplications, Mapping)
            or (isinstance(duplications, str) and duplications in ("standard", "paper"))):
        raise ValueError(f"duplications must be None, 'standard', 'paper' or a mapping "
                         f"{{label: [block, ...]}}, got {duplications!r}")
    if masking is not None and masking not in MASKING_RULES:
        raise ValueError(f"masking must be None or one of {list(MASKING_RULES)}, got {masking!r}")
    if n_sequences is not None:
        check_number("n_sequences", n_sequences, integer=True, minimum=1)
    check_number("batch_size", batch_size, integer=True, minimum=1)
    check_max_length(max_length)
    check_number("seed", seed, integer=True, minimum=0)
    check_device(device)
    if masking is not None:
        check_mask_rate(mask_rate)
    return models


def _orders(duplications, load) -> dict:
    """``{label: order}`` that :func:`probe_models` probes for one model (``None``: as loaded)."""
    if duplications is None:
        return {BASELINE: None}
    if duplications == "standard":
        return standard_duplications(load()["model"])
    if duplications == "paper":
        return paper_duplications(load()["model"])
    return dict(duplications)


_FITTED: dict = {}  # translators fitted by probe_models in this process, by what determines them
_FITTED_KEPT = 16


def _probe_variant(model, tokenizer, texts, order, init, translator, *, fit_texts, seed,
                   masking, mask_rate, batch_size, max_length, device, progress,
                   fit_at="unmasked", method="ridge", target="output", memo=None) -> pd.DataFrame:
    """One (duplication, init) of a loaded model through the probe (``translator=None``: fit one
    on ``fit_texts`` with ``fit_at``, ``method`` and ``target``, or reuse the one fitted in this
    process under the key ``memo``: reconstruction and masked prediction read the same fit)."""
    probed = model if order is None else duplicate_layers(model, order)
    if init == CONTROL:
        probed = random_init_control(probed, seed=seed)
    if translator is None and memo in _FITTED:
        translator = _FITTED[memo]
    if translator is None:
        from .translators import fit_translators

        translator = fit_translators(probed, tokenizer, fit_texts, batch_size=batch_size,
                                     max_length=max_length, device=device, progress=progress,
                                     fit_at=fit_at, mask_rate=mask_rate, seed=seed,
                                     method=method, target=target,
                                     head=mlm_head(probed) if method == "cross-entropy" else None)
        if memo is not None:
            _FITTED[memo] = translator
            while len(_FITTED) > _FITTED_KEPT:
                _FITTED.pop(next(iter(_FITTED)))
    common = dict(batch_size=batch_size, device=device, max_length=max_length, progress=progress,
                  translator=translator)
    if masking is not None:
        return masked_prediction_accuracy(probed, tokenizer, texts, mask_rate=mask_rate,
                                          rule=masking, seed=seed, **common)
    return reconstruction_accuracy(probed, tokenizer, texts, **common)


def _check_translator_options(models, n_sequences, include_control, duplications, translator,
                              fit_sequences, translators) -> None:
    """``translator``, ``fit_sequences`` and ``translators`` of :func:`probe_models` agree."""
    if translator not in TRANSLATORS:
        raise ValueError(f"translator must be one of {list(TRANSLATORS)}, got {translator!r}")
    if translator == "identity":
        if fit_sequences is not None or translators is not None:
            raise ValueError(f"fit_sequences and translators are for the fitted translators, "
                             f"translator in {list(TRANSLATOR_FITS)}")
        return
    if (fit_sequences is None) == (translators is None):
        raise ValueError(f"translator={translator!r} needs either fit_sequences (fit one per "
                         "probed model) or translators ({model: fitted translator}), not both")
    if fit_sequences is not None:
        check_number("fit_sequences", fit_sequences, integer=True, minimum=1)
        if n_sequences is None:
            raise ValueError("fit_sequences needs n_sequences: the translator is fitted on the "
                             "sequences after the first n_sequences")
        return
    missing = [name for name in models if name not in translators]
    if missing:
        raise ValueError(f"translators has no translator for {missing}; it has "
                         f"{list(translators)}")
    if include_control or duplications is not None:
        raise ValueError("translators= holds translators of the models as loaded: pass "
                         "include_control=False and duplications=None, or fit_sequences= to fit "
                         "one for every probed model")
    other = {name: _fit_mismatch(translator, fitted) for name, fitted in translators.items()
             if name in models}
    other = {name: mismatch for name, mismatch in other.items() if mismatch}
    if other:
        wanted, got, _ = next(iter(other.values()))
        raise ValueError(f"translator={translator!r} reads translators fitted with {wanted}; "
                         f"those of {list(other)} were fitted with {got}")


def _evaluation_split(texts, n_sequences, fit_sequences):
    """``dupbert.split_texts`` of ``texts`` into evaluation and fitting texts, or ``None`` when the
    texts are read later."""
    if texts is None:
        return None
    if not fit_sequences:
        from .translators import TextSplit

        return TextSplit([], texts[:n_sequences] if n_sequences else texts)
    from .translators import split_texts

    return split_texts(texts, n_sequences)


def corpus_cache_key(name: str, corpus_name: str, data_dir, text_column: str = "text",
                     user_texts: Sequence[str] | None = None) -> dict:
    """The cache-key fields of a model's inputs (``results.input_fingerprint``): a built-in corpus
    by name and file stamp, a user's evaluated texts by content, never by path."""
    from ..core.data import texts_digest

    fields = dict(corpus=corpus_name, **input_fingerprint(name, corpus_name, data_dir))
    if user_texts is not None:
        fields.update(corpus="texts", corpus_file="sha256:" + texts_digest(user_texts))
    elif text_column != "text":  # a user's texts already are the column's
        fields.update(text_column=text_column)
    return fields


def _translator_key(fit_sequences, split, fitted) -> dict:
    """What determines a linear translator: its fitting texts and settings, or its weights."""
    import hashlib

    from ..core.data import texts_digest

    if fitted is not None:
        digest = hashlib.sha256(fitted.weight.numpy().tobytes() + fitted.bias.numpy().tobytes())
        return {"weights": digest.hexdigest()[:16]}
    return {"fit_sequences": fit_sequences, "fit_texts": texts_digest(split.fit)}


def duplication_summary(frame: pd.DataFrame, metric: str = "top1") -> pd.DataFrame:
    """How duplication changes reconstruction, one row per (model, duplication) (paper section 5).

    Args:
        frame: ``probe_models(..., duplications=...)`` output (pretrained rows are used).
        metric: ``top1``, ``top5`` or ``top1_macro``.

    Returns:
        Columns ``model``, ``duplication``, ``n_blocks``, ``n_copies``, ``at_copies`` (mean
        ``metric`` at the hidden states copies produce), ``before_first_copy``,
        ``min_after_first_copy``, ``last`` (the last hidden state) and ``last_change`` (``last``
        minus the baseline's). NaN where a model has no copy.

    Raises:
        ValueError: ``frame`` has no ``baseline`` rows for a model.
    """
    data = frame[frame["init"] == PRETRAINED] if "init" in frame else frame
    rows = []
    for (model, duplication), group in data.groupby(["model", "duplication"], sort=False):
        baseline = data[(data["model"] == model) & (data["duplication"] == BASELINE)]
        if baseline.empty:
            raise ValueError(f"no baseline rows for model {model!r}: probe with a baseline")
        group = group.sort_values("layer")
        copies = group[group["is_copy"].astype(bool)]
        first = copies["layer"].min() if len(copies) else None
        last = float(group[metric].iloc[-1])
        rows.append({
            "model": model, "duplication": duplication, "n_blocks": int(group["layer"].max()),
            "n_copies": len(copies),
            "at_copies": float(copies[metric].mean()) if len(copies) else np.nan,
            "before_first_copy": (float(group.loc[group["layer"] == first - 1, metric].iloc[0])
                                  if first is not None else np.nan),
            "min_after_first_copy": (float(group.loc[group["layer"] >= first, metric].min())
                                     if first is not None else np.nan),
            "last": last,
            "last_change": last - float(baseline.sort_values("layer")[metric].iloc[-1]),
        })
    return pd.DataFrame(rows)
