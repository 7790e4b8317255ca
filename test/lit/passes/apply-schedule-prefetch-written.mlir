// apply-schedule refuses to prefetch an argument the kernel writes (only a
// stream it reads is prefetched), naming the directive's line.
// RUN: not nc-opt %s -p apply-schedule 2>&1 | filecheck %s

builtin.module {
  loop.kernel @k(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>) syms ["n"] access ["w", "r"] footprints [#loop.fp<[n], [1]>, #loop.fp<[n], [1]>] {
    %n = loop.sym "n"
    %c0 = arith.constant 0 : index
    loop.for "d0" %i = %c0 to %n {
      %x = loop.load %1[%i] strides [1] : f32
      loop.store %x, %0[%i] strides [1] : f32
    }
  }
  sched.schedule @k {
    sched.prefetch arg 0 dim 0 ahead 16 locality 2
  }
}
// CHECK: apply-schedule-prefetch-written.mlir:15:5: apply-schedule: @k: prefetch arg 0: the kernel writes argument #0; only an argument it only reads is prefetched
