"""The KV cache as the program's state (issue 19, "Must show" item 1): the
graph of ``kv = "state"`` compiled and run through its ``StepRunner`` (one C
call a step, the cache updated in place) gives the same bits as the program
of ``kv = "inputs"`` (the cache copied out and appended in Python, the form
before it), for every weight format, at 1, 2 and 3 threads:

* every position's logits of a prompt run in chunks and at once, then of each
  cached greedy decode step, and the KV cache after them, bit for bit;
* so the same greedy tokens;
* the interpreter (exact mode) on the state graph gives the inputs graph's
  bits too, and returns the caches as new arrays (the inputs stay unwritten).

The tiny model in the quick suite; the full-size model in a slow test.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from _prompts import prompt_ids
from xdsl.dialects.builtin import ModuleOp

from nanocompile.api import int8_weights
from nanocompile.backend.runtime import CompiledBackend, CompiledProgram, StepRunner
from nanocompile.checkpoint.snapshot import Snapshot
from nanocompile.compiler import compile_program, int8_pass, quantize_graph
from nanocompile.dialects.graph.signature import ArgumentError
from nanocompile.inference.engine import Engine, KVCache, SnapshotWeights
from nanocompile.interpreter import InterpreterBackend
from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2

THREADS = (1, 2, 3)
DECODE_STEPS = 4
FORMATS = {  # weight format -> (graph weights, quantize pass)
    "f32": ("f32", ""),
    "bf16": ("bf16", ""),
    "int8": ("bf16", int8_pass()),
    "int8-dot": ("bf16", int8_pass(kernel="b")),
}


@dataclass
class Pair:
    """One format's two programs (kv "inputs" and "state") on the same weights."""

    snap: Snapshot
    inputs: CompiledProgram
    state: CompiledProgram
    weights: object
    quantize: str
    graph_weights: str

    def engines(self, chunk: int | None) -> tuple[Engine, Engine]:
        cfg = self.snap.config
        return (Engine(cfg, CompiledBackend(self.inputs), chunk=chunk),
                Engine(cfg, CompiledBackend(self.state), chunk=chunk, kv="state"))


def make_pair(directory: Path, fmt: str, cache: Path, last_only: bool = False) -> Pair:
    snap = Snapshot.open(directory)
    graph_weights, quantize = FORMATS[fmt]
    base = SnapshotWeights(snap, graph_weights)

    def graph(kv: str) -> ModuleOp:
        return build_qwen2(snap.config, Qwen2GraphOptions(weights=graph_weights, kv=kv,
                                                          last_only=last_only))

    weights = base if not quantize else int8_weights(
        snap, quantize_graph(graph("inputs"), quantize), base, cache_dir=cache)
    programs = [compile_program(graph(kv), weights, schedule=True, quantize=quantize)
                for kv in ("inputs", "state")]
    return Pair(snap, programs[0], programs[1], weights, quantize, graph_weights)


def run(engine: Engine, ids: list[int], steps: int = DECODE_STEPS
        ) -> tuple[list[np.ndarray], list[int], KVCache]:
    cache = engine.new_cache(len(ids) + steps + 3)  # room to spare: capacity is not length
    logits = [engine.forward(ids, cache)]
    tokens = [int(np.argmax(logits[-1][-1]))]
    for _ in range(steps):
        logits.append(engine.forward([tokens[-1]], cache))
        tokens.append(int(np.argmax(logits[-1][-1])))
    return logits, tokens, cache


def assert_same(got: tuple[list[np.ndarray], list[int], KVCache],
                want: tuple[list[np.ndarray], list[int], KVCache], what: str) -> None:
    for step, (g, w) in enumerate(zip(got[0], want[0], strict=True)):
        assert g.shape == w.shape, what
        np.testing.assert_array_equal(g.view(np.uint32), w.view(np.uint32),
                                      err_msg=f"{what}, step {step}")
    assert got[1] == want[1], what
    n = want[2].length
    assert got[2].length == n
    for g, w in ((got[2].keys, want[2].keys), (got[2].values, want[2].values)):
        np.testing.assert_array_equal(g[:, :, :n].view(np.uint32), w[:, :, :n].view(np.uint32),
                                      err_msg=f"{what}: the cache")


def check_pair(pair: Pair, ids: list[int], chunks: tuple[int | None, ...]) -> None:
    for threads in THREADS:
        for program in (pair.inputs, pair.state):
            assert program.set_threads(threads) == threads
        for chunk in chunks:
            old, new = pair.engines(chunk)
            want = run(old, ids)
            got = run(new, ids)
            what = f"{threads} threads, chunk {chunk}"
            assert_same(got, want, what)
            runner = next(iter(got[2].runners.values()))
            assert isinstance(runner, StepRunner)
            assert runner.states["key_cache"] is got[2].keys  # updated in place: no copy
    for program in (pair.inputs, pair.state):
        program.set_threads(0)


