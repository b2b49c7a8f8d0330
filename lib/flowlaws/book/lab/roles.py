"""The book's MyST references in JupyterLab: readable links while open, the roles on disk.

The book's build resolves ``{cite}``, ``{numref}``, ``{ref}``, ``{prf:ref}`` and ``{doc}``
roles across the whole book, and pastes each ``{glue:text}`` value a notebook glued. JupyterLab
sees one notebook: jupyterlab-myst shows a citation as its key, a reference to a figure of a
code cell (``mystnb.figure`` metadata, as the book's figures are) or to a statement of another
chapter as its label, a ``{doc}`` as a dead link and a pasted value as its ``key:format``.
:func:`for_lab` rewrites each such role into markdown links a reader can follow, each with the
role, verbatim, as its title (one line; the whole role in both titles)::

    {cite}`kingma2015adam,loshchilov2019decoupled`  ->
    ([Kingma and Ba, 2015](../references.bib "{cite}`kingma2015adam,loshchilov2019decoupled`");
     [Loshchilov and Hutter, 2019](../references.bib "{cite}`kingma2015adam,...`"))

:func:`from_lab` is its exact inverse: a notebook saved from JupyterLab holds the roles again,
byte for byte. The texts:

- a citation: the authors' surnames ("A", "A and B", "A et al.") and the year, from the
  BibTeX files of ``_config.yml`` (read with pybtex, as the build reads them), in parentheses
  (``{cite:t}``: "A et al. (2023)"); linked to the entry's DOI, URL or arXiv page, else to the
  ``.bib`` file, which JupyterLab opens;
- a figure or a statement: its kind and the start of its caption or title (``Figure “Gradient
  flow keeps…”``: the build's numbers are not known here), linked to the notebook defining it;
  a ``{ref}`` to a heading: the heading; an explicit text (``{ref}`text <label>```,
  ``{numref}`Fig. %s <label>```) is kept;
- a document: its first ``# `` title, linked to its file;
- a pasted value (``{glue:text}`key:fmt``` or ``{glue:text}`path.ipynb::key:fmt```, the path
  as the build reads it): the value the last build pasted, formatted as myst-nb formats it, from
  the ``.glue.json`` myst-nb left beside the executed notebook in ``_build/jupyter_execute``,
  linked to that executed notebook (to the notebook that glues it where the server does not
  serve the build's folder, as under ``make lab``). Without build output (a fresh clone):
  "``key`` (pasted by the built book)", linked to the notebook that glues it.

A key or label that is not found reads as itself (a glue key as without build output). A
reference to a target that the notebook's own markdown defines (``(label)=``, ``:label:``,
``:name:``) is left to jupyterlab-myst, which resolves those within a notebook, with their
numbers. Roles in code (spans, literal fences), code cells, outputs and metadata are never
touched. The Jupyter server loads this module by its path (``jupyter_server_config.py``),
without flowlaws and torch: it imports neither (myst-nb's formatting of a pasted value is
imported on the first one). Its contents manager is :func:`contents_manager_class`.
"""

from __future__ import annotations

import contextvars
import importlib.util
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import quote

__all__ = [
    "Index",
    "Target",
    "book_index",
    "contents_manager_class",
    "for_lab",
    "from_lab",
    "pre_save_hook",
]

REFERENCES = ("ref", "numref", "prf:ref", "doc")
PARENTHETICAL = ("cite", "cite:p", "cite:ps")
TEXTUAL = ("cite:t", "cite:ts")
_ANY_ROLE = r"\{[a-z][a-z0-9:+-]*\}`[^`]*`"
_CODE = re.compile(r"(?<!`)(?P<ticks>`+)(?!`)(?:(?!\n[ \t]*\n).)*?(?<!`)(?P=ticks)(?!`)", re.S)
_TEXT = r"[^\[\]\n]*"
_URL = r"[^\s()\"<>]*"
_TITLE = r"\{[a-z][a-z0-9:+-]*\}`[^`\"\n]+`"
_UNIT = re.compile(  # what for_lab writes: links titled with one role, bracketed or not
    rf"(?P<lb>\()?\[{_TEXT}\]\({_URL} \"(?P<role>{_TITLE})\"\)"
    rf"(?P<more>(?:; \[{_TEXT}\]\({_URL} \"(?P=role)\"\))*)(?P<rb>\))?"
)
_FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})\s*(?P<info>[^\n]*)$")
_LITERAL = ("code", "code-block", "code-cell", "sourcecode", "literalinclude", "math", "raw")


