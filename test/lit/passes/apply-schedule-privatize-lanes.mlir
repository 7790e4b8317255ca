// apply-schedule with privatize on a lanes loop: the 4 rows of "d0" jammed into
// "k" give one lanes loop carrying 4 values, still "lanes 16": each row keeps
// its own 16 partial sums and halving tree, so the bits do not change.
// RUN: nc-opt %s -p apply-schedule | filecheck %s

builtin.module {
  loop.kernel @dot(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[4], [1]>, #loop.fp<[4, 32], [32, 1]>, #loop.fp<[32], [1]>] {
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %c32 = arith.constant 32 : index
    loop.for "d0" %i = %c0 to %c4 {
      %z = arith.constant 0.000000e+00 : f32
      %s = loop.for "k" %k = %c0 to %c32 lanes 16 iter(%acc = %z) -> (f32) {
        %x = loop.load %1[%i, %k] strides [32, 1] : f32
        %y = loop.load %2[%k] strides [1] : f32
        %f = math.fma %x, %y, %acc : f32
        loop.yield %f : f32
      }
      loop.store %s, %0[%i] strides [1] : f32
    }
  }
  sched.schedule @dot {
    sched.privatize "k"
  }
}
// CHECK-NOT:    loop.for "d0"
// CHECK:        %[[S0:[0-9a-z_]+]], %[[S1:[0-9a-z_]+]], %[[S2:[0-9a-z_]+]], %[[S3:[0-9a-z_]+]] = loop.for "k" %[[K:[0-9a-z_]+]] = %c0 to %c32 lanes 16 iter(%[[A0:[0-9a-z_]+]] = %{{.*}}, %[[A1:[0-9a-z_]+]] = %{{.*}}, %[[A2:[0-9a-z_]+]] = %{{.*}}, %[[A3:[0-9a-z_]+]] = %{{.*}}) -> (f32, f32, f32, f32) {
// CHECK:          math.fma %{{.*}}, %{{.*}}, %[[A0]] : f32
// CHECK:          math.fma %{{.*}}, %{{.*}}, %[[A1]] : f32
// CHECK:          math.fma %{{.*}}, %{{.*}}, %[[A2]] : f32
// CHECK:          math.fma %{{.*}}, %{{.*}}, %[[A3]] : f32
// CHECK:        }
// CHECK-NEXT:   loop.store %[[S0]], %0[%{{.*}}] strides [1] : f32
// CHECK-NEXT:   loop.store %[[S1]], %0[%{{.*}}] strides [1] : f32
// CHECK-NEXT:   loop.store %[[S2]], %0[%{{.*}}] strides [1] : f32
// CHECK-NEXT:   loop.store %[[S3]], %0[%{{.*}}] strides [1] : f32
