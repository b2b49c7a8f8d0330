"""Tests of flowlaws.data.images, against answers known in advance."""

from __future__ import annotations

import gzip
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from flowlaws.data.images import (
    FASHION_MNIST_CLASSES,
    digits_images,
    flat_features,
    load_images,
    read_cifar10,
    read_idx,
    read_image_folder,
    read_mnist,
)


def _write_idx(path: Path, array: np.ndarray) -> None:
    header = bytes([0, 0, 8, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(header + array.tobytes())


def write_cifar(folder: Path, per_batch: int = 2, protocol: int = 2) -> np.ndarray:
    """Batches in the python-2 layout of the real files: bytes keys, (n, 3072) uint8 rows."""
    folder.mkdir()
    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, (6 * per_batch, 3072), dtype=np.uint8)
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for i, name in enumerate(names):
        rows = data[i * per_batch : (i + 1) * per_batch]
        batch = {b"batch_label": name.encode(), b"data": rows,
                 b"labels": [(i + j) % 10 for j in range(per_batch)],
                 b"filenames": [b"x.png"] * per_batch}
        (folder / name).write_bytes(pickle.dumps(batch, protocol=protocol))
    meta = {b"label_names": [f"class{c}".encode() for c in range(10)], b"num_vis": 3072}
    (folder / "batches.meta").write_bytes(pickle.dumps(meta, protocol=2))
    return data


def idx_bytes(array: np.ndarray, code: int) -> bytes:
    header = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.tobytes()


def test_digits_are_the_bundled_sklearn_images() -> None:
    digits = digits_images()
    assert digits.images.shape == (1797, 1, 8, 8) and digits.images.dtype == torch.float32
    assert digits.images.min() == 0 and digits.images.max() == 1
    assert len(digits) == 1797 and digits.labels[:10].tolist() == list(range(10))


@pytest.mark.parametrize("protocol", [2, 5])
def test_cifar10_reader(tmp_path: Path, protocol: int) -> None:
    data = write_cifar(tmp_path / "cifar-10-batches-py", protocol=protocol)
    train = read_cifar10(tmp_path)  # the parent folder works too
    assert train.images.shape == (10, 3, 32, 32) and train.images.dtype == torch.float32
    assert train.labels.tolist() == [0, 1, 1, 2, 2, 3, 3, 4, 4, 5]
    assert train.classes[3] == "class3"
    # row 0: the first 1024 bytes are the red channel, row-major
    assert train.images[0, 0, 0, 1] == pytest.approx(data[0, 1] / 255)
    assert train.images[0, 1, 2, 3] == pytest.approx(data[0, 1024 + 2 * 32 + 3] / 255)
    test = read_cifar10(tmp_path / "cifar-10-batches-py", train=False)
    assert test.images.shape == (2, 3, 32, 32) and test.labels.tolist() == [5, 6]


def test_cifar10_reader_refuses_code_in_pickles_and_missing_batches(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    write_cifar(folder)
    (folder / "test_batch").write_bytes(pickle.dumps({"data": Path("evil")}))
    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        read_cifar10(folder, train=False)
    (folder / "data_batch_3").unlink()
    with pytest.raises(FileNotFoundError, match="data_batch_3"):
        read_cifar10(folder)


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_reader(tmp_path: Path, gz: bool) -> None:
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, (3, 28, 28), dtype=np.uint8)
    labels = np.array([7, 2, 1], dtype=np.uint8)
    for name, arr, code in [("t10k-images-idx3-ubyte", images, 8),
                            ("t10k-labels-idx1-ubyte", labels, 8)]:
        raw = idx_bytes(arr, code)
        if gz:
            (tmp_path / f"{name}.gz").write_bytes(gzip.compress(raw))
        else:
            (tmp_path / name).write_bytes(raw)
    data = read_mnist(tmp_path, train=False, classes=FASHION_MNIST_CLASSES)
    assert data.images.shape == (3, 1, 28, 28) and data.labels.tolist() == [7, 2, 1]
    np.testing.assert_allclose(data.images[1, 0].numpy(), images[1] / 255, rtol=1e-6)
    assert data.classes[7] == "Sneaker"
    with pytest.raises(FileNotFoundError, match="train-images-idx3-ubyte"):
        read_mnist(tmp_path, train=True)


def test_idx_reader_other_types_and_bad_files(tmp_path: Path) -> None:
    values = (np.arange(6).reshape(2, 3) / 4).astype(">f4")
    (tmp_path / "f.idx").write_bytes(idx_bytes(values, 0x0D))
    np.testing.assert_array_equal(read_idx(tmp_path / "f.idx"), values)
    (tmp_path / "bad").write_bytes(b"\x01\x02\x08\x01" + bytes(4))
    with pytest.raises(ValueError, match="not an idx file"):
        read_idx(tmp_path / "bad")
    (tmp_path / "short").write_bytes(idx_bytes(np.zeros((4, 4), np.uint8), 8)[:-3])
    with pytest.raises(ValueError, match="header says"):
        read_idx(tmp_path / "short")
    with pytest.raises(FileNotFoundError):
        read_idx(tmp_path / "absent")


def test_image_folder_reader(tmp_path: Path) -> None:
    for cls, colour in [("n02", (0, 0, 255)), ("n01", (255, 0, 0))]:
        (tmp_path / cls).mkdir()
        Image.new("RGB", (40, 20), colour).save(tmp_path / cls / "a.png")
        Image.new("L", (16, 16), 128).save(tmp_path / cls / "b.JPEG")
        (tmp_path / cls / "notes.txt").write_text("not an image")
    (tmp_path / "empty").mkdir()
    data = read_image_folder(tmp_path, size=8)
    assert data.classes == ("n01", "n02") and data.labels.tolist() == [0, 0, 1, 1]
    assert data.images.shape == (4, 3, 8, 8)
    torch.testing.assert_close(data.images[0, :, 3, 3], torch.tensor([1.0, 0.0, 0.0]))
    torch.testing.assert_close(data.images[2, :, 0, 0], torch.tensor([0.0, 0.0, 1.0]))
    assert abs(float(data.images[1].mean()) - 128 / 255) < 0.02  # JPEG, grey → RGB
    assert len(read_image_folder(tmp_path, size=8, max_per_class=1)) == 2
    with pytest.raises(FileNotFoundError, match="class"):
        read_image_folder(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="not a folder"):
        read_image_folder(tmp_path / "n01" / "a.png")


# issue 16: bad files are refused naming the file


def test_a_cifar_batch_with_fewer_labels_than_images_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    write_cifar(folder)
    batch = pickle.loads((folder / "data_batch_2").read_bytes())
    batch[b"labels"] = batch[b"labels"][:1]
    (folder / "data_batch_2").write_bytes(pickle.dumps(batch, protocol=2))
    with pytest.raises(ValueError, match=r"data_batch_2: 2 images but 1 labels"):
        read_cifar10(folder)


@pytest.mark.parametrize("cut", [0, 10, 300, -5])
def test_a_truncated_cifar_pickle_names_the_file(tmp_path: Path, cut: int) -> None:
    folder = tmp_path / "c"
    write_cifar(folder)
    raw = (folder / "test_batch").read_bytes()
    (folder / "test_batch").write_bytes(raw[:cut])
    with pytest.raises(ValueError, match=r"test_batch: cannot read this CIFAR-10 pickle"):
        read_cifar10(folder, train=False)


def test_a_cifar_batch_without_labels_or_with_bad_rows_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    write_cifar(folder)
    (folder / "test_batch").write_bytes(pickle.dumps({b"data": np.zeros((2, 3072), np.uint8)}))
    with pytest.raises(ValueError, match=r"test_batch: no \['labels'\]"):
        read_cifar10(folder, train=False)
    (folder / "test_batch").write_bytes(pickle.dumps(
        {b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]}))
    with pytest.raises(ValueError, match=r"test_batch: data must be \(n, 3072\)"):
        read_cifar10(folder, train=False)


