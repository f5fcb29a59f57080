"""The embedder against the reference: the same tokens as BERT's own WordPiece and vectors
within cosine 0.999 of a float64 forward pass of the same weights, on 50 varied texts; and
its contract (name, rows, threads, close)."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import numpy as np
import pytest

from engine.documents.bert_convert import find_source, source_sha256
from engine.documents.embedding import (
    EmbedderClosed,
    file_sha256,
    open_embedder,
    pack_batches,
)
from engine.documents.embedding_file import NotAnEmbeddingModel
from tests.conftest import TEST_CACHE

LONG_PROSE = " ".join(
    f"Paragraph {i}: the committee reviewed the quarterly figures, noted a {i}% rise in costs, "
    "and asked the treasurer to explain why the heating bill had doubled since spring."
    for i in range(60)
)
TEXTS = (
    # English prose
    "The quick brown fox jumps over the lazy dog.",
    "Retrieval-augmented generation grounds a model's answer in documents the user provides.",
    'She said, "I\'ll be there by noon," but arrived at half past two.',
    "Don't count your chickens before they're hatched; it's bad luck, isn't it?",
    "In 1969, Apollo 11 landed on the Moon; Neil Armstrong stepped out first.",
    "The mitochondria is the powerhouse of the cell.",
    "Please RESET your PASSWORD before Monday, otherwise your ACCOUNT will be LOCKED.",
    "Hello",
    "a",
    "To be, or not to be, that is the question:\nWhether 'tis nobler in the mind to suffer",
    # code
    "def embed(texts: list[str]) -> np.ndarray:\n    return model.encode(texts, normalize=True)",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    "SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name ORDER BY 2 DESC;",
    "const f = async (x) => { await fetch(`/api/v1/items/${x}`); };",
    '#include <stdio.h>\nint main(void) { printf("%d\\n", 42); return 0; }',
    "git commit -m 'fix: handle empty input' && git push origin HEAD:refs/for/main",
    '{"key": [1, 2.5, null, true], "nested": {"a": "b"}}',
    "x = lambda a, *args, **kwargs: a if args else kwargs.get('default', None)",
    '<div class="note"><p>Hello &amp; welcome</p></div>',
    'fn main() { let v: Vec<u8> = vec![0; 16]; println!("{:?}", v); }',
    # unicode
    "Café crème brûlée à la française, s'il vous plaît.",
    "Größenordnung der Straßenbahn über die Brücke",
    "東京は日本の首都です。人口は約千四百万人です。",
    "北京欢迎你，中文分词是一个有趣的问题。",
    "Привет, мир! Как дела у тебя сегодня?",
    "Ελληνικά: Σωκράτης, φιλοσοφία και ΣΟΦΙΑ, ΟΔΟΣ.",
    "مرحبا بالعالم، هذه جملة عربية.",
    "한국어 문장도 토큰화됩니다.",  # llama.cpp's own NFD loses the vowels (engine/documents/bert_text.py)
    "Emoji time 🎉🚀 are you ready? 👍",
    "naïve coöperation façade résumé Ångström Øresund İstanbul",
    "Zero\u200bwidth and non\u00a0breaking\u2003spaces\u3000here",
    "Ligatures ﬁ ﬂ and full-width ＡＢＣ１２３",
    # numbers
    "3.14159265358979323846",
    "Call +1 (555) 123-4567 or 020 7946 0958 before 23:59 on 2024-02-29.",
    "1,000,000 $ 99.99 € 1e-12 0xDEADBEEF 0b1010 42nd 1st 3rd",
    # a word of more than 100 characters: one [UNK] for WordPiece
    f"sha512 {hashlib.sha512(b'hearth').hexdigest()} ok",
    "12345678901234567890123456789012345678901234567890",
    "IPv4 192.168.0.1/24 and IPv6 fe80::1ff:fe23:4567:890a",
    # punctuation
    "Wait... what?! No way!!! (Really?) [Yes.] {Maybe.}",
    "--- *** ___ ~~~ ``` ''' \"\"\" ;;; ::: ,,, ... !!! ???",
    "email@example.com, https://example.org/path?q=1&r=2#frag",
    "« Guillemets », „Anführungszeichen“, 「かぎかっこ」 and ‘curly’ “quotes”",
    "a—b–c-d_e/f\\g|h",
    "!",
    # long: past the 512-token window, cut as transformers cuts them
    LONG_PROSE,
    "word " * 600,
    ("Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 40).strip(),
    "\n\n".join(f"## Section {i}\n\n- item {i}.1\n- item {i}.2" for i in range(40)),
    " ".join(str(i) for i in range(400)),
    "The end.\t\tTabs\tand\nnewlines\r\nand   multiple    spaces.",
)


def test_fifty_varied_texts() -> None:
    assert len(TEXTS) == 50 and len(set(TEXTS)) == 50


@pytest.fixture(scope="module")
def reference_vectors(reference, minilm_folder: Path) -> np.ndarray:
    """The reference's 50 vectors (a minute of numpy), cached by what they depend on."""
    key = hashlib.sha256()
    key.update(source_sha256(find_source(minilm_folder)).encode())
    key.update((Path(__file__).parent / "reference_bert.py").read_bytes())
    key.update(json.dumps(TEXTS).encode())
    cache = TEST_CACHE / "reference-bert" / f"minilm-{key.hexdigest()[:16]}.npy"
    if cache.is_file():
        return np.load(cache)
    vectors = np.stack([reference.embed(text) for text in TEXTS])
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.save(cache, vectors)
    return vectors


