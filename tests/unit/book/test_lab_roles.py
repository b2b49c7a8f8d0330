"""Tests of flowlaws.book.lab.roles: the book's MyST references as JupyterLab shows them."""

from __future__ import annotations

import ast
import asyncio
import json
import os
import re
import shutil
from pathlib import Path
from urllib.parse import unquote

import nbformat
import pytest
from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from traitlets.config.loader import PyFileConfigLoader

from flowlaws.book.lab import roles as lab_roles
from flowlaws.book.lab.roles import book_index, for_lab, from_lab

ROOT = Path(__file__).resolve().parents[3]
NOTEBOOKS = sorted(
    p.relative_to(ROOT).as_posix()
    for p in (ROOT / "book").rglob("*.ipynb")
    if not {"stored", ".ipynb_checkpoints"} & set(p.relative_to(ROOT).parts)
)
HANDLED = r"\{(?:cite(?::[a-z]+)?|numref|ref|prf:ref|doc|glue:text)\}`[^`]*`"
LINK = re.compile(r"\[(?P<text>[^\]\n]*)\]\((?P<url>[^\s()]*) \"(?P<role>\{[^\"\n]*)\"\)")
CITE = r"\{cite\}`([^`]*)`"
BARE_GLUE = r"\b[a-z][a-z0-9_]*:(?:s|\.\d+[fge%])\b|\{glue:text\}"
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
    assert found == {"cite", "numref", "ref", "prf:ref", "doc", "glue:text"}, (
        "a new role in the book (or one no longer used): make lab.roles render it in JupyterLab"
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
        if name == "glue:text":  # the built value or the key and who pastes it: tests below
            assert not re.search(BARE_GLUE, text) and (folder / url).is_file(), (path, text, url)
        elif name == "cite":
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
        "See {ref}`sec-here` and ``{cite}`kingman1982coalescent` `` and `` {glue:text}`n:.0f` ``.",
        "```python",
        "print('{cite}`kingman1982coalescent`', '{glue:text}`n:.0f`')",
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


@pytest.mark.parametrize("module", ["roles.py", "book_index.py", "kernel_language.py"])
def test_the_module_imports_nothing_from_flowlaws_or_torch(module):
    tree = ast.parse(Path(lab_roles.__file__).with_name(module).read_text())
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
    assert model["content"].metadata.language_info.get("version"), "stored language_info served"
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


# --- {glue:text}: the value the last build pasted, or what belongs there --------------------

GLUED = {  # docname -> values its cells glue (myst_nb.glue(key, value, display=False))
    "book/02_percolation/x": {"lam": 2.1234, "verdict": "supported", "run_time": "1.5 min"},
    "book/02_percolation/08_real_data": {"heart_lambda171_verdict": "not tested [n < 3]"},
}
GLUE_LINES = (
    "took {glue:text}`run_time:s`; λ = {glue:text}`lam:.2f`, *{glue:text}`verdict:s`*",
    "({glue:text}`08_real_data.ipynb::heart_lambda171_verdict:s`) and",
    "{glue:text}`/book/02_percolation/08_real_data.ipynb::heart_lambda171_verdict:s`",
)


def glue_output(key: str, value: object) -> dict:
    """A code cell's output as ``myst_nb.glue(key, value, display=False)`` displays it."""
    prefix = "application/papermill.record/"
    return nbformat.v4.new_output(
        "display_data",
        data={f"{prefix}text/plain": repr(value)},
        metadata={"scrapbook": {"name": key, "mime_prefix": prefix}},
    )


def write_build(root: Path, glued: dict[str, dict[str, object]]) -> None:
    """``root/_build/jupyter_execute`` as myst-nb leaves it: each executed notebook and its
    ``.glue.json`` (:func:`myst_nb.ext.glue.extract_glue_data`, written as myst-nb writes it)."""
    from myst_nb.ext.glue import extract_glue_data

    for docname, values in glued.items():
        outputs = [glue_output(key, value) for key, value in values.items()]
        executed = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("", outputs=outputs)])
        data = extract_glue_data(executed, [0], None)
        target = root / "_build" / "jupyter_execute" / docname
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(executed, target.with_suffix(".ipynb"))
        target.with_suffix(".glue.json").write_text(json.dumps(data), encoding="utf-8")


def glue_links(root: Path, served: Path | None = None) -> list[tuple[str, str]]:
    notebook = root / "book/02_percolation/x.ipynb"
    lab = for_lab(one_cell(*GLUE_LINES), notebook, lab_roles.Index(root=root), served)
    return [(m["text"], m["url"]) for m in LINK.finditer(lab["cells"][0]["source"])]


def test_a_glue_role_reads_the_value_the_build_pasted_linked_to_the_executed_notebook(tmp_path):
    write_build(tmp_path, GLUED)
    executed = "../../_build/jupyter_execute/book/02_percolation"
    assert glue_links(tmp_path) == [
        ("1.5 min", f"{executed}/x.ipynb"),
        ("2.12", f"{executed}/x.ipynb"),
        ("supported", f"{executed}/x.ipynb"),
        ("not tested (n < 3)", f"{executed}/08_real_data.ipynb"),
        ("not tested (n < 3)", f"{executed}/08_real_data.ipynb"),
    ]


