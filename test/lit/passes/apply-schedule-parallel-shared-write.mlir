// parallel refuses a loop whose store does not depend on its index: every iteration writes row 0.
// RUN: not nc-opt %s -p apply-schedule 2>&1 | filecheck %s

builtin.module {
  loop.kernel @k(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>) syms ["m"] access ["w", "r"] footprints [#loop.fp<[m, 8], [8, 1]>, #loop.fp<[m, 8], [8, 1]>] {
    %m = loop.sym "m"
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    loop.for "d0" %i = %c0 to %m {
      loop.for "d1" %j = %c0 to %c8 {
        %x = loop.load %1[%i, %j] strides [8, 1] : f32
        loop.store %x, %0[%c0, %j] strides [8, 1] : f32
      }
    }
  }
  sched.schedule @k {
    sched.parallel "d0"
  }
}
// CHECK: {{.*}}apply-schedule-parallel-shared-write.mlir:17:5: apply-schedule: parallel 'd0': a store does not depend on the loop's index
