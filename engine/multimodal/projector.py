"""The projector: pairing an mmproj file with a text model (from both headers), and the
mtmd runtime that tokenizes rendered prompts with images and evaluates image chunks.

``ProjectorRuntime`` owns an ``mtmd_context`` and belongs to the executor thread, like
every other native handle. ``llama_cpp`` is imported lazily inside it so that importing
this module (the GUI's attach button, the CLI's argument checks) does not map the native
libraries.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeAlias

from engine.base.errors import Cancelled, EngineError, ImageRejected, LoadFailed
from engine.catalog import ModelInfo, ProjectorInfo, inspect_projector
from engine.multimodal.images import DecodedImage
from engine.multimodal.prompts import ChunkCache, MediaChunk, TokenizedPrompt
from engine.scheduler import MediaSegment, PromptLayout, TextSegment

log = logging.getLogger("hearth.multimodal")


class ProjectorMismatch(EngineError):
    """A projector that cannot be used with the loaded text model."""


class ImageEvalFailed(EngineError):
    """llama.cpp failed to encode or decode an image chunk; ``code`` is its return value."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def validate_projector(projector: ModelInfo, model: ModelInfo) -> ProjectorInfo:
    """Check that ``projector`` is a vision projector whose output suits ``model``.

    Runs before any native call, from the two headers alone, so a wrong pairing is
    reported (with both numbers) before anything is loaded.
    """
    info = projector.projector
    if not projector.is_projector or info is None:
        raise ProjectorMismatch(f"{projector.display_name} is not a vision projector (mmproj) file.")
    if model.is_projector:
        raise ProjectorMismatch(f"{model.display_name} is a projector, not a text model.")
    if not info.has_vision:
        raise ProjectorMismatch(f"{projector.display_name} has no vision encoder; Hearth only uses images.")
    n_embd = model.embedding_length
    # ``clip.vision.projection_dim`` is what current converters write as the text
    # model's size. A missing value on either side cannot be compared here; mtmd still
    # checks the real output size (from tensor shapes) at load, and load() passes its
    # reason on.
    if info.projection_dim and n_embd and info.projection_dim != n_embd:
        raise ProjectorMismatch(
            f"{projector.display_name} produces {info.projection_dim}-dim image embeddings but "
            f"{model.display_name} has embedding size {n_embd}; the projector belongs to another model."
        )
    return info


ProgressCallback: TypeAlias = Callable[[float], bool | None]
"""Called with 0..1 while the projector loads; returning False cancels the load."""


