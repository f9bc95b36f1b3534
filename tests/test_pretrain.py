"""Pretraining the English models (dupbert.training.pretrain): the corpus keeps evaluation text out, bad
input fails before any training, a run resumes bit for bit, and the committed record re-runs."""

from __future__ import annotations

import dataclasses
import gzip
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dupbert.core.errors import ParameterError
from dupbert.training.pretrain import MODELS, CheckpointMismatch, PretrainConfig, batch_rows, pretrain
from dupbert.training.pretrain_corpus import (CorpusError, evaluation_texts, normalise,
                                     overlapping_paragraphs, pretraining_documents, read_documents)

pytestmark = pytest.mark.slow  # pretraining runs, resumed and reproduced for real

REPO = Path(__file__).resolve().parents[1]
EVAL_FILES = ("wikitext2/wiki.test.raw", "wikitext2/wiki.valid.tokens", "sst2/dev.tsv",
              "snli/snli_dev.becel.tsv", "squad2/dev-v2.0.reconstructed.json.gz")


def test_normalise_undoes_wikitext_markup_and_case():
    assert normalise("The 1 @,@ 000 @-@ year <unk> War , 1914") == \
        ("the", "1", "000", "year", "war", "1914")


def test_overlap_finds_equal_contained_and_shared_13_gram_paragraphs():
    evaluation = {"sst2-dev": ["a gorgeous , witty , seductive movie ."],
                  "wikitext2-test": [" = = History = = ",
                                     "one two three four five six seven eight nine ten eleven "
                                     "twelve thirteen fourteen fifteen"]}
    paragraphs = [
        "A gorgeous, witty, seductive movie.",  # equal once normalised
        "History",  # a one-word heading: not counted
        "He said it was a gorgeous, witty, seductive movie . Then left.",  # too short to contain
        "zero one two three four five six seven eight nine ten eleven twelve thirteen x",  # 13-gram
        "one two three four five six seven eight nine ten eleven twelve",  # 12 tokens only
        "Nothing to see here at all, really nothing whatsoever.",
    ]
    assert overlapping_paragraphs(paragraphs, evaluation) == {0: "sst2-dev",
                                                              3: "wikitext2-test"}
    long_item = {"snli-dev": ["a man in a blue shirt is playing the guitar on stage"]}
    assert overlapping_paragraphs(
        ["Yesterday a man in a blue shirt is playing the guitar on stage, they said."],
        long_item) == {0: "snli-dev"}



def _overlaps_by_every_position(paragraphs, evaluation, min_tokens=8, ngram=13):
    """The overlap rule read directly: every evaluation text against every paragraph position."""
    found = {}
    for index, paragraph in enumerate(paragraphs):
        tokens = normalise(paragraph)
        for name, texts in evaluation.items():
            for item in map(normalise, texts):
                runs = {tokens[i:i + ngram] for i in range(len(tokens) - ngram + 1)}
                if (len(item) >= 4 and item == tokens) or (len(item) >= min_tokens and any(
                        tokens[i:i + len(item)] == item for i in range(len(tokens)))) or any(
                        item[i:i + ngram] in runs for i in range(len(item) - ngram + 1)):
                    found.setdefault(index, name)
    return found


def test_the_hashed_first_pass_misses_no_overlap():
    """On texts drawn from a 2-word vocabulary (so that runs repeat, within and across
    paragraphs), with shared 13- and 12-token runs planted, the check finds exactly the
    paragraphs the rule read directly finds; runs only across two paragraphs do not count."""
    generator = np.random.default_rng(0)
    text = lambda n: " ".join(generator.choice(["a", "b"], n))  # noqa: E731
    evaluation = {"one": [text(n) for n in (4, 8, 9, 13, 20)], "two": [text(n) for n in (5, 14)]}
    paragraphs = [text(n) for n in generator.integers(1, 40, 400)]
    long = evaluation["one"][4].split()
    paragraphs += [evaluation["one"][0], "zz " + evaluation["two"][1] + " zz",
                   "zz " + " ".join(long[3:16]) + " zz", "zz " + " ".join(long[3:15]) + " zz"]
    expected = _overlaps_by_every_position(paragraphs, evaluation)
    assert overlapping_paragraphs(paragraphs, evaluation) == expected
    assert 10 < len(expected) < len(paragraphs) - 10  # both kinds are tried
    words = "the man saw a dog run up hills".split()  # in this order only across two paragraphs
    assert overlapping_paragraphs(["ok " + " ".join(words[:4]), " ".join(words[4:]) + " ok"],
                                  {"three": [" ".join(words)]}) == {}
    with pytest.raises(ValueError, match="ngram must be at least min_tokens \\(8\\), got 5"):
        overlapping_paragraphs(paragraphs, evaluation, ngram=5)

def test_missing_and_empty_corpus_files_are_refused(tmp_path):
    with pytest.raises(CorpusError, match="does not exist"):
        read_documents(tmp_path / "nope.txt.gz")
    empty = tmp_path / "empty.txt.gz"
    with gzip.open(empty, "wt") as handle:
        handle.write("\n\n")
    with pytest.raises(CorpusError, match="is empty"):
        read_documents(empty)


