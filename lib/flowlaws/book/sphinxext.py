"""A small Sphinx extension for the book: what the built pages load, show and link.

- **Chart libraries, where needed.** A page whose body contains an element marked
  ``data-flowlaws-chart="vega"`` (or ``"plotly"``) gets the matching vendored library added
  once, from ``_static/`` (see ``tools/vendor_assets.py``); pages without charts stay light.
- **A static build.** Loading the extension sets ``FLOWLAWS_STATIC_BUILD=1`` for the kernels
  that execute the notebooks (:func:`flowlaws.book.progress.static_build`): no progress bar is
  left frozen on a page, no live widget is made for a page that cannot draw it.
- **A clean console.** sphinx-thebe writes its configuration script on every page, twice (a
  ``SyntaxError`` on ``THEBE_JS_URL``); with ``launch_buttons.thebe`` off the book does not use
  thebe, so its scripts and stylesheet are left out, and any script listed twice is kept once.
- **The column.** ``static/flowlaws.css``: code at the project's line length (100) fits the
  article column at a 1280 px window, outputs wrap instead of scrolling.
- **Alt text.** A figure's image without alt text gets its caption (not its file path).
- **The executed notebook.** A chapter's download menu offers the notebook as stored (without
  outputs) and, from ``_executed/``, the notebook as the build executed it, outputs included
  (myst-nb writes it to ``_build/jupyter_execute``).
- **The theorem index** (:mod:`flowlaws.book.theorem_index`), registered from here.
- **The claims ledger** (:mod:`flowlaws.book.ledger`): a page that pastes glued values from
  other pages is written again whenever any page is read, registered from here.
- **What the book found** (:mod:`flowlaws.book.findings`): the box of verdicts at the top of
  the intro and the ledger, and a badge for every verdict, registered from here.

Enabled in ``_config.yml``.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from docutils import nodes

from flowlaws.book.findings import setup_findings
from flowlaws.book.ledger import setup_ledger
from flowlaws.book.progress import STATIC_BUILD_ENV
from flowlaws.book.theorem_index import setup_theorem_index

__all__ = [
    "CHART_LIBRARIES",
    "EXECUTED_FOLDER",
    "STYLESHEET",
    "chart_marker",
    "offer_executed_notebook",
    "setup",
]


CHART_LIBRARIES = {
    "vega": "vega-bundle.js",
    "plotly": "plotly.min.js",
}
STATIC_DIR = Path(__file__).with_name("static")
STYLESHEET = "flowlaws.css"


def chart_marker(library: str) -> str:
    """The HTML attribute that asks for ``library`` on the page that contains it."""
    if library not in CHART_LIBRARIES:
        raise ValueError(f"library must be one of {sorted(CHART_LIBRARIES)}, got {library!r}")
    return f'data-flowlaws-chart="{library}"'


def _add_chart_libraries(app: Any, pagename: str, templatename: str, context: dict, doctree: Any):
    body = context.get("body", "")
    for library, filename in CHART_LIBRARIES.items():
        if chart_marker(library) in body:
            # priority < 200: before require.js (500 by myst-nb), or plotly's UMD wrapper
            # would register itself as an anonymous AMD module and never define window.Plotly.
            app.add_js_file(filename, priority=100)


EXECUTED_FOLDER = "_executed"


def offer_executed_notebook(
    app: Any, pagename: str, templatename: str, context: dict, doctree: Any
) -> None:
    """Copy the page's executed notebook into the site and add it to the download menu.

    Runs after sphinx-book-theme has built its header buttons (priority 501); a page with no
    executed notebook (a Markdown page) is left alone.
    """
    config = getattr(app.env, "mystnb_config", None)  # myst-nb's: _build/jupyter_execute
    folder = getattr(config, "output_folder", "") or Path(app.outdir).parent / "jupyter_execute"
    executed = Path(folder) / f"{pagename}.ipynb"
    if not executed.is_file():
        return
    relative = f"{EXECUTED_FOLDER}/{pagename}.ipynb"
    (Path(app.outdir) / relative).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(executed, Path(app.outdir) / relative)
    for group in context.get("header_buttons", []):
        if group.get("label") != "download-buttons":
            continue
        buttons = group["buttons"]
        for button in buttons:
            if button.get("label") == "download-source-button" and button["text"] == ".ipynb":
                button["text"] = ".ipynb without outputs"
        buttons.insert(1, {
            "type": "link",
            "url": context["pathto"](relative, 1),
            "text": ".ipynb with outputs",
            "tooltip": "Download the notebook as the book executed it",
            "icon": "fas fa-file-code",
            "label": "download-executed-notebook-button",
        })


def _thebe_enabled(app: Any) -> bool:
    options = getattr(app.config, "html_theme_options", None) or {}
    return bool((options.get("launch_buttons") or {}).get("thebe"))


def _is_thebe(asset: Any) -> bool:
    name = getattr(asset, "filename", None) or ""
    body = getattr(asset, "attributes", {}).get("body", "") or ""
    return "sphinx-thebe" in name or "THEBE_JS_URL" in body


def _asset_key(asset: Any) -> tuple:
    attributes = getattr(asset, "attributes", {})
    return (getattr(asset, "filename", None) or "", tuple(sorted(attributes.items())))


def _clean_assets(app: Any, pagename: str, templatename: str, context: dict, doctree: Any):
    """Each script and stylesheet once; thebe's left out when the book does not use thebe."""
    drop_thebe = not _thebe_enabled(app)
    for key in ("script_files", "css_files"):
        assets = context.get(key)
        if assets is None:
            continue
        seen, kept = set(), []
        for asset in assets:
            if (drop_thebe and _is_thebe(asset)) or _asset_key(asset) in seen:
                continue
            seen.add(_asset_key(asset))
            kept.append(asset)
        context[key] = kept


def _add_static_dir(app: Any) -> None:
    app.config.html_static_path.append(str(STATIC_DIR))


def _alt_from_caption(app: Any, doctree: nodes.document, docname: str) -> None:
    """A figure's image with no alt text (or its file path as alt text) gets the caption."""
    for figure in doctree.findall(nodes.figure):
        caption = next(iter(figure.findall(nodes.caption)), None)
        if caption is None:
            continue
        text = " ".join(caption.astext().split())
        for image in figure.findall(nodes.image):
            if not image.get("alt") or image.get("alt") == image.get("uri"):
                image["alt"] = text


def setup(app: Any) -> dict[str, Any]:
    os.environ.setdefault(STATIC_BUILD_ENV, "1")  # inherited by every kernel the build starts
    app.connect("builder-inited", _add_static_dir)
    app.add_css_file(STYLESHEET)
    app.connect("html-page-context", _add_chart_libraries)
    app.connect("html-page-context", offer_executed_notebook, priority=502)
    app.connect("html-page-context", _clean_assets, priority=900)  # after every asset is added
    app.connect("doctree-resolved", _alt_from_caption)
    setup_theorem_index(app)
    setup_ledger(app)
    setup_findings(app)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "0.2"}
