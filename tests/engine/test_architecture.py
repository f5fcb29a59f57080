"""The layers keep their direction: app uses the engine only through ``engine``'s public names."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import engine

REPO = Path(__file__).resolve().parents[2]


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
