"""``torch-compile``: the ``torch`` engine with its forward under ``torch.compile``.

The model is the one :func:`bench.engines._build_torch` loads (transformers
``Qwen2ForCausalLM``, float32, the same ``DynamicCache`` and ``logits_to_keep=1``
calls); only ``forward`` is replaced by ``torch.compile(forward, dynamic=True)``
(mode "default", the inductor backend). The choices, checked on torch 2.13.0
(CPU) and transformers 5.24:

* **Dynamic shapes** (``dynamic=True``): sequence and cache lengths are
  symbolic, so a generation compiles three graphs (the prefill, and two for
  decode steps: the first step's cache strides differ from later ones) and
  then no more: neither another token nor another prompt length recompiles.
  ``fail_on_recompile_limit_hit`` makes a run that would recompile on every
  token raise (the bench then drops the engine) instead of falling back to
  eager behind our back; :meth:`details` records the graphs compiled at build
  and in total (equal when the timed rounds compiled nothing).
* **Threads**: dynamo guards on ``torch.get_num_threads()``, so every thread
  count gets its own three graphs; the build compiles them for each of the
  run's thread counts (``Shared.thread_counts``), so no timed round compiles.
  ``cpp.dynamic_threads`` makes inductor's generated C++ kernels ask OpenMP
  for the thread count at run time instead of baking one in, which also lets
  the second thread count reuse inductor's cached code.
* **Compile time** is paid in the build, by a warm-up at each thread count
  (4 tokens after a 16-token prompt, then a 5-token prefill). Each is bounded
  by ``budget`` seconds (``bench run --compile-budget``, default 180): past it
  (a SIGALRM in the main thread, else checked when the warm-up returns) or on
  any compile error the engine raises ``EngineUnavailable`` and the run skips
  it. The seconds per thread count go into the record. Measured on this
  2-vCPU machine (full-size model, one thread): ~127 s with inductor's
  on-disk cache (``/tmp/torchinductor_$USER``) empty, ~61 s with it warm; the
  tiny model ~25 s.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from bench.engines import EngineUnavailable

WARMUP_DECODE = 4
WARMUP_SECOND_PROMPT = 5


class CompileTimeout(Exception):
    """The compile budget ran out (raised from the SIGALRM handler)."""


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[bool]:
    """Raise :class:`CompileTimeout` in the block after ``seconds`` (main thread only).

    Yields whether the alarm is armed; elsewhere the caller checks the clock.
    """
    if threading.current_thread() is not threading.main_thread():
        yield False
        return

    def expire(signum: int, frame: Any) -> None:
        raise CompileTimeout(f"over {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _compiled_graphs() -> int:
    """Graphs dynamo has compiled in this process (all compiled functions)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


class TorchCompiledModel:
    """A bench ``Model``: the eager torch engine, its forward compiled by inductor.

    Compiled in the constructor for every count in ``thread_counts`` (default:
    the current ``torch.get_num_threads()``), each within ``budget`` seconds.
    """

    def __init__(self, eager: Any, warmup_prompt: Sequence[int], *, budget: float,
                 thread_counts: Sequence[int] = ()) -> None:
        import torch
        import torch._dynamo.config as dynamo_config
        import torch._inductor.config as inductor_config

        if budget <= 0:
            raise ValueError(f"compile budget must be positive, got {budget}")
        self.eager = eager
        self.budget = budget
        self.thread_counts = tuple(thread_counts) or (torch.get_num_threads(),)
        inductor_config.cpp.dynamic_threads = True  # the thread count is read at run time
        dynamo_config.fail_on_recompile_limit_hit = True  # never a silent eager fallback
        self._graphs_before = _compiled_graphs()
        eager.forward = torch.compile(eager.model.forward, dynamic=True)
        self.compile_seconds: dict[str, float] = {}
        previous = torch.get_num_threads()
        try:
            for threads in self.thread_counts:
                torch.set_num_threads(threads)
                self.compile_seconds[str(threads)] = self._compile(list(warmup_prompt), threads)
        finally:
            torch.set_num_threads(previous)
        self.graphs_at_build = _compiled_graphs() - self._graphs_before

    def _compile(self, prompt: list[int], threads: int) -> float:
        """Warm up (compile) at the current thread count within the budget; the seconds."""
        import torch

        start = time.perf_counter()
        try:
            with deadline(self.budget):
                self._warm_up(prompt)
        except Exception as exc:
            seconds = time.perf_counter() - start
            torch._dynamo.reset()  # drop whatever was half compiled
            if _caused_by_timeout(exc) or seconds >= self.budget:
                raise EngineUnavailable(
                    f"torch.compile did not finish within the {self.budget:.0f} s budget at "
                    f"{threads} thread{'s' if threads > 1 else ''} (--compile-budget)") from None
            first = str(exc).splitlines()[0] if str(exc) else ""
            raise EngineUnavailable(f"torch.compile failed after {seconds:.0f} s: "
                                    f"{type(exc).__name__}: {first}") from None
        seconds = time.perf_counter() - start
        if seconds > self.budget:  # the alarm could not be armed (not the main thread)
            torch._dynamo.reset()
            raise EngineUnavailable(f"torch.compile took {seconds:.0f} s at {threads} thread"
                                    f"{'s' if threads > 1 else ''}, over the {self.budget:.0f} s "
                                    "budget (--compile-budget)")
        return seconds

    def _warm_up(self, prompt: list[int]) -> None:
        """Compile every graph a generation needs: prefill, growing-cache decode steps."""
        state = self.new_state(len(prompt) + WARMUP_DECODE)
        token = self.next_token(prompt, state)
        for _ in range(WARMUP_DECODE - 1):
            token = self.next_token([token], state)
        short = prompt[:WARMUP_SECOND_PROMPT]  # another prompt length: must not recompile
        self.next_token(short, self.new_state(len(short)))

    def details(self) -> dict[str, Any]:
        """Facts for the bench record: compile time and graphs compiled."""
        return self.eager.details() | {
            "compile": "torch.compile(model.forward, dynamic=True), mode default, inductor",
            "compile_seconds_by_threads": self.compile_seconds,
            "compile_budget_seconds": self.budget,
            "graphs_compiled_at_build": self.graphs_at_build,
            "graphs_compiled_total": _compiled_graphs() - self._graphs_before,
            "inductor_dynamic_threads": True,
        }

    def new_state(self, capacity: int) -> Any:
        """A fresh transformers ``DynamicCache``."""
        return self.eager.new_state(capacity)

    def next_token(self, ids: Sequence[int], state: Any) -> int:
        """Run ``ids`` through the compiled forward; the last position's argmax."""
        return int(self.eager.next_token(ids, state))


def _caused_by_timeout(exc: BaseException) -> bool:
    """Dynamo wraps exceptions raised while compiling; look through the chain."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, CompileTimeout):
            return True
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return False
