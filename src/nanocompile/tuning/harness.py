"""The cost-measuring half of an autotuner: candidates of one kernel in one
library, checked against a reference and timed by a loop in C.

``CandidateLibrary(reference, candidates, workloads)`` clones every kernel
(the reference as ``ref``, the candidates as ``cand0``, ``cand1``, ...) into
one module, prints it with the C target and appends the harness's own C: per
kernel an exported ``int32_t nc_tune_call_ref`` / ``nc_tune_call_<i>(void
*const *args, const int64_t *syms)`` that unpacks the arguments (in the
kernels' order) and the symbols (in ``reference.symbols``' order) and calls
the kernel, and ``nc_tune_time``, which times all candidates round after
round (``_timing_c``: each round starts at the next candidate, each call runs
on the next copy of the arguments). gcc builds it once through the compile
cache; the library's thread pool, when it has one, gets ``threads`` threads.

Every candidate must have the reference's signature: the same argument
dtypes, access modes and footprints and the same symbols, in order (a packed
weight changes a footprint, so a ``pack`` schedule is refused: the harness
feeds every kernel the reference's layout).

Buffers, per workload and argument: ``1 + sum((d - 1) * s)`` elements over
the argument's footprint (0 when a dim is 0) at the workload's symbols. Read
arguments hold seeded random values (``read_values``), write arguments are
filled with 0xFF bytes before every checked call, so an element a kernel
fails to write shows.

``check()`` runs the reference, then each candidate, once per workload on
guarded buffers (``GUARD_BYTES`` of 0xA5 before and after each buffer, the
buffer 64-byte aligned) and compares bytes: the guards, the read arguments
(unchanged) and the written ones (bitwise the reference's). ``time()``
streams the weights (the read arguments whose footprint names no symbol)
from memory: the arguments exist in ``copies`` copies that share nothing,
enough copies to exceed ``stream_bytes`` (default: twice the last-level
cache), so a call never finds the previous call's weights in cache, as in a
decode step. The copies lie in one anonymous mapping advised into 2 MiB pages
(``backend.hugepages.huge_array``), as the model maps its weight files (``checkpoint.pagecache``):
how many weight rows a tile should stream at once depends on it (measured on
an AMD EPYC Zen 4, session 29: int8 rows read by tiles of 4 / 8 strided rows,
29 / 22 GB/s in 2 MiB pages, 22 / 21 in 4 KiB ones; numpy's own
allocations, where transparent huge pages are "madvise", get 2 MiB pages only
from 4 MiB up and only where they cover an aligned 2 MiB range). Durations
are wall-clock nanoseconds (``CLOCK_MONOTONIC``) of single calls; the caller
takes medians or minima over rounds.
"""

from __future__ import annotations

import ctypes
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import SSAValue

from nanocompile.backend.gcc import compile_library
from nanocompile.backend.hugepages import huge_array
from nanocompile.dialects import loop
from nanocompile.ir.symbolic import Expr
from nanocompile.targets.c import C_TYPES, CEmitter, kernel_c_name

GUARD_BYTES = 4096  # guard band before and after every checked buffer
GUARD_BYTE = 0xA5
UNWRITTEN_BYTE = 0xFF  # a write argument's bytes before a checked call
ALIGNMENT = 64
MAX_COPIES = 256
FALLBACK_STREAM_BYTES = 64 << 20  # stream_bytes when no cache size can be read
CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")
REFERENCE = "ref"
ITEM_BYTES = {"f32": 4, "bf16": 2, "i8": 1, "i32": 4, "i64": 8, "bool": 1}
NUMPY_DTYPES = {"f32": np.float32, "bf16": np.uint16, "i8": np.int8, "i32": np.int32,
                "i64": np.int64, "bool": np.bool_}
READ_DTYPES = ("f32", "bf16", "i8", "i32", "i64")  # the dtypes read_values fills
SMALL_INTS = 8  # i32 / i64 read arguments: uniform in [0, SMALL_INTS)


