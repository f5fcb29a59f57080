"""``hearth serve MODEL``: the API without the window, on a plain asyncio loop.

Prints the load plan and each load phase as it runs, then the address, then one line per
request; Ctrl+C or SIGTERM stops accepting, ends the requests being served, unloads the
model and exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt

from app.api.server import ApiServer, ServerConfig
from app.wording.presenters import PHASE_LABELS
from engine import (
    EmbedderDoesNotFit,
    Engine,
    EngineError,
    LoadedModel,
    LoadPhase,
    LoadPlan,
    SpeculationConfig,
    describe_plan,
)

_DIRECT = Qt.ConnectionType.DirectConnection


@dataclass(frozen=True)
class ServeOptions:
    plan: LoadPlan
    config: ServerConfig
    speculation: SpeculationConfig | None = None
    embedding_model: Path | None = None  # /v1/embeddings and document search (None: refused)
    # The machine the embedder is planned for, measured once the model is loaded (None: not
    # planned); whether the user named it (one that does not fit then stops the server).
    embedder_hardware: Callable[[], Any] | None = None  # () -> HardwareSnapshot
    embedder_required: bool = False


def say(line: str) -> None:
    print(line, flush=True)


def run_serve(options: ServeOptions) -> int:
    """Blocks until stopped; the exit status."""
    try:
        return asyncio.run(_serve(options))
    except KeyboardInterrupt:  # a second Ctrl+C while stopping
        return 130


async def _serve(options: ServeOptions) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    for line in describe_plan(options.plan):
        say(line)
    model = Engine.load(options.plan, speculation=options.speculation, start=False)
    loaded = _watch_load(model, loop)
    model.start()
    stopping = asyncio.ensure_future(stop.wait())
    closing: list[Callable[[], None]] = []
    try:
        await asyncio.wait({loaded, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not loaded.done():
            say("Stopped while loading.")
            model.cancel_load()
            return 130
        error = loaded.result()
        if error is not None:
            print(f"hearth: {error.message}", file=sys.stderr, flush=True)
            return 2
        embedder, refusal = None, None
        if options.embedding_model is not None:
            from engine import open_embedder

            measure = options.embedder_hardware
            try:  # planned first for the machine with the model loaded: EmbedderDoesNotFit opens nothing
                hardware = await asyncio.to_thread(measure) if measure is not None else None
                embedder = await asyncio.to_thread(open_embedder, options.embedding_model, hardware=hardware)
            except EmbedderDoesNotFit as exc:
                print(f"hearth: {exc.message}", file=sys.stderr, flush=True)
                if options.embedder_required:
                    return 2
                refusal = exc.message  # the default embedder: served without, /v1/embeddings says why
            except EngineError as exc:
                print(f"hearth: {exc.message}", file=sys.stderr, flush=True)
                return 2
            if embedder is not None:
                closing.append(embedder.close)
                say(f"Embeddings: {options.embedding_model.name} ({embedder.dim} dimensions)")
        server = ApiServer(
            options.config, lambda: model, on_request=lambda r: say(r.line()), embedder=lambda: embedder,
            embedder_refusal=refusal,
        )  # fmt: skip
        try:
            await server.start()
        except EngineError as exc:
            print(f"hearth: {exc.message}", file=sys.stderr, flush=True)
            return 2
        if note := (await asyncio.to_thread(model.stats)).draft_note:
            say(note)  # the draft model was let go at warm-up: it could not pay here
        info, params = options.plan.model, options.plan.params
        say(
            f"Serving {info.display_name} at {server.address} ({params.n_seq_max} at once, "
            f"{model.context_per_conversation:,} tokens each) — Ctrl+C stops."
        )
        await stopping
        say("Stopping…")
        await server.stop()
        return 0
    finally:
        stopping.cancel()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        for close in closing:
            await asyncio.to_thread(close)
        await asyncio.to_thread(model.unload)


def _watch_load(model: LoadedModel, loop: asyncio.AbstractEventLoop) -> asyncio.Future:
    """Print each phase as the executor reports it; a future of the load's error (None: ready)."""
    done: asyncio.Future = loop.create_future()

    def later(fn: Callable[..., object], *args: object) -> Callable[..., None]:
        def schedule(*_signal_args: object) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone
                loop.call_soon_threadsafe(fn, *args, *_signal_args)

        return schedule

    def started(phase: LoadPhase) -> None:
        if phase is not LoadPhase.READY:
            say(f"  {PHASE_LABELS.get(phase, phase.value)}…")

    def finished(phase: LoadPhase, seconds: float) -> None:
        if phase is not LoadPhase.READY:
            say(f"  {PHASE_LABELS.get(phase, phase.value)}: {seconds:.2f} s")

    def settle(error: EngineError | None = None) -> None:
        if not done.done():
            done.set_result(error)

    model.phase_started.connect(later(started), _DIRECT)
    model.phase_finished.connect(later(finished), _DIRECT)
    model.ready.connect(later(settle), _DIRECT)
    model.load_failed.connect(later(settle), _DIRECT)
    return done


__all__ = ["ServeOptions", "run_serve"]
