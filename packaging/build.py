"""Build Hearth's one-folder bundle with PyInstaller, check it runs, and wrap it in a .deb.

Run by packaging/build.sh (``make package``) inside the build venv that has the portable
llama.cpp; it bundles whatever environment runs it (``sys.executable``). Steps:

1. PyInstaller with packaging/hearth.spec  ->  <dist>/hearth/
2. ``<dist>/hearth/hearth --self-test`` with a clean environment
3. a Debian package  ->  <dist>/hearth_<version>_<arch>.deb

    python packaging/build.py [--dist DIR] [--work DIR] [--bundle DIR] [--no-deb]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run as a script: the app's one table of X11 libraries

from app.platform.system_libraries import QT_XCB_LIBRARIES  # noqa: E402

PACKAGING = REPO / "packaging"
RESOURCES = REPO / "resources"
APP_ID = "io.hearth.Hearth"
INSTALL_DIR = "opt/hearth"
ICON_SIZES = (16, 22, 24, 32, 48, 64, 128, 256, 512)
MAINTAINER = "Hearth maintainers <maintainers@hearth.invalid>"

# Libraries the bundle links to but does not carry (PyInstaller leaves out what every
# desktop has: libc, GL, libxcb), and the Debian packages that provide them. A soname
# missing here stops the build: look it up with `dpkg -S <soname>` and add it.
SYSTEM_LIBRARY_PACKAGES = {
    "ld-linux-x86-64.so.2": "libc6",
    "ld-linux-aarch64.so.1": "libc6",
    "libc.so.6": "libc6",
    "libdl.so.2": "libc6",
    "libm.so.6": "libc6",
    "libpthread.so.0": "libc6",
    "libresolv.so.2": "libc6",
    "librt.so.1": "libc6",
    "libutil.so.1": "libc6",
    "libGL.so.1": "libgl1",
    "libEGL.so.1": "libegl1",
    "libOpenGL.so.0": "libopengl0",
    "libdrm.so.2": "libdrm2",
    **QT_XCB_LIBRARIES,
    "libwayland-client.so.0": "libwayland-client0",
    "libwayland-cursor.so.0": "libwayland-cursor0",
    "libwayland-egl.so.1": "libwayland-egl1",
}
# Data the bundled libraries read from the system: fontconfig's configuration (which pulls
# in a font) for libfontconfig, and the keyboard layouts for libxkbcommon.
DATA_PACKAGES = ("fontconfig-config", "xkb-data")


class BuildError(Exception):
    pass


def log(message: str) -> None:
    print(f"[package] {message}", flush=True)


def project_version() -> str:
    with (REPO / "pyproject.toml").open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


# -- bundle ------------------------------------------------------------------------------------


def build_bundle(dist: Path, work: Path) -> Path:
    """PyInstaller with hearth.spec, using this interpreter's packages; returns <dist>/hearth."""
    try:
        import PyInstaller  # noqa: F401
    except ImportError:
        raise BuildError(
            f"PyInstaller is not installed for {sys.executable}: pip install '.[package]'"
        ) from None
    log(f"PyInstaller: bundling the environment of {sys.executable}")
    started = time.monotonic()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "PyInstaller",
            "--noconfirm",
            "--clean",
            "--log-level",
            "WARN",
            "--distpath",
            str(dist),
            "--workpath",
            str(work),
            str(PACKAGING / "hearth.spec"),
        ],
        check=True,
        cwd=REPO,
    )
    bundle = dist / "hearth"
    log(f"bundle: {bundle} ({directory_size(bundle) / 1e6:.0f} MB) in {time.monotonic() - started:.0f} s")
    return bundle


def directory_size(path: Path) -> int:
    """Bytes of the regular files under ``path`` (symlinks count as nothing, like du)."""
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def clean_env(home: Path) -> dict[str, str]:
    """What a desktop launcher gives the app, minus the display: nothing from this shell."""
    return {"PATH": "/usr/bin:/bin", "HOME": str(home), "QT_QPA_PLATFORM": "offscreen", "LANG": "C.UTF-8"}


def self_test(executable: Path) -> str:
    """Run ``hearth --self-test`` outside the source tree with a clean environment; its report line."""
    with tempfile.TemporaryDirectory(prefix="hearth-package-check-") as tmp:
        result = subprocess.run(
            [str(executable), "--self-test"],
            cwd=tmp,
            env=clean_env(Path(tmp)),
            capture_output=True,
            text=True,
            timeout=300,
        )
    lines = [line for line in result.stdout.splitlines() if line.startswith("Hearth self-test")]
    if result.returncode != 0 or not lines or not lines[-1].startswith("Hearth self-test OK"):
        raise BuildError(
            f"the bundle's self-test failed (exit {result.returncode}):\n"
            f"{result.stdout}{result.stderr[-4000:]}"
        )
    return lines[-1]


