"""Hearth's engine: everything about models and inference, no widgets.

The public API, for the GUI now and an HTTP API later::

    from engine import Engine, ChatRequest, ChatMessage, LoadRequest
    from engine import inspect_model, plan_load, take_snapshot

    request = LoadRequest(context_per_conversation=4096, parallel=4)
    plan = plan_load(inspect_model(path), take_snapshot(), request)
    model = Engine.load(plan).wait_ready()          # or connect to phase_* / ready / load_failed signals
    handle = model.submit(ChatRequest(messages=(ChatMessage("user", "Hello!"),)))
    handle.delta.connect(print)                      # Qt signals, queued into the receiver's thread
    completion = handle.wait()                       # or iterate handle.events()
    model.stats()                                    # per-sequence KV cells, prefix hits, tokens/s
    model.unload()

Names resolve lazily so ``import engine.catalog`` stays cheap (no Qt, no llama.cpp).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Engine": "engine.loaded_model",
    "LoadedModel": "engine.loaded_model",
    "ChatRequest": "engine.requests",
    "check_tools": "engine.requests",
    "SamplingParams": "engine.sampling",
    "GREEDY": "engine.sampling",
    "Grammar": "engine.sampling",
    "JSON_OBJECT_GRAMMAR": "engine.sampling",
    "grammar_from_json_schema": "engine.sampling",
    "TokenLogprob": "engine.requests",
    "TopLogprob": "engine.requests",
    "ToolCall": "engine.chat",
    "ChatTraits": "engine.chat",
    "ToolCallFormat": "engine.chat",
    "ToolCallParser": "engine.chat",
    "ContentDelta": "engine.chat",
    "ToolCallBegin": "engine.chat",
    "ToolCallArgs": "engine.chat",
    "OutputEvent": "engine.chat",
    "ReasoningSplitter": "engine.chat",
    "tool_choice_grammar": "engine.chat",
    "new_call_id": "engine.chat",
    "InvalidChatRequest": "engine.errors",
    "GrammarStuck": "engine.token_sampler",
    "DEFAULT_MAX_TOKENS": "engine.defaults",
    "DEFAULT_CONTEXT_PER_CONVERSATION": "engine.defaults",
    "DEFAULT_MAX_DRAFT": "engine.defaults",
    "Completion": "engine.requests",
    "StopReason": "engine.requests",
    "PromptSize": "engine.requests",
    "PromptTooLong": "engine.requests",
    "RequestHandle": "engine.requests",
    "EngineStats": "engine.requests",
    "SlotState": "engine.requests",
    "ChatMessage": "engine.chat",
    "Role": "engine.chat",
    "ModelInfo": "engine.catalog",
    "inspect": "engine.catalog",
    "inspect_model": "engine.catalog",
    "inspect_projector": "engine.catalog",
    "Library": "engine.library",
    "HardwareSnapshot": "engine.hardware",
    "Telemetry": "engine.hardware",
    "take_snapshot": "engine.hardware",
    "with_cpu_load": "engine.hardware",
    "CpuMeter": "engine.cpu_load",
    "CpuContention": "engine.cpu_load",
    "MAX_THREADS": "engine.planner",
    "choose_threads": "engine.planner",
    "LoadRequest": "engine.planner",
    "LoadPlan": "engine.planner",
    "LoadPhase": "engine.planner",
    "KvCacheType": "engine.planner",
    "plan_load": "engine.planner",
    "EngineError": "engine.errors",
    "Overloaded": "engine.errors",
    "Cancelled": "engine.errors",
    "ReplyInterrupted": "engine.errors",
    "ChatModel": "engine.chat_model",
    "ModelLabel": "engine.chat_model",
    "RemoteEndpoint": "engine.remote",
    "RemoteModelInfo": "engine.remote",
    "RemoteModel": "engine.remote",
    "RemoteError": "engine.remote",
    "RemoteBadUrl": "engine.remote",
    "RemoteInterrupted": "engine.remote",
    "RemoteRefused": "engine.remote",
    "RemoteUnauthorized": "engine.remote",
    "RemoteUnreachable": "engine.remote",
    "list_models": "engine.remote",
    "normalize_base_url": "engine.remote",
    # the child processes of the native self-check and the model check (`hearth --native-probe`, ...)
    "run_native_probe_child": "engine.native_probe:child_main",
    "run_model_check_child": "engine.model_check:child_main",
    "run_rpc_probe_child": "engine.rpc.probe:child_main",
    "run_rpc_model_child": "engine.rpc.model_child:child_main",
    # llama.cpp RPC workers
    "WorkerAddress": "engine.rpc",
    "WorkerInfo": "engine.rpc",
    "WorkerState": "engine.rpc",
    "WorkerUnavailable": "engine.errors",
    "ModelProcessEnded": "engine.errors",
    "RemoteDevice": "engine.devices",
    "parse_worker_address": "engine.rpc:parse_address",
    "probe_worker": "engine.rpc",
    "with_workers": "engine.rpc",
    "ping_worker": "engine.rpc:ping",
    "run_worker": "engine.rpc.server:run_worker",
    "WorkerConfig": "engine.rpc.server",
    "run_engine_benchmarks": "engine.benchmark",
    "speculation_benchmark": "engine.benchmark",
    "ImageRejected": "engine.errors",
    "DeviceType": "engine.hardware",
    "TelemetrySample": "engine.hardware",
    "describe_hardware": "engine.hardware:describe",
    "to_jsonable": "engine.jsonable",
    "LibraryEntry": "engine.library",
    "ReportedMemory": "engine.llama_log",
    "DecodedImage": "engine.multimodal",
    "check_message_images": "engine.multimodal",
    "load_image": "engine.multimodal",
    "load_images": "engine.multimodal",
    "DeviceMemory": "engine.planner",
    "Verdict": "engine.planner",
    "describe_plan": "engine.planner",
    "Completed": "engine.requests",
    "Failed": "engine.requests",
    "Prefill": "engine.requests",
    "TextDelta": "engine.requests",
    "SpeculationConfig": "engine.speculative",
    "SpeculationMode": "engine.speculative",
    "write_tiny_text_model": "engine.tiny_models",
    "format_bytes": "engine.units",
    "format_count": "engine.units",
    "plural": "engine.units",
    # the Hugging Face Hub (engine/hub): search, remote plans, downloads
    "HubAccess": "engine.hub",
    "HubClient": "engine.hub",
    "HubRef": "engine.hub",
    "HubFile": "engine.hub",
    "RepoSummary": "engine.hub",
    "RepoFiles": "engine.hub",
    "QuantOption": "engine.hub",
    "HeaderCache": "engine.hub",
    "RemoteInspection": "engine.hub",
    "inspect_remote": "engine.hub",
    "inspect_remote_projector": "engine.hub",
    "parse_hub_ref": "engine.hub",
    "resolve_endpoint": "engine.hub",
    "Downloader": "engine.hub",
    "DownloadManager": "engine.hub",
    "DownloadSpec": "engine.hub",
    "DownloadProgress": "engine.hub",
    "DownloadState": "engine.hub",
    "DownloadControl": "engine.hub",
    "DEFAULT_PARALLEL": "engine.hub",
    "HubError": "engine.errors",
    "HubAccessDenied": "engine.errors",
    "HubNotFound": "engine.errors",
    "HubRateLimited": "engine.errors",
    "HubUnreachable": "engine.errors",
    "HubProtocolError": "engine.errors",
    "NoGgufFiles": "engine.errors",
    "ChecksumMismatch": "engine.errors",
    "NotEnoughSpace": "engine.errors",
    "UnsafeFileName": "engine.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    module, _, attr = target.partition(":")  # "module:attr" exports a name under another one
    return getattr(importlib.import_module(module), attr or name)
