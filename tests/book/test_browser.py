"""Open every page of the built book in headless Chromium with the network closed.

Chromium comes from Debian's package (``make test`` installs it when missing); Playwright
drives ``/usr/bin/chromium`` and never downloads a browser. Every request that is not to the
local server is aborted and counted as a failure, so a page that passes works offline. Pages
are opened in a 1280 x 900 window, and the console must stay silent: any error or warning
fails the page.
"""

from __future__ import annotations

import functools
import http.server
import re
import threading

import pytest
import yaml
from _harness import ROOT, toc_files
from conftest import offline_page

pytestmark = [pytest.mark.book, pytest.mark.browser]
WINDOW = {"width": 1280, "height": 900}
# The smallest share of its natural width an image may be shown at: with the book's style
# (flowlaws.book.style: no font under 8 pt) that keeps every label of a figure legible.
MIN_IMAGE_SCALE = 0.8
TOC_PAGES = toc_files(yaml.safe_load((ROOT / "_toc.yml").read_text()))


@pytest.fixture(scope="module")
def server(smoke_book):
    handler = functools.partial(_QuietHandler, directory=str(smoke_book))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def open_offline(browser, url: str):
    """Load ``url`` with every non-local request aborted; return (page, problems)."""
    page, problems = offline_page(browser, WINDOW, console=("error", "warning"))
    page.on("requestfailed", lambda r: problems.append(f"failed request: {r.url}"))
    page.on("response", lambda r: r.status >= 400 and problems.append(f"HTTP {r.status}: {r.url}"))
    page.goto(url, wait_until="networkidle")
    page.wait_for_function("() => !window.MathJax || (MathJax.startup && MathJax.startup.promise)")
    page.evaluate("() => window.MathJax ? MathJax.startup.promise : null")
    return page, problems


# Measured in the page: what the reader sees of the article at a 1280 px window.
LAYOUT = """() => {
  const article = document.querySelector('article');
  const box = article.getBoundingClientRect();
  const style = getComputedStyle(article);
  const right = box.right - parseFloat(style.paddingRight) + 1;
  // papermill's injected-parameters cell exists only in the smoke build, never in the book
  const shown = e => !e.closest('.tag_injected-parameters');
  const sideways = sel => [...article.querySelectorAll(sel)].filter(shown)
    .filter(e => e.scrollWidth > e.clientWidth + 1 || e.getBoundingClientRect().right > right)
    .map(e => (e.textContent || '').trim().split('\\n')[0].slice(0, 80));
  const images = [...article.querySelectorAll('img')].filter(i => i.naturalWidth > 0);
  const figures = [...article.querySelectorAll('figure img')];
  const cells = [...article.querySelectorAll('table td')].filter(shown)
    .map(td => td.textContent.trim()).filter(t => /^(-?nan|NaN|None)$/i.test(t));
  return {
    text: article.innerText,
    pageWidth: document.documentElement.scrollWidth,
    windowWidth: window.innerWidth,
    tables: sideways('table'),
    missing: cells,
    code: sideways('div.cell_input pre, div.highlight pre'),
    outputs: sideways('div.cell_output pre, div.cell_output .output, div.cell_output table'),
    equations: sideways('mjx-container[display="true"]'),
    scales: images.filter(i => i.getBoundingClientRect().width > 0)
      .map(i => [i.src.split('/').pop(), i.getBoundingClientRect().width / i.naturalWidth]),
    alts: figures.map(i => [i.getAttribute('alt') || '', i.src.split('/').pop(),
      ((i.closest('figure').querySelector('.caption-text') || {}).textContent || '').trim(),
      !!i.closest('figure').querySelector('figcaption .math')]),
  };
}"""


