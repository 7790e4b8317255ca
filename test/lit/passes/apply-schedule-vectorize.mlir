// apply-schedule with vectorize: the n loop ("d1", 20 columns) of a matmul
// with a relu epilogue runs 8 columns per iteration as the lanes of a
// vector<8xf32>. The main loop steps by 8 over [0, 16); the w row is one
// vector load (stride 1 along n) while x[i, k] and the 0.0 constant do not
// depend on the lane and are broadcast with loop.splat; the k loop carries a
// vector accumulator; the cmpf/select epilogue becomes loop.vcmp/loop.vselect;
// the 4 remaining columns run the scalar body in "d1_tail", whose nested k
// loop is renamed "k_tail".
// RUN: nc-opt %s -p apply-schedule | filecheck %s

builtin.module {
  loop.kernel @mm(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms ["m"] access ["w", "r", "r"] footprints [#loop.fp<[m, 20], [20, 1]>, #loop.fp<[m, 6], [6, 1]>, #loop.fp<[6, 20], [20, 1]>] {
    %m = loop.sym "m"
    %c0 = arith.constant 0 : index
    %c6 = arith.constant 6 : index
    %c20 = arith.constant 20 : index
    loop.for "d0" %i = %c0 to %m {
      loop.for "d1" %j = %c0 to %c20 {
        %z = arith.constant 0.0 : f32
        %s = loop.for "k" %k = %c0 to %c6 iter(%acc = %z) -> (f32) {
          %a = loop.load %1[%i, %k] strides [6, 1] : f32
          %b = loop.load %2[%k, %j] strides [20, 1] : f32
          %p = arith.mulf %a, %b : f32
          %t = arith.addf %acc, %p : f32
          loop.yield %t : f32
        }
        %pos = arith.cmpf ogt, %s, %z : f32
        %r = arith.select %pos, %s, %z : f32
        loop.store %r, %0[%i, %j] strides [20, 1] : f32
      }
    }
  }
  sched.schedule @mm {
    sched.vectorize "d1" width 8
  }
}
// CHECK:      loop.for "d0" %[[I:.*]] = %{{.*}} to %{{.*}} {
// CHECK-NEXT:   %[[MID:.*]] = arith.constant 16 : index
// CHECK-NEXT:   loop.for "d1" %[[J:.*]] = %{{.*}} to %[[MID]] step 8 {
// CHECK-NEXT:     %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:     %[[ZV:.*]] = loop.splat %[[Z]] : f32 -> vector<8xf32>
// CHECK-NEXT:     %[[S:.*]] = loop.for "k" %[[K:.*]] = %{{.*}} to %{{.*}} iter(%[[ACC:.*]] = %[[ZV]]) -> (vector<8xf32>) {
// CHECK-NEXT:       %[[A:.*]] = loop.load %1[%[[I]], %[[K]]] strides [6, 1] : f32
// CHECK-NEXT:       %[[B:.*]] = loop.load %2[%[[K]], %[[J]]] strides [20, 1] : vector<8xf32>
// CHECK-NEXT:       %[[AV:.*]] = loop.splat %[[A]] : f32 -> vector<8xf32>
// CHECK-NEXT:       %[[P:.*]] = arith.mulf %[[AV]], %[[B]] : vector<8xf32>
// CHECK-NEXT:       %[[T:.*]] = arith.addf %[[ACC]], %[[P]] : vector<8xf32>
// CHECK-NEXT:       loop.yield %[[T]] : vector<8xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:     %[[Z1:.*]] = loop.splat %[[Z]] : f32 -> vector<8xf32>
// CHECK-NEXT:     %[[POS:.*]] = loop.vcmp "ogt", %[[S]], %[[Z1]] : vector<8xf32>
// CHECK-NEXT:     %[[Z2:.*]] = loop.splat %[[Z]] : f32 -> vector<8xf32>
// CHECK-NEXT:     %[[R:.*]] = loop.vselect %[[POS]], %[[S]], %[[Z2]] : vector<8xi1>, vector<8xf32>
// CHECK-NEXT:     loop.store %[[R]], %0[%[[I]], %[[J]]] strides [20, 1] : vector<8xf32>
// CHECK-NEXT:   }
// CHECK-NEXT:   loop.for "d1_tail" %[[JT:.*]] = %[[MID]] to %{{.*}} {
// CHECK-NEXT:     %[[ZT:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:     %[[ST:.*]] = loop.for "k_tail" %[[KT:.*]] = %{{.*}} to %{{.*}} iter(%{{.*}} = %[[ZT]]) -> (f32) {
// CHECK-NOT:        vector
// CHECK:            loop.load %2[%[[KT]], %[[JT]]] strides [20, 1] : f32
// CHECK:          }
// CHECK-NEXT:     %[[PT:.*]] = arith.cmpf ogt, %[[ST]], %[[ZT]] : f32
// CHECK-NEXT:     %[[RT:.*]] = arith.select %[[PT]], %[[ST]], %[[ZT]] : f32
// CHECK-NEXT:     loop.store %[[RT]], %0[%[[I]], %[[JT]]] strides [20, 1] : f32
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK-NOT:  loop.for "d1" %{{.*}} = %{{.*}} to %{{.*}} {
// CHECK-NOT:  sched.
