"""dupbert.training.tasks: fine-tuning splits read from the staged data folder; counts from SOURCES.md /
SOURCES-domain.md, other values measured once and pinned here."""

import gzip
import json
import re
from collections import Counter

import datasets
import numpy as np
import pandas as pd
import pytest

from dupbert.core.data import CorpusNotFound
from dupbert.training.tasks import (TASKS, UnknownTask, data_note, load_task, stratified_indices, strata,
                           task_files, trivial_baselines)

# (task, split) -> (rows, label counts); SQuAD: (answerable, unanswerable)
COUNTS = {
    ("sst2", "train"): (67349, {0: 29780, 1: 37569}),  # SOURCES.md: 37,569 pos / 29,780 neg
    ("sst2", "eval"): (872, {0: 428, 1: 444}),
    ("snli", "train"): (9824, {0: 3368, 1: 3219, 2: 3237}),  # official test: E/N/C
    ("snli", "eval"): (9842, {0: 3329, 1: 3235, 2: 3278}),  # official dev
    ("uspto50k", "train"): (5001, {0: 1538, 1: 1174, 2: 572, 3: 101, 4: 67, 5: 851, 6: 428, 7: 71,
                                   8: 184, 9: 15}),  # valid, classes 1..10 -> 0..9
    ("uspto50k", "eval"): (5001, {0: 1520, 1: 1226, 2: 570, 3: 86, 4: 66, 5: 823, 6: 416, 7: 93,
                                  8: 176, 9: 25}),  # test
    # offline design: 10 train articles + odd dev articles / even dev articles (article-disjoint)
    ("squad2", "train"): (10671, {True: 4371 + 2882, False: 348 + 3070}),
    ("squad2", "eval"): (5921, {True: 3046, False: 2875}),
}


@pytest.fixture(scope="module")
def loaded(shared_data_dir):
    cache = {}

    def get(name, split):
        if (name, split) not in cache:
            cache[name, split] = load_task(name, split, data_dir=shared_data_dir)
        return cache[name, split]

    return get


def _label_counts(name, ds):
    if name == "squad2":
        return Counter(len(a["text"]) > 0 for a in ds["answers"])
    return Counter(ds["label"])


@pytest.mark.parametrize("name, split", list(COUNTS))
def test_rows_and_label_counts(loaded, name, split):
    ds = loaded(name, split)
    rows, labels = COUNTS[name, split]
    assert len(ds) == rows == getattr(TASKS[name], f"n_{split}")
    assert _label_counts(name, ds) == labels


def test_registry():
    assert list(TASKS) == ["sst2", "snli", "squad2", "uspto50k"]
    assert {n: (t.kind, t.num_labels, t.max_length, t.doc_stride) for n, t in TASKS.items()} == {
        "sst2": ("classification", 2, 128, None), "snli": ("classification", 3, 128, None),
        "squad2": ("qa", 0, 384, 128), "uspto50k": ("classification", 10, 128, None)}
    assert TASKS["snli"].text_columns == ("premise", "hypothesis")
    assert TASKS["squad2"].text_columns == ("question", "context")
    assert "*test* split" in TASKS["snli"].note and "stanfordnlp/snli" in TASKS["snli"].note
    assert TASKS["squad2"].hub[0] == "rajpurkar/squad_v2" and TASKS["uspto50k"].hub is None
    assert TASKS["squad2"].metrics[0] == "f1" and TASKS["sst2"].metrics[0] == "accuracy"


def test_features_and_first_rows(loaded):
    sst2 = loaded("sst2", "train")
    assert sst2.features["label"].names == ["negative", "positive"]
    assert sst2[0] == {"idx": 0, "text": "hide new secretions from the parental units ", "label": 0}
    snli = loaded("snli", "eval")
    assert snli.features["label"].names == ["entailment", "neutral", "contradiction"]
    assert snli[0] == {"idx": 0, "premise": "Two women are embracing while holding to go packages.",
                       "hypothesis": "The sisters are hugging goodbye while holding to go packages "
                                     "after just eating lunch.", "label": 1}
    # CSV-quoted fields (SOURCES.md): doubled quotes are unescaped, the outer ones removed
    assert snli[112]["hypothesis"] == 'The man is reading a spoon with the words "HELP ME" on it.'
    assert snli[112]["label"] == 2
    assert loaded("snli", "train")[0]["premise"].startswith("This church choir")
    uspto = loaded("uspto50k", "eval")
    assert uspto.features["id"] == datasets.Value("string")
    assert uspto[0]["id"] == "US08497281B2" and uspto[0]["class"] == 2 and uspto[0]["label"] == 1
    assert uspto.features["label"].names[0] == "heteroatom alkylation and arylation"
    assert all(c == label + 1 for c, label in zip(uspto["class"], uspto["label"]))


