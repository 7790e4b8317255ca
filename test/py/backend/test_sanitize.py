"""Memory safety of the generated code: AddressSanitizer + UBSan, and a guarded arena.

Sanitizer tests (marker ``sanitize``, in the full suite) build every kernel
with ``-fsanitize=address,undefined`` and run it in a child Python started with
``gcc.sanitizer_env()`` (libasan preloaded, ``detect_leaks=0``,
``PYTHONMALLOC=malloc``), so every input, output and weight array is its own
malloc block with ASan redzones around it. Each child checks its results
against the interpreter and prints ``OK``; the parent asserts exit 0 and no
``ERROR: AddressSanitizer`` / ``runtime error:`` (UBSan) report.

ASan cannot see a kernel writing past one arena temporary into its neighbour
(the arena is one allocation), so every sanitized run here also goes through
`nanocompile.backend.guarded_arena.GuardedArena`: each temporary in its own slot between
random guard bytes that are checked after the run. The unsanitized tiny-model
test does the same for the production build, and a self-test shows the guard
catches a write one element past a temporary.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from nanocompile.backend import gcc
from nanocompile.backend.guarded_arena import ArenaGuardError, GuardedArena
from nanocompile.backend.runtime import CompiledBackend
from nanocompile.checkpoint.snapshot import Snapshot
from nanocompile.compiler import compile_program
from nanocompile.inference.engine import Engine, F32Weights
from nanocompile.interpreter import InterpreterBackend
from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2
from nanocompile.testing.random_graphs import PIPELINES

REPORTS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer")

# --------------------------------------------------------------------------
# the child processes
# --------------------------------------------------------------------------

CHILD_COMMON = r'''
import sys
import numpy as np
from nanocompile.backend import gcc
from nanocompile.compiler import compile_program
from nanocompile.backend.guarded_arena import GuardedArena
from nanocompile.testing.random_graphs import PIPELINE_PAIRS, PIPELINES, nan_equivalent, same_bits
from nanocompile.interpreter import run_graph

assert gcc.asan_runtime_loaded(), "the child must run with libasan preloaded"
assert gcc.sanitize_default(), "NANOCOMPILE_SANITIZE=1 expected"


def compile_all(module, weights):
    """Sanitized programs of every pipeline (unfused, fused, fused + the default
    schedules: matmuls on the thread pool), each in a guarded arena."""
    out = {}
    for pipeline, options in PIPELINES.items():
        program = compile_program(module, weights, **options)
        assert program.library.sanitize, pipeline
        out[pipeline] = GuardedArena(program)
    return out


def check(module, weights, programs, inputs, inexact=()):
    """Every pipeline against the interpreter (NaN-equivalent bitwise, or a
    tolerance for the names in `inexact`); fused == unfused and scheduled ==
    fused bitwise."""
    want = run_graph(module, inputs, weights)
    got = {p: g.run(inputs) for p, g in programs.items()}
    for name, w in want.items():
        for pipeline, outputs in got.items():
            c = outputs[name]
            assert c.dtype == w.dtype and c.shape == w.shape, (name, pipeline)
            if name in inexact:
                ok = np.allclose(c, w, rtol=1e-5, atol=1e-5, equal_nan=True)
            else:
                ok = nan_equivalent(c, w)
            assert ok, (name, pipeline, c, w)
        for a, b in PIPELINE_PAIRS:
            assert same_bits(got[a][name], got[b][name]), (name, f"{a} != {b}")
    return len(want)
'''

CHILD_PRIMITIVES = CHILD_COMMON + r'''
from nanocompile.dialects import graph as g
from nanocompile.frontend import GraphBuilder, concat, gather, where
from nanocompile.testing.random_graphs import F32_INT_RANGE, fuzz_graphs, random_array

NUMERIC = ("f32", "i64", "i32", "i8")
ALL = (*NUMERIC, "bool")
rng = np.random.default_rng(20240611)


def build():
    """Every primitive, every dtype it takes, in one graph (one library per pipeline)."""
    gb = GraphBuilder("primitives")
    inexact = set()
    cond = gb.input("cond", "bool", ["a", "b"])
    xs = {}
    for dt in NUMERIC:
        x = xs[dt] = gb.input(f"x_{dt}", dt, ["a", "b"])
        y = gb.input(f"y_{dt}", dt, ["a", "b"])
        for name, value in (("add", x + y), ("sub", x - y), ("mul", x * y), ("le", x <= y),
                            ("where", where(cond, x, y)), ("neg", -x),
                            ("sum0", x.sum(0)), ("sum1", x.sum(1)), ("max0", x.max(0)),
                            ("max1", x.max(-1)), ("perm_copy", x.permute(1, 0).reshape("a*b"))):
            gb.output(f"{name}_{dt}", value)
        if dt == "f32":
            inexact |= {"sum0_f32", "sum1_f32"}
            gb.output("div_f32", x / y)
            for op in ("exp", "sqrt", "reciprocal", "sin", "cos"):
                gb.output(f"{op}_f32", getattr(x, op)())
                if op in ("exp", "sin", "cos"):
                    inexact.add(f"{op}_f32")
    xs["bool"] = cond
    for src in ALL:  # every cast (f32 -> int clamped into range first)
        for dst in ALL:
            x = xs[src]
            if src == "f32" and dst in F32_INT_RANGE:
                lo, hi = F32_INT_RANGE[dst]
                x = where(x <= hi, where(x >= lo, x, lo), hi)
            gb.output(f"cast_{src}_{dst}", gb.add(g.CastOp(x.value, dst)))
    gb.output("bf16_f32", gb.input("bits", "bf16", ["a", 3]).cast("f32"))
    # matmul: 2-D, batched, transposed rhs, weight
    m = gb.input("m", "f32", ["a", "k"])
    gb.output("mm", m @ gb.input("mr", "f32", ["k", "b"]))
    gb.output("mm_t", m @ gb.input("mt", "f32", ["b", "k"]).T)
    gb.output("bmm", gb.input("m3", "f32", [2, "a", "k"]) @ gb.input("m3r", "f32", [2, "k", 3]))
    gb.output("linear", gb.input("lin", "f32", ["a", 5]) @ gb.weight("w", [4, 5]).T)
    inexact |= {"mm", "mm_t", "bmm", "linear"}
    # gather: tables of several dtypes and ranks, ids of every integer dtype
    for k, (tdt, shape) in enumerate((("f32", [7, 3]), ("i8", [7, 2, 2]), ("bf16", [7, 4]),
                                      ("bool", [7]))):
        table = gb.weight(f"t{k}", shape, tdt)
        for idt in ("i64", "i32", "i8"):
            gb.output(f"gather{k}_{idt}", gather(table, gb.input(f"ids{k}_{idt}", idt, ["n"])))
    # concat with zero-length operands (symbolic z bound to 0 sometimes, constant 0)
    p = gb.input("p", "f32", ["z", 3])
    q = gb.input("q", "f32", ["a", 3])
    empty = gb.input("e", "f32", [0, 3])
    gb.output("cat", concat([p, empty, q, p], 0))
    gb.output("cat1", concat([q.T, empty.T, q.T], 1))
    # iota, dim, symbolic slices of a KV-style buffer, broadcasts
    gb.output("iota", gb.iota(["a", "b"], 1, "i32"))
    gb.output("iota_f", gb.iota(["n", 2], 0, "f32"))
    gb.output("dim", gb.dim("a*b + 3"))
    kv = gb.input("kv", "f32", ["past + a", 4])
    gb.output("kv_new", -kv.slice(0, "past", "past + a"))
    gb.output("kv_old", kv.slice(0, 0, "past") * 2.0)
    gb.output("kv_mid", kv.slice(1, 1, 3).sum(1))
    inexact.add("kv_mid")
    gb.output("bcast", q.reshape("a", 1, 3).broadcast_to("a", "b", 3) + 1.0)
    gb.output("past_neg", -gb.input("past_marker", "f32", ["past"]))  # binds past
    return gb.finish_module(), inexact


module, inexact = build()
weights = {"w": random_array(rng, "f32", (4, 5)), "t0": random_array(rng, "f32", (7, 3)),
           "t1": random_array(rng, "i8", (7, 2, 2)), "t2": random_array(rng, "bf16", (7, 4)),
           "t3": random_array(rng, "bool", (7,))}
programs = compile_all(module, weights)
finite = lambda shape: (rng.standard_normal(shape) * 3).astype(np.float32)  # noqa: E731
outputs = 0
for a, b, k, n, z, past in [(0, 0, 0, 0, 0, 0), (1, 1, 1, 1, 1, 1), (0, 3, 2, 1, 0, 2),
                            (3, 0, 0, 4, 1, 0), (5, 7, 5, 9, 2, 3), (17, 9, 6, 2, 0, 5)]:
    inputs = {"cond": rng.random((a, b)) < 0.5, "bits": rng.integers(0, 65536, (a, 3),
                                                                     dtype=np.uint16)}
    for dt in NUMERIC:
        inputs[f"x_{dt}"] = finite((a, b)) if dt == "f32" else random_array(rng, dt, (a, b))
        inputs[f"y_{dt}"] = finite((a, b)) if dt == "f32" else random_array(rng, dt, (a, b))
    inputs.update(m=finite((a, k)), mr=finite((k, b)), mt=finite((b, k)),
                  m3=finite((2, a, k)), m3r=finite((2, k, 3)), lin=finite((a, 5)),
                  p=finite((z, 3)), q=finite((a, 3)), e=finite((0, 3)),
                  kv=finite((past + a, 4)), past_marker=finite((past,)))
    for t in range(4):
        for idt in ("i64", "i32", "i8"):
            inputs[f"ids{t}_{idt}"] = rng.integers(0, 7, n).astype(idt.replace("i", "int"))
    outputs += check(module, weights, programs, inputs, inexact)
    if n == 0:
        continue
    # an out-of-range id is an error in both pipelines, never a read out of bounds
    bad_ids = inputs["ids0_i64"].copy()
    bad_ids[-1] = 7 if n % 2 else -1
    bad = dict(inputs, ids0_i64=bad_ids)
    for pipeline, guarded in programs.items():
        try:
            guarded.run(bad)
        except Exception as e:
            assert type(e).__name__ == "KernelError", (pipeline, e)
        else:
            raise AssertionError(f"{pipeline}: out-of-range id accepted")
print(f"primitives: {outputs} outputs compared")
print("OK")
'''

CHILD_GRAPHS = CHILD_COMMON + r'''
from nanocompile.testing.random_graphs import fuzz_graphs

seeds = [int(s) for s in sys.argv[2:]]
report = fuzz_graphs(seeds, data_seed=seeds[0], sanitize=True)
assert not report.findings, [str(f) for f in report.findings]
print(f"random graphs: {report.graphs} graphs, {report.runs} runs, {dict(report.outputs)}")
print("OK")
'''

CHILD_MODEL = CHILD_COMMON + r'''
from pathlib import Path
from nanocompile.backend.runtime import KernelError
from nanocompile.checkpoint.snapshot import Snapshot
from nanocompile.inference.engine import Engine, F32Weights
from nanocompile.interpreter import InterpreterBackend
from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2
from nanocompile.dialects.graph.signature import ArgumentError

snap = Snapshot.open(Path(sys.argv[2]))
cfg, weights = snap.config, F32Weights(snap)
graph = build_qwen2(cfg, Qwen2GraphOptions(last_only=False))
programs = compile_all(graph, weights)
interp = Engine(cfg, InterpreterBackend(graph, weights))
engines = {p: Engine(cfg, g) for p, g in programs.items()}
prompt = [151644, 872, 198, 9707, 11, 1879, 0, 151645]
steps = [prompt, [13], [151643], [0]]
caches = {p: e.new_cache(16) for p, e in engines.items()}
icache = interp.new_cache(16)
for step in steps:
    want = interp.forward(step, icache)
    got = {p: e.forward(step, caches[p]) for p, e in engines.items()}
    for p, logits in got.items():
        rel = float(np.abs(logits - want).max() / max(1.0, float(np.abs(want).max())))
        assert rel <= 1e-5, (p, rel)
    for a, b in PIPELINE_PAIRS:
        assert same_bits(got[a], got[b]), f"{a} != {b}"
for p, cache in caches.items():
    assert same_bits(cache.keys, caches["unfused"].keys), p
    assert same_bits(cache.values, caches["unfused"].values), p
# bad arguments and ids stop at the boundary, under ASan too
for p, guarded in programs.items():
    past = np.zeros((cfg.num_hidden_layers, cfg.num_key_value_heads, 2, cfg.head_dim), np.float32)
    short = past[:, :, :1].copy()
    for bad, error in (({"token_ids": np.array([1, cfg.vocab_size]), "past_keys": past,
                         "past_values": past}, KernelError),
                       ({"token_ids": np.array([1, -5]), "past_keys": past,
                         "past_values": past}, KernelError),
                       ({"token_ids": np.array([1]), "past_keys": past, "past_values": short},
                        ArgumentError)):
        try:
            guarded.run(bad)
        except error:
            pass
        else:
            raise AssertionError(f"{p}: accepted {bad}")
print(f"tiny model: {len(steps)} steps, guarded runs {[g.runs for g in programs.values()]}")
print("OK")
'''


def run_child(code: str, *args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **gcc.sanitizer_env(), "NANOCOMPILE_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True,
                          text=True, timeout=900)


def assert_clean(child: subprocess.CompletedProcess[str]) -> None:
    print(child.stdout)
    for report in REPORTS:
        assert report not in child.stderr, child.stderr[-6000:]
    assert child.returncode == 0, child.stderr[-6000:]
    assert child.stdout.rstrip().endswith("OK"), child.stdout


@pytest.fixture(scope="module")
def kernel_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A private gcc cache: the tests never write the user's cache."""
    path = tmp_path_factory.mktemp("kernel-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NANOCOMPILE_CACHE_DIR", str(path))
        yield path


