"""``hearth search``, ``hearth pull`` and ``hearth plan hf://…``: the Discover tab in a terminal."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from app.cli.output import print_json
from app.platform.paths import AppPaths
from app.services.planning import planning_hardware
from app.settings.hub_settings import header_cache_dir, hub_access, load_settings
from engine import DownloadProgress, DownloadState, format_bytes


def add_commands(sub: Any) -> None:
    p = sub.add_parser("search", help="search the Hugging Face Hub for GGUF models")
    p.add_argument("query")
    p.add_argument("--limit", type=int, default=30, help="most results shown (default 30)")
    p.add_argument("--json", action="store_true", help="print one JSON array")

    p = sub.add_parser(
        "pull", help="download a GGUF model from the Hub into the models folder (resumes where it stopped)"
    )
    p.add_argument(
        "ref", metavar="REPO[:QUANT|FILE]", help="e.g. bartowski/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M"
    )
    p.add_argument("--with-projector", action="store_true", help="also download the repository's mmproj file")
    p.add_argument("--no-plan", action="store_true", help="do not read the header to show the plan first")
    p.add_argument("--json", action="store_true", help="print one JSON object at the end")
    # Also after the command (`hearth pull X --models-dir D`); SUPPRESS keeps `hearth
    # --models-dir D pull X` from being overwritten by this option's default.
    p.add_argument("--models-dir", type=Path, default=argparse.SUPPRESS, help="download into this folder")


def cmd_search(args: argparse.Namespace, paths: AppPaths) -> int:
    from engine import HubClient

    results = HubClient(hub_access(paths)).search(args.query, limit=max(1, args.limit))
    if args.json:
        print_json(list(results))
        return 0
    if not results:
        print(f"No GGUF repositories match {args.query!r}.")
        return 0
    width = min(60, max(len(r.repo_id) for r in results))
    for r in results:
        gated = " · gated" if r.gated else ""
        print(
            f"{r.repo_id:<{width}}  {r.downloads:>10,} downloads  {r.likes:>6,} likes  "
            f"{r.last_modified or '':<10}  {r.license or '-'}{gated}"
        )
    return 0


def remote_plan(paths: AppPaths, ref_text: str, request: Any, hardware: Any = None) -> tuple[Any, Any]:
    """(plan, inspection) of a file on the Hub, from its header alone, for ``hardware``
    (a ``HardwareSnapshot``; None: this machine alone)."""
    from engine import HeaderCache, HubClient, inspect_remote, parse_hub_ref, plan_load

    access = hub_access(paths)
    ref = parse_hub_ref(ref_text)
    listing = HubClient(access).repo_files(ref.repo_id, ref.revision)
    option = listing.find(ref.choice)
    inspection = inspect_remote(access, listing, option, HeaderCache(header_cache_dir(paths)))
    return plan_load(inspection.info, hardware or planning_hardware(), request), inspection


def cmd_pull(args: argparse.Namespace, paths: AppPaths) -> int:
    from app.wording.presenters import fit_summary
    from engine import (
        DownloadControl,
        Downloader,
        DownloadSpec,
        HeaderCache,
        HubClient,
        LoadRequest,
        inspect_remote,
        parse_hub_ref,
        plan_load,
    )

    paths = paths.ensure()
    access = hub_access(paths, load_settings(paths))
    ref = parse_hub_ref(args.ref)
    listing = HubClient(access).repo_files(ref.repo_id, ref.revision)
    option = listing.find(ref.choice)
    options = [option]
    if args.with_projector and listing.projectors:
        options.append(listing.find(listing.projectors[0].path))
    if not args.no_plan and not args.json:
        inspection = inspect_remote(access, listing, option, HeaderCache(header_cache_dir(paths)))
        plan = plan_load(inspection.info, planning_hardware(), LoadRequest())
        print(f"{listing.repo_id} {option.label}: {fit_summary(plan)} on this machine", file=sys.stderr)
    downloader = Downloader(access, paths.models_dir)
    results = []
    for opt in options:
        spec = DownloadSpec.of(listing.repo_id, listing.commit, opt)
        bar = ProgressLine(sys.stderr, spec.title)
        control = DownloadControl()
        try:
            final = downloader.run(spec, control, bar.update)
        except KeyboardInterrupt:
            control.pause.set()
            bar.finish()
            print("hearth: paused; run the same command again to resume.", file=sys.stderr)
            return 130
        bar.finish()
        results.append(final)
        if final.state is DownloadState.DONE and not args.json:
            print(final.target)
    if args.json:
        print_json([{"title": r.title, "state": r.state.value, "path": r.target, "bytes": r.total_bytes}
                     for r in results])  # fmt: skip
    return 0


class ProgressLine:
    """A bar redrawn in place on a terminal; on a pipe, a line every 10%."""

    def __init__(self, out: TextIO, title: str) -> None:
        self.out = out
        self.title = title
        self.tty = out.isatty()
        self._next_percent = 0
        self._last_draw = 0.0

    def update(self, p: DownloadProgress) -> None:
        percent = int(p.fraction * 100)
        if self.tty:
            now = time.monotonic()
            if now - self._last_draw < 0.1 and p.state is DownloadState.RUNNING:
                return
            self._last_draw = now
            filled = int(p.fraction * 30)
            eta = f", {_duration(p.eta_s)} left" if p.eta_s is not None else ""
            self.out.write(
                f"\r{self.title} [{'#' * filled}{'.' * (30 - filled)}] {percent:3d}% "
                f"{format_bytes(p.done_bytes)}/{format_bytes(p.total_bytes)} {format_bytes(p.speed)}/s{eta} "
                f"{p.state.value}\x1b[K"
            )
            self.out.flush()
        elif percent >= self._next_percent or p.state is not DownloadState.RUNNING:
            self._next_percent = percent - percent % 10 + 10
            self.out.write(f"{self.title}: {percent}% ({format_bytes(p.done_bytes)}) {p.state.value}\n")
            self.out.flush()

    def finish(self) -> None:
        if self.tty:
            self.out.write("\n")
            self.out.flush()


def _duration(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
