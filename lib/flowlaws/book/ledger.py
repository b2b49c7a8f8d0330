"""The claims ledger: a chapter records its verdict on a seed's claim, the ledger page pastes it.

A chapter decides a claim ``X`` in a cell and calls ``record_claim("X", verdict, number)``
right after it. That *glues* two plain-text values, ``X_verdict`` and ``X_number``, into the
notebook's outputs (myst-nb's ``glue``: a display output that the build stores for other pages
and that shows nothing), and prints one line, so a reader of the notebook sees the ledger's row
where it is decided. ``book/ledger.md`` pastes them with
``{glue:text}`02_feedforward.ipynb::X_verdict:s```, so a rerun that changes a verdict changes
the page, and a key that no chapter glues fails the build (``-W``).

- ``verdict`` is one of :data:`VERDICTS`; ``number`` is a short line computed in that run
  (``"λ = 1.81 ± 0.04, p = 0.010, power 0.50, 64 runs"``), never typed.
- the verdict comes from a decision rule declared before the data in :mod:`flowlaws.book.rules`
  (``rule=``, by default the claim's own); an undeclared rule is refused, and a rule revised
  after the data needs the verdict under its first rule (``first_verdict=``), which the number
  then states.
- :func:`glued_values` reads the glued values back from an executed notebook (the tests
  compare them with the rendered page).
- :func:`setup_ledger` (registered by :mod:`flowlaws.book.sphinxext`) writes a page that
  pastes from other pages again whenever any page is read, so an incremental build never shows
  a stale verdict.

myst-nb is a build dependency, not a reader's (Colab installs ``flowlaws[charts,data]``): when
it is missing, :func:`record_claim` displays the same output myst-nb's ``glue`` would.

Explained in: book/ledger.md
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from typing import Any

from flowlaws.book.rules import rule_for

__all__ = [
    "GLUE_PREFIX",
    "NUMBER_SUFFIX",
    "REVISED",
    "VERDICTS",
    "UNDECIDABLE",
    "VERDICT_SUFFIX",
    "glued_values",
    "p_value_text",
    "rate_text",
    "record_claim",
    "record_value",
    "revision_note",
    "setup_ledger",
    "verdict_of",
    "verdict_of_all",
    "verdict_of_any",
]

VERDICTS = ("holds", "fails", "inconclusive at this size", "undecidable by this test",
            "not testable here")
"""The ledger's verdicts. "undecidable by this test": the check's power, measured by injection
over growing ensembles, does not grow with the runs, so no size decides the claim with this test
(the row says why); "inconclusive at this size": a larger size would decide it (the row names
it) or was not reached."""
UNDECIDABLE = "undecidable by this test"
VERDICT_SUFFIX = "_verdict"
NUMBER_SUFFIX = "_number"
# myst_nb.ext.glue.GLUE_PREFIX: the mimetype prefix of a value glued with display=False
GLUE_PREFIX = "application/papermill.record/"
_CLAIM_ID = re.compile(r"[a-z][a-z0-9_]*")


def verdict_of(holds: bool, conclusive: bool = True) -> str:
    """``"holds"`` or ``"fails"`` from the chapter's check; ``"inconclusive at this size"`` when
    the check could not decide (``conclusive=False``: an uncertified count, too little power)."""
    if not bool(conclusive):  # numpy and one-element torch booleans too
        return "inconclusive at this size"
    return "holds" if bool(holds) else "fails"


def _verdict_kinds(verdicts: Iterable[str]) -> set[str]:
    """The distinct verdicts of a claim's parts, each checked to be one of :data:`VERDICTS`."""
    kinds = set(verdicts)
    unknown = kinds - set(VERDICTS)
    if unknown:
        raise ValueError(f"verdicts must be among {VERDICTS}, got {sorted(unknown)}")
    return kinds


