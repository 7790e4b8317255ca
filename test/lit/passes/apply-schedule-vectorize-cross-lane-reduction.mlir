// apply-schedule refuses to vectorize a loop that carries a value: the sum
// over k would become a sum across the lanes (another order of additions).
// RUN: not nc-opt %s -p apply-schedule 2>&1 | filecheck %s

builtin.module {
  loop.kernel @sum(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>) syms [] access ["w", "r"] footprints [#loop.fp<[], []>, #loop.fp<[16], [1]>] {
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    %z = arith.constant 0.0 : f32
    %s = loop.for "k" %k = %c0 to %c16 iter(%acc = %z) -> (f32) {
      %x = loop.load %1[%k] strides [1] : f32
      %t = arith.addf %acc, %x : f32
      loop.yield %t : f32
    }
    loop.store %s, %0[] strides [] : f32
  }
  sched.schedule @sum {
    sched.vectorize "k" width 8
  }
}
// CHECK: apply-schedule: vectorize 'k': the loop carries 1 value(s): a reduction across iterations would run across lanes
