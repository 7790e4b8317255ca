// A vector of f32 loaded for two or more FMAs is held in a register
// (NC_PIN, an empty asm): a tile of 2 output columns loads its row of x once
// for both columns' FMAs; short of registers gcc would fold that load into
// each FMA as a memory operand, one load per FMA. A load for one FMA (a
// weight row) stays a const for gcc to fold. It compiles with -Werror.
// RUN: nc-opt %s -p apply-schedule -t c | filecheck %s
// RUN: nc-opt %s -p apply-schedule -t c > %t.c && gcc -std=c11 -O3 -mavx2 -mfma -mavx512f -ffp-contract=off -fwrapv -fno-math-errno -Wall -Wextra -Werror -Wno-unused-function -c %t.c -o %t.o

builtin.module {
  loop.kernel @linear(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms ["m"] access ["w", "r", "r"] footprints [#loop.fp<[m, 8], [8, 1]>, #loop.fp<[8, 32], [32, 1]>, #loop.fp<[m, 32], [32, 1]>] {
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
        loop.store %s, %0[%i, %j] strides [8, 1] : f32
      }
    }
  }
  sched.schedule @linear {
    sched.split "d1" by 2 into "d1o", "d1i"
    sched.vectorize "k" width 16
    sched.privatize "k"
  }
}
// CHECK:      #define NC_PIN(v) __asm__("" : "+v"(v))
// CHECK:      for (int64_t {{.*}}) {  /* k */
// CHECK-NEXT:   __m512 [[X:v[0-9]+]] = _mm512_loadu_ps(&p2[
// CHECK-NEXT:   NC_PIN([[X]]);
// CHECK-NEXT:   const __m512 [[W0:v[0-9]+]] = _mm512_loadu_ps(&p1[
// CHECK-NEXT:   const __m512 {{v[0-9]+}} = _mm512_fmadd_ps([[X]], [[W0]],
// CHECK-NEXT:   const __m512 [[W1:v[0-9]+]] = _mm512_loadu_ps(&p1[
// CHECK-NEXT:   const __m512 {{v[0-9]+}} = _mm512_fmadd_ps([[X]], [[W1]],
// CHECK-NOT:    NC_PIN
// CHECK:      return 0;
