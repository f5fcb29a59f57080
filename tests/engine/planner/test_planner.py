"""Planner arithmetic on hand-built models and machines (no llama.cpp needed)."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path
from types import MappingProxyType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.base.defaults import DEFAULT_MAX_DRAFT
from engine.base.errors import EngineError
from engine.catalog import ModelInfo, ModelKind, ProjectorInfo
from engine.machine.hardware import GpuInfo, HardwareSnapshot
from engine.planner import (
    MEMORY_PARTS,
    RUNTIME_FIXED_BYTES,
    DeviceMemory,
    InvalidLoadRequest,
    KvCacheType,
    LoadPhase,
    LoadPlan,
    LoadRequest,
    Verdict,
    compute_estimate,
    describe_plan,
    kv_cache_bytes_per_layer,
    layer_devices,
    model_shape,
    non_causal_image_tokens,
    output_rows,
    pad_context,
    plan_load,
    ram_reserve,
    repacked_bytes,
    swa_cache_cells,
    vram_reserve,
)
from engine.planner.memory_estimate import (
    CELL_BYTES_PER_CACHE,
    CHAIN_BYTES_PER_VOCAB_TOKEN,
    PROMPT_BYTES_PER_CELL,
    SEQUENCE_BYTES,
)
from engine.planner.placement import Tally
from engine.speculation.policy import MAX_DRAFT_LIMIT

MIB = 1 << 20
GIB = 1 << 30


def make_info(
    *,
    arch: str = "llama",
    n_layer: int = 32,
    n_embd: int = 4096,
    n_head: int = 32,
    n_head_kv: int = 8,
    head_dim: int | None = None,
    n_ff: int = 14336,
    vocab: int = 128256,
    ctx_train: int | None = 131072,
    block_bytes: int = 200 * MIB,
    embd_bytes: int = 500 * MIB,
    output_bytes: int = 500 * MIB,
    sliding_window: int | None = None,
    metadata: dict[str, object] | None = None,
    name: str = "Test 8B",
) -> ModelInfo:
    """A llama-like model header: 32 x 200 MiB blocks + 1000 MiB embeddings/output by default."""
    other = embd_bytes + output_bytes
    blocks = (block_bytes,) * n_layer
    return ModelInfo(
        path=Path(f"/models/{name}.gguf"),
        file_size=sum(blocks) + other + 4096,
        gguf_version=3,
        kind=ModelKind.TEXT,
        architecture=arch,
        name=name,
        size_label=None,
        parameter_count=8_000_000_000,
        file_type="Q4_K_M",
        tensor_count=9 * n_layer + 3,
        tensor_bytes=sum(blocks) + other,
        block_tensor_bytes=blocks,
        other_tensor_bytes=other,
        output_tensor_bytes=output_bytes,
        context_length=ctx_train,
        block_count=n_layer,
        embedding_length=n_embd,
        feed_forward_length=n_ff,
        head_count=n_head,
        head_count_kv=n_head_kv,
        key_length=head_dim or n_embd // n_head,
        value_length=head_dim or n_embd // n_head,
        sliding_window=sliding_window,
        vocab_size=vocab,
        metadata=MappingProxyType(dict(metadata or {})),
    )


def gemma3_270m() -> ModelInfo:
    """The real Gemma 3 270M header's numbers (tied output, 262k vocabulary, SWA 512)."""
    return make_info(
        arch="gemma3",
        n_layer=18,
        n_embd=640,
        n_head=4,
        n_head_kv=1,
        head_dim=256,
        n_ff=2048,
        vocab=262144,
        ctx_train=32768,
        block_bytes=3_800_000,
        embd_bytes=178_260_480,
        output_bytes=0,
        sliding_window=512,
        name="Gemma 3 270m",
    )


def make_projector(projection_dim: int = 4096, projector_type: str = "mlp", image: int = 336) -> ModelInfo:
    return ModelInfo(
        path=Path("/models/mmproj.gguf"),
        file_size=600 * MIB,
        gguf_version=3,
        kind=ModelKind.PROJECTOR,
        architecture="clip",
        name="Test projector",
        size_label=None,
        parameter_count=300_000_000,
        file_type="F16",
        tensor_count=400,
        tensor_bytes=600 * MIB,
        block_tensor_bytes=(),
        other_tensor_bytes=600 * MIB,
        output_tensor_bytes=0,
        projector=ProjectorInfo(
            projector_type=projector_type,
            projection_dim=projection_dim,
            image_size=image,
            patch_size=14,
            embedding_length=1024,
            block_count=24,
        ),
    )


