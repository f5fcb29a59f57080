"""`hearth pull` killed with SIGKILL mid-download, then run again: it resumes where the part
ends (a ranged request, not a new download) and the file that enters the library is exact."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.hub.download import STAGING
from tests.fake_hub import FakeHub
from tests.hub_fixtures import GEMMA_FILE, GEMMA_REPO, TINY_REPO

REPO_ROOT = Path(__file__).resolve().parents[2]


def _pull(tmp_path: Path, hub: FakeHub, ref: str) -> subprocess.Popen[str]:
    env = {**os.environ, "HF_ENDPOINT": hub.url, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app",
            "--data-dir",
            str(tmp_path / "data"),
            "--models-dir",
            str(tmp_path / "models"),
            "pull",
            ref,
            "--no-plan",
        ],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _part_size(models: Path) -> int:
    return sum(p.stat().st_size for p in (models / STAGING).glob("*.part"))


def _kill_then_resume(tmp_path: Path, hub: FakeHub, ref: str, kill_after: int, source: Path) -> None:
    models = tmp_path / "models"
    proc = _pull(tmp_path, hub, ref)
    deadline = time.monotonic() + 60
    while _part_size(models) < kill_after:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the download did not start"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    kept = _part_size(models)
    assert kept >= kill_after
    assert not list(models.rglob("*.gguf")), "a killed download must not be in the library"

    hub.faults.trickle_bytes_per_s = 0
    hub.clear_log()
    again = _pull(tmp_path, hub, ref)
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err
    target = Path(out.strip())
    ranges = [e.range for e in hub.log if e.path.startswith("/cdn/")]
    assert len(ranges) == 1 and ranges[0] is not None
    assert int(ranges[0].removeprefix("bytes=").rstrip("-")) >= kill_after
    h = hashlib.sha256()
    with open(target, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    with open(source, "rb") as fh:
        s = hashlib.sha256()
        while chunk := fh.read(1 << 20):
            s.update(chunk)
    assert h.hexdigest() == s.hexdigest()
    assert list((models / STAGING).iterdir()) == []


def test_sigkill_mid_download_then_resume(
    tmp_path: Path, fake_hub: FakeHub, hub_files: dict[str, Path]
) -> None:
    fake_hub.faults.trickle_bytes_per_s = 100_000
    _kill_then_resume(tmp_path, fake_hub, f"{TINY_REPO}:Q8_0", 60_000, hub_files["q8"])


@pytest.mark.gemma
def test_sigkill_mid_gemma_download_then_resume(
    tmp_path: Path, fake_hub: FakeHub, gemma_on_disk: Path
) -> None:
    fake_hub.faults.trickle_bytes_per_s = 20_000_000
    _kill_then_resume(tmp_path, fake_hub, f"{GEMMA_REPO}:{GEMMA_FILE}", 30_000_000, gemma_on_disk)