@pytest.fixture
def small_data_dir(tmp_path, shared_data_dir) -> Path:
    """A data folder with the real evaluation files and a small pretraining corpus of 40
    paragraphs of the staged Gutenberg text (3 documents)."""
    root = tmp_path / "data"
    for relative in EVAL_FILES:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).symlink_to(shared_data_dir / relative)
    (root / "english").mkdir()
    with gzip.open(shared_data_dir / "english/gutenberg.txt.gz", "rt", encoding="utf-8") as f:
        lines = [next(f) for _ in range(400)]
    text = "".join(line for line in lines if line.strip())[:60000]
    paragraphs = text.splitlines()[:60]
    body = "\n".join(paragraphs[:20]) + "\n\n" + "\n".join(paragraphs[20:40]) + "\n\n" + \
        "\n".join(paragraphs[40:60]) + "\n"
    for name in ("wikipedia", "gutenberg"):
        with gzip.open(root / f"english/{name}.txt.gz", "wt", encoding="utf-8") as handle:
            handle.write(body)
    return root


def test_a_corpus_that_overlaps_evaluation_text_is_refused_or_dropped(small_data_dir):
    sst2 = pd.read_csv(small_data_dir / "sst2/dev.tsv", sep="\t", quoting=3)
    leaked = sst2["sentence"].iloc[3]
    with gzip.open(small_data_dir / "english/wikipedia.txt.gz", "at", encoding="utf-8") as f:
        f.write(f"\n{leaked}\n")
    with pytest.raises(CorpusError, match=r"1 pretraining paragraph\(s\) overlap.*sst2-dev"):
        pretraining_documents(small_data_dir)
    documents, report = pretraining_documents(small_data_dir, on_overlap="drop")
    assert report["dropped_paragraphs"] == {"sst2-dev": 1}
    assert leaked not in {p for doc in documents for p in doc}


@pytest.fixture(scope="module")
def english_corpus(shared_data_dir):
    """The staged English corpus as pretrained on (:func:`pretraining_documents` with overlapping
    paragraphs dropped), read and checked once for the module's tests."""
    return pretraining_documents(shared_data_dir, on_overlap="drop")


@pytest.fixture
def without_probes(monkeypatch):
    """Pretraining with the emergence record's per-hidden-state probes left out (its MLM rows are
    kept): for tests that compare only training losses and tokens, which the probes never touch."""
    import dupbert.training.pretrain as module

    monkeypatch.setattr(module, "_probe_rows", lambda *args, **kwargs: [])


def test_the_pretraining_text_holds_no_evaluation_text(shared_data_dir, english_corpus):
    """The staged corpus, as pretrained on: one WikiText-2 test paragraph is dropped (a list name
    inside a Wikipedia sentence, SOURCES-english.md), and no evaluation line remains, by the
    checker and by a plain comparison of stripped lines."""
    documents, report = english_corpus
    assert report["dropped_paragraphs"] == {"wikitext2-test": 1}
    assert (report["documents"], report["paragraphs"], report["words"]) == \
        (2737, 133848, 9513542)
    paragraphs = [p for doc in documents for p in doc]
    evaluation = evaluation_texts(shared_data_dir)
    assert overlapping_paragraphs(paragraphs, evaluation) == {}
    lines = {p.strip() for p in paragraphs}
    for name, texts in evaluation.items():
        long_lines = {t.strip() for t in texts if len(t.split()) >= 4}
        assert not lines & long_lines, name


def test_bad_configurations_are_refused_before_any_work():
    with pytest.raises(ParameterError, match="vocab_size"):
        PretrainConfig(name="x", architecture="bert", vocab_size=10)
    with pytest.raises(ValueError, match="architecture must be one of"):
        PretrainConfig(name="x", architecture="gpt2")
    with pytest.raises(ValueError, match="not a multiple of num_heads"):
        PretrainConfig(name="x", architecture="bert", hidden_size=100, num_heads=3)
    with pytest.raises(ParameterError, match="warmup_steps"):
        PretrainConfig(name="x", architecture="bert", total_steps=10, warmup_steps=20)


def test_batches_are_seeded_epoch_permutations():
    config = PretrainConfig(name="x", architecture="bert", batch_size=4)
    rows = np.concatenate([batch_rows(config, 10, step) for step in range(5)])
    assert sorted(rows[:10]) == list(range(10)) and sorted(rows[10:20]) == list(range(10))
    assert (batch_rows(config, 10, 3) == rows[12:16]).all()


TINY = dict(vocab_size=300, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64,
            embedding_size=16, seq_length=16, batch_size=4, learning_rate=1e-3, warmup_steps=1,
            total_steps=6, checkpoint_every=2)


