// apply-schedule refuses to vectorize spec §5 kernel A's lanes loop (lanes 32,
// tail 8) by 16 when its tail runs (72 terms: one group of 8 after the two
// blocks of 32): the groups of 8 lanes after the last block of 32 go into lanes
// 0..7, half a vector of 16 (64 terms run no tail: apply-schedule-vectorize-
// dot4-zmm.mlir).
// RUN: not nc-opt %s -p apply-schedule 2>&1 | filecheck %s

builtin.module {
  loop.kernel @dot(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[1], [1]>, #loop.fp<[72], [1]>, #loop.fp<[72], [1]>] {
    %c0 = arith.constant 0 : index
    %cub = arith.constant 72 : index
    %z = arith.constant 0.000000e+00 : f32
    %s = loop.for "k" %k = %c0 to %cub lanes 32 tail 8 tree [3, 4, 2, 0, 1] iter(%acc = %z) -> (f32) {
      %x = loop.load %1[%k] strides [1] : f32
      %y = loop.load %2[%k] strides [1] : f32
      %f = math.fma %x, %y, %acc : f32
      loop.yield %f : f32
    }
    loop.store %s, %0[%c0] strides [1] : f32
  }
  sched.schedule @dot {
    sched.vectorize "k" width 16
  }
}
// CHECK: {{.*}}apply-schedule-vectorize-lanes-tree-tail.mlir:22:5: apply-schedule: vectorize 'k': width 16 is wider than the tail's groups of 8 lanes
