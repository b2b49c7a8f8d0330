"""The book as :mod:`.roles` reads it: labels, documents, citations, the last build's glue.

:func:`book_index` reads every notebook and markdown file under ``book/`` and the BibTeX files
of ``_config.yml`` (with pybtex, as the build reads them) into an :class:`Index`; :func:`_glued`
reads a ``.glue.json`` that myst-nb left in ``_build/jupyter_execute``. Both are read again only
when a file changed. Like :mod:`.roles`, which loads it by its path, this module imports
neither flowlaws nor torch (the Jupyter server runs without them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[4]  # the repository: _config.yml, book/
_ROLE = re.compile(r"\{(?P<name>[a-z][a-z0-9:+-]*)\}`(?P<body>[^`]*)`")
_TOKEN = re.compile(r"(?:\$[^$]*\$|`[^`]*`|[^\s$`])+")  # a word, its math and code whole


@dataclass(frozen=True)
class Target:
    """What a label (or document) names: its kind, its title or caption, its file."""

    kind: str  # "Figure", "Theorem", "Section", "Document", ...
    title: str
    file: Path


@dataclass
class Index:
    """The book's labels, documents and bibliography, as :func:`for_lab` reads them."""

    root: Path = ROOT
    labels: dict[str, Target] = field(default_factory=dict)
    documents: dict[Path, Target] = field(default_factory=dict)  # by path without suffix
    citations: dict[str, tuple[str, list[str], str]] = field(default_factory=dict)  # key ->
    bibliography: Path | None = None  # (year, surnames, url); the first .bib file

    @property
    def executed(self) -> Path:
        """myst-nb's folder of executed notebooks and their ``.glue.json``, as the last build
        (``jupyter-book build .``) left it; named by docname (``book/<part>/<chapter>``)."""
        return self.root / "_build" / "jupyter_execute"


def _sources(file: Path) -> list[tuple[str, str, dict]]:
    """(cell type, source, metadata) of a notebook's cells, or one markdown cell of a .md."""
    if file.suffix == ".md":
        return [("markdown", file.read_text(encoding="utf-8"), {})]
    cells = json.loads(file.read_text(encoding="utf-8")).get("cells", [])
    return [(c["cell_type"], _joined(c["source"]), c.get("metadata", {})) for c in cells]


def _joined(source: str | list[str]) -> str:
    return source if isinstance(source, str) else "".join(source)


def _short(text: str, limit: int = 80, clause: bool = True) -> str:
    """The start of ``text`` as one line of link text: whole words, math and code spans whole,
    nothing from the first bracket on; cut at the end of its first sentence (``clause``, three
    words at least) or before ``limit`` characters, with an ellipsis."""
    text = _ROLE.sub(lambda m: m["body"].rsplit("<", 1)[-1].rstrip(">"), text)
    words: list[str] = []
    for token in _TOKEN.findall(" ".join(text.split())):
        if "[" in token or "]" in token or (len(" ".join([*words, token])) > limit and words):
            return " ".join(words) + ("…" if words else "")
        words.append(token.rstrip("\\"))
        if clause and token[-1] in ".;" and len(words) >= 3:
            words[-1] = words[-1][:-1]
            break
    return " ".join(words)


def _directives(text: str) -> Iterator[tuple[str, str, str, str]]:
    """(directive, argument, label, body) of each labelled directive in MyST ``text``."""
    pattern = re.compile(
        r"^(?P<fence>:{3,}|`{3,})\{(?P<name>[^}\s]+)\}[ \t]*(?P<arg>[^\n]*)\n"
        r"(?P<options>(?::[\w-]+:[^\n]*\n)*)(?P<body>.*?)^(?P=fence)\s*$",
        re.M | re.S,
    )
    for m in pattern.finditer(text):
        label = re.search(r"^:(?:label|name):\s*(\S+)", m["options"], re.M)
        if label:
            yield m["name"], m["arg"].strip(), label[1], m["body"]


def _kind(directive: str) -> str:
    kinds = {"math": "Equation", "glue:figure": "Figure", "list-table": "Table"}
    return kinds.get(directive, directive.rsplit(":", 1)[-1].replace("-", " ").capitalize())


