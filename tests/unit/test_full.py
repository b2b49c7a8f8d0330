"""make full (tools/full.py): every full preset reruns at smoke size through the same code path
and its stored file validates; every stored file matches the code that would compute it now."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from flowlaws.common.stored import StaleStoredResultError, read_stored, stored_rows, to_json
from flowlaws.percolation.presets import PRESETS, preset

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("full", ROOT / "tools" / "full.py")
full = importlib.util.module_from_spec(spec)
spec.loader.exec_module(full)


@pytest.mark.parametrize("chapter", sorted(PRESETS))
def test_each_preset_reruns_at_smoke_size_and_its_file_validates(chapter, tmp_path, capsys):
    assert full.main(["--smoke", "--chapter", chapter, "--out-dir", str(tmp_path),
                      "--cache-dir", str(tmp_path / "cache")]) == 0
    record = read_stored(full.stored_path(chapter, tmp_path))
    assert record["chapter"] == chapter and record["preset"] == "smoke"
    assert record["params"] == to_json(preset(chapter).smoke)
    assert record["verdicts"] and record["wall_s"] >= 0 and record["cpu_s"] >= 0
    assert record["code"]["modules"] == list(preset(chapter).modules)
    assert set(record["host"]) >= {"python", "cpus", "cpu", "torch", "numpy"}
    assert record["host"]["torch"].startswith("2.") and record["host"]["cpu"]
    rows = stored_rows(record["verdicts"], record)
    assert len(rows) == 2 * len(record["verdicts"])
    assert rows[1]["run"] == "stored run, full preset"


def test_a_stored_file_of_other_code_is_refused_by_name(tmp_path):
    full.main(["--smoke", "--chapter", "08_real_data", "--out-dir", str(tmp_path),
               "--cache-dir", str(tmp_path / "cache")])
    path = full.stored_path("08_real_data", tmp_path)
    record = json.loads(path.read_text())
    record["code"]["computation"] = "0" * 16
    path.write_text(json.dumps(record))
    with pytest.raises(StaleStoredResultError, match="08_real_data_full.json"):
        read_stored(path)
    assert read_stored(path, check_code=False)["chapter"] == "08_real_data"
    del record["verdicts"]
    path.write_text(json.dumps(record))
    with pytest.raises(ValueError, match="verdicts"):
        read_stored(path, check_code=False)


def test_smoke_never_writes_the_stored_folder_and_unknown_chapters_are_refused():
    with pytest.raises(SystemExit):
        full.main(["--smoke"])
    with pytest.raises(SystemExit):
        full.main(["--chapter", "99_nothing"])


@pytest.mark.parametrize("path", sorted(full.STORED_DIR.glob("*_full.json")), ids=lambda p: p.name)
def test_every_stored_result_matches_its_code_version(path):
    record = read_stored(path)  # refuses a file computed by other code, naming it
    assert record["preset"] == "full" and path.name == f"{record['chapter']}_full.json"


def test_stored_table_shows_the_stored_run_beside_the_reader_or_says_why_not(tmp_path):
    from flowlaws.common.stored import stored_table

    full.main(["--smoke", "--chapter", "08_real_data", "--out-dir", str(tmp_path),
               "--cache-dir", str(tmp_path / "cache")])
    reader = read_stored(full.stored_path("08_real_data", tmp_path))["verdicts"]
    table, note = stored_table("08_real_data", reader, tmp_path)
    assert note.startswith("stored run, full preset") and len(table.rows) == 2 * len(reader)
    table, note = stored_table("08_real_data", reader, tmp_path / "none")
    assert "missing" in note and len(table.rows) == len(reader)
    path = full.stored_path("08_real_data", tmp_path)
    record = json.loads(path.read_text())
    record["code"]["computation"] = "f" * 16
    path.write_text(json.dumps(record))
    table, note = stored_table("08_real_data", reader, tmp_path)
    assert note.startswith("stored run refused") and len(table.rows) == len(reader)


@pytest.mark.parametrize("chapter", sorted(PRESETS))
def test_each_preset_stores_the_ledger_rows_of_the_claims_it_decides(chapter, tmp_path):
    from flowlaws.book.ledger import VERDICTS
    from flowlaws.book.rules import rule_for

    full.main(["--smoke", "--chapter", chapter, "--out-dir", str(tmp_path),
               "--cache-dir", str(tmp_path / "cache")])
    claims = read_stored(full.stored_path(chapter, tmp_path))["numbers"]["claims"]
    assert sorted(claims) == sorted(preset(chapter).claims)
    for claim_id, row in claims.items():
        assert row["verdict"] in VERDICTS and row["number"].strip()
        # the verdict under the first rule is kept exactly when the rule was revised
        assert (row["first_verdict"] in VERDICTS) == rule_for(claim_id).revised_after_data


def test_stored_claim_gives_the_stored_row_with_this_builds_beside_it(tmp_path):
    from flowlaws.common.stored import read_if_current, stored_claim

    full.main(["--smoke", "--chapter", "07_grokking", "--out-dir", str(tmp_path),
               "--cache-dir", str(tmp_path / "cache")])
    record, note = read_if_current("07_grokking", tmp_path)
    assert record is not None and note.startswith("stored run, full preset")
    stored = record["numbers"]["claims"]["grokking_delayed"]
    verdict, number, first = stored_claim(record, "grokking_delayed", "holds", "reader numbers",
                                          "fails")
    assert (verdict, first) == (stored["verdict"], stored["first_verdict"])
    assert number.startswith("stored run, full preset (") and stored["number"] in number
    assert number.endswith("this build, reader preset: holds (reader numbers)")
    # no stored run, or a claim the stored run does not decide: this build's row unchanged
    assert stored_claim(None, "grokking_delayed", "holds", "n", "fails") == ("holds", "n", "fails")
    assert stored_claim(record, "heart_lambda171", "fails", "n") == ("fails", "n", None)
    missing, why = read_if_current("07_grokking", tmp_path / "none")
    assert missing is None and "missing" in why
    path = full.stored_path("07_grokking", tmp_path)
    changed = json.loads(path.read_text())
    changed["code"]["computation"] = "e" * 16
    path.write_text(json.dumps(changed))
    refused, why = read_if_current("07_grokking", tmp_path)
    assert refused is None and why.startswith("stored run refused")


def test_full_presets_keep_their_runs_apart_from_the_chapters(tmp_path, monkeypatch):
    """The grokking store extends a run of one configuration in place: a full preset trained in
    the chapters' cache folder replaced II.7's 8,000-step run by a 24,000-step one, and II.7
    then failed (its step-8,000 parameters were gone). ``make full`` uses a folder of its own."""
    monkeypatch.setenv("FLOWLAWS_CACHE", str(tmp_path / "cache"))
    assert full.main(["--smoke", "--chapter", "07_grokking", "--out-dir", str(tmp_path)]) == 0
    runs = list((tmp_path / "cache").rglob("grokking-*"))
    assert runs and all(r.parent == tmp_path / "cache" / "full-presets" for r in runs)


def _chapter_notebook(chapter: str) -> dict:
    """The Part II notebook of a preset: ``05_calibration`` and ``05_dsi`` are both II.5's."""
    (path,) = (ROOT / "book" / "02_percolation").glob(f"{chapter[:2]}_*.ipynb")
    return json.loads(path.read_text())


