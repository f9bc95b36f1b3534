"""The book, built offline from the committed executed chapters with warnings as errors (once per
session; `make book` re-executes the chapters first, this does not), then in a real browser: headless Chromium (Debian `chromium` + `chromium-driver`)
driven by Selenium, over a local HTTP server, with every host but 127.0.0.1 blocked (a reader
without internet). Every page loads without errors, every image shows, no internal link or
anchor is broken, and the results-at-a-glance table has one row per claim of the paper. A
full-page screenshot of the RQ1 chapter is kept at `_build/screenshots/rq1.png`.

Every test of the built book is in this file, so that the tests spread over workers
(`make test`, pytest-xdist by file) build it once. Without Chromium or its driver the browser tests skip, except under CI (`CI` set), where they fail.
Selenium Manager is never used (it would try to download a browser): the driver is given by path.
"""

import base64
import functools
import http.server
import os
import re
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SCREENSHOT = REPO_ROOT / "_build" / "screenshots" / "rq1.png"
GLANCE_PAGE = "book/glance.html"

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
DRIVERS = ("chromedriver", "/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")

# Console errors that are not the book's: pydata-sphinx-theme logs this on a reader's first visit,
# before a light/dark choice is stored, and then picks "auto".
BENIGN_CONSOLE_ERRORS = ("Got invalid theme mode",)


def _unavailable(reason: str):
    message = f"{reason}; on Debian: apt-get install chromium chromium-driver"
    if os.environ.get("CI"):
        pytest.fail(f"browser tests cannot run under CI: {message}", pytrace=False)
    pytest.skip(message)


def _find(names) -> str | None:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path):
        self.failures: list[tuple[str, int, str]] = []  # (path, status, referring page)
        handler = functools.partial(_Handler, directory=str(root))
        super().__init__(("127.0.0.1", 0), handler)


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_request(self, code="-", size="-"):
        status = getattr(code, "value", code)
        if isinstance(status, int) and status >= 400:
            self.server.failures.append((self.path, status, self.headers.get("Referer", "")))

    def log_message(self, format, *args):  # quiet
        pass


@pytest.fixture(scope="module")
def book_url(built_book):
    """The built book served on a free local port for the module's tests."""
    server = _Server(built_book)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/", server
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _unavailable("selenium is not installed (pip install -e '.[test]')")
    chromium = _find(BROWSERS)
    driver = _find(DRIVERS)
    if chromium is None or driver is None:
        _unavailable(f"no {'Chromium' if chromium is None else 'chromedriver'} found on PATH")
    os.environ.setdefault("SE_OFFLINE", "true")  # belt and braces: Selenium Manager stays offline

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        "--hide-scrollbars",
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",  # a reader without internet
        "--no-first-run",
        "--disable-extensions",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    session = webdriver.Chrome(service=Service(driver), options=options)
    session.set_page_load_timeout(60)
    session.set_script_timeout(60)
    yield session
    session.quit()


def _open(browser, url: str) -> None:
    """Navigate to url and wait until a new document (not the previous one) has loaded.

    `browser.get` alone returned, on a loaded CI machine, while the previous page was still the
    document: the RQ1 page had no MathJax and the glance page no table (CI, 2026-12-02). The old
    document is marked, so a redirect (index.html to book/intro.html) still counts as loaded.
    """
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    browser.execute_script("window.__dupbertPrevious = true")
    browser.get(url)
    try:
        WebDriverWait(browser, 60, poll_frequency=0.2).until(
            lambda b: b.execute_script("return !window.__dupbertPrevious && document.readyState === 'complete'")
        )
    except TimeoutException:
        pytest.fail(f"{url} did not load within 60 s: the browser still shows {browser.current_url}")


@dataclass
class Page:
    path: str
    errors: list[str] = field(default_factory=list)
    external: list[str] = field(default_factory=list)  # resources the page asks the internet for
    images: list[dict] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)  # (href as written, resolved URL)
    ids: set[str] = field(default_factory=set)
    sideways: int = 0  # pixels the page scrolls sideways at the browser's width
    cut: int = 0  # text boxes whose lines are cut at their right edge