@pytest.mark.parametrize("architecture", ["bert", "albert"])
def test_an_interrupted_run_resumes_to_the_same_weights_losses_and_record(small_data_dir, tmp_path,
                                                                          architecture):
    """One run of 12 steps against the same run stopped at step 8, run on to 10 (rows of steps
    9-10 and the evaluation at 10 written), then thrown back to its step-8 checkpoint, as a kill
    before the next checkpoint would leave it, and resumed to the end."""
    import torch
    import transformers

    config = PretrainConfig(name=f"tiny-{architecture}", architecture=architecture,
                            **dict(TINY, total_steps=12, checkpoint_every=4))
    assert config.eval_steps() == [0, 10, 12]
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    final = pretrain(config, small_data_dir, tmp_path / "work-whole", whole, progress=False)
    # the same tokenizer and packed rows (WordPiece training breaks ties in no fixed order)
    shutil.copytree(tmp_path / "work-whole", tmp_path / "work-parts",
                    ignore=shutil.ignore_patterns(config.name))
    work = tmp_path / "work-parts"
    checkpoint = work / config.name / "checkpoint.pt"
    assert pretrain(config, small_data_dir, work, parts, stop_after=8, progress=False) is None
    shutil.copy(checkpoint, tmp_path / "step-8.pt")
    pretrain(config, small_data_dir, work, parts, stop_after=10, progress=False)
    assert pd.read_csv(parts / "pretrain-loss.csv")["step"].max() == 10
    assert 10 in set(pd.read_csv(parts / "emergence.csv")["step"])
    shutil.copy(tmp_path / "step-8.pt", checkpoint)  # killed after step 10's rows
    resumed = pretrain(config, small_data_dir, work, parts, progress=False)
    for name in ("pretrain-loss.csv", "emergence.csv"):
        a, b = pd.read_csv(whole / name), pd.read_csv(parts / name)
        pd.testing.assert_frame_equal(a.drop(columns="elapsed_s", errors="ignore"),
                                      b.drop(columns="elapsed_s", errors="ignore"))
    assert pd.read_csv(whole / "pretrain-loss.csv")["step"].tolist() == list(range(1, 13))
    record = pd.read_csv(whole / "emergence.csv")
    assert sorted(record["step"].unique()) == [0, 10, 12]
    assert set(record["measure"]) == {"mlm", "reconstruction", "masked",
                                      "reconstruction, duplicated", "most frequent"}
    assert record.loc[record["measure"] == "most frequent", "step"].tolist() == [0]
    a = transformers.AutoModelForMaskedLM.from_pretrained(final).state_dict()
    b = transformers.AutoModelForMaskedLM.from_pretrained(resumed).state_dict()
    assert all(torch.equal(a[key], b[key]) for key in a)  # bit for bit


@pytest.mark.parametrize("architecture", ["bert", "albert"])
def test_the_masked_only_decoder_gives_transformers_loss(architecture, small_data_dir, tmp_path):
    import torch

    from dupbert.training.pretrain import build_model, mask_tokens, masked_lm_loss, prepare

    config = PretrainConfig(name="tiny", architecture=architecture, **TINY)
    tokenizer, rows = prepare(config, small_data_dir, tmp_path / "work", progress=False)
    model = build_model(config, tokenizer).eval()
    torch.manual_seed(3)
    inputs, labels = mask_tokens(tokenizer, torch.as_tensor(rows[:8].astype(np.int64)), 0.15)
    assert (labels != -100).any() and (labels == -100).any()
    with torch.no_grad():
        ours = masked_lm_loss(model, inputs, labels)
        theirs = model(input_ids=inputs, labels=labels).loss
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)


def test_resuming_with_another_configuration_is_refused_and_loses_nothing(small_data_dir,
                                                                         tmp_path):
    config = PretrainConfig(name="tiny", architecture="bert", **TINY)
    pretrain(config, small_data_dir, tmp_path / "work", tmp_path / "results", stop_after=2,
             progress=False)
    before = (tmp_path / "results" / "pretrain-loss.csv").read_bytes()
    other = dataclasses.replace(config, learning_rate=5e-4)
    with pytest.raises(CheckpointMismatch, match=r"learning_rate.*0\.001.*0\.0005"):
        pretrain(other, small_data_dir, tmp_path / "work", tmp_path / "results", progress=False)
    assert (tmp_path / "results" / "pretrain-loss.csv").read_bytes() == before
    assert (tmp_path / "work" / "tiny" / "checkpoint.pt").is_file()


def test_the_committed_first_steps_reproduce(shared_data_dir, tmp_path, english_corpus,
                                             without_probes, monkeypatch):
    """Steps 1-3 of bert-en-small from scratch give the committed training losses (bit for bit
    on the CPU kind that made them; rounding-level elsewhere), with the committed tokenizer, and
    without the step-0 probes that the committed run made (training does not depend on them)."""
    import dupbert.training.pretrain as module

    monkeypatch.setattr(module, "pretraining_documents", lambda *args, **kwargs: english_corpus)
    work = tmp_path / "work"
    config = MODELS["bert-en-small"]
    tokenizer = REPO / "models" / config.name
    if not (tokenizer / "tokenizer.json").is_file():
        pytest.skip("bert-en-small is not published yet")
    (work / f"tokenizer-{config.vocab_size}").mkdir(parents=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer / name, work / f"tokenizer-{config.vocab_size}" / name)
    pretrain(config, shared_data_dir, work, tmp_path / "results", stop_after=3, progress=False)
    ours = pd.read_csv(tmp_path / "results" / "pretrain-loss.csv")
    committed = pd.read_csv(REPO / "results/cpu/pretrain-loss.csv")
    committed = committed[(committed["model"] == config.name) & (committed["step"] <= 3)]
    np.testing.assert_allclose(ours["loss"], committed.sort_values("step")["loss"], rtol=1e-4)


