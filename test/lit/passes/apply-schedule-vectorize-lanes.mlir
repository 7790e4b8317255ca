// apply-schedule with vectorize on a lanes loop: "k" (32 iterations, 16
// lanes) by 4 becomes 4 vectors of 4 lanes (lanes 0-3, 4-7, 8-11, 12-15),
// each one f32 init splat, the loop stepping by 16 and vector j reading k + 4j,
// so iteration k still updates lane k mod 16. The lanes attribute is gone
// (the loop is a plain loop of vectors now). After it the halving tree's first
// levels add the vectors (vector j + vector j + 2: lanes l and l + 8; then
// j + 1: lanes l and l + 4) and loop.lanesum adds the last vector's 4 lanes.
// RUN: nc-opt %s -p apply-schedule | filecheck %s

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
    sched.vectorize "k" width 4
  }
}
// CHECK:        loop.for "d0" %[[I:[0-9a-z_]+]] = %{{.*}} to %{{.*}} {
// CHECK-NEXT:     %[[Z:[0-9a-z_]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:     %[[ZV:[0-9a-z_]+]] = loop.splat %[[Z]] : f32 -> vector<4xf32>
// CHECK-NEXT:     %[[V0:[0-9a-z_]+]], %[[V1:[0-9a-z_]+]], %[[V2:[0-9a-z_]+]], %[[V3:[0-9a-z_]+]] = loop.for "k" %[[K:[0-9a-z_]+]] = %c0 to %cub step 16 iter(%[[A0:[0-9a-z_]+]] = %[[ZV]], %[[A1:[0-9a-z_]+]] = %[[ZV]], %[[A2:[0-9a-z_]+]] = %[[ZV]], %[[A3:[0-9a-z_]+]] = %[[ZV]]) -> (vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>) {
// CHECK-NEXT:       %[[X0:[0-9a-z_]+]] = loop.load %1[%[[I]], %[[K]]] strides [32, 1] : vector<4xf32>
// CHECK-NEXT:       %[[Y0:[0-9a-z_]+]] = loop.load %2[%[[K]]] strides [1] : vector<4xf32>
// CHECK-NEXT:       %[[F0:[0-9a-z_]+]] = math.fma %[[X0]], %[[Y0]], %[[A0]] : vector<4xf32>
// CHECK-NEXT:       %[[C4:[0-9a-z_]+]] = arith.constant 4 : index
// CHECK-NEXT:       %[[K4:[0-9a-z_]+]] = arith.addi %[[K]], %[[C4]] : index
// CHECK-NEXT:       %[[X1:[0-9a-z_]+]] = loop.load %1[%[[I]], %[[K4]]] strides [32, 1] : vector<4xf32>
// CHECK-NEXT:       %[[Y1:[0-9a-z_]+]] = loop.load %2[%[[K4]]] strides [1] : vector<4xf32>
// CHECK-NEXT:       %[[F1:[0-9a-z_]+]] = math.fma %[[X1]], %[[Y1]], %[[A1]] : vector<4xf32>
// CHECK-NEXT:       %[[C8:[0-9a-z_]+]] = arith.constant 8 : index
// CHECK-NEXT:       %[[K8:[0-9a-z_]+]] = arith.addi %[[K]], %[[C8]] : index
// CHECK-NEXT:       %[[X2:[0-9a-z_]+]] = loop.load %1[%[[I]], %[[K8]]] strides [32, 1] : vector<4xf32>
// CHECK-NEXT:       %[[Y2:[0-9a-z_]+]] = loop.load %2[%[[K8]]] strides [1] : vector<4xf32>
// CHECK-NEXT:       %[[F2:[0-9a-z_]+]] = math.fma %[[X2]], %[[Y2]], %[[A2]] : vector<4xf32>
// CHECK-NEXT:       %[[C12:[0-9a-z_]+]] = arith.constant 12 : index
// CHECK-NEXT:       %[[K12:[0-9a-z_]+]] = arith.addi %[[K]], %[[C12]] : index
// CHECK-NEXT:       %[[X3:[0-9a-z_]+]] = loop.load %1[%[[I]], %[[K12]]] strides [32, 1] : vector<4xf32>
// CHECK-NEXT:       %[[Y3:[0-9a-z_]+]] = loop.load %2[%[[K12]]] strides [1] : vector<4xf32>
// CHECK-NEXT:       %[[F3:[0-9a-z_]+]] = math.fma %[[X3]], %[[Y3]], %[[A3]] : vector<4xf32>
// CHECK-NEXT:       loop.yield %[[F0]], %[[F1]], %[[F2]], %[[F3]] : vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:     %[[H0:[0-9a-z_]+]] = arith.addf %[[V0]], %[[V2]] : vector<4xf32>
// CHECK-NEXT:     %[[H1:[0-9a-z_]+]] = arith.addf %[[V1]], %[[V3]] : vector<4xf32>
// CHECK-NEXT:     %[[H:[0-9a-z_]+]] = arith.addf %[[H0]], %[[H1]] : vector<4xf32>
// CHECK-NEXT:     %[[S:[0-9a-z_]+]] = loop.lanesum %[[H]] : vector<4xf32> -> f32
// CHECK-NEXT:     loop.store %[[S]], %0[%[[I]]] strides [1] : f32
// CHECK-NEXT:   }
// CHECK-NOT:    lanes
