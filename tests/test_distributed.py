"""Data-parallel fine-tuning: the CLI under ``torchrun --nproc_per_node 2`` on CPU (gloo).

A tiny real run (the rxnmapper ALBERT, 32 USPTO-50k reactions, 2 steps): both processes train
together, the global batch stays the one asked for, and only rank 0 writes the result row and
the per-example outputs.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow  # two processes fine-tuning together

# Runs dupbert's CLI unchanged, logging which ranks train and which append a result row.
DRIVER = textwrap.dedent("""
    import os, sys
    from dupbert.training import finetuning as ft
    from dupbert.core import results as store

    def log(what):
        with open(os.environ["DUPBERT_TEST_LOG"], "a") as stream:
            stream.write(f"{what} {os.environ['RANK']}\\n")

    train, append = ft._train, store.ResultsFile.append

    def logged_train(*args, **kwargs):
        trainer, seconds = train(*args, **kwargs)
        log(f"trained {trainer.state.global_step} steps, per-device batch "
            f"{trainer.args.per_device_train_batch_size}, rank")
        return trainer, seconds

    def logged_append(self, row):
        log("appended by rank")
        return append(self, row)

    ft._train, store.ResultsFile.append = logged_train, logged_append
    from dupbert.cli import main
    sys.exit(main(sys.argv[1:]))
""")


@pytest.fixture
def environment(shared_data_dir, zoo_cache, tmp_path):
    env = dict(os.environ, DUPBERT_DATA_DIR=str(shared_data_dir), DUPBERT_CACHE=str(zoo_cache),
               HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               DUPBERT_TEST_LOG=str(tmp_path / "log.txt"), OMP_NUM_THREADS="1")
    env.pop("WORLD_SIZE", None), env.pop("RANK", None), env.pop("LOCAL_RANK", None)
    return env


def test_two_processes_train_together_and_rank_0_writes_one_row(tmp_path, environment):
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    results, outputs = tmp_path / "results.jsonl", tmp_path / "outputs"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc_per_node", "2", str(driver), "finetune",
               "--model", "rxnmapper-albert", "--task", "uspto50k",
               "--max-train-samples", "32", "--max-eval-samples", "16",
               "--max-steps", "2", "--batch-size", "8",
               "--results", str(results), "--outputs-dir", str(outputs)]
    done = subprocess.run(command, cwd=tmp_path, env=environment, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    log = sorted((tmp_path / "log.txt").read_text().splitlines())
    assert log == ["appended by rank 0",
                   "trained 2 steps, per-device batch 4, rank 0",
                   "trained 2 steps, per-device batch 4, rank 1"]
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(rows) == 1
    row = rows[0]
    assert row["world_size"] == 2
    assert row["hyperparameters"]["batch_size"] == 8
    assert row["per_device_train_batch_size"] == 4
    assert row["train_steps"] == 2 and len(row["train_losses"]) == 2
    assert (row["n_train"], row["n_eval"]) == (32, 16)
    assert [p.name for p in outputs.iterdir()] == [f"{row['run_key']}.npz"]
