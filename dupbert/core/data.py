"""Corpora for the RQ1 reconstruction probe (and the later tasks) as ``datasets.Dataset``.

Local files first (``data_dir``, else ``$DUPBERT_DATA_DIR``; layout in the data folder's
``SOURCES.md`` and ``SOURCES-domain.md``), the Hub only when no data directory is configured
and the corpus has a Hub copy (WikiText-2, SST-2). ``dupbert data download --to DIR`` fetches
the antibody and reaction corpora (:mod:`dupbert.tools.sources`).

Every corpus has a ``text`` column (str) plus metadata; rows keep file order, so
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
    """A corpus file is missing from the data directory, or no source for the corpus is available.
    """


class UnknownCorpus(DupbertError, ValueError):
    """The corpus name is not one of :data:`CORPORA`."""


@dataclass(frozen=True)
class Corpus:
    """Where a corpus lives: ``path`` in the data directory; ``hub``: ``(path, config, split)``
    or None.
    """

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
        Corpus("wikitext2-valid", "wikitext2/wiki.valid.tokens",
               "WikiText-2 valid: paragraphs of 40+ words, WikiText's tokenisation and @-@ markup "
               "undone, <unk> written as [UNK] (not scored): the held-out MLM text",
               "SOURCES.md, WikiText-2", hub=("Salesforce/wikitext", "wikitext-2-v1", "validation")),
        Corpus("sst2", "sst2/dev.tsv", "SST-2 (GLUE) dev sentences with sentiment labels",
               "SOURCES.md, SST-2", hub=("nyu-mll/glue", "sst2", "validation")),
    ]
}

_SST2_LABELS = datasets.ClassLabel(names=["negative", "positive"])
_HEADING = re.compile(r"^=( =)* .* =( =)*$")  # " = Title = ", " = = Section = = "


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path | None:
    """``data_dir``, else ``$DUPBERT_DATA_DIR`` (``~`` expanded; empty counts as unset), else
    ``None`` (use the Hub). Not checked for existence.
    """
    if data_dir is None:
        data_dir = os.environ.get(DATA_DIR_ENV) or None
    return None if data_dir is None else Path(data_dir).expanduser()


def default_corpus(model_name: str) -> str:
    """The probe corpus of a model's domain, as its zoo entry declares it
    (``dupbert.core.zoo.ZooEntry.corpus``): ``antiberty`` -> ``therasabdab``; ``rxnfp-bert``,
    ``rxnmapper-albert`` and the reaction models pretrained here (``bert-rxn``, ``albert-rxn``) ->
    ``uspto50k-test``; any other name, a zoo model or not -> ``wikitext2``.
    """
    from .zoo import ZOO

    entry = ZOO.get(model_name)
    return entry.corpus if entry is not None else "wikitext2"


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


def read_uspto50k(path: Path) -> dict[str, list]:
    """USPTO-50k as ``{"id", "text", "class"}`` columns (every field read as a string)."""
    df = _read_table(path)
    return {"id": df["id"].tolist(), "text": df["rxn"].tolist(), "class": df["class"].astype(int).tolist()}


def _read_rxnmapper_examples(path: Path) -> dict[str, list]:
    df = _read_table(path)
    return {"id": df.iloc[:, 0].tolist(), "text": df["rxn"].tolist()}


WIKITEXT_MARKUP = re.compile(r" @(.)@ ")  # WikiText's " @-@ ", " @,@ ", " @.@ "


def _wikitext_columns(lines: list[str]) -> dict[str, list]:
    keep = [(i, WIKITEXT_MARKUP.sub(r"\1", s.strip())) for i, s in enumerate(lines)
            if s.strip() and not _HEADING.match(s.strip())]
    return {"line": [i for i, _ in keep], "text": [s for _, s in keep]}


def heldout_paragraphs(lines: list[str], unk: str = "[UNK]", min_words: int = 40) -> dict[str, list]:
    """WikiText-2's tokens version as running text: paragraphs of ``min_words``+ words, headings
    dropped, WikiText's markup and spaces before punctuation undone, ``<unk>`` replaced by ``unk``
    (``"keep"`` leaves it)."""
    keep = []
    for i, line in enumerate(lines):
        line = line.strip()
        if line.startswith("=") or len(line.split()) < min_words:
            continue
        line = WIKITEXT_MARKUP.sub(r"\1", line)
        if unk != "keep":
            line = line.replace("<unk>", unk)
        keep.append((i, re.sub(r" ([.,;:!?')])", r"\1", line).replace("( ", "(")))
    return {"line": [i for i, _ in keep], "text": [s for _, s in keep]}


def _read_wikitext2(path: Path) -> dict[str, list]:
    return _wikitext_columns(path.read_text(encoding="utf-8").split("\n"))


def read_sst2(path: Path) -> dict[str, list]:
    """GLUE SST-2 (tsv, no quoting) as ``{"idx", "text", "label"}`` columns."""
    df = _read_table(path, sep="\t", quoting=csv.QUOTE_NONE)  # GLUE tsv has no quoting
    return {"idx": list(range(len(df))), "text": df["sentence"].tolist(),
            "label": df["label"].astype(int).tolist()}


_S, _I = datasets.Value("string"), datasets.Value("int64")
_READERS: dict[str, tuple[Callable[[Path], dict[str, list]], datasets.Features]] = {
    "therasabdab": (_read_therasabdab, datasets.Features({
        "id": _S, "text": _S, "therapeutic": _S, "chain": _S, "fv": _I, "format": _S, "light_type": _S,
        "highest_clin_trial": _S, "genetics": _S, "length": _I})),
    "uspto50k-test": (read_uspto50k, datasets.Features({"id": _S, "text": _S, "class": _I})),
    "uspto50k-valid": (read_uspto50k, datasets.Features({"id": _S, "text": _S, "class": _I})),
    "rxnmapper-examples": (_read_rxnmapper_examples, datasets.Features({"id": _S, "text": _S})),
    "wikitext2": (_read_wikitext2, datasets.Features({"line": _I, "text": _S})),
    "wikitext2-valid": (lambda path: heldout_paragraphs(path.read_text(encoding="utf-8").split("\n")),
                        datasets.Features({"line": _I, "text": _S})),
    "sst2": (read_sst2, datasets.Features({"idx": _I, "text": _S, "label": _SST2_LABELS})),
}

# Hub copy -> the same columns as the local file.
_HUB_COLUMNS: dict[str, Callable[[datasets.Dataset], dict[str, list]]] = {
    "wikitext2": lambda ds: _wikitext_columns(ds["text"]),
    "wikitext2-valid": lambda ds: heldout_paragraphs(ds["text"]),
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
    """``root / relative``; CorpusNotFound if missing (names the path, where ``root`` came from, and
    how to get the file).
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
    """A Hub dataset, used only without a data directory; CorpusNotFound if it cannot be loaded (the
    message says to set ``DUPBERT_DATA_DIR`` to a folder holding ``local_path``).
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
    """A probe corpus as a ``datasets.Dataset``: the first ``n_sequences`` rows in file order
    (``None``, or more than there are: all rows).

    Names and columns (``text`` is always the model input):

    - ``therasabdab``: ``antibody/therasabdab_chains_long.tsv`` (SOURCES-domain.md A2), rows with
      ``first_occurrence == True`` (2,211 unique V-domain sequences): ``id``
      (``<therapeutic>_<chain><fv>``), ``text``, ``therapeutic``, ``chain`` (``H``/``L``), ``fv``
      (1, or 2 for a bispecific's second Fv), ``format``, ``light_type``, ``highest_clin_trial``,
      ``genetics``, ``length`` (residues).
    - ``uspto50k-test``, ``uspto50k-valid``: ``reactions/uspto50k_{test,valid}_unmapped.csv``
      (5,001 rows each): ``id`` (patent, str), ``text`` (reaction SMILES ``reactants>>product``,
      no atom maps), ``class`` (int, 1..10).
    - ``rxnmapper-examples``: ``reactions/rxnmapper_example_rxns.csv`` (996 rows): ``id``,
      ``text``.
    - ``wikitext2``: ``wikitext2/wiki.test.raw``, non-empty non-heading lines, stripped, WikiText's
      ``@-@``/``@,@``/``@.@`` markup undone: ``line`` (0-based line number), ``text``. Hub:
      ``Salesforce/wikitext`` ``wikitext-2-raw-v1`` test.
    - ``wikitext2-valid``: ``wikitext2/wiki.valid.tokens`` as :func:`heldout_paragraphs` reads it
      (the held-out text of the MLM-quality measure): ``line``, ``text``. Hub: ``wikitext-2-v1``
      validation.
    - ``sst2``: ``sst2/dev.tsv`` (872 rows): ``idx`` (0-based row), ``text``, ``label``
      (ClassLabel negative/positive). Hub: ``nyu-mll/glue`` ``sst2`` validation.

    Raises:
        UnknownCorpus: an unknown name (lists the names).
        CorpusNotFound: a missing file (names its path and how to get it), or no data directory
            and no reachable Hub copy.
        ValueError: ``n_sequences`` not a whole number >= 1, or no rows after filtering.
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
               data_dir: str | os.PathLike | None = None, text_column: str = "text") -> list[str]:
    """The sequences of a corpus as a list of str: a built-in corpus (the ``text_column`` of
    :func:`load_corpus`) or a user's source (:func:`read_texts`).

    Raises:
        As :func:`load_corpus` and :func:`read_texts`; CorpusUnreadable when a built-in corpus
        lacks ``text_column``.
    """
    if name not in CORPORA:
        return read_texts(name, n_sequences, text_column=text_column)
    corpus = load_corpus(name, n_sequences=n_sequences, data_dir=data_dir)
    if text_column not in corpus.column_names:
        raise CorpusUnreadable(f"corpus {name!r} has no column {text_column!r}; its columns are: "
                               f"{', '.join(corpus.column_names)}")
    return list(corpus[text_column])


