"""`hearth search`, `hearth pull` and `hearth plan hf://…` against the fake Hub."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from app.cli.commands import run_cli
from app.platform.paths import resolve_paths
from app.settings.hub_settings import (
    HubSettings,
    KeyringUnavailable,
    load_settings,
    read_token,
    save_settings,
    store_token,
)
from tests.fake_hub import FakeHub
from tests.hub_fixtures import EMPTY_REPO, GATED_REPO, SPLIT_REPO, TINY_REPO


@pytest.fixture()
def hub_env(fake_hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> FakeHub:
    monkeypatch.setenv("HF_ENDPOINT", fake_hub.url)
    return fake_hub


def run(capsys: pytest.CaptureFixture[str], tmp_path: Path, *argv: str) -> tuple[int, str, str]:
    code = run_cli(["--data-dir", str(tmp_path / "data"), "--models-dir", str(tmp_path / "models"), *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_search_prints_one_line_per_repository(capsys, tmp_path: Path, hub_env: FakeHub) -> None:
    code, out, _ = run(capsys, tmp_path, "search", "tiny")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith(TINY_REPO) and "1,200 downloads" in lines[0] and "apache-2.0" in lines[0]
    assert any(line.startswith(SPLIT_REPO) for line in lines)


def test_search_json(capsys, tmp_path: Path, hub_env: FakeHub) -> None:
    code, out, _ = run(capsys, tmp_path, "search", "GGUF", "--json")
    assert code == 0
    data = json.loads(out)
    gated = next(r for r in data if r["repo_id"] == GATED_REPO)
    assert gated["gated"] is True and gated["license"] == "llama3"


def test_plan_from_the_hub(capsys, tmp_path: Path, hub_env: FakeHub) -> None:
    code, out, err = run(capsys, tmp_path, "plan", f"hf://{TINY_REPO}/tiny-llama-Q8_0.gguf", "--ctx", "1024")
    assert code == 0, err
    assert out.startswith("Tiny Llama: ")
    assert "header read from the Hub" in err and "in 2 requests" in err
    code, out, err = run(capsys, tmp_path, "plan", f"hf://{TINY_REPO}/tiny-llama-Q8_0.gguf", "--json")
    assert code == 0 and json.loads(out)["verdict"] in ("fits", "tight: may swap")
    assert "cached" in err  # the second plan read nothing from the Hub
    assert not (tmp_path / "models").exists() or not list((tmp_path / "models").rglob("*.gguf"))


def test_pull_downloads_verifies_and_prints_the_path(capsys, tmp_path: Path, hub_env: FakeHub,
                                                     hub_files: dict[str, Path]) -> None:  # fmt: skip
    code, out, err = run(capsys, tmp_path, "pull", f"{TINY_REPO}:Q8_0", "--with-projector")
    assert code == 0, err
    model, projector = (Path(line) for line in out.splitlines())
    assert model == (tmp_path / "models" / TINY_REPO / "tiny-llama-Q8_0.gguf").resolve()
    assert _sha(model) == _sha(hub_files["q8"]) and projector.name == "mmproj-tiny-llama-F16.gguf"
    assert "Q8_0: fits" in err and "100%" in err


def test_pull_a_split_model(capsys, tmp_path: Path, hub_env: FakeHub) -> None:
    code, out, err = run(capsys, tmp_path, "pull", SPLIT_REPO, "--no-plan")
    assert code == 0, err
    assert Path(out.strip()).name.startswith("tiny-split-F32-00001-of-")
    assert len(list((tmp_path / "models").rglob("*.gguf"))) >= 2


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        (EMPTY_REPO, f"hearth: {EMPTY_REPO} has no GGUF model files Hearth can use."),
        (GATED_REPO, "hearth: the header of locked-Q8_0.gguf needs a Hugging Face token"),
        (
            "test-org/missing",
            "hearth: repository test-org/missing was not found on the Hub (or it is private).",
        ),
        (f"{TINY_REPO}:Q2_K", f"hearth: {TINY_REPO} has no 'Q2_K'; it offers"),
    ],
)
def test_pull_failures_are_one_line(capsys, tmp_path: Path, hub_env: FakeHub, ref: str, message: str) -> None:
    code, out, err = run(capsys, tmp_path, "pull", ref)
    assert code == 2 and out == ""
    assert err.startswith(message) and err.count("\n") == 1


def test_pull_with_a_token_from_the_environment(capsys, tmp_path: Path, hub_env: FakeHub,
                                                monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setenv("HF_TOKEN", hub_env.token)
    code, out, err = run(capsys, tmp_path, "pull", GATED_REPO, "--no-plan")
    assert code == 0, err
    assert Path(out.strip()).is_file()


def test_the_no_network_error_is_one_line(capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    code, _, err = run(capsys, tmp_path, "search", "x")
    assert code == 2 and err.startswith("hearth: Cannot reach the Hub") and err.count("\n") == 1


def test_the_token_lives_in_the_keyring_not_in_settings(tmp_path: Path, memory_keyring) -> None:
    paths = resolve_paths(tmp_path / "data", tmp_path / "models").ensure()
    store_token("hf_secret")
    save_settings(paths, HubSettings(endpoint="http://mirror.example:8080"))
    assert read_token() == "hf_secret"
    assert "hf_secret" not in paths.settings_file.read_text()
    assert load_settings(paths).endpoint == "http://mirror.example:8080"
    store_token(None)
    assert read_token() is None


def test_no_keyring_is_a_one_line_error() -> None:
    with pytest.raises(KeyringUnavailable, match="no keyring"):
        store_token("hf_x")
    assert read_token() is None


def test_pull_takes_the_models_folder_after_the_command(capsys, tmp_path: Path, hub_env: FakeHub) -> None:
    code = run_cli(["--data-dir", str(tmp_path / "data"), "pull", f"{TINY_REPO}:Q4_0", "--no-plan",
                    "--models-dir", str(tmp_path / "elsewhere")])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert Path(out.strip()).is_relative_to((tmp_path / "elsewhere").resolve())


def test_the_progress_bar_redraws_in_place_on_a_terminal() -> None:
    import io

    from app.cli.hub import ProgressLine
    from engine import DownloadProgress, DownloadState

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    bar = ProgressLine(out, "o/n · Q4_K_M")
    bar.update(DownloadProgress("k", "o/n · Q4_K_M", DownloadState.RUNNING, 50 << 20, 200 << 20, 10 << 20))
    bar.update(DownloadProgress("k", "o/n · Q4_K_M", DownloadState.DONE, 200 << 20, 200 << 20))
    bar.finish()
    text = out.getvalue()
    assert text.startswith("\ro/n · Q4_K_M [#######.......................]  25% 50.0 MiB/200.0 MiB")
    assert "10.0 MiB/s, 0:15 left downloading" in text
    assert "100%" in text and "done" in text and text.endswith("\n")
