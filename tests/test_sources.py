"""dupbert.tools.sources: download from a local mirror of raw.githubusercontent.com, derive, verify.

The mirror is an ``http.server`` on 127.0.0.1 serving copies of the staged files laid out as
``<owner>/<repo>/<commit>/<path>``; the shared data folder itself is only read.
"""

import argparse
import functools
import http.server
import importlib.util
import os
import shutil
import subprocess
import sys
import threading

import pytest

from dupbert.tools import sources
from dupbert.tools.sources import ChecksumMismatch, DerivationSkipped, DownloadError, MissingDependency
from dupbert.core.zoo import sha256_of

HAVE_RDKIT = importlib.util.find_spec("rdkit") is not None
CHAINS_SHA256 = "f5565d4dd42e9c8f4c7ff01f1a19b071a081a80c953c462828fee643ee7e08e6"  # SOURCES-domain.md A2


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass

    def do_GET(self):
        self.server.requests.append(self.path)
        super().do_GET()


@pytest.fixture
def mirror(tmp_path, shared_data_dir):
    """Serve copies of the verbatim manifest files; yields (base URL, served root, request log)."""
    root = tmp_path / "mirror"
    for entry in sources.manifest()["files"]:
        served = root / entry["repo"] / entry["commit"] / entry["repo_path"]
        served.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shared_data_dir / entry["path"], served)
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Handler, directory=str(root)))
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/", root, server.requests
    server.shutdown()
    server.server_close()


def test_manifest_matches_staged_files(shared_data_dir):
    spec = sources.manifest()
    assert len(spec["files"]) == 4 and len(spec["derived"]) == 3
    for entry in spec["files"] + spec["derived"]:
        path = shared_data_dir / entry["path"]
        assert path.stat().st_size == entry["bytes"], entry["path"]
        assert sha256_of(path) == entry["sha256"], entry["path"]


def test_file_url():
    entry = sources.manifest()["files"][0]
    assert sources.file_url(entry) == (
        "https://raw.githubusercontent.com/diwuhub/protepilot/24604a0d86f01d949b68802bcba077d0c479802d/"
        "data/TheraSAbDab_SeqStruc_OnlineDownload.csv")
    assert sources.file_url(entry, "http://h:1").startswith("http://h:1/diwuhub/protepilot/")


def test_chains_derivation_is_byte_identical(shared_data_dir):
    derived = sources.therasabdab_chains_long(shared_data_dir / "antibody/TheraSAbDab_SeqStruc_OnlineDownload.csv")
    assert derived == (shared_data_dir / "antibody/therasabdab_chains_long.tsv").read_bytes()
    assert derived.count(b"\n") == 2534  # header + 2,533 chains


@pytest.fixture
def no_rdkit(monkeypatch):
    """Make ``import rdkit`` fail, so the slow RDKit derivation is skipped with a warning."""
    monkeypatch.setitem(sys.modules, "rdkit", None)


def test_download_from_mirror(tmp_path, mirror, no_rdkit):
    url, _, requests = mirror
    target = tmp_path / "data"
    with pytest.warns(DerivationSkipped, match="pip install rdkit"):
        paths = sources.download(target, mirror=url)
    spec = sources.manifest()
    expected = spec["files"] + [e for e in spec["derived"] if not e["requires"]]
    assert paths == [(target / e["path"]).resolve() for e in expected]
    for entry in expected:
        assert sha256_of(target / entry["path"]) == entry["sha256"], entry["path"]
    assert sha256_of(target / "antibody/therasabdab_chains_long.tsv") == CHAINS_SHA256
    assert len(requests) == 4
    assert not (target / "reactions/uspto50k_test_unmapped.csv").exists()
    assert not list(target.rglob("*.part"))

    # everything is in place: a second call downloads nothing and returns the same paths
    requests.clear()
    with pytest.warns(DerivationSkipped):
        assert sources.download(target, mirror=url) == paths
    assert requests == []

    with pytest.warns(DerivationSkipped):
        sources.download(target, mirror=url, force=True)
    assert len(requests) == 4


