// apply-schedule with split + vectorize + privatize: the n loop of a matmul
// (64 columns) is split into tiles of 32 whose inner loop "d1i" is
// vectorized by 8 (4 iterations of constant trip count); privatize "k" then
// jams "d1i" into the k loop: one k loop carries 4 vector<8xf32>
// accumulators (one per 8-column slice, each still summing its own terms in
// k order), "d1i" is gone, and the 4 vector stores follow the k loop.
// RUN: nc-opt %s -p apply-schedule | filecheck %s

builtin.module {
  loop.kernel @mm(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms ["m"] access ["w", "r", "r"] footprints [#loop.fp<[m, 64], [64, 1]>, #loop.fp<[m, 6], [6, 1]>, #loop.fp<[6, 64], [64, 1]>] {
    %m = loop.sym "m"
    %c0 = arith.constant 0 : index
    %c6 = arith.constant 6 : index
    %c64 = arith.constant 64 : index
    loop.for "d0" %i = %c0 to %m {
      loop.for "d1" %j = %c0 to %c64 {
        %z = arith.constant 0.0 : f32
        %s = loop.for "k" %k = %c0 to %c6 iter(%acc = %z) -> (f32) {
          %a = loop.load %1[%i, %k] strides [6, 1] : f32
          %b = loop.load %2[%k, %j] strides [64, 1] : f32
          %p = arith.mulf %a, %b : f32
          %t = arith.addf %acc, %p : f32
          loop.yield %t : f32
        }
        loop.store %s, %0[%i, %j] strides [64, 1] : f32
      }
    }
  }
  sched.schedule @mm {
    sched.split "d1" by 32 into "d1o", "d1i"
    sched.vectorize "d1i" width 8
    sched.privatize "k"
  }
}
// CHECK:      loop.for "d0" %[[I:.*]] = %{{.*}} to %{{.*}} {
// CHECK-NEXT:   loop.for "d1o" %{{.*}} = %{{.*}} to %{{.*}} {
// CHECK-NOT:      loop.for "d1i"
// CHECK:          %[[TILE:.*]] = arith.addi %{{.*}}, %{{.*}} : index
// CHECK-NOT:      loop.for "d1i"
// CHECK:          %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:     %[[N0:.*]] = arith.addi %[[TILE]], %[[C0]] : index
// CHECK:          %[[Z0:.*]] = loop.splat %{{.*}} : f32 -> vector<8xf32>
// CHECK-NEXT:     %[[C8:.*]] = arith.constant 8 : index
// CHECK-NEXT:     %[[N8:.*]] = arith.addi %[[TILE]], %[[C8]] : index
// CHECK:          %[[Z8:.*]] = loop.splat %{{.*}} : f32 -> vector<8xf32>
// CHECK-NEXT:     %[[C16:.*]] = arith.constant 16 : index
// CHECK-NEXT:     %[[N16:.*]] = arith.addi %[[TILE]], %[[C16]] : index
// CHECK:          %[[Z16:.*]] = loop.splat %{{.*}} : f32 -> vector<8xf32>
// CHECK-NEXT:     %[[C24:.*]] = arith.constant 24 : index
// CHECK-NEXT:     %[[N24:.*]] = arith.addi %[[TILE]], %[[C24]] : index
// CHECK:          %[[Z24:.*]] = loop.splat %{{.*}} : f32 -> vector<8xf32>
// CHECK-NEXT:     %[[S0:[^ ]+]], %[[S8:[^ ]+]], %[[S16:[^ ]+]], %[[S24:[^ ]+]] = loop.for "k" %[[K:[^ ]+]] = %{{.*}} to %{{.*}} iter(%[[A0:[^ ]+]] = %[[Z0]], %[[A8:[^ ]+]] = %[[Z8]], %[[A16:[^ ]+]] = %[[Z16]], %[[A24:[^ ]+]] = %[[Z24]]) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>) {
// CHECK:            %[[B0:.*]] = loop.load %2[%[[K]], %[[N0]]] strides [64, 1] : vector<8xf32>
// CHECK:            %[[T0:.*]] = arith.addf %[[A0]], %{{.*}} : vector<8xf32>
// CHECK:            %[[B8:.*]] = loop.load %2[%[[K]], %[[N8]]] strides [64, 1] : vector<8xf32>
// CHECK:            %[[T8:.*]] = arith.addf %[[A8]], %{{.*}} : vector<8xf32>
// CHECK:            %[[B16:.*]] = loop.load %2[%[[K]], %[[N16]]] strides [64, 1] : vector<8xf32>
// CHECK:            %[[T16:.*]] = arith.addf %[[A16]], %{{.*}} : vector<8xf32>
// CHECK:            %[[B24:.*]] = loop.load %2[%[[K]], %[[N24]]] strides [64, 1] : vector<8xf32>
// CHECK:            %[[T24:.*]] = arith.addf %[[A24]], %{{.*}} : vector<8xf32>
// CHECK-NEXT:       loop.yield %[[T0]], %[[T8]], %[[T16]], %[[T24]] : vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:     loop.store %[[S0]], %0[%[[I]], %[[N0]]] strides [64, 1] : vector<8xf32>
// CHECK-NEXT:     loop.store %[[S8]], %0[%[[I]], %[[N8]]] strides [64, 1] : vector<8xf32>
// CHECK-NEXT:     loop.store %[[S16]], %0[%[[I]], %[[N16]]] strides [64, 1] : vector<8xf32>
// CHECK-NEXT:     loop.store %[[S24]], %0[%[[I]], %[[N24]]] strides [64, 1] : vector<8xf32>
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK-NOT:  loop.for "d1i"
// CHECK-NOT:  loop.for "k"
// CHECK-NOT:  sched.
