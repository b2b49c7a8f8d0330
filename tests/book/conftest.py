"""Session fixtures: every TOC notebook executed once at smoke size, and a smoke build of the book.

The executed notebooks (with outputs) go to ``_build/smoke/``, mirroring the repository; the
smoke book is built from that mirror with execution off, so the browser test reads a real
Jupyter Book build without running any notebook twice.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from _harness import ROOT, execute_smoke, toc_notebooks

from flowlaws.book.progress import STATIC_BUILD_ENV

SMOKE_ROOT = ROOT / "_build" / "smoke"
# Kernels started by the tests (papermill, nbval) inherit this: the smoke runs keep their cached
# sweeps inside the build folder instead of the reader's ~/.cache/flowlaws.
os.environ.setdefault("FLOWLAWS_CACHE", str(ROOT / "_build" / "test-cache"))


@pytest.fixture(scope="session")
def smoke_runs() -> dict[str, Path | BaseException]:
    """Notebook path → executed copy, or the exception it raised (two notebooks at a time)."""
    shutil.rmtree(SMOKE_ROOT, ignore_errors=True)

    def run(path: str) -> Path | BaseException:
        try:
            return execute_smoke(path, SMOKE_ROOT / path)
        except BaseException as error:  # reported by the test of that notebook
            return error

    # Executed for the smoke book, as the book's own build executes them (flowlaws.book.sphinxext):
    # no progress bar, no live widget. Only for these kernels: test_live_widgets needs a widget.
    before = os.environ.get(STATIC_BUILD_ENV)
    os.environ[STATIC_BUILD_ENV] = "1"
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            return dict(zip(toc_notebooks(), pool.map(run, toc_notebooks()), strict=True))
    finally:
        if before is None:
            os.environ.pop(STATIC_BUILD_ENV, None)
        else:
            os.environ[STATIC_BUILD_ENV] = before


def build_book(source: Path, execute: str = "off") -> subprocess.CompletedProcess:
    """``jupyter-book build SOURCE -W -n --keep-going`` with execution set to ``execute``."""
    config = yaml.safe_load((source / "_config.yml").read_text())
    config["execute"]["execute_notebooks"] = execute
    (source / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    return subprocess.run(
        [str(jupyter_book), "build", str(source), "-W", "-n", "--keep-going"],
        capture_output=True, text=True, timeout=900,
    )


@pytest.fixture(scope="session")
def smoke_book(smoke_runs) -> Path:
    """Build the book from the smoke-executed notebooks; return its ``_build/html`` folder."""
    failed = [p for p, r in smoke_runs.items() if isinstance(r, BaseException)]
    if failed:
        pytest.fail(f"cannot build the smoke book, these notebooks failed: {failed}")
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(ROOT / name, SMOKE_ROOT / name)
    for path in (ROOT / "book").rglob("*"):
        target = SMOKE_ROOT / path.relative_to(ROOT)
        if path.is_file() and path.suffix != ".ipynb" and "_build" not in path.parts:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)
    assert (ROOT / "_vendor").is_dir(), "no _vendor/: `make test` vendors the offline assets"
    vendor = SMOKE_ROOT / "_vendor"
    if not vendor.exists():
        vendor.symlink_to(ROOT / "_vendor", target_is_directory=True)
    result = build_book(SMOKE_ROOT)
    log = result.stdout[-4000:] + "\n" + result.stderr[-4000:]
    assert result.returncode == 0, f"smoke build failed:\n{log}"
    return SMOKE_ROOT / "_build" / "html"


# Headless Debian Chromium for the browser tests (never a browser downloaded by a test tool).
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        message = "no /usr/bin/chromium: `make test` installs Debian's chromium where apt-get works"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def offline_page(browser, viewport: dict, *, console: tuple[str, ...] = ("error",)):
    """A new page whose requests beyond 127.0.0.1 are aborted, and the list of what went wrong.

    Network requests, page errors and console messages of the types in ``console`` are
    appended to ``problems`` as they happen. Returns ``(page, problems)``.
    """
    page = browser.new_context(viewport=viewport).new_page()
    problems: list[str] = []

    def route(r):
        if r.request.url.startswith("http://127.0.0.1"):
            r.continue_()
        else:
            problems.append(f"request to the network: {r.request.url}")
            r.abort()

    page.route("**/*", route)
    page.on("pageerror", lambda e: problems.append(f"JavaScript error: {e}"))
    page.on("console", lambda m: m.type in console
            and problems.append(f"console {m.type}: {m.text}"))
    return page, problems
