"""Tests of flowlaws.book.lab_roles: the book's MyST references as JupyterLab shows them."""

from __future__ import annotations

import ast
import asyncio
import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from traitlets.config.loader import PyFileConfigLoader

from flowlaws.book import lab_roles
from flowlaws.book.lab_roles import book_index, for_lab, from_lab

ROOT = Path(__file__).resolve().parents[3]
NOTEBOOKS = sorted(
    p.relative_to(ROOT).as_posix()
    for p in (ROOT / "book").rglob("*.ipynb")
    if not {"stored", ".ipynb_checkpoints"} & set(p.relative_to(ROOT).parts)
)
HANDLED = r"\{(?:cite(?::[a-z]+)?|numref|ref|prf:ref|doc)\}`[^`]*`"
LINK = re.compile(r"\[(?P<text>[^\]\n]*)\]\((?P<url>[^\s()]*) \"(?P<role>\{[^\"\n]*)\"\)")
CITE = r"\{cite\}`([^`]*)`"
KINDS = ("Figure", "Theorem", "Proposition", "Definition", "Corollary", "Section")


def markdown(notebook: dict) -> list[str]:
    return ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown"]


def read(path: str) -> dict:
    return json.loads((ROOT / path).read_text(encoding="utf-8"))


def one_cell(*lines: str) -> dict:
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("\n".join(lines)),
            nbformat.v4.new_code_cell("x = 1  # {cite}`kingman1982coalescent`"),
        ]
    )
    return json.loads(json.dumps(nb))


def lab_text(*lines: str, path: str | Path | None = None) -> str:
    return for_lab(one_cell(*lines), path)["cells"][0]["source"]


def test_the_notebooks_use_the_roles_the_module_rewrites():
    found = {
        m
        for path in NOTEBOOKS
        for text in markdown(read(path))
        for m in re.findall(r"\{([a-z:]+)\}`", text)
    }
    assert {"cite", "numref", "ref", "prf:ref", "doc"} <= found, found
    assert found - {"cite", "numref", "ref", "prf:ref", "doc"} == {"glue:text"}, (
        "a new role in the book: make lab_roles render it in JupyterLab, or list it here"
    )


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_no_raw_reference_is_left_but_those_jupyterlab_myst_resolves(path):
    lab = for_lab(read(path), ROOT / path)
    local = {
        label
        for text in markdown(read(path))
        for label in re.findall(r"^\(([^()\s]+)\)=|^:(?:label|name): (\S+)", text, re.M)
        for label in label
        if label
    }
    for text in markdown(lab):
        outside_titles = LINK.sub("", text)
        for role in re.findall(HANDLED, outside_titles):
            label = role.split("`")[1].rsplit("<", 1)[-1].rstrip(">")  # "text <label>"
            assert not role.startswith(("{cite", "{doc")) and label in local, (path, role)
            assert label in book_index().labels, f"{path}: {role} names no label of the book"


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_every_citation_and_reference_resolves_to_readable_text_and_a_link(path):
    index, folder = book_index(), (ROOT / path).parent
    links = [m for text in markdown(for_lab(read(path), ROOT / path)) for m in LINK.finditer(text)]
    for m in links:
        text, url, role = m["text"], m["url"], m["role"]
        name, body = re.fullmatch(r"\{([a-z:]+)\}`([^`]*)`", role).groups()
        assert text and text not in body.split(","), f"{path}: {role} reads as its key"
        if name == "cite":
            assert re.fullmatch(r"[A-Z][\w' -]*?( and [A-Z][\w' -]*| et al\.)?, \d{4}", text), text
            assert url.startswith(("https://doi.org/", "https://arxiv.org/abs/")) or (
                url.endswith("references.bib") and (folder / url).is_file()
            ), url
            assert all(k in index.citations for k in body.split(",")), role
        else:
            assert (folder / url).is_file(), f"{path}: {role} links to {url}, not a file"
            target = index.labels.get(body) or index.documents[(folder / body).resolve()]
            assert target.title and target.title in text, f"{path}: {role} reads {text!r}"
            if name in ("numref", "prf:ref"):
                assert text.startswith(tuple(f"{k} “" for k in KINDS)), text
    keys = sum(len(b.split(",")) for t in markdown(read(path)) for b in re.findall(CITE, t))
    assert sum(m["role"].startswith("{cite}") for m in links) == keys, "a key without its link"


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_the_round_trip_is_exact_and_the_saved_file_is_byte_identical(path):
    raw = read(path)
    lab = for_lab(raw, ROOT / path)
    assert lab != raw or not re.search(HANDLED, "".join(markdown(raw)))
    assert from_lab(lab) == raw
    for before, after in zip(raw["cells"], lab["cells"], strict=True):
        if before["cell_type"] != "markdown":
            assert after is before, "a code cell was changed"
        assert after["metadata"] == before["metadata"]
    assert lab["metadata"] == raw["metadata"]
    text = (ROOT / path).read_text(encoding="utf-8")
    opened = nbformat.reads(text, as_version=nbformat.NO_CONVERT)  # as the server reads it
    saved = from_lab(json.loads(json.dumps(for_lab(opened, ROOT / path))))  # as Lab sends it
    assert nbformat.writes(nbformat.from_dict(saved)) + "\n" == text


