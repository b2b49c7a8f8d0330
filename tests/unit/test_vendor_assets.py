"""tools/vendor_assets.py refuses tampered and unsafe npm tarballs before extracting (issue 27)."""

from __future__ import annotations

import importlib.util
import io
import tarfile
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "vendor_assets.py"
_spec = importlib.util.spec_from_file_location("vendor_assets", TOOL)
vendor_assets = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(vendor_assets)


def _tarball(path: Path, members: list[tuple[str, str, bytes | str]]) -> Path:
    """A gzipped tarball of ``(kind, name, content or link target)`` members."""
    with tarfile.open(path, "w:gz") as tar:
        for kind, name, content in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
            else:
                info.type = tarfile.SYMTYPE if kind == "symlink" else tarfile.LNKTYPE
                info.linkname = content
                tar.addfile(info)
    return path


@pytest.mark.parametrize(("member", "message"), [
    (("file", "package/dist/../../../escaped.js", b"x"), "leaves the package folder"),
    (("file", "/tmp/absolute.js", b"x"), "absolute path"),
    (("symlink", "package/dist/link.js", "/etc/passwd"), "is a link"),
    (("hardlink", "package/dist/hard.js", "../../outside"), "is a link"),
], ids=["dotdot", "absolute", "symlink", "hardlink"])
def test_unsafe_members_are_refused_and_nothing_is_written(tmp_path, member, message):
    tarball = _tarball(tmp_path / "evil.tgz", [("file", "package/dist/ok.js", b"ok"), member])
    dest = tmp_path / "out" / "dest"
    with pytest.raises(vendor_assets.UnsafeTarball, match=rf"evil\.tgz: member .*{message}"):
        vendor_assets.extract(tarball, "dist", dest)
    assert not dest.exists() and not (tmp_path / "escaped.js").exists()


def test_a_safe_tarball_extracts_its_prefix(tmp_path):
    tarball = _tarball(tmp_path / "ok.tgz", [("file", "package/dist/a/b.js", b"b"),
                                             ("file", "package/other.js", b"o")])
    vendor_assets.extract(tarball, "dist", tmp_path / "dest")
    assert (tmp_path / "dest" / "a" / "b.js").read_bytes() == b"b"
    assert not (tmp_path / "dest" / "other.js").exists()


def test_integrity_must_match_the_pinned_and_the_registrys(tmp_path, monkeypatch):
    tarball = _tarball(tmp_path / "pkg.tgz", [("file", "package/dist/a.js", b"a")])
    good = vendor_assets.integrity_of(tarball)
    assert good.startswith("sha512-") and len(good) == len("sha512-") + 88
    monkeypatch.setitem(vendor_assets.NPM_INTEGRITY, "requirejs", good)
    vendor_assets.check_integrity(tarball, "requirejs", good)  # all three agree
    with pytest.raises(vendor_assets.UnsafeTarball, match="pkg.tgz.*refusing"):
        vendor_assets.check_integrity(tarball, "requirejs", "sha512-" + "A" * 86 + "==")
    monkeypatch.setitem(vendor_assets.NPM_INTEGRITY, "requirejs", "sha512-other")
    with pytest.raises(vendor_assets.UnsafeTarball, match="pinned value is sha512-other"):
        vendor_assets.check_integrity(tarball, "requirejs", good)
