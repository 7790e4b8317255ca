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
* ``exp`` is the model's (``ir/expf.py``): ``nc_expf4/8/16`` perform its f32
  operations lane-wise (``targets/c_expf.py``; ``nc_expf4`` is in the scalar
  prelude, whose ``nc_expf`` is its lane 0), the scalar ``nc_expf``'s bits;
  ``sin`` and ``cos`` call the same libm function per lane as the scalar code,
  so no vector approximation enters;
* ``math.fma`` is ``_mm256_fmadd_ps`` (``_mm512_fmadd_ps``): one rounding
  per lane, like ``fmaf``;
* ``loop.lanesum`` is ``nc_lanesum4/8/16``: the halving tree (16 lanes: the
  low and high 256 bits added, then 8: the low and high 128 bits, then 4:
  lanes 0,1 plus 2,3, then lane 0 plus lane 1), the pairs the scalar tree of
  a lanes loop adds (``targets/c.py``); four lanesums of one block whose
  inputs are ready are printed as one ``nc_lanesum8x4``/``nc_lanesum16x4``,
  which shuffles four vectors so that each add serves all four trees and
  adds exactly the same pairs.

A ``loop.lanesum`` with a ``tree`` is a helper per width and tree
(``nc_lanesum8_t2_0_1`` for ``[2, 0, 1]``, printed in the prelude): per bit,
in the tree's order, either the high half of the lanes still live is added
to the low half (the bit is the highest live one: ``v[j] + v[j + W/2]``,
narrowing to the next register size), or the vector is added to its own
lanes permuted by ``j -> j xor (1 << bit)`` (``_mm256_permute_ps``,
``_mm512_shuffle_f32x4``), which adds ``v[j] + v[j | 1 << bit]`` in every lane
``j`` whose bit is clear; lane 0 is the result. Each live lane performs
exactly the adds of the tree, lower lane on the left.

A ``vector<Wxbf16>`` holds ``W`` bf16 bit patterns in an integer register
(16 lanes: ``__m256i``, 8: ``__m128i``, 4: the low half of an ``__m128i``,
loaded by ``_mm256_loadu_si256``, ``_mm_loadu_si128``, ``_mm_loadl_epi64``);
its one op is ``arith.extf`` to f32, the scalar ``nc_bf16`` per lane: each
16 bits zero-extended to 32 (``_mm512_cvtepu16_epi32``, ``_mm256_...``, SSE4.1
``_mm_cvtepu16_epi32``), shifted into the high half and reinterpreted.

A ``vector<Wxi8>`` (int8 weights) holds ``W`` bytes in the low bytes of an
``__m128i`` (``_mm_loadu_si32``, ``_mm_loadl_epi64``, ``_mm_loadu_si128``);
its one op is ``loop.vsitofp``, the scalar ``(float)`` per lane: each byte
sign-extended to 32 bits (``_mm_cvtepi8_epi32``, ``_mm256_...``,
``_mm512_...``) and converted (``_cvtepi32_ps``, exact for 8-bit integers).

