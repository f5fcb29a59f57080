"""engine.multimodal: image refusals and decoding, projector pairing, mtmd tokenize/eval."""

from __future__ import annotations

import io
import struct
import warnings
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from engine.base.errors import Cancelled, ImageRejected, LoadFailed
from engine.catalog import inspect_model, inspect_projector
from engine.devtools.tiny_models import TinyProjectorSpec, write_tiny_projector
from engine.multimodal import (
    ChunkCache,
    DecodedImage,
    ImageLimits,
    MediaChunk,
    ProjectorMismatch,
    ProjectorRuntime,
    TokenizedPrompt,
    check_fits,
    check_message_images,
    image_identity,
    load_image,
    load_images,
    validate_projector,
)
from engine.scheduler import MediaSegment, PromptLayout, TextSegment

TOKENS_PER_IMAGE = 16  # tiny projector: (32 / 8) ** 2


def encode(image: Image.Image, fmt: str, **options: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def png_header_only(width: int, height: int) -> bytes:
    """A PNG that declares ``width`` x ``height`` RGB pixels and carries no image data."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b"")


def gradient(width: int = 40, height: int = 30, shift: int = 0) -> Image.Image:
    image = Image.new("RGB", (width, height))
    image.putdata(
        [((x * 6 + shift) % 256, (y * 8) % 256, (x + y) % 256) for y in range(height) for x in range(width)]
    )
    return image


# ------------------------------------------------------------------------------ refusals


def test_png_declaring_10_gigapixels_is_refused_before_decoding() -> None:
    with pytest.raises(ImageRejected, match="too many pixels") as caught:
        load_image(png_header_only(100_000, 100_000), name="bomb.png")
    assert caught.value.message.startswith("bomb.png ")
    assert "\n" not in caught.value.message


def test_pixel_limit_is_checked_from_the_header() -> None:
    # 100 MP: Pillow only warns, and the warning may be an error (-W error); refused either way.
    with (
        pytest.warns(Image.DecompressionBombWarning),
        pytest.raises(ImageRejected, match="at most 40 megapix"),
    ):
        load_image(png_header_only(10_000, 10_000))
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        with pytest.raises(ImageRejected, match="too many pixels to open safely"):
            load_image(png_header_only(10_000, 10_000))
    # 50 MP is below Pillow's own bomb threshold: our limit must catch it, without pixel data.
    with pytest.raises(ImageRejected, match=r"10000×5000 pixels \(50 megapixels\).*at most 40 megapixels"):
        load_image(png_header_only(10_000, 5_000))
    with pytest.raises(ImageRejected, match=r"at most 0\.1 megapixels"):
        load_image(encode(gradient(400, 300), "PNG"), ImageLimits(max_pixels=100_000))


def test_not_an_image(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("just some text, not a picture\n")
    with pytest.raises(ImageRejected, match=r"^notes.txt is not an image\.$"):
        load_image(notes)
    with pytest.raises(ImageRejected, match="The attachment is not an image"):
        load_image(b"GIF89a but not really")


def test_unsupported_format_is_named() -> None:
    tiff = encode(gradient(8, 8), "TIFF")
    with pytest.raises(
        ImageRejected, match=r"scan.tif is a TIFF image; Hearth reads PNG, JPEG, WebP, GIF and BMP"
    ):
        load_image(tiff, name="scan.tif")


def test_file_over_the_size_limit(tmp_path: Path) -> None:
    data = encode(gradient(), "PNG")
    limits = ImageLimits(max_bytes=len(data) - 1)
    path = tmp_path / "big.png"
    path.write_bytes(data)
    with pytest.raises(ImageRejected, match=r"big.png is .* B; images can be at most .* B"):
        load_image(path, limits)
    with pytest.raises(ImageRejected, match="images can be at most"):
        load_image(data, limits)
    assert load_image(data, ImageLimits(max_bytes=len(data))).width == 40


def test_missing_unreadable_and_empty(tmp_path: Path) -> None:
    with pytest.raises(ImageRejected, match=r"^gone.png does not exist\.$"):
        load_image(tmp_path / "gone.png")
    with pytest.raises(ImageRejected, match="is a folder"):
        load_image(tmp_path)
    with pytest.raises(ImageRejected, match="is empty"):
        load_image(b"")


def test_damaged_image_is_refused_when_decoded() -> None:
    data = encode(gradient(64, 64), "PNG")
    with pytest.raises(ImageRejected, match="could not be decoded"):
        load_image(data[: len(data) // 2], name="cut.png")


def test_too_many_images_in_one_message() -> None:
    limits = ImageLimits(max_images_per_message=2)
    check_message_images([b"a", b"b"], limits)
    with pytest.raises(ImageRejected, match="at most 2 images; this one has 3"):
        check_message_images([b"a", b"b", b"c"], limits)
    # load_images counts before decoding anything: garbage inputs are never opened.
    with pytest.raises(ImageRejected, match="this one has 3"):
        load_images([b"x", b"y", b"z"], limits)
    with pytest.raises(ValueError):
        ImageLimits(max_images_per_message=0)


# ------------------------------------------------------------------------------ decoding


def test_exif_orientation_is_applied() -> None:
    image = gradient(40, 20)
    exif = image.getexif()
    exif[0x0112] = 6  # rotate 90° clockwise to display
    decoded = load_image(encode(image, "JPEG", exif=exif.tobytes()))
    assert (decoded.width, decoded.height) == (20, 40)
    assert decoded.format == "JPEG"
    assert len(decoded.rgb) == 20 * 40 * 3
    assert decoded.identity.startswith("image:20x40:")


def test_gif_uses_the_first_frame() -> None:
    frames = [Image.new("RGB", (16, 16), (255, 0, 0)), Image.new("RGB", (16, 16), (0, 0, 255))]
    data = encode(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=100)
    assert Image.open(io.BytesIO(data)).n_frames == 2
    decoded = load_image(data)
    assert decoded.format == "GIF"
    assert decoded.rgb[:3] == bytes((255, 0, 0))
    assert set(decoded.rgb[i : i + 3] for i in range(0, len(decoded.rgb), 3)) == {bytes((255, 0, 0))}


def test_alpha_is_composited_on_white() -> None:
    image = Image.new("RGBA", (2, 1))
    image.putdata([(0, 0, 0, 0), (0, 0, 0, 128)])  # transparent black, half-transparent black
    decoded = load_image(encode(image, "PNG"))
    assert decoded.rgb[:3] == bytes((255, 255, 255))
    assert all(120 <= value <= 135 for value in decoded.rgb[3:])
    # Palette transparency (GIF) goes the same way.
    palette = Image.new("P", (1, 1), 0)
    palette.putpalette([0, 0, 0] * 256)
    assert load_image(encode(palette, "GIF", transparency=0)).rgb == bytes((255, 255, 255))


def test_other_modes_become_rgb() -> None:
    assert load_image(encode(Image.new("L", (3, 2), 77), "BMP")).rgb == bytes([77]) * 18
    assert load_image(encode(gradient(8, 8), "WEBP", lossless=True)).format == "WebP"
    # 16-bit grey must be scaled, not clipped to white: 5000/65535 of full scale is 19.
    assert load_image(encode(Image.new("I;16", (2, 2), 5000), "PNG")).rgb == bytes([19]) * 12


def test_identity_is_the_pixels_not_the_encoding(tmp_path: Path) -> None:
    image = gradient()
    png = load_image(encode(image, "PNG"))
    path = tmp_path / "same.bmp"
    path.write_bytes(encode(image, "BMP"))
    bmp = load_image(path)
    assert bmp.source_name == "same.bmp"
    assert png.identity == bmp.identity
    assert png == bmp
    assert png.identity == image_identity(40, 30, image.tobytes())
    other = load_image(encode(gradient(shift=1), "PNG"))
    assert other.identity != png.identity
    # The size is part of the identity: the same bytes read as 30x40 are another image.
    assert image_identity(30, 40, image.tobytes()) != png.identity


def test_decoded_image_checks_its_buffer() -> None:
    with pytest.raises(ValueError, match="needs 12 bytes"):
        DecodedImage("image:2x2:x", 2, 2, b"\0" * 11, "PNG", "x")


# ---------------------------------------------------------------------- pure helpers


def test_check_fits() -> None:
    image = MediaSegment("image:a", 16, 16)
    layout = PromptLayout((TextSegment((1, 2, 3)), image, TextSegment((4, 5))))
    assert check_fits(layout, 22) == 0  # 21 tokens + one to generate
    with pytest.raises(ImageRejected, match=r"^The image needs 16 tokens; the conversation has 15 left\.$"):
        check_fits(layout, 21)
    two = layout.concat(PromptLayout((MediaSegment("image:b", 16, 16), TextSegment((6,)))))
    with pytest.raises(ImageRejected, match="The 2 images need 32 tokens; the conversation has 0 left"):
        check_fits(two, 4)
    # Too long without any image: not an image refusal, the caller decides.
    assert check_fits(PromptLayout.from_tokens(range(10)), 5) == -6


def test_chunk_cache_counts_references() -> None:
    freed: list[int] = []
    cache = ChunkCache(freed.append)
    chunk = MediaChunk("image:a", 16, 16, False)
    cache.add(chunk, 1001)
    assert cache.acquire_existing("image:a") == chunk
    assert cache.acquire_existing("image:b") is None
    assert cache.refs("image:a") == 2
    cache.release("image:a")
    assert freed == [] and "image:a" in cache
    cache.release("image:a")
    assert freed == [1001] and "image:a" not in cache
    cache.release("image:a")  # releasing again is harmless
    cache.add(MediaChunk("image:c", 4, 4, False), 1002)
    cache.clear()
    assert freed == [1001, 1002] and len(cache) == 0


# ----------------------------------------------------------------- projector pairing


@pytest.fixture(scope="module")
def narrow_projector(tiny_dir: Path) -> Path:
    """A projector for a 32-dim text model: wrong for ``tiny_model`` (64)."""
    return write_tiny_projector(tiny_dir / "mmproj-narrow.gguf", TinyProjectorSpec(n_embd_text=32))


def test_projector_pairing(tiny_model: Path, tiny_projector: Path, narrow_projector: Path) -> None:
    model, projector = inspect_model(tiny_model), inspect_projector(tiny_projector)
    info = validate_projector(projector, model)
    assert info.projection_dim == 64 and info.tokens_per_image == TOKENS_PER_IMAGE
    with pytest.raises(ProjectorMismatch, match=r"32-dim image embeddings .* embedding size 64") as caught:
        validate_projector(inspect_projector(narrow_projector), model)
    assert "\n" not in caught.value.message
    with pytest.raises(ProjectorMismatch, match="is not a vision projector"):
        validate_projector(model, model)
    with pytest.raises(ProjectorMismatch, match="is a projector, not a text model"):
        validate_projector(projector, projector)


# ------------------------------------------------------------------------ native runtime


@pytest.fixture(scope="module")
def native(tiny_model: Path) -> Iterator[tuple[object, object]]:
    """(llama_model*, llama_context*) of the tiny text model on the CPU: n_ctx 1024, n_batch 512."""
    from engine.native.backend import ensure_backend

    assert ensure_backend()
    import llama_cpp

    model_params = llama_cpp.llama_model_default_params()
    model_params.n_gpu_layers = 0
    model = llama_cpp.llama_model_load_from_file(str(tiny_model).encode(), model_params)
    assert model
    ctx_params = llama_cpp.llama_context_default_params()
    ctx_params.n_ctx = 1024
    ctx_params.n_batch = 512
    ctx_params.n_ubatch = 512
    ctx_params.n_seq_max = 2
    ctx_params.n_threads = ctx_params.n_threads_batch = 1
    ctx = llama_cpp.llama_init_from_model(model, ctx_params)
    assert ctx
    yield model, ctx
    llama_cpp.llama_free(ctx)
    llama_cpp.llama_model_free(model)


@pytest.fixture()
def runtime(
    native: tuple[object, object], tiny_projector: Path, tiny_model: Path
) -> Iterator[ProjectorRuntime]:
    model, _ = native
    rt = ProjectorRuntime.load(tiny_projector, model, 1, False, model_info=inspect_model(tiny_model))
    yield rt
    rt.free()


def test_load_reports_progress_and_capabilities(native: tuple[object, object], tiny_projector: Path) -> None:
    seen: list[float] = []
    with ProjectorRuntime.load(tiny_projector, native[0], 1, False, seen.append) as rt:
        assert rt.is_open
        assert rt.supports_vision and not rt.uses_mrope and not rt.uses_non_causal
        assert rt.marker == "<__media__>"
    assert not rt.is_open
    rt.free()  # idempotent
    assert seen and seen[-1] == pytest.approx(1.0)
    assert seen == sorted(seen)


def test_load_refuses_mismatch_before_native_and_reports_mtmd_reason(
    native: tuple[object, object], tiny_model: Path, narrow_projector: Path
) -> None:
    with pytest.raises(ProjectorMismatch, match="32-dim"):
        ProjectorRuntime.load(narrow_projector, native[0], 1, False, model_info=inspect_model(tiny_model))
    # Without the model's header the check falls to mtmd, whose reason is passed on.
    with pytest.raises(LoadFailed, match=r"mmproj-narrow.gguf could not be loaded: .*64.*32"):
        ProjectorRuntime.load(narrow_projector, native[0], 1, False)


def test_load_can_be_cancelled(native: tuple[object, object], tiny_projector: Path) -> None:
    with pytest.raises(Cancelled):
        ProjectorRuntime.load(tiny_projector, native[0], 1, False, lambda fraction: fraction < 0.5)


def test_tokenize_two_images(runtime: ProjectorRuntime) -> None:
    first = load_image(encode(gradient(), "PNG"))
    second = load_image(encode(gradient(shift=3), "JPEG"))
    marker = runtime.marker
    text = f"<|im_start|>user\n{marker}look {marker}compare<|im_end|>\n<|im_start|>assistant\n"
    prompt = runtime.tokenize(text, [first, second])
    kinds = [type(s).__name__ for s in prompt.layout.segments]
    assert kinds == ["TextSegment", "MediaSegment", "TextSegment", "MediaSegment", "TextSegment"]
    media = [s for s in prompt.layout.segments if isinstance(s, MediaSegment)]
    assert [m.identity for m in media] == [first.identity, second.identity]
    assert all(m.logical_tokens == m.native_positions == TOKENS_PER_IMAGE for m in media)
    assert prompt.image_count == 2 and prompt.image_tokens == 2 * TOKENS_PER_IMAGE
    assert set(prompt.media) == {first.identity, second.identity}
    assert runtime.cached_identities == {first.identity, second.identity}
    runtime.release_prompt(prompt)
    assert runtime.cached_identities == frozenset()


def test_same_image_twice_is_one_identity(runtime: ProjectorRuntime) -> None:
    image = load_image(encode(gradient(), "PNG"))
    again = load_image(encode(gradient(), "BMP"))
    marker = runtime.marker
    prompt = runtime.tokenize(f"a{marker}b{marker}c", [image, again])
    media = [s for s in prompt.layout.segments if isinstance(s, MediaSegment)]
    assert len(media) == 2 and media[0] == media[1]
    assert list(prompt.media) == [image.identity]
    # A later turn about the same picture shares the cached chunk.
    follow_up = runtime.tokenize(f"a{marker}b then more", [image])
    assert follow_up.layout.common_prefix(prompt.layout).logical_tokens >= 1 + TOKENS_PER_IMAGE
    assert runtime.references(image.identity) == 2
    runtime.release_prompt(prompt)
    assert runtime.references(image.identity) == 1
    runtime.release(image.identity)
    assert runtime.cached_identities == frozenset()


def test_tokenize_refuses_marker_count_mismatch(runtime: ProjectorRuntime) -> None:
    image = load_image(encode(gradient(), "PNG"))
    with pytest.raises(ImageRejected, match="2 image slots for 1 images"):
        runtime.tokenize(f"{runtime.marker}{runtime.marker}", [image])
    with pytest.raises(ImageRejected, match="0 image slots for 1 images"):
        runtime.tokenize("no slot here", [image])
    assert runtime.cached_identities == frozenset()
    text_only = runtime.tokenize("just text", [])
    assert text_only.layout.media_count == 0 and text_only.layout.logical_tokens > 0


def test_bos_is_prepended_by_hand(runtime: ProjectorRuntime) -> None:
    image = load_image(encode(gradient(), "PNG"))
    plain = runtime.tokenize(f"{runtime.marker}hi", [image])
    with_bos = runtime.tokenize(f"{runtime.marker}hi", [image], bos_token=1)
    special = runtime.tokenize(f"{runtime.marker}hi", [image], add_special=True)
    assert isinstance(plain.layout.segments[0], MediaSegment)
    assert with_bos.layout.segments[0] == TextSegment((1,))  # the tiny vocabulary's <s>
    assert with_bos.layout.segments[1:] == plain.layout.segments
    assert special.layout == with_bos.layout
    for prompt in (plain, with_bos, special):
        runtime.release_prompt(prompt)
    assert runtime.cached_identities == frozenset()


def test_eval_media_advances_by_native_positions(
    runtime: ProjectorRuntime, native: tuple[object, object]
) -> None:
    import llama_cpp

    _, ctx = native
    memory = llama_cpp.llama_get_memory(ctx)
    image = load_image(encode(gradient(), "PNG"))
    prompt = runtime.tokenize(f"x{runtime.marker}y", [image])
    chunk = prompt.media[image.identity]
    try:
        assert runtime.eval_media(ctx, chunk, 5, 1, 512) == 5 + chunk.native_positions
        assert llama_cpp.llama_memory_seq_pos_max(memory, 1) == 5 + chunk.native_positions - 1
        assert llama_cpp.llama_memory_seq_pos_max(memory, 0) == -1  # the other sequence is untouched
        # A smaller n_batch splits the decode but lands on the same position.
        llama_cpp.llama_memory_seq_rm(memory, 1, -1, -1)
        assert runtime.eval_media(ctx, image.identity, 0, 1, 7) == chunk.native_positions
    finally:
        llama_cpp.llama_memory_seq_rm(memory, 1, -1, -1)
        runtime.release_prompt(prompt)


def test_eval_media_refuses_arguments_that_would_abort(
    runtime: ProjectorRuntime, native: tuple[object, object]
) -> None:
    _, ctx = native
    image = load_image(encode(gradient(), "PNG"))
    prompt = runtime.tokenize(runtime.marker, [image])
    chunk = prompt.media[image.identity]
    with pytest.raises(ValueError, match="n_batch 513"):
        runtime.eval_media(ctx, chunk, 0, 0, 513)
    with pytest.raises(ValueError, match="n_batch 0"):
        runtime.eval_media(ctx, chunk, 0, 0, 0)
    with pytest.raises(ValueError, match="sequence 2"):
        runtime.eval_media(ctx, chunk, 0, 2, 512)
    runtime.release_prompt(prompt)
    with pytest.raises(ValueError, match="released"):
        runtime.eval_media(ctx, chunk, 0, 0, 512)


def test_batch_limits_for_non_causal_images(runtime: ProjectorRuntime) -> None:
    wide = MediaChunk("image:w", 300, 300, True)
    prompt_layout = PromptLayout((MediaSegment("image:w", 300, 300),))
    prompt = TokenizedPrompt(prompt_layout, {"image:w": wide})
    runtime.check_batch_limits(prompt, 512, 512)
    with pytest.raises(ImageRejected, match="needs 300 tokens in one batch; this model's batch holds 256"):
        runtime.check_batch_limits(prompt, 512, 256)


def test_freed_runtime_refuses_work(native: tuple[object, object], tiny_projector: Path) -> None:
    rt = ProjectorRuntime.load(tiny_projector, native[0], 1, False)
    image = load_image(encode(gradient(), "PNG"))
    rt.tokenize(rt.marker, [image])
    rt.free()  # frees the cached chunk too
    assert rt.cached_identities == frozenset()
    with pytest.raises(RuntimeError, match="freed"):
        rt.tokenize(rt.marker, [image])


# -- what an image costs, not only its pixel count -----------------------------------------


@pytest.mark.parametrize(
    ("width", "height", "expected"),
    [
        (40_000_000, 1, "a side can be at most 16,384 pixels"),
        (10_000_000, 4, "a side can be at most 16,384 pixels"),
        (16_000, 400, "too long and thin; images can be at most 32 times longer than wide"),
    ],
)
def test_long_thin_images_are_refused_from_the_header(width: int, height: int, expected: str) -> None:
    with pytest.raises(ImageRejected, match=expected):
        load_image(png_header_only(width, height))


def test_limits_on_side_aspect_and_decoded_size() -> None:
    data = encode(gradient(400, 300), "PNG")
    with pytest.raises(ImageRejected, match="a side can be at most 300 pixels"):
        load_image(data, ImageLimits(max_side=300))
    with pytest.raises(ImageRejected, match="too long and thin"):
        load_image(encode(gradient(400, 10), "PNG"), ImageLimits(max_aspect=32))
    with pytest.raises(ImageRejected, match=r"would take 351\.6 KiB to decode"):
        load_image(data, ImageLimits(max_decoded_bytes=300_000))  # 400×300 RGB = 360,000 bytes
    assert load_image(data, ImageLimits(max_decoded_bytes=360_000)).width == 400


def test_large_images_are_shrunk_to_the_prompt_size_keeping_their_shape() -> None:
    decoded = load_image(encode(gradient(400, 300), "PNG"), ImageLimits(prompt_pixels=10_000))
    assert decoded.pixels <= 10_000
    assert abs(decoded.width / decoded.height - 400 / 300) < 0.03
    small = load_image(encode(gradient(40, 30), "PNG"), ImageLimits(prompt_pixels=10_000))
    assert (small.width, small.height) == (40, 30)  # nothing to shrink: the same pixels


def test_exif_orientation_survives_shrinking() -> None:
    image = gradient(400, 200)
    exif = image.getexif()
    exif[0x0112] = 6
    decoded = load_image(encode(image, "JPEG", exif=exif.tobytes()), ImageLimits(prompt_pixels=5_000))
    assert decoded.height > decoded.width  # rotated to portrait, after shrinking
