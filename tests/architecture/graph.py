"""The import graph of ``engine/`` and ``app/``, read from the source with ``ast`` (nothing imported).

Every ``import`` and ``from … import`` becomes an :class:`Edge`, wherever it stands: at module
level, inside a function (``deferred``: it runs at the first call, so it still closes a circle)
or under ``if TYPE_CHECKING:`` (``type_only``: it never runs). A name taken from a package
counts as an import of the module that defines it: a package's ``__init__`` is a face (a lazy
``_EXPORTS`` table, its own re-exports, or ``engine``'s ``_PACKAGES``/``_ALIASES``), not a
dependency, so ``from engine import Executor`` is an edge to ``engine.runtime.executor``.
Imports through ``importlib.import_module`` are not read (there are two: the self-test's and the
demo model's chunk packages).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

TOPS = ("engine", "app")


@dataclass(frozen=True)
class Edge:
    """One import: ``source`` (a module of the tree) needs ``target`` (a module of the tree, or a
    third-party/stdlib dotted name with the ``names`` taken from it)."""

    source: str
    target: str
    line: int
    internal: bool
    deferred: bool = False
    type_only: bool = False
    names: tuple[str, ...] = ()

    def reaches(self, forbidden: str) -> bool:
        """Whether this import is ``forbidden`` or inside it (``PySide6.QtWidgets`` also matches
        ``from PySide6 import QtWidgets``)."""
        candidates = [self.target, *(f"{self.target}.{n}" for n in self.names)]
        return any(c == forbidden or c.startswith(forbidden + ".") for c in candidates)

    def __str__(self) -> str:
        how = " (deferred)" if self.deferred else " (TYPE_CHECKING)" if self.type_only else ""
        return f"{self.source}:{self.line} -> {self.target}{how}"


def unit(module: str) -> str:
    """The room a module lives in: its package under a root (``engine.native``), or itself for a
    root module (``engine.loaded_model``, ``app.application``, ``engine``)."""
    return ".".join(module.split(".")[:2])


@dataclass(frozen=True)
class ImportGraph:
    modules: frozenset[str]
    edges: tuple[Edge, ...]
    packages: frozenset[str] = field(default=frozenset())

    def internal(self, *, runtime_only: bool = False) -> list[Edge]:
        return [e for e in self.edges if e.internal and not (runtime_only and e.type_only)]

    def cycles(self) -> set[frozenset[str]]:
        """Every circle of modules (a strongly connected component of more than one module, or a
        module importing itself), over the imports that run: deferred ones count, TYPE_CHECKING
        ones do not (they never execute, so they cannot half-initialise a module)."""
        graph: dict[str, set[str]] = {m: set() for m in self.modules}
        for edge in self.internal(runtime_only=True):
            graph[edge.source].add(edge.target)
        found = set()
        for component in strongly_connected(graph):
            if len(component) > 1 or next(iter(component)) in graph[next(iter(component))]:
                found.add(frozenset(component))
        return found

    def unit_edges(self) -> dict[tuple[str, str], list[Edge]]:
        """``(from room, to room)`` → the imports behind it, rooms as :func:`unit` names them."""
        found: dict[tuple[str, str], list[Edge]] = {}
        for edge in self.internal():
            pair = (unit(edge.source), unit(edge.target))
            if pair[0] != pair[1]:
                found.setdefault(pair, []).append(edge)
        return found

    def deferred(self) -> list[Edge]:
        return [e for e in self.internal() if e.deferred]


def strongly_connected(graph: dict[str, set[str]]) -> Iterator[set[str]]:
    """Tarjan's components, iteratively (the graph is a few hundred nodes, recursion would do, but
    a deep chain should not hit the interpreter's limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    yield component


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files(root: Path, tops: Iterable[str] = TOPS) -> dict[str, Path]:
    """``{dotted module: file}`` for every module under ``root/<top>``."""
    return {
        module_name(path, root): path
        for top in tops
        if (root / top).is_dir()
        for path in sorted((root / top).rglob("*.py"))
        if "__pycache__" not in path.parts
    }


@dataclass(frozen=True)
class _Import:
    module: str | None  # None for ``import a.b``
    names: tuple[tuple[str, str], ...]  # (name, as-name) pairs; for ``import a.b``: (("a.b", ...),)
    line: int
    deferred: bool
    type_only: bool


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, deferred: bool = False, type_only: bool = False) -> Iterator[_Import]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import):
            yield _Import(
                None,
                tuple((a.name, a.asname or a.name) for a in node.names),
                node.lineno,
                deferred,
                type_only,
            )
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                raise ValueError(
                    f"relative import at line {node.lineno}: the graph reads absolute imports only"
                )
            if node.module != "__future__":
                names = tuple((a.name, a.asname or a.name) for a in node.names)
                yield _Import(node.module, names, node.lineno, deferred, type_only)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                yield from _imports(ast.Module(body=[child], type_ignores=[]), deferred, True)
            for child in node.orelse:
                yield from _imports(ast.Module(body=[child], type_ignores=[]), deferred, type_only)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _imports(node, True, type_only)
        else:
            yield from _imports(node, deferred, type_only)


