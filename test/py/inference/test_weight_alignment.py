"""Widened f32 weights start on a cache line (``F32Weights``).

numpy's large arrays start 16 bytes into a page, so before this every row of
a widened weight matrix began 16, 32 or 48 bytes into a cache line and every
64-byte AVX-512 load of it read two lines: measured on a Zen 5 (1 thread,
128-token prefill, ``bench profile``), gate/up took 419 ms per step
misaligned and 356 ms aligned. The copy must keep every bit.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nanocompile.backend.runtime import VECTOR_ALIGNMENT, allocate_aligned
from nanocompile.checkpoint.snapshot import Snapshot
from nanocompile.inference.engine import F32Weights, SnapshotWeights


def test_every_widened_weight_is_aligned_and_exact(tiny_snapshot: Path) -> None:
    snapshot = Snapshot.open(tiny_snapshot)
    weights = F32Weights(snapshot)
    assert len(weights) > 0
    for name in weights:
        array = weights[name]
        assert snapshot.dtype(name) != "F32"  # the tiny snapshot: every tensor widened
        assert array.ctypes.data % VECTOR_ALIGNMENT == 0, name
        assert array.flags.c_contiguous
        assert snapshot.dtype(name) == "BF16"
        wide = snapshot.raw(name).astype(np.uint32) << np.uint32(16)  # bf16: the high half
        np.testing.assert_array_equal(array.view(np.uint32), wide)
    # the bf16 format's widened tensors come from the same cache
    bf16 = SnapshotWeights(snapshot, "bf16")
    for name in bf16:
        if bf16[name].dtype == np.float32:
            assert bf16[name].ctypes.data % VECTOR_ALIGNMENT == 0, name


def test_allocate_aligned_shapes_and_offsets() -> None:
    for shape in [(3,), (5, 7), (0,), (2, 3, 4)]:
        for alignment in (16, 64, 4096):
            a = allocate_aligned("a test array", shape, np.float32, alignment)
            assert a.shape == shape
            assert a.dtype == np.float32
            assert a.size == 0 or a.ctypes.data % alignment == 0  # empty: no data to place
            a[...] = 1.5  # writable, no overlap trouble