def gpu(
    name: str = "NVIDIA RTX 4090", total: int = 24 * GIB, free: int | None = None, index: int = 0
) -> GpuInfo:
    return GpuInfo(
        index=index,
        name=name,
        vram_total=total,
        vram_free=total if free is None else free,
        utilization_percent=0.0,
        temperature_c=40.0,
    )


def machine(
    ram: int = 16 * GIB, gpus: tuple[GpuInfo, ...] = (), offload: bool = True, cores: int = 8
) -> HardwareSnapshot:
    return HardwareSnapshot(
        cpu_name="Test CPU",
        physical_cores=cores,
        logical_cores=2 * cores,
        simd=("AVX2",),
        ram_total=ram,
        ram_available=ram,
        gpus=gpus,
        gpu_status=f"{len(gpus)} GPU(s) found" if gpus else "no NVIDIA GPU",
        driver_version="550.0" if gpus else None,
        gpu_offload_supported=offload,
        backend_devices=(),
    )


CPU_16G = machine()


def plan(info: ModelInfo | None = None, hw: HardwareSnapshot = CPU_16G, **request: object) -> LoadPlan:
    return plan_load(info or make_info(), hw, LoadRequest(**request))  # type: ignore[arg-type]


# -- KV cache ---------------------------------------------------------------------------------


def test_kv_cache_is_cells_times_layers_times_heads_times_head_size() -> None:
    p = plan(context_per_conversation=4096)
    # 32 layers x 4096 cells x 8 KV heads x (128 + 128) x 2 bytes
    assert p.memory[0].kv_cache == 32 * 4096 * 8 * 256 * 2 == 512 * MIB


def test_parallel_conversations_each_get_their_own_context() -> None:
    one = plan(context_per_conversation=4096, parallel=1)
    four = plan(context_per_conversation=1024, parallel=4)
    assert four.params.n_ctx == 4096 and four.params.n_seq_max == 4
    assert four.params.n_ctx_seq == four.context_per_conversation == 1024
    assert four.params.kv_unified is False
    assert four.memory[0].kv_cache == one.memory[0].kv_cache


@pytest.mark.parametrize(("kv", "ratio"), [(KvCacheType.Q8_0, 34 / 64), (KvCacheType.Q4_0, 18 / 64)])
def test_quantized_kv_cache_sizes_and_flash_attention(kv: KvCacheType, ratio: float) -> None:
    f16 = plan(context_per_conversation=8192)
    q = plan(context_per_conversation=8192, kv_type=kv)
    assert q.memory[0].kv_cache == pytest.approx(f16.memory[0].kv_cache * ratio)
    assert q.params.type_k is kv and q.params.type_v is kv
    assert q.params.flash_attn and q.params.flash_attn_type == 1
    assert not f16.params.flash_attn and f16.params.flash_attn_type == -1
    assert any("flash attention" in r.lower() for r in q.reasons)


def test_quantized_kv_needs_head_size_divisible_by_block() -> None:
    tiny_heads = make_info(n_embd=64, n_head=4, n_head_kv=2, n_ff=128, vocab=461)
    with pytest.raises(InvalidLoadRequest, match="divisible by 32"):
        plan(tiny_heads, kv_type=KvCacheType.Q8_0)


def test_sliding_window_layers_follow_llama_cpp_patterns() -> None:
    shape = model_shape(gemma3_270m())
    assert sum(shape.swa_layers) == 15
    assert [i for i, swa in enumerate(shape.swa_layers) if not swa] == [5, 11, 17]
    assert shape.n_swa == 512

    no_window = replace(gemma3_270m(), sliding_window=None)
    assert not model_shape(no_window).has_swa

    gemma2 = make_info(arch="gemma2", n_layer=26, sliding_window=4096)
    assert model_shape(gemma2).swa_layers == tuple(i % 2 == 0 for i in range(26))

    overridden = make_info(
        arch="gemma3",
        n_layer=12,
        sliding_window=1024,
        metadata={"gemma3.attention.sliding_window_pattern": 4},
    )
    assert [i for i, s in enumerate(model_shape(overridden).swa_layers) if not s] == [3, 7, 11]

    assert not model_shape(make_info(arch="llama", sliding_window=4096)).has_swa


