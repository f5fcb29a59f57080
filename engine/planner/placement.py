"""Devices and layer placement: what stays free on each device, which device holds each
layer, and the bytes of the model, its projector and its draft model on each."""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, replace

from engine.machine.hardware import GpuInfo, HardwareSnapshot
from engine.planner.load_plan import GIB, MIB, DeviceMemory, LlamaParams, LoadRequest, memory_total
from engine.planner.memory_estimate import (
    compute_estimate,
    kv_cache_bytes_per_layer,
    output_buffer_bytes,
    projector_compute_bytes,
    repacked_bytes,
    runtime_bytes,
)
from engine.planner.model_shape import ModelShape

# Kept free on each device, because the planner's numbers are what llama.cpp allocates, not
# what the process needs: the app itself and the OS need RAM; the CUDA context, cuBLAS
# workspaces and the driver need VRAM that NVML still reports as free before loading.
RAM_RESERVE_MIN = 512 * MIB
RAM_RESERVE_FRACTION = 0.05
RAM_RESERVE_MAX = 2 * GIB
VRAM_RESERVE_MIN = 512 * MIB
VRAM_RESERVE_FRACTION = 0.03
VRAM_RESERVE_MAX = 2 * GIB


def _reserve(total: int, fraction: float, low: int, high: int) -> int:
    return int(min(max(low, fraction * total), high))


def ram_reserve(hardware: HardwareSnapshot) -> int:
    return _reserve(hardware.ram_total, RAM_RESERVE_FRACTION, RAM_RESERVE_MIN, RAM_RESERVE_MAX)


def vram_reserve(gpu: GpuInfo) -> int:
    return _reserve(gpu.vram_total, VRAM_RESERVE_FRACTION, VRAM_RESERVE_MIN, VRAM_RESERVE_MAX)


def gpu_names(gpus: tuple[GpuInfo, ...]) -> tuple[str, ...]:
    """Each GPU's name, with its index where two share a name."""
    names = [g.name for g in gpus]
    return tuple(f"{g.name} #{g.index}" if names.count(g.name) > 1 else g.name for g in gpus)


def layer_devices(
    n_layer: int, n_gpu_layers: int, gpus: tuple[GpuInfo, ...], split: tuple[float, ...] = ()
) -> tuple[int, ...]:
    """Device of each block and, last, of the output layer: -1 for the CPU, else a GPU index
    into ``gpus``. Mirrors llama_model::load_tensors: the last ``n_gpu_layers`` of the
    n_layer + 1 positions go to the GPUs, split in proportion to ``split`` (llama.cpp's
    ``tensor_split``) or, without one, to their free memory."""
    total_positions = n_layer + 1
    if not gpus or n_gpu_layers <= 0:
        return (-1,) * total_positions
    act = min(n_gpu_layers, total_positions)
    start = total_positions - act
    if len(split) == len(gpus) and sum(split) > 0:
        free = [max(0.0, float(x)) for x in split]
    else:
        free = [max(1, g.vram_free) for g in gpus]
    cum, acc = [], 0.0
    for f in free:
        acc += f
        cum.append(acc / sum(free))
    out: list[int] = []
    for il in range(total_positions):
        if il < start:
            out.append(-1)
            continue
        x = (il - start) / act
        # std::upper_bound(splits, x): first split point strictly greater than x
        out.append(next((i for i, c in enumerate(cum) if c > x), len(gpus) - 1))
    return tuple(out)


@dataclass
class Tally:
    """Bytes on one device, added up while placing: a ``DeviceMemory`` in the making."""

    weights: int = 0
    repack: int = 0
    runtime: int = 0
    kv_cache: int = 0
    compute: int = 0
    output: int = 0
    projector: int = 0
    draft: int = 0

    @property
    def total(self) -> int:
        return memory_total(self)

    def memory(self, device: str, available: int, reserve: int) -> DeviceMemory:
        return DeviceMemory(device=device, available=available, reserve=reserve, **asdict(self))


