"""Choosing llama.cpp's build from the CPU's flags and the toolchains present (engine/native/build.py)."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from engine.native import build as nb
from engine.native.build import Backend, BuildError, Toolchain, choose_backend, ggml_cpu_options

# Real /proc/cpuinfo flag sets (trimmed to what matters plus some noise).
AMD_ZEN2_AVX2 = "fpu sse sse2 ssse3 sse4_1 sse4_2 avx f16c fma avx2 bmi1 bmi2 aes sha_ni popcnt"
INTEL_SPR_AMX = (
    "fpu sse sse2 ssse3 sse4_1 sse4_2 avx f16c fma avx2 bmi1 bmi2 avx_vnni avx512f avx512cd avx512vl "
    "avx512dq avx512bw avx512vbmi avx512_vnni avx512_bf16 avx512_fp16 amx_tile amx_int8 amx_bf16"
)
INTEL_SANDY_BRIDGE_AVX = "fpu sse sse2 ssse3 sse4_1 sse4_2 avx popcnt aes xsave"


def enabled(options: dict[str, bool]) -> set[str]:
    return {name for name, on in options.items() if on}


def test_amd_avx2_only_keeps_every_avx2_level_extension():
    options = ggml_cpu_options(AMD_ZEN2_AVX2.split())
    assert options["GGML_NATIVE"] is False
    assert enabled(options) == {"GGML_SSE42", "GGML_AVX", "GGML_F16C", "GGML_FMA", "GGML_AVX2", "GGML_BMI2"}


def test_intel_avx512_with_amx_keeps_avx512_and_vnni_but_never_amx():
    options = ggml_cpu_options(INTEL_SPR_AMX.split())
    assert enabled(options) == {
        "GGML_SSE42",
        "GGML_AVX",
        "GGML_F16C",
        "GGML_FMA",
        "GGML_AVX2",
        "GGML_BMI2",
        "GGML_AVX_VNNI",
        "GGML_AVX512",
        "GGML_AVX512_VBMI",
        "GGML_AVX512_VNNI",
        "GGML_AVX512_BF16",
    }
    assert options["GGML_AMX_TILE"] is False and options["GGML_AMX_INT8"] is False
    assert options["GGML_AMX_BF16"] is False


def test_old_avx_only_cpu_gets_no_avx2_fma_or_f16c():
    assert enabled(ggml_cpu_options(INTEL_SANDY_BRIDGE_AVX.split())) == {"GGML_SSE42", "GGML_AVX"}


def test_every_option_is_set_explicitly_so_nothing_follows_the_building_machine():
    for flags in (AMD_ZEN2_AVX2, INTEL_SPR_AMX, INTEL_SANDY_BRIDGE_AVX, ""):
        options = ggml_cpu_options(flags.split())
        assert set(options) == {"GGML_NATIVE", *(n for n, _, _ in nb.X86_CPU_OPTIONS), *nb.NEVER_ON}


def test_avx512_needs_all_five_subsets_ggml_compiles_in():
    # -DGGML_AVX512 passes -mavx512f/cd/vl/dq/bw: Knights Landing has F and CD but not BW/DQ/VL.
    knl = AMD_ZEN2_AVX2 + " avx512f avx512cd avx512er avx512pf avx512_vnni"
    options = ggml_cpu_options(knl.split())
    assert not options["GGML_AVX512"]
    assert not options["GGML_AVX512_VNNI"], "an AVX-512 extension without AVX-512 itself"


def test_extensions_need_the_level_they_extend():
    # A hypervisor that hides AVX2 but leaves avx_vnni advertised: no VNNI on top of nothing.
    options = ggml_cpu_options(["sse4_2", "avx", "avx_vnni"])
    assert not options["GGML_AVX_VNNI"]


def test_portable_stops_at_the_avx2_level():
    options = ggml_cpu_options(INTEL_SPR_AMX.split(), portable=True)
    assert enabled(options) == {"GGML_SSE42", "GGML_AVX", "GGML_F16C", "GGML_FMA", "GGML_AVX2", "GGML_BMI2"}


def test_other_architectures_use_ggml_defaults_but_never_native():
    assert ggml_cpu_options(["asimd", "sve"], machine="aarch64") == {"GGML_NATIVE": False}


def test_cpu_flags_reads_the_first_flags_line(tmp_path: Path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: X\nflags\t\t: sse4_2 avx avx2\n\nflags\t: other\n")
    assert nb.cpu_flags(cpuinfo) == frozenset({"sse4_2", "avx", "avx2"})
    assert nb.cpu_flags(tmp_path / "missing") == frozenset()


# ----------------------------------------------------------------------------- GPU backend


@pytest.mark.parametrize(
    ("tools", "expected"),
    [
        (Toolchain(nvcc=True, nvidia_driver=True, vulkan_sdk=True, glslc=True), Backend.CUDA),
        (Toolchain(nvcc=True, nvidia_driver=True), Backend.CUDA),
        # nvcc without a driver (a CI image with the toolkit, no GPU): a CUDA build would not load
        (Toolchain(nvcc=True), Backend.CPU),
        (Toolchain(nvcc=True, vulkan_sdk=True, glslc=True), Backend.VULKAN),
        (Toolchain(vulkan_sdk=True, glslc=True), Backend.VULKAN),
        (Toolchain(vulkan_sdk=True), Backend.CPU),  # headers but no shader compiler
        (Toolchain(glslc=True), Backend.CPU),
        (Toolchain(nvidia_driver=True), Backend.CPU),  # a GPU but no toolkit to build for it
        (Toolchain(), Backend.CPU),
    ],
)
def test_backend_follows_the_toolchains_found(tools: Toolchain, expected: Backend):
    choice = choose_backend(None, tools)
    assert choice.backend is expected
    assert choice.reason


def test_requested_backend_overrides_and_is_checked():
    cpu_only = Toolchain()
    everything = Toolchain(nvcc=True, nvidia_driver=True, vulkan_sdk=True, glslc=True)
    assert choose_backend("cpu", everything).backend is Backend.CPU
    assert (
        choose_backend(" CUDA ", Toolchain(nvcc=True)).backend is Backend.CUDA
    )  # build without the GPU here
    assert choose_backend("vulkan", everything).backend is Backend.VULKAN
    with pytest.raises(BuildError, match="nvcc"):
        choose_backend("cuda", cpu_only)
    with pytest.raises(BuildError, match="glslc"):
        choose_backend("vulkan", Toolchain(vulkan_sdk=True))
    with pytest.raises(BuildError, match="cpu, cuda, vulkan"):
        choose_backend("rocm", everything)


def test_toolchain_detection_from_a_fake_root(tmp_path: Path):
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/nvidia0").touch()
    (tmp_path / "usr/include/vulkan").mkdir(parents=True)
    (tmp_path / "usr/include/vulkan/vulkan_core.h").write_text(
        "typedef struct VkLayerSettingEXT {} VkLayerSettingEXT;"
    )
    (tmp_path / "usr/lib/x86_64-linux-gnu").mkdir(parents=True)
    (tmp_path / "usr/lib/x86_64-linux-gnu/libvulkan.so").touch()
    (tmp_path / "usr/share/cmake/SPIRV-Headers").mkdir(parents=True)
    tools = Toolchain.detect(which=lambda name: "/bin/" + name if name == "glslc" else None, root=tmp_path)
    assert tools == Toolchain(nvcc=False, nvidia_driver=True, vulkan_sdk=True, glslc=True)
    assert Toolchain.detect(which=lambda name: None, root=tmp_path / "empty") == Toolchain()
    (tmp_path / "usr/share/cmake/SPIRV-Headers").rmdir()  # ggml-vulkan's CMake cannot configure without it
    assert not Toolchain.detect(which=lambda name: None, root=tmp_path).vulkan_sdk
    (tmp_path / "usr/share/cmake/SPIRV-Headers").mkdir()
    # Debian 12's headers (1.3.239) lack VK_EXT_layer_settings, which ggml-vulkan uses
    (tmp_path / "usr/include/vulkan/vulkan_core.h").write_text("#define VK_HEADER_VERSION 239")
    assert not Toolchain.detect(which=lambda name: None, root=tmp_path).vulkan_sdk


def test_cuda_build_targets_only_this_machines_gpu():
    config = nb.plan_build(
        {"HEARTH_BACKEND": "cuda"}, flags=AMD_ZEN2_AVX2.split(), tools=Toolchain(nvcc=True)
    )
    assert "-DGGML_CUDA=ON" in config.cmake_args
    assert "-DCMAKE_CUDA_ARCHITECTURES=native" in config.cmake_args


# ----------------------------------------------------------------------------- build key, stamp


def test_the_key_changes_with_every_option_and_only_then():
    a = nb.plan_build({}, flags=AMD_ZEN2_AVX2.split(), tools=Toolchain())
    again = nb.plan_build({}, flags=AMD_ZEN2_AVX2.split(), tools=Toolchain())
    wider = nb.plan_build({}, flags=INTEL_SPR_AMX.split(), tools=Toolchain())
    vulkan = nb.plan_build({}, flags=AMD_ZEN2_AVX2.split(), tools=Toolchain(vulkan_sdk=True, glslc=True))
    portable = nb.plan_build({"HEARTH_CPU": "portable"}, flags=INTEL_SPR_AMX.split(), tools=Toolchain())
    bundle = nb.plan_build({}, flags=INTEL_SPR_AMX.split(), tools=Toolchain(), bundle=True)
    assert a.key == again.key
    assert len({a.key, wider.key, vulkan.key, bundle.key}) == 4
    assert portable.cmake_args == a.cmake_args and portable.key == a.key  # the same options: one wheel
    assert "-DGGML_NATIVE=OFF" in a.cmake_args and "-DGGML_AMX_INT8=OFF" in wider.cmake_args
    assert wider.cpu_features[-1] == "AVX512_BF16"


def test_the_bundle_build_carries_every_cpu_variant_chosen_at_run_time():
    bundle = nb.plan_build({}, flags=INTEL_SPR_AMX.split(), tools=Toolchain(), bundle=True)
    args = bundle.cmake_args.split()
    assert {"-DGGML_NATIVE=OFF", "-DGGML_BACKEND_DL=ON", "-DGGML_CPU_ALL_VARIANTS=ON"} <= set(args)
    assert "-DGGML_BACKEND_DIR=llama_cpp/lib" in args
    assert not any("AVX512" in a for a in args), "the variants choose their own instruction sets"


def test_every_build_has_the_rpc_backend_and_it_is_in_the_key():
    for config in (
        nb.plan_build({}, flags=AMD_ZEN2_AVX2.split(), tools=Toolchain()),
        nb.plan_build({}, flags=AMD_ZEN2_AVX2.split(), tools=Toolchain(vulkan_sdk=True, glslc=True)),
        nb.plan_build({"HEARTH_BACKEND": "cuda"}, flags=AMD_ZEN2_AVX2.split(), tools=Toolchain(nvcc=True)),
        nb.plan_build({}, flags=INTEL_SPR_AMX.split(), tools=Toolchain(), bundle=True),
    ):
        assert "-DGGML_RPC=ON" in config.cmake_args.split()
        assert "libggml-rpc.so" in nb.required_libraries(config)
        without = dataclasses.replace(config, rpc=False)
        assert "GGML_RPC" not in without.cmake_args
        assert without.key != config.key, "an RPC build has its own wheel"


def test_a_wheel_without_libggml_rpc_is_refused(tmp_path, monkeypatch):
    venv = FakeVenv(tmp_path, monkeypatch)
    venv.libraries.remove("libggml-rpc.so")
    with pytest.raises(BuildError, match=r"libggml-rpc\.so"):
        venv.ensure()
    assert not list((tmp_path / "wheelhouse").rglob("*.whl")), "nothing half-built is kept"


def test_unknown_cpu_mode_is_refused():
    with pytest.raises(BuildError, match="portable"):
        nb.plan_build({"HEARTH_CPU": "fastest"}, flags=[], tools=Toolchain())


def test_the_llama_pin_comes_from_pyproject():
    assert nb.llama_requirement().startswith("llama-cpp-python==")


class FakeVenv:
    """A venv folder with llama_cpp 'installed', a wheelhouse, and a record of what ran."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.prefix = root / "venv"
        (self.prefix / "lib/python3.11/site-packages/llama_cpp").mkdir(parents=True)
        (self.prefix / "lib/python3.11/site-packages/llama_cpp/__init__.py").touch()
        self.env = {"HEARTH_WHEELHOUSE": str(root / "wheelhouse")}
        self.commands: list[list[str]] = []
        self.flags = AMD_ZEN2_AVX2.split()
        self.libraries = [
            "libllama.so",
            "libggml.so",
            "libggml-base.so",
            "libggml-cpu.so",
            "libmtmd.so",
            "libggml-rpc.so",
        ]
        monkeypatch.setattr(nb, "cpu_flags", lambda: frozenset(self.flags))
        monkeypatch.setattr(nb.Toolchain, "detect", classmethod(lambda cls: Toolchain()))
        monkeypatch.setattr(nb.subprocess, "run", self._run)

    def _run(self, cmd, env=None, **kwargs):
        self.commands.append(list(cmd))
        if "wheel" in cmd:  # pip wheel ... --wheel-dir DIR
            out = Path(cmd[cmd.index("--wheel-dir") + 1])
            # A zip like pip's: the build's libraries in llama_cpp/lib, and its CMAKE_ARGS.
            with zipfile.ZipFile(out / "llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl", "w") as zf:
                zf.writestr("llama_cpp_python-0.3.36.dist-info/RECORD", "")
                zf.writestr("cmake_args.txt", env["CMAKE_ARGS"])
                for name in self.libraries:
                    zf.writestr(f"llama_cpp/lib/{name}", b"\x7fELF")
        return type("Done", (), {"returncode": 0, "stdout": "", "stderr": ""})()

    def ensure(self) -> dict:
        return nb.ensure(self.prefix, "python", self.env)

    @property
    def builds(self) -> int:
        return sum("wheel" in c for c in self.commands)

    @property
    def installs(self) -> int:
        return sum("install" in c for c in self.commands)


