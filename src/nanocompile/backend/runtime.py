"""The ctypes runtime: run a compiled ``loop.program`` on NumPy arrays.

``CompiledProgram`` gets a Loop-IR module and the C the driver printed for it
(``nanocompile.compiler``: the backend knows no target), compiles the C
(cached), binds the weights once, and on each ``run``:

1. checks the inputs with the same checker as the interpreter (names,
   dtypes, shapes, symbol bindings) plus C-contiguity, so no bad array ever
   reaches C;
2. allocates the outputs and places every temporary in one arena, planned by
   liveness (``backend.arena``) at the symbol values rounded up to three
   significant bits (``plan_value``: at most 25 % over the need per symbol,
   and one plan serves many steps, since every temporary's size only grows
   with the symbols); memory that cannot be had is an ``OutOfMemoryError``
   saying how much was asked for;
3. calls the program's entry once and maps a non-zero return (a failed
   ``loop.check``) to ``KernelError`` naming the kernel and the check.

Threads: one program has one arena, so calls from several threads take turns
(a lock per program, held from planning to the return of the C entry; the
checks and output allocation run outside it). The results are those of the
same calls made one after another.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from nanocompile.backend.arena import ArenaPlan, Buffer, plan_arena
from nanocompile.backend.gcc import CompiledLibrary, compile_library
from nanocompile.backend.pool import MAX_THREADS
from nanocompile.dialects import loop
from nanocompile.dialects.graph.signature import ArgumentError, Signature, check_value
from nanocompile.ir.dtypes import ITEMSIZE
from nanocompile.ir.shapes import TensorSpec
from nanocompile.ir.symbolic import Expr, product


class KernelError(RuntimeError):
    """A kernel rejected its data (e.g. a gather id out of range)."""


@dataclass(frozen=True)
class TempBuffer:
    """A temporary: its size in bytes (symbolic) and its live launch interval."""

    size: Expr
    first: int
    last: int


def find_program(module: ModuleOp, name: str | None = None) -> loop.ProgramOp:
    progs = [op for op in module.ops if isinstance(op, loop.ProgramOp)]
    if name is not None:
        progs = [p for p in progs if p.sym_name.data == name]
    if len(progs) != 1:
        raise ArgumentError(f"expected exactly one loop.program{f' @{name}' if name else ''}, "
                            f"found {len(progs)}")
    return progs[0]


def program_signature(program: loop.ProgramOp) -> Signature:
    def spec(buf: loop.BufferOp) -> TensorSpec:
        return TensorSpec(buf.result.type.dtype.data, buf.result.type.dims)

    def named(*kinds: str) -> list[tuple[str, TensorSpec]]:
        return [(b.buffer_name.data, spec(b)) for b in program.buffers()
                if b.kind.data in kinds and b.buffer_name is not None]

    inputs = named("input", "state")  # a state is an input and an output
    outputs = dict(named("output", "state"))
    by_shape = {s for _, sp in inputs for d in sp.shape if (s := d.single_symbol) is not None}
    return Signature(program.sym_name.data, tuple(inputs), tuple(named("weight")),
                     tuple((n, outputs[n]) for n in program.output_op().names),
                     tuple(s for s in program.symbols if s not in by_shape))


def temp_buffers(program: loop.ProgramOp) -> list[TempBuffer]:
    """Every temporary with its byte size and the launches that touch it."""
    temps = [b for b in program.buffers() if b.kind.data == "temp"]
    index: dict[SSAValue, int] = {b.result: i for i, b in enumerate(temps)}
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for step, launch in enumerate(program.launches()):
        for view in launch.views:
            owner = view.owner
            assert isinstance(owner, loop.ViewOp)
            i = index.get(owner.source)
            if i is None:
                continue
            first.setdefault(i, step)
            last[i] = step
    out = []
    for i, b in enumerate(temps):
        size = product(b.result.type.dims) * ITEMSIZE[b.result.type.dtype.data]
        out.append(TempBuffer(size, first.get(i, 0), last.get(i, 0)))
    return out


@dataclass(frozen=True)
class ProgramSpec:
    """What ``CompiledProgram`` reads from a ``loop.program`` and its kernels, as
    plain data (``backend.program_cache`` stores it, so a warm start needs no
    Loop IR): the signature, the symbols in the C entry's order, the
    temporaries, the io slots in order (kind, name, tile: a packed weight has
    a tile), the requirements (expression, message), the ``loop.check``
    messages by (kernel, code) and the kernel of each launch."""

    signature: Signature
    symbols: tuple[str, ...]
    temps: tuple[TempBuffer, ...]
    io: tuple[tuple[str, str, int | None], ...]
    requirements: tuple[tuple[Expr, str], ...]
    checks: tuple[tuple[str, int, str], ...]
    launches: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.signature.name


def program_spec(module: ModuleOp, name: str | None = None) -> ProgramSpec:
    """The ``ProgramSpec`` of the (one, or the named) ``loop.program`` of ``module``."""
    program = find_program(module, name)
    return ProgramSpec(
        signature=program_signature(program),
        symbols=program.symbols,
        temps=tuple(temp_buffers(program)),
        io=tuple((b.kind.data, b.buffer_name.data, None if b.tile is None else b.tile.data)
                 for b in program.buffers() if b.buffer_name is not None),
        requirements=tuple((r.expr.data, r.message.data) for r in program.requirements()),
        checks=tuple((k, code, m) for (k, code), m in _check_messages(module).items()),
        launches=tuple(launch.kernel_name for launch in program.launches()),
    )


def plan_value(n: int) -> int:
    """``n`` rounded up to three significant bits (8, 9, ..., 15, 16, 18, ..., 28, 32,
    36, ...): a plan for the rounded value serves every value up to it, at most
    25 % above the need (the power of two it replaced could double a linear term
    and quadruple the attention scores' quadratic one)."""
    if n <= 8:
        return max(n, 0)
    step = 1 << (n.bit_length() - 3)
    return -(-n // step) * step


class OutOfMemoryError(MemoryError):
    """An allocation the run needs could not be had; the message says how much."""


def allocate(what: str, shape: list[int] | int, dtype: np.dtype | type, *,
             zero: bool = False) -> np.ndarray:
    """``np.empty`` (or ``np.zeros``), with a MemoryError turned into one line that
    says what was being allocated and how many bytes it needed."""
    try:
        return np.zeros(shape, dtype) if zero else np.empty(shape, dtype)
    except (MemoryError, ValueError) as e:
        count = int(np.prod(shape, dtype=np.float64)) if not isinstance(shape, int) else shape
        size = count * np.dtype(dtype).itemsize
        raise OutOfMemoryError(f"out of memory: {what} needs {format_bytes(size)}") from e


VECTOR_ALIGNMENT = 64
"""Bytes a buffer the kernels stream with vector loads starts on: a cache line,
so a 64-byte AVX-512 load never splits across two."""


def allocate_aligned(what: str, shape: list[int] | tuple[int, ...], dtype: np.dtype | type,
                     alignment: int = VECTOR_ALIGNMENT) -> np.ndarray:
    """``allocate``, the array's data starting on an ``alignment``-byte boundary
    (numpy's own allocations start 16 bytes into a page once they are large).
    Many arrays in 2 MiB pages: ``hugepages.HugeArena`` (a mapping per array,
    rounded to 2 MiB, had cost the widened f32 weights 126 MB more resident
    memory, session 29)."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    raw = allocate(what, count * dtype.itemsize + alignment, np.uint8)
    start = -raw.ctypes.data % alignment
    return raw[start:start + count * dtype.itemsize].view(dtype).reshape(shape)


def format_bytes(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


class CompiledProgram:
    """A ``loop.program`` compiled to a shared library, with its weights bound.

    ``source`` is the C of ``module`` (the compile driver prints it). Besides
    gcc's time (``library.compile_seconds``) the constructor records
    ``weights_seconds`` (binding the weights and packing the copies
    ``sched.pack`` asked for) and ``load_seconds`` (the rest: finding the
    library in the cache, verifying and opening it, reading the program).

    What runs a call is the ``ProgramSpec`` (``spec``) read from the module;
    ``from_spec`` builds the program from a stored spec alone (the program
    cache's warm start), and its ``program`` (the Loop IR) is then rebuilt
    only when asked for."""

    def __init__(self, module: ModuleOp, source: str, weights: Mapping[str, np.ndarray], *,
                 name: str | None = None, sanitize: bool | None = None) -> None:
        start = time.perf_counter()
        self._program: loop.ProgramOp | None = find_program(module, name)
        self._rebuild: Callable[[], ModuleOp] | None = None
        self._setup(program_spec(module, name), source, weights, sanitize, start)

    @classmethod
    def from_spec(cls, spec: ProgramSpec, source: str, weights: Mapping[str, np.ndarray], *,
                  module: Callable[[], ModuleOp],
                  sanitize: bool | None = None) -> CompiledProgram:
        """The program ``spec`` describes, without its Loop IR: ``module`` rebuilds
        the module ``source`` was printed from, called the first time ``program``
        is asked for (``program_cache``'s warm start)."""
        start = time.perf_counter()
        self = cls.__new__(cls)
        self._program = None
        self._rebuild = module
        self._setup(spec, source, weights, sanitize, start)
        return self

    def _setup(self, spec: ProgramSpec, source: str, weights: Mapping[str, np.ndarray],
               sanitize: bool | None, start: float) -> None:
        self.spec = spec
        self.signature = spec.signature
        self.source = source
        self.library: CompiledLibrary = compile_library(self.source, sanitize=sanitize)
        self._lib = self.library.load()
        entry = getattr(self._lib, f"nc_run_{spec.name}")
        entry.restype = ctypes.c_int32
        entry.argtypes = [ctypes.c_void_p] * 4
        self._entry = entry
        profile = getattr(self._lib, f"nc_profile_{spec.name}")
        profile.restype = ctypes.c_int32
        profile.argtypes = [ctypes.c_void_p] * 5
        self._profile_entry = profile
        self._symbols = spec.symbols
        self._temps = list(spec.temps)
        self._monotone = all(t.size.provably_nonnegative() for t in self._temps)
        self._plans: dict[tuple[int, ...], ArenaPlan] = {}
        self._arena = np.zeros(0, np.uint8)
        self._lock = threading.Lock()  # one arena: calls from several threads take turns
        self._checks = {(kernel, code): message for kernel, code, message in spec.checks}
        self._requirements = spec.requirements
        self._states = frozenset(n for kind, n, _ in spec.io if kind == "state")
        weights_start = time.perf_counter()
        self._weights = self._bind_weights(weights)
        self._packed = self._pack_weights()
        self.weights_seconds = time.perf_counter() - weights_start
        self._io_order = [(kind, bname if tile is None else (bname, tile))
                          for kind, bname, tile in spec.io]
        # The io pointer array's template: weight and packed slots are filled
        # here, once (the arrays stay referenced by self); each call copies it
        # and fills in its inputs and outputs.
        self._io_array = (ctypes.c_void_p * max(1, len(self._io_order)))()
        self._per_call: list[tuple[int, str, str]] = []
        for slot, (kind, bname) in enumerate(self._io_order):
            if isinstance(bname, tuple):  # a packed weight, by (name, tile)
                self._io_array[slot] = self._packed[bname].ctypes.data
            elif kind == "weight":
                self._io_array[slot] = self._weights[bname].ctypes.data
            else:
                self._per_call.append((slot, kind, bname))
        self.calls = 0
        self.load_seconds = (time.perf_counter() - start - self.weights_seconds
                             - self.library.compile_seconds)

    @property
    def program(self) -> loop.ProgramOp:
        """The ``loop.program`` (from a warm start: rebuilt on first use)."""
        if self._program is None:
            assert self._rebuild is not None
            self._program = find_program(self._rebuild(), self.spec.name)
        return self._program

    def _bind_weights(self, weights: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        bound = {}
        for wname, spec in self.signature.weights:
            if wname not in weights:
                raise ArgumentError(f"@{self.signature.name}: missing weight '{wname}'")
            arr = weights[wname]
            check_value(f"weight '{wname}'", spec, arr, {})
            if not arr.flags.c_contiguous:
                raise ArgumentError(f"weight '{wname}' must be C-contiguous")
            bound[wname] = arr
        return bound

    def _pack_weights(self) -> dict[tuple[str, int], np.ndarray]:
        """The packed copies (``sched.pack``): ``[N, K]`` as ``[N / T, K, T]``."""
        packed = {}
        for kind, name, tile in self.spec.io:
            if kind != "packed":
                continue
            assert tile is not None
            weight = self._weights[name]
            n, k = weight.shape
            packed[(name, tile)] = np.ascontiguousarray(
                weight.reshape(n // tile, tile, k).transpose(0, 2, 1))
        return packed

    def set_threads(self, n: int) -> int:
        """Threads of this library's pool (1..256; 0: the default). A program
        without parallel loops has no pool and always runs on one thread."""
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or not 0 <= n <= MAX_THREADS:
            raise ValueError(f"expected a thread count in 0..{MAX_THREADS} (0: the default), "
                             f"got {n!r}")
        n = int(n)
        setter = getattr(self._lib, "nc_pool_set_threads", None)
        if setter is None:
            return 1
        setter.argtypes = [ctypes.c_int32]
        setter.restype = ctypes.c_int32
        with self._lock:  # never restart the pool under a running call
            setter(n)
        return self.threads()

    def threads(self) -> int:
        getter = getattr(self._lib, "nc_pool_threads", None)
        if getter is None:
            return 1
        getter.restype = ctypes.c_int32
        return int(getter())

    @property
    def launches(self) -> int:
        return len(self.spec.launches)

    def plan(self, bindings: Mapping[str, int]) -> ArenaPlan:
        """The arena plan used for these symbol values."""
        if self._monotone:
            key = tuple(plan_value(bindings[s]) for s in self._symbols)
        else:
            key = tuple(bindings[s] for s in self._symbols)
        plan = self._plans.get(key)
        if plan is None:
            at = dict(zip(self._symbols, key, strict=True))
            bufs = [Buffer(t.size.evaluate(at), t.first, t.last) for t in self._temps]
            plan = plan_arena(bufs)
            self._plans[key] = plan
        return plan

    def new_output(self, name: str, shape: list[int], dtype: np.dtype) -> np.ndarray:
        """The array output ``name`` is written into (a test may guard it)."""
        return allocate(f"output '{name}' {shape}", shape, dtype)

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Outputs by name for ``inputs`` (and the scalars' values). A state
        (``Signature.states``: the KV cache) is updated in place: its output
        is the input array itself."""
        return self._call(inputs, None)

    def profile(self, inputs: Mapping[str, Any], ns: np.ndarray | None = None
                ) -> tuple[dict[str, np.ndarray], list[tuple[str, int]]]:
        """Run once through the profiling entry: outputs, and (kernel, ns) per
        launch (``ns``: the ``profile_slots`` array to write, the entry's time
        after the launches')."""
        ns = self.profile_slots() if ns is None else ns
        if ns.dtype != np.int64 or ns.shape != (self.launches + 1,):
            raise ValueError(f"ns must be int64[{self.launches + 1}], got {ns.dtype}{ns.shape}")
        outputs = self._call(inputs, ns)
        return outputs, list(zip(self.spec.launches, (int(v) for v in ns), strict=False))

    def profile_slots(self) -> np.ndarray:
        """The array the profiling entry writes: one int64 of nanoseconds per
        launch, then the whole entry's (``ns[launches]``)."""
        return np.zeros(self.launches + 1, np.int64)

    def prepare(self, inputs: Mapping[str, Any]) -> PreparedCall:
        """A call on ``inputs`` checked, planned and allocated once, to run many
        times (``PreparedCall``): the calls of a benchmark, or of a caller that
        refills the same input arrays."""
        return PreparedCall(self, inputs)

    def _call(self, inputs: Mapping[str, Any],
              ns: np.ndarray | None) -> dict[str, np.ndarray]:
        bindings, outputs = self._checked(inputs)
        with self._lock:
            return self._run_locked(inputs, outputs, bindings, ns)

    def _checked(self, inputs: Mapping[str, Any]
                 ) -> tuple[dict[str, int], dict[str, np.ndarray]]:
        """The symbols ``inputs`` bind, after every check of a call, and new
        output arrays (a state's output: its input array)."""
        bindings = self.signature.bind(inputs)
        self._check_requirements(bindings)
        for iname, _ in self.signature.inputs:
            if not inputs[iname].flags.c_contiguous:
                raise ArgumentError(f"input '{iname}' must be C-contiguous")
        states = self._states
        for sname in states:
            if not inputs[sname].flags.writeable:
                raise ArgumentError(f"state '{sname}' must be writeable (it is updated in place)")
        outputs = {oname: inputs[oname] if oname in states else
                   self.new_output(oname, [d.evaluate(bindings) for d in spec.shape],
                                   _np(spec.dtype))
                   for oname, spec in self.signature.outputs}
        return dict(bindings), outputs

    def _io_for(self, inputs: Mapping[str, np.ndarray],
                outputs: Mapping[str, np.ndarray]) -> ctypes.Array[ctypes.c_void_p]:
        """The io pointer array of a call: the weights' (set once) and these
        inputs' and outputs' data."""
        io_array = type(self._io_array).from_buffer_copy(self._io_array)
        for slot, kind, bname in self._per_call:
            source = inputs if kind in ("input", "state") else outputs
            io_array[slot] = source[bname].ctypes.data
        return io_array

    def _run_locked(self, inputs: Mapping[str, np.ndarray], outputs: dict[str, np.ndarray],
                    bindings: Mapping[str, int], ns: np.ndarray | None
                    ) -> dict[str, np.ndarray]:
        plan = self.plan(bindings)
        if self._arena.size < plan.size + 64:
            self._arena = np.zeros(0, np.uint8)  # free the old arena before the new one
            self._arena = allocate(f"the arena of @{self.signature.name}'s temporaries",
                                   plan.size + 64, np.uint8, zero=True)
        base = self._arena.ctypes.data
        arena_ptr = base + (-base % 64)
        io_array = self._io_for(inputs, outputs)
        syms = (ctypes.c_int64 * max(1, len(self._symbols)))(
            *[bindings[s] for s in self._symbols])
        offsets = (ctypes.c_int64 * max(1, len(plan.offsets)))(*plan.offsets)
        args = (ctypes.addressof(syms), ctypes.addressof(io_array), arena_ptr,
                ctypes.addressof(offsets))
        rc = self._entry(*args) if ns is None else self._profile_entry(*args, ns.ctypes.data)
        self.calls += 1
        if rc != 0:
            raise self._error(rc)
        return outputs

    def _check_requirements(self, bindings: Mapping[str, int]) -> None:
        for expr, message in self._requirements:
            if expr.evaluate(bindings) < 0:
                raise ArgumentError(self._requirement_message(message, bindings))

    def _requirement_message(self, message: str, bindings: Mapping[str, int]) -> str:
        bound = ", ".join(f"{k}={v}" for k, v in sorted(bindings.items()))
        return f"@{self.signature.name}: {message} (with {bound})"

    def _error(self, rc: int) -> Exception:
        if rc < 0:  # a requirement the C entry checked (the runtime checks first)
            return ArgumentError(f"@{self.signature.name}: "
                                 f"{self._requirements[-rc - 1][1]}")
        step, code = divmod(rc, 256)
        launches = self.spec.launches
        kernel = launches[step] if 0 <= step < len(launches) else "?"
        message = self._checks.get((kernel, code), f"error code {code}")
        return KernelError(f"kernel @{kernel} (launch {step}): {message}")


def _np(dtype: str) -> np.dtype:
    from nanocompile.ir.dtypes import numpy_dtype

    return numpy_dtype(dtype)


def _check_messages(module: ModuleOp) -> dict[tuple[str, int], str]:
    out = {}
    for kernel in module.ops:
        if isinstance(kernel, loop.KernelOp):
            for op in kernel.walk():
                if isinstance(op, loop.CheckOp):
                    out[(kernel.sym_name.data, op.code.data)] = op.message.data
    return out


class PreparedCall:
    """One call of a program prepared once (``CompiledProgram.prepare``): the
    inputs checked and their symbols bound, the arena planned and allocated,
    the outputs allocated and the io pointer array filled at construction, so
    ``run`` only calls the C entry. It reads the inputs' current contents (the
    arrays given, kept alive here: refill them in place to call again on new
    values) and returns the same output arrays every time (a state's output is
    its input array, updated in place)."""

    def __init__(self, program: CompiledProgram, inputs: Mapping[str, Any]) -> None:
        self.program = program
        bindings, outputs = program._checked(inputs)
        self.bindings = MappingProxyType(bindings)
        self.inputs = dict(inputs)
        self.outputs = MappingProxyType(outputs)
        plan = program.plan(bindings)
        self._arena = allocate(f"the arena of @{program.signature.name}'s temporaries",
                               plan.size + 64, np.uint8, zero=True)
        base = self._arena.ctypes.data
        self._io = program._io_for(self.inputs, outputs)
        self._syms = (ctypes.c_int64 * max(1, len(program._symbols)))(
            *[bindings[s] for s in program._symbols])
        self._offsets = (ctypes.c_int64 * max(1, len(plan.offsets)))(*plan.offsets)
        self._args = (ctypes.addressof(self._syms), ctypes.addressof(self._io),
                      base + (-base % 64), ctypes.addressof(self._offsets))

    def run(self) -> Mapping[str, np.ndarray]:
        """Call the C entry once; the outputs (the same arrays on every call)."""
        program = self.program
        with program._lock:
            rc = program._entry(*self._args)
            program.calls += 1
        if rc != 0:
            raise program._error(rc)
        return self.outputs


class CompiledBackend:
    """A compiled program as an engine backend: ``run`` checks every call;
    ``runner`` makes the ``StepRunner`` of a program with states (the engine
    keeps one per KV cache)."""

    def __init__(self, program: CompiledProgram) -> None:
        self.program = program

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        return self.program.run(inputs)

    def runner(self, states: Mapping[str, np.ndarray], max_seq: int) -> StepRunner:
        return StepRunner(self.program, states, max_seq)


class StepRunner:
    """Consecutive calls of a program with states (``Signature.states``: the KV
    cache), checked once and run with one C call each (issue 19's static plan).

    The program's inputs besides its states must be one vector of ``seq``
    elements (the token ids), its scalars ``past`` and nothing else; its other
    outputs have ``seq`` or constant dims. At construction, for at most
    ``max_seq`` elements per step and the states' shapes (which bind
    ``capacity``): the states are checked (dtype, shape, C-contiguous,
    writeable), every temporary is placed once in an arena of its own (planned
    at the largest symbols: the temporaries' sizes only grow with them), the
    input and output buffers are allocated at their largest and the io
    pointer array is filled. ``step`` then copies the ids in, sets ``seq`` and
    ``past`` and calls the C entry, which checks the program's requirements
    (``past + seq <= capacity``) itself: nothing else runs in Python. It
    returns views of the outputs (valid until the next step)."""

    def __init__(self, program: CompiledProgram, states: Mapping[str, np.ndarray],
                 max_seq: int) -> None:
        sig = program.signature
        self.program = program
        in_spec = self._check_signature(sig, states)
        if isinstance(max_seq, bool) or not isinstance(max_seq, int) or max_seq < 1:
            raise ArgumentError(f"max_seq must be a positive integer, got {max_seq!r}")
        bindings = self._largest_bindings(sig, states, max_seq)
        self.max_seq = max_seq
        self.capacity = bindings.get("capacity")
        self.states = dict(states)
        plan = program.plan(bindings)
        self.bindings = dict(bindings)  # the symbols the static plan was made at
        self.plan = plan
        self.arena_bytes = plan.size
        self._arena = allocate(f"the arena of @{sig.name}'s temporaries", plan.size + 64,
                               np.uint8, zero=True)
        base = self._arena.ctypes.data
        self._offsets = (ctypes.c_int64 * max(1, len(plan.offsets)))(*plan.offsets)
        self._ids = allocate(f"input '{self.input_name}'", max_seq, _np(in_spec.dtype))
        self._ids_c = np.ctypeslib.as_ctypes(self._ids)  # the same memory, stored by ctypes
        self._allocate_outputs(sig, bindings)
        io = type(program._io_array).from_buffer_copy(program._io_array)
        for slot, kind, bname in program._per_call:
            source = self.states if kind == "state" else self.outputs
            io[slot] = (self._ids if kind == "input" else source[bname]).ctypes.data
        self._io = io
        symbols = program.spec.symbols
        self._syms = (ctypes.c_int64 * max(1, len(symbols)))(
            *[bindings[s] for s in symbols])
        self._seq_slot = symbols.index(self.seq_symbol)
        self._past_slot = symbols.index("past")
        # a one-token step's outputs (decode): made once, so such a step builds no views
        self._one = MappingProxyType({name: out[:1] if self._seq_major[name] else out
                                      for name, out in self.outputs.items()})
        # the entries again, as objects of the runner's own with no argument types: a
        # step passes them its prepared pointers as they are (no conversion per call)
        name = sig.name
        self._run = _untyped(program._lib, f"nc_run_{name}")
        self._run_profiled = _untyped(program._lib, f"nc_profile_{name}")
        self._pointers = tuple(ctypes.c_void_p(a) for a in (
            ctypes.addressof(self._syms), ctypes.addressof(self._io), base + (-base % 64),
            ctypes.addressof(self._offsets)))
        self._profile: np.ndarray | None = None
        self._profiled_pointers = self._pointers

    @property
    def profile(self) -> np.ndarray | None:
        """Set to ``program.profile_slots()``: each step runs the profiling entry,
        which writes each launch's nanoseconds there, then the entry's (``bench
        profile``); None (the default): the plain entry."""
        return self._profile

    @profile.setter
    def profile(self, ns: np.ndarray | None) -> None:
        want = (self.program.launches + 1,)
        if ns is not None and (ns.dtype != np.int64 or ns.shape != want
                               or not ns.flags.c_contiguous or not ns.flags.writeable):
            raise ArgumentError(f"profile: expected a writeable int64{list(want)} "
                                "(program.profile_slots())")
        self._profile = ns
        self._profiled_pointers = self._pointers if ns is None else \
            (*self._pointers, ctypes.c_void_p(ns.ctypes.data))

    def _check_signature(self, sig: Signature, states: Mapping[str, np.ndarray]) -> TensorSpec:
        """The token vector's spec, after checking the program has the runner's form."""
        names = set(sig.states)
        if set(states) != names:
            raise ArgumentError(f"@{sig.name}: the states are {sorted(names)}, "
                                f"got {sorted(states)}")
        others = [(n, s) for n, s in sig.inputs if n not in names]
        if len(others) != 1 or others[0][1].rank != 1 or \
                others[0][1].shape[0].single_symbol is None:
            raise ArgumentError(f"@{sig.name}: a step runner needs one vector input besides "
                                f"the states, got {[n for n, _ in others]}")
        if set(sig.scalars) != {"past"}:
            raise ArgumentError(f"@{sig.name}: a step runner needs the one scalar 'past', "
                                f"got {list(sig.scalars)}")
        (self.input_name, in_spec), = others
        seq = in_spec.shape[0].single_symbol
        assert seq is not None
        self.seq_symbol = seq
        return in_spec

    def _largest_bindings(self, sig: Signature, states: Mapping[str, np.ndarray],
                          max_seq: int) -> dict[str, int]:
        """The symbols the static plan is made at: the states' shapes, ``seq =
        max_seq`` and ``past = capacity - 1`` (every temporary's size only grows
        with the symbols, so the plan serves every step)."""
        bindings: dict[str, int] = {}
        for sname, spec in sig.inputs:
            if sname in states:
                _bind_state(sname, spec, states[sname], bindings)
        bindings[self.seq_symbol] = max_seq
        bindings["past"] = max(0, max(bindings.get("capacity", 0), max_seq) - 1)
        unbound = set(self.program.spec.symbols) - set(bindings)
        if unbound:
            raise ArgumentError(f"@{sig.name}: symbols {sorted(unbound)} are bound by no state")
        if not self.program._monotone:
            raise ArgumentError(f"@{sig.name}: a temporary's size is not monotone in the "
                                "symbols: no static plan")
        return bindings

    def _allocate_outputs(self, sig: Signature, bindings: Mapping[str, int]) -> None:
        seq = Expr.sym(self.seq_symbol)
        self.outputs: dict[str, np.ndarray] = {}
        self._seq_major: dict[str, bool] = {}
        for oname, spec in sig.outputs:
            if oname in self.states:
                continue
            if any(d.symbols and d != seq for d in spec.shape) or seq in spec.shape[1:]:
                raise ArgumentError(f"@{sig.name}: output '{oname}' {list(spec.shape)} is "
                                    "not [seq or a constant, constants...]")
            self._seq_major[oname] = bool(spec.shape) and spec.shape[0] == seq
            shape = [d.evaluate(bindings) for d in spec.shape]
            self.outputs[oname] = self.program.new_output(oname, shape, _np(spec.dtype))

    def step(self, ids: np.ndarray | Sequence[int], past: int) -> Mapping[str, np.ndarray]:
        """Run ``ids`` (at most ``max_seq`` of them) after ``past`` cached
        positions; the states are updated in place. Returns read-only views of
        the outputs (valid until the next step; a one-token step returns the
        same mapping every time).

        A decode step runs this after a step that streamed the weights through
        every cache, where each line of Python costs ~10x its warm time
        (``bench profile``'s time outside the kernels): a one-token step
        therefore does no more than store the id and the two symbols, call the
        entry and check its code."""
        n = len(ids)
        if n == 1:
            self._ids_c[0] = ids[0]
            outputs = self._one
        else:
            if not 0 < n <= self.max_seq:
                raise ArgumentError(f"a step takes 1 to {self.max_seq} tokens, got {n}")
            self._ids[:n] = ids
            outputs = MappingProxyType({name: out[:n] if self._seq_major[name] else out
                                        for name, out in self.outputs.items()})
        syms = self._syms
        syms[self._seq_slot] = n
        syms[self._past_slot] = past
        program = self.program
        with program._lock:
            rc = self._run(*self._pointers) if self._profile is None else \
                self._run_profiled(*self._profiled_pointers)
        program.calls += 1
        if rc != 0:
            raise program._error(rc)
        return outputs


def _untyped(lib: ctypes.CDLL, name: str) -> Any:
    """A new function object for ``name`` returning int32, with no argument types:
    called with ``ctypes.c_void_p`` objects only."""
    fn = lib[name]
    fn.restype = ctypes.c_int32
    return fn


def _bind_state(name: str, spec: TensorSpec, value: np.ndarray,
                bindings: dict[str, int]) -> None:
    if not isinstance(value, np.ndarray):
        raise ArgumentError(f"state '{name}': expected a numpy array, got {type(value).__name__}")
    if value.ndim != spec.rank:
        raise ArgumentError(f"state '{name}': expected rank {spec.rank}, got {value.shape}")
    for dim, size in zip(spec.shape, value.shape, strict=True):
        if (sym := dim.single_symbol) is not None and sym not in bindings:
            bindings[sym] = int(size)
    check_value(f"state '{name}'", spec, value, bindings)
    if not value.flags.c_contiguous or not value.flags.writeable:
        raise ArgumentError(f"state '{name}' must be C-contiguous and writeable")