@pytest.mark.parametrize("chapter", sorted(PRESETS))
def test_each_full_preset_is_one_parameter_away_in_its_chapter(chapter):
    """Issue 26: the chapter's parameters cell has ``full_preset = False`` and, under ``if
    full_preset:``, runs this preset into its ``stored`` folder before reading it."""
    cells = _chapter_notebook(chapter)["cells"]
    (params,) = [c for c in cells if "parameters" in c["metadata"].get("tags", [])]
    assert any(line.startswith("full_preset = False") for line in params["source"])
    call = f'if full_preset:\n    run_full_preset("{chapter}", out_dir="stored")'
    assert any(call in "".join(c["source"]) for c in cells if c["cell_type"] == "code")


def test_a_gpu_preset_refuses_to_start_without_cuda_by_name(tmp_path, monkeypatch):
    from dataclasses import replace

    import torch

    from flowlaws.percolation.full_run import run_full_preset

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    # no stored preset needs a GPU now (II.6's runs on a CPU): declare one that does
    monkeypatch.setitem(PRESETS, "06_adaptive", replace(PRESETS["06_adaptive"], device="cuda"))
    with pytest.raises(RuntimeError, match="06_adaptive"):
        run_full_preset("06_adaptive", out_dir=tmp_path, cache_dir=tmp_path)
    assert not list(tmp_path.iterdir())


def test_cpu_seconds_count_the_workers_of_a_closed_local_cluster(tmp_path):
    """A stored result run with ``--workers`` records its workers' CPU too, not only this
    process's (which waits on them): each spawned worker's start alone (importing torch and
    flowlaws) costs CPU that ``time.process_time`` cannot see."""
    import time

    from flowlaws.common.chunks import run_chunked, run_seeds
    from flowlaws.percolation.dynamics.seeded import data_ensemble_chunk
    from flowlaws.percolation.full_run import cpu_seconds

    tiny = {"data": "heart", "width": 4, "n_steps": 30, "record_every": 3}
    c0, own0 = cpu_seconds(), time.process_time()
    run_chunked(data_ensemble_chunk, run_seeds(2, 4), tiny, chunk_size=2, workers=2,
                cache_dir=tmp_path)
    workers_cpu = (cpu_seconds() - c0) - (time.process_time() - own0)
    assert workers_cpu > 0.5, workers_cpu


def test_a_run_on_a_dask_cluster_says_so_in_its_device(monkeypatch):
    from flowlaws.common.chunks import SCHEDULER_ENV
    from flowlaws.percolation.full_run import default_device

    assert default_device("08_real_data", 2).endswith(", 2 process(es))")
    monkeypatch.setenv(SCHEDULER_ENV, "tcp://10.0.0.5:8786")
    assert default_device("08_real_data") == (
        "Dask cluster at tcp://10.0.0.5:8786 (CPU seconds: this process only)")
