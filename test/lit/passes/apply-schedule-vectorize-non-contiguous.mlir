// apply-schedule refuses to vectorize a loop that reads a column: the lane
// index addresses %1 at stride 4, so consecutive lanes are not consecutive
// elements (a transposed read, as an unpacked weight's W.T).
// RUN: not nc-opt %s -p apply-schedule 2>&1 | filecheck %s

builtin.module {
  loop.kernel @k(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>) syms [] access ["w", "r"] footprints [#loop.fp<[16], [1]>, #loop.fp<[16, 4], [4, 1]>] {
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    loop.for "d0" %i = %c0 to %c16 {
      %x = loop.load %1[%i, %c0] strides [4, 1] : f32
      loop.store %x, %0[%i] strides [1] : f32
    }
  }
  sched.schedule @k {
    sched.vectorize "d0" width 8
  }
}
// CHECK: apply-schedule: vectorize 'd0': loop.load of argument #1 steps by 4 elements per lane, not 1
