// apply-schedule refuses a prefetch scoped to a loop the kernel does not have
// (here the peeled tail of a split that was never peeled), naming the
// directive's line, the kernel, the argument and the loops it has.
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
    sched.split "d0" by 4 into "d0o", "d0i"
    sched.prefetch arg 1 dim 0 ahead 16 locality 2 within "d0_tail"
  }
}
// CHECK: apply-schedule-prefetch-within-missing.mlir:17:5: apply-schedule: @k: prefetch arg 1 within 'd0_tail': the kernel has no loop named 'd0_tail' (loops: d0i, d0o)
