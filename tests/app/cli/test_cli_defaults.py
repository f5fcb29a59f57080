"""Every default the CLI shows is read from its constant, not retyped."""

from __future__ import annotations

from app.api import DEFAULT_HOST, DEFAULT_PORT
from app.cli import build_parser
from engine import (
    DEFAULT_API_HOST,
    DEFAULT_API_PORT,
    DEFAULT_KV_CACHE_TYPE,
    DEFAULT_N_UBATCH,
    DEFAULT_WORKER_PORT,
    KvCacheType,
    LoadRequest,
)


def test_the_cli_s_defaults_are_the_constants() -> None:
    parser = build_parser()
    serve = parser.parse_args(["serve", "m.gguf"])
    assert (serve.host, serve.port, serve.kv) == (DEFAULT_API_HOST, DEFAULT_API_PORT, DEFAULT_KV_CACHE_TYPE)
    assert (DEFAULT_HOST, DEFAULT_PORT) == (DEFAULT_API_HOST, DEFAULT_API_PORT)
    worker = parser.parse_args(["worker"])
    assert (worker.host, worker.port) == (DEFAULT_API_HOST, DEFAULT_WORKER_PORT)
    assert parser.parse_args(["plan", "m.gguf"]).kv == LoadRequest().kv_type.value
    for kv in KvCacheType:
        assert parser.parse_args(["plan", "m.gguf", "--kv", kv.value]).kv == kv.value


def test_one_source_for_the_engine_s_numbers() -> None:
    import engine.planner as planner
    import engine.rpc as rpc
    import engine.scheduler as scheduler
    from engine.chat import messages, tool_call_formats

    assert planner.DEFAULT_N_UBATCH is scheduler.DEFAULT_N_UBATCH is DEFAULT_N_UBATCH
    assert rpc.DEFAULT_PORT == DEFAULT_WORKER_PORT
    assert tool_call_formats.MAX_TOOL_NAME is messages.MAX_TOOL_NAME
    assert messages.MAX_TOOL_NAME == 64
