"""The real API server for tests: ``ApiServer`` on its own asyncio loop in a thread, so a
test drives it over HTTP with the official ``openai`` SDK (or raw sockets) from the test's
own thread, as an editor would from another process."""

from __future__ import annotations

import asyncio
import gc
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.api import ApiServer, ServerConfig
from engine import Engine, LoadedModel, SlotState
from tests.conftest import REPO, plan_for

TIMEOUT = 60


def load(
    path: Path, ctx: int = 1024, parallel: int = 4, queue_capacity: int = 32, **request: Any
) -> LoadedModel:
    plan = plan_for(path, ctx=ctx, parallel=parallel, **request)
    return Engine.load(plan, queue_capacity=queue_capacity).wait_ready(TIMEOUT)


class ServerThread:
    """``with ServerThread(lambda: model) as server:`` — listening on a free port."""

    def __init__(
        self,
        model: Callable[[], LoadedModel | None],
        config: ServerConfig | None = None,
        embedder: Callable[[], Any] | None = None,
        embedder_refusal: str | None = None,
    ) -> None:
        self.config = config or ServerConfig(port=0)
        self.server = ApiServer(self.config, model, embedder=embedder, embedder_refusal=embedder_refusal)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="api-test-loop", daemon=True)
        self._started = threading.Event()
        self._error: BaseException | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self.server.start())
        except BaseException as exc:
            self._error = exc
            self._started.set()
            return
        self._started.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self.server.stop())
        self.loop.close()

    def __enter__(self) -> ServerThread:
        self._thread.start()
        self._started.wait(TIMEOUT)
        if self._error is not None:
            raise self._error
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(TIMEOUT)
        # Let the model go with the server: aiohttp's objects form reference cycles, and a
        # LoadedModel still alive at exit is unloaded again by the engine's atexit hook,
        # after the test session has shut Qt down.
        self.server.state.model = lambda: None
        gc.collect()

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the server's loop and return its result (for inspecting state)."""

        async def wrapper() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(wrapper(), self.loop).result(TIMEOUT)

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def base_url(self) -> str:
        return self.server.address

    def client(self, **kwargs: Any):  # -> openai.OpenAI
        import openai

        kwargs.setdefault("api_key", self.config.api_key or "not-needed")
        return openai.OpenAI(base_url=self.server.address, max_retries=0, timeout=TIMEOUT, **kwargs)

    def request(
        self,
        method: str,
        path: str,
        body: bytes | str | dict | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        """A raw HTTP request: status, headers (lower-case names), body."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT)
        data = json.dumps(body).encode() if isinstance(body, dict) else body
        data = data.encode() if isinstance(data, str) else data
        conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        payload = response.read()
        result = response.status, {k.lower(): v for k, v in response.getheaders()}, payload
        conn.close()
        return result

    def post_json(self, path: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, Any]:
        status, _, payload = self.request("POST", path, body, headers)
        return status, json.loads(payload)


def wait_until(condition: Callable[[], bool], timeout: float = TIMEOUT, what: str = "condition") -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def active_sequences(model: LoadedModel) -> int:
    return sum(1 for s in model.stats().sequences if s.state is SlotState.ACTIVE)


def sse_events(payload: bytes) -> list[Any]:
    """The ``data:`` payloads of a server-sent event stream, "[DONE]" as the string."""
    events = []
    for block in payload.decode().split("\n\n"):
        if block.startswith("data: "):
            data = block[len("data: ") :]
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


class Serve:
    """`hearth serve ARGS` in its own process, its output read line by line."""

    def __init__(self, *args: str) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("HEARTH_API_KEY", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", *args],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.lines: list[str] = []

    def read_until(self, pattern: str) -> re.Match:
        deadline = time.monotonic() + TIMEOUT
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError(f"exited before {pattern!r}: {self.lines} {self.proc.stderr.read()}")
            self.lines.append(line.rstrip("\n"))
            if match := re.search(pattern, line):
                return match
        raise AssertionError(f"no {pattern!r} in {self.lines}")

    def stop(self, sig: int) -> tuple[int, str]:
        self.proc.send_signal(sig)
        out, err = self.proc.communicate(timeout=TIMEOUT)
        self.lines += out.splitlines()
        return self.proc.returncode, err

    def address(self) -> str:
        """The base URL it prints once it listens."""
        return self.read_until(r"at (http://127\.0\.0\.1:\d+/v1) ").group(1)

    def kill(self) -> None:
        """SIGKILL: the server is gone at once, mid-stream, as a machine that loses power."""
        self.proc.kill()
        self.proc.communicate(timeout=TIMEOUT)
