"""Sweeps that survive SIGKILL: a real `dupbert finetune` process killed in the middle of
a run, and a results file whose writer is killed in the middle of a write. Resuming loses no row,
doubles none, and trains no finished run again."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dupbert.core.results import ResultsFile

pytestmark = pytest.mark.slow  # a sweep killed and resumed for real

CLI = "import sys; from dupbert.cli import main; sys.exit(main(sys.argv[1:]))"
CONFIGURATIONS = ["baseline", "copy last", "depth control"]


@pytest.fixture
def environment(shared_data_dir, zoo_cache):
    return {**os.environ, "DUPBERT_DATA_DIR": str(shared_data_dir), "DUPBERT_CACHE": str(zoo_cache),
            "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}


def _finetune_command(results: Path, outputs: Path) -> list[str]:
    command = [sys.executable, "-c", CLI, "finetune", "--model", "rxnmapper-albert",
               "--task", "uspto50k", "--seed", "0", "--max-steps", "1", "--batch-size", "8",
               "--max-train-samples", "16", "--max-eval-samples", "16",
               "--results", str(results), "--outputs-dir", str(outputs)]
    for name in CONFIGURATIONS:
        command += ["--duplication", name]
    return command


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.is_file() else []


def test_a_sweep_killed_mid_run_resumes_without_loss_doubling_or_retraining(tmp_path, environment):
    results, outputs = tmp_path / "rq3.jsonl", tmp_path / "outputs"
    command = _finetune_command(results, outputs)
    process = subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    while not _lines(results) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert process.poll() is None, process.stderr.read().decode()[-2000:]
    process.send_signal(signal.SIGKILL)  # the first run has landed; the second is in progress
    process.wait()
    before = _lines(results)
    assert 1 <= len(before) < len(CONFIGURATIONS)
    # resume, to the end
    done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    after = _lines(results)
    rows = [json.loads(line) for line in after]
    assert [row["duplication"] for row in rows] == CONFIGURATIONS  # none lost, none doubled
    # the runs that had landed are byte for byte the same rows: their measured times and losses
    # would differ had they been trained again
    assert after[:len(before)] == before
    assert sorted(p.name for p in outputs.iterdir() if not p.name.startswith(".")) == sorted(
        f"{row['run_key']}.npz" for row in rows)
    # and a third call has nothing left to do
    again = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and _lines(results) == after


KILLED_MID_WRITE = """
import os, signal, sys
from dupbert.core import results as results_module
from dupbert.core.results import ResultsFile

real_fdopen = os.fdopen


class HalfThenKilled:  # the stream the results file is written through: dies half-way
    def __init__(self, stream):
        self.stream = stream
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        return self.stream.__exit__(*exc)
    def write(self, text):
        self.stream.write(text[: len(text) // 2])
        self.stream.flush()
        os.kill(os.getpid(), signal.SIGKILL)


results_module.os.fdopen = lambda *a, **k: HalfThenKilled(real_fdopen(*a, **k))
ResultsFile(sys.argv[1]).append({"run_key": "run3", "payload": "x" * 100_000})
"""


def test_a_results_file_killed_mid_write_stays_whole(tmp_path):
    """A writer killed (SIGKILL) half-way through writing the results file leaves the rows that
    were there whole and alone (the write goes to a temporary file that replaces the results
    file only once complete); the next append continues the file."""
    path = tmp_path / "rows.jsonl"
    results = ResultsFile(path)
    for i in range(3):
        results.append({"run_key": f"run{i}", "payload": "x" * 100_000})
    before = path.read_bytes()
    killed = subprocess.run([sys.executable, "-c", KILLED_MID_WRITE, str(path)], timeout=300)
    assert killed.returncode == -signal.SIGKILL
    assert path.read_bytes() == before  # not half a row, not a truncated file
    leftovers = [p.name for p in tmp_path.iterdir() if p != path]
    assert len(leftovers) == 1 and leftovers[0].startswith(".rows.jsonl.") \
        and leftovers[0].endswith(".tmp")  # ignored by git (.gitignore: .*.tmp)
    results.append({"run_key": "run3", "payload": "x"})
    assert [row["run_key"] for row in results.rows()] == ["run0", "run1", "run2", "run3"]
