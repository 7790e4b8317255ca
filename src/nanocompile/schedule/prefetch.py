"""The ``prefetch`` schedule primitive: ask for a streamed argument's lines
before the loads reach them.

``prefetch arg 1 dim 2 ahead 512 locality 2`` puts, before every load of
argument #1, a ``loop.prefetch`` of the element 512 further along its index
#2 (the same indices and strides otherwise), for the cache level
``locality`` names (``loop.PREFETCH_LOCALITIES``).

Why: attention at long context reads the KV cache once per step, each KV
head's keys and values a stream of rows (``past`` rows of 256 bytes each,
a megabyte per head at 4,096 positions) that no cache holds from one step to
the next. The hardware prefetchers of the AMD EPYC Zen 4 here follow such a
stream too slowly: the context kernel read its values at ~9 GB/s where a
plain read runs at ~18 GB/s (``bench streams``). Asking for the row 512
positions (128 KiB) ahead into the second-level cache made the context 21-29 %
and the scores ~10 % faster from memory, and changed nothing with the rows
already in the cache (session 16, tuning harness, one layer at 4,096
positions, 1 thread; ``schedule/defaults.py``'s ``PREFETCH_AHEAD``; README,
Phase 7).

``within "d0_tail"`` scopes it: only the loads nested (at any depth) in a
loop of that name get one. Why: a projection's weight prefetch (the tuner's
``prefetch`` knob, ``schedule/defaults.py``) pays at decode, where the one
token row runs in the peeled tail of the rows split (``d0_tail``) and reads
each weight row once, streamed from DRAM; in the prefill register tile (rows
jammed 6 at a time) the weight tile is reused from cache and the prefetches
only cost issue slots (bf16 prefill at 128 tokens ran 0.94x the hand
schedule's speed with them everywhere).

Bitwise: a prefetch reads nothing the kernel computes with and never faults
(``__builtin_prefetch``), so its address may lie beyond the argument's
footprint (the last 512 rows of a stream ask for lines no load will read:
the only extra memory traffic, which the footprints, counting what the loads
read, do not count). Every value is computed as before.

Preconditions (typed; the kernel is unchanged when one fails): 1. ``arg`` is
an argument the kernel only reads; 2. with ``within``, the kernel has a loop
of that name; 3. the kernel loads it (with ``within``: inside that loop); 4.
every such load of it has an index ``dim``. Apply it after the loop
directives (the schedule's verifier requires it): a loop directive that
rebuilds a loop body keeps only what its values need, and a prefetch feeds
none.
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import Operation

from nanocompile.dialects import loop
from nanocompile.schedule.primitives import ScheduleError, _insert_before


class NotStreamed(ScheduleError):
    """The argument cannot be prefetched: missing, written, never loaded (in
    the ``within`` loop, which must exist), or loaded with fewer indices than
    ``dim``."""


def prefetch(kernel: loop.KernelOp, arg: int, dim: int, ahead: int, locality: int,
             within: str | None = None) -> None:
    """Before every load of argument ``arg`` (with ``within``: every one nested
    in a loop of that name), prefetch the element ``ahead`` further along index
    ``dim`` (see the module docstring)."""
    where = f"@{kernel.sym_name.data}: prefetch arg {arg}"
    if not 0 <= arg < len(kernel.args):
        raise NotStreamed(f"{where}: the kernel has {len(kernel.args)} arguments")
    if kernel.modes[arg] != "r":
        raise NotStreamed(f"{where}: the kernel writes argument #{arg}; only an argument it "
                          "only reads is prefetched")
    ptr = kernel.args[arg]
    loads = [op for op in _scope(kernel, where, within)
             if isinstance(op, loop.LoadOp) and op.ptr is ptr]
    if not loads:
        inside = "" if within is None else f" inside loop '{within}'"
        raise NotStreamed(f"{where}: the kernel never loads argument #{arg}{inside}")
    short = [op for op in loads if len(op.indices) <= dim]
    if short:
        raise NotStreamed(f"{where}: a load of argument #{arg} has {len(short[0].indices)} "
                          f"indices, so no index #{dim}")
    for load in loads:
        distance = arith.ConstantOp(IntegerAttr(ahead, IndexType()))
        moved = arith.AddiOp(load.indices[dim], distance.result)
        indices = [*load.indices[:dim], moved.result, *load.indices[dim + 1:]]
        _insert_before(load, [distance, moved,
                              loop.PrefetchOp(ptr, indices, load.stride_exprs, locality)])


def _scope(kernel: loop.KernelOp, where: str, within: str | None) -> list[Operation]:
    """The ops a prefetch may precede: the kernel's, or those nested in the
    loops named ``within`` (at least one; each op once)."""
    if within is None:
        return list(kernel.walk())
    scopes = [op for op in kernel.walk() if isinstance(op, loop.ForOp)
              and op.loop_name.data == within]
    if not scopes:
        names = sorted({op.loop_name.data for op in kernel.walk() if isinstance(op, loop.ForOp)})
        raise NotStreamed(f"{where} within '{within}': the kernel has no loop named "
                          f"'{within}' (loops: {', '.join(names)})")
    return list(dict.fromkeys(op for scope in scopes for op in scope.body.walk()))
