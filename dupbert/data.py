"""Corpora for the RQ1 reconstruction probe (and the later tasks) as ``datasets.Dataset``.

Rule: local files first, Hugging Face Hub datasets second. A data directory is the ``data_dir``
argument, else the environment variable ``DUPBERT_DATA_DIR``; its layout is the project's shared data
folder (see ``SOURCES.md`` and ``SOURCES-domain.md`` there). The Hub is tried only when no data
directory is configured, and only for corpora that have a Hub copy (WikiText-2, SST-2). The antibody
and reaction corpora have none: ``dupbert data download --to DIR`` fetches them (:mod:`dupbert.sources`).

Every corpus has a ``text`` column (str) plus metadata columns; rows keep file order, so
``n_sequences=500`` always means the same first 500 rows.
"""

from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import datasets
import pandas as pd

from .checks import check_number
from .errors import DupbertError, ParameterError

DATA_DIR_ENV = "DUPBERT_DATA_DIR"


class CorpusNotFound(DupbertError, FileNotFoundError):
    """A corpus file is missing from the data directory, or no source for the corpus is available."""


class UnknownCorpus(DupbertError, ValueError):
    """The corpus name is not one of :data:`CORPORA`."""


@dataclass(frozen=True)
class Corpus:
    """Where a corpus lives: ``path`` under the data directory, optional Hub copy ``(path, config, split)``."""

    name: str
    path: str
    description: str
    source: str
    hub: tuple[str, str | None, str] | None = None


CORPORA: dict[str, Corpus] = {
    c.name: c
    for c in [
        Corpus("therasabdab", "antibody/therasabdab_chains_long.tsv",
               "Thera-SAbDab therapeutic antibody V domains (VH/VL), unique sequences in file order",
               "SOURCES-domain.md A2"),
        Corpus("uspto50k-test", "reactions/uspto50k_test_unmapped.csv",
               "USPTO-50k test reactions, atom-map-free canonical SMILES `reactants>>product`",
               "SOURCES-domain.md B3"),
        Corpus("uspto50k-valid", "reactions/uspto50k_valid_unmapped.csv",
               "USPTO-50k validation reactions, atom-map-free canonical SMILES `reactants>>product`",
               "SOURCES-domain.md B4"),
        Corpus("rxnmapper-examples", "reactions/rxnmapper_example_rxns.csv",
               "rxnmapper example reactions, unmapped SMILES with reagents on the reactant side",
               "SOURCES-domain.md B5"),
        Corpus("wikitext2", "wikitext2/wiki.test.raw",
               "WikiText-2 raw test: non-empty paragraph lines, section headings dropped",
               "SOURCES.md, WikiText-2", hub=("Salesforce/wikitext", "wikitext-2-raw-v1", "test")),
        Corpus("sst2", "sst2/dev.tsv", "SST-2 (GLUE) dev sentences with sentiment labels",
               "SOURCES.md, SST-2", hub=("nyu-mll/glue", "sst2", "validation")),
    ]
}

_MODEL_CORPUS = {
    "antiberty": "therasabdab",
    "rxnfp-bert": "uspto50k-test",
    "rxnmapper-albert": "uspto50k-test",
}
_SST2_LABELS = datasets.ClassLabel(names=["negative", "positive"])
_HEADING = re.compile(r"^=( =)* .* =( =)*$")  # " = Title = ", " = = Section = = "


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path | None:
    """Return the data directory: ``data_dir`` if given, else ``$DUPBERT_DATA_DIR``, else ``None``.

    ``~`` is expanded; an empty ``DUPBERT_DATA_DIR`` counts as unset. The folder is not checked here:
    :func:`load_corpus` names the missing file instead. ``None`` means "no local data: use the Hub".
    """
    if data_dir is None:
        data_dir = os.environ.get(DATA_DIR_ENV) or None
    return None if data_dir is None else Path(data_dir).expanduser()


def default_corpus(model_name: str) -> str:
    """Return the probe corpus matching a model's domain.

    ``antiberty`` -> ``therasabdab``; ``rxnfp-bert``, ``rxnmapper-albert`` -> ``uspto50k-test``;
    any other model (English BERT/ALBERT) -> ``wikitext2``.
    """
    return _MODEL_CORPUS.get(model_name, "wikitext2")


# --------------------------------------------------------------------------------------------------
# Readers: file -> columns (dict of equal-length lists), already filtered, in file order.


def _read_table(path: Path, sep: str = ",", quoting: int = csv.QUOTE_MINIMAL) -> pd.DataFrame:
    # every column as str and no NA guessing ("na", "None" stay strings); ints are cast explicitly
    return pd.read_csv(path, sep=sep, dtype=str, keep_default_na=False, quoting=quoting)


