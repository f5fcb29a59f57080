"""How Hearth compiles llama.cpp for the machine it is installed on.

llama-cpp-python compiles llama.cpp at install time, and by default with ``GGML_NATIVE=ON``
(``-march=native``). On a VM whose CPU advertises AMX that put AMX tile code in ggml, and
the first quantized matmul died with SIGILL. So the ggml CPU options are chosen here, from
the CPU's own flags, with every vector extension that is safe and fast and never AMX; the
GPU backend is chosen from the toolchains and drivers present.

The wheel is built once per set of options into a wheelhouse keyed by those options (pip's
own wheel cache is keyed by the source archive alone and would hand back a wheel built for
other options), installed into the venv, and described in a build stamp beside the venv.

This file runs *before* Hearth's dependencies are installed (``make`` calls
``python engine/native/build.py ensure``), so it uses the standard library only.
"""

from __future__ import annotations

import argparse
import enum
import hashlib
import json
import os
import platform
import posixpath
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STAMP_NAME = "hearth-native-build.json"
BACKEND_ENV = "HEARTH_BACKEND"
CPU_ENV = "HEARTH_CPU"  # "native" (default): all safe extensions this CPU has; "portable": AVX2 level
WHEELHOUSE_ENV = "HEARTH_WHEELHOUSE"

# ggml's x86 CPU options, in ggml's order, with the /proc/cpuinfo flags each one compiles
# in (GGML_AVX512 passes -mavx512f/cd/vl/dq/bw, so it needs all five) and the options it
# builds on: an extension is only enabled on top of the level it extends.
X86_CPU_OPTIONS: tuple[tuple[str, frozenset[str], frozenset[str]], ...] = (
    ("GGML_SSE42", frozenset({"sse4_2"}), frozenset()),
    ("GGML_AVX", frozenset({"avx"}), frozenset({"GGML_SSE42"})),
    ("GGML_F16C", frozenset({"f16c"}), frozenset({"GGML_AVX"})),
    ("GGML_FMA", frozenset({"fma"}), frozenset({"GGML_AVX"})),
    ("GGML_AVX2", frozenset({"avx2"}), frozenset({"GGML_AVX"})),
    ("GGML_BMI2", frozenset({"bmi2"}), frozenset()),
    ("GGML_AVX_VNNI", frozenset({"avx_vnni"}), frozenset({"GGML_AVX2"})),
    (
        "GGML_AVX512",
        frozenset({"avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"}),
        frozenset({"GGML_AVX2", "GGML_FMA", "GGML_F16C"}),
    ),
    ("GGML_AVX512_VBMI", frozenset({"avx512vbmi"}), frozenset({"GGML_AVX512"})),
    ("GGML_AVX512_VNNI", frozenset({"avx512_vnni"}), frozenset({"GGML_AVX512"})),
    ("GGML_AVX512_BF16", frozenset({"avx512_bf16"}), frozenset({"GGML_AVX512"})),
)
# AMX stays off whatever the CPU says: in VMs that advertise it, the tile instructions fault
# even after arch_prctl(ARCH_REQ_XCOMP_PERM) (see the issue that brought this file in).
NEVER_ON = ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16")
# "portable" stops at the x86-64-v3 level (AVX2, FMA, F16C, BMI2): the safe rebuild when a
# newer extension misbehaves on a machine (a VM that advertises more than it allows).
PORTABLE_CEILING = frozenset({"GGML_SSE42", "GGML_AVX", "GGML_F16C", "GGML_FMA", "GGML_AVX2", "GGML_BMI2"})


class Backend(enum.StrEnum):
    CPU = "cpu"
    CUDA = "cuda"
    VULKAN = "vulkan"


class BuildError(RuntimeError):
    """The native build could not be chosen or made; the message is one line for the console."""


def ggml_cpu_options(
    flags: Iterable[str], *, machine: str = "x86_64", portable: bool = False
) -> dict[str, bool]:
    """The ggml CPU options (``GGML_NATIVE=OFF`` plus one switch per extension) for a CPU.

    ``flags`` are the CPU's /proc/cpuinfo flags. Every option is set explicitly, on or off,
    so nothing is left to ggml's defaults (which follow the building machine). Only x86-64
    needs choosing; elsewhere ggml's own portable defaults apply.
    """
    options: dict[str, bool] = {"GGML_NATIVE": False}
    if machine not in ("x86_64", "AMD64", "amd64"):
        return options
    have = set(flags)
    for name, needs, builds_on in X86_CPU_OPTIONS:
        allowed = not portable or name in PORTABLE_CEILING
        options[name] = allowed and needs <= have and all(options.get(dep, False) for dep in builds_on)
    for name in NEVER_ON:
        options[name] = False
    return options


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The first ``flags`` line of /proc/cpuinfo (empty where there is none, e.g. not Linux)."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


