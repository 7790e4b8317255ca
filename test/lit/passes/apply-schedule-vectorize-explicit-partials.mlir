// apply-schedule with vectorize on a loop holding a lanes loop of symbolic trip
// count (attention's context: a column block of V summed over the positions):
// the lanes loop's 4 partials become 4 explicit vectors. Loop "k" steps by 4
// over the whole groups, copy l updating partial l; the iterations after them
// (at most 3) update partials 0, 1, 2 under a uniform loop.if each; then the
// halving tree of bits [1, 0]: (p0 + p2) + (p1 + p3), the lanes loop's order.
// RUN: nc-opt %s -p apply-schedule | filecheck %s

builtin.module {
  loop.kernel @context(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms ["n"] access ["w", "r", "r"] footprints [#loop.fp<[8], [1]>, #loop.fp<[n], [1]>, #loop.fp<[n, 8], [8, 1]>] {
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %n = loop.sym "n"
    %z = arith.constant 0.0 : f32
    loop.for "d0" %d = %c0 to %c8 {
      %s = loop.for "k" %k = %c0 to %n lanes 4 iter(%acc = %z) -> (f32) {
        %p = loop.load %1[%k] strides [1] : f32
        %v = loop.load %2[%k, %d] strides [8, 1] : f32
        %f = math.fma %p, %v, %acc : f32
        loop.yield %f : f32
      }
      loop.store %s, %0[%d] strides [1] : f32
    }
  }
  sched.schedule @context {
    sched.vectorize "d0" width 8
  }
}
// CHECK-LABEL:  loop.kernel @context
// CHECK:          %[[Z:[0-9a-z_]+]] = loop.splat %z : f32 -> vector<8xf32>
// CHECK:          %[[W:[0-9a-z_]+]] = arith.addi %c0, %{{.*}} : index
// CHECK-NEXT:     %[[P0:[0-9a-z_]+]], %[[P1:[0-9a-z_]+]], %[[P2:[0-9a-z_]+]], %[[P3:[0-9a-z_]+]] = loop.for "k" %[[K:[0-9a-z_]+]] = %c0 to %[[W]] step 4 iter(%[[A0:[0-9a-z_]+]] = %[[Z]], %[[A1:[0-9a-z_]+]] = %[[Z]], %[[A2:[0-9a-z_]+]] = %[[Z]], %[[A3:[0-9a-z_]+]] = %[[Z]])
// CHECK:            math.fma %{{.*}}, %{{.*}}, %[[A0]] : vector<8xf32>
// CHECK:            math.fma %{{.*}}, %{{.*}}, %[[A3]] : vector<8xf32>
// CHECK:            loop.yield
// CHECK:          %[[I0:[0-9a-z_]+]] = arith.addi %[[W]], %{{.*}} : index
// CHECK-NEXT:     %[[C0:[0-9a-z_]+]] = arith.cmpi slt, %[[I0]], %n : index
// CHECK-NEXT:     %[[Q0:[0-9a-z_]+]] = loop.if %[[C0]] -> (vector<8xf32>) {
// CHECK:            math.fma %{{.*}}, %{{.*}}, %[[P0]] : vector<8xf32>
// CHECK:          } else {
// CHECK-NEXT:       loop.yield %[[P0]] : vector<8xf32>
// CHECK:          %[[Q1:[0-9a-z_]+]] = loop.if %{{.*}} -> (vector<8xf32>) {
// CHECK:          %[[Q2:[0-9a-z_]+]] = loop.if %{{.*}} -> (vector<8xf32>) {
// CHECK:          %[[S02:[0-9a-z_]+]] = arith.addf %[[Q0]], %[[Q2]] : vector<8xf32>
// CHECK-NEXT:     %[[S13:[0-9a-z_]+]] = arith.addf %[[Q1]], %[[P3]] : vector<8xf32>
// CHECK-NEXT:     %[[S:[0-9a-z_]+]] = arith.addf %[[S02]], %[[S13]] : vector<8xf32>
// CHECK-NEXT:     loop.store %[[S]], %0[%{{.*}}] strides [1] : vector<8xf32>
// CHECK-NOT:      lanes 4
