"""PyInstaller runtime hook: runs before the app's first import.

llama-cpp-python loads its libraries with ctypes from a path it computes itself; in a
bundle that path must be the collected ``llama_cpp/lib``. Set unconditionally: a
LLAMA_CPP_LIB_PATH inherited from a developer's shell would load another build's
libraries against this bundle's bindings.
"""

import os
import sys

_lib = os.path.join(sys._MEIPASS, "llama_cpp", "lib")  # type: ignore[attr-defined]
os.environ["LLAMA_CPP_LIB_PATH"] = _lib
os.environ["MTMD_CPP_LIB"] = _lib
