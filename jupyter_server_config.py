"""The Jupyter server's settings for the book's notebooks (read by `make lab` and Binder).

`make lab` (and `start`, which Binder runs first) puts the repository on JUPYTER_CONFIG_PATH,
so this file is read besides the reader's own Jupyter settings (a `jupyter lab` started by
hand reads it with `JUPYTER_CONFIG_PATH=/path/to/flowlaws`). Two changes to what the server
reads and writes, both by modules loaded by their paths (the server does not import flowlaws,
and torch):

- an opened notebook shows its MyST citations, cross-references and pasted values
  ({glue:text}: the value the last build pasted, else what belongs there) as readable links (a
  contents manager derived from jupyter_server's, whose `get` rewrites them), and a saved one
  holds the roles again, byte for byte (its pre-save hook; lib/flowlaws/book/lab/roles.py).
  The same manager serves the kernel's full language_info and saves the stored one back, so a
  notebook only opened is not marked unsaved (lib/flowlaws/book/lab/kernel_language.py).
  jupytext's server extension derives its own manager from this one, as from the default;
- saving a notebook writes its live widgets as static outputs, so a reopened notebook shows
  each figure without a kernel, never "Error displaying widget: model not found"
  (lib/flowlaws/book/saved_outputs.py). It runs before the roles are restored; the two
  touch different parts of a notebook (outputs, markdown).

The same folder on JUPYTER_CONFIG_PATH gives JupyterLab `labconfig/page_config.json`, which
turns off Lab's news announcements: a first start of `make lab` opens on the chapter, not on a
pop-up asking whether to fetch Jupyter's news (tests/book/test_lab.py checks that none shows).
"""

import importlib.util
import sys
import warnings
from pathlib import Path


def _load(name):
    path = Path(__file__).resolve().parent / "lib" / "flowlaws" / "book" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"flowlaws_{Path(name).name}", path)
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


c = get_config()  # noqa: F821 (defined by Jupyter when it reads this file)
c.ServerApp.contents_manager_class = _load("lab/roles").contents_manager_class()
c.ContentsManager.pre_save_hook = _load("saved_outputs").pre_save_hook
# The server applies its config to the contents manager more than once (jupytext derives a new
# one); each time jupyter_server warns "Overriding existing pre_save_hook", about this hook.
warnings.filterwarnings("ignore", message="Overriding existing pre_save_hook")
