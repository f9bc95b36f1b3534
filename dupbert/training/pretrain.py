"""Pretraining small English BERT and ALBERT MLMs from scratch, with the emergence record.

No English MLM with its head loads offline, so ``bert-en-small`` and ``albert-en-small`` are
pretrained here (book/methods.md, "English BERT and ALBERT pretrained here"). Objective: BERT's
MLM (Devlin et al. 2019, §3.1: 15%, 80/10/10, dynamic masking, tied decoder), no NSP/SOP, on
sequences packed without padding, the decoder on masked positions only (the same loss).
At log-spaced steps the run records, on held-out WikiText-2 valid text, the MLM loss and the
RQ1 probes from every hidden state. Every step is seeded by ``(seed, step)``: a resumed run
continues exactly.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from .emergence import MOST_FREQUENT
from ..core.checks import check_device
from ..core.errors import DeviceNotAvailable, DupbertError
from .pretrain_config import ARCHITECTURES, CORPORA, MODELS, RXN_SEEDS, PretrainConfig  # noqa: F401
from .pretrain_corpus import (CorpusError, pack, pretraining_documents,
                              train_tokenizer)
from .pretrain_publish import STAGE_FILE, publish, write_json
from ..core.results import append_rows, atomic_folder, atomic_save_npy, drop_rows_after
from ..core.zoo import BUNDLED as WEIGHTS, cache_dir, weights_dir

LOSS_COLUMNS = ["model", "step", "tokens_seen", "loss", "lr", "elapsed_s"]
EMERGENCE_COLUMNS = ["model", "step", "tokens_seen", "measure", "layer", "top1", "top5",
                     "n_tokens", "loss"]


class CheckpointMismatch(DupbertError, ValueError):
    """A checkpoint to resume from was made with another configuration."""


def heldout_texts(data_dir: str | os.PathLike, n: int = 64, unk: str = "keep") -> list[str]:
    """The first ``n`` paragraphs of ``dupbert.core.data.heldout_paragraphs`` (WikiText-2 valid, 40+
    words, tokenisation undone): the emergence record's held-out text.

    Args:
        unk: ``"keep"`` leaves WikiText's ``<unk>`` as text, as the first record read it;
            ``"[UNK]"`` writes the unknown token, which the probe does not score.

    Raises:
        CorpusError: the file is missing, or ``unk`` is neither.
    """
    from ..core.data import heldout_paragraphs

    if unk not in ("keep", "[UNK]"):
        raise CorpusError(f"unk must be 'keep' or '[UNK]', got {unk!r}")
    path = Path(data_dir) / "wikitext2/wiki.valid.tokens"
    if not path.is_file():
        raise CorpusError(f"the held-out text {path} does not exist (WikiText-2 valid, tokens)")
    return heldout_paragraphs(path.read_text(encoding="utf-8").split("\n"), unk)["text"][:n]


# --------------------------------------------------------------------------------------------------
# Models and the training step.


def build_model(config: PretrainConfig, tokenizer):
    """A freshly initialised ``BertForMaskedLM`` or ``AlbertForMaskedLM`` (one shared layer,
    factorised embeddings), decoder tied to the input embeddings, seeded by ``config.seed``."""
    import torch
    import transformers

    common = dict(vocab_size=config.vocab_size, hidden_size=config.hidden_size,
                  num_hidden_layers=config.num_layers, num_attention_heads=config.num_heads,
                  intermediate_size=config.intermediate_size,
                  max_position_embeddings=config.seq_length, hidden_dropout_prob=config.dropout,
                  attention_probs_dropout_prob=config.dropout,
                  pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True)
    torch.manual_seed(config.seed)
    if config.init is not None:
        return _continued_model(config)
    if config.architecture == "bert":
        return transformers.BertForMaskedLM(transformers.BertConfig(**common))
    albert = transformers.AlbertConfig(embedding_size=config.embedding_size, num_hidden_groups=1,
                                       inner_group_num=1, hidden_act="gelu_new",
                                       bos_token_id=tokenizer.cls_token_id,
                                       eos_token_id=tokenizer.sep_token_id, **common)
    return transformers.AlbertForMaskedLM(albert)


def _continued_model(config: PretrainConfig):
    """The model a continued run starts from, seeded by ``config.seed`` where anything is new:

    - ``init`` has an MLM head of ``config``'s architecture: that model, head and all;
    - ``init`` is a BERT without one and ``architecture`` is ``"bert"``: its body under a freshly
      initialised BERT MLM head (dense, GELU, LayerNorm, decoder tied to the word embeddings);
    - ``init`` is a BERT and ``architecture`` is ``"albert"``: the recursive conversion
      (``dupbert.tools.recursive.albert_from_bert``: one shared block, the average of the six, and
      factorised embeddings of ``embedding_size``) under a fresh ALBERT head.

    ``grow`` then duplicates blocks (``dupbert.tools.duplicate.duplicate_layers``); dropout is
    ``config``'s.

    Raises:
        ValueError: the init model's sizes differ from ``config``'s (names them).
    """
    import transformers

    from ..tools.duplicate import duplicate_layers
    from ..tools.recursive import albert_from_bert
    from ..core.zoo import zoo_folder

    folder = zoo_folder(config.init)
    source = transformers.AutoConfig.from_pretrained(folder)
    wanted = dict(vocab_size=config.vocab_size, hidden_size=config.hidden_size,
                  num_attention_heads=config.num_heads, intermediate_size=config.intermediate_size)
    if source.model_type == config.architecture:
        wanted["num_hidden_layers"] = config.num_layers if not config.grow else \
            source.num_hidden_layers
    differ = {k: (getattr(source, k), v) for k, v in wanted.items() if getattr(source, k) != v}
    if differ or (source.model_type != config.architecture and source.model_type != "bert"):
        raise ValueError(f"{config.name}: the init model {config.init!r} ({source.model_type}) "
                         f"does not fit the configuration ({differ}, as (init, config))")
    source.update(dict(hidden_dropout_prob=config.dropout,
                       attention_probs_dropout_prob=config.dropout))
    transformers.logging.set_verbosity_error()  # the head is new by design: no "newly initialized"
    try:
        if config.architecture == "albert" and source.model_type == "bert":
            model = albert_from_bert(transformers.BertModel.from_pretrained(folder, config=source),
                                     config.embedding_size, applications=config.num_layers)
        else:
            has_head = any(a.endswith("ForMaskedLM") for a in source.architectures or ())
            source.update(dict(tie_word_embeddings=True))
            if not has_head:
                source.update(dict(architectures=["BertForMaskedLM"]))
            model = transformers.AutoModelForMaskedLM.from_pretrained(folder, config=source)
    finally:
        transformers.logging.set_verbosity_warning()
    return duplicate_layers(model, list(config.grow)) if config.grow else model


def mask_tokens(tokenizer, input_ids, mask_rate: float):
    """BERT's dynamic masking of ``[B, T]`` (15% of non-special positions, 80/10/10), drawn from
    torch's global RNG; returns ``(input_ids, labels)``, labels -100 where not masked.
    """
    from transformers import DataCollatorForLanguageModeling

    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=mask_rate,
                                               return_tensors="pt")
    return collator.torch_mask_tokens(input_ids.clone())


def masked_lm_loss(model, input_ids, labels, attention_mask=None):
    """Mean cross-entropy of the MLM head on the masked positions only (``labels != -100``):
    equal to ``model(input_ids, labels=labels).loss`` at a fraction of the decoder's cost."""
    import torch.nn.functional as F

    hidden = model.base_model(input_ids=input_ids,
                              attention_mask=attention_mask).last_hidden_state  # [B, T, H]
    chosen = labels != -100
    logits = _head(model)(hidden[chosen])  # [masked, V]
    return F.cross_entropy(logits.float(), labels[chosen])


