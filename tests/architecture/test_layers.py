"""The layers keep their direction, on the real tree: each rule of ``layers.py`` holds (its known
breaches listed, and only shrinking), and the app uses the engine only through ``engine``'s names."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import engine
from tests.architecture import layers
from tests.architecture.graph import ImportGraph, build_graph

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def graph() -> ImportGraph:
    return build_graph(REPO)


def engine_submodule_imports(root: Path, base: Path = REPO) -> list[str]:
    """``file:line module`` for every import of an ``engine.<submodule>`` under ``root``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            modules: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            if modules:
                where = f"{path.relative_to(base)}:{node.lineno}"
                found += [f"{where} {m}" for m in modules if m.startswith("engine.")]
    return found


def test_the_app_imports_only_the_engine_package() -> None:
    assert engine_submodule_imports(REPO / "app") == []


def test_the_check_finds_a_submodule_import(tmp_path: Path) -> None:
    bad = "def f():\n    from engine.runtime.executor import Executor\nimport engine.catalog\n"
    (tmp_path / "bad.py").write_text(bad)
    assert len(engine_submodule_imports(tmp_path, tmp_path)) == 2


def test_every_public_name_resolves() -> None:
    for name in engine.__all__:
        assert getattr(engine, name) is not None, name
    target = engine.exports()["run_native_probe_child"]
    assert engine.run_native_probe_child is importlib.import_module(target.split(":")[0]).child_main


def test_the_graph_reads_the_whole_tree(graph: ImportGraph) -> None:
    files = {
        p for top in ("engine", "app") for p in (REPO / top).rglob("*.py") if "__pycache__" not in p.parts
    }
    assert len(graph.modules) == len(files)
    # Deferred imports are edges like any other (a third of the app's CLI is imported in functions).
    assert any(e.source == "engine.native.backend" and e.deferred for e in graph.internal())
    # ``from engine import X`` is an edge to the module that defines X, not to the face.
    assert not any(e.target == "engine" for e in graph.internal())


def test_no_new_circle_of_modules_and_no_known_one_gone(graph: ImportGraph) -> None:
    new, gone = layers.cycle_drift(graph)
    assert not new, f"new circles of imports (break them): {[sorted(c) for c in new]}"
    assert not gone, f"circles gone (delete them from KNOWN_CYCLES): {[sorted(c) for c in gone]}"


def test_the_engine_imports_neither_the_app_nor_qt_widgets(graph: ImportGraph) -> None:
    assert [str(e) for e in layers.engine_violations(graph)] == []


def test_the_scheduler_and_the_speculation_policy_stay_pure(graph: ImportGraph) -> None:
    assert [str(e) for e in layers.purity_violations(graph)] == []


def test_widgets_import_no_service_controller_or_window_beyond_the_known(graph: ImportGraph) -> None:
    found = set(layers.widget_imports(graph))
    new, gone = found - layers.KNOWN_WIDGET_IMPORTS, layers.KNOWN_WIDGET_IMPORTS - found
    assert not new, f"widgets importing services, controllers or the window: {sorted(new)}"
    assert not gone, f"fixed (delete them from KNOWN_WIDGET_IMPORTS): {sorted(gone)}"


def test_every_import_between_rooms_is_in_the_table(graph: ImportGraph) -> None:
    assert [str(e) for e in layers.table_violations(graph)] == []


def test_the_table_has_a_line_for_every_room_and_no_other(graph: ImportGraph) -> None:
    missing, stale = layers.table_drift(graph)
    assert not missing, f"rooms without a line in ALLOWED: {sorted(missing)}"
    assert not stale, f"ALLOWED lines for rooms that are gone: {sorted(stale)}"


def test_the_table_allows_no_arrow_the_tree_does_not_use(graph: ImportGraph) -> None:
    assert sorted(layers.unused_arrows(graph)) == [], "delete these arrows from ALLOWED"


def test_the_table_itself_breaks_no_rule() -> None:
    for room, targets in layers.ALLOWED.items():
        assert room not in targets, room
        if layers.within(room, "engine"):
            assert not [t for t in targets if layers.within(t, "app")], room
        if room in layers.WIDGET_ROOMS:
            assert not targets & set(layers.NOT_FOR_WIDGETS), room
        if room in layers.PURE:
            assert targets <= set(layers.PURE_MAY_REACH), room


def test_probing_the_face_for_a_dunder_imports_nothing() -> None:
    # PySide6's import hook reads ``__wrapped__`` on every module: that must not import the
    # packages (numpy, gguf) behind the face.
    code = (
        "import sys, engine\n"
        "assert not hasattr(engine, '__wrapped__')\n"
        "heavy = [m for m in ('numpy', 'gguf', 'llama_cpp', 'engine.catalog') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