A ``loop.dot4`` of ``W`` lanes (spec §5 kernel B's integer core) reads two
``vector<4Wxi8>`` (``__m256i`` for 8 lanes, ``__m512i`` for 16, loaded by
``_mm256_loadu_si256`` / ``_mm512_loadu_si512``) and gives a
``vector<Wxi32>`` (``__m256i`` / ``__m512i``), lane ``l`` the exact ``sum_j
(w[4l+j] + 128) * xq[4l+j]``; ``loop.vsitofp`` of it is ``_cvtepi32_ps``. It is
printed as ``nc_dot4x8`` (``nc_dot4x16``), defined in the prelude by the
int8-dot path of ``targets/arch.py`` (``dot_prelude``), each computing the
same integers:

* ``avx512_vnni``: ``vpdpbusd`` from zero on ``w XOR 0x80`` (the unsigned
  ``w + 128``) and ``xq`` (signed): ``_mm256_dpbusd_epi32`` (AVX512-VNNI with
  AVX512VL), ``_mm512_dpbusd_epi32`` for 16 lanes; ``vpdpbusd`` adds the four
  products of a dword into 32 bits without saturation, so it is exactly ``p``;
* ``avx_vnni``: the same, VEX-encoded (``_mm256_dpbusd_avx_epi32``);
* ``avx2``: ``p = sum w * xq + 128 * sum xq``, each by ``vpmaddubsw`` (u8 x
  s8, adjacent pairs added with int16 saturation) then ``vpmaddwd`` by ones
  (int16 pairs into int32, exact): ``sum w * xq`` as ``|xq|`` (unsigned, <=
  127) times ``w`` with the sign of ``xq`` (``_mm256_sign_epi8``: |w| <= 127,
  so no wrap), each product of magnitude <= 127 * 127, a pair <= 32258 <
  32767: no saturation; ``128 * sum xq`` as the unsigned 128 times ``xq``, a
  pair <= 2 * 128 * 127 = 32512 < 32767: no saturation. (The direct ``(w XOR
  0x80) * xq`` would reach 2 * 255 * 127 = 64770 and saturate.) Both operands
  in [-127, 127] (spec §5: -128 is never used);
* ``scalar``: ``nc_dot4`` (``targets/c.py``'s prelude) per lane, through
  memory (a vector arch with ``NANOCOMPILE_INT8_DOT=scalar``; the scalar arch
  prints no vector ``loop.dot4``).

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
from collections.abc import Set as AbstractSet

from xdsl.dialects import arith
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import VectorType, bf16, f32, i1, i8, i32
from xdsl.ir import Attribute, Operation, SSAValue

from nanocompile.dialects import loop
from nanocompile.targets import c_expf

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
NC_LIBM(VT, PFX, W, nc_sinfW, sinf)
NC_LIBM(VT, PFX, W, nc_cosfW, cosf)
/* roundf per lane (halves away from zero), exactly: t = trunc(x); x - t is exact;
   t + copysign(1, x) where |x - t| >= 0.5 (a blend: t keeps its sign, -0 too) */
static inline VT nc_roundfW(VT x) {
  const VT sign = PFX_castsiBITS_ps(PFX_set1_epi32((int)0x80000000u));
  const VT t = PFX_round_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const VT d = PFX_andnot_ps(sign, PFX_sub_ps(x, t));
  const VT one = PFX_or_ps(PFX_and_ps(x, sign), PFX_set1_ps(1.0f));
  return PFX_blendv_ps(t, PFX_add_ps(t, one), PFX_cmp_ps(d, PFX_set1_ps(0.5f), _CMP_GE_OQ));
}
"""

_NARROW_I8 = """\
/* (int8_t) per lane of values in range: truncate to int32, keep each low byte */
static inline __m128i nc_f32toi8x4(__m128 x) {
  return _mm_shuffle_epi8(_mm_cvttps_epi32(x), _mm_setr_epi8(
      0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1));
}
static inline __m128i nc_f32toi8x8(__m256 x) {
  const __m256i b = _mm256_shuffle_epi8(_mm256_cvttps_epi32(x), _mm256_setr_epi8(
      0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
      0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1));
  return _mm_unpacklo_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
}
"""

# (lanes, C type, intrinsic prefix, integer-vector width in bits): the AVX2 forms
SHAPES = ((4, "__m128", "_mm", "128"), (8, "__m256", "_mm256", "256"))
AVX512_SHAPE = (16, "__m512", "_mm512", "512")
AVX512_MASK = "__mmask16"

LANESUM_PRELUDE = """\
/* the halving tree of a vector's lanes: lane j + lane j + W/2, then again */
static inline float nc_lanesum4(__m128 v) {
  v = _mm_add_ps(v, _mm_movehl_ps(v, v));
  return _mm_cvtss_f32(_mm_add_ss(v, _mm_shuffle_ps(v, v, 1)));
}
static inline float nc_lanesum8(__m256 v) {
  return nc_lanesum4(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)));
}
/* four 8-lane trees at once, the same pairs: {tree(a), tree(b), tree(c), tree(d)} */
static inline __m128 nc_lanesum8x4(__m256 a, __m256 b, __m256 c, __m256 d) {
  __m256 ab = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20),
                            _mm256_permute2f128_ps(a, b, 0x31)); /* a 4 | b 4 */
  __m256 cd = _mm256_add_ps(_mm256_permute2f128_ps(c, d, 0x20),
                            _mm256_permute2f128_ps(c, d, 0x31)); /* c 4 | d 4 */
  __m256 x = _mm256_add_ps(_mm256_shuffle_ps(ab, cd, 0x44),
                           _mm256_shuffle_ps(ab, cd, 0xEE)); /* a2 c2 | b2 d2 */
  __m256 y = _mm256_add_ps(_mm256_shuffle_ps(x, x, 0x88),
                           _mm256_shuffle_ps(x, x, 0xDD)); /* a c a c | b d b d */
  return _mm_unpacklo_ps(_mm256_castps256_ps128(y), _mm256_extractf128_ps(y, 1));
}
"""

AVX2_PRELUDE = """\
#include <immintrin.h>
/* sin/cos per lane through the scalar libm call */
#define NC_LIBM(VT, PFX, W, name, f) \\
  static inline VT name(VT x) { \\
    float t[W]; \\
    PFX##_storeu_ps(t, x); \\
    for (int l = 0; l < W; ++l) t[l] = f(t[l]); \\
    return PFX##_loadu_ps(t); \\
  }
