// apply-schedule refuses to privatize a loop that no loop encloses: there is
// no loop around it to unroll and jam into it.
// RUN: not nc-opt %s -p apply-schedule 2>&1 | filecheck %s

builtin.module {
  loop.kernel @mm(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms ["m"] access ["w", "r", "r"] footprints [#loop.fp<[m, 8], [8, 1]>, #loop.fp<[m, 6], [6, 1]>, #loop.fp<[6, 8], [8, 1]>] {
    %m = loop.sym "m"
    %c0 = arith.constant 0 : index
    %c6 = arith.constant 6 : index
    %c8 = arith.constant 8 : index
    loop.for "d0" %i = %c0 to %m {
      loop.for "d1" %j = %c0 to %c8 {
        %z = arith.constant 0.0 : f32
        %s = loop.for "k" %k = %c0 to %c6 iter(%acc = %z) -> (f32) {
          %a = loop.load %1[%i, %k] strides [6, 1] : f32
          %b = loop.load %2[%k, %j] strides [8, 1] : f32
          %p = arith.mulf %a, %b : f32
          %t = arith.addf %acc, %p : f32
          loop.yield %t : f32
        }
        loop.store %s, %0[%i, %j] strides [8, 1] : f32
      }
    }
  }
  sched.schedule @mm {
    sched.privatize "d0"
  }
}
// CHECK: apply-schedule: privatize 'd0': the loop is not nested in another loop
