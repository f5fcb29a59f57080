"""The packaging tests' bundle, built in the background from the start of the session.

`packaging/build.sh --from-current-env` takes about a minute of CPU (PyInstaller's analysis
and copies) that nothing else in the suite waits for: started niced when the session's tests
are collected, it runs while the rest of the suite waits on its own servers, children and
timers, and the packaging tests (near the end) find it done. Niced, it takes the CPU the
tests leave idle and little of what they use."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BUILD_TIMEOUT_S = 1200


@dataclass
class BundleBuild:
    root: Path
    process: subprocess.Popen

    @classmethod
    def start(cls) -> BundleBuild:
        root = Path(tempfile.mkdtemp(prefix="hearth-package-"))
        env = {**os.environ, "PYTHON": sys.executable}
        env.pop("HEARTH_PORTABLE_LLAMA", None)
        command = [
            "nice", "-n", "10", "bash", str(REPO / "packaging" / "build.sh"), "--from-current-env",
            "--dist", str(root / "dist"), "--work", str(root / "work"),
            "--deb-compression", "none",  # a test has no use for a small file; xz takes a minute
        ]  # fmt: skip
        with open(root / "build.log", "wb") as log:
            process = subprocess.Popen(
                command, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        return cls(root, process)

    @property
    def dist(self) -> Path:
        return self.root / "dist"

    def wait(self) -> tuple[int, str]:
        """The build's exit code and the tail of what it printed."""
        try:
            code = self.process.wait(timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        return code, (self.root / "build.log").read_text(errors="replace")[-6000:]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.root, ignore_errors=True)


# Where the session keeps the build it started (tests/conftest.py) for the `built` fixture.
BUNDLE_BUILD = pytest.StashKey[BundleBuild]()
