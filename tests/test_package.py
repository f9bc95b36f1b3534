"""What people install: a small wheel with no model weights in it; the models trained here are
found beside the library, or say in one message how to get them."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_wheel_is_small_and_holds_no_weights(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path), str(REPO)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("dupbert-*.whl")
    assert wheel.stat().st_size <= 1_000_000, f"{wheel.name}: {wheel.stat().st_size:,} bytes"
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.endswith((".safetensors", ".bin"))]
    assert "dupbert/core/zoo.py" in names and "dupbert/tools/sources_manifest.json" in names
    assert "dupbert/book/rq1.py" in names and "dupbert/training/pretrain.py" in names


def test_the_models_trained_here_are_read_from_beside_the_library(monkeypatch, tmp_path):
    from dupbert.core import zoo
    from dupbert.core.errors import ModelNotAvailable

    assert zoo.weights_dir("bert-en-small") == REPO / "models" / "bert-en-small"
    monkeypatch.setattr(zoo, "BUNDLED", tmp_path / "nowhere")
    with pytest.raises(ModelNotAvailable, match=r"models/ folder.*DUPBERT_MODELS"):
        zoo.zoo_folder("bert-en-small", tmp_path / "cache")
