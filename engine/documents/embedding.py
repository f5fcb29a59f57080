"""``Embedder``: a GGUF embedding model on llama.cpp, on a worker thread of its own.

``open_embedder(path)`` reads the header first (``embedding_file``: a chat model is refused
in one line), then loads the model on the embedder's thread, which owns the llama.cpp
model and context for their whole life. ``embed`` from any thread queues its decodes to
that thread and blocks until they are done; tokenizing (``count_tokens``, ``tokenize``)
runs in the caller's thread, as llama.cpp's tokenizer only reads the vocabulary. A text for
a WordPiece (BERT) model is first prepared as BERT's own tokenizer would see it
(``bert_text``), so its tokens are the ones the model was trained with.

What can never reach llama.cpp (each would abort the process, not raise):

- a sequence longer than the window: every text is tokenized here and cut to
  ``window`` tokens, its [CLS]/[SEP] included, before native code sees it (only a prefix
  of a long text is tokenized for that, cut at whitespace);
- a batch over ``n_batch`` or over ``n_ubatch``: an encoder's micro-batch cannot be
  split (``GGML_ASSERT(n_ubatch >= n_tokens)``), so the context is made with
  ``n_ctx == n_batch == n_ubatch == window`` and texts are packed into batches of at most
  that many tokens and ``n_seq_max`` sequences;
- a position past the model's position table: the window is at most ``n_ctx_train``.

Loaded with the low-level API rather than ``llama_cpp.Llama``: ``Llama(verbose=False)``
points file descriptors 1 and 2 at /dev/null and swaps ``sys.stdout``/``sys.stderr`` for the
whole process while it loads (other threads' output is lost), ``verbose=True`` prints its
metadata dump; ``Llama.embed`` tokenizes with llama.cpp alone, cuts a long text after its
[SEP] (at n_batch, not at the model's positions) and turns flash attention off unless told.
Decoding our own packed batches is as fast as ``Llama.embed`` with flash attention on, and
1.5-2.7x faster than with its default (benchmarks/bench_embedding.py).
"""

from __future__ import annotations

import atexit
import hashlib
import queue
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from engine.base.errors import EngineError, LoadFailed
from engine.documents.embedder_fit import check_embedder_fits
from engine.documents.embedding_file import EmbeddingModelInfo, read_embedding_model

if TYPE_CHECKING:
    from engine.machine.hardware import HardwareSnapshot

T = TypeVar("T")

# Bytes of a text tokenized first when only its first ``limit`` tokens are wanted, per
# token: a WordPiece token covers a few characters, so this almost always suffices.
_PREFIX_BYTES_PER_TOKEN = 16
# Tokens beyond the limit a prefix must give before its cut is trusted: a BPE
# pre-tokenizer may join the cut's neighbourhood differently, never this far back.
_PREFIX_MARGIN = 16
_WHITESPACE = re.compile(rb"[ \t\n\r\f\v]")
_HASH_BLOCK = 8 << 20


class EmbedderClosed(EngineError):
    """The embedder was closed: it can embed nothing more."""


class EmbeddingFailed(EngineError):
    """llama.cpp could not compute a batch of embeddings."""


@dataclass(frozen=True)
class _Wrapping:
    """The special tokens around every text ([CLS] … [SEP] for BERT)."""

    prefix: tuple[int, ...]
    suffix: tuple[int, ...]
    fallback: int  # what a text without tokens and without specials is embedded as


def pack_batches(lengths: Sequence[int], max_tokens: int, max_sequences: int) -> list[list[int]]:
    """Indices of ``lengths`` grouped into batches of at most ``max_tokens`` tokens and
    ``max_sequences`` texts (first fit, longest first: fewer decodes). Every length must
    be 1..max_tokens."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    room: list[int] = []
    for i in order:
        n = lengths[i]
        if not 0 < n <= max_tokens:
            raise ValueError(f"a text of {n} tokens cannot be batched (1..{max_tokens})")
        for b, free in enumerate(room):
            if n <= free and len(batches[b]) < max_sequences:
                batches[b].append(i)
                room[b] -= n
                break
        else:
            batches.append([i])
            room.append(max_tokens - n)
    return batches


class _Worker:
    """One thread that runs the calls given to it, in order; ``call`` waits for the result."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        self._jobs.put((fn, future))
        return future

    def call(self, fn: Callable[[], T]) -> T:
        return self.submit(fn).result()

    def stop(self, last: Callable[[], Any], *, wait: bool = True) -> None:
        """Run ``last`` after every queued call, then end the thread."""
        self._jobs.put((last, Future()))
        self._jobs.put(None)
        if wait:
            self.join()

    def join(self) -> None:
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, future = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)


