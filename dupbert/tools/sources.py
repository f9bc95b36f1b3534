"""Fetch the domain corpora (antibody V regions, USPTO-50k reactions) from their public origins.

The manifest ``sources_manifest.json`` lists *verbatim* files (``raw.githubusercontent.com`` at
pinned commits; the data folder's SOURCES-domain.md, A1, B1, B2, B5) and *derived* files rebuilt
from them by its procedures (A2: antibody chains; B3/B4: atom-map-free reaction SMILES, needs
RDKit), all checked against the published sha256. ``dupbert data download --to DIR`` fills
``DIR`` for ``DUPBERT_DATA_DIR``.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import os
import sys
import tempfile
import urllib.error
import urllib.request
import warnings
from pathlib import Path
from typing import Callable

from tqdm import tqdm

from ..core.errors import ChecksumMismatch, DupbertError
from ..core.zoo import sha256_of

MANIFEST_PATH = Path(__file__).with_name("sources_manifest.json")
RAW_PREFIX = "https://raw.githubusercontent.com/"
_CHUNK = 1 << 16


class DownloadError(DupbertError, OSError):
    """A file could not be fetched (HTTP error, no network, bad mirror)."""


class MissingDependency(DupbertError, ImportError):
    """An optional package needed to derive a file (RDKit) is not installed."""


class DerivationSkipped(UserWarning):
    """A derived file was not built because an optional dependency is missing."""


def manifest() -> dict:
    """The parsed ``sources_manifest.json``: ``files`` (verbatim: ``path``, ``repo``, ``commit``,
    ``repo_path``, ``sha256``, ``bytes``, ``license``, ``source``) and ``derived`` (``path``,
    ``from``, ``procedure``, ``requires``, ``sha256``, ``bytes``, ...); ``path`` relative to the
    data directory, ``source`` the SOURCES-domain.md entry.
    """
    return json.loads(MANIFEST_PATH.read_text(encoding="utf-8"))


def file_url(entry: dict, mirror: str | None = None) -> str:
    """The URL of a verbatim entry,
    ``https://raw.githubusercontent.com/<owner>/<repo>/<commit>/<repo_path>``; ``mirror`` replaces
    the ``https://raw.githubusercontent.com/`` prefix.
    """
    prefix = RAW_PREFIX if mirror is None else mirror.rstrip("/") + "/"
    return f"{prefix}{entry['repo']}/{entry['commit']}/{entry['repo_path']}"


# --------------------------------------------------------------------------------------------------
# Derivations (SOURCES-domain.md A2, B3/B4)

_CHAIN_COLUMNS = [
    "therapeutic", "chain", "fv", "format", "light_type",
    "highest_clin_trial", "genetics", "length", "first_occurrence", "sequence",
]
# (Thera-SAbDab column, chain, fv): fv=1 the first (or only) Fv, fv=2 a bispecific's second Fv.
_VDOMAIN_COLUMNS = [
    ("HC", "H", 1), ("LC", "L", 1),
    ("HeavySequence(ifbispec)", "H", 2), ("LightSequence(ifbispec)", "L", 2),
]
_MISSING = {"", "na", "None"}


def therasabdab_chains_long(csv_path: str | os.PathLike) -> bytes:
    """Derive ``antibody/therasabdab_chains_long.tsv`` from the Thera-SAbDab SeqStruc export
    (procedure SOURCES-domain.md A2).

    One row per non-empty V-domain sequence in file order: per therapeutic ``HC``, ``LC`` (fv 1),
    then the bispecific columns (fv 2); ``na``/``None``/empty skipped; ``first_occurrence`` marks
    the first appearance of an exact sequence.

    Returns:
        TSV bytes (UTF-8, LF): therapeutic, chain (H/L), fv (1/2), format, light_type,
        highest_clin_trial, genetics, length (residues), first_occurrence, sequence (2,533 rows for
        the pinned A1 file).

    Raises:
        KeyError: an expected column is absent from the CSV.
    """
    with open(csv_path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    buf = io.StringIO()
    writer = csv.writer(buf, delimiter="\t", lineterminator="\n")
    writer.writerow(_CHAIN_COLUMNS)
    seen: set[str] = set()
    for row in rows:
        for column, chain, fv in _VDOMAIN_COLUMNS:
            seq = row[column].strip()
            if seq in _MISSING:
                continue
            first = seq not in seen
            seen.add(seq)
            writer.writerow([
                row["Therapeutic"].strip(), chain, fv, row["Format"].strip(), row["VD LC"].strip(),
                row["Highest_Clin_Trial (Feb '25)"].strip(),
                row["Genetics (Bispecifics delimited with semicolon)"].strip(),
                len(seq), first, seq,
            ])
    return buf.getvalue().encode("utf-8")


def _import_rdkit():
    try:
        from rdkit import Chem, RDLogger
    except ImportError as exc:
        raise MissingDependency(
            "Deriving the atom-map-free USPTO-50k files needs RDKit: pip install rdkit "
            "(or pip install 'dupbert[domain]'). The published hashes were made with rdkit 2026.09.1."
        ) from exc
    RDLogger.DisableLog("rdApp.*")
    return Chem


def uspto50k_unmapped(raw_csv: str | os.PathLike) -> bytes:
    """Derive ``reactions/uspto50k_{test,valid}_unmapped.csv`` from a GLN raw split (procedure
    SOURCES-domain.md B3): every fragment's atom maps set to 0, canonical SMILES, order kept.

    Returns:
        CSV bytes (LF), columns ``id,class,rxn`` (``reactants>>product``), one row per input row.
        Canonical SMILES depend on the RDKit release: the published sha256 is rdkit 2026.09.1's.

    Raises:
        MissingDependency: RDKit is not installed.
        ValueError: a fragment does not parse (names the reaction id).
    """
    chem = _import_rdkit()

    def unmap(smiles: str, rxn_id: str) -> str:
        out = []
        for fragment in smiles.split("."):
            if not fragment:
                continue
            mol = chem.MolFromSmiles(fragment)
            if mol is None:
                raise ValueError(f"RDKit cannot parse fragment {fragment!r} of reaction {rxn_id}")
            for atom in mol.GetAtoms():
                atom.SetAtomMapNum(0)
            out.append(chem.MolToSmiles(mol))
        return ".".join(out)

    with open(raw_csv, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["id", "class", "rxn"])
    for row in rows:
        reactants, reagents, product = row["reactants>reagents>production"].split(">")
        rxn = ">".join(unmap(part, row["id"]) for part in (reactants, reagents, product))
        writer.writerow([row["id"], row["class"], rxn])
    return buf.getvalue().encode("utf-8")


PROCEDURES: dict[str, Callable[[Path], bytes]] = {
    "therasabdab_chains_long": therasabdab_chains_long,
    "uspto50k_unmapped": uspto50k_unmapped,
}


# --------------------------------------------------------------------------------------------------
# Download


def _mismatch(path: Path, origin: str, expected: str, actual: str, note: str = "") -> ChecksumMismatch:
    return ChecksumMismatch(
        f"sha256 mismatch for {path} (from {origin}): expected {expected}, got {actual}. "
        f"The file was not written.{(' ' + note) if note else ''}"
    )


def _write_atomically(target: Path, write: Callable, expected: str, origin: str, note: str = "") -> None:
    """Write to a temp file in ``target``'s folder, check its sha256, then ``os.replace`` it."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as fh:
            write(fh, digest)
        actual = digest.hexdigest()
        if actual != expected:
            raise _mismatch(target, origin, expected, actual, note)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _fetch(url: str, target: Path, expected: str, size: int | None) -> None:
    def write(fh, digest):
        try:
            response = urllib.request.urlopen(url, timeout=60)
        except (urllib.error.URLError, OSError) as exc:
            raise DownloadError(f"could not download {url} to {target}: {exc}") from exc
        with response, tqdm(total=int(response.headers.get("Content-Length") or size or 0) or None,
                            unit="B", unit_scale=True, desc=target.name, disable=None) as bar:
            for chunk in iter(lambda: response.read(_CHUNK), b""):
                fh.write(chunk)
                digest.update(chunk)
                bar.update(len(chunk))

    _write_atomically(target, write, expected, url)


