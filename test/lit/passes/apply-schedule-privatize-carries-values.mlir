// apply-schedule refuses to privatize "k" when the loop around it carries a
// value itself (a sum over "d0" of sums over "k"): its copies could not run
// side by side.
// RUN: not nc-opt %s -p apply-schedule 2>&1 | filecheck %s

builtin.module {
  loop.kernel @k(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>) syms [] access ["w", "r"] footprints [#loop.fp<[], []>, #loop.fp<[16], [1]>] {
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    %z = arith.constant 0.0 : f32
    %s = loop.for "d0" %i = %c0 to %c16 iter(%a = %z) -> (f32) {
      %t = loop.for "k" %j = %c0 to %c16 iter(%b = %a) -> (f32) {
        %x = loop.load %1[%j] strides [1] : f32
        %y = arith.addf %b, %x : f32
        loop.yield %y : f32
      }
      loop.yield %t : f32
    }
    loop.store %s, %0[] strides [] : f32
  }
  sched.schedule @k {
    sched.privatize "k"
  }
}
// CHECK: apply-schedule: privatize 'k': loop 'd0' carries values
