"""What ``make lab`` changes in JupyterLab: the book's MyST roles as readable links
(:mod:`.roles`, reading the book with :mod:`.book_index`), and no "unsaved changes" mark on a
notebook only opened (:mod:`.kernel_language`).

The Jupyter server loads these modules by their paths (``jupyter_server_config.py``), without
flowlaws and torch, so this package's ``__init__`` imports nothing.
"""