def test_squad_schema(loaded):
    train = loaded("squad2", "train")
    assert train.features["answers"]["answer_start"].feature == datasets.Value("int32")
    assert set(train.features) == {"id", "title", "context", "question", "answers"}
    first = train[0]
    assert first["id"] == "56be85543aeaaa14008c9063" and first["title"] == "Beyoncé"
    assert first["answers"] == {"text": ["in the late 1990s"], "answer_start": [269]}
    assert first["context"][269:269 + 17] == "in the late 1990s"
    assert len(set(train["title"])) == 10 + 17
    dev = loaded("squad2", "eval")
    assert len(set(dev["title"])) == 18 and dev[0]["answers"]["text"] == ["France"] * 4
    unanswerable = next(r for r in dev if not r["answers"]["text"])
    assert unanswerable["answers"] == {"text": [], "answer_start": []}


# ---------------------------------------------------------------------------------------- subsets


def _assert_proportional(sub_strata, full_strata, n):
    full, sub = Counter(full_strata), Counter(sub_strata)
    assert sum(sub.values()) == n
    for group, size in full.items():  # within 1 of the exact share
        assert abs(sub.get(group, 0) - n * size / len(full_strata)) < 1


@pytest.mark.parametrize("name, n", [("sst2", 100), ("snli", 300), ("uspto50k", 500)])
def test_classification_subsets_are_stratified_and_deterministic(loaded, shared_data_dir, name, n):
    full = loaded(name, "eval")
    a = load_task(name, "eval", max_samples=n, seed=0, data_dir=shared_data_dir)
    b = load_task(name, "eval", max_samples=n, seed=0, data_dir=shared_data_dir)
    c = load_task(name, "eval", max_samples=n, seed=1, data_dir=shared_data_dir)
    assert a.to_dict() == b.to_dict()
    assert a["label"] != c["label"] or a[TASKS[name].text_columns[0]] != c[TASKS[name].text_columns[0]]
    _assert_proportional(a["label"], full["label"], n)
    _assert_proportional(c["label"], full["label"], n)
    chosen = stratified_indices(strata(name, full), n, seed=0)
    assert list(chosen) == sorted(chosen) and a.to_dict() == full.select(chosen).to_dict()
    if name != "uspto50k":  # original order kept (USPTO has no row-number column)
        assert a["idx"][:] == sorted(a["idx"][:])


def test_uspto_subset_keeps_rare_classes(shared_data_dir):
    sub = load_task("uspto50k", "eval", max_samples=500, seed=3, data_dir=shared_data_dir)
    # class 10 (label 9) is 25 / 5,001 of test: its share 2.5 rounds to 2 or 3, never 0
    assert Counter(sub["label"])[9] in (2, 3) and len(set(sub["label"])) == 10


def test_squad_subset_covers_every_article(loaded, shared_data_dir):
    dev = loaded("squad2", "eval")
    assert len(set(dev["title"][:1000])) == 4  # why the subset is stratified, not the first rows
    sub = load_task("squad2", "eval", max_samples=1000, seed=0, data_dir=shared_data_dir)
    assert len(set(sub["title"])) == 18
    assert Counter(len(a["text"]) > 0 for a in sub["answers"]) == {True: 513, False: 487}
    _assert_proportional(strata("squad2", sub), strata("squad2", dev), 1000)
    position = {question_id: row for row, question_id in enumerate(dev["id"][:])}
    positions = [position[i] for i in sub["id"]]
    assert positions == sorted(positions)
    other = load_task("squad2", "eval", max_samples=1000, seed=1, data_dir=shared_data_dir)
    assert other["id"] != sub["id"] and len(set(other["id"]) & set(sub["id"])) < 300


