"""Any text the user has, in every entry point: the same 20 real USPTO-50k reactions
as a text file, .gz, CSV, TSV, JSON Lines, parquet, a saved dataset folder and a (stubbed) Hub
dataset give the probe's identical table; bad inputs fail at once with one clear message."""

import gzip
import json
import shutil
import warnings

import datasets
import pandas as pd
import pytest

import dupbert
from dupbert import probe_models, reconstruction_accuracy
from dupbert.core.data import CorpusNotFound, CorpusUnreadable, UnknownCorpus, read_texts
from dupbert.tools.probe import PROBE_COLUMNS, TruncationWarning

N = 20
# Measured once: rxnmapper-albert on the first 20 reactions of USPTO-50k test (1,992 tokens),
# hidden states 0..12, then pinned (rounded to 6 decimals).
TOP1 = [0.111446, 0.87751, 0.98494, 0.993976, 0.996486, 0.996486, 0.99749, 0.99749, 0.998996,
        0.999498, 0.999498, 0.998996, 0.997992]
N_TOKENS = 1992


@pytest.fixture(scope="module")
def files(tmp_path_factory, shared_data_dir):
    """The first 20 rows of the real USPTO-50k test file in every form: {form: (path, column)}."""
    folder = tmp_path_factory.mktemp("sources")
    table = pd.read_csv(shared_data_dir / "reactions" / "uspto50k_test_unmapped.csv",
                        dtype=str, keep_default_na=False).head(N)
    texts = table["rxn"].tolist()
    (folder / "r.txt").write_text("\n".join(texts) + "\n")
    (folder / "r.txt.gz").write_bytes(gzip.compress(("\n".join(texts) + "\n").encode()))
    table.to_csv(folder / "r.csv", index=False)
    table.to_csv(folder / "r.tsv", sep="\t", index=False)
    (folder / "r.jsonl").write_text("".join(json.dumps(row) + "\n"
                                            for row in table.to_dict("records")))
    table.to_parquet(folder / "r.parquet")
    datasets.Dataset.from_pandas(table).save_to_disk(str(folder / "saved"))
    return {"txt": (folder / "r.txt", "text"), "txt.gz": (folder / "r.txt.gz", "text"),
            "csv": (folder / "r.csv", "rxn"), "tsv": (folder / "r.tsv", "rxn"),
            "jsonl": (folder / "r.jsonl", "rxn"), "parquet": (folder / "r.parquet", "rxn"),
            "saved dataset": (folder / "saved", "rxn")}


@pytest.fixture(scope="module")
def reference(rxnmapper, shared_data_dir):
    """The probe on the built-in corpus's first 20 reactions."""
    texts = dupbert.load_texts("uspto50k-test", N, data_dir=shared_data_dir)
    return reconstruction_accuracy(*rxnmapper, texts, progress=False)