@pytest.mark.sanitize
@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
def test_primitives_under_sanitizers(kernel_cache: Path) -> None:
    """Every primitive (elementwise on f32/i64/i32/i8/bool, every cast, reductions on
    each axis, matmul 2-D/batched/transposed/weight, gather from four table dtypes
    with three id dtypes, concat with empty operands, iota, dim, reshape copies,
    symbolic KV slices, broadcasts) compiled sanitized, unfused, fused and
    scheduled (matmuls on the thread pool), at six bindings including all-0 and
    all-1, against the interpreter, the pipelines bitwise equal; out-of-range ids
    raise. No ASan/UBSan report, no guard byte touched."""
    assert_clean(run_child(CHILD_PRIMITIVES, "primitives", cache=kernel_cache))


@pytest.mark.slow
@pytest.mark.sanitize
def test_random_graphs_under_sanitizers(kernel_cache: Path) -> None:
    """16 graphs of the graph fuzzer (two libraries per pipeline), sanitized, at four
    bindings each, with the fuzzer's checks. No ASan/UBSan report."""
    for first in (900, 908):
        seeds = [str(s) for s in range(first, first + 8)]
        assert_clean(run_child(CHILD_GRAPHS, "graphs", *seeds, cache=kernel_cache))


@pytest.mark.sanitize
@pytest.mark.slow  # 12 s: keeps `-m "not slow"` under its 3-minute budget
def test_tiny_model_under_sanitizers(kernel_cache: Path, tiny_snapshot: Path) -> None:
    """The tiny Qwen2 model, sanitized, unfused, fused and scheduled (what the API
    runs): a prefill and three cached decode steps against the interpreter (1e-5
    of the largest logit), the three pipelines bitwise equal (logits and KV
    cache); out-of-range token ids and a past_values of the wrong length are
    errors. No ASan/UBSan report, no guard byte touched."""
    assert_clean(run_child(CHILD_MODEL, "model", str(tiny_snapshot), cache=kernel_cache))


