"""Every bad input of issue 28 item 1 (a scan, an encrypted PDF, binary behind .txt, a zip
bomb, an unreadable file, a symlink loop) and the others a user's folder holds: each is one
DocumentRefused line, and scanning a folder of them lists each while the good files go on.

Unreadable for real: the tests run as root, which reads a mode-000 file anyway, so those
tests drop to the "nobody" user's effective uid for the read (document_files.unprivileged),
in a folder "nobody" can reach. Nothing is monkeypatched at the file boundary.
"""

from __future__ import annotations

import os
import random
import threading
import zipfile
from pathlib import Path

import pytest

from engine.documents import parsing
from engine.documents.errors import DocumentRefused
from engine.documents.parsing import DocumentKind, parse_document
from engine.documents.scanning import scan_paths
from tests.engine.documents.document_files import (
    MARKDOWN,
    public_folder,
    unprivileged,
    write_docx,
    write_encrypted_pdf,
    write_scanned_pdf,
    write_symlink_loop,
    write_text_pdf,
    write_zip_bomb_docx,
)


def refusal(path: Path) -> str:
    with pytest.raises(DocumentRefused) as caught:
        parse_document(path)
    error = caught.value
    assert error.path == path
    assert "\n" not in error.reason and "\n" not in str(error)
    assert str(error) == f"{path.name}: {error.reason}"
    return error.reason


def test_a_scanned_pdf_is_refused(tmp_path: Path) -> None:
    assert refusal(write_scanned_pdf(tmp_path / "scan.pdf", pages=12)) == (
        "scanned PDF: no text layer on any of its 12 pages"
    )
    assert (
        refusal(write_scanned_pdf(tmp_path / "one.pdf", pages=1)) == "scanned PDF: no text layer on its page"
    )


def test_a_blank_pdf_is_empty_not_scanned(tmp_path: Path) -> None:
    assert (
        refusal(write_text_pdf(tmp_path / "blank.pdf", ["", ""]))
        == "empty document: no text on any of its 2 pages"
    )


def test_an_encrypted_pdf_is_refused(tmp_path: Path) -> None:
    assert refusal(write_encrypted_pdf(tmp_path / "secret.pdf")) == (
        "encrypted PDF: Hearth cannot read password-protected files"
    )


