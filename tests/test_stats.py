"""RQ2 statistics: CKA's defining properties on synthetic data, the token sample, and pinned
values on the real pretrained rxnmapper ALBERT over real USPTO-50k reactions."""

import numpy as np
import pandas as pd
import pytest
import scipy.stats
import torch

from dupbert import reconstruction_accuracy
from dupbert.tools.stats import (STATISTICS_COLUMNS, cka_matrix, collect_hidden_states,
                           cosine_across_layers, distribution_distance, layer_similarity_report,
                           layer_statistics, linear_cka, partial_spearman,
                           relate_to_reconstruction, sampled_reconstruction)
from dupbert.tools.duplicate import paper_duplication

# Measured once on the first 32 reactions of USPTO-50k test (3,022 counted tokens, all kept with
# max_tokens=4000), then pinned.
RXNMAPPER_N_TOKENS = 3022
RXNMAPPER_CKA_12_1 = 0.5170
RXNMAPPER_CKA_12_0 = 0.4390
RXNMAPPER_DEBIASED_CKA_12_1 = 0.5131  # N = 3,022 >> d = 256: the bias is small here
RXNMAPPER_DEBIASED_CKA_12_0 = 0.4360
RXNMAPPER_NORM_MEAN_0 = 13.0566
RXNMAPPER_NORM_MEAN_12 = 12.9325
RXNMAPPER_COSINE_12_11 = 0.974


def _random(n, d, seed):
    return np.random.default_rng(seed).standard_normal((n, d))


def _gram_cka(x, y):
    """CKA through N x N Gram matrices (Kornblith et al. 2019, eq. 4 with linear kernels)."""
    n = x.shape[0]
    h = np.eye(n) - np.ones((n, n)) / n
    k, l = h @ x @ x.T @ h, h @ y @ y.T @ h
    return np.sum(k * l) / np.sqrt(np.sum(k * k) * np.sum(l * l))


# -- CKA ------------------------------------------------------------------------------------------


def test_cka_of_a_representation_with_itself_is_one():
    x = _random(200, 16, 0)
    assert linear_cka(x, x) == pytest.approx(1.0, abs=1e-12)
    assert linear_cka(torch.tensor(x, dtype=torch.float32), x) == pytest.approx(1.0, abs=1e-6)


def test_cka_is_invariant_to_orthogonal_transforms_and_isotropic_scaling():
    x, y = _random(300, 12, 1), _random(300, 8, 2)
    y = y + 0.5 * x[:, :8]  # related, so the value is not near 0
    q, _ = np.linalg.qr(_random(12, 12, 3))
    base = linear_cka(x, y)
    assert 0.1 < base < 0.9
    np.testing.assert_allclose(linear_cka(x @ q, y), base, rtol=0, atol=1e-10)
    np.testing.assert_allclose(linear_cka(7.5 * x, 0.01 * y), base, rtol=0, atol=1e-10)
    np.testing.assert_allclose(linear_cka(x + 3.0, y - 1.0), base, rtol=0, atol=1e-10)


def test_feature_space_cka_equals_the_gram_matrix_form():
    for seed, (n, d1, d2) in enumerate([(50, 5, 7), (40, 60, 3), (30, 10, 10)]):
        x, y = _random(n, d1, 10 + seed), _random(n, d2, 20 + seed)
        y[:, : min(d1, d2)] += x[:, : min(d1, d2)]
        np.testing.assert_allclose(linear_cka(x, y), _gram_cka(x, y), rtol=1e-10)


def test_cka_of_independent_random_matrices_is_small():
    assert linear_cka(_random(4000, 16, 4), _random(4000, 16, 5)) < 0.02


def test_cka_errors_are_clear():
    with pytest.raises(ValueError, match="same tokens"):
        linear_cka(_random(10, 3, 0), _random(11, 3, 0))
    with pytest.raises(ValueError, match="all constant"):
        linear_cka(np.ones((10, 3)), _random(10, 3, 0))
    with pytest.raises(ValueError, match="2-D"):
        linear_cka(np.ones(10), np.ones(10))


def _gram_debiased_cka(x, y):
    """Debiased CKA through N x N Gram matrices: the unbiased HSIC of Song et al. (2012, eq. 5)
    with linear kernels, as Nguyen, Raghu & Kornblith (2021) use it."""
    def hsic(k, l):
        n = k.shape[0]
        k, l = k.copy(), l.copy()
        np.fill_diagonal(k, 0)
        np.fill_diagonal(l, 0)
        one = np.ones(n)
        return (np.trace(k @ l) + (one @ k @ one) * (one @ l @ one) / ((n - 1) * (n - 2))
                - 2 / (n - 2) * (one @ k @ l @ one)) / (n * (n - 3))
    k, l = x @ x.T, y @ y.T
    return hsic(k, l) / np.sqrt(hsic(k, k) * hsic(l, l))


