"""The book builds offline, with warnings as errors, from the committed executed chapters, and the
RQ1 page shows its figure. (`make book` re-executes the chapters first; this test does not.)"""

import re

import pytest

def test_book_builds_and_rq1_page_shows_its_figure(built_book):
    # `built_book` (tests/conftest.py) builds the book once per session with -W and fails on errors.
    page = built_book / "book" / "rq1.html"
    assert page.is_file(), f"no RQ1 page at {page}"
    html = page.read_text(encoding="utf-8")
    images = [src for src in re.findall(r'<img[^>]+src="([^"]+)"', html) if not src.startswith(("http:", "https:", "data:"))]
    assert images, "the RQ1 page has no figure"
    for src in images:
        image = (page.parent / src).resolve()
        assert image.is_file() and image.stat().st_size > 0, f"the RQ1 page refers to a missing or empty image {src}"
    assert 'id="fig-rq1-top1"' in html, "the glued RQ1 figure (label fig-rq1-top1) is not on the page"


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
