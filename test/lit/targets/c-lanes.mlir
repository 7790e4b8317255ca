// The C target prints a lanes loop (loop.for ... lanes 16) as an array of 16
// partial values per carried value, every one starting at the init; the loop
// runs groups of 16 iterations, iteration base + l updating partial l (the
// last group shorter when the trip count is no known multiple of 16); after it
// the halving tree adds partial l + partial l + h for h = 8, 4, 2, 1 into
// partial 0, the result. math.fma is fmaf. Vectorized (sched.vectorize "k"),
// the partials are vector lanes: by 16 one __m512 per result
// (_mm512_fmadd_ps, then nc_lanesum16), by 8 two __m256 (lanes 0-7 and
// 8-15), added lane by lane (the tree's first level) before nc_lanesum8. A
// lanes loop inside a vectorized loop carries vectors: 16 partial vectors,
// added by the same tree with vector adds. Printing needs no AVX CPU;
// compiling needs gcc's -mavx2 -mfma -mavx512f.
// RUN: nc-opt %s -p apply-schedule -t c | filecheck %s
// RUN: nc-opt %s -p apply-schedule -t c > %t.c && gcc -std=c11 -O3 -mavx2 -mfma -mavx512f -ffp-contract=off -fwrapv -fno-math-errno -Wall -Wextra -Werror -c %t.c -o %t.o

