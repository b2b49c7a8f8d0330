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
- **The theorem index.** The directive ``{theorem-index}`` lists every theorem, proposition,
  corollary and definition of the book by chapter: its number, its title, a link to it.

Enabled in ``_config.yml``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import Directive

from flowlaws.book.progress import STATIC_BUILD_ENV

__all__ = [
    "CHART_LIBRARIES",
    "STYLESHEET",
    "chart_marker",
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


# --- the theorem index -----------------------------------------------------------------------


class theorem_index(nodes.General, nodes.Element):  # noqa: N801 (docutils names nodes so)
    """Where :class:`TheoremIndex` puts the list, once every chapter has been read."""


class TheoremIndex(Directive):
    """``{theorem-index}``: every numbered statement of the book, by chapter, with its title."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        return [theorem_index()]


def _titles(env: Any) -> dict[str, tuple[str, nodes.Node]]:
    if not hasattr(env, "flowlaws_statement_titles"):
        env.flowlaws_statement_titles = {}
    return env.flowlaws_statement_titles


def _index_docs(env: Any) -> set[str]:
    if not hasattr(env, "flowlaws_index_docs"):
        env.flowlaws_index_docs = set()
    return env.flowlaws_index_docs


def _collect_titles(app: Any, doctree: nodes.document) -> None:
    """Remember each sphinx-proof statement's title node, by label (the index renders it)."""
    env = app.env
    titles = _titles(env)
    for node in doctree.findall(nodes.Element):
        label = node.get("label") if "realtype" in node.attributes else None
        if label and node.children and isinstance(node[0], nodes.title):
            titles[label] = (env.docname, node[0].deepcopy())
    if any(doctree.findall(theorem_index)):
        _index_docs(env).add(env.docname)


def _purge(app: Any, env: Any, docname: str) -> None:
    titles = _titles(env)
    for label in [k for k, (doc, _) in titles.items() if doc == docname]:
        del titles[label]
    _index_docs(env).discard(docname)


def _merge(app: Any, env: Any, docnames: set[str], other: Any) -> None:
    _titles(env).update(_titles(other))
    _index_docs(env).update(_index_docs(other))


def _always_outdated(app: Any, env: Any, added: set, changed: set, removed: set) -> list[str]:
    """The index page reads every chapter: write it again whenever anything is read."""
    return sorted(_index_docs(env) - added - changed - removed) if added | changed else []


def _reading_order(env: Any, root: str) -> list[str]:
    order: list[str] = []

    def walk(doc: str) -> None:
        if doc in order:
            return
        order.append(doc)
        for child in env.toctree_includes.get(doc, []):
            walk(child)

    walk(root)
    return order


def _statement_line(app: Any, fromdoc: str, label: str, entry: dict) -> nodes.paragraph:
    env = app.env
    kind = entry["realtype"].title()
    if not entry.get("nonumber"):
        numbers = env.toc_fignumbers.get(entry["docname"], {}).get(entry["countertype"], {})
        if label in numbers:
            kind += " " + ".".join(map(str, numbers[label]))
    uri = app.builder.get_relative_uri(fromdoc, entry["docname"]) + "#" + entry["ids"][0]
    line = nodes.paragraph()
    line += nodes.reference("", kind, refuri=uri, internal=True)
    _, title = _titles(env).get(label, (None, None))
    if title is not None and title.astext().strip():
        line += nodes.Text(" ")  # the title as the statement's box shows it: "(Title)"
        line.extend(child.deepcopy() for child in title.children)
    return line


def _fill_theorem_index(app: Any, doctree: nodes.document, docname: str) -> None:
    placeholders = list(doctree.findall(theorem_index))
    if not placeholders:
        return
    env = app.env
    proofs = getattr(env, "proof_list", {})
    order = {doc: i for i, doc in enumerate(_reading_order(env, app.config.root_doc))}
    by_doc: dict[str, list[str]] = {}
    for label, entry in proofs.items():
        by_doc.setdefault(entry["docname"], []).append(label)
    chapters = nodes.bullet_list(classes=["flowlaws-theorem-index"])
    for doc in sorted(by_doc, key=lambda d: (order.get(d, len(order)), d)):
        title = env.titles[doc].astext() if doc in env.titles else doc
        item = nodes.list_item()
        head = nodes.paragraph()
        head += nodes.reference("", title, refuri=app.builder.get_relative_uri(docname, doc),
                                internal=True)
        item += head
        statements = nodes.bullet_list()
        for label in by_doc[doc]:  # in the order the chapter states them
            statements += nodes.list_item("", _statement_line(app, docname, label, proofs[label]))
        item += statements
        chapters += item
    for placeholder in placeholders:
        placeholder.replace_self(chapters.deepcopy())
    # titles may hold math ($C_\max$): the page needs MathJax like any page with equations
    env.get_domain("math").data["has_equations"][docname] = True


def setup(app: Any) -> dict[str, Any]:
    os.environ.setdefault(STATIC_BUILD_ENV, "1")  # inherited by every kernel the build starts
    app.connect("builder-inited", _add_static_dir)
    app.add_css_file(STYLESHEET)
    app.connect("html-page-context", _add_chart_libraries)
    app.connect("html-page-context", _clean_assets, priority=900)  # after every asset is added
    app.connect("doctree-resolved", _alt_from_caption)
    app.add_node(theorem_index)
    app.add_directive("theorem-index", TheoremIndex)
    app.connect("doctree-read", _collect_titles)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("env-get-outdated", _always_outdated)
    app.connect("doctree-resolved", _fill_theorem_index)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "0.2"}
