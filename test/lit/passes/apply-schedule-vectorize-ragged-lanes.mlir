// apply-schedule refuses to vectorize a lanes loop whose trip count (20) is
// no multiple of its 16 lanes: whole vectors could not hold the last, partial
// group of lanes (the scalar lanes loop runs it as it is).
// RUN: not nc-opt %s -p apply-schedule 2>&1 | filecheck %s

builtin.module {
  loop.kernel @dot(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[4], [1]>, #loop.fp<[4, 20], [20, 1]>, #loop.fp<[20], [1]>] {
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %cub = arith.constant 20 : index
    loop.for "d0" %i = %c0 to %c4 {
      %z = arith.constant 0.000000e+00 : f32
      %s = loop.for "k" %k = %c0 to %cub lanes 16 iter(%acc = %z) -> (f32) {
        %x = loop.load %1[%i, %k] strides [20, 1] : f32
        %y = loop.load %2[%k] strides [1] : f32
        %f = math.fma %x, %y, %acc : f32
        loop.yield %f : f32
      }
      loop.store %s, %0[%i] strides [1] : f32
    }
  }
  sched.schedule @dot {
    sched.vectorize "k" width 8
  }
}
// CHECK: {{.*}}apply-schedule-vectorize-ragged-lanes.mlir:23:5: apply-schedule: vectorize 'k': the trip count is not a known multiple of 16 lanes