def _sibling(name: str) -> ModuleType:
    """The module ``name`` of this folder, loaded by its path as the Jupyter server loads this
    one (importing it from the package would import flowlaws, and with it torch)."""
    spec = importlib.util.spec_from_file_location(
        f"flowlaws_{name}", Path(__file__).with_name(f"{name}.py")
    )
    if spec.name not in sys.modules:
        module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[spec.name]


_index = _sibling("book_index")
_language = _sibling("kernel_language")
ROOT, Index, Target, book_index = _index.ROOT, _index.Index, _index.Target, _index.book_index
_ROLE, _targets, _joined, _glued = _index._ROLE, _index._targets, _index._joined, _index._glued
_ON_DISK = contextvars.ContextVar("flowlaws_lab_roles_on_disk", default=False)


# --- the two directions ---------------------------------------------------------------------


def _outside_literal_fences(text: str) -> Iterator[tuple[bool, str]]:
    """``text`` in pieces, each flagged True where it is literal: a fenced code block (not a
    MyST directive, whose body is markdown) or a fence line, which no code span crosses."""
    directives: list[str] = []  # the fences of open directives
    literal, piece = "", []
    for line in text.splitlines(keepends=True):
        m = _FENCE.match(line.rstrip("\n"))
        if literal:
            piece.append(line)
            closes = m and m["fence"][0] == literal[0] and len(m["fence"]) >= len(literal)
            if closes and not m["info"]:
                yield True, "".join(piece)
                literal, piece = "", []
            continue
        if m:  # a fence line is never part of a code span
            yield False, "".join(piece)
            piece = []
            name = re.match(r"\{([^}]+)\}", m["info"])
            if not m["info"] and directives and m["fence"][0] == directives[-1][0]:
                directives.pop()
            elif name and name[1] not in _LITERAL:
                directives.append(m["fence"])
            else:
                literal = m["fence"]
            if not literal:
                yield True, line
                continue
        piece.append(line)
    yield bool(literal), "".join(piece)


def _rewrite(text: str, pattern: re.Pattern, replace: Callable[[re.Match], str]) -> str:
    """``text`` with ``replace`` applied to each match of ``pattern`` outside code (code spans,
    literal fences); any other role is passed over whole, as MyST reads it."""
    combined = re.compile(f"(?P<hit>{pattern.pattern})|{_ANY_ROLE}|{_CODE.pattern}", re.S)

    def one(m: re.Match) -> str:
        return replace(m) if m["hit"] is not None else m[0]

    return "".join(
        piece if literal else combined.sub(one, piece)
        for literal, piece in _outside_literal_fences(text)
    )


def _clean(text: str) -> str:
    """``text`` as link text: one line, no brackets, no backslash before the closing one."""
    return " ".join(text.replace("[", "(").replace("]", ")").split()).rstrip("\\")


def _link(text: str, url: str, role: str) -> str:
    return f'[{text or "?"}]({url or "#"} "{role}")'


def _relative(file: Path, notebook: Path | None, index: Index) -> str:
    start = notebook.parent if notebook else index.root / "book"
    return quote(Path(os.path.relpath(file, start)).as_posix())


def _home(notebook: Path | None, index: Index) -> Path:
    """The notebook's folder in the book (a copy elsewhere: its original's, by name)."""
    if notebook is None:
        return index.root / "book"
    if notebook.with_suffix("") in index.documents:
        return notebook.parent
    same = [t.file for t in index.documents.values() if t.file.name == notebook.name]
    return same[0].parent if len(same) == 1 else notebook.parent


def _in_book(relative: str, notebook: Path | None, index: Index) -> Path:
    """A path as the build reads it in a role: from the book's root when it starts with ``/``,
    else from the notebook's folder in the book."""
    if relative.startswith("/"):
        return Path(os.path.normpath(index.root / relative.lstrip("/")))
    return Path(os.path.normpath(_home(notebook, index) / relative))


def _citation(name: str, body: str, role: str, index: Index, notebook: Path | None) -> str:
    fallback = _relative(index.bibliography, notebook, index) if index.bibliography else ""
    links = []
    for key in (k.strip() for k in body.split(",")):
        year, names, url = index.citations.get(key, ("", [], ""))
        authors = f"{names[0]} et al." if len(names) > 2 else " and ".join(names)
        forms = {"cite:author": authors, "cite:year": year}
        forms |= dict.fromkeys(TEXTUAL, f"{authors} ({year})")
        text = forms.get(name, ", ".join(s for s in (authors, year) if s)) if names or year else key
        links.append(_link(_clean(text), url or fallback, role))
    joined = "; ".join(links)
    return f"({joined})" if name in PARENTHETICAL else joined


