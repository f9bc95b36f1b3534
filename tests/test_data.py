"""dupbert.core.data: corpora read from the staged data folder; values measured once and pinned here.

Counts agree with SOURCES.md / SOURCES-domain.md where those state them.
"""

from collections import Counter

import datasets
import pytest

from dupbert.core import data
from dupbert.core.data import CorpusNotFound, UnknownCorpus, default_corpus, load_corpus, load_texts


@pytest.fixture
def no_data_dir(monkeypatch):
    monkeypatch.delenv("DUPBERT_DATA_DIR", raising=False)


def test_resolve_data_dir_argument_overrides_env(monkeypatch, tmp_path):
    monkeypatch.setenv("DUPBERT_DATA_DIR", str(tmp_path / "env"))
    assert data.resolve_data_dir() == tmp_path / "env"
    assert data.resolve_data_dir(tmp_path / "arg") == tmp_path / "arg"
    monkeypatch.setenv("DUPBERT_DATA_DIR", "")
    assert data.resolve_data_dir() is None


def test_env_var_is_used(monkeypatch, shared_data_dir):
    monkeypatch.setenv("DUPBERT_DATA_DIR", str(shared_data_dir))
    assert load_texts("sst2", 1) == ["it 's a charming and often affecting journey . "]


def test_therasabdab_unique_chains(shared_data_dir):
    ds = load_corpus("therasabdab", data_dir=shared_data_dir)
    assert len(ds) == 2211  # SOURCES-domain.md A2: 2,211 unique sequences
    assert Counter(ds["chain"]) == {"H": 1148, "L": 1063}
    assert Counter(ds["fv"]) == {1: 2023, 2: 188}
    assert len(set(ds["text"])) == len(set(ds["id"])) == 2211
    assert ds.features["id"] == datasets.Value("string")
    first = ds[0]
    assert first["id"] == "Abagovomab_H1"
    assert first["text"].startswith("QVKLQESGAELARPGASVKLSCKAS") and first["length"] == len(first["text"]) == 119
    assert (first["chain"], first["format"], first["genetics"]) == ("H", "Whole mAb", "Murine")
    assert ds[-1]["id"] == "Zubotamig_H2"
    assert set("".join(ds["text"])) <= set("ACDEFGHIKLMNPQRSTVWY")


def test_uspto50k_test(shared_data_dir):
    ds = load_corpus("uspto50k-test", data_dir=shared_data_dir)
    assert len(ds) == 5001
    assert ds.features["id"] == datasets.Value("string") and ds.features["class"] == datasets.Value("int64")
    assert ds[0] == {
        "id": "US08497281B2",
        "text": "O=C(O)c1ccc2nccn2c1.c1ccc2c(c1)CC[C@@H]1NCCC[C@H]21>>O=C(c1ccc2nccn2c1)N1CCC[C@@H]2c3ccccc3CC[C@@H]21",
        "class": 2,
    }
    # SOURCES-domain.md B1 class counts, test
    assert Counter(ds["class"]) == {1: 1520, 2: 1226, 3: 570, 4: 86, 5: 66, 6: 823, 7: 416, 8: 93, 9: 176, 10: 25}
    assert all(">>" in t and ":" not in t for t in ds["text"])  # no atom maps, empty reagent field


def test_uspto50k_first_500_is_deterministic(shared_data_dir):
    ds = load_corpus("uspto50k-test", n_sequences=500, data_dir=shared_data_dir)
    assert len(ds) == 500
    assert Counter(ds["class"]) == {1: 151, 2: 117, 3: 48, 4: 5, 5: 8, 6: 100, 7: 44, 8: 10, 9: 15, 10: 2}
    assert ds[499]["id"] == "US20090227566A1"
    assert ds["text"] == load_texts("uspto50k-test", 500, data_dir=shared_data_dir)


def test_uspto50k_valid(shared_data_dir):
    ds = load_corpus("uspto50k-valid", data_dir=shared_data_dir)
    assert len(ds) == 5001
    assert ds[0]["id"] == "US20090105259A1" and ds[0]["class"] == 2
    assert Counter(ds["class"]) == {1: 1538, 2: 1174, 3: 572, 4: 101, 5: 67, 6: 851, 7: 428, 8: 71, 9: 184, 10: 15}


def test_rxnmapper_examples(shared_data_dir):
    ds = load_corpus("rxnmapper-examples", data_dir=shared_data_dir)
    assert len(ds) == 996
    assert ds[0] == {"id": "16397", "text": "Cc1csc2nc(-c3ccno3)nc(Cl)c12.NCc1ccc(F)cc1>>Cc1csc2nc(-c3ccno3)nc(NCc3ccc(F)cc3)c12"}


def test_wikitext2_lines(shared_data_dir):
    ds = load_corpus("wikitext2", data_dir=shared_data_dir)
    # 4,358 lines, 2,891 non-blank, 706 of them headings " = Title = " / " = = Section = = "
    assert len(ds) == 2185
    assert ds[0]["line"] == 3 and ds[0]["text"].startswith("Robert Boulter is an English film")
    assert ds[-1]["line"] == 4356 and ds[-1]["text"].startswith("The Hustler is credited")
    assert all(t == t.strip() and t for t in ds["text"])
    assert not any(t.startswith("= ") and t.endswith(" =") for t in ds["text"])
    # two table legends start with "=" but are not headings, so they stay
    assert "= Qualified for the next round" in ds["text"]


