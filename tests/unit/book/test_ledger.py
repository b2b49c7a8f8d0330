"""flowlaws.book.ledger: a recorded claim is glued as myst-nb glues it, and read back."""

from __future__ import annotations

import sys
from pathlib import Path
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


def test_verdict_of_any():
    from flowlaws.book.ledger import verdict_of_any

    assert verdict_of_any(["fails", "holds"]) == "holds"
    assert verdict_of_any(["fails", "fails"]) == "fails"
    assert verdict_of_any(["fails", "inconclusive at this size"]) == "inconclusive at this size"
    assert verdict_of_any([]) == "inconclusive at this size"
    with pytest.raises(ValueError, match="verdicts"):
        verdict_of_any(["cascade"])


# --- the findings box: the tally of the ledger's verdicts ------------------------------------

LEDGER_MD = Path(__file__).resolve().parents[3] / "book" / "ledger.md"


def test_every_ledger_claim_is_in_exactly_one_family_of_the_findings():
    from flowlaws.book.ledger import findings_families, ledger_rows

    text = LEDGER_MD.read_text()
    rows = [claim for _, claim, _ in ledger_rows(text)]
    listed = [c for _, ids in findings_families(text) for c in ids]
    assert len(rows) == len(set(rows)) >= 25
    assert sorted(listed) == sorted(rows), (
        f"in no family: {sorted(set(rows) - set(listed))}; "
        f"no row: {sorted(set(listed) - set(rows))}; twice: "
        f"{sorted(c for c in set(listed) if listed.count(c) > 1)}")
    assert {p for p, _, _ in ledger_rows(text)} == {"I", "II"}


def test_the_findings_count_what_the_cells_paste():
    from docutils import nodes

    from flowlaws.book.ledger import _findings_nodes, resolve_verdict, tally

    text = ("# L\n\n```{flowlaws-findings}\nLaws: a_b c_d\nCascades: e_f\n```\n\n"
            "## One (Part I)\n\n| claim | says | in | verdict | numbers |\n"
            "| --- | --- | --- | --- | --- |\n"
            "| `a_b` | x \\| y | I.1 | {glue:text}`01/x.ipynb::a_b_verdict:s` | n |\n"
            "| `c_d` | x | I.2 | not testable here | why |\n\n## Two (Part II)\n\n"
            "| `e_f` | x | II.1 | {glue:text}`02/y.ipynb::e_f_verdict:s` | n |\n")
    glued = {("01/x.ipynb", "a_b_verdict"): "fails", ("02/y.ipynb", "e_f_verdict"): "holds"}
    assert resolve_verdict("{glue:text}`01/x.ipynb::a_b_verdict:s`",
                           lambda n, k: glued.get((n, k))) == "fails"
    assert tally(["holds", "fails", "holds", None]) == {"holds": 2, "fails": 1,
                                                        "not recorded": 1}
    (box,), problems = _findings_nodes(text, lambda n, k: glued.get((n, k)), "ledger.html")
    assert problems == []
    shown = box.astext()
    assert "Part I, conservation laws (2 claims): 1 fails 1 not testable here" in shown
    assert "Part II, percolation dynamics (1 claims): 1 holds" in shown
    links = [r["refuri"] for r in box.findall(nodes.reference)]
    assert links == ["ledger.html#claim-a-b", "ledger.html#claim-c-d", "ledger.html#claim-e-f"]
    badges = [n["classes"] for n in box.findall(nodes.inline)]
    assert ["flowlaws-verdict", "flowlaws-verdict-fails"] in badges
    _, problems = _findings_nodes(text.replace("Cascades: e_f", "Cascades: e_f g_h"),
                                  lambda n, k: None, "")
    assert problems == ["the findings name 'g_h', which is no row of the ledger"]
