"""Human formatting of sizes and counts, shared by the CLI and the GUI."""

from __future__ import annotations

# Binary units with IEC labels, because llama.cpp logs buffer sizes in MiB and the
# numbers Hearth shows must match what a user reads in those logs.
_BYTE_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB")

# Decimal suffixes as model cards write parameter counts ("270M", "7B").
_COUNT_UNITS = ("K", "M", "B", "T")


def format_bytes(n: float) -> str:
    """``512 B``, ``12.0 KiB``, ``235.2 MiB``, ``1.2 GiB`` (1024-based, one decimal)."""
    sign = "-" if n < 0 else ""
    value = float(abs(n))
    if value < 1024:
        return f"{sign}{int(value)} B"
    for i, unit in enumerate(_BYTE_UNITS):
        value /= 1024
        # Move up a unit when rounding would print "1024.0": 1023.96 KiB is "1.0 MiB".
        if round(value, 1) < 1024 or i == len(_BYTE_UNITS) - 1:
            return f"{sign}{value:.1f} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def format_count(n: float) -> str:
    """``950``, ``12.3K``, ``268.1M``, ``7.2B`` (1000-based, one decimal above 999)."""
    sign = "-" if n < 0 else ""
    value = float(abs(n))
    if round(value, 1) < 1000:
        return f"{sign}{value:.0f}" if value == int(value) else f"{sign}{value:.1f}"
    for i, unit in enumerate(_COUNT_UNITS):
        value /= 1000
        if round(value, 1) < 1000 or i == len(_COUNT_UNITS) - 1:
            return f"{sign}{value:.1f}{unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def plural(n: int, word: str, plural_word: str | None = None) -> str:
    """``1 model``, ``2 models``, ``0 models``; ``plural_word`` for irregular nouns."""
    return f"{n:,} {word if n == 1 else plural_word or word + 's'}"
