"""The metadata rules a GGUF must meet before llama.cpp or clip.cpp sees it: the keys they
read with a type assert, the vocabulary arrays they index unchecked (``check_text_model``,
which also runs ``load_limits``), and a projector's required hyper-parameters
(``projector_info``, which returns them as a ``ProjectorInfo``)."""

from __future__ import annotations

from pathlib import Path

from engine.base.errors import InvalidModelFile
from engine.catalog.architectures import known_architectures
from engine.catalog.gguf_header import Header, as_int
from engine.catalog.gguf_reader import (
    FLOAT_TYPES,
    INT_TYPES,
    SCALAR_FORMATS,
    VT,
    invalid_file,
    shorten,
    type_name,
)
from engine.catalog.load_limits import check_llama_limits
from engine.catalog.model_info import ProjectorInfo
from engine.catalog.vocabulary import MERGES_KEY, SCORES_KEY, TOKEN_TYPE_KEY, TOKENS_KEY

# clip.cpp reads its hyper-parameters with gguf_get_val_u32/_i32/_f32/_bool, which
# GGML_ASSERT the stored type: a projector with e.g. an INT32 image size aborts the
# process. These are the keys whose exact type we therefore insist on.
_CLIP_INT32_KEYS = frozenset({"clip.minicpmv_version", "clip.minicpmv_query_num"})
# llama.cpp reads these hyper-parameters with a type check and refuses the file when a
# scalar is not UINT32 (checked: INT32, UINT16 and UINT64 all fail to load). Per-layer
# arrays are a different, accepted form.
_TEXT_U32_SUFFIXES = (
    "context_length",
    "embedding_length",
    "block_count",
    "feed_forward_length",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.key_length",
    "attention.value_length",
    "attention.sliding_window",
    "vocab_size",
    "rope.dimension_count",
    "expert_count",
    "expert_used_count",
)
_TEXT_U32_KEYS = (
    "general.file_type",
    "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.unknown_token_id",
    "tokenizer.ggml.padding_token_id",
    "tokenizer.ggml.eot_token_id",
    "tokenizer.ggml.eom_token_id",
)
_CLIP_REQUIRED_VISION_U32 = (
    "clip.vision.image_size",
    "clip.vision.patch_size",
    "clip.vision.embedding_length",
    "clip.vision.feed_forward_length",
    "clip.vision.projection_dim",
    "clip.vision.block_count",
    "clip.vision.attention.head_count",
)
_CLIP_REQUIRED_AUDIO_U32 = (
    "clip.audio.embedding_length",
    "clip.audio.feed_forward_length",
    "clip.audio.projection_dim",
    "clip.audio.block_count",
    "clip.audio.attention.head_count",
)


def check_text_model(path: Path, header: Header, arch: str, *, embedding: bool = False) -> None:
    s = header.scalars
    if s.get("general.type") == "adapter":
        raise invalid_file(path, "this is a LoRA adapter, not a model")
    if arch not in known_architectures():
        raise invalid_file(
            path, f"unknown architecture '{shorten(arch)}': this llama.cpp build cannot run it"
        )
    for key in (*(f"{arch}.{suffix}" for suffix in _TEXT_U32_SUFFIXES), *_TEXT_U32_KEYS):
        vtype = header.types.get(key)
        if vtype is not None and vtype not in (VT.UINT32, VT.ARRAY):
            raise invalid_file(path, f"corrupt metadata: {key} has type {type_name(vtype)}, expected UINT32")
    if not header.tensors and as_int(s.get("split.count")) in (None, 1):
        raise invalid_file(path, "the file holds no weights (a vocabulary-only GGUF?)")
    # llama-vocab reads these with gguf_get_arr_str / gguf_get_arr_data, which abort on
    # a wrong item type, and then indexes scores/types by token id without a bound check.
    for key in (TOKENS_KEY, MERGES_KEY):
        array = header.arrays.get(key)
        if key in header.types and (array is None or array.item_type != VT.STRING):
            raise invalid_file(path, f"corrupt metadata: {key} is not a list of strings")
    tokens = header.arrays.get(TOKENS_KEY)
    n_tokens = tokens.count if tokens else 0
    for key in (SCORES_KEY, TOKEN_TYPE_KEY):
        if key not in header.types:
            continue
        array = header.arrays.get(key)
        if array is None or array.item_type == VT.STRING or SCALAR_FORMATS[array.item_type].size != 4:
            raise invalid_file(path, f"corrupt metadata: {key} is not a list of 4-byte numbers")
        if array.count < n_tokens:
            raise invalid_file(
                path, f"corrupt metadata: {key} has {array.count:,} entries for {n_tokens:,} tokens"
            )
    reason = check_llama_limits(header, arch, embedding=embedding)
    if reason:
        raise invalid_file(path, reason)


