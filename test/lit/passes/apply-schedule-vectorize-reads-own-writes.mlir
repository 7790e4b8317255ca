// vectorize refuses a loop that loads the argument it stores (a recurrence through memory: lanes would read values the scalar loop had just written).
// RUN: not nc-opt %s -p apply-schedule 2>&1 | filecheck %s

builtin.module {
  loop.kernel @k(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>) syms ["m"] access ["w", "r"] footprints [#loop.fp<[m, 8], [8, 1]>, #loop.fp<[m, 8], [8, 1]>] {
    %m = loop.sym "m"
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %c1 = arith.constant 1 : index
    loop.for "d0" %i = %c0 to %m {
      loop.for "d1" %j = %c0 to %c8 {
        %x = loop.load %0[%i, %j] strides [8, 1] : f32
        %j1 = arith.addi %j, %c1 : index
        loop.store %x, %0[%i, %j1] strides [8, 1] : f32
      }
    }
  }
  sched.schedule @k {
    sched.vectorize "d1" width 8
  }
}
// CHECK: {{.*}}apply-schedule-vectorize-reads-own-writes.mlir:19:5: apply-schedule: vectorize 'd1': loop 'd1' loads from argument #0, which the kernel writes