def _layout_problems(page) -> list[str]:
    """What issue 15 found on the pages, measured at a 1280 px window: each fails the page."""
    seen = page.evaluate(LAYOUT)
    text, found = seen["text"], []
    if re.search(r"(?<![\d.])0%\|", text):
        found.append("a progress bar frozen at 0 %")
    if "|---|" in text:
        found.append("a Markdown table printed as text (|---|)")
    if "findfont:" in text:
        found.append("matplotlib's findfont warnings shown to the reader (a font cache without "
                     "matplotlib's own fonts; flowlaws.book.style.register_bundled_fonts)")
    if "NBVAL" in text:
        found.append("nbval test plumbing (NBVAL) shown to the reader")
    if seen["pageWidth"] > seen["windowWidth"]:
        found.append(f"the page scrolls sideways: {seen['pageWidth']} px in a "
                     f"{seen['windowWidth']} px window")
    found += [f"a table cell shows {t!r} (a value not measured reads as a dash)"
              for t in seen["missing"]]
    for key, what in (("code", "code"), ("outputs", "output"), ("equations", "equation"),
                      ("tables", "table")):
        found += [f"{what} overflows the article column: {t!r}" for t in seen[key]]
    found += [f"image {src} shown at {scale:.2f} of its natural width"
              for src, scale in seen["scales"] if scale < MIN_IMAGE_SCALE]
    for alt, src, caption, has_math in seen["alts"]:
        flat = " ".join(caption.split())
        if not alt or src in alt or re.search(r"\.(png|jpe?g|svg)$", alt):
            found.append(f"figure {src}: alt text {alt!r} is not its caption")
        elif not has_math and " ".join(alt.split()) != flat:
            found.append(f"figure {src}: alt text {alt[:40]!r} is not its caption {flat[:40]!r}")
    return found


@pytest.mark.parametrize("name", TOC_PAGES)
def test_page_renders_offline(browser, server, name):
    page, problems = open_offline(browser, f"{server}/{name}.html")
    text = page.inner_text("article")
    assert "$$" not in text and "\\(" not in text and "\\[" not in text, "raw TeX left on the page"
    if page.locator("article .math").count():
        assert page.locator("mjx-container").count() > 0, "math on the page was not typeset"
    broken = page.evaluate(
        "() => [...document.images]"
        ".filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)"
    )
    assert not broken, f"images that did not load: {broken}"
    problems += _layout_problems(page)
    assert not problems, "\n".join(problems)
    page.context.close()


def test_the_theorem_index_lists_titles_and_is_linked(browser, server):
    page, problems = open_offline(browser, f"{server}/book/theorems.html")
    links = page.eval_on_selector_all("article ul.flowlaws-theorem-index ul a",
                                      "els => els.map(e => [e.textContent, e.href])")
    assert len(links) >= 20, f"the index lists {len(links)} statements"
    assert all(re.fullmatch(r"(Theorem|Proposition|Corollary|Definition|Lemma) \d+", t)
               and "#" in href for t, href in links), links
    text = page.inner_text("article")
    assert "Balancedness of linear networks" in text and "thm-balancedness" not in text
    assert not problems, "\n".join(problems)
    page.context.close()
    intro, _ = open_offline(browser, f"{server}/book/intro.html")
    assert intro.locator("article a[href*='theorems.html']").count() >= 1, "the intro links it"
    assert intro.locator("nav a[href*='theorems.html']").count() >= 1, "the TOC links it"
    intro.context.close()


def test_first_chapter_shows_its_figure_and_theorem(browser, server):
    page, _ = open_offline(browser, f"{server}/book/01_conservation/01_gradient_flow.html")
    figure = page.locator("figure#fig-balancedness img")
    assert figure.count() == 1 and figure.evaluate("i => i.naturalWidth") > 100
    assert page.locator(".proof.theorem, div.theorem").count() >= 1
    assert page.locator("a[href*='references.html']").count() >= 1, "citations must link"
    page.screenshot(path=str(ROOT / "_build" / "smoke" / "first_chapter.png"), full_page=False)
    page.context.close()


def _chart_pages(smoke_book) -> list[str]:
    marker = 'data-flowlaws-chart="vega"'
    return [p for p in TOC_PAGES if marker in (smoke_book / f"{p}.html").read_text()]


CAPTION = "g.mark-text.caption_marks text"


def _drawn(page, chart_id: str) -> tuple[str, str]:
    """The caption text and the line paths that the chart shows now."""
    caption = page.text_content(f"#{chart_id} {CAPTION}") or ""
    paths = page.eval_on_selector_all(f"#{chart_id} g.mark-line.role-mark path",
                                      "els => els.map(e => e.getAttribute('d')).join('|')")
    return caption, paths


def _rows_with(node, key: str) -> list[dict]:
    """Every data row with a ``key`` field (``caption``, ``series``), wherever the spec keeps it."""
    if isinstance(node, dict):
        return [node] if key in node else [r for v in node.values() for r in _rows_with(v, key)]
    if isinstance(node, list):
        return [r for v in node for r in _rows_with(v, key)]
    return []


