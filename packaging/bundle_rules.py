"""What goes into Hearth's PyInstaller bundle and what stays out; used by hearth.spec.

Kept out of the spec itself so it can be linted and read like any other module. Every
function takes and returns PyInstaller TOC entries: ``(dest_name, src_name, typecode)``.
"""

from __future__ import annotations

import filecmp
import fnmatch
import importlib.util
import posixpath
from collections.abc import Callable, Iterable
from pathlib import Path

TocEntry = tuple[str, str, str]

REPO = Path(__file__).resolve().parent.parent

# Qt modules Hearth does not use. PyInstaller collects a Qt module (binding, Qt library,
# plugins) only when something imports it, so this mostly guards against optional imports
# in dependencies. Kept: QtCore, QtGui, QtWidgets; QtSvg (the SVG icon plugins need
# libQt6Svg, and pyqtgraph imports it); QtOpenGL and QtOpenGLWidgets, which pyqtgraph
# imports unconditionally (checked: a bundle with pyqtgraph plots offscreen).
_UNUSED_QT_MODULES = [
    "Qt3DAnimation", "Qt3DCore", "Qt3DExtras", "Qt3DInput", "Qt3DLogic", "Qt3DRender",
    "QtBluetooth", "QtCharts", "QtConcurrent", "QtDataVisualization", "QtDBus", "QtDesigner",
    "QtGraphs", "QtGraphsWidgets", "QtHelp", "QtHttpServer", "QtLocation", "QtMultimedia",
    "QtMultimediaWidgets", "QtNetwork", "QtNetworkAuth", "QtNfc", "QtPdf", "QtPdfWidgets",
    "QtPositioning", "QtPrintSupport", "QtQml", "QtQuick", "QtQuick3D", "QtQuickControls2",
    "QtQuickTest", "QtQuickWidgets", "QtRemoteObjects", "QtScxml", "QtSensors", "QtSerialBus",
    "QtSerialPort", "QtSpatialAudio", "QtSql", "QtStateMachine", "QtSvgWidgets", "QtTest",
    "QtTextToSpeech", "QtUiTools", "QtWebChannel", "QtWebEngineCore", "QtWebEngineQuick",
    "QtWebEngineWidgets", "QtWebSockets", "QtWebView", "QtXml",
]  # fmt: skip
QT_EXCLUDES = [f"PySide6.{name}" for name in _UNUSED_QT_MODULES]

# Packages present in development environments, or optional imports of our dependencies,
# that an installed Hearth never runs.
PY_EXCLUDES = [
    # test and development tools: no test code in the bundle
    "tests", "benchmarks", "pytest", "_pytest", "pytestqt", "hypothesis", "ruff", "PyInstaller",
    "setuptools", "pkg_resources", "pip", "wheel",
    # other GUI toolkits and science stacks that dependencies try to import
    "tkinter", "_tkinter", "matplotlib", "IPython", "ipykernel", "jupyter_client", "notebook",
    "scipy", "pandas", "numba", "cupy", "h5py", "OpenGL", "colorcet", "PyQt5", "PyQt6", "PySide2",
    # llama-cpp-python's OpenAI-style server, its retired llava binding (importing it fails),
    # and what Llama.from_pretrained would pull in (huggingface_hub itself stays: the
    # Discover page and hearth pull use it)
    "llama_cpp.server", "llama_cpp.llava_cpp", "transformers", "torch",
    # gguf's command-line tools (one is a PySide6 editor); pyqtgraph's demos, 3D and notebooks
    "gguf.scripts", "pyqtgraph.examples", "pyqtgraph.opengl", "pyqtgraph.jupyter",
    # Pillow's AVIF codec (5 MB with libavif): Hearth reads PNG, JPEG, WebP, GIF and BMP
    "PIL._avif", "PIL.AvifImagePlugin",
    # PyYAML's libyaml accelerator (2.7 MB): gguf imports yaml but Hearth never parses YAML,
    # and PyYAML falls back to its pure-Python code without it
    "_yaml", "yaml._yaml",
]  # fmt: skip

# Data files a Hearth bundle leaves out: Qt's own translations (7 MB) translate only Qt's
# standard dialogs, and Hearth's interface is English; the dialogs then are too.
DROPPED_DATA = ("PySide6/Qt/translations/*",)


