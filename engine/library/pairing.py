"""Which projector goes with which text model in the library, and a file name's model stem.

A projector fits the text models whose embedding size equals its projection size; among those,
the best guess comes first: the same name stem (``name_stem``), then the same folder.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from engine.catalog import ModelInfo, ModelKind
from engine.library.scan import SPLIT_RE

_QUANT_SUFFIX = re.compile(
    r"[-_.](?:i?q\d\w*|tq\d\w*|f16|f32|fp16|fp32|bf16|mxfp4\w*|nvfp4\w*|\d+bit)$", re.IGNORECASE
)
_MMPROJ_WORD = re.compile(r"(?:^|[-_.])mmproj(?=$|[-_.])", re.IGNORECASE)
_GENERIC_STEMS = frozenset({"", "model", "vision", "projector", "encoder"})


def name_stem(path: Path | str) -> str:
    """The model-family part of a file name, for matching projectors to models.

    "mmproj-foo-f16.gguf" and "foo-Q4_K_M.gguf" both give "foo"; split suffixes, the
    word "mmproj" and quantisation suffixes are dropped, separators unified.
    """
    name = Path(path).name
    m = SPLIT_RE.match(name)
    stem = m["stem"] if m else re.sub(r"\.gguf$", "", name, flags=re.IGNORECASE)
    stem = _MMPROJ_WORD.sub("", stem).strip("-_. ")
    while True:
        shorter = _QUANT_SUFFIX.sub("", stem)
        if shorter == stem:
            break
        stem = shorter
    stem = re.sub(r"[-_. ]+", "-", stem.casefold()).strip("-")
    return "" if stem in _GENERIC_STEMS else stem


def _affinity(a: Path, b: Path) -> tuple[int, int, int]:
    """How likely files ``a`` and ``b`` belong together; higher is better."""
    sa, sb = name_stem(a), name_stem(b)
    if sa and sa == sb:
        stem_score = 2
    elif sa and sb and (sa in sb or sb in sa):
        stem_score = 1
    else:
        stem_score = 0
    common = next((i for i, (x, y) in enumerate(zip(sa, sb, strict=False)) if x != y), min(len(sa), len(sb)))
    return stem_score, int(a.parent == b.parent), common


def _fits(projector: ModelInfo, model: ModelInfo) -> bool:
    p = projector.projector
    return (
        p is not None
        and model.kind is ModelKind.TEXT
        and model.split_index == 0
        and model.embedding_length is not None
        and p.projection_dim == model.embedding_length
    )


def pair_files(files: Sequence[tuple[Path, ModelInfo]]) -> list[tuple[Path, ...]]:
    """For each file (in order) the files it pairs with, best first: a text model's
    projectors, a projector's text models."""
    texts = [(path, info) for path, info in files if info.kind is ModelKind.TEXT]
    projectors = [(path, info) for path, info in files if info.kind is ModelKind.PROJECTOR]
    out: list[tuple[Path, ...]] = []
    for path, info in files:
        if info.kind is ModelKind.TEXT:
            fitting = [p for p, p_info in projectors if _fits(p_info, info)]
        else:
            fitting = [m for m, m_info in texts if _fits(info, m_info)]
        fitting.sort(key=lambda other: (_negate(_affinity(path, other)), str(other)))
        out.append(tuple(fitting))
    return out


def _negate(score: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(-x for x in score)



# A draft model pays only when it decodes far cheaper than its target: the default pairs one
# of at most this share of the target's parameters (Qwen2.5-Coder 0.5B for the 1.5B: 0.32).
DRAFT_SHARE = 0.4


def draft_candidates(target: ModelInfo, models: Iterable[ModelInfo]) -> tuple[ModelInfo, ...]:
    """Library models that can draft for ``target``: the same vocabulary (size and tokenizer)
    and fewer parameters; the default choice (``best_draft``) first, then larger to smaller."""
    usable = [
        m
        for m in models
        if not m.is_projector
        and m.path != target.path
        and m.vocab_size is not None
        and m.vocab_size == target.vocab_size
        and m.tokenizer_model == target.tokenizer_model
        and m.parameter_count < target.parameter_count
    ]
    best = best_draft(target, usable)
    rest = sorted((m for m in usable if m is not best), key=lambda m: -m.parameter_count)
    return (best, *rest) if best is not None else tuple(rest)


def best_draft(target: ModelInfo, candidates: Iterable[ModelInfo]) -> ModelInfo | None:
    """The draft paired by default: the largest candidate (the likeliest to agree with the
    target) within ``DRAFT_SHARE`` of its size (cheap enough to pay); None without one."""
    small = [m for m in candidates if m.parameter_count <= DRAFT_SHARE * target.parameter_count]
    return max(small, key=lambda m: m.parameter_count, default=None)
