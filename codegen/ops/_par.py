"""Whether an op's layer body runs split among the pool's threads (EmitContext.parallel), and in
what chunks. Splits are over independent output items (planes, rows, element blocks), so results
do not depend on the thread count."""

from __future__ import annotations

from edgec.codegen.emit import EmitContext

# Below ~64 KB of traffic an op takes a few microseconds: handing out chunks would cost as much.
MIN_FLOATS = 16384
# Chunks per layer: claimed dynamically, 8 even out 2-4 threads and absorb a late-waking one.
CHUNKS = 8


def split(ctx: EmitContext, items: int, work_floats: int, min_floats: int = MIN_FLOATS) -> bool:
    """Mark the layer parallel over `items` when it moves at least `min_floats` floats; the body
    then uses ec_b, ec_e (item range) and ec_tid (thread index)."""
    if items < 2 or work_floats < min_floats:
        return False
    ctx.parallel(items, -(-items // CHUNKS))
    return True


def flat_items(size: int, block: int = 64) -> int:
    """Blocks of `block` elements covering a flat tensor of `size` (the last one partial)."""
    return -(-size // block)