def test_sliding_window_layers_get_full_size_caches() -> None:
    g = gemma3_270m()
    p = plan(g, context_per_conversation=1024, parallel=4)
    per_layer = kv_cache_bytes_per_layer(model_shape(g), p.params)
    assert p.params.swa_full
    assert len(set(per_layer)) == 1  # SWA layers as large as the full-attention ones
    # llama.cpp reported 12 MiB (3 layers) + 60 MiB (15 layers) for exactly this load.
    assert sum(per_layer) == p.memory[0].kv_cache == 72 * MIB


def test_swa_cache_without_swa_full_is_window_plus_ubatch_padded() -> None:
    shape = model_shape(gemma3_270m())
    assert swa_cache_cells(shape, 8192, 4, 512, swa_full=False, unified=False) == pad_context(512 + 512)
    assert swa_cache_cells(shape, 8192, 4, 512, swa_full=False, unified=True) == pad_context(512 * 4 + 512)
    assert swa_cache_cells(shape, 768, 1, 512, swa_full=False, unified=False) == 768
    assert swa_cache_cells(shape, 8192, 4, 512, swa_full=True, unified=False) == 8192


# -- context, batch, threads --------------------------------------------------------------------


def test_context_is_padded_to_256_per_conversation() -> None:
    p = plan(context_per_conversation=1000, parallel=3)
    assert p.context_per_conversation == 1024
    assert p.params.n_ctx == 3 * 1024
    assert any("rounded up to 1,024" in r for r in p.reasons)
    assert pad_context(256) == 256 and pad_context(257) == 512


def test_context_is_clamped_to_training_context() -> None:
    p = plan(make_info(ctx_train=2048), context_per_conversation=8192, parallel=2)
    assert p.context_per_conversation == 2048
    assert p.params.n_ctx == 4096
    assert any("trained on 2,048" in r for r in p.reasons)

    odd = plan(make_info(ctx_train=2000), context_per_conversation=4096)
    assert odd.context_per_conversation == 1792  # floored, so padding cannot exceed 2000

    unknown = plan(make_info(ctx_train=None), context_per_conversation=65536)
    assert unknown.context_per_conversation == 65536


def test_batch_sizes_and_threads() -> None:
    p = plan(context_per_conversation=4096)
    assert (p.params.n_batch, p.params.n_ubatch) == (512, 512)
    assert p.params.n_threads == p.params.n_threads_batch == CPU_16G.physical_cores

    small = plan(context_per_conversation=256)
    assert (small.params.n_batch, small.params.n_ubatch) == (256, 256)  # n_batch <= n_ctx

    custom = plan(context_per_conversation=4096, n_ubatch=128, threads=3)
    assert custom.params.n_ubatch == 128 and custom.params.n_batch == 512
    assert custom.params.n_threads == custom.params.n_threads_batch == 3


# -- compute and output -------------------------------------------------------------------------