def _read_therasabdab(path: Path) -> dict[str, list]:
    df = _read_table(path, sep="\t")
    df = df[df["first_occurrence"] == "True"]
    return {
        "id": (df["therapeutic"] + "_" + df["chain"] + df["fv"]).tolist(),
        "text": df["sequence"].tolist(),
        "therapeutic": df["therapeutic"].tolist(),
        "chain": df["chain"].tolist(),
        "fv": df["fv"].astype(int).tolist(),
        "format": df["format"].tolist(),
        "light_type": df["light_type"].tolist(),
        "highest_clin_trial": df["highest_clin_trial"].tolist(),
        "genetics": df["genetics"].tolist(),
        "length": df["length"].astype(int).tolist(),
    }


def _read_uspto50k(path: Path) -> dict[str, list]:
    df = _read_table(path)
    return {"id": df["id"].tolist(), "text": df["rxn"].tolist(), "class": df["class"].astype(int).tolist()}


def _read_rxnmapper_examples(path: Path) -> dict[str, list]:
    df = _read_table(path)
    return {"id": df.iloc[:, 0].tolist(), "text": df["rxn"].tolist()}


def _wikitext_columns(lines: list[str]) -> dict[str, list]:
    keep = [(i, s.strip()) for i, s in enumerate(lines) if s.strip() and not _HEADING.match(s.strip())]
    return {"line": [i for i, _ in keep], "text": [s for _, s in keep]}


def _read_wikitext2(path: Path) -> dict[str, list]:
    return _wikitext_columns(path.read_text(encoding="utf-8").split("\n"))


def _read_sst2(path: Path) -> dict[str, list]:
    df = _read_table(path, sep="\t", quoting=csv.QUOTE_NONE)  # GLUE tsv has no quoting
    return {"idx": list(range(len(df))), "text": df["sentence"].tolist(),
            "label": df["label"].astype(int).tolist()}


_S, _I = datasets.Value("string"), datasets.Value("int64")
_READERS: dict[str, tuple[Callable[[Path], dict[str, list]], datasets.Features]] = {
    "therasabdab": (_read_therasabdab, datasets.Features({
        "id": _S, "text": _S, "therapeutic": _S, "chain": _S, "fv": _I, "format": _S, "light_type": _S,
        "highest_clin_trial": _S, "genetics": _S, "length": _I})),
    "uspto50k-test": (_read_uspto50k, datasets.Features({"id": _S, "text": _S, "class": _I})),
    "uspto50k-valid": (_read_uspto50k, datasets.Features({"id": _S, "text": _S, "class": _I})),
    "rxnmapper-examples": (_read_rxnmapper_examples, datasets.Features({"id": _S, "text": _S})),
    "wikitext2": (_read_wikitext2, datasets.Features({"line": _I, "text": _S})),
    "sst2": (_read_sst2, datasets.Features({"idx": _I, "text": _S, "label": _SST2_LABELS})),
}

# Hub copy -> the same columns as the local file.
_HUB_COLUMNS: dict[str, Callable[[datasets.Dataset], dict[str, list]]] = {
    "wikitext2": lambda ds: _wikitext_columns(ds["text"]),
    "sst2": lambda ds: {"idx": list(ds["idx"]), "text": list(ds["sentence"]), "label": list(ds["label"])},
}


def _corpus(name: str) -> Corpus:
    if name not in CORPORA:
        raise UnknownCorpus(f"unknown corpus {name!r}; choose one of: {', '.join(CORPORA)}")
    return CORPORA[name]


def _how_to_get(corpus: Corpus) -> str:
    if corpus.hub is None:
        return (f"run `dupbert data download --to DIR` (fetches it from its public origin, {corpus.source}; "
                f"the reaction files need RDKit: pip install 'dupbert[domain]') and set {DATA_DIR_ENV}=DIR")
    hub_path, config, split = corpus.hub
    return (f"e.g. the project's shared data folder ({corpus.source}); or unset {DATA_DIR_ENV} to load "
            f"the Hugging Face Hub copy {hub_path!r} ({config}, {split})")


def local_file(root: Path, relative: str, data_dir, what: str, how_to_get: str) -> Path:
    """``root / relative``, which must exist.

    Raises:
        CorpusNotFound: it does not; the message names the full path, where ``root`` came from
            (the ``data_dir`` argument or ``DUPBERT_DATA_DIR``) and how to get the file.
    """
    path = root / relative
    if not path.is_file():
        origin = "the data_dir argument" if data_dir is not None else f"${DATA_DIR_ENV}"
        raise CorpusNotFound(
            f"{what} not found: {path} does not exist (data directory {root} from {origin}). "
            f"Set {DATA_DIR_ENV} (or data_dir=) to a folder that contains {relative}: {how_to_get}.")
    return path


def load_from_hub(what: str, hub_path: str, config: str | None, split: str, local_path: str,
                  how_to_get: str) -> datasets.Dataset:
    """A Hugging Face Hub dataset, used only when no data directory is configured.

    Raises:
        CorpusNotFound: it cannot be loaded (offline, no Hub access, renamed); the message says to
            set ``DUPBERT_DATA_DIR`` to a folder holding ``local_path``.
    """
    try:
        return datasets.load_dataset(hub_path, config, split=split)
    except Exception as exc:  # offline, no Hub access, renamed dataset, ...
        raise CorpusNotFound(
            f"{what}: no data directory is configured ({DATA_DIR_ENV} is not set) and the "
            f"Hugging Face Hub copy {hub_path!r} ({config}, {split}) could not be loaded "
            f"({type(exc).__name__}: {exc}). Set {DATA_DIR_ENV} to a folder that contains "
            f"{local_path} ({how_to_get}).") from exc