def test_biased_cka_of_unrelated_representations_is_far_from_zero_debiased_is_not():
    # independent Gaussians, N = 1000 tokens, d = 256 dimensions: biased CKA near d / (N + d)
    x, y = _random(1000, 256, 0), _random(1000, 256, 1)
    assert linear_cka(x, y) == pytest.approx(256 / (1000 + 256), abs=0.01)  # 0.204
    assert abs(linear_cka(x, y, debiased=True)) < 0.005
    x, y = _random(64, 256, 2), _random(64, 256, 3)
    assert linear_cka(x, y) == pytest.approx(0.80, abs=0.02)
    assert abs(linear_cka(x, y, debiased=True)) < 0.05


def test_debiased_cka_equals_its_gram_form_and_keeps_the_invariances():
    x = _random(50, 7, 4) + 3.0
    y = x @ _random(7, 5, 5) + _random(50, 5, 6)
    value = linear_cka(x, y, debiased=True)
    np.testing.assert_allclose(value, _gram_debiased_cka(x, y), rtol=1e-10)
    assert 0.3 < value < 1
    q, _ = np.linalg.qr(_random(7, 7, 7))
    np.testing.assert_allclose(linear_cka(2.0 * x @ q - 1.0, y, debiased=True), value, atol=1e-10)
    assert linear_cka(x, x, debiased=True) == pytest.approx(1.0, abs=1e-12)
    states = np.stack([x, 2 * x, _random(50, 7, 8)])
    matrix = cka_matrix(states, debiased=True)
    assert matrix.loc[0, 1] == pytest.approx(1.0, abs=1e-12)
    assert matrix.loc[2, 0] == pytest.approx(linear_cka(states[2], states[0], debiased=True),
                                             abs=1e-12)
    with pytest.raises(ValueError, match="debiased CKA needs at least 4 tokens"):
        linear_cka(x[:3], y[:3], debiased=True)


def test_partial_spearman_removes_what_depth_explains():
    depth = np.arange(10)
    # both fall with depth, and share nothing else: the plain rho is 1, given depth nothing left
    assert np.isnan(partial_spearman(-depth, -depth * 2.0, depth)[0])
    # scipy's spearman on ranks, then the textbook partial correlation (pingouin's formula)
    x = np.array([0.2, 0.5, 0.4, 0.9, 0.7, 0.3, 0.8, 0.6])
    y = np.array([0.1, 0.6, 0.3, 0.95, 0.9, 0.2, 0.7, 0.8])
    z = np.array([1, 3, 2, 8, 5, 4, 7, 6])
    r_xy = scipy.stats.spearmanr(x, y).statistic
    r_xz = scipy.stats.spearmanr(x, z).statistic
    r_yz = scipy.stats.spearmanr(y, z).statistic
    expected = (r_xy - r_xz * r_yz) / np.sqrt((1 - r_xz ** 2) * (1 - r_yz ** 2))
    rho, p = partial_spearman(x, y, z)
    assert rho == pytest.approx(expected, abs=1e-12)
    t = expected * np.sqrt(5 / (1 - expected ** 2))
    assert p == pytest.approx(2 * scipy.stats.t.sf(abs(t), 5), abs=1e-12)
    assert np.isnan(partial_spearman(x[:3], y[:3], z[:3])[0])  # n < 4


def test_cka_matrix_matches_pairwise_cka():
    states = torch.tensor(np.stack([_random(100, 6, s) for s in range(4)]))
    states[2] = 2 * states[1]
    matrix = cka_matrix(states)
    assert matrix.shape == (4, 4) and matrix.index.name == "layer"
    for a in range(4):
        for b in range(4):
            assert matrix.loc[a, b] == pytest.approx(linear_cka(states[a], states[b]), abs=1e-12)
    assert matrix.loc[1, 2] == pytest.approx(1.0, abs=1e-12)


# -- cosine, statistics, distance -----------------------------------------------------------------


def test_cosine_across_layers():
    states = torch.tensor(np.stack([_random(50, 8, s) for s in range(3)]))
    states[1] = -3 * states[0]
    cosine = cosine_across_layers(states)
    np.testing.assert_allclose(np.diag(cosine), 1.0, atol=1e-12)
    np.testing.assert_allclose(cosine.to_numpy(), cosine.to_numpy().T, atol=1e-12)
    assert cosine.loc[0, 1] == pytest.approx(-1.0, abs=1e-12)


def test_layer_statistics_by_hand():
    x = _random(400, 10, 7)
    x[:, 3] *= 10  # an outlier dimension
    frame = layer_statistics(np.stack([x, 2 * x]))
    assert list(frame.columns) == STATISTICS_COLUMNS and frame["layer"].tolist() == [0, 1]
    norms = np.linalg.norm(x, axis=1)
    assert frame.loc[0, "norm_mean"] == pytest.approx(norms.mean())
    assert frame.loc[1, "norm_mean"] == pytest.approx(2 * norms.mean())
    assert frame.loc[0, "std"] == pytest.approx(x.std())
    assert frame.loc[0, "q50"] == pytest.approx(np.median(x))
    assert frame.loc[0, "max_abs"] == pytest.approx(np.abs(x).max())
    assert frame["top_dim"].tolist() == [3, 3]
    assert frame.loc[0, "top_dim_var_frac"] == pytest.approx(x.var(0)[3] / x.var(0).sum())
    unit = x / norms[:, None]
    pairwise = unit @ unit.T
    off_diagonal = (pairwise.sum() - np.trace(pairwise)) / (400 * 399)
    assert frame.loc[0, "anisotropy"] == pytest.approx(off_diagonal)