def test_tokens_are_berts_own(embedder, reference) -> None:
    for text in TEXTS:
        assert embedder.tokenize(text) == reference.tokenize(text), text[:60]


def test_counts_are_berts_own_without_specials_or_window(embedder, reference) -> None:
    from tokenizers import Tokenizer

    uncut = Tokenizer.from_str(reference.tokenizer.to_str())
    uncut.no_truncation()
    counts = [embedder.count_tokens(text) for text in TEXTS]
    assert counts == [len(uncut.encode(text, add_special_tokens=False).ids) for text in TEXTS]
    assert max(counts) > embedder.window  # the long ones are counted whole


def test_vectors_match_the_reference_forward_pass(embedder, reference_vectors: np.ndarray) -> None:
    rows = embedder.embed(list(TEXTS))
    assert rows.dtype == np.float32 and rows.shape == (50, 384)
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-6)
    cosine = (rows.astype(np.float64) * reference_vectors).sum(axis=1)
    assert cosine.min() >= 0.999, (cosine.argmin(), cosine.min())


def test_a_row_does_not_depend_on_its_batch(embedder) -> None:
    alone = np.stack([embedder.embed([text])[0] for text in TEXTS[:12]])
    together = embedder.embed(list(TEXTS[:12]))
    np.testing.assert_allclose((alone * together).sum(axis=1), 1.0, atol=1e-5)


def test_spacing_marks_are_dropped_as_llama_cpp_does(embedder, reference) -> None:
    """The one difference left (engine/documents/bert_text.py): BERT keeps Devanagari's
    vowel signs (Mc), llama.cpp's normalizer drops every mark."""
    text = "हिन्दी"
    pieces = [reference.tokenizer.id_to_token(t) for t in embedder.tokenize(text)]
    assert pieces == ["[CLS]", "ह", "##न", "##द", "[SEP]"]
    assert len(reference.tokenize(text)) == 7  # with ि and ी


def test_name_dim_and_window(embedder, embedder_gguf: Path) -> None:
    assert embedder.name == f"{embedder_gguf.name}:{file_sha256(embedder_gguf)[:12]}"
    assert (embedder.dim, embedder.window) == (384, 512)


def test_no_texts_no_rows(embedder) -> None:
    rows = embedder.embed([])
    assert rows.shape == (0, 384) and rows.dtype == np.float32


def test_a_single_str_is_refused(embedder) -> None:
    with pytest.raises(TypeError, match="sequence of texts"):
        embedder.embed("hello")
    with pytest.raises(TypeError, match="must be str"):
        embedder.embed([b"bytes"])  # type: ignore[list-item]


def test_embed_from_many_threads_at_once(embedder) -> None:
    texts = [list(TEXTS[i : i + 5]) for i in range(0, 20, 5)]
    expected = [embedder.embed(t) for t in texts]
    got: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            got[i] = embedder.embed(texts[i])
            embedder.count_tokens(TEXTS[i])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    for i, rows in enumerate(expected):
        np.testing.assert_allclose(got[i], rows, atol=1e-5)


def test_decoding_runs_on_the_embedders_own_thread(embedder) -> None:
    seen: list[str] = []
    native = embedder._native
    original = native.decode

    def spy(sequences):
        seen.append(threading.current_thread().name)
        return original(sequences)

    native.decode = spy
    try:
        embedder.embed(["one", "two"])
    finally:
        del native.decode
    assert seen and all(name.startswith("hearth-embedder") for name in seen)
    assert threading.current_thread().name not in seen


