"""Default schedules of the attention kernels (issue 19, "attention at long
context"), on attention in the form it reads its keys and values from the
cache: ``q [heads, seq, d]`` after RoPE, keys and values ``[kv_heads, ctx,
d]`` (``ctx`` = past + seq, contiguous here; the cache's view differs only in
its symbolic strides), ``repeat_kv``, ``C.causal_mask(seq, past)`` and
``C.rope_tables`` (``past = ctx - seq``).

Claims:

* on AVX2 and AVX-512 every kernel is vectorized by the arch's vectors: the
  RoPE tables and the RoPE of ``q`` (a concatenation's select, uniform over
  a vector that lies in one half of the head dim; at the tiny head dim 16
  no vector of 16 does, so they stay scalar on AVX-512), the scores (``k``,
  the head dim), the softmax rows (``d2``, the positions) and the context
  (``d2``, the head dim);
* the scores get a register tile across the query heads of one KV head
  (GQA: 7 in the model, 2 in the tiny shapes), whose key loads are shared:
  one vector load of the KV head's key per step of ``k``, one query load
  per head;
* the context runs the query heads of one KV head one after the other
  (``d0i``), each with the whole head dim jammed into its sum over the
  positions (``d2`` vectorized, then privatized into ``k``): a position's
  row of values is read whole, once per query head;
* the scores and the context ask for the row of keys or values
  ``PREFETCH_AHEAD`` positions ahead before each load of a row
  (``sched.prefetch``, last in their schedules), and the bitwise claim below
  holds with those prefetches, which reach past the end of the keys and
  values at every context here (up to 600 positions);
* the scores and the context run their KV heads on the pool (``d0o``), the
  softmax rows their heads (``d0``, one parallel loop per launch), the RoPE
  tables their positions;
  the context's sum over the positions (a lanes loop of symbolic trip count
  inside the vectorized head dim) has its 16 partials as explicit vectors;
* scheduled == unscheduled == the exact interpreter, bit for bit, at 1, 2
  and 3 threads, at seq 1 (decode), odd and not multiples of 16, ctx from 1
  up, at the real head counts (14 / 2, head dim 64) and the tiny ones (4 /
  2, 16), on every arch this CPU runs (scalar: the pool only), with the
  context's length a symbol and the polynomial ``past + seq``;
* the uniform-compare rule of ``vectorize``: ``base + lane < c`` (and its
  mirror forms) is accepted only when the base and ``c`` are multiples of
  the width; ``<=``, an unaligned ``c`` and a width crossing ``c`` are
  refused, leaving the kernel unchanged.
"""

from __future__ import annotations

import numpy as np
import pytest
from _arches import arch_params, slow_off_host
from _numerics import assert_bitwise, rng_for
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import ModuleOp, VectorType
from xdsl.parser import Parser

from nanocompile.compiler import compile_loop, lower_to_loop, optimize_graph, schedule_loop
from nanocompile.dialects import get_all_dialects, loop
from nanocompile.frontend import GraphBuilder
from nanocompile.frontend import composites as C
from nanocompile.interpreter.graph import run_graph
from nanocompile.ir.symbolic import Expr
from nanocompile.schedule.defaults import PREFETCH_AHEAD, PREFETCH_LOCALITY
from nanocompile.schedule.vectorize import LaneIndexArithmetic, vectorize
from nanocompile.targets.arch import AVX2, AVX512, SCALAR, Arch

SEQ, CTX = Expr.sym("seq"), Expr.sym("total")  # past + seq ("ctx" would clash in C: see the report)
THREADS = (1, 2, 3)
SHAPES = {"real": (14, 2, 64), "tiny": (4, 2, 16)}
# (seq, ctx): decode at several contexts, prefill from 0 and after a past; the
# context's blocks of 256 positions: one whole, whole ones and a partial one, and
# a partial one after a whole one with a tail of 3 positions
CASES = ((1, 1), (1, 2), (1, 17), (1, 130), (3, 3), (5, 21), (16, 16), (13, 77),
         (1, 256), (1, 600), (2, 531))