def test_a_server_that_serves_book_only_links_a_pasted_value_to_the_notebook_gluing_it(tmp_path):
    write_build(tmp_path, GLUED)
    assert glue_links(tmp_path, served=tmp_path)[3][1].startswith("../../_build/")
    assert glue_links(tmp_path, served=tmp_path / "book") == [  # as `make lab` serves it
        ("1.5 min", "x.ipynb"),
        ("2.12", "x.ipynb"),
        ("supported", "x.ipynb"),
        ("not tested (n < 3)", "08_real_data.ipynb"),
        ("not tested (n < 3)", "08_real_data.ipynb"),
    ]


def test_a_new_build_is_read_again(tmp_path):
    write_build(tmp_path, GLUED)
    assert glue_links(tmp_path)[0][0] == "1.5 min"
    glue_json = tmp_path / "_build/jupyter_execute/book/02_percolation/x.glue.json"
    stamp = glue_json.stat().st_mtime_ns
    write_build(
        tmp_path, {"book/02_percolation/x": GLUED["book/02_percolation/x"] | {"run_time": "2 s"}}
    )
    os.utime(
        glue_json, ns=(stamp + 10**9, stamp + 10**9)
    )  # a later build, however coarse the clock
    assert glue_links(tmp_path)[0][0] == "2 s"


def test_without_build_output_a_glue_role_says_what_belongs_there(tmp_path):
    write_build(tmp_path, {"book/02_percolation/x": {"other_key": 1}})  # an older build
    links = glue_links(tmp_path)
    assert links == [
        ("run_time (pasted by the built book)", "x.ipynb"),
        ("lam (pasted by the built book)", "x.ipynb"),
        ("verdict (pasted by the built book)", "x.ipynb"),
        ("heart_lambda171_verdict (pasted by the built book)", "08_real_data.ipynb"),
        ("heart_lambda171_verdict (pasted by the built book)", "08_real_data.ipynb"),
    ]
    assert not any(re.search(BARE_GLUE, text) for text, _ in links)


@pytest.mark.parametrize("built", [False, True])
def test_glue_links_round_trip_exactly(tmp_path, built):
    if built:
        write_build(tmp_path, GLUED)
    nb = one_cell(*GLUE_LINES)
    lab = for_lab(nb, tmp_path / "book/02_percolation/x.ipynb", lab_roles.Index(root=tmp_path))
    assert not re.search(HANDLED, LINK.sub("", lab["cells"][0]["source"]))
    assert from_lab(lab) == nb


TRICKY = ("[a] (b)", "`code` and $x^2$", 'say "so"', "ends \\", "two\nlines", "", "0.1%")


def glued_in_the_book() -> dict[str, dict[str, object]]:
    """Docname -> a value for each key the book's roles paste from it, each value text that a
    link must survive (brackets, backticks, quotes, a backslash, a newline, nothing)."""
    glued: dict[str, dict[str, object]] = {}
    for path in NOTEBOOKS:
        for body in re.findall(r"\{glue:text\}`([^`]*)`", "".join(markdown(read(path)))):
            doc, _, key = body.rsplit(":", 1)[0].rpartition("::")  # [path::]key[:fmt]
            file = (ROOT / path).parent / doc if doc else ROOT / path
            docname = file.resolve().relative_to(ROOT).with_suffix("").as_posix()
            values = glued.setdefault(docname, {})
            values[key] = TRICKY[len(values) % len(TRICKY)]
    return glued


@pytest.fixture(scope="module")
def book_copies(tmp_path_factory) -> dict[bool, Path]:
    """The book copied twice: as a fresh clone has it, and with a build that pasted every key."""
    roots = {}
    for built in (False, True):
        root = tmp_path_factory.mktemp("built" if built else "bare")
        shutil.copytree(ROOT / "book", root / "book")
        shutil.copy(ROOT / "_config.yml", root)
        if built:
            write_build(root, glued_in_the_book())
        roots[built] = root
    return roots


@pytest.mark.parametrize("built", [False, True], ids=["bare", "built"])
@pytest.mark.parametrize("path", NOTEBOOKS)
def test_every_glue_role_round_trips_with_and_without_build_output(book_copies, path, built):
    root = book_copies[built]
    text = (root / path).read_text(encoding="utf-8")
    opened = nbformat.reads(text, as_version=nbformat.NO_CONVERT)
    lab = json.loads(json.dumps(for_lab(opened, root / path, book_index(root))))  # as Lab has it
    links = [m for t in markdown(lab) for m in LINK.finditer(t) if "{glue:text}" in m["role"]]
    assert len(links) == "".join(markdown(read(path))).count("{glue:text}`")
    for m in links:
        pasted = not m["text"].endswith(" (pasted by the built book)")
        assert pasted == built and not re.search(BARE_GLUE, m["text"]), m[0]
        assert ("_build/jupyter_execute/" in m["url"]) == built, m[0]
    assert nbformat.writes(nbformat.from_dict(from_lab(lab))) + "\n" == text


def test_a_copy_elsewhere_pastes_what_the_build_pasted_in_its_original(book_copies, tmp_path):
    root, chapter = book_copies[True], "book/02_percolation/07_grokking"
    shutil.copy(root / f"{chapter}.ipynb", tmp_path / "07_grokking.ipynb")  # as test_lab opens it
    lab = for_lab(read(f"{chapter}.ipynb"), tmp_path / "07_grokking.ipynb", book_index(root))
    first = LINK.search(markdown(lab)[0])
    assert first["role"] == "{glue:text}`run_time:s`"
    assert first["text"] == lab_roles._clean(glued_in_the_book()[chapter]["run_time"])
    executed = root / "_build/jupyter_execute" / f"{chapter}.ipynb"
    assert (tmp_path / unquote(first["url"])).resolve() == executed
