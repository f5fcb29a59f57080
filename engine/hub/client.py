"""The Hub's API through ``huggingface_hub.HfApi``: search GGUF repositories, list one
repository's files with their sizes and SHA-256 at a fixed commit."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from engine.base.errors import HubRateLimited, NoGgufFiles
from engine.hub.access import HubAccess, hub_errors
from engine.hub.files import HubFile, RepoFiles, RepoSummary, check_git_oid, check_sha256, group_files

T = TypeVar("T")
SEARCH_LIMIT = 200
_RATE_LIMIT_RETRIES = 2
_MAX_RETRY_AFTER_S = 5.0


class HubClient:
    def __init__(self, access: HubAccess) -> None:
        from huggingface_hub import HfApi

        self.access = access
        self._api = HfApi(endpoint=access.endpoint, token=access.api_token, library_name="hearth")

    def search(self, query: str, limit: int = SEARCH_LIMIT) -> tuple[RepoSummary, ...]:
        """GGUF repositories whose name contains ``query``, most downloaded first."""
        return tuple(self.iter_search(query, limit))

    def iter_search(self, query: str, limit: int = SEARCH_LIMIT) -> Iterator[RepoSummary]:
        """``search`` one result at a time, as the Hub's pages arrive (a long list fills
        the view while later pages are still on their way)."""
        what = f"the search for {query!r}"

        def first_page() -> tuple[Any, Iterator[Any]]:
            # list_models is lazy: the first request happens at the first item
            items = iter(
                self._api.list_models(
                    search=query or None,
                    filter="gguf",
                    sort="downloads",
                    limit=limit,
                    expand=["author", "downloads", "likes", "lastModified", "gated", "tags"],
                )
            )
            return next(items, None), items

        first, rest = self._retrying(what, first_page)
        if first is None:
            return
        yield summary_of(first)
        with hub_errors(what):
            for m in rest:
                yield summary_of(m)

    def repo_files(self, repo_id: str, revision: str | None = None) -> RepoFiles:
        """The repository's GGUF files at ``revision`` (default: the newest commit), pinned
        to that commit so every later read and download sees the same bytes."""
        what = f"repository {repo_id}"
        info = self._retrying(
            what, lambda: self._api.model_info(repo_id, revision=revision, files_metadata=True)
        )
        with hub_errors(what):
            files = [
                HubFile(
                    s.rfilename,
                    int(s.size or (s.lfs.size if s.lfs else 0) or 0),
                    check_sha256(s.lfs.sha256) if s.lfs else None,
                    None if s.lfs else check_git_oid(s.blob_id),
                )
                for s in info.siblings or ()
            ]
            listing = group_files(
                repo_id, info.sha or revision or "main", files, bool(info.gated), license_of(info)
            )
        if not listing.quants:
            raise NoGgufFiles(f"{repo_id} has no GGUF model files Hearth can use.")
        return listing

    def _retrying(self, what: str, call: Callable[[], T]) -> T:
        from huggingface_hub import errors as hf

        for attempt in range(_RATE_LIMIT_RETRIES + 1):
            try:
                with hub_errors(what):
                    try:
                        return call()
                    except hf.HfHubHTTPError as exc:
                        response = exc.response
                        if response is None or response.status_code != 429 or attempt == _RATE_LIMIT_RETRIES:
                            raise
                        wait = _retry_after(response.headers.get("Retry-After"))
            except HubRateLimited:
                raise
            time.sleep(wait)
        raise AssertionError("unreachable")


def _retry_after(value: str | None) -> float:
    try:
        return min(_MAX_RETRY_AFTER_S, max(0.0, float(value))) if value else 1.0
    except ValueError:
        return 1.0


def license_of(info: Any) -> str | None:
    card = getattr(info, "card_data", None)
    license_ = getattr(card, "license", None) if card is not None else None
    if isinstance(license_, str):
        return license_
    for tag in getattr(info, "tags", None) or ():
        if isinstance(tag, str) and tag.startswith("license:"):
            return tag.removeprefix("license:")
    return None


def summary_of(m: Any) -> RepoSummary:
    last = m.last_modified.date().isoformat() if getattr(m, "last_modified", None) else None
    return RepoSummary(
        repo_id=m.id,
        author=m.author or m.id.split("/")[0],
        downloads=int(m.downloads or 0),
        likes=int(m.likes or 0),
        last_modified=last,
        license=license_of(m),
        gated=bool(m.gated),
    )