@pytest.mark.sanitize
def test_sanitizer_child_reports_a_real_overrun(kernel_cache: Path) -> None:
    """The harness can fail: a sanitized kernel writing one element past its output
    (a C source edited before compiling) is reported by ASan in the same kind of
    child."""
    code = CHILD_COMMON + r'''
from nanocompile.frontend import GraphBuilder
from nanocompile.targets.c import CEmitter
gb = GraphBuilder("f")
x = gb.input("x", "f32", ["n"])
gb.output("y", -x)
module = gb.finish_module()
import re
real = CEmitter.emit_module
def emit_overrun(self, m):  # every loop runs one iteration too far
    return re.sub(r"(\w+) < (\w+); \+\+\1\)", r"\1 <= \2; ++\1)", real(self, m))
CEmitter.emit_module = emit_overrun
program = compile_program(module, {}, fuse=False)
assert "<= v0; ++" in program.source, program.source
program.run({"x": np.ones(16, np.float32)})
print("OK")
'''
    child = run_child(code, cache=kernel_cache)
    assert child.returncode != 0
    assert "ERROR: AddressSanitizer: heap-buffer-overflow" in child.stderr, child.stderr[-3000:]


# --------------------------------------------------------------------------
# the guarded arena, without sanitizers
# --------------------------------------------------------------------------


