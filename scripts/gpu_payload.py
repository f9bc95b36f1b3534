"""Prepare, unpack and bring back the RQ3 GPU run (the `gpu` profile on one GPU machine with no
network, which receives at most 64 MiB: the repository's tracked files plus one carried folder).

    python scripts/gpu_payload.py pack --models all-MiniLM-L6-v2            # here: build .gpu-payload/
    bash scripts/gpu_rq3.sh                                                  # there: the sweep
    python scripts/gpu_payload.py import DIR                                 # here: DIR = returned files

`pack` copies what the sweep of `notebooks/params/gpu/rq3.yaml` needs for the models named: the
task files (from $DUPBERT_DATA_DIR), the converted zoo models (from $DUPBERT_CACHE, large weight
files as fp16, restored to fp32 there by `unpack`: a relative rounding of at most 2^-11 per weight),
and wheels of the Python packages the GPU image lacks (`datasets` and its pure-Python needs). It
refuses a payload that would exceed the limit: run the models in two calls (English encoder, then
the reaction models). `import` merges the returned rows into results/gpu/rq3.jsonl (every run
once) and unpacks the per-example outputs into results/gpu/rq3-outputs/.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
from importlib import metadata
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

PROFILE = REPO_ROOT / "notebooks" / "params" / "gpu" / "rq3.yaml"
PAYLOAD = REPO_ROOT / ".gpu-payload"
LIMIT_BYTES = 64 * 2**20
MARGIN_BYTES = 2 * 2**20  # for files written before the call (logs, notebooks)
FP16_ABOVE_BYTES = 8 * 2**20  # weight files larger than this travel as fp16
# Not in the GPU image (device README, KINDS.md): the data loading library and its pure-Python needs.
WHEELS = ("datasets", "dill", "multiprocess")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def travelling_tree_bytes() -> int:
    """Bytes of the files that travel besides the payload: tracked, and untracked not ignored."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO_ROOT, capture_output=True, check=True).stdout
    return sum(_size(REPO_ROOT / name) for name in listed.decode().split("\0")
               if name and (REPO_ROOT / name).is_file())


def _half_precision_copy(source: Path, target: Path) -> None:
    from safetensors.torch import load_file, save_file
    import torch

    tensors = load_file(str(source))
    save_file({k: v.half() if v.dtype == torch.float32 else v for k, v in tensors.items()},
              str(target), metadata={"format": "pt"})


def pack(models: list[str], payload: Path, profile: Path) -> int:
    from dupbert.study import profiles
    from dupbert.training.tasks import task_files
    from dupbert.core.zoo import zoo_folder
    from dupbert.core.data import resolve_data_dir

    parameters = profiles.read_profile(profile, device="cpu", models=models)  # planning only
    plan, _ = profiles.plan_sweep(parameters)
    data_root = resolve_data_dir(None)
    if data_root is None:
        raise SystemExit("set DUPBERT_DATA_DIR to the data folder (e.g. ../shared/data)")
    if payload.exists():
        shutil.rmtree(payload)
    (payload / "data").mkdir(parents=True)
    for task in dict.fromkeys(entry.task for entry in plan):
        for path in task_files(task):
            target = payload / "data" / path.relative_to(data_root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    halved = []
    for model in models:
        folder = zoo_folder(model)
        target = payload / "cache" / "models" / folder.name
        shutil.copytree(folder, target)
        for weights in target.glob("*.safetensors"):
            if weights.stat().st_size > FP16_ABOVE_BYTES:
                _half_precision_copy(folder / weights.name, weights)
                halved.append(str(weights.relative_to(payload)))
    (payload / "fp16-in-transit.json").write_text(json.dumps(halved, indent=1))
    (payload / "models.txt").write_text("\n".join(models) + "\n")
    wheels = payload / "wheels"
    pins = [f"{name}=={metadata.version(name)}" for name in WHEELS]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "--implementation", "cp",
                    *[arg for platform in PLATFORMS for arg in ("--platform", platform)],
                    "-d", str(wheels), *pins], check=True)
    payload_bytes, tree_bytes = _size(payload), travelling_tree_bytes()
    total = payload_bytes + tree_bytes
    print(f"payload {payload_bytes / 2**20:.1f} MiB + repository {tree_bytes / 2**20:.1f} MiB = "
          f"{total / 2**20:.1f} MiB of {LIMIT_BYTES / 2**20:.0f} MiB; models {models}; "
          f"fp16 in transit: {halved or 'none'}; wheels: {pins}")
    if total + MARGIN_BYTES > LIMIT_BYTES:
        print("too large: pack fewer models per call (e.g. the English encoder alone)", file=sys.stderr)
        return 1
    return 0


def unpack(payload: Path) -> int:
    """On the GPU machine: the fp16 weight files back to fp32, in place."""
    from safetensors.torch import load_file, save_file
    import torch

    for relative in json.loads((payload / "fp16-in-transit.json").read_text()):
        path = payload / relative
        tensors = load_file(str(path))
        save_file({k: v.float() if v.dtype == torch.float16 else v for k, v in tensors.items()},
                  str(path), metadata={"format": "pt"})
        print(f"restored {relative} to fp32")
    return 0


def import_results(returned: Path, results: Path, outputs: Path) -> int:
    """Merge a GPU run's returned rows and outputs into the repository's gpu results."""
    from dupbert.study.sweeps import merge_results

    rows = returned / "rq3.jsonl"
    if not rows.is_file():
        raise SystemExit(f"no {rows}: the run returned no results (see {returned}/gpu-run.log)")
    sources = [results, rows] if results.is_file() else [rows]
    frame = merge_results(sources, results)
    archive = returned / "rq3-outputs.tar"
    if archive.is_file():
        outputs.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers() if m.isfile() and m.name.endswith(".npz")
                       and "/" not in m.name.strip("./")]
            tar.extractall(outputs, members=members)
    print(f"{len(frame)} runs in {results}; outputs in {outputs}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("pack", help="build the payload here")
    p.add_argument("--models", nargs="+", required=True, help="zoo models of the profile to send")
    p.add_argument("--profile", type=Path, default=PROFILE)
    p.add_argument("--to", type=Path, default=PAYLOAD)
    u = commands.add_parser("unpack", help="on the GPU machine: restore fp32 weights")
    u.add_argument("--from", dest="payload", type=Path, default=PAYLOAD)
    i = commands.add_parser("import", help="merge returned results into results/gpu/")
    i.add_argument("returned", type=Path, help="the folder the run's files came back to")
    i.add_argument("--results", type=Path, default=REPO_ROOT / "results" / "gpu" / "rq3.jsonl")
    i.add_argument("--outputs", type=Path, default=REPO_ROOT / "results" / "gpu" / "rq3-outputs")
    args = parser.parse_args(argv)
    if args.command == "pack":
        return pack(args.models, args.to, args.profile)
    if args.command == "unpack":
        return unpack(args.payload)
    return import_results(args.returned, args.results, args.outputs)


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
