"""The claims ledger: a chapter records its verdict on a seed's claim, the ledger page pastes it.

A chapter decides a claim ``X`` in a cell and calls ``record_claim("X", verdict, number)``
right after it. That *glues* two plain-text values, ``X_verdict`` and ``X_number``, into the
notebook's outputs (myst-nb's ``glue``: a display output that the build stores for other pages
and that shows nothing), and prints one line, so a reader of the notebook sees the ledger's row
where it is decided. ``book/ledger.md`` pastes them with
``{glue:text}`02_feedforward.ipynb::X_verdict:s```, so a rerun that changes a verdict changes
the page, and a key that no chapter glues fails the build (``-W``).

- ``verdict`` is one of :data:`VERDICTS`; ``number`` is a short line computed in that run
  (``"λ = 1.81 ± 0.04, p = 0.010, power 0.50, 64 runs"``), never typed.
- the verdict comes from a decision rule declared before the data in :mod:`flowlaws.book.rules`
  (``rule=``, by default the claim's own); an undeclared rule is refused, and a rule revised
  after the data needs the verdict under its first rule (``first_verdict=``), which the number
  then states.
- :func:`glued_values` reads the glued values back from an executed notebook (the tests
  compare them with the rendered page).
- :func:`setup_ledger` (registered by :mod:`flowlaws.book.sphinxext`) writes a page that
  pastes from other pages again whenever any page is read, so an incremental build never shows
  a stale verdict.

myst-nb is a build dependency, not a reader's (Colab installs ``flowlaws[charts,data]``): when
it is missing, :func:`record_claim` displays the same output myst-nb's ``glue`` would.

Explained in: book/ledger.md
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from flowlaws.book.rules import rule_for

__all__ = [
    "GLUE_PREFIX",
    "NUMBER_SUFFIX",
    "REVISED",
    "VERDICTS",
    "VERDICT_SUFFIX",
    "findings_families",
    "glued_values",
    "ledger_rows",
    "record_claim",
    "record_value",
    "resolve_verdict",
    "setup_findings",
    "revision_note",
    "setup_ledger",
    "tally",
    "verdict_class",
    "verdict_of",
    "verdict_of_all",
    "verdict_of_any",
]

VERDICTS = ("holds", "fails", "inconclusive at this size", "not testable here")
VERDICT_SUFFIX = "_verdict"
NUMBER_SUFFIX = "_number"
# myst_nb.ext.glue.GLUE_PREFIX: the mimetype prefix of a value glued with display=False
GLUE_PREFIX = "application/papermill.record/"
_CLAIM_ID = re.compile(r"[a-z][a-z0-9_]*")


def verdict_of(holds: bool, conclusive: bool = True) -> str:
    """``"holds"`` or ``"fails"`` from the chapter's check; ``"inconclusive at this size"`` when
    the check could not decide (``conclusive=False``: an uncertified count, too little power)."""
    if not bool(conclusive):  # numpy and one-element torch booleans too
        return "inconclusive at this size"
    return "holds" if bool(holds) else "fails"


def verdict_of_any(verdicts: Iterable[str]) -> str:
    """The verdict on a claim that some of several tests must show: ``"holds"`` when any part
    holds, ``"fails"`` when every part fails (and there is at least one), else ``"inconclusive
    at this size"``."""
    kinds = set(verdicts)
    unknown = kinds - set(VERDICTS)
    if unknown:
        raise ValueError(f"verdicts must be among {VERDICTS}, got {sorted(unknown)}")
    if "holds" in kinds:
        return "holds"
    return "fails" if kinds == {"fails"} else "inconclusive at this size"


def verdict_of_all(verdicts: Iterable[str]) -> str:
    """The verdict on a claim that is the conjunction of parts: ``"fails"`` when any part
    fails, ``"holds"`` when every part holds (and there is at least one), else
    ``"inconclusive at this size"``."""
    kinds = set(verdicts)
    unknown = kinds - set(VERDICTS)
    if unknown:
        raise ValueError(f"verdicts must be among {VERDICTS}, got {sorted(unknown)}")
    if "fails" in kinds:
        return "fails"
    return "holds" if kinds == {"holds"} else "inconclusive at this size"


def _glue(name: str, value: str) -> None:
    """myst-nb's ``glue(name, value, display=False)``, or the same output without myst-nb."""
    try:
        from myst_nb import glue
    except ImportError:
        from IPython.display import display

        data = {GLUE_PREFIX + "text/plain": repr(value)}
        metadata = {"scrapbook": {"name": name, "mime_prefix": GLUE_PREFIX}}
        display(data, raw=True, metadata=metadata)
        return
    glue(name, value, display=False)


