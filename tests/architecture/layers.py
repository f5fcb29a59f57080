"""The layering rules of ``engine/`` and ``app/``, written once as data, and the checks that apply them.

Each ``*_violations``/``*_drift`` function takes an :class:`ImportGraph` and returns what breaks a
rule (empty when it holds), so the tests can run it on the real tree and on a small bad one.
Known breaches are listed, not hidden: ``KNOWN_CYCLES`` and ``KNOWN_WIDGET_IMPORTS`` may only
shrink, and a test fails as soon as a listed one is gone (remove it here then).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping

from tests.architecture.graph import Edge, ImportGraph, unit

# Rooms that draw (widgets) and what they must not reach: the services they are fed by, the
# controllers that drive them, and the window that owns them. Widgets get values and signals.
WIDGET_ROOMS = ("app.widgets", "app.chat", "app.dashboard")
NOT_FOR_WIDGETS = ("app.services", "app.conversation", "app.window")

# What the engine never imports, wherever the import stands (deferred or TYPE_CHECKING too):
# the app above it, and Qt's widgets and painting (QtCore's signals and threads are the engine's).
ENGINE_NEVER = ("app", "PySide6.QtWidgets", "PySide6.QtGui")

# Modules that stay pure policy: what they import, transitively, is the standard library and
# the modules of PURE_MAY_REACH, nothing else (no llama_cpp, no Qt, no numpy).
PURE = ("engine.scheduler", "engine.speculation.policy")
PURE_MAY_REACH = ("engine.base",)

# Circles of modules (strongly connected components over imports that run) tolerated for now:
# none. A circle that must stay for a while is listed here, and the set may only shrink.
KNOWN_CYCLES: frozenset[frozenset[str]] = frozenset()

# Widgets importing a service, a controller or the window, tolerated for now: none (module,
# module it imports); the set may only shrink.
KNOWN_WIDGET_IMPORTS: frozenset[tuple[str, str]] = frozenset()

# Which room may import which, a room being a package under a root (``engine.native``) or a root
# module (``engine.loaded_model``): what the tree did when this was written, less what the rules
# above forbid. A new room, or a new arrow between rooms, is a line here first. Imports inside
# a room are free (the cycle rule still watches them). Arrows worth undoing are commented.
ALLOWED: Mapping[str, frozenset[str]] = {
    room: frozenset(targets)
    for room, targets in {
        "app": (),
        "app.__main__": {"app.cli", "engine.model_process", "engine.native", "engine.rpc"},
        "app.api": {
            "app.wording",
            "engine.base",
            "engine.chat",
            "engine.documents",
            "engine.loaded_model",
            "engine.multimodal",
            "engine.planner",
            "engine.requests",
            "engine.sampling",
            "engine.speculation",
        },
        "app.application": {
            "app.platform",
            "app.services",
            "app.settings",
            "app.store",
            "app.window",
            "engine.machine",
        },
        "app.chat": {
            "app.settings",
            "app.state",
            "engine.base",
            "engine.chat",
            "engine.documents",
            "engine.planner",
            "engine.requests",
            "engine.sampling",
        },
        "app.cli": {
            "app.api",
            "app.application",
            "app.platform",
            "app.services",
            "app.settings",
            "app.wording",
            "engine.base",
            "engine.catalog",
            "engine.chat",
            "engine.devtools",
            "engine.documents",
            "engine.hub",
            "engine.loaded_model",
            "engine.machine",
            "engine.multimodal",
            "engine.planner",
            "engine.requests",
            "engine.rpc",
            "engine.sampling",
            "engine.speculation",
            "engine.tools",
        },
        "app.conversation": {
            "app.chat",
            "app.services",
            "app.settings",
            "app.state",
            "app.store",
            "app.wording",
            "engine.base",
            "engine.catalog",
            "engine.chat",
            "engine.chat_model",
            "engine.documents",
            "engine.library",  # the draft model paired with a model never loaded
            "engine.machine",
            "engine.multimodal",
            "engine.planner",
            "engine.remote",
            "engine.requests",
            "engine.speculation",
            "engine.tools",
        },
        "app.dashboard": {
            "app.widgets",
            "engine.base",
            "engine.machine",
            "engine.native",
            "engine.planner",
            "engine.requests",
        },
        # the self-test starts the window (deferred)
        "app.platform": {
            "app.application",
            "engine.base",
            "engine.catalog",
            "engine.chat",
            "engine.devtools",
            "engine.documents",
            "engine.loaded_model",
            "engine.machine",
            "engine.native",
            "engine.planner",
            "engine.requests",
            "engine.sampling",
        },
        "app.services": {
            "app.api",
            "app.platform",
            "app.settings",
            "app.state",
            "app.store",
            "engine.base",
            "engine.catalog",
            "engine.chat",
            "engine.chat_model",
            "engine.documents",
            "engine.hub",
            "engine.library",
            "engine.loaded_model",
            "engine.machine",
            "engine.planner",
            "engine.remote",
            "engine.rpc",
            "engine.speculation",
            "engine.tools",
        },
        # preferences read the sampling panel's SamplingSettings
        "app.settings": {
            "app.chat",
            "app.platform",
            "engine.base",
            "engine.catalog",
            "engine.hub",
            "engine.library",  # first_request pairs the library's draft model
            "engine.planner",
            "engine.speculation",
        },
        "app.state": {"engine.base", "engine.planner", "engine.remote"},
        "app.store": {"engine.base", "engine.chat"},
        "app.widgets": {
            "app.api",
            "app.chat",
            "app.platform",
            "app.settings",
            "app.state",
            "app.wording",
            "engine.base",
            "engine.catalog",
            "engine.chat_model",
            "engine.documents",
            "engine.hub",
            "engine.library",
            "engine.machine",
            "engine.planner",
            "engine.remote",
            "engine.rpc",
            "engine.speculation",
            "engine.tools",
        },
        "app.window": {
            "app.chat",
            "app.conversation",
            "app.dashboard",
            "app.platform",
            "app.services",
            "app.settings",
            "app.state",
            "app.store",
            "app.widgets",
            "app.wording",
            "engine.base",
            "engine.catalog",
            "engine.chat_model",
            "engine.documents",
            "engine.hub",
            "engine.library",
            "engine.loaded_model",
            "engine.machine",
            "engine.planner",
            "engine.remote",
            "engine.requests",
            "engine.speculation",
        },
        "app.wording": {"engine.base", "engine.catalog", "engine.planner"},
        "engine": (),
        "engine.base": (),
        "engine.catalog": {"engine.base"},
        "engine.chat": {"engine.base", "engine.sampling"},
        "engine.chat_model": {"engine.chat", "engine.requests"},
        "engine.tools": {"engine.base", "engine.chat", "engine.requests"},
        "engine.documents": {
            "engine.base",
            "engine.catalog",
            "engine.chat",
            "engine.machine",
            "engine.native",
            "engine.planner",
        },
        "engine.devtools": {
            "engine.base",
            "engine.catalog",
            "engine.chat",
            "engine.loaded_model",
            "engine.machine",
            "engine.native",
            "engine.planner",
            "engine.requests",
            "engine.sampling",
            "engine.speculation",
        },
        "engine.hub": {"engine.base", "engine.catalog"},
        "engine.library": {"engine.base", "engine.catalog"},
        "engine.loaded_model": {
            "engine.base",
            "engine.chat",
            "engine.chat_model",
            "engine.model_process",
            "engine.planner",
            "engine.requests",
            "engine.runtime",
            "engine.speculation",
        },
        "engine.machine": {"engine.base", "engine.native"},
        "engine.model_process": {
            "engine.base",
            "engine.chat",
            "engine.native",
            "engine.planner",
            "engine.requests",
            "engine.rpc",
            "engine.runtime",
        },
        "engine.multimodal": {"engine.base", "engine.catalog", "engine.native", "engine.scheduler"},
        # the probe writes a tiny model (devtools) to check a build
        "engine.native": {
            "engine.base",
            "engine.catalog",
            "engine.devtools",
            "engine.machine",
            "engine.planner",
        },
        "engine.planner": {"engine.base", "engine.catalog", "engine.machine", "engine.speculation"},
        "engine.remote": {"engine.base", "engine.chat", "engine.chat_model", "engine.requests"},
        "engine.requests": {"engine.base", "engine.chat", "engine.machine", "engine.sampling"},
        "engine.rpc": {"engine.base", "engine.machine", "engine.native"},
        "engine.runtime": {
            "engine.base",
            "engine.catalog",
            "engine.chat",
            "engine.machine",
            "engine.multimodal",
            "engine.native",
            "engine.planner",
            "engine.requests",
            "engine.rpc",
            "engine.sampling",
            "engine.scheduler",
            "engine.speculation",
        },
        "engine.sampling": {"engine.base"},
        "engine.scheduler": {"engine.base"},
        "engine.speculation": {
            "engine.base",
            "engine.catalog",
            "engine.native",
            "engine.planner",
            "engine.scheduler",
        },
    }.items()
}


def within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def cycle_drift(
    graph: ImportGraph, known: Iterable[frozenset[str]] = KNOWN_CYCLES
) -> tuple[set[frozenset[str]], set[frozenset[str]]]:
    """``(new, gone)``: circles the tree has that ``known`` does not list, and listed ones it lost."""
    found, known = graph.cycles(), set(known)
    return found - known, known - found


def engine_violations(graph: ImportGraph, never: Iterable[str] = ENGINE_NEVER) -> list[Edge]:
    """Imports in ``engine`` of what it must never import."""
    never = tuple(never)
    return [e for e in graph.edges if within(e.source, "engine") and any(e.reaches(f) for f in never)]


def purity_violations(
    graph: ImportGraph, pure: Iterable[str] = PURE, may_reach: Iterable[str] = PURE_MAY_REACH
) -> list[Edge]:
    """Imports, in a pure module or in what it reaches, of anything but the standard library and
    the pure modules themselves (TYPE_CHECKING ones too: pure means not even for a type)."""
    inside = (*pure, *may_reach)
    reached = {m for m in graph.modules if any(within(m, p) for p in pure)}
    todo = sorted(reached)
    bad: list[Edge] = []
    while todo:
        module = todo.pop()
        for edge in (e for e in graph.edges if e.source == module):
            if not edge.internal:
                if edge.target.split(".")[0] not in sys.stdlib_module_names:
                    bad.append(edge)
            elif not any(within(edge.target, p) for p in inside):
                bad.append(edge)
            elif edge.target not in reached:
                reached.add(edge.target)
                todo.append(edge.target)
    return bad


def widget_imports(
    graph: ImportGraph, rooms: Iterable[str] = WIDGET_ROOMS, forbidden: Iterable[str] = NOT_FOR_WIDGETS
) -> dict[tuple[str, str], list[Edge]]:
    """``(widget module, module)`` → the imports of a service, controller or window by a widget."""
    rooms, forbidden = tuple(rooms), tuple(forbidden)
    found: dict[tuple[str, str], list[Edge]] = {}
    for edge in graph.internal():
        if any(within(edge.source, r) for r in rooms) and any(within(edge.target, f) for f in forbidden):
            found.setdefault((edge.source, edge.target), []).append(edge)
    return found


def table_violations(
    graph: ImportGraph,
    allowed: Mapping[str, Iterable[str]] = ALLOWED,
    exempt: Iterable[tuple[str, str]] = KNOWN_WIDGET_IMPORTS,
) -> list[Edge]:
    """Imports between rooms that the table does not allow (``exempt`` pairs of modules aside:
    the known widget imports, which their own rule tracks)."""
    exempt = set(exempt)
    return [
        edge
        for (source, target), edges in sorted(graph.unit_edges().items())
        if target not in allowed.get(source, ())
        for edge in edges
        if (edge.source, edge.target) not in exempt
    ]


def table_drift(
    graph: ImportGraph, allowed: Mapping[str, Iterable[str]] = ALLOWED
) -> tuple[set[str], set[str]]:
    """``(missing, stale)``: rooms of the tree the table has no line for, and lines for rooms
    that no longer exist."""
    rooms = {unit(m) for m in graph.modules}
    return rooms - set(allowed), set(allowed) - rooms


def unused_arrows(
    graph: ImportGraph,
    allowed: Mapping[str, Iterable[str]] = ALLOWED,
    exempt: Iterable[tuple[str, str]] = KNOWN_WIDGET_IMPORTS,
) -> set[tuple[str, str]]:
    """Arrows the table allows that no import uses any more (delete them: the table is today's)."""
    exempt = set(exempt)
    used = {
        pair
        for pair, edges in graph.unit_edges().items()
        if any((e.source, e.target) not in exempt for e in edges)
    }
    return {(room, target) for room, targets in allowed.items() for target in targets} - used