builtin.module {
  // the dot product of two 32-vectors (two whole groups of 16 lanes)
  loop.kernel @dot(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[1], [1]>, #loop.fp<[32], [1]>, #loop.fp<[32], [1]>] {
    %c0 = arith.constant 0 : index
    %c32 = arith.constant 32 : index
    %z = arith.constant 0.000000e+00 : f32
    %s = loop.for "k" %k = %c0 to %c32 lanes 16 iter(%acc = %z) -> (f32) {
      %x = loop.load %1[%k] strides [1] : f32
      %y = loop.load %2[%k] strides [1] : f32
      %f = math.fma %x, %y, %acc : f32
      loop.yield %f : f32
    }
    loop.store %s, %0[%c0] strides [1] : f32
  }
  // the same over n values: the last group runs the n % 16 iterations left
  loop.kernel @dot_n(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms ["n"] access ["w", "r", "r"] footprints [#loop.fp<[1], [1]>, #loop.fp<[n], [1]>, #loop.fp<[n], [1]>] {
    %c0 = arith.constant 0 : index
    %n = loop.sym "n"
    %z = arith.constant 0.000000e+00 : f32
    %s = loop.for "k" %k = %c0 to %n lanes 16 iter(%acc = %z) -> (f32) {
      %x = loop.load %1[%k] strides [1] : f32
      %y = loop.load %2[%k] strides [1] : f32
      %f = math.fma %x, %y, %acc : f32
      loop.yield %f : f32
    }
    loop.store %s, %0[%c0] strides [1] : f32
  }
  loop.kernel @dot16(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[1], [1]>, #loop.fp<[32], [1]>, #loop.fp<[32], [1]>] {
    %c0 = arith.constant 0 : index
    %c32 = arith.constant 32 : index
    %z = arith.constant 0.000000e+00 : f32
    %s = loop.for "k" %k = %c0 to %c32 lanes 16 iter(%acc = %z) -> (f32) {
      %x = loop.load %1[%k] strides [1] : f32
      %y = loop.load %2[%k] strides [1] : f32
      %f = math.fma %x, %y, %acc : f32
      loop.yield %f : f32
    }
    loop.store %s, %0[%c0] strides [1] : f32
  }
  sched.schedule @dot16 {
    sched.vectorize "k" width 16
  }
  loop.kernel @dot8(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[1], [1]>, #loop.fp<[32], [1]>, #loop.fp<[32], [1]>] {
    %c0 = arith.constant 0 : index
    %c32 = arith.constant 32 : index
    %z = arith.constant 0.000000e+00 : f32
    %s = loop.for "k" %k = %c0 to %c32 lanes 16 iter(%acc = %z) -> (f32) {
      %x = loop.load %1[%k] strides [1] : f32
      %y = loop.load %2[%k] strides [1] : f32
      %f = math.fma %x, %y, %acc : f32
      loop.yield %f : f32
    }
    loop.store %s, %0[%c0] strides [1] : f32
  }
  sched.schedule @dot8 {
    sched.vectorize "k" width 8
  }
  // x[0:20] @ W[20, 12], 8 columns as vector lanes (each lane keeps its own
  // 16 partial sums), the last 4 in the scalar tail
  loop.kernel @columns(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[12], [1]>, #loop.fp<[20], [1]>, #loop.fp<[20, 12], [12, 1]>] {
    %c0 = arith.constant 0 : index
    %c12 = arith.constant 12 : index
    %c20 = arith.constant 20 : index
    loop.for "d0" %j = %c0 to %c12 {
      %z = arith.constant 0.000000e+00 : f32
      %s = loop.for "k" %k = %c0 to %c20 lanes 16 iter(%acc = %z) -> (f32) {
        %x = loop.load %1[%k] strides [1] : f32
        %w = loop.load %2[%k, %j] strides [12, 1] : f32
        %f = math.fma %x, %w, %acc : f32
        loop.yield %f : f32
      }
      loop.store %s, %0[%j] strides [1] : f32
    }
  }
  sched.schedule @columns {
    sched.vectorize "d0" width 8
  }
  loop.program @p syms ["n"] {
    %a = loop.buffer input "a" : !loop.buf<[32], f32>
    %va = loop.view %a layout <0, [1]> : !loop.buf<[32], f32> -> !loop.view<[32], f32>
    %an = loop.buffer input "an" : !loop.buf<[n], f32>
    %van = loop.view %an layout <0, [1]> : !loop.buf<[n], f32> -> !loop.view<[n], f32>
    %w = loop.buffer input "w" : !loop.buf<[20, 12], f32>
    %vw = loop.view %w layout <0, [12, 1]> : !loop.buf<[20, 12], f32> -> !loop.view<[20, 12], f32>
    %va20 = loop.view %a layout <0, [1]> : !loop.buf<[32], f32> -> !loop.view<[20], f32>
    %o = loop.buffer output "o" : !loop.buf<[16], f32>
    %o0 = loop.view %o layout <0, [1]> : !loop.buf<[16], f32> -> !loop.view<[1], f32>
    %o1 = loop.view %o layout <1, [1]> : !loop.buf<[16], f32> -> !loop.view<[1], f32>
    %o2 = loop.view %o layout <2, [1]> : !loop.buf<[16], f32> -> !loop.view<[1], f32>
    %o3 = loop.view %o layout <3, [1]> : !loop.buf<[16], f32> -> !loop.view<[1], f32>
    %o4 = loop.view %o layout <4, [1]> : !loop.buf<[16], f32> -> !loop.view<[12], f32>
    loop.launch @dot(%o0, %va, %va) : !loop.view<[1], f32>, !loop.view<[32], f32>, !loop.view<[32], f32>
    loop.launch @dot_n(%o1, %van, %van) : !loop.view<[1], f32>, !loop.view<[n], f32>, !loop.view<[n], f32>
    loop.launch @dot16(%o2, %va, %va) : !loop.view<[1], f32>, !loop.view<[32], f32>, !loop.view<[32], f32>
    loop.launch @dot8(%o3, %va, %va) : !loop.view<[1], f32>, !loop.view<[32], f32>, !loop.view<[32], f32>
    loop.launch @columns(%o4, %va20, %vw) : !loop.view<[12], f32>, !loop.view<[20], f32>, !loop.view<[20, 12], f32>
    loop.output "o" = %o : !loop.buf<[16], f32>
  }
}

// the lane sums: the pairs of the halving tree
// CHECK:      static inline float nc_lanesum4(__m128 v) {
// CHECK-NEXT:   v = _mm_add_ps(v, _mm_movehl_ps(v, v));
// CHECK-NEXT:   return _mm_cvtss_f32(_mm_add_ss(v, _mm_shuffle_ps(v, v, 1)));
// CHECK-NEXT: }
// CHECK-NEXT: static inline float nc_lanesum8(__m256 v) {
// CHECK-NEXT:   return nc_lanesum4(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)));
// CHECK-NEXT: }
// CHECK:      static inline float nc_lanesum16(__m512 v) {
// CHECK-NEXT:   __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
// CHECK-NEXT:   return nc_lanesum8(_mm256_add_ps(_mm512_castps512_ps256(v), hi));
// CHECK-NEXT: }

// CHECK-LABEL: int32_t nck_dot(
// CHECK:        const int64_t [[LB:v[0-9]+]] = INT64_C(0);
// CHECK-NEXT:   const int64_t [[UB:v[0-9]+]] = INT64_C(32);
// CHECK-NEXT:   const float [[Z:v[0-9]+]] = 0x0.0p+0f;
// CHECK-NEXT:   float [[P:acc[0-9]+]][16];
// CHECK-NEXT:   for (int [[L:kl[0-9]+]] = 0; [[L]] < 16; ++[[L]]) [[P]][[[L]]] = [[Z]];
// CHECK-NEXT:   for (int64_t [[B:kb[0-9]+]] = [[LB]]; [[B]] < [[UB]]; [[B]] += 16) {  /* k (lanes 16) */
// CHECK-NEXT:     for (int [[L]] = 0; [[L]] < 16; ++[[L]]) {
// CHECK-NEXT:       const int64_t [[I:i[0-9]+]] = [[B]] + [[L]];
// CHECK-NEXT:       const float [[X:v[0-9]+]] = p1[[[I]]];
// CHECK-NEXT:       const float [[Y:v[0-9]+]] = p2[[[I]]];
// CHECK-NEXT:       const float [[F:v[0-9]+]] = fmaf([[X]], [[Y]], [[P]][[[L]]]);
// CHECK-NEXT:       const float t0 = [[F]];
// CHECK-NEXT:       [[P]][[[L]]] = t0;
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   for (int [[H:kh[0-9]+]] = 8; [[H]] >= 1; [[H]] /= 2) {  /* the halving tree */
// CHECK-NEXT:     for (int [[L]] = 0; [[L]] < [[H]]; ++[[L]]) {
// CHECK-NEXT:       [[P]][[[L]]] = [[P]][[[L]]] + [[P]][[[L]] + [[H]]];
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   const float [[P]]_sum = [[P]][0];
// CHECK-NEXT:   p0[[[LB]]] = [[P]]_sum;

// CHECK-LABEL: int32_t nck_dot_n(
// CHECK:        for (int64_t [[B:kb[0-9]+]] = v{{[0-9]+}}; [[B]] < [[N:v[0-9]+]]; [[B]] += 16) {  /* k (lanes 16) */
// CHECK-NEXT:     const int64_t [[C:kn[0-9]+]] = [[N]] - [[B]] < 16 ? [[N]] - [[B]] : 16;
// CHECK-NEXT:     for (int [[L:kl[0-9]+]] = 0; [[L]] < [[C]]; ++[[L]]) {
// CHECK:        for (int [[H:kh[0-9]+]] = 8; [[H]] >= 1; [[H]] /= 2) {  /* the halving tree */

// by 16: one zmm of partial sums, k stepping by 16, no scalar tail
// CHECK-LABEL: int32_t nck_dot16(
// CHECK:        __m512 [[A:acc[0-9]+]] = v{{[0-9]+}};
// CHECK-NEXT:   for (int64_t [[I:i[0-9]+]] = v{{[0-9]+}}; [[I]] < v{{[0-9]+}}; [[I]] += 16) {  /* k */
// CHECK-NEXT:     const __m512 [[X:v[0-9]+]] = _mm512_loadu_ps(&p1[[[I]]]);
// CHECK-NEXT:     const __m512 [[Y:v[0-9]+]] = _mm512_loadu_ps(&p2[[[I]]]);
// CHECK-NEXT:     const __m512 [[F:v[0-9]+]] = _mm512_fmadd_ps([[X]], [[Y]], [[A]]);
// CHECK-NEXT:     [[A]] = [[F]];
// CHECK-NEXT:   }
// CHECK-NEXT:   const float [[S:v[0-9]+]] = nc_lanesum16([[A]]);
// CHECK-NEXT:   p0[v{{[0-9]+}}] = [[S]];
// CHECK-NEXT:   return 0;
// CHECK-LABEL: int32_t nck_dot8(
// by 8: lanes 0-7 and 8-15 in two ymm, added before the last three levels
// CHECK:        __m256 [[LO:acc[0-9]+]] = [[Z:v[0-9]+]];
// CHECK-NEXT:   __m256 [[HI:acc[0-9]+]] = [[Z]];
// CHECK-NEXT:   for (int64_t [[I:i[0-9]+]] = v{{[0-9]+}}; [[I]] < v{{[0-9]+}}; [[I]] += 16) {  /* k */
// CHECK:          const __m256 [[F0:v[0-9]+]] = _mm256_fmadd_ps(v{{[0-9]+}}, v{{[0-9]+}}, [[LO]]);
// CHECK:          const __m256 [[F1:v[0-9]+]] = _mm256_fmadd_ps(v{{[0-9]+}}, v{{[0-9]+}}, [[HI]]);
// CHECK:        }
// CHECK-NEXT:   const __m256 [[T:v[0-9]+]] = _mm256_add_ps([[LO]], [[HI]]);
// CHECK-NEXT:   const float [[S:v[0-9]+]] = nc_lanesum8([[T]]);
// CHECK-NEXT:   p0[v{{[0-9]+}}] = [[S]];
// CHECK-NEXT:   return 0;

// 16 partial vectors of 8 columns each, the tree in vector adds
// CHECK-LABEL: int32_t nck_columns(
// CHECK:          __m256 [[P:acc[0-9]+]][16];
// CHECK:          for (int64_t [[B:kb[0-9]+]] = v{{[0-9]+}}; [[B]] < [[UB:v[0-9]+]]; [[B]] += 16) {  /* k (lanes 16) */
// CHECK-NEXT:       const int64_t [[C:kn[0-9]+]] = [[UB]] - [[B]] < 16 ? [[UB]] - [[B]] : 16;
// CHECK:              const __m256 {{v[0-9]+}} = _mm256_fmadd_ps({{.*}}, [[P]][[[L:kl[0-9]+]]]);
// CHECK:          for (int [[H:kh[0-9]+]] = 8; [[H]] >= 1; [[H]] /= 2) {  /* the halving tree */
// CHECK-NEXT:       for (int [[L]] = 0; [[L]] < [[H]]; ++[[L]]) {
// CHECK-NEXT:         [[P]][[[L]]] = _mm256_add_ps([[P]][[[L]]], [[P]][[[L]] + [[H]]]);
// CHECK:          const __m256 [[P]]_sum = [[P]][0];
// CHECK:          _mm256_storeu_ps(&p0[{{.*}}], [[P]]_sum);
// the tail's 4 columns: scalar partial sums
// CHECK:        for (int64_t {{i[0-9]+}} = v{{[0-9]+}}; {{i[0-9]+}} < v{{[0-9]+}}; ++{{i[0-9]+}}) {  /* d0_tail */
// CHECK:          float [[Q:acc[0-9]+]][16];
// CHECK:              const float {{v[0-9]+}} = fmaf({{.*}}, [[Q]][{{kl[0-9]+}}]);
