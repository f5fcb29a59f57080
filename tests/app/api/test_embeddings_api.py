"""`POST /v1/embeddings` and the chat request's "documents" field, driven with the official
SDK against a real server on loopback: the real all-MiniLM-L6-v2 GGUF, real documents."""

from __future__ import annotations

import base64
import signal
from pathlib import Path

import numpy as np
import openai
import pytest

from app.api import ServerConfig
from engine import DocumentIndex
from tests.api_support import ServerThread, load, sse_events
from tests.engine.documents.conftest import embedder, embedder_gguf, minilm_folder  # noqa: F401 (fixtures)

TEXTS = [
    "The hearth server listens on port 8080.",
    "Bananas are yellow fruits, rich in potassium.",
    "Ein kurzer deutscher Satz über das Wetter.",
    "def add(a, b):\n    return a + b",
]


@pytest.fixture(scope="module")
def model(scripted_model: Path):
    loaded = load(scripted_model)
    yield loaded
    loaded.unload()


@pytest.fixture(scope="module")
def documents(tmp_path_factory, embedder):  # noqa: F811
    """A documents index with one collection, "notes"."""
    folder = tmp_path_factory.mktemp("docs")
    (folder / "notes.md").write_text(
        "# Setup\n\nThe hearth server listens on port 8080 unless HEARTH_PORT says otherwise.\n"
    )
    (folder / "fruit.txt").write_text("Bananas are yellow fruits, rich in potassium.\n")
    db = folder / "documents.sqlite3"
    with DocumentIndex(db) as index:
        index.create_collection("notes")
        index.index_paths("notes", [folder], embedder)
    return db


@pytest.fixture(scope="module")
def server(model, embedder, documents):  # noqa: F811
    with ServerThread(lambda: model, ServerConfig(port=0, documents_file=documents), lambda: embedder) as s:
        yield s


def cosine(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_one_string_in_openai_s_shape(server, embedder) -> None:  # noqa: F811
    reply = server.client().embeddings.create(model="anything", input=TEXTS[0], encoding_format="float")
    assert (
        reply.object == "list"
        and reply.model == Path(embedder.name.split(":")[0]).stem  # the GGUF's name, no hash
    )
    (item,) = reply.data
    assert item.object == "embedding" and item.index == 0 and len(item.embedding) == embedder.dim
    assert cosine(item.embedding, embedder.embed([TEXTS[0]])[0]) >= 0.9999
    assert reply.usage.prompt_tokens == reply.usage.total_tokens == embedder.count_tokens(TEXTS[0])


def test_a_batch_of_40_keeps_its_order_and_matches_the_embedder(server, embedder) -> None:  # noqa: F811
    texts = [f"{TEXTS[i % 4]} (variant {i})" for i in range(40)]
    reply = server.client().embeddings.create(model="m", input=texts, encoding_format="float")
    assert [d.index for d in reply.data] == list(range(40))
    direct = embedder.embed(texts)
    assert min(cosine(d.embedding, v) for d, v in zip(reply.data, direct, strict=True)) >= 0.9999
    assert reply.usage.prompt_tokens == sum(embedder.count_tokens(t) for t in texts)


def test_base64_is_little_endian_float32(server, embedder) -> None:  # noqa: F811
    # The SDK asks for base64 by default and decodes it itself.
    decoded = server.client().embeddings.create(model="m", input=TEXTS[:2])
    raw_status, raw = server.post_json(
        "/v1/embeddings", {"model": "m", "input": TEXTS[:2], "encoding_format": "base64"}
    )
    assert raw_status == 200
    for item, sdk in zip(raw["data"], decoded.data, strict=True):
        vector = np.frombuffer(base64.b64decode(item["embedding"]), dtype="<f4")
        assert vector.shape == (embedder.dim,)
        assert cosine(vector, sdk.embedding) >= 0.99999
        assert cosine(vector, embedder.embed([TEXTS[item["index"]]])[0]) >= 0.9999


def test_dimensions_equal_to_the_model_s_are_accepted(server, embedder) -> None:  # noqa: F811
    reply = server.client().embeddings.create(
        model="m", input="x y", dimensions=embedder.dim, encoding_format="float"
    )
    assert len(reply.data[0].embedding) == embedder.dim


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        ({"model": "m", "input": [1, 2, 3]}, "input", "token ids"),
        ({"model": "m", "input": [[1, 2]]}, "input", "token ids"),
        ({"model": "m", "input": []}, "input", "empty"),
        ({"model": "m", "input": ""}, "input", "empty"),
        ({"model": "m", "input": 7}, "input", "string"),
        ({"model": "m"}, "input", "string"),
        ({"model": "m", "input": ["a", None]}, "input[1]", "string"),
        ({"model": "m", "input": "a", "dimensions": 64}, "dimensions", "384"),
        ({"model": "m", "input": "a", "encoding_format": "int8"}, "encoding_format", "base64"),
        ({"model": "m", "input": "a", "frobnicate": 1}, "frobnicate", "Unsupported"),
        ({"model": "m", "input": ["a"] * 2049}, "input", "2048"),
    ],
)
def test_bad_requests_are_400s_in_openai_s_shape(server, body, param, words) -> None:
    status, reply = server.post_json("/v1/embeddings", body)
    assert status == 400
    error = reply["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param and words in error["message"]


def test_the_sdk_raises_bad_request(server) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        server.client().embeddings.create(model="m", input="a", dimensions=12)
    assert raised.value.body["param"] == "dimensions"


def test_an_embedder_that_did_not_fit_is_a_503_in_openai_s_shape(model, embedder_gguf) -> None:  # noqa: F811
    # What `hearth serve` does when the default embedder does not fit: serve on, say why here.
    from engine import EmbedderDoesNotFit, open_embedder
    from engine.machine.hardware import described_machine

    cramped = described_machine(ram_total=4 << 30, ram_available=600 << 20)
    with pytest.raises(EmbedderDoesNotFit) as refused:
        open_embedder(embedder_gguf, n_threads=1, hardware=cramped)
    refusing = ServerThread(lambda: model, embedder=lambda: None, embedder_refusal=refused.value.message)
    with refusing as bare, pytest.raises(openai.InternalServerError) as raised:
        bare.client().embeddings.create(model="m", input="hello")
    assert raised.value.status_code == 503
    error = raised.value.body
    assert error["code"] == "embedder_does_not_fit" and error["type"] == "unavailable_error"
    assert error["message"] == refused.value.message and "does not fit (RAM short by" in error["message"]


def test_no_embedding_model_is_a_404(model) -> None:
    with ServerThread(lambda: model) as bare:
        with pytest.raises(openai.NotFoundError) as raised:
            bare.client().embeddings.create(model="m", input="hello")
        assert (
            raised.value.body["code"] == "model_not_found"
            and "embedding model" in raised.value.body["message"]
        )
        status, reply = bare.post_json(
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "hi"}], "documents": {"collections": ["notes"]}},
        )
        assert status == 404 and reply["error"]["param"] == "documents"