def test_publish_writes_a_card_pins_the_weights_and_halves_what_is_too_big(
        small_data_dir, tmp_path, monkeypatch):
    import json

    import torch
    import transformers

    import dupbert.training.pretrain_publish as pretrain_module
    from dupbert.core.zoo import sha256_of

    config = PretrainConfig(name="tiny", architecture="bert", **TINY)
    final = pretrain(config, small_data_dir, tmp_path / "work", tmp_path / "results",
                     progress=False)
    report = {"words": 1234, "documents": 6, "sequences": 99, "dropped_paragraphs": {}}
    original = transformers.AutoModelForMaskedLM.from_pretrained(final)
    n_parameters = sum(p.numel() for p in original.parameters())
    # a committed model is kept in float16, whatever its size
    quality = {"n_sequences": 200, "n_masked": 3062, "top1": 0.0695624, "top1_low": 0.0610442,
               "top1_high": 0.0786454, "top5": 0.22469, "majority_token": "the",
               "majority_top1": 0.0669497}  # bert-en-small's (results/cpu/rq1-mlm-quality.csv)
    measured = []  # the card measures the weights as published, after float16 rounding

    def measure(folder):
        measured.append(transformers.AutoModelForMaskedLM.from_pretrained(folder).state_dict())
        return quality

    dest = pretrain_module.publish(config, final, tmp_path / "tiny", tmp_path / "results",
                                   report, pins=tmp_path / "sha256.json", measure_quality=measure)
    rounded = {k: v.half().float() for k, v in original.state_dict().items()}
    assert len(measured) == 1 and measured[0].keys() == rounded.keys()
    assert all(torch.equal(measured[0][k], rounded[k]) for k in rounded)
    assert not all(torch.equal(measured[0][k], v) for k, v in original.state_dict().items())
    card = (dest / "README.md").read_text()
    assert "float16 (loaded as float32)" in card and "1,234 words" in card
    assert f"{6 * config.batch_size * config.seq_length:,} tokens seen here" in card
    assert "pretrained from scratch by dupbert" in card
    assert "- **Trained here**: every weight, from a random initialisation." in card
    # the number a reader quotes: every chosen token masked, beside always answering "the"
    assert ("- **Masked top-1**: 0.070 [0.061, 0.079] (top-5 0.225) on 3,062 positions of 200 "
            "clean WikiText-2 valid sequences, every chosen token replaced by the mask token, so "
            "nothing can be copied; always answering \"the\" scores 0.067 on the same positions. "
            "It does not clear the MLM-quality floor of RQ1 (at least 0.30 and 3 times that "
            "baseline).") in " ".join(card.split())
    assert "top-1 0." not in card  # no 80/10/10 top-1, which counts copied tokens
    assert json.loads((tmp_path / "sha256.json").read_text()) == {
        "tiny": sha256_of(dest / "model.safetensors")}
    model = transformers.AutoModelForMaskedLM.from_pretrained(dest)
    assert next(model.parameters()).dtype == torch.float32
    assert list(original.state_dict()) == list(model.state_dict())
    for (name, a), (_, b) in zip(original.state_dict().items(), model.state_dict().items()):
        torch.testing.assert_close(a, b, rtol=2 ** -10, atol=1e-6, msg=name)  # fp16 rounding
    tokenizer = transformers.AutoTokenizer.from_pretrained(dest)
    assert tokenizer.model_max_length == config.seq_length
    # a zoo model too large to commit: published whole, in float32, its card copied into the
    # repository's weights folder (here tmp_path / "repo")
    import dataclasses

    from dupbert.core import zoo

    monkeypatch.setitem(zoo.ZOO, "tiny", dataclasses.replace(zoo.ZOO["bert-en-small"], name="tiny",
                                                            committed=False))
    monkeypatch.setattr(pretrain_module, "WEIGHTS", tmp_path / "repo")
    rebuilt = pretrain_module.publish(config, final, tmp_path / "cache" / "tiny",
                                      tmp_path / "results", report, pins=tmp_path / "sha256.json")
    card = (rebuilt / "README.md").read_text()
    assert "float32, rebuilt here" in " ".join(card.split())
    assert (tmp_path / "repo" / "tiny" / "README.md").read_text() == card
    assert not (tmp_path / "repo" / "tiny" / "model.safetensors").exists()
    model = transformers.AutoModelForMaskedLM.from_pretrained(rebuilt)
    assert list(original.state_dict()) == list(model.state_dict())
    for (name, a), (_, b) in zip(original.state_dict().items(), model.state_dict().items()):
        assert torch.equal(a, b), name
    # a committed model whose weights, even halved, are over the limit is refused, nothing kept
    monkeypatch.setitem(zoo.ZOO, "tiny", dataclasses.replace(zoo.ZOO["tiny"], committed=True))
    monkeypatch.setattr(pretrain_module, "MAX_WEIGHTS_BYTES", n_parameters)
    with pytest.raises(ValueError, match=r"tiny: its weights \(.* MB\) are over the repository's "
                                         r".* MB limit; give its zoo entry committed=False"):
        pretrain_module.publish(config, final, tmp_path / "big", tmp_path / "results", report,
                                pins=tmp_path / "sha256.json")
    assert not (tmp_path / "big" / "model.safetensors").exists()
    assert (final / "model.safetensors").is_file()


def test_every_model_a_run_starts_from_or_an_arm_fine_tunes_is_in_the_zoo():
    """Continued runs load their init by zoo name, the growth arm fine-tunes its models by zoo
    name, and a model trained here is published under its zoo entry."""
    from dupbert.study.growth import ARMS
    from dupbert.core.zoo import ZOO

    assert {config.init for config in MODELS.values() if config.init} <= set(ZOO)
    assert {arm.model for arm in ARMS} <= set(ZOO)
    # pilots, the reaction seeds other than the zoo's seed 0, and albert-en-30m (registered for a
    # GPU, not run: it joins the zoo when published) have no weights yet
    published = {name for name in MODELS if name not in ("albert-en-small-continued", "albert-en-30m")
                 and "-pilot" not in name and "-seed" not in name}
    assert published <= set(ZOO)
    assert not ZOO["minilm-mlm-en-grown"].committed  # 9 blocks: over the limit even as an overlay