def _steps(spec: dict) -> dict[str, float]:
    """Each knob's data field and its slider's step (slider ``slider_<field>``)."""
    return {p["name"].removeprefix("slider_"): p["bind"]["step"] for p in spec["params"]}


def _positions(page, chart_id: str) -> dict[str, float]:
    """Where every slider of the chart is now, by its knob's data field."""
    pairs = page.eval_on_selector_all(f"#{chart_id} input[type=range]",
                                      "els => els.map(e => [e.name, e.value])")
    return {name.removeprefix("slider_"): float(value) for name, value in pairs}


def _at(rows: list[dict], positions: dict[str, float], steps: dict[str, float]) -> list[dict]:
    return [r for r in rows if all(abs(r[f] - positions[f]) < steps[f] / 2 for f in steps)]


def _curves_at(spec: dict, positions: dict[str, float]) -> list[tuple]:
    rows = _at(_rows_with(spec, "series"), positions, _steps(spec))
    return sorted((r["series"], r["x"], r["y"]) for r in rows)


def _expected_caption(spec: dict, positions: dict[str, float]) -> str:
    (row,) = _at(_rows_with(spec, "caption"), positions, _steps(spec))
    return row["caption"].replace("\n", "")  # one <tspan> per wrapped line, joined in textContent


def _move_and_check(page, chart_id: str, spec: dict, before: tuple[str, str], move,
                    domains: list) -> tuple:
    start = _positions(page, chart_id)
    move()
    page.wait_for_function(
        "([id, sel, old]) => (document.querySelector('#' + id + ' ' + sel) || {})"
        ".textContent !== old", arg=[chart_id, CAPTION, before[0]], timeout=10_000)
    now, positions = _drawn(page, chart_id), _positions(page, chart_id)
    assert positions != start, "the slider did not move"
    assert now[0] == _expected_caption(spec, positions), "caption does not match the grid"
    (row,) = _at(_rows_with(spec, "setting"), positions, _steps(spec))
    setting = page.text_content(f"#{chart_id} g.mark-text.setting_marks text")
    assert setting == row["setting"], "the printed slider values do not match the sliders"
    if _curves_at(spec, positions) != _curves_at(spec, start):
        assert now[1] != before[1], f"the drawn curves did not change ({chart_id}: {now[0]})"
    _check_drawn_counts(page, chart_id, spec, positions)
    _check_readouts(page, chart_id, spec, positions)
    assert _domains(page, chart_id) == domains, "an axis moved with a slider"
    return now


def _domains(page, chart_id: str) -> list:
    """The x and y scale domains the chart draws now (Vega's own scales)."""
    return page.evaluate("id => ['x', 'y'].map(s => window.flowlawsCharts[id].scale(s).domain())",
                         chart_id)


def _check_readouts(page, chart_id: str, spec: dict, positions: dict[str, float]) -> None:
    """Every slider shows its knob's current value (as the grid writes it) and the grid's ends."""
    readouts = spec["usermeta"]["flowlaws"]["sliders"]
    shown = dict(page.eval_on_selector_all(
        f"#{chart_id} input[type=range]",
        "els => els.map(e => [e.name, [e.parentNode.querySelector('.flowlaws-slider-value')"
        ".textContent, e.parentNode.querySelector('.flowlaws-slider-ends').textContent]])"))
    assert set(shown) == set(readouts), "a slider without its value readout"
    for name, (value, ends) in shown.items():
        r = readouts[name]
        field = name.removeprefix("slider_")
        index = min(range(len(r["positions"])),
                    key=lambda i: abs(r["positions"][i] - positions[field]))
        assert value == r["values"][index], f"{name} shows {value!r}, not its value"
        assert r["ends"][0] in ends and r["ends"][1] in ends, f"{name} hides the grid's ends"