/* keep a loaded vector in a register: gcc would otherwise fold the load into
   each of its uses, one memory operand per FMA (an empty asm: no instruction) */
#define NC_PIN(v) __asm__("" : "+v"(v))
""" + "".join(_LANE_HELPERS.replace("VT", vt).replace("PFX_castsiBITS", f"{p}_castsi{b}")
              .replace("PFX", p).replace("nc_maxfW", f"nc_maxf{w}")
              .replace("nc_negfW", f"nc_negf{w}").replace("nc_expfW", f"nc_expf{w}")
              .replace("nc_sinfW", f"nc_sinf{w}").replace("nc_cosfW", f"nc_cosf{w}")
              .replace("nc_roundfW", f"nc_roundf{w}")
              .replace(", W,", f", {w},") + (c_expf.vector(w) if w != 4 else "")
              for w, vt, p, b in SHAPES) + _NARROW_I8 + LANESUM_PRELUDE

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
NC_LIBM(__m512, _mm512, 16, nc_sinf16, sinf)
NC_LIBM(__m512, _mm512, 16, nc_cosf16, cosf)
/* roundf per lane, as nc_roundf8 (the mask add leaves the other lanes' t as is) */
static inline __m512 nc_roundf16(__m512 x) {
  const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
  const __m512 t = _mm512_roundscale_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m512 d = _mm512_castsi512_ps(_mm512_andnot_si512(
      sign, _mm512_castps_si512(_mm512_sub_ps(x, t))));
  const __m512 one = _mm512_castsi512_ps(_mm512_or_si512(
      _mm512_and_si512(_mm512_castps_si512(x), sign), _mm512_castps_si512(_mm512_set1_ps(1.0f))));
  return _mm512_mask_add_ps(t, _mm512_cmp_ps_mask(d, _mm512_set1_ps(0.5f), _CMP_GE_OQ), t, one);
}
/* (int8_t) per lane of values in range: truncate to int32, keep each low byte */
static inline __m128i nc_f32toi8x16(__m512 x) {
  return _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(x));
}
static inline float nc_lanesum16(__m512 v) {
  __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  return nc_lanesum8(_mm256_add_ps(_mm512_castps512_ps256(v), hi));
}
/* four 16-lane trees at once, the same pairs: {tree(a), tree(b), tree(c), tree(d)} */
static inline __m128 nc_lanesum16x4(__m512 a, __m512 b, __m512 c, __m512 d) {
  __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44),
                            _mm512_shuffle_f32x4(a, b, 0xEE)); /* a 8 | b 8 */
  __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0x44),
                            _mm512_shuffle_f32x4(c, d, 0xEE)); /* c 8 | d 8 */
  __m512 w = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88),
                           _mm512_shuffle_f32x4(ab, cd, 0xDD)); /* a 4 | b 4 | c 4 | d 4 */
  w = _mm512_add_ps(w, _mm512_permute_ps(w, 0xEE)); /* lanes 0, 1: x0 + x2, x1 + x3 */
  w = _mm512_add_ps(w, _mm512_permute_ps(w, 0x55)); /* lane 0: that sum of 0 and 1 */
  return _mm512_castps512_ps128(_mm512_permutexvar_ps(
      _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0), w));
}
""" + c_expf.vector(16)