def attention_graph(heads: int, kv_heads: int, head_dim: int, form: str = "total"
                    ) -> ModuleOp:
    """RoPE of ``q`` and attention over the whole context, as Qwen2 builds it.
    ``form``: the context's length a symbol ``total`` (past = total - seq), or
    the polynomial ``past + seq`` (``past`` bound by an input ``past_marker
    [past]`` the graph does not read), whose loops compute the bound inside
    the nest as the model's do."""
    gb = GraphBuilder("attention")
    q = gb.input("q", "f32", [heads, SEQ, head_dim])
    if form == "total":
        past, length = CTX - SEQ, CTX
    else:
        past = Expr.sym("past")
        gb.input("past_marker", "f32", [past])
        length = past + SEQ
    keys = gb.input("keys", "f32", [kv_heads, length, head_dim])
    values = gb.input("values", "f32", [kv_heads, length, head_dim])
    cos, sin = C.rope_tables(gb, SEQ, past, head_dim, 1000000.0)
    mask = C.causal_mask(gb, SEQ, past)
    group = heads // kv_heads
    out = C.attention(C.apply_rope(q, cos, sin), C.repeat_kv(keys, group),
                      C.repeat_kv(values, group), mask, head_dim ** -0.5)
    gb.output("out", out)
    return gb.finish_module()


def _kernels(module: ModuleOp) -> dict[str, loop.KernelOp]:
    return {op.sym_name.data: op for op in module.ops if isinstance(op, loop.KernelOp)}


def _role(kernel: loop.KernelOp) -> str:
    """Which attention kernel this is, from what it computes."""
    ops = {op.name for op in kernel.walk()}
    if "math.cos" in ops or "math.sin" in ops:
        return "rope table"
    if "math.exp" in ops:
        return "softmax"
    if "math.fma" in ops:
        return "scores" if "arith.select" in ops else "context"
    return "rope"


def _vector_width(kernel: loop.KernelOp) -> int:
    widths = [r.type.get_shape()[0] for op in kernel.walk() for r in op.results
              if isinstance(r.type, VectorType)]
    return max(widths, default=1)


def _parallel(kernel: loop.KernelOp) -> list[str]:
    return [op.loop_name.data for op in kernel.walk()
            if isinstance(op, loop.ForOp) and op.parallel is not None]


@pytest.mark.parametrize("arch", [pytest.param(a, id=a.name, marks=slow_off_host(a))
                                  for a in (AVX2, AVX512)])
