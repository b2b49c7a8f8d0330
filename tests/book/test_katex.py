"""Every formula in the notebooks' Markdown renders with the KaTeX that JupyterLab ships.

The built book typesets with MathJax, which forgives what KaTeX refuses (``C_\\max`` fails in
KaTeX: "Got function '\\max' with no arguments as subscript"), so only JupyterLab shows such a
formula as red raw LaTeX. This test finds the KaTeX bundles inside the installed JupyterLab and
its extensions (JupyterLab's own and jupyterlab-myst's, which renders Markdown cells), extracts
every formula of every notebook's Markdown cells (inline ``$…$``, display ``$$…$$``, amsmath
environments, ``{math}`` blocks, inside directives too) with the parser the book uses
(markdown-it with myst's math plugins) and renders each one with ``throwOnError`` in ``node``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from _harness import ROOT, toc_notebooks
from markdown_it import MarkdownIt
from mdit_py_plugins.amsmath import amsmath_plugin
from mdit_py_plugins.colon_fence import colon_fence_plugin
from mdit_py_plugins.dollarmath import dollarmath_plugin

RENDER = Path(__file__).with_name("katex_render.js")
_PARSER = (MarkdownIt("commonmark")
           .use(dollarmath_plugin, allow_space=True, double_inline=True)
           .use(amsmath_plugin).use(colon_fence_plugin).enable("table"))
_OPTION = re.compile(r"^:[\w-]+:.*$", re.MULTILINE)


def katex_bundles(prefix: Path = Path(sys.prefix)) -> list[Path]:
    """The JavaScript chunks under ``prefix/share/jupyter`` that hold a KaTeX build."""
    folders = [prefix / "share/jupyter/lab/static",
               *sorted((prefix / "share/jupyter/labextensions").glob("**/static"))]
    return [p for folder in folders for p in sorted(folder.glob("*.js"))
            if b"KaTeX parse error" in p.read_bytes()]


def formulas(markdown: str, where: str) -> list[dict[str, object]]:
    """Every formula of one Markdown text: ``{"tex", "display", "where"}`` dicts."""
    found: list[dict[str, object]] = []

    def walk(tokens) -> None:
        for token in tokens:
            if token.type in ("math_inline", "math_inline_double"):
                found.append({"tex": token.content, "display": token.type.endswith("double"),
                              "where": where})
            elif token.type in ("math_block", "math_block_label", "amsmath"):
                found.append({"tex": token.content, "display": True, "where": where})
            elif token.type in ("fence", "colon_fence") and token.info.startswith("{math}"):
                found.append({"tex": _OPTION.sub("", token.content), "display": True,
                              "where": where})
            elif token.type in ("fence", "colon_fence") and token.info.startswith("{"):
                if not token.info.startswith(("{code", "{literalinclude")):
                    walk(_PARSER.parse(_OPTION.sub("", token.content)))  # a directive's body
            if token.children:
                walk(token.children)

    walk(_PARSER.parse(markdown))
    return found


def notebook_formulas() -> list[dict[str, object]]:
    out = []
    for path in toc_notebooks():
        for cell in nbformat.read(ROOT / path, 4).cells:
            if cell.cell_type == "markdown":
                out += formulas(cell.source, f"{path} cell {cell.get('id', '?')}")
    return out


def test_formula_extraction_sees_every_kind():
    text = ("a $x_1$ and\n\n$$\\sum_i y_i$$ (eq-a)\n\n:::{prf:theorem}\nlaw $C_{\\max}$\n:::\n\n"
            "```{math}\n:label: m\nz^2\n```\n\n\\begin{equation}\nw\n\\end{equation}\n")
    got = [(f["tex"].strip(), f["display"]) for f in formulas(text, "t")]
    assert got == [("x_1", False), ("\\sum_i y_i", True), ("C_{\\max}", False), ("z^2", True),
                   ("\\begin{equation}\nw\n\\end{equation}", True)]


def test_every_notebook_formula_renders_in_jupyterlab_katex():
    node = shutil.which("node")
    bundles = katex_bundles()
    if node is None or not bundles:
        pytest.skip("needs node and JupyterLab's KaTeX bundles")
    found = notebook_formulas()
    assert len(found) > 1000, f"only {len(found)} formulas found: the extraction broke"
    done = subprocess.run([node, str(RENDER), *map(str, bundles)], input=json.dumps(found),
                          capture_output=True, text=True, timeout=300)
    errors = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    shown = "\n".join(f"{e['where']} (KaTeX {e['katex']}): {e['tex']!r}: {e['error']}"
                      for e in errors[:20])
    assert "KaTeX 0." in done.stderr, f"no KaTeX bundle loaded: {done.stderr[-2000:]}"
    assert done.returncode == 0 and not errors, (
        f"{len(errors)} formulas fail in JupyterLab's KaTeX:\n{shown}\n{done.stderr[-2000:]}")


def test_a_known_bad_formula_is_caught():
    node = shutil.which("node")
    bundles = katex_bundles()
    if node is None or not bundles:
        pytest.skip("needs node and JupyterLab's KaTeX bundles")
    bad = [{"tex": "C_\\max", "display": False, "where": "t"}]
    done = subprocess.run([node, str(RENDER), *map(str, bundles)], input=json.dumps(bad),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "no arguments as subscript" in done.stdout, done.stderr
