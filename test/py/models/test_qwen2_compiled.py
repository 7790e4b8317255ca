"""The Qwen2 model on the phase-2 C backend, against the interpreter and
transformers.

Compiled C and the interpreter do the same f32 operations except the order
of sums: matmuls and reduce_sum add k sequentially in C, NumPy/BLAS in
blocks. So logits agree to rounding (1e-5 relative to the largest |logit|
on the tiny model) and greedy tokens agree exactly; bitwise equality is not
claimed for this pair (fused vs unfused C is bitwise, phase 3).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _prompts import PROMPTS, max_rel_diff, prompt_ids

from nanocompile.backend.arena import Buffer, check_plan, plan_arena
from nanocompile.backend.runtime import CompiledBackend, KernelError, temp_buffers
from nanocompile.checkpoint.config import Qwen2Config
from nanocompile.checkpoint.snapshot import Snapshot
from nanocompile.checkpoint.synth import synthetic_config
from nanocompile.compiler import compile_program, lower_to_loop
from nanocompile.dialects import loop
from nanocompile.inference.engine import Engine, F32Weights
from nanocompile.interpreter import InterpreterBackend
from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2


class Engines:
    """The interpreter and the compiled program on the same snapshot."""

    def __init__(self, directory: Path, last_only: bool) -> None:
        self.dir = directory
        snap = Snapshot.open(directory)
        self.cfg = snap.config
        self.weights = F32Weights(snap)
        graph = build_qwen2(self.cfg, Qwen2GraphOptions(last_only=last_only))
        self.program = compile_program(graph, self.weights)
        self.compiled = Engine(self.cfg, CompiledBackend(self.program))
        self.interp = Engine(self.cfg, InterpreterBackend(graph, self.weights))


@pytest.fixture(scope="module")
def tiny(tiny_snapshot: Path) -> Engines:
    return Engines(tiny_snapshot, last_only=False)


@pytest.mark.parametrize("key", list(PROMPTS))
def test_tiny_logits_match_interpreter(tiny: Engines, key: str) -> None:
    ids = prompt_ids(tiny.dir, key)
    assert max_rel_diff(tiny.compiled.forward(ids), tiny.interp.forward(ids)) <= 1e-5


def test_tiny_cached_steps_and_cache_contents(tiny: Engines) -> None:
    ids = prompt_ids(tiny.dir, "fibonacci")
    c_cache, i_cache = tiny.compiled.new_cache(len(ids) + 4), tiny.interp.new_cache(len(ids) + 4)
    steps = [ids, [11], [42], [7]]
    for step in steps:
        a = tiny.compiled.forward(step, c_cache)
        b = tiny.interp.forward(step, i_cache)
        assert max_rel_diff(a, b) <= 1e-5
    n = c_cache.length
    assert n == i_cache.length == len(ids) + 3
    np.testing.assert_allclose(c_cache.keys[:, :, :n], i_cache.keys[:, :, :n], atol=1e-5)
    np.testing.assert_allclose(c_cache.values[:, :, :n], i_cache.values[:, :, :n], atol=1e-5)


def test_tiny_greedy_equals_interpreter(tiny: Engines) -> None:
    for key in PROMPTS:
        ids = prompt_ids(tiny.dir, key)
        assert tiny.compiled.greedy(ids, 6) == tiny.interp.greedy(ids, 6), key
    ids = prompt_ids(tiny.dir, "france")
    assert tiny.compiled.greedy(ids, 4, cached=False) == tiny.compiled.greedy(ids, 4)


def test_out_of_range_token_is_an_error_not_a_crash(tiny: Engines) -> None:
    for bad in (-1, tiny.cfg.vocab_size, 2**40):
        with pytest.raises(KernelError, match="gather: id out of range"):
            tiny.compiled.forward([1, bad])
    assert tiny.compiled.forward([1, 2]).shape == (2, tiny.cfg.vocab_size)  # still usable


CFG = Qwen2Config.from_dict(synthetic_config())


@pytest.fixture(scope="module")
def full_program() -> loop.ProgramOp:
    module = lower_to_loop(build_qwen2(CFG, Qwen2GraphOptions(last_only=True)))
    return next(op for op in module.ops if isinstance(op, loop.ProgramOp))


@pytest.mark.parametrize(("seq", "past"), [(1, 0), (1, 1), (1, 511), (7, 0), (16, 37)])
def test_arena_never_overlaps_live_buffers(full_program: loop.ProgramOp, seq: int,
                                           past: int) -> None:
    temps = temp_buffers(full_program)
    at = {"seq": seq, "past": past}
    bufs = [Buffer(t.size.evaluate(at), t.first, t.last) for t in temps]
    plan = plan_arena(bufs)
    check_plan(bufs, plan)  # raises on any overlap of two live buffers
    assert plan.size >= plan.peak_live_bytes
    assert plan.size * 20 < plan.total_bytes  # far smaller than one buffer each


@pytest.fixture(scope="module")
def full(full_snapshot: Path) -> Engines:
    return Engines(full_snapshot, last_only=True)


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize("key", list(PROMPTS))
def test_full_size_compiled_matches_transformers(full: Engines, key: str) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    hf = transformers.Qwen2ForCausalLM.from_pretrained(full.dir, dtype=torch.float32).eval()
    ids = prompt_ids(full.dir, key)
    ours = full.compiled.forward(ids)[-1]
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0, -1].numpy()
        gen = hf.generate(torch.tensor([ids]), max_new_tokens=24, min_new_tokens=24,
                          do_sample=False, pad_token_id=0, repetition_penalty=1.0,
                          temperature=None, top_k=None, top_p=None)[0, len(ids):].tolist()
    assert np.abs(ours - ref).max() <= 1e-3
    assert full.compiled.greedy(ids, 24) == gen


def test_profile_entry_times_every_launch_and_computes_the_same(tiny: Engines) -> None:
    ids = np.array(prompt_ids(tiny.dir, "france"), np.int64)
    past = np.zeros((2, 2, 0, 16), np.float32)
    inputs = {"token_ids": ids, "past_keys": past, "past_values": past}
    outputs, timings = tiny.program.profile(inputs)
    assert len(timings) == tiny.program.launches
    assert all(ns >= 0 for _, ns in timings)
    assert sum(ns for _, ns in timings) > 0
    ref = tiny.program.run(inputs)
    for name in ref:
        np.testing.assert_array_equal(outputs[name].view(np.uint8), ref[name].view(np.uint8))