class _Native:
    """The llama.cpp handles; created, used and freed on the worker thread only."""

    def __init__(self, info: EmbeddingModelInfo, n_threads: int, n_gpu_layers: int) -> None:
        import llama_cpp as ll

        from engine.native import NativeBatch, require_backend

        require_backend()
        self.ll = ll
        window = info.window
        mparams = ll.llama_model_default_params()
        mparams.n_gpu_layers = n_gpu_layers
        model = ll.llama_model_load_from_file(str(info.path).encode(), mparams)
        if not model:
            raise LoadFailed(f"llama.cpp could not load {info.path.name} (unsupported or damaged file).")
        self.model = model
        self.ctx = None
        try:
            c = ll.llama_context_default_params()
            c.n_ctx = c.n_batch = c.n_ubatch = window
            c.n_seq_max = max(1, min(window, int(ll.llama_max_parallel_sequences())))
            c.kv_unified = True  # causal embedders: the batch's sequences share the cells
            c.n_threads = c.n_threads_batch = n_threads
            c.embeddings = True
            c.pooling_type = int(info.pooling)
            c.no_perf = True
            ctx = ll.llama_init_from_model(model, c)
            if not ctx:
                raise LoadFailed(f"llama.cpp could not create a context for {info.path.name}.")
            self.ctx = ctx
            self.vocab = ll.llama_model_get_vocab(model)
            self.n_embd = int(ll.llama_model_n_embd(model))
            self.n_batch = min(int(ll.llama_n_batch(ctx)), int(ll.llama_n_ubatch(ctx)), window)
            self.n_seq_max = int(ll.llama_n_seq_max(ctx))
            self.memory = ll.llama_get_memory(ctx)
            self.batch = NativeBatch(self.n_batch)
        except BaseException:
            self.free()
            raise

    def set_threads(self, n_threads: int) -> None:
        self.ll.llama_set_n_threads(self.ctx, n_threads, n_threads)

    def decode(self, sequences: Sequence[np.ndarray]) -> np.ndarray:
        """One pooled, unnormalised vector per sequence; the caller keeps them within n_batch."""
        ll, batch = self.ll, self.batch
        batch.clear()
        for seq_id, tokens in enumerate(sequences):
            start = batch.n_tokens
            batch.add_run(seq_id, 0, tokens, range(start, start + len(tokens)))
        if self.memory:
            ll.llama_memory_clear(self.memory, True)
        rc = ll.llama_decode(self.ctx, batch.native())
        if rc != 0:
            raise EmbeddingFailed(f"llama.cpp could not compute the embeddings (llama_decode returned {rc}).")
        out = np.empty((len(sequences), self.n_embd), dtype=np.float32)
        for seq_id in range(len(sequences)):
            ptr = ll.llama_get_embeddings_seq(self.ctx, seq_id)
            if not ptr:
                raise EmbeddingFailed("llama.cpp returned no pooled embedding for a text.")
            out[seq_id] = np.ctypeslib.as_array(ptr, shape=(self.n_embd,))
        return out

    def free(self) -> None:
        if self.ctx:
            self.ll.llama_free(self.ctx)
            self.ctx = None
        if self.model:
            self.ll.llama_model_free(self.model)
            self.model = None