def _reference(
    name: str, body: str, role: str, index: Index, notebook: Path | None, local: set[str]
) -> str:
    explicit = re.fullmatch(r"(?P<text>.*?)\s*<(?P<label>[^<>]+)>", body, re.S)
    label = explicit["label"] if explicit else body.strip()
    if name != "doc" and label in local:
        return role  # jupyterlab-myst resolves it, with its number
    if name == "doc":
        target = index.documents.get(_in_book(label, notebook, index).with_suffix(""))
    else:
        target = index.labels.get(label)
    quoted = f"“{target.title}”" if target and target.title else ""
    if explicit:
        text = (
            explicit["text"]
            .replace("%s", quoted or label)
            .replace("{number}", quoted or label)
            .replace("{name}", target.title if target else label)
        )
    elif target is None:
        text = label
    elif name == "ref" or name == "doc":
        text = target.title or label
    else:
        text = f"{target.kind} {quoted}" if quoted else f"{target.kind} {label}"
    url = _relative(target.file, notebook, index) if target else ""
    return _link(_clean(text), url, role)


def _pasted(docname: str, key: str, fmt: str, index: Index) -> str | None:
    """The text the last build pasted for ``key`` of ``docname``, formatted as myst-nb formats
    it; None without build output, or when the build could not paste it either."""
    data = _glued(index.executed / f"{docname}.glue.json").get(key, {}).get("data", {})
    if "text/plain" not in data:
        return None
    # myst-nb's own formatting: ~0.3 s to import, once per server; it imports no sphinx
    from myst_nb.core.variables import format_plain_text

    try:
        return format_plain_text(data["text/plain"], fmt)
    except (ValueError, TypeError):
        return None


def _gluing_notebook(doc: str, notebook: Path | None, index: Index) -> Path | None:
    """The notebook that glues a key: ``doc`` as the build reads it, else the open notebook's
    original in the book; None when neither is known."""
    if doc:
        return _in_book(doc, notebook, index)
    return _home(notebook, index) / notebook.name if notebook else None


def _glue(body: str, role: str, index: Index, notebook: Path | None, served: Path | None) -> str:
    """``{glue:text}`[path::]key[:fmt]```: the value the last build pasted, linked to the
    executed notebook (when inside ``served``); without a build, the key and who pastes it,
    linked to the notebook that glues it. Key, format and path are split as myst-nb's
    ``PasteTextRole`` splits them."""
    key, fmt = body.rsplit(":", 1) if ":" in body else (body, "s")
    doc, key = key.split("::", 1) if "::" in key else ("", key)
    source = _gluing_notebook(doc, notebook, index)
    in_book = source is not None and source.is_relative_to(index.root)
    docname = source.relative_to(index.root).with_suffix("").as_posix() if in_book else ""
    value = _pasted(docname, key, fmt, index) if docname else None
    executed = index.executed / f"{docname}.ipynb"
    opens = (
        value is not None
        and executed.is_file()
        and (served is None or executed.is_relative_to(served))
    )
    linked = executed if opens else source
    text = f"{key} (pasted by the built book)" if value is None else value
    return _link(_clean(text), _relative(linked, notebook, index) if linked else "", role)


def _cell_for_lab(
    cell: dict, index: Index, notebook: Path | None, local: set[str], served: Path | None
) -> dict:
    source = _joined(cell.get("source", ""))

    def one(m: re.Match) -> str:
        name, body, role = m["name"], m["body"], m[0]
        if not body or '"' in body or "\n" in body:
            return role
        if name.startswith("cite") and name not in ("cite:label", "cite:empty"):
            return _citation(name, body, role, index, notebook)
        if name == "glue:text":
            return _glue(body, role, index, notebook, served)
        return _reference(name, body, role, index, notebook, local) if name in REFERENCES else role

    new = _rewrite(source, _ROLE, one)
    return cell if new == source else cell | {"source": _as(cell["source"], new)}


def _as(original: str | list[str], text: str) -> str | list[str]:
    return text if isinstance(original, str) else text.splitlines(keepends=True)


