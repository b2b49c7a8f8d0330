"""Images: scikit-learn's bundled digits, and readers for CIFAR-10, MNIST and image folders.

Nothing is downloaded. The default is scikit-learn's 1797 grey 8×8 digits. The readers take a
folder the user has downloaded, in its standard format, and return torch tensors: CIFAR-10,
python version (``cifar-10-batches-py``); MNIST / Fashion-MNIST (idx files, gzipped or not);
an ImageNet-style folder of class subfolders of JPEG/PNG images.

Explained in: book/01_conservation/06_real_data.ipynb and book/02_percolation/08_real_data.ipynb.
"""
from __future__ import annotations

import gzip
import pickle
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from flowlaws.data.files import checked_folder, first_existing, unreadable

__all__ = [
    "CIFAR10_CLASSES",
    "ImageData",
    "digits_images",
    "read_cifar10",
    "read_idx",
    "MNIST_CLASSES",
    "FASHION_MNIST_CLASSES",
    "read_mnist",
    "IMAGE_EXTENSIONS",
    "read_image_folder",
    "IMAGE_FORMATS",
    "load_images",
    "flat_features",
]

CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                   "ship", "truck")


@dataclass(frozen=True)
class ImageData:
    """Images ``(N, C, H, W)`` float32 in ``[0, 1]``, labels ``(N,)`` int64, class names."""

    images: torch.Tensor
    labels: torch.Tensor
    classes: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.labels.shape[0])


def digits_images() -> ImageData:
    """scikit-learn's bundled digits: ``(1797, 1, 8, 8)``, grey levels 0..16 scaled to [0, 1]."""
    try:
        from sklearn.datasets import load_digits
    except ModuleNotFoundError as error:
        raise ModuleNotFoundError(
            "the digits need scikit-learn, flowlaws's 'data' extra: pip install 'flowlaws[data]'"
        ) from error

    digits = load_digits()
    images = torch.tensor(digits.images / 16.0, dtype=torch.float32).unsqueeze(1)
    return ImageData(images, torch.tensor(digits.target, dtype=torch.int64),
                     tuple(str(c) for c in digits.target_names))


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles dicts, lists, bytes and numpy arrays only: a pickle cannot run other code."""

    _allowed = {
        ("numpy.core.multiarray", "_reconstruct"): ("numpy._core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"): ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.numeric", "_frombuffer"): ("numpy._core.numeric", "_frombuffer"),
        ("numpy._core.numeric", "_frombuffer"): ("numpy._core.numeric", "_frombuffer"),
        ("numpy", "ndarray"): ("numpy", "ndarray"),
        ("_codecs", "encode"): ("_codecs", "encode"),  # how protocol 2 stores bytes
        ("numpy", "dtype"): ("numpy", "dtype"),
    }

    def find_class(self, module: str, name: str) -> object:
        if (module, name) not in self._allowed:
            raise _Refused(f"refusing to load {module}.{name} from a data file")
        return super().find_class(*self._allowed[(module, name)])


class _Refused(pickle.UnpicklingError):
    """A pickle that asks for something else than arrays and containers."""


def _unpickle(path: Path, keys: tuple[str, ...]) -> dict:
    """The dict pickled in ``path`` (bytes keys decoded); a damaged file or one without
    ``keys`` is a ``ValueError`` naming it."""
    try:
        with path.open("rb") as f:
            batch = _ArrayUnpickler(f, encoding="bytes").load()
    except _Refused as error:
        raise pickle.UnpicklingError(f"{path}: {error}") from error
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
            IndexError, KeyError, MemoryError) as error:
        raise unreadable(path, "CIFAR-10 pickle", error) from error
    if not isinstance(batch, dict):
        raise ValueError(f"{path}: a CIFAR-10 batch is a pickled dict, got {type(batch).__name__}")
    batch = {k.decode() if isinstance(k, bytes) else k: v for k, v in batch.items()}
    absent = [k for k in keys if k not in batch]
    if absent:
        raise ValueError(f"{path}: no {absent} in this CIFAR-10 batch; it has {sorted(batch)}")
    return batch


def _integers(values: np.ndarray, path: Path, what: str, low: int, high: int) -> np.ndarray:
    """``values`` as int64 when every entry is an integer in ``[low, high]``, else a
    ``ValueError`` naming the file, ``what`` and the first bad entry (``300`` is no pixel: a
    cast to uint8 would make it 44; ``1.7`` no label: a cast would make it 1)."""
    if values.dtype == bool or not np.issubdtype(values.dtype, np.number):
        raise ValueError(f"{path}: {what} must be integers in {low}..{high}, got dtype "
                         f"{values.dtype}")
    flat = values.reshape(-1)
    bad = ~np.isfinite(flat) | (flat != np.round(flat)) | (flat < low) | (flat > high) \
        if np.issubdtype(values.dtype, np.floating) else (flat < low) | (flat > high)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{path}: {what} must be integers in {low}..{high}; entry {i} is "
                         f"{flat[i].item()!r} ({int(bad.sum())} such entries)")
    return values.astype(np.int64)


def _cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``(n, 3072)`` uint8 rows and ``(n,)`` labels of one batch, checked against each other:
    pixels must be integers in 0..255 and labels integers in 0..9 (nothing is cast)."""
    batch = _unpickle(path, ("data", "labels"))
    try:
        data = np.asarray(batch["data"])
        labels = np.asarray(batch["labels"])
    except (TypeError, ValueError) as error:
        raise unreadable(path, "CIFAR-10 batch", error) from error
    if data.ndim == 2 and data.shape[1] == 3072:
        data = _integers(data, path, "pixels", 0, 255).astype(np.uint8)
    if labels.ndim == 1:
        labels = _integers(labels, path, "labels", 0, 9)
    if data.ndim != 2 or data.shape[1] != 3072:
        raise ValueError(f"{path}: data must be (n, 3072) rows of 32x32x3 pixels, "
                         f"got shape {data.shape}")
    if labels.shape != (len(data),):
        raise ValueError(f"{path}: {len(data)} images but {labels.size} labels "
                         f"(labels of shape {labels.shape})")
    if labels.size and not (0 <= labels.min() and labels.max() < 10):
        raise ValueError(f"{path}: labels must lie in 0..9, got {labels.min()}..{labels.max()}")
    return data, labels


