"""Hugging Face Hub: search GGUF repositories, plan a quantization from its header read over
HTTP ranges (before any download), and download it resumably, verified, into the models
folder. No Qt: the Discover tab (``app/window/discover_page.py``) and ``hearth search|pull|plan
hf://`` are thin layers over these names.

- ``access``: ``HubAccess`` (endpoint, token), ``resolve_endpoint``, errors mapped to
  one-line typed ``HubError``s.
- ``files``: ``HubFile``, ``RepoSummary``, ``QuantOption``, ``RepoFiles``; grouping split
  parts and projectors; ``safe_target`` (no name escapes the models folder).
- ``client``: ``HubClient.search`` / ``repo_files`` through ``huggingface_hub.HfApi``.
- ``remote_header``: ``inspect_remote`` and ``inspect_remote_projector`` (the catalog's reader
  over range requests, capped), ``HeaderCache``.
- ``download``: ``Downloader`` (``.part`` files, resume, SHA-256, space check, atomic rename).
- ``download_job``: ``DownloadSpec``, ``DownloadProgress``, ``DownloadState``, ``DownloadControl``.
- ``manager``: ``DownloadManager`` (at most 2 at once, pause/resume/cancel, restore).
- ``hf_uri``: ``hf://owner/name/file`` and ``owner/name[:QUANT|FILE]`` parsed.
"""

from __future__ import annotations

from engine.hub.access import DEFAULT_ENDPOINT, HubAccess, resolve_endpoint
from engine.hub.client import HubClient
from engine.hub.download import Downloader
from engine.hub.download_job import DownloadControl, DownloadProgress, DownloadSpec, DownloadState
from engine.hub.files import HubFile, QuantOption, RepoFiles, RepoSummary, group_files, safe_target
from engine.hub.hf_uri import HubRef, parse_hub_ref
from engine.hub.manager import DEFAULT_PARALLEL, DownloadManager
from engine.hub.remote_header import HeaderCache, RemoteInspection, inspect_remote, inspect_remote_projector

__all__ = [
    "DEFAULT_ENDPOINT",
    "DEFAULT_PARALLEL",
    "DownloadControl",
    "DownloadManager",
    "DownloadProgress",
    "DownloadSpec",
    "DownloadState",
    "Downloader",
    "HeaderCache",
    "HubAccess",
    "HubClient",
    "HubFile",
    "HubRef",
    "QuantOption",
    "RemoteInspection",
    "RepoFiles",
    "RepoSummary",
    "group_files",
    "inspect_remote",
    "inspect_remote_projector",
    "parse_hub_ref",
    "resolve_endpoint",
    "safe_target",
]