def vector_prelude(lanes: set[int],
                   trees: AbstractSet[tuple[int, tuple[int, ...]]] = frozenset()) -> str:
    """The helpers the vectors of ``lanes`` lanes need: the AVX2 prelude (which
    defines ``NC_LIBM``), then the AVX-512 one when 16 lanes occur, then a
    lane-sum helper per (width, tree) in ``trees``."""
    text = AVX2_PRELUDE + ("\n" + AVX512_PRELUDE if AVX512_SHAPE[0] in lanes else "")
    return text + "".join(lanesum_tree_helper(w, tree) for w, tree in sorted(trees))


def lanesum_tree_name(width: int, tree: tuple[int, ...]) -> str:
    return f"nc_lanesum{width}_t{'_'.join(map(str, tree))}"


# per register, bit -> the lanes of {v} permuted by j -> j xor (1 << bit)
_XOR_PERMUTE = {
    "__m512": {2: "_mm512_shuffle_f32x4({v}, {v}, 0xB1)", 1: "_mm512_permute_ps({v}, 0x4E)",
               0: "_mm512_permute_ps({v}, 0xB1)"},
    "__m256": {1: "_mm256_permute_ps({v}, 0x4E)", 0: "_mm256_permute_ps({v}, 0xB1)"},
    "__m128": {0: "_mm_shuffle_ps({v}, {v}, 0xB1)"},
}
# per count of live lanes: the high half of them added to the low half (register, expr)
_NARROW = {
    16: ("__m256", "_mm256_add_ps(_mm512_castps512_ps256({v}), "
                   "_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd({v}), 1)))"),
    8: ("__m128", "_mm_add_ps(_mm256_castps256_ps128({v}), _mm256_extractf128_ps({v}, 1))"),
    4: ("__m128", "_mm_add_ps({v}, _mm_movehl_ps({v}, {v}))"),
    2: ("__m128", "_mm_add_ss({v}, _mm_shuffle_ps({v}, {v}, 1))"),
}
_ADD = {"__m512": "_mm512_add_ps", "__m256": "_mm256_add_ps", "__m128": "_mm_add_ps"}
_LANE0 = {"__m512": "_mm512_cvtss_f32", "__m256": "_mm256_cvtss_f32", "__m128": "_mm_cvtss_f32"}


def lanesum_tree_helper(width: int, tree: tuple[int, ...]) -> str:
    """The C of ``loop.lanesum`` of ``width`` lanes with ``tree`` (the module
    docstring: narrow at the highest live bit, else add a lane permute)."""
    register = {16: "__m512", 8: "__m256"}.get(width, "__m128")
    lines = [f"/* the tree {list(tree)} of a vector's lanes */",
             f"static inline float {lanesum_tree_name(width, tree)}({register} v0) {{"]
    live = width
    for n, bit in enumerate(tree):
        if 1 << bit == live // 2:  # the highest live bit
            register, expr = _NARROW[live]
            live //= 2
        else:
            expr = f"{_ADD[register]}({{v}}, {_XOR_PERMUTE[register][bit]})"
        lines.append(f"  const {register} v{n + 1} = {expr.format(v=f'v{n}')};  /* bit {bit} */")
    lines.append(f"  return {_LANE0[register]}(v{len(tree)});")
    lines.append("}")
    return "\n".join(lines) + "\n"


_BINARY: dict[type[Operation], str] = {arith.AddfOp: "add", arith.SubfOp: "sub",
                                       arith.MulfOp: "mul", arith.DivfOp: "div"}
_UNARY: dict[type[Operation], str] = {xmath.SqrtOp: "{p}_sqrt_ps", xmath.ExpOp: "nc_expf{w}",
                                      xmath.SinOp: "nc_sinf{w}", xmath.CosOp: "nc_cosf{w}",
                                      arith.NegfOp: "nc_negf{w}", xmath.RoundOp: "nc_roundf{w}"}
