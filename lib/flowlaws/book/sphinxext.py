"""A small Sphinx extension for the book: chart libraries loaded once, only where needed, and
each chapter's executed notebook offered for download.

A page whose body contains an element marked ``data-flowlaws-chart="vega"`` (or
``"plotly"``) gets the matching vendored library added once, from ``_static/`` (see
``tools/vendor_assets.py``); pages without charts stay light. A chapter's download menu offers
the notebook as stored (without outputs) and, from ``_executed/``, the notebook as the build
executed it, outputs included (myst-nb writes it to ``_build/jupyter_execute``). Enabled in
``_config.yml``.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

__all__ = [
    "CHART_LIBRARIES",
    "EXECUTED_FOLDER",
    "chart_marker",
    "offer_executed_notebook",
    "setup",
]


CHART_LIBRARIES = {
    "vega": "vega-bundle.js",
    "plotly": "plotly.min.js",
}


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


def setup(app: Any) -> dict[str, Any]:
    app.connect("html-page-context", _add_chart_libraries)
    app.connect("html-page-context", offer_executed_notebook, priority=502)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "0.1"}