def _is_current(path: Path, sha256: str) -> bool:
    return path.is_file() and sha256_of(path) == sha256


def download(to: str | os.PathLike, mirror: str | None = None, force: bool = False) -> list[Path]:
    """Download the verbatim domain files into ``to`` and build the derived ones (SOURCES-domain.md
    A1, A2, B1-B5).

    Each file lands at ``to/<path>`` atomically and only after its sha256 is checked; a file
    already there with the right sha256 is kept unless ``force``. ``mirror`` replaces the
    ``https://raw.githubusercontent.com/`` prefix.

    Returns:
        The absolute paths of all manifest files now in place and verified, in manifest order.
        Without RDKit the derived files that need it are skipped with a :class:`DerivationSkipped`
        warning.

    Raises:
        ChecksumMismatch: names the file, URL or procedure, expected and actual sha256.
        DownloadError: a URL cannot be fetched.
    """
    root = Path(to).expanduser().resolve()
    spec = manifest()
    done: list[Path] = []
    for entry in spec["files"]:
        target = root / entry["path"]
        if force or not _is_current(target, entry["sha256"]):
            _fetch(file_url(entry, mirror), target, entry["sha256"], entry.get("bytes"))
        done.append(target)
    for entry in spec["derived"]:
        target = root / entry["path"]
        if not force and _is_current(target, entry["sha256"]):
            done.append(target)
            continue
        procedure = PROCEDURES[entry["procedure"]]
        try:
            data = procedure(root / entry["from"])
        except MissingDependency as exc:
            warnings.warn(f"skipped {target}: {exc}", DerivationSkipped, stacklevel=2)
            continue
        note = entry.get("hash_note", "")
        if entry.get("requires") == "rdkit":
            from rdkit import __version__ as rdkit_version
            note = f"Installed rdkit is {rdkit_version}; {note}"

        def write(fh, digest, data=data):
            fh.write(data)
            digest.update(data)

        _write_atomically(target, write, entry["sha256"], f"{entry['from']} via {entry['procedure']}", note)
        done.append(target)
    return done