def test_a_truncated_gz_names_the_file(tmp_path: Path) -> None:
    raw = gzip.compress(idx_bytes(np.arange(60, dtype=np.uint8).reshape(3, 4, 5), 0x08))
    for name, data in (("cut.gz", raw[: len(raw) // 2]), ("junk.gz", b"not gzip at all")):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ValueError, match=rf"{name}: cannot read this gzipped idx file"):
            read_idx(tmp_path / name)


def test_a_truncated_jpeg_names_the_file(tmp_path: Path) -> None:
    cls = tmp_path / "cats"
    cls.mkdir()
    Image.new("RGB", (40, 40), (200, 10, 10)).save(cls / "good.jpg")
    raw = (cls / "good.jpg").read_bytes()
    (cls / "zbroken.jpg").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match=r"zbroken\.jpg: cannot read this image"):
        read_image_folder(tmp_path, size=8)
    (cls / "zbroken.jpg").write_bytes(b"")
    with pytest.raises(ValueError, match=r"zbroken\.jpg: cannot read this image"):
        read_image_folder(tmp_path, size=8)


def test_load_images_from_every_format(tmp_path: Path) -> None:
    digits = load_images()
    assert digits.images.shape == (1797, 1, 8, 8)
    subset = load_images(n_images=50)
    assert len(subset) == 50 and len(set(subset.labels.tolist())) > 5
    cifar = tmp_path / "cifar"
    cifar.mkdir()
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {b"data": np.full((2, 3072), 255, np.uint8), b"labels": [1, 2]}
        (cifar / name).write_bytes(pickle.dumps(batch, protocol=2))
    assert load_images("cifar10", cifar).images.shape == (10, 3, 32, 32)
    mnist = tmp_path / "mnist"
    mnist.mkdir()
    _write_idx(mnist / "train-images-idx3-ubyte", np.zeros((3, 28, 28), np.uint8))
    _write_idx(mnist / "train-labels-idx1-ubyte", np.array([0, 9, 4], np.uint8))
    assert load_images("mnist", mnist).classes[9] == "9"
    assert load_images("fashion_mnist", mnist).classes[9] == "Ankle boot"
    for cls in ("n01", "n02"):
        (tmp_path / "imgs" / cls).mkdir(parents=True)
        Image.new("RGB", (10, 12), (255, 0, 0)).save(tmp_path / "imgs" / cls / "a.png")
    assert load_images("folder", tmp_path / "imgs", image_size=6).images.shape == (2, 3, 6, 6)
    with pytest.raises(ValueError, match="image_folder"):
        load_images("cifar10")
    with pytest.raises(ValueError, match="image_format"):
        load_images("svhn", tmp_path)


def test_flat_features_are_centred_vectors() -> None:
    X = flat_features(torch.rand(20, 3, 4, 4))
    assert X.shape == (20, 48)
    torch.testing.assert_close(X.mean(0), torch.zeros(48), atol=1e-6, rtol=0)


# issue 27: values a cast would silently change are refused, naming the file


def _one_test_batch(folder: Path, data, labels, names=None) -> Path:
    folder.mkdir()
    (folder / "test_batch").write_bytes(pickle.dumps({b"data": data, b"labels": labels},
                                                     protocol=2))
    if names is not None:
        (folder / "batches.meta").write_bytes(pickle.dumps({b"label_names": names}, protocol=2))
    return folder / "test_batch"


@pytest.mark.parametrize(("data", "labels", "message"), [
    (np.full((2, 3072), 300, dtype=np.int64), [0, 1], r"pixels must be integers in 0\.\.255; "
                                                       r"entry 0 is 300"),  # a cast gave 44
    (np.full((2, 3072), 0.5), [0, 1], r"pixels must be integers.*entry 0 is 0\.5"),  # gave 0
    (np.full((2, 3072), -1, dtype=np.int16), [0, 1], "pixels must be integers"),
    (np.zeros((2, 3072), dtype=np.uint8), [0, 1.7], r"labels must be integers in 0\.\.9; "
                                                    r"entry 1 is 1\.7"),  # a cast gave 1
    (np.zeros((2, 3072), dtype=np.uint8), [0, 10], r"labels must be integers in 0\.\.9"),
    (np.zeros((2, 3072), dtype=np.uint8), ["a", "b"], "labels must be integers"),
], ids=["pixel 300", "float pixel", "negative pixel", "label 1.7", "label 10", "str labels"])
def test_cifar_values_a_cast_would_change_are_refused(tmp_path: Path, data, labels, message):
    path = _one_test_batch(tmp_path / "c", data, labels)
    with pytest.raises(ValueError, match=rf"{path}: {message}"):
        read_cifar10(tmp_path / "c", train=False)


def test_a_cifar_meta_with_fewer_names_than_labels_is_refused(tmp_path: Path) -> None:
    _one_test_batch(tmp_path / "c", np.zeros((10, 3072), dtype=np.uint8), list(range(10)),
                    [b"a", b"b"])
    with pytest.raises(ValueError, match=r"batches\.meta: 2 class names for labels up to 9"):
        read_cifar10(tmp_path / "c", train=False)


@pytest.mark.parametrize(("labels", "images", "bad"), [
    (np.array([1, 200], dtype=np.uint8), np.zeros((2, 28, 28), dtype=np.uint8), "labels"),
    (np.array([1, 2], dtype=np.uint8), np.full((2, 28, 28), 300, dtype=">i2"), "images"),
])
def test_mnist_labels_beyond_the_classes_and_pixels_beyond_255_are_refused(tmp_path, labels,
                                                                          images, bad):
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(idx_bytes(labels, 8))
    (tmp_path / "t10k-images-idx3-ubyte").write_bytes(idx_bytes(images, 0x08 if images.dtype
                                                                == np.uint8 else 0x0B))
    with pytest.raises(ValueError, match=rf"t10k-{bad}-idx\d-ubyte: "):
        read_mnist(tmp_path, train=False)


def test_an_idx_file_cut_inside_its_header_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "cut-idx3-ubyte"
    path.write_bytes(idx_bytes(np.zeros((2, 28, 28), dtype=np.uint8), 8)[:6])
    with pytest.raises(ValueError, match=rf"{path}: the file ends inside its header"):
        read_idx(path)
