"""A small Sphinx extension for the book: chart libraries loaded once, only where needed.

A page whose body contains an element marked ``data-flowlaws-chart="vega"`` (or
``"plotly"``) gets the matching vendored library added once, from ``_static/`` (see
``tools/vendor_assets.py``); pages without charts stay light. Enabled in ``_config.yml``.
"""
from __future__ import annotations

from typing import Any

__all__ = [
    "CHART_LIBRARIES",
    "chart_marker",
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


def setup(app: Any) -> dict[str, Any]:
    app.connect("html-page-context", _add_chart_libraries)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "0.1"}
