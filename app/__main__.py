"""`hearth` / `python -m app`: no arguments starts the GUI; subcommands serve the terminal."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    # The native self-check's child (engine/native/probe.py); in a frozen bundle this
    # executable is the only Python there is. Handled first: no Qt, no argparse.
    if args[:1] == ["--native-probe"]:
        from engine import run_native_probe_child

        return run_native_probe_child()
    if args[:1] == ["--check-model"]:  # engine/native/model_check.py's child, likewise
        from engine import run_model_check_child

        return run_model_check_child(args[1:])
    if args[:1] == ["--rpc-probe"]:  # engine/rpc/workers.py's child, likewise
        from engine import run_rpc_probe_child

        return run_rpc_probe_child(args[1:])
    if args[:1] == ["--rpc-model"]:  # a split model's process (engine/model_process/child.py), likewise
        from engine import run_rpc_model_child

        return run_rpc_model_child(args[1:])
    from app.cli.commands import run_cli

    return run_cli(args)


if __name__ == "__main__":
    sys.exit(main())
