"""Prefix reuse (issue 19): a generation continues from the cached keys and
values of the last one's shared prefix, with the same bits as a fresh
prefill, and only one generation at a time holds the kept cache."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from nanocompile import SamplingParams, load
from nanocompile.api import Model
from nanocompile.backend.runtime import CompiledBackend
from nanocompile.checkpoint.snapshot import Snapshot
from nanocompile.compiler import compile_program
from nanocompile.inference.engine import Engine, SnapshotWeights
from nanocompile.inference.prefix import PrefixCache, common_prefix
from nanocompile.interpreter import InterpreterBackend
from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2


def test_common_prefix() -> None:
    assert common_prefix([], [1]) == 0
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix([1, 2], [1, 2, 3]) == 2
    assert common_prefix([5], [1]) == 0


@pytest.fixture(scope="module")
def engines(tiny_snapshot: Path) -> dict[str, Engine]:
    snap = Snapshot.open(tiny_snapshot)
    weights = SnapshotWeights(snap, "bf16")
    out = {}
    for last_only in (False, True):
        graph = build_qwen2(snap.config, Qwen2GraphOptions(weights="bf16", kv="state",
                                                           last_only=last_only))
        out[f"c-{'last' if last_only else 'all'}"] = Engine(
            snap.config, CompiledBackend(compile_program(graph, weights, schedule=True)),
            chunk=5, kv="state")
    graph = build_qwen2(snap.config, Qwen2GraphOptions(weights="bf16", kv="state"))
    out["interpreter"] = Engine(snap.config, InterpreterBackend(graph, weights, exact=True),
                                chunk=5, kv="state")
    return out


@pytest.mark.parametrize("name", [
    "c-all",
    # the non-slow suite's 3-minute budget; the full suite runs it (c-all: the same reuse)
    pytest.param("interpreter", marks=pytest.mark.slow),
])
def test_reused_prefix_gives_a_fresh_prefills_bits(engines: dict[str, Engine],
                                                   name: str) -> None:
    engine = engines[name]
    rng = np.random.default_rng(3)
    first = [int(t) for t in rng.integers(10, 5000, 13)]
    second = first[:9] + [int(t) for t in rng.integers(10, 5000, 7)]
    prefix = PrefixCache(engine)
    lease = prefix.take(first, 20)
    assert lease.reused == 0
    engine.forward(first, lease.cache)
    prefix.keep(lease, first)
    assert prefix.ids == first
    lease = prefix.take(second, 20)
    assert lease.reused == 9
    assert lease.cache.length == 9
    got = engine.forward(second[9:], lease.cache)
    prefix.keep(lease, second)
    want = engine.forward(second, engine.new_cache(20))
    np.testing.assert_array_equal(got.view(np.uint32), want[9:].view(np.uint32))


def test_a_repeated_prompt_runs_its_last_token_again(engines: dict[str, Engine]) -> None:
    engine = engines["c-last"]
    prompt = [11, 12, 13, 14, 15, 16]
    prefix = PrefixCache(engine)
    lease = prefix.take(prompt, 8)
    want = engine.forward(prompt, lease.cache)
    prefix.keep(lease, prompt)
    lease = prefix.take(prompt, 8)
    assert lease.reused == len(prompt) - 1  # the last token's logits choose the next
    got = engine.forward(prompt[-1:], lease.cache)
    prefix.keep(lease, prompt)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_a_larger_capacity_grows_the_cache_and_keeps_the_prefix(
        engines: dict[str, Engine]) -> None:
    engine = engines["c-all"]
    prompt = list(range(100, 112))
    prefix = PrefixCache(engine, limit=40)
    lease = prefix.take(prompt, 12)
    engine.forward(prompt, lease.cache)
    prefix.keep(lease, prompt)
    old = prefix.cache
    assert old is not None
    longer = prompt + list(range(200, 210))
    lease = prefix.take(longer, 30)
    assert lease.cache is not old
    assert lease.cache.capacity == 30  # twice 12 is too small: the need; the limit caps growth
    assert lease.reused == 12
    np.testing.assert_array_equal(lease.cache.keys[:, :, :12], old.keys[:, :, :12])
    got = engine.forward(longer[12:], lease.cache)
    prefix.keep(lease, longer)
    want = engine.forward(longer, engine.new_cache(30))
    np.testing.assert_array_equal(got.view(np.uint32), want[12:].view(np.uint32))


def test_a_held_cache_is_not_shared(engines: dict[str, Engine]) -> None:
    engine = engines["c-last"]
    prefix = PrefixCache(engine)
    lease = prefix.take([1, 2, 3], 8)
    engine.forward([1, 2, 3], lease.cache)
    other = prefix.take([1, 2, 3, 4], 8)  # the first generation still holds it
    assert other.reused == 0
    assert other.cache is not lease.cache
    prefix.keep(other, [1, 2, 3, 4])  # not the kept cache's lease: no effect
    prefix.keep(lease, [1, 2, 3])
    assert prefix.take([1, 2, 3, 4], 8).reused == 3


@pytest.fixture(scope="module")
def model(tiny_snapshot: Path) -> Model:
    return load(tiny_snapshot)


def test_generate_reuses_the_prefix_with_the_same_tokens(model: Model) -> None:
    sampling = SamplingParams(temperature=0.8, top_k=40, seed=7)
    model.reuse_prefix = False
    fresh = [model.generate(p, max_tokens=6, sampling=sampling)
             for p in ("The capital of France is", "The capital of France is Paris, and")]
    model.reuse_prefix = True
    model.prefix_cache.clear()
    reused = [model.generate(p, max_tokens=6, sampling=sampling)
              for p in ("The capital of France is", "The capital of France is Paris, and")]
    assert [r.token_ids for r in reused] == [r.token_ids for r in fresh]
    assert reused[0].cached_prompt_tokens == 0
    assert reused[1].cached_prompt_tokens == reused[0].prompt_tokens
    assert fresh[1].cached_prompt_tokens == 0


def test_a_chats_next_turn_reuses_the_history(model: Model) -> None:
    model.prefix_cache.clear()
    history = [{"role": "user", "content": "Name a colour."}]
    first = model.chat(history, max_tokens=5)
    history += [{"role": "assistant", "content": first.text},
                {"role": "user", "content": "And another?"}]
    second = model.chat(history, max_tokens=5)
    assert second.cached_prompt_tokens >= first.prompt_tokens
    model.reuse_prefix = False
    try:
        again = model.chat(history, max_tokens=5)
    finally:
        model.reuse_prefix = True
    assert again.token_ids == second.token_ids
    assert again.cached_prompt_tokens == 0


def test_generations_on_two_threads_each_get_their_tokens(model: Model) -> None:
    prompts = ["One two three", "One two three four five"]
    model.reuse_prefix = False
    want = [model.generate(p, max_tokens=8).token_ids for p in prompts]
    model.reuse_prefix = True
    got: dict[int, list[int]] = {}

    def run(i: int) -> None:
        for _ in range(3):
            got.setdefault(i, [])
            got[i] = model.generate(prompts[i], max_tokens=8).token_ids

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [got[0], got[1]] == want
