"""The dupbert command line."""

import pandas as pd

from dupbert.cli import main
from dupbert.zoo import ZOO


def test_zoo_lists_every_entry(capsys):
    assert main(["zoo"]) == 0
    out = capsys.readouterr().out
    for name, entry in ZOO.items():
        assert name in out and f"{entry.package}=={entry.version}" in out


def test_probe_writes_the_table(tmp_path, monkeypatch, shared_data_dir, zoo_cache, capsys):
    monkeypatch.setenv("DUPBERT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("DUPBERT_DATA_DIR", str(shared_data_dir))
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "models").symlink_to(zoo_cache / "models")
    out = tmp_path / "rq1.csv"
    assert main(["probe", "--model", "rxnmapper-albert", "--n-sequences", "4",
                 "--out", str(out)]) == 0
    frame = pd.read_csv(out)
    assert len(frame) == 26 and set(frame["variant"]) == {"pretrained", "random-init control"}
    assert "top1_macro" in capsys.readouterr().out


def test_bad_model_is_one_clear_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DUPBERT_CACHE", str(tmp_path))
    assert main(["probe", "--model", "no-such-model-xyz", "--n-sequences", "4"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dupbert: error: could not load model 'no-such-model-xyz'")
