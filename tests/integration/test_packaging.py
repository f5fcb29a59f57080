"""The installable app: `hearth --self-test`, the PyInstaller bundle and the .deb.

The slow tests build the bundle from this test environment (packaging/build.sh
--from-current-env: its llama.cpp build is fine on the machine that built it), run it from
outside the source tree with a clean environment, and unpack the .deb into a temporary
root. They need PyInstaller (the `package` extra) and dpkg-deb, and fail, not skip, without
them: a packaging test that silently skips proves nothing.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from types import ModuleType

import pytest

from tests.package_build import BUNDLE_BUILD, BundleBuild

REPO = Path(__file__).resolve().parents[2]
PACKAGING = REPO / "packaging"
APP_ID = "io.hearth.Hearth"
LLAMA_VERSION = importlib.metadata.version("llama-cpp-python")
SELF_TEST_LINE = re.compile(
    rf"^Hearth self-test OK: llama\.cpp {re.escape(LLAMA_VERSION)}, (CPU|GPU)( \([^)]*\))?, "
    r"loaded in \d+\.\d\d s, 16 tokens at [\d,]+ tok/s, Qt 6\.[\d.]+ \(offscreen\)$"
)


def load_packaging_module(name: str) -> ModuleType:
    """packaging/ holds scripts, not a package: load one by path."""
    spec = importlib.util.spec_from_file_location(f"hearth_packaging_{name}", PACKAGING / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build_py = load_packaging_module("build")
bundle_rules = load_packaging_module("bundle_rules")


def clean_env(home: Path) -> dict[str, str]:
    """Nothing from the developer's shell: no venv, no PYTHONPATH, no LD_LIBRARY_PATH, no display."""
    return {"PATH": "/usr/bin:/bin", "HOME": str(home), "QT_QPA_PLATFORM": "offscreen"}


def run_outside(executable: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [str(executable), *args], cwd=cwd, env=clean_env(cwd), capture_output=True, text=True, timeout=300
    )