def _model_tallies(
    shape: ModelShape,
    params: LlamaParams,
    gpus: tuple[GpuInfo, ...],
    use_gpu: bool,
    simd: tuple[str, ...] = (),
) -> tuple[Tally, list[Tally]]:
    """Weights, KV, compute and output of one model, per device (CPU, then each GPU)."""
    cpu = Tally()
    gpu = [Tally() for _ in gpus]
    devices = layer_devices(
        shape.n_layer, params.n_gpu_layers if use_gpu else 0, gpus if use_gpu else (), params.tensor_split
    )

    def on(dev: int) -> Tally:
        return cpu if dev < 0 else gpu[dev]

    cpu.weights += shape.embedding_bytes
    cpu.runtime += runtime_bytes(shape, params)
    for il, nbytes in enumerate(shape.block_bytes):
        on(devices[il]).weights += nbytes
    out_dev = devices[-1]
    if out_dev < 0:
        cpu.weights += shape.output_bytes  # tied: the embeddings already counted serve both
    else:
        gpu[out_dev].weights += shape.output_layer_gpu_bytes
    repack = repacked_bytes(shape.matmul_weights, simd) or 0
    if repack:
        # Only weights the CPU multiplies with are repacked: its share of blocks and output.
        on_cpu = sum(b for il, b in enumerate(shape.block_bytes) if devices[il] < 0)
        on_cpu += shape.output_layer_gpu_bytes if out_dev < 0 else 0
        everything = sum(shape.block_bytes) + shape.output_layer_gpu_bytes
        cpu.repack += repack if on_cpu >= everything else repack * on_cpu // max(1, everything)

    # offload_kqv (default on): each layer's cache lives on that layer's device.
    for il, nbytes in enumerate(kv_cache_bytes_per_layer(shape, params)):
        on(devices[il]).kv_cache += nbytes

    est = compute_estimate(shape, params)
    if not use_gpu or not gpus:
        cpu.compute += est.peak
    else:
        # The GPU holding the output layer runs the logits; any GPU with layers runs them.
        # With no layers offloaded, llama.cpp still offloads large-batch matrix products to
        # the first GPU (op_offload), which reserves the same worst case there.
        gpu_devs = {d for d in devices if d >= 0} or {0}
        for d in gpu_devs:
            gpu[d].compute += est.peak if d == (out_dev if out_dev >= 0 else 0) else est.layers
        cpu.compute += est.layers if any(d < 0 for d in devices[:-1]) else est.host_staging
    cpu.output += output_buffer_bytes(shape, params)  # host memory (pinned with a GPU)
    return cpu, gpu


@dataclass(frozen=True)
class Layout:
    """The model, its projector and its draft model placed: parameters and bytes per device."""

    params: LlamaParams
    cpu: Tally
    gpus: tuple[Tally, ...]
    draft_on_gpu: bool
    projector_on_gpu: bool


def lay_out(
    shape: ModelShape,
    base: LlamaParams,
    n_gpu_layers: int,
    hardware: HardwareSnapshot,
    use_gpu: bool,
    request: LoadRequest,
    draft_shape: ModelShape | None,
    place_extras: bool,
) -> Layout:
    """The model with ``n_gpu_layers`` on the GPUs; with ``place_extras``, its projector and
    draft model on the first GPU where room is left, else on the CPU."""
    params = replace(base, n_gpu_layers=n_gpu_layers)
    gpus = hardware.gpus if use_gpu else ()
    cpu, gpu = _model_tallies(shape, params, gpus, use_gpu, hardware.simd)

    proj_bytes = 0
    if request.projector is not None:
        proj_bytes = request.projector.tensor_bytes + projector_compute_bytes(request.projector)
    projector_on_gpu = False
    if proj_bytes:
        # mtmd can use the first GPU (use_gpu). The model's layers are fitted first (they
        # serve every token); the projector takes the GPU only if room is left.
        projector_on_gpu = (
            bool(gpus)
            and not is_worker(gpus[0])
            and place_extras
            and proj_bytes <= usable_vram(hardware, 0) - gpu[0].total
        )
        (gpu[0] if projector_on_gpu else cpu).projector += proj_bytes

    draft_on_gpu = False
    draft_layers = 0
    if draft_shape is not None:
        d_all = draft_shape.n_gpu_layers_all
        d_params = replace(
            params,
            n_gpu_layers=d_all if gpus else 0,
            draft_n_gpu_layers=0,
            n_outputs_max=params.n_seq_max,  # the draft model samples one row per sequence
            n_outputs_max_per_seq=1,
        )
        d_cpu, d_gpu = _model_tallies(draft_shape, d_params, gpus[:1], bool(gpus), hardware.simd)
        d_gpu_total = d_gpu[0].total if d_gpu else 0
        # The draft goes wholly onto the first GPU when the target is fully offloaded and
        # there is room left; otherwise it runs on the CPU.
        if gpus and not is_worker(gpus[0]) and place_extras and n_gpu_layers >= shape.n_gpu_layers_all:
            draft_on_gpu = d_gpu_total <= usable_vram(hardware, 0) - gpu[0].total
        if draft_on_gpu:
            gpu[0].draft += d_gpu_total
            cpu.draft += d_cpu.total
            draft_layers = d_all
        else:
            d_params = replace(d_params, n_gpu_layers=0)
            d_cpu, _ = _model_tallies(draft_shape, d_params, (), False, hardware.simd)
            cpu.draft += d_cpu.total
    params = replace(params, projector_use_gpu=projector_on_gpu, draft_n_gpu_layers=draft_layers)
    return Layout(params, cpu, tuple(gpu), draft_on_gpu, projector_on_gpu)


WORKER_KEY_PREFIX = "rpc:"


def is_worker(gpu: GpuInfo) -> bool:
    """An offload device that is an RPC worker's (``offload_devices`` marks them by uuid)."""
    return (gpu.uuid or "").startswith(WORKER_KEY_PREFIX)


