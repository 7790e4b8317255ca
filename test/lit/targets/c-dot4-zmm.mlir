// Kernel B's lane terms in vectors of 16 (AVX-512: apply-schedule-vectorize-
// dot4-zmm.mlir's form) printed by the C target: loop.dot4 of 64 bytes by the
// AVX512-VNNI path (vpdpbusd on zmm, _mm512_dpbusd_epi32), or, for an AVX-512
// CPU without VNNI, by the AVX2 path's 8 lanes twice (the halves of each zmm,
// nc_dot4x8 on each, joined by _mm512_inserti64x4); the two blocks' scales
// packed 8 lanes each (loop.vpack: _mm512_setr_ps); loop.foldhalf as the low
// 256 bits plus the high 256 bits (_mm512_extractf64x4_pd: AVX512F only).
// Each compiles warning-free.
// REQUIRES: avx512_vnni, avx512vl
// RUN: env NANOCOMPILE_INT8_DOT=avx512_vnni nc-opt %s -t c > %t.c && filecheck %s --check-prefixes=CHECK,VNNI --input-file %t.c && gcc -std=c11 -O3 -march=native -ffp-contract=off -fwrapv -fno-math-errno -Wall -Wextra -Werror -Wno-unused-function -c %t.c -o %t.o
// RUN: env NANOCOMPILE_INT8_DOT=avx2 nc-opt %s -t c > %t2.c && filecheck %s --check-prefixes=CHECK,HALVES --input-file %t2.c && gcc -std=c11 -O3 -march=native -ffp-contract=off -fwrapv -fno-math-errno -Wall -Wextra -Werror -Wno-unused-function -c %t2.c -o %t2.o

builtin.module {
  loop.kernel @dot(%0: !loop.ptr<f32>, %1: !loop.ptr<i8>, %2: !loop.ptr<i8>, %3: !loop.ptr<f32>) syms [] access ["w", "r", "r", "r"] footprints [#loop.fp<[8], [1]>, #loop.fp<[64], [1]>, #loop.fp<[64], [1]>, #loop.fp<[2], [1]>] {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %x = loop.load %1[%c0] strides [1] : vector<64xi8>
    %w = loop.load %2[%c0] strides [1] : vector<64xi8>
    %d = loop.dot4 %x, %w : vector<64xi8> -> vector<16xi32>
    %f = loop.vsitofp %d : vector<16xi32> -> vector<16xf32>
    %s0 = loop.load %3[%c0] strides [1] : f32
    %s1 = loop.load %3[%c1] strides [1] : f32
    %s = loop.vpack %s0, %s0, %s0, %s0, %s0, %s0, %s0, %s0, %s1, %s1, %s1, %s1, %s1, %s1, %s1, %s1 : f32 -> vector<16xf32>
    %z = loop.splat %s0 : f32 -> vector<16xf32>
    %a = math.fma %f, %s, %z : vector<16xf32>
    %h = loop.foldhalf %a : vector<16xf32> -> vector<8xf32>
    loop.store %h, %0[%c0] strides [1] : vector<8xf32>
  }
}
// VNNI:          static inline __m512i nc_dot4x16(__m512i xq, __m512i w) {
// VNNI-NEXT:       return _mm512_dpbusd_epi32(_mm512_setzero_si512(),
// HALVES:        static inline __m256i nc_dot4x8(__m256i xq, __m256i w) {
// HALVES:          const __m256i wx = _mm256_maddubs_epi16(_mm256_abs_epi8(xq), _mm256_sign_epi8(w, xq));
// HALVES:        static inline __m512i nc_dot4x16(__m512i xq, __m512i w) {
// HALVES-NEXT:     const __m256i lo = nc_dot4x8(_mm512_castsi512_si256(xq), _mm512_castsi512_si256(w));
// HALVES-NEXT:     const __m256i hi = nc_dot4x8(_mm512_extracti64x4_epi64(xq, 1),
// HALVES-NEXT:                                  _mm512_extracti64x4_epi64(w, 1));
// HALVES-NEXT:     return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
// CHECK-LABEL: nck_dot(
// CHECK:         const __m512i [[D:v[0-9]+]] = nc_dot4x16(
// CHECK-NEXT:    const __m512 [[F:v[0-9]+]] = _mm512_cvtepi32_ps([[D]]);
// CHECK:         const __m512 [[S:v[0-9]+]] = _mm512_setr_ps([[S0:v[0-9]+]], [[S0]], [[S0]], [[S0]], [[S0]], [[S0]], [[S0]], [[S0]], [[S1:v[0-9]+]], [[S1]], [[S1]], [[S1]], [[S1]], [[S1]], [[S1]], [[S1]]);
// CHECK:         const __m512 [[A:v[0-9]+]] = _mm512_fmadd_ps([[F]], [[S]], {{v[0-9]+}});
// CHECK-NEXT:    const __m256 {{v[0-9]+}} = _mm256_add_ps(_mm512_castps512_ps256([[A]]), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd([[A]]), 1)));