def report_line(result: subprocess.CompletedProcess[str], prefix: str) -> str:
    lines = [line for line in result.stdout.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return lines[0]


# -- self-test, in this process ------------------------------------------------------------------


def test_self_test_passes_and_prints_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli.commands import run_cli

    assert run_cli(["--self-test"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1
    assert SELF_TEST_LINE.match(out[0]), out[0]


def test_self_test_reports_a_failure_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.platform import self_test
    from engine.native import backend as native

    monkeypatch.setattr(native, "load_error", lambda: "llama.cpp could not be loaded: OSError: libgomp.so.1")
    assert self_test.run_self_test() == 1
    assert capsys.readouterr().out == (
        "Hearth self-test FAILED: llama.cpp could not be loaded: OSError: libgomp.so.1\n"
    )


def test_self_test_leaves_the_environment_as_it_was() -> None:
    from app.platform import self_test

    before = dict(os.environ)
    assert self_test.run_self_test() == 0
    assert dict(os.environ) == before


def test_seconds_since_process_start_is_plausible() -> None:
    import psutil

    from app.platform.self_test import seconds_since_process_start

    elapsed = seconds_since_process_start()
    assert 0 < elapsed < 24 * 3600
    # psutil's number is only good to about a second (whole-second boot time).
    assert abs(elapsed - (time.time() - psutil.Process().create_time())) < 2.0


# -- resources and packaging rules -----------------------------------------------------------------


def test_icons_exist_in_every_size() -> None:
    from PySide6.QtGui import QImage

    for size in build_py.ICON_SIZES:
        image = QImage(str(REPO / "resources" / "icons" / f"hearth-{size}.png"))
        assert (image.width(), image.height()) == (size, size)
        assert image.hasAlphaChannel()


def test_desktop_entry_in_the_repository_validates() -> None:
    entry = REPO / "resources" / f"{APP_ID}.desktop"
    fields = desktop_entry_fields(entry)
    assert fields["Exec"] == "hearth" and fields["Icon"] == APP_ID and fields["Type"] == "Application"
    assert_valid_desktop_entry(entry)


def test_elf_needed_reads_the_llama_libraries() -> None:
    lib_dir = bundle_rules.llama_cpp_lib_dir()
    llama = next(p for p in sorted(lib_dir.iterdir()) if p.name.startswith("libllama.so"))
    needed = build_py.elf_needed(llama)
    assert needed is not None and "libggml.so.0" in needed and "libc.so.6" in needed
    assert build_py.elf_needed(REPO / "pyproject.toml") is None


def test_depends_names_a_package_for_every_library_the_bundle_does_not_carry(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(
        build_py, "external_libraries", lambda bundle: {"libGL.so.1": ["x.so"], "libm.so.6": []}
    )
    depends = build_py.debian_depends(tmp_path)
    assert "libgl1" in depends and any(d.startswith("libc6") for d in depends)
    assert set(build_py.DATA_PACKAGES) <= set(depends)

    monkeypatch.setattr(build_py, "external_libraries", lambda bundle: {"libnew.so.3": ["plugin.so"]})
    with pytest.raises(build_py.BuildError, match=r"libnew\.so\.3 \(needed by plugin\.so\)"):
        build_py.debian_depends(tmp_path)


def test_cpu_variants_are_bundled_but_never_the_amx_one(tmp_path: Path) -> None:
    names = ["libllama.so", "libggml.so", "libggml-base.so", "libmtmd.so", "libggml-rpc.so",
             "libggml-cpu-x64.so", "libggml-cpu-haswell.so", "libggml-cpu-zen4.so",
             "libggml-cpu-sapphirerapids.so"]  # fmt: skip
    for name in names:
        (tmp_path / name).write_bytes(b"\x7fELF")
    bundled = {Path(src).name for src, _ in bundle_rules.llama_cpp_libs(tmp_path)}
    assert bundled == set(names) - {"libggml-cpu-sapphirerapids.so"}
    (tmp_path / "libggml-cpu-x64.so").unlink()
    (tmp_path / "libggml-cpu-haswell.so").unlink()
    (tmp_path / "libggml-cpu-zen4.so").unlink()
    with pytest.raises(SystemExit, match="no ggml-cpu library"):
        bundle_rules.llama_cpp_libs(tmp_path)  # only the AMX variant left: nothing to run on


def test_a_llama_cpp_without_the_rpc_library_is_not_bundled(tmp_path: Path) -> None:
    for name in ["libllama.so", "libggml.so", "libggml-base.so", "libmtmd.so", "libggml-cpu.so"]:
        (tmp_path / name).write_bytes(b"\x7fELF")
    with pytest.raises(SystemExit, match="no ggml-rpc library"):
        bundle_rules.llama_cpp_libs(tmp_path)  # `hearth worker` could not run from that bundle
    (tmp_path / "libggml-rpc.so").write_bytes(b"\x7fELF")
    assert "libggml-rpc.so" in {Path(src).name for src, _ in bundle_rules.llama_cpp_libs(tmp_path)}


def test_identical_llama_libs_become_symlinks_to_the_versioned_file(tmp_path: Path) -> None:
    for name, content in [("libx.so", b"x"), ("libx.so.0", b"x"), ("libx.so.0.1.2", b"x"), ("liby.so", b"y")]:
        (tmp_path / name).write_bytes(content)
    binaries = [(f"llama_cpp/lib/{p.name}", str(p), "BINARY") for p in sorted(tmp_path.iterdir())]
    binaries.append(("libother.so", "/elsewhere/libother.so", "BINARY"))
    kept, links = bundle_rules.link_identical_llama_libs(binaries)
    assert [e[0] for e in kept] == ["llama_cpp/lib/libx.so.0.1.2", "llama_cpp/lib/liby.so", "libother.so"]
    assert sorted(links) == [
        ("llama_cpp/lib/libx.so", "libx.so.0.1.2", "SYMLINK"),
        ("llama_cpp/lib/libx.so.0", "libx.so.0.1.2", "SYMLINK"),
    ]


def test_dropping_a_qt_plugin_drops_the_libraries_only_it_needed() -> None:
    binaries = [
        ("PySide6/Qt/plugins/platformthemes/libqgtk3.so", "/s/libqgtk3.so", "BINARY"),
        ("PySide6/Qt/plugins/platforms/libqxcb.so", "/s/libqxcb.so", "BINARY"),
        ("PySide6/QtCore.abi3.so", "/s/QtCore.abi3.so", "EXTENSION"),
        ("PySide6/Qt/lib/libQt6Core.so.6", "/s/libQt6Core.so.6", "BINARY"),
        ("libcairo.so.2", "/s/libcairo.so.2", "BINARY"),
        ("libpixman-1.so.0", "/s/libpixman-1.so.0", "BINARY"),
        ("libglib-2.0.so.0", "/s/libglib-2.0.so.0", "BINARY"),
        ("libpython3.11.so.1.0", "/s/libpython3.11.so.1.0", "BINARY"),
    ]
    datas = [
        ("libQt6Core.so.6", "PySide6/Qt/lib/libQt6Core.so.6", "SYMLINK"),
        ("libcairo.so", "libcairo.so.2", "SYMLINK"),
        ("resources/hearth.svg", "/s/hearth.svg", "DATA"),
    ]
    imports = {
        "/s/libqgtk3.so": ["libcairo.so.2", "libglib-2.0.so.0", "libQt6Core.so.6"],
        "/s/libcairo.so.2": ["libpixman-1.so.0"],
        "/s/libqxcb.so": ["libQt6Core.so.6"],
        "/s/QtCore.abi3.so": ["libQt6Core.so.6"],
        "/s/libQt6Core.so.6": ["libglib-2.0.so.0"],
    }
    kept, kept_datas, removed = bundle_rules.drop_qt_plugins(
        binaries, datas, lambda path: imports.get(path, []), ["PySide6/Qt/plugins/platformthemes/libqgtk3.so"]
    )
    assert removed == ["PySide6/Qt/plugins/platformthemes/libqgtk3.so", "libcairo.so.2", "libpixman-1.so.0"]
    assert {e[0] for e in kept} == {e[0] for e in binaries} - set(removed)
    assert kept_datas == [datas[0], datas[2]]


# -- the bundle and the .deb, built from this environment ------------------------------------------


@pytest.fixture(scope="module")
def built(request: pytest.FixtureRequest) -> Path:
    """`packaging/build.sh --from-current-env` into a temporary dist/ (started in the
    background when the session's tests were collected: tests/package_build.py); returns that
    folder."""
    if importlib.util.find_spec("PyInstaller") is None:
        pytest.fail(
            "PyInstaller is not installed in the test environment: the packaging test cannot run. "
            "Install the 'package' extra (pip install -e '.[package]')."
        )
    build = request.config.stash.get(BUNDLE_BUILD, None)
    if build is None:  # collected some other way: built here, then
        build = BundleBuild.start()
        request.addfinalizer(build.stop)
    code, output = build.wait()
    assert code == 0, f"build failed\n{output}"
    return build.dist


@pytest.mark.slow
def test_bundled_self_test_runs_outside_the_source_tree(built: Path, tmp_path: Path) -> None:
    result = run_outside(built / "hearth" / "hearth", "--self-test", cwd=tmp_path / "elsewhere")
    line = report_line(result, "Hearth self-test")
    assert result.returncode == 0, result.stdout + result.stderr
    assert SELF_TEST_LINE.match(line), line
    # The clean HOME stays clean: the self-test writes only inside its temporary folder.
    assert not any((tmp_path / "elsewhere").iterdir())


@pytest.mark.slow
def test_bundle_carries_llama_cpp_resources_and_only_the_qt_it_needs(built: Path) -> None:
    internal = built / "hearth" / "_internal"
    lib_dir = bundle_rules.llama_cpp_lib_dir()
    bundled_lib = internal / "llama_cpp" / "lib"
    assert {p.name for p in bundled_lib.iterdir()} == {p.name for p in lib_dir.iterdir()}
    for path in bundled_lib.iterdir():
        assert path.resolve().is_file()
    # One real file per library: libggml.so and libggml.so.0 must load as the same object.
    real_files = {p.resolve() for p in bundled_lib.iterdir()}
    assert len(real_files) == len({p.name.split(".so")[0] for p in lib_dir.iterdir()})

    assert (internal / "resources" / "hearth.svg").is_file()
    assert (internal / "resources" / "icons" / "hearth-512.png").is_file()

    bindings = {p.name.split(".")[0] for p in (internal / "PySide6").glob("Qt*.so")}
    assert {"QtCore", "QtGui", "QtWidgets"} <= bindings
    assert bindings <= {"QtCore", "QtGui", "QtWidgets", "QtSvg", "QtOpenGL", "QtOpenGLWidgets"}, bindings
    qt_libs = {p.name for p in (internal / "PySide6" / "Qt" / "lib").iterdir()}
    for unwanted in ("libQt6Qml", "libQt6Quick", "libQt6WebEngineCore", "libQt6Network", "libQt6Multimedia"):
        assert not any(name.startswith(unwanted + ".") for name in qt_libs), unwanted
    plugins = internal / "PySide6" / "Qt" / "plugins"
    assert (plugins / "platforms" / "libqxcb.so").is_file()
    assert (plugins / "platforms" / "libqwayland.so").is_file()
    assert (plugins / "iconengines" / "libqsvgicon.so").is_file()
    assert not (plugins / "platformthemes" / "libqgtk3.so").exists()
    assert not (internal / "PySide6" / "Qt" / "translations").exists()

    # No test code, no test tools (they live in the PYZ archive if anywhere: check its table of contents).
    toc = pyz_module_names(built.parent / "work" / "hearth")
    assert "engine.loaded_model" in toc and "app.platform.self_test" in toc
    for unwanted in (
        "tests",
        "pytest",
        "pytestqt",
        "hypothesis",
        "tkinter",
        "llama_cpp.llava_cpp",
        "PIL._avif",
    ):
        assert unwanted not in toc and not any(m.startswith(unwanted + ".") for m in toc), unwanted


@pytest.mark.slow
def test_bundled_app_opens_its_window_offscreen(built: Path, tmp_path: Path) -> None:
    result = run_outside(built / "hearth" / "hearth", "--startup-probe", cwd=tmp_path / "elsewhere")
    line = report_line(result, "Hearth startup probe")
    assert result.returncode == 0, result.stdout + result.stderr
    match = re.match(
        r"^Hearth startup probe: first window painted (\d+\.\d\d) s after process start "
        r"\(Qt platform offscreen; empty-library help shown: yes\)$",
        line,
    )
    assert match, line
    assert float(match.group(1)) < 30.0
    print(f"\n{line}")  # visible with -s: the cold start number for the packaging notes


@pytest.mark.slow
def test_deb_installs_launcher_desktop_entry_and_icons(built: Path, tmp_path: Path) -> None:
    version = build_py.project_version()
    debs = sorted(built.glob(f"hearth_{version}_*.deb"))
    assert len(debs) == 1, debs
    fields = subprocess.run(
        ["dpkg-deb", "--field", str(debs[0]), "Package", "Version", "Depends"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "Package: hearth" in fields and f"Version: {version}" in fields
    # What PyInstaller never bundles; the rest depends on what the build machine had installed.
    for package in ("libc6 (>= ", "libgl1", "libxcb1", "fontconfig-config", "xkb-data"):
        assert package in fields, (package, fields)

    root = tmp_path / "root"
    subprocess.run(["dpkg", "-x", str(debs[0]), str(root)], check=True)

    entry = root / "usr" / "share" / "applications" / f"{APP_ID}.desktop"
    fields_of_entry = desktop_entry_fields(entry)
    # The menu entry runs the launcher on the PATH, which runs the bundle in /opt/hearth.
    launcher = root / "usr" / "bin" / fields_of_entry["Exec"].split()[0]
    assert launcher.is_file() and os.access(launcher, os.X_OK)
    assert "exec /opt/hearth/hearth " in launcher.read_text()
    assert (root / "opt" / "hearth" / "hearth").is_file()
    assert os.access(root / "opt" / "hearth" / "hearth", os.X_OK)
    assert fields_of_entry["TryExec"] == fields_of_entry["Exec"]

    icons = root / "usr" / "share" / "icons" / "hicolor"
    icon = fields_of_entry["Icon"]
    for size in build_py.ICON_SIZES:
        assert (icons / f"{size}x{size}" / "apps" / f"{icon}.png").is_file(), size
    assert (icons / "scalable" / "apps" / f"{icon}.svg").is_file()

    # The unpacked files still run: dpkg kept the symlinks and the executable bits.
    result = run_outside(root / "opt" / "hearth" / "hearth", "--self-test", cwd=tmp_path / "elsewhere")
    assert SELF_TEST_LINE.match(report_line(result, "Hearth self-test"))

    assert_valid_desktop_entry(entry)


# -- helpers ---------------------------------------------------------------------------------------


def desktop_entry_fields(path: Path) -> dict[str, str]:
    fields: dict[str, str] = {}
    group = None
    for line in path.read_text().splitlines():
        if line.startswith("["):
            group = line.strip()
        elif group == "[Desktop Entry]" and "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            fields[key.strip()] = value.strip()
    return fields


def test_the_desktop_entry_rules_catch_a_broken_entry(tmp_path: Path) -> None:
    broken = tmp_path / "broken.desktop"
    broken.write_text(
        "[Desktop Entry]\nType=Program\nName=A\nName=B\nTerminal=yes\nCategories=Science\nbad key=1\n"
    )
    problems = desktop_entry_problems(broken)
    assert len(problems) == 6, problems  # type, duplicate, boolean, list, key name, no Exec
    assert desktop_entry_problems(REPO / "resources" / f"{APP_ID}.desktop") == []


# The Desktop Entry Specification 1.5's rules for the keys Hearth writes: desktop-file-validate
# checks them too where it is installed, and without it the suite still checks, never skips.
_KEY = re.compile(r"[A-Za-z0-9-]+(\[[A-Za-z_@.]+\])?$")
_BOOLEAN_KEYS = {"Terminal", "StartupNotify", "NoDisplay", "Hidden", "DBusActivatable"}
_LIST_KEYS = {"Categories", "Keywords", "MimeType", "OnlyShowIn", "NotShowIn", "Actions", "Implements"}
_MAIN_CATEGORIES = {"AudioVideo", "Audio", "Video", "Development", "Education", "Game", "Graphics"}
_MAIN_CATEGORIES |= {"Network", "Office", "Science", "Settings", "System", "Utility"}


def desktop_entry_problems(path: Path) -> list[str]:
    problems: list[str] = []
    lines = [line for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
    if not lines or lines[0] != "[Desktop Entry]":
        return ["the first group is not [Desktop Entry]"]
    seen: dict[str, str] = {}
    for line in lines[1:]:
        if line.startswith("["):
            break
        key, equals, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not equals or not _KEY.match(key):
            problems.append(f"{key!r} is not a valid key")
            continue
        if key in seen:
            problems.append(f"{key} appears twice")
        seen[key] = value
        if key in _BOOLEAN_KEYS and value not in ("true", "false"):
            problems.append(f"{key}={value}: a boolean is true or false")
        if key in _LIST_KEYS and not value.endswith(";"):
            problems.append(f"{key}={value}: a list ends with ';'")
    if seen.get("Type") not in ("Application", "Link", "Directory"):
        problems.append(f"Type={seen.get('Type')} is not Application, Link or Directory")
    if "Name" not in seen:
        problems.append("no Name")
    dbus = seen.get("DBusActivatable") == "true"
    if seen.get("Type") in ("Application", "Program") and "Exec" not in seen and not dbus:
        problems.append("an Application needs Exec")
    categories = [c for c in seen.get("Categories", "").split(";") if c]
    if categories and not _MAIN_CATEGORIES & set(categories):
        problems.append(f"Categories={seen['Categories']} names no main category")
    return problems


def assert_valid_desktop_entry(entry: Path) -> None:
    assert desktop_entry_problems(entry) == []
    validator = shutil.which("desktop-file-validate")
    if validator is not None:
        result = subprocess.run([validator, str(entry)], capture_output=True, text=True)
        assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def pyz_module_names(work: Path) -> set[str]:
    """Module names PyInstaller put in the bundle's PYZ archive (from its build record)."""
    import ast

    toc = ast.literal_eval((work / "PYZ-00.toc").read_text())
    entries = next(part for part in toc if isinstance(part, list) and part and isinstance(part[0], tuple))
    return {name for name, _path, _typecode in entries}
