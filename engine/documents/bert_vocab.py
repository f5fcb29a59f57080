"""A WordPiece ``vocab.txt`` in llama.cpp's form (``read_vocabulary``): the phantom-space
tokens, their types, the special ids and the normalizer flags, as the reference converter
(convert_hf_to_gguf.py ``BertModel.set_vocab`` and gguf's ``SpecialVocab``) writes them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.documents.bert_source import BertSource, ConversionFailed, read_json

_PHANTOM_SPACE = "\u2581"
_CONTINUATION = "##"
# BERT's special tokens when the folder has no tokenizer.json naming them.
_DEFAULT_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
_SPECIAL_ROLES = {"cls": "[CLS]", "sep": "[SEP]", "unk": "[UNK]", "pad": "[PAD]", "mask": "[MASK]"}


@dataclass(frozen=True)
class Vocabulary:
    tokens: tuple[str, ...]  # in llama.cpp's phantom-space form
    types: tuple[int, ...]  # gguf.TokenType values
    special_ids: Mapping[str, int]  # role (bos, eos, unk, sep, pad, cls, mask) -> id
    lowercase: bool | None
    strip_accents: bool | None

    def write(self, writer: Any) -> None:
        writer.add_tokenizer_model("bert")
        # llama.cpp reads no pre-tokenizer name for a WordPiece vocabulary (its "bert"
        # tokenizer always splits as BERT does); "default" says exactly that.
        writer.add_tokenizer_pre("default")
        writer.add_token_list(list(self.tokens))
        writer.add_token_types(list(self.types))
        for role, token_id in self.special_ids.items():
            writer.add_uint32(_SPECIAL_ID_KEYS[role], token_id)
        # What the reference converter derives from the "[CLS] $A [SEP]" template; llama.cpp's
        # WordPiece tokenizer adds [CLS] and [SEP] whenever special tokens are asked for.
        writer.add_bool("tokenizer.ggml.add_bos_token", True)
        writer.add_bool("tokenizer.ggml.add_eos_token", True)
        writer.add_bool("tokenizer.ggml.add_sep_token", False)
        if self.lowercase is not None:
            writer.add_bool("tokenizer.ggml.normalizer.lowercase", self.lowercase)
        if self.strip_accents is not None:
            writer.add_bool("tokenizer.ggml.normalizer.strip_accents", self.strip_accents)


# Keys spelled as llama.cpp reads them ("seperator" included); gguf 0.19's writer lacks some.
_SPECIAL_ID_KEYS = {
    "bos": "tokenizer.ggml.bos_token_id",
    "eos": "tokenizer.ggml.eos_token_id",
    "unk": "tokenizer.ggml.unknown_token_id",
    "sep": "tokenizer.ggml.seperator_token_id",
    "pad": "tokenizer.ggml.padding_token_id",
    "cls": "tokenizer.ggml.cls_token_id",
    "mask": "tokenizer.ggml.mask_token_id",
}


def read_vocabulary(source: BertSource, vocab_size: int) -> Vocabulary:
    from gguf import TokenType

    folder = source.folder
    try:
        text = source.vocab.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConversionFailed(folder, f"vocab.txt cannot be read: {exc}".splitlines()[0]) from None
    # As transformers' load_vocab: one token per line, only the newline removed.
    words = text.split("\n")
    if words and words[-1] == "":
        words.pop()
    if not words:
        raise ConversionFailed(folder, "vocab.txt is empty")
    if len(words) > vocab_size:
        raise ConversionFailed(folder, f"vocab.txt has {len(words):,} tokens, the model {vocab_size:,}")
    tokenizer = read_json(folder, source.tokenizer_json) if source.tokenizer_json else {}
    tokenizer_config = read_json(folder, source.tokenizer_config) if source.tokenizer_config else {}

    control, user_defined = _added_tokens(tokenizer, words)
    tokens: list[str] = []
    types: list[int] = []
    for word in words:
        if word in control:
            tokens.append(word)
            types.append(TokenType.CONTROL)
            continue
        types.append(TokenType.USER_DEFINED if word in user_defined else TokenType.NORMAL)
        tokens.append(word[len(_CONTINUATION) :] if word.startswith(_CONTINUATION) else _PHANTOM_SPACE + word)
    for i in range(len(words), vocab_size):  # rows the embedding matrix has beyond the list
        tokens.append(f"[PAD{i}]")
        types.append(TokenType.UNUSED)
    seen: dict[str, int] = {}
    for i, token in enumerate(tokens):
        if (first := seen.setdefault(token, i)) != i:
            raise ConversionFailed(
                folder, f"tokens {first} and {i} are the same after conversion ({token!r})"
            )

    ids = {word: i for i, word in reversed(list(enumerate(words)))}
    special: dict[str, int] = {}
    for role, default in _SPECIAL_ROLES.items():
        wanted = _token_content(tokenizer_config.get(f"{role}_token")) or default
        if wanted in ids:
            special[role] = ids[wanted]
        elif role in ("cls", "sep", "unk"):
            # llama.cpp's WordPiece tokenizer asserts [CLS] and [SEP] exist (an abort, not an error).
            raise ConversionFailed(folder, f"vocab.txt has no {wanted} token")
    special_ids = {"bos": special["cls"], "eos": special["sep"], **special}
    lowercase, strip_accents = _normalizer(tokenizer.get("normalizer"), tokenizer_config)
    return Vocabulary(tuple(tokens), tuple(types), special_ids, lowercase, strip_accents)


def _added_tokens(tokenizer: Mapping[str, Any], words: list[str]) -> tuple[frozenset[str], frozenset[str]]:
    """(special, other) added tokens: CONTROL and USER_DEFINED in the reference converter."""
    added = tokenizer.get("added_tokens")
    if not isinstance(added, list):
        return frozenset(w for w in _DEFAULT_SPECIALS if w in words), frozenset()
    special: set[str] = set()
    other: set[str] = set()
    for entry in added:
        if not isinstance(entry, dict) or not isinstance(content := entry.get("content"), str):
            continue
        (special if entry.get("special") else other).add(content)
    return frozenset(special), frozenset(other - special)


def _token_content(entry: Any) -> str | None:
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict) and isinstance(content := entry.get("content"), str):
        return content
    return None


def _normalizer(normalizer: Any, tokenizer_config: Mapping[str, Any]) -> tuple[bool | None, bool | None]:
    """(lowercase, strip_accents) as gguf's SpecialVocab reads a BertNormalizer; None: unsaid
    (llama.cpp then lowercases, and strips accents when it lowercases)."""
    lowercase: bool | None = None
    strip: bool | None = None

    def visit(node: Any) -> None:
        nonlocal lowercase, strip
        if not isinstance(node, dict):
            return
        kind = node.get("type")
        if kind == "Lowercase":
            lowercase = True
        elif kind == "StripAccents":
            strip = True
        elif kind == "BertNormalizer":
            if isinstance(node.get("lowercase"), bool):
                lowercase = node["lowercase"]
            if isinstance(node.get("strip_accents"), bool):
                strip = node["strip_accents"]
        elif kind == "Sequence":
            for child in node.get("normalizers") or ():
                visit(child)

    visit(normalizer)
    if lowercase is None and isinstance(tokenizer_config.get("do_lower_case"), bool):
        lowercase = tokenizer_config["do_lower_case"]
    if strip is None and isinstance(tokenizer_config.get("strip_accents"), bool):
        strip = tokenizer_config["strip_accents"]
    return lowercase, strip
