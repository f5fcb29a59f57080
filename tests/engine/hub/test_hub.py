"""The Hub, against the local fake Hub (tests/fake_hub.py): search, listing, remote headers
and plans, access errors. Downloads are in test_hub_download.py."""

from __future__ import annotations

import dataclasses
import socket
import struct
from pathlib import Path

import pytest

from engine.base.errors import (
    HubAccessDenied,
    HubNotFound,
    HubRateLimited,
    HubUnreachable,
    NoGgufFiles,
    UnsafeFileName,
)
from engine.catalog import InvalidModelFile, inspect_model, inspect_projector
from engine.hub import (
    HeaderCache,
    HubAccess,
    HubClient,
    inspect_remote,
    inspect_remote_projector,
    parse_hub_ref,
    safe_target,
)
from engine.hub.files import HubFile, group_files, quant_label
from engine.hub.remote_header import MAX_REMOTE_HEADER_BYTES
from engine.machine.hardware import described_machine
from engine.planner import LoadRequest, plan_load
from tests.fake_hub import FakeHub
from tests.hub_fixtures import EMPTY_REPO, GATED_REPO, GEMMA_FILE, GEMMA_REPO, SPLIT_REPO, TINY_REPO

MIB = 1 << 20


def _cdn_requests(hub: FakeHub) -> list:
    return [e for e in hub.log if e.path.startswith("/cdn/")]


# -- search and listing ----------------------------------------------------------------------


def test_search_finds_gguf_repositories_with_their_facts(hub_access: HubAccess) -> None:
    results = HubClient(hub_access).search("GGUF")
    ids = [r.repo_id for r in results]
    assert ids[0] == TINY_REPO  # most downloaded first
    assert GATED_REPO in ids and SPLIT_REPO in ids
    tiny = results[0]
    assert (tiny.author, tiny.downloads, tiny.likes, tiny.license) == ("test-org", 1200, 34, "apache-2.0")
    assert tiny.last_modified == "2026-01-02" and tiny.gated is False
    assert next(r for r in results if r.repo_id == GATED_REPO).gated is True


def test_search_follows_the_hubs_pages(fake_hub: FakeHub, hub_access: HubAccess) -> None:
    fake_hub.bulk_results = 2500
    results = HubClient(hub_access).search("bulk", limit=5000)
    assert len(results) == 2500
    assert sum(1 for e in fake_hub.log if e.path.startswith("/api/models?")) == 3  # 1,000 per page


def test_listing_groups_quantizations_projectors_and_split_parts(hub_access: HubAccess) -> None:
    client = HubClient(hub_access)
    tiny = client.repo_files(TINY_REPO)
    assert [q.label for q in tiny.quants] == ["Q8_0", "Q4_0"] or [q.label for q in tiny.quants] == [
        "Q4_0",
        "Q8_0",
    ]
    assert [p.name for p in tiny.projectors] == ["mmproj-tiny-llama-F16.gguf"]
    assert all(q.first.sha256 and len(q.first.sha256) == 64 for q in tiny.quants)
    assert tiny.commit == "0123456789abcdef0123456789abcdef01234567"
    split = client.repo_files(SPLIT_REPO)
    (option,) = split.quants
    assert option.label == "F32" and option.is_split
    assert [f.name for f in option.files] == sorted(f.name for f in option.files)
    assert option.total_size == sum(f.size for f in option.files)


def test_grouping_is_pure_and_ignores_incomplete_splits() -> None:
    files = [
        HubFile("m-Q4_K_M-00001-of-00002.gguf", 10, None),
        HubFile("m-Q4_K_M-00002-of-00002.gguf", 10, None),
        HubFile("m-Q5_K_M-00001-of-00002.gguf", 10, None),  # its second part is missing
        HubFile("sub/m-UD-Q2_K_XL.gguf", 5, None),
        HubFile("mmproj-m-f16.gguf", 3, None),
        HubFile("README.md", 1, None),
    ]
    listing = group_files("o/m", "c", files)
    assert [(q.label, len(q.files)) for q in listing.quants] == [("UD-Q2_K_XL", 1), ("Q4_K_M", 2)]
    assert [p.path for p in listing.projectors] == ["mmproj-m-f16.gguf"]
    assert listing.find(None).label == "Q4_K_M"
    assert listing.find("q4_k_m").is_split
    assert listing.find("sub/m-UD-Q2_K_XL.gguf").label == "UD-Q2_K_XL"
    with pytest.raises(NoGgufFiles, match="offers UD-Q2_K_XL, Q4_K_M"):
        listing.find("Q8_0")
    assert quant_label("Llama-3.2-1B-Instruct-IQ3_XXS.gguf") == "IQ3_XXS"
    assert quant_label("model-bf16.gguf") == "BF16"
    assert quant_label("plain.gguf") == "plain"