def test_threads_can_change(embedder) -> None:
    before = embedder.embed(["threads"])
    embedder.set_threads(2)
    try:
        np.testing.assert_allclose(embedder.embed(["threads"]), before, atol=1e-6)
        assert embedder.n_threads == 2
    finally:
        embedder.set_threads(1)
    with pytest.raises(ValueError, match="at least 1"):
        embedder.set_threads(0)


def test_closed_embedder_refuses_in_one_line(embedder_gguf: Path) -> None:
    embedder = open_embedder(embedder_gguf, n_threads=1)
    embedder.embed(["before"])
    embedder.close()
    embedder.close()  # twice is fine
    assert embedder.closed
    with pytest.raises(EmbedderClosed, match="was closed"):
        embedder.embed(["after"])
    with pytest.raises(EmbedderClosed):
        embedder.count_tokens("after")


def test_closing_while_others_embed_neither_hangs_nor_frees_under_them(embedder_gguf: Path) -> None:
    embedder = open_embedder(embedder_gguf, n_threads=1)
    outcomes: list[str] = []
    started = threading.Barrier(5)

    def work() -> None:
        started.wait()
        while True:
            try:
                embedder.embed(["a short text", "another"])
            except EmbedderClosed:
                outcomes.append("closed")
                return
            except BaseException as exc:
                outcomes.append(repr(exc))
                return

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    started.wait()
    embedder.close()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    assert outcomes == ["closed"] * 4


def test_open_refuses_a_chat_model_and_bad_threads(tiny_model: Path, embedder_gguf: Path) -> None:
    with pytest.raises(NotAnEmbeddingModel, match="not an embedding model"):
        open_embedder(tiny_model)
    with pytest.raises(ValueError, match="at least 1"):
        open_embedder(embedder_gguf, n_threads=0)


def test_default_threads_are_the_planners(embedder_gguf: Path) -> None:
    from engine.machine.cpu_load import physical_cores

    with open_embedder(embedder_gguf) as embedder:
        assert 1 <= embedder.n_threads <= physical_cores()


def test_a_causal_embedder_with_last_pooling(tiny_model: Path, tmp_path: Path) -> None:
    """Qwen3-Embedding's shape (a llama-family decoder, LAST pooling, a KV cache): the
    specials its vocabulary asks for, sequences kept apart, the cache cleared between batches."""
    import gguf

    from tests.engine.documents.conftest import rewrite_metadata

    path = rewrite_metadata(
        tiny_model, tmp_path / "pooled.gguf", set_keys={"llama.pooling_type": (3, gguf.GGUFValueType.UINT32)}
    )
    with open_embedder(path, n_threads=1) as embedder:
        assert embedder.info.causal and embedder.info.bert_text is None
        bos = embedder.info.model.bos_token_id
        tokens = embedder.tokenize("hello world")
        assert tokens[0] == bos and bos not in tokens[1:]
        texts = ["hello world", "world", "", "hello " * 800]
        together = embedder.embed(texts)
        again = embedder.embed(texts)
        alone = np.stack([embedder.embed([t])[0] for t in texts])
        np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
        np.testing.assert_allclose(together, again, atol=1e-5)
        np.testing.assert_allclose((alone * together).sum(axis=1), 1.0, atol=1e-4)
        assert len(embedder.tokenize("hello " * 800)) == embedder.window


@pytest.mark.parametrize(
    ("lengths", "max_tokens", "max_sequences"),
    [
        ([5, 5, 5], 10, 8),
        ([512] * 4, 512, 256),
        ([300, 200, 12, 500, 1, 1, 1], 512, 3),
        ([1] * 600, 512, 256),
    ],
)
def test_packing_respects_both_limits(lengths: list[int], max_tokens: int, max_sequences: int) -> None:
    batches = pack_batches(lengths, max_tokens, max_sequences)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        assert sum(lengths[i] for i in batch) <= max_tokens
        assert len(batch) <= max_sequences


def test_packing_fills_decodes() -> None:
    # 32 chunks of ~192 tokens: two per 512-token decode, no decode left half empty
    assert len(pack_batches([192] * 32, 512, 256)) == 16
    assert len(pack_batches([400, 100, 400, 100], 512, 256)) == 2


@pytest.mark.parametrize("length", [0, 513])
def test_packing_refuses_what_cannot_be_decoded(length: int) -> None:
    with pytest.raises(ValueError, match="cannot be batched"):
        pack_batches([3, length], 512, 256)
