"""The plan for people: a line for each choice and each device, and ``describe_plan``."""

from __future__ import annotations

from engine.base.units import format_bytes
from engine.catalog import ModelInfo
from engine.machine.hardware import HardwareSnapshot
from engine.planner.load_plan import DeviceMemory, LlamaParams, LoadPlan, LoadRequest, Verdict
from engine.planner.memory_estimate import repacked_bytes
from engine.planner.model_shape import ModelShape
from engine.planner.placement import Layout, gpu_names, is_worker


def _offload_label(hardware: HardwareSnapshot) -> str:
    """Where offloaded layers go, in words: a GPU's name, "2 GPUs", "2 workers and 1 GPU"."""
    devices = hardware.gpus
    if len(devices) == 1:
        return devices[0].name if is_worker(devices[0]) else gpu_names(devices)[0]
    workers = sum(1 for g in devices if is_worker(g))
    local = len(devices) - workers
    parts = []
    if workers:
        parts.append(f"{workers} worker{'s' if workers > 1 else ''}")
    if local:
        parts.append(f"{local} GPU{'s' if local > 1 else ''}")
    return " and ".join(parts)


def placement_reasons(
    shape: ModelShape,
    params: LlamaParams,
    use_gpu: bool,
    request: LoadRequest,
    hardware: HardwareSnapshot,
) -> list[str]:
    """Where the layers went and why; the sliding-window layers, if any."""
    reasons: list[str] = []
    all_layers = shape.n_gpu_layers_all
    if use_gpu:
        n = params.n_gpu_layers
        gpu = _offload_label(hardware)
        if n >= all_layers:
            reasons.append(f"All {all_layers} layers ({shape.n_layer} blocks + output) on {gpu}.")
        elif n == 0:
            why = "as requested" if request.gpu_layers == 0 else "no layer fits in free VRAM"
            reasons.append(f"No layers on {gpu} ({why}): the model runs on the CPU.")
        else:
            why = "as requested" if request.gpu_layers is not None else "as many as fit in free VRAM"
            reasons.append(
                f"{n} of {all_layers} layers on {gpu} ({why}); the other {all_layers - n} run on the CPU, "
                "which is slower."
            )
    if shape.has_swa:
        n_swa = sum(shape.swa_layers)
        reasons.append(
            f"{n_swa} of {shape.n_layer} layers use a {shape.n_swa:,}-token sliding window; they still get "
            "full-size KV caches so cached prefixes can be reused."
        )
    return reasons


def memory_reasons(
    info: ModelInfo,
    shape: ModelShape,
    layout: Layout,
    memory: tuple[DeviceMemory, ...],
    request: LoadRequest,
    simd: tuple[str, ...],
) -> list[str]:
    """The KV cache, CPU_REPACK, logit rows, projector and draft model; each device's total."""
    reasons: list[str] = []
    p = layout.params
    kv_total = sum(m.kv_cache for m in memory)
    if p.shared_pool:
        reasons.append(
            f"KV cache {format_bytes(kv_total)}: one pool of {p.n_ctx:,} tokens × {shape.n_layer} layers "
            f"({p.type_k.value}) that {p.n_seq_max} conversations share, each up to {p.n_ctx_seq:,}."
        )
    else:
        reasons.append(
            f"KV cache {format_bytes(kv_total)}: {p.n_seq_max} × {p.n_ctx_seq:,} tokens × {shape.n_layer} "
            f"layers ({p.type_k.value})."
        )
    if memory[0].repack:
        kinds = sorted({t for t, _m, _n in shape.matmul_weights if repacked_bytes(((t, 8, 1),), simd)})
        reasons.append(
            f"{format_bytes(memory[0].repack)} more RAM for {'/'.join(kinds)} weights re-laid-out for this "
            "CPU's SIMD width (llama.cpp's CPU_REPACK copy, beside the mapped file)."
        )
    elif (
        repacked_bytes(shape.matmul_weights, simd) is None
        and layout.params.n_gpu_layers < shape.n_gpu_layers_all
    ):
        reasons.append(
            "CPU_REPACK not predicted: this llama.cpp build's CPU features are unknown, and on AVX2 "
            "or ARM builds quantized weights may take up to their size again."
        )
    draft_rows = p.n_outputs_max_per_seq - 1
    reasons.append(
        f"Logits reserved for {p.outputs_max} row{'s' if p.outputs_max > 1 else ''}: one per conversation"
        + (f" plus {draft_rows} draft row{'s' if draft_rows > 1 else ''} each." if draft_rows > 0 else ".")
    )
    if request.projector is not None:
        where = "GPU" if layout.projector_on_gpu else "CPU"
        reasons.append(f"Projector {request.projector.display_name} on the {where}.")
    if request.draft is not None:
        where = "GPU" if layout.draft_on_gpu else "CPU"
        reasons.append(f"Draft model {request.draft.display_name} on the {where}.")
        if request.draft.vocab_size and request.draft.vocab_size != info.vocab_size:
            reasons.append(
                f"The draft's vocabulary ({request.draft.vocab_size:,}) differs from the model's "
                f"({info.vocab_size:,}): drafts may be rejected."
            )
    reasons += [memory_line(m) for m in memory]
    if memory[0].deficit and shape.tensor_bytes > memory[0].usable and len(memory) == 1:
        reasons.append(f"The weights alone ({format_bytes(shape.tensor_bytes)}) exceed the available RAM.")
    return reasons