@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("form", [pytest.param("total", marks=pytest.mark.slow), "past + seq"])
def test_every_attention_kernel_is_vectorized_and_spread(arch: Arch, shape: str,
                                                         form: str) -> None:
    heads, kv_heads, d = SHAPES[shape]
    scheduled, _ = schedule_loop(lower_to_loop(optimize_graph(
        attention_graph(heads, kv_heads, d, form))), arch)
    roles = {}
    for kernel in _kernels(scheduled).values():
        role = _role(kernel)
        roles[role] = roles.get(role, 0) + 1
        width = _vector_width(kernel)
        if role in ("rope table", "rope"):  # the arch's vectors, inside one half of the
            # head dim (the tiny head dim's halves of 8 hold no vector of 16: scalar)
            assert width == (arch.f32_lanes if arch.f32_lanes <= d // 2 else 1), (role, width)
        else:
            assert width == arch.f32_lanes, (role, width)
        want = {"rope": [], "rope table": ["d0"], "scores": ["d0o"],
                "context": ["d0o"]}.get(role, ["d0"])
        assert _parallel(kernel) == want, (role, _parallel(kernel))
        if role == "scores":  # the group's query heads x 1 key per step of k
            group, vectors = heads // kv_heads, 16 // arch.f32_lanes
            jams = {op.loop_name.data: len(op.inits) for op in kernel.walk()
                    if isinstance(op, loop.ForOp) and op.loop_name.data.startswith("k")}
            assert jams == {"k": group * vectors}, jams
            (k,) = [op for op in kernel.walk() if isinstance(op, loop.ForOp)
                    and op.loop_name.data == "k"]
            loads = [op for op in k.body.block.ops if isinstance(op, loop.LoadOp)]
            keys = [op for op in loads if op.ptr is not loads[0].ptr]
            assert (len(loads), len(keys)) == (group * vectors + vectors, vectors)
        if role == "context":  # the head dim and the group's heads jammed into the sum
            # over the positions (16 explicit vector partials each), in blocks ("kb"),
            # distributed by partial ("ki_g0" .. "ki_g15")
            group, vectors = heads // kv_heads, d // width
            loops = {op.loop_name.data: op for op in kernel.walk() if isinstance(op, loop.ForOp)}
            assert list(loops) == ["d0o", "d1", "kb", *(f"ki_g{i}" for i in range(16))], \
                list(loops)
            assert len(loops["kb"].inits) == 16 * group * vectors
            for i in range(16):
                ki = loops[f"ki_g{i}"]
                assert ki.lanes is None
                assert ki.step.data == 16
                assert [str(v.type) for v in ki.inits] == [f"vector<{width}xf32>"] * (
                    group * vectors)
                loads = [op for op in ki.body.block.ops if isinstance(op, loop.LoadOp)]
                values = [op for op in loads if isinstance(op.result.type, VectorType)]
                assert (len(values), len(loads) - len(values)) == (vectors, group)
            assert sum(isinstance(op, loop.IfOp) for op in kernel.walk()) == \
                15 * group * vectors
        if role in ("scores", "context"):
            _assert_rows_prefetched(kernel)
    assert roles == {"rope table": 2, "rope": 1, "scores": 1, "softmax": 1, "context": 1}


def _assert_rows_prefetched(kernel: loop.KernelOp) -> None:
    """Every load of the keys or values (argument #1, the positions its index
    #2) follows a prefetch of the row ``PREFETCH_AHEAD`` positions further
    on, the same indices otherwise; no other argument is prefetched."""
    ptr = kernel.args[1]
    prefetches = [op for op in kernel.walk() if isinstance(op, loop.PrefetchOp)]
    loads = [op for op in kernel.walk() if isinstance(op, loop.LoadOp) and op.ptr is ptr]
    assert loads
    assert len(prefetches) == len(loads)
    for load in loads:
        before = load.prev_op
        assert isinstance(before, loop.PrefetchOp)
        assert before.ptr is ptr
        assert before.locality.data == PREFETCH_LOCALITY
        moved = before.indices[2].owner
        assert isinstance(moved, arith.AddiOp)
        assert moved.lhs is load.indices[2]
        distance = moved.rhs.owner
        assert isinstance(distance, arith.ConstantOp)
        assert distance.value.value.data == PREFETCH_AHEAD
        assert [v for i, v in enumerate(before.indices) if i != 2] == \
            [v for i, v in enumerate(load.indices) if i != 2]


def test_scalar_arch_only_spreads_the_heads() -> None:
    scheduled, _ = schedule_loop(lower_to_loop(optimize_graph(attention_graph(4, 2, 16))),
                                 SCALAR)
    for kernel in _kernels(scheduled).values():
        assert _vector_width(kernel) == 1
        if _role(kernel) in ("scores", "softmax", "context"):
            assert _parallel(kernel) == ["d0"], _role(kernel)


def _inputs(heads: int, kv_heads: int, d: int, seq: int, ctx: int,
            form: str = "total") -> dict[str, np.ndarray]:
    """Standard normal values: scores of order one, so the softmax spreads over
    the context and every sum's order shows in its bits (``random_f32``'s
    magnitudes up to 1e3 would make it one-hot, its sums exact in any order)."""
    rng = rng_for("attention schedule", seq * 1000 + ctx)
    feed = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in
            (("q", (heads, seq, d)), ("keys", (kv_heads, ctx, d)),
             ("values", (kv_heads, ctx, d)))}
    if form != "total":
        feed["past_marker"] = np.zeros(ctx - seq, np.float32)
    return feed


# the host's arch and scalar quickly (test_schedule_parallel.py's tiny model: every arch)
@pytest.mark.parametrize("arch", arch_params(quick_on_host_only=True))
@pytest.mark.parametrize(("shape", "form"), [  # the model's form in the quick suite
    pytest.param("real", "total", marks=pytest.mark.slow),
    pytest.param("tiny", "total", marks=pytest.mark.slow),
    ("real", "past + seq"), pytest.param("tiny", "past + seq", marks=pytest.mark.slow)])
def test_scheduled_attention_is_bitwise(arch: Arch, shape: str, form: str) -> None:
    heads, kv_heads, d = SHAPES[shape]
    graph = attention_graph(heads, kv_heads, d, form)
    module = lower_to_loop(optimize_graph(graph))
    scheduled, _ = schedule_loop(module, arch)
    assert scheduled.is_structurally_equivalent(module) is False
    plain, fast = compile_loop(module, {}), compile_loop(scheduled, {})
    for seq, ctx in CASES:
        feed = _inputs(heads, kv_heads, d, seq, ctx, form)
        want = run_graph(graph, feed, {}, exact=True)["out"]
        assert_bitwise(plain.run(feed)["out"], want, f"unscheduled seq {seq} ctx {ctx}")
        for threads in THREADS:
            assert fast.set_threads(threads) == threads
            assert_bitwise(fast.run(feed)["out"], want,
                           f"{arch.name} {shape} seq {seq} ctx {ctx} {threads} threads")


def _payloads_dropped(x: np.ndarray) -> np.ndarray:
    """``x`` with every NaN the default quiet NaN (its bits otherwise kept)."""
    return np.where(np.isnan(x), np.float32(np.nan), x)