def test_a_damaged_pdf_is_refused_as_damaged_not_encrypted(tmp_path: Path) -> None:
    good = write_text_pdf(tmp_path / "good.pdf").read_bytes()
    not_pdf = tmp_path / "junk.pdf"
    not_pdf.write_bytes(b"this was never a PDF " * 100)
    assert refusal(not_pdf) == "damaged PDF: not a PDF, or its structure is broken"
    cut = tmp_path / "cut.pdf"
    cut.write_bytes(good[: len(good) // 3])
    assert refusal(cut).startswith("damaged PDF")


@pytest.mark.parametrize("name", ["photo.txt", "notes.md", "script.py", "page.html"])
def test_binary_behind_a_text_name_is_refused(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    # A PNG's header and a stretch of random bytes: NULs and control bytes.
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + random.Random(1).randbytes(4096))
    suffix = Path(name).suffix
    assert refusal(path) == f"not text: binary content in a {suffix} file"


def test_binary_after_a_text_start_is_refused_too(tmp_path: Path) -> None:
    path = tmp_path / "dump.log"
    path.write_bytes(b"plain start\n" * 1000 + b"\x00\x01\x02" * 100)
    assert refusal(path) == "not text: binary content in a .log file"


def test_control_bytes_without_nuls_are_binary(tmp_path: Path) -> None:
    path = tmp_path / "noise.txt"
    path.write_bytes(bytes(random.Random(2).choice(range(1, 32)) for _ in range(2000)))
    assert refusal(path) == "not text: binary content in a .txt file"


def test_text_in_an_encoding_hearth_cannot_tell_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "russian.txt"
    path.write_bytes("Привет, как дела? Это текст в старой кодировке.".encode("cp1251"))
    assert refusal(path) == "unknown text encoding: not UTF-8 (save it as UTF-8 to index it)"


def test_a_zip_bomb_docx_is_refused_before_it_is_unpacked(tmp_path: Path) -> None:
    bomb = write_zip_bomb_docx(tmp_path / "bomb.docx", unpacked_bytes=200 * 1024 * 1024)
    assert bomb.stat().st_size < 1024 * 1024
    assert refusal(bomb) == (
        "DOCX too large when unpacked (zip bomb?): word/document.xml unpacks to 200.0 MiB (at most 128.0 MiB)"
    )


def test_a_docx_that_unpacks_a_thousand_fold_is_refused_whatever_its_size(tmp_path: Path) -> None:
    bomb = write_zip_bomb_docx(tmp_path / "small-bomb.docx", unpacked_bytes=8 * 1024 * 1024)
    reason = refusal(bomb)
    assert reason.startswith("DOCX too large when unpacked (zip bomb?): word/document.xml unpacks to ")
    assert reason.endswith(" times its packed size")


def test_a_docx_of_too_many_parts_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "parts.docx"
    with zipfile.ZipFile(path, "w") as archive:
        for n in range(10_001):
            archive.writestr(f"p/{n}", b"")
    assert refusal(path) == "DOCX too large when unpacked (zip bomb?): 10,001 parts (at most 10,000)"


def test_a_docx_that_is_no_zip_or_no_word_document_is_damaged(tmp_path: Path) -> None:
    not_zip = tmp_path / "fake.docx"
    not_zip.write_bytes(b"plain text, not a zip")
    assert refusal(not_zip).startswith("damaged DOCX: not a readable zip archive")
    no_document = tmp_path / "empty-zip.docx"
    with zipfile.ZipFile(no_document, "w") as archive:
        archive.writestr("hello.txt", "hi")
    assert refusal(no_document).startswith("damaged DOCX: ")


def test_an_unreadable_file_is_refused() -> None:
    with public_folder() as folder:
        secret = folder / "secret.txt"
        secret.write_text("private")
        secret.chmod(0)
        with unprivileged():
            assert refusal(secret) == "cannot read: permission denied"


def test_a_fifo_named_like_a_document_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    reasons: list[str] = []
    reader = threading.Thread(target=lambda: reasons.append(refusal(fifo)), daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert not reader.is_alive(), "parse_document blocked on a FIFO"
    assert reasons == ["not a regular file: a named pipe (FIFO)"]


def test_a_folder_named_like_a_document_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "looks-like.pdf"
    folder.mkdir()
    assert refusal(folder) == "a folder, not a file"


def test_a_symlink_loop_is_refused(tmp_path: Path) -> None:
    assert refusal(write_symlink_loop(tmp_path)) == "symlink loop"


def test_missing_files_and_broken_links_are_refused(tmp_path: Path) -> None:
    assert refusal(tmp_path / "gone.txt") == "not found: moved or deleted?"
    link = tmp_path / "dangling.md"
    link.symlink_to(tmp_path / "nowhere.md")
    assert refusal(link) == "broken link: its target does not exist"


def test_an_unsupported_type_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "data.xyz"
    path.write_text("whatever")
    assert refusal(path) == "unsupported file type .xyz"


@pytest.mark.parametrize(
    ("name", "content"), [("empty.txt", b""), ("blank.md", b" \n\n\t\n"), ("void.html", b"<p> </p>")]
)
def test_an_empty_document_is_refused(tmp_path: Path, name: str, content: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    assert refusal(path) == "empty document"


def test_an_empty_docx_is_refused(tmp_path: Path) -> None:
    assert refusal(write_docx(tmp_path / "empty.docx", [])) == "empty document"


def test_a_file_over_its_kind_s_size_limit_is_refused_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The limits (64 MiB of text) lowered, so the test need not write 64 MiB.
    monkeypatch.setitem(parsing._SIZE_LIMITS, DocumentKind.TEXT, 1024)
    path = tmp_path / "big.txt"
    path.write_text("x" * 2048)
    assert refusal(path) == "too large: 2.0 KiB (Hearth reads text files up to 1.0 KiB)"
    monkeypatch.setitem(parsing._SIZE_LIMITS, DocumentKind.PDF, 1024)
    assert refusal(write_text_pdf(tmp_path / "big.pdf")).startswith("too large: ")


def test_the_limits_are_the_documented_ones() -> None:
    mib = 1024 * 1024
    assert parsing.size_limit(DocumentKind.TEXT) == 64 * mib
    assert parsing.size_limit(DocumentKind.PDF) == 256 * mib
    assert parsing.size_limit(DocumentKind.DOCX) == 256 * mib


def _bad_and_good_folder(root: Path) -> tuple[dict[str, str], set[str]]:
    """A folder with every bad input beside good files; what each bad one should say."""
    docs = root / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text(MARKDOWN)
    write_text_pdf(docs / "book.pdf")
    write_docx(docs / "manual.docx")
    nested = docs / "nested" / "deeper"
    nested.mkdir(parents=True)
    (nested / "notes.txt").write_text("Deep notes.")
    write_scanned_pdf(docs / "scan.pdf", pages=3)
    write_encrypted_pdf(docs / "secret.pdf")
    (docs / "photo.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00" + bytes(range(256)) * 8)
    write_zip_bomb_docx(docs / "bomb.docx")
    (docs / "locked.txt").write_text("private")
    (docs / "locked.txt").chmod(0)
    write_symlink_loop(docs, "loop-a.txt", "loop-b.txt")
    os.mkfifo(docs / "pipe.md")
    # A link back up the tree: walking into it would never end.
    (nested / "up").symlink_to(docs, target_is_directory=True)
    locked = docs / "locked-folder"
    locked.mkdir()
    (locked / "inside.txt").write_text("never seen")
    locked.chmod(0)
    # Skipped quietly: hidden folders, clutter, kinds Hearth does not read.
    (docs / ".git").mkdir()
    (docs / ".git" / "HEAD.txt").write_text("ref")
    (docs / "node_modules").mkdir()
    (docs / "node_modules" / "index.js").write_text("module.exports = 1")
    (docs / "picture.png").write_bytes(b"\x89PNG")
    # A second way to a file already taken.
    (docs / "same-guide.md").symlink_to(docs / "guide.md")
    expected_refusals = {
        "scan.pdf": "scanned PDF: no text layer on any of its 3 pages",
        "secret.pdf": "encrypted PDF: Hearth cannot read password-protected files",
        "photo.txt": "not text: binary content in a .txt file",
        "bomb.docx": "DOCX too large when unpacked (zip bomb?): word/document.xml unpacks to 200.0 MiB"
        " (at most 128.0 MiB)",
        "locked.txt": "cannot read: permission denied",
        "loop-a.txt": "symlink loop",
        "loop-b.txt": "symlink loop",
        "pipe.md": "not a regular file: a named pipe (FIFO)",
        "up": "symlink loop: it leads back into a folder that holds it",
        "locked-folder": "cannot read: permission denied",
    }
    good = {"guide.md", "book.pdf", "manual.docx", "notes.txt"}
    return expected_refusals, good


def _warm_up(folder: Path) -> None:
    """Parse one good file of each kind as root first: as "nobody", Python could not import
    the modules (and codecs) a first parse loads lazily, since they live under /root."""
    for path in folder.iterdir():
        if path.name in ("guide.md", "book.pdf", "manual.docx"):
            parse_document(path)
    page = folder / "warm.html"
    page.write_text("<p>warm</p>")
    parse_document(page)
    page.unlink()


def test_a_folder_of_bad_inputs_lists_each_with_its_line_and_indexes_the_rest() -> None:
    with public_folder() as root:
        expected, good = _bad_and_good_folder(root)
        _warm_up(root / "docs")
        with unprivileged():
            files, refusals = scan_paths([root / "docs"])
            parsed = []
            refused = list(refusals)
            for path in files:
                try:
                    parsed.append(parse_document(path))
                except DocumentRefused as error:
                    refused.append(error)
        assert {doc.path.name for doc in parsed} == good
        assert {error.path.name: error.reason for error in refused} == expected
        assert len(refused) == len(expected)
        assert all("\n" not in str(error) for error in refused)
        # In name order, folders walked where they fall; each file once (not same-guide.md,
        # a link to guide.md); nothing hidden, no clutter, no kind Hearth does not read.
        docs = root / "docs"
        assert files == (
            docs / "bomb.docx",
            docs / "book.pdf",
            docs / "guide.md",
            docs / "locked.txt",
            docs / "manual.docx",
            docs / "nested" / "deeper" / "notes.txt",
            docs / "photo.txt",
            docs / "pipe.md",
            docs / "scan.pdf",
            docs / "secret.pdf",
        )


def test_scanning_lists_in_name_order_and_refuses_what_the_user_named_badly(tmp_path: Path) -> None:
    (tmp_path / "b.txt").write_text("b")
    (tmp_path / "a.md").write_text("a")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.py").write_text("c = 1")
    (tmp_path / "photo.png").write_bytes(b"png")
    loop = write_symlink_loop(tmp_path, "x", "y")
    result = scan_paths([tmp_path, tmp_path / "photo.png", tmp_path / "missing.txt", loop, tmp_path / "a.md"])
    assert result.files == (tmp_path / "a.md", tmp_path / "b.txt", tmp_path / "sub" / "c.py")
    assert [(error.path.name, error.reason) for error in result.refusals] == [
        # Inside a folder, a looping name without a suffix may have been a folder: listed.
        ("x", "symlink loop"),
        ("y", "symlink loop"),
        ("photo.png", "unsupported file type .png"),
        ("missing.txt", "not found: moved or deleted?"),
        ("x", "symlink loop"),
    ]


def test_a_symlinked_folder_is_followed_once(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "note.txt").write_text("n")
    (tmp_path / "alias").symlink_to(real, target_is_directory=True)
    result = scan_paths([tmp_path])
    assert result.files == (tmp_path / "alias" / "note.txt",)
    assert result.refusals == ()
