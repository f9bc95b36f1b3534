"""The RQ2 chapter's plumbing (dupbert.book.rq2): its run summary and report arguments, the
models' shown names, gluing a shown table, the main figure, the translator's gap beside RQ1's
table, the glued numbers and its CSV tables; on small hand-made frames."""

import pandas as pd

from dupbert.book import rq2
from dupbert.tools.stats import SimilarityReport, spearman_table

VALUES = {"models": ["rxnmapper-albert", "splade-tiny-en"], "model": None, "corpus": None,
          "n_sequences": 32, "max_tokens": 1000, "batch_size": 32, "device": "cpu", "seed": 0,
          "max_length": 512, "duplications": "paper", "reconstruction": "sample",
          "tables_dir": None}


def test_shown_names_label_the_splade_head():
    assert rq2.shown_names(["rxnmapper-albert", "splade-tiny-en"]) == [
        "rxnmapper-albert", "splade-tiny-en (SPLADE-fine-tuned head)"]


def test_run_summary_five_lines():
    assert rq2.run_summary(VALUES) == (
        "models: rxnmapper-albert, splade-tiny-en (SPLADE-fine-tuned head)\n"
        "corpus: each model its own domain corpus\n"
        "32 sequences per model, 1000 tokens sampled (seed 0), max_length 512, device cpu\n"
        "duplicated variants: paper\n"
        "RQ1 accuracy: on the sampled tokens")
    other = rq2.run_summary({**VALUES, "corpus": "wikitext2", "duplications": None,
                             "reconstruction": "probe"}).splitlines()
    assert other[1] == "corpus: wikitext2"
    assert other[3:] == ["duplicated variants: none", "RQ1 accuracy: on all tokens"]


def test_report_arguments_are_the_parameters_by_name_without_progress():
    assert rq2.report_arguments(VALUES) == {
        "corpus": None, "n_sequences": 32, "max_tokens": 1000, "duplications": "paper",
        "batch_size": 32, "device": "cpu", "seed": 0, "max_length": 512,
        "reconstruction": "sample", "progress": False}


