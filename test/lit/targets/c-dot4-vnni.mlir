// The VNNI int8-dot paths of a vector loop.dot4 (c-dot4.mlir): vpdpbusd from
// zero on the unsigned w XOR 0x80 (= w + 128) and the signed xq, four products
// per i32 lane added without saturation: AVX-VNNI's VEX form on ymm
// (_mm256_dpbusd_avx_epi32: c-dot4.mlir's kernel; 16 lanes as its 8 twice, on a
// CPU with AVX-512F too), AVX512-VNNI's on ymm (_mm256_dpbusd_epi32, with
// AVX512VL) and zmm (_mm512_dpbusd_epi32, 16 lanes of 64 bytes). Each compiles
// warning-free.
// REQUIRES: avx_vnni, avx512_vnni, avx512vl
// RUN: env NANOCOMPILE_INT8_DOT=avx512_vnni nc-opt %s -t c > %t.c && filecheck %s --check-prefix=VNNI512 --input-file %t.c && gcc -std=c11 -O3 -march=native -ffp-contract=off -fwrapv -fno-math-errno -Wall -Wextra -Werror -Wno-unused-function -c %t.c -o %t.o
// RUN: env NANOCOMPILE_INT8_DOT=avx_vnni nc-opt %s -t c > %t3.c && filecheck %s --check-prefix=HALVES --input-file %t3.c && gcc -std=c11 -O3 -march=native -ffp-contract=off -fwrapv -fno-math-errno -Wall -Wextra -Werror -Wno-unused-function -c %t3.c -o %t3.o
// RUN: env NANOCOMPILE_INT8_DOT=avx_vnni nc-opt %S/c-dot4.mlir -t c > %t2.c && filecheck %s --check-prefix=AVXVNNI --input-file %t2.c && gcc -std=c11 -O3 -march=native -ffp-contract=off -fwrapv -fno-math-errno -Wall -Wextra -Werror -Wno-unused-function -c %t2.c -o %t2.o

builtin.module {
  loop.kernel @dot(%0: !loop.ptr<f32>, %1: !loop.ptr<i8>, %2: !loop.ptr<i8>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[8], [1]>, #loop.fp<[64], [1]>, #loop.fp<[64], [1]>] {
    %c0 = arith.constant 0 : index
    %x = loop.load %1[%c0] strides [1] : vector<32xi8>
    %w = loop.load %2[%c0] strides [1] : vector<32xi8>
    %d = loop.dot4 %x, %w : vector<32xi8> -> vector<8xi32>
    %f = loop.vsitofp %d : vector<8xi32> -> vector<8xf32>
    loop.store %f, %0[%c0] strides [1] : vector<8xf32>
    %x64 = loop.load %1[%c0] strides [1] : vector<64xi8>
    %w64 = loop.load %2[%c0] strides [1] : vector<64xi8>
    %e = loop.dot4 %x64, %w64 : vector<64xi8> -> vector<16xi32>
    %g = loop.vsitofp %e : vector<16xi32> -> vector<16xf32>
    loop.store %g, %0[%c0] strides [1] : vector<16xf32>
  }
}
// AVXVNNI:       return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(),
// AVXVNNI-NEXT:                                 _mm256_xor_si256(w, _mm256_set1_epi8((char)0x80)), xq);
// VNNI512:       return _mm256_dpbusd_epi32(_mm256_setzero_si256(),
// VNNI512-NEXT:                             _mm256_xor_si256(w, _mm256_set1_epi8((char)0x80)), xq);
// VNNI512:       static inline __m512i nc_dot4x16(__m512i xq, __m512i w) {
// VNNI512-NEXT:    return _mm512_dpbusd_epi32(_mm512_setzero_si512(),
// VNNI512-LABEL: nck_dot(
// VNNI512:         nc_dot4x8(
// VNNI512:         const __m512i [[E:v[0-9]+]] = nc_dot4x16(
// VNNI512-NEXT:    const __m512 {{v[0-9]+}} = _mm512_cvtepi32_ps([[E]]);
// HALVES:        static inline __m512i nc_dot4x16(__m512i xq, __m512i w) {
// HALVES-NEXT:     const __m256i lo = nc_dot4x8(_mm512_castsi512_si256(xq), _mm512_castsi512_si256(w));
