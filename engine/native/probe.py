"""Is this llama.cpp build safe to run in our own process? Asked once per build, in a child.

A llama.cpp compiled with an instruction the CPU refuses (AMX in a VM, AVX-512 on a CPU that
lacks it) does not fail politely: the first kernel that uses it kills the process with
SIGILL, and with it every open conversation. So before Hearth calls llama.cpp in its own
process, a child process loads a small quantized model with the same build and decodes a
few tokens. A child killed by a signal becomes :class:`NativeBuildUnsafe`, one line naming
the signal, the CPU features compiled in and the command that rebuilds safely; the verdict
is remembered per build (the native libraries' names, sizes and times), so every later start
costs a stat of a few files.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from engine.base.errors import NativeBuildUnsafe
from engine.native.build import safe_rebuild_command
from engine.native.lib_dir import llama_lib_dir
from engine.native.verdict_cache import cache_path, read_verdicts, remember

log = logging.getLogger(__name__)

PROBE_FLAG = "--native-probe"  # `hearth --native-probe` runs child_main() in a frozen bundle
PROBE_TIMEOUT_S = 120.0
# A GGML_ASSERT normally attaches gdb to the dying process to print a backtrace, which on a
# busy machine takes longer than any timeout; a child that dies should die at once.
CHILD_ENV = {"GGML_NO_BACKTRACE": "1"}
# Deaths that say the build itself is broken on this CPU, and so are worth remembering. A
# SIGKILL (the OOM killer, a user) or a timeout says nothing about the build: probe again.
_BUILD_FAULTS = frozenset({signal.SIGILL, signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGABRT})


@dataclass(frozen=True)
class ProbeResult:
    build_id: str
    ok: bool
    message: str  # "" when ok; else the one-line reason shown in the window and on stderr
    compiled_features: tuple[str, ...] = ()  # the CPU features llama.cpp says it was built with
    signal_name: str | None = None
    seconds: float = 0.0

    @property
    def remembered(self) -> bool:
        """Whether this verdict holds for the build, not just for this attempt."""
        if self.ok:
            return True
        return self.signal_name is not None and self.signal_name in {s.name for s in _BUILD_FAULTS}


def build_identity(lib_dir: Path | None = None) -> str:
    """A name for the installed native build: changes whenever any of its libraries does."""
    lib_dir = lib_dir if lib_dir is not None else llama_lib_dir()
    if lib_dir is None:
        return "none"
    parts = []
    for path in sorted(lib_dir.iterdir()):
        try:
            st = path.stat()
        except OSError:
            continue
        parts.append(f"{path.name}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


def _frozen() -> bool:
    return bool(getattr(sys, "frozen", False))  # a PyInstaller bundle


def probe_command() -> list[str]:
    """How to start the child: the bundle's own executable when frozen, else this Python."""
    if _frozen():
        return [sys.executable, PROBE_FLAG]
    return [sys.executable, "-m", "engine.native.probe"]


def default_cache_file() -> Path:
    return cache_path("native-probe.json")


def run_probe(
    build_id: str, command: Sequence[str] | None = None, timeout: float = PROBE_TIMEOUT_S
) -> ProbeResult:
    """Run the probe child and turn how it ended into a verdict."""
    command = list(command or probe_command())
    started = time.monotonic()
    env = dict(os.environ, **CHILD_ENV)
    env.setdefault("OMP_NUM_THREADS", "2")
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        return ProbeResult(
            build_id,
            False,
            f"The llama.cpp self-check did not finish within {timeout:.0f} s.",
            seconds=time.monotonic() - started,
        )
    except OSError as exc:
        return ProbeResult(
            build_id,
            False,
            f"The llama.cpp self-check could not start: {exc}",
            seconds=time.monotonic() - started,
        )
    seconds = time.monotonic() - started
    features: tuple[str, ...] = ()
    for line in done.stdout.splitlines():
        try:
            report = json.loads(line)
        except ValueError:
            continue
        if isinstance(report, dict) and isinstance(report.get("features"), list):
            features = tuple(str(f) for f in report["features"])
    built_for = ", ".join(features) if features else "unknown features"
    if done.returncode < 0:
        try:
            sig = signal.Signals(-done.returncode)
            name, what = sig.name, signal.strsignal(sig) or sig.name
        except ValueError:
            name, what = f"signal {-done.returncode}", "an unknown signal"
        return ProbeResult(
            build_id,
            False,
            f"llama.cpp crashed with {name} ({what.lower()}) in its self-check on this CPU; "
            f"it was compiled for {built_for}. Rebuild it safely with: {safe_rebuild_command(_frozen())}",
            features,
            name,
            seconds,
        )
    if done.returncode != 0:
        last = next((ln.strip() for ln in reversed(done.stderr.splitlines()) if ln.strip()), "no output")
        return ProbeResult(
            build_id,
            False,
            f"The llama.cpp self-check failed (exit {done.returncode}): {last}",
            features,
            None,
            seconds,
        )
    return ProbeResult(build_id, True, "", features, None, seconds)


