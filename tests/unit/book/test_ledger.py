"""flowlaws.book.ledger: a recorded claim is glued as myst-nb glues it, and read back."""

from __future__ import annotations

import sys
from unittest import mock

import pytest

from flowlaws.book import ledger
from flowlaws.book.ledger import (
    GLUE_PREFIX,
    REVISED,
    VERDICTS,
    glued_values,
    record_claim,
    verdict_of,
    verdict_of_all,
)
from flowlaws.book.rules import RULES


def _captured(monkeypatch, *, without_myst_nb: bool = False) -> list[tuple[dict, dict]]:
    """Every (data, metadata) that IPython's display receives."""
    shown: list[tuple[dict, dict]] = []

    def display(*objs, raw=False, metadata=None, **_):
        assert raw
        shown.extend((obj, metadata) for obj in objs)

    monkeypatch.setattr("IPython.display.display", display)
    monkeypatch.setattr("myst_nb.ext.glue.ipy_display", display)
    if without_myst_nb:
        monkeypatch.setitem(sys.modules, "myst_nb", None)  # import myst_nb raises ImportError
    return shown


def _as_notebook(shown: list[tuple[dict, dict]]) -> dict:
    outputs = [{"output_type": "display_data", "data": d, "metadata": m} for d, m in shown]
    return {"cells": [{"cell_type": "code", "outputs": outputs, "source": ""}]}


@pytest.mark.parametrize("without_myst_nb", [False, True])
def test_a_recorded_claim_is_glued_and_read_back(monkeypatch, capsys, without_myst_nb):
    shown = _captured(monkeypatch, without_myst_nb=without_myst_nb)
    record_claim("rope_blocks", "holds", "count = 6 in 3/3 layers")
    names = [m["scrapbook"]["name"] for _, m in shown]
    assert names == ["rope_blocks_verdict", "rope_blocks_number"]
    assert all(list(d) == [GLUE_PREFIX + "text/plain"] for d, _ in shown)  # shows nothing
    assert glued_values(_as_notebook(shown)) == {
        "rope_blocks_verdict": "holds", "rope_blocks_number": "count = 6 in 3/3 layers"}
    assert capsys.readouterr().out == "ledger · rope_blocks: holds (count = 6 in 3/3 layers)\n"


def test_without_myst_nb_the_output_is_the_one_myst_nb_makes(monkeypatch):
    with_it = _captured(monkeypatch)
    record_claim("sde_model", "fails", "λ = 1.71", quiet=True)
    without = _captured(monkeypatch, without_myst_nb=True)
    record_claim("sde_model", "fails", "λ = 1.71", quiet=True)
    assert with_it == without


@pytest.mark.parametrize(
    ("claim_id", "verdict", "number", "named"),
    [
        ("Bad-Id", "holds", "1", "claim_id"),
        ("sde_model", "holds mostly", "1", "verdict"),
        ("sde_model", "holds", "", "number"),
        ("sde_model", "holds", "two\nlines", "number"),
    ],
)
def test_bad_input_is_refused_by_name(monkeypatch, claim_id, verdict, number, named):
    shown = _captured(monkeypatch)
    with pytest.raises(ValueError, match=named):
        record_claim(claim_id, verdict, number)
    assert not shown  # nothing glued


def test_a_verdict_from_an_undeclared_rule_is_refused(monkeypatch):
    shown = _captured(monkeypatch)
    with pytest.raises(KeyError, match="no decision rule 'no_such_claim'"):
        record_claim("no_such_claim", "holds", "1")
    with pytest.raises(ValueError, match="declared for the claim 'trapping'"):
        record_claim("sde_model", "holds", "1", rule="trapping")
    assert not shown