def drop_data(datas: list[TocEntry], patterns: Iterable[str] = DROPPED_DATA) -> list[TocEntry]:
    patterns = tuple(patterns)
    return [e for e in datas if not any(fnmatch.fnmatch(e[0], p) for p in patterns)]


# Qt plugins PyInstaller's Qt hooks collect that a desktop Hearth should not carry (Linux).
DROPPED_QT_PLUGINS = (
    # Needs the system's GTK 3 but would resolve glib, cairo and pango from the bundle: a
    # mix of versions that breaks on some distributions. Qt falls back to the XDG portal
    # theme (native file dialogs through xdg-desktop-portal) or its own Fusion style.
    "PySide6/Qt/plugins/platformthemes/libqgtk3.so",
    # Links libtiff.so.5, which current distributions no longer ship; Hearth shows no TIFFs.
    "PySide6/Qt/plugins/imageformats/libqtiff.so",
    # Embedded and kiosk backends (framebuffer, KMS, VNC, evdev input): desktops use xcb or
    # wayland; offscreen and minimal stay for tests and --self-test.
    "PySide6/Qt/plugins/platforms/libqeglfs.so",
    "PySide6/Qt/plugins/platforms/libqlinuxfb.so",
    "PySide6/Qt/plugins/platforms/libqminimalegl.so",
    "PySide6/Qt/plugins/platforms/libqvnc.so",
    "PySide6/Qt/plugins/platforms/libqvkkhrdisplay.so",
    "PySide6/Qt/plugins/egldeviceintegrations/*",
    "PySide6/Qt/plugins/generic/*",
)


