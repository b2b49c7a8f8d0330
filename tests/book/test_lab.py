"""The chapters in JupyterLab as a reader runs them: MyST renders, sliders move, a reopen works.

``jupyter lab`` starts on a free local port, configured as ``make lab`` configures it (the
repository on ``JUPYTER_CONFIG_PATH``), with its own settings, workspaces and data folders and a
copy of one short chapter of each part with the smoke parameters injected as papermill injects
them. Headless Chromium (Debian's ``/usr/bin/chromium``, driven by Playwright; every request
that is not local is aborted and reported) opens each chapter, runs all cells, moves the
learning-rate slider by keyboard, saves, shuts the kernel down and reloads the page.
About 2 minutes on 2 cores.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from _harness import ROOT, checked_overrides
from conftest import offline_page

pytestmark = [pytest.mark.book, pytest.mark.browser]
# chapter → the label of its learning-rate slider (the knob named lr)
CHAPTERS = {
    "book/01_conservation/01_gradient_flow.ipynb": "step size",
    "book/02_percolation/02_trapping.ipynb": "learning rate",
}
# jupyterlab-myst cannot resolve a {numref} to a figure labelled in a code cell's metadata (the
# book's figures are), nor a citation: the server gives Lab such roles as links
# (lib/flowlaws/book/lab/roles.py), so no "Cross reference target was not found" is harmless.
KNOWN_HARMLESS: tuple[str, ...] = ()
# a citation as Lab shows it: "(Du et al., 2018)", "(Chen et al., 2023; Seed paper II, 2026)"
CITATION = r"\((?:[A-Z][\w'. -]*, \d{4}; )*[A-Z][\w'. -]*, \d{4}\)"
# a pasted value shown as its role or its bare key ("run_time:s", "lam:.2f"): the server gives
# Lab the value the last build pasted, or "run_time (pasted by the built book)"
GLUE_KEY = r"\{glue:text\}|\b[a-z][a-z0-9_]*:(?:s|\.\d+[fge%])\b"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
SETTINGS = {  # every cell in the DOM. No news setting here: `make lab`'s labconfig must keep
    # Jupyter's news pop-up away on a first start (the test checks that none shows)
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
}
# the open notebook's widget, its code cells, its kernel (Lab exposes itself with
# --LabApp.expose_app_in_browser)
PANEL = "window.jupyterapp.shell.currentWidget"
KERNEL_IDLE = ("() => { const w = window.jupyterapp && " + PANEL + ";"
               " const k = w && w.sessionContext && w.sessionContext.session"
               " && w.sessionContext.session.kernel;"
               " return !!k && k.connectionStatus === 'connected' && k.status === 'idle'; }")
ALL_RAN = (f"() => [...{PANEL}.content.widgets].filter(c => c.model.type === 'code')"
           ".every(c => c.model.executionCount !== null)"
           f" && {PANEL}.sessionContext.session.kernel.status === 'idle'")
ERRORS = (f"() => [...{PANEL}.content.widgets].filter(c => c.model.type === 'code')"
          ".flatMap(c => c.model.outputs.toJSON()).filter(o => o.output_type === 'error')"
          ".map(o => o.ename + ': ' + o.evalue)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _smoke_copy(path: str, folder: Path) -> None:
    """The chapter with its smoke parameters in a cell after ``parameters`` (as papermill)."""
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    notebook = parameterize_notebook(load_notebook_node(str(ROOT / path)), checked_overrides(path),
                                     kernel_name="python3", language="python")
    nbformat.write(notebook, folder / Path(path).name)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A started ``jupyter lab`` on the smoke copies: (address, token, notebook folder)."""
    home = tmp_path_factory.mktemp("lab")
    notebooks = home / "notebooks"
    notebooks.mkdir()
    for path in CHAPTERS:
        _smoke_copy(path, notebooks)
    for name, values in SETTINGS.items():
        settings = home / "settings" / f"{name}.jupyterlab-settings"
        settings.parent.mkdir(parents=True, exist_ok=True)
        settings.write_text(json.dumps(values))
    port, token = _free_port(), secrets.token_hex(16)
    env = os.environ | {
        "JUPYTER_CONFIG_PATH": str(ROOT),  # as `make lab`: reads jupyter_server_config.py
        "JUPYTER_CONFIG_DIR": str(home / "config"), "JUPYTER_DATA_DIR": str(home / "data"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "lib"), os.environ.get("PYTHONPATH", "")]),
        "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",  # no network
        "no_proxy": "127.0.0.1,localhost",
    }
    command = [
        str(Path(sys.executable).with_name("jupyter")), "lab", "--no-browser", "--ip=127.0.0.1",
        f"--port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={notebooks}", f"--LabApp.user_settings_dir={home / 'settings'}",
        f"--LabApp.workspaces_dir={home / 'workspaces'}", "--LabApp.expose_app_in_browser=True",
        "--LabApp.news_url=", "--LabApp.extension_manager=readonly",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ] + (["--allow-root"] if os.getuid() == 0 else [])
    log = (home / "lab.log").open("w")
    server = subprocess.Popen(command, cwd=home, env=env, stdout=log, stderr=subprocess.STDOUT)
    address = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            _api(address, token, "status")
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail(f"jupyter lab did not start:\n{(home / 'lab.log').read_text()[-3000:]}")
            time.sleep(0.3)
    yield address, token, notebooks
    server.terminate()  # the server shuts its kernels down
    try:
        server.wait(30)
    except subprocess.TimeoutExpired:
        server.kill()
    log.close()