# --------------------------------------------------------------------------------------------------
# Any text the user has: a file, a folder saved with datasets' save_to_disk, a Hub dataset


class CorpusUnreadable(DupbertError, ValueError):
    """A text source that exists but gives no texts (empty, a missing column, a non-string value,
    not UTF-8).
    """


HUB_PREFIX = "hub:"
TABLE_SUFFIXES = {".csv": ",", ".tsv": "\t", ".jsonl": None, ".json": None, ".parquet": None}
SOURCE_FORMS = ("a built-in corpus name ({names}), a plain text file (one sequence per line; "
                ".gz too), a .csv/.tsv/.jsonl/.parquet file (.gz too) with a text column, a folder "
                "saved with datasets' save_to_disk, or hub:NAME[:CONFIG]:SPLIT")


def _forms() -> str:
    return SOURCE_FORMS.format(names=", ".join(CORPORA))


def is_corpus_name(spec: str) -> bool:
    """True for a built-in corpus name (:data:`CORPORA`), False for a file, folder or Hub spec."""
    return spec in CORPORA


def _parse_hub_spec(spec: str) -> tuple[str, str | None, str]:
    """``hub:NAME[:CONFIG]:SPLIT`` -> ``(NAME, CONFIG or None, SPLIT)``; UnknownCorpus if malformed.
    """
    parts = spec[len(HUB_PREFIX):].split(":")
    if len(parts) not in (2, 3) or not all(parts):
        raise UnknownCorpus(f"Hub corpus {spec!r} must read hub:NAME:SPLIT or "
                            f"hub:NAME:CONFIG:SPLIT, e.g. hub:nyu-mll/glue:sst2:validation")
    return (parts[0], None, parts[1]) if len(parts) == 2 else (parts[0], parts[1], parts[2])