def verdict_of_any(verdicts: Iterable[str]) -> str:
    """The verdict on a claim that some of several tests must show: ``"holds"`` when any part
    holds, ``"fails"`` when every part fails (and there is at least one), ``"undecidable by this
    test"`` when every part fails or is undecidable and some part is undecidable, else
    ``"inconclusive at this size"``."""
    kinds = _verdict_kinds(verdicts)
    if "holds" in kinds:
        return "holds"
    if kinds == {"fails"}:
        return "fails"
    return UNDECIDABLE if kinds and kinds <= {"fails", UNDECIDABLE} else \
        "inconclusive at this size"


def verdict_of_all(verdicts: Iterable[str]) -> str:
    """The verdict on a claim that is the conjunction of parts: ``"fails"`` when any part
    fails, ``"holds"`` when every part holds (and there is at least one), ``"undecidable by this
    test"`` when no part fails and some part is undecidable, else ``"inconclusive at this
    size"``."""
    kinds = _verdict_kinds(verdicts)
    if "fails" in kinds:
        return "fails"
    if kinds == {"holds"}:
        return "holds"
    return UNDECIDABLE if UNDECIDABLE in kinds else "inconclusive at this size"


def _glue(name: str, value: str) -> None:
    """myst-nb's ``glue(name, value, display=False)``, or the same output without myst-nb."""
    try:
        from myst_nb import glue
    except ImportError:
        from IPython.display import display

        data = {GLUE_PREFIX + "text/plain": repr(value)}
        metadata = {"scrapbook": {"name": name, "mime_prefix": GLUE_PREFIX}}
        display(data, raw=True, metadata=metadata)
        return
    glue(name, value, display=False)


def record_claim(claim_id: str, verdict: str, number: str, *, rule: str | None = None,
                 first_verdict: str | None = None, quiet: bool = False) -> None:
    """Glue ``<claim_id>_verdict`` and ``<claim_id>_number`` and print the ledger's row.

    ``claim_id``: lower-case letters, digits and ``_`` (``"swiglu_one_per_unit"``);
    ``verdict``: one of :data:`VERDICTS`; ``number``: one line, the deciding numbers of this
    run. ``rule``: the id of the decision rule declared in :mod:`flowlaws.book.rules` that
    decided it (default: ``claim_id``); an undeclared rule, or a rule declared for another
    claim, is refused. ``first_verdict``: the verdict under the first rule, required exactly
    when the rule was revised after the data was seen (:attr:`~flowlaws.book.rules.Rule.first`);
    the number then ends with "rule revised after the data; under the first rule: <verdict>".
    ``quiet``: glue without printing.
    """
    if not isinstance(claim_id, str) or not _CLAIM_ID.fullmatch(claim_id):
        raise ValueError(f"claim_id must be lower-case letters, digits and '_', got {claim_id!r}")
    if verdict not in VERDICTS:
        raise ValueError(f"verdict of {claim_id!r} must be one of {VERDICTS}, got {verdict!r}")
    if not isinstance(number, str) or not number.strip() or "\n" in number:
        raise ValueError(f"number of {claim_id!r} must be one non-empty line, got {number!r}")
    number += revision_note(claim_id, rule, first_verdict)
    _glue(claim_id + VERDICT_SUFFIX, verdict)
    _glue(claim_id + NUMBER_SUFFIX, number)
    if not quiet:
        print(f"ledger · {claim_id}: {verdict} ({number})")


def p_value_text(p_value: float) -> str:
    """A p-value as the ledger writes every one: ``"p = 0.012"`` (three decimals)."""
    if not 0.0 <= float(p_value) <= 1.0:
        raise ValueError(f"p_value must lie in [0, 1], got {p_value!r}")
    return f"p = {float(p_value):.3f}"


def rate_text(rate: float, n: int, noun: str = "surrogates") -> str:
    """A share of trials as the ledger writes every one: ``"0.97 of 200 surrogates"`` (a
    fraction with two decimals, then how many trials)."""
    if not 0.0 <= float(rate) <= 1.0:
        raise ValueError(f"rate must lie in [0, 1], got {rate!r}")
    return f"{float(rate):.2f} of {int(n)} {noun}"