@dataclass(frozen=True)
class Toolchain:
    """What the machine has for each GPU backend; ``detect()`` fills it, tests make their own."""

    nvcc: bool = False  # the CUDA compiler
    nvidia_driver: bool = False  # libcuda / an NVIDIA device node: a GPU that CUDA can use
    vulkan_sdk: bool = False  # Vulkan headers, loader library and SPIRV-Headers to build against
    glslc: bool = False  # the shader compiler ggml-vulkan needs at build time

    @classmethod
    def detect(cls, which: Callable[[str], str | None] = shutil.which, root: Path = Path("/")) -> Toolchain:
        nvcc = which("nvcc") is not None or (root / "usr/local/cuda/bin/nvcc").exists()
        driver = (root / "dev/nvidia0").exists() or any(
            (root / d / "libcuda.so.1").exists()
            for d in ("usr/lib/x86_64-linux-gnu", "usr/lib64", "usr/lib/wsl/lib", "usr/lib")
        )
        vulkan = (
            _vulkan_headers_new_enough(root / "usr/include/vulkan/vulkan_core.h")
            and any(
                (root / d / "libvulkan.so").exists()
                for d in ("usr/lib/x86_64-linux-gnu", "usr/lib64", "usr/lib")
            )
            # ggml-vulkan's CMake requires SPIRV-Headers' package config (Debian: spirv-headers)
            and any(
                (root / d / "SPIRV-Headers").is_dir()
                for d in ("usr/share/cmake", "usr/lib/cmake", "usr/lib64/cmake")
            )
        )
        return cls(nvcc=nvcc, nvidia_driver=driver, vulkan_sdk=vulkan, glslc=which("glslc") is not None)


def _vulkan_headers_new_enough(core_header: Path) -> bool:
    """ggml-vulkan uses VK_EXT_layer_settings (Vulkan 1.3.261+); Debian 12's headers (1.3.239)
    lack it and the build fails deep in ggml-vulkan.cpp, so older headers count as none."""
    try:
        return "VkLayerSettingEXT" in core_header.read_text(errors="replace")
    except OSError:
        return False


@dataclass(frozen=True)
class BackendChoice:
    backend: Backend
    reason: str  # why, in words, for the one line `make` prints


def choose_backend(requested: str | None, tools: Toolchain) -> BackendChoice:
    """CUDA when nvcc and an NVIDIA driver are both here, else Vulkan when it can be built, else CPU.

    nvcc alone is not enough: a CUDA build on a machine without the driver cannot even load
    (libggml-cuda needs libcuda), and compiling it takes most of an hour on two cores.
    ``requested`` (``HEARTH_BACKEND``) overrides the choice; asking for a backend whose
    toolchain is missing is an error rather than a silent CPU build.
    """
    if requested:
        try:
            backend = Backend(requested.strip().lower())
        except ValueError:
            raise BuildError(
                f"{BACKEND_ENV}={requested!r} is not one of {', '.join(b.value for b in Backend)}"
            ) from None
        if backend is Backend.CUDA and not tools.nvcc:
            raise BuildError(f"{BACKEND_ENV}=cuda needs nvcc (the CUDA toolkit) on PATH")
        if backend is Backend.VULKAN and not (tools.vulkan_sdk and tools.glslc):
            raise BuildError(
                f"{BACKEND_ENV}=vulkan needs the Vulkan headers (libvulkan-dev, spirv-headers) and glslc"
            )
        return BackendChoice(backend, f"asked for with {BACKEND_ENV}")
    if tools.nvcc and tools.nvidia_driver:
        return BackendChoice(Backend.CUDA, "nvcc and an NVIDIA driver found")
    if tools.vulkan_sdk and tools.glslc:
        why = "nvcc found but no NVIDIA driver; " if tools.nvcc else ""
        return BackendChoice(Backend.VULKAN, why + "Vulkan headers and glslc found")
    if tools.nvcc:
        return BackendChoice(Backend.CPU, "nvcc found but no NVIDIA driver, and no Vulkan SDK")
    return BackendChoice(Backend.CPU, "no CUDA toolkit with a driver, no Vulkan SDK with glslc")


