"""Images in prompts: validation and decoding (Pillow), and the mtmd projector runtime.

Two halves with different rules:

- Image input (``load_image``, ``check_message_images``) is pure Python + Pillow and may
  run on any thread. Every refusal a user can cause is an ``ImageRejected`` with a one-line
  message, and all of them happen from the file size and the image *header*, before any
  pixel is decoded, so a decompression bomb costs nothing.
- ``ProjectorRuntime`` owns an ``mtmd_context`` and belongs to the executor thread, like
  every other native handle. ``llama_cpp`` is imported lazily inside it so that importing
  this module (the GUI's attach button, the CLI's argument checks) does not map the
  native libraries.

The identity of an image is a hash of its decoded pixels and size, so the same picture
pasted twice (even re-encoded losslessly, or as a different format) is the same
``MediaSegment`` and its KV can be reused across turns.
"""

from __future__ import annotations

import ctypes
import hashlib
import io
import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeAlias

from engine.catalog import ModelInfo, ProjectorInfo, inspect_projector
from engine.errors import Cancelled, EngineError, ImageRejected, LoadFailed
from engine.scheduler import MediaSegment, PromptLayout, TextSegment
from engine.units import format_bytes

log = logging.getLogger("hearth.multimodal")

DEFAULT_MAX_BYTES = 20 * 1024 * 1024
DEFAULT_MAX_PIXELS = 40_000_000
DEFAULT_MAX_IMAGES_PER_MESSAGE = 8
# A file's pixel count says little about what it costs: a 117 KB PNG of 40,000,000×1
# pixels took 2.3 GB to decode. So each side, the aspect ratio and the decoded size are
# bounded too, from the header, before a pixel is decoded; and what is decoded is shrunk
# to PROMPT_PIXELS at once (more than any projector reads: they resize to ~1 MP) before
# any conversion copies it. Peak memory for the worst image these allow is measured by
# benchmarks/bench_image_memory.py.
DEFAULT_MAX_SIDE = 16_384
DEFAULT_MAX_ASPECT = 32.0
DEFAULT_MAX_DECODED_BYTES = 160 * 1024 * 1024
DEFAULT_PROMPT_PIXELS = 4096 * 4096
# Bytes per pixel of Pillow's decoded modes (anything else: 4).
_MODE_BYTES: Mapping[str, int] = MappingProxyType(
    {"1": 1, "L": 1, "P": 1, "LA": 2, "La": 2, "PA": 2, "I;16": 2, "I;16B": 2, "I;16L": 2, "I;16N": 2,
     "RGB": 3, "YCbCr": 3, "LAB": 3, "HSV": 3}
)  # fmt: skip
_REDUCIBLE_MODES = frozenset({"L", "LA", "I", "F", "RGB", "RGBA", "RGBX", "CMYK", "YCbCr"})
# EXIF orientation -> the transpose that undoes it (what ImageOps.exif_transpose applies).
_ORIENTATION_FIX: Mapping[int, str] = MappingProxyType(
    {2: "FLIP_LEFT_RIGHT", 3: "ROTATE_180", 4: "FLIP_TOP_BOTTOM", 5: "TRANSPOSE", 6: "ROTATE_270",
     7: "TRANSVERSE", 8: "ROTATE_90"}
)  # fmt: skip

# Pillow format name -> what we call it. MPO is what Pillow reports for most phone
# photos (a JPEG with an embedded preview); it decodes as its first, primary picture.
_ACCEPTED_FORMATS: Mapping[str, str] = MappingProxyType(
    {"PNG": "PNG", "JPEG": "JPEG", "MPO": "JPEG", "WEBP": "WebP", "GIF": "GIF", "BMP": "BMP"}
)
_ACCEPTED_TEXT = "PNG, JPEG, WebP, GIF and BMP"