def check_text_source(spec: str) -> str:
    """``spec`` if it can name texts: a built-in corpus, an existing file or folder, or a
    well-formed Hub spec (content is checked by :func:`read_texts`).

    Raises:
        CorpusNotFound: none of these (the message lists every form a corpus may take).
        UnknownCorpus: a malformed ``hub:`` spec, or not a non-empty string.
    """
    if not isinstance(spec, (str, os.PathLike)) or not str(spec).strip():
        raise UnknownCorpus(f"a corpus must be {_forms()}; got {spec!r}")
    spec = str(spec)
    if is_corpus_name(spec):
        return spec
    if spec.startswith(HUB_PREFIX):
        _parse_hub_spec(spec)
        return spec
    path = Path(spec).expanduser()
    if not path.exists():
        raise CorpusNotFound(f"corpus {spec!r} is not a built-in corpus and no file or folder "
                             f"{path.resolve()} exists; a corpus is {_forms()}")
    return spec


def read_texts(spec: str | os.PathLike, n_sequences: int | None = None,
               text_column: str = "text") -> list[str]:
    """The first ``n_sequences`` non-blank texts of a user's source, in order.

    Forms (checked by :func:`check_text_source`; ``.gz`` decompressed):

    - a plain text file (any other suffix): one sequence per line;
    - ``.csv``, ``.tsv``, ``.jsonl``/``.json`` (JSON Lines), ``.parquet``: column ``text_column``;
      CSV/TSV cells read as strings, never type-guessed;
    - a ``datasets.Dataset.save_to_disk`` folder (one split): column ``text_column``;
    - ``hub:NAME[:CONFIG]:SPLIT``: ``datasets.load_dataset(NAME, CONFIG, split=SPLIT)``.

    Blank texts are skipped in every form, so the same texts give the same results in any form.

    Raises:
        CorpusNotFound: no such file or folder, or the Hub dataset cannot be loaded.
        UnknownCorpus: a malformed ``hub:`` spec.
        CorpusUnreadable: no non-blank text, no column ``text_column`` (lists the columns), a
            non-string value, not UTF-8, a ``DatasetDict`` folder (lists its splits), or a
            ``text_column`` other than ``"text"`` for a plain text file.
        ValueError: ``n_sequences`` is not a whole number >= 1 or None.
    """
    spec = check_text_source(spec)
    if n_sequences is not None:
        check_number("n_sequences", n_sequences, integer=True, minimum=1)
    if spec.startswith(HUB_PREFIX):
        values, where, unit = _hub_column(spec, text_column), spec, f"column {text_column!r}"
    else:
        path = Path(spec).expanduser()
        values, where = _path_column(path, text_column), str(path)
        unit = "line" if _table_suffix(path) is None and not path.is_dir() \
            else f"column {text_column!r}"
    if len(values) == 0:
        raise CorpusUnreadable(f"{where} is empty: it holds no text to read")
    texts = []
    for row, value in enumerate(values):
        if not isinstance(value, str):
            raise CorpusUnreadable(f"{where}: {unit} row {row} is {value!r} "
                                   f"({type(value).__name__}), not a string")
        if value.strip():
            texts.append(value)
            if n_sequences is not None and len(texts) == n_sequences:
                break
    if not texts:
        raise CorpusUnreadable(f"{where} holds no text: all {len(values)} {unit} values are "
                               f"empty or blank")
    return texts


