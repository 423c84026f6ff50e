"""Shared rich consoles: tables and progress on a terminal, plain text when piped."""

from __future__ import annotations

import json
import sys

from rich.console import Console

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def plain(text: str) -> str:
    """Text from a model, a path or a peer, safe to print on a terminal as one line of rich markup: control bytes
    (newlines, ESC sequences) shown escaped, markup brackets escaped."""
    from rich.markup import escape

    out = "".join(ch if ch.isprintable() or ch == " " else repr(ch)[1:-1] for ch in str(text))
    return escape(out)


def print_json(doc) -> None:
    """Machine output: stable keys, nothing else on stdout."""
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True, default=_default) + "\n")
    sys.stdout.flush()


def _default(o):
    try:
        import numpy as np
        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
    except ImportError:  # pragma: no cover
        pass
    return str(o)
