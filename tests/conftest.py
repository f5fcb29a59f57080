"""Shared fixtures: tiny random-weight GGUFs (milliseconds) and the real Gemma 3 270M."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from engine.devtools.tiny_models import (
    TinyProjectorSpec,
    TinyTextSpec,
    write_tiny_projector,
    write_tiny_text_model,
)

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Nothing here may reach the real Hub, nor read a token saved on this machine.
os.environ["HF_HUB_OFFLINE"] = "0"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ.pop("HF_TOKEN", None)
os.environ.pop("HF_ENDPOINT", None)
# The machine's keyring (D-Bus Secret Service) is not the tests' to read: none, unless a
# test installs the in-memory one (tests/hub_fixtures.py).
os.environ["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"

pytest_plugins = ["tests.hub_fixtures"]

REPO = Path(__file__).resolve().parent.parent
TEST_CACHE = REPO / ".test-cache"


# The GUI tests' screen: a 1920×1080 desktop (the offscreen platform's own is 800×800,
# smaller than any Hearth supports); tests/app/window/test_gui_screen_fit.py opens smaller ones.
OFFSCREEN_SCREEN = {"width": 1920, "height": 1080}


def offscreen_config(path: Path, width: int, height: int) -> Path:
    """An offscreen platform configuration with one screen of ``width`` × ``height``."""
    screen = {"name": "test", "x": 0, "y": 0, "width": width, "height": height}
    path.write_text(json.dumps({"screens": [{**screen, "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}]}))
    return path


@pytest.fixture(scope="session")
def qapp_args(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    if os.environ.get("QT_QPA_PLATFORM") != "offscreen":
        return ["hearth-tests"]
    config = offscreen_config(tmp_path_factory.mktemp("qpa") / "screen.json", **OFFSCREEN_SCREEN)
    return ["hearth-tests", "-platform", f"offscreen:configfile={config}"]


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tiny-models")


@pytest.fixture(scope="session")
def tiny_model(tiny_dir: Path) -> Path:
    """A 2-layer, 64-dim llama model with a ChatML template (about 0.5 MB)."""
    return write_tiny_text_model(tiny_dir / "tiny-llama.gguf", TinyTextSpec())


@pytest.fixture(scope="session")
def tiny_projector(tiny_dir: Path) -> Path:
    """A CLIP 'mlp' projector whose output size matches ``tiny_model``."""
    return write_tiny_projector(tiny_dir / "mmproj-tiny-llama.gguf", TinyProjectorSpec())


@pytest.fixture()
def make_tiny_model(tmp_path: Path):
    """Factory: write a tiny text model with a custom spec into this test's tmp dir."""

    def make(name: str = "model.gguf", **spec: object) -> Path:
        return write_tiny_text_model(tmp_path / name, TinyTextSpec(**spec))  # type: ignore[arg-type]

    return make


@pytest.fixture(scope="session")
def gemma_path() -> Path:
    """The real Gemma 3 270M Q4_K_M GGUF, assembled once into .test-cache/."""
    from app.platform.default_model import ensure_default_model

    return ensure_default_model(TEST_CACHE)


@pytest.fixture(scope="session")
def qwen_path() -> Path:
    """Qwen2.5-Coder 1.5B Instruct Q4_K_M, assembled once (hash-checked) into .test-cache/."""
    from app.platform.qwen_model import ensure_chat_model

    return ensure_chat_model(TEST_CACHE)


@pytest.fixture(scope="session")
def qwen_draft_path() -> Path:
    """Qwen2.5-Coder 0.5B Instruct Q4_K_M, the chat model's draft, assembled once (hash-checked)."""
    from app.platform.qwen_model import ensure_draft_model

    return ensure_draft_model(TEST_CACHE)


@pytest.fixture()
def hardware():
    """A 2-core, 16 GiB CPU-only machine: GUI tests must not depend on this one."""
    from engine.machine.hardware import described_machine

    return described_machine(ram_available=12 << 30, name="Test CPU")


def rewrite_gguf(
    source: Path, target: Path, *, drop: tuple[str, ...] = (), split_max_tensors: int = 0
) -> Path:
    """Copy a GGUF through gguf's writer: without the tensors named in ``drop``, or split."""
    import gguf
    import numpy as np

    reader = gguf.GGUFReader(str(source))
    writer = gguf.GGUFWriter(str(target), str(reader.fields["general.architecture"].contents()),
                             split_max_tensors=split_max_tensors)  # fmt: skip
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(field.name, field.contents(), vtype, sub_type=field.types[-1])
        else:
            writer.add_key_value(field.name, field.contents(), vtype)
    for t in reader.tensors:
        if t.name not in drop:
            writer.add_tensor(t.name, np.array(t.data), raw_shape=tuple(reversed([int(d) for d in t.shape])))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return target


def plan_for(path: Path, ctx: int = 1024, parallel: int = 4, **request: object):
    """A load plan for ``path`` on this machine (CPU), as the app would make it."""
    from engine.catalog import inspect_model
    from engine.machine.hardware import take_snapshot
    from engine.planner import LoadRequest, plan_load

    return plan_load(
        inspect_model(path),
        take_snapshot(),
        LoadRequest(context_per_conversation=ctx, parallel=parallel, **request),  # type: ignore[arg-type]
    )


SCRIPT = ("<0xC3>", "<0xA9>", "\u2581a", "b", "<0xE4>", "<0xBD>", "<0xA0>", "c", "d", "<|im_end|>")
"""What the scripted tiny model says: 'é', ' a', 'b', '你' split into single bytes, 'c', 'd', end."""
SCRIPT_TEXT = "é ab你cd"


@pytest.fixture(scope="session")
def scripted_model(tiny_dir: Path) -> Path:
    return write_tiny_text_model(tiny_dir / "scripted.gguf", TinyTextSpec(script=SCRIPT))


@pytest.fixture(scope="session")
def looping_model(tiny_dir: Path) -> Path:
    """Says the script over and over: never stops on its own."""
    return write_tiny_text_model(
        tiny_dir / "looping.gguf", TinyTextSpec(script=SCRIPT[:-1], script_loops=True)
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start building the packaging tests' bundle now, in the background, if they are to run."""
    import importlib.util

    from tests.package_build import BUNDLE_BUILD, BundleBuild

    wanted = any("built" in getattr(item, "fixturenames", ()) for item in session.items)
    if wanted and importlib.util.find_spec("PyInstaller") is not None:
        session.config.stash[BUNDLE_BUILD] = BundleBuild.start()


def pytest_sessionfinish(session: pytest.Session) -> None:
    from tests.package_build import BUNDLE_BUILD

    build = session.config.stash.get(BUNDLE_BUILD, None)
    if build is not None:
        build.stop()


def pytest_unconfigure(config: pytest.Config) -> None:
    """Let Qt free what Python made while Python is still alive.

    The clipboard (a global in QtGui) owns the QMimeData a paste test gave it; Qt's exit
    handlers would delete it after the interpreter is gone and shiboken would crash
    cleaning up its wrapper: a segfault after every test has passed.
    """
    import gc
    import sys

    widgets = sys.modules.get("PySide6.QtWidgets")
    if widgets is None:
        return
    app = widgets.QApplication.instance()
    if app is not None:
        app.clipboard().clear()
        app.closeAllWindows()
        gc.collect()
        app.shutdown()
