// apply-schedule refuses to vectorize a lanes loop whose tree adds lanes of
// one vector before it adds the vectors: 16 lanes in vectors of 8 need the
// tree's first bit to be 3 (lane l + lane l + 8: vector 0 + vector 1), this
// one starts with bit 0 (lane 2j + lane 2j + 1, inside a vector).
// RUN: not nc-opt %s -p apply-schedule 2>&1 | filecheck %s

builtin.module {
  loop.kernel @dot(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[1], [1]>, #loop.fp<[64], [1]>, #loop.fp<[64], [1]>] {
    %c0 = arith.constant 0 : index
    %cub = arith.constant 64 : index
    %z = arith.constant 0.000000e+00 : f32
    %s = loop.for "k" %k = %c0 to %cub lanes 16 tree [0, 1, 2, 3] iter(%acc = %z) -> (f32) {
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
// CHECK: {{.*}}apply-schedule-vectorize-lanes-tree-order.mlir:21:5: apply-schedule: vectorize 'k': the tree [0, 1, 2, 3] does not combine the 2 vectors of 8 lanes first (its first 1 bit(s) must be [3] in some order, after the vectors' top lane bits, halved)