@dataclass(frozen=True)
class Workload:
    """A named binding of the kernel's size symbols, e.g. ``Workload("decode",
    {"seq": 1})`` (symbols the kernel does not have are ignored), and the
    tokens one run of it serves (a cost counts its time per token)."""

    name: str
    syms: Mapping[str, int]
    tokens: int = 1


class TuningError(ValueError):
    """The harness cannot check or time these kernels (one-line reason)."""


ArgSignature = tuple[str, str, tuple[Expr, ...], tuple[Expr, ...]]  # dtype, mode, footprint
Signature = tuple[tuple[ArgSignature, ...], tuple[str, ...]]  # the arguments, the symbols


def signature(kernel: loop.KernelOp) -> Signature:
    """What a candidate must share with the reference: per argument its dtype,
    mode and footprint (shape and strides), then the symbols."""
    args = tuple((_dtype(arg), mode, fp.dims, fp.stride_exprs) for arg, mode, fp
                 in zip(kernel.args, kernel.modes, kernel.footprints.data, strict=True))
    return (args, kernel.symbols)


def signature_mismatch(reference: loop.KernelOp, candidate: loop.KernelOp) -> str | None:
    """Why ``candidate`` cannot stand in for ``reference`` (None: it can)."""
    (ref_args, ref_syms), (args, syms) = signature(reference), signature(candidate)
    if syms != ref_syms:
        return f"symbols {list(syms)}, the reference has {list(ref_syms)}"
    if len(args) != len(ref_args):
        return f"{len(args)} arguments, the reference has {len(ref_args)}"
    for i, (mine, ref) in enumerate(zip(args, ref_args, strict=True)):
        for part, a, b in zip(("dtype", "mode", "footprint shape", "footprint strides"),
                              mine, ref, strict=True):
            if a != b:
                hint = (" (a packed weight? the harness runs every kernel on the "
                        "reference's layout)" if part.startswith("footprint") else "")
                return f"arg {i}'s {part} {_text(a)}, the reference's {_text(b)}{hint}"
    return None


def _text(value: object) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return f"'{value}'"


def footprint_elements(fp: loop.FootprintAttr, syms: Mapping[str, int]) -> int:
    """Elements an argument spans at ``syms``: ``1 + sum((d - 1) * s)`` over its
    dims, 0 when a dim is 0."""
    dims = [d.evaluate(syms) for d in fp.dims]
    strides = [s.evaluate(syms) for s in fp.stride_exprs]
    if any(d < 0 for d in dims) or any(s < 0 for s in strides):
        raise TuningError(f"footprint {fp.dims} strides {fp.stride_exprs} is negative at "
                          f"{dict(syms)}")
    if any(d == 0 for d in dims):
        return 0
    return 1 + sum((d - 1) * s for d, s in zip(dims, strides, strict=True))


