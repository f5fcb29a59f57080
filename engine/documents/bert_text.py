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

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

# WordPiece's max_input_chars_per_word in BERT's tokenizers (transformers and tokenizers).
MAX_WORD_CHARS = 100
# Letters and digits only: most over-long words are such runs; one is then widened over the
# other characters BERT keeps inside a word (symbols, marks).
_LONG_RUN = re.compile(rf"[^\W_]{{{MAX_WORD_CHARS + 1},}}")


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
            text = "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")
        if self.lowercase:
            # Per character, as BERT does: str.lower() would turn a word-final Σ into ς.
            text = "".join(c.lower() for c in text)
        return text

    def pieces(self, text: str) -> Iterator[str | None]:
        """``text`` (normalized) in order, each over-long word replaced by None ([UNK])."""
        if not _LONG_RUN.search(text):
            yield text
            return
        start = 0
        for match in _LONG_RUN.finditer(text):
            begin, end = _widen(text, match.start(), match.end())
            if begin < start:  # inside the word the previous match already took
                continue
            if end - begin > MAX_WORD_CHARS:
                if begin > start:
                    yield text[start:begin]
                yield None
                start = end
        if start < len(text):
            yield text[start:]


def _widen(text: str, begin: int, end: int) -> tuple[int, int]:
    """The whole BERT word around ``text[begin:end]``: up to whitespace, punctuation or CJK."""
    while begin > 0 and _in_word(text[begin - 1]):
        begin -= 1
    while end < len(text) and _in_word(text[end]):
        end += 1
    return begin, end


def _in_word(c: str) -> bool:
    """Whether BERT's pre-tokenizer keeps ``c`` inside a word (BasicTokenizer's rules)."""
    if c.isspace() or _is_cjk(c):
        return False
    cp = ord(c)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return False  # ASCII punctuation and symbols
    category = unicodedata.category(c)
    return not category.startswith("P") and category not in ("Cc", "Cf", "Zs")


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
