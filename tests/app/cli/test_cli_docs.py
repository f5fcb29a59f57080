"""`hearth docs add|list|remove|search` and `hearth chat --docs`: real files, the real
all-MiniLM-L6-v2 GGUF (converted once into .test-cache/), the index in --data-dir."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.commands import run_cli
from tests.engine.documents.conftest import embedder_gguf, minilm_folder  # noqa: F401 (fixtures)
from tests.engine.documents.document_files import write_docx, write_encrypted_pdf, write_text_pdf

NOTES = (
    "# Setup\n\nThe hearth server listens on port 8080 unless HEARTH_PORT says otherwise.\n\n"
    "## Linux\n\nInstall the package with apt and start the service.\n"
)


def run(capsys: pytest.CaptureFixture[str], data: Path, *argv: str) -> tuple[int, str, str]:
    code = run_cli(["--data-dir", str(data), *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    """Markdown, text, a PDF with pages, a DOCX, and two files that must be refused."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text(NOTES)
    (docs / "fruit.txt").write_text("Bananas are yellow fruits, rich in potassium.\n")
    write_text_pdf(docs / "guide.pdf")
    write_docx(docs / "install.docx")
    (docs / "binary.txt").write_bytes(bytes(range(256)) * 8)
    write_encrypted_pdf(docs / "secret.pdf")
    return docs


@pytest.fixture()
def indexed(capsys, tmp_path: Path, folder: Path, embedder_gguf: Path) -> Path:  # noqa: F811
    """A data folder whose collection "notes" holds ``folder``."""
    data = tmp_path / "data"
    code, _, _ = run(capsys, data, "docs", "add", "notes", str(folder), "--embedder", str(embedder_gguf))
    assert code == 0
    return data


def test_add_indexes_a_folder_and_lists_each_refusal(capsys, tmp_path, folder, embedder_gguf) -> None:  # noqa: F811
    data = tmp_path / "data"
    code, out, err = run(capsys, data, "docs", "add", "notes", str(folder), "--embedder", str(embedder_gguf))
    assert code == 0
    assert (data / "documents.sqlite3").is_file()  # --data-dir holds the index
    summary, *refusals = out.strip().splitlines()
    assert summary.startswith("notes: 4 document(s) indexed") and "2 refused" in summary
    assert sorted(r.split(": ", 2)[1] for r in refusals) == [
        str(folder / "binary.txt"),
        str(folder / "secret.pdf"),
    ]
    assert all(r.startswith("  refused: ") and len(r.split(": ", 2)[2]) > 5 for r in refusals)
    # stderr is no terminal here: one plain line per file, then the end.
    lines = err.strip().splitlines()
    assert len(lines) == 7 and lines[-1].startswith("6/6 files") and lines[-1].endswith("done")
    assert "chunks/s" in lines[0]


def test_add_again_embeds_nothing(capsys, indexed, folder, embedder_gguf) -> None:  # noqa: F811
    code, out, _ = run(capsys, indexed, "docs", "add", "notes", str(folder), "--embedder", str(embedder_gguf))
    assert code == 0
    assert "0 document(s) indexed, 0 chunk(s) embedded, 6 unchanged" in out


def test_all_refused_exits_1(capsys, tmp_path, embedder_gguf) -> None:  # noqa: F811
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\x00\x01\x02" * 100)
    code, out, _ = run(
        capsys, tmp_path / "data", "docs", "add", "c", str(bad), "--embedder", str(embedder_gguf)
    )
    assert code == 1
    assert f"refused: {bad}: " in out


def test_list_collections_and_documents(capsys, indexed, folder) -> None:
    code, out, _ = run(capsys, indexed, "docs", "list", "--json")
    assert code == 0
    (collection,) = json.loads(out)
    assert collection["name"] == "notes" and collection["documents"] == 4 and collection["refused"] == 2
    assert collection["chunks"] >= 4 and collection["embedder"].startswith("all-MiniLM-L6-v2")
    code, out, _ = run(capsys, indexed, "docs", "list")
    assert out.startswith("notes") and "4 documents" in out
    code, out, _ = run(capsys, indexed, "docs", "list", "notes", "--json")
    documents = {Path(d["path"]).name: d for d in json.loads(out)["documents"]}
    assert documents["guide.pdf"]["status"] == "indexed" and documents["guide.pdf"]["chunks"] >= 1
    assert documents["secret.pdf"]["status"] == "refused" and documents["secret.pdf"]["reason"]
    code, out, _ = run(capsys, indexed, "docs", "list", "notes")
    assert "refused" in out and str(folder / "binary.txt") in out


def test_search_json_is_a_list_best_first(capsys, indexed, folder, embedder_gguf) -> None:  # noqa: F811
    code, out, _ = run(
        capsys, indexed, "docs", "search", "notes", "Which port does the server listen on?",
        "-k", "3", "--json", "--embedder", str(embedder_gguf),
    )  # fmt: skip
    assert code == 0
    hits = json.loads(out)
    assert 1 <= len(hits) <= 3
    assert all(set(h) == {"path", "page", "score", "text"} for h in hits)
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    assert hits[0]["path"] == str(folder / "notes.md") and "8080" in hits[0]["text"]
    code, out, _ = run(
        capsys, indexed, "docs", "search", "notes", "How are the excerpts cited?", "--json",
        "--embedder", str(embedder_gguf),
    )  # fmt: skip
    best = json.loads(out)[0]
    assert best["path"] == str(folder / "guide.pdf") and best["page"] == 2


