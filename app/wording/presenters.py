"""Human wording for engine values, shared by the terminal and the window."""

from __future__ import annotations

import re

from engine import LoadPhase, LoadPlan, ModelInfo, Verdict, format_bytes, format_count

BASE_MODEL_BADGE = "Base model: continues text, does not chat"
BASE_MODEL_TIP = (
    "This file has no chat template: the model was trained to continue text, not to answer "
    "questions. In a chat it will ramble on from your message. To chat, choose an instruct or "
    "chat version of the model."
)
PARAMETERS_TIP = (
    "Counted from the weights in the file. A size label (general.size_label, usually taken from "
    "the model's name) is the publisher's round figure and often leaves out the embedding tables."
)
FACT_TIPS = {"Parameters": PARAMETERS_TIP, "Chat template": BASE_MODEL_TIP}
"""Tooltips for the facts that need one, by row label (shown only where the row says so)."""

# What each load phase is called in the load panel and in `hearth serve`'s output.
PHASE_LABELS = {
    LoadPhase.VALIDATE: "Check the file",
    LoadPhase.WORKERS: "Connect to workers",
    LoadPhase.WEIGHTS: "Load weights",
    LoadPhase.CONTEXT: "Allocate KV cache and buffers",
    LoadPhase.PROJECTOR: "Load vision projector",
    LoadPhase.DRAFT: "Load draft model",
    LoadPhase.WARMUP: "Warm up",
    LoadPhase.READY: "Ready",
}

_LABEL = re.compile(r"^(\d+(?:\.\d+)?)([KMBT])$", re.IGNORECASE)
_SCALE = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}
# A label within this fraction of the count is the same number rounded: not worth a mention.
_LABEL_TOLERANCE = 0.05


def parameters_text(info: ModelInfo) -> str:
    """The parameter count, with the size label beside it only when the two disagree:
    "1.8B (labelled 1.5B)", but "268.1M" for a file labelled 270M."""
    count = format_count(info.parameter_count)
    label = (info.size_label or "").strip()
    match = _LABEL.match(label)
    if not label or info.parameter_count <= 0:
        return count
    if match is not None:
        labelled = float(match[1]) * _SCALE[match[2].upper()]
        if abs(labelled - info.parameter_count) <= _LABEL_TOLERANCE * info.parameter_count:
            return count
    return f"{count} (labelled {label})"


def elide_middle(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with "…" in the middle, both ends kept."""
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - 1 - head
    return text[:head] + "…" + (text[-tail:] if tail else "")


def sentence(reason: str) -> str:
    """A lower-case reason ("incomplete file: …") as a sentence of its own after another one."""
    return reason[:1].upper() + reason[1:]


def _opt(value: object) -> str:
    return "—" if value is None or value == "" else str(value)


def model_facts(info: ModelInfo) -> list[tuple[str, str]]:
    """(label, value) rows describing a GGUF, in the order people look for them."""
    rows: list[tuple[str, str]] = [
        ("Name", info.display_name),
        ("File", str(info.path)),
        ("Kind", "vision projector (mmproj)" if info.is_projector else "language model"),
        ("Architecture", info.architecture),
        ("Parameters", parameters_text(info)),
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
        ("Chat template", "yes" if info.has_chat_template else "no: a base model (built-in format is used)"),
    ]
    return rows


def fit_summary(plan: LoadPlan) -> str:
    """The verdict in a few words, as the Discover tab and ``hearth pull`` say it:
    "fits on the GPU", "fits with 20 of 33 layers on the GPU", "fits in RAM (CPU)",
    "does not fit (RAM short by 1.2 GiB)"; a tight one adds "— tight, may swap" (or, on a
    machine without swap, "— leaves only 1.1 GiB free")."""
    if plan.verdict is Verdict.DOES_NOT_FIT:
        if plan.limiting_resource:
            return f"does not fit ({plan.limiting_resource} short by {format_bytes(plan.deficit)})"
        return "does not fit"
    layers = (plan.model.block_count or 0) + 1  # the blocks and the output layer
    on_gpu = plan.params.n_gpu_layers
    gpus = [m for m in plan.memory if m.device != "CPU"]
    if not gpus or on_gpu <= 0:
        text = "fits in RAM (CPU)"
    elif on_gpu >= layers:
        text = "fits on the GPU"
    else:
        text = f"fits with {on_gpu} of {layers} layers on the GPU"
    if plan.verdict is Verdict.TIGHT:
        left = format_bytes(plan.ram_left)
        text += " — tight, may swap" if plan.may_swap else f" — leaves only {left} free"
    return text