def test_logit_rows_are_what_is_sampled_one_per_sequence_plus_drafts() -> None:
    """llama-server's output limits: n_parallel x (1 + draft), within the batch."""
    assert output_rows(1, 0, 512) == (1, 1)
    assert output_rows(4, 0, 512) == (4, 4 // 4)
    assert output_rows(4, 16, 512) == (68, 17)
    assert output_rows(8, 32, 64) == (64, 33)  # never more rows than the batch has
    p = plan(gemma3_270m(), context_per_conversation=1024, parallel=4, max_draft=6)
    assert (p.params.n_outputs_max, p.params.n_outputs_max_per_seq) == (28, 7)
    assert plan(gemma3_270m(), parallel=4).params.n_outputs_max == 4
    assert plan(gemma3_270m(), draft=gemma3_270m()).params.n_outputs_max_per_seq == 1 + DEFAULT_MAX_DRAFT


def test_compute_holds_logits_only_for_sampled_rows() -> None:
    """Before n_outputs_max, Gemma's compute buffer held 512 rows of a 262k vocabulary
    (514.5 MiB, as llama.cpp logged); now a layer's intermediates are the peak."""
    g = gemma3_270m()
    for ubatch in (512, 128):
        p = plan(g, context_per_conversation=2048, n_ubatch=ubatch)
        est = compute_estimate(model_shape(g), p.params)
        assert est.logits == 1 * (262144 + 2 * 640) * 4
        assert est.layers > est.logits
        assert p.memory[0].compute == est.peak < 32 * MIB
    spec = plan(g, context_per_conversation=2048, parallel=2, max_draft=8)
    assert compute_estimate(model_shape(g), spec.params).logits == 2 * 9 * (262144 + 2 * 640) * 4


def test_compute_grows_with_context_when_the_vocabulary_is_small() -> None:
    small_vocab = make_info(vocab=32000)
    short = plan(small_vocab, context_per_conversation=2048).memory[0].compute
    long = plan(small_vocab, context_per_conversation=32768).memory[0].compute
    # f16 mask: (32768 - 2048) cells x 512 tokens x 2 bytes more
    assert long - short == (32768 - 2048) * 512 * 2


def test_output_buffer_is_one_logit_row_per_sequence() -> None:
    p = plan(gemma3_270m(), context_per_conversation=1024, parallel=4)
    assert p.memory[0].output == 4 * 262144 * 4 == 4 * MIB


def test_output_buffer_counts_the_draft_rows_it_grows_to() -> None:
    p = plan(gemma3_270m(), context_per_conversation=1024, parallel=4, max_draft=3)
    assert p.memory[0].output == 16 * 262144 * 4


def test_draft_length_out_of_range_is_refused() -> None:
    with pytest.raises(InvalidLoadRequest, match="Draft length"):
        plan(gemma3_270m(), max_draft=MAX_DRAFT_LIMIT + 1)


# -- GPU placement ------------------------------------------------------------------------------


def test_layer_devices_match_llama_cpp_semantics() -> None:
    one_gpu = (gpu(),)
    assert layer_devices(4, 0, one_gpu) == (-1, -1, -1, -1, -1)
    assert layer_devices(4, 1, one_gpu) == (-1, -1, -1, -1, 0)  # the output layer goes first
    assert layer_devices(4, 3, one_gpu) == (-1, -1, 0, 0, 0)
    assert layer_devices(4, 5, one_gpu) == (0, 0, 0, 0, 0)
    assert layer_devices(4, 99, one_gpu) == (0, 0, 0, 0, 0)
    two = (gpu(free=8 * GIB, index=0), gpu(free=8 * GIB, index=1))
    assert layer_devices(3, 4, two) == (0, 0, 1, 1)  # split in proportion to free memory


def test_everything_on_a_big_gpu() -> None:
    hw = machine(gpus=(gpu(),))
    p = plan(hw=hw, context_per_conversation=8192)
    info = make_info()
    assert p.verdict is Verdict.FITS
    assert p.params.n_gpu_layers == info.block_count + 1  # type: ignore[operator]
    cpu, card = p.memory
    assert card.device == "NVIDIA RTX 4090"
    assert card.weights == 32 * 200 * MIB + 500 * MIB  # blocks + output layer
    assert cpu.weights == 500 * MIB  # token embeddings stay on the host
    assert card.kv_cache == 32 * 8192 * 8 * 256 * 2 and cpu.kv_cache == 0
    assert cpu.output > 0 and card.output == 0  # logits land in host memory


def test_tied_output_layer_is_copied_to_the_gpu() -> None:
    g = gemma3_270m()
    p = plan(g, machine(gpus=(gpu(),)), context_per_conversation=2048)
    cpu, card = p.memory
    assert cpu.weights == g.other_tensor_bytes  # embeddings on the host
    assert card.weights == sum(g.block_tensor_bytes) + g.other_tensor_bytes  # + their copy as output


def test_auto_gpu_layers_fill_free_vram_and_report_partial_offload() -> None:
    card = gpu(total=6 * GIB, free=4 * GIB)
    hw = machine(gpus=(card,))
    p = plan(hw=hw, context_per_conversation=4096)
    n = p.params.n_gpu_layers
    assert 0 < n < 33
    assert p.verdict is Verdict.PARTIAL_OFFLOAD
    assert p.memory[1].total <= card.vram_free - vram_reserve(card)
    one_more = plan(hw=hw, context_per_conversation=4096, gpu_layers=n + 1)
    assert one_more.verdict is Verdict.DOES_NOT_FIT
    assert one_more.limiting_resource == "VRAM on NVIDIA RTX 4090"
    assert any(f"{n} of 33 layers" in r for r in p.reasons)


def test_partial_offload_suggestions_fit_fully() -> None:
    hw = machine(gpus=(gpu(total=10 * GIB, free=8 * GIB),))
    p = plan(hw=hw, context_per_conversation=32768, parallel=2)
    assert p.verdict is Verdict.PARTIAL_OFFLOAD
    assert p.suggestions
    for s in p.suggestions:
        assert plan_load(make_info(), hw, s.request).verdict is Verdict.FITS, s.description


def test_gpu_without_offload_build_runs_on_cpu_and_says_so() -> None:
    hw = machine(gpus=(gpu(),), offload=False)
    p = plan(hw=hw, gpu_layers=20)
    assert p.params.n_gpu_layers == 0
    assert [m.device for m in p.memory] == ["CPU"]
    assert p.verdict is Verdict.FITS
    assert any("CPU-only" in r for r in p.reasons)


def test_no_gpu_means_zero_gpu_layers() -> None:
    p = plan(gpu_layers=10)
    assert p.params.n_gpu_layers == 0
    assert p.verdict is Verdict.FITS
    assert any("No usable GPU" in r for r in p.reasons)


def test_explicit_gpu_layers_are_clamped_to_all() -> None:
    p = plan(hw=machine(gpus=(gpu(),)), gpu_layers=999)
    assert p.params.n_gpu_layers == 33


def test_two_gpus_share_layers_by_free_memory() -> None:
    hw = machine(gpus=(gpu("A", 24 * GIB, index=0), gpu("A", 24 * GIB, index=1)))
    p = plan(hw=hw, context_per_conversation=4096)
    assert p.verdict is Verdict.FITS
    _, first, second = p.memory
    assert (first.device, second.device) == ("A #0", "A #1")
    assert first.weights > 0 and second.weights > 0
    assert abs(first.kv_cache - second.kv_cache) <= 2 * 32 * 4096 * 8 * 256 * 2 // 32


# -- verdicts, deficits, suggestions -------------------------------------------------------------


def test_does_not_fit_names_ram_and_the_deficit() -> None:
    hw = machine(ram=8 * GIB)
    p = plan(hw=hw, context_per_conversation=32768, parallel=2)
    cpu = p.memory[0]
    assert p.verdict is Verdict.DOES_NOT_FIT and not p.fits
    assert p.limiting_resource == "RAM"
    assert cpu.reserve == ram_reserve(hw)
    assert p.deficit == cpu.total - (hw.ram_available - cpu.reserve) > 0
    assert any("exceeds" in r for r in p.reasons)


def test_suggestions_make_it_fit_when_replanned() -> None:
    hw = machine(ram=16 * GIB)
    p = plan(hw=hw, context_per_conversation=16384, parallel=4)
    assert p.verdict is Verdict.DOES_NOT_FIT
    kinds = {s.description.split()[0] for s in p.suggestions}
    assert len(p.suggestions) >= 3, kinds
    for s in p.suggestions:
        replanned = plan_load(make_info(), hw, s.request)
        assert replanned.fits, s.description
    requests = [s.request for s in p.suggestions]
    assert any(r.context_per_conversation < 16384 for r in requests)
    assert any(r.parallel < 4 for r in requests)
    assert any(r.kv_type is not KvCacheType.F16 for r in requests)


def test_context_suggestion_is_the_largest_that_fits() -> None:
    hw = machine(ram=12 * GIB)
    p = plan(hw=hw, context_per_conversation=65536)
    (ctx,) = [s for s in p.suggestions if s.request.context_per_conversation != 65536]
    c = ctx.request.context_per_conversation
    assert c % 256 == 0
    assert plan_load(make_info(), hw, ctx.request).fits
    assert not plan_load(make_info(), hw, replace(ctx.request, context_per_conversation=c + 256)).fits


def test_a_smaller_micro_batch_is_no_longer_needed_for_the_logits() -> None:
    """Gemma at n_ubatch 512 once needed 514 MiB of compute (logits for 512 rows) and did
    not fit this machine without a smaller micro-batch; with logits sized to the sampled
    rows it fits at full prefill speed."""
    g = gemma3_270m()
    hw = machine(ram=1 * GIB + 200 * MIB)
    p = plan(g, hw, context_per_conversation=2048)
    assert p.verdict is Verdict.FITS and p.params.n_ubatch == 512
    assert not [s for s in p.suggestions if s.request.n_ubatch]


def test_vram_limit_with_explicit_layers_suggests_fewer() -> None:
    hw = machine(gpus=(gpu(total=8 * GIB, free=6 * GIB),))
    p = plan(hw=hw, context_per_conversation=4096, gpu_layers=33)
    assert p.verdict is Verdict.DOES_NOT_FIT
    assert p.limiting_resource == "VRAM on NVIDIA RTX 4090"
    fewer = [s for s in p.suggestions if s.request.gpu_layers is not None and s.request.gpu_layers < 33]
    assert fewer
    assert plan_load(make_info(), hw, fewer[0].request).fits


def test_hopeless_case_has_no_false_suggestions() -> None:
    hw = machine(ram=2 * GIB)  # the weights alone are 7.25 GiB
    p = plan(hw=hw, context_per_conversation=256)
    assert p.verdict is Verdict.DOES_NOT_FIT
    assert p.suggestions == ()
    assert any("weights alone" in r for r in p.reasons)


def test_fits_has_no_suggestions() -> None:
    p = plan(context_per_conversation=2048)
    assert (
        p.verdict is Verdict.FITS and p.suggestions == () and p.deficit == 0 and p.limiting_resource is None
    )


# -- phases, projector, draft ----------------------------------------------------------------------


def test_phases_without_and_with_projector_and_draft() -> None:
    base = [LoadPhase.VALIDATE, LoadPhase.WEIGHTS, LoadPhase.CONTEXT, LoadPhase.WARMUP, LoadPhase.READY]
    assert list(plan().phases) == base
    draft = make_info(n_layer=4, name="Draft")
    full = plan(projector=make_projector(), draft=draft)
    assert list(full.phases) == [
        LoadPhase.VALIDATE,
        LoadPhase.WEIGHTS,
        LoadPhase.CONTEXT,
        LoadPhase.PROJECTOR,
        LoadPhase.DRAFT,
        LoadPhase.WARMUP,
        LoadPhase.READY,
    ]
    assert list(plan(draft=draft).phases) == [*base[:3], LoadPhase.DRAFT, *base[3:]]


def test_projector_memory_and_placement() -> None:
    proj = make_projector()
    cpu_plan = plan(projector=proj)
    assert cpu_plan.memory[0].projector >= proj.tensor_bytes
    assert not cpu_plan.params.projector_use_gpu

    gpu_plan = plan(hw=machine(gpus=(gpu(),)), projector=proj)
    assert gpu_plan.params.projector_use_gpu
    assert gpu_plan.memory[1].projector >= proj.tensor_bytes and gpu_plan.memory[0].projector == 0


def test_gemma3_projector_images_must_fit_one_ubatch() -> None:
    proj = make_projector(projection_dim=640, projector_type="gemma3", image=896)
    assert non_causal_image_tokens(proj) == 256
    assert non_causal_image_tokens(make_projector()) == 0
    p = plan(gemma3_270m(), projector=proj, n_ubatch=128)
    assert p.params.n_ubatch == 256
    assert any("one image" in r for r in p.reasons)


def test_draft_goes_to_gpu_when_room_is_left() -> None:
    draft = make_info(
        n_layer=4, block_bytes=20 * MIB, embd_bytes=50 * MIB, output_bytes=50 * MIB, name="Draft"
    )
    on_gpu = plan(hw=machine(gpus=(gpu(),)), draft=draft)
    assert on_gpu.params.draft_n_gpu_layers == 5
    assert on_gpu.memory[1].draft > 0
    on_cpu = plan(draft=draft)
    assert on_cpu.params.draft_n_gpu_layers == 0
    assert on_cpu.memory[0].draft > 4 * 20 * MIB


# -- invalid requests -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_", "match"),
    [
        (LoadRequest(context_per_conversation=255), "at least 256"),
        (LoadRequest(parallel=0), "1 to 256"),
        (LoadRequest(parallel=257), "1 to 256"),
        (LoadRequest(gpu_layers=-1), "0 or more"),
        (LoadRequest(n_ubatch=0), "Micro-batch"),
        (LoadRequest(threads=0), "Threads"),
        (LoadRequest(projector=make_projector(projection_dim=2048)), "expects 4096"),
        (LoadRequest(projector=make_info()), "not a vision projector"),
        (LoadRequest(draft=make_projector()), "not a draft model"),
        (
            LoadRequest(kv_type=KvCacheType.Q8_0, draft=make_info(n_embd=64, n_head=4, n_ff=128)),
            "the draft model's are 16/16",
        ),
    ],
)
def test_invalid_requests_raise_a_typed_error(request_: LoadRequest, match: str) -> None:
    with pytest.raises(InvalidLoadRequest, match=match) as err:
        plan_load(make_info(), CPU_16G, request_)
    assert isinstance(err.value, EngineError) and isinstance(err.value, ValueError)
    assert err.value.message