def _head(model):
    """The MLM head of a ``BertForMaskedLM`` (``cls``) or ``AlbertForMaskedLM``
    (``predictions``): hidden states ``[..., H]`` to logits ``[..., V]``."""
    return model.cls if hasattr(model, "cls") else model.predictions


def _step_seed(seed: int, step: int) -> int:
    return seed * 1_000_003 + step


def batch_rows(config: PretrainConfig, n_rows: int, step: int) -> np.ndarray:
    """Row indices of step ``step``'s batch: epochs are seeded permutations of ``n_rows``."""
    start = step * config.batch_size
    out = []
    while len(out) < config.batch_size:
        epoch, offset = divmod(start + len(out), n_rows)
        order = np.random.default_rng([config.seed, epoch]).permutation(n_rows)
        out.extend(order[offset:offset + config.batch_size - len(out)].tolist())
    return np.asarray(out)


# --------------------------------------------------------------------------------------------------
# The run: prepared data, checkpoints, the emergence record.


def prepare(config: PretrainConfig, data_dir: str | os.PathLike, work: str | os.PathLike,
            progress: bool = True) -> tuple[object, np.ndarray]:
    """The tokenizer (``work/tokenizer-<V>``) and packed rows (``work/train-<V>-<T>.npy``), built
    once (atomic writes). The published model's tokenizer is reused when there is one: WordPiece
    training breaks ties in no fixed order.

    A ``corpus="reactions"`` run takes rxnfp-bert's tokenizer and one padded row per reaction
    (``dupbert.training.pretrain_reactions.prepare_reactions``).

    Raises:
        CorpusError: as :func:`pretraining_documents`.
    """
    from transformers import AutoTokenizer

    work = Path(work)
    if config.corpus == "reactions":
        from .pretrain_reactions import prepare_reactions

        tokenizer, rows, report = prepare_reactions(config.seq_length, data_dir, work)
        write_json(work / "corpus-reactions.json", report)
        return tokenizer, rows
    vocabulary = config.init or config.vocab_size  # a continued model keeps its tokenizer
    tok_dir = work / f"tokenizer-{vocabulary}"
    rows_path = work / f"train-{vocabulary}-{config.seq_length}.npy"
    report_path = work / "corpus.json"
    if tok_dir.is_dir() and rows_path.is_file():
        return AutoTokenizer.from_pretrained(tok_dir), np.load(rows_path)
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    documents, report = pretraining_documents(data_dir, on_overlap="drop")
    if progress:
        print(f"corpus: {report} ({time.time() - t0:.0f} s)", flush=True)
    published = WEIGHTS / config.name / "tokenizer.json"
    if not tok_dir.is_dir():
        with atomic_folder(tok_dir) as tmp:
            if config.init is not None:
                from ..core.zoo import zoo_folder

                AutoTokenizer.from_pretrained(zoo_folder(config.init)).save_pretrained(tmp)
            elif published.is_file():  # WordPiece training breaks ties in no fixed order: reuse it
                for name in ("tokenizer.json", "tokenizer_config.json"):
                    shutil.copy(published.with_name(name), tmp / name)
            else:
                train_tokenizer(documents, config.vocab_size, tmp)
    tokenizer = AutoTokenizer.from_pretrained(tok_dir)
    rows = pack(tokenizer, documents, config.seq_length)
    if rows.shape[0] < config.batch_size:
        raise CorpusError(f"the corpus fills {rows.shape[0]} sequences of {config.seq_length} "
                          f"tokens, fewer than one batch ({config.batch_size}): it needs more text")
    report.update(tokens=int(rows.size), sequences=int(rows.shape[0]))
    write_json(report_path, report)
    atomic_save_npy(rows_path, rows)
    if progress:
        print(f"packed {rows.shape[0]} sequences of {config.seq_length} tokens "
              f"({time.time() - t0:.0f} s)", flush=True)
    return tokenizer, rows


