"""Downloads from the fake Hub: verified, resumable, every fault the network and servers
produce, space, split models, several at once; and the library seeing only finished files."""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import threading
import time
from pathlib import Path

import pytest

import engine.hub.download as download_module
import engine.hub.download_buffers as download_buffers
from engine.base.errors import ChecksumMismatch, HubAccessDenied, HubError, NotEnoughSpace, UnsafeFileName
from engine.hub import (
    DownloadControl,
    Downloader,
    DownloadManager,
    DownloadProgress,
    DownloadSpec,
    DownloadState,
    HubAccess,
    HubClient,
)
from engine.hub.download import STAGING
from engine.library.index import Library
from tests.fake_hub import FakeHub
from tests.hub_fixtures import EVIL_REPO, GATED_REPO, SPLIT_REPO, TINY_REPO


def _spec(access: HubAccess, repo: str = TINY_REPO, choice: str | None = "Q8_0") -> DownloadSpec:
    listing = HubClient(access).repo_files(repo)
    return DownloadSpec.of(listing.repo_id, listing.commit, listing.find(choice))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _downloader(access: HubAccess, models: Path, **kw) -> Downloader:
    kw.setdefault("backoff_s", 0.0)
    kw.setdefault("read_timeout_s", 5.0)
    return Downloader(access, models, **kw)


def _ggufs(models: Path) -> list[Path]:
    return sorted(p for p in models.rglob("*.gguf"))


def _cdn_ranges(hub: FakeHub) -> list[str | None]:
    return [e.range for e in hub.log if e.path.startswith("/cdn/")]


def test_a_download_is_verified_and_lands_in_the_models_folder(
    tmp_path: Path, hub_access: HubAccess, hub_files: dict[str, Path]
) -> None:
    models = tmp_path / "models"
    seen: list[DownloadProgress] = []
    final = _downloader(hub_access, models).run(_spec(hub_access), report=seen.append)
    assert final.state is DownloadState.DONE
    target = models / "test-org" / "tiny-llama-GGUF" / "tiny-llama-Q8_0.gguf"
    assert final.target == target.resolve() and _sha(target) == _sha(hub_files["q8"])
    assert seen[-1].state is DownloadState.DONE and seen[-1].done_bytes == seen[-1].total_bytes
    assert DownloadState.VERIFYING in {p.state for p in seen}
    assert list((models / STAGING).iterdir()) == []  # no part, no job file left


def test_a_finished_download_is_in_the_library_with_its_projector(
    tmp_path: Path, hub_access: HubAccess
) -> None:
    models = tmp_path / "models"
    d = _downloader(hub_access, models)
    d.run(_spec(hub_access, choice="Q8_0"))
    d.run(_spec(hub_access, choice="mmproj-tiny-llama-F16.gguf"))
    library = Library(tmp_path / "library.json")
    library.add_folder(models)
    (model,) = library.models()
    assert model.ok and model.path.name == "tiny-llama-Q8_0.gguf"
    assert [p.name for p in model.projectors] == ["mmproj-tiny-llama-F16.gguf"]


def test_a_dropped_connection_resumes_from_where_it_broke(
    tmp_path: Path, fake_hub: FakeHub, hub_access: HubAccess, hub_files: dict[str, Path]
) -> None:
    fake_hub.faults.drop_at = 200_000
    final = _downloader(hub_access, tmp_path).run(_spec(hub_access))
    assert final.state is DownloadState.DONE and _sha(final.target) == _sha(hub_files["q8"])
    assert fake_hub.fired["drops"] == 1
    ranges = _cdn_ranges(fake_hub)
    assert ranges[0] is None and ranges[1] == "bytes=200000-"


