"""Each layering rule fails when broken: small bad trees in ``tmp_path``, each caught by its check."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.architecture import layers
from tests.architecture.graph import ImportGraph, build_graph

# A face as the real one: engine/__init__ reads its names from the packages' tables.
FACE = '_PACKAGES = ("engine.base", "engine.runtime")\n_ALIASES = {"run_child": "engine.runtime.job:main"}\n'


def tree(root: Path, files: dict[str, str]) -> ImportGraph:
    for name, text in {"engine/__init__.py": FACE, "app/__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return build_graph(root)


def lazy(table: dict[str, str]) -> str:
    return f"_EXPORTS = {table!r}\n__all__ = sorted(_EXPORTS)\n"


def test_a_deferred_import_closes_a_circle(tmp_path: Path) -> None:
    graph = tree(
        tmp_path,
        {
            "engine/runtime/__init__.py": lazy({"Job": "job"}),
            "engine/runtime/job.py": "from engine.runtime.pool import Pool\nclass Job: ...\n",
            "engine/runtime/pool.py": "def f():\n    from engine.runtime.job import Job\nclass Pool: ...\n",
        },
    )
    circle = frozenset({"engine.runtime.job", "engine.runtime.pool"})
    assert layers.cycle_drift(graph, known=()) == ({circle}, set())
    assert layers.cycle_drift(graph, known={circle}) == (set(), set())


def test_a_circle_through_the_face_is_seen_and_type_checking_is_exempt(tmp_path: Path) -> None:
    graph = tree(
        tmp_path,
        {
            "engine/base/__init__.py": lazy({"Base": "core"}),
            "engine/base/core.py": "from engine import Job\nclass Base: ...\n",
            "engine/runtime/__init__.py": lazy({"Job": "job"}),
            "engine/runtime/job.py": (
                "from typing import TYPE_CHECKING\nfrom engine import Base\n"
                "if TYPE_CHECKING:\n    from engine.runtime.other import Other\nclass Job: ...\n"
            ),
            "engine/runtime/other.py": "from engine.runtime import Job\nclass Other: ...\n",
        },
    )
    # core → (engine's face → engine.runtime's table →) job → (face) core; job ↔ other only for types.
    new, gone = layers.cycle_drift(graph, known=())
    assert new == {frozenset({"engine.base.core", "engine.runtime.job"})} and not gone


def test_a_known_circle_that_is_gone_fails(tmp_path: Path) -> None:
    graph = tree(tmp_path, {"engine/runtime/job.py": "class Job: ...\n"})
    gone = frozenset({"engine.runtime.job", "engine.runtime.pool"})
    assert layers.cycle_drift(graph, known={gone}) == (set(), {gone})


def test_the_engine_importing_the_app_or_qt_widgets_is_caught(tmp_path: Path) -> None:
    graph = tree(
        tmp_path,
        {
            "app/window.py": "class Window: ...\n",
            "engine/bad.py": (
                "from PySide6.QtCore import QObject\n"  # allowed: signals and threads
                "from PySide6.QtWidgets import QWidget\n"
                "from PySide6 import QtGui\n"
                "def f():\n    from app.window import Window\n"
            ),
        },
    )
    found = {(e.target, e.line) for e in layers.engine_violations(graph)}
    assert found == {("PySide6.QtWidgets", 2), ("PySide6", 3), ("app.window", 5)}


@pytest.mark.parametrize(
    "files",
    [
        {"engine/scheduler/pool.py": "import numpy\n"},
        {"engine/scheduler/pool.py": "def f():\n    import llama_cpp\n"},
        {"engine/speculation/policy.py": "from PySide6.QtCore import QObject\n"},
        {
            "engine/scheduler/pool.py": "from engine.native.model import M\n",
            "engine/native/model.py": "M = 1\n",
        },
        # Transitively: the defaults a pure module reads must stay pure too.
        {
            "engine/scheduler/pool.py": "from engine.base.defaults import N\n",
            "engine/base/defaults.py": "import numpy\n",
        },
    ],
    ids=["numpy", "deferred-llama_cpp", "qt-in-policy", "native-module", "through-base"],
)
def test_an_impure_import_in_a_pure_module_is_caught(tmp_path: Path, files: dict[str, str]) -> None:
    graph = tree(tmp_path, {"engine/scheduler/__init__.py": "", "engine/speculation/policy.py": "", **files})
    assert len(layers.purity_violations(graph)) == 1


def test_pure_modules_may_use_the_stdlib_and_engine_base(tmp_path: Path) -> None:
    graph = tree(
        tmp_path,
        {
            "engine/scheduler/pool.py": "import bisect\nfrom engine.base.defaults import N\n",
            "engine/base/defaults.py": "N = 1\n",
            "engine/speculation/policy.py": "from dataclasses import dataclass\n",
        },
    )
    assert layers.purity_violations(graph) == []


def test_a_widget_importing_a_service_controller_or_window_is_caught(tmp_path: Path) -> None:
    graph = tree(
        tmp_path,
        {
            "app/services/session.py": "class Session: ...\n",
            "app/conversation/controller.py": "class Controller: ...\n",
            "app/window/main_window.py": "class MainWindow: ...\n",
            "app/settings/prefs.py": "class Prefs: ...\n",
            "app/widgets/panel.py": (
                "from typing import TYPE_CHECKING\nfrom app.settings.prefs import Prefs\n"
                "from app.services.session import Session\n"
                "if TYPE_CHECKING:\n    from app.window.main_window import MainWindow\n"
            ),
            "app/chat/view.py": "def f():\n    from app.conversation.controller import Controller\n",
        },
    )
    assert set(layers.widget_imports(graph)) == {
        ("app.widgets.panel", "app.services.session"),
        ("app.widgets.panel", "app.window.main_window"),
        ("app.chat.view", "app.conversation.controller"),
    }


def test_an_arrow_between_rooms_missing_from_the_table_is_caught(tmp_path: Path) -> None:
    graph = tree(
        tmp_path,
        {
            "engine/base/errors.py": "class E(Exception): ...\n",
            "engine/runtime/job.py": "from engine.base.errors import E\nfrom engine.catalog.read import r\n",
            "engine/catalog/read.py": "from engine.base.errors import E\ndef r(): ...\n",
            "app/widgets/panel.py": "from app.services.session import S\n",
            "app/services/session.py": "S = 1\n",
        },
    )
    allowed = {"engine.runtime": {"engine.base"}, "engine.catalog": {"engine.base"}}
    exempt = {("app.widgets.panel", "app.services.session")}
    bad = layers.table_violations(graph, allowed, exempt)
    assert [(e.source, e.target) for e in bad] == [("engine.runtime.job", "engine.catalog.read")]
    assert len(layers.table_violations(graph, allowed, exempt=())) == 2
    missing, stale = layers.table_drift(graph, {**allowed, "engine.gone": set()})
    assert missing == {"engine", "app", "engine.base", "app.widgets", "app.services"}
    assert stale == {"engine.gone"}
    assert layers.unused_arrows(graph, {**allowed, "engine.base": {"engine.catalog"}}, exempt) == {
        ("engine.base", "engine.catalog")
    }