def test_search_human_output_is_numbered(capsys, indexed, folder, embedder_gguf) -> None:  # noqa: F811
    code, out, _ = run(
        capsys, indexed, "docs", "search", "notes", "index in SQLite", "--embedder", str(embedder_gguf)
    )
    assert code == 0
    assert out.startswith("[1] ") and "[2] " in out
    assert f"{folder / 'guide.pdf'}, p" in out  # p. N, or pp. N–M for pages joined


def test_remove_files_then_the_collection(capsys, indexed, folder) -> None:
    code, out, _ = run(capsys, indexed, "docs", "remove", "notes", str(folder / "fruit.txt"))
    assert code == 0 and "Removed 1 document(s)" in out
    _, out, _ = run(capsys, indexed, "docs", "list", "notes", "--json")
    assert "fruit.txt" not in out
    assert (folder / "fruit.txt").exists()  # only forgotten, not deleted
    code, _, _ = run(capsys, indexed, "docs", "remove", "notes")
    assert code == 0
    _, out, _ = run(capsys, indexed, "docs", "list", "--json")
    assert json.loads(out) == []


def test_typed_errors_are_one_line_and_exit_2(capsys, tmp_path, indexed, folder, embedder_gguf) -> None:  # noqa: F811
    other = tmp_path / "other-embedder.gguf"
    shutil.copyfile(embedder_gguf, other)  # another file name: another embedder's identity
    cases = [
        (("docs", "search", "missing", "q"), "no collection named"),
        (("docs", "list", "missing"), "no collection named"),
        (("docs", "remove", "missing"), "no collection named"),
        (("docs", "add", " ", str(folder), "--embedder", str(embedder_gguf)), "name"),
        (("docs", "add", "notes", str(tmp_path / "nowhere")), "no such file or folder"),
        (("docs", "add", "notes", str(folder), "--embedder", str(other)), "reindex"),
        (("docs", "search", "notes", "q", "--embedder", str(other)), "is indexed with"),
        (("docs", "search", "notes", "q"), "--embedder"),  # its GGUF is not in the embedders folder
    ]
    for argv, words in cases:
        code, _, err = run(capsys, indexed, *argv)
        assert code == 2, argv
        assert err.startswith("hearth: ") and words in err and err.count("\n") == 1, (argv, err)
        assert "Traceback" not in err