def _emergence_rows(model, tokenizer, config: PretrainConfig, step: int, texts: Sequence[str],
                   heldout, seen: int) -> list[dict]:
    """The emergence record at one step: held-out MLM loss and masked top-1 at the last hidden state
    (``measure="mlm"``), and per hidden state ``"reconstruction"``, ``"masked"`` and
    ``"reconstruction, duplicated"`` (:func:`dupbert.tools.probe.paper_duplications`).
    """
    import torch

    base = dict(model=config.name, step=step, tokens_seen=seen)
    model.eval()
    with torch.random.fork_rng(), torch.inference_mode():
        torch.manual_seed(12345)
        batch, attention = _batch(config, tokenizer, heldout)
        inputs, labels = mask_tokens(tokenizer, batch, config.mask_rate)
        inputs, labels, attention = _on(model, inputs, labels, attention)
        hidden = model.base_model(input_ids=inputs, attention_mask=attention).last_hidden_state
        chosen = labels != -100
        logits = _head(model)(hidden[chosen])
        loss = float(torch.nn.functional.cross_entropy(logits, labels[chosen]))
        best = logits.topk(5, dim=-1).indices
        target = labels[chosen]
    rows = [dict(base, measure="mlm", layer=config.num_layers,
                 top1=float((best[:, 0] == target).float().mean()),
                 top5=float((best == target[:, None]).any(-1).float().mean()),
                 n_tokens=int(chosen.sum()), loss=loss)]
    if step == 0:  # always answering the most frequent of the chosen tokens scores this
        counts = torch.bincount(target).sort(descending=True).values
        rows.append(dict(base, measure=MOST_FREQUENT, layer=config.num_layers,
                         top1=float(counts[0] / len(target)),
                         top5=float(counts[:5].sum() / len(target)), n_tokens=len(target),
                         loss=float("nan")))
    rows += _probe_rows(model, tokenizer, config, texts, base)
    model.train()
    return rows


