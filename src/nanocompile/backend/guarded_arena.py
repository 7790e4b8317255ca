"""A guarded arena for compiled programs: every temporary in its own slot
between guard bytes (the random graph generator that drives it in the fuzz
campaigns is ``nanocompile.testing.random_graphs``).

AddressSanitizer sees an overrun only when it leaves a whole allocation. The
runtime places every temporary of a program in *one* arena allocation, so a
kernel that writes past the end of one temporary into its neighbour is
invisible to ASan. `GuardedArena` closes that gap from outside the runtime:
it replaces the arena plan of one `CompiledProgram` with a layout where every
temporary has its own slot (no reuse), sized exactly for the run's symbol
values, with a band of guard bytes before and after it; it fills the whole
arena with seeded pseudo-random bytes before each run and checks afterwards
that every byte outside the temporaries is unchanged::

    guarded = GuardedArena(program)
    outputs = guarded.run(inputs)   # raises ArenaGuardError on a stray write

The random fill also makes a kernel that reads a temporary before writing it
(which the zero-initialised production arena would hide) compute garbage,
which the comparison with the interpreter then catches. A stray write goes
unseen only if it writes exactly the bytes already there (probability 2**-8
per byte, 2**-32 for an f32).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from xdsl.ir import SSAValue

from nanocompile.backend.arena import ArenaPlan, Buffer, check_plan
from nanocompile.backend.runtime import CompiledProgram, temp_buffers
from nanocompile.dialects import loop

ALIGNMENT = 64  # the runtime's arena alignment (backend.arena.plan_arena's default)
GUARD_BYTES = 256  # guard band before and after every temporary


class ArenaGuardError(AssertionError):
    """A kernel wrote outside the bounds of the temporary it owns."""


@dataclass(frozen=True)
class Violation:
    """A run of changed guard bytes ``[start, end)`` (arena offsets) next to a temporary."""

    start: int
    end: int
    temp: int  # index of the nearest temporary (in ``temp_buffers`` order)
    where: str  # "after" its end, or "before" its start
    distance: int  # bytes from that temporary's bound to the first changed byte
    kernels: tuple[str, ...]  # the kernels whose launches read or write that temporary

    def __str__(self) -> str:
        return (f"guard bytes [{self.start}, {self.end}) changed, {self.distance} bytes "
                f"{self.where} temporary #{self.temp} (used by {', '.join(self.kernels)})")


def _temp_users(program: CompiledProgram) -> list[tuple[str, ...]]:
    """For each temporary (``temp_buffers`` order), the kernels launched on a view of it."""
    temps = [b for b in program.program.buffers() if b.kind.data == "temp"]
    index: dict[SSAValue, int] = {b.result: i for i, b in enumerate(temps)}
    users: list[dict[str, None]] = [{} for _ in temps]
    for launch in program.program.launches():
        for view in launch.views:
            owner = view.owner
            assert isinstance(owner, loop.ViewOp)
            i = index.get(owner.source)
            if i is not None:
                users[i][launch.kernel_name] = None
    return [tuple(u) for u in users]


def _align_up(value: int, alignment: int = ALIGNMENT) -> int:
    return -(-value // alignment) * alignment


class GuardedArena:
    """Instruments one `CompiledProgram` (its ``plan``, arena and output arrays)
    for guarded runs: every temporary and every output sits between guard
    bytes of random values, checked after the run.

    The program keeps working as before, only slower (a fresh arena per run);
    `run` checks the guards after each call, `check` can be called after any
    ``program.run`` made while instrumented.
    """

    def __init__(self, program: CompiledProgram, *, guard: int = GUARD_BYTES,
                 seed: int = 0x5A17) -> None:
        self.program = program
        self.guard = _align_up(guard)
        self.temps = temp_buffers(program.program)
        self._kernels = _temp_users(program)
        self._rng = np.random.default_rng(seed)
        self._sizes: list[int] = []
        self._offsets: list[int] = []
        self._arena: np.ndarray | None = None
        self._expected: np.ndarray | None = None
        self.runs = 0
        # Instance attributes shadow CompiledProgram.plan and .new_output: _call asks
        # them for the plan and for every output array.
        program.plan = self._plan  # type: ignore[method-assign]  # instance override
        program.new_output = self._new_output  # type: ignore[method-assign]  # instance override
        self._outputs: list[tuple[str, np.ndarray, np.ndarray, int]] = []

    def sizes(self, bindings: Mapping[str, int]) -> list[int]:
        """Byte size of every temporary at ``bindings`` (exact, not rounded up)."""
        return [t.size.evaluate(bindings) for t in self.temps]

    def _plan(self, bindings: Mapping[str, int]) -> ArenaPlan:
        """One slot per temporary at the exact sizes for ``bindings``, guards between;
        the program's arena is replaced by a fresh, randomly filled one."""
        sizes = self.sizes(bindings)
        offsets = []
        cursor = self.guard
        for size in sizes:
            offsets.append(cursor)
            cursor += _align_up(size) + self.guard
        plan = ArenaPlan(offsets=tuple(offsets), size=cursor, total_bytes=sum(sizes),
                         peak_live_bytes=sum(sizes))
        check_plan([Buffer(s, t.first, t.last) for s, t in zip(sizes, self.temps, strict=True)],
                   plan)
        arena = self._rng.integers(0, 256, cursor + 2 * ALIGNMENT, dtype=np.uint8)
        self._arena, self._expected = arena, arena.copy()
        self._sizes, self._offsets = sizes, offsets
        self.program._arena = arena  # large enough, so the runtime uses it as is
        return plan

    def _new_output(self, name: str, shape: list[int], dtype: np.dtype) -> np.ndarray:
        """An output array between two guard regions of random bytes."""
        if any(o[0] == name for o in self._outputs):  # a new run: forget the last one's
            self._outputs = []
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        raw = self._rng.integers(0, 256, nbytes + 2 * self.guard + ALIGNMENT, dtype=np.uint8)
        start = self.guard + (-(raw.ctypes.data + self.guard) % ALIGNMENT)
        self._outputs.append((name, raw, raw.copy(), start))
        return raw[start:start + nbytes].view(dtype).reshape(shape)

    def output_violations(self) -> list[str]:
        """Outputs whose guard bytes (before or after the array) changed."""
        found = []
        for name, raw, expected, start in self._outputs:
            nbytes = raw.size - 2 * self.guard - ALIGNMENT
            changed = np.flatnonzero(raw != expected)
            stray = changed[(changed < start) | (changed >= start + nbytes)]
            if stray.size:
                where = "before" if stray[0] < start else "after"
                found.append(f"output '{name}': {stray.size} guard byte(s) changed {where} it")
        return found

    def _base(self) -> int:
        """Offset of the runtime's 64-aligned arena start inside our array."""
        assert self._arena is not None
        address = self._arena.ctypes.data
        return -address % ALIGNMENT

    def violations(self) -> list[Violation]:
        """Changed bytes outside every temporary's ``[offset, offset + size)``."""
        if self._arena is None or self._expected is None:
            return []
        base = self._base()
        changed = self._arena != self._expected
        owned = np.zeros(changed.shape, bool)
        for offset, size in zip(self._offsets, self._sizes, strict=True):
            owned[base + offset: base + offset + size] = True
        stray = np.flatnonzero(changed & ~owned)
        out: list[Violation] = []
        if stray.size == 0:
            return out
        breaks = np.flatnonzero(np.diff(stray) > 1)
        starts = np.concatenate([[stray[0]], stray[breaks + 1]])
        ends = np.concatenate([stray[breaks], [stray[-1]]]) + 1
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            out.append(self._describe(start - base, end - base))
        return out

    def _describe(self, start: int, end: int) -> Violation:
        best: tuple[int, int, str] | None = None
        for i, (offset, size) in enumerate(zip(self._offsets, self._sizes, strict=True)):
            for distance, where in ((start - (offset + size), "after"), (offset - end, "before")):
                if distance >= 0 and (best is None or distance < best[0]):
                    best = (distance, i, where)
        distance, temp, where = best if best is not None else (0, -1, "outside")
        kernels = self._kernels[temp] if temp >= 0 else ()
        return Violation(start, end, temp, where, distance, kernels)

    def check(self) -> None:
        """Raise `ArenaGuardError` if the last run wrote outside its temporaries
        or outside its outputs."""
        found = [str(v) for v in self.violations()] + self.output_violations()
        if found:
            raise ArenaGuardError(f"@{self.program.signature.name}: " + "; ".join(found))

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """``program.run(inputs)`` in a fresh guarded arena with guarded outputs,
        then `check`."""
        self._outputs = []
        outputs = self.program.run(inputs)
        self.runs += 1
        self.check()
        return outputs
