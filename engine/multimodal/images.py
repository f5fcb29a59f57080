"""Image input, the Pillow side: limits, validation from the header, decoding and shrinking.

Pure Python + Pillow; may run on any thread. Every refusal a user can cause is an
``ImageRejected`` with a one-line message, and all of them happen from the file size and
the image *header*, before any pixel is decoded, so a decompression bomb costs nothing.

The identity of an image is a hash of its decoded pixels and size, so the same picture
pasted twice (even re-encoded losslessly, or as a different format) is the same
``MediaSegment`` and its KV can be reused across turns.
"""

from __future__ import annotations

import hashlib
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeAlias

from engine.base.errors import ImageRejected
from engine.base.units import format_bytes

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
