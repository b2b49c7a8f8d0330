"""What the book found: the box at the top of the intro and the ledger, and verdict badges.

``{flowlaws-findings}`` (a directive registered by :mod:`flowlaws.book.sphinxext`) marks where
the box goes. Once every page was read, the box is filled from myst-nb's glue cache with the
tally of verdicts per part and one line per family of claims; the families are the lines of
the block in ``book/ledger.md`` (``label: claim_id claim_id …``), and every claim row of the
ledger must be in exactly one of them (a build warning otherwise, which ``-W`` makes an error).
Every table cell or bold text that reads as a verdict becomes a badge (its text on its
colour, ``static/flowlaws.css``), and each claim row gets the anchor the box links to. Nothing
is typed: the counts are those of the verdicts the chapters glued
(:func:`flowlaws.book.ledger.record_claim`).

Explained in: book/ledger.md
"""
from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from flowlaws.book.ledger import _CLAIM_ID, PLACEHOLDER_CLASS, VERDICTS

__all__ = [
    "FINDINGS_DIRECTIVE",
    "findings_families",
    "ledger_rows",
    "resolve_verdict",
    "setup_findings",
    "tally",
    "verdict_class",
]

FINDINGS_DIRECTIVE = "flowlaws-findings"
LEDGER_DOC = "book/ledger"
_PART = re.compile(r"^#+ .*\(Part (I+)\)\s*$")
_GLUE_TEXT = re.compile(r"\{glue:text\}`([^`]+?\.ipynb)::([a-z][a-z0-9_]*)(?::[^`]*)?`")
_FAMILY = re.compile(r"^\s*([^:]+?)\s*:\s*([a-z0-9_ ]+?)\s*$")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")


def verdict_class(verdict: str) -> str:
    """The CSS class of a verdict's badge: ``flowlaws-verdict-holds``, ``…-inconclusive``."""
    if verdict not in VERDICTS:
        raise ValueError(f"verdict must be one of {VERDICTS}, got {verdict!r}")
    return "flowlaws-verdict-" + verdict.split()[0].replace("not", "untestable")


def ledger_rows(ledger_md: str) -> list[tuple[str, str, str]]:
    """``(part, claim_id, verdict cell)`` for every claim row of the ledger's Markdown.

    A claim row starts with the claim's id in backticks; ``part`` (``"I"``, ``"II"``) is the
    one named by the last heading ``… (Part I)`` above it; the verdict is the fourth cell,
    as written (a ``{glue:text}`` reference or a typed verdict).
    """
    rows, part = [], ""
    for line in ledger_md.splitlines():
        heading = _PART.match(line)
        if heading:
            part = heading.group(1)
            continue
        cells = [c.strip() for c in _CELL_SPLIT.split(line.strip())[1:-1]]
        if part and len(cells) >= 4 and re.fullmatch(r"`[a-z][a-z0-9_]*`", cells[0]):
            rows.append((part, cells[0].strip("`"), cells[3]))
    return rows


def findings_families(ledger_md: str) -> list[tuple[str, list[str]]]:
    """The families of claims listed in the ledger's ``{flowlaws-findings}`` block, in order:
    one ``label: claim_id claim_id …`` line each."""
    block = re.search(r"```\{" + FINDINGS_DIRECTIVE + r"\}[^\n]*\n(.*?)```", ledger_md, re.S)
    if block is None:
        raise ValueError(f"{LEDGER_DOC}.md has no {{{FINDINGS_DIRECTIVE}}} block of families")
    families = []
    for line in block.group(1).splitlines():
        if not line.strip() or line.lstrip().startswith(":"):
            continue
        match = _FAMILY.match(line)
        if match is None:
            raise ValueError(f"{LEDGER_DOC}.md: a family is 'label: claim_id …', got {line!r}")
        families.append((match.group(1), match.group(2).split()))
    return families


def resolve_verdict(cell: str, glued: Callable[[str, str], str | None]) -> str | None:
    """The verdict a ledger cell shows: a typed one, or the value ``glued(notebook, key)``
    returns for its ``{glue:text}`` reference (``None`` when nothing was glued)."""
    match = _GLUE_TEXT.search(cell)
    return glued(match.group(1), match.group(2)) if match else cell.strip()


def tally(verdicts: Iterable[str | None]) -> dict[str, int]:
    """Verdict → how many, in the order of :data:`VERDICTS` (``"not recorded"`` for ``None``)."""
    found = [v if v in VERDICTS else "not recorded" for v in verdicts]
    return {v: found.count(v) for v in (*VERDICTS, "not recorded") if found.count(v)}


def _glue_reader(output_folder: Path) -> Callable[[str, str], str | None]:
    """``glued(notebook, key)``: the text a notebook under ``book/`` glued, from myst-nb's
    glue cache (``<output_folder>/book/<chapter>.glue.json``)."""
    import json

    def glued(notebook: str, key: str) -> str | None:
        path = output_folder / "book" / notebook.replace(".ipynb", ".glue.json")
        if not path.is_file():
            return None
        output = json.loads(path.read_text()).get(key)
        text = (output or {}).get("data", {}).get("text/plain")
        if text is None:
            return None
        try:
            return str(ast.literal_eval(text))
        except (ValueError, SyntaxError):
            return text

    return glued


