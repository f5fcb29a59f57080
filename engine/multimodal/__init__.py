"""Images in prompts: validation and decoding (Pillow), and the mtmd projector runtime.

Three modules with different rules:

- ``images``: image input (``load_image``, ``check_message_images``), pure Python + Pillow,
  any thread; every refusal is an ``ImageRejected`` decided from the file size and header.
- ``prompts``: a prompt tokenized with its images (``TokenizedPrompt``, ``MediaChunk``), the
  reference-counted cache of native image chunks, and ``check_fits``.
- ``projector``: pairing a projector with a text model (``validate_projector``) and the
  executor-thread ``ProjectorRuntime`` that owns an ``mtmd_context``.

Importing this package does not map the native libraries.
"""

from engine.multimodal.images import (
    DEFAULT_LIMITS,
    DEFAULT_MAX_ASPECT,
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_DECODED_BYTES,
    DEFAULT_MAX_IMAGES_PER_MESSAGE,
    DEFAULT_MAX_PIXELS,
    DEFAULT_MAX_SIDE,
    DEFAULT_PROMPT_PIXELS,
    DecodedImage,
    ImageInput,
    ImageLimits,
    check_message_images,
    image_identity,
    load_image,
    load_images,
)
from engine.multimodal.projector import (
    ImageEvalFailed,
    ProgressCallback,
    ProjectorMismatch,
    ProjectorRuntime,
    validate_projector,
)
from engine.multimodal.prompts import ChunkCache, MediaChunk, TokenizedPrompt, check_fits

__all__ = [
    "DEFAULT_LIMITS",
    "DEFAULT_MAX_ASPECT",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_DECODED_BYTES",
    "DEFAULT_MAX_IMAGES_PER_MESSAGE",
    "DEFAULT_MAX_PIXELS",
    "DEFAULT_MAX_SIDE",
    "DEFAULT_PROMPT_PIXELS",
    "ChunkCache",
    "DecodedImage",
    "ImageEvalFailed",
    "ImageInput",
    "ImageLimits",
    "MediaChunk",
    "ProgressCallback",
    "ProjectorMismatch",
    "ProjectorRuntime",
    "TokenizedPrompt",
    "check_fits",
    "check_message_images",
    "image_identity",
    "load_image",
    "load_images",
    "validate_projector",
]