def resource_label(device: str) -> str:
    """A plan's device as its memory is named: "RAM", "memory on worker …", "VRAM on …"."""
    if device == "CPU":
        return "RAM"
    if device.startswith("worker "):
        return f"memory on {device}"
    return f"VRAM on {device}"


def memory_line(m: DeviceMemory) -> str:
    """ "Needs 131 MB of RAM: exceeds the 100 MB free (keeping 512 MB spare)." """
    verb = "fits in" if m.deficit == 0 else "exceeds"
    return (
        f"Needs {format_bytes(m.total)} of {resource_label(m.device)}: {verb} the "
        f"{format_bytes(m.available)} free (keeping {format_bytes(m.reserve)} spare)."
    )


# What a plan's suggestions give it, by verdict (a plan that fits suggests nothing).
SUGGESTIONS_HEADER = {
    Verdict.DOES_NOT_FIT: "To make it fit:",
    Verdict.TIGHT: "For more room:",
    Verdict.PARTIAL_OFFLOAD: "To fit entirely on the GPU:",
    Verdict.FITS: "",
}


def describe_plan(plan: LoadPlan) -> list[str]:
    """The plan as lines of text, as the CLI prints it and the GUI shows it."""
    p = plan.params
    lines = [f"{plan.model.display_name}: {plan.headline}"]
    if plan.limiting_resource:
        lines[0] += f" ({plan.limiting_resource} short by {format_bytes(plan.deficit)})"
    context = (
        f"Context: {p.n_ctx:,} tokens shared by {p.n_seq_max} conversations, each up to {p.n_ctx_seq:,}"
        if p.shared_pool
        else f"Context: {p.n_ctx_seq:,} tokens × {p.n_seq_max} conversation{'s' if p.n_seq_max > 1 else ''} "
        f"(n_ctx {p.n_ctx:,})"
    )
    lines.append(
        f"{context}, batch {p.n_batch}/{p.n_ubatch}, KV {p.type_k.value}, "
        f"GPU layers {p.n_gpu_layers}, threads {p.n_threads}, "
        f"flash attention {'on' if p.flash_attn else 'auto'}"
    )
    for m in plan.memory:
        parts = [
            f"{label} {format_bytes(value)}"
            for label, value in (
                ("weights", m.weights),
                ("repacked weights", m.repack),
                ("llama.cpp runtime", m.runtime),
                ("KV cache", m.kv_cache),
                ("compute", m.compute),
                ("output", m.output),
                ("projector", m.projector),
                ("draft", m.draft),
            )
            if value
        ]
        lines.append(
            f"{m.device}: {format_bytes(m.total)} of {format_bytes(m.available)} free — {', '.join(parts)}"
        )
    lines += [f"  • {r}" for r in plan.reasons]
    if plan.suggestions:
        lines.append(SUGGESTIONS_HEADER[plan.verdict])
        lines += [f"  → {s.description}" for s in plan.suggestions]
    lines.append("Load phases: " + " → ".join(phase.value for phase in plan.phases))
    return lines