# llama.cpp's RPC backend, in every build whatever the CPU and GPU options: it gives
# libggml-rpc (installed beside libggml in llama_cpp/lib), which both ends of a split model
# use — `hearth worker` serves this machine's devices with it, and the engine registers
# other machines' workers with it. It costs one small library and no run-time work until a
# worker is added.
RPC_OPTIONS: Mapping[str, str] = {"GGML_RPC": "ON"}

BACKEND_OPTIONS: Mapping[Backend, Mapping[str, str]] = {
    Backend.CPU: {},
    # "native": only this machine's GPU architecture, which keeps the compile to minutes.
    Backend.CUDA: {"GGML_CUDA": "ON", "CMAKE_CUDA_ARCHITECTURES": "native"},
    Backend.VULKAN: {"GGML_VULKAN": "ON"},
}


@dataclass(frozen=True)
class BuildConfig:
    """Everything that decides what the compiled llama.cpp is; its ``key`` names the wheel."""

    llama_requirement: str  # e.g. "llama-cpp-python==0.3.36"
    backend: Backend
    backend_reason: str
    cpu_options: tuple[tuple[str, bool], ...]
    extra_options: tuple[tuple[str, str], ...] = ()
    rpc: bool = True  # GGML_RPC: part of the cmake arguments, so of the key
    python_tag: str = field(default_factory=lambda: f"cp{sys.version_info[0]}{sys.version_info[1]}")
    machine: str = field(default_factory=platform.machine)
    compiler: str = ""

    @property
    def cmake_args(self) -> str:
        args = [f"-D{name}={'ON' if on else 'OFF'}" for name, on in self.cpu_options]
        args += [f"-D{k}={v}" for k, v in BACKEND_OPTIONS[self.backend].items()]
        if self.rpc:
            args += [f"-D{k}={v}" for k, v in RPC_OPTIONS.items()]
        args += [f"-D{k}={v}" for k, v in self.extra_options]
        return " ".join(args)

    @property
    def dynamic_backends(self) -> bool:
        """A GGML_BACKEND_DL build: backends are modules loaded (and chosen) at run time."""
        return ("GGML_BACKEND_DL", "ON") in self.extra_options

    @property
    def cpu_features(self) -> tuple[str, ...]:
        """The compiled-in extensions in llama.cpp's own names (``GGML_AVX512_VNNI`` -> ``AVX512_VNNI``)."""
        return tuple(
            name.removeprefix("GGML_") for name, on in self.cpu_options if on and name != "GGML_NATIVE"
        )

    @property
    def key(self) -> str:
        ident = {
            "llama": self.llama_requirement,
            "cmake": self.cmake_args,
            "python": self.python_tag,
            "machine": self.machine,
            "compiler": self.compiler,
        }
        return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


def llama_requirement(pyproject: Path = REPO / "pyproject.toml") -> str:
    """The llama-cpp-python pin from pyproject.toml: one source for the version."""
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    for dep in deps:
        if dep.replace("_", "-").lower().startswith("llama-cpp-python"):
            return dep.replace(" ", "")
    raise BuildError("pyproject.toml does not depend on llama-cpp-python")


def compiler_version() -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return ""
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.splitlines()[0].strip() if out else ""


# The packaged app runs on machines nobody has seen: every CPU variant ggml offers, as
# modules it picks from at start by what the CPU can run (engine/native/backend.py points ggml at
# llama_cpp/lib, where GGML_BACKEND_DIR installs them). The AMX variant is built by ggml
# but left out of the bundle (packaging/bundle_rules.py).
BUNDLE_OPTIONS: Mapping[str, str] = {
    "GGML_BACKEND_DL": "ON",
    "GGML_CPU_ALL_VARIANTS": "ON",
    "GGML_BACKEND_DIR": "llama_cpp/lib",
}