def _pages(html: Path) -> list[str]:
    """Every HTML page of the book: not the theme's templates and copies under _static, _sources, ..."""
    return sorted(
        path.relative_to(html).as_posix()
        for path in html.rglob("*.html")
        if not any(part.startswith("_") for part in path.relative_to(html).parts[:-1])
    )


_WAIT_FOR_IMAGES = """
const done = arguments[arguments.length - 1];
Promise.all([...document.images].map(img => {
    if (img.loading === "lazy") img.loading = "eager";
    return img.decode().catch(() => null).then(() => ({
        src: img.getAttribute("src"), url: img.currentSrc || img.src,
        width: img.naturalWidth, height: img.naturalHeight}));
})).then(done);
"""

_LINKS_AND_IDS = """
return {
    sideways: document.documentElement.scrollWidth - document.documentElement.clientWidth,
    cut: [...document.querySelectorAll("article pre")].filter(p => p.scrollWidth > p.clientWidth + 1).length,
    links: [...document.querySelectorAll("a[href]")].map(a => [a.getAttribute("href"), a.href]),
    ids: [...document.querySelectorAll("[id]")].map(e => e.id)
        .concat([...document.querySelectorAll("a[name]")].map(a => a.name)),
};
"""


@pytest.fixture(scope="module")
def site(browser, book_url, built_book) -> dict[str, Page]:
    """Each page of the book loaded once in the browser, with what it logged, its images, links and ids."""
    base, server = book_url
    pages = {}
    for path in _pages(built_book):
        page = pages[path] = Page(path)
        browser.get_log("browser")  # drop what the previous page logged late
        server.failures.clear()
        _open(browser, base + path)
        page.images = browser.execute_async_script(_WAIT_FOR_IMAGES)
        found = browser.execute_script(_LINKS_AND_IDS)
        page.links = [tuple(link) for link in found["links"]]
        page.ids = set(found["ids"])
        page.sideways, page.cut = int(found["sideways"]), int(found["cut"])
        state = browser.execute_script("return document.readyState")
        if state != "complete":
            page.errors.append(f"document.readyState is {state!r} after the load event")
        for entry in browser.get_log("browser"):
            if entry["level"] != "SEVERE":
                continue
            message = entry["message"]
            if entry.get("source") == "network" and not message.startswith(base):
                page.external.append(message.split(" ", 1)[0])
            elif "/favicon.ico" in message or any(benign in message for benign in BENIGN_CONSOLE_ERRORS):
                continue
            else:
                page.errors.append(f"console ({entry.get('source')}): {message}")
        for request, status, referer in server.failures:
            if request != "/favicon.ico":
                page.errors.append(f"HTTP {status} for {request} (requested by {referer or 'the browser'})")
    assert pages, f"no HTML pages in {built_book}"
    return pages


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


def test_no_page_needs_the_internet(site):
    """An offline reader gets the whole book: no script, style, font or image from another host."""
    externals = sorted({f"{page.path}: {url}" for page in site.values() for url in page.external})
    assert not externals, "pages ask the internet for resources:\n" + "\n".join(externals)


def test_mathematics_renders_offline(browser, book_url, built_book):
    """MathJax is served with the book (book/_static/mathjax): the RQ1 page's TeX is typeset."""
    base, _ = book_url
    _open(browser, base + "book/rq1.html")
    typeset = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "const started = Date.now();"
        "(function wait() {"  # the deferred script may still be starting on a loaded machine
        "  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {"
        "    MathJax.startup.promise.then(() => done(document.querySelectorAll('mjx-container').length));"
        "  } else if (Date.now() - started > 30000) { done(-1); } else { setTimeout(wait, 100); }"
        "})();"
    )
    assert typeset != -1, "MathJax did not load on book/rq1.html"
    assert typeset > 0, "MathJax loaded but typeset no formula on book/rq1.html"


def test_every_page_loads_without_errors(site):
    problems = [f"{page.path}: {error}" for page in site.values() for error in page.errors]
    assert not problems, "pages with errors:\n" + "\n".join(problems)


