"""Regenerate docs/pipeline.md: one Qwen2 MLP block through every stage.

    python tools/pipeline_doc.py > docs/pipeline.md

The IR shown is printed by the compiler itself, so the document cannot drift
from the code: rerun this after changing a pass.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from nanocompile.analysis.work import count_work
from nanocompile.compiler import CompileOptions, Pipeline
from nanocompile.dialects import loop
from nanocompile.frontend import GraphBuilder
from nanocompile.frontend import composites as C


def mlp_block() -> ModuleOp:
    gb = GraphBuilder("mlp")
    x = gb.input("x", "f32", ["seq", 896])
    h = C.rms_norm(x, gb.weight("norm.weight", [896]), 1e-6)
    gate = C.linear(h, gb.weight("gate_proj.weight", [4864, 896]))
    up = C.linear(h, gb.weight("up_proj.weight", [4864, 896]))
    y = x + C.linear(C.silu(gate) * up, gb.weight("down_proj.weight", [896, 4864]))
    gb.output("y", y.named("y"))
    return gb.finish_module()


def kernel_text(module: object, name: str) -> str:
    for op in module.ops:  # type: ignore[attr-defined]
        if isinstance(op, loop.KernelOp) and op.sym_name.data == name:
            return str(op)
    raise KeyError(name)


def c_function(source: str, name: str) -> str:
    start = source.index(f"int32_t nck_{name}(")
    start = source.rindex("\n", 0, start) + 1
    end = source.index("\n}\n", start) + 3
    return source[start:end]


def main() -> None:
    graph = mlp_block()
    pipeline = Pipeline(graph, CompileOptions(schedule=False))  # the C before phase 4
    fused, fused_loop, c = pipeline.module("fused"), pipeline.module("loop"), pipeline.text("c")
    unfused_loop = Pipeline(graph, CompileOptions(fuse=False)).module("loop")
    wu, wf = count_work(unfused_loop), count_work(fused_loop)
    program = next(op for op in fused_loop.ops if isinstance(op, loop.ProgramOp))
    print(TEMPLATE.format(
        graph=str(graph), fused=str(fused), program=str(program),
        kernel=kernel_text(fused_loop, "fused_mul_1"), c=c_function(c, "fused_mul_1"),
        unfused_launches=wu.launches, fused_launches=wf.launches,
        unfused_bytes=wu.bytes_moved, fused_bytes=wf.bytes_moved,
    ))


TEMPLATE = """# The pipeline, on one MLP block

This walks the MLP half of a Qwen2 block through every stage of the compiler:
`h = rms_norm(x)`, `y = x + down(silu(gate(h)) * up(h))`, at the real widths
(896 and 4,864). Everything below is printed by the compiler
(`python tools/pipeline_doc.py > docs/pipeline.md` regenerates this page).

## 1. Graph IR (the frontend's output)

The frontend writes the composites from primitives in the float32 order of
spec §2.3. There is no implicit broadcasting: the scalar constants and the
norm weight are reshaped and broadcast explicitly; `x @ W.T` is a
`graph.permute` (a view) and a `graph.matmul`.

```mlir
{graph}
```

## 2. After `cse, fold-constants, dce, fuse`

`fold-constants` turned `reshape(const)` into one-element constants; `fuse`
grouped everything into three `graph.fused` regions, one per future kernel:
the rms_norm row kernel, gate and up sharing one k loop with the SwiGLU
epilogue, and down with the residual add. Each region's arguments are what
its kernel reads from memory; everything else stays in registers. The
interpreter runs the regions as their ops, so this graph means exactly what
the first one does (and the tests check it bitwise).

```mlir
{fused}
```

## 3. Loop IR: the program

`lower-graph-to-loop` turns each region into one kernel and the graph into a
`loop.program`: buffers (inputs, weights, outputs, temporaries placed in an
arena by liveness), strided views, and the launches. The transposed weights
are views with swapped strides (`layout <0, [1, 896]>`): no weight is copied.

```mlir
{program}
```

## 4. Loop IR: the gate/up/SwiGLU kernel

Loops are named (`d0`, `d1`, `k`) so schedules can refer to them (phase 4).
The two matmuls share the `k` loop with two loop-carried accumulators. `k` is
a lanes loop (`lanes 16`): each accumulator is 16 partial sums, iteration `k`
updates partial `k mod 16` with one `math.fma` (a single rounding), every
partial starts at the init, and the loop's result is their halving tree
(`p[j] + p[j + 8]`, then `+ 4`, `+ 2`, `+ 1`). The lowering fixes that order
for every matmul, the unfused kernels included, and every schedule keeps it,
so fusion and scheduling change no bit. The SwiGLU epilogue is applied as the
result is stored.

```mlir
{kernel}
```

## 5. C

One `const` local per SSA value (no precedence to get wrong), exact
hex-float literals, `restrict` pointers, the size symbols as `int64_t`
parameters. The lanes loop is an array of 16 partials per accumulator, a loop
over rounds of 16 and one over the lanes, `fmaf` for `math.fma`, then the
halving tree. Compiled with `-O3 -march=native -ffp-contract=off -fwrapv
-fno-math-errno`, no fast-math: the only fused multiply-adds are the IR's.

```c
{c}```

## 6. What fusion bought, counted from the IR

| | kernel launches | bytes moved per run |
|---|---:|---|
| unfused (one kernel per primitive) | {unfused_launches} | `{unfused_bytes}` |
| fused | {fused_launches} | `{fused_bytes}` |

The constant term is the weights, read once either way (plus a few scalar
constants in the unfused program). The `seq` term is the activations: the
unfused program writes and reads back every intermediate; the fused one
moves, per token, `x` in twice (norm and residual), `h` out and back in, the
SwiGLU activations out and back in, and `y` out:
5 x 3,584 + 2 x 19,456 = 56,832 bytes.
"""

if __name__ == "__main__":
    main()