def plan_build(
    env: Mapping[str, str] = os.environ,
    flags: Iterable[str] | None = None,
    tools: Toolchain | None = None,
    extra_options: Mapping[str, str] | None = None,
    *,
    bundle: bool = False,
) -> BuildConfig:
    """The build for this machine: CPU options from its flags, the backend from its toolchains.

    ``bundle``: the build for the packaged app instead, with all CPU variants chosen at run time.
    """
    cpu_mode = env.get(CPU_ENV, "native").strip().lower() or "native"
    if cpu_mode not in ("native", "portable"):
        raise BuildError(f"{CPU_ENV}={cpu_mode!r} is not 'native' or 'portable'")
    choice = choose_backend(env.get(BACKEND_ENV), tools if tools is not None else Toolchain.detect())
    if bundle:
        options = {"GGML_NATIVE": False}
        extra_options = {**BUNDLE_OPTIONS, **(extra_options or {})}
    else:
        options = ggml_cpu_options(
            cpu_flags() if flags is None else flags,
            machine=platform.machine(),
            portable=cpu_mode == "portable",
        )
    return BuildConfig(
        llama_requirement=llama_requirement(),
        backend=choice.backend,
        backend_reason=choice.reason,
        cpu_options=tuple(options.items()),
        extra_options=tuple(sorted((extra_options or {}).items())),
        compiler=compiler_version(),
    )


def wheelhouse(env: Mapping[str, str] = os.environ) -> Path:
    if env.get(WHEELHOUSE_ENV):
        return Path(env[WHEELHOUSE_ENV]).expanduser()
    cache = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "hearth" / "wheelhouse"


def read_stamp(prefix: Path = Path(sys.prefix)) -> dict | None:
    """The stamp of the llama.cpp build installed in the environment at ``prefix``, if any."""
    try:
        return json.loads((prefix / STAMP_NAME).read_text())
    except (OSError, ValueError):
        return None


def safe_rebuild_command(frozen: bool = False) -> str:
    """What to run when a build misbehaves on this machine: the AVX2-level options, rebuilt.

    A packaged app cannot be rebuilt in place; from a source checkout it can.
    """
    command = f"{CPU_ENV}=portable make native"
    return f"from a Hearth source checkout, {command}" if frozen else command


def build_wheel(config: BuildConfig, python: str, house: Path) -> Path:
    """Compile llama-cpp-python with ``config`` into ``house/<key>/`` (unless it is there) and return it."""
    target = house / config.key
    found = sorted(target.glob("llama_cpp_python-*.whl"))
    if found:
        return found[-1]
    env = dict(os.environ)
    env["CMAKE_ARGS"] = config.cmake_args
    env.pop("SOURCE_DATE_EPOCH", None)  # ggml turns every instruction set off when it is set
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
    what = f"{config.llama_requirement} ({config.backend.value})"
    print(f"[native] compiling {what}: CMAKE_ARGS={config.cmake_args}")
    print("[native] this takes about 8 minutes on 2 cores, once per set of options")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hearth-wheel-") as tmp:
        build_dir = Path(tmp) / "build"
        env["SKBUILD_BUILD_DIR"] = str(build_dir)  # kept until the wheel is complete
        cmd = [
            python,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-cache-dir",
            "--no-binary",
            "llama-cpp-python",
            "--wheel-dir",
            tmp,
            config.llama_requirement,
        ]
        if subprocess.run(cmd, env=env).returncode != 0:
            raise BuildError(f"compiling {config.llama_requirement} failed (CMAKE_ARGS={config.cmake_args})")
        built = sorted(Path(tmp).glob("llama_cpp_python-*.whl"))
        if not built:
            raise BuildError("pip wheel finished without producing a llama-cpp-python wheel")
        if config.dynamic_backends:
            # llama-cpp-python installs only the libraries it names; the backend modules
            # (libggml-cpu-haswell.so, ...) stay in the build tree: put them in the wheel.
            modules = sorted(build_dir.rglob("libggml-cpu-*.so"))
            if not modules:
                raise BuildError("the GGML_BACKEND_DL build produced no CPU backend modules")
            add_to_wheel(built[-1], modules, "llama_cpp/lib")
        missing = missing_libraries(config, built[-1])
        if missing:
            raise BuildError(f"the wheel has no {', '.join(missing)} in llama_cpp/lib")
        target.mkdir(parents=True, exist_ok=True)
        final = target / built[-1].name
        shutil.move(str(built[-1]), final)
    (target / "options.json").write_text(json.dumps(stamp_for(config, final), indent=2) + "\n")
    print(f"[native] built in {time.monotonic() - started:.0f} s: {final}")
    return final


def required_libraries(config: BuildConfig) -> tuple[str, ...]:
    """The libraries in ``llama_cpp/lib`` that Hearth loads by name from this build."""
    names = ["libllama.so", "libggml.so", "libggml-base.so", "libmtmd.so"]
    if config.rpc:
        names.append("libggml-rpc.so")
    return tuple(names)