def test_an_overlay_sits_on_the_wheel_its_frozen_embeddings_come_from(monkeypatch):
    from dupbert.core import zoo
    from dupbert.training.pretrain_publish import embeddings_source

    assert embeddings_source("minilm-mlm-en-continued") == "all-MiniLM-L6-v2"
    assert embeddings_source("minilm-mlm-en") == "all-MiniLM-L6-v2"
    assert embeddings_source("bert-en-small") == "bert-en-small"


def test_missing_evaluation_files_and_a_bad_unk_option_are_refused(small_data_dir):
    from dupbert.training.pretrain import heldout_texts

    (small_data_dir / "sst2/dev.tsv").unlink()
    with pytest.raises(CorpusError, match=r"evaluation files missing .*sst2/dev.tsv"):
        pretraining_documents(small_data_dir)
    with pytest.raises(CorpusError, match="unk must be"):
        heldout_texts(small_data_dir, unk="drop")


def test_a_corpus_smaller_than_one_batch_is_refused(small_data_dir, tmp_path):
    from dupbert.training.pretrain import prepare

    config = PretrainConfig(name="tiny", architecture="bert", **dict(TINY, batch_size=4096))
    with pytest.raises(CorpusError, match=r"fewer than one batch \(4096\)"):
        prepare(config, small_data_dir, tmp_path / "work", progress=False)


def test_heldout_text_keeps_or_replaces_wikitext_unknown_markers(shared_data_dir):
    from dupbert.training.pretrain import heldout_texts

    kept, clean = heldout_texts(shared_data_dir, 64), heldout_texts(shared_data_dir, 64, "[UNK]")
    assert sum(t.count("<unk>") for t in kept) == 510  # what the committed record read
    assert sum(t.count("[UNK]") for t in clean) == 510 and "<unk>" not in "".join(clean)


def test_a_field_newer_than_a_checkpoint_counts_only_when_set_away_from_its_default():
    from dupbert.training.pretrain import _differences

    config = dataclasses.asdict(MODELS["bert-en-small"])
    older = {k: v for k, v in config.items() if k not in ("grow", "init", "heldout_unk")}
    assert _differences(older, config) == {}
    grown = dict(config, init="x", grow=(0, 0, 1))
    assert _differences(older, grown) == {"init": (None, "x"), "grow": (None, [0, 0, 1])}


def test_continued_runs_start_from_their_init_model(shared_data_dir):
    import torch
    from transformers import AutoModelForMaskedLM, AutoTokenizer, BertModel

    from dupbert.training.pretrain import build_model
    from dupbert.core.zoo import zoo_folder

    minilm = zoo_folder("all-MiniLM-L6-v2")
    tokenizer = AutoTokenizer.from_pretrained(minilm)
    body = BertModel.from_pretrained(minilm)
    bert = build_model(MODELS["minilm-mlm-en"], tokenizer)
    for name, value in body.state_dict().items():
        if not name.startswith("pooler"):
            assert torch.equal(bert.bert.state_dict()[name], value), name
    albert = build_model(MODELS["albert-minilm-en"], tokenizer)
    shared = albert.albert.encoder.albert_layer_groups[0].albert_layers[0]
    torch.testing.assert_close(shared.ffn_output.weight, torch.stack(
        [block.output.dense.weight for block in body.encoder.layer]).mean(0))
    small = zoo_folder("albert-en-small")
    continued = build_model(MODELS["albert-en-small-continued"], AutoTokenizer.from_pretrained(small))
    published = AutoModelForMaskedLM.from_pretrained(small)
    assert all(torch.equal(continued.state_dict()[k], v) for k, v in published.state_dict().items())


def test_a_run_stops_at_its_target_and_a_resume_stops_there_too(small_data_dir, tmp_path):
    """A run without a target, then the same run (same tokenizer and rows) with its masked top-1
    at a later evaluation as the target: it stops there, with the first run's record so far.
    Every other step is evaluated, since when the tiny model first improves varies with the CPU."""
    free = PretrainConfig(name="tiny", architecture="bert", dense_evals=(2, 58, 2),
                          **dict(TINY, total_steps=60, learning_rate=1e-2))
    pretrain(free, small_data_dir, tmp_path / "free", tmp_path / "free-results", progress=False)
    record = pd.read_csv(tmp_path / "free-results" / "emergence.csv")
    curve = record[(record["measure"] == "masked") & (record["layer"] == free.num_layers)]
    rising = [(int(s), t) for s, t, before in zip(curve["step"], curve["top1"], curve["top1"].cummax().shift())
              if 0 < s < free.total_steps and t > before]
    assert rising, f"the tiny model did not improve its masked top-1 before its last step: {curve.to_dict('list')}"
    stop, target = rising[0]
    (tmp_path / "work").mkdir()
    for name in ("tokenizer-300", "train-300-16.npy", "corpus.json"):  # the same text and tokens
        (tmp_path / "work" / name).symlink_to(tmp_path / "free" / name)
    config = dataclasses.replace(free, target_top1=target - 1e-6)  # the CSV rounds to 6 digits
    out = pretrain(config, small_data_dir, tmp_path / "work", tmp_path / "results", progress=False)
    ours = pd.read_csv(tmp_path / "results" / "emergence.csv")
    assert out is not None and ours["step"].max() == stop < config.total_steps
    pd.testing.assert_frame_equal(ours, record[record["step"] <= stop].reset_index(drop=True))
    loss = pd.read_csv(tmp_path / "results" / "pretrain-loss.csv")
    assert loss["step"].tolist() == list(range(1, stop + 1))
    again = pretrain(config, small_data_dir, tmp_path / "work", tmp_path / "results", progress=False)
    assert again == out
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "results" / "emergence.csv"), ours)