def test_a_repository_without_gguf_is_a_one_line_error(hub_access: HubAccess) -> None:
    with pytest.raises(NoGgufFiles, match=rf"^{EMPTY_REPO} has no GGUF model files"):
        HubClient(hub_access).repo_files(EMPTY_REPO)


def test_hub_references_parse() -> None:
    assert parse_hub_ref("o/n") == parse_hub_ref("o/n")
    assert parse_hub_ref("o/n:Q4_K_M").choice == "Q4_K_M"
    ref = parse_hub_ref("hf://o/n/sub/f-Q8_0.gguf")
    assert (ref.repo_id, ref.choice) == ("o/n", "sub/f-Q8_0.gguf")
    assert parse_hub_ref("o/n@abc123:Q8_0").revision == "abc123"
    with pytest.raises(Exception, match="does not name a Hub repository"):
        parse_hub_ref("not a repo")


# -- access errors ---------------------------------------------------------------------------


def test_missing_repository_is_not_found(hub_access: HubAccess) -> None:
    with pytest.raises(HubNotFound, match=r"^repository test-org/nope was not found"):
        HubClient(hub_access).repo_files("test-org/nope")


def test_gated_repository_needs_the_right_token(fake_hub: FakeHub, hub_access: HubAccess) -> None:
    listing = HubClient(hub_access).repo_files(GATED_REPO)  # its metadata is public
    assert listing.gated and listing.license == "llama3"
    with pytest.raises(HubAccessDenied, match="needs a Hugging Face token"):
        inspect_remote(hub_access, listing, listing.quants[0])
    wrong = dataclasses.replace(hub_access, token="hf_wrong")
    with pytest.raises(HubAccessDenied, match="access denied"):
        inspect_remote(wrong, listing, listing.quants[0])
    right = dataclasses.replace(hub_access, token=fake_hub.token)
    assert inspect_remote(right, listing, listing.quants[0]).info.architecture == "llama"
    assert "hf_test_token" not in repr(right)  # a token never reaches a log line


def test_the_token_goes_to_the_hub_and_never_to_the_cdn(fake_hub: FakeHub, hub_access: HubAccess) -> None:
    access = dataclasses.replace(hub_access, token=fake_hub.token)
    listing = HubClient(access).repo_files(GATED_REPO)
    fake_hub.clear_log()
    inspect_remote(access, listing, listing.quants[0])
    resolve = [e for e in fake_hub.log if "/resolve/" in e.path]
    assert resolve and all(e.authorization == f"Bearer {fake_hub.token}" for e in resolve)
    cdn = _cdn_requests(fake_hub)
    assert cdn and all(e.authorization is None for e in cdn)
    assert all(e.host.startswith("localhost") for e in cdn)


def test_rate_limits_are_retried_then_reported(fake_hub: FakeHub, hub_access: HubAccess) -> None:
    fake_hub.faults.rate_limited = 2
    assert HubClient(hub_access).repo_files(TINY_REPO).quants  # two 429s, then an answer
    assert fake_hub.fired["rate_limited"] == 2
    fake_hub.faults.rate_limited = 10
    with pytest.raises(HubRateLimited, match="rate-limiting"):
        HubClient(hub_access).search("tiny")
    assert fake_hub.fired["rate_limited"] > 2


def test_no_network_is_one_line() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once we leave: nothing listens there
    with pytest.raises(HubUnreachable, match=r"^Cannot reach the Hub"):
        HubClient(HubAccess(f"http://127.0.0.1:{port}")).search("x")


# -- remote headers and plans ----------------------------------------------------------------


def _same_info(remote, local) -> None:
    skip = {"path", "split_paths"}
    for f in dataclasses.fields(local):
        if f.name not in skip and f.compare:
            assert getattr(remote, f.name) == getattr(local, f.name), f.name


