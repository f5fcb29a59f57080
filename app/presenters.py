"""Human wording for engine values, shared by the terminal and the window."""

from __future__ import annotations

from engine import ModelInfo, format_bytes, format_count


def _opt(value: object) -> str:
    return "—" if value is None or value == "" else str(value)


def model_facts(info: ModelInfo) -> list[tuple[str, str]]:
    """(label, value) rows describing a GGUF, in the order people look for them."""
    rows: list[tuple[str, str]] = [
        ("Name", info.display_name),
        ("File", str(info.path)),
        ("Kind", "vision projector (mmproj)" if info.is_projector else "language model"),
        ("Architecture", info.architecture),
        ("Size", _opt(info.size_label)),
        ("Parameters", format_count(info.parameter_count)),
        ("Quantization", info.file_type),
        ("File size", format_bytes(info.file_size)),
    ]
    if info.split_count > 1:
        rows.append(("Split", f"part {info.split_index + 1} of {info.split_count}"))
    if info.projector is not None:
        p = info.projector
        rows += [
            ("Projector type", p.projector_type),
            ("Projection dim", str(p.projection_dim)),
            ("Image size", f"{p.image_size} px, patch {p.patch_size} px"),
            ("Tokens per image", str(p.tokens_per_image)),
        ]
        return rows
    rows += [
        ("Training context", format_count(info.context_length) if info.context_length else "—"),
        ("Layers", _opt(info.block_count)),
        ("Embedding size", _opt(info.embedding_length)),
        ("Attention heads", f"{_opt(info.head_count)} (KV {_opt(info.head_count_kv)})"),
        ("Key / value length", f"{_opt(info.key_length)} / {_opt(info.value_length)}"),
        ("Sliding window", _opt(info.sliding_window)),
        ("Vocabulary", format_count(info.vocab_size) if info.vocab_size else "—"),
        ("BOS / EOS", f"{_opt(info.bos_token_id)} / {_opt(info.eos_token_id)}"),
        ("Chat template", "yes" if info.has_chat_template else "no (built-in format is used)"),
    ]
    return rows