def test_projector_is_not_a_model_to_plan() -> None:
    with pytest.raises(InvalidLoadRequest, match="not a language model"):
        plan_load(make_projector(), CPU_16G, LoadRequest())


def test_header_without_shape_cannot_be_planned() -> None:
    with pytest.raises(InvalidLoadRequest, match="embedding size"):
        plan_load(replace(make_info(), embedding_length=None), CPU_16G, LoadRequest())


# -- people and real files ------------------------------------------------------------------------


def test_describe_plan_lines() -> None:
    p = plan(hw=machine(ram=8 * GIB), context_per_conversation=32768, parallel=2)
    lines = describe_plan(p)
    assert lines[0].startswith("Test 8B: does not fit (RAM short by")
    assert any(line.startswith("CPU: ") for line in lines)
    assert "To make it fit:" in lines
    assert lines[-1] == "Load phases: validate → weights → context → warmup → ready"


def test_plans_a_real_tiny_gguf(tiny_model: Path) -> None:
    from engine.catalog import inspect

    info = inspect(tiny_model)
    p = plan_load(info, CPU_16G, LoadRequest(context_per_conversation=1024, parallel=2))
    assert p.verdict is Verdict.FITS
    assert p.memory[0].weights == info.tensor_bytes
    assert p.memory[0].kv_cache == 2 * 1024 * 2 * 2 * (16 + 16) * 2  # 2 layers, 2 KV heads, head 16


