"""Benchmark: ``dupbert.finetune`` against ``run_glue.py``'s defaults, SST-2, all-MiniLM-L6-v2.

All train the same initial model (``dupbert.training.finetuning.build_model``: the pretrained encoder and a
task head seeded by ``--seed``) on the same SST-2 training subset (``--steps x --batch``
sentences, stratified, fixed seed: one epoch) for the same number of optimisation steps, with
the same learning rate, batch, seed, linear schedule and no warm-up or weight decay, and are
scored on the same evaluation subset:

* ``dupbert``: ``dupbert.training.finetuning.finetune`` as it is: dynamic padding to the longest sentence
  of each batch, random batches (the same as ``run_glue``), and on GPUs bf16 (attention:
  transformers' default, SDPA, for every arm).
* ``grouped``: the same with ``group_by_length=True`` (Trainer's length-grouped sampler): fewer
  padding tokens still, but each run of 50 batches goes from longest to shortest; not the
  library's default, for what this benchmark shows it costs in accuracy after few steps.
* ``run_glue``: ``transformers.Trainer`` as ``run_glue.py`` runs it by default: every sentence
  padded to ``max_length`` 128, random batches, fp32, evaluation batch 8. Written out here
  with Trainer and ``padding="max_length"``; the library is not patched.

The learning rate is ``--learning-rate`` (default 1e-4) for every arm: with run_glue's 2e-5,
30 steps leave all-MiniLM-L6-v2 at the majority class, and equal accuracies would mean nothing.

Each runs in a fresh Python process. Reported: training examples per second (steps x batch /
``trainer.train()`` time), evaluation examples per second, and the accuracy after the steps.

Run (default: a few minutes on 2 CPU cores; results in benchmarks/results/finetune-<device>.json):

    python benchmarks/finetune.py
    python benchmarks/finetune.py --device cuda --steps 200 --eval-samples 872
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _common  # noqa: E402

MODEL, TASK = "all-MiniLM-L6-v2", "sst2"


def run_dupbert(spec: dict, group_by_length: bool = False) -> dict:
    from dupbert.training.finetuning import HyperParameters, finetune

    hp = HyperParameters.for_task("classification", max_steps=spec["steps"],
                                  batch_size=spec["batch"], learning_rate=spec["learning_rate"],
                                  group_by_length=group_by_length)
    row = finetune(MODEL, TASK, seed=spec["seed"], hyperparameters=hp,
                   max_train_samples=spec["steps"] * spec["batch"],
                   max_eval_samples=spec["eval_samples"], device=spec["device"], progress=False)
    return {"train_s": row["train_time_s"], "eval_s": row["eval_time_s"],
            "accuracy": row["metrics"]["accuracy"], "steps": row["train_steps"],
            "n_train": row["n_train"], "n_eval": row["n_eval"], "losses": row["train_losses"],
            "bf16": spec["device"].startswith("cuda"), "padding": "longest in batch",
            "length_grouping": group_by_length, "eval_batch": hp.eval_batch_size}


def run_grouped(spec: dict) -> dict:
    """The library with Trainer's length-grouped batches (``group_by_length=True``)."""
    return run_dupbert(spec, group_by_length=True)


def run_glue_defaults(spec: dict) -> dict:
    """``run_glue.py``'s defaults with Trainer: pad to 128, random sampler, fp32, eval batch 8."""
    import transformers

    def arguments(folder):
        return transformers.TrainingArguments(
            output_dir=folder, learning_rate=spec["learning_rate"],
            per_device_train_batch_size=spec["batch"], per_device_eval_batch_size=8,
            max_steps=spec["steps"], seed=spec["seed"], report_to=[], save_strategy="no",
            eval_strategy="no", logging_steps=1, disable_tqdm=True,
            use_cpu=not spec["device"].startswith("cuda"), dataloader_num_workers=0)

    return _train_with_trainer(spec, arguments, pad_to_max_length=True) | {
        "bf16": False, "padding": "max_length 128", "length_grouping": False, "eval_batch": 8}


def _train_with_trainer(spec: dict, arguments, pad_to_max_length: bool) -> dict:
    """Train and evaluate with Trainer on the benchmark's data; ``arguments(folder)`` gives the
    ``TrainingArguments``."""
    import numpy as np
    import transformers

    from dupbert.training.finetuning import build_model
    from dupbert.training.tasks import load_task

    seed = spec["seed"]
    train = load_task(TASK, "train", max_samples=spec["steps"] * spec["batch"], seed=seed)
    evaluation = load_task(TASK, "eval", max_samples=spec["eval_samples"], seed=0)
    transformers.set_seed(seed)
    model, tokenizer = build_model(MODEL, "classification", 2, "baseline", seed)
    padding = "max_length" if pad_to_max_length else False

    def features(dataset):
        encoded = dataset.map(lambda batch: tokenizer(batch["text"], padding=padding,
                                                      max_length=128, truncation=True),
                              batched=True, remove_columns=["text"])
        return encoded.rename_column("label", "labels")

    collator = (transformers.default_data_collator if pad_to_max_length
                else transformers.DataCollatorWithPadding(tokenizer))
    with tempfile.TemporaryDirectory(prefix="bench-trainer-") as folder:
        args = arguments(folder)
        trainer = transformers.Trainer(model=model, args=args, train_dataset=features(train),
                                       data_collator=collator)
        trainer.remove_callback(transformers.trainer_callback.PrinterCallback)
        eval_features = features(evaluation)
        started = time.perf_counter()
        trainer.train()
        train_s = time.perf_counter() - started
        started = time.perf_counter()
        logits = trainer.predict(eval_features).predictions
        eval_s = time.perf_counter() - started
    predicted = np.asarray(logits).argmax(-1)
    losses = [round(float(e["loss"]), 5) for e in trainer.state.log_history if "loss" in e]
    return {"train_s": round(train_s, 3), "eval_s": round(eval_s, 3),
            "accuracy": float((predicted == np.asarray(evaluation["label"])).mean()),
            "steps": trainer.state.global_step, "n_train": len(train), "n_eval": len(evaluation),
            "losses": losses, "bf16": bool(args.bf16),
            "attn_implementation": model.config._attn_implementation}


