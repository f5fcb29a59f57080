"""The child process that talks to a worker first (see ``engine.rpc.workers``): registers
it with llama.cpp, reads each device's memory, prints one JSON line. If llama.cpp aborts
(the worker is down, speaks another protocol version), only this child dies."""

from __future__ import annotations

import json
import sys


def child_main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m engine.rpc.probe HOST:PORT", file=sys.stderr)
        return 2
    from engine.rpc.endpoint import parse_address
    from engine.rpc.native_rpc import add_server, device_memory

    endpoint = parse_address(argv[0]).endpoint
    devices = []
    for i, _handle in enumerate(add_server(endpoint)):
        free, total = device_memory(endpoint, i)
        devices.append({"free": free, "total": total})
    print(json.dumps({"endpoint": endpoint, "devices": devices}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
