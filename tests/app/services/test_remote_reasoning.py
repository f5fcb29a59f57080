"""A remote reasoning model's thinking is passed on apart from its answer, as it came
(reasoning_content → ``TextDelta.reasoning``), never wrapped back in tags to be split again."""

from __future__ import annotations

from pathlib import Path

from app.conversation.thinking import ReplySplit
from engine import ChatMessage, ChatRequest, Completed, RemoteEndpoint, RemoteModel, TextDelta, list_models
from engine.chat import ReasoningSplitter
from engine.devtools.tiny_models import TinyTextSpec, write_tiny_text_model
from tests.api_support import ServerThread, load
from tests.app.chat.test_gui_thinking import MARKERS, TEMPLATE


def test_remote_thinking_arrives_apart_and_is_never_split_again(tmp_path: Path, monkeypatch) -> None:
    spec = TinyTextSpec(
        script=("<think>", "\u2581a", "b", "</think>", "c", "d", "<|im_end|>"),
        control_tokens=MARKERS,
        chat_template=TEMPLATE,
    )
    served = load(write_tiny_text_model(tmp_path / "thinker.gguf", spec), parallel=1)
    try:
        with ServerThread(lambda: served) as server:
            (info,) = list_models(RemoteEndpoint(server.base_url))
            model = RemoteModel(info)
            request = ChatRequest(messages=(ChatMessage("user", "hi"),), max_tokens=16, text_interval_s=0.0)
            events = list(model.submit(request).events(timeout=60))
            deltas = [e for e in events if isinstance(e, TextDelta)]
            completion = next(e.completion for e in events if isinstance(e, Completed))
            assert "".join(p for d in deltas for p in d.reasoning).strip() == "ab"
            assert "".join(d.text for d in deltas) == "cd" == completion.text
            assert completion.reasoning.strip() == "ab"
            assert not any("<think>" in d.text or "</think>" in d.text for d in deltas)
            # What the window's split is given to split: the server split once; no tags come back.
            fed: list[str] = []
            original = ReasoningSplitter.feed

            def feed(self: ReasoningSplitter, text: str) -> tuple[str, str]:
                fed.append(text)
                return original(self, text)

            monkeypatch.setattr(ReasoningSplitter, "feed", feed)
            # The window's split takes the thinking as it came.
            split = ReplySplit(model.chat_traits)
            for d in deltas:
                split.feed(d.text, d.pieces, 0.0, d.reasoning)
            split.finish(1.0)
            assert (split.thought.strip(), split.answer) == ("ab", "cd")
            assert split.tokens == sum(len(d.reasoning) for d in deltas)
            assert not any("think>" in t for t in fed)  # no tags were made to be split out
    finally:
        served.unload()
