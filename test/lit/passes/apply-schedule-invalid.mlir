// apply-schedule refuses a parallel reduction loop (its iterations carry a
// sum) and names the reason; the module is left as it was.
// RUN: not nc-opt %s -p apply-schedule 2>&1 | filecheck %s

builtin.module {
  loop.kernel @sum(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>) syms [] access ["w", "r"] footprints [#loop.fp<[], []>, #loop.fp<[8], [1]>] {
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %z = arith.constant 0.0 : f32
    %s = loop.for "k" %k = %c0 to %c8 iter(%acc = %z) -> (f32) {
      %x = loop.load %1[%k] strides [1] : f32
      %t = arith.addf %acc, %x : f32
      loop.yield %t : f32
    }
    loop.store %s, %0[] strides [] : f32
  }
  sched.schedule @sum {
    sched.parallel "k"
  }
}
// CHECK: apply-schedule: parallel 'k': the loop carries 1 value(s) from one iteration to the next