def test_the_cards_of_continued_models_say_where_they_started_and_what_was_trained():
    from dupbert.training import model_card

    head = MODELS["minilm-mlm-en"]
    assert "from the English BERT body of all-MiniLM-L6-v2" in model_card.origin(head)
    assert model_card.trained(head) == (
        "every block and the MLM head; the input embeddings (tied to the decoder) kept as they "
        "are in `all-MiniLM-L6-v2`")
    assert model_card.tokenizer_line(head) == "`all-MiniLM-L6-v2`'s (30,522 entries)"
    assert model_card.rates(head) == (
        "peak learning rate 0.0002 for the body, 0.002 for the head")
    assert "recursive ALBERT" in model_card.origin(MODELS["albert-minilm-en"])
    grown = model_card.origin(MODELS["minilm-mlm-en-grown"])
    assert grown.startswith("made by dupbert from `minilm-mlm-en`, its blocks duplicated to the "
                            "order [0, 0, 1, 1, 2, 2, 3, 4, 5]")
    clears = {"n_sequences": 200, "n_masked": 3000, "top1": 0.31, "top1_low": 0.3,
              "top1_high": 0.32, "top5": 0.5, "majority_token": "the", "majority_top1": 0.07}
    assert "It clears the MLM-quality floor" in model_card.quality_line(clears)
    assert "does not clear" in model_card.quality_line({**clears, "majority_top1": 0.11})



def test_a_staged_run_warms_up_anew_from_the_published_stage_and_resumes_bit_for_bit(
        small_data_dir, tmp_path):
    """Stage 1 (steps 1-6) ends with its model and stage file and is published; stage 2 starts
    from the published model with a fresh warm-up, keeps stage 1's evaluation at step 6, and
    gives the same weights whether it runs straight or is stopped at step 8 and resumed from its
    checkpoint. A finished run is not trained again; another configuration is refused."""
    import json

    import torch
    import transformers

    from dupbert.training.pretrain_publish import publish

    config = PretrainConfig(name="tiny", architecture="bert",
                            **dict(TINY, total_steps=12, stage_steps=6, warmup_steps=2))
    assert config.eval_steps() == [0, 6, 10, 12]
    work, results, published = tmp_path / "work", tmp_path / "results", tmp_path / "published"
    first = pretrain(config, small_data_dir, work, results, progress=False, published=published)
    stage = json.loads((first / "stage.json").read_text())
    assert {k: stage[k] for k in ("step", "stage", "stages", "finished")} == dict(
        step=6, stage=1, stages=2, finished=False)
    report = {"words": 1234, "documents": 6, "sequences": 99, "dropped_paragraphs": {}}
    publish(config, first, published, results, report, pins=tmp_path / "sha256.json")
    card = " ".join((published / "README.md").read_text().split())
    assert f"{6 * config.batch_size * config.seq_length:,} tokens seen here" in card
    assert "these weights end stage 1 of at most 2 (steps 1-6;" in card
    before = pd.read_csv(results / "emergence.csv")
    shutil.copytree(work, tmp_path / "work-2")
    shutil.copytree(results, tmp_path / "results-2")
    straight = pretrain(config, small_data_dir, work, results, progress=False,
                        published=published, out=tmp_path / "straight")
    assert json.loads((straight / "stage.json").read_text())["finished"] is True
    loss = pd.read_csv(results / "pretrain-loss.csv")
    assert loss["step"].tolist() == list(range(1, 13))
    lr = loss.set_index("step")["lr"]
    assert lr[7] == pytest.approx(lr[1]) and lr[8] == pytest.approx(lr[2])  # warmed up anew
    assert lr[6] == lr[12] == 0.0
    record = pd.read_csv(results / "emergence.csv")
    # once each; step 0 also holds the most-frequent-token baseline
    assert record.groupby("step").size().to_dict() == {0: 13, 6: 12, 10: 12, 12: 12}
    pd.testing.assert_frame_equal(record[record["step"] <= 6], before)  # stage 1's, kept
    assert pretrain(config, small_data_dir, tmp_path / "work-2", tmp_path / "results-2",
                    stop_after=8, progress=False, published=published) is None
    resumed = pretrain(config, small_data_dir, tmp_path / "work-2", tmp_path / "results-2",
                       progress=False, published=published, out=tmp_path / "resumed")
    a = transformers.AutoModelForMaskedLM.from_pretrained(straight).state_dict()
    b = transformers.AutoModelForMaskedLM.from_pretrained(resumed).state_dict()
    assert all(torch.equal(a[key], b[key]) for key in a)
    pd.testing.assert_frame_equal(loss.drop(columns="elapsed_s"),
                                  pd.read_csv(tmp_path / "results-2" / "pretrain-loss.csv")
                                  .drop(columns="elapsed_s"))
    # the next stage from another configuration is refused, before any work
    (work / "tiny" / "checkpoint.pt").unlink()
    with pytest.raises(CheckpointMismatch, match=r"the published stage .*stage\.json was made "
                                                 r"with another configuration.*learning_rate"):
        pretrain(dataclasses.replace(config, learning_rate=5e-4), small_data_dir, work, results,
                 progress=False, published=published)
    # a published stage that finished the run: nothing is trained or evaluated again
    shutil.copy(straight / "stage.json", published / "stage.json")
    rows = (results / "emergence.csv").read_bytes()
    assert pretrain(config, small_data_dir, work, results, progress=False,
                    published=published) == published
    assert (results / "emergence.csv").read_bytes() == rows


