"""Tests of flowlaws.book.tables, against answers known in advance."""

from __future__ import annotations

import pytest

from flowlaws.book.tables import show_table, table_text


def test_plain_text_aligns_columns():
    rows = [{"a": 1, "b": 0.123456}, {"a": 100, "b": 2.0}]
    lines = table_text(rows, ["a", "b"], style="plain").splitlines()
    assert lines[0].split() == ["a", "b"]
    assert lines[2].split() == ["1", "0.123"]
    assert len({len(line) for line in lines}) == 1


def test_table_text_formats_columns_in_order_and_escapes_bars() -> None:
    rows = [{"gate": "softmax", "k": None, "cos": 1.234e-17, "ok": True},
            {"gate": "a|b", "k": 2, "cos": 0.5, "ok": False}]
    text = table_text(rows, {"gate": "gate", "k": "top-k", "cos": "cosine", "ok": "holds"},
                      {"cos": ".1e"})
    lines = text.splitlines()
    assert lines[0] == "| gate | top-k | cosine | holds |"
    assert lines[1] == "|---|---|---|---|"
    assert lines[2] == "| softmax | — | 1.2e-17 | True |"
    assert lines[3] == r"| a\|b | 2 | 5.0e-01 | False |"


def test_a_shown_table_renders_as_html_with_escaped_cells() -> None:
    table = show_table([{"gate": "<b>", "x": 0.5}], {"gate": "gate", "x": "x"})
    html = table._repr_html_()
    assert html.startswith('<table class="flowlaws-table">') and "&lt;b&gt;" in html
    assert "<th>gate</th>" in html and "<td>0.5</td>" in html
    assert table._repr_markdown_().splitlines()[2] == "| <b> | 0.5 |"
    assert str(table).split() == ["gate", "x", "----", "---", "<b>", "0.5"]


def test_table_text_names_missing_columns_and_bad_styles() -> None:
    with pytest.raises(KeyError, match="missing_key"):
        table_text([{"a": 1}], {"a": "A", "missing_key": "B"})
    with pytest.raises(ValueError, match="style"):
        table_text([{"a": 1}], ["a"], style="latex")


def test_a_value_not_measured_shows_as_a_dash_never_nan() -> None:
    import numpy as np
    import torch

    rows = [{"a": float("nan"), "b": np.float32("nan"), "c": torch.tensor(float("nan")).item(),
             "d": np.nan, "e": 0.5, "f": "nan?"}]
    table = show_table(rows, list("abcdef"), {"d": ".2f"})
    assert table.cells() == [["—", "—", "—", "—", "0.5", "nan?"]]
    assert "nan" not in table._repr_html_().replace("nan?", "")