def offload_devices(hardware: HardwareSnapshot) -> tuple[GpuInfo, ...]:
    """The devices layers can go to, in llama.cpp's order: the workers' first (llama.cpp
    puts RPC devices at the front "to minimize network transfers"), then the local GPUs.

    A worker's device is planned like a GPU: its memory is what the worker reports free.
    """
    workers = tuple(
        GpuInfo(
            index=i,
            name=d.label,
            vram_total=d.memory_total,
            vram_free=d.memory_free,
            utilization_percent=None,
            temperature_c=None,
            uuid=d.key,
        )
        for i, d in enumerate(hardware.remote_devices)
    )
    local = hardware.gpus if hardware.gpu_offload_supported else ()
    n = len(workers)
    return workers + tuple(replace(g, index=n + i) for i, g in enumerate(local))


def device_key(gpu: GpuInfo, local_index: int) -> str:
    """The plan's name for an offload device, resolved to a ggml device at load time."""
    return gpu.uuid if is_worker(gpu) and gpu.uuid else f"gpu:{local_index}"


def usable_vram(hardware: HardwareSnapshot, i: int) -> int:
    """Free VRAM on GPU ``i`` less its reserve."""
    g = hardware.gpus[i]
    return max(0, g.vram_free - vram_reserve(g))


def _gpus_fit(layout: Layout, hardware: HardwareSnapshot) -> bool:
    return all(t.total <= usable_vram(hardware, i) for i, t in enumerate(layout.gpus))


def auto_gpu_layers(
    shape: ModelShape,
    base: LlamaParams,
    hardware: HardwareSnapshot,
    request: LoadRequest,
    draft_shape: ModelShape | None,
) -> int:
    """The most layers whose weights, KV cache and compute fit in free VRAM (minus reserve).

    GPU memory only grows with more layers, so a binary search finds the largest count.
    The projector and draft are placed only where room is left, so they do not count here.
    """

    def fits(n: int) -> bool:
        layout = lay_out(shape, base, n, hardware, True, request, draft_shape, place_extras=False)
        return _gpus_fit(layout, hardware)

    lo, hi = 0, shape.n_gpu_layers_all
    if fits(hi):
        return hi
    while lo < hi - 1:  # invariant: fits(lo) or lo == 0; not fits(hi)
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def device_memory(layout: Layout, hardware: HardwareSnapshot, use_gpu: bool) -> tuple[DeviceMemory, ...]:
    """The layout's bytes per device (CPU first), beside what each has free and keeps spare."""
    out = [layout.cpu.memory("CPU", hardware.ram_available, ram_reserve(hardware))]
    if use_gpu:
        local = gpu_names(tuple(g for g in hardware.gpus if not is_worker(g)))
        names = [g.name for g in hardware.gpus if is_worker(g)] + list(local)
        for i, t in enumerate(layout.gpus):
            g = hardware.gpus[i]
            out.append(t.memory(names[i], g.vram_free, vram_reserve(g)))
    return tuple(out)


def split_summary(
    shape: ModelShape, params: LlamaParams, gpus: tuple[GpuInfo, ...]
) -> tuple[tuple[tuple[str, int], ...], int]:
    """((where, layers) per machine holding layers, this one first; network bytes per token).

    The bytes are what one decoded token sends between machines at this split, from the
    graph llama.cpp's scheduler cuts at each change of device: the hidden state (n_embd
    f32) at every crossing between this machine and a worker or between workers, the
    logits (n_vocab f32) read back when the output layer is on a worker, and the inputs
    each worker's part needs (positions and an f16 attention-mask row of the conversation's
    cells). Not counted: the RPC commands' own headers, and the serialized graph, which
    llama.cpp sends again only when the graph changes (RPC_CMD_GRAPH_RECOMPUTE reuses it).
    """
    devices = layer_devices(shape.n_layer, params.n_gpu_layers, gpus, params.tensor_split)

    def machine(dev: int) -> str:
        if dev < 0 or not is_worker(gpus[dev]):
            return "this machine"
        return (gpus[dev].uuid or "")[len(WORKER_KEY_PREFIX) :].rpartition("#")[0]

    counts: dict[str, int] = {}
    for dev in devices:
        counts[machine(dev)] = counts.get(machine(dev), 0) + 1
    counts.setdefault("this machine", 0)
    order = ["this machine"] + [m for m in dict.fromkeys(machine(d) for d in devices) if m != "this machine"]
    path = [machine(-1)] + [machine(d) for d in devices] + [machine(-1)]  # input and logits on the host
    crossings = sum(1 for a, b in itertools.pairwise(path[:-1]) if a != b)  # the last: logits
    nbytes = crossings * shape.n_embd * 4
    if path[-2] != path[-1]:
        nbytes += shape.n_vocab * 4
    remote = {machine(d) for d in devices} - {"this machine"}
    nbytes += len(remote) * (4 + 2 * params.n_ctx_seq)
    return tuple((m, counts[m]) for m in order), nbytes