def test_citations_read_as_authors_and_year_linked_to_the_paper():
    text = lab_text(
        "as {cite}`kingma2015adam,zhou2002significance` and {cite:t}`nanda2023progress`"
        " show; {cite}`power2022grokking`",
        path=ROOT / "book/02_percolation/x.ipynb",
    )
    assert text == (
        "as ([Kingma and Ba, 2015](../references.bib"
        ' "{cite}`kingma2015adam,zhou2002significance`");'
        " [Zhou and Sornette, 2002](https://doi.org/10.1142/S0129183102003024"
        ' "{cite}`kingma2015adam,zhou2002significance`")) and'
        ' [Nanda et al. (2023)](../references.bib "{cite:t}`nanda2023progress`") show;'
        ' ([Power et al., 2022](https://arxiv.org/abs/2201.02177 "{cite}`power2022grokking`"))'
    )


def test_references_read_as_kind_and_caption_or_title():
    path = ROOT / "book/02_percolation/x.ipynb"
    text = lab_text(
        "{numref}`fig-balancedness`, {numref}`Fig. %s <fig-moe-flow>`,",
        "{prf:ref}`thm-quartic`, {ref}`sec-dsi-trap`, {ref}`that trap <sec-dsi-trap>`,",
        "{doc}`05_dsi`, {doc}`../01_conservation/04_moe`",
        path=path,
    )
    links = [(m["text"], m["url"]) for m in LINK.finditer(text)]
    assert links == [
        (
            "Figure “Gradient flow keeps the balancedness at the level of the solver's tolerance”",
            "../01_conservation/01_gradient_flow.ipynb",
        ),
        (
            "Fig. “How far the laws move along gradient flow of a 3-expert MoE layer, softmax…”",
            "../01_conservation/04_moe.ipynb",
        ),
        ("Theorem “Stochastic attractivity of the quartic well”", "02_trapping.ipynb"),
        ("The trap: levels that are evenly spaced", "05_dsi.ipynb"),
        ("that trap", "05_dsi.ipynb"),
        ("Discrete scale invariance", "05_dsi.ipynb"),
        (
            "Mixture-of-Experts: a law per expert, and one for the gate",
            "../01_conservation/04_moe.ipynb",
        ),
    ]


def test_an_unknown_key_or_label_reads_as_itself():
    lines = (
        "{cite}`nobody1900,kingman1982coalescent`, {numref}`fig-nowhere`,",
        "{ref}`the lost part <sec-nowhere>`, {doc}`nowhere`, {prf:ref}`thm-nowhere`",
    )
    nb = one_cell(*lines)
    text = for_lab(nb)["cells"][0]["source"]
    assert [m["text"] for m in LINK.finditer(text)] == [
        "nobody1900",
        "Kingman, 1982",
        "fig-nowhere",
        "the lost part",
        "nowhere",
        "thm-nowhere",
    ]
    assert not re.search(HANDLED, LINK.sub("", text))
    assert from_lab(for_lab(nb)) == nb


def test_roles_in_code_and_local_targets_are_left_alone():
    lines = (
        "(sec-here)=",
        "## Here",
        "",
        "See {ref}`sec-here` and ``{cite}`kingman1982coalescent` `` and {glue:text}`n:.0f`.",
        "```python",
        "print('{cite}`kingman1982coalescent`')",
        "```",
        "```{code-block} text",
        "{numref}`fig-balancedness`",
        "```",
        ":::{prf:remark} A remark",
        "{cite}`kingman1982coalescent`",
        ":::",
        "````{admonition} Note",
        "{doc}`05_dsi`",
        "````",
    )
    nb = one_cell(*lines)
    text = for_lab(nb, ROOT / "book/02_percolation/x.ipynb")["cells"][0]["source"]
    kept = [line for line in text.split("\n") if line in lines]
    assert kept == [
        line for line in lines if line not in ("{cite}`kingman1982coalescent`", "{doc}`05_dsi`")
    ], "only the two directive bodies change"
    assert text.count('"{cite}`kingman1982coalescent`"') == 1 and '"{doc}`05_dsi`"' in text
    assert for_lab(nb)["cells"][1] is nb["cells"][1], "a code cell is never rewritten"
    assert from_lab(for_lab(nb)) == nb


