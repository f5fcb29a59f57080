"""The longest and oddest inputs never reach llama.cpp's aborts.

An encoder's micro-batch cannot be split: llama.cpp asserts ``n_ubatch >= n_tokens``
(and ``n_tokens <= n_batch``) and takes the process down. Every text is cut to the window
before native code, and batches are packed within n_batch. The risky inputs run in a child
process, so an abort shows as a signal instead of ending the test run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO

PROSE = "The committee reviewed the quarterly figures and asked why costs had risen. "
CONTROL = "\x00\x01\x07\x1b\x1f\x7f\u200b\u200e\u2028\u2029\ufeff\ufffd\U000e0001"


def content(embedder, text: str) -> list[int]:
    return embedder._content_tokens(text, None)


def test_a_long_text_is_cut_to_the_window_exactly(embedder) -> None:
    text = PROSE * 1500  # ~110k characters
    tokens = embedder.tokenize(text)
    assert len(tokens) == embedder.window
    assert tokens == [101, *content(embedder, text)[: embedder.window - 2], 102]


@pytest.mark.parametrize(
    "text",
    [
        "東京都" * 30_000,  # no ASCII whitespace: the whole text is tokenized
        " " * 20_000 + PROSE * 100,  # a prefix of blanks gives no tokens: it grows
        "x" * 5_000 + " " + PROSE * 100,  # an over-long first word: one [UNK]
        ("\t\n" + "a" * 90) * 500,
    ],
    ids=["cjk", "leading-blanks", "long-word", "short-lines"],
)
def test_cutting_a_prefix_never_changes_the_tokens(embedder, text: str) -> None:
    tokens = embedder.tokenize(text)
    assert tokens[1:-1] == content(embedder, text)[: embedder.window - 2]
    assert len(tokens) == min(embedder.window, embedder.count_tokens(text) + 2)


def test_exactly_the_window_is_kept_one_more_is_cut(embedder) -> None:
    fits = "word " * (embedder.window - 2)
    assert embedder.count_tokens(fits) == embedder.window - 2
    assert embedder.tokenize(fits) == [101, *[content(embedder, "word")[0]] * (embedder.window - 2), 102]
    assert embedder.tokenize(fits + "more") == embedder.tokenize(fits)


@pytest.mark.parametrize("text", ["", "   \n\t\r\n  ", CONTROL, "\ud800 lone \udfff surrogates"])
def test_nothing_to_say_is_still_a_row(embedder, text: str) -> None:
    tokens = embedder.tokenize(text)
    assert tokens[0] == 101 and tokens[-1] == 102
    rows = embedder.embed([text])
    assert np.linalg.norm(rows[0]) == pytest.approx(1.0, abs=1e-6)


def test_the_native_batch_refuses_an_overflow_in_python(embedder) -> None:
    too_many = [np.full(300, 1996, dtype=np.int32), np.full(300, 1996, dtype=np.int32)]
    with pytest.raises(ValueError, match="batch overflow"):
        embedder._call(lambda: embedder._native.decode(too_many))
    assert embedder.embed(["still works"]).shape == (1, 384)


CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from engine.documents.embedding import open_embedder

    e = open_embedder(sys.argv[1], n_threads=1)
    w = e.window
    window_texts = [f"{i} " + "word " * (w - 3) for i in range(64)]
    cases = {
        "100k chars": ["The quick brown fox jumps over the lazy dog. " * 2300],
        "100k chars, one word": ["x" * 100_000],
        "2 MB": ["lorem ipsum " * 180_000],
        "64 x window": window_texts,
        "over n_batch": [f"chunk {i}: " + "alpha beta gamma delta " * 45 for i in range(40)],
        "empty": [""],
        "whitespace": [" \\n\\t\\r " * 1000],
        "control": [CONTROL * 1000],
        "mixed": ["", "a", "word " * 5000, CONTROL, "東京" * 2000, " "],
    }
    out = {}
    for name, texts in cases.items():
        rows = e.embed(texts)
        out[name] = {
            "shape": list(rows.shape),
            "norms": [float(x) for x in np.linalg.norm(rows, axis=1)],
            "tokens": [len(e.tokenize(t)) for t in texts],
            "finite": bool(np.isfinite(rows).all()),
        }
    out["total over n_batch"] = sum(out["over n_batch"]["tokens"]) > e.n_batch
    out["window"] = w
    e.close()
    print(json.dumps(out))
    """
).replace("CONTROL", repr(CONTROL))


@pytest.mark.slow
def test_the_longest_inputs_do_not_abort(embedder_gguf: Path) -> None:
    env = dict(os.environ, GGML_NO_BACKTRACE="1")  # an abort dies at once, no debugger attach
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(embedder_gguf)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=REPO,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    out = json.loads(done.stdout.strip().splitlines()[-1])
    window = out.pop("window")
    assert out.pop("total over n_batch") is True
    for name, case in out.items():
        n = case["shape"][0]
        assert case["shape"] == [n, 384] and case["finite"], name
        assert all(abs(x - 1.0) < 1e-5 for x in case["norms"]), name
        assert all(2 <= t <= window for t in case["tokens"]), name
    assert out["64 x window"]["tokens"] == [window] * 64
    assert out["100k chars"]["tokens"] == [window] and out["2 MB"]["tokens"] == [window]
    assert out["100k chars, one word"]["tokens"] == [3]  # [CLS] [UNK] [SEP]