def test_distribution_distance_equals_scipy_and_separates_scale_from_shape():
    x = _random(300, 5, 8)
    y = np.exp(_random(300, 5, 9))  # another shape
    frame = distribution_distance(np.stack([x, 3 * x, y, x]))
    assert frame["reference"].tolist() == [3] * 4
    by_scipy = np.mean([scipy.stats.wasserstein_distance(y[:, h], x[:, h]) for h in range(5)])
    assert frame.loc[2, "w1"] == pytest.approx(by_scipy, rel=1e-12)
    assert frame.loc[1, "w1"] > 0.5
    assert frame.loc[1, "w1_standardised"] == pytest.approx(0, abs=1e-12)
    assert frame.loc[2, "w1_standardised"] > 0.1
    assert frame.loc[3, "w1"] == 0
    with pytest.raises(IndexError):
        distribution_distance(np.stack([x, x]), reference=2)


def test_relate_to_reconstruction():
    similarity = pd.Series([0.2, 0.5, 0.4, 0.9, 1.0], name="cka")
    probe = pd.DataFrame({"layer": range(5), "top1": [0.1, 0.6, 0.3, 0.95, 0.99]})
    frame, rho = relate_to_reconstruction(similarity, probe)
    assert frame.columns.tolist() == ["layer", "cka", "top1"] and len(frame) == 5
    assert rho["cka"]["rho"] == pytest.approx(1.0) and rho["cka"]["n_layers"] == 4
    # the 4 hidden states used: cka and top1 have the same ranks, depth does not fully explain it
    expected = partial_spearman([0.2, 0.5, 0.4, 0.9], [0.1, 0.6, 0.3, 0.95], [0, 1, 2, 3])
    assert (rho["cka"]["rho_given_depth"], rho["cka"]["p_value_given_depth"]) == expected
    _, with_last = relate_to_reconstruction(similarity, probe, exclude_last=False)
    assert with_last["cka"]["n_layers"] == 5
    _, two = relate_to_reconstruction(similarity[:3], probe[:3])  # 2 points: no correlation
    assert np.isnan(two["cka"]["rho"]) and two["cka"]["n_layers"] == 2
    with pytest.raises(ValueError, match="several rows per hidden state"):
        relate_to_reconstruction(similarity, pd.concat([probe, probe]))


# -- real model: the token sample and pinned values ------------------------------------------------


@pytest.fixture(scope="module")
def uspto_32(uspto_first_64):
    return uspto_first_64[:32]


@pytest.fixture(scope="module")
def all_states(rxnmapper, uspto_32):
    model, tokenizer = rxnmapper
    return collect_hidden_states(model, tokenizer, uspto_32, max_tokens=None, progress=False)


@pytest.mark.slow
def test_pinned_values_on_rxnmapper(all_states):
    assert all_states.shape == (13, RXNMAPPER_N_TOKENS, 256)
    assert all_states.dtype == torch.float32
    cka = cka_matrix(all_states)
    assert cka.loc[12, 1] == pytest.approx(RXNMAPPER_CKA_12_1, abs=2e-3)
    assert cka.loc[12, 0] == pytest.approx(RXNMAPPER_CKA_12_0, abs=2e-3)
    statistics = layer_statistics(all_states)
    assert statistics.loc[0, "norm_mean"] == pytest.approx(RXNMAPPER_NORM_MEAN_0, rel=1e-3)
    assert statistics.loc[12, "norm_mean"] == pytest.approx(RXNMAPPER_NORM_MEAN_12, rel=1e-3)
    assert cosine_across_layers(all_states).loc[12, 11] == pytest.approx(RXNMAPPER_COSINE_12_11,
                                                                         abs=2e-3)
    # CKA to the last hidden state rises with depth (ALBERT applies one shared block)
    assert (np.diff(cka[12].to_numpy()) > 0).all()
    debiased = cka_matrix(all_states, debiased=True)
    assert debiased.loc[12, 1] == pytest.approx(RXNMAPPER_DEBIASED_CKA_12_1, abs=2e-3)
    assert debiased.loc[12, 0] == pytest.approx(RXNMAPPER_DEBIASED_CKA_12_0, abs=2e-3)


