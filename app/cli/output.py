"""How the CLI prints: one JSON document, or aligned ``label: value`` rows."""

from __future__ import annotations

import json
import sys
from typing import Any


def print_json(value: Any) -> None:
    from engine import to_jsonable

    json.dump(to_jsonable(value), sys.stdout, indent=2)
    sys.stdout.write("\n")


def print_rows(rows: list[tuple[str, str]]) -> None:
    width = max((len(label) for label, _ in rows), default=0)
    for label, value in rows:
        print(f"{label + ':':<{width + 1}} {value}")