# -- shared library dependencies ---------------------------------------------------------------


def elf_needed(path: Path) -> list[str] | None:
    """DT_NEEDED sonames of a 64-bit little-endian ELF file; None for anything else.

    A few lines of ELF instead of readelf/ldd: readelf (binutils) is not always installed,
    and ldd lists the transitive closure resolved on this machine, not what the file asks for.
    """
    try:
        with path.open("rb") as f:
            data = f.read()
    except OSError:
        return None
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    shoff, shentsize, shnum = struct.unpack_from("<Q", data, 0x28)[0], *struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    needed: list[str] = []
    for _name, sh_type, _flags, _addr, offset, size, link, *_rest in sections:
        if sh_type != 6:  # SHT_DYNAMIC
            continue
        strtab_offset = sections[link][4]
        for pos in range(offset, offset + size, 16):
            tag, value = struct.unpack_from("<qQ", data, pos)
            if tag == 0:  # DT_NULL
                break
            if tag == 1:  # DT_NEEDED
                start = strtab_offset + value
                needed.append(data[start : data.index(b"\0", start)].decode())
    return needed


def external_libraries(bundle: Path) -> dict[str, list[str]]:
    """Sonames the bundle's ELF files need but the bundle does not contain -> who needs them."""
    files = [p for p in bundle.rglob("*") if p.is_file() or p.is_symlink()]
    carried = {p.name for p in files}
    external: dict[str, list[str]] = {}
    for path in files:
        if path.is_symlink():
            continue
        for soname in elf_needed(path) or ():
            if soname not in carried:
                external.setdefault(soname, []).append(str(path.relative_to(bundle)))
    return external


def debian_depends(bundle: Path) -> list[str]:
    """The Depends: list, from what the bundle links to; fails on a library we have not mapped."""
    external = external_libraries(bundle)
    unknown = sorted(set(external) - set(SYSTEM_LIBRARY_PACKAGES))
    if unknown:
        details = "; ".join(f"{s} (needed by {', '.join(external[s][:3])})" for s in unknown)
        raise BuildError(f"add these to SYSTEM_LIBRARY_PACKAGES in packaging/build.py: {details}")
    packages = {SYSTEM_LIBRARY_PACKAGES[s] for s in external} | set(DATA_PACKAGES)
    glibc = platform.libc_ver()[1]
    # Bundled libraries come from this machine: they need at least its glibc.
    return sorted(f"libc6 (>= {glibc})" if p == "libc6" and glibc else p for p in packages | {"libc6"})


# -- .deb ------------------------------------------------------------------------------------


