"""Work counted exactly from the Loop IR: kernel launches and bytes moved.

Bytes are a polynomial in the size symbols. Per launch, a written argument
counts its footprint's elements times the element size; a read argument
counts the *distinct* elements of its footprint (a stride-0, broadcast axis
counts once; a gather's table counts the rows it reads). Nothing is measured:
this is what the kernels must touch, by construction.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp

from nanocompile.dialects import loop
from nanocompile.ir.dtypes import ITEMSIZE
from nanocompile.ir.symbolic import Expr, product


@dataclass(frozen=True)
class WorkCount:
    """Kernel launches per run, distinct kernels, and bytes read and written."""

    launches: int
    distinct_kernels: int
    bytes_read: Expr
    bytes_written: Expr
    launches_by_kernel: tuple[tuple[str, int], ...]

    @property
    def bytes_moved(self) -> Expr:
        return self.bytes_read + self.bytes_written


def footprint_bytes(fp: loop.FootprintAttr, dtype: str) -> Expr:
    distinct = product([d for d, s in zip(fp.dims, fp.stride_exprs, strict=True) if s != 0])
    return distinct * ITEMSIZE[dtype]


def kernel_bytes(kernel: loop.KernelOp) -> tuple[Expr, Expr]:
    """(read, written) bytes of one launch of ``kernel``."""
    read, written = Expr.const(0), Expr.const(0)
    for arg, mode, fp in zip(kernel.args, kernel.modes, kernel.footprints.data, strict=True):
        assert isinstance(arg.type, loop.PtrType)
        b = footprint_bytes(fp, arg.type.dtype.data)
        if mode == "w":
            written = written + b
        else:
            read = read + b
    return read, written


def count_work(module: ModuleOp, program: str | None = None) -> WorkCount:
    """Count the launches and bytes of the (only, or named) ``loop.program``."""
    kernels = {op.sym_name.data: op for op in module.ops if isinstance(op, loop.KernelOp)}
    programs = [op for op in module.ops if isinstance(op, loop.ProgramOp)
                and (program is None or op.sym_name.data == program)]
    if len(programs) != 1:
        raise ValueError(f"expected one loop.program, found {len(programs)}")
    launches = programs[0].launches()
    per_kernel = {name: kernel_bytes(k) for name, k in kernels.items()}
    read, written = Expr.const(0), Expr.const(0)
    for launch in launches:
        r, w = per_kernel[launch.kernel_name]
        read, written = read + r, written + w
    by_kernel = Counter(launch.kernel_name for launch in launches)
    return WorkCount(len(launches), len(by_kernel), read, written,
                     tuple(sorted(by_kernel.items())))