def test_the_real_command_honours_data_dir(tmp_path, folder, embedder_gguf) -> None:  # noqa: F811
    data = tmp_path / "elsewhere"
    base = [sys.executable, "-m", "app", "--data-dir", str(data), "docs"]
    added = subprocess.run(
        [*base, "add", "c", str(folder / "notes.md"), "--embedder", str(embedder_gguf)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert (data / "documents.sqlite3").is_file()
    listed = subprocess.run([*base, "list", "--json"], capture_output=True, text=True, timeout=60)
    assert [c["name"] for c in json.loads(listed.stdout)] == ["c"]


# -- chat --docs --------------------------------------------------------------------------

# The scripted model's reply: it cites [1], which is given, and [9], which is not.
CITING = ("\u2581Port", "\u2581[1]", "\u2581[9]", "<|im_end|>")


@pytest.fixture()
def citing_model(make_tiny_model) -> Path:
    # A long context: its letter-sized tokens make each excerpt 2-3 times longer than MiniLM's.
    return make_tiny_model("citing.gguf", script=CITING, extra_tokens=CITING[:3], n_ctx_train=16384)


def _long_manual(folder: Path) -> Path:
    """Far more than half of an 8192-token context: retrieval, not whole documents."""
    topics = ["ports", "backups", "themes", "updates", "fonts", "printing", "shortcuts", "logs"]
    paragraphs = [
        f"Section {i} is about {topics[i % len(topics)]}. "
        + f"Detail {i} of the {topics[i % 8]} setting. " * 12
        for i in range(60)
    ]
    paragraphs[17] = "The hearth server listens on port 8080 unless HEARTH_PORT says otherwise."
    path = folder / "manual.md"
    path.write_text("\n\n".join(paragraphs))
    return path


def test_chat_with_docs_grounds_the_prompt_and_lists_cited_sources(
    capsys,
    tmp_path,
    citing_model,
    embedder_gguf,  # noqa: F811
) -> None:
    data = tmp_path / "data"
    docs = tmp_path / "docs"
    docs.mkdir()
    manual = _long_manual(docs)
    run(capsys, data, "docs", "add", "manual", str(manual), "--embedder", str(embedder_gguf))
    question = "Which port does the server listen on?"
    chat = ("chat", str(citing_model), question, "--temp", "0", "--ctx", "8192")
    code, out, _ = run(capsys, data, *chat, "--json")
    plain = json.loads(out)
    code, out, err = run(capsys, data, *chat, "--docs", "manual", "--embedder", str(embedder_gguf), "--json")
    assert code == 0, err
    grounded = json.loads(out)
    assert grounded["text"] == plain["text"] == " Port [1] [9]"
    assert not grounded["whole"] and 1 <= len(grounded["sources"]) <= 5
    assert grounded["cited"] == [1]  # [9] was never given
    assert grounded["sources"][0]["path"] == str(manual) and "8080" in grounded["sources"][0]["text"]
    # The excerpts reached the model: the prompt grew by at least their text.
    excerpt_chars = sum(len(s["text"]) for s in grounded["sources"])
    assert grounded["usage"]["prompt_tokens"] > plain["usage"]["prompt_tokens"] + excerpt_chars // 8

    code, out, _ = run(capsys, data, *chat, "--docs", "manual", "--embedder", str(embedder_gguf))
    assert code == 0
    reply, sources, *rest = out.splitlines()
    assert reply == " Port [1] [9]" and sources == "Sources:"
    # [1] only, with the start of its excerpt; not [9] (never given) nor any given, uncited one.
    assert rest[0] == "[1] manual.md" and len(rest) == 2
    assert " ".join(grounded["sources"][0]["text"].split()).startswith(rest[1].strip()[:200])


def test_chat_says_when_the_documents_were_given_whole(capsys, tmp_path, citing_model, embedder_gguf) -> None:  # noqa: F811
    data = tmp_path / "data"
    note = tmp_path / "short.md"
    note.write_text(NOTES)
    run(capsys, data, "docs", "add", "short", str(note), "--embedder", str(embedder_gguf))
    code, out, _ = run(
        capsys, data, "chat", str(citing_model), "Which port?", "--temp", "0", "--ctx", "2048",
        "--docs", "short", "--embedder", str(embedder_gguf),
    )  # fmt: skip
    assert code == 0
    assert "(the documents were given whole)" in out
    assert "Sources:\n[1] short.md" in out


def test_chat_docs_errors_are_one_line(capsys, tmp_path, citing_model) -> None:
    code, _, err = run(capsys, tmp_path / "data", "chat", str(citing_model), "q", "--docs", "missing")
    assert code == 2 and "no collection named" in err


def test_ctrl_c_cancels_cleanly_and_keeps_the_files_finished(tmp_path, embedder_gguf) -> None:  # noqa: F811
    import signal

    FILES = 40
    docs = tmp_path / "many"
    docs.mkdir()
    for i in range(FILES):
        (docs / f"note-{i:03}.txt").write_text(f"Note {i}. " + f"Ordinary words about topic {i}. " * 40)
    data = tmp_path / "data"
    base = [sys.executable, "-m", "app", "--data-dir", str(data), "docs"]
    proc = subprocess.Popen(
        [*base, "add", "many", str(docs), "--embedder", str(embedder_gguf)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    while not (line := proc.stderr.readline()).startswith(f"2/{FILES} files"):
        assert line, "ended before indexing two files"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "cancelled" in err
    listed = subprocess.run([*base, "list", "many", "--json"], capture_output=True, text=True, timeout=60)
    statuses = [d["status"] for d in json.loads(listed.stdout)["documents"]]
    indexed = statuses.count("indexed")
    assert 2 <= indexed < FILES and set(statuses) <= {"indexed", "pending"}
    assert out.startswith(f"many: {indexed} document(s) indexed")
    # Run again: the rest, and none of the finished ones embedded twice.
    again = subprocess.run(
        [*base, "add", "many", str(docs), "--embedder", str(embedder_gguf)], capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert again.returncode == 0
    assert again.stdout.startswith(f"many: {FILES - indexed} document(s) indexed")


def test_an_embedder_that_does_not_fit_is_refused_on_stderr_with_exit_2(
    capsys, tmp_path, folder, embedder_gguf, monkeypatch  # noqa: F811
) -> None:
    # This machine as `planning_hardware()` measures it, with 600 MiB of 4 GiB free.
    import app.services.planning as planning
    from engine.machine.hardware import described_machine

    cramped = described_machine(ram_total=4 << 30, ram_available=600 << 20)
    monkeypatch.setattr(planning, "take_snapshot", lambda: cramped)
    data = tmp_path / "data"
    code, out, err = run(capsys, data, "docs", "add", "notes", str(folder), "--embedder", str(embedder_gguf))
    assert code == 2 and out == ""
    assert err == (
        "hearth: The embedding model all-MiniLM-L6-v2 does not fit (RAM short by 35.1 MiB). "
        "Needs 123.1 MiB of RAM: exceeds the 600.0 MiB free (keeping 512.0 MiB spare).\n"
    )
    code, out, err = run(capsys, data, "docs", "search", "notes", "chain", "--embedder", str(embedder_gguf))
    assert code == 2 and "does not fit (RAM short by" in err
    code, out, _ = run(capsys, data, "docs", "list", "notes", "--json")
    assert code == 0 and json.loads(out)["documents"] == []  # nothing was indexed