class GuardedBackend:
    def __init__(self, guarded: GuardedArena) -> None:
        self.guarded = guarded

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.guarded.run(inputs)


@pytest.fixture(scope="module")
def tiny_programs(kernel_cache: Path, tiny_snapshot: Path) -> dict[str, object]:
    snap = Snapshot.open(tiny_snapshot)
    weights = F32Weights(snap)
    graph = build_qwen2(snap.config, Qwen2GraphOptions(last_only=False))
    return {"config": snap.config, "weights": weights, "graph": graph,
            **{name: compile_program(graph, weights, sanitize=False, **options)
               for name, options in PIPELINES.items()}}


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
@pytest.mark.parametrize("pipeline", list(PIPELINES))
def test_tiny_model_in_guarded_arena(tiny_programs: dict, pipeline: str) -> None:
    """Prefill and three decode steps of the tiny model with every temporary between
    random guard bytes: no guard byte changes (no kernel writes outside the
    temporary it owns), and the logits still match the interpreter (a kernel
    reading a temporary before writing it would read random bytes)."""
    cfg = tiny_programs["config"]
    guarded = GuardedArena(tiny_programs[pipeline])
    engine = Engine(cfg, GuardedBackend(guarded))
    interp = Engine(cfg, InterpreterBackend(tiny_programs["graph"], tiny_programs["weights"]))
    cache, icache = engine.new_cache(20), interp.new_cache(20)
    for step in ([151644, 872, 198, 9707, 11, 1879, 0], [13], [151643], [7]):
        got, want = engine.forward(step, cache), interp.forward(step, icache)
        assert np.abs(got - want).max() <= 1e-5 * max(1.0, float(np.abs(want).max()))
    assert guarded.runs == 4
    assert len(guarded.temps) > 10
    plain = Engine(cfg, CompiledBackend(tiny_programs[pipeline]))
    del plain  # the program object is shared: GuardedArena replaced its plan for good


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
def test_guarded_arena_catches_a_write_past_a_temporary(tiny_programs: dict) -> None:
    """Self-test: give the largest temporary one element less than its kernels write
    and the guard reports it, naming the temporary and its kernels."""

    class Shrunk(GuardedArena):
        def sizes(self, bindings: dict[str, int]) -> list[int]:
            sizes = super().sizes(bindings)
            largest = max(range(len(sizes)), key=sizes.__getitem__)
            sizes[largest] -= 4
            return sizes

    program = compile_program(tiny_programs["graph"], tiny_programs["weights"], fuse=True,
                              sanitize=False)  # a fresh program object (cache hit)
    guarded = Shrunk(program)
    engine = Engine(tiny_programs["config"], GuardedBackend(guarded))
    with pytest.raises(ArenaGuardError, match=r"0 bytes after temporary #\d+ \(used by "):
        engine.forward([1, 2, 3])
    violation = guarded.violations()[0]
    assert violation.where == "after"
    assert violation.end - violation.start <= 4


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
def test_guarded_arena_catches_a_write_past_an_output(tiny_programs: dict) -> None:
    """Self-test: hand the program a logits array whose buffer is one element
    short of what its kernels write, and the guard after it reports the write."""

    class ShortOutput(GuardedArena):
        def _new_output(self, name: str, shape: list[int], dtype: np.dtype) -> np.ndarray:
            if name != "logits":
                return super()._new_output(name, shape, dtype)
            flat = super()._new_output(name, [int(np.prod(shape)) - 1], dtype)
            strides = np.empty(shape, dtype).strides
            return np.lib.stride_tricks.as_strided(flat, shape, strides)

    program = compile_program(tiny_programs["graph"], tiny_programs["weights"], fuse=True,
                              sanitize=False)
    guarded = ShortOutput(program)
    engine = Engine(tiny_programs["config"], GuardedBackend(guarded))
    with pytest.raises(ArenaGuardError, match=r"output 'logits': \d+ guard byte\(s\) changed "
                                              r"after it"):
        engine.forward([1, 2, 3])