# bf16 (the default) in the quick suite, the other formats in the full one (its 3 minutes)
@pytest.fixture(scope="module", params=[
    f if f == "bf16" else pytest.param(f, marks=pytest.mark.slow) for f in FORMATS])
def tiny_pair(request: pytest.FixtureRequest, tiny_snapshot: Path,
              tmp_path_factory: pytest.TempPathFactory) -> Pair:
    return make_pair(tiny_snapshot, request.param, tmp_path_factory.mktemp("int8"))


def test_tiny_state_program_is_bitwise_the_inputs_program(tiny_pair: Pair,
                                                          tiny_snapshot: Path) -> None:
    ids = prompt_ids(tiny_snapshot, "chat")
    assert len(ids) > 9
    check_pair(tiny_pair, ids, (None, 4, 9))  # one call, and chunks that split the prompt


def test_tiny_state_interpreter_is_bitwise_the_inputs_interpreter(tiny_snapshot: Path) -> None:
    snap = Snapshot.open(tiny_snapshot)
    weights = SnapshotWeights(snap, "f32")
    engines = [Engine(snap.config, InterpreterBackend(
        build_qwen2(snap.config, Qwen2GraphOptions(kv=kv)), weights, exact=True), kv=kv)
        for kv in ("inputs", "state")]
    ids = prompt_ids(tiny_snapshot, "france")
    want = run(engines[0], ids, 2)
    got = run(engines[1], ids, 2)
    assert_same(got, want, "exact interpreter")
    assert not got[2].runners  # the interpreter runs each call checked, functionally


def test_interpreter_never_writes_the_state_it_is_given(tiny_snapshot: Path) -> None:
    snap = Snapshot.open(tiny_snapshot)
    cfg = snap.config
    backend = InterpreterBackend(build_qwen2(cfg, Qwen2GraphOptions(kv="state")),
                                 SnapshotWeights(snap, "f32"))
    shape = (cfg.num_hidden_layers, cfg.num_key_value_heads, 8, cfg.head_dim)
    kc, vc = np.zeros(shape, np.float32), np.zeros(shape, np.float32)
    out = backend.run({"token_ids": np.array([1, 2, 3]), "past": 2, "key_cache": kc,
                       "value_cache": vc})
    assert not kc.any()
    assert not vc.any()
    assert out["key_cache"][:, :, 2:5].any()
    assert not out["key_cache"][:, :, :2].any()
    assert not out["key_cache"][:, :, 5:].any()
    with pytest.raises(Exception, match="do not fit axis 2 of size 8"):
        backend.run({"token_ids": np.array([1, 2, 3]), "past": 6, "key_cache": kc,
                     "value_cache": vc})


@pytest.fixture(scope="module")
def tiny_bf16(tiny_snapshot: Path, tmp_path_factory: pytest.TempPathFactory) -> Pair:
    return make_pair(tiny_snapshot, "bf16", tmp_path_factory.mktemp("int8"), last_only=True)


def _caches(pair: Pair, capacity: int) -> dict[str, np.ndarray]:
    cfg = pair.snap.config
    shape = (cfg.num_hidden_layers, cfg.num_key_value_heads, capacity, cfg.head_dim)
    return {"key_cache": np.zeros(shape, np.float32), "value_cache": np.zeros(shape, np.float32)}


def test_state_program_updates_the_callers_arrays_in_place(tiny_bf16: Pair) -> None:
    caches = _caches(tiny_bf16, 16)
    out = tiny_bf16.state.run({"token_ids": np.array([5, 6, 7]), "past": 0, **caches})
    assert out["key_cache"] is caches["key_cache"]
    assert out["value_cache"] is caches["value_cache"]
    assert caches["key_cache"][:, :, :3].any()
    assert not caches["key_cache"][:, :, 3:].any()


def test_state_program_rejects_bad_scalars_and_states(tiny_bf16: Pair) -> None:
    caches = _caches(tiny_bf16, 16)
    ids = np.array([5, 6, 7])
    for past, message in ((-1, "scalar 'past' must be a non-negative integer"),
                          (1.5, "scalar 'past' must be a non-negative integer"),
                          (14, "axis 2 past the end")):
        with pytest.raises(ArgumentError, match=message):
            tiny_bf16.state.run({"token_ids": ids, "past": past, **caches})
    with pytest.raises(ArgumentError, match=r"missing input\(s\) \['past'\]"):
        tiny_bf16.state.run({"token_ids": ids, **caches})
    caches["key_cache"].flags.writeable = False
    with pytest.raises(ArgumentError, match="state 'key_cache' must be writeable"):
        tiny_bf16.state.run({"token_ids": ids, "past": 0, **caches})