# -- the chat request's "documents" -------------------------------------------------------


def test_a_chat_request_with_documents_returns_its_sources(server, model) -> None:
    client = server.client()
    question = [{"role": "user", "content": "Which port does the server listen on?"}]
    plain = client.chat.completions.create(model="m", messages=question, extra_body={"temperature": 0})
    grounded = client.chat.completions.create(
        model="m",
        messages=question,
        extra_body={"temperature": 0, "documents": {"collections": ["notes"], "k": 3}},
    )
    sources = grounded.model_extra["sources"]
    assert sources and all(set(s) == {"n", "path", "page", "text"} for s in sources)
    assert [s["n"] for s in sources] == list(range(1, len(sources) + 1))
    assert any("8080" in s["text"] for s in sources)
    # The excerpts reached the model.
    assert grounded.usage.prompt_tokens > plain.usage.prompt_tokens + 20
    assert "sources" not in (plain.model_extra or {})


def test_a_stream_with_documents_ends_with_its_sources(server) -> None:
    status, _, payload = server.request(
        "POST",
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "bananas?"}], "stream": True,
         "documents": {"collections": ["notes"]}},
    )  # fmt: skip
    assert status == 200
    events = [e for e in sse_events(payload) if e != "[DONE]"]
    assert events[-1]["choices"][0]["finish_reason"] is not None
    assert any("Bananas" in s["text"] for s in events[-1]["sources"])
    assert all("sources" not in e for e in events[:-1])


@pytest.mark.parametrize(
    ("field", "status", "words"),
    [
        ({"collections": ["missing"]}, 404, "no collection named"),
        ({"collections": []}, 400, "collections"),
        ({"collections": "notes"}, 400, "array"),
        ({"collections": ["notes"], "k": 0}, 400, "documents.k"),
        ({"collections": ["notes"], "top": 3}, 400, "documents.top"),
        ("notes", 400, "object"),
    ],
)
def test_bad_documents_fields(server, field, status, words) -> None:
    code, reply = server.post_json(
        "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "documents": field}
    )
    assert code == status, reply
    assert reply["error"]["param"].startswith("documents") and words in reply["error"]["message"]


def test_hearth_serve_embedding_model(scripted_model: Path, embedder_gguf: Path, embedder) -> None:  # noqa: F811
    from tests.api_support import Serve

    serve = Serve(str(scripted_model), "--port", "0", "--ctx", "512", "--parallel", "1",
                  "--embedding-model", str(embedder_gguf))  # fmt: skip
    try:
        url = serve.read_until(r"at (http://127\.0\.0\.1:\d+/v1) ").group(1)
        assert any(
            line.startswith(f"Embeddings: {embedder_gguf.name} (384 dimensions)") for line in serve.lines
        )
        client = openai.OpenAI(base_url=url, api_key="x", max_retries=0)
        reply = client.embeddings.create(model="m", input=TEXTS)
        direct = embedder.embed(TEXTS)
        assert min(cosine(d.embedding, v) for d, v in zip(reply.data, direct, strict=True)) >= 0.9999
        serve.read_until(r"POST /v1/embeddings 200")
    finally:
        code, err = serve.stop(signal.SIGTERM)
    assert code == 0 and "Traceback" not in err


def test_hearth_serve_refuses_a_chat_model_as_the_embedding_model(scripted_model: Path) -> None:
    from tests.api_support import TIMEOUT, Serve

    serve = Serve(str(scripted_model), "--embedding-model", str(scripted_model))
    _, err = serve.proc.communicate(timeout=TIMEOUT)
    assert serve.proc.returncode == 2 and err.startswith("hearth: ") and err.count("\n") == 1
