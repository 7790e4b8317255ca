// apply-schedule with split, unroll and reorder: a matmul kernel's n loop is
// split by 4 (6 columns: a guarded tail tile), k by 2 (6: whole tiles, a
// constant inner trip count) and unrolled, the n tiles moved outside m.
// RUN: nc-opt %s -p apply-schedule | filecheck %s

builtin.module {
  loop.kernel @mm(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms ["m"] access ["w", "r", "r"] footprints [#loop.fp<[m, 6], [6, 1]>, #loop.fp<[m, 6], [6, 1]>, #loop.fp<[6, 6], [6, 1]>] {
    %m = loop.sym "m"
    %c0 = arith.constant 0 : index
    %c6 = arith.constant 6 : index
    loop.for "d0" %i = %c0 to %m {
      loop.for "d1" %j = %c0 to %c6 {
        %z = arith.constant 0.0 : f32
        %s = loop.for "k" %k = %c0 to %c6 iter(%acc = %z) -> (f32) {
          %a = loop.load %1[%i, %k] strides [6, 1] : f32
          %b = loop.load %2[%k, %j] strides [6, 1] : f32
          %p = arith.mulf %a, %b : f32
          %t = arith.addf %acc, %p : f32
          loop.yield %t : f32
        }
        loop.store %s, %0[%i, %j] strides [6, 1] : f32
      }
    }
  }
  sched.schedule @mm {
    sched.split "d1" by 4 into "d1o", "d1i"
    sched.split "k" by 2 into "ko", "ki"
    sched.unroll "ki"
    sched.reorder ["d1o", "d0"]
  }
}
// CHECK:      loop.for "d1o" %[[O:.*]] = %{{.*}} to %{{.*}} {
// CHECK-NEXT:   loop.for "d0" %[[I:.*]] = %{{.*}} to %{{.*}} {
// CHECK:          %[[COUNT:.*]] = arith.minsi %{{.*}}, %{{.*}} : index
// CHECK:          loop.for "d1i" %{{.*}} = %{{.*}} to %[[COUNT]] {
// CHECK:            loop.for "ko" %{{.*}} = %{{.*}} to %{{.*}} iter(%[[ACC:.*]] = %{{.*}}) -> (f32) {
// CHECK:              %[[T0:.*]] = arith.addf %[[ACC]], %{{.*}} : f32
// CHECK:              %[[T1:.*]] = arith.addf %[[T0]], %{{.*}} : f32
// CHECK-NEXT:         loop.yield %[[T1]] : f32
// CHECK-NOT:  loop.for "ki"
// CHECK-NOT:  sched.
