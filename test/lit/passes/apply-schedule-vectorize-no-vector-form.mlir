// apply-schedule refuses to vectorize a loop that converts lane-varying data
// to an integer and back: a cast has no exact vector form.
// RUN: not nc-opt %s -p apply-schedule 2>&1 | filecheck %s

builtin.module {
  loop.kernel @k(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[16], [1]>, #loop.fp<[32], [1]>, #loop.fp<[16], [1]>] {
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    loop.for "d0" %i = %c0 to %c16 {
      %x = loop.load %1[%i] strides [1] : f32
      %y = arith.fptosi %x : f32 to i32
      %z = arith.sitofp %y : i32 to f32
      loop.store %z, %0[%i] strides [1] : f32
    }
  }
  sched.schedule @k {
    sched.vectorize "d0" width 8
  }
}
// CHECK: apply-schedule: vectorize 'd0': arith.fptosi on lane-varying values has no exact vector form