def _layers(model: str = "m") -> pd.DataFrame:
    """Six hidden states of a model as loaded and seven of its variant copying block 0."""
    base = pd.DataFrame({
        "model": model, "duplication": "baseline", "layer": range(6), "is_copy": False,
        "n_tokens": 500, "norm_mean": [2.0, 3.0, 4.0, 5.0, 6.0, 8.0],
        "std": [1.0, 1.0, 1.5, 1.5, 2.0, 2.0],
        "cka_to_last": [0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
        "cka_debiased_to_last": [0.2, 0.1, 0.5, 0.7, 0.95, 1.0],
        "cosine_to_last": [0.3, 0.4, 0.5, 0.6, 0.8, 1.0],
        "w1_standardised": [0.4, 0.3, 0.2, 0.2, 0.1, 0.0],
        "top1": [0.4, 0.5, 0.7, 0.8, 0.85, 0.9]})
    variant = pd.concat([base.iloc[:1], base], ignore_index=True).assign(
        duplication="copy first 1", layer=range(7), is_copy=[False, True] + [False] * 5,
        top1=[0.4, 0.45, 0.5, 0.7, 0.8, 0.85, 0.88])
    return pd.concat([base, variant], ignore_index=True)


def _pairs(model: str = "m") -> pd.DataFrame:
    rows = [{"model": model, "duplication": duplication, "layer": layer, "other_layer": layer + 1,
             "cka": cka, "cka_debiased": cka, "cosine": cka}
            for duplication, ckas in (("baseline", [0.8, 0.85, 0.9, 0.9, 0.95]),
                                      ("copy first 1", [0.99, 0.8, 0.85, 0.9, 0.9, 0.95]))
            for layer, cka in enumerate(ckas)]
    return pd.DataFrame(rows)


def test_shown_frames_rename_models_and_keep_the_baseline():
    report = SimilarityReport(layers=_layers("splade-tiny-en"), pairs=_pairs("splade-tiny-en"))
    layers, pairs, baseline = rq2.shown_frames(report)
    shown = "splade-tiny-en (SPLADE-fine-tuned head)"
    assert set(layers["model"]) == set(pairs["model"]) == {shown}
    assert len(layers) == 13 and len(pairs) == 11
    assert baseline["layer"].tolist() == list(range(6))
    assert set(baseline["duplication"]) == {"baseline"}
    assert set(report.layers["model"]) == {"splade-tiny-en"}  # the report is left as it was


def test_glued_glues_and_returns_the_value(monkeypatch):
    import myst_nb

    glued = []
    monkeypatch.setattr(myst_nb, "glue", lambda name, value, display: glued.append(
        (name, value, display)))
    table = pd.DataFrame({"x": [1]})
    assert rq2.glued("rq2_table", table) is table
    assert glued == [("rq2_table", table, False)]


def test_cka_scatter_labels_its_axis():
    layers = _layers()
    fig = rq2.cka_scatter(layers[layers["duplication"] == "baseline"])
    axis = fig.axes[0]
    assert axis.get_xlabel() == "debiased linear CKA with the last hidden state"
    points = [tuple(xy) for collection in axis.collections for xy in collection.get_offsets()]
    assert sorted(points) == sorted(zip([0.2, 0.1, 0.5, 0.7, 0.95, 1.0],
                                        [0.4, 0.5, 0.7, 0.8, 0.85, 0.9]))


def test_translator_gaps_say_when_rq1_table_is_missing(tmp_path, capsys):
    rq2.show_translator_gaps(None, _layers(), ["m"])
    rq2.show_translator_gaps(tmp_path, _layers(), ["m"])
    assert capsys.readouterr().out == (
        "RQ1's translator table (rq1-translator.csv in tables_dir) is not there: run RQ1 first\n"
        * 2)


def test_translator_gaps_beside_rq1_table(tmp_path, capsys, monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objects: shown.extend(objects))
    rows = [{"model": model, "measure": "reconstruction", "translator": translator,
             "layer": layer, "top1": top1, "top5": top1, "n_tokens": 100}
            for model in ("m", "other")
            for translator, values in (("identity", [0.4, 0.5, 0.7, 0.8, 0.85, 0.9]),
                                       ("linear", [0.9, 0.8, 0.75, 0.82, 0.86, 0.9]))
            for layer, top1 in enumerate(values)]
    pd.DataFrame(rows).to_csv(tmp_path / "rq1-translator.csv", index=False)
    rq2.show_translator_gaps(tmp_path, _layers(), ["m"])
    assert capsys.readouterr().out == (
        "in only one of RQ1's translator table and this chapter: other\n")
    per_model, per_layer = shown
    # gaps 0.5, 0.3, 0.05, 0.02, 0.01 against debiased CKA 0.2, 0.1, 0.5, 0.7, 0.95 (states 0..4)
    assert per_model.loc["m", "rho"] == -0.9 and per_model.loc["m", "hidden_states"] == 5
    assert per_layer[("gap", "m")].tolist() == [0.5, 0.3, 0.05, 0.02, 0.01]
    assert per_layer[("similarity", "m")].tolist() == [0.2, 0.1, 0.5, 0.7, 0.95]


def test_glued_numbers_in_the_order_the_prose_uses():
    layers, pairs = _layers(), _pairs()
    correlations = spearman_table(layers)
    glued = rq2.glued_numbers(layers, pairs, correlations)
    assert list(glued) == ["rq2_norm_factor", "rq2_norm_factor_model", "rq2_lowest_cka",
                           "rq2_usable", "rq2_rho_range", "rq2_beyond_depth",
                           "rq2_beyond_depth_models", "rq2_models", "rq2_duplicated"]
    assert glued["rq2_norm_factor"] == "4.00" and glued["rq2_norm_factor_model"] == "m"
    assert glued["rq2_lowest_cka"] == "0.10" and glued["rq2_usable"] == 1
    assert glued["rq2_models"].loc["m", "CKA (debiased), lowest"] == "0.100 (hidden state 1)"
    duplicated = glued["rq2_duplicated"].loc[("m", "copy first 1")]
    assert duplicated["copies write hidden states"] == "1"
    assert duplicated["CKA of a copy with its input"] == "0.990 to 0.990"
    assert duplicated["top-1 at the last hidden state"] == "0.880"


def test_glued_numbers_note_without_a_variant():
    layers = _layers()
    layers = layers[layers["duplication"] == "baseline"]
    pairs = _pairs()
    glued = rq2.glued_numbers(layers, pairs[pairs["duplication"] == "baseline"],
                              spearman_table(layers))
    assert glued["rq2_duplicated"].data == "No duplicated variant in this run."


def test_write_tables_writes_layers_and_correlations(tmp_path):
    layers = _layers()
    correlations = spearman_table(layers)
    written = rq2.write_tables(tmp_path, layers, correlations)
    assert [path.name for path in written] == ["rq2-layers.csv", "rq2-spearman.csv"]
    spearman = pd.read_csv(tmp_path / "rq2-spearman.csv")
    assert spearman[["model", "similarity"]].values.tolist()[0] == ["m", "cka_debiased_to_last"]
    assert len(pd.read_csv(tmp_path / "rq2-layers.csv")) == 13
    assert rq2.write_tables(None, layers, correlations) == []

