"""The claims ledger (book/ledger.md) is complete and never stale.

- Every verdict a chapter records (``record_claim("X", ...)`` or ``glue("X_verdict", ...)``) has
  a row in the ledger that links that chapter, and every value the ledger pastes is glued by the
  notebook it names (read from the sources: no notebook runs).
- The verdict and number cells paste; nothing in them is typed, except "not testable here" with
  its reason in a row that names no chapter.
- At smoke size, every glued verdict is one of the four legal ones, and the built ledger shows
  exactly what the executed chapters glued.

A missing key also fails the book's build: myst-nb warns ``Glue reference ... not found`` and
the build runs with ``-W``.
"""

from __future__ import annotations

import ast
import re
from html.parser import HTMLParser

import nbformat
import pytest
import yaml
from _harness import ROOT, toc_files, toc_notebooks

from flowlaws.book.ledger import NUMBER_SUFFIX, VERDICT_SUFFIX, VERDICTS, glued_values
from flowlaws.book.rules import RULES

LEDGER = ROOT / "book" / "ledger.md"
LEDGER_DOC = "book/ledger"
NOT_TESTABLE = "not testable here"
PASTE = re.compile(r"\{glue:text\}`([^`]*)`")
DOC = re.compile(r"\{doc\}`[^<`]*<([^>`]+)>`")
RECORD = re.compile(r"record_claim\(\s*(f?)[\"']([^\"']+)[\"']")
GLUE = re.compile(r"\b(?:glue|record_value)\(\s*(f?)[\"']([^\"']+)[\"']")

def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def ledger_rows() -> list[dict[str, str | None]]:
    """One dict per claim row (a table line whose first cell is a claim id in backticks)."""
    rows = []
    for line in LEDGER.read_text().splitlines():
        if not re.match(r"\|\s*`[a-z0-9_]+`\s*\|", line):
            continue
        cells = _cells(line)
        assert len(cells) == 5, f"book/ledger.md: a claim row has 5 cells, this one {line!r}"
        claim, _, tested, verdict, number = cells
        doc = DOC.search(tested)
        rows.append({"id": claim.strip("`"), "chapter": f"book/{doc[1]}.ipynb" if doc else None,
                     "tested": tested, "verdict": verdict, "number": number})
    return rows


def pasted() -> list[tuple[str, str]]:
    """(notebook path from the repository root, key) of every value the ledger pastes."""
    found = []
    for ref in PASTE.findall(LEDGER.read_text()):
        path, _, key = ref.rpartition("::")
        found.append((f"book/{path}", key.removesuffix(":s")))
    return found


def glued_in_source(path: str) -> set[str]:
    """The keys a notebook glues, read from its code (``record_claim`` glues two)."""
    keys: set[str] = set()
    for cell in nbformat.read(ROOT / path, 4).cells:
        if cell.cell_type != "code":
            continue
        for is_f, name in RECORD.findall(cell.source):
            assert not is_f and "{" not in name, f"{path}: record_claim's id must be a literal"
            keys |= {name + VERDICT_SUFFIX, name + NUMBER_SUFFIX}
        for is_f, name in GLUE.findall(cell.source):
            assert not is_f and "{" not in name, (
                f"{path}: glue keys must be literal strings, so the ledger can be checked: "
                f"{name!r}")
            keys.add(name)
    return keys


def record_calls(path: str) -> list[tuple[str, str | None, bool]]:
    """``(claim id, rule id or None, passes first_verdict)`` of every ``record_claim`` call of a
    notebook, read from its code with ``ast`` (IPython magics left out)."""
    calls = []
    for cell in nbformat.read(ROOT / path, 4).cells:
        if cell.cell_type != "code" or "record_claim(" not in cell.source:
            continue
        code = "\n".join(line for line in cell.source.splitlines()
                         if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(code)):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "record_claim"):
                continue
            assert node.args and isinstance(node.args[0], ast.Constant), (
                f"{path}: record_claim's claim id must be a literal")
            kw = {k.arg: k.value for k in node.keywords}
            rule = kw.get("rule")
            assert rule is None or isinstance(rule, ast.Constant), (
                f"{path}: record_claim's rule must be a literal, so it can be checked")
            calls.append((node.args[0].value, rule.value if rule is not None else None,
                          "first_verdict" in kw))
    return calls


def test_every_verdict_comes_from_a_declared_rule_and_states_a_revision():
    """A chapter's verdict is decided by a rule declared in flowlaws.book.rules before the data;
    a rule revised after the data also records the verdict under its first rule."""
    for path in toc_notebooks():
        for claim, rule, first in record_calls(path):
            declared = RULES.get(rule or claim)
            assert declared is not None, (
                f"{path}: the verdict on {claim!r} comes from rule {rule or claim!r}, which "
                "flowlaws.book.rules does not declare")
            assert declared.claim == claim, f"{path}: rule {rule!r} decides {declared.claim!r}"
            assert first == declared.revised_after_data, (
                f"{path}: {claim!r}: pass first_verdict exactly when its rule was revised after "
                "the data")