def _badge(verdict: str, count: int | None = None) -> Any:
    from docutils import nodes

    text = verdict if count is None else f"{count} {verdict}"
    return nodes.inline(text, text, classes=["flowlaws-verdict", verdict_class(verdict)]
                        if verdict in VERDICTS else ["flowlaws-verdict"])


def _findings_nodes(ledger_md: str, glued: Callable[[str, str], str | None],
                    ledger_uri: str) -> tuple[list[Any], list[str]]:
    """The box's nodes and the problems found (a claim in no family, a family's unknown id)."""
    from docutils import nodes

    rows = ledger_rows(ledger_md)
    verdicts = {claim: resolve_verdict(cell, glued) for _, claim, cell in rows}
    families = findings_families(ledger_md)
    listed = [c for _, ids in families for c in ids]
    problems = [f"claim {c!r} is in no family of the findings" for c in verdicts
                if c not in listed]
    problems += [f"the findings name {c!r}, which is no row of the ledger" for c in listed
                 if c not in verdicts]
    box = nodes.admonition(classes=["flowlaws-findings"])
    box += nodes.title("What the book found", "What the book found")
    names = {"I": "Part I, conservation laws", "II": "Part II, percolation dynamics"}
    for part in dict.fromkeys(p for p, _, _ in rows):
        counts = tally(verdicts[c] for p, c, _ in rows if p == part)
        line = nodes.paragraph()
        line += nodes.strong(names.get(part, f"Part {part}"), names.get(part, f"Part {part}"))
        line += nodes.Text(f" ({sum(counts.values())} claims): ")
        for verdict, count in counts.items():
            line += [_badge(verdict, count), nodes.Text(" ")]
        box += line
    items = nodes.bullet_list()
    for label, ids in families:
        item = nodes.paragraph()
        item += nodes.strong(label, label)
        item += nodes.Text(": ")
        for claim in ids:
            link = nodes.reference("", "", refuri=f"{ledger_uri}#claim-{claim.replace('_', '-')}")
            link += _badge(verdicts.get(claim) or "not recorded")
            if claim != ids[0]:
                item += nodes.Text("; ")
            item += [link, nodes.Text(" "), nodes.literal(claim, claim)]
        items += nodes.list_item("", item)
    box += items
    return [box], problems


def _mark_rows_and_badges(doctree: Any) -> None:
    """Every table cell or bold text that reads as a verdict becomes a badge (text and colour);
    a row that starts with a claim id gets the anchor ``claim-<id>`` the findings link to."""
    from docutils import nodes

    for entry in list(doctree.findall(nodes.entry)):
        text = entry.astext().strip()
        if text in VERDICTS and len(entry.children) == 1 and isinstance(entry[0], nodes.paragraph):
            paragraph = entry[0]
            badge = _badge(text)
            badge.children = []
            badge += paragraph.children
            paragraph.children = []
            paragraph += badge
    for strong in list(doctree.findall(nodes.strong)):  # a chapter summary's pasted verdict
        text = strong.astext().strip()
        if text in VERDICTS:
            badge = _badge(text)
            badge.children = []
            badge += strong.children
            strong.replace_self(badge)
    for row in doctree.findall(nodes.row):
        first = row.children[0] if row.children else None
        claim = first.astext().strip() if first is not None else ""
        if isinstance(first, nodes.entry) and _CLAIM_ID.fullmatch(claim) and "_" in claim:
            if any(isinstance(n, nodes.literal) for n in first.findall(nodes.literal)):
                row["ids"].append("claim-" + claim.replace("_", "-"))


def setup_findings(app: Any) -> None:
    """Register ``{flowlaws-findings}`` (the box) and the pass that fills it and draws badges.

    The families are the block's lines in ``book/ledger.md``; a block elsewhere (the intro)
    has no body and shows the same box. The box is filled after every page was read, from
    myst-nb's glue cache, so it counts exactly the verdicts the ledger pastes; a claim in no
    family or a family naming no claim is a build warning (``-W`` fails the build).
    """
    from docutils import nodes
    from docutils.parsers.rst import Directive
    from sphinx.transforms.post_transforms import SphinxPostTransform
    from sphinx.util import logging

    logger = logging.getLogger(__name__)

    class FindingsDirective(Directive):
        has_content = True

        def run(self) -> list[Any]:
            return [nodes.container(classes=[PLACEHOLDER_CLASS])]

    class FillFindings(SphinxPostTransform):
        default_priority = 7  # after myst-nb pastes glued text (5)

        def apply(self, **kwargs: Any) -> None:
            for here in list(self.document.findall(nodes.container)):
                if PLACEHOLDER_CLASS not in here["classes"]:
                    continue
                source = Path(self.env.srcdir) / f"{LEDGER_DOC}.md"
                folder = Path(self.env.mystnb_config.output_folder)
                uri = ("" if self.env.docname == LEDGER_DOC else
                       self.app.builder.get_relative_uri(self.env.docname, LEDGER_DOC))
                box, problems = _findings_nodes(source.read_text(), _glue_reader(folder), uri)
                for problem in problems:
                    logger.warning(f"{LEDGER_DOC}.md: {problem}", location=here)
                here.replace_self(box)
            _mark_rows_and_badges(self.document)

    app.add_directive(FINDINGS_DIRECTIVE, FindingsDirective)
    app.add_post_transform(FillFindings)
