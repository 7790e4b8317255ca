// The C target prints spec §5 kernel A's lanes loop (lanes 32 tail 8 tree
// [3, 4, 2, 0, 1]) over int8 weights: scalar, an array of 32 partials from the
// init; the whole blocks of 32 (iteration base + l into partial l), then the
// groups of 8 (into partials 0..7), then the tree one bit at a time in its
// order, partial j + partial j + 2^bit for the j still live (those with no
// bit combined so far), into partial 0. An i8 load widens by a cast (exact).
// Vectorized by 8: four __m256 per sum, the i8 loads sign-extended and
// converted in registers (_mm256_cvtepi8_epi32 of _mm_loadl_epi64, then
// _mm256_cvtepi32_ps), the block loop stepping by 32, the groups loop by 8
// into vector 0, the vectors added in the tree's order and the helper
// nc_lanesum8_t2_0_1 for the rest: the high 128 bits onto the low (bit 2),
// the pairs of lanes (bit 0), lane 2 onto lane 0 (bit 1). By 4: eight
// __m128 per sum (_mm_cvtepi8_epi32 of _mm_loadu_si32), nc_lanesum4_t0_1.
// A 16-lane tree that adds lanes of one register before halving it uses the
// lane permutes (_mm512_shuffle_f32x4, _mm512_permute_ps, _mm256_permute_ps).
// Printing needs no AVX CPU; compiling needs gcc's -mavx2 -mfma -mavx512f.
// RUN: nc-opt %s -p apply-schedule -t c | filecheck %s
// RUN: nc-opt %s -p apply-schedule -t c > %t.c && gcc -std=c11 -O3 -mavx2 -mfma -mavx512f -ffp-contract=off -fwrapv -fno-math-errno -Wall -Wextra -Werror -c %t.c -o %t.o

builtin.module {
  loop.kernel @scalar(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<i8>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[1], [1]>, #loop.fp<[40], [1]>, #loop.fp<[40], [1]>] {
    %c0 = arith.constant 0 : index
    %c40 = arith.constant 40 : index
    %z = arith.constant 0.000000e+00 : f32
    %s = loop.for "k" %k = %c0 to %c40 lanes 32 tail 8 tree [3, 4, 2, 0, 1] iter(%acc = %z) -> (f32) {
      %x = loop.load %1[%k] strides [1] : f32
      %q = loop.load %2[%k] strides [1] : i8
      %w = arith.sitofp %q : i8 to f32
      %f = math.fma %x, %w, %acc : f32
      loop.yield %f : f32
    }
    loop.store %s, %0[%c0] strides [1] : f32
  }
  loop.kernel @by8(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<i8>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[1], [1]>, #loop.fp<[40], [1]>, #loop.fp<[40], [1]>] {
    %c0 = arith.constant 0 : index
    %c40 = arith.constant 40 : index
    %z = arith.constant 0.000000e+00 : f32
    %s = loop.for "k" %k = %c0 to %c40 lanes 32 tail 8 tree [3, 4, 2, 0, 1] iter(%acc = %z) -> (f32) {
      %x = loop.load %1[%k] strides [1] : f32
      %q = loop.load %2[%k] strides [1] : i8
      %w = arith.sitofp %q : i8 to f32
      %f = math.fma %x, %w, %acc : f32
      loop.yield %f : f32
    }
    loop.store %s, %0[%c0] strides [1] : f32
  }
  sched.schedule @by8 {
    sched.vectorize "k" width 8
  }
  loop.kernel @by4(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<i8>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[1], [1]>, #loop.fp<[40], [1]>, #loop.fp<[40], [1]>] {
    %c0 = arith.constant 0 : index
    %c40 = arith.constant 40 : index
    %z = arith.constant 0.000000e+00 : f32
    %s = loop.for "k" %k = %c0 to %c40 lanes 32 tail 8 tree [3, 4, 2, 0, 1] iter(%acc = %z) -> (f32) {
      %x = loop.load %1[%k] strides [1] : f32
      %q = loop.load %2[%k] strides [1] : i8
      %w = arith.sitofp %q : i8 to f32
      %f = math.fma %x, %w, %acc : f32
      loop.yield %f : f32
    }
    loop.store %s, %0[%c0] strides [1] : f32
  }
  sched.schedule @by4 {
    sched.vectorize "k" width 4
  }
  loop.kernel @tree16(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>) syms [] access ["w", "r"] footprints [#loop.fp<[1], [1]>, #loop.fp<[16], [1]>] {
    %c0 = arith.constant 0 : index
    %v = loop.load %1[%c0] strides [1] : vector<16xf32>
    %s = loop.lanesum %v tree [2, 0, 3, 1] : vector<16xf32> -> f32
    loop.store %s, %0[%c0] strides [1] : f32
  }
  loop.program @p syms [] {
    %a = loop.buffer input "a" : !loop.buf<[40], f32>
    %va = loop.view %a layout <0, [1]> : !loop.buf<[40], f32> -> !loop.view<[40], f32>
    %va16 = loop.view %a layout <0, [1]> : !loop.buf<[40], f32> -> !loop.view<[16], f32>
    %q = loop.buffer input "q" : !loop.buf<[40], i8>
    %vq = loop.view %q layout <0, [1]> : !loop.buf<[40], i8> -> !loop.view<[40], i8>
    %o = loop.buffer output "o" : !loop.buf<[4], f32>
    %o0 = loop.view %o layout <0, [1]> : !loop.buf<[4], f32> -> !loop.view<[1], f32>
    %o1 = loop.view %o layout <1, [1]> : !loop.buf<[4], f32> -> !loop.view<[1], f32>
    %o2 = loop.view %o layout <2, [1]> : !loop.buf<[4], f32> -> !loop.view<[1], f32>
    %o3 = loop.view %o layout <3, [1]> : !loop.buf<[4], f32> -> !loop.view<[1], f32>
    loop.launch @scalar(%o0, %va, %vq) : !loop.view<[1], f32>, !loop.view<[40], f32>, !loop.view<[40], i8>
    loop.launch @by8(%o1, %va, %vq) : !loop.view<[1], f32>, !loop.view<[40], f32>, !loop.view<[40], i8>
    loop.launch @by4(%o2, %va, %vq) : !loop.view<[1], f32>, !loop.view<[40], f32>, !loop.view<[40], i8>
    loop.launch @tree16(%o3, %va16) : !loop.view<[1], f32>, !loop.view<[16], f32>
    loop.output "o" = %o : !loop.buf<[4], f32>
  }
}