def test_ensure_builds_once_then_does_nothing_while_nothing_changes(tmp_path, monkeypatch, capsys):
    venv = FakeVenv(tmp_path, monkeypatch)
    stamp = venv.ensure()
    assert (venv.builds, venv.installs) == (1, 1)
    assert json.loads((venv.prefix / nb.STAMP_NAME).read_text())["key"] == stamp["key"]
    assert stamp["cpu_features"] == ["SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2"]
    assert "-DGGML_AVX512=OFF" in stamp["cmake_args"]
    venv.ensure()
    assert (venv.builds, venv.installs) == (1, 1), "nothing changed: nothing built or installed"
    line = [ln for ln in capsys.readouterr().out.splitlines() if "backend" in ln][-1]
    assert "cpu" in line and "HEARTH_BACKEND=cpu|cuda|vulkan" in line


def test_changed_options_rebuild_and_a_known_build_comes_from_the_wheelhouse(tmp_path, monkeypatch):
    venv = FakeVenv(tmp_path, monkeypatch)
    first = venv.ensure()
    venv.flags = INTEL_SPR_AMX.split()  # the same venv on a wider CPU (or new options)
    second = venv.ensure()
    assert second["key"] != first["key"]
    assert (venv.builds, venv.installs) == (2, 2)
    wheel = Path(second["wheel"])
    args = zipfile.ZipFile(wheel).read("cmake_args.txt").decode()
    assert "-DGGML_AVX512=ON" in args and "-DGGML_AMX_TILE=OFF" in args
    assert wheel.parent.name == second["key"], "the wheelhouse is keyed by the options"
    venv.flags = AMD_ZEN2_AVX2.split()  # back: installed again, but not compiled again
    venv.ensure()
    assert (venv.builds, venv.installs) == (2, 3)


