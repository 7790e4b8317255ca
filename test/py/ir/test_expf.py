"""The model's ``exp`` (``ir/expf.py``): its accuracy against the exact
exponential, and its C forms (``targets/c_expf.py``) bit for bit against the
NumPy definition.

Claims:

* bitwise: the scalar ``nc_expf`` (lane 0 of ``nc_expf4`` with SSE4.1, and its
  portable C form, built here with ``-march=x86-64``), SSE4.1 ``nc_expf4``, AVX2 ``nc_expf8`` and
  AVX-512 ``nc_expf16`` (each where the CPU has its flags, else skipped with the
  reason) give :func:`expf`'s bits on every 509th f32 bit pattern (8.4 M
  inputs: NaNs of both signs and payloads, infinities, subnormals, both
  zeros), every f32 within 4,096 ulps of the overflow and underflow
  thresholds and of 0, and the edge values;
* accuracy: under 1 ulp wherever the result is a normal float (measured max
  0.955 on this sweep, 0.954 on every 127th pattern; libm's ``expf`` 0.502
  there), and within 2^-149 (the smallest subnormal) of the exact value where
  it is subnormal;
* special values: a NaN keeps its bits, ``exp(+-0) = 1``, ``+inf`` and every
  ``x > 88.7228317`` give ``+inf``, ``-inf`` and ``x < -103.98`` give ``+0``.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from nanocompile.ir.expf import expf
from nanocompile.targets.arch import cpu_flags
from nanocompile.targets.c import PRELUDE
from nanocompile.targets.c_vector import vector_prelude

F32 = np.float32
STRIDE = 509  # every 509th bit pattern: 8.4 M inputs
OVERFLOW = F32(88.72283172607421875)  # the largest x whose exp rounds to a finite f32

HARNESS = r"""
void run1(const float *x, float *y, long n) {
  for (long i = 0; i < n; ++i) y[i] = nc_expf(x[i]);
}
#ifdef WITH_AVX2
void run4(const float *x, float *y, long n) {
  for (long i = 0; i < n; i += 4) _mm_storeu_ps(y + i, nc_expf4(_mm_loadu_ps(x + i)));
}
void run8(const float *x, float *y, long n) {
  for (long i = 0; i < n; i += 8) _mm256_storeu_ps(y + i, nc_expf8(_mm256_loadu_ps(x + i)));
}
#endif
#ifdef WITH_AVX512
void run16(const float *x, float *y, long n) {
  for (long i = 0; i < n; i += 16)
    _mm512_storeu_ps(y + i, nc_expf16(_mm512_loadu_ps(x + i)));
}
#endif
"""

FORMS = {"scalar": ("run1", ()), "portable": ("run1", ()), "sse4": ("run4", ("avx2",)),
         "avx2": ("run8", ("avx2",)), "avx512": ("run16", ("avx512f",))}


def _inputs() -> np.ndarray:
    """The sweep of the module docstring, padded to a multiple of 16 lanes."""
    strided = np.arange(0, 1 << 32, STRIDE, dtype=np.uint64).astype(np.uint32).view(F32)
    near = []
    for edge in (OVERFLOW, F32(-87.33654), F32(-103.972), F32(0.0), F32(-0.0)):
        bits = int(np.array([edge], F32).view(np.int32)[0])
        near.append((np.arange(bits - 4096, bits + 4096, dtype=np.int64) & 0xFFFFFFFF)
                    .astype(np.uint32).view(F32))
    specials = np.array([np.inf, -np.inf, np.nan, -np.nan, 89.0, -104.0, 1000.0, -1000.0,
                         np.finfo(F32).max, -np.finfo(F32).max, 1e-45, -1e-45], F32)
    payloads = np.array([0x7FC00001, 0x7F800001, 0xFFC12345, 0xFF800F00],
                        np.uint32).view(F32)  # quiet and signalling NaNs, both signs
    x = np.concatenate([strided, *near, specials, payloads])
    return np.concatenate([x, np.zeros(-len(x) % 16, F32)])


@pytest.fixture(scope="module")
def sweep() -> tuple[np.ndarray, np.ndarray]:
    x = _inputs()
    return x, expf(x)


def _build(work: Path, source: str, march: str) -> ctypes.CDLL:
    (work / "expf.c").write_text(source)
    so = work / "libexpf.so"
    subprocess.run(["gcc", "-O3", f"-march={march}", "-ffp-contract=off", "-fwrapv",
                    "-fno-math-errno", "-shared", "-fPIC", str(work / "expf.c"), "-o", str(so),
                    "-lm"], check=True, capture_output=True, text=True)
    return ctypes.CDLL(str(so))


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ctypes.CDLL]:
    """The forms built for this CPU, and (``"portable"``) the scalar form built for
    the baseline x86-64 (no SSE4.1: ``nc_expf``'s portable C)."""
    if shutil.which("gcc") is None:
        pytest.skip("no gcc on PATH")
    flags = cpu_flags()
    lanes, defines = set(), []
    if "avx2" in flags:
        lanes |= {4, 8}
        defines.append("#define WITH_AVX2\n")
    if "avx512f" in flags:
        lanes.add(16)
        defines.append("#define WITH_AVX512\n")
    source = PRELUDE + (vector_prelude(lanes) if lanes else "") + "".join(defines) + HARNESS
    return {"native": _build(tmp_path_factory.mktemp("expf"), source, "native"),
            "portable": _build(tmp_path_factory.mktemp("expf"), PRELUDE + HARNESS, "x86-64")}


@pytest.mark.parametrize("form", list(FORMS))
def test_c_form_equals_the_definition(form: str, library: dict[str, ctypes.CDLL],
                                      sweep: tuple[np.ndarray, np.ndarray]) -> None:
    function, needs = FORMS[form]
    missing = [f for f in needs if f not in cpu_flags()]
    if missing:
        pytest.skip(f"the CPU has no {', '.join(missing)}: nc_expf's {form} form untested here")
    x, want = sweep
    got = np.empty_like(x)
    pointer = ctypes.POINTER(ctypes.c_float)
    lib = library["portable" if form == "portable" else "native"]
    getattr(lib, function)(x.ctypes.data_as(pointer), got.ctypes.data_as(pointer),
                               ctypes.c_long(len(x)))
    diff = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
    assert diff.size == 0, (f"{form}: {diff.size} inputs differ, first x = "
                            f"{x[diff[:4]]!r}: got {got[diff[:4]]!r}, want {want[diff[:4]]!r}")


def test_accuracy_against_the_exact_exponential(sweep: tuple[np.ndarray, np.ndarray]) -> None:
    x, y = sweep
    finite = np.isfinite(x)
    with np.errstate(over="ignore"):
        exact = np.exp(x[finite].astype(np.float64))
    got = y[finite].astype(np.float64)
    normal = (exact >= np.finfo(F32).tiny) & (exact <= np.finfo(F32).max)
    ulp = np.spacing(exact[normal].astype(F32)).astype(np.float64)
    ulps = np.abs(got[normal] - exact[normal]) / ulp
    worst = x[finite][normal][ulps.argmax()]
    assert ulps.max() < 1.0, f"max error {ulps.max():.3f} ulp at x = {worst}"
    tiny = exact < np.finfo(F32).tiny
    assert np.abs(got[tiny] - exact[tiny]).max() <= 2.0 ** -149


def test_special_values() -> None:
    nans = np.array([0x7FC00001, 0x7F800001, 0xFFC12345], np.uint32).view(F32)
    assert np.array_equal(expf(nans).view(np.uint32), nans.view(np.uint32))
    x = np.array([0.0, -0.0, np.inf, -np.inf, 1000.0, -1000.0, -104.5], F32)
    assert expf(x).tolist() == [1.0, 1.0, np.inf, 0.0, np.inf, 0.0, 0.0]
    assert np.isinf(expf(np.nextafter(OVERFLOW, F32(np.inf), dtype=F32)))
    assert np.isfinite(expf(OVERFLOW))
    zero = expf(np.array([-104.0], F32))[0]
    assert zero == 0.0
    assert not np.signbit(zero)


EXHAUSTIVE = r"""
#include <stdio.h>
/* every f32 bit pattern through nc_expf16 (vscalefps) and, lane for lane, the
   AVX2 form's two-step scaling (y * 2^n1) * 2^n2 on each half; prints the
   count of differing lanes and the first input that differs */
int main(void) {
  long bad = 0;
  unsigned first = 0;
  for (unsigned long long u = 0; u < (1ull << 32); u += 16) {
    unsigned b[16];
    for (int j = 0; j < 16; ++j) b[j] = (unsigned)(u + j);
    const __m512 x = _mm512_castsi512_ps(_mm512_loadu_si512(b));
    const __m512 got = nc_expf16(x);
    const __m512 want = _mm512_insertf32x8(
        _mm512_castps256_ps512(nc_expf8(_mm512_castps512_ps256(x))),
        nc_expf8(_mm512_extractf32x8_ps(x, 1)), 1);
    const __mmask16 d = _mm512_cmpneq_epi32_mask(_mm512_castps_si512(got),
                                                 _mm512_castps_si512(want));
    if (d && !bad) first = (unsigned)u + (unsigned)__builtin_ctz(d);
    bad += __builtin_popcount(d);
  }
  printf("%ld %u\n", bad, first);
  return 0;
}
"""


@pytest.mark.slow
def test_avx512_scalef_equals_the_two_step_scaling_on_every_input(tmp_path: Path) -> None:
    """``nc_expf16`` scales by ``vscalefps`` (one rounding of ``y * 2^n``), the
    other forms by ``(y * 2^n1) * 2^n2``: all 2^32 inputs give the same bits
    (~7 s on the Zen 4). The AVX2 form is the reference here: the sweep above
    holds it to the NumPy definition."""
    if shutil.which("gcc") is None:
        pytest.skip("no gcc on PATH")
    missing = [f for f in ("avx2", "avx512f", "avx512dq") if f not in cpu_flags()]
    if missing:
        pytest.skip(f"the CPU has no {', '.join(missing)}: nc_expf16 untested here")
    source = tmp_path / "all.c"
    source.write_text(PRELUDE + vector_prelude({4, 8, 16}) + EXHAUSTIVE)
    binary = tmp_path / "all"
    subprocess.run(["gcc", "-O3", "-march=native", "-ffp-contract=off", "-fwrapv",
                    "-fno-math-errno", str(source), "-o", str(binary), "-lm"],
                   check=True, capture_output=True, text=True)
    out = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout
    bad, first = (int(v) for v in out.split())
    x = np.array([first], np.uint32).view(F32)[0]
    assert bad == 0, f"{bad} inputs differ, the first x = {x!r} (bits {first:#010x})"
