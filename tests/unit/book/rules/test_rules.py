"""flowlaws.book.rules: every claim of the ledger has one declared rule, with a real history."""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path

import pytest

from flowlaws.book.rules import RULES, Rule, rule_for

ROOT = Path(__file__).resolve().parents[4]
LEDGER = ROOT / "book" / "ledger.md"


def ledger_claims() -> dict[str, bool]:
    """Claim id → whether a chapter decides it (its row pastes a verdict)."""
    rows = re.findall(r"^\|\s*`([a-z0-9_]+)`\s*\|(.*)$", LEDGER.read_text(), re.M)
    return {claim: "{glue:text}" in rest for claim, rest in rows}


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)


def test_every_decided_claim_has_a_rule_and_every_rule_a_claim():
    claims = ledger_claims()
    decided = {c for c, pasted in claims.items() if pasted}
    assert decided, "book/ledger.md has no decided claim"
    assert sorted(decided - set(RULES)) == [], "declare a rule for these claims"
    assert sorted(set(RULES) - decided) == [], "these rules decide no claim of the ledger"


def test_every_field_of_every_rule_is_stated():
    for claim, rule in RULES.items():
        assert rule.claim == claim
        for field in dataclasses.fields(Rule):
            value = getattr(rule, field.name)
            if field.name != "first":
                assert isinstance(value, str) and value.strip(), f"{claim}: {field.name} empty"
        if rule.first:
            for field in dataclasses.fields(rule.first):
                assert getattr(rule.first, field.name).strip(), f"{claim}: first.{field.name}"
            assert rule.first.revised == rule.declared, (
                f"{claim}: the revision is the commit that declared the current rule")


def test_an_undeclared_rule_is_refused_by_name():
    with pytest.raises(KeyError, match="no_such_rule"):
        rule_for("no_such_rule")


def test_the_three_rules_of_issue_24_say_they_were_revised_after_the_data():
    for claim in ("block_percolation", "fragmentation_causes", "grokking_delayed"):
        assert RULES[claim].revised_after_data, claim


@pytest.mark.skipif(git("rev-parse", "HEAD").returncode != 0, reason="not a git checkout")
def test_every_commit_a_rule_names_exists_and_a_first_rule_precedes_its_revision():
    if git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        pytest.skip("a shallow clone lacks the history")
    for claim, rule in RULES.items():
        commits = [rule.declared] + ([rule.first.declared, rule.first.revised] if rule.first
                                     else [])
        for commit in commits:
            assert git("merge-base", "--is-ancestor", commit, "HEAD").returncode == 0, (
                f"{claim}: {commit} is not a commit of this history")
        if rule.first:
            assert git("merge-base", "--is-ancestor", rule.first.declared,
                       rule.first.revised).returncode == 0, claim


def test_the_first_cascade_rule_is_reconstructed_from_a_verdicts_attributes():
    from types import SimpleNamespace

    from flowlaws.book.rules.percolation import first_cascade_verdict

    def v(**kw):
        base = {"p_value": 0.01, "alpha": 0.05, "peaks": (1, 2, 3, 4), "lam": 1.02,
                "lam_claimed": 2.0, "power": float("nan")}
        return SimpleNamespace(**(base | kw))

    assert first_cascade_verdict(v()) == "fails"  # found, λ far from 2: the trap's λ ≈ 1
    assert first_cascade_verdict(v(), check_lam=False) == "holds"
    assert first_cascade_verdict(v(lam=1.8)) == "holds"  # within 15 %: the first rule's pass
    assert first_cascade_verdict(v(lam=1.8), rejected=False) == "inconclusive at this size"
    assert first_cascade_verdict(v(p_value=0.5, power=0.85)) == "fails"
    assert first_cascade_verdict(v(peaks=(1, 2, 3))) == "inconclusive at this size"