def _probe_rows(model, tokenizer, config: PretrainConfig, texts: Sequence[str],
                base: dict) -> list[dict]:
    """The emergence record's rows per hidden state (``"reconstruction"``, ``"masked"``,
    ``"reconstruction, duplicated"``) of the model in eval mode: each a dict of ``base``'s fields
    and ``measure``, ``layer``, ``top1``, ``top5``, ``n_tokens``, ``loss`` (NaN)."""
    from ..tools.duplicate import duplicate_layers
    from ..tools.probe import BASELINE, TruncationWarning, masked_prediction_accuracy, \
        paper_duplications, reconstruction_accuracy

    rows = []
    kwargs = dict(batch_size=16, max_length=config.seq_length, progress=False)
    (order,) = [o for label, o in paper_duplications(model).items() if label != BASELINE]
    duplicated = duplicate_layers(model, order)
    with warnings.catch_warnings():  # the held-out paragraphs are read to seq_length, by design
        warnings.simplefilter("ignore", TruncationWarning)
        frames = (
            ("reconstruction", reconstruction_accuracy(model, tokenizer, texts, **kwargs)),
            ("masked", masked_prediction_accuracy(model, tokenizer, texts, rule="mask", **kwargs)),
            ("reconstruction, duplicated",
             reconstruction_accuracy(duplicated, tokenizer, texts, **kwargs)))
    for measure, frame in frames:
        rows += [dict(base, measure=measure, layer=int(r.layer), top1=r.top1, top5=r.top5,
                      n_tokens=int(r.n_tokens), loss=float("nan")) for r in frame.itertuples()]
    return rows


