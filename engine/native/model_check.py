"""A model file llama.cpp has not opened before is opened first in a child process.

The catalog refuses every header value known to make llama.cpp abort (engine/catalog/load_limits.py),
but llama.cpp is large and a rule can be missing. So before a file is loaded in Hearth's own
process, a child loads it on the CPU, creates a small context and decodes two tokens. A child
that dies of a signal turns into a one-line :class:`LoadFailed` naming the signal and
llama.cpp's own last words (a ``GGML_ASSERT`` line); a clean llama.cpp error is passed on as
it is. The verdict is remembered per header (the bytes before the weights, the file size
and the llama.cpp build), so a file costs one check, ever, and a re-downloaded copy none.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from engine.base.errors import LoadFailed
from engine.catalog import ModelInfo
from engine.native.probe import CHILD_ENV, build_identity
from engine.native.verdict_cache import cache_path, read_verdicts, remember

log = logging.getLogger(__name__)

CHECK_FLAG = "--check-model"  # `hearth --check-model PATH...` runs child_main() in a frozen bundle
CHECK_TIMEOUT_S = 300.0  # per file: a large model on a slow disk
MAX_REMEMBERED = 2000
DECODE_LIMIT_BYTES = 4 << 30  # above this the child loads and makes a context but does not decode


@dataclass(frozen=True)
class ModelVerdict:
    key: str
    ok: bool
    message: str = ""  # "" when ok; the one line shown otherwise
    signal_name: str | None = None
    seconds: float = 0.0

    @property
    def remembered(self) -> bool:
        """Crashes and clean verdicts hold for this header and build; a timeout does not."""
        return self.ok or self.signal_name not in (None, "SIGKILL", "timeout")


def verdict_key(info: ModelInfo, build: str | None = None) -> str:
    """The header's bytes (everything before the weights), the file's size, the build."""
    h = hashlib.sha1(usedforsecurity=False)
    with open(info.path, "rb") as f:
        h.update(f.read(max(info.data_offset, 0) or 1 << 20))
    h.update(f"|{info.file_size}|{build or build_identity()}".encode())
    return h.hexdigest()[:24]


def check_command() -> list[str]:
    if getattr(sys, "frozen", False):
        return [sys.executable, CHECK_FLAG]
    return [sys.executable, "-m", "engine.native.model_check"]


def default_cache_file() -> Path:
    return cache_path("model-verdicts.json")


def check_model_file(
    info: ModelInfo, cache_file: Path | None = None, command: Sequence[str] | None = None
) -> ModelVerdict:
    """The verdict for ``info``'s file: remembered, or from a child that opens it now."""
    cache_file = cache_file or default_cache_file()
    key = verdict_key(info)
    cache = read_verdicts(cache_file)
    known = cache.get(key)
    if isinstance(known, dict):
        try:
            return ModelVerdict(**known)
        except TypeError:
            pass
    verdict = check_files([info.path], command, keys=[key])[0]
    log.info("model check %s: %s in %.2f s", info.path.name, verdict.message or "ok", verdict.seconds)
    if verdict.remembered:
        remember(cache_file, key, asdict(verdict), keep=MAX_REMEMBERED)
    return verdict


def require_loadable(info: ModelInfo, cache_file: Path | None = None) -> None:
    verdict = check_model_file(info, cache_file)
    if not verdict.ok:
        raise LoadFailed(verdict.message)


def check_files(
    paths: Sequence[Path],
    command: Sequence[str] | None = None,
    *,
    keys: Sequence[str] | None = None,
    timeout: float = CHECK_TIMEOUT_S,
) -> list[ModelVerdict]:
    """Open each file in child processes, one child for as many files as it survives.

    A child that dies takes only the file it was opening with it: the next child starts
    with the file after. One verdict per path, in order.
    """
    command = list(command or check_command())
    keys = list(keys) if keys is not None else [str(p) for p in paths]
    verdicts: list[ModelVerdict] = []
    while len(verdicts) < len(paths):
        todo = [str(p) for p in paths[len(verdicts) :]]
        started = time.monotonic()
        env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"), **CHILD_ENV)
        child = subprocess.Popen(
            [*command, *todo],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
            errors="replace",
        )
        stderr_lines: list[str] = []
        try:
            assert child.stdout is not None
            for line in _lines_with_deadline(child, timeout):
                report = _parse(line)
                if report is None:
                    continue
                i = len(verdicts)
                ok = bool(report.get("ok"))
                why = report.get("error") or "unknown error"
                message = "" if ok else f"llama.cpp could not load {paths[i].name}: {why}"
                verdicts.append(ModelVerdict(keys[i], ok, message, None, time.monotonic() - started))
                started = time.monotonic()
                if len(verdicts) == len(paths):
                    break
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            i = len(verdicts)
            verdicts.append(
                ModelVerdict(
                    keys[i],
                    False,
                    f"Opening {paths[i].name} took longer than {timeout:.0f} s.",
                    "timeout",
                    time.monotonic() - started,
                )
            )
            continue
        finally:
            if child.stderr is not None:
                stderr_lines = child.stderr.read().splitlines()[-40:]
        if len(verdicts) < len(paths):
            i = len(verdicts)
            verdicts.append(
                _died(keys[i], paths[i], child.returncode, stderr_lines, time.monotonic() - started)
            )
    return verdicts


