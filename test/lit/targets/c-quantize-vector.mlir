// The C target prints kernel B's vectorized quantization (vectorize on the
// block's 32 columns, 16 and 8 lanes): math.round on vectors is the helper
// nc_roundf16 / nc_roundf8 (roundf per lane: trunc, then the exact fraction
// compared with 0.5; a blend or a masked add keeps the truncation's sign),
// loop.vfptosi is nc_f32toi8x16 (vpmovdb of the truncated int32s) /
// nc_f32toi8x8 (a byte shuffle of them), and the vector<Wxi8> is stored from
// the low bytes of an __m128i (_mm_storeu_si128, _mm_storel_epi64). The C
// compiles for AVX-512 and for AVX2.
// RUN: sed -e s/WIDTH/16/ %s | nc-opt -p apply-schedule -t c | filecheck %s --check-prefix=W16
// RUN: sed -e s/WIDTH/8/ %s | nc-opt -p apply-schedule -t c | filecheck %s --check-prefix=W8
// RUN: sed -e s/WIDTH/16/ %s | nc-opt -p apply-schedule -t c > %t.16.c && gcc -std=c11 -O3 -mavx512f -mavx512bw -mavx512vl -mavx2 -mfma -ffp-contract=off -fwrapv -fno-math-errno -c %t.16.c -o %t.16.o
// RUN: sed -e s/WIDTH/8/ %s | nc-opt -p apply-schedule -t c > %t.8.c && gcc -std=c11 -O3 -mavx2 -mfma -ffp-contract=off -fwrapv -fno-math-errno -c %t.8.c -o %t.8.o

builtin.module {
  loop.kernel @fused_cast(%0: !loop.ptr<i8>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms ["seq"] access ["w", "r", "r"] footprints [#loop.fp<[seq, 3, 32], [96, 32, 1]>, #loop.fp<[seq, 3, 32], [96, 32, 1]>, #loop.fp<[seq, 3, 32], [3, 1, 0]>] {
    %3 = loop.sym "seq"
    %4 = arith.constant 3 : index
    %5 = arith.constant 32 : index
    %6 = arith.constant 0 : index
    loop.for "d0" %7 = %6 to %3 {
      loop.for "d1" %8 = %6 to %4 {
        loop.for "d2" %9 = %6 to %5 {
          %10 = arith.constant -1.270000e+02 : f32
          %11 = loop.load %1[%7, %8, %9] strides [96, 32, 1] : f32
          %12 = loop.load %2[%7, %8, %9] strides [3, 1, 0] : f32
          %13 = arith.divf %11, %12 : f32
          %14 = math.round %13 : f32
          %15 = arith.constant 1.270000e+02 : f32
          %16 = arith.cmpf ole, %14, %15 : f32
          %17 = arith.select %16, %14, %15 : f32
          %18 = arith.cmpf ole, %10, %17 : f32
          %19 = arith.select %18, %17, %10 : f32
          %20 = arith.fptosi %19 : f32 to i8
          loop.store %20, %0[%7, %8, %9] strides [96, 32, 1] : i8
        }
      }
    }
  }
  sched.schedule @fused_cast {
    sched.vectorize "d2" width WIDTH
  }
}

// W16:      static inline __m512 nc_roundf16(__m512 x) {
// W16:        const __m512 t = _mm512_roundscale_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
// W16:        return _mm512_mask_add_ps(t, _mm512_cmp_ps_mask(d, _mm512_set1_ps(0.5f), _CMP_GE_OQ), t, one);
// W16:      static inline __m128i nc_f32toi8x16(__m512 x) {
// W16-NEXT:   return _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(x));
// W16-LABEL: int32_t nck_fused_cast(
// W16:          const __m512 [[R:v[0-9]+]] = nc_roundf16(v{{[0-9]+}});
// W16:          const __m128i [[Q:v[0-9]+]] = nc_f32toi8x16(v{{[0-9]+}});
// W16-NEXT:     _mm_storeu_si128((void *)&p0[{{.*}}], [[Q]]);

// W8:       static inline __m256 nc_roundf8(__m256 x) {
// W8:         const __m256 t = _mm256_round_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
// W8:         return _mm256_blendv_ps(t, _mm256_add_ps(t, one), _mm256_cmp_ps(d, _mm256_set1_ps(0.5f), _CMP_GE_OQ));
// W8:       static inline __m128i nc_f32toi8x8(__m256 x) {
// W8-LABEL: int32_t nck_fused_cast(
// W8:           const __m256 [[R:v[0-9]+]] = nc_roundf8(v{{[0-9]+}});
// W8:           const __m128i [[Q:v[0-9]+]] = nc_f32toi8x8(v{{[0-9]+}});
// W8-NEXT:      _mm_storel_epi64((void *)&p0[{{.*}}], [[Q]]);
