"""The text-model architectures the installed llama.cpp can run (``known_architectures``)."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import re
from pathlib import Path

# Used when the architecture names cannot be read from the installed libllama (or to
# complete them: the linker may fold a short name into the tail of a longer string,
# e.g. "qwen2" into "rwkv6qwen2", so it never shows up as a string of its own).
_FALLBACK_ARCHITECTURES = frozenset(
    """
    llama llama4 deci falcon grok gpt2 gptj gptneox mpt baichuan starcoder refact bert
    modern-bert nomic-bert nomic-bert-moe neo-bert jina-bert-v2 jina-bert-v3 eurobert bloom
    stablelm qwen qwen2 qwen2moe qwen2vl qwen3 qwen3moe qwen3next qwen3vl qwen3vlmoe qwen35
    qwen35moe phi2 phi3 phimoe plamo plamo2 codeshell orion internlm2 minicpm minicpm3
    gemma gemma2 gemma3 gemma3n gemma-embedding starcoder2 mamba mamba2 jamba falcon-h1
    xverse command-r cohere2 dbrx olmo olmo2 olmoe openelm arctic deepseek deepseek2
    chatglm glm4 glm4moe bitnet t5 t5encoder jais nemotron nemotron_h exaone exaone4 rwkv6
    rwkv6qwen2 rwkv7 arwkv7 granite granitemoe granitehybrid chameleon wavtokenizer-dec plm
    bailingmoe bailingmoe2 dots1 arcee ernie4_5 ernie4_5-moe hunyuan-moe hunyuan-dense
    smollm3 gpt-oss lfm2 lfm2moe dream smallthinker llada llada-moe seed_oss grovemoe
    apertus minimax-m2 cogvlm rnd1 pangu-embedded mistral3
    """.split()  # noqa: SIM905 - a word list reads better than 110 quoted strings
)


@functools.cache
def known_architectures() -> frozenset[str]:
    """Text-model architectures the installed llama.cpp knows (cached).

    Read from the string table of the installed libllama (the ``LLM_ARCH_NAMES`` literals
    sit together between "llama" and "(unknown)") without loading it, so the list always
    matches the build; completed with, or replaced by, a built-in list.
    """
    names = set(_FALLBACK_ARCHITECTURES)
    with contextlib.suppress(OSError, ValueError, ImportError):
        names |= _architectures_from_library()
    names.discard("clip")  # an mmproj tag, not something llama_model_load accepts
    return frozenset(names)


def _architectures_from_library() -> set[str]:
    spec = importlib.util.find_spec("llama_cpp")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return set()
    found: set[str] = set()
    for folder in spec.submodule_search_locations:
        for lib_dir in (Path(folder) / "lib", Path(folder) / "bin"):  # bin: Windows wheels
            if lib_dir.is_dir():
                found |= _scan_library_folder(lib_dir)
    return found


def _scan_library_folder(lib_dir: Path) -> set[str]:
    found: set[str] = set()
    for lib in sorted(lib_dir.iterdir()):
        if "llama" in lib.name and lib.suffix in (".so", ".dylib", ".dll"):
            found |= _architecture_block(lib.read_bytes())
    return found


def _architecture_block(data: bytes) -> set[str]:
    start = data.find(b"\0llama\0llama4\0")
    if start < 0:
        return set()
    end = data.find(b"\0(unknown)\0", start)
    if end < 0 or end - start > 64 * 1024:
        return set()
    names = data[start + 1 : end].split(b"\0")
    valid = re.compile(rb"^[a-z][a-z0-9_.\-]{0,40}$")
    return {n.decode() for n in names if valid.match(n)}
