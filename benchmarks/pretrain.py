"""Pretraining speed: dupbert.training.pretrain's loop against the plain way, and the levers between them.

Arms, all the bert-en-small shape (6 blocks, H 256, one torch thread), seeded, on the staged
English corpus, each trained for the same number of real (non-padding) tokens with AdamW at a
constant learning rate, then scored on the same 64 held-out sequences with the same masks:

- ``plain``: ``transformers.Trainer`` + ``DataCollatorForLanguageModeling``, one paragraph per
  sequence (truncated to 128 tokens), batches padded to their longest, the decoder on every
  position (``model(**batch).loss``), vocabulary 16,384;
- ``packed``: our loop, sequences packed without padding, decoder on every position;
- ``ours``: packed, decoder on masked positions only (``dupbert.training.pretrain.masked_lm_loss``);
- ``ours-30k``: as ``ours`` with bert-base's vocabulary size (30,522): the vocabulary lever;
- ``ours-bf16``: as ``ours`` under ``torch.autocast("cpu", torch.bfloat16)``, speed only.

Tokens per second count real tokens (padding excluded). The FLOP rate counts the matrix multiplies
of a training step (3 x forward: the encoder's linear layers and attention on every position, the
head's transform and decoder on the positions it is applied to) against the single-thread fp32
matrix-multiply rate measured in the same run (``torch.mm`` of 1024 x 1024 matrices).

    python benchmarks/pretrain.py [--tokens 65536]     # ~8 min on one free core
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: E402


def matmul_gflops(n: int = 1024, repeats: int = 5) -> float:
    import torch

    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    best = min(_timed(lambda: torch.mm(a, b)) for _ in range(repeats))
    return 2 * n ** 3 / best / 1e9


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def step_flops(config, tokens: int, decoded: int) -> float:
    """Matrix-multiply FLOPs of one training step (3 x forward) of a BERT of ``config``:
    ``tokens`` positions through the encoder, ``decoded`` through the head."""
    h, i, layers, v, t = (config.hidden_size, config.intermediate_size, config.num_layers,
                          config.vocab_size, config.seq_length)
    encoder = layers * tokens * (2 * (4 * h * h + 2 * h * i) + 4 * t * h)
    head = decoded * 2 * (h * h + h * v)
    return 3.0 * (encoder + head)


def main(argv=None) -> int:
    import numpy as np
    import torch
    import transformers
    from transformers import DataCollatorForLanguageModeling

    from dupbert.training import pretrain as P

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=65536, help="real tokens per arm")
    parser.add_argument("--lr", type=float, default=5e-4)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    data_dir = os.environ.get("DUPBERT_DATA_DIR", str(_common.ROOT.parent / "shared" / "data"))
    config = P.MODELS["bert-en-small"]
    tokenizer, rows = P.prepare(config, data_dir, _common.ROOT / ".cache" / "pretrain")
    documents = P.read_documents(Path(data_dir) / P.PRETRAIN_FILES[0])[:200]
    paragraphs = [p for doc in documents for p in doc if len(p.split()) > 5][:4000]
    heldout = torch.as_tensor(P.pack(tokenizer, [P.heldout_texts(data_dir, 400)],
                                     config.seq_length)[:64].astype(np.int64))
    torch.manual_seed(12345)
    held_in, held_labels = P.mask_tokens(tokenizer, heldout, config.mask_rate)
    gflops = matmul_gflops()
    before = _common.load()

    def fresh(vocab_size=config.vocab_size):
        torch.manual_seed(0)
        model = P.build_model(P.PretrainConfig(name="bench", architecture="bert",
                                               vocab_size=vocab_size), tokenizer)
        return model, torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.98),
                                        eps=1e-6, weight_decay=0.01)

    def heldout_loss(model):
        model.eval()
        with torch.inference_mode():
            loss = float(model(input_ids=held_in, labels=held_labels).loss)
        model.train()
        return loss

    results = {}

    def ours(name, vocab_size=config.vocab_size, masked_only=True, bf16=False, budget=None):
        model, optimizer = fresh(vocab_size)
        steps = (budget or args.tokens) // (config.batch_size * config.seq_length)
        elapsed, flops = 0.0, 0.0
        for step in range(steps):
            torch.manual_seed(step)
            batch = torch.as_tensor(rows[P.batch_rows(config, len(rows), step)].astype(np.int64))
            inputs, labels = P.mask_tokens(tokenizer, batch, config.mask_rate)
            start = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = P.masked_lm_loss(model, inputs, labels) if masked_only \
                    else model(input_ids=inputs, labels=labels).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            elapsed += time.perf_counter() - start
            decoded = int((labels != -100).sum()) if masked_only else batch.numel()
            flops += step_flops(dataclass_with_vocab(config, vocab_size), batch.numel(), decoded)
        tokens = steps * config.batch_size * config.seq_length
        results[name] = dict(tokens=tokens, seconds=round(elapsed, 2),
                             tokens_per_s=round(tokens / elapsed, 1),
                             gflops=round(flops / elapsed / 1e9, 2),
                             flop_fraction=round(flops / elapsed / 1e9 / gflops, 3),
                             heldout_loss=None if bf16 else round(heldout_loss(model), 4))
        print(name, results[name], flush=True)

    def plain():
        model, optimizer = fresh()
        encoded = tokenizer(paragraphs, truncation=True, max_length=config.seq_length)
        dataset = [{"input_ids": ids} for ids in encoded["input_ids"]]
        mean_length = float(np.mean([len(d["input_ids"]) for d in dataset]))
        steps = int(round(args.tokens / (config.batch_size * mean_length)))
        times = []

        class Clock(transformers.TrainerCallback):
            def on_step_begin(self, *a, **k):
                times.append(-time.perf_counter())

            def on_step_end(self, *a, **k):
                times[-1] += time.perf_counter()

        trainer = transformers.Trainer(
            model=model, optimizers=(optimizer, None), train_dataset=dataset,
            data_collator=DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15),
            args=transformers.TrainingArguments(
                output_dir=str(_common.ROOT / ".cache" / "bench-pretrain"), max_steps=steps,
                per_device_train_batch_size=config.batch_size, learning_rate=args.lr,
                lr_scheduler_type="constant", report_to=[], save_strategy="no",
                logging_strategy="no", use_cpu=True, seed=0, dataloader_num_workers=0,
                disable_tqdm=True),
            callbacks=[Clock()])
        trainer.train()
        tokens = steps * config.batch_size * mean_length
        elapsed = float(sum(times))
        flops = steps * step_flops(config, config.batch_size * config.seq_length,
                                   config.batch_size * config.seq_length)  # padded upper bound
        results["plain"] = dict(tokens=round(tokens), seconds=round(elapsed, 2),
                                tokens_per_s=round(tokens / elapsed, 1),
                                gflops=round(flops / elapsed / 1e9, 2),
                                flop_fraction=round(flops / elapsed / 1e9 / gflops, 3),
                                heldout_loss=round(heldout_loss(model), 4),
                                mean_sequence_tokens=round(mean_length, 1))
        print("plain", results["plain"], flush=True)

    plain()
    ours("packed", masked_only=False)
    ours("ours")
    ours("ours-30k", vocab_size=30522)
    ours("ours-bf16", bf16=True, budget=4 * config.batch_size * config.seq_length)
    base = results["plain"]["tokens_per_s"]
    ratios = {name: round(r["tokens_per_s"] / base, 2) for name, r in results.items()}
    print("tokens/s relative to plain:", ratios)
    path = _common.write_results("pretrain", "cpu", {
        "machine": _common.machine("cpu"), "load_before": before, "load_after": _common.load(),
        "settings": vars(args), "matmul_gflops": round(gflops, 2), "arms": results,
        "speedup_vs_plain": ratios})
    print(f"written to {path}")
    return 0


def dataclass_with_vocab(config, vocab_size):
    import dataclasses

    return dataclasses.replace(config, vocab_size=vocab_size)


if __name__ == "__main__":
    raise SystemExit(main())
