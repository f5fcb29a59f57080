"""Images over the API: data: URIs through the projector, refused exactly as the window
refuses them; remote URLs never fetched."""

from __future__ import annotations

import base64
import io
import os
import threading
from pathlib import Path

import pytest
from PIL import Image

from engine import inspect_projector
from tests.api_support import ServerThread, load

GREEDY = {"temperature": 0, "repeat_penalty": 1.0, "max_tokens": 4}


def data_uri(raw: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64," + base64.b64encode(raw).decode()


def png(color: tuple[int, int, int], size: tuple[int, int] = (32, 32)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG")
    return buffer.getvalue()


def image_part(uri: str) -> dict:
    return {"type": "image_url", "image_url": {"url": uri, "detail": "auto"}}


def ask(*parts: dict) -> dict:
    return {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "What is this?"}, *parts]}],
        **GREEDY,
    }


@pytest.fixture(scope="module")
def vision_server(tiny_model: Path, tiny_projector: Path):
    model = load(tiny_model, parallel=2, projector=inspect_projector(tiny_projector))
    assert model.has_vision
    with ServerThread(lambda: model) as server:
        yield server
    model.unload()


def test_an_inline_image_goes_through_the_projector(vision_server: ServerThread) -> None:
    status, text_only = vision_server.post_json("/v1/chat/completions", ask())
    assert status == 200
    status, body = vision_server.post_json(
        "/v1/chat/completions", ask(image_part(data_uri(png((200, 20, 20)))))
    )
    assert status == 200, body
    # The tiny projector turns a 32x32 image into 16 embeddings, counted as prompt tokens.
    assert body["usage"]["prompt_tokens"] >= text_only["usage"]["prompt_tokens"] + 16
    request = ask(image_part(data_uri(png((200, 20, 20)))))
    again = vision_server.client().chat.completions.create(
        model="m", messages=request["messages"], max_tokens=4, extra_body={"temperature": 0}
    )
    assert again.usage.prompt_tokens_details.cached_tokens >= 16  # the same picture's KV is reused


def test_the_sdk_sends_images_too(vision_server: ServerThread) -> None:
    reply = vision_server.client().chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": [image_part(data_uri(png((1, 2, 3), (40, 24)), "image/png"))]}],
        max_tokens=2,
    )
    assert reply.usage.completion_tokens == 2


@pytest.mark.parametrize(
    ("uri", "says"),
    [
        ("data:image/png;base64,", "empty"),
        (data_uri(b"this is not a picture"), "not an image"),
        ("data:image/png,rawbytes", "not a base64 data: URI"),
        (data_uri(png((0, 0, 0), (2000, 20))), "too long and thin"),
    ],
)
def test_a_bad_image_is_a_400_with_the_window_s_reason(
    vision_server: ServerThread, uri: str, says: str
) -> None:
    status, body = vision_server.post_json("/v1/chat/completions", ask(image_part(uri)))
    assert status == 400, body
    assert says in body["error"]["message"]
    assert body["error"]["code"] == "invalid_image"


def test_too_many_images_in_one_message_is_refused_before_decoding(vision_server: ServerThread) -> None:
    parts = [image_part(data_uri(png((i, i, i)))) for i in range(9)]
    status, body = vision_server.post_json("/v1/chat/completions", ask(*parts))
    assert status == 400
    assert "at most 8 images" in body["error"]["message"]


@pytest.mark.parametrize(
    "url", ["https://example.com/cat.png", "http://127.0.0.1/x.png", "file:///etc/passwd"]
)
def test_remote_and_file_urls_are_never_fetched(vision_server: ServerThread, url: str) -> None:
    status, body = vision_server.post_json("/v1/chat/completions", ask(image_part(url)))
    assert status == 400
    assert "never fetches" in body["error"]["message"]
    assert body["error"]["code"] == "remote_image_refused"


def test_images_only_in_user_messages(vision_server: ServerThread) -> None:
    body = {"messages": [{"role": "system", "content": [image_part(data_uri(png((1, 1, 1))))]},
                         {"role": "user", "content": "hi"}]}  # fmt: skip
    status, answer = vision_server.post_json("/v1/chat/completions", body)
    assert status == 400 and "only user messages" in answer["error"]["message"]


def test_a_large_image_body_is_decoded_off_the_loop(vision_server: ServerThread, monkeypatch) -> None:
    from app.api import routes

    threads: list[str] = []
    original = routes.map_request

    def recording(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return original(*args, **kwargs)

    monkeypatch.setattr(routes, "map_request", recording)
    raw = png((9, 9, 9))
    status, _ = vision_server.post_json("/v1/chat/completions", ask(image_part(data_uri(raw))))
    noisy = Image.frombytes("RGB", (400, 400), os.urandom(400 * 400 * 3))
    buffer = io.BytesIO()
    noisy.save(buffer, format="PNG")
    raw = buffer.getvalue()
    assert len(raw) > 256 * 1024  # over LARGE_BODY: parsed and decoded on a worker thread
    status, body = vision_server.post_json("/v1/chat/completions", ask(image_part(data_uri(raw))))
    assert status == 200, body
    assert threads[0] == "api-test-loop"  # a small body: mapped on the event loop
    assert threads[1] != "api-test-loop"  # the large one: on a worker thread
