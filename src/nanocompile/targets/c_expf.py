"""C forms of the model's ``exp`` (``ir/expf.py``): scalar ``nc_expf``, SSE4.1
``nc_expf4``, AVX2 ``nc_expf8`` and AVX-512F ``nc_expf16``.

Each performs the algorithm's f32 operations in its order, one intrinsic per
operation (``-ffp-contract=off``: no FMA), so every lane gives the bits of the
scalar form and of :func:`nanocompile.ir.expf.expf`. The clamps are written as
the scalar ``x < HI ? x : HI``, ``c > LO ? c : LO``, which ``minps``/``maxps``
compute exactly, NaN included (both return their second operand when a
comparison is unordered); a NaN input is then selected back (``x != x``,
``_CMP_UNORD_Q``). ``floor`` is ``_mm_floor_ps`` / ``_mm256_floor_ps`` /
``_mm512_roundscale_ps`` toward -inf; the portable scalar form (no SSE4.1)
truncates and subtracts one where that rounded up (the clamped ``t`` lies in
[-150, 129]; gcc would call ``floorf``): the same integer either way. The
integer steps (truncation of the integral ``n``, the arithmetic shift, the
exponent bits) are exact in every form.

The AVX-512F form scales by ``_mm512_scalef_ps(y, n)`` (``y * 2^n`` rounded
once) instead: the same bits, because the two-step product rounds once too.
``y`` lies in [0.7, 1.5) and ``n1, n2 >= -75``, so ``y * 2^n1`` is a normal
float, exact; only the second multiply rounds, and it rounds the exact
``y * 2^n`` (to a subnormal, zero or infinity alike, round to nearest even,
as ``vscalefps`` does with the MXCSR's default). One instruction for nine:
the exp 1.18x faster in a loop on the Zen 4 (6.36 -> 5.39 ns per 16 lanes),
and equal to the two-step form on all 2^32 inputs (a slow test,
``test/py/ir/test_expf.py``).
"""

from __future__ import annotations

import re

from nanocompile.ir import expf as E

_K = {"HI": E.HI, "LO": E.LO, "LOG2E": E.LOG2E, "HALF": E.HALF, "ONE": E.ONE,
      "C1": E.C1, "C2": E.C2, **{f"P{i}": v for i, v in enumerate(E.P)}}


def _literals(text: str) -> str:
    for name in sorted(_K, key=len, reverse=True):
        text = text.replace(f"@{name}", E.c_literal(_K[name]))
    return text.replace("@BIAS", str(E.BIAS)).replace("@MBITS", str(E.MANTISSA_BITS))


_HORNER = "".join(f"  p = p * r + @P{i};\n" for i in range(1, len(E.P)))

_PORTABLE = _literals("""\
static inline float nc_pow2i(int32_t n) {
  const uint32_t u = (uint32_t)(n + @BIAS) << @MBITS;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static inline float nc_expf(float x) {
  float c = x < @HI ? x : @HI;
  c = c > @LO ? c : @LO;
  const float t = c * @LOG2E + @HALF;
  int32_t ni = (int32_t)t; /* floor(t): t lies in [-150, 129] */
  ni -= (int32_t)((float)ni > t);
  const float n = (float)ni;
  const float r = (c - n * @C1) - n * @C2;
  float p = @P0;
""" + _HORNER + """\
  const float y = (p * (r * r) + r) + @ONE;
  const int32_t n1 = ni >> 1, n2 = ni - n1;
  const float out = (y * nc_pow2i(n1)) * nc_pow2i(n2);
  return (x != x) ? x : out;
}
""")


def _scalar() -> str:
    """The scalar prelude's ``exp``: with SSE4.1 (every CPU this project runs on)
    lane 0 of ``nc_expf4`` (branch-free: gcc turns the portable form's clamps
    into branches on the argument), else the portable C form, the same bits."""
    return ("/* the model's exp (ir/expf.py): f32 operations in a fixed order, no FMA */\n"
            "#if defined(__SSE4_1__)\n#include <immintrin.h>\n" + vector(4)
            + "static inline float nc_expf(float x) {\n"
              "  return _mm_cvtss_f32(nc_expf4(_mm_set_ss(x)));\n}\n"
              "#else\n" + _PORTABLE + "#endif\n")