def check_build(
    cache_file: Path | None = None,
    command: Sequence[str] | None = None,
    lib_dir: Path | None = None,
) -> ProbeResult:
    """The verdict for the installed build: from the cache, or from a probe that is then cached."""
    build_id = build_identity(lib_dir)
    cache_file = cache_file or default_cache_file()
    cache = read_verdicts(cache_file)
    known = cache.get(build_id)
    if isinstance(known, dict):
        try:
            known["compiled_features"] = tuple(known.get("compiled_features", ()))
            return ProbeResult(**known)
        except TypeError:
            pass  # written by another version of this file: probe again
    log.info("probing llama.cpp build %s in a child process", build_id)
    result = run_probe(build_id, command)
    log.info(
        "llama.cpp build %s: %s in %.2f s", build_id, "ok" if result.ok else result.message, result.seconds
    )
    if result.remembered:
        remember(cache_file, build_id, asdict(result))
    return result


def require_safe_build(cache_file: Path | None = None, command: Sequence[str] | None = None) -> ProbeResult:
    """``check_build`` that raises :class:`NativeBuildUnsafe` for a build that failed its probe."""
    result = check_build(cache_file, command)
    if not result.ok:
        raise NativeBuildUnsafe(result.message)
    return result


# ------------------------------------------------------------------------------ the child


def child_main() -> int:
    """Load a small Q4_0 model with this build and decode a few tokens; exit 0 when it worked.

    The compiled-in features go to stdout first, so the parent can name them even when the
    decode that follows kills this process. Uses llama_cpp directly, never engine.native.backend
    (which would start another probe).
    """
    import llama_cpp as ll

    from engine.devtools.tiny_models import TinyTextSpec, write_tiny_text_model
    from engine.native.lib_dir import parse_simd, register_dynamic_backends

    silent = ll.llama_log_callback(lambda level, text, user_data: None)  # referenced until we return
    ll.llama_log_set(silent, None)
    register_dynamic_backends()
    ll.llama_backend_init()
    info = ll.llama_print_system_info()
    info = info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)
    print(json.dumps({"features": list(parse_simd(info))}), flush=True)

    with tempfile.TemporaryDirectory(prefix="hearth-probe-") as tmp:
        # 256 wide, Q4_0 blocks: large enough for the repacked AVX2/AVX-512 matmul kernels.
        path = write_tiny_text_model(
            Path(tmp) / "probe.gguf",
            TinyTextSpec(
                n_embd=256,
                n_ff=512,
                n_head=4,
                n_head_kv=4,
                n_layer=1,
                weight_type="Q4_0",
                n_ctx_train=256,
                chat_template=None,
            ),
        )
        mparams = ll.llama_model_default_params()
        model = ll.llama_model_load_from_file(str(path).encode(), mparams)
        if not model:
            print("the probe model did not load", file=sys.stderr)
            return 3
        cparams = ll.llama_context_default_params()
        cparams.n_ctx = 64
        cparams.n_batch = 32
        cparams.n_threads = cparams.n_threads_batch = 2
        ctx = ll.llama_init_from_model(model, cparams)
        if not ctx:
            print("the probe context could not be created", file=sys.stderr)
            return 4
        vocab = ll.llama_model_get_vocab(model)
        n_vocab = ll.llama_vocab_n_tokens(vocab)
        batch = ll.llama_batch_init(32, 0, 1)
        try:
            tokens = [1, 300, 301, 302, 303, 304, 305, 306]
            for step in range(
                4
            ):  # a prompt batch (matrix kernels), then single-token decodes (vector kernels)
                feed = tokens if step == 0 else tokens[-1:]
                start = 0 if step == 0 else len(tokens) - 1
                batch.n_tokens = len(feed)
                for i, tok in enumerate(feed):
                    batch.token[i] = tok
                    batch.pos[i] = start + i
                    batch.n_seq_id[i] = 1
                    batch.seq_id[i][0] = 0
                    batch.logits[i] = i == len(feed) - 1
                if ll.llama_decode(ctx, batch) != 0:
                    print("llama_decode failed in the probe", file=sys.stderr)
                    return 5
                logits = ll.llama_get_logits_ith(ctx, len(feed) - 1)
                tokens.append(max(range(n_vocab), key=lambda t: logits[t]))
        finally:
            ll.llama_batch_free(batch)
            ll.llama_free(ctx)
            ll.llama_model_free(model)
    print(json.dumps({"ok": True, "tokens": tokens[8:]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(child_main())
