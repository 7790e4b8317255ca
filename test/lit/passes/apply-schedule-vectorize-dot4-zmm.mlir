// apply-schedule with vectorize on spec §5 kernel B's lanes loop (lanes 32, tail
// 8, tree [3, 4, 2, 0, 1]) by 16, the AVX-512 width: K = 256 columns, 8 blocks,
// 64 lane terms t, a multiple of 32, so no tail runs and the tail's groups of 8
// do not bound the width. 16 consecutive terms read 64 consecutive bytes
// (vector<64xi8>) into a loop.dot4 of 16 i32 lanes: lanes 0..7 are block t div
// 8, lanes 8..15 the next block, so the scale's index t div 8 is a block index
// (8 lanes per value): two scalar loads, b and b + 1, packed 8 lanes each
// (loop.vpack). Vector 0 holds the accumulators c0 | c1, vector 1 c2 | c3: the
// tree's first bit (3) is the vectors' top lane bit, so loop.foldhalf halves
// each (c0 + c1, c2 + c3), bit 4 adds the two, loop.lanesum does [2, 0, 1].
// RUN: nc-opt %s -p apply-schedule | filecheck %s

builtin.module {
  loop.kernel @kernel_b(%0: !loop.ptr<f32>, %1: !loop.ptr<i8>, %2: !loop.ptr<i8>, %3: !loop.ptr<f32>) syms [] access ["w", "r", "r", "r"] footprints [#loop.fp<[1], [1]>, #loop.fp<[256], [1]>, #loop.fp<[256], [1]>, #loop.fp<[8], [1]>] {
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %z = arith.constant 0.000000e+00 : f32
    %s = loop.for "k" %t = %c0 to %c64 lanes 32 tail 8 tree [3, 4, 2, 0, 1] iter(%acc = %z) -> (f32) {
      %col = arith.muli %t, %c4 : index
      %x = loop.load %1[%col] strides [1] : vector<4xi8>
      %w = loop.load %2[%col] strides [1] : vector<4xi8>
      %p = loop.dot4 %x, %w : vector<4xi8> -> i32
      %b = arith.divsi %t, %c8 : index
      %pf = arith.sitofp %p : i32 to f32
      %xs = loop.load %3[%b] strides [1] : f32
      %f = math.fma %pf, %xs, %acc : f32
      loop.yield %f : f32
    }
    loop.store %s, %0[%c0] strides [1] : f32
  }
  sched.schedule @kernel_b {
    sched.vectorize "k" width 16
  }
}
// CHECK:        %[[ZV:[0-9a-z_]+]] = loop.splat %z : f32 -> vector<16xf32>
// CHECK-NEXT:   %[[V0:[0-9a-z_]+]], %[[V1:[0-9a-z_]+]] = loop.for "k" %[[T:[0-9a-z_]+]] = %c0 to %c64 step 32 iter(%[[A0:[0-9a-z_]+]] = %[[ZV]], %[[A1:[0-9a-z_]+]] = %[[ZV]]) -> (vector<16xf32>, vector<16xf32>) {
// CHECK-NEXT:     %[[COL:[0-9a-z_]+]] = arith.muli %[[T]], %c4 : index
// CHECK-NEXT:     %[[X:[0-9a-z_]+]] = loop.load %1[%[[COL]]] strides [1] : vector<64xi8>
// CHECK-NEXT:     %[[W:[0-9a-z_]+]] = loop.load %2[%[[COL]]] strides [1] : vector<64xi8>
// CHECK-NEXT:     %[[P:[0-9a-z_]+]] = loop.dot4 %[[X]], %[[W]] : vector<64xi8> -> vector<16xi32>
// CHECK-NEXT:     %[[B:[0-9a-z_]+]] = arith.divsi %[[T]], %c8 : index
// CHECK-NEXT:     %[[PF:[0-9a-z_]+]] = loop.vsitofp %[[P]] : vector<16xi32> -> vector<16xf32>
// CHECK-NEXT:     %[[S0:[0-9a-z_]+]] = loop.load %3[%[[B]]] strides [1] : f32
// CHECK-NEXT:     %[[ONE:[0-9a-z_]+]] = arith.constant 1 : index
// CHECK-NEXT:     %[[B1:[0-9a-z_]+]] = arith.addi %[[B]], %[[ONE]] : index
// CHECK-NEXT:     %[[S1:[0-9a-z_]+]] = loop.load %3[%[[B1]]] strides [1] : f32
// CHECK-NEXT:     %[[XS:[0-9a-z_]+]] = loop.vpack %[[S0]], %[[S0]], %[[S0]], %[[S0]], %[[S0]], %[[S0]], %[[S0]], %[[S0]], %[[S1]], %[[S1]], %[[S1]], %[[S1]], %[[S1]], %[[S1]], %[[S1]], %[[S1]] : f32 -> vector<16xf32>
// CHECK-NEXT:     %[[F0:[0-9a-z_]+]] = math.fma %[[PF]], %[[XS]], %[[A0]] : vector<16xf32>
// CHECK-NEXT:     %[[O16:[0-9a-z_]+]] = arith.constant 16 : index
// CHECK-NEXT:     %[[T16:[0-9a-z_]+]] = arith.addi %[[T]], %[[O16]] : index
// CHECK:          %[[F1:[0-9a-z_]+]] = math.fma %{{.*}}, %{{.*}}, %[[A1]] : vector<16xf32>
// CHECK-NEXT:     loop.yield %[[F0]], %[[F1]] : vector<16xf32>, vector<16xf32>
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[H0:[0-9a-z_]+]] = loop.foldhalf %[[V0]] : vector<16xf32> -> vector<8xf32>
// CHECK-NEXT:   %[[H1:[0-9a-z_]+]] = loop.foldhalf %[[V1]] : vector<16xf32> -> vector<8xf32>
// CHECK-NEXT:   %[[SUM:[0-9a-z_]+]] = arith.addf %[[H0]], %[[H1]] : vector<8xf32>
// CHECK-NEXT:   %s = loop.lanesum %[[SUM]] tree [2, 0, 1] : vector<8xf32> -> f32
// CHECK-NOT:    loop.for "k_groups"