def debian_architecture() -> str:
    try:
        return subprocess.run(
            ["dpkg", "--print-architecture"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


def control_file(version: str, arch: str, depends: list[str], installed_kib: int, portable: bool) -> str:
    cpu = (
        " CPU with AVX2, FMA and F16C: Haswell, Zen and newer)"
        if portable
        else " CPU of the machine it was built on; not for distribution)"
    )
    return (
        "Package: hearth\n"
        f"Version: {version}\n"
        f"Architecture: {arch}\n"
        f"Maintainer: {MAINTAINER}\n"
        f"Installed-Size: {installed_kib}\n"
        f"Depends: {', '.join(depends)}\n"
        "Section: science\n"
        "Priority: optional\n"
        "Description: run local GGUF language models on your own machine\n"
        " Hearth is a desktop app for local language models in GGUF format, running\n"
        " on llama.cpp: drop a model in, see whether it fits this machine and why,\n"
        " load it while watching each phase, and chat in several conversations at\n"
        " once. Everything runs offline.\n"
        " .\n"
        " The package carries its own Python, Qt and llama.cpp (built for the x86-64\n"
        f"{cpu} under /opt/hearth.\n"
    )


COPYRIGHT = """\
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: Hearth

Files: *
License: MIT

Files: opt/hearth/_internal/*
Comment: Bundled third-party components, each under its own license: CPython (PSF),
 Qt 6 and PySide6 (LGPL-3), llama.cpp and llama-cpp-python (MIT), NumPy (BSD),
 and the other Python packages listed in Hearth's pyproject.toml.
License: various
"""


def portable_llama() -> bool:
    """Whether build.sh built this environment's llama.cpp with GGML_NATIVE=OFF."""
    return os.environ.get("HEARTH_PORTABLE_LLAMA") == "1"


def build_deb(bundle: Path, out_dir: Path, compression: str = "xz") -> Path:
    """Stage /opt/hearth, the launcher, desktop entry and icons, and run dpkg-deb."""
    if shutil.which("dpkg-deb") is None:
        raise BuildError("dpkg-deb is not installed (Debian/Ubuntu: apt-get install dpkg)")
    version, arch = project_version(), debian_architecture()
    depends = debian_depends(bundle)
    target = out_dir / f"hearth_{version}_{arch}.deb"
    with tempfile.TemporaryDirectory(prefix="hearth-deb-", dir=out_dir) as staging:
        root = Path(staging)
        shutil.copytree(bundle, root / INSTALL_DIR, symlinks=True)
        install(PACKAGING / "hearth-launcher.sh", root / "usr/bin/hearth", 0o755)
        install(RESOURCES / f"{APP_ID}.desktop", root / f"usr/share/applications/{APP_ID}.desktop")
        icons = root / "usr/share/icons/hicolor"
        for size in ICON_SIZES:
            install(RESOURCES / "icons" / f"hearth-{size}.png", icons / f"{size}x{size}/apps/{APP_ID}.png")
        install(RESOURCES / "hearth.svg", icons / f"scalable/apps/{APP_ID}.svg")
        (root / "usr/share/doc/hearth").mkdir(parents=True)
        (root / "usr/share/doc/hearth/copyright").write_text(COPYRIGHT)
        normalize_permissions(root)

        debian = root / "DEBIAN"
        debian.mkdir(mode=0o755)
        installed_kib = (directory_size(root) + 1023) // 1024
        (debian / "control").write_text(control_file(version, arch, depends, installed_kib, portable_llama()))
        (debian / "md5sums").write_text(md5sums(root))
        # No maintainer scripts: dpkg triggers of desktop-file-utils and hicolor-icon-theme
        # refresh the menu and icon caches when files land in those folders.
        log(f"dpkg-deb: {target.name} (Depends: {', '.join(depends)})")
        subprocess.run(
            ["dpkg-deb", "--root-owner-group", f"-Z{compression}", "--build", str(root), str(target)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    log(f"package: {target} ({target.stat().st_size / 1e6:.0f} MB)")
    return target


def install(source: Path, target: Path, mode: int = 0o644) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    target.chmod(mode)


def normalize_permissions(root: Path) -> None:
    """0755 for folders and executables, 0644 for the rest: whatever umask the build ran under."""
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        executable = path.is_dir() or path.stat().st_mode & 0o111
        path.chmod(0o755 if executable else 0o644)


def md5sums(root: Path) -> str:
    lines = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink() and path.relative_to(root).parts[0] != "DEBIAN":
            digest = hashlib.md5(path.read_bytes(), usedforsecurity=False).hexdigest()
            lines.append(f"{digest}  {path.relative_to(root).as_posix()}\n")
    return "".join(lines)


# -- command line ------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dist", type=Path, default=REPO / "dist", help="where the bundle and .deb go")
    parser.add_argument(
        "--work", type=Path, default=REPO / "build" / "pyinstaller", help="PyInstaller's work dir"
    )
    parser.add_argument("--bundle", type=Path, help="package this existing bundle instead of building one")
    parser.add_argument("--no-deb", action="store_true", help="stop after the bundle and its self-test")
    parser.add_argument(
        "--deb-compression", choices=["xz", "zstd", "gzip", "none"], default="xz", help="dpkg-deb -Z"
    )
    args = parser.parse_args(argv)
    if not portable_llama() and args.bundle is None:
        log(
            "note: bundling this environment's llama.cpp as it is; unless it was built with "
            'CMAKE_ARGS="-DGGML_NATIVE=OFF" the result only runs on CPUs like this one '
            "(make package does that)"
        )
    try:
        args.dist.mkdir(parents=True, exist_ok=True)
        bundle = (
            args.bundle.resolve() if args.bundle else build_bundle(args.dist.resolve(), args.work.resolve())
        )
        log(self_test(bundle / "hearth"))
        if not args.no_deb:
            build_deb(bundle, args.dist.resolve(), args.deb_compression)
    except BuildError as exc:
        print(f"[package] FAILED: {exc}", file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as exc:
        print(
            f"[package] FAILED: {' '.join(map(str, exc.cmd))} exited with {exc.returncode}", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
