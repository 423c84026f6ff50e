"""The C runtime sources that edgec copies into every generated project."""

from __future__ import annotations

from pathlib import Path


def root() -> Path:
    """Folder holding the runtime's .c/.h files (installed or in the source tree)."""
    return Path(__file__).resolve().parent