def test_sst2_dev(shared_data_dir):
    ds = load_corpus("sst2", data_dir=shared_data_dir)
    assert len(ds) == 872
    assert Counter(ds["label"]) == {1: 444, 0: 428}  # SOURCES.md: 444 pos / 428 neg
    assert ds.features["label"].names == ["negative", "positive"]
    assert ds[0] == {"idx": 0, "text": "it 's a charming and often affecting journey . ", "label": 1}
    # GLUE tsv has no quoting: a sentence ending in a lone quote is kept as is
    assert ds[871]["text"].endswith("could not be improved upon . ' ")


def test_n_sequences_above_size_returns_all(shared_data_dir):
    assert len(load_corpus("sst2", n_sequences=10_000, data_dir=shared_data_dir)) == 872


def test_default_corpus():
    assert default_corpus("antiberty") == "therasabdab"
    assert default_corpus("rxnfp-bert") == default_corpus("rxnmapper-albert") == "uspto50k-test"
    # the reaction MLMs pretrained here are read on the reactions they were held out from
    assert default_corpus("bert-rxn") == default_corpus("albert-rxn") == "uspto50k-test"
    assert default_corpus("bert-base-uncased") == default_corpus("splade-tiny-en") == "wikitext2"
    assert all(default_corpus(m) in data.CORPORA for m in ["antiberty", "rxnfp-bert", "albert-base-v2"])


# ---------------------------------------------------------------------------------------------- errors


def test_unknown_corpus_lists_allowed_names(shared_data_dir):
    with pytest.raises(UnknownCorpus) as err:
        load_corpus("uspto", data_dir=shared_data_dir)
    assert isinstance(err.value, ValueError)
    for name in ["therasabdab", "uspto50k-test", "uspto50k-valid", "wikitext2", "sst2"]:
        assert name in str(err.value)


@pytest.mark.parametrize("n", [0, -3])
def test_nonpositive_n_sequences(shared_data_dir, n):
    with pytest.raises(ValueError, match=f"n_sequences.*{n}"):
        load_corpus("sst2", n_sequences=n, data_dir=shared_data_dir)


def test_missing_file_names_path_and_env_var(tmp_path):
    with pytest.raises(CorpusNotFound) as err:
        load_corpus("uspto50k-test", data_dir=tmp_path)
    message = str(err.value)
    assert isinstance(err.value, FileNotFoundError)
    assert str(tmp_path / "reactions" / "uspto50k_test_unmapped.csv") in message
    assert "DUPBERT_DATA_DIR" in message and "dupbert data download" in message


def test_missing_hub_corpus_file_suggests_hub(tmp_path):
    with pytest.raises(CorpusNotFound, match="DUPBERT_DATA_DIR.*nyu-mll/glue"):
        load_corpus("sst2", data_dir=tmp_path)


def test_empty_corpus_raises(tmp_path):
    (tmp_path / "wikitext2").mkdir()
    (tmp_path / "wikitext2" / "wiki.test.raw").write_text(" \n = Title = \n \n")
    with pytest.raises(ValueError, match="no rows"):
        load_corpus("wikitext2", data_dir=tmp_path)


def test_no_data_dir_domain_corpus_says_download(no_data_dir):
    with pytest.raises(CorpusNotFound, match=r"DUPBERT_DATA_DIR.*dupbert data download --to DIR"):
        load_corpus("therasabdab")


def test_no_data_dir_hub_offline_says_set_env(no_data_dir):
    with pytest.raises(CorpusNotFound, match="DUPBERT_DATA_DIR") as err:
        load_corpus("sst2", n_sequences=3)
    assert "nyu-mll/glue" in str(err.value)


def test_no_data_dir_uses_hub_copy(no_data_dir, monkeypatch):
    """Without a data dir the Hub copy is read and filtered like the local file (Hub faked here)."""
    calls = []

    def fake_load_dataset(path, name=None, split=None):
        calls.append((path, name, split))
        return datasets.Dataset.from_dict({"text": ["", " = Robert Boulter = \n", " Robert Boulter is an actor . \n"]})

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    ds = load_corpus("wikitext2")
    assert calls == [("Salesforce/wikitext", "wikitext-2-raw-v1", "test")]
    assert ds.to_dict() == {"line": [2], "text": ["Robert Boulter is an actor ."]}


@pytest.mark.parametrize("n", [2.5, True, "3"])
def test_n_sequences_that_is_not_a_whole_number_is_refused(shared_data_dir, n):
    with pytest.raises(ValueError) as refused:
        load_texts("sst2", n, data_dir=shared_data_dir)
    assert str(refused.value) == f"n_sequences must be a positive number of rows or None, got {n!r}"


def test_a_whole_float_n_sequences_reads_that_many_rows(shared_data_dir):
    assert load_texts("sst2", 3.0, data_dir=shared_data_dir) == load_texts("sst2", 3, data_dir=shared_data_dir)