def _check_drawn_counts(page, chart_id: str, spec: dict, positions: dict[str, float]) -> None:
    """One drawn line per curve with points, one drawn symbol per marked point of the grid, and
    as many of each mark set (a cascade's peaks, other local maxima) in its own colour."""
    curves = [c for c in _curves_at(spec, positions) if c[1]]
    marks = _at(_rows_with(spec.get("datasets", {}).get("marks", []), "x"), positions,
                _steps(spec))
    lines = page.locator(f"#{chart_id} g.mark-line.role-mark path").count()
    symbols = page.locator(f"#{chart_id} g.mark-symbol.role-mark path").count()
    assert lines == len(curves), f"{lines} lines drawn, the grid has {len(curves)} curves here"
    assert symbols == sum(len(m["x"]) for m in marks), "the marked points do not match the grid"
    for layer in spec.get("layer", []):
        colour = layer.get("encoding", {}).get("color", {})
        if colour.get("field") != "kind":
            continue
        for kind, fill in zip(colour["scale"]["domain"], colour["scale"]["range"], strict=True):
            drawn = page.locator(f'#{chart_id} g.mark-symbol.role-mark path[fill="{fill}"]')
            expected = sum(len(m["x"]) for m in marks if m["kind"] == kind)
            assert drawn.count() == expected, f"{drawn.count()} {kind!r} drawn, not {expected}"


def _exercise_slider(page, chart_id: str, spec: dict, slider, state: tuple, domains: list
                     ) -> tuple:
    """Mouse to the end farther from the slider's value, then one arrow key back."""
    slider.scroll_into_view_if_needed()
    low, high = float(slider.get_attribute("min")), float(slider.get_attribute("max"))
    value = float(slider.input_value())
    to_right = value - low < high - value
    box = slider.bounding_box()
    end = (box["x"] + (box["width"] - 2 if to_right else 2), box["y"] + box["height"] / 2)
    click = functools.partial(page.mouse.click, *end)
    state = _move_and_check(page, chart_id, spec, state, click, domains)
    slider.focus()
    press = functools.partial(page.keyboard.press, "ArrowLeft" if to_right else "ArrowRight")
    return _move_and_check(page, chart_id, spec, state, press, domains)


def test_sliders_move_the_static_charts(browser, server, smoke_book):
    import json

    pages = _chart_pages(smoke_book)
    assert pages, "no page has an interactive chart"
    n_sliders = 0
    for name in pages:
        page, problems = open_offline(browser, f"{server}/{name}.html")
        for chart_id in page.eval_on_selector_all(".flowlaws-chart", "els => els.map(e => e.id)"):
            page.wait_for_function("id => window.flowlawsCharts && window.flowlawsCharts[id]",
                                   arg=chart_id, timeout=15_000)
            spec = json.loads(page.text_content(f"#{chart_id}-spec"))
            sliders = page.locator(f"#{chart_id} input[type=range]")
            assert sliders.count() == len(spec["params"]), "one slider per knob"
            state = _drawn(page, chart_id)
            assert state[0] == _expected_caption(spec, _positions(page, chart_id))
            domains = _domains(page, chart_id)  # fixed over the grid: no slider may move them
            _check_readouts(page, chart_id, spec, _positions(page, chart_id))
            for i in range(sliders.count()):
                state = _exercise_slider(page, chart_id, spec, sliders.nth(i), state, domains)
                n_sliders += 1
        assert not problems, "\n".join(problems)
        page.context.close()
    assert n_sliders > len(pages), "some chart must have more than one slider"


def test_the_intro_and_the_ledger_open_with_what_the_book_found(browser, server):
    from flowlaws.book.findings import ledger_rows

    rows = ledger_rows((ROOT / "book" / "ledger.md").read_text())
    for name in ("book/intro", "book/ledger"):
        page, problems = open_offline(browser, f"{server}/{name}.html")
        box = page.locator("article .flowlaws-findings")
        assert box.count() == 1, f"{name}: no 'What the book found' box"
        assert box.bounding_box()["y"] < WINDOW["height"], f"{name}: the box is below the fold"
        text = box.inner_text()
        assert "Part I" in text and "Part II" in text and "claims" in text, text[:300]
        links = box.locator("a .flowlaws-verdict")
        assert links.count() == len(rows), f"{name}: {links.count()} badges, {len(rows)} claims"
        assert not problems, "\n".join(problems)
        if name == "book/ledger":
            badges = page.locator("article table .flowlaws-verdict")
            assert badges.count() >= len(rows), "every verdict cell of the ledger is a badge"
            first = rows[0][1].replace("_", "-")
            assert page.locator(f"tr#claim-{first}").count() == 1, "rows carry the box's anchors"
        page.context.close()
