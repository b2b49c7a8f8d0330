"""II.5's full preset: the declared SGD search for a setting whose learning-rate slider shows a
cascade (:mod:`flowlaws.percolation.cascade.search`), its ledger row and the verdict under the
first rule.

Explained in: book/02_percolation/05_dsi.ipynb.
"""
from __future__ import annotations

import numpy as np

from flowlaws.percolation.cascade.search import SGD_SEARCH, SMOKE_SEARCH, run_search, search_text
from flowlaws.percolation.cascade.verdicts import decision_tally, grid_claim
from flowlaws.percolation.presets.base import FullPreset, claim_row, keep_fields

__all__ = ["compute", "PRESET"]


def compute(params: dict, **where) -> tuple[dict, dict]:
    """The search named by ``params["search"]`` (``"SGD_SEARCH"`` or ``"SMOKE_SEARCH"``): one
    verdict per setting, the search's text, what it found and replicated, and the ``dsi_sgd``
    ledger row (:func:`~flowlaws.percolation.cascade.verdicts.grid_claim`)."""
    search = {"SGD_SEARCH": SGD_SEARCH, "SMOKE_SEARCH": SMOKE_SEARCH}[params["search"]]
    result = run_search(search, **where)
    verdicts = {" ".join(f"{k}={v}" for k, v in r["setting"].items()): keep_fields(r)
                for r in result["rows"]}
    rows, rejected = result["rows"], np.asarray(result["rejected"], dtype=bool)
    counts = {v: sum(r["verdict"] == v for r in rows) for v in ("cascade", "no cascade",
                                                                 "inconclusive")}
    tally = decision_tally(rows)
    number = (f"declared SGD search: {len(rows)} settings × {result['search']['n_runs']} runs; "
              f"{counts['cascade']} cascade, {counts['no cascade']} no cascade, "
              f"{counts['inconclusive']} inconclusive{f' ({tally})' if tally else ''}; "
              f"{int(rejected.sum())} rejected after Holm, {len(result['found'])} found, "
              f"{len(result['replicated'])} replicated")
    numbers = {"text": search_text(result), "rejected": result["rejected"],
               "found": result["found"], "replicated": result["replicated"],
               "replications": {str(i): keep_fields(r)
                                for i, r in result["replications"].items()},
               "claims": {"dsi_sgd": claim_row(grid_claim(rows, rejected), number,
                                               _first_rule(result, rows, rejected))}}
    return verdicts, numbers


def _first_rule(result: dict, rows: list, rejected: np.ndarray) -> str:
    """The first rule over the grid, as II.5 reads it: a setting found (p ≤ α, four peaks) that
    survives Holm; "fails" when every setting's point power is at least 0.8."""
    alpha = result["search"]["alpha"]
    old_found = any(r["p_value"] <= alpha and len(r["peaks"]) >= 4 and k
                    for r, k in zip(rows, rejected, strict=True))
    old_none = all(np.isfinite(r["power"]) and r["power"] >= 0.8 for r in rows)
    return "holds" if old_found else "fails" if old_none else "inconclusive at this size"


PRESET = FullPreset(
    chapter="05_dsi",
    decides="an SGD setting whose learning-rate slider shows a cascade (the declared search)",
    compute=compute, full={"search": "SGD_SEARCH"}, smoke={"search": "SMOKE_SEARCH"},
    modules=(__name__,), expected_minutes=30.0, claims=("dsi_sgd",))
