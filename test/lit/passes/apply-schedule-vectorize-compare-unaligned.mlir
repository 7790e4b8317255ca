// apply-schedule refuses to vectorize a compare of the lane-varying index
// against a bound that is no multiple of the width (i < 12 by 8: the vector
// of lanes 8..15 straddles it, its lanes would take different branches).
// RUN: not nc-opt %s -p apply-schedule 2>&1 | filecheck %s

builtin.module {
  loop.kernel @concat(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>) syms [] access ["w", "r"] footprints [#loop.fp<[32], [1]>, #loop.fp<[16], [1]>] {
    %c0 = arith.constant 0 : index
    %c32 = arith.constant 32 : index
    %c12 = arith.constant 12 : index
    loop.for "d0" %i = %c0 to %c32 {
      %in = arith.cmpi slt, %i, %c12 : index
      %x = loop.if %in -> (f32) {
        %a = loop.load %1[%i] strides [1] : f32
        loop.yield %a : f32
      } else {
        %j = arith.subi %i, %c12 : index
        %b = loop.load %1[%j] strides [1] : f32
        loop.yield %b : f32
      }
      loop.store %x, %0[%i] strides [1] : f32
    }
  }
  sched.schedule @concat {
    sched.vectorize "d0" width 8
  }
}
// CHECK: apply-schedule: vectorize 'd0': arith.cmpi on lane-varying values has no exact integer form (only base + lane < c with base and c multiples of 8 is uniform)
