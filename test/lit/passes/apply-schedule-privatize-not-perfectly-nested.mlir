// apply-schedule refuses to privatize "k" when the loop around it, "d1",
// stores before "k" runs: the jam would run every copy's code before "k"
// ahead of the loop, moving that store before the other copies' work.
// RUN: not nc-opt %s -p apply-schedule 2>&1 | filecheck %s

builtin.module {
  loop.kernel @mm(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms [] access ["w", "r", "w"] footprints [#loop.fp<[8], [1]>, #loop.fp<[6, 8], [8, 1]>, #loop.fp<[8], [1]>] {
    %c0 = arith.constant 0 : index
    %c6 = arith.constant 6 : index
    %c8 = arith.constant 8 : index
    loop.for "d1" %j = %c0 to %c8 {
      %z = arith.constant 0.0 : f32
      loop.store %z, %2[%j] strides [1] : f32
      %s = loop.for "k" %k = %c0 to %c6 iter(%acc = %z) -> (f32) {
        %b = loop.load %1[%k, %j] strides [8, 1] : f32
        %t = arith.addf %acc, %b : f32
        loop.yield %t : f32
      }
      loop.store %s, %0[%j] strides [1] : f32
    }
  }
  sched.schedule @mm {
    sched.privatize "k"
  }
}
// CHECK: apply-schedule: privatize 'k': loop 'd1' stores before 'k'
