"""dupbert.core.results: what the cache keys of the probe and the RQ2 statistics say about their
inputs (the probe's cache key once omitted the model weights and the data folder)."""

import os

import numpy as np
import pytest

import torch
from transformers import BertConfig, BertForMaskedLM

from dupbert.core.results import cache_key, input_fingerprint
from dupbert.core.zoo import ZOO


def _tiny_bert(seed):
    torch.manual_seed(seed)
    return BertForMaskedLM(BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2,
                                      num_attention_heads=2, intermediate_size=32))


def test_new_weights_in_a_model_folder_change_the_key(tmp_path, monkeypatch):
    """A local model folder is fingerprinted by its weight files (path, size, modification
    time): weights saved again in the same folder give another key."""
    monkeypatch.delenv("DUPBERT_DATA_DIR", raising=False)
    folder = tmp_path / "my-bert"
    _tiny_bert(0).save_pretrained(folder)
    weights = folder / "model.safetensors"
    before = input_fingerprint(str(folder), "uspto50k-test")
    assert before == {"model_weights": [[str(weights), weights.stat().st_size,
                                         weights.stat().st_mtime_ns]], "corpus_file": "hub"}
    _tiny_bert(1).save_pretrained(folder)
    os.utime(weights, ns=(before["model_weights"][0][2] + 10**9,) * 2)  # a later write
    after = input_fingerprint(str(folder), "uspto50k-test")
    assert after != before
    assert cache_key(model=str(folder), **after) != cache_key(model=str(folder), **before)


def test_zoo_models_by_their_wheel_and_hub_ids_by_name(tmp_path):
    """A zoo model is its wheel's sha256; a Hub id (no folder of that name) only its name."""
    assert input_fingerprint("rxnfp-bert", "uspto50k-test", tmp_path)["model_weights"] == (
        ZOO["rxnfp-bert"].wheel_sha256)
    assert input_fingerprint("bert-base-uncased", "uspto50k-test", tmp_path) == {
        "model_weights": "bert-base-uncased", "corpus_file": "hub"}


def test_a_table_and_results_files_read_back(tmp_path):
    import json

    import pandas as pd

    from dupbert.core.results import read_results, read_table, write_table

    frame = pd.DataFrame({"model": ["a", "b"], "top1": [0.123456789, 0.5]})
    write_table(frame, tmp_path, "rq1-reconstruction")
    back = read_table(tmp_path, "rq1-reconstruction")
    assert back["model"].tolist() == ["a", "b"] and back["top1"].tolist() == [0.123457, 0.5]
    assert read_table(tmp_path, "rq2-spearman") is None
    rows = [{"run_key": f"k{i}", "model": "m", "task": "sst2", "duplication": "baseline",
             "seed": i} for i in range(3)]
    for name, part in (("one.jsonl", rows[:2]), ("two.jsonl", rows[2:])):
        (tmp_path / name).write_text("".join(json.dumps(row) + "\n" for row in part))
    both = read_results([tmp_path / "one.jsonl", tmp_path / "missing.jsonl", tmp_path / "two.jsonl"])
    assert both["run_key"].tolist() == ["k0", "k1", "k2"] and both.index.tolist() == [0, 1, 2]
    assert read_results([tmp_path / "missing.jsonl"]) is None


def test_atomic_folder_keeps_the_first_of_two_writers(tmp_path):
    """Two workers preparing one folder: the first in place wins, the second leaves no debris,
    and a failed writer leaves nothing behind."""
    from dupbert.core.results import atomic_folder

    target = tmp_path / "tokenizer"
    with atomic_folder(target) as first, atomic_folder(target) as second:
        (first / "vocab.txt").write_text("first")
        (second / "vocab.txt").write_text("second")
    assert (target / "vocab.txt").read_text() == "second"  # the inner writer finished first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokenizer"]
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o777 & ~umask  # not mkdtemp's 0700
    with pytest.raises(RuntimeError), atomic_folder(tmp_path / "broken") as tmp:
        (tmp / "half").write_text("x")
        raise RuntimeError("writer failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokenizer"]


def test_atomic_save_npy_round_trips(tmp_path):
    from dupbert.core.results import atomic_save_npy

    rows = np.arange(12, dtype=np.int32).reshape(3, 4)
    path = atomic_save_npy(tmp_path / "rows.npy", rows)
    assert np.array_equal(np.load(path), rows) and np.load(path).dtype == np.int32
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600
    assert [p.name for p in tmp_path.iterdir()] == ["rows.npy"]
