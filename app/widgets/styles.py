"""Style sheets the panels share for text that says something: an error, a note, a warning."""

from __future__ import annotations

__all__ = ["ERROR_STYLE", "NOTE_STYLE", "WARNING_STYLE"]

ERROR_STYLE = "color: #d62728;"
NOTE_STYLE = "color: palette(mid);"
WARNING_STYLE = "color: #b36b00;"
