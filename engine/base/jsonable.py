"""Turn engine values (dataclasses, enums, paths) into JSON-ready data for the CLI and APIs."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def to_jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        for name in _properties(type(value)):
            out[name] = to_jsonable(getattr(value, name))
        return out
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def _properties(cls: type) -> list[str]:
    """Public read-only properties are part of a value's meaning (e.g. LoadPlan.total_bytes)."""
    names = []
    for klass in reversed(cls.__mro__):
        for name, attr in vars(klass).items():
            if isinstance(attr, property) and not name.startswith("_") and name not in names:
                names.append(name)
    return names
