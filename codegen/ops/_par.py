"""Whether a layer runs split among the pool's threads, and in what chunks. Splits are over independent
output items (planes, rows, element blocks), so results do not depend on the thread count.

The decision weighs the layer's estimated one-thread time against what handing work to the pool costs
(Target.pool_job_us, or this device's value fitted by `edgec tune`: learned constant pool-job-us): a
split saves work * (1 - 1/threads) and costs one hand-off per pooled job."""

from __future__ import annotations

from edgec.codegen.emit import EmitContext

# Chunks per layer: claimed dynamically, 8 even out 2-4 threads and absorb a late-waking one.
CHUNKS = 8
# Pooled jobs a driver call may issue (packing or padding, then the layer): the hand-offs a split pays.
DRIVER_JOBS = 2


def job_us(target) -> float:
    from edgec.codegen.costmodel import learned_value

    return learned_value("pool-job-us", target.pool_job_us)


def worth_splitting(target, work_us: float, jobs: int = 1, threads: int | None = None) -> bool:
    """A layer of `work_us` one-thread time gains from the pool. Builds run at any thread count up to
    the one compiled for; a 1-thread build is still judged for 2."""
    from edgec.codegen.options import active

    threads = max(2, active().threads if threads is None else threads)
    return work_us * (1 - 1 / threads) > jobs * job_us(target)


def layer_us(target, macs: int, floats: float, int8: bool = False) -> float:
    """Estimated one-thread time of a layer that does `macs` multiply-adds (int8 ones: target.q8_macs_per_us) and
    moves `floats` values' worth of bytes."""
    rate = target.q8_macs_per_us if int8 and target.q8_macs_per_us > 0 else target.f32_macs_per_us
    return max(macs / rate, floats / target.f32_floats_per_us)


def driver_pooled(target, info, threads: int) -> bool:
    """Whether a layer whose drivers take the pool (ctx.pool) is handed it, or runs on the calling thread;
    notes a layer kept on one thread. A partitioning forced by a tuning record or EDGEC_PAR stands."""
    if info.details.get("partition"):
        return True
    moved = [t for t in info.node.operands() if not t.is_const] + [t for t in info.node.outputs if t is not None]
    floats = sum(t.size * t.dtype.itemsize for t in moved) / 4  # an int8 tensor moves a quarter of the bytes
    int8 = any(t.dtype.itemsize == 1 for t in info.node.outputs if t is not None)
    us = layer_us(target, info.macs, floats, int8)
    if worth_splitting(target, us, DRIVER_JOBS, threads):
        return True
    info.details["threads"] = (f"one: est. {us:.1f} us of work, below {DRIVER_JOBS} pool hand-offs of "
                               f"{job_us(target):g} us")
    return False


def split(ctx: EmitContext, items: int, work_floats: int) -> bool:
    """Mark the layer parallel over `items` when its `work_floats` (floats moved, weighted by the op's
    cost per float) outweigh the hand-off; the body then uses ec_b, ec_e (item range) and ec_tid
    (thread index)."""
    if items < 2 or not worth_splitting(ctx.target, work_floats / ctx.target.f32_floats_per_us):
        return False
    ctx.parallel(items, -(-items // CHUNKS))
    return True


def flat_items(size: int, block: int = 64) -> int:
    """Blocks of `block` elements covering a flat tensor of `size` (the last one partial)."""
    return -(-size // block)


def flat_call(ctx: EmitContext, size: int, block: int, work_floats: int, call: str) -> str | None:
    """An elementwise kernel call over a flat tensor, split among the threads in `block`-element blocks when its
    `work_floats` outweigh the hand-off: `call` uses b_ (this share's first element) and e_ (one past its last);
    None when the layer stays on one thread."""
    if not split(ctx, flat_items(size, block), work_floats):
        return None
    return (f"{{\n    const size_t b_ = ec_b * {block}u, e_ = ec_e * {block}u < {size}u ? ec_e * {block}u : {size}u;\n"
            f"    {call}\n}}\n")


def fit_job_us(target, samples) -> dict[str, float]:
    """The hand-off cost fitted to a device's tuned layers: samples (threads, one-thread ms, the split won
    against the same kernel on one thread). The rule splits a layer when its time saved, ms * (1 - 1/threads),
    outweighs DRIVER_JOBS hand-offs: the hand-off that the measurements contradict least (the target's value
    when it is among those)."""
    from edgec.codegen.costmodel import fit_threshold

    points = [(ms * 1e3 * (1 - 1 / threads) / DRIVER_JOBS, won) for threads, ms, won in samples if threads > 1]
    t = fit_threshold(points, target.pool_job_us, lambda x, t: x > t, 0.25)
    return {} if t is None else {"pool-job-us": round(max(0.0, t), 2)}
