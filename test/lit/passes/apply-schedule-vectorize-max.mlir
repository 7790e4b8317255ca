// apply-schedule vectorizes a row's max (loop "m" carrying acc =
// maximumf(acc, x), acc read by nothing else) by 8 with its exact fallback:
// lanes of partial maxima from a splat of the init, folded by halves down to
// 4 lanes (loop.half, maximumf on vector<4xf32>), then in lane order
// (loop.extract, maximumf), the tail "m_tail" continuing from that, then, if
// the result is NaN or zero (the cases whose bits the order decides: which
// NaN, which zero), the original loop again as "m_seq".
// RUN: nc-opt %s -p apply-schedule | filecheck %s

builtin.module {
  loop.kernel @max(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>) syms ["n"] access ["w", "r"] footprints [#loop.fp<[], []>, #loop.fp<[n], [1]>] {
    %n = loop.sym "n"
    %c0 = arith.constant 0 : index
    %init = arith.constant 0xff800000 : f32
    %m = loop.for "m" %k = %c0 to %n iter(%acc = %init) -> (f32) {
      %x = loop.load %1[%k] strides [1] : f32
      %t = arith.maximumf %acc, %x : f32
      loop.yield %t : f32
    }
    loop.store %m, %0[] strides [] : f32
  }
  sched.schedule @max {
    sched.vectorize "m" width 8
  }
}
// CHECK:      %[[W:[^ ]+]] = arith.constant 8 : index
// CHECK:      %[[MID:[^ ]+]] = arith.addi %c0, %{{.*}} : index
// CHECK:      %[[START:[^ ]+]] = loop.splat %init : f32 -> vector<8xf32>
// CHECK-NEXT: %[[V:[^ ]+]] = loop.for "m" %[[K:[^ ]+]] = %c0 to %[[MID]] step 8 iter(%[[ACC:[^ ]+]] = %[[START]]) -> (vector<8xf32>) {
// CHECK-NEXT:   %[[X:[^ ]+]] = loop.load %1[%[[K]]] strides [1] : vector<8xf32>
// CHECK-NEXT:   %[[T:[^ ]+]] = arith.maximumf %[[ACC]], %[[X]] : vector<8xf32>
// CHECK-NEXT:   loop.yield %[[T]] : vector<8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: %[[LO:[^ ]+]] = loop.half %[[V]][0] : vector<8xf32> -> vector<4xf32>
// CHECK-NEXT: %[[HI:[^ ]+]] = loop.half %[[V]][1] : vector<8xf32> -> vector<4xf32>
// CHECK-NEXT: %[[H:[^ ]+]] = arith.maximumf %[[LO]], %[[HI]] : vector<4xf32>
// CHECK-NEXT: %[[L0:[^ ]+]] = loop.extract %[[H]][0] : vector<4xf32> -> f32
// CHECK-NEXT: %[[L1:[^ ]+]] = loop.extract %[[H]][1] : vector<4xf32> -> f32
// CHECK-NEXT: %[[F1:[^ ]+]] = arith.maximumf %[[L0]], %[[L1]] : f32
// CHECK-NEXT: %[[L2:[^ ]+]] = loop.extract %[[H]][2] : vector<4xf32> -> f32
// CHECK-NEXT: %[[F2:[^ ]+]] = arith.maximumf %[[F1]], %[[L2]] : f32
// CHECK-NEXT: %[[L3:[^ ]+]] = loop.extract %[[H]][3] : vector<4xf32> -> f32
// CHECK-NEXT: %[[F3:[^ ]+]] = arith.maximumf %[[F2]], %[[L3]] : f32
// CHECK-NEXT: %[[R:[^ ]+]] = loop.for "m_tail" %{{.*}} = %[[MID]] to %n iter(%{{.*}} = %[[F3]]) -> (f32) {
// CHECK:      }
// CHECK-NEXT: %[[ZC:[^ ]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: %[[NAN:[^ ]+]] = arith.cmpf une, %[[R]], %[[R]] : f32
// CHECK-NEXT: %[[ZERO:[^ ]+]] = arith.cmpf oeq, %[[R]], %[[ZC]] : f32
// CHECK-NEXT: %[[TRUE:[^ ]+]] = arith.constant true
// CHECK-NEXT: %[[SLOW:[^ ]+]] = arith.select %[[NAN]], %[[TRUE]], %[[ZERO]] : i1
// CHECK-NEXT: %[[M:[^ ]+]] = loop.if %[[SLOW]] -> (f32) {
// CHECK-NEXT:   %[[S:[^ ]+]] = loop.for "m_seq" %{{.*}} = %c0 to %n iter(%{{.*}} = %init) -> (f32) {
// CHECK:          arith.maximumf %{{.*}}, %{{.*}} : f32
// CHECK:        loop.yield %[[S]] : f32
// CHECK-NEXT: } else {
// CHECK-NEXT:   loop.yield %[[R]] : f32
// CHECK-NEXT: }
// CHECK-NEXT: loop.store %[[M]], %0[] strides [] : f32