def test_every_image_loads(site):
    problems = [
        f"{page.path}: <img src={image['src']!r}> did not load ({image['width']}x{image['height']})"
        for page in site.values()
        for image in page.images
        if not (image["width"] > 0 and image["height"] > 0)
    ]
    assert not problems, "\n".join(problems)
    assert any(page.images for page in site.values()), "no page of the book has an image"


def test_no_internal_link_is_broken(site, book_url, built_book):
    base, _ = book_url
    problems = []
    checked = 0
    for page in site.values():
        for written, url in page.links:
            if not url.startswith(base):
                continue  # external, mailto:, javascript:
            parts = urlsplit(url)
            target = unquote(parts.path).lstrip("/")
            if target == "" or target.endswith("/"):
                target += "index.html"
            checked += 1
            if not (built_book / target).is_file():
                problems.append(f"{page.path}: href={written!r} points to {target}, which does not exist")
                continue
            anchor = unquote(parts.fragment)
            if not anchor or not target.endswith(".html"):
                continue
            ids = site[target].ids if target in site else None
            if ids is None:
                problems.append(f"{page.path}: href={written!r} points to {target}, which is not a page of the book")
            elif anchor not in ids:
                problems.append(f"{page.path}: href={written!r}: {target} has no element with id {anchor!r}")
    assert checked, "no internal links found"
    assert not problems, "broken internal links:\n" + "\n".join(problems)


def test_glance_table_has_one_row_per_claim(browser, book_url, built_book):
    from dupbert.study.paper import claims

    base, _ = book_url
    if not (built_book / GLANCE_PAGE).is_file():
        pytest.fail(f"the book has no results-at-a-glance page {GLANCE_PAGE} (book/glance.md or .ipynb listed in _toc.yml)")
    _open(browser, base + GLANCE_PAGE)
    rows = browser.execute_script(
        'return [...document.querySelectorAll("table.results-at-a-glance")].map(t => t.querySelectorAll("tbody tr").length)'
    )
    assert len(rows) == 1, f"{GLANCE_PAGE} should have exactly one <table class='results-at-a-glance'>, found {len(rows)}"
    expected = len(claims())
    assert rows[0] == expected, f"the results-at-a-glance table has {rows[0]} body rows, dupbert.study.paper.claims() has {expected}"


def test_rq1_page_full_screenshot(browser, book_url, built_book):
    """Kept as a build artefact for a person to look at: _build/screenshots/rq1.png."""
    base, _ = book_url
    assert (built_book / "book" / "rq1.html").is_file(), "the book has no RQ1 page book/rq1.html"
    browser.set_window_size(1280, 900)
    _open(browser, base + "book/rq1.html")
    browser.execute_async_script(_WAIT_FOR_IMAGES)
    # The viewport is made as tall as the page, then captured: Chromium's captureBeyondViewport
    # drew this theme's page shifted to the left, with empty code cells.
    width = 1280
    height = int(browser.execute_script("return document.documentElement.scrollHeight"))
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
    )
    try:
        browser.execute_async_script(_WAIT_FOR_IMAGES)
        png = base64.b64decode(browser.execute_cdp_cmd("Page.captureScreenshot", {"format": "png"})["data"])
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    SCREENSHOT.write_bytes(png)
    assert png.startswith(b"\x89PNG") and height > 900, f"unexpected screenshot ({len(png)} bytes, page {width}x{height})"


# ------------------------------------------------------------------------------------------------
# The lens as an HTML figure (dupbert.book.lens_figures.lens_html): needs no book, only the browser