// CHECK:      /* the tree [0, 1] of a vector's lanes */
// CHECK-NEXT: static inline float nc_lanesum4_t0_1(__m128 v0) {
// CHECK-NEXT:   const __m128 v1 = _mm_add_ps(v0, _mm_shuffle_ps(v0, v0, 0xB1));  /* bit 0 */
// CHECK-NEXT:   const __m128 v2 = _mm_add_ps(v1, _mm_movehl_ps(v1, v1));  /* bit 1 */
// CHECK-NEXT:   return _mm_cvtss_f32(v2);
// CHECK-NEXT: }
// CHECK:      /* the tree [2, 0, 1] of a vector's lanes */
// CHECK-NEXT: static inline float nc_lanesum8_t2_0_1(__m256 v0) {
// CHECK-NEXT:   const __m128 v1 = _mm_add_ps(_mm256_castps256_ps128(v0), _mm256_extractf128_ps(v0, 1));  /* bit 2 */
// CHECK-NEXT:   const __m128 v2 = _mm_add_ps(v1, _mm_shuffle_ps(v1, v1, 0xB1));  /* bit 0 */
// CHECK-NEXT:   const __m128 v3 = _mm_add_ps(v2, _mm_movehl_ps(v2, v2));  /* bit 1 */
// CHECK-NEXT:   return _mm_cvtss_f32(v3);
// CHECK-NEXT: }
// CHECK:      /* the tree [2, 0, 3, 1] of a vector's lanes */
// CHECK-NEXT: static inline float nc_lanesum16_t2_0_3_1(__m512 v0) {
// CHECK-NEXT:   const __m512 v1 = _mm512_add_ps(v0, _mm512_shuffle_f32x4(v0, v0, 0xB1));  /* bit 2 */
// CHECK-NEXT:   const __m512 v2 = _mm512_add_ps(v1, _mm512_permute_ps(v1, 0xB1));  /* bit 0 */
// CHECK-NEXT:   const __m256 v3 = _mm256_add_ps(_mm512_castps512_ps256(v2), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v2), 1)));  /* bit 3 */
// CHECK-NEXT:   const __m256 v4 = _mm256_add_ps(v3, _mm256_permute_ps(v3, 0x4E));  /* bit 1 */
// CHECK-NEXT:   return _mm256_cvtss_f32(v4);
// CHECK-NEXT: }

