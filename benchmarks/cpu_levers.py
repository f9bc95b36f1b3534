"""Benchmark: standard levers for CPU fine-tuning, on the study's own setting.

The CPU study (``notebooks/params/cpu/rq3.yaml``) trains all-MiniLM-L6-v2 with Trainer, dynamic
padding, random batches, fp32, batch 32, learning rate 1e-4, on ONE intra-op thread per process
(``scripts/cpu_study.sh``: on 2 shared cores two threads made a run about 5 times slower). This
script trains that same model on the same SNLI training subset, with those same settings, and
changes one lever per arm:

* ``eager``: the study as it runs (the reference).
* ``compiled``: ``TrainingArguments(torch_compile=True)`` (TorchInductor, default mode; dynamic
  shapes are detected after the first recompilation). Its cost is one compilation per new
  shape family at the start, then (maybe) faster steps.
* ``two_threads``: 2 intra-op threads instead of 1 (on an idle machine; the study shares its
  cores with a second worker, so it cannot take this lever).

A lever is adopted only if it trains at least 1.3 times as many examples per second over a whole
study run (the compilation included) AND its loss curve is identical: each logged training loss
within ``--loss-tolerance`` (default 1e-4) of the reference's, step by step. Besides the total,
the per-step times (a Trainer callback) give the steady-state step time and the start-up
overhead, from which the time of one whole study run (``--study-steps``, 282 for SNLI) is
projected.

Each arm runs in a fresh Python process, alternating when ``--repeats`` > 1 (the fastest kept).
Results: benchmarks/results/cpu_levers-cpu.json.

    python benchmarks/cpu_levers.py            # ~10 min on 2 CPU cores
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _common  # noqa: E402

MODEL, TASK = "all-MiniLM-L6-v2", "snli"
ARMS = {"eager": dict(threads=1, compile=False), "compiled": dict(threads=1, compile=True),
        "two_threads": dict(threads=2, compile=False)}


def child(spec: dict) -> dict:
    """Train one arm; returns times, per-step durations and the logged losses."""
    import torch

    arm = ARMS[spec["arm"]]
    torch.set_num_threads(arm["threads"])
    import transformers

    from dupbert.training.finetuning import HyperParameters, build_model, training_arguments
    from dupbert.training.tasks import TASKS, load_task

    task = TASKS[TASK]
    train = load_task(TASK, "train", max_samples=spec["steps"] * spec["batch"], seed=0)
    transformers.set_seed(spec["seed"])
    model, tokenizer = build_model(MODEL, "classification", task.num_labels, "baseline",
                                   spec["seed"])
    hp = HyperParameters.for_task("classification", max_steps=spec["steps"],
                                  batch_size=spec["batch"], learning_rate=spec["learning_rate"])

    def encode(batch):
        return tokenizer(*(batch[c] for c in task.text_columns), truncation=True,
                         max_length=hp.max_length)

    features = train.map(encode, batched=True, remove_columns=list(task.text_columns))
    features = features.rename_column("label", "labels")
    step_ends: list[float] = []

    class StepClock(transformers.TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            step_ends.append(time.perf_counter())

    with tempfile.TemporaryDirectory(prefix="bench-levers-") as folder:
        args = training_arguments(hp, spec["seed"], folder, "cpu", progress=False)
        if arm["compile"]:
            args = dataclasses.replace(args, torch_compile=True)  # __post_init__ sets the backend
        trainer = transformers.Trainer(model=model, args=args, train_dataset=features,
                                       data_collator=transformers.DataCollatorWithPadding(tokenizer),
                                       callbacks=[StepClock()])
        trainer.remove_callback(transformers.trainer_callback.PrinterCallback)
        started = time.perf_counter()
        trainer.train()
        train_s = time.perf_counter() - started
    steps = [b - a for a, b in zip([started, *step_ends[:-1]], step_ends)]
    losses = [round(float(e["loss"]), 6) for e in trainer.state.log_history if "loss" in e]
    return {"arm": spec["arm"], **arm, "train_s": round(train_s, 3), "step_s": steps,
            "losses": losses, "torch_threads": torch.get_num_threads()}


def summarize(result: dict, warmup: int, study_steps: int) -> dict:
    """Steady-state step time (median after ``warmup`` steps), start-up overhead (the first
    ``warmup`` steps beyond that rate) and the projected time of a ``study_steps`` run."""
    steady = statistics.median(result["step_s"][warmup:])
    overhead = max(0.0, sum(result["step_s"][:warmup]) - warmup * steady)
    return {"steady_step_s": round(steady, 4), "startup_overhead_s": round(overhead, 2),
            "projected_study_run_s": round(overhead + study_steps * steady, 1)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40, help="optimisation steps per arm")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warmup", type=int, default=10,
                        help="first steps counted as start-up (compilation) in the projection")
    parser.add_argument("--study-steps", type=int, default=282,
                        help="steps of one study run (SNLI: 3,000 pairs, 3 epochs, batch 32)")
    parser.add_argument("--loss-tolerance", type=float, default=1e-4)
    parser.add_argument("--arms", default=",".join(ARMS), help=f"of {', '.join(ARMS)}")
    parser.add_argument("--repeats", type=int, default=1)
    args, status = _common.parse_or_run_child(parser, argv, "cpu_levers", child)
    if args is None:
        return status
    arms = args.arms.split(",")
    unknown = [a for a in arms if a not in ARMS]
    if unknown or "eager" not in arms:
        parser.error(f"--arms must include eager and name only {', '.join(ARMS)}; got {args.arms}")
    spec = dict(steps=args.steps, batch=args.batch, learning_rate=args.learning_rate,
                seed=args.seed)
    load_before = _common.load()
    best = _common.fastest_of_repeats(__file__, spec, arms, "arm", args.repeats)
    load_after = _common.load()
    reference = best["eager"]
    reference_summary = summarize(reference, args.warmup, args.study_steps)
    rows, verdicts = [], {}
    for arm, result in best.items():
        summary = summarize(result, args.warmup, args.study_steps)
        n = min(len(result["losses"]), len(reference["losses"]))
        difference = max(abs(a - b) for a, b in zip(result["losses"][:n], reference["losses"][:n]))
        speedup = reference_summary["projected_study_run_s"] / summary["projected_study_run_s"]
        verdicts[arm] = {**summary, "train_s": result["train_s"],
                         "study_run_speedup": round(speedup, 3),
                         "max_loss_difference": round(difference, 6),
                         "identical_loss_curve": difference <= args.loss_tolerance,
                         "adopt": arm != "eager" and speedup >= 1.3
                         and difference <= args.loss_tolerance}
        rows.append({"arm": arm, "train s": result["train_s"],
                     "steady step s": summary["steady_step_s"],
                     "start-up s": summary["startup_overhead_s"],
                     f"{args.study_steps}-step run s": summary["projected_study_run_s"],
                     "speed-up": round(speedup, 2), "max |loss diff|": round(difference, 6),
                     "adopt": verdicts[arm]["adopt"]})
    print(f"\nCPU levers on {_common.cpu_model()}: {MODEL} on {TASK}, {args.steps} steps x batch "
          f"{args.batch}, lr {args.learning_rate:g}, seed {args.seed}; load before/after "
          f"{load_before['loadavg']} / {load_after['loadavg']}")
    print(_common.table(rows, list(rows[0])))
    path = _common.write_results("cpu_levers", "cpu", {
        "machine": {**_common.machine("cpu"), "load_before": load_before,
                    "load_after": load_after},
        "settings": {k: v for k, v in vars(args).items() if k != "child"},
        "model": MODEL, "task": TASK, "arms": best, "verdicts": verdicts}, args.out)
    print(f"written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
