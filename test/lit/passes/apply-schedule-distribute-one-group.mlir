// apply-schedule refuses to distribute "k" when its sums share a load (one
// group): there is nothing to split, and the kernel is left as it was.
// RUN: not nc-opt %s -p apply-schedule 2>&1 | filecheck %s

builtin.module {
  loop.kernel @k(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>) syms ["n"] access ["w", "r"] footprints [#loop.fp<[2], [1]>, #loop.fp<[n], [1]>] {
    %n = loop.sym "n"
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %z = arith.constant 0.0 : f32
    %a, %b = loop.for "k" %k = %c0 to %n iter(%x = %z, %y = %z) -> (f32, f32) {
      %u = loop.load %1[%k] strides [1] : f32
      %x1 = arith.addf %x, %u : f32
      %y1 = arith.mulf %y, %u : f32
      loop.yield %x1, %y1 : f32, f32
    }
    loop.store %a, %0[%c0] strides [1] : f32
    loop.store %b, %0[%c1] strides [1] : f32
  }
  sched.schedule @k {
    sched.distribute "k"
  }
}
// CHECK: apply-schedule: distribute 'k': its carried values form one group (nothing to distribute)