def test_sample_is_seeded_and_takes_the_same_tokens_from_every_layer(rxnmapper, uspto_32):
    model, tokenizer = rxnmapper
    texts = uspto_32[:6]
    every = collect_hidden_states(model, tokenizer, texts, max_tokens=None, progress=False)
    assert every.shape[1] == sum(len(ids) - 2 for ids in tokenizer(texts)["input_ids"])
    sample = collect_hidden_states(model, tokenizer, texts, max_tokens=100, seed=3,
                                   batch_size=3, progress=False)
    assert sample.shape == (13, 100, 256)
    again = collect_hidden_states(model, tokenizer, texts, max_tokens=100, seed=3,
                                  batch_size=32, progress=False)
    torch.testing.assert_close(sample, again, rtol=1e-4, atol=1e-5)  # padding differs only
    other = collect_hidden_states(model, tokenizer, texts, max_tokens=100, seed=4,
                                  progress=False)
    assert not torch.allclose(sample, other)
    # each sampled row is one real token: find it in the full run by its last hidden state,
    # then every layer must match that same token; the sample keeps text order
    distance = torch.cdist(sample[-1].double(), every[-1].double(),
                           compute_mode="donot_use_mm_for_euclid_dist")
    index = distance.argmin(dim=1)
    assert (distance.min(dim=1).values < 1e-3).all()
    assert index.unique().numel() == 100 and (index.diff() > 0).all()
    torch.testing.assert_close(sample, every[:, index], rtol=1e-4, atol=1e-5)
    # asking for more tokens than there are keeps them all
    assert collect_hidden_states(model, tokenizer, texts, max_tokens=10**6,
                                 progress=False).shape == every.shape


def test_sampled_reconstruction_on_every_token_equals_the_rq1_probe(rxnmapper, uspto_32):
    model, tokenizer = rxnmapper
    texts = uspto_32[:4]
    states, token_ids = collect_hidden_states(model, tokenizer, texts, max_tokens=None,
                                              return_token_ids=True, progress=False)
    assert token_ids.tolist() == [i for ids in tokenizer(texts)["input_ids"] for i in ids[1:-1]]
    sampled = sampled_reconstruction(model, states, token_ids, chunk_size=100)
    probed = reconstruction_accuracy(model, tokenizer, texts, progress=False)
    np.testing.assert_allclose(sampled["top1"], probed["top1"], atol=1e-12)
    np.testing.assert_allclose(sampled["top5"], probed["top5"], atol=1e-12)


def test_bad_input_gives_clear_errors(rxnmapper, uspto_32):
    model, tokenizer = rxnmapper
    with pytest.raises(ValueError, match="texts is empty"):
        collect_hidden_states(model, tokenizer, [], progress=False)
    with pytest.raises(ValueError, match="max_tokens must be a positive integer"):
        collect_hidden_states(model, tokenizer, uspto_32, max_tokens=0, progress=False)
    with pytest.raises(ValueError, match="states must have shape"):
        layer_statistics(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="model_names is empty"):
        layer_similarity_report([])
    with pytest.raises(ValueError, match="duplications must be"):
        layer_similarity_report(["rxnmapper-albert"], duplications="all")
    for kwargs, message in [
            (dict(duplications=[0, 0, 1]), "duplications must be None, 'paper', 'standard' or a "
                                            "mapping {label: [block, ...]}, got [0, 0, 1]"),
            (dict(model_names=["rxnmapper-albert"] * 2),
             "model_names must be distinct models: 'rxnmapper-albert' appears 2 times in "
             "['rxnmapper-albert', 'rxnmapper-albert']"),
            (dict(max_tokens="20"), "max_tokens must be a positive integer, got '20'"),
            (dict(n_sequences=0), "n_sequences must be an integer >= 1, got 0"),
            (dict(batch_size=2.5), "batch_size must be an integer >= 1, got 2.5"),
            (dict(seed=-1), "seed must be an integer >= 0, got -1"),
            (dict(max_length=0), "max_length must be at least 3 (CLS, a token, SEP), got 0")]:
        with pytest.raises(ValueError) as refused:
            layer_similarity_report(**(dict(model_names=["rxnmapper-albert"]) | kwargs),
                                    progress=False, cache=False)
        assert str(refused.value) == message
    with pytest.raises(ValueError, match="reconstruction must be"):
        layer_similarity_report(["rxnmapper-albert"], reconstruction=True)
    # the second model is checked before the first one runs
    from dupbert.core.errors import ModelNotAvailable

    with pytest.raises(ModelNotAvailable, match=r"^could not load model 'rxnfp-bret'\."):
        layer_similarity_report(["rxnmapper-albert", "rxnfp-bret"], progress=False, cache=False)


def test_similarity_duplication_of_bert_like_models():
    from transformers import BertConfig, BertForMaskedLM

    def tiny(layers):
        return BertForMaskedLM(BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=layers,
                                          num_attention_heads=2, intermediate_size=16))

    assert paper_duplication(tiny(4)) == {"copy first 3": [0, 0, 1, 1, 2, 2, 3]}
    assert paper_duplication(tiny(2)) == {"copy first 2": [0, 0, 1, 1]}


