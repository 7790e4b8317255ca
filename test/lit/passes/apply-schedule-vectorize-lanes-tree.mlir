// apply-schedule with vectorize on spec §5 kernel A's lanes loop (lanes 32,
// tail 8, tree [3, 4, 2, 0, 1]) over int8 weights, by 8: over [0, 40) the whole
// block of 32 becomes 4 vectors of 8 lanes (one per accumulator c0..c3), the
// loop stepping by 32; the group of 8 after it runs in loop "k_groups", which
// steps by 8 and updates vector 0 only (lanes 0..7: c0). Each i8 load becomes a
// vector<8xi8> load widened by loop.vsitofp. After the loops the tree's first
// two bits (3, then 4) add the vectors, (c0 + c1) + (c2 + c3), and
// loop.lanesum does the rest of the tree inside the vector: [2, 0, 1].
// RUN: nc-opt %s -p apply-schedule | filecheck %s

builtin.module {
  loop.kernel @kernel_a(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<i8>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[1], [1]>, #loop.fp<[40], [1]>, #loop.fp<[40], [1]>] {
    %c0 = arith.constant 0 : index
    %c40 = arith.constant 40 : index
    %z = arith.constant 0.000000e+00 : f32
    %s = loop.for "k" %k = %c0 to %c40 lanes 32 tail 8 tree [3, 4, 2, 0, 1] iter(%acc = %z) -> (f32) {
      %x = loop.load %1[%k] strides [1] : f32
      %q = loop.load %2[%k] strides [1] : i8
      %w = arith.sitofp %q : i8 to f32
      %f = math.fma %x, %w, %acc : f32
      loop.yield %f : f32
    }
    loop.store %s, %0[%c0] strides [1] : f32
  }
  sched.schedule @kernel_a {
    sched.vectorize "k" width 8
  }
}
// CHECK:        %[[ZV:[0-9a-z_]+]] = loop.splat %z : f32 -> vector<8xf32>
// CHECK-NEXT:   %[[C32:[0-9a-z_]+]] = arith.constant 32 : index
// CHECK-NEXT:   %[[V0:[0-9a-z_]+]], %[[V1:[0-9a-z_]+]], %[[V2:[0-9a-z_]+]], %[[V3:[0-9a-z_]+]] = loop.for "k" %[[K:[0-9a-z_]+]] = %c0 to %[[C32]] step 32 iter(%[[A0:[0-9a-z_]+]] = %[[ZV]], %[[A1:[0-9a-z_]+]] = %[[ZV]], %[[A2:[0-9a-z_]+]] = %[[ZV]], %[[A3:[0-9a-z_]+]] = %[[ZV]]) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>) {
// CHECK-NEXT:     %[[X0:[0-9a-z_]+]] = loop.load %1[%[[K]]] strides [1] : vector<8xf32>
// CHECK-NEXT:     %[[Q0:[0-9a-z_]+]] = loop.load %2[%[[K]]] strides [1] : vector<8xi8>
// CHECK-NEXT:     %[[W0:[0-9a-z_]+]] = loop.vsitofp %[[Q0]] : vector<8xi8> -> vector<8xf32>
// CHECK-NEXT:     %[[F0:[0-9a-z_]+]] = math.fma %[[X0]], %[[W0]], %[[A0]] : vector<8xf32>
// CHECK-NEXT:     %[[O8:[0-9a-z_]+]] = arith.constant 8 : index
// CHECK-NEXT:     %[[K8:[0-9a-z_]+]] = arith.addi %[[K]], %[[O8]] : index
// CHECK-NEXT:     %[[X1:[0-9a-z_]+]] = loop.load %1[%[[K8]]] strides [1] : vector<8xf32>
// CHECK:          %[[F1:[0-9a-z_]+]] = math.fma %[[X1]], %{{.*}}, %[[A1]] : vector<8xf32>
// CHECK:          %[[F2:[0-9a-z_]+]] = math.fma %{{.*}}, %{{.*}}, %[[A2]] : vector<8xf32>
// CHECK:          %[[F3:[0-9a-z_]+]] = math.fma %{{.*}}, %{{.*}}, %[[A3]] : vector<8xf32>
// CHECK-NEXT:     loop.yield %[[F0]], %[[F1]], %[[F2]], %[[F3]] : vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[G0:[0-9a-z_]+]] = loop.for "k_groups" %[[KG:[0-9a-z_]+]] = %[[C32]] to %c40 step 8 iter(%[[B0:[0-9a-z_]+]] = %[[V0]]) -> (vector<8xf32>) {
// CHECK-NEXT:     %[[XG:[0-9a-z_]+]] = loop.load %1[%[[KG]]] strides [1] : vector<8xf32>
// CHECK-NEXT:     %[[QG:[0-9a-z_]+]] = loop.load %2[%[[KG]]] strides [1] : vector<8xi8>
// CHECK-NEXT:     %[[WG:[0-9a-z_]+]] = loop.vsitofp %[[QG]] : vector<8xi8> -> vector<8xf32>
// CHECK-NEXT:     %[[FG:[0-9a-z_]+]] = math.fma %[[XG]], %[[WG]], %[[B0]] : vector<8xf32>
// CHECK-NEXT:     loop.yield %[[FG]] : vector<8xf32>
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[S01:[0-9a-z_]+]] = arith.addf %[[G0]], %[[V1]] : vector<8xf32>
// CHECK-NEXT:   %[[S23:[0-9a-z_]+]] = arith.addf %[[V2]], %[[V3]] : vector<8xf32>
// CHECK-NEXT:   %[[V:[0-9a-z_]+]] = arith.addf %[[S01]], %[[S23]] : vector<8xf32>
// CHECK-NEXT:   %[[S:[0-9a-z_]+]] = loop.lanesum %[[V]] tree [2, 0, 1] : vector<8xf32> -> f32
// CHECK-NEXT:   loop.store %[[S]], %0[%c0] strides [1] : f32
// CHECK-NOT:    lanes
