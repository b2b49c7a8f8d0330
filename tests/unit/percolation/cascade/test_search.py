"""flowlaws.percolation.cascade.search: the declared SGD search, its rules, at smoke size."""
from __future__ import annotations

import numpy as np

from flowlaws.percolation.cascade.search import (
    SGD_SEARCH,
    SMOKE_SEARCH,
    run_search,
    search_point,
    search_settings,
    search_text,
)


def test_the_declared_search_has_enough_points_for_power_and_the_declared_grid():
    from flowlaws.percolation.cascade.detect import min_points_for_power

    fixed = SGD_SEARCH.fixed
    assert fixed["n_steps"] // fixed["record_every"] + 1 >= min_points_for_power(2.0)
    assert len(search_settings()) == 24
    assert {s["init"] for s in search_settings()} == {"pairs", "small"}


def test_smoke_search_runs_both_rules_and_reports(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWLAWS_CACHE", str(tmp_path))
    found = run_search(SMOKE_SEARCH, cache_dir=tmp_path)
    assert len(found["rows"]) == len(found["rejected"]) == 2
    for row in found["rows"]:
        assert row["verdict"] in ("cascade", "no cascade", "inconclusive")
        assert row["n_runs"] + row["n_dropped"] == SMOKE_SEARCH.n_runs
    assert set(found["replications"]) == set(found["found"])
    text = search_text(found)
    assert "2 settings" in text and "replicated on fresh seeds" in text
    again = run_search(SMOKE_SEARCH, cache_dir=tmp_path)  # every chunk cached
    assert all(r["chunks"]["loaded"] == r["chunks"]["n_chunks"] for r in again["rows"])
    row = found["rows"][0]
    point = search_point(row | {"verdict": "inconclusive", "peaks": [1.0, 2.0]})
    assert len(point.marks) == 0  # no peak marked unless the verdict is "cascade"
    point = search_point(row | {"verdict": "cascade", "peaks": list(row["x"][10:12])})
    assert np.asarray(point.marks).shape == (2, 2)
