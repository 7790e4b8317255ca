// The C target prints slp's ops (schedule/slp.py) on the AVX2 form of a
// lanes loop of 16 (two __m256 per sum, added before the lanesum): 4 jammed
// outputs' lanesums as one nc_lanesum8x4 (loop.lanesums: an __m128 whose lane
// i is sum i), their 4 bias values as _mm_setr_ps (loop.vpack), the bias add
// as one _mm_add_ps, and each output's store of its lane (loop.extract: a
// shuffle to lane 0); it compiles with -Werror.
// RUN: nc-opt %s -p apply-schedule -t c | filecheck %s
// RUN: nc-opt %s -p apply-schedule -t c > %t.c && gcc -std=c11 -O3 -mavx2 -mfma -ffp-contract=off -fwrapv -fno-math-errno -Wall -Wextra -Werror -Wno-unused-function -c %t.c -o %t.o

builtin.module {
  loop.kernel @linear(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>, %3: !loop.ptr<f32>) syms ["m"] access ["w", "r", "r", "r"] footprints [#loop.fp<[m, 8], [8, 1]>, #loop.fp<[8, 32], [32, 1]>, #loop.fp<[m, 32], [32, 1]>, #loop.fp<[8], [1]>] {
    %m = loop.sym "m"
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %c32 = arith.constant 32 : index
    loop.for "d0" %i = %c0 to %m {
      loop.for "d1" %j = %c0 to %c8 {
        %z = arith.constant 0.0 : f32
        %s = loop.for "k" %k = %c0 to %c32 lanes 16 iter(%a = %z) -> (f32) {
          %x = loop.load %2[%i, %k] strides [32, 1] : f32
          %w = loop.load %1[%j, %k] strides [32, 1] : f32
          %f = math.fma %x, %w, %a : f32
          loop.yield %f : f32
        }
        %b = loop.load %3[%j] strides [1] : f32
        %y = arith.addf %s, %b : f32
        loop.store %y, %0[%i, %j] strides [8, 1] : f32
      }
    }
  }
  sched.schedule @linear {
    sched.split "d1" by 4 into "d1o", "d1i"
    sched.vectorize "k" width 8
    sched.privatize "k"
    sched.slp "k" width 4
  }
}
// CHECK:      for (int64_t {{.*}}) {  /* k */
// CHECK:      }
// CHECK:      const __m256 [[H0:v[0-9]+]] = _mm256_add_ps(
// CHECK-NEXT: const float [[B0:v[0-9]+]] = p3[
// CHECK-NEXT: const __m256 [[H1:v[0-9]+]] = _mm256_add_ps(
// CHECK-NEXT: const float [[B1:v[0-9]+]] = p3[
// CHECK-NEXT: const __m256 [[H2:v[0-9]+]] = _mm256_add_ps(
// CHECK-NEXT: const float [[B2:v[0-9]+]] = p3[
// CHECK-NEXT: const __m256 [[H3:v[0-9]+]] = _mm256_add_ps(
// CHECK-NEXT: const float [[B3:v[0-9]+]] = p3[
// CHECK-NEXT: const __m128 [[S:v[0-9]+]] = nc_lanesum8x4([[H0]], [[H1]], [[H2]], [[H3]]);
// CHECK-NEXT: const __m128 [[B:v[0-9]+]] = _mm_setr_ps([[B0]], [[B1]], [[B2]], [[B3]]);
// CHECK-NEXT: const __m128 [[Y:v[0-9]+]] = _mm_add_ps([[S]], [[B]]);
// CHECK-NEXT: const float [[Y0:v[0-9]+]] = _mm_cvtss_f32(_mm_shuffle_ps([[Y]], [[Y]], 0x00));
// CHECK-NEXT: p0[{{.*}}] = [[Y0]];
// CHECK-NEXT: const float [[Y1:v[0-9]+]] = _mm_cvtss_f32(_mm_shuffle_ps([[Y]], [[Y]], 0x55));
// CHECK-NEXT: p0[{{.*}}] = [[Y1]];
// CHECK-NEXT: const float [[Y2:v[0-9]+]] = _mm_cvtss_f32(_mm_shuffle_ps([[Y]], [[Y]], 0xaa));
// CHECK-NEXT: p0[{{.*}}] = [[Y2]];
// CHECK-NEXT: const float [[Y3:v[0-9]+]] = _mm_cvtss_f32(_mm_shuffle_ps([[Y]], [[Y]], 0xff));
// CHECK-NEXT: p0[{{.*}}] = [[Y3]];