def record_claim(claim_id: str, verdict: str, number: str, *, rule: str | None = None,
                 first_verdict: str | None = None, quiet: bool = False) -> None:
    """Glue ``<claim_id>_verdict`` and ``<claim_id>_number`` and print the ledger's row.

    ``claim_id``: lower-case letters, digits and ``_`` (``"swiglu_one_per_unit"``);
    ``verdict``: one of :data:`VERDICTS`; ``number``: one line, the deciding numbers of this
    run. ``rule``: the id of the decision rule declared in :mod:`flowlaws.book.rules` that
    decided it (default: ``claim_id``); an undeclared rule, or a rule declared for another
    claim, is refused. ``first_verdict``: the verdict under the first rule, required exactly
    when the rule was revised after the data was seen (:attr:`~flowlaws.book.rules.Rule.first`);
    the number then ends with "rule revised after the data; under the first rule: <verdict>".
    ``quiet``: glue without printing.
    """
    if not isinstance(claim_id, str) or not _CLAIM_ID.fullmatch(claim_id):
        raise ValueError(f"claim_id must be lower-case letters, digits and '_', got {claim_id!r}")
    if verdict not in VERDICTS:
        raise ValueError(f"verdict of {claim_id!r} must be one of {VERDICTS}, got {verdict!r}")
    if not isinstance(number, str) or not number.strip() or "\n" in number:
        raise ValueError(f"number of {claim_id!r} must be one non-empty line, got {number!r}")
    number += revision_note(claim_id, rule, first_verdict)
    _glue(claim_id + VERDICT_SUFFIX, verdict)
    _glue(claim_id + NUMBER_SUFFIX, number)
    if not quiet:
        print(f"ledger · {claim_id}: {verdict} ({number})")


def record_value(key: str, text: str) -> None:
    """Glue one more plain-text value the ledger pastes beside a claim (``X_seed_p``, ...).

    ``key``: lower-case letters, digits and ``_``; ``text``: one non-empty line computed in
    this run. Nothing is printed: the chapter prints the value where it computes it.
    """
    if not isinstance(key, str) or not _CLAIM_ID.fullmatch(key):
        raise ValueError(f"key must be lower-case letters, digits and '_', got {key!r}")
    if not isinstance(text, str) or not text.strip() or "\n" in text:
        raise ValueError(f"text of {key!r} must be one non-empty line, got {text!r}")
    _glue(key, text)


REVISED = "rule revised after the data; under the first rule: "


def revision_note(claim_id: str, rule: str | None = None, first_verdict: str | None = None
                  ) -> str:
    """What :func:`record_claim` appends to a claim's number: ``""`` for a rule declared before
    the data, ``" · rule revised after the data; under the first rule: <first_verdict>"`` for a
    revised one. Refuses an undeclared ``rule`` (default ``claim_id``), a rule of another claim,
    a revised rule without ``first_verdict`` and a ``first_verdict`` for a rule never revised."""
    declared = rule_for(claim_id if rule is None else rule)
    if declared.claim != claim_id:
        raise ValueError(f"rule {rule!r} is declared for the claim {declared.claim!r}, not "
                         f"{claim_id!r}")
    if declared.revised_after_data:
        if first_verdict not in VERDICTS:
            raise ValueError(
                f"the rule of {claim_id!r} was revised after the data (first rule: "
                f"{declared.first.rule}); pass first_verdict, the verdict under the first rule, "
                f"one of {VERDICTS}, got {first_verdict!r}")
        return f" · {REVISED}{first_verdict}"
    if first_verdict is not None:
        raise ValueError(f"the rule of {claim_id!r} was declared before the data and never "
                         f"revised: it has no first rule, so no first_verdict")
    return ""


def glued_values(notebook: Mapping[str, Any]) -> dict[str, str]:
    """Key → glued text of every value glued in an executed notebook (nbformat 4, as a dict).

    A glued string is stored as its ``repr`` under ``text/plain`` (with the prefix
    :data:`GLUE_PREFIX` when glued with ``display=False``); the text returned is the string.
    """
    found: dict[str, str] = {}
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            record = output.get("metadata", {}).get("scrapbook")
            if not record:
                continue
            prefix = record.get("mime_prefix", "")
            text = output.get("data", {}).get(prefix + "text/plain")
            if isinstance(text, list):
                text = "".join(text)
            if text is None:
                continue
            try:
                value = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                value = text
            found[record["name"]] = str(value)
    return found


# --- the build: a page that pastes from other pages is never left stale -----------------------


def _pasting_docs(env: Any) -> set[str]:
    if not hasattr(env, "flowlaws_pasting_docs"):
        env.flowlaws_pasting_docs = set()
    return env.flowlaws_pasting_docs


def _note_pasting_doc(app: Any, doctree: Any) -> None:
    from docutils import nodes
    from myst_nb.ext.glue.utils import PendingGlueReference

    findings = any(PLACEHOLDER_CLASS in n["classes"] for n in doctree.findall(nodes.container))
    if findings or any(doctree.findall(PendingGlueReference)):
        _pasting_docs(app.env).add(app.env.docname)


def _purge(app: Any, env: Any, docname: str) -> None:
    _pasting_docs(env).discard(docname)


def _merge(app: Any, env: Any, docnames: set[str], other: Any) -> None:
    _pasting_docs(env).update(_pasting_docs(other))


def _outdated(app: Any, env: Any, added: set, changed: set, removed: set) -> list[str]:
    """A page pasting from other pages is read and written again whenever any page is."""
    return sorted(_pasting_docs(env) - added - changed - removed) if added | changed else []


def setup_ledger(app: Any) -> None:
    """Connect the events that re-write a pasting page (the ledger) after any page is read."""
    app.connect("doctree-read", _note_pasting_doc)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("env-get-outdated", _outdated)
    setup_findings(app)


# --- the findings: the tally of verdicts the build pastes at the top of the intro and ledger --

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


PLACEHOLDER_CLASS = "flowlaws-findings-here"


def _mark_rows_and_badges(doctree: Any) -> None:
    """Every table cell that reads as a verdict becomes a badge (text and colour); a row that
    starts with a claim id gets the anchor ``claim-<id>`` the findings link to."""
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