def read_cifar10(folder: str | Path, *, train: bool = True) -> ImageData:
    """CIFAR-10, python version: ``(50000 | 10000, 3, 32, 32)`` images and their labels.

    ``folder`` is ``cifar-10-batches-py`` (or the folder holding it), with the pickled
    ``data_batch_1`` … ``data_batch_5``, ``test_batch`` and ``batches.meta``. Each batch
    holds ``data``, ``(n, 3072)`` uint8 rows (1024 red, 1024 green, 1024 blue values, each
    a 32×32 image in row order), and ``labels``. The pickles are read with a restricted
    unpickler that accepts only arrays and plain containers.
    """
    root = checked_folder(folder, "the CIFAR-10 python batches (data_batch_1..5, test_batch)")
    if (root / "cifar-10-batches-py").is_dir():
        root = root / "cifar-10-batches-py"
    names = [f"data_batch_{i}" for i in range(1, 6)] if train else ["test_batch"]
    missing = [n for n in names if not (root / n).is_file()]
    if missing:
        raise FileNotFoundError(f"missing {missing} in {root} (the CIFAR-10 python version)")
    batches = [_cifar_batch(root / n) for n in names]
    data = np.concatenate([b[0] for b in batches])
    labels = np.concatenate([b[1] for b in batches])
    classes = CIFAR10_CLASSES
    if (root / "batches.meta").is_file():
        meta = _unpickle(root / "batches.meta", ("label_names",))
        classes = tuple(n.decode() if isinstance(n, bytes) else n for n in meta["label_names"])
        if not all(isinstance(n, str) for n in classes) or (labels.size and
                                                            len(classes) <= labels.max()):
            raise ValueError(f"{root / 'batches.meta'}: {len(classes)} class names for labels "
                             f"up to {labels.max()}; a CIFAR-10 batches.meta lists 10 names")
    images = torch.from_numpy(data.reshape(-1, 3, 32, 32).astype(np.float32) / 255.0)
    return ImageData(images, torch.from_numpy(labels), classes)


