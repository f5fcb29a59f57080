"""Header mutations of real files through the real load path: 0 signals, one line each.

Each mutant goes through the catalog as the app would; what the catalog accepts is opened
by llama.cpp in child processes (engine/native/model_check.py, the same check the executor runs
before loading in-process). A mutant must either load or be refused in one line: a child
that dies of a signal is a rule missing from engine/catalog/load_limits.py. The schedule is random
each run; the seed is printed, and HEARTH_FUZZ_SEED=<seed> replays it.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import gguf
import pytest

from engine.base.errors import InvalidModelFile
from engine.catalog import inspect_model
from engine.native.model_check import ModelVerdict, check_files

# Each mutant the catalog lets through is loaded in a child (~1 s of Gemma); a third are
# random bytes anywhere in the header, the rest aimed at its values (seeded, replayable).
GEMMA_MUTANTS = 36

_VOCAB_ARRAYS = (
    "tokenizer.ggml.tokens",
    "tokenizer.ggml.scores",
    "tokenizer.ggml.token_type",
    "tokenizer.ggml.merges",
)


@pytest.fixture(scope="module")
def seed() -> int:
    value = int(os.environ.get("HEARTH_FUZZ_SEED") or random.randrange(1 << 31))
    print(f"\nheader fuzz seed: {value} (replay with HEARTH_FUZZ_SEED={value})")
    return value


def semantic_spans(path: Path) -> list[tuple[int, int]]:
    """Byte ranges of every metadata pair (only the type and count of the vocabulary
    arrays, which random flips reach anyway) and of every tensor-table entry."""
    reader = gguf.GGUFReader(path)
    spans = []
    for field in reader.fields.values():
        if field.name in _VOCAB_ARRAYS:
            spans.append((field.offset, 8 + len(field.name) + 4 + 4 + 8))
        else:
            spans.append((field.offset, sum(part.nbytes for part in field.parts)))
    for tensor in reader.tensors:
        spans.append((tensor.field.offset, sum(part.nbytes for part in tensor.field.parts)))
    return spans


def mutations(
    rng: random.Random, header_end: int, spans: list[tuple[int, int]], targeted: bool
) -> list[tuple[int, int]]:
    out = []
    for _ in range(rng.randint(1, 3)):
        if targeted:
            offset, size = rng.choice(spans)
            position = offset + rng.randrange(max(size, 1))
        else:
            position = rng.randrange(header_end)
        out.append((position, rng.choice([0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)])))
    return out


def catalog_verdict(path: Path) -> str | None:
    try:
        inspect_model(path)
    except InvalidModelFile as exc:
        assert "\n" not in exc.reason and exc.reason, exc.reason
        return exc.reason
    return None


def assert_clean(verdicts: list[tuple[str, ModelVerdict]]) -> None:
    crashed = [(name, v.message) for name, v in verdicts if v.signal_name]
    assert not crashed, f"{len(crashed)} mutants crashed llama.cpp: {crashed[:5]}"
    for _, verdict in verdicts:
        assert verdict.ok or (verdict.message and "\n" not in verdict.message)


def test_tiny_model_header_mutations(tmp_path: Path, seed: int, make_tiny_model) -> None:
    rng = random.Random(seed)
    source = make_tiny_model("source.gguf")
    data = source.read_bytes()
    header_end = inspect_model(source).data_offset
    spans = semantic_spans(source)
    accepted: list[Path] = []
    refused = 0
    for i in range(320):
        mutant = bytearray(data)
        for position, value in mutations(rng, header_end, spans, targeted=i % 2 == 1):
            mutant[position] = value
        path = tmp_path / f"m{i:03d}.gguf"
        path.write_bytes(bytes(mutant))
        if catalog_verdict(path) is None:
            accepted.append(path)
        else:
            refused += 1
            path.unlink()
    verdicts = check_files(accepted, timeout=60)
    loaded = sum(v.ok for v in verdicts)
    print(
        f"tiny: 320 mutants, {refused} refused by the catalog, {loaded} loaded, "
        f"{len(accepted) - loaded} refused by llama.cpp"
    )
    assert_clean([(p.name, v) for p, v in zip(accepted, verdicts, strict=True)])


@pytest.mark.gemma
def test_gemma_header_mutations(tmp_path: Path, seed: int, gemma_path: Path) -> None:
    """One working copy of the 253 MB file, mutated and restored in place for each mutant."""
    rng = random.Random(seed + 1)
    work = tmp_path / "gemma-mutant.gguf"
    shutil.copyfile(gemma_path, work)
    header_end = inspect_model(work).data_offset
    spans = semantic_spans(work)
    verdicts: list[tuple[str, ModelVerdict]] = []
    refused = 0
    with open(work, "r+b") as f:
        for i in range(GEMMA_MUTANTS):
            changes = mutations(rng, header_end, spans, targeted=i % 3 != 0)
            original = []
            for position, value in changes:
                f.seek(position)
                original.append((position, f.read(1)))
                f.seek(position)
                f.write(bytes([value]))
            f.flush()
            if catalog_verdict(work) is None:
                verdicts.append((f"mutant {i} {changes}", check_files([work], timeout=120)[0]))
            else:
                refused += 1
            for position, byte in reversed(original):
                f.seek(position)
                f.write(byte)
            f.flush()
    loaded = sum(v.ok for _, v in verdicts)
    print(
        f"gemma: {GEMMA_MUTANTS} mutants, {refused} refused by the catalog, {loaded} loaded, "
        f"{len(verdicts) - loaded} refused by llama.cpp"
    )
    assert_clean(verdicts)
