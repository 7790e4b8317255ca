"""A ``Model`` used from several threads at once (issue 14, point 1).

One compiled program owns one arena, so calls from several threads take turns
(``CompiledProgram``'s lock); compiling on first use happens once however many
threads ask (``Model``'s lock). Each thread's results must be exactly what the
same calls give one after another: bitwise, for different prompt lengths (the
arena is re-planned, and before the lock was reallocated under a running
kernel: a segfault) and for equal ones (the same arena shared: wrong logits
without an error).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from nanocompile import api

ROUNDS = 6


@pytest.fixture(scope="module")
def model(tiny_snapshot: Path) -> api.Model:
    return api.load(tiny_snapshot)


def _prompts(seed: int, lengths: tuple[int, ...]) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 151643, n).tolist() for n in lengths]


def _in_threads(work: list[Callable[[], np.ndarray]]) -> list[list[np.ndarray]]:
    """Run each callable ROUNDS times, each in its own thread, started together."""
    results: list[list[np.ndarray]] = [[] for _ in work]
    errors: list[BaseException] = []
    start = threading.Barrier(len(work))

    def body(i: int) -> None:
        try:
            start.wait()
            for _ in range(ROUNDS):
                results[i].append(work[i]())
        except BaseException as e:  # reported in the main thread
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(len(work))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


@pytest.mark.parametrize("lengths", [(7, 23), (11, 11), (1, 30, 5)],
                         ids=["different", "equal", "three"])
def test_logits_from_several_threads_equal_sequential(model: api.Model,
                                                      lengths: tuple[int, ...]) -> None:
    prompts = _prompts(sum(lengths), lengths)
    want = [model.logits(p) for p in prompts]
    got = _in_threads([lambda p=p: model.logits(p) for p in prompts])
    for prompt, runs, expected in zip(prompts, got, want, strict=True):
        for logits in runs:
            assert np.array_equal(logits.view(np.uint32), expected.view(np.uint32)), \
                f"{len(prompt)}-token prompt: logits differ from the sequential run"


def test_generation_from_several_threads_equals_sequential(model: api.Model) -> None:
    """Greedy generation (cached steps: a prompt, then one token at a time) in two
    threads at once: the same tokens as one after the other."""
    prompts = _prompts(1, (5, 17))
    want = [model.generate_ids(p, max_tokens=6).token_ids for p in prompts]
    got = _in_threads([lambda p=p: model.generate_ids(p, max_tokens=6).token_ids
                       for p in prompts])
    for runs, expected in zip(got, want, strict=True):
        assert all(r == expected for r in runs)


def test_first_use_from_several_threads_compiles_once(tiny_snapshot: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Three threads ask for the all-position graph before it exists: one compiles."""
    fresh = api.load(tiny_snapshot)
    compiles: list[object] = []
    real = api.compile_program

    def counting(*args: object, **kwargs: object) -> object:
        compiles.append(args)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(api, "compile_program", counting)
    prompt = _prompts(2, (9,))[0]
    got = _in_threads([lambda: fresh.logits(prompt)] * 3)
    assert len(compiles) == 1
    assert all(np.array_equal(r, got[0][0]) for runs in got for r in runs)
