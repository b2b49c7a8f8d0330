"""The two records of a declared decision rule: :class:`Rule` and its :class:`FirstRule`.

Explained in: book/ledger.md
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FirstRule", "Rule"]


@dataclass(frozen=True)
class FirstRule:
    """The rule a claim was first decided by, before a revision made after seeing data.

    ``rule``: the first rule in words (statistic and threshold); ``declared``: the commit that
    introduced it; ``revised``: the commit that replaced it; ``why``: the reason for the
    revision; ``seen``: what data had been seen before the revision (the run that showed it).
    """

    rule: str
    declared: str
    revised: str
    why: str
    seen: str


@dataclass(frozen=True)
class Rule:
    """The decision rule of one claim of the ledger.

    ``claim``: the ledger's claim id; ``statistic``: what is computed; ``threshold``: when it
    holds / fails; ``margin``: the tolerance or interval it is judged with; ``window``: the
    range of the data it reads; ``size``: the size it is decided at (the chapter's parameters);
    ``reason``: why this rule; ``declared``: the commit that introduced it (short hash);
    ``first``: the first rule when this one was revised after the data was seen, else ``None``.
    """

    claim: str
    statistic: str
    threshold: str
    margin: str
    window: str
    size: str
    reason: str
    declared: str
    first: FirstRule | None = None

    @property
    def revised_after_data(self) -> bool:
        """True when the rule was written or changed after the data it decides was seen."""
        return self.first is not None