def pretrain(config: PretrainConfig, data_dir: str | os.PathLike, work: str | os.PathLike,
             results: str | os.PathLike, out: str | os.PathLike | None = None,
             stop_after: int | None = None, progress: bool = True,
             published: str | os.PathLike | None = None, device: str = "cpu") -> Path | None:
    """Pretrain one stage of ``config``, append per-step loss rows to ``results/pretrain-loss.csv``
    and the emergence record to ``results/emergence.csv``, and save the stage's final model (with
    :data:`STAGE_FILE`) to ``out`` (default ``work/<name>/final``).

    Where the stage starts: ``work/<name>/checkpoint.pt`` if it is further on than the published
    model; else the published model (``published``, default ``dupbert.core.zoo.weights_dir(name)``) if
    its :data:`STAGE_FILE` says it ended an earlier stage, with a fresh optimizer and warm-up (its
    evaluation at that step, made before it was published, is kept); else ``init`` (or a random
    initialisation) at step 0. Every stage after the first thus starts from the published weights
    (committed, for a model the repository takes), and a staged run is the same wherever it
    resumes. A run whose published stage finished it (its last step, or ``target_top1`` reached)
    does nothing and returns the published folder; so does one whose last stage ended with masked
    top-1 at the output below ``stage_gate`` (in the emergence record).

    Loss rows: the step's training loss (masked tokens, nats), ``tokens_seen`` including the step,
    ``lr`` after the step's update, ``elapsed_s`` counted across stages.

    Args:
        stop_after: stop (with a checkpoint) after this step.
        device: where the model trains and is evaluated (``"cpu"``, ``"cuda"``, ...); batches and
            their masking are drawn on the CPU from the same seeds, so only the arithmetic moves.
            The committed records were all made on the CPU.

    Returns:
        The final model's folder, or ``None`` when ``stop_after`` stopped the stage.

    Raises:
        CheckpointMismatch: the checkpoint, or the published stage, was made with another
            configuration (names the fields).
        CorpusError: as :func:`prepare`.
        DeviceNotAvailable: ``device`` is not one this machine has
            (``dupbert.core.checks.check_device``).
    """
    import torch

    device = torch.device(check_device(device))
    torch.set_num_threads(int(os.environ.get("DUPBERT_THREADS", "1")))
    run_dir = Path(work) / config.name
    published = Path(published) if published is not None else weights_dir(config.name)
    step, saved, done = _resume_point(config, run_dir / "checkpoint.pt", published)
    if saved is None and done is not None and (done["finished"]
                                                or gate_closed(config, done["step"], results)):
        return published  # nothing left to train
    tokenizer, rows = prepare(config, data_dir, work, progress)
    if config.corpus == "reactions":
        from .pretrain_reactions import heldout_reactions, reaction_rows

        texts = heldout_reactions(data_dir)
        heldout = reaction_rows(tokenizer, texts, config.seq_length)
    else:
        paragraphs = heldout_texts(data_dir, 400, config.heldout_unk)  # the first 64: the probe's
        heldout = pack(tokenizer, [paragraphs], config.seq_length)[:64]
        texts = paragraphs[:64]
    seen = tokens_seen(config, rows, tokenizer.pad_token_id)
    results = Path(results)
    results.mkdir(parents=True, exist_ok=True)
    loss_path, emergence_path = results / "pretrain-loss.csv", results / "emergence.csv"
    fresh = saved is None and done is not None  # a new stage, from the published weights
    elapsed = saved["elapsed_s"] if saved else done["elapsed_s"] if fresh else 0.0
    model = _starting_model(config, tokenizer, saved, published if fresh else None).to(device)
    optimizer, schedule = _optimizer(model, config, saved)
    drop_rows_after(loss_path, LOSS_COLUMNS, config.name, step)
    drop_rows_after(emergence_path, EMERGENCE_COLUMNS, config.name,
                    step if fresh else step - 1)
    end = config.stage_end(step - 1 if saved else step)  # a checkpoint's stage, else the next
    last, reached = end if stop_after is None else min(stop_after, end), False
    eval_steps, identity = set(config.eval_steps()) - ({step} if fresh else set()), \
        _identity(config, end)

    def checkpoint():
        _save_checkpoint(run_dir / "checkpoint.pt", model, optimizer, schedule, step, identity,
                         time.time() - started)

    pending: list[dict] = []
    started = time.time() - elapsed
    from tqdm.auto import tqdm
    bar = tqdm(total=end, initial=step, desc=f"{config.name} ({_stage_label(config, end)})",
               unit="step", disable=not progress, mininterval=30)
    while True:
        if step in eval_steps:
            evaluated = _emergence_rows(model, tokenizer, config, step, texts, heldout,
                                        int(seen[step]))
            append_rows(emergence_path, evaluated, EMERGENCE_COLUMNS)
            reached = _target_reached(evaluated, config)
            if reached and step < last:  # done: flush the loss rows and keep this model
                last = step
                append_rows(loss_path, pending, LOSS_COLUMNS)
                pending = []
                checkpoint()
        if step >= last:
            break
        pending.append(_train_step(model, optimizer, schedule, config, tokenizer, rows, step,
                                   int(seen[step + 1])))
        step += 1
        pending[-1]["elapsed_s"] = round(time.time() - started, 1)
        bar.update(1)
        if step % config.checkpoint_every == 0 or step == last:
            append_rows(loss_path, pending, LOSS_COLUMNS)
            pending = []
            checkpoint()
    bar.close()
    if step < end and not reached:
        return None  # stopped early (stop_after): the checkpoint holds the run
    out = Path(out) if out is not None else run_dir / "final"
    model.eval()
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    write_json(out / STAGE_FILE, dict(step=step, stage=end // config.stage_size,
                                       stages=config.total_steps // config.stage_size,
                                       finished=reached or step == config.total_steps,
                                       elapsed_s=round(time.time() - started, 1),
                                       config=identity))
    return out