CMP_IMM = {"oeq": "_CMP_EQ_OQ", "ogt": "_CMP_GT_OQ", "oge": "_CMP_GE_OQ",
           "olt": "_CMP_LT_OQ", "ole": "_CMP_LE_OQ", "one": "_CMP_NEQ_OQ",
           "une": "_CMP_NEQ_UQ", "ord": "_CMP_ORD_Q", "uno": "_CMP_UNORD_Q"}


class VectorEmitError(ValueError):
    """A vector type or op the C target's vector printer has no form for."""


# lanes -> (C type of a vector<Wxbf16>, its load, the f32 prefix of its widening)
BF16_SHAPES = {4: ("__m128i", "_mm_loadl_epi64", "_mm"),
               8: ("__m128i", "_mm_loadu_si128", "_mm256"),
               16: ("__m256i", "_mm256_loadu_si256", "_mm512")}


# lanes -> (C type of a vector<Wxi8>, its load, the f32 prefix of its widening; 32
# and 64 bytes: loop.dot4 operands, never widened)
I8_SHAPES = {4: ("__m128i", "_mm_loadu_si32", "_mm"),
             8: ("__m128i", "_mm_loadl_epi64", "_mm256"),
             16: ("__m128i", "_mm_loadu_si128", "_mm512"),
             32: ("__m256i", "_mm256_loadu_si256", "_mm256"),
             64: ("__m512i", "_mm512_loadu_si512", "_mm512")}
# lanes of a vector<Wxi32> (a loop.dot4 result) -> (C type, the f32 prefix)
I32_SHAPES = {8: ("__m256i", "_mm256"), 16: ("__m512i", "_mm512")}

INT8_DOT_PATHS = ("scalar", "avx2", "avx_vnni", "avx512_vnni")  # targets/arch.py's

_DOT8 = {
    "avx512_vnni": """\
/* loop.dot4, 8 lanes: vpdpbusd (AVX512-VNNI + VL) from zero, u8 = w XOR 0x80 = w + 128 */
static inline __m256i nc_dot4x8(__m256i xq, __m256i w) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(),
                             _mm256_xor_si256(w, _mm256_set1_epi8((char)0x80)), xq);
}
""",
    "avx_vnni": """\
/* loop.dot4, 8 lanes: vpdpbusd (AVX-VNNI) from zero, u8 = w XOR 0x80 = w + 128 */
static inline __m256i nc_dot4x8(__m256i xq, __m256i w) {
  return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(),
                                 _mm256_xor_si256(w, _mm256_set1_epi8((char)0x80)), xq);
}
""",
    "avx2": """\
/* loop.dot4, 8 lanes, AVX2: sum w*xq + 128*sum xq, each by vpmaddubsw then vpmaddwd by
   ones; |xq| (u8 <= 127) * w signed as xq: pairs <= 2*127*127 = 32258, 128 (u8) * xq:
   pairs <= 2*128*127 = 32512, so no int16 saturation (w, xq in [-127, 127]) */
static inline __m256i nc_dot4x8(__m256i xq, __m256i w) {
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i wx = _mm256_maddubs_epi16(_mm256_abs_epi8(xq), _mm256_sign_epi8(w, xq));
  const __m256i bx = _mm256_maddubs_epi16(_mm256_set1_epi8((char)0x80), xq);
  return _mm256_add_epi32(_mm256_madd_epi16(wx, ones), _mm256_madd_epi16(bx, ones));
}
""",
}
_DOT_SCALAR = """\
/* loop.dot4, W lanes, one by one: nc_dot4 per lane (the scalar int8-dot path) */
static inline VI nc_dot4xW(VI xq, VI w) {
  nc_i8x4 a[W], b[W];
  int32_t p[W];
  memcpy(a, &xq, sizeof a);
  memcpy(b, &w, sizeof b);
  for (int l = 0; l < W; ++l) p[l] = nc_dot4(a[l], b[l]);
  VI r;
  memcpy(&r, p, sizeof r);
  return r;
}
"""
_DOT16 = """\
/* loop.dot4, 16 lanes: vpdpbusd (AVX512-VNNI) from zero, u8 = w XOR 0x80 = w + 128 */
static inline __m512i nc_dot4x16(__m512i xq, __m512i w) {
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(),
                             _mm512_xor_si512(w, _mm512_set1_epi8((char)0x80)), xq);
}
"""


