"""C printing of the Loop dialect's vector ops: 4 and 8 lanes of f32 as AVX2
(``__m128``/``__m256``), 16 lanes as AVX-512F (``__m512``). The lane count of
the vector type decides; ``targets/arch.py`` decides which widths the
schedules ask for.

Every vector op becomes the intrinsic whose per-lane result is the bits the
scalar C of the same op gives (``-ffp-contract=off``, no FMA):

* ``_mm256_{add,sub,mul,div,sqrt}_ps`` (``_mm512_...``) round each lane
  exactly like ``+ - * /`` and ``sqrtf`` on ``float``;
* negation flips the sign bit (``nc_negf``); the NaN-propagating maximum is
  the blend sequence of ``nc_maxf``;
* comparisons use the predicates of C's operators: ordered and quiet (``<=``
  is ``_CMP_LE_OQ``), ``!=`` unordered (``_CMP_NEQ_UQ``);
* ``exp``, ``sin`` and ``cos`` call the same libm function per lane as the
  scalar code, so no vector approximation enters.

AVX2 comparisons give a vector of all-ones/all-zeros lanes (the mask
``vector<8xi1>`` is a ``__m256``) and ``_mm256_blendv_ps`` selects by it;
AVX-512 comparisons give a bit mask (``vector<16xi1>`` is a ``__mmask16``,
``_mm512_cmp_ps_mask`` with the same predicates) and ``_mm512_mask_blend_ps``
selects by it: the same lanes are picked, so the same bits come out. The
sign-bit flip uses the integer ``_mm512_xor_si512`` (``_mm512_xor_ps`` is
AVX-512DQ; everything here is AVX-512F).
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import arith
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import VectorType, i1
from xdsl.ir import Attribute, Operation, SSAValue

from nanocompile.dialects import loop

_LANE_HELPERS = """\
/* nc_maxf per lane: a NaN in a wins, then a NaN in b, else the larger */
static inline VT nc_maxfW(VT a, VT b) {
  VT r = PFX_blendv_ps(b, a, PFX_cmp_ps(a, b, _CMP_GT_OQ));
  r = PFX_blendv_ps(r, b, PFX_cmp_ps(b, b, _CMP_UNORD_Q));
  return PFX_blendv_ps(r, a, PFX_cmp_ps(a, a, _CMP_UNORD_Q));
}
static inline VT nc_negfW(VT x) {
  return PFX_xor_ps(x, PFX_castsiBITS_ps(PFX_set1_epi32((int)0x80000000u)));
}
NC_LIBM(VT, PFX, W, nc_expfW, expf)
NC_LIBM(VT, PFX, W, nc_sinfW, sinf)
NC_LIBM(VT, PFX, W, nc_cosfW, cosf)
"""

# (lanes, C type, intrinsic prefix, integer-vector width in bits): the AVX2 forms
SHAPES = ((4, "__m128", "_mm", "128"), (8, "__m256", "_mm256", "256"))
AVX512_SHAPE = (16, "__m512", "_mm512", "512")
AVX512_MASK = "__mmask16"

AVX2_PRELUDE = """\
#include <immintrin.h>
/* exp/sin/cos per lane through the scalar libm call */
#define NC_LIBM(VT, PFX, W, name, f) \\
  static inline VT name(VT x) { \\
    float t[W]; \\
    PFX##_storeu_ps(t, x); \\
    for (int l = 0; l < W; ++l) t[l] = f(t[l]); \\
    return PFX##_loadu_ps(t); \\
  }
