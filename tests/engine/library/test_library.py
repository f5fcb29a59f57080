"""Library: scanning, dropping, pairing, persistence, disappearing files, removal."""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path

import pytest

from engine.catalog import ModelInfo, inspect
from engine.devtools.tiny_models import (
    TinyProjectorSpec,
    TinyTextSpec,
    write_tiny_projector,
    write_tiny_text_model,
)
from engine.library.index import Library, LibraryEntry
from engine.library.pairing import name_stem
from engine.model_process import protocol as _protocol  # noqa: F401 (how read-only mappings pickle)
from tests.conftest import rewrite_gguf


class CountingInspector:
    """catalog.inspect, counting calls per file."""

    def __init__(self) -> None:
        self.calls: list[Path] = []

    def __call__(self, path: Path) -> ModelInfo:
        self.calls.append(path)
        return inspect(path)


@pytest.fixture()
def models(tmp_path: Path, tiny_model: Path, tiny_projector: Path) -> Path:
    """A folder tree: two 64-dim models, a 32-dim one, a projector, junk and a bad file."""
    root = tmp_path / "models"
    (root / "family" / "deep").mkdir(parents=True)
    shutil.copy(tiny_model, root / "foo-Q4_K_M.gguf")
    shutil.copy(tiny_model, root / "family" / "deep" / "bar-Q8_0.gguf")
    write_tiny_text_model(root / "family" / "small-F32.gguf", TinyTextSpec(n_embd=32, n_head=4, n_head_kv=2))
    shutil.copy(tiny_projector, root / "mmproj-foo-f16.gguf")
    (root / "family" / "broken.gguf").write_bytes(b"not a model at all")
    (root / "readme.txt").write_text("hello")
    (root / "partial.gguf.part").write_bytes(b"GGUF")
    return root


@pytest.fixture()
def lone(tmp_path: Path, tiny_model: Path) -> Path:
    """A model file outside the ``models`` folder."""
    path = tmp_path / "lone.gguf"
    shutil.copy(tiny_model, path)
    return path


@pytest.fixture()
def library(tmp_path: Path, models: Path, lone: Path) -> Library:
    """A saved library holding the ``models`` folder and the ``lone`` file."""
    library = Library(tmp_path / "state.json")
    library.add(models)
    library.add(lone)
    return library


def names(entries: tuple[LibraryEntry, ...]) -> list[str]:
    return sorted(e.path.name for e in entries)


def test_scan_is_recursive_and_keeps_invalid_files(models: Path, tmp_path: Path) -> None:
    library = Library(tmp_path / "state.json")
    found = library.add(models)
    assert names(found) == [
        "bar-Q8_0.gguf",
        "broken.gguf",
        "foo-Q4_K_M.gguf",
        "mmproj-foo-f16.gguf",
        "small-F32.gguf",
    ]
    assert library.folders == (models,)
    broken = library.get(models / "family" / "broken.gguf")
    assert broken is not None and not broken.ok and broken.error == "not a GGUF file"
    assert names(library.invalid()) == ["broken.gguf"]
    assert names(library.models()) == ["bar-Q8_0.gguf", "foo-Q4_K_M.gguf", "small-F32.gguf"]
    assert names(library.projectors()) == ["mmproj-foo-f16.gguf"]
    foo = library.get(models / "foo-Q4_K_M.gguf")
    assert foo is not None and foo.root == models and foo.size == foo.path.stat().st_size
    assert foo.info is not None and foo.info.architecture == "llama"


def test_dropped_file_is_indexed_where_it_lies(tiny_model: Path, tmp_path: Path) -> None:
    state = tmp_path / "state" / "library.json"
    library = Library(state)
    before = sorted(tiny_model.parent.iterdir())
    (entry,) = library.add(tiny_model)
    assert entry.path == tiny_model and entry.ok and entry.root is None
    assert library.files == (tiny_model,)
    assert sorted(tiny_model.parent.iterdir()) == before  # nothing copied next to it
    assert sorted(p.name for p in state.parent.iterdir()) == ["library.json"]  # nor into the state


def test_dropped_bad_file_is_listed_with_its_reason(tmp_path: Path) -> None:
    bad = tmp_path / "nope.gguf"
    bad.write_bytes(b"")
    entry = Library().add_file(bad)
    assert entry.error == "empty file" and entry.info is None and entry.display_name == "nope"


def test_projector_pairs_with_models_of_its_size(models: Path) -> None:
    library = Library()
    library.add(models)
    projector = models / "mmproj-foo-f16.gguf"
    foo = library.get(models / "foo-Q4_K_M.gguf")
    bar = library.get(models / "family" / "deep" / "bar-Q8_0.gguf")
    small = library.get(models / "family" / "small-F32.gguf")
    assert foo is not None and bar is not None and small is not None
    assert foo.projectors == (projector,)
    assert bar.projectors == (projector,)  # same size, so usable, just a worse guess
    assert small.projectors == ()  # 32-dim model, 64-dim projector: mismatch
    entry = library.get(projector)
    assert entry is not None and entry.is_projector
    # Best guess first: shared name stem and folder, then the other 64-dim model.
    assert entry.models == (foo.path, bar.path)
    assert [e.path for e in library.projectors_for(foo.path)] == [projector]
    assert library.projectors_for(foo) == library.projectors_for(str(foo.path))


