"""The RQ1 chapter's plumbing (dupbert.book.rq1): its run summary and probe arguments, the
whole-set quality beside the registered one, the lens of one sequence per model (on the real
rxnmapper ALBERT), the translators' probes, the duplication tables without variants, and its CSV
tables; on small hand-made frames."""

import pandas as pd

from dupbert.book import rq1

VALUES = {"models": ["rxnmapper-albert", "bert-en-small"], "corpus": None, "n_sequences": 64,
          "batch_size": 32, "device": "cpu", "seed": 0, "max_length": 512, "translators": ["linear"]}


def test_run_summary_names_models_corpus_and_sizes():
    assert rq1.run_summary(VALUES) == (
        "models: rxnmapper-albert, bert-en-small\n"
        "corpus: each model its own domain corpus\n"
        "64 sequences per model, max_length 512, seed 0, device cpu")
    assert rq1.run_summary({**VALUES, "corpus": "wikitext2"}).splitlines()[1] == "corpus: wikitext2"
    assert rq1.run_summary({**VALUES, "corpus": ""}).splitlines()[1] == (
        "corpus: each model its own domain corpus")


def test_probe_arguments_are_the_shared_parameters_without_progress():
    assert rq1.probe_arguments(VALUES) == {"corpus": None, "batch_size": 32, "device": "cpu",
                                           "seed": 0, "max_length": 512, "progress": False}


QUALITY = pd.DataFrame([{"model": "m", "corpus": "wikitext2-valid", "n_sequences": 200,
                         "n_masked": 1000, "top1": 0.4, "top1_low": 0.35, "top1_high": 0.45,
                         "top5": 0.6, "majority_token": "the", "majority_top1": 0.05}])
WHOLE = pd.DataFrame([{"model": "m", "corpus": "wikitext2", "n_documents": 60, "n_sequences": 4000,
                       "n_masked": 20000, "top1": 0.2, "top1_low": 0.18, "top1_high": 0.22,
                       "majority_top1": 0.05}])


def test_show_whole_set_prints_a_note_without_the_table(tmp_path, capsys):
    rq1.show_whole_set(QUALITY, None)
    rq1.show_whole_set(QUALITY, tmp_path)
    assert capsys.readouterr().out == (
        "no whole-set table in tables_dir (rq1-mlm-quality-whole.csv)\n" * 2)


def test_show_whole_set_shows_both_measures(tmp_path, monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objects: shown.extend(objects))
    WHOLE.to_csv(tmp_path / "rq1-mlm-quality-whole.csv", index=False)
    rq1.show_whole_set(QUALITY, tmp_path)
    (table,) = shown
    row = table.loc["m"]
    assert row["registered: masked top-1 [95% CI, sequences]"] == "0.400 [0.350, 0.450]"
    assert row["whole set: masked top-1 [95% CI, documents]"] == "0.200 [0.180, 0.220]"
    assert row["whole set"] == "wikitext2: 60 documents, 20,000 masked"
    # 0.4 clears the floor (>= 0.30 and 3 x 0.05); 0.2 is under 0.30
    assert (row["registered: floor"], row["whole set: floor"]) == ("clears", "below")


def _lens_rows(layer: int, tops: list[int], inputs: list[int]) -> list[dict]:
    """A lens frame's top-1 rows of one hidden state: [CLS], the tokens, then [SEP]."""
    rows = [{"layer": layer, "guess": 1, "position": 0, "special": True, "token_id": 2,
             "input_id": 2}]
    rows += [{"layer": layer, "guess": 1, "position": i + 1, "special": False, "token_id": top,
              "input_id": token} for i, (top, token) in enumerate(zip(tops, inputs))]
    rows.append({"layer": layer, "guess": 1, "position": len(tops) + 1, "special": True,
                 "token_id": 3, "input_id": 3})
    return rows


def test_copy_rates_one_line_per_lens_named_by_its_model():
    inputs = [10, 11, 12, 13]
    first = pd.DataFrame(_lens_rows(0, [10, 0, 0, 0], inputs) + _lens_rows(1, inputs, inputs))
    second = pd.DataFrame(_lens_rows(0, [10, 11, 0, 0], inputs))
    text = rq1.copy_rates({"a: 4 tokens": first, "C:/models/b: 4 tokens": second})
    assert text == ("a: top-1 = input token at hidden states 0..1: 0.25 1.00\n"
                    "C:/models/b: top-1 = input token at hidden states 0..0: 0.50")