def test_the_wheel_is_never_taken_from_or_put_in_pips_cache(tmp_path, monkeypatch):
    venv = FakeVenv(tmp_path, monkeypatch)
    venv.ensure()
    build = next(c for c in venv.commands if "wheel" in c)
    install = next(c for c in venv.commands if "install" in c)
    assert "--no-cache-dir" in build and "--no-binary" in build
    assert "--no-cache-dir" in install and "--force-reinstall" in install and "--no-deps" in install


def test_the_installed_build_has_a_stamp_without_amx():
    """The venv the suite runs in was set up by `make`, through native_build."""
    import sys

    stamp = nb.read_stamp(Path(sys.prefix))
    if stamp is None:
        pytest.skip("this Python was not set up by `make` (no build stamp)")
    assert "-DGGML_NATIVE=OFF" in stamp["cmake_args"]
    assert "AMX" not in " ".join(stamp["cpu_features"])
    objdump = shutil.which("objdump")
    if objdump is None:
        return
    from engine.native.lib_dir import llama_lib_dir

    for lib in (llama_lib_dir() or Path()).glob("libggml-cpu*.so"):
        listing = subprocess.run([objdump, "-d", str(lib)], capture_output=True, text=True).stdout
        assert "tilezero" not in listing and "tdpbssd" not in listing, f"AMX tile code in {lib.name}"