def _columns_from_hub(corpus: Corpus) -> dict[str, list]:
    if corpus.hub is None:
        raise CorpusNotFound(
            f"corpus {corpus.name!r} needs a data directory, but no data_dir was given and {DATA_DIR_ENV} is "
            f"not set (it has no Hugging Face Hub copy). Point {DATA_DIR_ENV} at a folder that contains "
            f"{corpus.path}: {_how_to_get(corpus)}.")
    hub_path, config, split = corpus.hub
    ds = load_from_hub(f"corpus {corpus.name!r}", hub_path, config, split, corpus.path, corpus.source)
    return _HUB_COLUMNS[corpus.name](ds)


def load_corpus(name: str, n_sequences: int | None = None,
                data_dir: str | os.PathLike | None = None) -> datasets.Dataset:
    """Load a probe corpus as a ``datasets.Dataset``: the first ``n_sequences`` rows in file order.

    Names and columns (``text`` is always the model input, str):

    - ``therasabdab``: ``antibody/therasabdab_chains_long.tsv`` (SOURCES-domain.md A2), rows with
      ``first_occurrence == True`` (2,211 unique V-domain amino-acid sequences). Columns ``id``
      (``<therapeutic>_<chain><fv>``, e.g. ``Abagovomab_H1``), ``text``, ``therapeutic``, ``chain``
      (``H``/``L``), ``fv`` (1, or 2 for a bispecific's second Fv), ``format``, ``light_type``,
      ``highest_clin_trial``, ``genetics``, ``length`` (residues).
    - ``uspto50k-test``, ``uspto50k-valid``: ``reactions/uspto50k_{test,valid}_unmapped.csv``
      (B3/B4; 5,001 rows each): ``id`` (patent number, str), ``text`` (reaction SMILES without atom
      maps, ``reactants>>product``), ``class`` (int, USPTO-50k reaction class 1..10).
    - ``rxnmapper-examples``: ``reactions/rxnmapper_example_rxns.csv`` (B5; 996 rows): ``id``, ``text``.
    - ``wikitext2``: ``wikitext2/wiki.test.raw`` (SOURCES.md): non-empty lines that are not section
      headings (`` = Title = ``), stripped; ``line`` (0-based line number in the file), ``text``.
      Hub fallback ``Salesforce/wikitext`` ``wikitext-2-raw-v1`` test.
    - ``sst2``: ``sst2/dev.tsv`` (SOURCES.md; 872 rows): ``idx`` (0-based row), ``text`` (the
      ``sentence``, unchanged), ``label`` (ClassLabel negative/positive). Hub fallback
      ``nyu-mll/glue`` ``sst2`` validation.

    ``data_dir`` overrides ``$DUPBERT_DATA_DIR``. With a data directory, only local files are read;
    without one, corpora with a Hub copy are loaded from the Hub. ``n_sequences=None`` returns all rows;
    a value above the corpus size returns all rows.

    Raises :class:`UnknownCorpus` (listing the allowed names), :class:`CorpusNotFound` (a missing file,
    naming its full path and ``DUPBERT_DATA_DIR`` and how to get it; or no data dir and no reachable Hub
    copy), ``ValueError`` if ``n_sequences`` is not a whole number >= 1 (``2.5``, ``True``, ``0``) or the
    corpus has no rows after filtering.
    """
    corpus = _corpus(name)
    if n_sequences is not None:
        try:
            n_sequences = check_number("n_sequences", n_sequences, integer=True, minimum=1)
        except ParameterError:
            raise ValueError(f"n_sequences must be a positive number of rows or None, got "
                             f"{n_sequences!r}") from None
    reader, features = _READERS[name]
    root = resolve_data_dir(data_dir)
    if root is None:
        columns, where = _columns_from_hub(corpus), f"Hub dataset {corpus.hub[0]}"
    else:
        path = local_file(root, corpus.path, data_dir, f"corpus {name!r}", _how_to_get(corpus))
        columns, where = reader(path), str(path)
    n_rows = len(columns["text"])
    if n_rows == 0:
        raise ValueError(f"corpus {name!r} has no rows after filtering ({where})")
    if n_sequences is not None:
        columns = {key: values[:n_sequences] for key, values in columns.items()}
    return datasets.Dataset.from_dict(columns, features=features)


def load_texts(name: str, n_sequences: int | None = None,
               data_dir: str | os.PathLike | None = None) -> list[str]:
    """Return the ``text`` column of :func:`load_corpus` as a list of str (same rows, same errors)."""
    return list(load_corpus(name, n_sequences=n_sequences, data_dir=data_dir)["text"])
