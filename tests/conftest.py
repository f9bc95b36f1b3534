"""Shared pytest fixtures: where the staged data lives, and no Hugging Face Hub access."""

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

# Set before any test module imports `datasets`/`huggingface_hub`, which read these at import time.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    """The staged data folder: $DUPBERT_DATA_DIR, else <repo>/../shared/data (tests only read it)."""
    path = Path(os.environ.get("DUPBERT_DATA_DIR") or REPO_ROOT.parent / "shared" / "data")
    if not path.is_dir():
        pytest.skip(f"no data folder at {path}: set DUPBERT_DATA_DIR to the project's shared data folder")
    return path


@pytest.fixture(scope="session", autouse=True)
def _offline_hub(tmp_path_factory):
    """Every test runs offline with a throw-away Hugging Face cache."""
    home = tmp_path_factory.mktemp("hf_home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("HF_DATASETS_OFFLINE", "1")
        mp.setenv("HF_HOME", str(home))
        mp.setenv("HF_DATASETS_CACHE", str(home / "datasets"))
        yield


@pytest.fixture(scope="session")
def zoo_cache() -> Path:
    """The zoo cache shared by the whole session: $DUPBERT_CACHE, else the user's default cache
    (a zoo model is downloaded and converted once, then reused). rxnmapper-albert is in it."""
    from dupbert.zoo import cache_dir, zoo_folder

    zoo_folder("rxnmapper-albert", cache_dir())
    return cache_dir()


@pytest.fixture(scope="session")
def rxnmapper(zoo_cache):
    """The real pretrained rxnmapper ALBERT MLM (3 MB) and its SMILES tokenizer."""
    from dupbert import load_mlm

    return load_mlm("rxnmapper-albert", cache=zoo_cache)


@pytest.fixture(scope="session")
def uspto_first_64(shared_data_dir) -> list[str]:
    """The first 64 reactions of USPTO-50k test (unmapped SMILES), in file order."""
    from dupbert.data import load_texts

    return load_texts("uspto50k-test", 64, data_dir=shared_data_dir)
