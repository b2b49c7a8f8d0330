"""The book's theorem index: the directive ``{theorem-index}`` (a small Sphinx extension).

It lists every theorem, proposition, corollary and definition of the book (sphinx-proof's
statements) by chapter, in reading order: its number, its title as its box shows it, a link to
it. sphinx-proof's own index lists raw labels; this one is what ``book/theorems.md`` shows.
Registered by :mod:`flowlaws.book.sphinxext`.
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from docutils.parsers.rst import Directive

__all__ = ["TheoremIndex", "setup_theorem_index"]


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


def setup_theorem_index(app: Any) -> None:
    """Register the directive and the events that collect titles and fill the index."""
    app.add_node(theorem_index)
    app.add_directive("theorem-index", TheoremIndex)
    app.connect("doctree-read", _collect_titles)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("env-get-outdated", _always_outdated)
    app.connect("doctree-resolved", _fill_theorem_index)