@pytest.mark.skipif(not HAVE_RDKIT and not os.environ.get("CI"),
                    reason="rdkit is not installed (pip install 'dupbert[domain]'); under CI it must be")
@pytest.mark.slow
def test_download_derives_uspto50k_unmapped_with_rdkit(tmp_path, mirror, shared_data_dir):
    """RDKit reproduces SOURCES-domain.md B3/B4 byte for byte (made with rdkit 2026.09.1)."""
    url, _, requests = mirror
    paths = sources.download(tmp_path, mirror=url)
    assert len(paths) == 7
    for split in ("test", "valid"):
        name = f"reactions/uspto50k_{split}_unmapped.csv"
        assert (tmp_path / name).read_bytes() == (shared_data_dir / name).read_bytes()
    requests.clear()
    assert sources.download(tmp_path, mirror=url) == paths
    assert requests == []


def test_corrupted_file_raises_and_leaves_nothing(tmp_path, mirror):
    url, root, _ = mirror
    entry = next(e for e in sources.manifest()["files"] if e["path"].endswith("rxnmapper_example_rxns.csv"))
    served = root / entry["repo"] / entry["commit"] / entry["repo_path"]
    served.write_bytes(served.read_bytes().replace(b"Cl", b"Br", 1))
    target = tmp_path / "data"
    with pytest.raises(ChecksumMismatch) as err:
        sources.download(target, mirror=url)
    message = str(err.value)
    assert str(target / entry["path"]) in message
    assert sources.file_url(entry, url) in message
    assert entry["sha256"] in message and sha256_of(served) in message
    assert not (target / entry["path"]).exists()
    assert not list(target.rglob("*.part"))


def test_wrong_local_file_is_replaced(tmp_path, mirror, no_rdkit):
    url, _, _ = mirror
    target = tmp_path / "data"
    bad = target / "reactions/rxnmapper_example_rxns.csv"
    bad.parent.mkdir(parents=True)
    bad.write_text("not the file\n")
    with pytest.warns(DerivationSkipped):
        sources.download(target, mirror=url)
    assert sha256_of(bad) == "37e52a6ffd11b23e0fc072fa20b8abbb4dda9ac39ff5b14ec1241a34c4002a68"


def test_missing_rdkit_is_explained(no_rdkit, shared_data_dir):
    with pytest.raises(MissingDependency, match="pip install rdkit"):
        sources.uspto50k_unmapped(shared_data_dir / "reactions/uspto50k_raw_test.csv")


def test_unreachable_mirror(tmp_path):
    with pytest.raises(DownloadError, match="could not download http://127.0.0.1:9/"):
        sources.download(tmp_path, mirror="http://127.0.0.1:9")
    assert not list(tmp_path.rglob("*.*"))


def test_add_data_commands_registers_download(tmp_path):
    parser = argparse.ArgumentParser(prog="dupbert")
    sources.add_data_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["data", "download", "--to", str(tmp_path), "--mirror", "http://m/", "--force"])
    assert (args.command, args.data_command) == ("data", "download")
    assert (args.to, args.mirror, args.force) == (tmp_path, "http://m/", True)
    assert args.func is sources._cmd_download


def test_cli_download(tmp_path, mirror, no_rdkit, capsys):
    url, _, _ = mirror
    assert sources.main(["download", "--to", str(tmp_path), "--mirror", url]) == 0
    out, err = capsys.readouterr()
    assert str(tmp_path / "antibody" / "therasabdab_chains_long.tsv") in out
    assert "pip install rdkit" in err and "DUPBERT_DATA_DIR" in err


def test_cli_reports_checksum_error(tmp_path, mirror, no_rdkit, capsys):
    url, root, _ = mirror
    for served in root.rglob("raw_test.csv"):
        served.write_bytes(b"id,class,rxn\n")
    assert sources.main(["download", "--to", str(tmp_path), "--mirror", url]) == 1
    assert "sha256 mismatch" in capsys.readouterr().err


def test_python_m_entry_point():
    result = subprocess.run([sys.executable, "-m", "dupbert.tools.sources", "download", "--help"],
                            capture_output=True, text=True, check=True)
    assert "--to DIR" in result.stdout and "--mirror" in result.stdout
