"""Decision rules declared before the data: one :class:`Rule` per claim of the ledger.

A chapter decides a seed's claim with a rule (a statistic, a threshold, a margin, a window, a
size) and records the verdict with :func:`flowlaws.book.ledger.record_claim`, which looks the
rule up here and refuses a claim whose rule is not declared. The rules are plain data, kept in
the library so that a rule cannot be changed in a notebook after its run has been seen; the
commit that introduced each one is recorded (``declared``, found with ``git log -S``).

Where a rule was written or changed *after* the data it decides had been seen, the rule says
so: :attr:`Rule.first` holds the first rule, the commit of the revision, the reason, and what had
been seen. The chapter then computes the verdict under the first rule too and passes it to
``record_claim(..., first_verdict=...)``; the ledger's row shows "rule revised after the data"
with that verdict beside the current one. A rule is never revised silently: a new rule for a
claim is declared here with its own commit, and the old one becomes its ``first``.

- :data:`RULES`: claim id → :class:`Rule` (Part I in :mod:`flowlaws.book.rules.conservation`,
  Part II in :mod:`flowlaws.book.rules.percolation`);
- :func:`rule_for`: the declared rule of a rule id, or a ``KeyError`` that names it.

Explained in: book/ledger.md
"""

from __future__ import annotations

from flowlaws.book.rules.conservation import CONSERVATION_RULES
from flowlaws.book.rules.percolation import PERCOLATION_RULES
from flowlaws.book.rules.rule import FirstRule, Rule

__all__ = ["RULES", "FirstRule", "Rule", "rule_for"]


def _collect() -> dict[str, Rule]:
    rules: dict[str, Rule] = {}
    for rule in (*CONSERVATION_RULES, *PERCOLATION_RULES):
        if rule.claim in rules:
            raise ValueError(f"two rules declared for the claim {rule.claim!r}")
        rules[rule.claim] = rule
    return rules


RULES: dict[str, Rule] = _collect()


def rule_for(rule_id: str) -> Rule:
    """The declared rule ``rule_id`` (a claim id of the ledger); a ``KeyError`` that names it
    when no rule is declared, so no verdict comes from an undeclared rule."""
    try:
        return RULES[rule_id]
    except KeyError:
        raise KeyError(f"no decision rule {rule_id!r} is declared in flowlaws.book.rules: declare "
                       "it (statistic, threshold, margin, window, size, reason, commit) before "
                       "recording a verdict with it") from None