def test_a_download_that_gave_up_resumes_on_the_next_run(tmp_path: Path, fake_hub: FakeHub,
                                                          hub_access: HubAccess) -> None:  # fmt: skip
    fake_hub.faults.drop_at, fake_hub.faults.drops = 300_000, 10
    spec = _spec(hub_access)
    with pytest.raises(HubError, match=r"Gave up after 2 retries; it resumes from \d+% next time"):
        _downloader(hub_access, tmp_path, retries=2).run(spec)
    assert fake_hub.fired["drops"] == 3  # the first try and two retries
    assert _ggufs(tmp_path) == []
    part = next((tmp_path / STAGING).glob("*.part"))
    assert part.stat().st_size == 300_000
    fake_hub.faults.drop_at = None
    fake_hub.clear_log()
    restarted = _downloader(hub_access, tmp_path)  # a new process would start like this
    assert [s.key for s in restarted.pending()] == [spec.key]
    assert restarted.done_bytes(spec) == 300_000
    assert restarted.run(spec).state is DownloadState.DONE
    assert _cdn_ranges(fake_hub) == ["bytes=300000-"]


def test_a_wrong_checksum_leaves_nothing_behind(
    tmp_path: Path, fake_hub: FakeHub, hub_access: HubAccess
) -> None:
    fake_hub.faults.wrong_hash.add("tiny-llama-Q8_0.gguf")
    with pytest.raises(ChecksumMismatch, match=r"failed its SHA-256 check .* nothing entered the library"):
        _downloader(hub_access, tmp_path).run(_spec(hub_access))
    assert fake_hub.fired["wrong_hash"] >= 1
    assert _ggufs(tmp_path) == [] and list((tmp_path / STAGING).glob("*.part")) == []


def test_too_little_space_is_refused_before_a_byte_moves(tmp_path: Path, fake_hub: FakeHub,
                                                         hub_access: HubAccess) -> None:  # fmt: skip
    spec = _spec(hub_access)
    fake_hub.clear_log()
    d = _downloader(hub_access, tmp_path, free_space=lambda _p: 10 << 20)
    expected = r"Not enough space for .*: [\d.]+ KiB to download, 10\.0 MiB free"
    with pytest.raises(NotEnoughSpace, match=expected):
        d.run(spec)
    assert _cdn_ranges(fake_hub) == [] and _ggufs(tmp_path) == []


