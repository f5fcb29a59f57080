"""A WordPiece vocab.txt in llama.cpp's form: phantom-space tokens, their types, the special
ids and the normalizer flags (as convert_hf_to_gguf.py's BertModel and gguf's SpecialVocab)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import gguf
import pytest

from engine.documents.bert_source import ConversionFailed, find_source
from engine.documents.bert_vocab import read_vocabulary
from tests.engine.documents.conftest import TINY_SPECIALS, TINY_WORDS, write_tiny_bert

TT = gguf.TokenType
N = len(TINY_SPECIALS) + len(TINY_WORDS)


def vocab_of(folder: Path, size: int = N):
    return read_vocabulary(find_source(folder), size)


def test_phantom_space_form(tmp_path: Path) -> None:
    v = vocab_of(write_tiny_bert(tmp_path / "src"))
    assert v.tokens[: len(TINY_SPECIALS)] == TINY_SPECIALS  # kept as they are
    assert v.types[: len(TINY_SPECIALS)] == (TT.CONTROL,) * len(TINY_SPECIALS)
    words = dict(zip(TINY_WORDS, v.tokens[len(TINY_SPECIALS) :], strict=True))
    assert words["the"] == "\u2581the" and words["."] == "\u2581."
    assert words["##s"] == "s" and words["##ing"] == "ing"
    assert set(v.types[len(TINY_SPECIALS) :]) == {TT.NORMAL}


def test_special_ids_cls_as_bos_sep_as_eos(tmp_path: Path) -> None:
    v = vocab_of(write_tiny_bert(tmp_path / "src"))
    ids = {name: TINY_SPECIALS.index(f"[{name.upper()}]") for name in ("pad", "unk", "cls", "sep", "mask")}
    assert v.special_ids == {"bos": ids["cls"], "eos": ids["sep"], **ids}


def test_a_short_list_is_padded_as_unused(tmp_path: Path) -> None:
    v = vocab_of(write_tiny_bert(tmp_path / "src"), size=N + 2)
    assert v.tokens[-2:] == (f"[PAD{N}]", f"[PAD{N + 1}]")
    assert v.types[-2:] == (TT.UNUSED, TT.UNUSED)


def test_tokenizer_json_names_the_specials_and_the_normalizer(tmp_path: Path) -> None:
    folder = write_tiny_bert(tmp_path / "src")
    added = [{"id": 0, "content": "[PAD]", "special": True}, {"id": 9, "content": "cat", "special": False}]
    normalizer = {"type": "Sequence", "normalizers": [{"type": "BertNormalizer", "lowercase": False}]}
    (folder / "tokenizer.json").write_text(json.dumps({"added_tokens": added, "normalizer": normalizer}))
    (folder / "tokenizer_config.json").write_text(json.dumps({"strip_accents": True, "sep_token": "[MASK]"}))
    v = vocab_of(folder)
    assert v.types[0] == TT.CONTROL
    assert v.types[TINY_SPECIALS.index("[CLS]")] == TT.NORMAL  # not named special there
    cat = len(TINY_SPECIALS) + TINY_WORDS.index("cat")
    assert v.types[cat] == TT.USER_DEFINED and v.tokens[cat] == "\u2581cat"
    assert (v.lowercase, v.strip_accents) == (False, True)
    assert v.special_ids["sep"] == v.special_ids["eos"] == TINY_SPECIALS.index("[MASK]")


def test_no_normalizer_said_leaves_llama_cpp_its_default(tmp_path: Path) -> None:
    v = vocab_of(write_tiny_bert(tmp_path / "src"))
    assert (v.lowercase, v.strip_accents) == (None, None)


def test_do_lower_case_from_tokenizer_config(tmp_path: Path) -> None:
    folder = write_tiny_bert(tmp_path / "src")
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    assert vocab_of(folder).lowercase is False


@pytest.mark.parametrize(
    ("vocab", "size", "reason"),
    [
        ("", N, "vocab.txt is empty"),
        ("[PAD]\n[UNK]\n[CLS]\nthe\n", N, "no [SEP] token"),
        ("[PAD]\n[CLS]\n[SEP]\nthe\n", N, "no [UNK] token"),
        ("[PAD]\n[UNK]\n[CLS]\n[SEP]\nx\n##\u2581x\n", N, "tokens 4 and 5 are the same after conversion"),
        ("a\nb\nc\n", 2, "vocab.txt has 3 tokens, the model 2"),
    ],
)
def test_refusals(tmp_path: Path, vocab: str, size: int, reason: str) -> None:
    folder = write_tiny_bert(tmp_path / "src")
    (folder / "vocab.txt").write_text(vocab, encoding="utf-8")
    with pytest.raises(ConversionFailed, match=re.escape(reason)):
        vocab_of(folder, size)


def test_a_vocab_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    folder = write_tiny_bert(tmp_path / "src")
    (folder / "vocab.txt").write_bytes(b"[PAD]\n\xff\xfe\n")
    with pytest.raises(ConversionFailed, match=re.escape("vocab.txt cannot be read")):
        vocab_of(folder)
