"""A package's public names, imported only when first used (PEP 562).

Every engine package declares its exports as ``{name: submodule}``: importing the package
costs nothing (no Qt, no llama.cpp), ``from engine.runtime import Executor`` loads only the
module that defines ``Executor``, and ``engine/__init__`` builds its own map from the
packages' tables instead of restating them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

Getattr = Callable[[str], Any]


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Getattr, Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package`` whose names live in ``exports``' submodules."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__