def test_projector_preference_by_stem_then_folder(tmp_path: Path, tiny_model: Path) -> None:
    root = tmp_path / "m"
    (root / "other").mkdir(parents=True)
    shutil.copy(tiny_model, root / "foo-Q4_K_M.gguf")
    spec = TinyProjectorSpec()
    write_tiny_projector(root / "mmproj-bar-f16.gguf", spec)  # same folder, other name
    write_tiny_projector(root / "other" / "mmproj-foo-f16.gguf", spec)  # other folder, same stem
    write_tiny_projector(root / "other" / "mmproj-model-f16.gguf", spec)  # generic name
    library = Library()
    library.add(root)
    foo = library.get(root / "foo-Q4_K_M.gguf")
    assert foo is not None
    assert foo.projectors == (
        root / "other" / "mmproj-foo-f16.gguf",
        root / "mmproj-bar-f16.gguf",
        root / "other" / "mmproj-model-f16.gguf",
    )


def test_name_stems() -> None:
    assert name_stem("mmproj-foo-f16.gguf") == "foo" == name_stem("foo-Q4_K_M.gguf")
    assert name_stem("gemma-3-4b-it-Q4_K_M.gguf") == name_stem("mmproj-gemma-3-4b-it-F16.gguf")
    assert name_stem("llava-v1.5-7b-mmproj-f16.gguf") == name_stem("llava-v1.5-7b-Q4_K.gguf")
    assert name_stem("Qwen2.5-VL-7B-Instruct-IQ4_XS-00001-of-00002.gguf") == "qwen2-5-vl-7b-instruct"
    assert name_stem("mmproj-model-f16.gguf") == ""  # says nothing about the family