def test_squad_training_and_evaluation_articles_are_disjoint(loaded, shared_data_dir):
    import gzip
    import json

    train, dev = loaded("squad2", "train"), loaded("squad2", "eval")
    assert not set(train["title"]) & set(dev["title"])
    assert not set(train["id"]) & set(dev["id"])
    with gzip.open(shared_data_dir / "squad2" / "dev-v2.0.reconstructed.json.gz", "rt") as handle:
        titles = [a["title"] for a in json.load(handle)["data"]]
    assert list(dict.fromkeys(dev["title"])) == titles[0::2]  # even-numbered dev articles
    assert list(dict.fromkeys(train["title"]))[10:] == titles[1::2]  # after the 10 train articles
    # 32% unanswerable in training, near the official train split's 33%; 49% in evaluation
    assert round(sum(not a["text"] for a in train["answers"]) / len(train), 2) == 0.32


def test_max_samples_at_or_above_size_returns_everything_in_order(loaded, shared_data_dir):
    ds = load_task("sst2", "eval", max_samples=10_000, seed=5, data_dir=shared_data_dir)
    assert ds["idx"] == list(range(872))


def test_stratified_indices_small_and_edge_cases():
    groups = ["a"] * 6 + ["b"] * 3 + ["c"]  # a singleton stratum: sklearn's stratify refuses it
    for n in range(1, 11):
        chosen = stratified_indices(groups, n, seed=7)
        assert len(chosen) == n == len(set(chosen)) and list(chosen) == sorted(chosen)
        _assert_proportional([groups[i] for i in chosen], groups, n)
    assert list(stratified_indices(groups, 5, seed=0)) == list(stratified_indices(groups, 5, seed=0))
    # fewer rows than strata: the largest remainders win, ties broken by the seed
    assert {tuple(stratified_indices(list("abcd"), 2, seed=s)) for s in range(20)} != {(0, 1)}
    with pytest.raises(ValueError, match="positive"):
        stratified_indices(groups, 0)


# ---------------------------------------------------------------------------------------- baselines


def test_trivial_baselines(loaded):
    sst2 = trivial_baselines("sst2", loaded("sst2", "eval"))
    assert sst2["majority_label"] == "positive"
    assert sst2["accuracy"] == pytest.approx(444 / 872)
    assert sst2["macro_f1"] == pytest.approx((2 * 444 / (444 + 872)) / 2)  # 0.3374
    snli = trivial_baselines("snli", loaded("snli", "eval"))
    assert snli["majority_label"] == "entailment" and snli["accuracy"] == pytest.approx(3329 / 9842)
    uspto = trivial_baselines("uspto50k", loaded("uspto50k", "eval"))
    assert uspto["accuracy"] == pytest.approx(1520 / 5001)
    assert uspto["macro_f1"] == pytest.approx(2 * 1520 / (1520 + 5001) / 10)  # 0.0466
    squad = trivial_baselines("squad2", loaded("squad2", "eval"))
    # the even-numbered dev articles: 2,875 of 5,921 questions unanswerable
    assert squad["f1"] == squad["exact"] == pytest.approx(100 * 2875 / 5921)  # 48.56
    assert (squad["HasAns_total"], squad["NoAns_total"]) == (3046, 2875)


def test_as_squad_json_scores_like_the_official_file(loaded, shared_data_dir):
    """The Dataset -> official JSON round trip gives the official script's oracle scores exactly."""
    from dupbert.training.metrics import squad_v2
    from dupbert.training.qa import as_squad_json

    folder = shared_data_dir / "squad2" / "oracle"
    with gzip.open(folder / "dev_predictions_a.json.gz", "rt") as f:
        predictions = json.load(f)
    official = json.loads((folder / "dev_scores_a.official.json").read_text())
    from dupbert.training.tasks import SQUAD_V2_FEATURES, squad_columns

    with gzip.open(shared_data_dir / "squad2" / "dev-v2.0.reconstructed.json.gz", "rt") as f:
        full_dev = datasets.Dataset.from_dict(squad_columns(json.load(f)["data"]),
                                              features=SQUAD_V2_FEATURES)
    rebuilt = as_squad_json(full_dev)
    assert len(rebuilt["data"]) == 35 and sum(len(a["paragraphs"]) for a in rebuilt["data"]) == 1204
    assert squad_v2(rebuilt, predictions) == official


