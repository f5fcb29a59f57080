"""The llama.cpp log router (line assembly, sinks, logging) and the buffer-size parser."""

from __future__ import annotations

import gc
import logging
import threading
from pathlib import Path

import pytest

from engine.native.llama_log import (
    LlamaLogRouter,
    LogLevel,
    LogLine,
    LogSource,
    capture_llama_logs,
    get_router,
    parse_buffer_sizes,
)

MIB = 1024 * 1024


def collect(router: LlamaLogRouter, min_level: LogLevel = LogLevel.DEBUG) -> list[LogLine]:
    lines: list[LogLine] = []
    router.add_sink(lines.append, min_level)
    return lines


def test_fragments_and_continuations_become_whole_lines() -> None:
    router = LlamaLogRouter()
    lines = collect(router)
    router.feed(LogLevel.INFO, b"load_tensors: loading")
    router.feed(LogLevel.CONT, b" model tensors")
    router.feed(LogLevel.CONT, b", done\nsecond line\nthird ")
    assert [(ln.level, ln.text) for ln in lines] == [
        (LogLevel.INFO, "load_tensors: loading model tensors, done"),
        (LogLevel.INFO, "second line"),
    ]
    router.feed(LogLevel.WARN, b"a warning\n")  # a new message ends the unfinished one
    assert [ln.text for ln in lines[2:]] == ["third", "a warning"]
    assert lines[3].level is LogLevel.WARN


def test_continuation_of_a_finished_line_keeps_its_level() -> None:
    router = LlamaLogRouter()
    lines = collect(router)
    router.feed(LogLevel.DEBUG, b"progress\n")
    router.feed(LogLevel.CONT, b"....")
    router.feed(LogLevel.CONT, b"\n")
    assert [(ln.level, ln.text) for ln in lines] == [(LogLevel.DEBUG, "progress"), (LogLevel.DEBUG, "....")]


def test_flush_delivers_the_unfinished_line() -> None:
    router = LlamaLogRouter()
    lines = collect(router)
    router.feed(LogLevel.ERROR, b"no newline")
    assert lines == []
    router.flush()
    assert [ln.text for ln in lines] == ["no newline"]


def test_sink_levels_removal_and_failures() -> None:
    router = LlamaLogRouter()
    everything = collect(router)
    warnings = collect(router, LogLevel.WARN)

    raised: list[str] = []

    def broken(line: LogLine) -> None:
        raised.append(line.text)
        raise RuntimeError("sink bug")

    router.add_sink(broken)
    router.feed(LogLevel.DEBUG, b"debug\n")
    router.feed(LogLevel.WARN, b"warn\n")
    assert [ln.text for ln in everything] == ["debug", "warn"]
    assert [ln.text for ln in warnings] == ["warn"]
    assert raised == ["debug", "warn"]  # the broken sink was called, and the others still got both
    router.remove_sink(everything.append)
    router.remove_sink(broken)
    router.remove_sink(print)  # never added: ignored
    router.feed(LogLevel.ERROR, b"error\n")
    assert [ln.text for ln in everything] == ["debug", "warn"]
    assert [ln.text for ln in warnings] == ["warn", "error"]


def test_forwarding_to_python_logging_drops_debug(caplog: pytest.LogCaptureFixture) -> None:
    router = LlamaLogRouter()
    with caplog.at_level(logging.DEBUG, logger="hearth.llama"):
        router.feed(LogLevel.DEBUG, b"noise\n")
        router.feed(LogLevel.INFO, b"info\n")
        router.feed(LogLevel.WARN, b"careful\n")
        router.feed(LogLevel.ERROR, b"broken\n")
    got = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "hearth.llama"]
    assert got == [(logging.DEBUG, "info"), (logging.WARNING, "careful"), (logging.ERROR, "broken")]


def test_threads_assemble_their_own_lines() -> None:
    router = LlamaLogRouter()
    lines = collect(router)
    barrier = threading.Barrier(4)

    def worker(n: int) -> None:
        barrier.wait()
        for i in range(200):
            router.feed(LogLevel.INFO, f"t{n} line {i} ".encode())
            router.feed(LogLevel.CONT, b"end\n")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(lines) == 800
    assert all(ln.text.endswith(" end") and ln.text.count("line") == 1 for ln in lines)