def test_persistence_across_instances(models: Path, tiny_model: Path, tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    first = Library(state)
    first.add(models)
    first.add(tiny_model)
    first.remove(models / "family" / "small-F32.gguf")
    json.loads(state.read_text())  # valid JSON, written atomically
    assert [p.name for p in state.parent.iterdir() if p.name.endswith(".tmp")] == []

    inspector = CountingInspector()
    second = Library(state, inspector=inspector)
    assert second.folders == (models,) and second.files == (tiny_model,)
    second.rescan()
    assert inspector.calls == []  # every result came from the saved cache
    assert names(second.entries) == names(first.entries)
    assert "small-F32.gguf" not in names(second.entries)  # the removal is remembered too
    assert second.get(models / "foo-Q4_K_M.gguf") == first.get(models / "foo-Q4_K_M.gguf")


def test_rescan_only_reinspects_changed_files(models: Path) -> None:
    inspector = CountingInspector()
    library = Library(inspector=inspector)
    library.add(models)
    assert len(inspector.calls) == 5
    inspector.calls.clear()
    library.rescan()
    assert inspector.calls == []
    changed = models / "foo-Q4_K_M.gguf"
    stat = changed.stat()
    os.utime(changed, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    library.rescan()
    assert inspector.calls == [changed]


def test_files_that_disappear_drop_out_quietly(models: Path, lone: Path, library: Library) -> None:
    (models / "foo-Q4_K_M.gguf").unlink()
    lone.unlink()
    entries = library.rescan()
    assert "foo-Q4_K_M.gguf" not in names(entries) and "lone.gguf" not in names(entries)
    mmproj = library.get(models / "mmproj-foo-f16.gguf")
    assert mmproj is not None and [p.name for p in mmproj.models] == ["bar-Q8_0.gguf"]
    shutil.rmtree(models)
    assert library.rescan() == ()
    # Still remembered: an unplugged drive's models come back when it does.
    assert library.folders == (models,) and library.files == (lone,)


def test_remove_never_deletes(models: Path, lone: Path, library: Library, tmp_path: Path) -> None:
    inside = models / "foo-Q4_K_M.gguf"
    assert library.remove(inside)
    assert inside.exists() and library.get(inside) is None
    assert library.rescan() and library.get(inside) is None  # stays removed
    assert library.remove(lone)
    assert lone.exists() and library.files == ()
    assert library.remove(models / "family")  # a sub-folder of a library folder
    assert (models / "family" / "small-F32.gguf").exists()
    assert names(library.entries) == ["mmproj-foo-f16.gguf"]
    assert library.remove(models)
    assert library.folders == () and library.entries == ()
    assert all(p.exists() for p in (inside, lone, models / "mmproj-foo-f16.gguf"))
    assert not library.remove(tmp_path / "never-added.gguf")
    # Adding a removed file again brings it back.
    assert library.add_file(inside).ok


def test_split_model_is_one_entry(tmp_path: Path) -> None:
    root = tmp_path / "split"
    root.mkdir()
    tiny = write_tiny_text_model(tmp_path / "src.gguf")
    rewrite_gguf(tiny, root / "big.gguf", split_max_tensors=8)
    parts = sorted(root.glob("big-*.gguf"))
    assert len(parts) == 3

    library = Library()
    (entry,) = library.add(root)
    assert entry.path == parts[0] and entry.parts == tuple(parts) and entry.ok
    assert entry.size == sum(p.stat().st_size for p in parts)
    assert entry.info is not None and entry.info.tensor_bytes == inspect(tiny).tensor_bytes
    assert library.get(parts[2]) == entry
    assert library.add_file(parts[1]) == library.get(parts[0])  # any part adds the model

    # Added on its own, a split model still brings every part.
    alone = Library()
    assert alone.add_file(parts[0]).parts == tuple(parts)
    # Removing it from a library folder removes all of its parts.
    assert library.remove(parts[0])
    assert library.entries == () and all(p.exists() for p in parts)
    library.add_file(parts[0])

    parts[0].unlink()
    (entry,) = library.rescan()
    assert entry.path == parts[1] and not entry.ok
    assert entry.error == "split model is missing its first part (big-00001-of-00003.gguf)"


def test_unreadable_state_starts_empty(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text("{ not json")
    library = Library(state)
    assert library.folders == () and library.load_error is not None
    library.add_folder(tmp_path)  # and saving over it works
    assert json.loads(state.read_text())["folders"] == [str(tmp_path)]


def test_symlink_loops_do_not_hang(tmp_path: Path, tiny_model: Path) -> None:
    root = tmp_path / "loop"
    root.mkdir()
    shutil.copy(tiny_model, root / "a.gguf")
    (root / "again").symlink_to(root, target_is_directory=True)
    library = Library()
    assert names(library.add(root)) == ["a.gguf"]


def test_missing_folder_is_remembered_without_error(tmp_path: Path) -> None:
    library = Library(tmp_path / "state.json")
    assert library.add_folder(tmp_path / "not-yet") == ()
    assert library.folders == (tmp_path / "not-yet",)


def test_model_info_json_round_trip_matches_pickle(
    tmp_path: Path, tiny_model: Path, tiny_projector: Path
) -> None:
    """The library's cache keeps ``ModelInfo.to_json``; reading it back gives the value inspect
    gave (read-only mappings and split paths included), as pickling to the model's child does."""
    root = tmp_path / "split"
    root.mkdir()
    rewrite_gguf(tiny_model, root / "big.gguf", split_max_tensors=8)
    split_first = sorted(root.glob("big-*.gguf"))[0]
    for path in (tiny_model, tiny_projector, split_first):
        info = inspect(path)
        for back in (
            ModelInfo.from_json(json.loads(json.dumps(info.to_json()))),
            pickle.loads(pickle.dumps(info)),
        ):
            assert back == info
            assert dict(back.metadata) == dict(info.metadata) and dict(back.arrays) == dict(info.arrays)
            assert type(back.metadata).__name__ == "mappingproxy"
    assert inspect(split_first).split_paths and inspect(tiny_projector).projector is not None

    state = tmp_path / "state.json"
    Library(state).add_file(tiny_model)
    (item,) = json.loads(state.read_text())["cache"]["items"].values()
    assert item["info"] == json.loads(json.dumps(inspect(tiny_model).to_json()))


# -- draft models the library pairs --------------------------------------------------------


def test_the_default_draft_is_the_largest_of_the_same_vocabulary_within_its_share(tiny_model: Path) -> None:
    from dataclasses import replace

    from engine.library.pairing import DRAFT_SHARE, best_draft, draft_candidates

    target = replace(inspect(tiny_model), path=Path("/m/qwen-1.5b.gguf"), parameter_count=1_543_000_000)

    def model(name: str, params: int, **changes: object) -> ModelInfo:
        return replace(target, path=Path(f"/m/{name}.gguf"), parameter_count=params, **changes)  # type: ignore[arg-type]

    half = model("half", 800_000_000)  # too large a share to pay
    small = model("0.5b", 494_000_000)
    tiny = model("tiny", 50_000_000)
    other_vocab = model("other-vocab", 400_000_000, vocab_size=(target.vocab_size or 0) + 1)
    other_tokenizer = model("other-tok", 400_000_000, tokenizer_model="bert")
    bigger = model("7b", 7_000_000_000)
    library = [target, half, small, tiny, other_vocab, other_tokenizer, bigger]
    assert small.parameter_count <= DRAFT_SHARE * target.parameter_count < half.parameter_count
    assert best_draft(target, library[1:4]) == small
    assert draft_candidates(target, library) == (small, half, tiny)  # the default first
    assert best_draft(target, [half]) is None
    assert draft_candidates(target, [half]) == (half,)  # offered, not chosen by default