def test_lens_html_shows_each_cells_top_k_on_hover(browser, rxnmapper, tmp_path):
    """A real rxnmapper lens as a self-contained HTML file, opened offline: hovering a cell
    shows that cell's top-5 tokens with probabilities and the input token's rank, as in the
    lens frame; columns are distinct per position although tokens repeat (nnsight #462)."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    import dupbert
    from dupbert.book.lens_figures import lens_html

    frame = dupbert.lens(*rxnmapper, "CC(=O)Cl.OCC>>CC(=O)OCC", k=5)
    page = tmp_path / "lens.html"
    figure = lens_html(frame, title="rxnmapper-albert")
    page.write_text(figure.document())
    assert "http" not in figure and "<script" not in figure  # nothing fetched, no script
    _open(browser, page.as_uri())
    headers = [h.text.replace("\n", " ") for h in
               browser.find_elements(By.CSS_SELECTOR, ".dupbert-lens thead th[data-position]")]
    real = frame[(frame["layer"] == 0) & (frame["guess"] == 1) & ~frame["special"]]
    assert headers == [f"{p} {t}" for p, t in zip(real["position"], real["input_token"])]
    assert len(set(headers)) == 21 and headers[0] == "1 C" and headers[1] == "2 C"
    for layer, position in ((0, 2), (1, 7), (12, 12)):
        cell = browser.find_element(
            By.CSS_SELECTOR, f'td[data-layer="{layer}"][data-position="{position}"]')
        tip = cell.find_element(By.CLASS_NAME, "tip")
        assert not tip.is_displayed()
        ActionChains(browser).move_to_element(cell).perform()
        assert tip.is_displayed()
        guesses = frame[(frame["layer"] == layer) & (frame["position"] == position)]
        lines = tip.text.splitlines()
        assert lines[0] == f"h{layer} pos {position} input {guesses['input_token'].iloc[0]}"
        assert lines[1:6] == [f"{g.guess}. {g.token} {g.probability:.3f}"
                              for g in guesses.itertuples()]
        assert lines[6] == (f"input rank {guesses['input_rank'].iloc[0]} "
                            f"p={guesses['input_probability'].iloc[0]:.3f}")
        assert cell.text.splitlines()[0] == guesses["token"].iloc[0]  # the cell: the top-1
    # pinned, measured once: at the last hidden state the head does not read '>>' back
    assert lines[1] == "1. [Te] 0.182" and lines[6] == "input rank 61 p=0.000"


def test_no_page_scrolls_sideways_or_cuts_its_text(site):
    """At the browser's width (1,280 px) no chapter runs off the page and no text box cuts its
    lines."""
    wide = {path: (page.sideways, page.cut) for path, page in site.items()
            if page.sideways > 0 or page.cut}
    assert not wide, f"pages wider than the window or with cut text, (pixels, boxes): {wide}"


def test_the_glance_table_is_short_and_the_forest_plot_is_on_it(browser, book_url, built_book):
    from dupbert.study.glance import HEADLINE_CHARS

    base, _ = book_url
    _open(browser, base + GLANCE_PAGE)
    cells = browser.execute_script(
        'return [...document.querySelectorAll("table.results-at-a-glance td")].map(td => td.innerText)')
    assert cells and max(map(len, cells)) <= HEADLINE_CHARS, \
        [c for c in cells if len(c) > HEADLINE_CHARS]
    assert browser.execute_script('return document.querySelector("#fig-glance-forest img") !== null')


@pytest.mark.parametrize("chapter, figure", [
    ("rq2", "fig-rq2-scatter"), ("rq3", "fig-rq3-seeds"), ("rq4", "fig-rq4-gains"),
    ("rq5", "fig-rq5-ensembles"), ("emergence", "fig-emergence-reactions"), ("rq1", "fig-rq1-top1")])
def test_each_chapter_opens_with_its_answer_and_its_main_figure(browser, book_url, built_book, chapter,
                                                                 figure):
    """Before the chapter's first section: a paragraph that starts "The answer", its glued numbers
    pasted (no role left as text), and the main figure."""
    base, _ = book_url
    _open(browser, base + f"book/{chapter}.html")
    opening = browser.execute_script("""
        const main = document.querySelector("main section") || document.querySelector("main");
        const first = main.querySelector("h2");
        const before = [...main.querySelectorAll("p, figure")].filter(
            e => !first || (e.compareDocumentPosition(first) & Node.DOCUMENT_POSITION_FOLLOWING));
        return {text: before.map(e => e.innerText).join("\\n"),
                figures: before.filter(e => e.tagName === "FIGURE").map(e => e.id)};""")
    assert "The answer" in opening["text"] and "{glue" not in opening["text"], opening["text"][:500]
    assert figure in opening["figures"], opening