def test_the_ledger_comes_after_both_parts_and_before_the_back_matter():
    pages = toc_files(yaml.safe_load((ROOT / "_toc.yml").read_text()))
    assert LEDGER_DOC in pages
    chapters = [i for i, p in enumerate(pages) if p.startswith("book/0")]
    assert pages.index(LEDGER_DOC) > max(chapters)
    assert pages.index(LEDGER_DOC) < pages.index("book/theorems")


def test_every_row_pastes_its_verdict_and_number_and_types_neither():
    rows = ledger_rows()
    assert len({r["id"] for r in rows}) == len(rows), "a claim id appears in two rows"
    for r in rows:
        if r["chapter"] is None:  # a claim no chapter can test: the reason in words
            assert r["tested"] == "—" and r["verdict"] == NOT_TESTABLE, r
            assert not PASTE.search(r["number"]) and len(r["number"].split()) >= 5, r
            continue
        assert (ROOT / r["chapter"]).exists(), f"{r['id']}: no notebook {r['chapter']}"
        ref = r["chapter"].removeprefix("book/")
        for column, suffix in (("verdict", VERDICT_SUFFIX), ("number", NUMBER_SUFFIX)):
            expected = f"{{glue:text}}`{ref}::{r['id']}{suffix}:s`"
            assert r[column] == expected, (
                f"{r['id']}: the {column} cell must be only {expected} (nothing typed), "
                f"found {r[column]!r}")


def test_every_paste_names_a_notebook_a_key_and_the_text_format():
    text = LEDGER.read_text()
    for ref in PASTE.findall(text):
        # without ':s' myst-nb reads 'path:' as the key and the key as a format
        assert "::" in ref and ref.endswith(":s"), f"book/ledger.md: write path::key:s, not {ref!r}"
    assert "{glue}" not in text and "{glue:}" not in text, "paste text with {glue:text}"


def test_every_pasted_key_is_glued_by_the_notebook_it_names():
    notebooks = set(toc_notebooks())
    missing = []
    for path, key in pasted():
        assert path in notebooks, f"book/ledger.md pastes from {path}, which _toc.yml lacks"
        if key not in glued_in_source(path):
            missing.append(f"{path}::{key}")
    assert not missing, f"the ledger pastes keys their notebooks do not glue: {missing}"


def test_every_recorded_verdict_has_a_row_linking_its_chapter():
    rows = {(r["chapter"], r["id"]) for r in ledger_rows()}
    missing = [f"{path}: {key}" for path in toc_notebooks() for key in sorted(glued_in_source(path))
               if key.endswith(VERDICT_SUFFIX)
               and (path, key.removesuffix(VERDICT_SUFFIX)) not in rows]
    assert not missing, f"verdicts recorded by chapters but missing from book/ledger.md: {missing}"


def _smoke_glue(smoke_runs) -> dict[str, dict[str, str]]:
    failed = [p for p, r in smoke_runs.items() if isinstance(r, BaseException)]
    if failed:
        pytest.fail(f"these notebooks failed at smoke size: {failed}")
    return {p: glued_values(nbformat.read(r, 4)) for p, r in smoke_runs.items()}


@pytest.mark.book
def test_executed_chapters_glue_legal_verdicts_and_every_pasted_key(smoke_runs):
    glue = _smoke_glue(smoke_runs)
    for path, values in glue.items():
        for key, value in values.items():
            if key.endswith(VERDICT_SUFFIX):
                assert value in VERDICTS, f"{path}: {key} = {value!r}, not one of {VERDICTS}"
            if key.endswith(NUMBER_SUFFIX):
                assert value.strip() and "\n" not in value, f"{path}: {key} = {value!r}"
    missing = [f"{p}::{k}" for p, k in pasted() if k not in glue[p]]
    assert not missing, f"pasted by the ledger, not glued at smoke size: {missing}"


class _Rows(HTMLParser):
    """The text of every table cell of a page, row by row."""

    def __init__(self):
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


@pytest.mark.book
def test_the_built_ledger_shows_what_the_chapters_glued(smoke_runs, smoke_book):
    glue = _smoke_glue(smoke_runs)
    parser = _Rows()
    parser.feed((smoke_book / f"{LEDGER_DOC}.html").read_text())
    shown = {cells[0]: cells for cells in parser.rows if len(cells) == 5}
    for r in ledger_rows():
        assert r["id"] in shown, f"the built ledger has no row {r['id']}"
        _, _, _, verdict, number = shown[r["id"]]
        if r["chapter"] is None:
            assert verdict == NOT_TESTABLE
            continue
        values = glue[r["chapter"]]
        assert verdict == values[r["id"] + VERDICT_SUFFIX], r["id"]
        assert number == " ".join(values[r["id"] + NUMBER_SUFFIX].split()), r["id"]