@pytest.fixture
def results_cache(tmp_path, monkeypatch, zoo_cache):
    """An empty results cache that reuses the session's converted zoo models."""
    monkeypatch.setenv("DUPBERT_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "models").symlink_to(zoo_cache / "models")
    return tmp_path / "cache"


def test_pinned_reference(reference):
    assert (reference["n_tokens"] == N_TOKENS).all() and (reference["n_sequences"] == N).all()
    assert reference["top1"].round(6).tolist() == TOP1


@pytest.mark.parametrize("form", ["txt", "txt.gz", "csv", "tsv", "jsonl", "parquet",
                                  "saved dataset"])
def test_every_form_gives_the_identical_table(form, files, reference, results_cache):
    path, column = files[form]
    frame = probe_models(["rxnmapper-albert"], corpus=str(path), text_column=column,
                         n_sequences=N, include_control=False, progress=False)
    assert frame["corpus"].unique().tolist() == [str(path)]
    pd.testing.assert_frame_equal(frame[PROBE_COLUMNS], reference)
    assert frame["top1"].round(6).tolist() == TOP1


def test_a_hub_dataset_with_config_split_and_column(files, reference, results_cache, monkeypatch):
    asked = []

    def load_dataset(path, name=None, split=None):
        asked.append((path, name, split))
        return datasets.load_from_disk(str(files["saved dataset"][0]))

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    frame = probe_models(["rxnmapper-albert"], corpus="hub:someone/uspto:unmapped:test",
                         text_column="rxn", n_sequences=N, include_control=False, progress=False)
    assert asked == [("someone/uspto", "unmapped", "test")]
    pd.testing.assert_frame_equal(frame[PROBE_COLUMNS], reference)
    assert read_texts("hub:someone/uspto:test", text_column="rxn")[:1] == \
        read_texts(files["csv"][0], text_column="rxn")[:1]
    assert asked[-1] == ("someone/uspto", None, "test")


@pytest.mark.slow
def test_the_cache_is_keyed_on_the_texts_not_the_path(files, results_cache, monkeypatch,
                                                      tmp_path):
    computed = []
    real = dupbert.tools.probe.reconstruction_accuracy

    def counting(*args, **kwargs):
        computed.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr("dupbert.tools.probe.reconstruction_accuracy", counting)
    options = dict(n_sequences=N, include_control=False, progress=False)
    first = probe_models(["rxnmapper-albert"], corpus=str(files["txt"][0]), **options)
    # the same texts from another file and form: read from the cache
    again = probe_models(["rxnmapper-albert"], corpus=str(files["csv"][0]), text_column="rxn",
                         **options)
    assert len(computed) == 1
    pd.testing.assert_frame_equal(first[PROBE_COLUMNS], again[PROBE_COLUMNS])
    keys = [json.loads(p.read_text()) for p in (results_cache / "results" / "probe").glob("*.json")]
    assert len(keys) == 1 and keys[0]["corpus"] == "texts"
    assert keys[0]["corpus_file"].startswith("sha256:") and "r.txt" not in json.dumps(keys[0])
    # an edited file at the same path is probed again
    edited = tmp_path / "edited.txt"
    shutil.copy(files["txt"][0], edited)
    probe_models(["rxnmapper-albert"], corpus=str(edited), **options)
    assert len(computed) == 1
    edited.write_text(edited.read_text().replace("Cl", "Br", 1))
    probe_models(["rxnmapper-albert"], corpus=str(edited), **options)
    assert len(computed) == 2


@pytest.mark.slow
def test_layer_statistics_read_a_users_file(files, results_cache, shared_data_dir):
    from dupbert.tools.stats import layer_similarity_report

    options = dict(n_sequences=N, max_tokens=300, duplications=None, reconstruction="sample",
                   progress=False, cache=False)
    from_file = layer_similarity_report(["rxnmapper-albert"], corpus=str(files["jsonl"][0]),
                                        text_column="rxn", **options)
    built_in = layer_similarity_report(["rxnmapper-albert"], corpus="uspto50k-test",
                                       data_dir=shared_data_dir, **options)
    columns = [c for c in built_in.layers.columns if c != "corpus"]
    pd.testing.assert_frame_equal(from_file.layers[columns], built_in.layers[columns])


# ------------------------------------------------------------------------------ bad input


def test_a_missing_file_is_named_with_every_form_allowed(tmp_path):
    missing = tmp_path / "my_text.txt"
    with pytest.raises(CorpusNotFound) as refused:
        probe_models(["rxnmapper-albert"], corpus=str(missing), progress=False)
    message = str(refused.value)
    assert message.startswith(f"corpus '{missing}' is not a built-in corpus and no file or "
                              f"folder {missing} exists; a corpus is a built-in corpus name "
                              f"(therasabdab, uspto50k-test,")
    assert message.endswith("a folder saved with datasets' save_to_disk, or "
                            "hub:NAME[:CONFIG]:SPLIT")


@pytest.mark.parametrize("name, content", [("empty.txt", ""), ("empty.csv", ""),
                                           ("header.csv", "id,text\n"), ("empty.jsonl", "\n")])
def test_an_empty_file_is_refused(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(CorpusUnreadable) as refused:
        read_texts(path)
    assert str(refused.value) == f"{path} is empty: it holds no text to read"


def test_a_file_of_blank_lines_is_refused(tmp_path):
    path = tmp_path / "blank.txt"
    path.write_text("\n  \n\t\n")
    with pytest.raises(CorpusUnreadable) as refused:
        read_texts(path)
    assert str(refused.value) == f"{path} holds no text: all 3 line values are empty or blank"


@pytest.mark.parametrize("form", ["csv", "jsonl", "saved dataset"])
def test_a_missing_column_lists_the_columns_there_are(files, form):
    path, _ = files[form]
    with pytest.raises(CorpusUnreadable) as refused:
        probe_models(["rxnmapper-albert"], corpus=str(path), text_column="smiles",
                     progress=False)
    assert str(refused.value) == (f"{path} has no column 'smiles'; its columns are: id, class, "
                                  f"rxn (choose one with text_column= or --text-column)")


def test_other_bad_sources(tmp_path, files):
    with pytest.raises(CorpusUnreadable, match="is read as a plain text file .* but "
                                               "text_column='rxn' was given"):
        read_texts(files["txt"][0], text_column="rxn")
    with pytest.raises(UnknownCorpus, match=r"must read hub:NAME:SPLIT or hub:NAME:CONFIG:SPLIT"):
        read_texts("hub:only-a-name")
    with pytest.raises(CorpusNotFound, match=r"Hub corpus 'hub:a/b:train': datasets.load_dataset"
                                             r"\('a/b', None, split='train'\) failed"):
        read_texts("hub:a/b:train")  # offline in the tests
    numbers = tmp_path / "numbers.jsonl"
    numbers.write_text('{"text": "CCO"}\n{"text": 7}\n')
    with pytest.raises(CorpusUnreadable) as refused:
        read_texts(numbers)
    assert str(refused.value) == f"{numbers}: column 'text' row 1 is 7 (int), not a string"
    binary = tmp_path / "model.bin"
    binary.write_bytes(b"\x80\x81\xff")
    with pytest.raises(CorpusUnreadable, match="is not UTF-8 text"):
        read_texts(binary)


def test_csv_cells_stay_as_written_and_blank_lines_are_skipped(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("text\nNA\n007\n\n  \nCCO\n")
    assert read_texts(path) == ["NA", "007", "CCO"]
    assert read_texts(path, n_sequences=2) == ["NA", "007"]


@pytest.mark.slow
def test_over_long_sequences_are_cut_with_a_warning_that_counts_them(rxnmapper, files):
    texts = read_texts(files["txt"][0])
    with pytest.warns(TruncationWarning) as warned:
        frame = reconstruction_accuracy(*rxnmapper, texts, max_length=96, progress=False)
    assert len(warned) == 1
    # measured: 11 of the 20 reactions have more than 96 tokens, the longest 179
    assert str(warned[0].message) == ("11 of 20 sequences are longer than max_length=96 tokens "
                                      "(special tokens included; the longest has 179) and were "
                                      "cut to their first 96 tokens")
    assert frame["n_tokens"][0] < N_TOKENS
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing cut: no warning
        reconstruction_accuracy(*rxnmapper, texts, progress=False)


def test_the_lens_warns_when_it_cuts_the_text(rxnmapper, files):
    text = ".".join(read_texts(files["txt"][0])[:12])
    with pytest.warns(TruncationWarning) as warned:
        frame = dupbert.lens(*rxnmapper, text, k=1)
    assert len(warned) == 1
    assert str(warned[0].message) == ("1 of 1 sequences are longer than max_length=512 tokens "
                                      "(special tokens included; the longest has 1178) and were "
                                      "cut to their first 512 tokens")
    assert frame["position"].nunique() == 512
