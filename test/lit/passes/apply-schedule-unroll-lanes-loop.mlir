// apply-schedule refuses to unroll a lanes loop (the copies would chain one
// accumulator instead of keeping 16 partial sums).
// RUN: not nc-opt %s -p apply-schedule 2>&1 | filecheck %s

builtin.module {
  loop.kernel @dot(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[4], [1]>, #loop.fp<[4, 32], [32, 1]>, #loop.fp<[32], [1]>] {
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %cub = arith.constant 32 : index
    loop.for "d0" %i = %c0 to %c4 {
      %z = arith.constant 0.000000e+00 : f32
      %s = loop.for "k" %k = %c0 to %cub lanes 16 iter(%acc = %z) -> (f32) {
        %x = loop.load %1[%i, %k] strides [32, 1] : f32
        %y = loop.load %2[%k] strides [1] : f32
        %f = math.fma %x, %y, %acc : f32
        loop.yield %f : f32
      }
      loop.store %s, %0[%i] strides [1] : f32
    }
  }
  sched.schedule @dot {
    sched.unroll "k"
  }
}
// CHECK: {{.*}}apply-schedule-unroll-lanes-loop.mlir:22:5: apply-schedule: unroll 'k': a lanes loop's order is fixed by its lanes (vectorize it instead)