def _table_suffix(path: Path) -> str | None:
    """The table format of a file name (``.gz`` looked through), or None for plain text."""
    suffixes = path.suffixes[-2:] if path.suffix == ".gz" else path.suffixes[-1:]
    suffix = suffixes[0].lower() if suffixes else ""
    return suffix if suffix in TABLE_SUFFIXES else None


def _require_column(columns: list[str], text_column: str, where: str) -> None:
    if text_column not in columns:
        raise CorpusUnreadable(f"{where} has no column {text_column!r}; its columns are: "
                               f"{', '.join(map(str, columns)) or '(none)'} (choose one with "
                               f"text_column= or --text-column)")


def _path_column(path: Path, text_column: str) -> list:
    """The values of ``text_column`` of a file or saved dataset folder (plain text: lines)."""
    if path.is_dir():
        return _saved_dataset_column(path, text_column)
    suffix = _table_suffix(path)
    if suffix is None:
        if text_column != "text":
            raise CorpusUnreadable(f"{path} is read as a plain text file (one sequence per line), "
                                   f"which has no columns, but text_column={text_column!r} was "
                                   f"given; use a .csv/.tsv/.jsonl/.parquet file or drop it")
        return _decoded(path).splitlines()
    if suffix in (".csv", ".tsv"):
        try:
            frame = _read_table(path, sep=TABLE_SUFFIXES[suffix])
        except pd.errors.EmptyDataError:
            frame = pd.DataFrame()
    elif suffix == ".parquet":
        frame = pd.read_parquet(path)
    else:
        frame = _read_json_lines(path)
    if frame.columns.empty:
        return []  # an empty file
    _require_column([str(c) for c in frame.columns], text_column, str(path))
    return frame[text_column].tolist()


