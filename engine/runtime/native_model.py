"""Every native handle of one loaded model, and the few llama.cpp calls serving makes.

Built by ``engine.runtime.loader`` and owned by the executor thread: nothing here may be
touched from another thread. ``ll`` is the ``llama_cpp`` module, imported by the loader
only after ``native.require_backend`` passed, so a build that failed its self-check is
never imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.chat import ChatTemplate, token_to_piece, tokenize
from engine.chat.traits import ChatTraits
from engine.multimodal import ProjectorRuntime
from engine.native.backend import release_freed_memory
from engine.native.batch import NativeBatch
from engine.runtime.prompt_builder import PromptBuilder
from engine.runtime.token_sampler import SamplerHost
from engine.speculation.draft_model import DraftModel
from engine.speculation.policy import DraftCostModel

# Control tokens that mark tool calls and reasoning. Written out in the text a request
# receives (llama.cpp renders control tokens as nothing), so the parsers can see them.
VISIBLE_MARKERS = (
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "<|python_tag|>",
)


@dataclass(eq=False)
class NativeModel:
    """The model, its context and batch, the projector and draft model if any, and the
    sizes llama.cpp settled on (which may differ from the plan's)."""

    ll: Any
    model: Any = None
    vocab: Any = None
    n_vocab: int = 0
    template: ChatTemplate | None = None
    traits: ChatTraits | None = None  # what the template does about tools and thinking
    visible: frozenset[int] = frozenset()  # control tokens ``piece`` writes out (VISIBLE_MARKERS)
    ctx: Any = None
    mem: Any = None
    n_ctx: int = 0
    n_seq: int = 0
    n_batch: int = 0
    n_ctx_seq: int = 0
    shared_pool: bool = False  # the conversations share the KV cells (kv_unified)
    n_outputs: int = 0  # logit rows one batch may have (n_outputs_max)
    batch: NativeBatch | None = None
    projector: ProjectorRuntime | None = None
    draft: DraftModel | None = None
    draft_costs: DraftCostModel | None = None  # measured at warm-up when speculation adapts
    draft_note: str = ""  # why the draft model was let go at warm-up (it could not pay here)
    prompts: PromptBuilder | None = None  # once every phase has run
    samplers: SamplerHost | None = None  # once every phase has run
    progress_callback: Any = None  # a ctypes callback must stay referenced while llama.cpp may call it
    devices_array: Any = None  # llama_model_params.devices / tensor_split, kept for the load
    split_array: Any = None

    @property
    def has_vision(self) -> bool:
        return self.projector is not None and self.projector.supports_vision

    def decode(self, batch: NativeBatch) -> int:
        return int(self.ll.llama_decode(self.ctx, batch.native()))

    def forget(self, seq: int, start: int = -1) -> bool:
        """Drop ``seq``'s cells from position ``start`` on (all of them with -1); False where
        the memory cannot drop a tail (recurrent and hybrid models)."""
        return bool(self.ll.llama_memory_seq_rm(self.mem, seq, start, -1))

    def cells(self, seq: int) -> int:
        return max(int(self.ll.llama_memory_seq_pos_max(self.mem, seq)) + 1, 0)

    def is_end(self, token: int) -> bool:
        return bool(self.ll.llama_vocab_is_eog(self.vocab, token))

    def piece(self, token: int) -> bytes:
        """A generated token's bytes: control tokens are nothing, except the markers of
        tool calls and reasoning (``visible``)."""
        return token_to_piece(self.vocab, token, token in self.visible)

    def find_visible(self) -> frozenset[int]:
        """The control tokens among ``VISIBLE_MARKERS`` (markers that are one token that
        renders as nothing otherwise)."""
        found = set()
        for marker in VISIBLE_MARKERS:
            ids = tokenize(self.vocab, marker, add_special=False, parse_special=True)
            if len(ids) == 1 and token_to_piece(self.vocab, ids[0], False) != marker.encode():
                found.add(ids[0])
        return frozenset(found)

    def tokenize_text(self, text: bytes) -> list[int]:
        return tokenize(self.vocab, text, add_special=False, parse_special=False)

    def free(self) -> None:
        """Free every handle (safe on a half-loaded model) and give the memory back."""
        if self.projector is not None:
            self.projector.free()
            self.projector = None
        if self.draft is not None:
            self.draft.free()
            self.draft = None
        if self.ctx:
            self.ll.llama_free(self.ctx)
        if self.model:
            self.ll.llama_model_free(self.model)
        self.ctx = self.model = self.mem = self.vocab = None
        self.prompts = None
        self.samplers = None
        self.batch = None
        self.progress_callback = None
        self.devices_array = self.split_array = None
        release_freed_memory()
