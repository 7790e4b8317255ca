// apply-schedule refuses to vectorize a loop whose store address does not
// depend on the lane: all 8 lanes would write the same element.
// RUN: not nc-opt %s -p apply-schedule 2>&1 | filecheck %s

builtin.module {
  loop.kernel @k(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[16], [1]>, #loop.fp<[32], [1]>, #loop.fp<[16], [1]>] {
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    loop.for "d0" %i = %c0 to %c16 {
      %x = loop.load %1[%i] strides [1] : f32
      loop.store %x, %0[%c0] strides [1] : f32
    }
  }
  sched.schedule @k {
    sched.vectorize "d0" width 8
  }
}
// CHECK: apply-schedule: vectorize 'd0': a store's address does not depend on the lane
