"""One process-wide router for llama.cpp / ggml / mtmd log output.

llama.cpp has exactly one log callback per process (``llama_log_set`` also sets ggml's),
and mtmd keeps its own (``mtmd_helper_log_set``). Hearth installs a single router into
both, once, and everything that wants log lines (the planner accuracy tests, the
executor's load diagnostics, a log view) adds a sink to it instead of replacing the
callback. The router is the only global state here: it mirrors that native state.

The router also owns the two facts that make llama.cpp's logging awkward:

- the ctypes callback objects must stay referenced for as long as they are installed
  (a garbage-collected callback jumps into random memory), so the router keeps them
  forever;
- text arrives in fragments: a message may come without its newline, and level CONT (5)
  continues the previous message (progress dots, tables). The router reassembles whole
  lines, per calling thread, before any sink sees them.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import enum
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

log = logging.getLogger("hearth.llama")

MIB = 1024 * 1024


class LogLevel(enum.IntEnum):
    """ggml_log_level, as ggml.h numbers it (llama-cpp-python's own logger gets this wrong)."""

    NONE = 0
    DEBUG = 1
    INFO = 2
    WARN = 3
    ERROR = 4
    CONT = 5


class LogSource(enum.Enum):
    LLAMA = "llama"  # llama.cpp and ggml (one callback serves both)
    MTMD = "mtmd"  # mtmd and the clip projector code


@dataclass(frozen=True)
class LogLine:
    """One complete log line, without its trailing newline."""

    level: LogLevel
    text: str
    source: LogSource = LogSource.LLAMA
    timestamp: float = 0.0  # time.monotonic() when the line was completed
    thread_id: int = 0  # threading.get_ident() of the thread that logged it

    def __str__(self) -> str:
        return self.text


Sink = Callable[[LogLine], None]

_PY_LEVEL = {
    LogLevel.INFO: logging.DEBUG,  # llama.cpp is chatty at INFO: keep it out of the default log
    LogLevel.WARN: logging.WARNING,
    LogLevel.ERROR: logging.ERROR,
}


@dataclass
class _Pending:
    """A line still being assembled on one thread."""

    level: LogLevel
    source: LogSource
    text: str
    thread_id: int = 0


@dataclass(frozen=True)
class _SinkEntry:
    sink: Sink
    min_level: LogLevel


class LlamaLogRouter:
    """Receives every native log message and hands whole lines to the registered sinks.

    Thread-safe: native code may log from any thread (model loads run on executor
    threads), and sinks may be added or removed from any thread. Sinks run on the
    logging thread, under no lock; they must be quick and must not call into llama.cpp.
    """

    def __init__(self) -> None:
        # Guards sinks and half-assembled lines. Never held while calling native code:
        # native code may log, which re-enters feed() on the same thread.
        self._lock = threading.Lock()
        # Serialises install(); re-entrant for the same reason.
        self._install_lock = threading.RLock()
        self._sinks: tuple[_SinkEntry, ...] = ()
        self._pending: dict[tuple[int, LogSource], _Pending] = {}
        self._last_level: dict[tuple[int, LogSource], LogLevel] = {}
        self._installed = False
        self._mtmd_installed = False
        self.forward_to_logging = True
        # Kept referenced for the life of the process: native code holds raw pointers to them.
        self._llama_cb: object | None = None
        self._mtmd_cb: object | None = None

    # -- installation ---------------------------------------------------------------

    @property
    def installed(self) -> bool:
        return self._installed

    @property
    def mtmd_installed(self) -> bool:
        return self._mtmd_installed

    def install(self) -> None:
        """Point llama.cpp's (and, if the library is present, mtmd's) log callback here.

        Idempotent. Call it again after anything else may have replaced the callback
        (importing ``llama_cpp.llama`` installs llama-cpp-python's own logger).
        """
        import llama_cpp

        try:
            from llama_cpp import mtmd_cpp
        except Exception:  # the mtmd library is optional in a build; text models work without it
            mtmd_cpp = None

        with self._install_lock:
            if self._llama_cb is None:
                self._llama_cb = llama_cpp.llama_log_callback(self._make_callback(LogSource.LLAMA))
            llama_cpp.llama_log_set(self._llama_cb, ctypes.c_void_p(0))
            self._installed = True
            set_mtmd_log = getattr(mtmd_cpp, "mtmd_helper_log_set", None)
            if set_mtmd_log is None:
                return
            if self._mtmd_cb is None:
                self._mtmd_cb = llama_cpp.llama_log_callback(self._make_callback(LogSource.MTMD))
            try:
                set_mtmd_log(self._mtmd_cb, ctypes.c_void_p(0))
                self._mtmd_installed = True
            except Exception:  # pragma: no cover - symbol missing in an odd build
                log.debug("mtmd_helper_log_set failed; projector logs stay on stderr", exc_info=True)

    def _detach(self) -> None:
        """Give logging back to llama.cpp's own stderr logger before Python shuts down."""
        with contextlib.suppress(Exception):
            import llama_cpp

            llama_cpp.llama_log_set(ctypes.cast(None, llama_cpp.llama_log_callback), ctypes.c_void_p(0))
            self._installed = False
            if self._mtmd_installed:
                from llama_cpp import mtmd_cpp

                mtmd_cpp.mtmd_helper_log_set(
                    ctypes.cast(None, llama_cpp.llama_log_callback), ctypes.c_void_p(0)
                )
                self._mtmd_installed = False

    def _make_callback(self, source: LogSource) -> Callable[[int, bytes | None, object], None]:
        def callback(level: int, text: bytes | None, _user_data: object) -> None:
            # An exception escaping into ctypes is printed and swallowed; catch it here so
            # a bad sink can never disturb native code.
            with contextlib.suppress(Exception):
                self.feed(level, text or b"", source)

        return callback

    # -- sinks ---------------------------------------------------------------------------

    def add_sink(self, sink: Sink, min_level: LogLevel = LogLevel.DEBUG) -> None:
        with self._lock:
            self._sinks = (*self._sinks, _SinkEntry(sink, min_level))

    def remove_sink(self, sink: Sink) -> None:
        """Remove ``sink`` (its first registration); a sink never added is ignored."""
        with self._lock:
            sinks = list(self._sinks)
            for i, entry in enumerate(sinks):
                if entry.sink is sink or entry.sink == sink:
                    del sinks[i]
                    break
            self._sinks = tuple(sinks)

    # -- line assembly ----------------------------------------------------------------

    def feed(self, level: int, text: bytes | str, source: LogSource = LogSource.LLAMA) -> None:
        """Accept one native message fragment (public so tests can drive the router)."""
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        try:
            lvl = LogLevel(level)
        except ValueError:
            lvl = LogLevel.INFO
        key = (threading.get_ident(), source)
        complete: list[LogLine] = []
        with self._lock:
            pending = self._pending.pop(key, None)
            if lvl is LogLevel.CONT:
                if pending is None:
                    # Continuation of a line already delivered: it becomes a line of its
                    # own at the level of the message it continues.
                    pending = _Pending(self._last_level.get(key, LogLevel.INFO), source, "", key[0])
                pending.text += text
            else:
                if pending is not None:  # a new message starts: the unfinished one is done
                    complete.append(self._line(pending))
                pending = _Pending(lvl, source, text, key[0])
                self._last_level[key] = lvl
            *whole, rest = pending.text.split("\n")
            complete.extend(self._line(_Pending(pending.level, source, t, key[0])) for t in whole)
            if rest:
                pending.text = rest
                self._pending[key] = pending
            sinks = self._sinks
        for line in complete:
            self._dispatch(line, sinks)

    def flush(self) -> None:
        """Deliver the current thread's unfinished lines (e.g. at the end of a capture)."""
        ident = threading.get_ident()
        with self._lock:
            keys = [k for k in self._pending if k[0] == ident]
            lines = [self._line(self._pending.pop(k)) for k in keys]
            sinks = self._sinks
        for line in lines:
            self._dispatch(line, sinks)

    @staticmethod
    def _line(p: _Pending) -> LogLine:
        return LogLine(p.level, p.text.rstrip(), p.source, time.monotonic(), p.thread_id)

    def _dispatch(self, line: LogLine, sinks: tuple[_SinkEntry, ...]) -> None:
        if not line.text.strip():
            return
        for entry in sinks:
            if line.level >= entry.min_level:
                try:
                    entry.sink(line)
                except Exception:  # a broken sink must not silence the others
                    log.exception("llama log sink %r failed", entry.sink)
        if self.forward_to_logging:
            py_level = _PY_LEVEL.get(line.level)
            if py_level is not None and log.isEnabledFor(py_level):
                log.log(py_level, "%s", line.text)


_router: LlamaLogRouter | None = None
_router_lock = threading.Lock()


@atexit.register
def _detach_router() -> None:
    # Native code logs while the process exits (static destructors); a Python callback
    # called then, during interpreter teardown, can crash the process. Registered at
    # import, so it runs after handlers registered later (unloading models) have logged.
    if _router is not None and _router.installed:
        _router._detach()


def get_router(install: bool = True) -> LlamaLogRouter:
    """The process's one router, created (and by default installed) on first use."""
    global _router
    with _router_lock:
        if _router is None:
            _router = LlamaLogRouter()
        router = _router
    if install and not router.installed:
        router.install()
    return router


@contextlib.contextmanager
def capture_llama_logs(
    min_level: LogLevel = LogLevel.DEBUG, this_thread_only: bool = False
) -> Iterator[list[LogLine]]:
    """Collect the native log lines emitted inside the ``with`` block.

    By default lines from every thread are collected (llama.cpp may log from its own
    worker threads); ``this_thread_only`` keeps just the calling thread's, so two models
    loading at once on two executor threads do not see each other's diagnostics. The list
    fills while the block runs; the current thread's unfinished line is flushed into it
    on exit.
    """
    router = get_router()
    lines: list[LogLine] = []
    me = threading.get_ident()

    def sink(line: LogLine) -> None:
        if not this_thread_only or line.thread_id == me:
            lines.append(line)

    router.add_sink(sink, min_level)
    try:
        yield lines
    finally:
        router.flush()
        router.remove_sink(sink)


# -- what llama.cpp says about memory ----------------------------------------------------

_NUM = r"([0-9]+(?:\.[0-9]+)?)"
# load_tensors:   CPU_Mapped model buffer size =   235.16 MiB
_MODEL_RE = re.compile(r"^\s*(\w+):\s+(\S+) model buffer size\s*=\s*" + _NUM + r" MiB")
# llama_kv_cache:        CPU KV buffer size =    12.00 MiB
_KV_RE = re.compile(r"^\s*(\w+):\s+(\S+) KV buffer size\s*=\s*" + _NUM + r" MiB")
# sched_reserve:        CPU compute buffer size =   514.50 MiB   (clip: reserve_compute_meta)
_COMPUTE_RE = re.compile(r"^\s*(\w+):\s+(\S+) compute buffer size\s*=\s*" + _NUM + r" MiB")
# llama_context:        CPU  output buffer size =     4.00 MiB
_OUTPUT_RE = re.compile(r"^\s*(\w+):\s+(\S+)\s+output buffer size\s*=\s*" + _NUM + r" MiB")
# llama_kv_cache: size =   12.00 MiB (  1024 cells,   3 layers,  4/4 seqs),
#                 K (f16): 6.00 MiB, V (f16): 6.00 MiB     (one line)
_KV_SUMMARY_RE = re.compile(
    r"size\s*=\s*" + _NUM + r" MiB \(\s*(\d+) cells,\s*(\d+) layers,\s*(\d+)/(\d+) seqs\),"
    r"\s*K \((\w+)\):\s*" + _NUM + r" MiB,\s*V \((\w+)\):\s*" + _NUM + r" MiB"
)
# clip_model_loader: model size:         0.05 MiB
_CLIP_MODEL_RE = re.compile(r"model size:\s*" + _NUM + r" MiB")


# Error lines that only say that something failed, not what: llama.cpp prints them after
# the line with the cause ("llama_model_load: error loading model: missing tensor ...").
_VAGUE_ERRORS = re.compile(
    r"^(failed to load model( from .*)?|failed to (load|read|initialize|create) .{0,40}|"
    r"llama_model_loader: failed to load model from .*)\.?$",
    re.IGNORECASE,
)
_FUNC_PREFIX = re.compile(r"^\w+: ")


def most_specific_error(lines: Iterable[LogLine]) -> str | None:
    """The error line that names the cause, without llama.cpp's function prefixes.

    A failed load logs several error lines, the vaguest last ("failed to load model"); the
    first one that says more than that is the cause (a missing tensor, a bad key). None
    when llama.cpp logged no error or only vague ones.
    """
    errors = []
    for line in lines:
        if line.level < LogLevel.ERROR:
            continue
        text = line.text.strip()
        while _FUNC_PREFIX.match(text):
            text = _FUNC_PREFIX.sub("", text, count=1)
        text = text.removeprefix("error loading model: ").strip()
        while _FUNC_PREFIX.match(text):  # "llama_model_loader: ..." inside the exception text
            text = _FUNC_PREFIX.sub("", text, count=1)
        if text:
            errors.append(text)
    return next((t for t in errors if not _VAGUE_ERRORS.match(t)), None)


def mib_to_bytes(mib: float) -> int:
    return round(mib * MIB)


@dataclass(frozen=True)
class KvCacheReport:
    """One ``llama_kv_cache: size = ...`` summary (there are two for SWA models)."""

    bytes: int
    cells: int  # per stream (= per sequence when kv_unified is false)
    layers: int
    seqs: int
    streams: int
    type_k: str
    k_bytes: int
    type_v: str
    v_bytes: int


def _frozen(d: dict[str, int]) -> Mapping[str, int]:
    return MappingProxyType(dict(d))


@dataclass(frozen=True)
class ReportedMemory:
    """Buffer sizes llama.cpp logged, in bytes, keyed by buffer name.

    Buffer names are llama.cpp's: ``CPU_Mapped`` (mmap'd weights), ``CPU_REPACK``
    (weights re-laid-out for this CPU's SIMD), ``CPU``, ``CUDA0``, ``CUDA_Host``...
    Values are rounded: llama.cpp prints MiB with two decimals.
    """

    model: Mapping[str, int] = field(default_factory=lambda: _frozen({}))
    kv: Mapping[str, int] = field(default_factory=lambda: _frozen({}))
    compute: Mapping[str, int] = field(default_factory=lambda: _frozen({}))
    output: Mapping[str, int] = field(default_factory=lambda: _frozen({}))
    kv_caches: tuple[KvCacheReport, ...] = ()
    projector_model: int = 0
    projector_compute: Mapping[str, int] = field(default_factory=lambda: _frozen({}))

    @property
    def model_total(self) -> int:
        return sum(self.model.values())

    @property
    def kv_total(self) -> int:
        return sum(self.kv.values())

    @property
    def compute_total(self) -> int:
        return sum(self.compute.values())

    @property
    def output_total(self) -> int:
        return sum(self.output.values())

    @property
    def projector_compute_total(self) -> int:
        return sum(self.projector_compute.values())


def parse_buffer_sizes(lines: Iterable[LogLine | str]) -> ReportedMemory:
    """Extract model, KV, compute and output buffer sizes from llama.cpp / clip log lines.

    Model and KV buffers are distinct allocations and are summed per name (an SWA model
    has two KV caches on each device). Compute and output buffers are re-reserved in
    place, so the last report per name wins. Compute lines from mtmd (clip) are kept
    apart as the projector's.
    """
    model: dict[str, int] = {}
    kv: dict[str, int] = {}
    compute: dict[str, int] = {}
    output: dict[str, int] = {}
    proj_compute: dict[str, int] = {}
    caches: list[KvCacheReport] = []
    proj_model = 0
    for item in lines:
        text = item.text if isinstance(item, LogLine) else item
        from_mtmd = isinstance(item, LogLine) and item.source is LogSource.MTMD
        if m := _MODEL_RE.match(text):
            model[m[2]] = model.get(m[2], 0) + mib_to_bytes(float(m[3]))
        elif m := _KV_RE.match(text):
            kv[m[2]] = kv.get(m[2], 0) + mib_to_bytes(float(m[3]))
        elif m := _COMPUTE_RE.match(text):
            # clip reports from reserve_compute_meta / alloc_compute_meta; llama.cpp from
            # sched_reserve (older builds: llama_context / llama_init_from_model).
            is_clip = from_mtmd or "compute_meta" in m[1]
            (proj_compute if is_clip else compute)[m[2]] = mib_to_bytes(float(m[3]))
        elif m := _OUTPUT_RE.match(text):
            output[m[2]] = mib_to_bytes(float(m[3]))
        elif m := _KV_SUMMARY_RE.search(text):
            caches.append(
                KvCacheReport(
                    bytes=mib_to_bytes(float(m[1])),
                    cells=int(m[2]),
                    layers=int(m[3]),
                    seqs=int(m[4]),
                    streams=int(m[5]),
                    type_k=m[6],
                    k_bytes=mib_to_bytes(float(m[7])),
                    type_v=m[8],
                    v_bytes=mib_to_bytes(float(m[9])),
                )
            )
        elif m := _CLIP_MODEL_RE.search(text):
            proj_model = mib_to_bytes(float(m[1]))
    return ReportedMemory(
        model=_frozen(model),
        kv=_frozen(kv),
        compute=_frozen(compute),
        output=_frozen(output),
        kv_caches=tuple(caches),
        projector_model=proj_model,
        projector_compute=_frozen(proj_compute),
    )


__all__ = [
    "KvCacheReport",
    "LlamaLogRouter",
    "LogLevel",
    "LogLine",
    "LogSource",
    "ReportedMemory",
    "Sink",
    "capture_llama_logs",
    "get_router",
    "mib_to_bytes",
    "parse_buffer_sizes",
]
