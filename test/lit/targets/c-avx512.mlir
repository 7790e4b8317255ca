// The C target prints 16-lane vectors as AVX-512F intrinsics: __m512 values,
// a comparison is a __mmask16 (_mm512_cmp_ps_mask with the predicate of C's
// operator) and a blend takes it (_mm512_mask_blend_ps: lane l is bit l ? lhs
// : rhs); negation and the NaN-propagating max are the helpers nc_negf16 and
// nc_maxf16, exp is the model's nc_expf16 (ir/expf.py). This kernel's multiply and add
// stay separate ops (an FMA is only where the IR has math.fma: c-lanes.mlir).
// Printing needs no AVX-512 CPU; compiling for it needs only gcc's
// -mavx512f (running it: test/lit/targets/avx512/, gated by lit.local.cfg).
// RUN: nc-opt %s -p apply-schedule -t c | filecheck %s
// RUN: nc-opt %s -p apply-schedule -t c > %t.c && gcc -std=c11 -O3 -mavx2 -mavx512f -ffp-contract=off -fwrapv -fno-math-errno -Wall -Wextra -Werror -c %t.c -o %t.o

builtin.module {
  loop.kernel @ops(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[4, 40], [40, 1]>, #loop.fp<[40], [1]>, #loop.fp<[40], [1]>] {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c40 = arith.constant 40 : index
    loop.for "d0" %i = %c0 to %c40 {
      %a = loop.load %1[%i] strides [1] : f32
      %b = loop.load %2[%i] strides [1] : f32
      %k = arith.constant 0.5 : f32
      %p = arith.mulf %a, %k : f32
      %s = arith.addf %p, %b : f32
      loop.store %s, %0[%c0, %i] strides [40, 1] : f32
      %m = arith.cmpf ole, %a, %b : f32
      %sel = arith.select %m, %a, %b : f32
      loop.store %sel, %0[%c1, %i] strides [40, 1] : f32
      %mx = arith.maximumf %a, %b : f32
      %n = arith.negf %mx : f32
      loop.store %n, %0[%c2, %i] strides [40, 1] : f32
      %e = math.exp %a : f32
      loop.store %e, %0[%c3, %i] strides [40, 1] : f32
    }
  }
  sched.schedule @ops {
    sched.vectorize "d0" width 16
  }
  loop.program @p syms [] {
    %x = loop.buffer input "x" : !loop.buf<[40], f32>
    %vx = loop.view %x layout <0, [1]> : !loop.buf<[40], f32> -> !loop.view<[40], f32>
    %y = loop.buffer input "y" : !loop.buf<[40], f32>
    %vy = loop.view %y layout <0, [1]> : !loop.buf<[40], f32> -> !loop.view<[40], f32>
    %o = loop.buffer output "o" : !loop.buf<[4, 40], f32>
    %vo = loop.view %o layout <0, [40, 1]> : !loop.buf<[4, 40], f32> -> !loop.view<[4, 40], f32>
    loop.launch @ops(%vo, %vx, %vy) : !loop.view<[4, 40], f32>, !loop.view<[40], f32>, !loop.view<[40], f32>
    loop.output "o" = %o : !loop.buf<[4, 40], f32>
  }
}

// CHECK:      /* AVX-512F, 16 lanes: a comparison is a __mmask16, a blend takes one */
// CHECK:      static inline __m512 nc_maxf16(__m512 a, __m512 b) {
// CHECK-NEXT:   __m512 r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_GT_OQ), b, a);
// CHECK-NEXT:   r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q), r, b);
// CHECK-NEXT:   return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), r, a);
// CHECK-NEXT: }
// CHECK:      static inline __m512 nc_expf16(__m512 x) {
// CHECK-NOT:  }
// CHECK:        const __m512 out = _mm512_scalef_ps(y, n);
// CHECK-LABEL: int32_t nck_ops(
// 40 = 2 vectors of 16 and a scalar tail of 8
// CHECK:        const int64_t [[MID:v[0-9]+]] = INT64_C(32);
// CHECK:        for (int64_t [[I:i[0-9]+]] = v{{[0-9]+}}; [[I]] < [[MID]]; [[I]] += 16) {  /* d0 */
// CHECK-NEXT:     const __m512 [[A:v[0-9]+]] = _mm512_loadu_ps(&p1{{\[}}[[I]]{{\]}});
// CHECK-NEXT:     const __m512 [[B:v[0-9]+]] = _mm512_loadu_ps(&p2{{\[}}[[I]]{{\]}});
// CHECK-NEXT:     const float [[K:v[0-9]+]] = 0x1.0000000000000p-1f;
// CHECK-NEXT:     const __m512 [[KV:v[0-9]+]] = _mm512_set1_ps([[K]]);
// CHECK-NEXT:     const __m512 [[P:v[0-9]+]] = _mm512_mul_ps([[A]], [[KV]]);
// CHECK-NEXT:     const __m512 [[S:v[0-9]+]] = _mm512_add_ps([[P]], [[B]]);
// CHECK:          _mm512_storeu_ps(&p0{{\[}}{{.*}} + [[I]]{{\]}}, [[S]]);
// CHECK-NEXT:     const __mmask16 [[M:v[0-9]+]] = _mm512_cmp_ps_mask([[A]], [[B]], _CMP_LE_OQ);
// CHECK-NEXT:     const __m512 [[SEL:v[0-9]+]] = _mm512_mask_blend_ps([[M]], [[B]], [[A]]);
// CHECK:          const __m512 [[MX:v[0-9]+]] = nc_maxf16([[A]], [[B]]);
// CHECK-NEXT:     const __m512 [[N:v[0-9]+]] = nc_negf16([[MX]]);
// CHECK:          const __m512 {{v[0-9]+}} = nc_expf16([[A]]);
// CHECK:        for (int64_t [[T:i[0-9]+]] = [[MID]]; [[T]] < v{{[0-9]+}}; ++[[T]]) {  /* d0_tail */
// CHECK-NOT:      __m512
// CHECK:        return 0;
