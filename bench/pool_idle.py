"""Why a lone 2-thread matmul call barely scales here: an experiment.

``python -m bench.pool_idle`` compiles q_proj (896 -> 896, 64 rows) with the
default schedules and times one call at 1 and 2 pool threads after four
kinds of pause: none (calls back to back), a 2 ms busy-wait on the calling
thread, an OpenBLAS call at 2 threads, and a 100 ms sleep. Medians of the
last 20 of 25 calls, milliseconds. It is a diagnostic, not a benchmark:
nothing is recorded.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np


def _program() -> tuple[object, np.ndarray, np.ndarray]:
    from nanocompile.compiler import compile_program
    from nanocompile.frontend.composites import linear
    from nanocompile.frontend.tensor import GraphBuilder

    k = n = 896
    gb = GraphBuilder("mm")
    x = gb.input("x", "f32", ["seq", k])
    gb.output("y", linear(x, gb.weight("w", [n, k]), gb.weight("b", [n])))
    rng = np.random.default_rng(0)
    weights = {"w": rng.standard_normal((n, k)).astype(np.float32),
               "b": rng.standard_normal(n).astype(np.float32)}
    program = compile_program(gb.finish_module(), weights, schedule=True)
    return program, rng.standard_normal((64, k)).astype(np.float32), weights["w"]


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def main() -> None:
    import threadpoolctl

    program, x, w = _program()
    pauses: dict[str, Callable[[], object]] = {
        "back to back": lambda: None,
        "2 ms busy-wait": lambda: _busy(0.002),
        "an OpenBLAS call (2 threads)": lambda: x @ w.T,
        "100 ms sleep": lambda: time.sleep(0.1),
    }
    print(f"{'before each call':<30} {'1 thread':>9} {'2 threads':>10}")
    with threadpoolctl.threadpool_limits(limits=2):
        for label, pause in pauses.items():
            medians = []
            for threads in (1, 2):
                program.set_threads(threads)  # type: ignore[attr-defined]
                times = []
                for _ in range(25):
                    pause()
                    start = time.perf_counter()
                    program.run({"x": x})  # type: ignore[attr-defined]
                    times.append(time.perf_counter() - start)
                medians.append(statistics.median(times[5:]) * 1e3)
            print(f"{label:<30} {medians[0]:9.3f} {medians[1]:10.3f}")


if __name__ == "__main__":
    main()