def test_asking_for_no_gpu_layers_is_a_cpu_load() -> None:
    p = plan(hw=machine(gpus=(gpu(),)), gpu_layers=0)
    assert p.params.n_gpu_layers == 0
    assert p.verdict is Verdict.FITS
    assert any("as requested" in r for r in p.reasons)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ctx=st.integers(256, 200_000),
    parallel=st.integers(1, 64),
    kv=st.sampled_from(list(KvCacheType)),
    ram_gib=st.integers(1, 64),
    vram_gib=st.sampled_from([0, 4, 8, 24]),
    gpu_layers=st.one_of(st.none(), st.integers(0, 40)),
)
def test_plan_invariants(
    ctx: int, parallel: int, kv: KvCacheType, ram_gib: int, vram_gib: int, gpu_layers: int | None
) -> None:
    gpus = (gpu(total=vram_gib * GIB),) if vram_gib else ()
    hw = machine(ram=ram_gib * GIB, gpus=gpus)
    info = make_info()
    request = LoadRequest(context_per_conversation=ctx, parallel=parallel, kv_type=kv, gpu_layers=gpu_layers)
    p = plan_load(info, hw, request)
    params = p.params
    assert params.n_ctx == params.n_ctx_seq * params.n_seq_max and params.n_ctx_seq % 256 == 0
    assert params.n_ctx_seq <= info.context_length  # type: ignore[operator]
    assert 0 <= params.n_gpu_layers <= 33
    assert params.n_ubatch <= params.n_batch <= params.n_ctx
    assert all(min(m.weights, m.kv_cache, m.compute, m.output) >= 0 for m in p.memory)
    assert sum(m.weights for m in p.memory) >= info.tensor_bytes
    assert p.fits == (p.deficit == 0) == (p.limiting_resource is None)
    if gpu_layers is None and gpus:
        assert p.memory[1].deficit == 0  # auto never overfills a GPU with room for the compute buffer
    for s in p.suggestions:
        replanned = plan_load(info, hw, s.request)
        if p.verdict is Verdict.TIGHT:  # a fix gives headroom; a partial offload is fine
            assert replanned.verdict in (Verdict.FITS, Verdict.PARTIAL_OFFLOAD)
        elif p.fits:
            assert replanned.verdict is Verdict.FITS
        else:
            assert replanned.fits