def read_values(dtype: str, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` random elements for a read argument: f32 normal(0, 1); bf16 the
    high 16 bits of f32 normals; i8 uniform in [-127, 127]; i32 / i64 uniform in
    [0, SMALL_INTS)."""
    if dtype == "f32":
        return rng.standard_normal(count, dtype=np.float32)
    if dtype == "bf16":
        normals = rng.standard_normal(count, dtype=np.float32)
        return (normals.view(np.uint32) >> 16).astype(np.uint16)
    if dtype == "i8":
        return rng.integers(-127, 128, count, dtype=np.int8)
    if dtype in ("i32", "i64"):
        return rng.integers(0, SMALL_INTS, count, dtype=NUMPY_DTYPES[dtype])
    raise TuningError(f"no random values for a read argument of dtype {dtype}")


def last_level_cache_bytes(root: Path = CACHE_DIR) -> int | None:
    """The size of cpu0's highest cache level (``index*/level`` and ``size``,
    e.g. ``32768K``), None when it cannot be read."""
    best: tuple[int, int] | None = None
    for index in sorted(root.glob("index*")):
        try:
            level = int((index / "level").read_text())
            text = (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        match = re.fullmatch(r"(\d+)([KMG]?)", text)
        if match is None:
            continue
        size = int(match[1]) << {"": 0, "K": 10, "M": 20, "G": 30}[match[2]]
        if best is None or (level, size) > best:
            best = (level, size)
    return None if best is None else best[1]


def default_stream_bytes() -> int:
    """Twice the last-level cache, ``FALLBACK_STREAM_BYTES`` without one."""
    llc = last_level_cache_bytes()
    return FALLBACK_STREAM_BYTES if llc is None else 2 * llc


class _Guarded:
    """One buffer inside a uint8 array: ``GUARD_BYTES`` (at least) of guard
    before it, the buffer ``ALIGNMENT``-aligned, ``GUARD_BYTES`` after."""

    def __init__(self, nbytes: int) -> None:
        self.storage = np.empty(nbytes + 2 * GUARD_BYTES + ALIGNMENT, np.uint8)
        address = self.storage.ctypes.data + GUARD_BYTES
        self.start = GUARD_BYTES + (-address) % ALIGNMENT
        self.end = self.start + nbytes
        self.address = self.storage.ctypes.data + self.start

    @property
    def data(self) -> np.ndarray:
        return self.storage[self.start:self.end]

    def fill(self, content: np.ndarray | None) -> None:
        """Guards to 0xA5, the buffer to ``content``'s bytes (None: 0xFF)."""
        self.storage[:self.start] = GUARD_BYTE
        self.storage[self.end:] = GUARD_BYTE
        if content is None:
            self.data[:] = UNWRITTEN_BYTE
        else:
            self.data[:] = content.view(np.uint8)

    def broken_guard(self) -> str | None:
        if not np.all(self.storage[:self.start] == GUARD_BYTE):
            return "before"
        if not np.all(self.storage[self.end:] == GUARD_BYTE):
            return "after"
        return None


def _refuse(reference: loop.KernelOp, candidates: Sequence[loop.KernelOp],
            workloads: Sequence[Workload], threads: int) -> None:
    """Raise ``TuningError`` for what the harness cannot check or time."""
    if not candidates:
        raise TuningError("no candidates to check or time")
    if not workloads:
        raise TuningError("no workloads to check or time on")
    if threads < 1:
        raise TuningError(f"threads must be at least 1, got {threads}")
    for i, cand in enumerate(candidates):
        reason = signature_mismatch(reference, cand)
        if reason is not None:
            raise TuningError(f"candidate {i} (@{cand.sym_name.data}) does not have the "
                              f"reference's signature: {reason}")
    for i, (arg, mode) in enumerate(zip(reference.args, reference.modes, strict=True)):
        dtype = _dtype(arg)
        if dtype not in ITEM_BYTES:
            raise TuningError(f"arg {i} has dtype {dtype}, which the harness cannot hold")
        if mode == "r" and dtype not in READ_DTYPES:
            raise TuningError(f"read arg {i} has dtype {dtype}, for which the harness has "
                              "no random values")
    for w in workloads:
        missing = [s for s in reference.symbols if s not in w.syms]
        if missing:
            raise TuningError(f"workload {w.name} has no value for the symbol(s) "
                              f"{', '.join(missing)}")


def _dtype(arg: SSAValue) -> str:
    assert isinstance(arg.type, loop.PtrType)  # the kernel's verifier checks
    return arg.type.dtype.data


class CandidateLibrary:
    """``candidates`` of one kernel (and its ``reference``) compiled into one
    library, checked and timed on ``workloads`` (see the module docstring).

    ``threads``: the library's pool size (when a kernel runs loops on the
    pool); ``stream_bytes``: what the timed copies of the weights add up to at
    least (default ``default_stream_bytes()``); ``seed``: the read arguments'
    values. The numpy buffers live as long as the object (the library holds
    pointers into them). Two objects built from the same kernels print the
    same C, so they load the same library (the cache's ``.so``, one ``dlopen``
    handle) and share its pool: the last one's ``threads`` holds for both."""

    def __init__(self, reference: loop.KernelOp, candidates: Sequence[loop.KernelOp],
                 workloads: Sequence[Workload], *, threads: int = 1,
                 stream_bytes: int | None = None, seed: int = 0) -> None:
        _refuse(reference, candidates, workloads, threads)
        self.reference_name = reference.sym_name.data
        self.symbols = reference.symbols
        self.modes = reference.modes
        self.dtypes = tuple(_dtype(a) for a in reference.args)
        self.footprints = tuple(reference.footprints.data)
        self.workloads = tuple(workloads)
        self.n = len(candidates)
        self.threads = threads
        self.seed = seed
        self.weight_bytes = sum(
            footprint_elements(fp, {}) * ITEM_BYTES[dtype]
            for fp, dtype, mode in zip(self.footprints, self.dtypes, self.modes, strict=True)
            if mode == "r" and not any(e.symbols for e in (*fp.dims, *fp.stride_exprs)))
        self.stream_bytes = default_stream_bytes() if stream_bytes is None else stream_bytes
        self.copies = 1 if self.weight_bytes == 0 else \
            min(MAX_COPIES, max(1, math.ceil(self.stream_bytes / self.weight_bytes)))

        module = ModuleOp([])
        for name, kernel in ((REFERENCE, reference),
                             *((f"cand{i}", c) for i, c in enumerate(candidates))):
            clone = kernel.clone()
            clone.sym_name = StringAttr(name)
            module.body.block.add_op(clone)
        self.source = CEmitter().emit_module(module) + harness_c(reference, self.n)
        self._load()
        self._timing: dict[int, tuple[list[list[np.ndarray]], ctypes.Array[ctypes.c_void_p]]] = {}

    def _load(self) -> None:
        """Build (or find in the cache) and open the library, size its pool."""
        label = re.sub(r"[^A-Za-z0-9_.-]", "_", f"tune_{self.reference_name}")
        self.compiled = compile_library(self.source, name=label)
        self._lib = self.compiled.load()
        self._calls = [self._function(f"nc_tune_call_{REFERENCE}")]
        self._calls += [self._function(f"nc_tune_call_{i}") for i in range(self.n)]
        self._time = self._lib.nc_tune_time
        self._time.restype = ctypes.c_int32
        self._time.argtypes = [ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p),
                               ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int64)]
        if hasattr(self._lib, "nc_pool_set_threads"):
            set_threads = self._lib.nc_pool_set_threads
            set_threads.restype = ctypes.c_int32
            set_threads.argtypes = [ctypes.c_int32]
            if set_threads(self.threads) < 0:
                raise TuningError(f"the library's pool refused {self.threads} threads")

    def _function(self, name: str) -> Callable[..., int]:
        fn = getattr(self._lib, name)
        fn.restype = ctypes.c_int32
        fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64)]
        return fn

    # -- buffers ------------------------------------------------------------------
    def elements(self, workload: int) -> list[int]:
        """Each argument's element count at workload ``workload``."""
        syms = self.workloads[workload].syms
        return [footprint_elements(fp, syms) for fp in self.footprints]

    def read_data(self, workload: int) -> list[np.ndarray | None]:
        """The read arguments' values at workload ``workload`` (None for a write
        argument), the same for every copy and every call."""
        out: list[np.ndarray | None] = []
        for i, (count, dtype, mode) in enumerate(zip(self.elements(workload), self.dtypes,
                                                     self.modes, strict=True)):
            rng = np.random.default_rng([self.seed, workload, i])
            out.append(read_values(dtype, count, rng) if mode == "r" else None)
        return out

    def _syms(self, workload: int) -> ctypes.Array[ctypes.c_int64]:
        syms = self.workloads[workload].syms
        return (ctypes.c_int64 * max(1, len(self.symbols)))(*[int(syms[s])
                                                              for s in self.symbols])

    # -- checking -----------------------------------------------------------------
    def check(self) -> list[str | None]:
        """Per candidate None (bitwise the reference's outputs on every workload,
        no guard byte touched, no read argument changed) or the first reason it
        failed, naming the workload and the argument. Raises ``TuningError`` when
        the reference itself fails."""
        reasons: list[str | None] = [None] * self.n
        for w in range(len(self.workloads)):
            name = self.workloads[w].name
            data = self.read_data(w)
            sizes = [count * ITEM_BYTES[d] for count, d in zip(self.elements(w), self.dtypes,
                                                              strict=True)]
            buffers = [_Guarded(size) for size in sizes]
            pointers = (ctypes.c_void_p * max(1, len(buffers)))(*[b.address for b in buffers])
            syms = self._syms(w)
            expected: list[bytes | None] = []
            for k, call in enumerate(self._calls):
                for b, content in zip(buffers, data, strict=True):
                    b.fill(content)
                rc = call(pointers, syms)
                reason = f"the kernel returned {rc}" if rc != 0 else \
                    self._compare(buffers, data, expected if k else None)
                if k == 0:
                    if reason is not None:
                        raise TuningError(f"the reference @{self.reference_name} fails on "
                                          f"{name}: {reason}")
                    expected = [b.data.tobytes() if d is None else None
                                for b, d in zip(buffers, data, strict=True)]
                elif reasons[k - 1] is None and reason is not None:
                    reasons[k - 1] = f"{name}: {reason}"
        return reasons

    def _compare(self, buffers: list[_Guarded], data: list[np.ndarray | None],
                 expected: list[bytes | None] | None) -> str | None:
        for i, b in enumerate(buffers):
            side = b.broken_guard()
            if side is not None:
                return f"arg {i}'s guard {side} it was written"
        for i, (b, content) in enumerate(zip(buffers, data, strict=True)):
            if content is not None and not np.array_equal(b.data, content.view(np.uint8)):
                return f"read arg {i} was changed at element {self._first(b.data, content, i)}"
        if expected is None:
            return None
        for i, (b, want) in enumerate(zip(buffers, expected, strict=True)):
            if want is not None and b.data.tobytes() != want:
                element = self._first(b.data, np.frombuffer(want, np.uint8), i)
                return f"arg {i} differs from the reference at element {element}"
        return None

    def _first(self, got: np.ndarray, want: np.ndarray, arg: int) -> int:
        differ = np.flatnonzero(got != want.view(np.uint8))
        return int(differ[0]) // ITEM_BYTES[self.dtypes[arg]]

    # -- timing -------------------------------------------------------------------
    def timing_buffers(self, workload: int) -> list[list[np.ndarray]]:
        """The arguments ``time`` runs on: ``copies`` lists of one array per
        argument (typed views; the write arguments start as 0xFF bytes)."""
        return self._timing_arguments(workload)[0]

    def _timing_arguments(self, workload: int
                          ) -> tuple[list[list[np.ndarray]], ctypes.Array[ctypes.c_void_p]]:
        if workload not in self._timing:
            data = self.read_data(workload)
            sizes = [max(1, count) * ITEM_BYTES[dtype]
                     for count, dtype in zip(self.elements(workload), self.dtypes, strict=True)]
            arena = huge_array(self.copies * sum(_slot(n) for n in sizes))
            offset = 0
            copies: list[list[np.ndarray]] = []
            for _ in range(self.copies):
                arrays = []
                for count, dtype, content, size in zip(self.elements(workload), self.dtypes,
                                                       data, sizes, strict=True):
                    raw = arena[offset:offset + size]
                    offset += _slot(size)
                    typed: np.ndarray = raw.view(NUMPY_DTYPES[dtype])[:count]
                    if content is None:
                        raw[:] = UNWRITTEN_BYTE
                    else:
                        typed[:] = content
                    arrays.append(typed)
                copies.append(arrays)
            flat = [a.ctypes.data for arrays in copies for a in arrays]
            pointers = (ctypes.c_void_p * max(1, len(flat)))(*flat)
            self._timing[workload] = (copies, pointers)
        return self._timing[workload]

    def time(self, workload: int, rounds: int) -> np.ndarray:
        """Nanoseconds of every candidate's calls on workload ``workload``:
        int64, shape ``(rounds, len(candidates))``; round ``r`` calls the
        candidates in the order ``r % n, r % n + 1, ...`` (wrapping), each call on
        the next copy of the arguments. Raises ``TuningError`` when a kernel
        returns an error code."""
        if rounds < 1:
            raise TuningError(f"rounds must be at least 1, got {rounds}")
        if not 0 <= workload < len(self.workloads):
            raise TuningError(f"no workload {workload} (there are {len(self.workloads)})")
        _, pointers = self._timing_arguments(workload)
        ns = np.zeros((rounds, self.n), np.int64)
        rc = self._time(rounds, self.copies, pointers, self._syms(workload),
                        ns.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)))
        if rc != 0:
            failed = np.argwhere(ns < 0)
            who = f"candidate {int(failed[0][1])}" if len(failed) else "a candidate"
            raise TuningError(f"{self.workloads[workload].name}: {who} returned {rc} while "
                              "being timed")
        return ns


def _slot(nbytes: int) -> int:
    """``nbytes`` rounded up to ``ALIGNMENT``: each buffer of an arena starts aligned."""
    return -(-nbytes // ALIGNMENT) * ALIGNMENT


def _call_c(name: str, kernel: loop.KernelOp, index: str) -> str:
    args = []
    for i, (arg, mode) in enumerate(zip(kernel.args, kernel.modes, strict=True)):
        qual = "" if mode == "w" else "const "
        args.append(f"({qual}{C_TYPES[_dtype(arg)]} *)args[{i}]")
    args += [f"syms[{k}]" for k in range(len(kernel.symbols))]
    return (f"int32_t nc_tune_call_{index}(void *const *args, const int64_t *syms) {{\n"
            "  (void)args; (void)syms;\n"
            f"  return {kernel_c_name(name)}({', '.join(args)});\n"
            "}\n")


def harness_c(reference: loop.KernelOp, n: int) -> str:
    """The harness's C, appended to the kernels' (``ref``, ``cand0`` ...): the
    call wrappers and ``nc_tune_time`` (the same text for the same signature
    and candidate count)."""
    parts = ["\n/* ---- the tuning harness ---- */\n",
             _call_c(REFERENCE, reference, REFERENCE)]
    parts += [_call_c(f"cand{i}", reference, str(i)) for i in range(n)]
    parts.append(_timing_c(n, len(reference.args)))
    return "\n".join(parts)


def _timing_c(n: int, n_args: int) -> str:
    calls = ", ".join(f"nc_tune_call_{i}" for i in range(n))
    return f"""\
typedef int32_t (*nc_tune_fn)(void *const *, const int64_t *);
static nc_tune_fn const nc_tune_candidates[{n}] = {{{calls}}};

/* rounds x {n} calls; round r calls candidate (r + j) % {n} as its j-th, call t
   (counted over all rounds) on copy t % copies of the {n_args} arguments
   (args: copies x {n_args} pointers); ns[r * {n} + c]: candidate c's call of round r.
   A kernel's non-zero code is returned at once, its ns slot set to -1. */
int32_t nc_tune_time(int32_t rounds, int32_t copies, void *const *args,
                     const int64_t *syms, int64_t *ns) {{
  int64_t call = 0;
  for (int32_t r = 0; r < rounds; ++r) {{
    for (int32_t j = 0; j < {n}; ++j) {{
      const int32_t c = (int32_t)((r + j) % {n});
      void *const *a = args + (call % copies) * {n_args};
      ++call;
      struct timespec t0, t1;
      clock_gettime(CLOCK_MONOTONIC, &t0);
      const int32_t rc = nc_tune_candidates[c](a, syms);
      clock_gettime(CLOCK_MONOTONIC, &t1);
      if (rc != 0) {{
        ns[(int64_t)r * {n} + c] = -1;
        return rc;
      }}
      ns[(int64_t)r * {n} + c] = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000
                                 + (t1.tv_nsec - t0.tv_nsec);
    }}
  }}
  return 0;
}}
"""