def test_task_files(shared_data_dir, monkeypatch):
    assert task_files("snli", shared_data_dir) == [shared_data_dir / "snli/snli_test.becel.tsv",
                                                   shared_data_dir / "snli/snli_dev.becel.tsv"]
    monkeypatch.delenv("DUPBERT_DATA_DIR", raising=False)
    assert task_files("squad2") == []


# ---------------------------------------------------------------------------------------- errors


def test_unknown_task_lists_names(shared_data_dir):
    with pytest.raises(UnknownTask) as err:
        load_task("mnli", "train", data_dir=shared_data_dir)
    assert isinstance(err.value, ValueError)
    assert all(name in str(err.value) for name in TASKS)
    with pytest.raises(UnknownTask):
        trivial_baselines("mnli", datasets.Dataset.from_dict({"label": [0]}))


def test_bad_split_and_max_samples(shared_data_dir):
    with pytest.raises(ValueError, match="split must be one of.*'validation'"):
        load_task("sst2", "validation", data_dir=shared_data_dir)
    for n in (0, -1):
        with pytest.raises(ValueError, match=f"max_samples.*{n}"):
            load_task("sst2", "eval", max_samples=n, data_dir=shared_data_dir)


def test_missing_file_names_path_and_env_var(tmp_path):
    with pytest.raises(CorpusNotFound) as err:
        load_task("snli", "train", data_dir=tmp_path)
    message = str(err.value)
    assert str(tmp_path / "snli" / "snli_test.becel.tsv") in message
    assert "DUPBERT_DATA_DIR" in message and "stanfordnlp/snli" in message
    with pytest.raises(CorpusNotFound, match="dupbert data download"):
        load_task("uspto50k", "eval", data_dir=tmp_path)


def test_empty_file_raises(tmp_path):
    (tmp_path / "sst2").mkdir()
    (tmp_path / "sst2" / "dev.tsv").write_text("sentence\tlabel\n")
    with pytest.raises(ValueError, match="no rows"):
        load_task("sst2", "eval", data_dir=tmp_path)


def test_no_data_dir_offline_hub_says_set_env(monkeypatch):
    monkeypatch.delenv("DUPBERT_DATA_DIR", raising=False)
    with pytest.raises(CorpusNotFound, match="DUPBERT_DATA_DIR") as err:
        load_task("squad2", "eval")
    assert "rajpurkar/squad_v2" in str(err.value)
    with pytest.raises(CorpusNotFound, match="no Hugging Face Hub copy"):
        load_task("uspto50k", "train")


def test_no_data_dir_uses_hub_copy(monkeypatch):
    """SNLI from the Hub: train split, pairs without a gold label (-1) dropped (Hub faked here)."""
    monkeypatch.delenv("DUPBERT_DATA_DIR", raising=False)
    calls = []

    def fake_load_dataset(path, name=None, split=None):
        calls.append((path, name, split))
        return datasets.Dataset.from_dict({"premise": ["p1", "p2", "p3"], "hypothesis": ["h1", "h2", "h3"],
                                           "label": [0, -1, 2]})

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    ds = load_task("snli", "train")
    assert calls == [("stanfordnlp/snli", "plain_text", "train")]
    assert ds.to_dict() == {"idx": [0, 2], "premise": ["p1", "p3"], "hypothesis": ["h1", "h3"],
                            "label": [0, 2]}
    assert np.array_equal(stratified_indices(ds["label"], 2), [0, 1])


