"""The one table helper of the book: rows of dicts shown as a table.

:func:`show_table` is what a chapter calls: the :class:`Table` it returns displays as an HTML
table in JupyterLab, Colab and the built book (whose Markdown renderer has no tables), and as
aligned text in a terminal or a test log. :func:`table_text` gives the same table as text,
Markdown or plain. One cell rule for both: a ``format`` spec when the column has one, floats to
three significant digits otherwise, ``None`` and NaN (a value not measured) as a dash.

Explained in: book/01_conservation/04_moe.ipynb.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["Table", "show_table", "table_text"]

Columns = Mapping[str, str] | Sequence[str]


def _headers(columns: Columns) -> dict[str, str]:
    """Row key → column header, in display order (a plain list uses the keys as headers)."""
    return dict(columns) if isinstance(columns, Mapping) else {c: c for c in columns}


def _missing(value: object) -> bool:
    """``None``, or a NaN (Python, NumPy or torch scalar): a value that was not measured."""
    if value is None:
        return True
    if isinstance(value, str | bool | int):
        return False
    try:
        return math.isnan(value)
    except TypeError:
        return False


def _cell(value: object, fmt: str | None) -> str:
    if _missing(value):
        return "—"
    if fmt is not None:
        return format(value, fmt)
    return f"{value:.3g}" if isinstance(value, float) else str(value)


@dataclass(frozen=True)
class Table:
    """Rows (dicts) under headers; ``columns`` maps a row key to its header, in order."""

    rows: Sequence[Mapping[str, object]]
    columns: dict[str, str]
    formats: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        missing = sorted({k for row in self.rows for k in self.columns if k not in row})
        if missing:
            raise KeyError(f"rows lack the columns {missing}")

    def cells(self) -> list[list[str]]:
        """The formatted cells, one list per row."""
        return [[_cell(row[k], self.formats.get(k)) for k in self.columns] for row in self.rows]

    def markdown(self) -> str:
        """The table as Markdown (``|`` in a cell escaped)."""
        head = list(self.columns.values())
        body = [[c.replace("|", r"\|") for c in row] for row in self.cells()]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in body])

    def plain(self) -> str:
        """The table as right-aligned fixed-width text."""
        head, body = list(self.columns.values()), self.cells()
        widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(head)]
        lines = ["  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True)),
                 "  ".join("-" * w for w in widths)]
        return "\n".join(lines + ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True))
                                  for r in body])

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in self.columns.values())
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                       for row in self.cells())
        return (f'<table class="flowlaws-table"><thead><tr>{head}</tr></thead>'
                f"<tbody>{body}</tbody></table>")

    def _repr_markdown_(self) -> str:
        return self.markdown()

    def __str__(self) -> str:
        return self.plain()

    def __repr__(self) -> str:
        return self.plain()


def show_table(rows: Sequence[Mapping[str, object]], columns: Columns,
               formats: Mapping[str, str] | None = None) -> Table:
    """A :class:`Table` of ``rows`` to display: the last expression of a notebook cell.

    ``columns`` maps a row key to its header (or lists the keys, which are then the headers);
    ``formats`` maps a key to a :func:`format` spec (``".1e"``). A missing key is an error.
    """
    return Table(rows, _headers(columns), dict(formats or {}))


def table_text(rows: Sequence[Mapping[str, object]], columns: Columns,
               formats: Mapping[str, str] | None = None, *, style: str = "markdown") -> str:
    """The text of :func:`show_table`'s table: ``style`` is ``"markdown"`` or ``"plain"``."""
    if style not in ("markdown", "plain"):
        raise ValueError(f"style must be 'markdown' or 'plain', got {style!r}")
    table = show_table(rows, columns, formats)
    return table.markdown() if style == "markdown" else table.plain()