def _api(address: str, token: str, path: str, method: str = "GET"):
    request = urllib.request.Request(f"{address}/api/{path}", method=method,
                                     headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read()
    return json.loads(body) if body else None


def _open(browser, url: str):
    """A page on ``url`` that records console errors, page errors and non-local requests."""
    page, problems = offline_page(browser, {"width": 1400, "height": 1000}, console=("error",))
    page.goto(url)
    return page, problems


def _real(problems: list[str]) -> list[str]:
    return [p for p in problems if not any(k in p for k in KNOWN_HARMLESS)]


def _wait_for_notebook(page) -> None:
    page.wait_for_selector(".jp-Notebook .jp-MarkdownCell", timeout=60_000)


@pytest.mark.parametrize("path", CHAPTERS)
def test_a_chapter_runs_in_lab_moves_its_slider_and_reopens_with_its_figure(browser, lab, path):
    address, token, notebooks = lab
    name, label = Path(path).name, CHAPTERS[path]
    # a workspace of its own: only this notebook open (every page's selectors see one notebook)
    workspace = Path(path).stem
    page, problems = _open(browser, f"{address}/lab/workspaces/{workspace}/tree/{name}"
                                    f"?reset&token={token}")
    _wait_for_notebook(page)
    page.wait_for_function(KERNEL_IDLE, timeout=60_000)
    # opening is not a change: Lab writes the kernel's language_info when it connects, which
    # marks a notebook unsaved unless the server gave it that value (lab/kernel_language.py)
    page.evaluate(f"async () => {{ await {PANEL}.sessionContext.session.kernel.info; }}")
    page.wait_for_timeout(1500)
    assert not page.evaluate(f"() => {PANEL}.context.model.dirty"), "opening marked it unsaved"

    # a first start: no pop-up asking about Jupyter news over the chapter
    toasts = page.locator(".jp-toast-message, .Toastify__toast")
    assert not [t for t in toasts.all_inner_texts() if "news" in t.lower()], "the news pop-up"

    # MyST: the theorem boxes are drawn by jupyterlab-myst, no directive source shows
    text = page.inner_text(".jp-Notebook")
    assert ":::{prf:" not in text and "{prf:" not in text, "MyST directive source is visible"
    assert page.locator(".jp-MarkdownCell .myst-proof").count() >= 1, "no theorem box drawn"
    # citations and references read as text: authors and year, a caption, never a key or label
    prose = "\n".join(page.locator(".jp-MarkdownCell").all_inner_texts())
    assert re.search(CITATION, prose), "no citation reads as authors and year"
    assert not re.findall(r"\b(?:fig|thm|prop|def|sec)-[a-z0-9-]+", prose), "a label is shown"
    assert not re.findall(r"\b[a-z]+(?:19|20)\d\d[a-z]+\b", prose), "a citation key is shown"
    assert not re.findall(GLUE_KEY, prose), "a pasted value is shown as its glue key"

    started = time.monotonic()
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(ALL_RAN, timeout=150_000, polling=500)
    ran_s = time.monotonic() - started
    assert not page.evaluate(ERRORS), f"{name}: a cell failed"

    # the learning-rate slider, one arrow key: the picture and the caption change
    index = page.evaluate(f"() => [...{PANEL}.content.widgets].findIndex("
                          "c => c.model.sharedModel.getSource().includes('interactive_figure('))")
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    slider = cell.locator(".widget-slider", has_text=label)
    assert slider.count() == 1, f"no slider labelled {label!r} in the figure's cell"
    image = cell.locator(".widget-image")
    caption = cell.locator(".widget-vbox > .widget-html").last
    before = image.get_attribute("src"), caption.inner_text()
    handle = slider.locator(".noUi-handle")
    at_end = handle.get_attribute("aria-valuenow") == handle.get_attribute("aria-valuemax")
    handle.focus()
    seen = len(problems)
    page.keyboard.press("ArrowLeft" if at_end else "ArrowRight")
    caption_js = (f"old => {{ const c = document.querySelectorAll('.jp-Notebook .jp-Cell')[{index}]"
                  ".querySelectorAll('.widget-vbox > .widget-html');"
                  " return c[c.length - 1].innerText !== old; }")
    page.wait_for_function(caption_js, arg=before[1], timeout=60_000)
    page.wait_for_function(f"old => document.querySelectorAll('.jp-Notebook .jp-Cell')[{index}]"
                           ".querySelector('.widget-image').src !== old", arg=before[0],
                           timeout=10_000)
    readout = slider.locator(".widget-readout").inner_text().strip()
    assert readout in caption.inner_text(), "the caption does not name the slider's value"
    assert "computing" not in cell.inner_text(), "an arrow key left the grid: a fresh run"
    assert not problems[seen:], "\n".join(problems[seen:])

    # save, shut the kernel down, reload: the figure is a picture, not a widget error
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function(f"() => !{PANEL}.context.model.dirty", timeout=30_000)
    outputs = nbformat.read(notebooks / name, 4).cells[index].outputs
    saved = [set(o.get("data", {})) for o in outputs]
    assert {"image/png", "text/plain"} in saved, f"the saved figure is not a picture: {saved}"
    assert not any(WIDGET_VIEW in s for s in saved), "a widget was saved without its state"
    for session in _api(address, token, "sessions"):
        if session["path"] == name:
            _api(address, token, f"sessions/{session['id']}", method="DELETE")
    page.reload()
    _wait_for_notebook(page)
    shown = (f"() => {{ const c = document.querySelectorAll('.jp-Notebook .jp-Cell')[{index}];"
             " const i = c.querySelector('.jp-OutputArea-output img');"
             " return (i && i.naturalWidth > 100) || c.innerText.includes('Error displaying'); }")
    page.wait_for_function(shown, timeout=30_000)
    assert "Error displaying widget" not in page.inner_text(".jp-Notebook")
    assert page.evaluate(shown), "the reopened figure is not shown"
    shots = ROOT / "_build" / "smoke"
    shots.mkdir(parents=True, exist_ok=True)
    picture = page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-OutputArea-output img")
    picture.scroll_into_view_if_needed()
    picture.screenshot(path=str(shots / f"lab_reopened_{Path(path).stem}.png"))
    assert not _real(problems), "\n".join(_real(problems))
    for session in _api(address, token, "sessions"):  # the reopen's kernel, before the next one
        _api(address, token, f"sessions/{session['id']}", method="DELETE")
    page.context.close()
    print(f"{name}: all cells ran in {ran_s:.0f} s")