class Embedder:
    """An open embedding model: ``embed`` texts into L2-normalised float32 rows.

    ``name`` is what an index keeps to know its vectors' model: the file's name and the
    first 12 hex digits of its SHA-256. Every method may be called from any thread."""

    def __init__(self, info: EmbeddingModelInfo, *, n_threads: int, n_gpu_layers: int = 0) -> None:
        self.info = info
        self.name = f"{info.path.name}:{file_sha256(info.path)[:12]}"
        self.window = info.window
        self.n_threads = n_threads
        self._lock = threading.Lock()  # tokenizing against close() freeing the vocabulary
        self._closed = False
        self._worker = _Worker(f"hearth-embedder-{info.path.stem[:24]}")
        try:
            self._native = self._worker.call(lambda: _Native(info, n_threads, n_gpu_layers))
        except BaseException:
            self._worker.stop(lambda: None)
            raise
        self.dim = self._native.n_embd
        self.n_batch = self._native.n_batch
        try:
            self._wrapping = self._find_wrapping()
        except BaseException:
            self._worker.stop(self._native.free)
            raise
        atexit.register(self.close)

    # --- tokens ------------------------------------------------------------------------------

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` alone, without [CLS]/[SEP]: what chunking measures by."""
        return len(self._content_tokens(text, None))

    def tokenize(self, text: str) -> list[int]:
        """The tokens ``embed`` gives the model for ``text``: specials included, cut to ``window``."""
        return self._sequence(text).tolist()

    def _sequence(self, text: str) -> np.ndarray:
        w = self._wrapping
        room = self.window - len(w.prefix) - len(w.suffix)
        content = self._content_tokens(text, room)
        if not content and not w.prefix and not w.suffix:
            content = [w.fallback]
        return np.array([*w.prefix, *content[:room], *w.suffix], dtype=np.int32)

    def _content_tokens(self, text: str, limit: int | None) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"texts must be str, not {type(text).__name__}")
        bert = self.info.bert_text
        if bert is None:
            return self._piece_tokens(text, limit)
        out: list[int] = []
        for piece in bert.pieces(bert.normalize(text)):
            left = None if limit is None else limit - len(out)
            if left is not None and left <= 0:
                break
            out += [self._unk] if piece is None else self._piece_tokens(piece, left)
        return out if limit is None else out[:limit]

    def _piece_tokens(self, text: str, limit: int | None) -> list[int]:
        # Lone surrogates (text decoded with surrogateescape) cannot be UTF-8.
        data = text.encode("utf-8", errors="replace")
        if limit is None:
            return self._tokenize_bytes(data, add_special=False)
        budget = max(4096, limit * _PREFIX_BYTES_PER_TOKEN)
        while len(data) > budget:
            cut = _last_whitespace(data, budget)
            if cut > 0:
                tokens = self._tokenize_bytes(data[:cut], add_special=False)
                if len(tokens) >= limit + _PREFIX_MARGIN:
                    return tokens[:limit]
            budget *= 4
        return self._tokenize_bytes(data, add_special=False)[:limit]

    def _tokenize_bytes(self, data: bytes, *, add_special: bool) -> list[int]:
        import llama_cpp as ll

        with self._lock:
            if self._closed:
                raise EmbedderClosed("The embedding model was closed.")
            vocab = self._native.vocab
            capacity = len(data) + 8  # a token covers at least one byte, plus the specials
            while True:
                buf = (ll.llama_token * capacity)()
                n = ll.llama_tokenize(vocab, data, len(data), buf, capacity, add_special, False)
                if n >= 0:
                    return list(buf[:n])
                if n == -(2**31):
                    raise EmbeddingFailed("The text is too long to tokenize.")
                capacity = -n

    def _find_wrapping(self) -> _Wrapping:
        """The special tokens llama.cpp's tokenizer adds (llama_vocab::impl::tokenize), added
        here instead: asked to add them, it asserts (aborts) when the vocabulary lacks one."""
        import llama_cpp as ll

        vocab = self._native.vocab
        bos, eos, sep = (int(f(vocab)) for f in (ll.llama_vocab_bos, ll.llama_vocab_eos, ll.llama_vocab_sep))
        fallback = next((t for t in (eos, bos, sep) if t >= 0), 0)
        # llama.h has no llama_vocab_unk; llama.cpp's WordPiece default is 100.
        unk = self.info.model.metadata.get("tokenizer.ggml.unknown_token_id", 100)
        self._unk = (
            unk if isinstance(unk, int) and 0 <= unk < int(ll.llama_vocab_n_tokens(vocab)) else fallback
        )
        if int(ll.llama_vocab_type(vocab)) == ll.LLAMA_VOCAB_TYPE_WPM:
            # WordPiece: [CLS] ... [SEP] whatever the add_* flags say.
            return _Wrapping((bos,) if bos >= 0 else (), (sep,) if sep >= 0 else (), fallback)
        prefix = (bos,) if ll.llama_vocab_get_add_bos(vocab) and bos >= 0 else ()
        suffix = (eos,) if ll.llama_vocab_get_add_eos(vocab) and eos >= 0 else ()
        return _Wrapping(prefix, suffix, fallback)

    # --- embedding ---------------------------------------------------------------------------

    def embed(self, texts: Sequence[str], *, before_batch: Callable[[], None] | None = None) -> np.ndarray:
        """``(len(texts), dim)`` float32, each row of length 1. Blocks until done.

        ``before_batch`` is called (on the calling thread) before each decode: an indexing run
        waits there while a chat generates (``engine.documents.yielding``)."""
        if isinstance(texts, str):
            raise TypeError("embed takes a sequence of texts, not one str")
        sequences = [self._sequence(text) for text in texts]
        out = np.empty((len(sequences), self.dim), dtype=np.float32)
        if not sequences:
            return out
        batches = pack_batches([len(s) for s in sequences], self.n_batch, self._native.n_seq_max)
        for batch in batches:
            if before_batch is not None:
                before_batch()
            rows = self._call(lambda b=batch: self._native.decode([sequences[i] for i in b]))
            out[batch] = rows
        return _normalised(out)

    def set_threads(self, n_threads: int) -> None:
        """Compute with ``n_threads`` from the next batch on (e.g. fewer while a chat generates)."""
        if n_threads < 1:
            raise ValueError("n_threads must be at least 1")
        self._call(lambda: self._native.set_threads(n_threads))
        self.n_threads = n_threads

    def _call(self, fn: Callable[[], T]) -> T:
        # Checked and queued under the lock: a call queued after close()'s free would use
        # freed handles (or wait forever behind the worker's end).
        with self._lock:
            if self._closed:
                raise EmbedderClosed("The embedding model was closed.")
            future = self._worker.submit(fn)
        return future.result()

    # --- life --------------------------------------------------------------------------------

    def close(self) -> None:
        """Free the model after the batches already queued; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            # Queued under the lock, so after every call already accepted and before none.
            self._worker.stop(self._native.free, wait=False)
        atexit.unregister(self.close)
        self._worker.join()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Embedder:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _last_whitespace(data: bytes, end: int) -> int:
    """Index of the last ASCII whitespace byte before ``end`` (a word boundary on a whole
    character), or -1."""
    found = -1
    for match in _WHITESPACE.finditer(data, max(0, end - 4096), end):
        found = match.start()
    return found


def _normalised(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows.astype(np.float64), axis=1, keepdims=True)
    zero = norms[:, 0] == 0
    norms[zero] = 1.0
    rows = (rows / norms).astype(np.float32)
    if zero.any():  # never seen; a unit row keeps the contract rather than a zero one
        rows[zero] = 0.0
        rows[zero, 0] = 1.0
    return rows


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def default_threads() -> int:
    """The planner's choice for this machine now: one per physical core other programs leave free."""
    from engine.machine.cpu_load import others_since, physical_cores, read_cpu
    from engine.machine.hardware import described_machine
    from engine.planner import LoadRequest, choose_threads

    busy = others_since(read_cpu(), 0.1)
    machine = described_machine(cores=physical_cores(), name="this machine", cpu_busy_elsewhere=busy)
    return choose_threads(LoadRequest(), machine).threads


def open_embedder(
    path: Path | str,
    n_threads: int | None = None,
    *,
    n_gpu_layers: int = 0,
    hardware: HardwareSnapshot | None = None,
) -> Embedder:
    """The embedding model in ``path``, loaded: InvalidModelFile or NotAnEmbeddingModel for a
    file that cannot be one, LoadFailed when llama.cpp cannot load it. ``hardware``: the
    machine to plan it for first (``embedder_fit``): EmbedderDoesNotFit, and nothing loaded,
    when it does not fit in its free RAM."""
    info = read_embedding_model(path)
    if n_threads is not None and n_threads < 1:
        raise ValueError("n_threads must be at least 1")
    if hardware is not None:
        check_embedder_fits(info, hardware)
    return Embedder(info, n_threads=n_threads or default_threads(), n_gpu_layers=n_gpu_layers)


__all__ = [
    "Embedder",
    "EmbedderClosed",
    "EmbeddingFailed",
    "default_threads",
    "file_sha256",
    "open_embedder",
    "pack_batches",
]