def test_files_added_to_a_wheel_are_in_its_record(tmp_path: Path) -> None:
    import base64
    import hashlib
    import zipfile

    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("pkg/__init__.py", "")
        z.writestr("pkg-1.0.dist-info/RECORD", "pkg/__init__.py,,0\npkg-1.0.dist-info/RECORD,,\n")
    module = tmp_path / "libggml-cpu-haswell.so"
    module.write_bytes(b"\x7fELF module")
    nb.add_to_wheel(wheel, [module], "pkg/lib")
    with zipfile.ZipFile(wheel) as z:
        assert z.read("pkg/lib/libggml-cpu-haswell.so") == b"\x7fELF module"
        record = z.read("pkg-1.0-dist-info/RECORD".replace("-dist", ".dist")).decode().splitlines()
    digest = base64.urlsafe_b64encode(hashlib.sha256(b"\x7fELF module").digest()).rstrip(b"=").decode()
    assert f"pkg/lib/libggml-cpu-haswell.so,sha256={digest},11" in record
    assert "pkg/__init__.py,,0" in record


def test_a_failed_gpu_build_that_was_not_asked_for_falls_back_to_the_cpu(tmp_path, monkeypatch, capsys):
    venv = FakeVenv(tmp_path, monkeypatch)
    monkeypatch.setattr(
        nb.Toolchain, "detect", classmethod(lambda cls: Toolchain(vulkan_sdk=True, glslc=True))
    )
    real = venv._run
    failed: list[str] = []

    def run(cmd, env=None, **kwargs):
        if "wheel" in cmd and "GGML_VULKAN=ON" in env["CMAKE_ARGS"]:
            failed.append(env["CMAKE_ARGS"])
            return type("Done", (), {"returncode": 1})()
        return real(cmd, env=env, **kwargs)

    monkeypatch.setattr(nb.subprocess, "run", run)
    stamp = venv.ensure()
    assert stamp["backend"] == "cpu" and len(failed) == 1
    assert "the vulkan build failed" in capsys.readouterr().out
    venv.env["HEARTH_BACKEND"] = "vulkan"  # asked for: the failure is the answer
    with pytest.raises(BuildError, match="compiling"):
        venv.ensure()
    assert len(failed) == 2
