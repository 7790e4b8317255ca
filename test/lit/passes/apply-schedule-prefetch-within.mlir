// apply-schedule with prefetch within a loop: the rows of a matrix-vector
// product split by 4 with the leftover rows peeled (d0_tail, its sum k_tail),
// and the rows of %1 prefetched "within d0_tail" only: one prefetch, before the
// load of a row in k_tail (the decode nest: one row streams %1); none in the
// whole tiles d0o (a prefill tile, which reuses its rows from cache). The C has
// that one __builtin_prefetch and compiles.
// RUN: nc-opt %s -p apply-schedule | filecheck %s
// RUN: nc-opt %s -p apply-schedule -t c | filecheck %s --check-prefix=C
// RUN: nc-opt %s -p apply-schedule -t c > %t.c && gcc -std=c11 -O3 -mavx2 -mfma -ffp-contract=off -fwrapv -fno-math-errno -Wall -Wextra -Werror -Wno-unused-function -c %t.c -o %t.o

builtin.module {
  loop.kernel @rows(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms ["n"] access ["w", "r", "r"] footprints [#loop.fp<[n], [1]>, #loop.fp<[n, 32], [32, 1]>, #loop.fp<[32], [1]>] {
    %n = loop.sym "n"
    %c0 = arith.constant 0 : index
    %c32 = arith.constant 32 : index
    loop.for "d0" %j = %c0 to %n {
      %z = arith.constant 0.000000e+00 : f32
      %s = loop.for "k" %k = %c0 to %c32 lanes 8 iter(%acc = %z) -> (f32) {
        %w = loop.load %1[%j, %k] strides [32, 1] : f32
        %x = loop.load %2[%k] strides [1] : f32
        %p = math.fma %w, %x, %acc : f32
        loop.yield %p : f32
      }
      loop.store %s, %0[%j] strides [1] : f32
    }
  }
  sched.schedule @rows {
    sched.split "d0" by 4 into "d0o", "d0i" peel
    sched.vectorize "k" width 8
    sched.vectorize "k_tail" width 8
    sched.prefetch arg 1 dim 0 ahead 64 locality 2 within "d0_tail"
  }
}

// CHECK-LABEL: loop.for "d0o"
// CHECK-NOT:     loop.prefetch
// CHECK:         loop.for "k" %[[K:.*]] = %{{.*}} to %{{.*}} step 8
// CHECK-NOT:     loop.prefetch
// CHECK:         %{{.*}} = loop.load %1[%{{.*}}, %[[K]]] strides [32, 1] : vector<8xf32>
// CHECK-NOT:     loop.prefetch
// CHECK:       loop.for "d0_tail" %[[J:.*]] = %{{.*}} to %{{.*}} {
// CHECK:         loop.for "k_tail" %[[KT:.*]] = %{{.*}} to %{{.*}} step 8
// CHECK-NEXT:      %[[AHEAD:.*]] = arith.constant 64 : index
// CHECK-NEXT:      %[[ROW:.*]] = arith.addi %[[J]], %[[AHEAD]] : index
// CHECK-NEXT:      loop.prefetch %1[%[[ROW]], %[[KT]]] strides [32, 1] : f32 locality 2
// CHECK-NEXT:      %{{.*}} = loop.load %1[%[[J]], %[[KT]]] strides [32, 1] : vector<8xf32>
// CHECK-NOT:   loop.prefetch
// CHECK-NOT:   sched.

// C:           __builtin_prefetch((const void *)((uintptr_t)p1 + (uintptr_t)({{.*}}) * sizeof p1[0]), 0, 2);
// C-NEXT:      _mm256_loadu_ps(&p1[
// C-NOT:       __builtin_prefetch
