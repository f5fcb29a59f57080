"""docs/ARCHITECTURE.md is the tree's map: every package and module of ``engine/`` and ``app/`` has
its line in "Every package and module", and no path in the document names something gone."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MAP = REPO / "docs" / "ARCHITECTURE.md"
SECTION = "## Every package and module"
# The rooms features not built yet will have: named before they exist, so not checked.
FUTURE = "## Where the next features go"
TOPS = ("engine", "app")

# A line of the list: "- `engine/native/probe.py` — …" (a module) or "- `engine/native/` — …" (a
# package, standing for its __init__.py), at any indent.
ENTRY = re.compile(r"^\s*- `((?:engine|app)/[^`]*)` — \S")
# A path anywhere in the document, inside backticks: `engine/…` or `app/…`, not `tests/engine/…`.
PATH = re.compile(r"(?<![\w./-])((?:engine|app)/[\w/.-]*)")


def tree_entries(root: Path) -> set[str]:
    """What the list must name: each package as ``dir/``, each other module as its file."""
    found = set()
    for top in TOPS:
        for path in (root / top).rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            rel = path.relative_to(root)
            found.add(f"{rel.parent.as_posix()}/" if path.name == "__init__.py" else rel.as_posix())
    return found


def listed_entries(text: str) -> list[str]:
    """The paths the section lists, in order (a path twice is listed twice)."""
    return [m.group(1) for line in section(text, SECTION).splitlines() if (m := ENTRY.match(line))]


def section(text: str, heading: str) -> str:
    start = text.index(heading) + len(heading)
    end = text.find("\n## ", start)
    return text[start : end if end != -1 else len(text)]


def named_paths(text: str) -> set[str]:
    """Every ``engine/…`` or ``app/…`` path in backticks anywhere in the document (the future's
    section aside)."""
    if FUTURE in text:
        text = text.replace(section(text, FUTURE), "")
    spans = re.findall(r"`([^`\n]+)`", text)
    return {m.rstrip(".,:;") for span in spans for m in PATH.findall(span)}


def map_problems(text: str, root: Path) -> list[str]:
    entries = listed_entries(text)
    expected = tree_entries(root)
    problems = [f"not on the map: {p}" for p in sorted(expected - set(entries))]
    problems += [f"on the map but not in the tree: {p}" for p in sorted(set(entries) - expected)]
    problems += [f"listed twice: {p}" for p, n in sorted(Counter(entries).items()) if n > 1]
    problems += [f"named but gone: {p}" for p in sorted(named_paths(text)) if not (root / p).exists()]
    return problems


def test_every_package_and_module_is_on_the_map_and_nothing_else() -> None:
    assert map_problems(MAP.read_text(encoding="utf-8"), REPO) == []


def test_the_map_check_fails_when_broken(tmp_path: Path) -> None:
    for name in (
        "engine/__init__.py",
        "engine/native/__init__.py",
        "engine/native/probe.py",
        "app/__init__.py",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    good = (
        f"# map\n\n{SECTION}\n\n- `engine/` — face\n- `engine/native/` — native\n"
        "  - `engine/native/probe.py` — probe\n- `app/` — app\n\n## Tests\n"
    )
    assert map_problems(good, tmp_path) == []
    (tmp_path / "engine/native/backend.py").write_text("")
    assert map_problems(good, tmp_path) == ["not on the map: engine/native/backend.py"]
    (tmp_path / "engine/native/backend.py").unlink()
    (tmp_path / "engine/native/probe.py").unlink()
    assert map_problems(good, tmp_path) == [
        "on the map but not in the tree: engine/native/probe.py",
        "named but gone: engine/native/probe.py",
    ]
    (tmp_path / "engine/native/probe.py").write_text("")
    stale = good.replace("# map\n", "# map\n\nSee `engine/gone.py` and `tests/engine/fine.py`.\n")
    assert map_problems(stale, tmp_path) == ["named but gone: engine/gone.py"]
    future = good.replace("## Tests\n", f"{FUTURE}\n\n`engine/documents/` will hold them.\n\n## Tests\n")
    assert map_problems(future, tmp_path) == []
    twice = good.replace("- `app/` — app\n", "- `app/` — app\n- `engine/` — again\n")
    assert map_problems(twice, tmp_path) == ["listed twice: engine/"]
    # Outside the section a line does not count as an entry.
    moved = (
        good.replace("  - `engine/native/probe.py` — probe\n", "") + "- `engine/native/probe.py` — probe\n"
    )
    assert map_problems(moved, tmp_path) == ["not on the map: engine/native/probe.py"]