def record_value(key: str, text: str) -> None:
    """Glue one more plain-text value the ledger pastes beside a claim (``X_seed_p``, ...).

    ``key``: lower-case letters, digits and ``_``; ``text``: one non-empty line computed in
    this run. Nothing is printed: the chapter prints the value where it computes it.
    """
    if not isinstance(key, str) or not _CLAIM_ID.fullmatch(key):
        raise ValueError(f"key must be lower-case letters, digits and '_', got {key!r}")
    if not isinstance(text, str) or not text.strip() or "\n" in text:
        raise ValueError(f"text of {key!r} must be one non-empty line, got {text!r}")
    _glue(key, text)


REVISED = "rule revised after the data; under the first rule: "


def revision_note(claim_id: str, rule: str | None = None, first_verdict: str | None = None
                  ) -> str:
    """What :func:`record_claim` appends to a claim's number: ``""`` for a rule declared before
    the data, ``" · rule revised after the data; under the first rule: <first_verdict>"`` for a
    revised one. Refuses an undeclared ``rule`` (default ``claim_id``), a rule of another claim,
    a revised rule without ``first_verdict`` and a ``first_verdict`` for a rule never revised."""
    declared = rule_for(claim_id if rule is None else rule)
    if declared.claim != claim_id:
        raise ValueError(f"rule {rule!r} is declared for the claim {declared.claim!r}, not "
                         f"{claim_id!r}")
    if declared.revised_after_data:
        if first_verdict not in VERDICTS:
            raise ValueError(
                f"the rule of {claim_id!r} was revised after the data (first rule: "
                f"{declared.first.rule}); pass first_verdict, the verdict under the first rule, "
                f"one of {VERDICTS}, got {first_verdict!r}")
        return f" · {REVISED}{first_verdict}"
    if first_verdict is not None:
        raise ValueError(f"the rule of {claim_id!r} was declared before the data and never "
                         f"revised: it has no first rule, so no first_verdict")
    return ""


def glued_values(notebook: Mapping[str, Any]) -> dict[str, str]:
    """Key → glued text of every value glued in an executed notebook (nbformat 4, as a dict).

    A glued string is stored as its ``repr`` under ``text/plain`` (with the prefix
    :data:`GLUE_PREFIX` when glued with ``display=False``); the text returned is the string.
    """
    found: dict[str, str] = {}
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            record = output.get("metadata", {}).get("scrapbook")
            if not record:
                continue
            prefix = record.get("mime_prefix", "")
            text = output.get("data", {}).get(prefix + "text/plain")
            if isinstance(text, list):
                text = "".join(text)
            if text is None:
                continue
            try:
                value = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                value = text
            found[record["name"]] = str(value)
    return found


# --- the build: a page that pastes from other pages is never left stale -----------------------


# the class of the box flowlaws.book.findings fills: a page holding it pastes from every chapter
PLACEHOLDER_CLASS = "flowlaws-findings-here"


def _pasting_docs(env: Any) -> set[str]:
    if not hasattr(env, "flowlaws_pasting_docs"):
        env.flowlaws_pasting_docs = set()
    return env.flowlaws_pasting_docs


def _note_pasting_doc(app: Any, doctree: Any) -> None:
    from docutils import nodes
    from myst_nb.ext.glue.utils import PendingGlueReference

    findings = any(PLACEHOLDER_CLASS in n["classes"] for n in doctree.findall(nodes.container))
    if findings or any(doctree.findall(PendingGlueReference)):
        _pasting_docs(app.env).add(app.env.docname)


def _purge(app: Any, env: Any, docname: str) -> None:
    _pasting_docs(env).discard(docname)


def _merge(app: Any, env: Any, docnames: set[str], other: Any) -> None:
    _pasting_docs(env).update(_pasting_docs(other))


def _outdated(app: Any, env: Any, added: set, changed: set, removed: set) -> list[str]:
    """A page pasting from other pages is read and written again whenever any page is."""
    return sorted(_pasting_docs(env) - added - changed - removed) if added | changed else []


def setup_ledger(app: Any) -> None:
    """Connect the events that re-write a pasting page (the ledger) after any page is read."""
    app.connect("doctree-read", _note_pasting_doc)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("env-get-outdated", _outdated)