_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: str | Path) -> np.ndarray:
    """An array from an idx file (the MNIST format), gzipped when the name ends in ``.gz``.

    Header: two zero bytes, a type code (0x08 uint8 … 0x0E float64), the number of
    dimensions ``d``, then ``d`` big-endian uint32 sizes; the data follow in row order.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no idx file at {path}")
    try:
        with (gzip.open if path.suffix == ".gz" else open)(path, "rb") as f:
            raw = f.read()
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:  # a truncated or damaged .gz
        raise unreadable(path, "gzipped idx file", error) from error
    if len(raw) < 4 or raw[0:2] != b"\x00\x00" or raw[2] not in _IDX_DTYPES:
        raise ValueError(f"{path} is not an idx file (magic number {raw[:4].hex()})")
    ndim = raw[3]
    if len(raw) < 4 + 4 * ndim:
        raise ValueError(f"{path}: the file ends inside its header ({len(raw)} bytes, the header "
                         f"of a {ndim}-dimensional idx file has {4 + 4 * ndim}): truncated")
    shape = tuple(int(s) for s in np.frombuffer(raw, ">u4", count=ndim, offset=4))
    dtype = np.dtype(_IDX_DTYPES[raw[2]])
    body = raw[4 + 4 * ndim :]
    if len(body) != int(np.prod(shape)) * dtype.itemsize:
        raise ValueError(f"{path}: header says {shape}, but the file holds {len(body)} bytes")
    return np.frombuffer(body, dtype).reshape(shape).astype(dtype.newbyteorder("="))


MNIST_CLASSES = tuple(str(i) for i in range(10))


FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal",
                         "Shirt", "Sneaker", "Bag", "Ankle boot")


def _idx_file(root: Path, prefix: str, kind: str) -> Path:
    stems = [f"{prefix}-{kind}-idx{3 if kind == 'images' else 1}-ubyte",
             f"{prefix}-{kind}.idx{3 if kind == 'images' else 1}-ubyte"]
    return first_existing(root, [s + ext for s in stems for ext in ("", ".gz")])


def read_mnist(
    folder: str | Path, *, train: bool = True, classes: Sequence[str] = MNIST_CLASSES
) -> ImageData:
    """MNIST or Fashion-MNIST from idx files: ``(N, 1, 28, 28)`` images in [0, 1], labels.

    ``folder`` holds ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
    ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte`` (each may end in ``.gz``).
    For Fashion-MNIST pass ``classes=FASHION_MNIST_CLASSES``.
    """
    root = checked_folder(folder, "the idx files train-/t10k-images-idx3-ubyte[.gz] and -labels-")
    prefix = "train" if train else "t10k"
    image_file, label_file = _idx_file(root, prefix, "images"), _idx_file(root, prefix, "labels")
    images, labels = read_idx(image_file), read_idx(label_file)
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise ValueError(f"{root}: images {images.shape} and labels {labels.shape} do not match")
    classes = tuple(classes)
    labels = _integers(labels, label_file, f"labels (for {len(classes)} classes)", 0,
                       len(classes) - 1)
    _integers(images, image_file, "pixels", 0, 255)
    tensor = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    return ImageData(tensor, torch.from_numpy(labels), classes)


IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")


def _load_image(path: Path, size: int) -> np.ndarray:
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            fitted = ImageOps.fit(img.convert("RGB"), (size, size), Image.Resampling.BILINEAR)
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        # a truncated JPEG: "image file is truncated"; not an image: UnidentifiedImageError
        raise unreadable(path, "image", error) from error
    return np.asarray(fitted, dtype=np.float32).transpose(2, 0, 1) / 255.0


def read_image_folder(
    folder: str | Path, size: int = 32, *, max_per_class: int | None = None
) -> ImageData:
    """An ImageNet-style folder: one subfolder per class, of JPEG/PNG files.

    Every image is converted to RGB, centre-cropped to a square and resized to
    ``size × size`` (``PIL.ImageOps.fit``): the result is ``(N, 3, size, size)`` in [0, 1].
    Classes are the subfolders that hold images, sorted by name (ImageNet's ``n01440764`` …);
    ``max_per_class`` keeps the first files of each (the full ImageNet does not fit in memory).
    """
    root = checked_folder(folder, "one subfolder per class of .jpg/.jpeg/.png images")
    classes, arrays, labels = [], [], []
    for sub in sorted(p for p in root.iterdir() if p.is_dir()):
        files = sorted(f for f in sub.iterdir() if f.suffix.lower() in IMAGE_EXTENSIONS)
        if not files:
            continue
        arrays += [_load_image(f, size) for f in files[:max_per_class]]
        labels += [len(classes)] * len(files[:max_per_class])
        classes.append(sub.name)
    if not arrays:
        raise FileNotFoundError(f"no class subfolders with {IMAGE_EXTENSIONS} images in {root}")
    return ImageData(torch.from_numpy(np.stack(arrays)), torch.tensor(labels), tuple(classes))


IMAGE_FORMATS = ("digits", "cifar10", "mnist", "fashion_mnist", "folder")


def load_images(image_format: str = "digits", folder: str | None = None,
                n_images: int | None = None, image_size: int = 32) -> ImageData:
    """Images from the shipped digits or a folder in a standard format (training split).

    ``image_format``: ``"digits"`` (shipped), ``"cifar10"``, ``"mnist"``, ``"fashion_mnist"``,
    ``"folder"`` (ImageNet-style class subfolders, resized to ``image_size``). ``n_images``
    keeps a class-mixed random subset (seed 0) of that many.
    Explained in: book/01_conservation/06_real_data.ipynb
    """
    if image_format not in IMAGE_FORMATS:
        raise ValueError(f"image_format must be one of {IMAGE_FORMATS}, got {image_format!r}")
    if image_format == "digits":
        data = digits_images()
    elif folder is None:
        raise ValueError(f"image_format={image_format!r} needs image_folder")
    elif image_format == "cifar10":
        data = read_cifar10(folder)
    elif image_format == "folder":
        data = read_image_folder(folder, image_size)
    else:
        fashion = image_format == "fashion_mnist"
        data = read_mnist(folder, classes=FASHION_MNIST_CLASSES if fashion else MNIST_CLASSES)
    if n_images is not None and n_images < len(data):
        keep = torch.randperm(len(data), generator=torch.Generator().manual_seed(0))[:n_images]
        data = ImageData(data.images[keep], data.labels[keep], data.classes)
    return data


def flat_features(images: torch.Tensor) -> torch.Tensor:
    """``(N, C, H, W)`` images as ``(N, C·H·W)`` features, each centred on its mean over ``N``."""
    X = images.flatten(1)
    return X - X.mean(0, keepdim=True)
