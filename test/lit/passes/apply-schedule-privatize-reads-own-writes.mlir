// apply-schedule refuses to privatize "k" when the jammed loop "d0" loads
// from %0, which the kernel writes: the copies' loads would move before
// earlier copies' stores and could read other values.
// RUN: not nc-opt %s -p apply-schedule 2>&1 | filecheck %s

builtin.module {
  loop.kernel @k(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>) syms [] access ["w", "r"] footprints [#loop.fp<[16], [1]>, #loop.fp<[16], [1]>] {
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    loop.for "d0" %i = %c0 to %c16 {
      %z = arith.constant 0.0 : f32
      %t = loop.for "k" %j = %c0 to %c16 iter(%b = %z) -> (f32) {
        %x = loop.load %0[%j] strides [1] : f32
        %y = arith.addf %b, %x : f32
        loop.yield %y : f32
      }
      loop.store %t, %0[%i] strides [1] : f32
    }
  }
  sched.schedule @k {
    sched.privatize "k"
  }
}
// CHECK: apply-schedule: privatize 'k': loop 'd0' loads from argument #0, which the kernel writes
