"""The findings box: every ledger claim in one family, the tally counts what the cells paste."""

from __future__ import annotations

from pathlib import Path

LEDGER_MD = Path(__file__).resolve().parents[3] / "book" / "ledger.md"


def test_every_ledger_claim_is_in_exactly_one_family_of_the_findings():
    from flowlaws.book.findings import findings_families, ledger_rows

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

    from flowlaws.book.findings import _findings_nodes, resolve_verdict, tally

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