def _literal(tree: ast.Module, name: str) -> object:
    """The value of a module-level ``name = <literal>`` (or ``name: T = <literal>``), else None."""
    for node in tree.body:
        target, value = None, None
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            target, value = node.target.id, node.value
        if target == name and value is not None:
            try:
                return ast.literal_eval(value)
            except ValueError:
                return None
    return None


@dataclass
class _Faces:
    """What each package's ``__init__`` (and ``engine``'s face) says about where a name lives."""

    modules: set[str]
    tables: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)
    ordered: dict[str, tuple[str, ...]] = field(default_factory=dict)
    listed: dict[str, set[str]] = field(default_factory=dict)

    def exported(self, module: str) -> set[str]:
        return set(self.tables.get(module, {})) | self.listed.get(module, set())

    def resolve(self, module: str, name: str, seen: frozenset[tuple[str, str]] = frozenset()) -> str:
        """The module that defines ``name`` as ``from module import name`` finds it."""
        if f"{module}.{name}" in self.modules:
            return f"{module}.{name}"
        if (module, name) in seen:
            return module
        seen = seen | {(module, name)}
        if name in self.tables.get(module, {}):
            owner, attr = self.tables[module][name]
            return self.resolve(owner, attr, seen)
        for package in self.ordered.get(module, ()):
            if name in self.exported(package):
                return self.resolve(package, name, seen)
        return module


def _read_faces(trees: dict[str, ast.Module], packages: set[str]) -> _Faces:
    faces = _Faces(set(trees))
    for module, tree in trees.items():
        table: dict[str, tuple[str, str]] = {}
        exports = _literal(tree, "_EXPORTS")
        if module in packages and isinstance(exports, dict):
            table |= {name: (f"{module}.{sub}", name) for name, sub in exports.items()}
        aliases = _literal(tree, "_ALIASES")
        if isinstance(aliases, dict):
            table |= {name: tuple(target.split(":", 1)) for name, target in aliases.items()}
        ordered = _literal(tree, "_PACKAGES")
        if isinstance(ordered, tuple | list):
            faces.ordered[module] = tuple(ordered)
        if module in packages:
            # An eager package's re-exports: ``from engine.catalog.inspection import inspect``.
            for node in tree.body:
                if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(module + "."):
                    table |= {a.asname or a.name: (node.module, a.name) for a in node.names}
        listed = _literal(tree, "__all__")
        if isinstance(listed, list | tuple):
            faces.listed[module] = set(listed)
        faces.tables[module] = table
    return faces


def build_graph(root: Path, tops: Iterable[str] = TOPS) -> ImportGraph:
    """The graph of every module under ``root/<top>`` (``root`` is the repository or a tmp tree)."""
    tops = tuple(tops)
    files = source_files(root, tops)
    trees = {module: ast.parse(path.read_text(encoding="utf-8"), str(path)) for module, path in files.items()}
    packages = {module for module, path in files.items() if path.name == "__init__.py"}
    faces = _read_faces(trees, packages)
    modules = set(files)
    edges: list[Edge] = []
    for source, tree in trees.items():
        for imp in _imports(tree):
            flags = {"line": imp.line, "deferred": imp.deferred, "type_only": imp.type_only}
            if imp.module is None:
                for name, _ in imp.names:
                    inside = name.split(".")[0] in tops
                    target = _longest_known(name, modules) if inside else name
                    edges.append(Edge(source, target, internal=inside, **flags))
            elif imp.module.split(".")[0] in tops:
                targets = {faces.resolve(imp.module, name) for name, _ in imp.names}
                edges += [Edge(source, t, internal=True, **flags) for t in sorted(targets)]
            else:
                names = tuple(name for name, _ in imp.names)
                edges.append(Edge(source, imp.module, internal=False, names=names, **flags))
    for edge in edges:
        if edge.internal and edge.target not in modules:
            raise ValueError(f"{edge}: no such module in the tree")
    return ImportGraph(frozenset(modules), tuple(edges), frozenset(packages))


def _longest_known(dotted: str, modules: set[str]) -> str:
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return dotted
