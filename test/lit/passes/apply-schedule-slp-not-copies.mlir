// apply-schedule refuses slp where the code after the loop is not jammed
// copies of one epilogue: without privatize there is one output per k loop,
// fewer than the 4 lanes of a group.
// RUN: not nc-opt %s -p apply-schedule 2>&1 | filecheck %s

builtin.module {
  loop.kernel @mm(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms ["m"] access ["w", "r", "r"] footprints [#loop.fp<[m, 8], [8, 1]>, #loop.fp<[m, 32], [32, 1]>, #loop.fp<[8, 32], [32, 1]>] {
    %m = loop.sym "m"
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %c32 = arith.constant 32 : index
    loop.for "d0" %i = %c0 to %m {
      loop.for "d1" %j = %c0 to %c8 {
        %z = arith.constant 0.0 : f32
        %s = loop.for "k" %k = %c0 to %c32 lanes 16 iter(%acc = %z) -> (f32) {
          %a = loop.load %1[%i, %k] strides [32, 1] : f32
          %b = loop.load %2[%j, %k] strides [32, 1] : f32
          %t = math.fma %a, %b, %acc : f32
          loop.yield %t : f32
        }
        %e = math.exp %s : f32
        loop.store %e, %0[%i, %j] strides [8, 1] : f32
      }
    }
  }
  sched.schedule @mm {
    sched.vectorize "k" width 16
    sched.slp "k" width 4
  }
}
// CHECK: apply-schedule: slp 'k': the 3 ops after the loop are not 4 or more copies of one epilogue
