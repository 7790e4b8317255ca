"""The int8-dot paths of ``loop.dot4`` (spec §5 kernel B's integer core) compute
the same integers: each path's ``nc_dot4x8`` / ``nc_dot4x16`` (``targets/c_vector.py``'s
``dot_prelude``) against the scalar ``nc_dot4`` of ``targets/c.py``'s prelude and
against the formula ``sum_j (w + 128) * xq`` in plain C ``int``.

Claims, per path (skipped with the reason where this CPU lacks its flags):

* exhaustive on the products: every pair ``(xq, w)`` in [-127, 127]^2 at every byte
  position of a lane, beside the extreme values at the other three positions (the
  AVX2 path's ``vpmaddubsw`` adds products in pairs with int16 saturation: a pair
  of two products of magnitude 127 * 127, or of 128 * 127 in its ``128 * sum xq``
  half, is the largest it ever adds; both stay below 32767);
* exhaustive on 4-byte groups over the extreme values ``EXTREMES`` (7^8 groups:
  every sign and magnitude combination of the edges, 0 and +-1);
* the scalar path (``nc_dot4``, what every CPU runs) equals the formula on the same
  inputs; the formula itself is checked against NumPy here.

Also the arch module's int8-dot choice: the best path the flags allow, the
``NANOCOMPILE_INT8_DOT`` override checked against the flags.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from nanocompile.targets.arch import (
    INT8_DOT_FLAGS,
    ArchError,
    best_int8_dot,
    cpu_flags,
    host_arch,
    host_int8_dot,
    int8_dot_named,
)
from nanocompile.targets.c import PRELUDE
from nanocompile.targets.c_vector import DotPathError, dot_prelude

EXTREMES = (-127, -126, -1, 0, 1, 126, 127)
TITLES = {"scalar": "scalar", "avx2": "AVX2 (vpmaddubsw)", "avx_vnni": "AVX-VNNI",
          "avx512_vnni": "AVX512-VNNI"}

HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
static int formula(const int8_t *x, const int8_t *w) {
  int p = 0;
  for (int j = 0; j < 4; ++j) p += ((int)w[j] + 128) * (int)x[j];
  return p;
}
static long bad = 0, checked = 0;
/* the lanes of x[0..4L), w[0..4L) through the path, the scalar nc_dot4, the formula */
static void check(const int8_t *x, const int8_t *w, int lanes) {
  int32_t got[16];
#if LANES == 16
  if (lanes == 16) {
    _mm512_storeu_si512(got, nc_dot4x16(_mm512_loadu_si512(x), _mm512_loadu_si512(w)));
  } else
#endif
  {
    _mm256_storeu_si256((__m256i *)got, nc_dot4x8(_mm256_loadu_si256((const __m256i *)x),
                                                  _mm256_loadu_si256((const __m256i *)w)));
  }
  for (int l = 0; l < lanes; ++l) {
    const int want = formula(x + 4 * l, w + 4 * l);
    const int scalar = nc_dot4(nc_load_i8x4(x + 4 * l), nc_load_i8x4(w + 4 * l));
    ++checked;
    if (got[l] != want || scalar != want) {
      if (bad < 5) fprintf(stderr, "lane %d: path %d scalar %d formula %d\n", l, got[l],
                           scalar, want);
      ++bad;
    }
  }
}
int main(void) {
  static const int8_t ext[] = {EXTREMES};
  const int n = sizeof ext;
  int8_t x[64], w[64];
  int fill = 0;
  /* every (xq, w) pair at every position j, the other positions extreme values */
  for (int j = 0; j < 4; ++j)
    for (int a = -127; a <= 127; ++a)
      for (int b = -127; b <= 127; ++b) {
        const int l = fill % LANES;
        for (int i = 0; i < 4; ++i) {
          x[4 * l + i] = ext[(a + 127 + 5 * i + l) % n];
          w[4 * l + i] = ext[(b + 127 + i * 7 + 2 * l) % n];
        }
        x[4 * l + j] = (int8_t)a;
        w[4 * l + j] = (int8_t)b;
        if (++fill % LANES == 0) check(x, w, LANES);
      }
  /* every 4-byte group over the extremes: n^8 groups */
  fill = 0;
  for (long g = 0; g < (long)n * n * n * n * n * n * n * n; ++g) {
    const int l = fill % LANES;
    long r = g;
    for (int i = 0; i < 4; ++i) { x[4 * l + i] = ext[r % n]; r /= n; }
    for (int i = 0; i < 4; ++i) { w[4 * l + i] = ext[r % n]; r /= n; }
    if (++fill % LANES == 0) check(x, w, LANES);
  }
  printf("%ld %ld\n", checked, bad);
  return 0;
}
"""


def _missing(path: str) -> str | None:
    flags = cpu_flags()
    missing = [f for f in INT8_DOT_FLAGS[path] if f not in flags]
    if not missing:
        return None
    return f"the CPU has no {', '.join(missing)} ({TITLES[path]} int8-dot path untested here)"