def _lines_with_deadline(child: subprocess.Popen, timeout: float) -> Iterable[str]:
    """stdout lines of ``child``; TimeoutExpired when one file takes longer than ``timeout``."""
    import selectors

    assert child.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(child.stdout, selectors.EVENT_READ)
        while True:
            if not selector.select(timeout):
                raise subprocess.TimeoutExpired(child.args, timeout)
            line = child.stdout.readline()
            if not line:
                return
            yield line


def _parse(line: str) -> dict | None:
    try:
        report = json.loads(line)
    except ValueError:
        return None
    return report if isinstance(report, dict) and "ok" in report else None


def _died(key: str, path: Path, returncode: int | None, stderr: list[str], seconds: float) -> ModelVerdict:
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
    else:
        name = None
    # llama.cpp's last words: "…/llama-vocab.cpp:2544: GGML_ASSERT(…) failed", "terminate called …"
    words = next(
        (
            ln.strip()
            for ln in reversed(stderr)
            if "GGML_ASSERT" in ln or "GGML_ABORT" in ln or "terminate" in ln
        ),
        "",
    )
    words = words.split("/")[-1] if "GGML_" in words else words
    how = f"crashed ({name})" if name else f"failed (exit {returncode})"
    detail = f": {words}" if words else ""
    message = f"llama.cpp {how} opening {path.name}, a damaged or unsupported file{detail}"
    return ModelVerdict(key, False, message[:400], name or f"exit {returncode}", seconds)


# ------------------------------------------------------------------------------ the child


def child_main(paths: Sequence[str]) -> int:
    """Open each file as Hearth will (CPU only): load, context, two tokens. One JSON line each."""
    import llama_cpp as ll

    from engine.native.lib_dir import register_dynamic_backends
    from engine.native.llama_log import LogLevel, LogLine, most_specific_error

    errors: list[LogLine] = []

    def on_log(level: int, text: bytes, _user: object) -> None:
        if level >= int(LogLevel.ERROR):
            errors.append(LogLine(LogLevel.ERROR, text.decode("utf-8", "replace").rstrip("\n")))

    callback = ll.llama_log_callback(on_log)  # referenced until we return
    ll.llama_log_set(callback, None)
    register_dynamic_backends()
    ll.llama_backend_init()
    for path in paths:
        errors.clear()
        error = _open_once(ll, Path(path))
        if error is not None and not error:
            error = most_specific_error(errors) or "it is damaged or not supported"
        print(json.dumps({"ok": error is None, "error": error}), flush=True)
    return 0


def _open_once(ll, path: Path) -> str | None:
    """None when the file works; "" for a clean llama.cpp refusal (its log says why)."""
    params = ll.llama_model_default_params()
    params.n_gpu_layers = 0
    model = ll.llama_model_load_from_file(str(path).encode(), params)
    if not model:
        return ""
    ctx = None
    try:
        cparams = ll.llama_context_default_params()
        cparams.n_ctx = 64
        cparams.n_batch = cparams.n_ubatch = 16
        cparams.n_threads = cparams.n_threads_batch = 2
        ctx = ll.llama_init_from_model(model, cparams)
        if not ctx:
            return ""
        vocab = ll.llama_model_get_vocab(model)
        text = b"Hello, world! \xc3\xa9\xe4\xbd\xa0 \n\t1234"
        buf = (ll.llama_token * 64)()
        n = ll.llama_tokenize(vocab, text, len(text), buf, 64, True, True)
        if n < 0:
            return "its tokenizer could not read a short text"
        if path.stat().st_size > DECODE_LIMIT_BYTES or n == 0:
            return None
        batch = ll.llama_batch_get_one(buf, min(n, 2))
        if ll.llama_decode(ctx, batch) != 0:
            return "it could not evaluate two tokens"
        return None
    finally:
        if ctx:
            ll.llama_free(ctx)
        ll.llama_model_free(model)


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
