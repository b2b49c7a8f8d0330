"""The Jupyter server's settings for the book's notebooks (read by `make lab` and Binder).

`make lab` (and `start`, which Binder runs first) puts the repository on JUPYTER_CONFIG_PATH,
so this file is read besides the reader's own Jupyter settings (a `jupyter lab` started by
hand reads it with `JUPYTER_CONFIG_PATH=/path/to/flowlaws`). Saving a notebook writes its live
widgets as static outputs, so a reopened notebook shows each figure without a kernel, never
"Error displaying widget: model not found" (see lib/flowlaws/book/saved_outputs.py). The
module is loaded by its path: the server does not import flowlaws (and torch).

The same folder on JUPYTER_CONFIG_PATH gives JupyterLab `labconfig/page_config.json`, which
turns off Lab's news announcements: a first start of `make lab` opens on the chapter, not on a
pop-up asking whether to fetch Jupyter's news (tests/book/test_lab.py checks that none shows).
"""

import importlib.util
import warnings
from pathlib import Path

_path = Path(__file__).resolve().parent / "lib" / "flowlaws" / "book" / "saved_outputs.py"
_spec = importlib.util.spec_from_file_location("flowlaws_saved_outputs", _path)
_saved_outputs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_saved_outputs)

c = get_config()  # noqa: F821 (defined by Jupyter when it reads this file)
c.ContentsManager.pre_save_hook = _saved_outputs.pre_save_hook
# The server applies its config to the contents manager more than once (jupytext derives a new
# one); each time jupyter_server warns "Overriding existing pre_save_hook", about this hook.
warnings.filterwarnings("ignore", message="Overriding existing pre_save_hook")