def test_layer_similarity_report_on_rxnmapper(rxnmapper, shared_data_dir):
    model, _ = rxnmapper
    assert paper_duplication(model) == {"repeat shared +3": list(range(12)) + [11, 11, 11]}
    report = layer_similarity_report(["rxnmapper-albert"], n_sequences=4, max_tokens=100,
                                     data_dir=str(shared_data_dir), progress=False, cache=False)
    layers, pairs = report
    assert layers.groupby("duplication").size().to_dict() == {"baseline": 13, "repeat shared +3": 16}
    assert (layers["corpus"] == "uspto50k-test").all() and (layers["n_tokens"] == 100).all()
    last = layers.groupby("duplication").tail(1)
    np.testing.assert_allclose(last["cka_to_last"], 1.0, atol=1e-12)
    np.testing.assert_allclose(last["cka_debiased_to_last"], 1.0, atol=1e-12)
    # the debiased estimate sits below the biased one away from the last hidden state
    inner = layers[layers["layer"] < 12]
    assert (inner["cka_debiased_to_last"] < inner["cka_to_last"]).all()
    np.testing.assert_allclose(last["w1"], 0.0, atol=1e-12)
    repeats = layers[layers["duplication"] == "repeat shared +3"]
    assert repeats["is_copy"].tolist() == [False] * 13 + [True] * 3
    assert len(pairs) == 13 * 13 + 16 * 16
    # the RQ1 accuracy of the same hidden states, on the same sequences
    assert layers["top1"].notna().all() and layers["top5"].notna().all()
    assert (layers.loc[layers["layer"] >= 3, "top1"] > 0.95).all()
    baseline = pairs[pairs["duplication"] == "baseline"]
    np.testing.assert_allclose(baseline.loc[baseline["layer"] == baseline["other_layer"], "cka"],
                               1.0, atol=1e-12)


def test_rq2_plots_draw_synthetic_frames():
    from dupbert.book.plots import (plot_distribution_distance, plot_layer_statistics,
                               plot_similarity_heatmap, plot_similarity_heatmaps,
                               plot_similarity_vs_reconstruction)

    frames = []
    for duplication, n_states in [("baseline", 4), ("repeat shared +1", 6)]:
        states = torch.tensor(np.stack([_random(60, 5, s) * (1 + s / 10) for s in range(n_states)]))
        frame = layer_statistics(states).merge(distribution_distance(states), on="layer")
        frame = frame.assign(model="toy", duplication=duplication,
                             cka_to_last=cka_matrix(states).iloc[:, -1].to_numpy(),
                             top1=np.linspace(0.2, 1.0, n_states))
        frames.append(frame)
    layers = pd.concat(frames, ignore_index=True)
    pairs = cka_matrix(states).stack().rename("cka").reset_index().assign(model="toy")
    assert len(plot_layer_statistics(layers).axes) == 3
    assert len(plot_distribution_distance(layers).axes) == 2
    assert len(plot_similarity_heatmap(cka_matrix(states), "toy").axes) == 2  # + colour bar
    assert len(plot_similarity_heatmaps(pairs, "cka").axes) == 2
    assert len(plot_similarity_vs_reconstruction(layers).axes[0].collections) == 1
    with pytest.raises(KeyError, match="needs columns"):
        plot_layer_statistics(layers.drop(columns="q50"))


def test_the_glance_rule_reads_debiased_cka_given_depth():
    """The RQ2 verdict uses the partial correlation given depth, so a model whose CKA
    is monotone in depth (rho with CKA = rho with depth) decides nothing."""
    from dupbert.study import glance

    def table(partial):
        return pd.DataFrame([
            dict(model="a", similarity="cka_debiased_to_last", rho=0.97, p_value=1e-7,
                 n_layers=12, rho_given_depth=partial, p_value_given_depth=0.01),
            dict(model="a", similarity="cka_to_last", rho=0.97, p_value=1e-7, n_layers=12,
                 rho_given_depth=-0.9, p_value_given_depth=0.001)])  # the biased row is not read

    row = glance.rq2_row(table(float("nan")))
    assert row["verdict"] == "undecided"
    assert row["ours"] == ("a: rho +0.97 (p 1e-07, 12 hidden states), given depth: none "
                           "(monotone in depth)")
    assert glance.rq2_row(table(0.6))["verdict"] == "reproduced"
    assert glance.rq2_row(table(-0.6))["verdict"] == "refuted"