def test_a_remote_plan_is_the_local_plan_within_three_requests_and_one_mib(
    fake_hub: FakeHub, hub_access: HubAccess, hub_files: dict[str, Path]
) -> None:
    listing = HubClient(hub_access).repo_files(TINY_REPO)
    option = listing.find("Q8_0")
    fake_hub.clear_log()
    remote = inspect_remote(hub_access, listing, option)
    assert remote.requests <= 3 and len(fake_hub.log) == remote.requests
    served = sum(e.body_bytes for e in fake_hub.log)
    assert served <= MIB and remote.bytes_read <= MIB
    local = inspect_model(hub_files["q8"])
    _same_info(remote.info, local)
    machine = described_machine(ram_available=12 << 30, name="Test CPU")
    request = LoadRequest(context_per_conversation=2048, parallel=2)
    a, b = plan_load(remote.info, machine, request), plan_load(local, machine, request)
    assert (a.verdict, a.memory, a.params) == (b.verdict, b.memory, b.params)


def test_a_remote_projector_is_planned_as_the_local_one(
    fake_hub: FakeHub, hub_access: HubAccess, hub_files: dict[str, Path]
) -> None:
    listing = HubClient(hub_access).repo_files(TINY_REPO)
    (projector,) = listing.projectors
    fake_hub.clear_log()
    remote = inspect_remote_projector(hub_access, listing, projector)
    assert remote.requests <= 3 and remote.bytes_read <= MIB
    local = inspect_projector(hub_files["proj"])
    _same_info(remote.info, local)
    model = inspect_model(hub_files["q8"])
    machine = described_machine(ram_available=12 << 30, name="Test CPU")
    a = plan_load(model, machine, LoadRequest(projector=remote.info))
    b = plan_load(model, machine, LoadRequest(projector=local))
    assert a.memory == b.memory and sum(m.projector for m in a.memory) > 0
    with pytest.raises(InvalidModelFile, match="language model, not a vision projector"):
        inspect_remote_projector(hub_access, listing, listing.find("Q8_0").first)


def test_header_reads_are_cached(tmp_path: Path, fake_hub: FakeHub, hub_access: HubAccess) -> None:
    listing = HubClient(hub_access).repo_files(TINY_REPO)
    cache = HeaderCache(tmp_path / "headers")
    first = inspect_remote(hub_access, listing, listing.find("Q4_0"), cache)
    fake_hub.clear_log()
    again = inspect_remote(hub_access, listing, listing.find("Q4_0"), cache)
    assert fake_hub.log == [] and again.from_cache and not first.from_cache
    assert again.info == first.info


def test_a_split_model_plans_from_every_parts_header(
    fake_hub: FakeHub, hub_access: HubAccess, hub_files: dict[str, Path]
) -> None:
    listing = HubClient(hub_access).repo_files(SPLIT_REPO)
    remote = inspect_remote(hub_access, listing, listing.quants[0])
    local = inspect_model(hub_files["part1"])
    _same_info(remote.info, local)
    assert remote.info.split_count == len(listing.quants[0].files)
    assert remote.info.total_file_size == listing.quants[0].total_size


def test_gemma_plans_from_its_header_alone(
    fake_hub: FakeHub, hub_access: HubAccess, gemma_on_disk: Path
) -> None:
    listing = HubClient(hub_access).repo_files(GEMMA_REPO)
    fake_hub.clear_log()
    remote = inspect_remote(hub_access, listing, listing.find(GEMMA_FILE))
    # Its 262,144-token vocabulary makes a 6.6 MB header: two ranges (and the redirect).
    assert remote.requests <= 3
    assert remote.bytes_read <= 8 * MIB and sum(e.body_bytes for e in fake_hub.log) <= 8 * MIB
    _same_info(remote.info, inspect_model(gemma_on_disk))


def test_a_truncated_range_is_read_on_from_where_it_stopped(
    fake_hub: FakeHub, hub_access: HubAccess, hub_files: dict[str, Path]
) -> None:
    listing = HubClient(hub_access).repo_files(TINY_REPO)
    fake_hub.faults.truncate_ranges = 1
    remote = inspect_remote(hub_access, listing, listing.find("Q8_0"))
    assert fake_hub.fired["truncate_ranges"] == 1
    _same_info(remote.info, inspect_model(hub_files["q8"]))


