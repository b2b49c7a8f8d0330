"""Copy every script the built book needs into ``_vendor/`` so the HTML works offline.

The book's pages would otherwise load MathJax, require.js, the Jupyter widget manager and the
chart libraries from CDNs, which a reader without network cannot reach. Sources:

- MathJax 3, require.js, ``@jupyter-widgets/html-manager``: npm tarballs (``npm pack``, no
  dependency tree is installed: we only need their prebuilt ``dist`` files);
- plotly.js: the ``plotly.min.js`` that ships inside the pinned ``plotly`` package;
- Vega, Vega-Lite, vega-embed: ``vl_convert.javascript_bundle()``, wrapped in a function scope
  (its top-level ``const`` names clash with Sphinx's globals otherwise).

``_config.yml`` lists ``_vendor`` in ``html_static_path``, so the build copies it to
``_build/html/_static/``. Run: ``python tools/vendor_assets.py [--out _vendor]``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

NPM_PACKAGES = {
    "mathjax": "3.2.2",
    "requirejs": "2.3.8",
    "@jupyter-widgets/html-manager": "1.0.15",
}


# embed-amd.js finds its icon fonts next to the AMD module id it registers, resolved against
# the page; point that id at the vendored copy under _static/ whatever the page's depth.
WIDGETS_CONFIG = """(function () {
  var root = document.documentElement.dataset.content_root || "./";
  var here = new URL(root + "_static/html-manager", document.baseURI).href;
  require.config({paths: {"@jupyter-widgets/html-manager/dist": here}});
})();
"""


def npm_pack(workdir: Path) -> dict[str, Path]:
    """Download the npm tarballs into ``workdir``; return package name → tarball path."""
    if shutil.which("npm") is None:
        sys.exit("vendor_assets: npm is needed once to fetch MathJax and the widget manager")
    specs = [f"{name}@{version}" for name, version in NPM_PACKAGES.items()]
    result = subprocess.run(
        ["npm", "pack", "--silent", *specs], cwd=workdir, capture_output=True, text=True
    )
    if result.returncode != 0:
        sys.exit(f"vendor_assets: npm pack failed:\n{result.stderr}")
    names = result.stdout.split()
    return dict(zip(NPM_PACKAGES, (workdir / n for n in names), strict=True))


def extract(tarball: Path, member_prefix: str, dest: Path, skip_suffixes: tuple = ()) -> None:
    """Extract the members under ``package/<member_prefix>`` of an npm tarball into ``dest``."""
    prefix = f"package/{member_prefix}"
    with tarfile.open(tarball) as tar:
        for member in tar.getmembers():
            if not member.isfile() or not member.name.startswith(prefix):
                continue
            if member.name.endswith(skip_suffixes):
                continue
            target = dest / member.name[len(prefix) :].lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(tar.extractfile(member).read())


def write_chart_libraries(out: Path) -> None:
    """plotly.js from the plotly package; the Vega bundle from vl-convert, scoped."""
    import plotly
    import vl_convert

    plotly_js = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    shutil.copyfile(plotly_js, out / "plotly.min.js")
    bundle = vl_convert.javascript_bundle()
    (out / "vega-bundle.js").write_text("(function () {\n" + bundle + "\n})();\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("_vendor"))
    out = parser.parse_args().out
    staging = out.with_name(out.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        tarballs = npm_pack(Path(tmp))
        extract(tarballs["mathjax"], "es5", staging / "mathjax")
        extract(tarballs["requirejs"], "require.js", staging / "require.js")
        extract(tarballs["@jupyter-widgets/html-manager"], "dist", staging / "html-manager",
                skip_suffixes=(".map", ".LICENSE.txt"))
    write_chart_libraries(staging)
    (staging / "widgets-config.js").write_text(WIDGETS_CONFIG)
    shutil.rmtree(out, ignore_errors=True)
    staging.rename(out)  # the folder appears whole or not at all
    print(f"vendored offline assets into {out}/")


if __name__ == "__main__":
    main()
