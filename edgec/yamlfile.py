"""Reading user YAML (edgec.yaml, the device inventory) as untrusted input.

safe_load only (no Python tags), a size cap, and a cap on the size of the document once aliases are
expanded: `&a [*b, *b, ...]` chains ("billion laughs") compose in linear time but blow up exponentially
in everything that walks the result afterwards.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from edgec.errors import EdgecError

MAX_BYTES = 1 << 20      # a hand-written config is a few KB
MAX_NODES = 100_000      # scalars + collections after alias expansion


def _expanded_size(node: yaml.Node, memo: dict, active: set) -> int:
    key = id(node)
    if key in memo:
        return memo[key]
    if key in active:
        raise ValueError("an alias refers to the node that contains it (a recursive structure)")
    active.add(key)
    total = 1
    if isinstance(node, yaml.SequenceNode):
        for child in node.value:
            total += _expanded_size(child, memo, active)
            if total > MAX_NODES:
                break
    elif isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            total += _expanded_size(k, memo, active) + _expanded_size(v, memo, active)
            if total > MAX_NODES:
                break
    active.discard(key)
    memo[key] = total
    return total


def loads(text: str, where: str) -> object:
    """Parse YAML text (from `where`, for messages) into plain Python objects."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        try:
            size = _expanded_size(node, {}, set())
        except ValueError as e:
            raise EdgecError(f"{where}: {e}; edgec configs must be plain data") from None
        except RecursionError:
            raise EdgecError(f"{where}: nested too deeply to be a config") from None
        if size > MAX_NODES:
            raise EdgecError(f"{where}: expands to more than {MAX_NODES} values through YAML aliases "
                             "(&anchor / *alias); write the values out") from None
        return loader.construct_document(node)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise EdgecError(f"{where} is not valid YAML{line}: {' '.join(str(problem).split())[:200]}") from None
    except RecursionError:
        raise EdgecError(f"{where}: nested too deeply to be a config") from None
    finally:
        loader.dispose()


def read(path: str | Path) -> object:
    """Read and parse a YAML file; every problem is one EdgecError naming the file."""
    p = Path(path)
    try:
        if p.stat().st_size > MAX_BYTES:
            raise EdgecError(f"{p} is {p.stat().st_size} bytes; a config over {MAX_BYTES >> 10} KB is not a config")
        data = p.read_bytes()
    except FileNotFoundError:
        raise EdgecError(f"config file not found: {p}") from None
    except IsADirectoryError:
        raise EdgecError(f"{p} is a folder, not a YAML file") from None
    except OSError as e:
        raise EdgecError(f"cannot read {p}: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise EdgecError(f"{p} is not a text file (not UTF-8 at byte {e.start}); expected YAML") from None
    return loads(text, str(p))
