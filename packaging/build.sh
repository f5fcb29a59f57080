#!/usr/bin/env bash
# `make package`: Hearth as a one-folder app (dist/hearth/) and a Debian package
# (dist/hearth_<version>_<arch>.deb) that installs it in /opt/hearth with a menu entry.
#
#   packaging/build.sh                      portable build: own venv, llama.cpp compiled with
#                                           GGML_NATIVE=OFF (about 8 minutes the first time)
#   packaging/build.sh --from-current-env   bundle the Python environment in $PYTHON (default
#                                           .venv/bin/python) as it is; for tests, not for shipping
#
# Other arguments go to packaging/build.py (--dist, --work, --no-deb, --deb-compression).
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == "--from-current-env" ]]; then
    shift
    exec "${PYTHON:-.venv/bin/python}" packaging/build.py "$@"
fi

VENV=build/venv-package
# llama.cpp for other people's machines: without GGML_NATIVE=OFF the compiler targets this
# CPU (-march=native) and the app dies with "illegal instruction" on older ones. OFF gives
# the AVX2/FMA/F16C baseline (x86-64-v3). ggml turns every instruction set off, AVX2
# included, when SOURCE_DATE_EPOCH is set, hence the unset below.
PORTABLE_CMAKE_ARGS="-DGGML_NATIVE=OFF"
STAMP="$VENV/.portable-llama"

if [[ ! -x "$VENV/bin/python" ]]; then
    echo "[package] creating the build venv $VENV"
    "${PYTHON:-python3.11}" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip wheel
fi

LLAMA_REQ=$("$VENV/bin/python" -c '
import tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
print(next(d for d in deps if d.startswith("llama-cpp-python")))')

if [[ "$(cat "$STAMP" 2>/dev/null)" != "$LLAMA_REQ $PORTABLE_CMAKE_ARGS" ]]; then
    echo "[package] compiling llama.cpp for any x86-64 CPU with AVX2: $LLAMA_REQ with CMAKE_ARGS=\"$PORTABLE_CMAKE_ARGS\""
    echo "[package] (this takes about 8 minutes on 2 cores)"
    # pip's wheel cache is keyed by the source archive, not by CMAKE_ARGS: with the shared
    # cache pip would reuse the -march=native wheel `make run` built. A cache of our own
    # keeps the portable wheel apart (and makes the next `make package` quick).
    env -u SOURCE_DATE_EPOCH CMAKE_ARGS="$PORTABLE_CMAKE_ARGS" PIP_CACHE_DIR="$PWD/build/pip-cache-portable" \
        "$VENV/bin/python" -m pip install --quiet --force-reinstall --no-deps --no-binary llama-cpp-python \
        "$LLAMA_REQ"
    echo "$LLAMA_REQ $PORTABLE_CMAKE_ARGS" > "$STAMP"
else
    echo "[package] portable llama.cpp already built in $VENV ($PORTABLE_CMAKE_ARGS)"
fi

echo "[package] installing Hearth and PyInstaller into $VENV"
# llama-cpp-python is already satisfied, so this never replaces the portable build.
"$VENV/bin/python" -m pip install --quiet ".[package]"

HEARTH_PORTABLE_LLAMA=1 exec "$VENV/bin/python" packaging/build.py "$@"