def test_a_target_reached_at_the_end_of_a_stage_finishes_the_run(small_data_dir, tmp_path,
                                                                  monkeypatch):
    import json

    import dupbert.training.pretrain as pretrain_module

    monkeypatch.setattr(pretrain_module, "_target_reached",
                        lambda evaluated, config: evaluated[0]["step"] == 6)
    config = PretrainConfig(name="tiny", architecture="bert",
                            **dict(TINY, total_steps=12, stage_steps=6, target_top1=0.5))
    out = pretrain(config, small_data_dir, tmp_path / "work", tmp_path / "results",
                   progress=False, published=tmp_path / "none")
    assert json.loads((out / "stage.json").read_text())["finished"] is True


def test_a_run_cut_into_stages_resumes_a_checkpoint_of_its_first_stage(small_data_dir, tmp_path):
    """A checkpoint made before runs had stages (its configuration has total_steps, 6, and no
    stage's end) resumes as stage 1 of 2 of the same run; one whose first stage differs is
    refused."""
    import torch

    whole = PretrainConfig(name="tiny", architecture="bert", **TINY)  # 6 steps, one stage
    pretrain(whole, small_data_dir, tmp_path / "work", tmp_path / "results", stop_after=4,
             progress=False, published=tmp_path / "none")
    checkpoint = tmp_path / "work" / "tiny" / "checkpoint.pt"
    saved = torch.load(checkpoint, weights_only=True)
    legacy = dataclasses.asdict(whole)
    del legacy["stage_steps"]  # as a checkpoint from before stages recorded it
    saved["config"] = legacy
    torch.save(saved, checkpoint)
    shorter = dataclasses.replace(whole, total_steps=12, stage_steps=4)
    with pytest.raises(CheckpointMismatch, match=r"stage_end.*\(6, 4\)"):
        pretrain(shorter, small_data_dir, tmp_path / "work", tmp_path / "results",
                 progress=False, published=tmp_path / "none")
    staged = dataclasses.replace(whole, total_steps=12, stage_steps=6)
    out = pretrain(staged, small_data_dir, tmp_path / "work", tmp_path / "results",
                   progress=False, published=tmp_path / "none")
    assert out is not None and pd.read_csv(tmp_path / "results" / "pretrain-loss.csv")[
        "step"].tolist() == [1, 2, 3, 4, 5, 6]


def test_bad_stages_are_refused():
    with pytest.raises(ValueError, match="total_steps 10 is not a multiple of stage_steps 4"):
        PretrainConfig(name="x", architecture="bert", total_steps=10, stage_steps=4,
                       warmup_steps=1)
    with pytest.raises(ParameterError, match="warmup_steps"):
        PretrainConfig(name="x", architecture="bert", total_steps=12, stage_steps=4,
                       warmup_steps=5)


def test_a_stage_gate_stops_a_run_that_does_not_predict(small_data_dir, tmp_path):
    """Stage 1 of a tiny model ends far below a gate of 0.99: the next call trains nothing and
    returns the published stage; without the gate it would go on to stage 2."""
    import json

    config = PretrainConfig(name="tiny", architecture="bert",
                            **dict(TINY, total_steps=12, stage_steps=6, stage_gate=0.99))
    work, results, published = tmp_path / "work", tmp_path / "results", tmp_path / "published"
    first = pretrain(config, small_data_dir, work, results, progress=False, published=published)
    shutil.copytree(first, published)
    assert json.loads((published / "stage.json").read_text())["finished"] is False
    assert pretrain(config, small_data_dir, work, results, progress=False,
                    published=published) == published
    assert pd.read_csv(results / "pretrain-loss.csv")["step"].max() == 6
    ungated = dataclasses.replace(config, stage_gate=None)
    assert pretrain(ungated, small_data_dir, work, results, progress=False,
                    published=published) != published
    assert pd.read_csv(results / "pretrain-loss.csv")["step"].max() == 12


def test_the_continued_berts_gate_judges_the_end_of_its_second_stage_not_its_first():
    """Stage 1 of bert-en-small-continued ended at the plateau (masked top-1 0.063 in the
    committed record): the gate, registered for stage 2's end on, does not stop a restart of
    stage 2 from the published stage 1; a gate from stage 1 would."""
    from dupbert.training.pretrain import gate_closed

    config = MODELS["bert-en-small-continued"]
    assert (config.stage_gate, config.stage_gate_from) == (0.15, 2)
    assert not gate_closed(config, 1000, REPO / "results/cpu")
    assert gate_closed(dataclasses.replace(config, stage_gate_from=1), 1000, REPO / "results/cpu")
    with pytest.raises(ValueError, match="stage_gate_from"):
        dataclasses.replace(config, stage_gate_from=5)  # 4 stages