# -- CPU_REPACK ---------------------------------------------------------------------------------

AVX2 = ("SSE3", "AVX", "AVX2", "F16C", "FMA")
AVX512 = (*AVX2, "AVX512")
ARM_DOTPROD = ("NEON", "ARM_FMA", "DOTPROD")


@pytest.mark.parametrize(
    ("ggml_type", "rows", "simd", "repacked"),
    [
        ("Q4_K", 8, AVX2, True),
        ("Q4_0", 8, AVX2, True),
        ("IQ4_NL", 8, AVX2, True),
        ("MXFP4", 8, AVX2, True),
        ("Q4_K", 4, AVX2, False),  # rows must divide by 8 on x86
        ("Q2_K", 8, AVX2, False),
        ("Q2_K", 8, AVX512, True),
        ("Q5_0", 8, AVX512, False),
        ("Q6_K", 8, AVX512, False),
        ("Q8_0", 8, AVX512, False),
        ("F16", 8, AVX512, False),
        ("Q4_K", 8, ("SSE3", "AVX"), False),  # an AVX-only build repacks nothing
        ("Q6_K", 8, ARM_DOTPROD, True),
        ("Q8_0", 4, ARM_DOTPROD, True),
        ("Q4_K", 4, ARM_DOTPROD, False),
        ("Q4_0", 4, ("NEON", "MATMUL_INT8"), True),
    ],
)
def test_repack_prediction_per_tensor_type(
    ggml_type: str, rows: int, simd: tuple[str, ...], repacked: bool
) -> None:
    """The rules of ggml-cpu/repack.cpp: weight type, the build's features, row multiple."""
    assert repacked_bytes(((ggml_type, rows, 1000),), simd) == (1000 if repacked else 0)