def test_a_disk_filling_up_midway_keeps_the_part_for_later(
    tmp_path: Path, hub_access: HubAccess, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = download_buffers.write_all
    written = {"n": 0, "refused": 0}

    def full_disk(out, data) -> None:
        if written["n"] + len(data) > 100_000:
            written["refused"] += 1
            raise OSError(errno.ENOSPC, "No space left on device")
        written["n"] += len(data)
        real(out, data)

    monkeypatch.setattr(download_buffers, "write_all", full_disk)
    with pytest.raises(NotEnoughSpace, match=r"The disk filled up while downloading tiny-llama-Q8_0\.gguf"):
        _downloader(hub_access, tmp_path).run(_spec(hub_access))
    assert written["refused"] == 1
    assert _ggufs(tmp_path) == []
    monkeypatch.setattr(download_buffers, "write_all", real)
    assert _downloader(hub_access, tmp_path).run(_spec(hub_access)).state is DownloadState.DONE


def test_rate_limits_during_a_download_are_waited_out(tmp_path: Path, fake_hub: FakeHub,
                                                      hub_access: HubAccess) -> None:  # fmt: skip
    spec = _spec(hub_access)
    fake_hub.faults.rate_limited = 2
    assert _downloader(hub_access, tmp_path).run(spec).state is DownloadState.DONE
    assert sum(1 for e in fake_hub.log if e.status == 429) == 2 == fake_hub.fired["rate_limited"]


def test_a_lying_content_length_is_caught(tmp_path: Path, fake_hub: FakeHub, hub_access: HubAccess,
                                          hub_files: dict[str, Path]) -> None:  # fmt: skip
    fake_hub.faults.lie_length, fake_hub.faults.lies = 5000, 3
    final = _downloader(hub_access, tmp_path).run(_spec(hub_access))
    assert final.state is DownloadState.DONE and _sha(final.target) == _sha(hub_files["q8"])
    # One lie fires: the body it cut short was whole, so no second request is needed to finish.
    assert fake_hub.fired["lies"] == 1


def test_a_truncated_range_is_continued(tmp_path: Path, fake_hub: FakeHub, hub_access: HubAccess,
                                        hub_files: dict[str, Path]) -> None:  # fmt: skip
    fake_hub.faults.drop_at = 100_000  # so that the second request is a range
    fake_hub.faults.truncate_ranges = 2
    final = _downloader(hub_access, tmp_path).run(_spec(hub_access))
    assert final.state is DownloadState.DONE and _sha(final.target) == _sha(hub_files["q8"])
    assert len(_cdn_ranges(fake_hub)) >= 4
    assert (fake_hub.fired["drops"], fake_hub.fired["truncate_ranges"]) == (1, 2)


def test_a_stalled_server_times_out_and_the_part_stays(tmp_path: Path, fake_hub: FakeHub,
                                                       hub_access: HubAccess) -> None:  # fmt: skip
    fake_hub.faults.trickle_bytes_per_s = 2  # one byte per half second
    d = _downloader(hub_access, tmp_path, read_timeout_s=0.2, retries=1)
    with pytest.raises(HubError, match="stalled"):
        d.run(_spec(hub_access))
    assert _ggufs(tmp_path) == []


def test_a_slow_trickle_still_reports_speed_and_time_left(tmp_path: Path, fake_hub: FakeHub,
                                                          hub_access: HubAccess) -> None:  # fmt: skip
    fake_hub.faults.trickle_bytes_per_s = 500_000
    seen: list[DownloadProgress] = []
    final = _downloader(hub_access, tmp_path).run(_spec(hub_access), report=seen.append)
    assert final.state is DownloadState.DONE
    running = [p for p in seen if p.state is DownloadState.RUNNING and p.speed > 0]
    assert running and all(p.speed < 1_500_000 for p in running)
    assert any(p.eta_s is not None and p.eta_s > 0 for p in running)


def test_a_split_model_downloads_every_part_and_shows_as_one(tmp_path: Path, hub_access: HubAccess,
                                                             hub_files: dict[str, Path]) -> None:  # fmt: skip
    spec = _spec(hub_access, SPLIT_REPO, None)
    assert len(spec.files) >= 2
    final = _downloader(hub_access, tmp_path / "models").run(spec)
    assert final.target is not None and final.target.name.endswith(f"-00001-of-0000{len(spec.files)}.gguf")
    parts = _ggufs(tmp_path / "models")
    assert [_sha(p) for p in parts] == [_sha(hub_files[f"part{i}"]) for i in range(1, len(parts) + 1)]
    library = Library(tmp_path / "library.json")
    library.add_folder(tmp_path / "models")
    (model,) = library.models()
    assert model.ok and model.info is not None and model.info.split_count == len(parts)


def test_a_hostile_file_name_writes_nothing(tmp_path: Path, hub_access: HubAccess) -> None:
    listing = HubClient(hub_access).repo_files(EVIL_REPO)
    spec = DownloadSpec.of(listing.repo_id, listing.commit, listing.quants[0])
    with pytest.raises(UnsafeFileName, match="could leave the models folder"):
        _downloader(hub_access, tmp_path / "models").run(spec)
    assert not (tmp_path / "models").exists() or _ggufs(tmp_path) == []
    assert not (tmp_path / "escape-Q8_0.gguf").exists()


def test_gated_downloads_need_the_token(tmp_path: Path, fake_hub: FakeHub, hub_access: HubAccess) -> None:
    with_token = dataclasses.replace(hub_access, token=fake_hub.token)
    spec = _spec(with_token, GATED_REPO, None)
    with pytest.raises(HubAccessDenied, match="needs a Hugging Face token"):
        _downloader(hub_access, tmp_path).run(spec)
    fake_hub.clear_log()
    assert _downloader(with_token, tmp_path).run(spec).state is DownloadState.DONE
    assert all(e.authorization is None for e in fake_hub.log if e.path.startswith("/cdn/"))


# -- pause, resume, cancel, several at once ----------------------------------------------------


def _wait(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.01)


def test_pause_resume_and_cancel(tmp_path: Path, fake_hub: FakeHub, hub_access: HubAccess,
                                 hub_files: dict[str, Path]) -> None:  # fmt: skip
    fake_hub.faults.trickle_bytes_per_s = 100_000
    manager = DownloadManager(_downloader(hub_access, tmp_path))
    spec = _spec(hub_access)
    key = manager.enqueue(spec)
    _wait(lambda: (p := manager.progress(key)) is not None and p.done_bytes > 50_000)
    manager.pause(key)
    paused = manager.wait(key, 10)
    assert paused is not None and paused.state is DownloadState.PAUSED
    assert 0 < paused.done_bytes < spec.total_size and _ggufs(tmp_path) == []
    fake_hub.faults.trickle_bytes_per_s = 0
    fake_hub.clear_log()
    manager.resume(key)
    done = manager.wait(key, 20)
    assert done is not None and done.state is DownloadState.DONE
    assert _sha(done.target) == _sha(hub_files["q8"])
    assert _cdn_ranges(fake_hub)[0] == f"bytes={paused.done_bytes}-"

    fake_hub.faults.trickle_bytes_per_s = 100_000
    other = _spec(hub_access, choice="Q4_0")
    key = manager.enqueue(other)
    _wait(lambda: (p := manager.progress(key)) is not None and p.done_bytes > 20_000)
    manager.cancel(key)
    cancelled = manager.wait(key, 10)
    assert cancelled is not None and cancelled.state is DownloadState.CANCELLED
    assert list((tmp_path / STAGING).iterdir()) == []
    assert [p.name for p in _ggufs(tmp_path)] == ["tiny-llama-Q8_0.gguf"]


def test_at_most_two_downloads_run_at_once(tmp_path: Path, fake_hub: FakeHub, hub_access: HubAccess) -> None:
    fake_hub.faults.trickle_bytes_per_s = 400_000
    states: list[tuple[DownloadState, ...]] = []
    lock = threading.Lock()
    manager: DownloadManager

    def listen(_p: DownloadProgress) -> None:
        with lock:
            states.append(tuple(j.state for j in manager.jobs()))

    manager = DownloadManager(_downloader(hub_access, tmp_path), listener=listen)
    listing = HubClient(hub_access).repo_files(TINY_REPO)
    keys = [manager.enqueue(DownloadSpec.of(TINY_REPO, listing.commit, q)) for q in listing.quants]
    projector = listing.find(listing.projectors[0].path)
    keys.append(manager.enqueue(DownloadSpec.of(TINY_REPO, listing.commit, projector)))
    keys.append(manager.enqueue(_spec(hub_access, SPLIT_REPO, None)))
    for key in keys:
        final = manager.wait(key, 60)
        assert final is not None and final.state is DownloadState.DONE, final
    assert manager.max_running_seen == 2
    assert any(s.count(DownloadState.QUEUED) >= 1 and s.count(DownloadState.RUNNING) == 2 for s in states)
    assert all(s.count(DownloadState.RUNNING) <= 2 for s in states)


def test_a_raised_limit_starts_queued_downloads_at_once(tmp_path: Path, fake_hub: FakeHub,
                                                      hub_access: HubAccess) -> None:  # fmt: skip
    fake_hub.faults.trickle_bytes_per_s = 200_000
    manager = DownloadManager(_downloader(hub_access, tmp_path), max_parallel=1)
    listing = HubClient(hub_access).repo_files(TINY_REPO)
    keys = [manager.enqueue(DownloadSpec.of(TINY_REPO, listing.commit, q)) for q in listing.quants]
    deadline = time.monotonic() + 10

    def states() -> list[DownloadState]:
        return [p.state for k in keys if (p := manager.progress(k)) is not None]

    while time.monotonic() < deadline and DownloadState.RUNNING not in states():
        time.sleep(0.01)
    assert manager.max_running_seen == 1
    assert states().count(DownloadState.QUEUED) == len(keys) - 1
    manager.set_max_parallel(len(keys))
    while time.monotonic() < deadline and manager.max_running_seen < len(keys):
        time.sleep(0.01)
    assert manager.max_running_seen == len(keys)  # the queued one started without waiting
    manager.shutdown()


def test_unfinished_downloads_come_back_after_a_restart(tmp_path: Path, fake_hub: FakeHub,
                                                        hub_access: HubAccess) -> None:  # fmt: skip
    fake_hub.faults.trickle_bytes_per_s = 100_000
    spec = _spec(hub_access)
    control = DownloadControl()
    thread = threading.Thread(target=lambda: _downloader(hub_access, tmp_path).run(spec, control))
    thread.start()
    _wait(lambda: any(p.stat().st_size > 30_000 for p in (tmp_path / STAGING).glob("*.part")))
    control.pause.set()
    thread.join(10)
    fake_hub.faults.trickle_bytes_per_s = 0
    manager = DownloadManager(_downloader(hub_access, tmp_path))  # "the next start"
    (restored,) = manager.restore()
    assert restored.key == spec.key and restored.state is DownloadState.PAUSED
    assert restored.done_bytes > 30_000
    manager.resume(spec.key)
    final = manager.wait(spec.key, 20)
    assert final is not None and final.state is DownloadState.DONE


def test_one_writer_per_download_across_processes(tmp_path: Path, fake_hub: FakeHub,
                                                  hub_access: HubAccess) -> None:  # fmt: skip
    import fcntl
    import os

    spec = _spec(hub_access)
    (tmp_path / STAGING).mkdir(parents=True)
    fd = os.open(tmp_path / STAGING / f"{spec.key}.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as another Hearth (the window, or hearth pull) would
    try:
        with pytest.raises(HubError, match="already being downloaded by another Hearth"):
            _downloader(hub_access, tmp_path).run(spec)
    finally:
        os.close(fd)
    assert _downloader(hub_access, tmp_path).run(spec).state is DownloadState.DONE


def test_end_to_end_search_plan_download_interrupted_resumed_then_in_the_library(
    tmp_path: Path, fake_hub: FakeHub, hub_access: HubAccess
) -> None:
    from engine.hub import inspect_remote
    from engine.machine.hardware import described_machine
    from engine.planner import LoadRequest, plan_load

    client = HubClient(hub_access)
    (found,) = [r for r in client.search("tiny-llama") if r.repo_id == TINY_REPO]
    listing = client.repo_files(found.repo_id)
    option = listing.find("Q4_0")
    machine = described_machine(ram_available=12 << 30)
    remote_plan = plan_load(inspect_remote(hub_access, listing, option).info, machine, LoadRequest())
    assert remote_plan.fits

    drop = option.total_size // 3
    fake_hub.faults.drop_at, fake_hub.faults.drops = drop, 1
    models = tmp_path / "models"
    final = _downloader(hub_access, models).run(DownloadSpec.of(listing.repo_id, listing.commit, option))
    assert final.state is DownloadState.DONE
    assert f"bytes={drop}-" in _cdn_ranges(fake_hub)  # resumed where the connection broke
    assert fake_hub.fired["drops"] == 1

    library = Library(tmp_path / "library.json")
    library.add_folder(models)
    (entry,) = library.models()
    assert entry.path == final.target and entry.info is not None
    local_plan = plan_load(entry.info, machine, LoadRequest())
    assert (local_plan.verdict, local_plan.memory, local_plan.params) == (
        remote_plan.verdict,
        remote_plan.memory,
        remote_plan.params,
    )


def test_a_file_kept_in_git_is_checked_against_its_blob_id(
    tmp_path: Path, fake_hub: FakeHub, hub_access: HubAccess, hub_files: dict[str, Path]
) -> None:
    fake_hub.add_repo(
        "test-org/in-git-GGUF", {"small-Q8_0.gguf": hub_files["q8"]}, in_git={"small-Q8_0.gguf"}
    )
    listing = HubClient(hub_access).repo_files("test-org/in-git-GGUF")
    (f,) = listing.quants[0].files
    assert f.sha256 is None and f.git_oid is not None and len(f.git_oid) == 40
    spec = DownloadSpec.of(listing.repo_id, listing.commit, listing.quants[0])
    fake_hub.faults.drop_at = 100_000  # the resumed hash starts from git's "blob N\0" header too
    assert _downloader(hub_access, tmp_path).run(spec).state is DownloadState.DONE
    assert fake_hub.fired["drops"] == 1
    fake_hub.faults.wrong_hash.add("small-Q8_0.gguf")
    listing = HubClient(hub_access).repo_files("test-org/in-git-GGUF")
    spec = DownloadSpec.of(listing.repo_id, listing.commit, listing.quants[0])
    with pytest.raises(ChecksumMismatch, match="failed its git SHA-1 check"):
        _downloader(hub_access, tmp_path / "again").run(spec)
    assert fake_hub.fired["wrong_hash"] >= 1


# -- the receive path: buffers, the sink, httpx's own transport --------------------------------


def test_a_drop_in_the_middle_of_a_buffer_keeps_exactly_the_bytes_that_came(
    tmp_path: Path, fake_hub: FakeHub, hub_access: HubAccess, hub_files: dict[str, Path]
) -> None:
    spec = _spec(hub_access)
    drop = min(download_module.SINK_BATCH + 12_345, spec.total_size // 2)  # past a buffer's end if it can
    assert drop % download_module.SINK_BATCH  # not at a buffer's edge
    fake_hub.faults.drop_at = drop
    with pytest.raises(HubError, match="Gave up after 0 retries"):
        _downloader(hub_access, tmp_path, retries=0).run(spec)
    assert fake_hub.fired["drops"] == 1
    part = next((tmp_path / STAGING).glob("*.part"))
    assert part.read_bytes() == hub_files["q8"].read_bytes()[:drop]


def test_the_sink_gives_every_buffer_back_after_a_failed_write_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[int] = []

    def fail_second(out, data) -> None:
        writes.append(len(data))
        if len(writes) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        out.write(data)

    monkeypatch.setattr(download_buffers, "write_all", fail_second)
    pool = download_buffers.BufferPool(2, 8)
    with open(tmp_path / "out", "wb", buffering=0) as out:
        sink = download_buffers.Sink(out, pool)
        for i in range(6):  # more puts than buffers: each one waits for one to come back
            buffer = pool.take()
            buffer[:3] = bytes([i]) * 3
            sink.put(buffer, 3)
        sink.put(pool.take(), 0)  # an empty buffer goes straight back
        error = sink.close()
    assert error is not None and error.errno == errno.ENOSPC
    assert (tmp_path / "out").read_bytes() == b"\0\0\0" and sink.written == 3
    assert writes == [3, 3]  # nothing written after the failure
    assert [len(pool.take()), len(pool.take())] == [8, 8]


def test_chunks_are_read_into_buffers_of_any_size() -> None:
    reader = download_buffers.ChunkReader(iter([b"abcde", b"", b"fg", b"hijklmn"]))
    buffer = memoryview(bytearray(3))
    got = []
    while n := reader.readinto(buffer):
        got.append(bytes(buffer[:n]))
    assert got == [b"abc", b"de", b"fg", b"hij", b"klm", b"n"]
    assert reader.readinto(buffer) == 0


def test_the_default_session_reads_bodies_into_the_buffers(
    tmp_path: Path, hub_access: HubAccess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not through httpx's own transport: that one (a proxy's) is the slower path."""
    used: list[bool] = []
    real = download_buffers.ChunkReader.readinto
    monkeypatch.setattr(
        download_buffers.ChunkReader, "readinto", lambda self, view: used.append(True) or real(self, view)
    )
    assert _downloader(hub_access, tmp_path).run(_spec(hub_access)).state is DownloadState.DONE
    assert used == []


@pytest.mark.parametrize("fault", ["none", "drop", "lie", "truncate"])
def test_httpx_s_own_transport_still_downloads_and_resumes(
    tmp_path: Path, fake_hub: FakeHub, hub_access: HubAccess, hub_files: dict[str, Path], fault: str
) -> None:
    """As when a proxy from the environment is mounted on httpx's transport."""
    import httpx

    if fault == "drop":
        fake_hub.faults.drop_at = 200_000
    elif fault == "lie":
        fake_hub.faults.lie_length, fake_hub.faults.lies = 5000, 2
    elif fault == "truncate":
        fake_hub.faults.drop_at, fake_hub.faults.truncate_ranges = 100_000, 2
    with httpx.Client(follow_redirects=True) as session:
        final = _downloader(hub_access, tmp_path, session=session).run(_spec(hub_access))
    assert final.state is DownloadState.DONE and _sha(final.target) == _sha(hub_files["q8"])
    fired = {"drop": {"drops": 1}, "lie": {"lies": 1}, "truncate": {"drops": 1, "truncate_ranges": 2}}
    assert dict(fake_hub.fired) == fired.get(fault, {})
    if fault == "drop":
        assert _cdn_ranges(fake_hub)[1] == "bytes=200000-"