_DOT16_HALVES = """\
/* loop.dot4, 16 lanes as two of 8 (this int8-dot path's nc_dot4x8 on each half) */
static inline __m512i nc_dot4x16(__m512i xq, __m512i w) {
  const __m256i lo = nc_dot4x8(_mm512_castsi512_si256(xq), _mm512_castsi512_si256(w));
  const __m256i hi = nc_dot4x8(_mm512_extracti64x4_epi64(xq, 1),
                               _mm512_extracti64x4_epi64(w, 1));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
"""


def _half(value: SSAValue, half: int, x: str) -> str:
    """The low (0) or high (1) half of the f32 vector ``value`` (C ``x``)."""
    assert isinstance(value.type, VectorType)
    width = _shape(value.type)[0]
    if width == 16:  # AVX512F only: the high 256 bits as a double vector
        return (f"_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd({x}), 1))" if half
                else f"_mm512_castps512_ps256({x})")
    if width == 8:
        return f"_mm256_extractf128_ps({x}, 1)" if half else f"_mm256_castps256_ps128({x})"
    raise VectorEmitError(f"the C target halves vectors of 8 or 16 lanes, got {value.type}")


def _fold_half(op: loop.FoldHalfOp, name: Callable[[SSAValue], str]) -> str:
    """``loop.foldhalf``: the low half plus the high half, one vector add."""
    assert isinstance(op.input.type, VectorType)
    width, x = _shape(op.input.type)[0], name(op.input)
    if width not in (8, 16):
        raise VectorEmitError(f"the C target folds vectors of 8 or 16 lanes, got "
                              f"{op.input.type}")
    prefix = "_mm256" if width == 16 else "_mm"
    return f"{prefix}_add_ps({_half(op.input, 0, x)}, {_half(op.input, 1, x)})"


class DotPathError(ValueError):
    """An int8-dot path that cannot print a vector ``loop.dot4`` of these lanes."""


def dot_prelude(lanes: AbstractSet[int], path: str) -> str:
    """The ``nc_dot4x<W>`` helpers of the vector ``loop.dot4`` lane counts
    ``lanes`` by the int8-dot ``path`` (the module docstring)."""
    if path not in INT8_DOT_PATHS:
        raise DotPathError(f"unknown int8-dot path '{path}', expected one of "
                           f"{', '.join(INT8_DOT_PATHS)}")
    out = []
    for w in sorted(lanes):
        if path == "scalar" and w in I32_SHAPES:
            out.append(_DOT_SCALAR.replace("VI", I32_SHAPES[w][0]).replace("W", str(w)))
        elif w == 8 and path in _DOT8:
            out.append(_DOT8[path])
        elif w == 16 and path == "avx512_vnni":
            out.append(_DOT16)
        elif w == 16 and path in _DOT8:  # an AVX-512 arch whose CPU lacks AVX512-VNNI
            if 8 not in lanes:
                out.append(_DOT8[path])
            out.append(_DOT16_HALVES)
        else:
            raise DotPathError(f"the int8-dot path '{path}' prints no loop.dot4 of {w} "
                               "lanes (8 and 16 lanes: scalar, avx2, avx_vnni, "
                               "avx512_vnni)")
    return "\n" + "".join(out)


def is_dot_group(value: SSAValue) -> bool:
    """A ``vector<4xi8>`` used only by scalar ``loop.dot4`` (one lane's 4 bytes):
    C's ``nc_i8x4``, no vector register (what ``vectorize`` widens by 4 lanes
    of i8 into ``loop.vsitofp`` stays an ``__m128i``)."""
    t = value.type
    return (isinstance(t, VectorType) and t.element_type == i8 and t.get_shape() == (4,)
            and bool(value.uses) and all(isinstance(u.operation, loop.DotI8Op)
                                         for u in value.uses))


