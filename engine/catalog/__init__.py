"""GGUF files: read the header and tensor table, validate, describe.

Never reads tensor data: inspecting a multi-gigabyte model costs a few milliseconds.

The parser is our own rather than ``gguf.GGUFReader``: the reader memory-maps the whole
file and builds a numpy view per tensor and a Python object per array element (seconds
for a 262k-token vocabulary), and it trusts counts and lengths it reads. Here every read
is bounded by the file size before anything is allocated, so a damaged or hostile file
ends in ``InvalidModelFile`` with a one-line reason, never in a MemoryError, a hang, or
(further down the line) a llama.cpp abort. ``gguf`` is used only for its constants.

Public API (every name importable from ``engine.catalog``):

- ``inspect(path, expect=None) -> ModelInfo`` reads and validates any GGUF (model,
  projector, split part); ``expect`` rejects the other kind with a human message.
- ``inspect_model(path)`` / ``inspect_projector(path)``: ``inspect`` with ``expect`` set.
- ``model_identity(info)``: which model a token id sequence belongs to.
- ``known_architectures()``: the text architectures the installed llama.cpp knows.
- ``split_part_paths(path, count)``: the file names of every part of a split GGUF.
- ``read_token_table(path) -> TokenTable``: a vocabulary as stored, for comparing two.

The modules, bottom up:

- ``model_info``: ``ModelInfo``, ``ProjectorInfo``, ``ModelKind``, ``model_identity``.
- ``gguf_reader``: bounded reads of the header bytes, the GGUF value types, the preamble.
- ``vocabulary``: the token list scanned (digest, byte tokens, duplicates llama.cpp aborts
  on); ``TokenTable`` and ``read_token_table``.
- ``gguf_header``: ``parse_header`` (metadata and tensor table) and ``check_complete``.
- ``architectures``: ``known_architectures``.
- ``metadata_checks``: the keys llama.cpp and clip.cpp assert on; a projector's info.
- ``tensor_summary``: bytes per block, matmul weights, file type and size label.
- ``split_files``: ``split_part_paths`` and the other parts' headers.
- ``inspection``: ``inspect``, ``inspect_model``, ``inspect_projector``.
"""

from __future__ import annotations

from engine.base.errors import InvalidModelFile
from engine.catalog.architectures import known_architectures
from engine.catalog.inspection import inspect, inspect_model, inspect_projector
from engine.catalog.model_info import ModelInfo, ModelKind, ProjectorInfo, Scalar, model_identity
from engine.catalog.split_files import split_part_paths
from engine.catalog.vocabulary import SPECIAL_TOKEN_TYPES, TokenTable, read_token_table

__all__ = [
    "SPECIAL_TOKEN_TYPES",
    "InvalidModelFile",
    "ModelInfo",
    "ModelKind",
    "ProjectorInfo",
    "Scalar",
    "TokenTable",
    "inspect",
    "inspect_model",
    "inspect_projector",
    "known_architectures",
    "model_identity",
    "read_token_table",
    "split_part_paths",
]