def test_subset_sizes_and_seeds_must_be_whole(shared_data_dir):
    """2.5 rows reached a slice and failed with a TypeError; a negative seed in numpy."""
    with pytest.raises(ValueError, match=r"^subset size n must be a positive integer, got 2\.5$"):
        stratified_indices(["a", "b", "a"], 2.5)
    with pytest.raises(ValueError, match=r"^seed must be an integer >= 0, got -1$"):
        stratified_indices(["a", "b", "a"], 2, seed=-1)
    with pytest.raises(ValueError, match=r"^max_samples must be a positive number of rows or None, "
                                         r"got 2\.5$"):
        load_task("sst2", "eval", max_samples=2.5, data_dir=shared_data_dir)
    with pytest.raises(ValueError, match=r"^seed must be an integer >= 0, got -1$"):
        load_task("sst2", "eval", max_samples=8, seed=-1, data_dir=shared_data_dir)
    with pytest.raises(UnknownTask, match=r"^unknown task \['sst2'\]; the tasks are sst2, snli, "
                                          r"squad2, uspto50k$"):
        load_task(["sst2"], "eval", data_dir=shared_data_dir)


def test_trivial_baselines_refuse_another_tasks_evaluation_set(loaded):
    """SNLI's baseline on SST-2's evaluation set named an SNLI class for SST-2's majority."""
    with pytest.raises(ValueError, match="^" + re.escape(
            "the evaluation set's labels are negative, positive, not snli's entailment, neutral, "
            "contradiction: it is another task's") + "$"):
        trivial_baselines("snli", loaded("sst2", "eval"))
    with pytest.raises(ValueError, match="^" + re.escape(
            "the evaluation set has labels [3, 7] outside sst2's 0..1 (negative, positive)") + "$"):
        trivial_baselines("sst2", datasets.Dataset.from_dict({"label": [0, 3, 1, 7]}))
    with pytest.raises(ValueError, match="^" + re.escape(
            "the evaluation set is not squad2's: it lacks the column 'id' (it has idx, text, "
            "label); give a load_task('squad2', 'eval') split") + "$"):
        trivial_baselines("squad2", loaded("sst2", "eval"))
    plain = trivial_baselines("sst2", datasets.Dataset.from_dict({"label": [0, 1, 1]}))
    assert plain["majority_label"] == "positive"  # plain ids in range still work


def test_the_data_note_says_what_the_runs_used_not_only_the_file_sizes():
    """Review of the final chapters: RQ3, RQ4 and RQ5 printed the files' full sizes
    (SNLI 9,824 / 9,842) as the data used, while the runs used 3,000 / 5,000."""
    runs = pd.DataFrame({"task": ["snli", "snli", "sst2", "uspto50k"],
                         "n_train": [3000, 3000, 4000, 2000], "n_eval": [5000, 5000, 872, 2000]})
    note = TASKS["snli"].note
    assert data_note("snli", runs) == (
        f"{note} Used by these runs: 3,000 training and 5,000 evaluation examples.")
    mixed = runs.assign(n_train=[3000, 1000, 4000, 2000])
    assert data_note("snli", mixed).endswith("1,000 or 3,000 training and 5,000 evaluation examples.")
    squad = pd.DataFrame({"task": ["squad2"], "n_train": [2000], "n_eval": [1500]})
    assert data_note("squad2", squad).endswith("2,000 training and 1,500 evaluation questions.")
    assert data_note("snli") == data_note("snli", runs.iloc[2:]) == note  # no runs of the task
    with pytest.raises(UnknownTask, match="unknown task 'nli'"):
        data_note("nli", runs)


def test_each_task_is_registered_once_with_its_floor_and_place_in_the_run_order():
    """The forms, the planner and the comparisons read dupbert.training.task_specs; nothing keeps a copy."""
    from dupbert.study import comparisons, forms, profiles
    from dupbert.training import task_specs, tasks

    assert task_specs.TASK_NAMES == ("sst2", "snli", "squad2", "uspto50k") == tuple(tasks.TASKS)
    assert forms.TASK_NAMES is task_specs.TASK_NAMES
    assert profiles.TASK_PRIORITY == ("snli", "sst2", "uspto50k", "squad2")
    assert comparisons.LEARNING_FLOORS == {"sst2": ("accuracy", 80.0), "snli": ("accuracy", 55.0),
                                           "squad2": ("HasAns_f1", 25.0), "uspto50k": ("accuracy", 80.0)}
