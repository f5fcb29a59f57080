"""The native self-check: a build that would die of SIGILL is caught in a child, once per build."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.base.errors import NativeBuildUnsafe
from engine.native import probe as native_probe

REPO = Path(__file__).resolve().parents[2]


def child(code: str) -> list[str]:
    """A stand-in probe child: says its features like the real one, then runs ``code``."""
    report = json.dumps({"features": ["SSE3", "AVX", "AVX2", "AVX512", "AMX_INT8"]})
    return [sys.executable, "-c", f"import os, signal, time; print({report!r}, flush=True); {code}"]


SIGILL_CHILD = child("os.kill(os.getpid(), signal.SIGILL)")


def test_a_child_killed_by_sigill_becomes_one_line_naming_signal_features_and_fix():
    result = native_probe.run_probe("b1", SIGILL_CHILD)
    assert not result.ok
    assert result.signal_name == "SIGILL"
    assert result.compiled_features == ("SSE3", "AVX", "AVX2", "AVX512", "AMX_INT8")
    assert "\n" not in result.message
    assert "SIGILL" in result.message and "illegal instruction" in result.message
    assert "AVX512, AMX_INT8" in result.message
    assert "HEARTH_CPU=portable make native" in result.message
    assert result.remembered


def test_require_safe_build_raises_the_typed_error(tmp_path: Path):
    with pytest.raises(NativeBuildUnsafe, match="SIGILL"):
        native_probe.require_safe_build(tmp_path / "probe.json", SIGILL_CHILD)


def test_the_verdict_is_remembered_per_build(tmp_path: Path):
    counter = tmp_path / "runs"
    counting = child(f"open({str(counter)!r}, 'a').write('x')")
    cache = tmp_path / "probe.json"
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "libggml-cpu.so").write_bytes(b"one build")
    first = native_probe.check_build(cache, counting, lib)
    second = native_probe.check_build(cache, counting, lib)
    assert first.ok and second.ok
    assert counter.read_text() == "x", "the second start asked the cache, not a child"
    assert second.compiled_features == first.compiled_features
    (lib / "libggml-cpu.so").write_bytes(b"a rebuilt library")  # a new build: probed again
    native_probe.check_build(cache, counting, lib)
    assert counter.read_text() == "xx"
    assert len(json.loads(cache.read_text())) == 2


def test_a_remembered_crash_stays_until_the_build_changes(tmp_path: Path):
    cache = tmp_path / "probe.json"
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "libggml-cpu.so").write_bytes(b"bad build")
    assert not native_probe.check_build(cache, SIGILL_CHILD, lib).ok
    # even a command that would pass is not run: the crash is known for this build
    again = native_probe.check_build(cache, child("pass"), lib)
    assert not again.ok and again.signal_name == "SIGILL"


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("os.kill(os.getpid(), signal.SIGKILL)", "SIGKILL"),  # the OOM killer: says nothing of the build
        ("raise SystemExit(3)", "exit 3"),
        ("time.sleep(30)", "did not finish"),
    ],
)
def test_failures_that_say_nothing_about_the_build_are_not_remembered(code: str, expected: str):
    result = native_probe.run_probe("b2", child(code), timeout=3)
    assert not result.ok and expected in result.message
    assert not result.remembered


def test_an_unwritable_cache_only_means_probing_again(tmp_path: Path):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    result = native_probe.check_build(blocked / "probe.json", child("pass"), tmp_path)
    assert result.ok


def test_the_real_probe_passes_on_this_build():
    """The actual child: a Q4_0 model loaded and decoded with the installed llama.cpp."""
    result = native_probe.run_probe("real", native_probe.probe_command())
    assert result.ok, result.message
    assert (
        "AVX2" in result.compiled_features or not result.compiled_features or os.uname().machine != "x86_64"
    )


def test_a_failed_probe_keeps_llama_cpp_out_of_the_process_and_says_so(tmp_path: Path, tiny_model: Path):
    """The CLI with a remembered SIGILL verdict for this build: one line, no traceback, no crash."""
    cache_home = tmp_path / "cache"
    env = dict(os.environ, XDG_CACHE_HOME=str(cache_home))
    script = (
        "from engine.native import probe as p; import sys;"
        f"r = p.check_build(command={SIGILL_CHILD!r}); sys.exit(0 if not r.ok else 1)"
    )
    assert subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env).returncode == 0

    chat = subprocess.run(
        [sys.executable, "-m", "app", "--data-dir", str(tmp_path / "data"), "chat", str(tiny_model), "hi"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert chat.returncode == 2, chat.stderr
    lines = [ln for ln in chat.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, chat.stderr
    assert lines[0].startswith("hearth: llama.cpp crashed with SIGILL") and "make native" in lines[0]

    hardware = subprocess.run(
        [sys.executable, "-m", "app", "hardware"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert hardware.returncode == 0
    assert "llama.cpp build: unusable: llama.cpp crashed with SIGILL" in hardware.stdout
    assert "CPU features:" in hardware.stdout

    check = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, engine.native.backend as n; ok = n.ensure_backend();"
            "sys.exit(0 if not ok and 'llama_cpp' not in sys.modules else 1)",
        ],
        cwd=REPO,
        env=env,
    )
    assert check.returncode == 0, "llama_cpp was imported although its build failed the self-check"


def test_hardware_shows_what_the_build_has_next_to_what_the_cpu_has():
    done = subprocess.run(
        [sys.executable, "-m", "app", "hardware"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "CPU features:" in out and "compiled for:" in out and "backends: CPU" in out
