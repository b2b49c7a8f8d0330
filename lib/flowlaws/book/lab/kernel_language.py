"""A book notebook opens in JupyterLab without the "unsaved changes" mark.

The book's notebooks are stored with the least metadata (``language_info: {"name": "python"}``).
When its kernel starts, JupyterLab writes the kernel's full ``language_info`` (version,
mimetype, lexer…) into the open notebook, and that change alone marks it unsaved: a reader who
only looked is asked to save on closing. :func:`for_lab` gives an opened notebook the full
``language_info`` that ipykernel, the kernel ``make lab`` starts, reports, so Lab finds nothing
to change; :func:`from_lab` writes the stored form back on save, so the file on disk keeps its
least metadata. A notebook of another kernel, or with other ``language_info``, is left as it is.
Loaded by its path with :mod:`flowlaws.book.lab.roles` (it imports neither flowlaws nor torch;
ipykernel on first use, about 0.2 s).
"""
from __future__ import annotations

import functools

__all__ = ["STORED", "for_lab", "from_lab"]

STORED = {"name": "python"}


@functools.cache
def _kernel_language_info() -> dict:
    """What ipykernel's ``kernel_info_reply`` holds as ``language_info`` in this Python."""
    from ipykernel.ipkernel import IPythonKernel

    return dict(IPythonKernel.language_info)


def _ours(notebook: dict) -> bool:
    return (notebook.get("metadata", {}).get("kernelspec", {}).get("name") == "python3")


def for_lab(notebook: dict) -> dict:
    """``notebook`` (nbformat 4, a dict) with the kernel's full ``language_info`` when it holds
    the stored one (a new dict; ``notebook`` is not changed)."""
    metadata = notebook.get("metadata", {})
    if not _ours(notebook) or metadata.get("language_info") != STORED:
        return notebook
    return notebook | {"metadata": metadata | {"language_info": _kernel_language_info()}}


def from_lab(notebook: dict) -> dict:
    """``notebook`` with the stored ``language_info`` where it holds what :func:`for_lab` gave."""
    metadata = notebook.get("metadata", {})
    if not _ours(notebook) or metadata.get("language_info") != _kernel_language_info():
        return notebook
    return notebook | {"metadata": metadata | {"language_info": dict(STORED)}}
