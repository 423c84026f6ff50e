"""Model text in generated files.

A model is untrusted input: its node, tensor and graph names, its file name and the command line that compiled it
reach the generated project only as C string literals made by c_string(). Nothing derived from a model becomes a C
identifier, a file name, a Makefile word or part of a shell command, and comments carry none of it (the provenance
comment quotes its values as c_string() literals, which cannot end a comment).

c_string() keeps a conservative set of printable ASCII characters as they are and writes every other byte of the
UTF-8 encoding as a three-digit octal escape, so the literal
  - holds no `"`, `\\` except as the start of an escape, no newline, CR or other control byte;
  - holds no `?` (so no trigraph such as `??/`, which gcc honours in -std=c11 and which would escape the quote),
    and no `*` (so no `*/` or `/*`: the literal is also safe inside a block comment, even under -Wcomment);
  - holds no backslash-newline splice;
  - never lets an escape swallow the digits after it (an octal escape stops after three digits; no hex escapes).
"""

from __future__ import annotations

import re
import string

# Printable ASCII kept verbatim. Left out on purpose: ? (trigraphs), \ and " (the literal itself), * (comments),
# % (format strings, should a name ever reach one), ' $ ` (quoting elsewhere).
SAFE_CHARS = frozenset(string.ascii_letters + string.digits + " _-.,:;+=()[]{}<>!@#&|~^/")
_SAFE_BYTES = frozenset(ord(c) for c in SAFE_CHARS)
_WORD = re.compile(r"[^A-Za-z0-9_.+-]")


def c_string(text: str) -> str:
    """A C string literal, quotes included, that evaluates to the UTF-8 bytes of text."""
    data = str(text).encode("utf-8", "surrogatepass")
    return '"' + "".join(chr(b) if b in _SAFE_BYTES else f"\\{b:03o}" for b in data) + '"'


def comment_word(text: str) -> str:
    """Framework-chosen words (op type, algorithm) in a comment: anything outside [A-Za-z0-9_.+-] becomes `_`,
    so a comment stays a comment even if such a word were ever derived from a model."""
    return _WORD.sub("_", str(text))
