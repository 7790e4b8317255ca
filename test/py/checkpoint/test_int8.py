"""spec §5's int8 weight format (``checkpoint.int8.quantize_rows``).

Claims: bit for bit the tests' reference (``_int8_reference.quantize_rows``,
written from the spec alone) on random rows, all-zero rows (scale 1.0),
constant rows, tiny (subnormal) and huge magnitudes, rows that put ``w / scale``
on and next to the 0.5 rounding boundaries, and full-size rows of the synthetic
model's largest matrices (the embedding and down_proj: the row blocks'
boundaries included); the values stay in [-127, 127] and dequantize to within
half a step; bad input is a one-line ``Int8FormatError``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _int8_reference import quantize_rows as reference

from nanocompile.checkpoint import int8, synth
from nanocompile.checkpoint.config import Qwen2Config
from nanocompile.checkpoint.int8 import Int8FormatError, quantize_rows
from nanocompile.checkpoint.safetensors import bf16_to_f32
from nanocompile.checkpoint.synth import synthetic_config


def _same(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``quantize_rows(w)``, checked bitwise against the reference."""
    q, scale = quantize_rows(w)
    want_q, want_scale = reference(w)
    assert (q.dtype, scale.dtype) == (np.int8, np.float32)
    assert (q.shape, scale.shape) == (w.shape, w.shape[:1])
    np.testing.assert_array_equal(q, want_q)
    np.testing.assert_array_equal(scale.view(np.uint32), want_scale.view(np.uint32))
    return q, scale


def test_random_rows() -> None:
    rng = np.random.default_rng(0)
    for shape, sigma in (((64, 896), 0.03), ((7, 33), 1.0), ((3, 1), 5.0), ((1, 4864), 1e-3)):
        w = (rng.standard_normal(shape) * sigma).astype(np.float32)
        q, scale = _same(w)
        assert np.abs(q.astype(np.int32)).max() <= 127
        assert (np.abs(q).max(axis=1) == 127).all()  # the peak of each row maps to ±127
        err = np.abs(q.astype(np.float32) * scale[:, None] - w)
        assert (err <= scale[:, None] * np.float32(0.5 + 1e-5)).all()  # half a step


def test_zero_constant_and_signed_zero_rows() -> None:
    w = np.zeros((4, 9), np.float32)
    w[1] = -0.0
    w[2] = 3.0
    w[3] = -7.25
    q, scale = _same(w)
    assert scale[0] == scale[1] == 1.0  # an all-zero row gets 1.0
    assert (q[:2] == 0).all()
    assert (q[2] == 127).all()
    assert (q[3] == -127).all()


def test_tiny_and_huge_magnitudes() -> None:
    tiny = np.array([1e-40, -3e-41, 0.0, 5e-42, 1e-45, -2e-45], np.float32)  # subnormal
    rows = np.stack([
        tiny,
        tiny * np.float32(1e-2),  # scale underflows to 0: 0 / 0 entries are 0
        np.array([3.4e38, -3.4e38, 1.0, 0.0, -1e-30, 2e37], np.float32),
        np.full(6, np.finfo(np.float32).max, np.float32),
        np.array([1e-38, 1.17e-38, -5e-39, 0, 1e-38, 2e-38], np.float32),
    ])
    q, scale = _same(rows)
    assert (np.abs(q.astype(np.int32)) <= 127).all()
    assert np.isfinite(scale).all()


def test_half_boundaries() -> None:
    """A peak of 127 gives scale 1.0 (q = w exactly) and 254 gives 2.0: the values
    put q on k + 0.5 (rounds away from zero), one ulp below it, and 0.49999997
    (where |q| + 0.5 rounds up to 1.0 in f32: 1, as spec §5's f32 formula says)."""
    ks = np.arange(0, 127, dtype=np.float32)
    half = ks + np.float32(0.5)
    below = np.nextafter(half, np.float32(0))
    above = np.nextafter(half, np.float32(200))
    cases = np.concatenate([half, below, above, [0.49999997, 0.5, 126.5, 126.49999]])
    cases = cases.astype(np.float32)
    for peak in (127, 254):
        row = np.concatenate([[peak], cases * np.float32(peak / 127)]).astype(np.float32)
        w = np.stack([row, -row])
        q, scale = _same(w)
        assert scale[0] == np.float32(peak / 127)
        np.testing.assert_array_equal(q[1], -q[0])  # symmetric: no zero point
    q, _ = _same(np.array([[127, 0.5, 1.5, 2.5, -0.5, 0.49999997, 126.5]], np.float32))
    assert q.tolist() == [[127, 1, 2, 3, -1, 1, 127]]  # half away from zero


def _synthetic_rows(name: str, shape: tuple[int, int], rows: int) -> np.ndarray:
    """The first ``rows`` rows of the full-size synthetic model's tensor ``name``."""
    generator = synth._Generator(Qwen2Config.from_dict(synthetic_config()), seed=0)
    need, parts = rows * shape[1], []
    for chunk in generator.chunks(name, shape):
        parts.append(bf16_to_f32(chunk).ravel())
        need -= chunk.size
        if need <= 0:
            break
    return np.concatenate(parts)[:rows * shape[1]].reshape(rows, shape[1])


@pytest.mark.parametrize(("name", "shape"), [
    ("model.embed_tokens.weight", (151936, 896)),
    ("model.layers.0.mlp.down_proj.weight", (896, 4864)),
])
def test_full_size_synthetic_rows(name: str, shape: tuple[int, int],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    rows = 3 * int8.ROWS_ELEMENTS // shape[1] + 5  # three row blocks and a partial one
    w = _synthetic_rows(name, shape, min(rows, shape[0]))
    _same(w)
    monkeypatch.setattr(int8, "ROWS_ELEMENTS", 1)  # a block per row: the same values
    _same(w)


def test_input_is_not_changed() -> None:
    w = np.random.default_rng(1).standard_normal((5, 40)).astype(np.float32)
    before = w.copy()
    quantize_rows(w)
    np.testing.assert_array_equal(w, before)


@pytest.mark.parametrize(("w", "message"), [
    (np.zeros(4, np.float32), r"expected a matrix \[N, K\] to quantize, got shape \[4\]"),
    (np.zeros((2, 3), np.float64), "expected f32 values to quantize, got float64"),
    (np.zeros((2, 3), np.uint16), "expected f32 values to quantize, got uint16"),
    (np.array([[1, 2], [np.nan, 1]], np.float32), "row 1 has a NaN or an infinity"),
    (np.array([[1, 2], [3, 4], [1, -math.inf]], np.float32), "row 2 has a NaN or an infinity"),
])
def test_bad_input_is_one_line(w: np.ndarray, message: str) -> None:
    with pytest.raises(Int8FormatError, match=message) as info:
        quantize_rows(w)
    assert "\n" not in str(info.value)
