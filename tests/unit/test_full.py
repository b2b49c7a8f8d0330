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