def _bf16_shape(t: VectorType) -> tuple[str, str, str] | None:
    """The C forms of a ``vector<Wxbf16>`` or ``vector<Wxi8>`` (None for any
    other vector)."""
    if t.element_type == bf16:
        shapes, what = BF16_SHAPES, "bf16"
    elif t.element_type == i8:
        shapes, what = I8_SHAPES, "i8"
    else:
        return None
    shape = shapes.get(t.get_shape()[0]) if len(t.get_shape()) == 1 else None
    if shape is None:
        raise VectorEmitError(f"the C target prints {what} vectors of 4, 8 or 16 lanes, "
                              f"got {t}")
    return shape


def vector_load(t: VectorType, address: str) -> str:
    """The C expression loading a vector of type ``t`` from ``&address``."""
    shape = _bf16_shape(t)
    if shape is not None:
        return f"{shape[1]}((const {shape[0]} *)&{address})"
    return f"{_shape(t)[2]}_loadu_ps(&{address})"


# lanes -> the store of a vector<Wxi8> (an __m128i's low W bytes)
I8_STORES = {4: "_mm_storeu_si32", 8: "_mm_storel_epi64", 16: "_mm_storeu_si128"}


def vector_store(t: VectorType, address: str, value: str) -> str:
    """The C statement storing ``value``, a vector of type ``t``, at ``&address``."""
    if t.element_type == i8:
        store = I8_STORES.get(t.get_shape()[0]) if len(t.get_shape()) == 1 else None
        if store is None:
            raise VectorEmitError(f"the C target stores i8 vectors of 4, 8 or 16 lanes, got {t}")
        return f"{store}((void *)&{address}, {value});"
    return f"{_shape(t)[2]}_storeu_ps(&{address}, {value});"


def pinned_load(value: SSAValue) -> bool:
    """A vector of f32 loaded for two or more FMAs: printed in a register
    (``NC_PIN``). Short of registers, gcc folds such a load into each FMA as its
    memory operand, and the loads, not the FMAs, then bound the loop: gate/up's
    6 x 4 AVX-512 tile (24 accumulators) issued 28 loads per 24 FMAs and runs
    1.24x faster pinned (10 loads)."""
    t = value.type
    fmas = sum(isinstance(use.operation, xmath.FmaOp) for use in value.uses)
    return isinstance(t, VectorType) and t.element_type == f32 and fmas > 1


def _i32_shape(t: VectorType) -> tuple[str, str]:
    shape = I32_SHAPES.get(t.get_shape()[0]) if len(t.get_shape()) == 1 else None
    if shape is None:
        raise VectorEmitError(f"the C target prints i32 vectors of 8 or 16 lanes, got {t}")
    return shape


def _widen_i8(op: loop.VSIToFPOp, name: Callable[[SSAValue], str]) -> str:
    """``loop.vsitofp`` of a ``vector<Wxi8>``: per lane, the byte sign-extended
    and converted (exact); of a ``vector<Wxi32>``: converted."""
    assert isinstance(op.input.type, VectorType)
    if op.input.type.element_type == i32:
        return f"{_i32_shape(op.input.type)[1]}_cvtepi32_ps({name(op.input)})"
    shape = _bf16_shape(op.input.type)
    assert shape is not None  # the verifier: a vector of i8
    p = shape[2]
    return f"{p}_cvtepi32_ps({p}_cvtepi8_epi32({name(op.input)}))"


def _widen(op: arith.ExtFOp, name: Callable[[SSAValue], str]) -> str:
    """``arith.extf`` of a ``vector<Wxbf16>``: per lane, the 16 bits as the high
    half of an f32."""
    assert isinstance(op.input.type, VectorType)
    shape = _bf16_shape(op.input.type)
    if shape is None:
        raise VectorEmitError(f"the C target widens only bf16 vectors, got {op.input.type}")
    p = shape[2]
    bits = "128" if p == "_mm" else p.removeprefix("_mm")
    return f"{p}_castsi{bits}_ps({p}_slli_epi32({p}_cvtepu16_epi32({name(op.input)}), 16))"


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
    if t.element_type == i32:
        return _i32_shape(t)[0]
    bf16_shape = _bf16_shape(t)
    if bf16_shape is not None:
        return bf16_shape[0]
    return AVX512_MASK if _bit_mask(t) else _shape(t)[1]