class ProjectorRuntime:
    """An ``mtmd_context`` bound to one text model, and the image chunks it tokenized.

    Not thread-safe: create, use and free it on the executor thread that owns the model
    and context (mtmd's helpers are documented as such).
    """

    def __init__(
        self,
        handle: int,
        path: Path,
        *,
        marker: str,
        supports_vision: bool,
        uses_mrope: bool,
        uses_non_causal: bool,
        callbacks: tuple[object, ...] = (),
    ) -> None:
        """Use ``ProjectorRuntime.load``; this wraps an already created context."""
        from llama_cpp import mtmd_cpp

        self._mtmd = mtmd_cpp
        self._handle: int | None = handle
        self.path = path
        self._marker = marker
        self._supports_vision = supports_vision
        self._uses_mrope = uses_mrope
        self._uses_non_causal = uses_non_causal
        # Native code keeps raw pointers to these for the life of the context.
        self._callbacks = callbacks
        self._cache = ChunkCache(mtmd_cpp.mtmd_input_chunk_free)

    # -- lifecycle ------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        projector_path: Path | str,
        model_ptr: object,
        n_threads: int,
        use_gpu: bool,
        progress: ProgressCallback | None = None,
        *,
        model_info: ModelInfo | None = None,
        warmup: bool = True,
    ) -> ProjectorRuntime:
        """Load ``projector_path`` for the text model ``model_ptr`` (a ``llama_model*``).

        The projector's header is read and checked first (``InvalidModelFile``): clip
        aborts the process on metadata of the wrong type. With ``model_info`` the pairing
        is checked too (``ProjectorMismatch``). Raises ``Cancelled`` when ``progress``
        returned False, ``LoadFailed`` with mtmd's reason otherwise.
        """
        from engine.native.backend import ensure_backend
        from engine.native.llama_log import LogLevel, capture_llama_logs

        path = Path(projector_path)
        projector_model = inspect_projector(path)
        if model_info is not None:
            validate_projector(projector_model, model_info)
        if n_threads < 1:
            raise ValueError(f"n_threads must be at least 1, got {n_threads}")
        if not model_ptr:
            raise ValueError("the text model is not loaded")
        if not ensure_backend():
            raise LoadFailed("llama.cpp could not be loaded, so the projector cannot be either.")
        from llama_cpp import mtmd_cpp

        cancelled = threading.Event()

        def on_progress(fraction: float, _user_data: object) -> bool:
            # An exception escaping into ctypes returns 0 (False) and would cancel the load.
            if progress is None:
                return True
            try:
                keep_going = progress(float(fraction))
            except Exception:
                log.exception("projector progress callback failed")
                return True
            if keep_going is False:
                cancelled.set()
                return False
            return True

        progress_cb = mtmd_cpp.mtmd_progress_callback(on_progress)
        params = mtmd_cpp.mtmd_context_params_default()
        params.use_gpu = bool(use_gpu)
        params.n_threads = int(n_threads)
        params.print_timings = False
        params.warmup = bool(warmup)
        params.progress_callback = progress_cb
        with capture_llama_logs(LogLevel.ERROR, this_thread_only=True) as errors:
            handle = mtmd_cpp.mtmd_init_from_file(str(path).encode(), model_ptr, params)
        if not handle:
            if cancelled.is_set():
                raise Cancelled("Loading the projector was cancelled.")
            reason = _mtmd_reason(errors) or "mtmd_init_from_file returned nothing"
            raise LoadFailed(f"The projector {path.name} could not be loaded: {reason}")
        try:
            marker_bytes = mtmd_cpp.mtmd_get_marker(handle) or mtmd_cpp.mtmd_default_marker()
            return cls(
                handle,
                path,
                marker=marker_bytes.decode("utf-8"),
                supports_vision=bool(mtmd_cpp.mtmd_support_vision(handle)),
                uses_mrope=bool(mtmd_cpp.mtmd_decode_use_mrope(handle)),
                uses_non_causal=bool(mtmd_cpp.mtmd_decode_use_non_causal(handle, None)),
                callbacks=(progress_cb,),
            )
        except BaseException:
            mtmd_cpp.mtmd_free(handle)
            raise

    def free(self) -> None:
        """Free every cached chunk and the context. Idempotent."""
        handle, self._handle = self._handle, None
        self._cache.clear()
        if handle:
            self._mtmd.mtmd_free(handle)

    def __enter__(self) -> ProjectorRuntime:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.free()

    @property
    def is_open(self) -> bool:
        return self._handle is not None

    # -- capabilities -----------------------------------------------------------------

    @property
    def marker(self) -> str:
        """The text that stands for one image in a prompt (render the chat template with it)."""
        return self._marker

    @property
    def supports_vision(self) -> bool:
        return self._supports_vision

    @property
    def uses_mrope(self) -> bool:
        """Images advance fewer KV positions than they have tokens (``native_positions`` differ)."""
        return self._uses_mrope

    @property
    def uses_non_causal(self) -> bool:
        """Each image must be decoded in one micro-batch (see ``check_batch_limits``)."""
        return self._uses_non_causal

    @property
    def cached_identities(self) -> frozenset[str]:
        """Identities whose native chunk copies are currently held."""
        return self._cache.identities()

    def references(self, identity: str) -> int:
        """How many holders the cached chunk ``identity`` has (0 when not cached)."""
        return self._cache.refs(identity)

    # -- tokenization -------------------------------------------------------------------

    def tokenize(
        self,
        text_with_markers: str,
        images: Sequence[DecodedImage],
        *,
        add_special: bool = False,
        parse_special: bool = True,
        bos_token: int | None = None,
    ) -> TokenizedPrompt:
        """Split a rendered prompt at its media markers into text and image chunks.

        ``images`` go into the markers in order, one each. For a chat-rendered prompt
        leave ``add_special`` False and pass ``bos_token`` when the template did not
        write BOS itself (as ``chat.tokenize_prompt`` does for text): mtmd's
        ``add_special`` also appends EOS for vocabularies with ``add_eos``, which would
        end the turn before the model speaks.

        The result holds one cache reference per distinct image: release it with
        ``release_prompt`` when the request no longer needs to evaluate its images.
        """
        handle = self._require_open()
        mtmd = self._mtmd
        slots = text_with_markers.count(self._marker)
        if slots != len(images):
            raise ImageRejected(f"The prompt has {slots} image slots for {len(images)} images.")
        if not self._supports_vision and images:
            raise ImageRejected("The loaded projector cannot read images.")
        for image in images:
            if not isinstance(image, DecodedImage):
                raise TypeError(f"expected DecodedImage, got {type(image).__name__}")

        text_bytes = text_with_markers.encode("utf-8")
        bitmaps: list[int] = []
        chunks = None
        acquired: list[str] = []
        try:
            for image in images:
                # c_char_p over the bytes object: mtmd copies the pixels, so no second
                # Python-side copy of a possibly 120 MB buffer is needed.
                pixels = ctypes.cast(ctypes.c_char_p(image.rgb), ctypes.POINTER(ctypes.c_uint8))
                bitmap = mtmd.mtmd_bitmap_init(image.width, image.height, pixels)
                if not bitmap:
                    raise ImageRejected(f"{image.source_name} could not be handed to the projector.")
                bitmaps.append(bitmap)
                mtmd.mtmd_bitmap_set_id(bitmap, image.identity.encode("ascii"))
            chunks = mtmd.mtmd_input_chunks_init()
            if not chunks:
                raise MemoryError("mtmd_input_chunks_init failed")
            text = mtmd.mtmd_input_text(text_bytes, len(text_bytes), bool(add_special), bool(parse_special))
            array = (mtmd.mtmd_bitmap_p_ctypes * max(1, len(bitmaps)))(*bitmaps)
            rc = mtmd.mtmd_tokenize(handle, chunks, ctypes.byref(text), array, len(bitmaps))
            if rc != 0:
                raise ImageRejected(
                    f"The projector could not prepare the images (mtmd_tokenize returned {rc})."
                )
            layout, media = self._walk_chunks(chunks, images, acquired)
            if bos_token is not None:
                layout = PromptLayout((TextSegment((bos_token,)), *layout.segments))
        except BaseException:
            for identity in acquired:
                self._cache.release(identity)
            raise
        finally:
            if chunks:
                mtmd.mtmd_input_chunks_free(chunks)
            for bitmap in bitmaps:
                mtmd.mtmd_bitmap_free(bitmap)
        return TokenizedPrompt(layout, MappingProxyType(media))

    def _walk_chunks(
        self, chunks: int, images: Sequence[DecodedImage], acquired: list[str]
    ) -> tuple[PromptLayout, dict[str, MediaChunk]]:
        mtmd = self._mtmd
        occurrences: dict[str, int] = {}
        for image in images:
            occurrences[image.identity] = occurrences.get(image.identity, 0) + 1
        n_chunks = mtmd.mtmd_input_chunks_size(chunks)
        image_chunks: dict[str, int] = {}
        for i in range(n_chunks):
            chunk = mtmd.mtmd_input_chunks_get(chunks, i)
            if mtmd.mtmd_input_chunk_get_type(chunk) == mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE:
                chunk_id = (mtmd.mtmd_input_chunk_get_id(chunk) or b"").decode("ascii", "replace")
                image_chunks[chunk_id] = image_chunks.get(chunk_id, 0) + 1

        segments: list[TextSegment | MediaSegment] = []
        media: dict[str, MediaChunk] = {}
        seen: dict[str, int] = {}
        n_tokens = ctypes.c_size_t()
        for i in range(n_chunks):
            chunk = mtmd.mtmd_input_chunks_get(chunks, i)
            kind = mtmd.mtmd_input_chunk_get_type(chunk)
            if kind == mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT:
                tokens = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n_tokens))
                if n_tokens.value:
                    segments.append(TextSegment(tuple(tokens[: n_tokens.value])))
                continue
            if kind != mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE:
                raise ImageRejected("The projector produced audio from an image; Hearth only handles images.")
            base = (mtmd.mtmd_input_chunk_get_id(chunk) or b"").decode("ascii", "replace")
            if base not in occurrences:
                raise RuntimeError(f"mtmd returned an image chunk with an unknown id {base!r}")
            # Models that slice large images (LLaVA-UHD, MiniCPM-V, Idefics3...) give one
            # image several chunks with the same id; each slice needs its own identity.
            # Every copy of the same picture is sliced the same way, so the slice index is
            # the running count modulo the slices per picture.
            per_image = max(1, image_chunks[base] // occurrences[base])
            index = seen.get(base, 0)
            seen[base] = index + 1
            slice_index = index % per_image
            identity = base if slice_index == 0 else f"{base}#{slice_index}"
            if identity not in media:
                media[identity] = self._acquire_chunk(identity, chunk, acquired)
            entry = media[identity]
            segments.append(MediaSegment(identity, entry.logical_tokens, entry.native_positions))
        return PromptLayout(tuple(segments)), media

    def _acquire_chunk(self, identity: str, chunk: int, acquired: list[str]) -> MediaChunk:
        mtmd = self._mtmd
        cached = self._cache.acquire_existing(identity)
        if cached is not None:
            acquired.append(identity)
            return cached
        described = MediaChunk(
            identity=identity,
            logical_tokens=int(mtmd.mtmd_input_chunk_get_n_tokens(chunk)),
            native_positions=int(mtmd.mtmd_input_chunk_get_n_pos(chunk)),
            non_causal=bool(mtmd.mtmd_decode_use_non_causal(self._handle, chunk)),
        )
        # The chunk list is freed when tokenize returns; evaluation may come many ticks
        # later (or in a later turn), so keep a copy we own.
        copy = mtmd.mtmd_input_chunk_copy(chunk)
        if not copy:
            raise MemoryError("mtmd_input_chunk_copy failed")
        self._cache.add(described, copy)
        acquired.append(identity)
        return described

    # -- evaluation -----------------------------------------------------------------------

    def check_batch_limits(self, prompt: TokenizedPrompt, n_batch: int, n_ubatch: int) -> None:
        """Refuse, at admission, images that could not be decoded with these batch sizes.

        A non-causal image must be decoded in one micro-batch: llama.cpp aborts the whole
        process on a larger one.
        """
        limit = min(n_batch, n_ubatch)
        for chunk in prompt.media.values():
            if chunk.non_causal and chunk.logical_tokens > limit:
                raise ImageRejected(
                    f"The image needs {chunk.logical_tokens} tokens in one batch; this model's batch "
                    f"holds {limit}. Load it with a larger batch size."
                )

    def eval_media(
        self, lctx: object, media: MediaChunk | str, n_past: int, seq_id: int, n_batch: int
    ) -> int:
        """Encode one image chunk and decode its embeddings into ``seq_id`` at ``n_past``.

        Returns the position after the image (``n_past + native_positions``). Produces no
        logits: the text after the image does. On failure (``ImageEvalFailed``) part of
        the image may already be in the KV cache: remove ``seq_id`` from ``n_past`` on.
        """
        import llama_cpp

        handle = self._require_open()
        identity = media.identity if isinstance(media, MediaChunk) else media
        cached = self._cache.get(identity)
        if cached is None:
            raise ValueError(f"image chunk {identity!r} was released or never tokenized")
        pointer, chunk = cached
        # Each of these would be a GGML_ASSERT (process abort) inside the helper.
        context_batch = llama_cpp.llama_n_batch(lctx)
        if not 1 <= n_batch <= context_batch:
            raise ValueError(f"n_batch {n_batch} must be between 1 and the context's n_batch {context_batch}")
        n_seq_max = llama_cpp.llama_n_seq_max(lctx)
        if not 0 <= seq_id < n_seq_max:
            raise ValueError(f"sequence {seq_id} outside 0..{n_seq_max - 1}")
        if n_past < 0:
            raise ValueError(f"n_past must not be negative, got {n_past}")
        if chunk.non_causal:
            limit = min(n_batch, llama_cpp.llama_n_ubatch(lctx))
            if chunk.logical_tokens > limit:
                raise ImageRejected(
                    f"The image needs {chunk.logical_tokens} tokens in one batch; "
                    f"this model's batch holds {limit}."
                )
        new_n_past = llama_cpp.llama_pos(n_past)
        rc = self._mtmd.mtmd_helper_eval_chunk_single(
            handle, lctx, pointer, n_past, seq_id, n_batch, True, ctypes.byref(new_n_past)
        )
        if rc != 0:
            raise ImageEvalFailed(_eval_failure(rc), rc)
        return int(new_n_past.value)

    # -- references -------------------------------------------------------------------------

    def release(self, identity: str) -> None:
        """Drop one reference to a cached chunk; the copy is freed with its last reference."""
        self._cache.release(identity)

    def release_prompt(self, prompt: TokenizedPrompt) -> None:
        """Drop the references ``tokenize`` took for ``prompt`` (once per prompt)."""
        for identity in prompt.media:
            self._cache.release(identity)

    def _require_open(self) -> int:
        if self._handle is None:
            raise RuntimeError("the projector has been freed")
        return self._handle


def _eval_failure(rc: int) -> str:
    if rc == 1:
        return "There is no room left in the context for the image."
    if rc == 2:
        return "Evaluating the image was aborted."
    return f"Evaluating the image failed (llama.cpp returned {rc})."


def _mtmd_reason(lines: Sequence[Any]) -> str | None:
    """The first useful error line mtmd logged, without its function-name prefix."""
    for line in lines:
        text = str(line).strip()
        if text:
            _, marker, rest = text.partition("error: ")
            return (rest if marker else text).strip()[:200]
    return None
