"""tools/gpu_check.py: it refuses without CUDA, and its CPU path runs end to end at tiny size."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from flowlaws.common.stored import read_stored

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "tools" / "gpu_check.py")
gpu_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_check)


@pytest.fixture
def a_gpu_preset(monkeypatch) -> str:
    """No stored preset needs a GPU now (II.6's runs on a CPU): these tests declare its smoke
    size as one that does, to run the GPU presets' path."""
    from dataclasses import replace

    from flowlaws.percolation.presets import PRESETS

    monkeypatch.setitem(PRESETS, "06_adaptive", replace(PRESETS["06_adaptive"], device="cuda"))
    return "06_adaptive"


def test_it_refuses_clearly_without_cuda(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_check.main(["--out", str(tmp_path / "x.json")]) == 2
    assert "no CUDA device" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_cpu_smoke_never_writes_the_stored_results():
    with pytest.raises(SystemExit):
        gpu_check.main(["--cpu-smoke"])
    with pytest.raises(SystemExit):
        gpu_check.main(["--cpu-smoke", "--out", str(gpu_check.STORED)])


def test_cpu_smoke_runs_every_step_and_writes_the_results(monkeypatch, tmp_path, a_gpu_preset):
    monkeypatch.setenv("FLOWLAWS_GPU_CHECK_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "gpu.json"
    assert gpu_check.main(["--cpu-smoke", "--out", str(out), "--budget", "120"]) == 0
    result = json.loads(out.read_text())
    assert result["cpu_smoke"] and result["device_type"] == "cpu"
    assert {"date", "command", "versions", "device"} <= set(result)
    assert result["versions"]["torch"] == torch.__version__
    tests, books, full, presets = result["steps"]
    assert tests["returncode"] == 0
    assert books["checked"] > 10 and books["executed"] == 0 and not books["failed"]
    assert full["config"]["n_steps"] == gpu_check.TINY["n_steps"] and full["finished"]
    assert set(full["c_max"]) == {"frequency", "weight"}
    assert len(full["steps"]) == len(full["mean_test_acc"]) == len(full["c_max"]["frequency"])
    for row in full["verdicts"]:
        assert row["verdict"] in ("cascade", "no cascade", "inconclusive")
    assert presets["finished"] and not presets["unfinished"]
    for chapter, verdicts in presets["finished"].items():
        stored = read_stored(tmp_path / f"{chapter}_full.json")
        assert stored["preset"] == "smoke" and set(stored["verdicts"]) == set(verdicts)


def test_a_gpu_preset_out_of_budget_resumes_at_the_next_call(monkeypatch, tmp_path,
                                                            a_gpu_preset):
    monkeypatch.setenv("FLOWLAWS_GPU_CHECK_CACHE", str(tmp_path / "cache"))
    first = gpu_check.gpu_presets(True, "cpu", budget=0.0, out_dir=tmp_path)
    assert first["unfinished"] and not first["finished"]
    second = gpu_check.gpu_presets(True, "cpu", budget=600.0, out_dir=tmp_path)
    assert set(second["finished"]) == set(first["unfinished"]) == {a_gpu_preset}
    assert not second["unfinished"]