def vector_prefix(t: VectorType) -> str:
    """The intrinsic prefix for ``t``: ``_mm512``, ``_mm256`` or ``_mm``."""
    return _shape(t)[2]


def is_vector(t: Attribute) -> bool:
    return isinstance(t, VectorType)


def vector_add(t: VectorType, a: str, b: str) -> str:
    """``a + b`` per lane for vectors of type ``t``."""
    return f"{_shape(t)[2]}_add_ps({a}, {b})"


GROUP_LANES = 4
"""The lanesums ``nc_lanesum<W>x4`` computes at once (one ``__m128`` of results)."""


def _extract(op: loop.ExtractOp, name: Callable[[SSAValue], str]) -> str:
    """Lane ``i`` of a vector of f32: a shuffle or permute that brings it to lane 0."""
    assert isinstance(op.input.type, VectorType)
    if op.input.type.element_type != f32:
        raise VectorEmitError(f"the C target extracts f32 lanes only, got {op.input.type}")
    w = _shape(op.input.type)[0]
    v, lane = name(op.input), op.lane.data
    if w == 4:
        return f"_mm_cvtss_f32(_mm_shuffle_ps({v}, {v}, {0x55 * lane:#04x}))"
    if w == 8:
        return f"_mm256_cvtss_f32(_mm256_permutevar8x32_ps({v}, _mm256_set1_epi32({lane})))"
    return f"_mm512_cvtss_f32(_mm512_permutexvar_ps(_mm512_set1_epi32({lane}), {v}))"


def vector_expr(op: Operation, name: Callable[[SSAValue], str]  # noqa: C901 (one dispatch)
                ) -> str | None:
    """The C expression of a vector-valued op, or None when ``op`` is scalar."""
    if isinstance(op, loop.LaneSumOp):
        assert isinstance(op.input.type, VectorType)
        width = _shape(op.input.type)[0]
        if op.tree is not None:
            return f"{lanesum_tree_name(width, op.lane_tree)}({name(op.input)})"
        return f"nc_lanesum{width}({name(op.input)})"
    if isinstance(op, loop.ExtractOp):
        return _extract(op, name)
    if isinstance(op, loop.FoldHalfOp):
        return _fold_half(op, name)
    if isinstance(op, loop.HalfOp):
        return _half(op.input, op.half.data, name(op.input))
    if isinstance(op, loop.LaneSumsOp):
        assert isinstance(op.inputs[0].type, VectorType)
        width = _shape(op.inputs[0].type)[0]
        if len(op.inputs) != GROUP_LANES or width not in (8, 16):
            raise VectorEmitError(f"the C target prints loop.lanesums of 4 vectors of 8 or 16 "
                                  f"lanes, got {len(op.inputs)} of {op.inputs[0].type}")
        return f"nc_lanesum{width}x4({', '.join(name(v) for v in op.inputs)})"
    t = op.results[0].type if op.results else None
    if not isinstance(t, VectorType):
        return None
    if isinstance(op, loop.VPackOp):
        if t.element_type != f32:
            raise VectorEmitError(f"the C target packs f32 lanes only, got {t}")
        return f"{_shape(t)[2]}_setr_ps({', '.join(name(v) for v in op.inputs)})"
    if isinstance(op, loop.LoadOp):
        raise AssertionError("vector loads are printed by the C emitter (they need strides)")
    if isinstance(op, arith.ExtFOp):
        return _widen(op, name)
    if isinstance(op, loop.VSIToFPOp):
        return _widen_i8(op, name)
    if isinstance(op, loop.VFPToSIOp):  # a vector<Wxi8> in the low bytes of an __m128i
        return f"nc_f32toi8x{op.result.type.get_shape()[0]}({name(op.input)})"
    if isinstance(op, loop.DotI8Op):  # nc_dot4x<W>: dot_prelude's, per int8-dot path
        return f"nc_dot4x{op.lanes}({name(op.lhs)}, {name(op.rhs)})"
    w, _, p, _ = _shape(t)
    if isinstance(op, xmath.FmaOp):
        return f"{p}_fmadd_ps({name(op.a)}, {name(op.b)}, {name(op.c)})"
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