def _decoded(path: Path) -> str:
    """A (possibly gzipped) file's text. Raises CorpusUnreadable if it is not UTF-8."""
    import gzip

    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CorpusUnreadable(f"{path} is not UTF-8 text ({error}); a corpus is {_forms()}"
                               ) from None


def _read_json_lines(path: Path) -> pd.DataFrame:
    """A JSON Lines file as a frame; CorpusUnreadable for a line that is not a JSON object (named).
    """
    import json

    rows = []
    for number, line in enumerate(_decoded(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise CorpusUnreadable(f"{path} line {number} is not JSON ({error.msg}); JSON Lines "
                                   f"files hold one object per line") from None
        if not isinstance(row, dict):
            raise CorpusUnreadable(f"{path} line {number} is {type(row).__name__}, not a JSON "
                                   f"object with a text column")
        rows.append(row)
    return pd.DataFrame(rows)


def _saved_dataset_column(path: Path, text_column: str) -> list:
    try:
        saved = datasets.load_from_disk(str(path))
    except FileNotFoundError as error:
        raise CorpusUnreadable(f"{path} is a folder but not one written by datasets' "
                               f"save_to_disk ({error}); a corpus is {_forms()}") from None
    if isinstance(saved, datasets.DatasetDict):
        raise CorpusUnreadable(f"{path} holds a DatasetDict with splits {list(saved)}: give one "
                               f"split's folder, e.g. {path / next(iter(saved))}")
    _require_column(saved.column_names, text_column, str(path))
    return saved[text_column]


def _hub_column(spec: str, text_column: str) -> list:
    hub_path, config, split = _parse_hub_spec(spec)
    try:
        dataset = datasets.load_dataset(hub_path, config, split=split)
    except Exception as exc:  # offline, no Hub access, no such dataset/config/split
        raise CorpusNotFound(f"Hub corpus {spec!r}: datasets.load_dataset({hub_path!r}, "
                             f"{config!r}, split={split!r}) failed ({type(exc).__name__}: {exc})"
                             ) from exc
    _require_column(dataset.column_names, text_column, spec)
    return dataset[text_column]


def texts_digest(texts: list[str]) -> str:
    """sha256 (16 hex digits) of a list of texts: a content cache key, the same from any file form,
    never stale after an edit.
    """
    import hashlib
    import json

    return hashlib.sha256(json.dumps(list(texts), ensure_ascii=False).encode()).hexdigest()[:16]