def _params() -> list[object]:
    out = []
    for path, lanes in (("scalar", 8), ("avx2", 8), ("avx_vnni", 8), ("avx512_vnni", 8),
                        ("avx512_vnni", 16)):
        # the scalar path's vector form runs nc_dot4 per lane through __m256i: AVX2 here
        reason = _missing("avx2" if path == "scalar" else path)
        if lanes == 16 and reason is None and "avx512f" not in cpu_flags():
            reason = "the CPU has no avx512f"
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        out.append(pytest.param(path, lanes, id=f"{path}-{lanes}", marks=marks))
    return out


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc on PATH")
@pytest.mark.parametrize(("path", "lanes"), _params())
def test_every_path_computes_the_formula(path: str, lanes: int, tmp_path: Path) -> None:
    source = (PRELUDE + "#include <immintrin.h>\n" + dot_prelude({8, lanes}, path)
              + f"#define LANES {lanes}\n#define EXTREMES {', '.join(map(str, EXTREMES))}\n"
              + HARNESS)
    (tmp_path / "dot.c").write_text(source)
    exe = tmp_path / "dot"
    subprocess.run(["gcc", "-O2", "-march=native", "-ffp-contract=off", "-o", str(exe),
                    str(tmp_path / "dot.c")], check=True, capture_output=True, text=True)
    run = subprocess.run([str(exe)], check=True, capture_output=True, text=True, timeout=120)
    checked, bad = map(int, run.stdout.split())
    assert checked >= 4 * 255 * 255 + len(EXTREMES) ** 8 - lanes
    assert bad == 0, run.stderr


def test_the_formula_is_numpys() -> None:
    """The harness's formula on random groups equals NumPy's int64 sum."""
    rng = np.random.default_rng(0)
    x = rng.integers(-127, 128, (1000, 4))
    w = rng.integers(-127, 128, (1000, 4))
    want = ((w + 128) * x).sum(axis=1)
    assert abs(want).max() <= 4 * 255 * 127 < 2**24  # exact as f32 too
    assert (want == np.einsum("ij,ij->i", w + 128, x)).all()


def test_no_path_prints_what_it_cannot() -> None:
    with pytest.raises(DotPathError, match=r"prints no loop\.dot4 of 4 lanes"):
        dot_prelude({4}, "avx2")
    for path in ("avx2", "avx_vnni"):  # 16 lanes (an AVX-512 arch without VNNI): 8 twice
        for lanes in ({16}, {8, 16}):
            c = dot_prelude(lanes, path)
            assert c.count("static inline __m256i nc_dot4x8(") == 1, (path, lanes)
            assert c.count("static inline __m512i nc_dot4x16(") == 1, (path, lanes)
            assert "_mm512_inserti64x4(" in c
    with pytest.raises(DotPathError, match="unknown int8-dot path 'vnni'"):
        dot_prelude({8}, "vnni")
    assert "_mm256_dpbusd_avx_epi32" in dot_prelude({8}, "avx_vnni")
    assert "_mm256_dpbusd_epi32(" in dot_prelude({8}, "avx512_vnni")
    assert "_mm512_dpbusd_epi32" in dot_prelude({16}, "avx512_vnni")
    assert "_mm256_maddubs_epi16" in dot_prelude({8}, "avx2")


def test_the_path_from_the_flags_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    sapphire = frozenset({"avx2", "fma", "avx512f", "avx512vl", "avx_vnni", "avx512_vnni"})
    assert best_int8_dot(sapphire) == "avx512_vnni"
    assert best_int8_dot(sapphire - {"avx512vl"}) == "avx_vnni"
    assert best_int8_dot(frozenset({"avx2", "fma"})) == "avx2"  # Zen 3
    assert best_int8_dot(frozenset({"sse2"})) == "scalar"
    with pytest.raises(ArchError, match="int8-dot path 'avx_vnni' needs CPU flags avx_vnni"):
        int8_dot_named("avx_vnni", frozenset({"avx2"}))
    with pytest.raises(ArchError, match="unknown int8-dot path 'vnni'"):
        int8_dot_named("vnni", sapphire)
    monkeypatch.delenv("NANOCOMPILE_INT8_DOT", raising=False)
    monkeypatch.delenv("NANOCOMPILE_ARCH", raising=False)
    assert host_int8_dot() == best_int8_dot(cpu_flags())
    monkeypatch.setenv("NANOCOMPILE_ARCH", "avx2")  # an AVX2 CPU emulated: no EVEX vpdpbusd
    assert host_int8_dot() == best_int8_dot(cpu_flags() - {"avx512_vnni", "avx512vl"})
    monkeypatch.setenv("NANOCOMPILE_ARCH", "scalar")
    assert host_int8_dot() == "scalar"
    monkeypatch.delenv("NANOCOMPILE_ARCH")
    monkeypatch.setenv("NANOCOMPILE_INT8_DOT", "scalar")
    assert host_int8_dot() == "scalar"
    monkeypatch.setenv("NANOCOMPILE_INT8_DOT", "foo")
    with pytest.raises(ArchError, match="NANOCOMPILE_INT8_DOT: unknown int8-dot path 'foo'"):
        host_int8_dot()
    monkeypatch.setenv("NANOCOMPILE_INT8_DOT", "scalar")
    monkeypatch.setenv("NANOCOMPILE_ARCH", "scalar")
    assert host_arch().int8_dot == "scalar"  # the scalar arch: no vector loop.dot4
    if _missing("avx2") is None:
        monkeypatch.setenv("NANOCOMPILE_ARCH", "avx2")
        monkeypatch.setenv("NANOCOMPILE_INT8_DOT", "avx2")
        arch = host_arch()
        assert arch.int8_dot == "avx2"
        assert "int8_dot='avx2'" in repr(arch)  # in the program cache's key