def test_the_rq2_cache_key_names_the_data_folder_read(tmp_path, monkeypatch, shared_data_dir,
                                                      zoo_cache):
    """``layer_similarity_report(data_dir=...)`` keys its cached statistics on the corpus file
    of the folder it reads, not on ``$DUPBERT_DATA_DIR``'s (here unset)."""
    import dupbert.tools.stats as stats_module
    from dupbert.core.results import input_fingerprint

    monkeypatch.setenv("DUPBERT_CACHE", str(tmp_path))
    monkeypatch.delenv("DUPBERT_DATA_DIR", raising=False)
    (tmp_path / "models").symlink_to(zoo_cache / "models")
    keys = []

    class Recorded(Exception):
        """Raised once the first key is recorded: nothing is computed."""

    def recorded(kind, fields, compute, enabled=True):
        keys.append(fields)
        raise Recorded

    monkeypatch.setattr(stats_module, "cached_frame", recorded)
    with pytest.raises(Recorded):
        stats_module.layer_similarity_report(["rxnmapper-albert"], n_sequences=2,
                                             data_dir=shared_data_dir, progress=False)
    corpus = shared_data_dir / "reactions" / "uspto50k_test_unmapped.csv"
    assert keys[0]["corpus_file"][0] == str(corpus)
    assert input_fingerprint("rxnmapper-albert", "uspto50k-test")["corpus_file"] == "hub"
    assert input_fingerprint("rxnmapper-albert", "uspto50k-test", shared_data_dir) == {
        "model_weights": keys[0]["model_weights"], "corpus_file": keys[0]["corpus_file"]}


def test_n_sequences_none_reads_every_row_and_passes_the_argument_checks():
    from dupbert.core.errors import ModelNotAvailable

    # past every argument check, to the model check: None is accepted, as load_texts reads it
    with pytest.raises(ModelNotAvailable, match="could not load model 'no-such-model'"):
        layer_similarity_report(["no-such-model"], n_sequences=None, progress=False, cache=False)


def test_translator_gap_against_similarity_per_model():
    from dupbert.tools.stats import translator_gap_vs_similarity

    layers_ = range(5)
    translator = pd.DataFrame(
        [dict(model="m", measure=measure, translator=t, layer=l, top1=value)
         for l in layers_ for measure in ("reconstruction", "masked")
         for t, value in (("identity", 0.2 * l), ("linear", 0.9))])
    layers = pd.DataFrame([dict(model="m", duplication=d, layer=l, cka_debiased_to_last=0.2 * l)
                           for l in layers_ for d in ("baseline", "first 1 copied")])
    gaps = translator_gap_vs_similarity(translator, layers)
    assert gaps["layer"].tolist() == [0, 1, 2, 3]  # the last hidden state is left out
    np.testing.assert_allclose(gaps["gap"], [0.9, 0.7, 0.5, 0.3])
    np.testing.assert_allclose(gaps["rho"], -1.0)  # the further from the last, the larger the gain
    # with other lenses beside it, one is chosen; without it, the message names those there
    tuned = translator[translator["translator"] == "linear"].assign(translator="tuned-token",
                                                                   top1=0.95)
    both = pd.concat([translator, tuned], ignore_index=True)
    pd.testing.assert_frame_equal(translator_gap_vs_similarity(both, layers), gaps)
    np.testing.assert_allclose(translator_gap_vs_similarity(both, layers, lens="tuned-token")["gap"],
                               [0.95, 0.75, 0.55, 0.35])
    with pytest.raises(ValueError, match=r"no 'linear' reconstruction rows \(it has "
                                         r"\['tuned-token'\]\): RQ1 writes them when its "
                                         r"parameter translators includes 'linear'"):
        translator_gap_vs_similarity(both[both["translator"] != "linear"], layers)


# --------------------------------------------------------------------------------------------------
# The RQ2 chapter's tables and prose, on hand-made frames (expected values computed by hand)


def _chapter_layers():
    """``m``: hidden states 0..5 (rho over 0..4 computable); ``n``: 0..2 (too few) and one
    duplicated variant of ``n`` whose hidden state 2 a copy produces."""
    def rows(model, duplication, n_tokens, **columns):
        n = len(columns["top1"])
        base = dict(model=model, duplication=duplication, n_tokens=n_tokens, norm_std=0.5,
                    q01=-2.0, q50=0.001, q99=2.0, max_abs=123.456, kurtosis=1.23456,
                    top_dim_var_frac=0.02, anisotropy=0.1)
        copies = columns.pop("is_copy", [False] * n)
        return [dict(base, layer=layer, is_copy=copies[layer],
                     **{key: values[layer] for key, values in columns.items()})
                for layer in range(n)]
    m = rows("m", "baseline", 500,
             top1=[0.10, 0.60, 0.50, 0.80, 0.90, 0.95],
             cka_debiased_to_last=[0.40, 0.50, 0.70, 0.60, 0.92, 1.0],
             cka_to_last=[0.45, 0.55, 0.65, 0.75, 0.93, 1.0],
             cosine_to_last=[0.2, 0.1, 0.4, 0.3, 0.8, 1.0],
             w1_standardised=[0.5, 0.4, 0.3, 0.2, 0.1, 0.0],
             norm_mean=[10.0, 11.0, 12.0, 12.5, 15.0, 20.0],
             std=[1.0, 1.1, 1.2, 1.3, 1.4, 1.6])
    n = rows("n", "baseline", 300, top1=[0.2, 0.9, 0.99], cka_debiased_to_last=[0.3, 0.95, 1.0],
             cka_to_last=[0.35, 0.96, 1.0], cosine_to_last=[0.2, 0.9, 1.0],
             w1_standardised=[0.6, 0.05, 0.0], norm_mean=[8.0, 8.0, 8.8], std=[1.0, 1.0, 1.0])
    n_copied = rows("n", "first 1 copied", 300, top1=[0.2, 0.9, 0.95, 0.985],
                    cka_debiased_to_last=[0.3, 0.9, 0.95, 1.0], cka_to_last=[0.3, 0.9, 0.95, 1.0],
                    cosine_to_last=[0.2, 0.9, 0.95, 1.0], w1_standardised=[0.6, 0.1, 0.05, 0.0],
                    norm_mean=[8.0] * 4, std=[1.0] * 4, is_copy=[False, False, True, False])
    return pd.DataFrame(m + n + n_copied)


