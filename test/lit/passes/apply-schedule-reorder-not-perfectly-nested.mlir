// reorder refuses loops with other ops between them (here the load sits in d0, outside d1).
// RUN: not nc-opt %s -p apply-schedule 2>&1 | filecheck %s

builtin.module {
  loop.kernel @k(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>) syms ["m"] access ["w", "r"] footprints [#loop.fp<[m, 8], [8, 1]>, #loop.fp<[m, 8], [8, 1]>] {
    %m = loop.sym "m"
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    loop.for "d0" %i = %c0 to %m {
      %x = loop.load %1[%i, %c0] strides [8, 1] : f32
      loop.for "d1" %j = %c0 to %c8 {
        loop.store %x, %0[%i, %j] strides [8, 1] : f32
      }
    }
  }
  sched.schedule @k {
    sched.reorder ["d1", "d0"]
  }
}
// CHECK: {{.*}}apply-schedule-reorder-not-perfectly-nested.mlir:17:5: apply-schedule: reorder: loop 'd0' holds other ops besides loop 'd1'
