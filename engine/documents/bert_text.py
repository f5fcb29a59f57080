"""What BERT's own tokenizer does to a text that llama.cpp's WordPiece tokenizer does not.

The ``tokenizers`` library's BertNormalizer and WordPiece (what a BERT embedder was trained
with) and llama.cpp's ``bert`` tokenizer agree on nearly everything; where they do not, the
text is prepared here before llama.cpp sees it, so the tokens are the model's own:

- accents: BERT decomposes (NFD) and drops the non-spacing marks (Mn), then lowercases each
  character on its own. llama.cpp's decomposition of Hangul syllables loses their vowels and
  final consonants (Korean became a string of initial consonants), so the text is
  decomposed and lowercased here; llama.cpp's own pass then changes nothing.
- over-long words: WordPiece gives one [UNK] for a word of more than 100 characters (a
  SHA-512 digest, a base64 blob); llama.cpp splits it into pieces. Such words are cut out
  here and stand for [UNK].

Left as it is: llama.cpp also drops spacing and enclosing marks (Mc, Me: Devanagari vowel
signs, U+20DD), which BERT keeps.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

# WordPiece's max_input_chars_per_word in BERT's tokenizers (transformers and tokenizers).
MAX_WORD_CHARS = 100
# Runs that may hold an over-long word: no whitespace, no ASCII punctuation. Only these
# (rare in prose) are looked at character by character.
# CJK ideographs (BERT's ranges, tokenizers' 0x2B920 included) are words of their own.
_CJK = (
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002a6df\U0002a700-\U0002b73f"
    "\U0002b740-\U0002b81f\U0002b920-\U0002ceaf\U0002f800-\U0002fa1f"
)
_CANDIDATE = re.compile(rf"[^\s!-/:-@\[-`{{-~{_CJK}]{{{MAX_WORD_CHARS + 1},}}")
# Where the non-spacing marks (Mn) are: the BMP, the SMP and the variation selectors.
_MARK_PLANES = (range(0x20000), range(0xE0000, 0xE1000))


@dataclass(frozen=True)
class BertText:
    """BERT's normalizer settings, as the GGUF's tokenizer.ggml.normalizer.* keys say."""

    lowercase: bool = True
    strip_accents: bool = True

    def normalize(self, text: str) -> str:
        """BertNormalizer's accent stripping, then its lowercasing (in that order)."""
        if text.isascii():
            return text.lower() if self.lowercase else text
        if self.strip_accents:
            text = unicodedata.normalize("NFD", text).translate(_non_spacing_marks())
        if self.lowercase:
            # BERT lowercases each character on its own; str.lower() would turn a
            # word-final Σ into ς (its only context rule), so Σ goes first.
            text = text.replace("Σ", "σ").lower()
        return text

    def pieces(self, text: str) -> Iterator[str | None]:
        """``text`` (normalized) in order, each over-long word replaced by None ([UNK])."""
        start = 0
        for begin, end in _long_words(text):
            if begin > start:
                yield text[start:begin]
            yield None
            start = end
        if start < len(text) or not text:
            yield text[start:]


def _long_words(text: str) -> Iterator[tuple[int, int]]:
    """(begin, end) of every word of more than MAX_WORD_CHARS characters, as BERT's
    pre-tokenizer splits: at whitespace, punctuation and CJK characters; control
    characters are removed (they neither count nor split)."""
    for run in _CANDIDATE.finditer(text):
        begin, kept = run.start(), 0
        for i in range(run.start(), run.end()):
            c = text[i]
            category = unicodedata.category(c)
            if category in ("Cc", "Cf"):
                continue
            if category.startswith("P") or category == "Zs" or _is_cjk(c):
                if kept > MAX_WORD_CHARS:
                    yield begin, i
                begin, kept = i + 1, 0
            else:
                kept += 1
        if kept > MAX_WORD_CHARS:
            yield begin, run.end()


@functools.cache
def _non_spacing_marks() -> dict[int, None]:
    """``str.translate``'s table deleting every Mn character (built once: ~40 ms)."""
    return {cp: None for plane in _MARK_PLANES for cp in plane if unicodedata.category(chr(cp)) == "Mn"}


def _is_cjk(c: str) -> bool:
    cp = ord(c)
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B920 <= cp <= 0x2CEAF  # sic: tokenizers' range (Unicode's starts at 0x2B820)
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )
