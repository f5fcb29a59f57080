"""``inspect``: one GGUF file read, validated and described as a ``ModelInfo`` (with the
headers of its other parts, for a split model); ``inspect_model`` and ``inspect_projector``
also refuse a file of the other kind."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

from engine.catalog.gguf_header import Header, as_int, check_complete, int_or_layers, parse_header
from engine.catalog.gguf_reader import Opener, invalid_file, open_reader
from engine.catalog.metadata_checks import check_text_model, projector_info
from engine.catalog.model_info import ModelInfo, ModelKind, Scalar
from engine.catalog.split_files import read_split_parts, split_part_paths
from engine.catalog.tensor_summary import bytes_by_block, file_type_name, matmul_weights, size_label_for
from engine.catalog.vocabulary import MERGES_KEY, TOKENS_KEY

_KEEP_STRING_CHARS = 1024  # longer strings stay out of ModelInfo.metadata


def inspect(
    path: Path | str,
    expect: ModelKind | None = None,
    *,
    opener: Opener = open_reader,
    embedding: bool = False,
) -> ModelInfo:
    """Read and validate ``path``'s GGUF header; raise InvalidModelFile with the reason.

    Reads only the header and tensor table. ``expect`` (TEXT or PROJECTOR) additionally
    rejects a file of the other kind, and for TEXT a non-first part of a split model.
    ``opener`` reaches the bytes of ``path`` and of a split model's other parts (a file on
    the Hub goes through the same checks as one on disk). ``embedding``: read for
    ``engine.documents``' embedder, so a non-causal (encoder) model is not refused.
    """
    path = Path(path)
    with opener(path) as reader:
        header = parse_header(reader, check_vocab=True)
    check_complete(reader, header)
    info = _describe(path, reader.size, header, opener, embedding=embedding)
    if expect is not None:
        _check_expected(info, expect)
    return info


def inspect_model(path: Path | str, *, opener: Opener = open_reader) -> ModelInfo:
    """``inspect`` for a language model: a projector or split part 2..N is refused."""
    return inspect(path, expect=ModelKind.TEXT, opener=opener)


def inspect_projector(path: Path | str, *, opener: Opener = open_reader) -> ModelInfo:
    """``inspect`` for a vision projector (mmproj): a language model is refused."""
    return inspect(path, expect=ModelKind.PROJECTOR, opener=opener)


def _check_expected(info: ModelInfo, expect: ModelKind) -> None:
    if expect is ModelKind.TEXT and info.kind is ModelKind.PROJECTOR:
        raise invalid_file(info.path, "this is a vision projector (mmproj), not a language model")
    if expect is ModelKind.PROJECTOR and info.kind is ModelKind.TEXT:
        raise invalid_file(info.path, "this is a language model, not a vision projector (mmproj)")
    if expect is ModelKind.TEXT and info.split_index > 0:
        first = split_part_paths(info.path, info.split_count)
        hint = f"; open {first[0].name}" if first else "; open its first part"
        raise invalid_file(
            info.path, f"this is part {info.split_index + 1} of {info.split_count} of a split model{hint}"
        )


def _describe(
    path: Path, size: int, header: Header, opener: Opener = open_reader, *, embedding: bool = False
) -> ModelInfo:
    s = header.scalars
    arch_value = s.get("general.architecture")
    split_count = as_int(s.get("split.count")) or 1
    split_index = as_int(s.get("split.no")) or 0
    if split_count < 1 or not 0 <= split_index < split_count:
        raise invalid_file(path, f"corrupt metadata: split part {split_index} of {split_count}")
    is_projector = arch_value == "clip" or "clip.has_vision_encoder" in s or "clip.has_audio_encoder" in s
    kind = ModelKind.PROJECTOR if is_projector else ModelKind.TEXT

    if arch_value is None:
        if kind is ModelKind.TEXT and split_index == 0:
            raise invalid_file(path, "corrupt metadata: general.architecture is missing")
        arch = "clip" if is_projector else ""
    elif not isinstance(arch_value, str):
        raise invalid_file(path, "corrupt metadata: general.architecture is not a string")
    else:
        arch = arch_value

    if kind is ModelKind.TEXT and split_index == 0:
        check_text_model(path, header, arch, embedding=embedding)
    projector = projector_info(path, header) if kind is ModelKind.PROJECTOR else None

    tensors = list(header.tensors)
    split_paths: tuple[Path, ...] = ()
    total_size = size
    if split_count > 1 and split_index == 0:
        parts = read_split_parts(path, split_count, opener)
        split_paths = (path, *(p for p, _, _ in parts))
        for _, part_size, part_header in parts:
            tensors.extend(part_header.tensors)
            total_size += part_size
        names = [t.name for t in tensors]
        if len(set(names)) != len(names):
            raise invalid_file(path, "corrupt split model: a tensor appears in two parts")

    block_prefix = "v.blk." if kind is ModelKind.PROJECTOR else "blk."
    block_bytes, other, output = bytes_by_block(tensors, block_prefix)
    parameter_count = sum(t.n_elements for t in tensors)

    def key(suffix: str) -> Scalar | None:
        return s.get(f"{arch}.{suffix}")

    head_count, head_per_layer = int_or_layers(header, f"{arch}.attention.head_count")
    head_kv, head_kv_per_layer = int_or_layers(header, f"{arch}.attention.head_count_kv")
    n_ff, n_ff_per_layer = int_or_layers(header, f"{arch}.feed_forward_length")
    if head_kv is None and head_count is not None and kind is ModelKind.TEXT:
        head_kv = head_count  # llama.cpp's default: no grouped-query attention
    n_embd = as_int(key("embedding_length"))
    key_length = as_int(key("attention.key_length"))
    value_length = as_int(key("attention.value_length"))
    if n_embd and head_count:
        key_length = key_length if key_length is not None else n_embd // head_count
        value_length = value_length if value_length is not None else n_embd // head_count

    tokens = header.arrays.get(TOKENS_KEY)
    vocab_size = tokens.count if tokens is not None else as_int(key("vocab_size"))
    template = s.get("tokenizer.chat_template")
    size_label = s.get("general.size_label")
    if not isinstance(size_label, str) or not size_label.strip():
        size_label = size_label_for(parameter_count)
    name = s.get("general.name")
    tokenizer_model = s.get("tokenizer.ggml.model")

    return ModelInfo(
        path=path,
        file_size=size,
        gguf_version=header.version,
        kind=kind,
        architecture=arch,
        name=name if isinstance(name, str) else "",
        size_label=size_label,
        parameter_count=parameter_count,
        file_type=file_type_name(s.get("general.file_type"), header.types.get("general.file_type"), tensors),
        tensor_count=len(tensors),
        tensor_bytes=sum(t.n_bytes for t in tensors),
        block_tensor_bytes=block_bytes,
        other_tensor_bytes=other,
        output_tensor_bytes=output,
        matmul_weights=matmul_weights(tensors),
        context_length=as_int(key("context_length")),
        block_count=as_int(key("block_count")),
        embedding_length=n_embd,
        feed_forward_length=n_ff,
        head_count=head_count,
        head_count_kv=head_kv,
        key_length=key_length,
        value_length=value_length,
        sliding_window=as_int(key("attention.sliding_window")),
        vocab_size=vocab_size,
        merges_count=merges.count if (merges := header.arrays.get(MERGES_KEY)) is not None else 0,
        vocab_hash=tokens.digest if tokens is not None else None,
        bos_token_id=as_int(s.get("tokenizer.ggml.bos_token_id")),
        eos_token_id=as_int(s.get("tokenizer.ggml.eos_token_id")),
        chat_template=template if isinstance(template, str) and template.strip() else None,
        split_count=split_count,
        split_index=split_index,
        projector=projector,
        metadata=MappingProxyType(
            {
                k: v
                for k, v in s.items()
                if k != "tokenizer.chat_template" and not (isinstance(v, str) and len(v) > _KEEP_STRING_CHARS)
            }
        ),
        tokenizer_model=tokenizer_model if isinstance(tokenizer_model, str) else None,
        head_count_per_layer=head_per_layer,
        head_count_kv_per_layer=head_kv_per_layer,
        feed_forward_length_per_layer=n_ff_per_layer,
        data_offset=header.data_offset,
        alignment=header.alignment,
        split_paths=split_paths,
        total_file_size=total_size,
        arrays=MappingProxyType(
            {
                k: a.values
                for k, a in header.arrays.items()
                # a small vocabulary's scores and types are not "short things" either
                if a.values is not None and not k.startswith("tokenizer.ggml.")
            }
        ),
    )
