"""From a ChatRequest to what the scheduler runs: the prompt as text and image segments.

Renders the conversation with the model's chat template, tokenizes it (splicing in earlier
replies' own ids when this model made them), tokenizes images through the projector,
appends a continued reply's prefix, and refuses token ids the vocabulary does not have.
Executor thread only: tokenizing calls llama.cpp.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any

from engine.base.errors import EngineError, ImageRejected, InvalidChatRequest
from engine.chat import (
    ChatMessage,
    ChatTemplate,
    RenderedPrompt,
    split_conversation,
    tokenize,
    tokenize_conversation,
)
from engine.multimodal import (
    DecodedImage,
    ProjectorRuntime,
    TokenizedPrompt,
    check_fits,
    check_message_images,
)
from engine.requests.request import ChatRequest, PromptSize, PromptTooLong
from engine.scheduler import MediaSegment, PromptLayout, TextSegment

log = logging.getLogger("hearth.executor")


@dataclass
class PromptBuilder:
    """What a loaded model needs to turn requests into prompt layouts."""

    vocab: Any  # llama_vocab pointer
    template: ChatTemplate
    n_vocab: int
    model_identity: str  # reply ids are spliced only when ChatMessage.tokens_model is this
    n_batch: int
    n_ubatch: int
    projector: ProjectorRuntime | None = None
    has_vision: bool = False
    # The last text prompt built, under what determines it (``prompt_key``): the window
    # measures its draft after each typing pause, then sends that same conversation, whose
    # admission then neither renders nor tokenizes it again. Text only: an image prompt
    # holds native chunks of its own request.
    _last: tuple[tuple, PromptLayout, tuple[str, ...]] | None = field(default=None, init=False, repr=False)

    def prepare(
        self, request: ChatRequest, n_ctx_seq: int
    ) -> tuple[PromptLayout, tuple[str, ...], tuple[TokenizedPrompt, ...]]:
        """``build``, refusing a prompt longer than a sequence holds. Every failure is an
        ``EngineError`` (a bug costs one request, not the engine), with its images released."""
        media: tuple[TokenizedPrompt, ...] = ()
        try:
            try:
                layout, stops, media = self.build(request)
            except EngineError:
                raise
            except Exception as exc:
                log.exception("could not prepare request %d", request.request_id)
                raise EngineError(f"This request could not be prepared: {exc}") from exc
            if layout.native_positions > n_ctx_seq:
                if layout.media_count:
                    check_fits(layout, n_ctx_seq)
                raise PromptTooLong(
                    f"The prompt is {layout.logical_tokens:,} tokens; this model was loaded with "
                    f"{n_ctx_seq:,} per conversation."
                )
        except EngineError:
            self.release(media)
            raise
        return layout, stops, media

    def measure(self, request: ChatRequest, n_ctx_seq: int) -> PromptSize:
        """How many of a conversation's positions ``request``'s prompt takes, built exactly as
        ``prepare`` would, and not run. Every failure is an ``EngineError``."""
        try:
            layout, _stops, media = self.build(request)
        except EngineError:
            raise
        except Exception as exc:  # a bug costs this answer, not the engine
            log.exception("could not measure a prompt")
            raise EngineError(f"The prompt could not be measured: {exc}") from exc
        self.release(media)
        return PromptSize(layout.native_positions, n_ctx_seq)

    def build(
        self, request: ChatRequest
    ) -> tuple[PromptLayout, tuple[str, ...], tuple[TokenizedPrompt, ...]]:
        """The request's prompt as text and media segments, its stop strings, and the
        tokenized image prompts whose chunks it holds (released when it ends)."""
        import llama_cpp as ll

        text_only = not any(m.images for m in request.messages)
        key = prompt_key(request) if text_only else None
        if key is not None and self._last is not None and self._last[0] == key:
            return self._last[1], self._last[2], ()
        if request.prompt is not None:
            tokens = tokenize(self.vocab, request.prompt, add_special=True, parse_special=True)
            layout = PromptLayout.from_tokens(tokens)
            stops = request.stop
            media: tuple[TokenizedPrompt, ...] = ()
        elif any(m.images for m in request.messages):
            layout, rendered, media = self._image_prompt(request)
            stops = tuple(dict.fromkeys((*rendered.stop_strings, *request.stop)))
        else:
            tokens, rendered = tokenize_conversation(
                self.vocab, self.template, self._own_tokens(request.messages), request.tools
            )
            layout = PromptLayout.from_tokens(tokens)
            stops = tuple(dict.fromkeys((*rendered.stop_strings, *request.stop)))
            media = ()
        if request.assistant_prefix and request.prompt is None:
            # The user's text, not template syntax: special tokens are not parsed in it.
            prefix = tokenize(self.vocab, request.assistant_prefix, add_special=False, parse_special=False)
            layout = layout.extend(prefix)
        if not layout.logical_tokens:
            bos = ll.llama_vocab_bos(self.vocab)
            layout = PromptLayout.from_tokens([bos if bos >= 0 else 0])
        self._check_token_ids(layout)
        if key is not None:
            self._last = (key, layout, stops)
        return layout, stops, media

    def _check_token_ids(self, layout: PromptLayout) -> None:
        """Refuse ids outside the vocabulary before they reach a batch: llama_decode would
        fail the whole batch, everyone's, for one request's bad id."""
        for segment in layout.segments:
            if isinstance(segment, TextSegment) and segment.tokens:
                lo, hi = min(segment.tokens), max(segment.tokens)
                if lo < 0 or hi >= self.n_vocab:
                    bad = lo if lo < 0 else hi
                    raise InvalidChatRequest(
                        f"The prompt holds token id {bad}, which this model does not have "
                        f"(its vocabulary has {self.n_vocab:,} tokens)."
                    )

    def _own_tokens(self, messages: tuple[ChatMessage, ...]) -> tuple[ChatMessage, ...]:
        """Messages with reply ids only where this model made them; the others re-tokenize."""
        if all(not m.tokens or m.tokens_model == self.model_identity for m in messages):
            return messages
        return tuple(
            m
            if not m.tokens or m.tokens_model == self.model_identity
            else replace(m, tokens=(), tokens_model="")
            for m in messages
        )

    def _image_prompt(
        self, request: ChatRequest
    ) -> tuple[PromptLayout, RenderedPrompt, tuple[TokenizedPrompt, ...]]:
        import llama_cpp as ll

        if self.projector is None or not self.has_vision:
            raise ImageRejected("This model has no vision projector loaded: load one to send images.")
        images: list[DecodedImage] = []
        for message in request.messages:
            check_message_images(message.images)
            for image in message.images:
                if not isinstance(image, DecodedImage):
                    raise ImageRejected("An image in this conversation could not be read.")
                images.append(image)
        split = split_conversation(self.template, self._own_tokens(request.messages), request.tools)
        marker = self.projector.marker
        bos = ll.llama_vocab_bos(self.vocab)
        wants_bos = not split.rendered.adds_bos and bos >= 0 and ll.llama_vocab_get_add_bos(self.vocab)
        segments: list[TextSegment | MediaSegment] = []
        prompts: list[TokenizedPrompt] = []
        taken = 0
        try:
            for index, piece in enumerate(split.pieces):
                count = piece.count(marker)
                tokenized = self.projector.tokenize(
                    piece,
                    images[taken : taken + count],
                    bos_token=bos if (index == 0 and wants_bos) else None,
                )
                taken += count
                prompts.append(tokenized)
                segments.extend(tokenized.layout.segments)
                if index < len(split.replies):
                    segments.append(TextSegment(tuple(split.replies[index])))
            layout = PromptLayout(tuple(segments))
            if layout.segments and isinstance(layout.segments[-1], MediaSegment):
                raise ImageRejected("An image must be followed by some text.")
            for tokenized in prompts:
                self.projector.check_batch_limits(tokenized, self.n_batch, self.n_ubatch)
        except BaseException:
            self.release(tuple(prompts))
            raise
        return layout, split.rendered, tuple(prompts)

    def release(self, media: tuple[TokenizedPrompt, ...]) -> None:
        """Give back the image chunks a request's tokenized prompts held."""
        if self.projector is not None:
            for tokenized in media:
                self.projector.release_prompt(tokenized)


def prompt_key(request: ChatRequest) -> tuple:
    """Everything of a request that its prompt layout and stop strings depend on (with the
    loaded model's template and vocabulary): two requests with equal keys build the same
    prompt. Compared, not hashed (tools are dicts); equal messages compare by identity first."""
    return (request.prompt, request.messages, request.tools, request.assistant_prefix, request.stop)
