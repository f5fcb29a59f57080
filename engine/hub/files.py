"""What a repository offers, as values: its GGUF files grouped into quantizations (a split
GGUF is one choice), its vision projectors, and where each file may land on disk."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from engine.base.errors import NoGgufFiles, UnsafeFileName

_SPLIT = re.compile(r"^(?P<stem>.*)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)
# The quantization names llama.cpp's tools write into file names (Q4_K_M, IQ3_XXS, BF16,
# MXFP4_MOE, unsloth's UD-Q4_K_XL, ...), between separators.
_QUANT = re.compile(
    r"(?<![A-Za-z0-9])((?:UD-)?(?:I?Q\d(?:_[A-Z0-9]{1,4}){0,3}|TQ\d_\d|MXFP4(?:_MOE)?|BF16|F16|F32|FP16|FP32))"
    r"(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_GIT_OID = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class HubFile:
    """One file of a repository at one commit."""

    path: str  # as the repository names it ("Q4_K_M/model-00001-of-00002.gguf")
    size: int
    sha256: str | None  # the LFS object id the Hub publishes; None for non-LFS files
    git_oid: str | None = None  # a file kept in git itself (small): its blob id, SHA-1 of "blob N\0" + bytes

    @property
    def name(self) -> str:
        return PurePosixPath(self.path).name

    def new_hasher(self) -> Any:
        """What checks this file's bytes: SHA-256 for LFS files, git's blob SHA-1 otherwise."""
        if self.sha256 is not None or self.git_oid is None:
            return hashlib.sha256()
        hasher = hashlib.sha1(usedforsecurity=False)
        hasher.update(f"blob {self.size}\0".encode())
        return hasher

    @property
    def expected_digest(self) -> str | None:
        return self.sha256 or self.git_oid


@dataclass(frozen=True)
class RepoSummary:
    """One search result."""

    repo_id: str
    author: str
    downloads: int
    likes: int
    last_modified: str | None  # ISO date
    license: str | None
    gated: bool


@dataclass(frozen=True)
class QuantOption:
    """One downloadable model: a single GGUF, or every part of a split one (first first)."""

    label: str  # "Q4_K_M", or the file's stem when the name says no quantization
    files: tuple[HubFile, ...]

    @property
    def first(self) -> HubFile:
        return self.files[0]

    @property
    def total_size(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def is_split(self) -> bool:
        return len(self.files) > 1


@dataclass(frozen=True)
class RepoFiles:
    """A repository's GGUF offer at one commit."""

    repo_id: str
    commit: str
    gated: bool
    license: str | None
    quants: tuple[QuantOption, ...]
    projectors: tuple[HubFile, ...]

    def find(self, choice: str | None) -> QuantOption:
        """The option named ``choice``: a quantization ("Q4_K_M", any case) or a file path;
        ``None`` picks Q4_K_M when offered, else the smallest."""
        if not self.quants:
            raise NoGgufFiles(f"{self.repo_id} has no GGUF model files.")
        if choice is None:
            preferred = [q for q in self.quants if q.label.upper() == "Q4_K_M"]
            return preferred[0] if preferred else min(self.quants, key=lambda q: q.total_size)
        for q in self.quants:
            if q.label.upper() == choice.upper() or any(f.path == choice for f in q.files):
                return q
        for p in self.projectors:
            if p.path == choice:
                return QuantOption(quant_label(p.path), (p,))
        offered = ", ".join(q.label for q in self.quants)
        raise NoGgufFiles(f"{self.repo_id} has no {choice!r}; it offers {offered}.")


def quant_label(path: str) -> str:
    name = PurePosixPath(path).name
    stem = m["stem"] if (m := _SPLIT.match(name)) else name.removesuffix(".gguf").removesuffix(".GGUF")
    found = _QUANT.findall(stem)
    return found[-1].upper() if found else stem


def is_projector_name(path: str) -> bool:
    return "mmproj" in PurePosixPath(path).name.lower()


def group_files(repo_id: str, commit: str, files: list[HubFile], gated: bool = False,
                license: str | None = None) -> RepoFiles:  # fmt: skip
    """GGUF files grouped into options; split parts joined (only when every part is there),
    projectors apart. Sorted by size, smallest first."""
    singles: list[QuantOption] = []
    splits: dict[tuple[str, str, int], dict[int, HubFile]] = {}
    projectors: list[HubFile] = []
    for f in files:
        if not f.path.lower().endswith(".gguf"):
            continue
        if is_projector_name(f.path):
            projectors.append(f)
            continue
        m = _SPLIT.match(f.name)
        if m and int(m["count"]) > 1:
            parent = str(PurePosixPath(f.path).parent)
            splits.setdefault((parent, m["stem"], int(m["count"])), {})[int(m["index"])] = f
        else:
            singles.append(QuantOption(quant_label(f.path), (f,)))
    for (_parent, _stem, count), parts in splits.items():
        if sorted(parts) == list(range(1, count + 1)):
            ordered = tuple(parts[i] for i in range(1, count + 1))
            singles.append(QuantOption(quant_label(ordered[0].path), ordered))
    singles.sort(key=lambda q: (q.total_size, q.label))
    projectors.sort(key=lambda p: p.size)
    return RepoFiles(repo_id, commit, gated, license, tuple(singles), tuple(projectors))


def check_sha256(value: object) -> str | None:
    return value.lower() if isinstance(value, str) and _SHA256.match(value.lower()) else None


def check_git_oid(value: object) -> str | None:
    return value.lower() if isinstance(value, str) and _GIT_OID.match(value.lower()) else None


def safe_target(models_dir: Path, repo_id: str, path: str) -> Path:
    """Where ``path`` of ``repo_id`` lands: ``models_dir/owner/name/path``.

    A repository controls these names, so every part is checked: no absolute paths, no
    ``..``, no backslashes or control characters, no hidden names; and the result must
    still lie inside ``models_dir`` once symlinks are resolved.
    """
    parts = [*repo_id.split("/"), *path.split("/")]
    for part in parts:
        if (
            not part
            or part in (".", "..")
            or part.startswith(".")
            or "\\" in part
            or not part.isprintable()
            or len(part.encode()) > 255
        ):
            raise UnsafeFileName(
                f"Refusing the file name {path!r} from {repo_id}: it could leave the models folder."
            )
    if len(repo_id.split("/")) != 2:
        raise UnsafeFileName(f"Refusing the repository name {repo_id!r}.")
    root = models_dir.resolve()
    target = root.joinpath(*parts)
    if not target.resolve().is_relative_to(root):
        raise UnsafeFileName(
            f"Refusing the file name {path!r} from {repo_id}: it leads outside the models folder."
        )
    return target
