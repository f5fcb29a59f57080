"""What a user types to name something on the Hub: ``owner/name``, ``owner/name:Q4_K_M``,
``owner/name:path/in/repo.gguf``, ``hf://owner/name/path/in/repo.gguf``, each optionally
with ``@revision`` after the name."""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.base.errors import HubError

_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}"
_REPO = re.compile(rf"^(?P<repo>{_NAME}/{_NAME})(?:@(?P<rev>[A-Za-z0-9._/-]+?))?(?::(?P<choice>.+))?$")
_URI = re.compile(rf"^hf://(?P<repo>{_NAME}/{_NAME})(?:@(?P<rev>[A-Za-z0-9._-]+))?(?:/(?P<file>.+))?$")


@dataclass(frozen=True)
class HubRef:
    repo_id: str
    revision: str | None = None
    choice: str | None = None  # a quantization label or a file path; None: Hearth picks


def is_hub_uri(text: str) -> bool:
    return text.startswith("hf://")


def parse_hub_ref(text: str) -> HubRef:
    text = text.strip()
    m = _URI.match(text) if is_hub_uri(text) else _REPO.match(text)
    if m is None:
        raise HubError(
            f"{text!r} does not name a Hub repository (owner/name, owner/name:Q4_K_M or hf://owner/name/file.gguf)."
        )
    choice = m["file"] if is_hub_uri(text) else m["choice"]
    return HubRef(m["repo"], m["rev"], choice or None)