_KV_3 = "llama_kv_cache: size =   12.00 MiB (  1024 cells,   3 layers,  4/4 seqs), "
_KV_15 = "llama_kv_cache: size =   60.00 MiB (  1024 cells,  15 layers,  4/4 seqs), "
REFERENCE_LOG = [  # Gemma 3 270M, n_ctx 4096, n_seq_max 4 (from the llama-cpp-python reference)
    "load_tensors:   CPU_Mapped model buffer size =   235.16 MiB",
    "load_tensors:   CPU_REPACK model buffer size =    12.66 MiB",
    "llama_context:        CPU  output buffer size =     4.00 MiB",
    "llama_kv_cache:        CPU KV buffer size =    12.00 MiB",
    _KV_3 + "K (f16):    6.00 MiB, V (f16):    6.00 MiB",
    "llama_kv_cache:        CPU KV buffer size =    60.00 MiB",
    _KV_15 + "K (f16):   30.00 MiB, V (f16):   30.00 MiB",
    "sched_reserve:        CPU compute buffer size =   514.50 MiB",
    "sched_reserve: graph: nodes = 700, splits = 1",
]


def test_parse_buffer_sizes_from_llama_cpp_lines() -> None:
    r = parse_buffer_sizes(REFERENCE_LOG)
    assert dict(r.model) == {"CPU_Mapped": round(235.16 * MIB), "CPU_REPACK": round(12.66 * MIB)}
    assert r.kv_total == 72 * MIB and dict(r.kv) == {"CPU": 72 * MIB}
    assert r.compute_total == round(514.5 * MIB)
    assert r.output_total == 4 * MIB
    assert [(c.cells, c.layers, c.seqs, c.streams, c.type_k) for c in r.kv_caches] == [
        (1024, 3, 4, 4, "f16"),
        (1024, 15, 4, 4, "f16"),
    ]
    assert r.projector_model == 0 and r.projector_compute_total == 0


def test_parse_keeps_gpu_buffers_apart_and_projector_lines_separate() -> None:
    lines = [
        LogLine(LogLevel.INFO, "load_tensors:        CUDA0 model buffer size =  1000.00 MiB"),
        LogLine(LogLevel.INFO, "load_tensors:   CPU_Mapped model buffer size =   100.00 MiB"),
        LogLine(LogLevel.INFO, "sched_reserve:      CUDA0 compute buffer size =   300.00 MiB"),
        LogLine(LogLevel.INFO, "sched_reserve:  CUDA_Host compute buffer size =    10.00 MiB"),
        LogLine(LogLevel.INFO, "load_hparams: model size:         800.50 MiB", LogSource.MTMD),
        LogLine(
            LogLevel.INFO,
            "reserve_compute_meta:        CPU compute buffer size =    50.00 MiB",
            LogSource.MTMD,
        ),
        LogLine(
            LogLevel.INFO,
            "reserve_compute_meta:        CPU compute buffer size =    40.00 MiB",
            LogSource.MTMD,
        ),
    ]
    r = parse_buffer_sizes(lines)
    assert dict(r.model) == {"CUDA0": 1000 * MIB, "CPU_Mapped": 100 * MIB}
    assert dict(r.compute) == {"CUDA0": 300 * MIB, "CUDA_Host": 10 * MIB}
    assert r.projector_model == round(800.5 * MIB)
    assert dict(r.projector_compute) == {"CPU": 40 * MIB}  # re-reserved: the last report wins


def test_capture_from_llama_cpp(tiny_model: Path) -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    from engine.native.backend import ensure_backend

    assert ensure_backend()
    router = get_router()
    assert router.installed and router is get_router()
    gc.collect()  # the installed callback must survive collection
    with capture_llama_logs(LogLevel.INFO) as lines:
        params = llama_cpp.llama_model_default_params()
        params.n_gpu_layers = 0
        model = llama_cpp.llama_model_load_from_file(str(tiny_model).encode(), params)
        assert model
        llama_cpp.llama_model_free(model)
    assert all(line.level >= LogLevel.INFO for line in lines)
    assert parse_buffer_sizes(lines).model_total > 0
    assert not any("\n" in line.text for line in lines)


def test_capture_can_keep_to_the_calling_thread() -> None:
    pytest.importorskip("llama_cpp")
    router = get_router()

    def other() -> None:
        router.feed(LogLevel.INFO, b"from another thread\n")

    with (
        capture_llama_logs(this_thread_only=True) as mine,
        capture_llama_logs() as everyone,
    ):
        router.feed(LogLevel.INFO, b"from this thread\n")
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert [ln.text for ln in mine] == ["from this thread"]
    assert sorted(ln.text for ln in everyone) == ["from another thread", "from this thread"]
    assert router.mtmd_installed
