// apply-schedule refuses to run a loop nested in a lanes loop on the thread
// pool: the lanes loop's iterations (and their partial sums) are sequential.
// RUN: not nc-opt %s -p apply-schedule 2>&1 | filecheck %s

builtin.module {
  loop.kernel @k(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>) syms [] access ["w", "r"] footprints [#loop.fp<[17], [1]>, #loop.fp<[16], [1]>] {
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %c16 = arith.constant 16 : index
    %z = arith.constant 0.000000e+00 : f32
    %s = loop.for "k" %k = %c0 to %c16 lanes 16 iter(%acc = %z) -> (f32) {
      %x = loop.load %1[%k] strides [1] : f32
      loop.for "d0" %j = %c0 to %c4 {
        %c1 = arith.constant 1 : index
        %o = arith.addi %j, %c1 : index
        loop.store %x, %0[%o] strides [1] : f32
      }
      %t = arith.addf %acc, %x : f32
      loop.yield %t : f32
    }
    loop.store %s, %0[%c0] strides [1] : f32
  }
  sched.schedule @k {
    sched.parallel "d0"
  }
}
// CHECK: {{.*}}apply-schedule-parallel-lanes-loop.mlir:24:5: apply-schedule: parallel 'd0': enclosing loop 'k' is a lanes loop