def _targets(text: str, file: Path) -> Iterator[tuple[str, Target]]:
    """The labels that MyST ``text`` (one markdown cell or file) defines."""
    for m in re.finditer(r"^\((?P<label>[^()\s]+)\)=[ \t]*\n+(?P<next>[^\n]*)", text, re.M):
        heading = re.match(r"#+\s+(.*)", m["next"])
        title = _short(heading[1], clause=False) if heading else ""
        yield m["label"], Target("Section", title, file)
    for directive, argument, label, body in _directives(text):
        prf = directive.startswith("prf:")  # a statement's title; a figure's caption
        title = _short(argument, clause=False) if prf else _short(body.strip().split("\n\n")[0])
        yield label, Target(_kind(directive), "" if directive == "math" else title, file)


def _bibliography(index: Index, root: Path) -> None:
    """The citations of the BibTeX files of ``root/_config.yml`` (pybtex, as the build)."""
    config = (root / "_config.yml").read_text(encoding="utf-8")
    files = re.search(r"^bibtex_bibfiles:\s*\n((?:\s+-\s*\S+\s*\n)+)", config, re.M)
    from pybtex.database import parse_file
    from pybtex.richtext import Text

    for name in re.findall(r"-\s*(\S+)", files[1]) if files else []:
        index.bibliography = index.bibliography or root / name
        for key, entry in parse_file(str(root / name)).entries.items():
            fields = {k.lower(): v for k, v in entry.fields.items()}
            names = [
                Text.from_latex(" ".join(p.prelast_names + p.last_names)).render_as("text")
                for p in entry.persons.get("author", [])
            ]
            url = _url(fields)
            index.citations[key] = (fields.get("year", ""), names, url)


def _url(fields: dict[str, str]) -> str:
    """The entry's DOI, URL or arXiv page, else ''."""
    if "doi" in fields:
        return f"https://doi.org/{quote(fields['doi'], safe='/:;.-_')}"
    if "url" in fields:
        return quote(fields["url"], safe=":/?#&=%+.,;~@!$*'-_")
    arxiv = fields.get("archiveprefix", "").lower() == "arxiv" and "eprint" in fields
    return f"https://arxiv.org/abs/{quote(fields['eprint'], safe='/.')}" if arxiv else ""


_CACHE: dict[Path, tuple[tuple, Index]] = {}
_GLUED: dict[Path, tuple[int, dict[str, Any]]] = {}  # a .glue.json -> (mtime, its data)


def book_index(root: Path = ROOT) -> Index:
    """The labels, documents and citations of the book under ``root``; read again only when
    a file of the book changed."""
    skip = {"stored", ".ipynb_checkpoints", "_build"}
    found = (p for p in (root / "book").rglob("*") if p.suffix in (".ipynb", ".md", ".bib"))
    files = sorted(p for p in found if not skip & set(p.relative_to(root).parts))
    stamp = tuple((p, p.stat().st_mtime_ns) for p in files) + (
        (root / "_config.yml").stat().st_mtime_ns,
    )
    if root in _CACHE and _CACHE[root][0] == stamp:
        return _CACHE[root][1]
    index = Index(root=root)
    for file in (f for f in files if f.suffix != ".bib"):
        cells = _sources(file)
        for cell_type, source, metadata in cells:
            figure = metadata.get("mystnb", {}).get("figure", {})
            if cell_type == "code" and figure.get("name"):
                index.labels[figure["name"]] = Target(
                    "Figure", _short(figure.get("caption", "")), file
                )
            elif cell_type == "markdown":
                index.labels.update(_targets(source, file))
        title = next(
            (m[1] for _, s, _ in cells for m in [re.search(r"^# (.+)$", s, re.M)] if m), file.stem
        )
        index.documents[file.with_suffix("")] = Target(
            "Document", _short(title, clause=False), file
        )
    _bibliography(index, root)
    _CACHE[root] = (stamp, index)
    return index


def _glued(file: Path) -> dict[str, Any]:
    """The glue data myst-nb wrote to ``file`` (a ``.glue.json``: key -> output dict), ``{}``
    when there is none; read again only when the file changed."""
    try:
        stamp = file.stat().st_mtime_ns
    except OSError:
        return {}
    if file not in _GLUED or _GLUED[file][0] != stamp:
        _GLUED[file] = (stamp, json.loads(file.read_text(encoding="utf-8")))
    return _GLUED[file][1]