def test_reaction_runs_are_checked_and_evaluated_densely_through_the_transition():
    with pytest.raises(ValueError, match="corpus must be one of"):
        PretrainConfig(name="x", architecture="bert", corpus="prose")
    with pytest.raises(ValueError, match="init must be None"):
        PretrainConfig(name="x", architecture="bert", corpus="reactions", init="bert-en-small")
    with pytest.raises(ParameterError, match="dense_evals last"):
        PretrainConfig(name="x", architecture="bert", total_steps=100, dense_evals=(20, 200, 10))
    steps = MODELS["bert-rxn"].eval_steps()
    assert steps[:12] == [0, 10, 16, 25, 40, 63, 100, 158, 200, 250, 251, 300]
    assert set(range(200, 1001, 50)) <= set(steps) and steps[-1] == 1500 and len(steps) == 29


def test_the_committed_first_reaction_steps_reproduce_and_count_real_tokens(
        shared_data_dir, tmp_path, zoo_cache, without_probes):
    """Steps 1-3 of bert-rxn from random init give the committed training losses and tokens seen
    (the reactions' own tokens, not their padding), and step 0's record the committed
    most-frequent-token baseline of the 300 held-out test reactions (the step-0 probes, which
    training does not depend on, left out)."""
    from dupbert.training.pretrain import prepare

    config = MODELS["bert-rxn"]
    pretrain(config, shared_data_dir, tmp_path / "work", tmp_path / "results", stop_after=3,
             progress=False, published=tmp_path / "unpublished")  # from step 0, not the zoo's
    ours = pd.read_csv(tmp_path / "results" / "pretrain-loss.csv")
    committed = pd.read_csv(REPO / "results/cpu/pretrain-loss.csv")
    committed = committed[(committed["model"] == config.name) & (committed["step"] <= 3)]
    np.testing.assert_allclose(ours["loss"], committed.sort_values("step")["loss"], rtol=1e-4)
    assert ours["tokens_seen"].tolist() == committed.sort_values("step")["tokens_seen"].tolist()
    tokenizer, rows = prepare(config, shared_data_dir, tmp_path / "work", progress=False)
    assert rows.shape == (4995, 256) and len(tokenizer) == 591
    first = rows[batch_rows(config, len(rows), 0)]
    assert ours["tokens_seen"].iloc[0] == int((first != tokenizer.pad_token_id).sum())
    record = pd.read_csv(tmp_path / "results" / "emergence.csv")
    baseline = record.loc[record["measure"] == "most frequent", "top1"]
    assert baseline.round(4).tolist() == [0.2468]


def test_a_reaction_card_says_which_stage_its_weights_end():
    """A staged reaction run's card names the stage and its steps; a run of one stage does not."""
    from dupbert.training.pretrain_publish import _reaction_card

    class AlbertForMaskedLM:  # the card reads only the class name
        pass

    config = PretrainConfig(name="albert-rxn-x", architecture="albert", corpus="reactions",
                            vocab_size=591, total_steps=3000, stage_steps=1000)
    loss = pd.DataFrame({"tokens_seen": [10, 5_950_000], "elapsed_s": [1.0, 7200.0]})
    corpus = {"reactions": 5001, "dropped_in_test": 6}
    mlm = {"loss": 1.5, "n_tokens": 4040}
    done = {"step": 2000, "stage": 2, "stages": 3, "finished": False}
    card = " ".join(_reaction_card(config, AlbertForMaskedLM(), 1_140_303, "float16", None,
                                   corpus, loss, mlm, 2000, done).split())
    assert "- **Training**: 2,000 steps; these weights end stage 2 of at most 3 (steps 1,001-2,000;" in card
    assert "5,950,000 tokens seen" in card and "2.00 hours" in card
    single = _reaction_card(config, AlbertForMaskedLM(), 1, "float16", None, corpus, loss, mlm,
                            2000, {**done, "stages": 1})
    assert "stage" not in single.split("**Training**")[1].split("\n")[0]


def test_a_device_this_machine_lacks_is_refused_before_any_work(tmp_path, capsys):
    from dupbert.training.pretrain import main

    with pytest.raises(SystemExit) as stopped:
        main(["bert-rxn", "--device", "cuda:7", "--data-dir", str(tmp_path),
              "--work", str(tmp_path / "work"), "--results", str(tmp_path / "results")])
    assert stopped.value.code == 2
    assert "'cuda:7'" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing prepared, nothing written


def test_the_english_albert_for_a_gpu_is_albert_en_small_with_a_30m_token_horizon():
    small, gpu = MODELS["albert-en-small"], MODELS["albert-en-30m"]
    assert dataclasses.replace(gpu, name=small.name, warmup_steps=small.warmup_steps,
                               total_steps=small.total_steps, dense_evals=None,
                               checkpoint_every=small.checkpoint_every) == small
    assert gpu.total_steps * gpu.batch_size * gpu.seq_length == 30_720_000
    assert gpu.warmup_steps / gpu.total_steps == 0.1 and gpu.stage_steps is None
    steps = gpu.eval_steps()
    assert set(range(1000, 7501, 250)) <= set(steps) and steps[-1] == 7500
    assert steps[:8] == [0, 10, 16, 25, 40, 63, 100, 158]