def test_step_runner_checks_once_and_fails_cleanly(tiny_bf16: Pair) -> None:
    caches = _caches(tiny_bf16, 8)
    runner = StepRunner(tiny_bf16.state, caches, max_seq=4)
    assert runner.capacity == 8
    assert runner.max_seq == 4
    vocab = tiny_bf16.snap.config.vocab_size
    assert runner.step(np.array([1, 2, 3]), 0)["logits"].shape == (1, vocab)
    with pytest.raises(ArgumentError, match="a step takes 1 to 4 tokens, got 5"):
        runner.step(np.arange(5), 3)
    with pytest.raises(ArgumentError, match="axis 2 past the end"):  # the C entry's check
        runner.step(np.array([1, 2]), 7)
    with pytest.raises(ArgumentError, match="the states are"):
        StepRunner(tiny_bf16.state, {"key_cache": caches["key_cache"]}, max_seq=4)
    with pytest.raises(ArgumentError, match="max_seq must be a positive integer"):
        StepRunner(tiny_bf16.state, caches, max_seq=0)
    with pytest.raises(ArgumentError, match="needs one vector input besides the states"):
        StepRunner(tiny_bf16.inputs, {}, max_seq=4)
    bad = dict(caches, value_cache=np.zeros((1, 1, 8, 1), np.float32))
    with pytest.raises(ArgumentError, match="state 'value_cache'"):
        StepRunner(tiny_bf16.state, bad, max_seq=4)


@pytest.mark.slow  # the full-size model: ~1 min of compiles and runs per format
@pytest.mark.parametrize("fmt", ["bf16", "int8", "f32"])
def test_full_state_program_is_bitwise_the_inputs_program(
        fmt: str, full_snapshot: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    pair = make_pair(full_snapshot, fmt, tmp_path_factory.mktemp("int8"), last_only=True)
    check_pair(pair, prompt_ids(full_snapshot, "chat"), (None, 7))


def test_step_runner_profiles_each_launch_and_the_entry(tiny_bf16: Pair) -> None:
    caches = _caches(tiny_bf16, 8)
    runner = StepRunner(tiny_bf16.state, caches, max_seq=4)
    want = runner.step(np.array([1, 2, 3]), 0)["logits"].copy()
    ns = tiny_bf16.state.profile_slots()
    assert ns.shape == (tiny_bf16.state.launches + 1,)
    runner.profile = ns
    got = runner.step(np.array([1, 2, 3]), 0)["logits"]  # the same step again: same bits
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert (ns[:-1] > 0).all()
    assert ns[-1] >= ns[:-1].sum()  # the entry's span holds every launch


def test_one_token_steps_take_the_short_path_with_the_same_bits(tiny_bf16: Pair) -> None:
    """A decode step (one token id) skips the general path's checks and views:
    the runner's one-token step returns the same read-only mapping each time,
    and ``Engine.forward`` of a list of one int goes straight to the runner;
    both give the bits of the general path (the ids as an array, two at a
    time in the runner, a cache of its own), keep the cache's length and count, and refuse what the
    general path refuses."""
    from nanocompile.inference.engine import CacheFullError

    caches, other = _caches(tiny_bf16, 8), _caches(tiny_bf16, 8)
    runner = StepRunner(tiny_bf16.state, caches, max_seq=4)
    general = StepRunner(tiny_bf16.state, other, max_seq=4)
    runner.step([3, 9], 0)
    general.step(np.array([3, 9]), 0)
    first = runner.step([11], 2)
    assert runner.step([12], 3) is first  # made once
    with pytest.raises(TypeError):
        first["logits"] = np.zeros(1)  # type: ignore[index]
    want = general.step(np.array([11, 12]), 2)["logits"]  # the last position's: 12's
    np.testing.assert_array_equal(first["logits"].view(np.uint32), want.view(np.uint32))
    for got, exp in ((caches["key_cache"], other["key_cache"]),
                     (caches["value_cache"], other["value_cache"])):
        np.testing.assert_array_equal(got[:, :, :4].view(np.uint32), exp[:, :, :4].view(np.uint32))

    engine = Engine(tiny_bf16.snap.config, CompiledBackend(tiny_bf16.state), chunk=4, kv="state")
    fast, slow = engine.new_cache(5), engine.new_cache(5)
    engine.forward([3, 9, 11], fast)
    engine.forward([3, 9, 11], slow)
    a = engine.forward([12], fast)  # a list of one int: the short path
    b = engine.forward(np.array([12]), slow)
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
    assert (fast.length, fast.tokens_run) == (slow.length, slow.tokens_run) == (4, 4)
    assert a is not engine.forward([13], fast, fresh=True)  # fresh: a copy
    with pytest.raises(CacheFullError, match="exceed its capacity 5"):
        engine.forward([14], fast)
    assert fast.length == 5
    with pytest.raises(ArgumentError, match="profile: expected a writeable int64"):
        runner.profile = np.zeros(3, np.int64)