// CHECK-LABEL: nck_scalar(float *restrict p0, const float *restrict p1, const int8_t *restrict p2) {
// CHECK:         float [[ACC:acc[0-9]+]][32];
// CHECK-NEXT:    for (int [[L:kl[0-9]+]] = 0; [[L]] < 32; ++[[L]]) [[ACC]][[[L]]] = v{{[0-9]+}};
// CHECK-NEXT:    const int64_t [[J:kj[0-9]+]] = [[LB:v[0-9]+]] + ([[UB:v[0-9]+]] - [[LB]]) / 32 * 32;
// CHECK-NEXT:    for (int64_t [[B:kb[0-9]+]] = [[LB]]; [[B]] < [[J]]; [[B]] += 32) {  /* k (lanes 32) */
// CHECK-NEXT:      for (int [[L]] = 0; [[L]] < 32; ++[[L]]) {
// CHECK-NEXT:        const int64_t [[I:i[0-9]+]] = [[B]] + [[L]];
// CHECK-NEXT:        const float [[X:v[0-9]+]] = p1[[[I]]];
// CHECK-NEXT:        const int8_t [[Q:v[0-9]+]] = p2[[[I]]];
// CHECK-NEXT:        const float [[W:v[0-9]+]] = (float)([[Q]]);
// CHECK-NEXT:        const float [[F:v[0-9]+]] = fmaf([[X]], [[W]], [[ACC]][[[L]]]);
// CHECK-NEXT:        const float t0 = [[F]];
// CHECK-NEXT:        [[ACC]][[[L]]] = t0;
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:    for (int64_t [[B]] = [[J]]; [[B]] < [[UB]]; [[B]] += 8) {  /* k (lanes 32, tail 8) */
// CHECK-NEXT:      for (int [[L]] = 0; [[L]] < 8; ++[[L]]) {
// CHECK:             [[ACC]][[[L]]] = t0;
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:    /* the tree [3, 4, 2, 0, 1]: lane j + lane j | bit, for the lanes still live */
// CHECK-NEXT:    for (int [[L]] = 0; [[L]] < 32; ++[[L]]) if (([[L]] & 0x8) == 0) {
// CHECK-NEXT:      [[ACC]][[[L]]] = [[ACC]][[[L]]] + [[ACC]][[[L]] + 8];
// CHECK-NEXT:    }
// CHECK-NEXT:    for (int [[L]] = 0; [[L]] < 32; ++[[L]]) if (([[L]] & 0x18) == 0) {
// CHECK-NEXT:      [[ACC]][[[L]]] = [[ACC]][[[L]]] + [[ACC]][[[L]] + 16];
// CHECK-NEXT:    }
// CHECK-NEXT:    for (int [[L]] = 0; [[L]] < 32; ++[[L]]) if (([[L]] & 0x1c) == 0) {
// CHECK-NEXT:      [[ACC]][[[L]]] = [[ACC]][[[L]]] + [[ACC]][[[L]] + 4];
// CHECK-NEXT:    }
// CHECK-NEXT:    for (int [[L]] = 0; [[L]] < 32; ++[[L]]) if (([[L]] & 0x1d) == 0) {
// CHECK-NEXT:      [[ACC]][[[L]]] = [[ACC]][[[L]]] + [[ACC]][[[L]] + 1];
// CHECK-NEXT:    }
// CHECK-NEXT:    for (int [[L]] = 0; [[L]] < 32; ++[[L]]) if (([[L]] & 0x1f) == 0) {
// CHECK-NEXT:      [[ACC]][[[L]]] = [[ACC]][[[L]]] + [[ACC]][[[L]] + 2];
// CHECK-NEXT:    }
// CHECK-NEXT:    const float [[ACC]]_sum = [[ACC]][0];
// CHECK-NEXT:    p0[v{{[0-9]+}}] = [[ACC]]_sum;

// CHECK-LABEL: nck_by8(
// CHECK:         for (int64_t [[K:i[0-9]+]] = v{{[0-9]+}}; [[K]] < v{{[0-9]+}}; [[K]] += 32) {  /* k */
// CHECK:           const __m128i [[Q:v[0-9]+]] = _mm_loadl_epi64((const __m128i *)&p2[[[K]]]);
// CHECK-NEXT:      const __m256 [[W:v[0-9]+]] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32([[Q]]));
// CHECK-NEXT:      const __m256 {{v[0-9]+}} = _mm256_fmadd_ps({{v[0-9]+}}, [[W]], {{acc[0-9]+}});
// CHECK:         for (int64_t [[G:i[0-9]+]] = v{{[0-9]+}}; [[G]] < v{{[0-9]+}}; [[G]] += 8) {  /* k_groups */
// CHECK:         const float {{v[0-9]+}} = nc_lanesum8_t2_0_1({{v[0-9]+}});

// CHECK-LABEL: nck_by4(
// CHECK:           _mm_cvtepi32_ps(_mm_cvtepi8_epi32(
// CHECK:         const float {{v[0-9]+}} = nc_lanesum4_t0_1({{v[0-9]+}});

// CHECK-LABEL: nck_tree16(
// CHECK:         const float {{v[0-9]+}} = nc_lanesum16_t2_0_3_1({{v[0-9]+}});