def test_a_hostile_header_cannot_make_us_read_or_hold_much(tmp_path: Path, fake_hub: FakeHub,
                                                           hub_access: HubAccess) -> None:  # fmt: skip
    # A "100 GB file" (sparse) whose first key is a 200 MB string: the reader must stop at
    # the cap without fetching it.
    evil = tmp_path / "evil-Q8_0.gguf"
    with open(evil, "wb") as fh:
        fh.write(b"GGUF" + struct.pack("<IQQ", 3, 0, 1))
        fh.write(struct.pack("<Q", 200 * MIB) + b"k")
        fh.truncate(100 << 30)
    fake_hub.add_repo("evil-org/huge-GGUF", {"evil-Q8_0.gguf": evil}, hashes={"evil-Q8_0.gguf": "ab" * 32})
    listing = HubClient(hub_access).repo_files("evil-org/huge-GGUF")
    fake_hub.clear_log()
    with pytest.raises(InvalidModelFile, match="header larger than 32 MiB"):
        inspect_remote(hub_access, listing, listing.quants[0])
    assert sum(e.body_bytes for e in fake_hub.log) <= 2 * MIB
    assert MAX_REMOTE_HEADER_BYTES == 32 * MIB


def test_a_damaged_remote_header_is_the_catalogs_one_line_error(
    tmp_path: Path, fake_hub: FakeHub, hub_access: HubAccess
) -> None:
    bad = tmp_path / "bad-Q4_0.gguf"
    bad.write_bytes(b"NOPE" + bytes(100))
    fake_hub.add_repo("test-org/bad-GGUF", {"bad-Q4_0.gguf": bad})
    listing = HubClient(hub_access).repo_files("test-org/bad-GGUF")
    with pytest.raises(InvalidModelFile, match=r"^not a GGUF file$"):
        inspect_remote(hub_access, listing, listing.quants[0])


# -- file names ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["../x.gguf", "a/../../x.gguf", "/etc/x.gguf", ".hidden.gguf", "a\\..\\x.gguf", "a//x.gguf", "x\n.gguf"],
)
def test_no_file_name_escapes_the_models_folder(tmp_path: Path, name: str) -> None:
    with pytest.raises(UnsafeFileName):
        safe_target(tmp_path, "o/n", name)


def test_safe_names_land_under_owner_and_name(tmp_path: Path) -> None:
    assert safe_target(tmp_path, "o/n", "Q4/m.gguf") == tmp_path.resolve() / "o" / "n" / "Q4" / "m.gguf"
    with pytest.raises(UnsafeFileName):
        safe_target(tmp_path, "../n", "m.gguf")


def test_a_symlink_inside_cannot_lead_outside(tmp_path: Path) -> None:
    models = tmp_path / "models"
    (models / "o").mkdir(parents=True)
    (models / "o" / "n").symlink_to(tmp_path)
    with pytest.raises(UnsafeFileName, match="leads outside"):
        safe_target(models, "o/n", "m.gguf")


def test_the_endpoint_comes_from_the_setting_then_hf_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.base.errors import HubError
    from engine.hub import resolve_endpoint

    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    assert resolve_endpoint() == "https://huggingface.co"
    monkeypatch.setenv("HF_ENDPOINT", "http://mirror.local:8080/")
    assert resolve_endpoint() == "http://mirror.local:8080"
    assert resolve_endpoint("https://hf-mirror.example") == "https://hf-mirror.example"
    with pytest.raises(HubError, match="is not an http"):
        resolve_endpoint("ftp://nope")


def test_the_header_cache_keeps_to_its_size_dropping_the_least_recently_used(tmp_path: Path) -> None:
    import os

    cache = HeaderCache(tmp_path / "headers", limit=250_000)
    cache.put("a", bytes(100_000))
    cache.put("b", bytes(100_000))
    for age, key in ((300, "a"), (200, "b")):  # a older than b
        path = cache._file(key)
        assert path is not None
        os.utime(path, ns=(path.stat().st_mtime_ns - age * 10**9,) * 2)
    assert cache.get("a")  # used again: now b is the oldest
    cache.put("c", bytes(100_000))  # 300,000 bytes > 250,000: one goes
    assert [k for k in "abc" if cache.get(k)] == ["a", "c"]
    assert sum(p.stat().st_size for p in (tmp_path / "headers").iterdir()) <= 250_000