def test_lens_of_the_shortest_sequence_of_a_real_model(zoo_cache, tmp_path):
    corpus = tmp_path / "reactions.txt"
    corpus.write_text("CC(=O)Cl.OCC>>CC(=O)OCCCCCCCCCC\nCC(=O)Cl.OCC>>CC(=O)OCC\n")
    frames = rq1.lens_frames(["rxnmapper-albert"], str(corpus))
    assert list(frames) == ["rxnmapper-albert: 21 tokens"]  # the shorter reaction
    frame = frames["rxnmapper-albert: 21 tokens"]
    assert frame["layer"].nunique() == 13 and frame["guess"].max() == 5
    # pinned in tests/test_lens.py: 7, then 19, then 20 of the 21 tokens read back
    assert rq1.copy_rates(frames) == ("rxnmapper-albert: top-1 = input token at hidden states "
                                      "0..12: 0.33" + " 0.90" * 7 + " 0.95" * 5)
    pages = rq1.lens_pages(frames, max_positions=8)
    assert len(pages) == 1 and "rxnmapper-albert: 21 tokens" in pages[0]
    assert pages[0].count("<td") == 13 * 8  # hidden states x the first 8 positions
    (panel,) = rq1.lens_panels(frames, max_positions=8).axes[:1]
    assert panel.get_title() == "rxnmapper-albert: 21 tokens (first 8 of 21 positions)"


def _probe_frame(model: str, top1: list[float], duplication: str = "baseline") -> pd.DataFrame:
    return pd.DataFrame({"model": model, "duplication": duplication, "init": "pretrained",
                         "layer": range(len(top1)), "top1": top1,
                         "top5": [min(1.0, t + 0.1) for t in top1], "n_tokens": 100})


def test_translator_lenses_probe_each_translator_on_both_measures(monkeypatch):
    calls = []

    def fake_probe_models(models, **kwargs):
        calls.append(kwargs)
        masked = "masking" in kwargs
        return _probe_frame(models[0], [0.2, 0.4] if masked else [0.6, 0.9])

    monkeypatch.setattr(rq1, "probe_models", fake_probe_models)
    identity = (_probe_frame("m", [0.5, 0.9]), _probe_frame("m", [0.1, 0.3]))
    comparison = rq1.translator_lenses(["m"], ["linear", "tuned"], *identity, "mask",
                                       n_sequences=32, fit_sequences=16, mask_rate=0.15,
                                       include_control=False)
    assert calls == [
        {"translator": name, **masks, "n_sequences": 32, "fit_sequences": 16, "mask_rate": 0.15,
         "include_control": False}
        for name in ("linear", "tuned") for masks in ({}, {"masking": "mask"})]
    assert list(comparison.columns) == rq1.TRANSLATOR_COLUMNS
    top1 = comparison.set_index(["translator", "measure", "layer"])["top1"]
    assert top1[("identity", "reconstruction", 1)] == 0.9
    assert top1[("identity", "masked", 0)] == 0.1
    assert top1[("tuned", "reconstruction", 0)] == 0.6
    assert top1[("linear", "masked", 1)] == 0.4
    assert comparison["translator"].unique().tolist() == ["identity", "linear", "tuned"]


def test_duplication_tables_note_that_no_variant_was_probed():
    assert rq1.duplication_table(None).data == rq1.NO_DUPLICATIONS
    assert rq1.duplication_overview(None, ["m"]).data == rq1.NO_DUPLICATIONS


def test_duplication_tables_from_the_probe_frame():
    duplicated = pd.concat([
        _probe_frame("m", [0.5, 0.8, 0.9]).assign(is_copy=False),
        _probe_frame("m", [0.5, 0.8, 0.7, 0.85], "copy block 1").assign(
            is_copy=[False, False, True, False])], ignore_index=True)
    table = rq1.duplication_table(duplicated)
    row = table.loc[("m", "copy block 1")]
    assert (row["copies"], row["top-1 at copies"], row["top-1 last"]) == (1, "0.7000", "0.8500")
    assert row["change of last"] == "-0.0500"
    overview = rq1.duplication_overview(duplicated, ["m"]).loc["m"]
    assert overview["variants"] == 1 and overview["largest drop"] == "copy block 1"
    assert overview["change of last"] == "-0.0500 to -0.0500"


def test_write_tables_writes_each_table_and_skips_missing_duplications(tmp_path):
    frames = [pd.DataFrame({"x": [i]}) for i in range(5)]
    written = rq1.write_tables(tmp_path, *frames)
    assert [path.name for path in written] == [
        "rq1-reconstruction.csv", "rq1-mlm-quality.csv", "rq1-duplicated.csv", "rq1-masked.csv",
        "rq1-translator.csv"]
    assert pd.read_csv(tmp_path / "rq1-masked.csv")["x"].tolist() == [3]
    (tmp_path / "none").mkdir()
    written = rq1.write_tables(tmp_path / "none", frames[0], frames[1], None, *frames[3:])
    assert sorted(path.name for path in (tmp_path / "none").iterdir()) == [
        "rq1-masked.csv", "rq1-mlm-quality.csv", "rq1-reconstruction.csv", "rq1-translator.csv"]
    assert len(written) == 4
    assert rq1.write_tables(None, *frames) == []