def gate_closed(config: PretrainConfig, step: int, results: str | os.PathLike) -> bool:
    """Whether ``config.stage_gate`` stops the run after the stage that ended at ``step``: masked
    top-1 at the output there (``results/emergence.csv``) is below it. False without a gate,
    before the end of stage ``config.stage_gate_from``, or without that row."""
    from .emergence import output_top1

    path = Path(results) / "emergence.csv"
    if config.stage_gate is None or step < config.stage_gate_from * config.stage_size \
            or not path.is_file():
        return False
    record = pd.read_csv(path)
    top1 = output_top1(record[record["model"] == config.name])
    return step in top1.index and float(top1.loc[step, config.name]) < config.stage_gate


def _stage_label(config: PretrainConfig, end: int) -> str:
    return f"stage {end // config.stage_size} of {config.total_steps // config.stage_size}"


def _resume_point(config: PretrainConfig, checkpoint: Path, published: Path
                  ) -> tuple[int, dict | None, dict | None]:
    """``(step, checkpoint, stage)``: the checkpoint when it is further on than the published
    model, else ``(its step, None, its STAGE_FILE)``, else ``(0, None, None)``; read before any
    work.

    Raises:
        CheckpointMismatch: the checkpoint, or the published stage, was made with another
            configuration.
    """
    import torch

    stage_file = published / STAGE_FILE
    done = json.loads(stage_file.read_text(encoding="utf-8")) if stage_file.is_file() else None
    if done is not None and "config" in done:
        _refuse_another(done["config"], _identity(config, config.stage_end(done["step"] - 1)),
                        f"the published stage {stage_file}")
    saved = torch.load(checkpoint, weights_only=True, map_location="cpu") \
        if checkpoint.is_file() else None
    if saved is None or saved["step"] <= (done["step"] if done else 0):
        return (done["step"], None, done) if done else (0, None, None)
    _refuse_another(saved["config"], _identity(config, config.stage_end(saved["step"] - 1)),
                    f"checkpoint {checkpoint}")
    return saved["step"], saved, None


def _refuse_another(saved: dict, identity: dict, what: str) -> None:
    differences = _differences(saved, identity)
    if differences:
        raise CheckpointMismatch(
            f"{what} was made with another configuration ({differences}, as (then, now)); "
            "resume with its configuration, or move it away to start anew")


def _starting_model(config: PretrainConfig, tokenizer, saved: dict | None,
                    published: Path | None):
    """The model as the stage starts: built (:func:`build_model`) and, resuming, given the
    checkpoint's weights; or, after an earlier stage, loaded from its ``published`` folder (a
    zoo overlay is composed first, ``dupbert.core.zoo.zoo_folder``)."""
    import torch
    import transformers

    if saved is None and published is not None:
        from ..core.zoo import zoo_folder

        folder = published if (published / "model.safetensors").is_file() else \
            zoo_folder(config.name)
        return transformers.AutoModelForMaskedLM.from_pretrained(
            folder, dtype=torch.float32, hidden_dropout_prob=config.dropout,
            attention_probs_dropout_prob=config.dropout)
    model = build_model(config, tokenizer)
    if saved is not None:
        model.load_state_dict(saved["model"])
    return model


def _optimizer(model, config: PretrainConfig, saved: dict | None):
    """AdamW (:func:`_parameter_groups`) and a linear schedule over one stage: ``warmup_steps`` up
    to the peak, down to 0 at the stage's end; their state from ``saved`` when resuming."""
    import torch
    import transformers

    optimizer = torch.optim.AdamW(_parameter_groups(model, config), lr=config.learning_rate,
                                  betas=(0.9, 0.98), eps=1e-6)
    schedule = transformers.get_linear_schedule_with_warmup(optimizer, config.warmup_steps,
                                                            config.stage_size)
    if saved is not None:
        optimizer.load_state_dict(saved["optimizer"])
        schedule.load_state_dict(saved["schedule"])
    return optimizer, schedule


def _train_step(model, optimizer, schedule, config: PretrainConfig, tokenizer, rows, step: int,
                tokens_seen: int) -> dict:
    """Step ``step + 1``: its seeded batch and masking, one AdamW update; its loss row
    (``tokens_seen``: through this step)."""
    import torch

    model.train()
    torch.manual_seed(_step_seed(config.seed, step))
    batch, attention = _batch(config, tokenizer, rows[batch_rows(config, len(rows), step)])
    inputs, labels = mask_tokens(tokenizer, batch, config.mask_rate)
    inputs, labels, attention = _on(model, inputs, labels, attention)
    loss = masked_lm_loss(model, inputs, labels, attention)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    schedule.step()
    optimizer.zero_grad(set_to_none=True)
    return dict(model=config.name, step=step + 1, tokens_seen=tokens_seen,
                loss=float(loss.detach()), lr=schedule.get_last_lr()[0])