def llama_cpp_lib_dir() -> Path:
    """llama_cpp/lib of the Python running PyInstaller, found without loading the libraries."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        raise SystemExit("llama_cpp is not installed in the Python running PyInstaller")
    return Path(spec.origin).parent / "lib"


# ggml's CPU variants that use AMX tile instructions: they score highest on a CPU that
# advertises AMX, and die with SIGILL in VMs that advertise it without allowing it.
AMX_CPU_VARIANTS = ("sapphirerapids",)


def llama_cpp_libs(lib_dir: Path | None = None) -> list[tuple[str, str]]:
    """Every file of llama_cpp/lib/ but the AMX CPU variants, as Analysis ``binaries``.

    llama-cpp-python opens these with ctypes, so PyInstaller's import analysis never sees
    them. Collected as binaries, not data, so PyInstaller also bundles what they link to
    (libgomp). A GGML_BACKEND_DL build has one CPU library per instruction-set level
    (libggml-cpu-haswell.so, ...) instead of libggml-cpu.so.
    """
    lib_dir = lib_dir or llama_cpp_lib_dir()
    files = sorted(
        p
        for p in lib_dir.iterdir()
        if p.is_file() and not any(p.name.startswith(f"libggml-cpu-{v}") for v in AMX_CPU_VARIANTS)
    )
    stems = {p.name.split(".")[0] for p in files}
    # ggml-rpc: `hearth worker` and split models need it (native_build.RPC_OPTIONS builds it).
    for required in ("llama", "ggml", "ggml-base", "ggml-cpu", "mtmd", "ggml-rpc"):
        # libllama.so (Linux), libllama.dylib (macOS), llama.dll (Windows); libggml-cpu-<variant>
        if not any(stem in (f"lib{required}", required) for stem in stems) and not (
            required == "ggml-cpu" and any(stem.startswith("libggml-cpu-") for stem in stems)
        ):
            raise SystemExit(f"{lib_dir} has no {required} library: a broken llama-cpp-python install")
    return [(str(p), "llama_cpp/lib") for p in files]


def resource_files(root: Path = REPO / "resources") -> list[tuple[str, str]]:
    """resources/ as committed (SVG and PNG icons, desktop entry), as Analysis ``datas``."""
    return [
        (str(p), str(Path("resources") / p.parent.relative_to(root)))
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    ]


def link_identical_llama_libs(binaries: list[TocEntry]) -> tuple[list[TocEntry], list[TocEntry]]:
    """Turn llama_cpp/lib's identical copies (libggml.so, .so.0, .so.0.25.3) into symlinks.

    pip installs them as three copies. Besides the wasted space, copies make the dynamic
    loader map libggml twice (llama_cpp._ggml opens libggml.so, libllama links libggml.so.0),
    giving two separate ggml backend registries in one process. Symlinks to one file share
    an inode, so every name loads the same library. Returns (binaries, symlink entries).
    """
    llama = [e for e in binaries if e[0].startswith("llama_cpp/lib/") and e[2] == "BINARY"]
    groups: list[list[TocEntry]] = []
    for entry in llama:
        for group in groups:
            if filecmp.cmp(group[0][1], entry[1], shallow=False):
                group.append(entry)
                break
        else:
            groups.append([entry])
    replaced: set[str] = set()
    links: list[TocEntry] = []
    for group in groups:
        # The fully versioned name is the real file, as a distribution would install it.
        real = max(group, key=lambda e: (len(e[0]), e[0]))
        for entry in group:
            if entry is not real:
                links.append((entry[0], posixpath.basename(real[0]), "SYMLINK"))
                replaced.add(entry[0])
    return [e for e in binaries if e[0] not in replaced], links


def drop_qt_plugins(
    binaries: list[TocEntry],
    datas: list[TocEntry],
    imports_of: Callable[[str], Iterable[str]],
    patterns: Iterable[str] = DROPPED_QT_PLUGINS,
) -> tuple[list[TocEntry], list[TocEntry], list[str]]:
    """Remove the ``patterns`` plugins, then every bundled library nothing else needs any more.

    ``imports_of(path)`` names the libraries a binary links to (sonames). Roots are what
    gets loaded by path rather than by soname: Python extension modules, Qt plugins, the
    llama.cpp libraries (ctypes) and libpython (the bootloader). Returns (binaries, datas,
    removed destination names); symlinks to removed files are removed too.
    """
    patterns = tuple(patterns)
    kept = [e for e in binaries if not any(fnmatch.fnmatch(e[0], p) for p in patterns)]

    def is_root(entry: TocEntry) -> bool:
        dest = entry[0]
        return (
            entry[2] == "EXTENSION"
            or dest.startswith(("PySide6/Qt/plugins/", "llama_cpp/lib/"))
            or posixpath.basename(dest).startswith("libpython")
        )

    by_soname: dict[str, list[TocEntry]] = {}
    for entry in kept:
        by_soname.setdefault(posixpath.basename(entry[0]), []).append(entry)
    # Top-level symlinks (libQt6Core.so.6 -> PySide6/Qt/lib/libQt6Core.so.6) answer to their own names.
    for dest, target, typecode in datas:
        if typecode == "SYMLINK":
            resolved = posixpath.normpath(posixpath.join(posixpath.dirname(dest), target))
            by_soname.setdefault(posixpath.basename(dest), []).extend(e for e in kept if e[0] == resolved)

    reachable: set[str] = set()
    pending = [e for e in kept if is_root(e)]
    while pending:
        entry = pending.pop()
        if entry[0] in reachable:
            continue
        reachable.add(entry[0])
        for soname in imports_of(entry[1]):
            pending.extend(by_soname.get(posixpath.basename(soname), ()))

    final = [e for e in kept if e[0] in reachable]
    removed = sorted({e[0] for e in binaries} - {e[0] for e in final})
    gone = set(removed)
    datas = [
        e
        for e in datas
        if not (
            e[2] == "SYMLINK" and posixpath.normpath(posixpath.join(posixpath.dirname(e[0]), e[1])) in gone
        )
    ]
    return final, datas, removed


def strip_debug_symbols(binaries: list[TocEntry], work: Path) -> list[TocEntry]:
    """Stripped copies (in ``work``) of the bundle's libraries that carry debug symbols.

    libpython alone is 23 MB with them, 6 MB without. Libraries that auditwheel patched
    (``numpy.libs/``, ``pillow.libs/``) are left as they are: strip rewrites their program
    headers and they no longer load ("ELF load command address/offset not page-aligned").
    """
    import shutil
    import subprocess

    strip = shutil.which("strip")
    if strip is None:
        return binaries
    out: list[TocEntry] = []
    for dest, src, typecode in binaries:
        patched = any(part.endswith(".libs") for part in Path(dest).parts[:-1])
        if typecode not in ("BINARY", "EXTENSION") or patched or dest.startswith("llama_cpp/lib/"):
            out.append((dest, src, typecode))
            continue
        target = work / "stripped" / dest
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
        done = subprocess.run([strip, "--strip-unneeded", str(target)], capture_output=True)
        out.append((dest, str(target) if done.returncode == 0 else src, typecode))
    return out
