"""The chapters' figures (the built book is checked in tests/test_browser.py)."""

import pytest


def test_plot_reconstruction_draws_one_line_per_model_and_variant_control_dashed():
    import pandas as pd

    from dupbert.book.plots import plot_reconstruction

    rows = [
        dict(model=model, init=variant, layer=layer, top1=0.9 if variant == "pretrained" else 0.01)
        for model, layers in (("a", 3), ("b", 5))
        for variant in ("pretrained", "random-init control")
        for layer in range(layers)
    ]
    fig = plot_reconstruction(pd.DataFrame(rows))
    (ax,) = fig.axes
    styles = {line.get_label(): line.get_linestyle() for line in ax.get_lines()}
    assert styles == {
        "a (pretrained)": "-",
        "a (random-init control)": "--",
        "b (pretrained)": "-",
        "b (random-init control)": "--",
    }
    assert ax.get_ylim()[0] == 0 and ax.get_ylim()[1] >= 1
    assert all(float(tick).is_integer() for tick in ax.get_xticks())
    assert ax.get_xlabel() == "hidden state (0 = embedding output)"
    with pytest.raises(KeyError, match="top5"):
        plot_reconstruction(pd.DataFrame(rows), metric="top5")