def _batch(config: PretrainConfig, tokenizer, rows: np.ndarray):
    """``(input_ids, attention_mask)`` of uint16 ``rows``: packed English rows as they are (no
    mask); padded reaction rows cut after the longest, with their mask."""
    import torch

    batch = torch.as_tensor(rows.astype(np.int64))
    if config.corpus != "reactions":
        return batch, None
    from .pretrain_reactions import trim

    return trim(batch, tokenizer.pad_token_id)


def _on(model, *tensors):
    """``tensors`` (``None`` kept) moved to the device of ``model``'s parameters."""
    device = next(model.parameters()).device
    return tuple(t if t is None else t.to(device) for t in tensors)


def tokens_seen(config: PretrainConfig, rows: np.ndarray, pad_id: int) -> np.ndarray:
    """Tokens trained on through each step, ``[total_steps + 1]`` (index 0: none): every
    position of packed English rows; the real (not padding) tokens of reaction rows."""
    steps = np.arange(config.total_steps + 1, dtype=np.int64)
    if config.corpus != "reactions":
        return steps * config.batch_size * config.seq_length
    real = (rows != pad_id).sum(1)
    per_step = [int(real[batch_rows(config, len(rows), s)].sum()) for s in steps[:-1]]
    return np.concatenate([[0], np.cumsum(per_step)])


def _identity(config: PretrainConfig, stage_end: int) -> dict:
    """What a checkpoint shares with the stage that resumes it: the configuration with the
    stage's last step in place of the horizon (``total_steps``, ``stage_steps``) and without the
    gate between stages, so a run later cut into stages resumes a checkpoint of its first stage."""
    identity = dataclasses.asdict(config)
    for field in ("total_steps", "stage_steps", "stage_gate", "stage_gate_from"):
        del identity[field]
    return dict(identity, stage_end=stage_end)


def _target_reached(evaluated: list[dict], config: PretrainConfig) -> bool:
    """Masked top-1 at the output (the last hidden state's ``"masked"`` row) >= ``target_top1``."""
    if config.target_top1 is None:
        return False
    masked = [row for row in evaluated if row["measure"] == "masked"]
    return max(masked, key=lambda row: row["layer"])["top1"] >= config.target_top1


def _differences(saved: dict, identity: dict) -> dict:
    """Fields where a checkpoint's configuration and ``identity`` (:func:`_identity`) differ, as
    ``(saved, now)``; a field newer than the checkpoint counts only when set away from its
    default, and a checkpoint from before stages had its horizon as its stage's end."""
    defaults = {f.name: f.default for f in dataclasses.fields(PretrainConfig)}
    if "stage_end" not in saved:
        saved = dict(saved, stage_end=saved["total_steps"])
        for field in ("total_steps", "stage_steps", "stage_gate", "stage_gate_from"):
            saved.pop(field, None)
    saved = {k: (list(v) if isinstance(v, tuple) else v) for k, v in saved.items()}
    now = {k: (list(v) if isinstance(v, tuple) else v) for k, v in identity.items()}
    return {k: (saved.get(k, defaults.get(k)), v) for k, v in now.items()
            if saved.get(k, defaults.get(k)) != v}


def _parameter_groups(model, config: PretrainConfig) -> list[dict]:
    """AdamW's groups: weight decay except on biases and LayerNorm weights; the head at
    ``head_learning_rate`` (when set); the input embeddings frozen (``freeze_embeddings``)."""
    if config.freeze_embeddings:
        model.base_model.embeddings.requires_grad_(False)
    head = {id(p) for p in _head(model).parameters()} - \
        {id(p) for p in model.base_model.parameters()}  # the tied decoder weight is the body's
    parts = [(lambda p: True, config.learning_rate)] if config.head_learning_rate is None else \
        [(lambda p: id(p) not in head, config.learning_rate),
         (lambda p: id(p) in head, config.head_learning_rate)]
    no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight")
    groups = []
    for belongs, lr in parts:
        for decay in (True, False):
            params = [p for n, p in model.named_parameters()
                      if p.requires_grad and belongs(p) and n.endswith(no_decay) != decay]
            if params:
                groups.append({"params": params, "lr": lr,
                               "weight_decay": config.weight_decay if decay else 0.0})
    return groups