def test_repack_is_unknown_without_the_build_features() -> None:
    assert repacked_bytes((("Q4_K", 8, 1000),), ()) is None


def test_plan_counts_cpu_repack_beside_the_mapped_weights() -> None:
    info = replace(make_info(), matmul_weights=(("Q4_K", 8, 300 * MIB), ("Q6_K", 8, 100 * MIB)))
    avx2 = replace(machine(), simd=AVX2)
    p = plan_load(info, avx2, LoadRequest())
    assert p.memory[0].repack == 300 * MIB
    m = p.memory[0]
    assert m.total == m.weights + 300 * MIB + m.runtime + m.kv_cache + m.compute + m.output
    assert any("CPU_REPACK" in r and "Q4_K" in r for r in p.reasons)
    unknown = plan_load(info, replace(machine(), simd=()), LoadRequest())
    assert unknown.memory[0].repack == 0
    assert any("CPU_REPACK not predicted" in r for r in unknown.reasons)


def test_a_plan_within_ten_percent_of_free_memory_is_tight_and_offers_headroom() -> None:
    g = gemma3_270m()
    # The smallest machine (16 MiB steps) on which the default load fits at all.
    ram = next(r * 16 * MIB for r in range(40, 400) if plan(g, machine(ram=r * 16 * MIB)).fits)
    p = plan(g, replace(machine(ram=ram), swap_total=GIB))  # "may swap": the machine can
    assert p.verdict is Verdict.TIGHT and p.fits
    assert any(r.startswith("Tight:") and "may swap" in r for r in p.reasons)
    assert p.suggestions, "a tight plan offers the change that gives headroom"
    fixed = plan_load(g, machine(ram=ram), p.suggestions[0].request)
    assert fixed.verdict is Verdict.FITS
    roomy = plan(g, machine(ram=4 * ram))
    assert roomy.verdict is Verdict.FITS and not roomy.suggestions


def test_runtime_counts_the_vocabulary_tables_llama_cpp_keeps() -> None:
    """Measured with vocab-only loads: Gemma 3's 262,144 tokens take 41.0 MiB, Qwen2.5's
    151,936 tokens and 151,387 merges 46.0 MiB."""
    gemma = model_shape(replace(make_info(vocab=262144), merges_count=0))
    qwen = model_shape(replace(make_info(vocab=151936), merges_count=151387))
    assert gemma.vocab_table_bytes == pytest.approx(41.0 * MIB, rel=0.03)
    assert qwen.vocab_table_bytes == pytest.approx(46.0 * MIB, rel=0.03)


def test_runtime_grows_with_conversations_and_context() -> None:
    """Each conversation decodes with its own sampler chain (n_vocab candidates of 12 bytes);
    each KV cell has its bookkeeping in every cache; the rest is fixed."""
    info = replace(make_info(vocab=262144), merges_count=0)
    one = plan(info, context_per_conversation=4096, parallel=1).memory[0].runtime
    four = plan(info, context_per_conversation=1024, parallel=4).memory[0].runtime
    assert four - one == 3 * (CHAIN_BYTES_PER_VOCAB_TOKEN * 262144 + SEQUENCE_BYTES)  # three more chains
    longer = plan(info, context_per_conversation=8192, parallel=1).memory[0].runtime
    assert longer - one == 4096 * (CELL_BYTES_PER_CACHE + PROMPT_BYTES_PER_CELL)
    shape = model_shape(info)
    assert one > shape.vocab_table_bytes + RUNTIME_FIXED_BYTES


def test_a_device_total_adds_up_every_memory_part() -> None:
    """The planner's tally and the DeviceMemory it becomes share one list of parts."""
    assert tuple(f.name for f in fields(Tally)) == MEMORY_PARTS
    assert set(MEMORY_PARTS) <= {f.name for f in fields(DeviceMemory)}
    tally = Tally(**{part: 1 << i for i, part in enumerate(MEMORY_PARTS)})
    memory = tally.memory("CPU", available=0, reserve=0)
    assert memory.total == tally.total == (1 << len(MEMORY_PARTS)) - 1
