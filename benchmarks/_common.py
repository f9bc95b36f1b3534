"""Shared helpers of the benchmarks: machine description, peak memory, JSON output.

Not part of the library and not collected by pytest (``norecursedirs`` holds ``benchmarks``).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def cpu_model() -> str:
    """The CPU's ``model name`` from /proc/cpuinfo (platform's guess elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load() -> dict:
    """The 1/5/15-minute load averages and the ``uptime`` line: the machine may be shared."""
    try:
        line = subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        line = None
    return {"loadavg": [round(x, 2) for x in os.getloadavg()], "uptime": line}


def machine(device: str) -> dict:
    """What the numbers were measured on."""
    import torch
    import transformers

    info = {
        "device": device,
        "cpu_model": cpu_model(),
        "cpus_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "memory_gb": _memory_gb(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "git_commit": _git_commit(),
    }
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name()
        info["gpu_memory_gb"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
    return info


def _memory_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             cwd=ROOT, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, cwd=ROOT, timeout=10).stdout.strip()
        return f"{out}{'+dirty' if dirty else ''}" or None
    except (OSError, subprocess.SubprocessError):
        return None


# ----------------------------------------------------------------------------- peak memory


def reset_peak_rss() -> bool:
    """Reset this process's peak resident set size (Linux ``VmHWM``) to its current size, so the
    next ``peak_rss_mb`` covers only what runs after this call. False where not supported."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def rss_mb(field: str = "VmRSS") -> float:
    """``VmRSS`` (now) or ``VmHWM`` (peak) of this process in MiB; ru_maxrss where no /proc."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def peak_rss_mb() -> float:
    return rss_mb("VmHWM")


# ----------------------------------------------------------------------------- children


def run_child(script: str, spec: dict, timeout: float | None = None) -> dict:
    """Run ``script --child SPEC`` in a fresh Python process and return the JSON it wrote, so
    each measurement has its own peak memory and a cold allocator."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="dupbert-bench-") as folder:
        out = Path(folder) / "result.json"
        command = [sys.executable, script, "--child", json.dumps({**spec, "out": str(out)})]
        subprocess.run(command, check=True, timeout=timeout, cwd=ROOT)
        return json.loads(out.read_text())


def fastest_of_repeats(script: str, spec: dict, arms, field: str, repeats: int) -> dict[str, dict]:
    """Run each arm (``spec[field] = arm``) in a fresh process, arms alternating, ``repeats``
    times; keep each arm's run with the shortest ``train_s``."""
    best: dict[str, dict] = {}
    for _ in range(repeats):
        for arm in arms:
            print(f"  {arm} ...", file=sys.stderr, flush=True)
            result = run_child(script, {**spec, field: arm})
            if arm not in best or result["train_s"] < best[arm]["train_s"]:
                best[arm] = result
    return best


def write_child_result(spec: dict, result: dict) -> None:
    Path(spec["out"]).write_text(json.dumps(result))


def parse_or_run_child(parser, argv, name: str, child) -> tuple:
    """Add ``--out`` and the internal ``--child`` to ``parser`` and parse ``argv``. In a child
    process (``--child SPEC``), run ``child(spec)``, write its result and return ``(None, 0)``;
    otherwise return ``(args, None)``."""
    import argparse

    parser.add_argument("--out", default=None, help=f"default benchmarks/results/{name}-<device>.json")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        spec = json.loads(args.child)
        write_child_result(spec, child(spec))
        return None, 0
    return args, None


def write_results(name: str, device: str, payload: dict, out: str | None = None) -> Path:
    """Write ``payload`` atomically to ``benchmarks/results/<name>-<device>.json`` (or ``out``)."""
    sys.path.insert(0, str(ROOT))
    from dupbert.core.results import atomic_write_text

    path = Path(out) if out else RESULTS / f"{name}-{device.split(':')[0]}.json"
    payload = {"benchmark": name, "written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
               "command": " ".join([Path(sys.executable).name, *sys.argv]), **payload}
    atomic_write_text(path, json.dumps(payload, indent=1, sort_keys=False) + "\n")
    return path


def table(rows: list[dict], columns: list[str]) -> str:
    """A plain fixed-width text table of ``rows`` (values formatted already or numbers)."""
    def fmt(value):
        if isinstance(value, float):
            return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
        return str(value)

    cells = [[fmt(row.get(c, "")) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(columns, widths))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in cells]
    return "\n".join(lines)