def _save_checkpoint(path: Path, model, optimizer, schedule, step: int, identity: dict,
                     elapsed: float) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "schedule": schedule.state_dict(), "step": step, "config": identity,
                "elapsed_s": elapsed}, tmp)
    os.replace(tmp, path)


def _measure_quality(folder: str | os.PathLike, corpus: str = "english") -> dict:
    """``dupbert.training.quality.masked_top1`` of the model in ``folder`` (as published) on its
    held-out text (the measure RQ1's MLM-quality floor reads): English, or USPTO-50k test for
    ``"reactions"``."""
    import transformers

    from ..core.data import load_texts
    from .quality import ENGLISH_HELDOUT, N_SEQUENCES, masked_top1

    model = transformers.AutoModelForMaskedLM.from_pretrained(folder).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    heldout = "uspto50k-test" if corpus == "reactions" else ENGLISH_HELDOUT
    return masked_top1(model, tokenizer, load_texts(heldout, N_SEQUENCES))


def main(argv: list[str] | None = None) -> int:
    """``python -m dupbert.training.pretrain NAME [--data-dir D] [--work W] [--results R] [--out O]``:
    pretrain (or resume) one of :data:`MODELS`."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m dupbert.training.pretrain", description=main.__doc__)
    parser.add_argument("name", choices=sorted(MODELS))
    parser.add_argument("--data-dir", default=os.environ.get("DUPBERT_DATA_DIR"))
    parser.add_argument("--work", default=None,
                        help="checkpoints and prepared data (default: the dupbert cache's "
                             "pretrain/, which outlives the working tree)")
    parser.add_argument("--results", default="results/cpu")
    parser.add_argument("--out", default=None)
    parser.add_argument("--stop-after", type=int, default=None)
    parser.add_argument("--device", default="cpu",
                        help="where to train: cpu (default; every committed record), cuda, cuda:1, ...")
    parser.add_argument("--publish", action="store_true",
                        help="copy the finished model into models/NAME with its card")
    args = parser.parse_args(argv)
    if not args.data_dir:
        parser.error("no data directory: pass --data-dir or set DUPBERT_DATA_DIR")
    config = MODELS[args.name]
    args.work = args.work or str(cache_dir() / "pretrain")
    legacy = Path(".cache/pretrain") / args.name / "checkpoint.pt"  # where checkpoints were kept
    if legacy.is_file() and not (Path(args.work) / args.name / "checkpoint.pt").is_file():
        parser.error(f"{legacy} is a checkpoint of {args.name} in the old place: move the folder "
                     f"{legacy.parent} into {args.work} to resume it, or pass --work .cache/pretrain")
    try:  # the device is checked before any work
        out = pretrain(config, args.data_dir, args.work, args.results, args.out, args.stop_after,
                       device=args.device)
    except DeviceNotAvailable as error:
        parser.error(str(error))
    if out is None:
        print(f"{args.name}: stopped at step {args.stop_after}; run again to resume")
        return 0
    done = json.loads((out / STAGE_FILE).read_text(encoding="utf-8"))
    if out.resolve() == weights_dir(args.name).resolve():
        why = "finished" if done["finished"] else \
            f"stopped by its stage gate (masked top-1 below {config.stage_gate:g})"
        print(f"{args.name}: {why} at step {done['step']:,}, published in {out}; nothing to do")
        return 0
    if args.publish:
        report_name = "corpus-reactions.json" if config.corpus == "reactions" else "corpus.json"
        report = json.loads((Path(args.work) / report_name).read_text(encoding="utf-8"))
        out = publish(config, out, weights_dir(args.name), args.results, report,
                      measure_quality=lambda folder: _measure_quality(folder, config.corpus))
    print(f"{args.name}: {out}")
    if not done["finished"]:
        first = "commit its published weights" if args.publish else \
            "publish it (--publish) and commit its weights"
        print(f"{args.name}: stage {done['stage']} of {done['stages']} ended at step "
              f"{done['step']:,}; {first}, then run again for stage {done['stage'] + 1}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
