"""Shared pytest fixtures: where the staged data lives, no Hugging Face Hub access, and the book
built once per session."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

# Set before any test module imports `datasets`/`huggingface_hub`, which read these at import time.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    """The staged data folder: $DUPBERT_DATA_DIR, else <repo>/../shared/data (tests only read it).
    Without one the tests that need it skip, except under CI (``CI`` set), where they fail: a
    green run must not be half the tests skipped."""
    path = Path(os.environ.get("DUPBERT_DATA_DIR") or REPO_ROOT.parent / "shared" / "data")
    if not path.is_dir():
        message = f"no data folder at {path}: set DUPBERT_DATA_DIR to the project's shared data folder"
        if os.environ.get("CI"):  # under CI a missing data folder is a broken set-up, not a skip
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
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
    from dupbert.core.zoo import cache_dir, zoo_folder

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
    from dupbert.core.data import load_texts

    return load_texts("uspto50k-test", 64, data_dir=shared_data_dir)


# The tiny fine-tuning study of tests that need real runs with stored outputs (RQ5 ensembles): it
# is run, not read from results/cpu, whose rows belong to the study being run and keep changing.
TINY_STUDY = (
    dict(models=["rxnmapper-albert"], tasks=["uspto50k"],
         duplications=["baseline", "repeat shared +3", "copy last"], seeds=[0, 1, 2],
         hyperparameters={"classification": {"max_steps": 1, "batch_size": 8, "learning_rate": 5e-4}},
         max_train_samples=8, max_eval_samples=16),
    dict(models=["all-MiniLM-L6-v2"], tasks=["squad2"], duplications=["baseline", "copy first 3"],
         seeds=[0, 1], hyperparameters={"qa": {"max_steps": 1, "batch_size": 4}},
         max_train_samples=4, max_eval_samples=8),
)


@pytest.fixture(scope="session")
def tiny_study(tmp_path_factory, shared_data_dir, zoo_cache):
    """A tiny RQ3 sweep really run once per session (:data:`TINY_STUDY`: 9 rxnmapper-albert runs on
    USPTO-50k, 3 configurations x seeds 0-2, and 4 MiniLM runs on SQuAD 2.0, 2 configurations x
    seeds 0-1; one optimisation step each), with per-example outputs: a namespace with
    ``results`` (the JSON-lines file), ``outputs`` (its outputs folder), ``sweeps``
    (:data:`TINY_STUDY`, the arguments of each ``sweep`` call) and ``runs``
    (:func:`dupbert.study.ensemble.read_runs` of it). One torch thread: on the shared 2-core machine,
    intra-op threads of a 0.7M-parameter model only wait for each other (7x slower)."""
    import types

    import torch

    from dupbert.study.ensemble import read_runs
    from dupbert.study.sweeps import sweep

    folder = tmp_path_factory.mktemp("tiny_study")
    results, outputs = folder / "rq3.jsonl", folder / "rq3-outputs"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for part in TINY_STUDY:
            sweep(**part, results_path=results, data_dir=shared_data_dir, outputs_dir=outputs,
                  progress=False)
    finally:
        torch.set_num_threads(threads)
    return types.SimpleNamespace(results=results, outputs=outputs, sweeps=TINY_STUDY,
                                 runs=read_runs(results, outputs))


def _jupyter_book() -> list[str]:
    """The jupyter-book command of the running environment (the venv's, when pytest runs from it)."""
    beside = Path(sys.executable).with_name("jupyter-book")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("jupyter-book")
    if found is None:
        pytest.skip("jupyter-book is not installed: pip install -e '.[book]'")
    return [found]


@pytest.fixture(scope="session")
def built_book(tmp_path_factory) -> Path:
    """The book built once per session from the committed executed chapters, offline, with warnings
    as errors (`make render` into a temporary folder; nothing is executed): its html folder."""
    if not (REPO_ROOT / "book" / "rq1.ipynb").exists():
        pytest.skip("book/rq1.ipynb does not exist yet: run `make book` to execute the chapters")
    out = tmp_path_factory.mktemp("book")
    result = subprocess.run(
        [*_jupyter_book(), "build", str(REPO_ROOT), "-W", "--keep-going", "--path-output", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if result.returncode != 0:
        pytest.fail(f"jupyter-book build failed:\n{result.stdout[-5000:]}\n{result.stderr[-5000:]}", pytrace=False)
    html = out / "_build" / "html"
    if not (html / "index.html").is_file():
        pytest.fail(f"jupyter-book build wrote no {html / 'index.html'}", pytrace=False)
    return html


# A test that needs the tiny study (fine-tuned once per session, about two minutes) is slow.
SLOW_FIXTURES = {"tiny_study"}


def pytest_collection_modifyitems(items):
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
