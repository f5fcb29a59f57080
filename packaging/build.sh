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
if [[ ! -x "$VENV/bin/python" ]]; then
    echo "[package] creating the build venv $VENV"
    "${PYTHON:-python3.11}" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip wheel
fi

# llama.cpp for other people's machines: GGML_BACKEND_DL with every CPU variant ggml offers,
# the best one picked at start by what the CPU can run (the AMX one is left out of the
# bundle). Built once into the keyed wheelhouse (engine/native/build.py): about 20 minutes
# on 2 cores the first time, seconds after.
"$VENV/bin/python" engine/native/build.py ensure --bundle

echo "[package] installing Hearth and PyInstaller into $VENV"
# llama-cpp-python is already satisfied, so this never replaces the portable build.
"$VENV/bin/python" -m pip install --quiet ".[package]"

HEARTH_PORTABLE_LLAMA=1 exec "$VENV/bin/python" packaging/build.py "$@"
