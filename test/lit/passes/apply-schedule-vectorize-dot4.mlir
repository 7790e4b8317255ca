// apply-schedule with vectorize on spec §5 kernel B's lanes loop (lanes 32, tail
// 8, tree [3, 4, 2, 0, 1]) over its lane terms, by 8. K = 160 columns: 5 blocks,
// 40 lane terms t. Term t reads the 4 bytes of xq and w from column 4t
// (vector<4xi8> loads) into one loop.dot4: vectorized, 8 consecutive terms read
// 32 consecutive bytes (vector<32xi8>: the index 4t steps by 4 bytes per lane)
// into a loop.dot4 of 8 i32 lanes, lane l the term t + l's exact integer;
// loop.vsitofp converts them and each vector FMAs with the block's scale (t div
// 8 is one block for the 8 lanes: a uniform load, broadcast). The whole group of
// 32 terms (4 blocks, one vector per accumulator) steps by 32; the 8 terms after
// it (block 4) run in loop "k_groups" into vector 0 (acc0); then the tree's
// first two bits add the vectors and loop.lanesum does the rest.
// RUN: nc-opt %s -p apply-schedule | filecheck %s

builtin.module {
  loop.kernel @kernel_b(%0: !loop.ptr<f32>, %1: !loop.ptr<i8>, %2: !loop.ptr<i8>, %3: !loop.ptr<f32>) syms [] access ["w", "r", "r", "r"] footprints [#loop.fp<[1], [1]>, #loop.fp<[160], [1]>, #loop.fp<[160], [1]>, #loop.fp<[5], [1]>] {
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %c8 = arith.constant 8 : index
    %c40 = arith.constant 40 : index
    %z = arith.constant 0.000000e+00 : f32
    %s = loop.for "k" %t = %c0 to %c40 lanes 32 tail 8 tree [3, 4, 2, 0, 1] iter(%acc = %z) -> (f32) {
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
    sched.vectorize "k" width 8
  }
}
// CHECK:        %[[ZV:[0-9a-z_]+]] = loop.splat %z : f32 -> vector<8xf32>
// CHECK-NEXT:   %[[C32:[0-9a-z_]+]] = arith.constant 32 : index
// CHECK-NEXT:   %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} = loop.for "k" %[[T:[0-9a-z_]+]] = %c0 to %[[C32]] step 32 iter(%[[A0:[0-9a-z_]+]] = %[[ZV]], %{{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>) {
// CHECK-NEXT:     %[[COL:[0-9a-z_]+]] = arith.muli %[[T]], %c4 : index
// CHECK-NEXT:     %[[X:[0-9a-z_]+]] = loop.load %1[%[[COL]]] strides [1] : vector<32xi8>
// CHECK-NEXT:     %[[W:[0-9a-z_]+]] = loop.load %2[%[[COL]]] strides [1] : vector<32xi8>
// CHECK-NEXT:     %[[P:[0-9a-z_]+]] = loop.dot4 %[[X]], %[[W]] : vector<32xi8> -> vector<8xi32>
// CHECK-NEXT:     %[[B:[0-9a-z_]+]] = arith.divsi %[[T]], %c8 : index
// CHECK-NEXT:     %[[PF:[0-9a-z_]+]] = loop.vsitofp %[[P]] : vector<8xi32> -> vector<8xf32>
// CHECK-NEXT:     %[[XS:[0-9a-z_]+]] = loop.load %3[%[[B]]] strides [1] : f32
// CHECK-NEXT:     %[[XSV:[0-9a-z_]+]] = loop.splat %[[XS]] : f32 -> vector<8xf32>
// CHECK-NEXT:     %[[F0:[0-9a-z_]+]] = math.fma %[[PF]], %[[XSV]], %[[A0]] : vector<8xf32>
// CHECK-NEXT:     %[[O8:[0-9a-z_]+]] = arith.constant 8 : index
// CHECK-NEXT:     %[[T8:[0-9a-z_]+]] = arith.addi %[[T]], %[[O8]] : index
// CHECK-NEXT:     %[[COL8:[0-9a-z_]+]] = arith.muli %[[T8]], %c4 : index
// CHECK-NEXT:     loop.load %1[%[[COL8]]] strides [1] : vector<32xi8>
// CHECK:          loop.yield %[[F0]], %{{.*}}, %{{.*}}, %{{.*}} : vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>
// CHECK-NEXT:   }
// CHECK-NEXT:   %{{.*}} = loop.for "k_groups" %{{.*}} = %[[C32]] to %c40 step 8 iter(%{{.*}}) -> (vector<8xf32>) {
// CHECK:          loop.dot4 %{{.*}}, %{{.*}} : vector<32xi8> -> vector<8xi32>
// CHECK:        loop.lanesum %{{.*}} tree [2, 0, 1] : vector<8xf32> -> f32