_VECTOR = """\
static inline <VT> nc_expf<W>(<VT> x) {
  const <VT> c = <PFX>_max_ps(<PFX>_min_ps(x, <PFX>_set1_ps(@HI)), <PFX>_set1_ps(@LO));
  const <VT> n = <FLOOR_OPEN><PFX>_add_ps(<PFX>_mul_ps(c, <PFX>_set1_ps(@LOG2E)),
                                      <PFX>_set1_ps(@HALF))<FLOOR_CLOSE>;
  const <VT> r = <PFX>_sub_ps(<PFX>_sub_ps(c, <PFX>_mul_ps(n, <PFX>_set1_ps(@C1))),
                          <PFX>_mul_ps(n, <PFX>_set1_ps(@C2)));
  <VT> p = <PFX>_set1_ps(@P0);
""" + "".join(f"  p = <PFX>_add_ps(<PFX>_mul_ps(p, r), <PFX>_set1_ps(@P{i}));\n"
              for i in range(1, len(E.P))) + """\
  const <VT> y = <PFX>_add_ps(<PFX>_add_ps(<PFX>_mul_ps(p, <PFX>_mul_ps(r, r)), r),
                              <PFX>_set1_ps(@ONE));
<SCALE>  return <SELECT_NAN>;
}
"""

_TWO_POWERS = """\
  const <IT> ni = <PFX>_cvttps_epi32(n);
  const <IT> n1 = <PFX>_srai_epi32(ni, 1);
  const <IT> n2 = <PFX>_sub_epi32(ni, n1);
  const <IT> b = <PFX>_set1_epi32(@BIAS);
  const <VT> s1 = <PFX>_castsi<BITS>_ps(<PFX>_slli_epi32(<PFX>_add_epi32(n1, b), @MBITS));
  const <VT> s2 = <PFX>_castsi<BITS>_ps(<PFX>_slli_epi32(<PFX>_add_epi32(n2, b), @MBITS));
  const <VT> out = <PFX>_mul_ps(<PFX>_mul_ps(y, s1), s2);
"""

_SCALEF = """\
  const <VT> out = <PFX>_scalef_ps(y, n); /* (y * 2^n1) * 2^n2 in one step: the same bits */
"""
"""AVX-512F's ``vscalefps``: ``y * 2^floor(n)`` rounded once, in place of the
nine integer and multiply steps of ``(y * 2^n1) * 2^n2`` (module docstring)."""


def vector(width: int) -> str:
    """``nc_expf{width}`` for 4 (SSE4.1), 8 (AVX2) or 16 (AVX-512F) lanes."""
    if width == 16:
        vt, it, pfx, bits = "__m512", "__m512i", "_mm512", "512"
        floor = ("_mm512_roundscale_ps(", ", _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)")
        select = "_mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), out, x)"
    elif width in (4, 8):
        vt, it, pfx, bits = {4: ("__m128", "__m128i", "_mm", "128"),
                             8: ("__m256", "__m256i", "_mm256", "256")}[width]
        floor = (f"{pfx}_floor_ps(", ")")
        select = f"{pfx}_blendv_ps(out, x, {pfx}_cmp_ps(x, x, _CMP_UNORD_Q))"
    else:
        raise ValueError(f"nc_expf has no {width}-lane form (4, 8 or 16)")
    fields = {"VT": vt, "IT": it, "PFX": pfx, "BITS": bits, "W": str(width),
              "FLOOR_OPEN": floor[0], "FLOOR_CLOSE": floor[1], "SELECT_NAN": select}
    text = re.sub(r"<([A-Z_]+)>", lambda m: fields[m.group(1)],
                  _VECTOR.replace("<SCALE>", _SCALEF if width == 16 else _TWO_POWERS))
    return _literals(text)


SCALAR = _scalar()
"""``nc_expf`` (and, with SSE4.1, ``nc_expf4``), for ``targets/c.py``'s prelude."""
