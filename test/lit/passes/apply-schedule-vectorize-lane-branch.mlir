// apply-schedule refuses to vectorize a loop with a loop.if whose condition
// depends on the lane: a blend would execute both branches and their loads.
// RUN: not nc-opt %s -p apply-schedule 2>&1 | filecheck %s

builtin.module {
  loop.kernel @k(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[16], [1]>, #loop.fp<[32], [1]>, #loop.fp<[16], [1]>] {
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    loop.for "d0" %i = %c0 to %c16 {
      %v = loop.load %2[%i] strides [1] : f32
      %zero = arith.constant 0.0 : f32
      %lt = arith.cmpf olt, %v, %zero : f32
      %x = loop.if %lt -> (f32) {
        %a = loop.load %1[%i] strides [1] : f32
        loop.yield %a : f32
      } else {
        %b = loop.load %2[%i] strides [1] : f32
        loop.yield %b : f32
      }
      loop.store %x, %0[%i] strides [1] : f32
    }
  }
  sched.schedule @k {
    sched.vectorize "d0" width 8
  }
}
// CHECK: apply-schedule: vectorize 'd0': a loop.if's condition depends on the lane (a blend would execute both branches and their loads)
