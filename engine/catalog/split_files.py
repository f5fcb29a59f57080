"""Split GGUFs ("x-00001-of-00003.gguf"): the names of every part, and the headers of parts
2..N read and checked to belong to the first."""

from __future__ import annotations

import re
from pathlib import Path

from engine.base.errors import InvalidModelFile
from engine.catalog.gguf_header import Header, as_int, check_complete, parse_header
from engine.catalog.gguf_reader import Opener, invalid_file, open_reader

_SPLIT_RE = re.compile(r"^(?P<stem>.*)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)


def split_part_paths(path: Path | str, count: int | None = None) -> tuple[Path, ...]:
    """Every part of the split GGUF ``path`` names ("x-00002-of-00003.gguf"), first first.

    Empty when the name does not follow the llama.cpp split naming convention.
    """
    path = Path(path)
    m = _SPLIT_RE.match(path.name)
    if not m:
        return ()
    n = int(m["count"])
    if count is not None and count != n:
        return ()
    stem, width = m["stem"], len(m["index"])
    return tuple(path.with_name(f"{stem}-{i:0{width}d}-of-{m['count']}.gguf") for i in range(1, n + 1))


def read_split_parts(path: Path, count: int, opener: Opener = open_reader) -> list[tuple[Path, int, Header]]:
    names = split_part_paths(path, count)
    if not names:
        raise invalid_file(
            path, f"split model in {count} parts, but the file name does not say where the others are"
        )
    parts: list[tuple[Path, int, Header]] = []
    for index, part in enumerate(names[1:], start=1):
        label = f"part {index + 1} of {count} ({part.name})"
        try:
            with opener(part) as reader:
                header = parse_header(reader, check_vocab=False)
                check_complete(reader, header)
        except InvalidModelFile as exc:
            raise invalid_file(path, f"split model {label}: {exc.reason}") from None
        says = (as_int(header.scalars.get("split.no")), as_int(header.scalars.get("split.count")))
        if says != (index, count):
            raise invalid_file(path, f"split model {label} belongs to another model")
        parts.append((part, reader.size, header))
    return parts