def projector_info(path: Path, header: Header) -> ProjectorInfo:
    s, types = header.scalars, header.types

    def fail(reason: str) -> InvalidModelFile:
        return invalid_file(path, f"projector metadata {reason}")

    for key, vtype in types.items():
        if not key.startswith("clip.") or vtype == VT.ARRAY:
            continue
        expected = _clip_expected_type(key, vtype)
        if expected is not None and vtype != expected:
            raise fail(f"{key} has type {type_name(vtype)}, expected {type_name(expected)}")
    has_vision = bool(s.get("clip.has_vision_encoder", header.scalars.get("general.architecture") == "clip"))
    has_audio = bool(s.get("clip.has_audio_encoder", False))
    if not has_vision and not has_audio:
        raise fail("says the file has neither a vision nor an audio encoder")
    required = [*(_CLIP_REQUIRED_VISION_U32 if has_vision else ())]
    required += _CLIP_REQUIRED_AUDIO_U32 if has_audio else ()
    for key in required:
        if key not in types:
            raise fail(f"{key} is missing")
        if types[key] != VT.UINT32:
            raise fail(f"{key} has type {type_name(types[key])}, expected UINT32")
    if has_vision:
        # clip.cpp GGML_ASSERTs these exist and then reads three floats from each.
        for key in ("clip.vision.image_mean", "clip.vision.image_std"):
            array = header.arrays.get(key)
            if array is None or array.item_type != VT.FLOAT32 or array.count < 3:
                raise fail(f"{key} must be a list of 3 FLOAT32 values")
    ftype = types.get("general.file_type")
    if ftype is not None and ftype != VT.UINT32:
        raise fail(f"general.file_type has type {type_name(ftype)}, expected UINT32")

    modality = "vision" if has_vision else "audio"
    projector_type = s.get(f"clip.{modality}.projector_type", s.get("clip.projector_type", "mlp"))
    return ProjectorInfo(
        projector_type=str(projector_type),
        projection_dim=as_int(s.get(f"clip.{modality}.projection_dim")) or 0,
        image_size=as_int(s.get("clip.vision.image_size")) or 0,
        patch_size=as_int(s.get("clip.vision.patch_size")) or 0,
        embedding_length=as_int(s.get(f"clip.{modality}.embedding_length")) or 0,
        block_count=as_int(s.get(f"clip.{modality}.block_count")) or 0,
        has_vision=has_vision,
        has_audio=has_audio,
    )


def _clip_expected_type(key: str, actual: int) -> int | None:
    """The only type clip.cpp accepts for ``key``, or None when any type is harmless."""
    leaf = key.rsplit(".", 1)[-1]
    if leaf.startswith(("has_", "use_")):
        return VT.BOOL
    if leaf == "projector_type":
        return VT.STRING
    if key in _CLIP_INT32_KEYS:
        return VT.INT32
    if "epsilon" in leaf:
        return VT.FLOAT32
    if actual in INT_TYPES:
        return VT.UINT32
    if actual in FLOAT_TYPES:
        return VT.FLOAT32
    return None