def for_lab(
    notebook: dict,
    path: str | Path | None = None,
    index: Index | None = None,
    served: str | Path | None = None,
) -> dict:
    """The notebook (nbformat 4, as a dict) with its MyST references as readable links.

    ``path`` is the notebook's file (relative links start from its folder); ``index`` is
    :func:`book_index` unless given; ``served`` is the folder the Jupyter server serves (its
    ``root_dir``): a build's executed notebook outside it would not open (``make lab`` serves
    ``book/``), so a pasted value then links to the notebook that glues it. Returns a new
    dict; ``notebook`` is not changed, and a cell without a role to rewrite is the same object.
    """
    index = book_index() if index is None else index
    notebook_path = Path(path).resolve() if path is not None else None
    cells = notebook.get("cells", [])
    markdown = [c for c in cells if c.get("cell_type") == "markdown"]
    local = {label for c in markdown for label, _ in _targets(_joined(c["source"]), Path())}
    folder = Path(served).resolve() if served is not None else None
    rewrite = {id(c): _cell_for_lab(c, index, notebook_path, local, folder) for c in markdown}
    return notebook | {"cells": [rewrite.get(id(c), c) for c in cells]}


def _restore(m: re.Match) -> str:
    role = m["role"]
    links = 1 + m["more"].count(f' "{role}")')
    role_match = _ROLE.fullmatch(role)
    keys = len(role_match["body"].split(",")) if role_match["name"].startswith("cite") else 1
    bracketed = role_match["name"] in PARENTHETICAL and m["lb"] and m["rb"]
    groups = -(-links // keys)
    inner = "; ".join([role] * groups)
    return inner if bracketed else f"{m['lb'] or ''}{inner}{m['rb'] or ''}"


def from_lab(notebook: dict) -> dict:
    """The notebook with every link :func:`for_lab` wrote turned back into its role.

    ``from_lab(for_lab(nb)) == nb`` for every notebook of the book (the tests check it).
    """
    cells = []
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "markdown":
            source = _joined(cell.get("source", ""))
            new = _rewrite(source, _UNIT, _restore)
            cell = cell if new == source else cell | {"source": _as(cell["source"], new)}
        cells.append(cell)
    return notebook | {"cells": cells}


def pre_save_hook(model: dict, **kwargs: Any) -> None:
    """``ContentsManager.pre_save_hook``: a notebook is saved with its roles (:func:`from_lab`)
    and its stored ``language_info`` (:mod:`flowlaws.book.lab.kernel_language`).

    Changes ``model["content"]`` in place; other files pass untouched.
    """
    if model.get("type") == "notebook" and isinstance(model.get("content"), dict):
        model["content"] = _language.from_lab(from_lab(model["content"]))


def contents_manager_class(base: type | None = None) -> type:
    """A subclass of ``base`` (jupyter_server's default, ``AsyncLargeFileManager``) whose
    ``get`` gives a notebook :func:`for_lab` and the kernel's full ``language_info`` (so that
    opening it does not mark it unsaved: :mod:`flowlaws.book.lab.kernel_language`), and which
    saves with :func:`pre_save_hook`.

    Set as ``ServerApp.contents_manager_class``; jupytext's server extension then derives its
    own manager from it, as it derives one from the default. A failure to rewrite logs a warning
    and serves the notebook as it is on disk.
    """
    import nbformat

    if base is None:
        from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

        base = AsyncLargeFileManager

    class LabRolesContentsManager(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.register_pre_save_hook(pre_save_hook)

        async def get(self, path: str, content=True, type=None, format=None, require_hash=False):
            model = await super().get(path, content, type, format, require_hash=require_hash)
            notebook = model.get("type") == "notebook" and isinstance(model.get("content"), dict)
            if notebook and not _ON_DISK.get():
                try:
                    os_path = self._get_os_path(model["path"])
                    lab = for_lab(model["content"], os_path, served=self.root_dir)
                    lab = _language.for_lab(lab)
                    model["content"] = nbformat.from_dict(lab)
                except Exception:  # a reader's notebook always opens
                    self.log.warning("MyST roles left as they are in %s", path, exc_info=True)
            return model

        async def trust_notebook(self, path: str) -> None:
            token = _ON_DISK.set(True)  # sign the notebook as saved, with its roles
            try:
                return await super().trust_notebook(path)
            finally:
                _ON_DISK.reset(token)

    return LabRolesContentsManager
