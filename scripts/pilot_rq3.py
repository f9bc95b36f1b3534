"""Pilot of the CPU study (notebooks/params/cpu/rq3.yaml): the *baseline's* learning curve and cost
on one model and classification task, to choose the study's sizes and learning rate before its runs.

The pilot uses seed 100, which the study does not use, and the study's fixed training subset
(stratified, seed 0) and evaluation subset; it evaluates every ``--eval-every`` steps. One JSON line
per pilot is appended to ``--out`` (default results/cpu/rq3-pilot.jsonl): the settings, the wall time
of training (evaluations included; seconds) and the curve ``[step, accuracy, eval seconds]``.

    python scripts/pilot_rq3.py --model all-MiniLM-L6-v2 --task snli --train 3000 --eval 1000 \\
        --learning-rate 1e-4 --epochs 3 --eval-every 47
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import transformers

from dupbert.training import finetuning as ft
from dupbert.core.results import atomic_write_text
from dupbert.training.tasks import TASKS, load_task

PILOT_SEED = 100  # not one of the study's seeds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--task", required=True, choices=[t for t, s in TASKS.items()
                                                          if s.kind == "classification"])
    parser.add_argument("--train", type=int, required=True, help="training subset size")
    parser.add_argument("--eval", type=int, default=None, help="evaluation subset size (all)")
    parser.add_argument("--learning-rate", type=float, required=True)
    parser.add_argument("--epochs", type=float, required=True)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--eval-every", type=int, required=True, help="steps")
    parser.add_argument("--out", default="results/cpu/rq3-pilot.jsonl")
    args = parser.parse_args()

    spec = TASKS[args.task]
    transformers.set_seed(PILOT_SEED)
    model, tokenizer = ft.build_model(args.model, spec.kind, spec.num_labels, "baseline", PILOT_SEED)
    train = load_task(args.task, "train", max_samples=args.train, seed=ft.TRAIN_SUBSET_SEED)
    evaluation = load_task(args.task, "eval", max_samples=args.eval, seed=0)
    hp = ft.HyperParameters(learning_rate=args.learning_rate, batch_size=args.batch_size,
                            epochs=args.epochs, max_length=spec.max_length)
    columns = list(spec.text_columns)

    def features(dataset):
        encoded = dataset.map(lambda b: tokenizer(*[b[c] for c in columns], truncation=True,
                                                  max_length=hp.max_length),
                              batched=True, remove_columns=columns)
        return encoded.rename_column("label", "labels")

    base = ft.training_arguments(hp, PILOT_SEED, "/tmp/dupbert-pilot", "cpu", progress=False)
    arguments = transformers.TrainingArguments(**{
        **{k: v for k, v in base.to_dict().items()
           if k in transformers.TrainingArguments.__dataclass_fields__
           and transformers.TrainingArguments.__dataclass_fields__[k].init},
        "eval_strategy": "steps", "eval_steps": args.eval_every, "logging_steps": args.eval_every})
    trainer = transformers.Trainer(
        model=model, args=arguments, train_dataset=features(train),
        eval_dataset=features(evaluation),
        data_collator=transformers.DataCollatorWithPadding(tokenizer),
        compute_metrics=lambda p: {"accuracy": float((p.predictions.argmax(-1) == p.label_ids).mean())})
    started = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - started
    curve = [[e["step"], round(e["eval_accuracy"], 4), round(e["eval_runtime"], 1)]
             for e in trainer.state.log_history if "eval_accuracy" in e]
    row = {"model": args.model, "task": args.task, "n_train": len(train), "n_eval": len(evaluation),
           "learning_rate": args.learning_rate, "epochs": args.epochs, "batch_size": args.batch_size,
           "seed": PILOT_SEED, "wall_s": round(wall, 1), "curve": curve,
           "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores"}
    print(json.dumps(row))
    out = Path(args.out)
    previous = out.read_text() if out.is_file() else ""
    atomic_write_text(out, previous + json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