_MODES_WITH_ALPHA = frozenset({"RGBA", "RGBa", "LA", "La", "PA"})
_SIXTEEN_BIT_GREY = frozenset({"I", "I;16", "I;16B", "I;16L", "I;16N"})

_UNNAMED = "The attachment"

ImageInput: TypeAlias = bytes | bytearray | memoryview | Path | str
"""Encoded image bytes, or a path to an image file (a ``str`` is always a path)."""


# ------------------------------------------------------------------------ image input


@dataclass(frozen=True, slots=True)
class ImageLimits:
    """What Hearth accepts as one image, and how many images one message may carry."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_pixels: int = DEFAULT_MAX_PIXELS
    max_images_per_message: int = DEFAULT_MAX_IMAGES_PER_MESSAGE
    max_side: int = DEFAULT_MAX_SIDE
    max_aspect: float = DEFAULT_MAX_ASPECT  # longer side / shorter side
    max_decoded_bytes: int = DEFAULT_MAX_DECODED_BYTES
    prompt_pixels: int = DEFAULT_PROMPT_PIXELS  # larger images are shrunk to this, keeping their shape

    def __post_init__(self) -> None:
        values = (self.max_bytes, self.max_pixels, self.max_images_per_message, self.max_side,
                  self.max_decoded_bytes, self.prompt_pixels)  # fmt: skip
        if min(values) < 1 or self.max_aspect < 1:
            raise ValueError(f"image limits must be positive: {self}")


DEFAULT_LIMITS = ImageLimits()


@dataclass(frozen=True, slots=True)
class DecodedImage:
    """An image ready for the projector: packed 8-bit RGB, EXIF orientation applied.

    Equality is the identity: the same pixels are the same image, whatever file they
    came from.
    """

    identity: str
    width: int
    height: int
    rgb: bytes = field(repr=False, compare=False)
    format: str = field(compare=False)  # the encoding it came in: "PNG", "JPEG", ...
    source_name: str = field(compare=False)  # file name, or a label for pasted data

    def __post_init__(self) -> None:
        # The projector reads exactly width*height*3 bytes from this buffer: a short one
        # would make native code read past its end.
        if self.width < 1 or self.height < 1 or len(self.rgb) != self.width * self.height * 3:
            raise ValueError(
                f"{self.width}x{self.height} RGB needs {self.width * self.height * 3} bytes, "
                f"got {len(self.rgb)}"
            )

    @property
    def pixels(self) -> int:
        return self.width * self.height


def image_identity(width: int, height: int, rgb: bytes) -> str:
    """``image:WxH:<sha256>`` of the decoded pixels and size."""
    digest = hashlib.sha256(b"%dx%d:" % (width, height))
    digest.update(rgb)
    return f"image:{width}x{height}:{digest.hexdigest()}"


def check_message_images(images: Sequence[object], limits: ImageLimits = DEFAULT_LIMITS) -> None:
    """Refuse a message with more images than ``limits`` allow (call before decoding them)."""
    if len(images) > limits.max_images_per_message:
        raise ImageRejected(
            f"A message can carry at most {limits.max_images_per_message} images; this one has {len(images)}."
        )


def load_images(
    inputs: Sequence[ImageInput], limits: ImageLimits = DEFAULT_LIMITS
) -> tuple[DecodedImage, ...]:
    """The images of one message: the count is checked first, then each is loaded."""
    check_message_images(inputs, limits)
    return tuple(load_image(item, limits) for item in inputs)


def load_image(
    data: ImageInput, limits: ImageLimits = DEFAULT_LIMITS, *, name: str | None = None
) -> DecodedImage:
    """Validate and decode one image; raises ``ImageRejected`` with a one-line reason.

    ``name`` labels pasted bytes in messages (a path's own file name is used otherwise).
    """
    from PIL import Image, UnidentifiedImageError

    raw, label = _read_bounded(data, limits, name)
    try:
        # Image.open reads the header only. Pillow's own bomb check runs inside it and
        # raises for more than 2x MAX_IMAGE_PIXELS (we catch it rather than touch that
        # process-wide setting); anything smaller is caught by our limit below.
        image = Image.open(io.BytesIO(raw))
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ImageRejected(
            f"{label} declares too many pixels to open safely; images can have at most "
            f"{_megapixels(limits.max_pixels)}."
        ) from exc
    except UnidentifiedImageError as exc:
        raise ImageRejected(f"{label} is not an image.") from exc
    except Exception as exc:  # a header Pillow recognised but could not parse
        raise ImageRejected(f"{label} is a damaged image: {_short_reason(exc)}") from exc

    with image:
        fmt = _ACCEPTED_FORMATS.get(image.format or "")
        if fmt is None:
            raise ImageRejected(
                f"{label} is a {image.format or 'unknown'} image; Hearth reads {_ACCEPTED_TEXT}."
            )
        width, height = image.size
        _check_dimensions(label, image.mode, width, height, limits)
        try:
            rgb_image = _to_rgb(image, limits.prompt_pixels)
        except Exception as exc:  # truncated data, bad EXIF, codec errors: all the user's file
            raise ImageRejected(f"{label} could not be decoded: {_short_reason(exc)}") from exc

    with rgb_image:
        width, height = rgb_image.size  # EXIF rotation may have swapped them
        rgb = rgb_image.tobytes()
    return DecodedImage(
        identity=image_identity(width, height, rgb),
        width=width,
        height=height,
        rgb=rgb,
        format=fmt,
        source_name=label,
    )


def _read_bounded(data: ImageInput, limits: ImageLimits, name: str | None) -> tuple[bytes, str]:
    """The encoded bytes and a label for messages; the size limit is checked before reading."""
    if isinstance(data, str | Path):
        path = Path(data)
        label = _clean_label(name or path.name or str(path))
        try:
            size = path.stat().st_size
        except FileNotFoundError as exc:
            raise ImageRejected(f"{label} does not exist.") from exc
        except OSError as exc:
            raise ImageRejected(f"{label} could not be read: {_short_reason(exc)}") from exc
        if path.is_dir():
            raise ImageRejected(f"{label} is a folder, not an image.")
        _check_size(label, size, limits)
        try:
            with path.open("rb") as fh:
                # Read one byte more than allowed: a file that grew since stat() is caught.
                raw = fh.read(limits.max_bytes + 1)
        except OSError as exc:
            raise ImageRejected(f"{label} could not be read: {_short_reason(exc)}") from exc
        _check_size(label, len(raw), limits)
        return raw, label
    if isinstance(data, bytes | bytearray | memoryview):
        label = _clean_label(name) if name else _UNNAMED
        _check_size(label, memoryview(data).nbytes, limits)  # before copying anything
        raw = bytes(data)
        if not raw:
            raise ImageRejected(f"{label} is empty.")
        return raw, label
    raise TypeError(f"expected image bytes or a path, got {type(data).__name__}")


def _check_size(label: str, size: int, limits: ImageLimits) -> None:
    if size > limits.max_bytes:
        raise ImageRejected(
            f"{label} is {format_bytes(size)}; images can be at most {format_bytes(limits.max_bytes)}."
        )


def _check_dimensions(label: str, mode: str, width: int, height: int, limits: ImageLimits) -> None:
    """Everything the header tells about the cost of decoding, checked before decoding."""
    if width < 1 or height < 1:
        raise ImageRejected(f"{label} has no pixels ({width}x{height}).")
    if width * height > limits.max_pixels:
        raise ImageRejected(
            f"{label} is {width}×{height} pixels ({_megapixels(width * height)}); "
            f"images can have at most {_megapixels(limits.max_pixels)}."
        )
    if max(width, height) > limits.max_side:
        raise ImageRejected(
            f"{label} is {width}×{height} pixels; a side can be at most {limits.max_side:,} pixels."
        )
    if max(width, height) / min(width, height) > limits.max_aspect:
        raise ImageRejected(
            f"{label} is {width}×{height} pixels, too long and thin; "
            f"images can be at most {limits.max_aspect:.0f} times longer than wide."
        )
    decoded = width * height * _MODE_BYTES.get(mode, 4)
    if decoded > limits.max_decoded_bytes:
        raise ImageRejected(
            f"{label} would take {format_bytes(decoded)} to decode; "
            f"images can take at most {format_bytes(limits.max_decoded_bytes)}."
        )


def _reduce_in_strips(image: Any, factor: int) -> Any:
    """``image.reduce(factor)`` a band of rows at a time: reduce() premultiplies an RGBA
    image into a full-size copy first, which for 40 MP is 160 MB more at the peak."""
    from PIL import Image

    width, height = (image.size[0] // factor) * factor, (image.size[1] // factor) * factor
    size = (max(1, width // factor), max(1, height // factor))
    if image.mode not in _REDUCIBLE_MODES or not width or not height:
        return image.resize(size, Image.Resampling.NEAREST)  # one pass, no copy of the source
    out = Image.new(image.mode, size)
    step = factor * 64
    for top in range(0, height, step):
        band = image.crop((0, top, width, min(top + step, height)))
        out.paste(band.reduce(factor), (0, top // factor))
    return out


def _to_rgb(image: Any, prompt_pixels: int = DEFAULT_PROMPT_PIXELS) -> Any:
    """Decode, shrink to ``prompt_pixels``, apply EXIF orientation, flatten transparency onto white.

    The shrink comes right after decoding, so the conversions below copy the small image,
    never the large one (which is closed, freeing its pixels, as soon as it is shrunk).
    """
    from PIL import Image

    image.seek(0)  # GIF/WebP/MPO: the first frame
    orientation = image.getexif().get(0x0112, 1)  # EXIF Orientation, read before shrinking drops it
    width, height = image.size
    if width * height > prompt_pixels:
        # An integer box reduction, one pass into a small image: a resampling resize would
        # add a premultiplied copy of the large image and an intermediate pass as large.
        factor = math.ceil(math.sqrt(width * height / prompt_pixels))
        if image.format in ("JPEG", "MPO"):
            image.draft("RGB", (width // factor, height // factor))  # decodes at 1/2..1/8 scale
            factor = math.ceil(math.sqrt(image.size[0] * image.size[1] / prompt_pixels))
        image.load()
        if factor > 1:
            shrunk = _reduce_in_strips(image, factor)
            image.close()
            image = shrunk
    fix = _ORIENTATION_FIX.get(orientation) if isinstance(orientation, int) else None
    oriented = image.transpose(getattr(Image.Transpose, fix)) if fix else image
    if oriented.mode in _MODES_WITH_ALPHA or "transparency" in oriented.info:
        rgba = oriented.convert("RGBA")
        # Plain convert("RGB") would drop alpha and expose whatever colour transparent
        # pixels happen to hold (often black); a chat app shows them on white.
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        background.alpha_composite(rgba)
        result = background.convert("RGB")
    elif oriented.mode in _SIXTEEN_BIT_GREY:
        # convert("RGB") clips 16-bit grey at 255 (everything turns white): scale it down.
        result = oriented.convert("I").point(lambda value: value / 256).convert("L").convert("RGB")
    elif oriented.mode == "RGB":
        result = oriented.copy() if oriented is image else oriented
    else:
        result = oriented.convert("RGB")
    result.load()
    return result


def _megapixels(pixels: int) -> str:
    value = pixels / 1_000_000
    return f"{value:.0f} megapixels" if value >= 10 else f"{value:.1f} megapixels"


def _clean_label(text: str) -> str:
    # Messages are one line: a file name with control characters must not break that.
    return "".join(ch if ch.isprintable() else "?" for ch in text)[:120]


def _short_reason(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:160]


# ------------------------------------------------------------------ projector pairing


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


def check_fits(layout: PromptLayout, n_ctx_seq: int, *, reserve: int = 1) -> int:
    """Refuse a prompt whose images do not fit the conversation's context.

    ``n_ctx_seq`` is the context one conversation may use (cells of its KV stream);
    ``reserve`` keeps room to generate at least that many tokens. Returns how many
    tokens are left after the prompt.
    """
    left = n_ctx_seq - reserve - layout.logical_tokens
    if left >= 0:
        return left
    media = [s for s in layout.segments if isinstance(s, MediaSegment)]
    if not media:
        return left  # too long, but not because of images: the caller's usual check says so
    image_tokens = sum(s.logical_tokens for s in media)
    room = max(0, n_ctx_seq - reserve - (layout.logical_tokens - image_tokens))
    what = "The image needs" if len(media) == 1 else f"The {len(media)} images need"
    raise ImageRejected(f"{what} {image_tokens} tokens; the conversation has {room} left.")


# -------------------------------------------------------------------- native runtime


@dataclass(frozen=True, slots=True)
class MediaChunk:
    """What the executor needs to schedule one image chunk; the native copy stays in the runtime."""

    identity: str
    logical_tokens: int
    native_positions: int
    non_causal: bool  # must be decoded in one micro-batch (attention within the image is bidirectional)


@dataclass(frozen=True, slots=True)
class TokenizedPrompt:
    """A prompt as a ``PromptLayout`` plus the image chunks its media segments refer to.

    Each identity in ``media`` holds one reference in the runtime's chunk cache until
    ``ProjectorRuntime.release_prompt`` (or ``release`` per identity).
    """

    layout: PromptLayout
    media: Mapping[str, MediaChunk]

    @property
    def image_count(self) -> int:
        return self.layout.media_count

    @property
    def image_tokens(self) -> int:
        return sum(s.logical_tokens for s in self.layout.segments if isinstance(s, MediaSegment))


@dataclass
class _CacheEntry:
    pointer: int
    chunk: MediaChunk
    refs: int


class _ChunkCache:
    """Native image chunk copies by identity, freed when the last holder releases them.

    A follow-up turn about the same picture tokenizes it again; keeping one copy per
    identity means its preprocessed pixels exist once however many requests hold it.
    """

    def __init__(self, free: Callable[[int], None]) -> None:
        self._free = free
        self._entries: dict[str, _CacheEntry] = {}

    def __contains__(self, identity: object) -> bool:
        return identity in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def acquire_existing(self, identity: str) -> MediaChunk | None:
        entry = self._entries.get(identity)
        if entry is None:
            return None
        entry.refs += 1
        return entry.chunk

    def add(self, chunk: MediaChunk, pointer: int) -> None:
        assert chunk.identity not in self._entries
        self._entries[chunk.identity] = _CacheEntry(pointer, chunk, 1)

    def get(self, identity: str) -> tuple[int, MediaChunk] | None:
        entry = self._entries.get(identity)
        return None if entry is None else (entry.pointer, entry.chunk)

    def identities(self) -> frozenset[str]:
        return frozenset(self._entries)

    def refs(self, identity: str) -> int:
        entry = self._entries.get(identity)
        return entry.refs if entry else 0

    def release(self, identity: str) -> None:
        entry = self._entries.get(identity)
        if entry is None:
            return
        entry.refs -= 1
        if entry.refs <= 0:
            del self._entries[identity]
            self._free(entry.pointer)

    def clear(self) -> None:
        entries, self._entries = self._entries, {}
        for entry in entries.values():
            self._free(entry.pointer)


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
        self._cache = _ChunkCache(mtmd_cpp.mtmd_input_chunk_free)

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
        from engine.llama_log import LogLevel, capture_llama_logs
        from engine.native import ensure_backend

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