def test_specials_stay_bitwise_but_for_nan_payloads() -> None:
    """NaN, inf, -0 and subnormals in q, keys and values: the scheduled kernels
    (host arch) give the unscheduled bits, except which payload a NaN carries
    where two NaNs meet in the context's FMA (the known limit of
    test_fuzz.py's strict xfail ``test_scheduled_matmul_keeps_nan_payloads``:
    already so in the context's schedule before this one)."""
    graph = attention_graph(4, 2, 16)
    module = lower_to_loop(optimize_graph(graph))
    plain, fast = compile_loop(module, {}), compile_loop(schedule_loop(module)[0], {})
    for seq, ctx in ((1, 19), (6, 33)):
        feed = _inputs(4, 2, 16, seq, ctx)
        feed["q"][0, 0, 2] = np.float32(1e-40)  # subnormal
        feed["keys"][0, 1, 3] = np.inf  # head 0 and 1: a score of +-inf
        feed["keys"][1, 2, :] = np.float32(-0.0)
        feed["values"][1, ctx - 1, 5] = np.nan  # heads 2 and 3: column 5 NaN
        feed["values"][0, 0, 0] = np.float32(-0.0)
        want = plain.run(feed)["out"]
        assert np.isnan(want).any()
        assert np.isfinite(want).any()
        for threads in THREADS:
            fast.set_threads(threads)
            assert_bitwise(_payloads_dropped(fast.run(feed)["out"]), _payloads_dropped(want),
                           f"specials seq {seq} {threads} threads")


# --------------------------------------------------------------------------
# vectorize: a compare of base + lane uniform over the vector

_CONCAT = """builtin.module {{
  loop.kernel @k(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>) syms [] access ["w", "r"]
      footprints [#loop.fp<[32], [1]>, #loop.fp<[16], [1]>] {{
    %c0 = arith.constant 0 : index
    %c32 = arith.constant 32 : index
    %cut = arith.constant {cut} : index
    loop.for "d0" %i = %c0 to %c32 {{
      %in = arith.cmpi {pred}, {lhs}, {rhs} : index
      %x = loop.if %in -> (f32) {{
        %a = loop.load %1[%i] strides [1] : f32
        loop.yield %a : f32
      }} else {{
        %j = arith.subi %i, %cut : index
        %b = loop.load %1[%j] strides [1] : f32
        %n = arith.negf %b : f32
        loop.yield %n : f32
      }}
      loop.store %x, %0[%i] strides [1] : f32
    }}
  }}
}}"""


def _concat_kernel(pred: str = "slt", cut: int = 16, swap: bool = False) -> loop.KernelOp:
    lhs, rhs = ("%cut", "%i") if swap else ("%i", "%cut")
    text = _CONCAT.format(pred=pred, cut=cut, lhs=lhs, rhs=rhs)
    ctx = Context()
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    module = Parser(ctx, text).parse_module()
    return next(op for op in module.ops if isinstance(op, loop.KernelOp))


@pytest.mark.parametrize(("pred", "swap"), [("slt", False), ("sge", False), ("sgt", True),
                                            ("sle", True)])
@pytest.mark.parametrize("width", [4, 8, 16])
def test_a_compare_aligned_to_the_width_is_uniform(pred: str, swap: bool, width: int) -> None:
    kernel = _concat_kernel(pred, 16, swap)
    vectorize(kernel, "d0", width)
    ifs = [op for op in kernel.walk() if isinstance(op, loop.IfOp)]
    assert len(ifs) == 1  # one branch per vector, on the scalar compare of its base
    assert ifs[0].res[0].type == VectorType(ifs[0].res[0].type.element_type, [width])
    assert not isinstance(ifs[0].cond.type, VectorType)


@pytest.mark.parametrize(("pred", "cut", "width", "swap"), [
    pytest.param("sle", 16, 8, False, id="<= is not uniform"),
    pytest.param("sge", 16, 8, True, id="c >= x is not uniform"),
    pytest.param("eq", 16, 8, False, id="== is not uniform"),
    pytest.param("slt", 12, 8, False, id="c not a multiple of the width"),
    pytest.param("slt", 8, 16, False, id="the vector crosses c")])
def test_other_compares_are_refused(pred: str, cut: int, width: int, swap: bool) -> None:
    kernel = _concat_kernel(pred, cut, swap)
    before = str(kernel)
    with pytest.raises(LaneIndexArithmetic, match=r"arith\.cmpi"):
        vectorize(kernel, "d0", width)
    assert str(kernel) == before