@pytest.mark.parametrize(
    "text",
    [
        "{cite:t}`kingman1982coalescent`; {cite:t}`kingman1982coalescent`",
        "({cite:t}`kingma2015adam,nanda2023progress`) and \\[{cite}`kingman1982coalescent`\\]",
        "({cite}`kingman1982coalescent`; see {cite:p}`kingman1982coalescent`)",
        "{cite}`kingman1982coalescent`; {cite}`kingman1982coalescent`{cite:author}`xiao2017`",
        '{numref}`fig-balancedness`{numref}`fig-balancedness` [x](y "z") [a](b)',
    ],
)
def test_the_round_trip_is_exact_for_forms_the_book_does_not_use_yet(text):
    nb = one_cell(text)
    lab = for_lab(nb)
    assert not re.search(HANDLED, LINK.sub("", lab["cells"][0]["source"]))
    assert from_lab(lab) == nb
    as_lines = json.loads(json.dumps(nb))
    as_lines["cells"][0]["source"] = text.splitlines(keepends=True) or [""]
    assert from_lab(for_lab(as_lines)) == as_lines


def test_the_module_imports_nothing_from_flowlaws_or_torch():
    tree = ast.parse(Path(lab_roles.__file__).read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not {n for n in names if n.split(".")[0] in ("flowlaws", "torch")}, names


@pytest.mark.parametrize("jupytext", [False, True])
def test_the_repository_config_makes_the_server_open_links_and_save_roles(tmp_path, jupytext):
    """The contents manager as `make lab` configures it, under jupytext's, as Lab runs it."""
    config = PyFileConfigLoader("jupyter_server_config.py", path=str(ROOT)).load_config()
    config.NotebookNotary.db_file, config.NotebookNotary.secret = ":memory:", b"a test's"
    manager_class = config.ServerApp.contents_manager_class
    assert issubclass(manager_class, AsyncLargeFileManager)
    if jupytext:
        from jupytext.async_contentsmanager import build_async_jupytext_contents_manager_class

        manager_class = build_async_jupytext_contents_manager_class(manager_class)
    manager = manager_class(root_dir=str(tmp_path), config=config)
    source = ROOT / "book/02_percolation/07_grokking.ipynb"
    shutil.copy(source, tmp_path / "chapter.ipynb")

    model = asyncio.run(manager.get("chapter.ipynb"))
    opened = LINK.sub("", "".join(c.source for c in model["content"].cells))
    assert "{cite}" not in opened and "{numref}" not in opened and "{doc}" not in opened
    assert "[Nanda et al., 2023](" in "".join(c.source for c in model["content"].cells)
    content = json.loads(json.dumps(model["content"]))  # as Lab sends it back
    asyncio.run(manager.save({"type": "notebook", "content": content}, "chapter.ipynb"))
    assert (tmp_path / "chapter.ipynb").read_bytes() == source.read_bytes()

    # both pre-save hooks run: roles restored, a live widget written as a static output
    code = next(c for c in content["cells"] if c["cell_type"] == "code")
    code["outputs"] = [
        nbformat.v4.new_output(
            "display_data",
            data={
                "application/vnd.jupyter.widget-view+json": {"model_id": "m"},
                "text/plain": "bar",
            },
        )
    ]
    asyncio.run(manager.save({"type": "notebook", "content": content}, "chapter.ipynb"))
    saved = nbformat.read(tmp_path / "chapter.ipynb", 4)
    assert [c.source for c in saved.cells if c.cell_type == "markdown"] == [
        c.source for c in nbformat.read(source, 4).cells if c.cell_type == "markdown"
    ]
    assert all(not c.get("outputs") for c in saved.cells if c.cell_type == "code")

    asyncio.run(manager.trust_notebook("chapter.ipynb"))  # signs the file as it is on disk
    assert manager.notary.check_signature(nbformat.read(tmp_path / "chapter.ipynb", 4))
