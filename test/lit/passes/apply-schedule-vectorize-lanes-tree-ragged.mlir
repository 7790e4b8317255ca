// apply-schedule refuses to vectorize a lanes loop with a tail whose trip
// count (44) is no multiple of the tail's 8 lanes: after the block of 32 and
// the group of 8, 4 iterations would be left for half a vector.
// RUN: not nc-opt %s -p apply-schedule 2>&1 | filecheck %s

builtin.module {
  loop.kernel @dot(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[1], [1]>, #loop.fp<[64], [1]>, #loop.fp<[64], [1]>] {
    %c0 = arith.constant 0 : index
    %cub = arith.constant 44 : index
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
    sched.vectorize "k" width 8
  }
}
// CHECK: {{.*}}apply-schedule-vectorize-lanes-tree-ragged.mlir:20:5: apply-schedule: vectorize 'k': the trip count is not a known multiple of the tail's 8 lanes
