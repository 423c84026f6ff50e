"""The one error type users see.

Library code raises EdgecError with a single line that names the problem; the
CLI edge prints it in red and exits non-zero. Anything else is a bug and shows a
traceback only with --debug.
"""

from __future__ import annotations


class EdgecError(Exception):
    """A user-facing failure: bad model, bad shape, bad data, bad config, network fault."""

    exit_code = 2

    def __init__(self, message: str, *, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code
