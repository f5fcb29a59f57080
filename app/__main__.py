"""`hearth` / `python -m app`: no arguments starts the GUI; subcommands serve the terminal."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from app.cli import run_cli

    return run_cli(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