""" + "".join(_LANE_HELPERS.replace("VT", vt).replace("PFX_castsiBITS", f"{p}_castsi{b}")
              .replace("PFX", p).replace("nc_maxfW", f"nc_maxf{w}")
              .replace("nc_negfW", f"nc_negf{w}").replace("nc_expfW", f"nc_expf{w}")
              .replace("nc_sinfW", f"nc_sinf{w}").replace("nc_cosfW", f"nc_cosf{w}")
              .replace(", W,", f", {w},")
              for w, vt, p, b in SHAPES)

AVX512_PRELUDE = """\
/* AVX-512F, 16 lanes: a comparison is a __mmask16, a blend takes one */
/* nc_maxf per lane: a NaN in a wins, then a NaN in b, else the larger */
static inline __m512 nc_maxf16(__m512 a, __m512 b) {
  __m512 r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_GT_OQ), b, a);
  r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q), r, b);
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), r, a);
}
static inline __m512 nc_negf16(__m512 x) {
  return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x),
                                              _mm512_set1_epi32((int)0x80000000u)));
}
NC_LIBM(__m512, _mm512, 16, nc_expf16, expf)
NC_LIBM(__m512, _mm512, 16, nc_sinf16, sinf)
NC_LIBM(__m512, _mm512, 16, nc_cosf16, cosf)
"""


def vector_prelude(lanes: set[int]) -> str:
    """The helpers the vectors of ``lanes`` lanes need: the AVX2 prelude (which
    defines ``NC_LIBM``), then the AVX-512 one when 16 lanes occur."""
    return AVX2_PRELUDE + ("\n" + AVX512_PRELUDE if AVX512_SHAPE[0] in lanes else "")


_BINARY: dict[type[Operation], str] = {arith.AddfOp: "add", arith.SubfOp: "sub",
                                       arith.MulfOp: "mul", arith.DivfOp: "div"}
_UNARY: dict[type[Operation], str] = {xmath.SqrtOp: "{p}_sqrt_ps", xmath.ExpOp: "nc_expf{w}",
                                      xmath.SinOp: "nc_sinf{w}", xmath.CosOp: "nc_cosf{w}",
                                      arith.NegfOp: "nc_negf{w}"}
CMP_IMM = {"oeq": "_CMP_EQ_OQ", "ogt": "_CMP_GT_OQ", "oge": "_CMP_GE_OQ",
           "olt": "_CMP_LT_OQ", "ole": "_CMP_LE_OQ", "one": "_CMP_NEQ_OQ",
           "une": "_CMP_NEQ_UQ", "ord": "_CMP_ORD_Q", "uno": "_CMP_UNORD_Q"}


class VectorEmitError(ValueError):
    """A vector type or op the C target's vector printer has no form for."""


def _shape(t: VectorType) -> tuple[int, str, str, str]:
    for shape in (*SHAPES, AVX512_SHAPE):
        if t.get_shape() == (shape[0],):
            return shape
    raise VectorEmitError(f"the C target prints vectors of 4, 8 or 16 lanes, got {t}")


def _bit_mask(t: VectorType) -> bool:
    """A 16-lane ``i1`` vector: an AVX-512 ``__mmask16``, not a vector register."""
    return t.get_shape() == (AVX512_SHAPE[0],) and t.element_type == i1


def vector_c_type(t: VectorType) -> str:
    """``__m256`` for ``vector<8xf32>`` and its ``vector<8xi1>`` mask (``__m128``
    for 4 lanes); ``__m512`` for ``vector<16xf32>``, ``__mmask16`` for its mask."""
    return AVX512_MASK if _bit_mask(t) else _shape(t)[1]


def vector_prefix(t: VectorType) -> str:
    """The intrinsic prefix for ``t``: ``_mm512``, ``_mm256`` or ``_mm``."""
    return _shape(t)[2]


def is_vector(t: Attribute) -> bool:
    return isinstance(t, VectorType)


def vector_expr(op: Operation, name: Callable[[SSAValue], str]) -> str | None:
    """The C expression of a vector-valued op, or None when ``op`` is scalar."""
    t = op.results[0].type if op.results else None
    if not isinstance(t, VectorType):
        return None
    w, _, p, _ = _shape(t)
    if isinstance(op, loop.LoadOp):
        raise AssertionError("vector loads are printed by the C emitter (they need strides)")
    if isinstance(op, loop.SplatOp):
        return f"{p}_set1_ps({name(op.input)})"
    if type(op) in _BINARY:
        return f"{p}_{_BINARY[type(op)]}_ps({name(op.operands[0])}, {name(op.operands[1])})"
    if type(op) in _UNARY:
        return f"{_UNARY[type(op)].format(p=p, w=w)}({name(op.operands[0])})"
    if isinstance(op, arith.MaximumfOp):
        return f"nc_maxf{w}({name(op.lhs)}, {name(op.rhs)})"
    if isinstance(op, loop.VCmpOp):
        cmp = "cmp_ps_mask" if _bit_mask(t) else "cmp_ps"
        return f"{p}_{cmp}({name(op.lhs)}, {name(op.rhs)}, {CMP_IMM[op.predicate.data]})"
    if isinstance(op, loop.VSelectOp):
        cond = op.cond.type
        if isinstance(cond, VectorType) and _bit_mask(cond):  # lane l: bit l ? lhs : rhs
            return f"{p}_mask_blend_ps({name(op.cond)}, {name(op.rhs)}, {name(op.lhs)})"
        if is_vector(cond):
            return f"{p}_blendv_ps({name(op.rhs)}, {name(op.lhs)}, {name(op.cond)})"
        return f"{name(op.cond)} ? {name(op.lhs)} : {name(op.rhs)}"
    raise VectorEmitError(f"the C target cannot print {op.name} on vectors")
