"""Copy every script the built book needs into ``_vendor/`` so the HTML works offline.

The book's pages would otherwise load MathJax, require.js, the Jupyter widget manager and the
chart libraries from CDNs, which a reader without network cannot reach. Sources:

- MathJax 3, require.js, ``@jupyter-widgets/html-manager``: npm tarballs (``npm pack``, no
  dependency tree is installed: we only need their prebuilt ``dist`` files);
- plotly.js: the ``plotly.min.js`` that ships inside the pinned ``plotly`` package;
- Vega, Vega-Lite, vega-embed: ``vl_convert.javascript_bundle()``, wrapped in a function scope
  (its top-level ``const`` names clash with Sphinx's globals otherwise).

Every npm tarball is checked before anything is extracted: its SHA-512 must equal both the
integrity pinned below and the registry's ``dist.integrity`` (``npm view``), and no member may
be an absolute path, climb out with ``..`` or be a link: a tampered or malicious tarball is
refused with an error naming it and the member.

``_config.yml`` lists ``_vendor`` in ``html_static_path``, so the build copies it to
``_build/html/_static/``. Run: ``python tools/vendor_assets.py [--out _vendor]``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import posixpath
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

# the registry's dist.integrity of each pinned version (npm view NAME@VERSION dist.integrity)
NPM_INTEGRITY = {
    "mathjax": (
        "sha512-Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x"
        "77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw=="),
    "requirejs": (
        "sha512-7/cTSLOdYkNBNJcDMWf+luFvMriVm7eYxp4BcFCsAX0wF421Vyce5"
        "SXP17c+Jd5otXKGNehIonFlyQXSowL6Mw=="),
    "@jupyter-widgets/html-manager": (
        "sha512-5thBIV6ymNgmPVOHvzx+gGy8ZSKmSazhtGw4/c4xJDVzRhG9PTeQs"
        "RjF3FUTopvFi//SABeNz1yp47bCrJ3CQA=="),
}


class UnsafeTarball(ValueError):  # noqa: N818 - the name says what it is
    """An npm tarball that fails its integrity check or holds an unsafe member."""


def integrity_of(tarball: Path) -> str:
    """The npm integrity string (``sha512-<base64>``) of the file ``tarball``."""
    digest = hashlib.sha512(tarball.read_bytes()).digest()
    return "sha512-" + base64.b64encode(digest).decode()


def registry_integrity(name: str, version: str) -> str:
    """The registry's ``dist.integrity`` of ``name@version`` (``npm view``)."""
    result = subprocess.run(["npm", "view", f"{name}@{version}", "dist.integrity"],
                            capture_output=True, text=True)
    if result.returncode != 0 or not result.stdout.strip().startswith("sha512-"):
        raise UnsafeTarball(f"cannot read the registry's integrity of {name}@{version} "
                            f"(npm view): {result.stderr.strip()[:200]}")
    return result.stdout.strip()


def check_integrity(tarball: Path, name: str, registry: str) -> None:
    """Refuse ``tarball`` unless its SHA-512 equals the pinned and the registry's integrity."""
    found, pinned = integrity_of(tarball), NPM_INTEGRITY[name]
    if not found == pinned == registry:
        raise UnsafeTarball(f"{tarball} ({name}): integrity {found}, but the pinned value is "
                            f"{pinned} and the registry's {registry}; refusing to extract it")


def check_members(tar: tarfile.TarFile, tarball: Path) -> None:
    """Refuse a tarball with a member that is absolute, climbs out with ``..``, or is a link
    or another special file (npm packages hold plain files and folders only)."""
    for member in tar.getmembers():
        name = member.name
        normal = posixpath.normpath(name)
        if name.startswith(("/", "\\")) or posixpath.isabs(normal) or normal == ".." \
                or normal.startswith("../") or "\\" in name or ":" in name.split("/")[0]:
            raise UnsafeTarball(f"{tarball}: member {name!r} is an absolute path or leaves "
                                "the package folder; refusing to extract it")
        if not (member.isfile() or member.isdir()):
            kind = "a link" if member.issym() or member.islnk() else "a special file"
            raise UnsafeTarball(f"{tarball}: member {name!r} is {kind} "
                                f"(-> {member.linkname!r}); refusing to extract it")


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
    """Extract the members under ``package/<member_prefix>`` of an npm tarball into ``dest``,
    after :func:`check_members` found none unsafe; every target is checked to lie in ``dest``."""
    prefix = f"package/{member_prefix}"
    root = dest.resolve()
    with tarfile.open(tarball) as tar:
        check_members(tar, tarball)
        for member in tar.getmembers():
            if not member.isfile() or not member.name.startswith(prefix):
                continue
            if member.name.endswith(skip_suffixes):
                continue
            target = dest / member.name[len(prefix) :].lstrip("/")
            if not target.resolve().is_relative_to(root):
                raise UnsafeTarball(f"{tarball}: member {member.name!r} would be written "
                                    f"outside {dest}")
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
        try:
            for name, tarball in tarballs.items():
                check_integrity(tarball, name, registry_integrity(name, NPM_PACKAGES[name]))
        except UnsafeTarball as error:
            sys.exit(f"vendor_assets: {error}")
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