def _chapter_pairs():
    def cka(model, duplication, values):
        return [dict(model=model, duplication=duplication, layer=a, other_layer=b, cka=value)
                for (a, b), value in values.items()]
    return pd.DataFrame(
        cka("n", "baseline", {(0, 1): 0.5, (1, 2): 0.9, (0, 2): 0.1, (1, 0): 0.5, (2, 1): 0.9})
        + cka("n", "first 1 copied", {(0, 1): 0.5, (1, 2): 0.97, (2, 3): 0.8, (0, 2): 0.2,
                                      (2, 1): 0.97, (3, 2): 0.8}))


def _spearman_p(rho, n):
    t = rho * np.sqrt((n - 2) / (1 - rho ** 2))
    return 2 * scipy.stats.t.sf(abs(t), n - 2)


def test_spearman_table_per_model_and_similarity():
    from dupbert.tools.stats import spearman_table

    table = spearman_table(_chapter_layers(), ["m", "n"])
    assert table.index.names == ["model", "similarity"]
    assert table.index.tolist() == [(model, similarity) for model in ("m", "n") for similarity in
                                    ("cka_debiased_to_last", "cka_to_last", "cosine_to_last",
                                     "depth")]
    m = table.loc["m"]
    # hidden states 0..4: top-1 ranks 1 3 2 4 5; debiased CKA 1 2 4 3 5 (sum d^2 = 6), biased
    # CKA and depth 1 2 3 4 5 (2), cosine 2 1 4 3 5 (10): rho = 1 - 6 sum d^2 / (5 * 24)
    np.testing.assert_allclose(m["rho"], [0.7, 0.9, 0.5, 0.9])
    np.testing.assert_allclose(m["p_value"], [_spearman_p(r, 5) for r in (0.7, 0.9, 0.5, 0.9)])
    assert m["n_layers"].tolist() == [5, 5, 5, 5]
    # partial on depth: (0.7 - 0.9 * 0.9) / (1 - 0.81); biased CKA and depth are depth itself
    assert m.loc["cka_debiased_to_last", "rho_given_depth"] == pytest.approx(-0.11 / 0.19)
    assert np.isnan(m.loc["cka_to_last", "rho_given_depth"])
    n = table.loc["n"]
    assert n["n_layers"].tolist() == [2, 2, 2, 2] and n["rho"].isna().all()
    assert spearman_table(_chapter_layers()).index.equals(table.index)  # models in frame order


def test_format_correlations_rounds_rho_and_p():
    from dupbert.tools.stats import spearman_table
    from dupbert.book.rq2 import format_correlations

    shown = format_correlations(spearman_table(_chapter_layers())).loc["m"]
    assert shown["rho"].tolist() == ["0.700", "0.900", "0.500", "0.900"]
    assert shown.loc["cka_debiased_to_last", "p_value"] == f"{_spearman_p(0.7, 5):.2g}" == "0.19"
    assert shown.loc["cka_debiased_to_last", "rho_given_depth"] == "-0.579"
    assert shown.loc["cka_to_last", "p_value_given_depth"] == "nan"
    assert shown["n_layers"].tolist() == [5, 5, 5, 5]


