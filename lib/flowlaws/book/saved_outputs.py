"""Notebooks as saved by ``make lab``: a reopened notebook shows its figures, never an error.

A live widget's output holds only the id of a model that lives in the kernel. Saved and
reopened without that kernel, JupyterLab (jupyterlab_widgets 3.0) shows "Error displaying
widget: model not found" and never falls back to another representation of the same output.
:func:`pre_save_hook` (a ``ContentsManager.pre_save_hook``, set in the repository's
``jupyter_server_config.py``) rewrites such outputs in the saved file only; the open notebook
keeps its live widgets:

- a slider figure (:class:`flowlaws.book.interactive.InteractiveFigure`, whose output
  metadata carries :data:`FIGURE_KEY`) keeps its ``image/png``, the figure as drawn when
  the cell ran; its ``text/html`` Vega chart goes too (it needs the book's vendored Vega,
  which JupyterLab does not load);
- any other widget is left out, unless it carries a static view besides its ``text/plain``
  (which is only its repr when first shown: a tqdm bar at 0 %);
- a widget whose state the notebook saved (ipywidgets' "Save Widget State Automatically")
  is left alone: JupyterLab draws it from that state.

The book's build executes the notebooks itself and never reads a saved file, so it keeps the
Vega chart. This module imports nothing from ``flowlaws``: the Jupyter server loads it by
path, without importing the library (and torch).
"""
from __future__ import annotations

from typing import Any

__all__ = [
    "FIGURE_KEY",
    "WIDGET_VIEW",
    "for_reopening",
    "pre_save_hook",
]

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
FIGURE_KEY = "flowlaws_figure"  # output metadata of a slider figure: keep its image/png


def _saved_models(notebook: dict) -> set[str]:
    """The ids of the widget models whose state the notebook saved."""
    state = notebook.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {})
    return set(state.get("state", {}))


def _for_reopening(output: dict, saved: set[str]) -> dict | None:
    """The output as saved: static, kept as it is, or ``None`` (left out)."""
    data = output.get("data", {})
    view = data.get(WIDGET_VIEW)
    if view is None or (isinstance(view, dict) and view.get("model_id") in saved):
        return output
    kept = {k: v for k, v in data.items() if k != WIDGET_VIEW}
    if output.get("metadata", {}).get(FIGURE_KEY) and "image/png" in kept:
        kept.pop("text/html", None)
    if not set(kept) - {"text/plain"}:
        return None  # a widget's text is its repr when shown: a bar at 0 %, a class name
    return output | {"data": kept}


def for_reopening(notebook: dict) -> dict:
    """The notebook (nbformat 4, as a dict) with every unsaved widget output made static.

    Returns a new dict; ``notebook`` is not changed. Outputs that are not widgets, and
    widgets whose state the notebook saved, are kept as they are.
    """
    saved = _saved_models(notebook)
    cells = []
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "code" and cell.get("outputs"):
            outputs = (_for_reopening(o, saved) for o in cell["outputs"])
            cell = cell | {"outputs": [o for o in outputs if o is not None]}
        cells.append(cell)
    return notebook | {"cells": cells}


def pre_save_hook(model: dict, **kwargs: Any) -> None:
    """``ContentsManager.pre_save_hook``: save a notebook as :func:`for_reopening` makes it.

    Changes ``model["content"]`` in place (the file written); other files pass untouched.
    """
    if model.get("type") == "notebook" and isinstance(model.get("content"), dict):
        model["content"] = for_reopening(model["content"])