def child(spec: dict) -> dict:
    import torch

    if spec["device"].startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    result = ARMS[spec["approach"]](spec)
    examples = spec["steps"] * spec["batch"]
    result.update(approach=spec["approach"],
                  train_examples_per_s=round(examples / result["train_s"], 2),
                  eval_examples_per_s=round(result["n_eval"] / result["eval_s"], 2),
                  peak_rss_mb=round(_common.peak_rss_mb(), 1))
    if spec["device"].startswith("cuda"):
        result["peak_gpu_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    return result


ARMS = {"dupbert": run_dupbert, "grouped": run_grouped, "run_glue": run_glue_defaults}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--eval-samples", type=int, default=872,
                        help="stratified SST-2 dev subset (872 = all of dev)")
    parser.add_argument("--learning-rate", type=float, default=1e-4,
                        help="for every arm (run_glue's 2e-5 leaves the model at chance in 30 "
                             "steps)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=1,
                        help="runs per approach (alternating); the fastest training is kept")
    args, status = _common.parse_or_run_child(parser, argv, "finetune", child)
    if args is None:
        return status

    load_before = _common.load()
    spec = dict(device=args.device, steps=args.steps, batch=args.batch,
                eval_samples=args.eval_samples, seed=args.seed, learning_rate=args.learning_rate)
    best = _common.fastest_of_repeats(__file__, spec, ARMS, "approach", args.repeats)
    load_after = _common.load()
    glue = best["run_glue"]
    n_eval = glue["n_eval"]
    comparisons = {}
    for arm in ("dupbert", "grouped"):
        ours = best[arm]
        p = (ours["accuracy"] + glue["accuracy"]) / 2
        two_se = 2 * math.sqrt(2 * p * (1 - p) / n_eval)  # of a difference of two accuracies
        comparisons[arm] = {
            "train_speedup": round(ours["train_examples_per_s"] / glue["train_examples_per_s"], 3),
            "eval_speedup": round(ours["eval_examples_per_s"] / glue["eval_examples_per_s"], 3),
            "accuracy_difference": round(ours["accuracy"] - glue["accuracy"], 4),
            "two_standard_errors": round(two_se, 4),
            "accuracy_equal_within_noise": abs(ours["accuracy"] - glue["accuracy"]) <= two_se,
        }
    rows = [{"arm": name, "train ex/s": r["train_examples_per_s"],
             "eval ex/s": r["eval_examples_per_s"], "accuracy": round(r["accuracy"], 4),
             "train s": r["train_s"], "padding": r["padding"],
             "grouped": r["length_grouping"], "bf16": r["bf16"],
             "speed-up": comparisons.get(name, {}).get("train_speedup", 1.0),
             "peak RSS MiB": r["peak_rss_mb"]} for name, r in best.items()]
    print(f"\nfine-tuning benchmark on {args.device} ({_common.cpu_model()}): {MODEL} on {TASK}, "
          f"{args.steps} steps x batch {args.batch}, learning rate {args.learning_rate:g}, seed "
          f"{args.seed}, eval on {n_eval}; load before/after {load_before['loadavg']} / "
          f"{load_after['loadavg']}")
    print(_common.table(rows, list(rows[0])))
    for arm, c in comparisons.items():
        print(f"{arm} vs run_glue: training {c['train_speedup']:.2f}x the examples/s (goal on CPU "
              f">= 2), accuracy {c['accuracy_difference']:+.4f} (two standard errors "
              f"{c['two_standard_errors']:.4f}: "
              f"{'equal' if c['accuracy_equal_within_noise'] else 'NOT equal'} within noise)")
    goals = None
    if not args.device.startswith("cuda"):
        goals = {"train_speedup_at_least_2": comparisons["dupbert"]["train_speedup"] >= 2,
                 "accuracy_equal_within_noise":
                     comparisons["dupbert"]["accuracy_equal_within_noise"]}
    path = _common.write_results("finetune", args.device, {
        "machine": {**_common.machine(args.device), "load_before": load_before,
                    "load_after": load_after},
        "settings": {k: v for k, v in vars(args).items() if k != "child"},
        "model": MODEL, "task": TASK, "arms": best, "versus_run_glue": comparisons,
        "goals": goals,
    }, args.out)
    print(f"written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