def test_the_rq2_reading_tables():
    """model_table, summary_numbers, duplicate_table on the chapter's hand-made frames."""
    from dupbert.book.rq2 import duplicate_table, model_table, summary_numbers
    from dupbert.tools.stats import spearman_table

    layers = _chapter_layers()
    correlations = spearman_table(layers)
    partial = -0.11 / 0.19
    p_partial = 2 * scipy.stats.t.sf(abs(partial * np.sqrt(2 / (1 - partial ** 2))), 2)
    table = model_table(layers, correlations)
    assert table.index.tolist() == ["m", "n"]
    assert table.loc["m"].to_dict() == {
        "tokens": 500, "CKA (debiased), lowest": "0.400 (hidden state 0)",
        "CKA (debiased), highest": "0.920", "CKA (biased)": "0.450 to 0.930",
        "within 0.1 of the last": "1 of 5 (4)", "cosine": "0.10 to 0.80", "norm factor": "2.00",
        "std factor": "1.60", "largest W1 (std.)": "0.50", "rho, CKA": "0.70", "p": "0.19",
        "rho, cosine": "0.50", "rho, depth": "0.90", "rho given depth": "-0.58",
        "p given depth": f"{p_partial:.2g}"}
    n = table.loc["n"]
    assert (n["tokens"], n["CKA (debiased), lowest"], n["within 0.1 of the last"], n["norm factor"],
            n["rho, CKA"], n["rho given depth"]) == (300, "0.300 (hidden state 0)", "1 of 2 (1)", "1.10", "-", "-")
    wider = model_table(layers, correlations, ["m"], within=0.5)
    assert wider.index.tolist() == ["m"] and wider.loc["m", "within 0.5 of the last"] == "4 of 5 (1, 2, 3, 4)"
    assert summary_numbers(layers, correlations) == {
        "norm_factor": "2.00", "norm_factor_model": "m", "lowest_cka": "0.30", "usable": 1,
        "rho_range": "0.70 to 0.70", "beyond_depth": 0, "beyond_depth_models": "none"}
    assert duplicate_table(layers, _chapter_pairs()).reset_index().to_dict("records") == [{
        "model": "n", "duplication": "first 1 copied", "top-1 at the last hidden state": "0.985",
        "as loaded": "0.990", "copies write hidden states": "2", "CKA of a copy with its input": "0.970 to 0.970",
        "CKA of a block as loaded with its input": "0.500 to 0.900"}]
    assert duplicate_table(layers[layers["duplication"] == "baseline"], _chapter_pairs()).empty


def test_summary_numbers_count_a_model_whose_partial_rho_is_significant():
    from dupbert.book.rq2 import summary_numbers

    layers = _chapter_layers()
    correlations = pd.DataFrame(
        [dict(model=model, similarity=similarity, rho=rho, p_value=0.01, n_layers=8,
              rho_given_depth=0.6, p_value_given_depth=p)
         for model, rho, p in (("m", 0.8, 0.01), ("n", 0.4, 0.2))
         for similarity in ("cka_debiased_to_last", "cka_to_last", "cosine_to_last", "depth")]
    ).set_index(["model", "similarity"])
    shown = summary_numbers(layers, correlations)
    assert (shown["usable"], shown["rho_range"], shown["beyond_depth"],
            shown["beyond_depth_models"]) == (2, "0.40 to 0.80", 1, "m")
    none = summary_numbers(layers, correlations.assign(rho=float("nan")))
    assert (none["usable"], none["rho_range"]) == (0, "none computed")


def test_statistics_table_shows_the_models_as_loaded():
    from dupbert.book.rq2 import statistics_table

    table = statistics_table(_chapter_layers())
    assert table.index.names == ["model", "hidden state"] and len(table) == 6 + 3
    assert list(table.columns) == ["norm", "norm std", "std", "q01", "q50", "q99", "max |x|",
                                   "kurtosis", "top dim", "anisotropy"]
    row = table.loc[("m", 5)]
    assert (row["norm"], row["std"], row["max |x|"], row["kurtosis"], row["q50"]) == (
        "20.000", "1.600", "123", "1.235", "0.001")


def test_similarity_to_last_table_per_model_and_variant():
    from dupbert.book.rq2 import similarity_to_last_table

    table = similarity_to_last_table(_chapter_layers())
    assert table.columns.names == ["model", "duplication", "measure"]
    assert table.columns.tolist()[:5] == [("m", "baseline", measure) for measure in
                                          ("CKA", "CKA (debiased)", "cosine", "W1 (std.)", "top-1")]
    assert table.columns.tolist()[5] == ("n", "baseline", "CKA")
    assert table.columns.tolist()[-1] == ("n", "first 1 copied", "top-1")
    assert table.index.name == "hidden state" and table.index.tolist() == [0, 1, 2, 3, 4, 5]
    assert table.loc[0, ("m", "baseline", "CKA (debiased)")] == "0.400"
    assert table.loc[3, ("n", "first 1 copied", "top-1")] == "0.985"
    assert table.loc[3, ("n", "baseline", "top-1")] == ""  # n as loaded has hidden states 0..2


def test_translator_gap_tables_per_model_and_per_hidden_state():
    from dupbert.book.rq2 import translator_gap_tables

    gaps = pd.DataFrame([dict(model="m", layer=layer, identity=0.1, linear=0.1 + gap, gap=gap,
                              similarity=0.5 + layer / 10, rho=-0.87654, p_value=0.012345)
                         for layer, gap in enumerate([0.4, 0.2, 0.1])])
    per_model, per_layer = translator_gap_tables(gaps)
    assert per_model.loc["m"].tolist() == [-0.877, 0.012, 3]
    assert per_layer.loc[2, ("gap", "m")] == 0.1 and per_layer.loc[1, ("similarity", "m")] == 0.6
