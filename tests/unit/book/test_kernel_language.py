"""Tests of flowlaws.book.lab.kernel_language: opening a notebook in Lab does not mark it
unsaved (Lab rewrites language_info when the kernel connects, and marks the notebook dirty
unless the value is already there)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jupyter_client.manager import start_new_kernel

from flowlaws.book.lab import kernel_language

ROOT = Path(__file__).resolve().parents[3]
NOTEBOOKS = sorted(p for p in (ROOT / "book").rglob("*.ipynb")
                   if not {"stored", ".ipynb_checkpoints"} & set(p.relative_to(ROOT).parts))


@pytest.fixture(scope="module")
def reported() -> dict:
    """The language_info a started python3 kernel sends Lab in its kernel_info_reply."""
    manager, client = start_new_kernel(kernel_name="python3", startup_timeout=60)
    try:
        client.kernel_info()
        reply = client.get_shell_msg(timeout=30)
        return reply["content"]["language_info"]
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_an_opened_notebook_holds_what_its_kernel_reports_and_saves_as_stored(path, reported):
    stored = json.loads(path.read_text())
    opened = kernel_language.for_lab(stored)
    assert opened["metadata"]["language_info"] == reported
    assert kernel_language.from_lab(opened) == stored
    assert stored["metadata"]["language_info"] == kernel_language.STORED  # not changed


def test_another_kernel_or_other_language_info_is_left_alone(reported):
    other = {"metadata": {"kernelspec": {"name": "julia-1.10"},
                          "language_info": {"name": "python"}}, "cells": []}
    assert kernel_language.for_lab(other) is other
    assert kernel_language.from_lab(other | {"metadata": other["metadata"] | {
        "language_info": reported}})["metadata"]["language_info"] == reported
    ran = {"metadata": {"kernelspec": {"name": "python3"},
                        "language_info": reported | {"version": "3.0.0"}}, "cells": []}
    assert kernel_language.for_lab(ran) is ran and kernel_language.from_lab(ran) is ran