def test_a_rule_revised_after_the_data_needs_and_shows_the_first_verdict(monkeypatch, capsys):
    shown = _captured(monkeypatch)
    assert RULES["block_percolation"].revised_after_data
    with pytest.raises(ValueError, match="first_verdict"):
        record_claim("block_percolation", "fails", "jumps shrink")
    with pytest.raises(ValueError, match="never revised"):
        record_claim("sde_model", "holds", "1", first_verdict="fails")
    assert not shown
    record_claim("block_percolation", "fails", "jumps shrink", first_verdict="holds")
    number = glued_values(_as_notebook(shown))["block_percolation_number"]
    assert number == "jumps shrink · " + REVISED + "holds"


def test_verdict_of():
    assert verdict_of(True) == "holds"
    assert verdict_of(False) == "fails"
    assert verdict_of(True, conclusive=False) == "inconclusive at this size"
    assert {verdict_of(a, b) for a in (True, False) for b in (True, False)} < set(VERDICTS)


def test_glued_values_ignores_other_outputs_and_reads_displayed_glue():
    notebook = {"cells": [
        {"cell_type": "markdown", "source": "x"},
        {"cell_type": "code", "outputs": [
            {"output_type": "stream", "name": "stdout", "text": "hello"},
            {"output_type": "display_data", "data": {"text/plain": ["'a", "b'"]},
             "metadata": {"scrapbook": {"name": "shown", "mime_prefix": ""}}},
        ]},
    ]}
    assert glued_values(notebook) == {"shown": "ab"}


def test_a_pasting_page_is_rewritten_whenever_a_page_is_read():
    env = mock.Mock(spec=[])
    env.flowlaws_pasting_docs = {"book/ledger"}
    assert ledger._outdated(None, env, set(), {"book/x"}, set()) == ["book/ledger"]
    assert ledger._outdated(None, env, set(), set(), set()) == []
    assert ledger._outdated(None, env, set(), {"book/ledger"}, set()) == []


def test_verdict_of_all_fails_on_any_failure_and_holds_only_when_every_part_holds() -> None:
    assert verdict_of_all(["holds", "holds"]) == "holds"
    assert verdict_of_all(["holds", "inconclusive at this size", "fails"]) == "fails"
    assert verdict_of_all(["holds", "inconclusive at this size"]) == "inconclusive at this size"
    assert verdict_of_all([]) == "inconclusive at this size"
    with pytest.raises(ValueError, match="verdicts must be among"):
        verdict_of_all(["holds", "true"])


def test_one_number_format_for_p_values_and_rates():
    from flowlaws.book.ledger import p_value_text, rate_text

    assert p_value_text(1.0) == "p = 1.000" and p_value_text(0.0123) == "p = 0.012"
    assert rate_text(1.0, 1000) == "1.00 of 1000 surrogates"
    assert rate_text(0.5, 64, "runs") == "0.50 of 64 runs"
    with pytest.raises(ValueError, match="p_value"):
        p_value_text(1.5)


def test_verdict_of_any():
    from flowlaws.book.ledger import verdict_of_any

    assert verdict_of_any(["fails", "holds"]) == "holds"
    assert verdict_of_any(["fails", "fails"]) == "fails"
    assert verdict_of_any(["fails", "inconclusive at this size"]) == "inconclusive at this size"
    assert verdict_of_any([]) == "inconclusive at this size"
    with pytest.raises(ValueError, match="verdicts"):
        verdict_of_any(["cascade"])


def test_undecidable_parts_make_an_undecidable_claim_unless_another_part_decides_it():
    from flowlaws.book.ledger import UNDECIDABLE

    assert UNDECIDABLE in VERDICTS
    verdict_of_any, verdict_of_all = ledger.verdict_of_any, ledger.verdict_of_all
    assert verdict_of_any(["fails", UNDECIDABLE]) == UNDECIDABLE
    assert verdict_of_any([UNDECIDABLE, "holds"]) == "holds"
    assert verdict_of_any([UNDECIDABLE, "inconclusive at this size"]) == "inconclusive at this size"
    assert verdict_of_all(["holds", UNDECIDABLE]) == UNDECIDABLE
    assert verdict_of_all([UNDECIDABLE, "fails"]) == "fails"
    assert verdict_of_all([UNDECIDABLE, "inconclusive at this size"]) == UNDECIDABLE