# --------------------------------------------------------------------------------------------------
# Command line: `dupbert data download` and `python -m dupbert.tools.sources download`


def _cmd_download(args: argparse.Namespace) -> int:
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", DerivationSkipped)
            paths = download(args.to, mirror=args.mirror, force=args.force)
    except (ChecksumMismatch, DownloadError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for path in paths:
        print(path)
    for warning in caught:
        print(f"warning: {warning.message}", file=sys.stderr)
    print(f"{len(paths)} files in {Path(args.to).resolve()}; use them with DUPBERT_DATA_DIR={args.to}",
          file=sys.stderr)
    return 0


def _add_download_parser(actions) -> argparse.ArgumentParser:
    default_to = os.environ.get("DUPBERT_DATA_DIR") or None
    parser = actions.add_parser(
        "download", help="download the antibody and reaction corpora and build the derived files",
        description="Download the domain corpora (SOURCES-domain.md) into DIR, verify their sha256 "
                    "and derive the files dupbert reads. Then set DUPBERT_DATA_DIR=DIR.")
    parser.add_argument("--to", type=Path, default=default_to, required=default_to is None,
                        metavar="DIR", help="data directory (default: $DUPBERT_DATA_DIR)")
    parser.add_argument("--mirror", metavar="URL", default=None,
                        help="URL prefix that replaces https://raw.githubusercontent.com/")
    parser.add_argument("--force", action="store_true", help="re-download and rebuild every file")
    parser.set_defaults(func=_cmd_download)
    return parser


def add_data_commands(subparsers) -> argparse.ArgumentParser:
    """Register ``data download --to DIR [--mirror URL] [--force]`` on an argparse ``subparsers``;
    its ``func`` returns the exit code (1 on a checksum or download error). Returns the ``data``
    parser.
    """
    data = subparsers.add_parser("data", help="fetch the domain corpora",
                                 description="Manage dupbert's data directory.")
    actions = data.add_subparsers(dest="data_command", metavar="ACTION", required=True)
    _add_download_parser(actions)
    return data


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m dupbert.tools.sources download --to DIR``; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m dupbert.tools.sources", description=__doc__.splitlines()[0])
    actions = parser.add_subparsers(dest="data_command", metavar="ACTION", required=True)
    _add_download_parser(actions)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