def missing_libraries(config: BuildConfig, wheel: Path) -> list[str]:
    """What ``required_libraries`` names that the wheel lacks: a wheel without libggml-rpc
    would install and import fine and only fail when a worker is added, so it is refused
    at build time instead."""
    import zipfile

    with zipfile.ZipFile(wheel) as zf:
        present = {posixpath.basename(n) for n in zf.namelist() if "/llama_cpp/lib/" in f"/{n}"}
    return [name for name in required_libraries(config) if name not in present]


def add_to_wheel(wheel: Path, files: Iterable[Path], folder: str) -> None:
    """Add ``files`` to ``wheel`` under ``folder``, with their RECORD lines."""
    import base64
    import zipfile

    with zipfile.ZipFile(wheel) as old:
        entries = [(info, old.read(info)) for info in old.infolist()]
    record_name = next(info.filename for info, _ in entries if info.filename.endswith(".dist-info/RECORD"))
    added = [(f"{folder}/{path.name}", path.read_bytes()) for path in files]
    lines = []
    for name, data in added:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        lines.append(f"{name},sha256={digest},{len(data)}")
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as new:
        for info, data in entries:
            if info.filename == record_name:
                data = data.rstrip(b"\n") + b"\n" + "\n".join(lines).encode() + b"\n"
            new.writestr(info, data)
        for name, data in added:
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            info.external_attr = 0o755 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            new.writestr(info, data)
    os.replace(tmp, wheel)


def stamp_for(config: BuildConfig, wheel: Path) -> dict:
    data = asdict(config)
    data.update(
        key=config.key,
        backend=config.backend.value,
        cmake_args=config.cmake_args,
        cpu_features=list(config.cpu_features),
        wheel=str(wheel),
    )
    return data


def ensure(prefix: Path, python: str, env: Mapping[str, str] = os.environ, *, bundle: bool = False) -> dict:
    """Make the venv at ``prefix`` hold the llama.cpp build this machine should have.

    Nothing is compiled or installed when the stamp already names this build and the package
    is there, so a second ``make test`` costs a fraction of a second here.
    """
    config = plan_build(env, bundle=bundle)
    print(
        f"[native] llama.cpp backend: {config.backend.value} ({config.backend_reason}); "
        f"choose with {BACKEND_ENV}=cpu|cuda|vulkan"
    )
    stamp = read_stamp(prefix)
    installed = any(prefix.glob("lib/python3*/site-packages/llama_cpp/__init__.py"))
    if stamp and stamp.get("key") == config.key and installed:
        return stamp
    try:
        wheel = build_wheel(config, python, wheelhouse(env))
    except BuildError as exc:
        if config.backend is Backend.CPU or env.get(BACKEND_ENV):
            raise
        # A GPU backend chosen for the user must not cost them a working install.
        print(f"[native] the {config.backend.value} build failed ({exc}); building for the CPU instead")
        config = plan_build({**env, BACKEND_ENV: Backend.CPU.value}, bundle=bundle)
        stamp = read_stamp(prefix)
        if stamp and stamp.get("key") == config.key and installed:
            return stamp
        wheel = build_wheel(config, python, wheelhouse(env))
    cmd = [
        python,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-deps",
        "--force-reinstall",
        "--no-cache-dir",
        str(wheel),
    ]
    if subprocess.run(cmd).returncode != 0:
        raise BuildError(f"installing {wheel} failed")
    stamp = stamp_for(config, wheel)
    stamp["installed_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    (prefix / STAMP_NAME).write_text(json.dumps(stamp, indent=2) + "\n")
    # A build the probe has not seen yet is probed on first use (engine/native/probe.py).
    features = ", ".join(config.cpu_features) or "every CPU variant"
    print(f"[native] installed llama.cpp for {features} ({config.key})")
    return stamp


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="native_build", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    e = sub.add_parser("ensure", help="build (or reuse) and install llama.cpp for this machine")
    e.add_argument("--prefix", type=Path, default=Path(sys.prefix), help="the venv (default: this Python's)")
    e.add_argument(
        "--bundle", action="store_true", help="the packaged app's build: all CPU variants, picked at start"
    )
    sub.add_parser("show", help="print the build this machine would get, as JSON")
    args = parser.parse_args(argv)
    try:
        if args.command == "show":
            config = plan_build()
            print(json.dumps(stamp_for(config, wheelhouse() / config.key), indent=2))
            return 0
        python = str(args.prefix / "bin" / "python")
        ensure(args.prefix.resolve(), python, bundle=args.bundle)
    except BuildError as exc:
        print(f"[native] error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
