"""Fixtures for the Hub tests: the fake Hub (tests/fake_hub.py) serving the tiny generated
models, a split GGUF, a projector, Gemma 3 270M, a gated repository, one without GGUFs and
one with a hostile file name. Registered as a plugin in tests/conftest.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.devtools.tiny_models import (
    TinyProjectorSpec,
    TinyTextSpec,
    write_tiny_projector,
    write_tiny_text_model,
)
from tests.fake_hub import FakeHub

TINY_REPO = "test-org/tiny-llama-GGUF"
SPLIT_REPO = "test-org/tiny-split-GGUF"
GEMMA_REPO = "google/gemma-3-270m-GGUF"
GATED_REPO = "gated-org/locked-GGUF"
EMPTY_REPO = "test-org/no-gguf"
EVIL_REPO = "evil-org/escape-GGUF"
GEMMA_FILE = "gemma-3-270m-Q4_K_M.gguf"


@pytest.fixture(scope="session")
def hub_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The files the fake Hub serves, written once per session."""
    from tests.conftest import rewrite_gguf

    root = tmp_path_factory.mktemp("hub-files")
    q8 = write_tiny_text_model(root / "tiny-llama-Q8_0.gguf", TinyTextSpec(weight_type="Q8_0"))
    q4 = write_tiny_text_model(root / "tiny-llama-Q4_0.gguf", TinyTextSpec(n_layer=4, weight_type="Q4_0"))
    proj = write_tiny_projector(root / "mmproj-tiny-llama-F16.gguf", TinyProjectorSpec())
    split_dir = root / "split"
    split_dir.mkdir()
    f32 = write_tiny_text_model(root / "tiny-llama-F32.gguf", TinyTextSpec())
    rewrite_gguf(f32, split_dir / "tiny-split-F32.gguf", split_max_tensors=8)  # gguf copies only F32
    parts = sorted(split_dir.glob("tiny-split-F32-*.gguf"))
    assert len(parts) >= 2
    files = {"q8": q8, "q4": q4, "proj": proj}
    files |= {f"part{i}": p for i, p in enumerate(parts, 1)}
    readme = root / "README.md"
    readme.write_text("# tiny\n")
    files["readme"] = readme
    return files


def populate(hub: FakeHub, files: dict[str, Path], gemma: Path | None) -> FakeHub:
    hub.add_repo(
        TINY_REPO,
        {
            "tiny-llama-Q8_0.gguf": files["q8"],
            "tiny-llama-Q4_0.gguf": files["q4"],
            "mmproj-tiny-llama-F16.gguf": files["proj"],
            "README.md": files["readme"],
        },
        downloads=1200,
        likes=34,
    )
    parts = sorted(k for k in files if k.startswith("part"))
    hub.add_repo(
        SPLIT_REPO,
        {f"F32/{files[k].name}": files[k] for k in parts},
        downloads=50,
    )
    hub.add_repo(GATED_REPO, {"locked-Q8_0.gguf": files["q8"]}, gated=True, downloads=7, license="llama3")
    hub.add_repo(EMPTY_REPO, {"README.md": files["readme"]}, downloads=3)
    hub.add_repo(EVIL_REPO, {"../../escape-Q8_0.gguf": files["q8"]}, downloads=1)
    if gemma is not None:
        hub.add_repo(GEMMA_REPO, {GEMMA_FILE: gemma}, downloads=900, license="gemma")
    return hub


@pytest.fixture(scope="session")
def gemma_on_disk(gemma_path: Path) -> Path:
    """The real Gemma on the fake Hub: assembled by the suite itself, so no test skips for it."""
    return gemma_path


@pytest.fixture()
def fake_hub(hub_files: dict[str, Path], gemma_on_disk: Path) -> Iterator[FakeHub]:
    hub = populate(FakeHub(), hub_files, gemma_on_disk).start()
    yield hub
    hub.stop()


@pytest.fixture()
def hub_access(fake_hub: FakeHub):
    from engine.hub import HubAccess

    return HubAccess(fake_hub.url)


class MemoryKeyring:
    """A keyring backend that keeps passwords in a dict (the test machine has no keyring)."""

    priority = 1

    def __init__(self) -> None:
        self.passwords: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, user: str) -> str | None:
        return self.passwords.get((service, user))

    def set_password(self, service: str, user: str, password: str) -> None:
        self.passwords[(service, user)] = password

    def delete_password(self, service: str, user: str) -> None:
        from keyring.errors import PasswordDeleteError

        if self.passwords.pop((service, user), None) is None:
            raise PasswordDeleteError(user)


@pytest.fixture()
def memory_keyring() -> Iterator[MemoryKeyring]:
    import keyring
    from keyring.backend import KeyringBackend

    class Backend(KeyringBackend, MemoryKeyring):  # type: ignore[misc]
        priority = 1  # type: ignore[assignment]

        def __init__(self) -> None:
            KeyringBackend.__init__(self)
            MemoryKeyring.__init__(self)

        get_password = MemoryKeyring.get_password
        set_password = MemoryKeyring.set_password
        delete_password = MemoryKeyring.delete_password

    previous = keyring.get_keyring()
    backend = Backend()
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(previous)
