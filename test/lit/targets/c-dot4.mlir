// The C target prints a vector loop.dot4 (spec §5 kernel B's integer core, 8
// lanes of 4 bytes) by the int8-dot path of targets/arch.py
// (NANOCOMPILE_INT8_DOT, checked against this CPU's flags): the kernel calls
// nc_dot4x8 on two __m256i (32 bytes of xq and of w, _mm256_loadu_si256), and
// the prelude defines it per path. AVX2: sum w*xq + 128*sum xq, each by
// vpmaddubsw (|xq| unsigned times w with xq's sign: pairs <= 32258; the unsigned
// 128 times xq: pairs <= 32512, no int16 saturation) then vpmaddwd by ones;
// scalar: nc_dot4 per lane through memory. The i32 lanes convert by
// _mm256_cvtepi32_ps. Each compiles warning-free.
// REQUIRES: avx2
// RUN: env NANOCOMPILE_INT8_DOT=avx2 nc-opt %s -t c > %t.c && filecheck %s --check-prefixes=CHECK,AVX2 --input-file %t.c && gcc -std=c11 -O3 -mavx2 -mfma -ffp-contract=off -fwrapv -fno-math-errno -Wall -Wextra -Werror -Wno-unused-function -c %t.c -o %t.o
// RUN: env NANOCOMPILE_INT8_DOT=scalar nc-opt %s -t c > %t2.c && filecheck %s --check-prefixes=CHECK,SCALAR --input-file %t2.c && gcc -std=c11 -O3 -mavx2 -mfma -ffp-contract=off -fwrapv -fno-math-errno -Wall -Wextra -Werror -Wno-unused-function -c %t2.c -o %t2.o
// RUN: not env NANOCOMPILE_INT8_DOT=vnni nc-opt %s -t c 2>&1 | filecheck %s --check-prefix=BAD

builtin.module {
  loop.kernel @dot(%0: !loop.ptr<f32>, %1: !loop.ptr<i8>, %2: !loop.ptr<i8>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[8], [1]>, #loop.fp<[32], [1]>, #loop.fp<[32], [1]>] {
    %c0 = arith.constant 0 : index
    %x = loop.load %1[%c0] strides [1] : vector<32xi8>
    %w = loop.load %2[%c0] strides [1] : vector<32xi8>
    %d = loop.dot4 %x, %w : vector<32xi8> -> vector<8xi32>
    %f = loop.vsitofp %d : vector<8xi32> -> vector<8xf32>
    loop.store %f, %0[%c0] strides [1] : vector<8xf32>
  }
}
// AVX2:        static inline __m256i nc_dot4x8(__m256i xq, __m256i w) {
// AVX2-NEXT:     const __m256i ones = _mm256_set1_epi16(1);
// AVX2-NEXT:     const __m256i wx = _mm256_maddubs_epi16(_mm256_abs_epi8(xq), _mm256_sign_epi8(w, xq));
// AVX2-NEXT:     const __m256i bx = _mm256_maddubs_epi16(_mm256_set1_epi8((char)0x80), xq);
// AVX2-NEXT:     return _mm256_add_epi32(_mm256_madd_epi16(wx, ones), _mm256_madd_epi16(bx, ones));
// SCALAR:      static inline __m256i nc_dot4x8(__m256i xq, __m256i w) {
// SCALAR:        for (int l = 0; l < 8; ++l) p[l] = nc_dot4(a[l], b[l]);
// CHECK-LABEL: nck_dot(
// CHECK:         const __m256i [[X:v[0-9]+]] = _mm256_loadu_si256((const __m256i *)&p1[v{{[0-9]+}}]);
// CHECK-NEXT:    const __m256i [[W:v[0-9]+]] = _mm256_loadu_si256((const __m256i *)&p2[v{{[0-9]+}}]);
// CHECK-NEXT:    const __m256i [[D:v[0-9]+]] = nc_dot4x8([[X]], [[W]]);
// CHECK-NEXT:    const __m256 [[F:v[0-9]+]] = _mm256_cvtepi32_ps([[D]]);
// BAD: NANOCOMPILE_INT8_DOT: unknown int8-dot path 'vnni'
