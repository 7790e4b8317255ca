"""The ctypes runtime: run a compiled ``loop.program`` on NumPy arrays.

``CompiledProgram`` emits the module as C, compiles it (cached), binds the
weights once, and on each ``run``:

1. checks the inputs with the same checker as the interpreter (names,
   dtypes, shapes, symbol bindings) plus C-contiguity, so no bad array ever
   reaches C;
2. allocates the outputs and places every temporary in one arena, planned by
   liveness (``backend.arena``) at the symbol values rounded up to a power of
   two, so one plan serves many steps (every temporary's size only grows
   with the symbols);
3. calls the program's entry once and maps a non-zero return (a failed
   ``loop.check``) to ``KernelError`` naming the kernel and the check.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from nanocompile.backend.arena import ArenaPlan, Buffer, plan_arena
from nanocompile.backend.gcc import CompiledLibrary, compile_library
from nanocompile.dialects import loop
from nanocompile.dialects.graph.signature import ArgumentError, Signature, check_value
from nanocompile.ir.dtypes import ITEMSIZE
from nanocompile.ir.shapes import TensorSpec
from nanocompile.ir.symbolic import Expr, product
from nanocompile.targets.c import CEmitter


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

    named = {k: [(b.buffer_name.data, spec(b)) for b in program.buffers()  # type: ignore[union-attr]
                 if b.kind.data == k] for k in ("input", "weight", "output")}
    out_order = program.output_op().names
    outputs = dict(named["output"])
    return Signature(program.sym_name.data, tuple(named["input"]), tuple(named["weight"]),
                     tuple((n, outputs[n]) for n in out_order))


def temp_buffers(program: loop.ProgramOp) -> list[TempBuffer]:
    """Every temporary with its byte size and the launches that touch it."""
    temps = [b for b in program.buffers() if b.kind.data == "temp"]
    index = {b.result: i for i, b in enumerate(temps)}
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


def _round_up_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


class CompiledProgram:
    """A ``loop.program`` compiled to a shared library, with its weights bound."""

    def __init__(self, module: ModuleOp, weights: Mapping[str, np.ndarray], *,
                 name: str | None = None, sanitize: bool | None = None) -> None:
        self.program = find_program(module, name)
        self.signature = program_signature(self.program)
        self.source = CEmitter().emit_module(module)
        self.library: CompiledLibrary = compile_library(self.source, sanitize=sanitize)
        self._lib = self.library.load()
        entry = getattr(self._lib, f"nc_run_{self.program.sym_name.data}")
        entry.restype = ctypes.c_int32
        entry.argtypes = [ctypes.c_void_p] * 4
        self._entry = entry
        profile = getattr(self._lib, f"nc_profile_{self.program.sym_name.data}")
        profile.restype = ctypes.c_int32
        profile.argtypes = [ctypes.c_void_p] * 5
        self._profile_entry = profile
        self._symbols = self.program.symbols
        self._temps = temp_buffers(self.program)
        self._monotone = all(t.size.provably_nonnegative() for t in self._temps)
        self._plans: dict[tuple[int, ...], ArenaPlan] = {}
        self._arena = np.zeros(0, np.uint8)
        self._checks = _check_messages(module)
        self._requirements = self.program.requirements()
        self._weights = self._bind_weights(weights)
        self._packed = self._pack_weights()
        self._io_order = [(b.kind.data, b.buffer_name.data if b.tile is None
                           else (b.buffer_name.data, b.tile.data))
                          for b in self.program.buffers() if b.buffer_name is not None]
        # The io pointer array's template: weight and packed slots are filled
        # here, once (the arrays stay referenced by self); each call copies it
        # and fills in its inputs and outputs.
        self._io_array = (ctypes.c_void_p * max(1, len(self._io_order)))()
        self._per_call: list[tuple[int, str, str]] = []
        bound = {"weight": self._weights, "packed": self._packed}
        for slot, (kind, bname) in enumerate(self._io_order):
            if kind in bound:
                self._io_array[slot] = bound[kind][bname].ctypes.data  # type: ignore[index]
            else:
                self._per_call.append((slot, kind, bname))  # type: ignore[arg-type]
        self.calls = 0

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
        for buf in self.program.buffers():
            if buf.kind.data != "packed":
                continue
            assert buf.buffer_name is not None
            assert buf.tile is not None
            name, tile = buf.buffer_name.data, buf.tile.data
            weight = self._weights[name]
            n, k = weight.shape
            packed[(name, tile)] = np.ascontiguousarray(
                weight.reshape(n // tile, tile, k).transpose(0, 2, 1))
        return packed

    def set_threads(self, n: int) -> int:
        """Threads of this library's pool (1..256; 0: the default). A program
        without parallel loops has no pool and always runs on one thread."""
        setter = getattr(self._lib, "nc_pool_set_threads", None)
        if setter is None:
            return 1
        setter.argtypes = [ctypes.c_int32]
        setter.restype = ctypes.c_int32
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
        return len(self.program.launches())

    def plan(self, bindings: Mapping[str, int]) -> ArenaPlan:
        """The arena plan used for these symbol values."""
        if self._monotone:
            key = tuple(_round_up_pow2(bindings[s]) for s in self._symbols)
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
        return np.empty(shape, dtype=dtype)

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self._call(inputs, None)

    def profile(self, inputs: Mapping[str, np.ndarray]
                ) -> tuple[dict[str, np.ndarray], list[tuple[str, int]]]:
        """Run once through the profiling entry: outputs, and (kernel, ns) per launch."""
        ns = np.zeros(max(1, self.launches), np.int64)
        outputs = self._call(inputs, ns)
        names = [launch.kernel_name for launch in self.program.launches()]
        return outputs, list(zip(names, (int(v) for v in ns), strict=False))

    def _call(self, inputs: Mapping[str, np.ndarray],
              ns: np.ndarray | None) -> dict[str, np.ndarray]:
        bindings = self.signature.bind(inputs)
        self._check_requirements(bindings)
        for iname, _ in self.signature.inputs:
            if not inputs[iname].flags.c_contiguous:
                raise ArgumentError(f"input '{iname}' must be C-contiguous")
        outputs = {oname: self.new_output(oname, [d.evaluate(bindings) for d in spec.shape],
                                          _np(spec.dtype))
                   for oname, spec in self.signature.outputs}
        plan = self.plan(bindings)
        if self._arena.size < plan.size + 64:
            self._arena = np.zeros(plan.size + 64, np.uint8)
        base = self._arena.ctypes.data
        arena_ptr = base + (-base % 64)
        io_array = type(self._io_array).from_buffer_copy(self._io_array)  # weights: set once
        for slot, kind, bname in self._per_call:
            source = inputs if kind == "input" else outputs
            io_array[slot] = source[bname].ctypes.data  # type: ignore[index]
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
        for req in self._requirements:
            if req.expr.data.evaluate(bindings) < 0:
                raise ArgumentError(self._requirement_message(req, bindings))

    def _requirement_message(self, req: loop.RequireOp, bindings: Mapping[str, int]) -> str:
        bound = ", ".join(f"{k}={v}" for k, v in sorted(bindings.items()))
        return f"@{self.signature.name}: {req.message.data} (with {bound})"

    def _error(self, rc: int) -> Exception:
        if rc < 0:  # a requirement the C entry checked (the runtime checks first)
            return ArgumentError(f"@{self.signature.name}: "
                                 f"{self._requirements[-rc - 1].message.data}")
        step, code = divmod(rc, 256)
        launches = self.program.launches()
        kernel = launches[step].kernel_name if 0 <= step < len(launches) else "?"
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


class CompiledBackend:
    """A compiled program as an engine backend."""

    def __init__(self, program: CompiledProgram) -> None:
        self.program = program

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.program.run(inputs)
