// apply-schedule distributes loop "k" by its independent sums: %x and %y
// read one load of %1 (one group, one loop "k_g0" loading it once), %w its
// own load of %2 ("k_g1"); the load nothing needs goes, the index arithmetic
// is cloned into each loop that uses it, and the stores read the new loops'
// results.
// RUN: nc-opt %s -p apply-schedule | filecheck %s

builtin.module {
  loop.kernel @k(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms ["n"] access ["w", "r", "r"] footprints [#loop.fp<[3], [1]>, #loop.fp<[n], [1]>, #loop.fp<[n], [1]>] {
    %n = loop.sym "n"
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %z = arith.constant 0.0 : f32
    %a, %b, %c = loop.for "k" %k = %c0 to %n step 2 iter(%x = %z, %y = %z, %w = %z) -> (f32, f32, f32) {
      %k1 = arith.addi %k, %c1 : index
      %u = loop.load %1[%k1] strides [1] : f32
      %v = loop.load %2[%k1] strides [1] : f32
      %unused = loop.load %2[%k] strides [1] : f32
      %x1 = arith.addf %x, %u : f32
      %y1 = arith.mulf %y, %u : f32
      %w1 = arith.addf %w, %v : f32
      loop.yield %x1, %y1, %w1 : f32, f32, f32
    }
    loop.store %a, %0[%c0] strides [1] : f32
    loop.store %b, %0[%c1] strides [1] : f32
    loop.store %c, %0[%c2] strides [1] : f32
  }
  sched.schedule @k {
    sched.distribute "k"
  }
}
// CHECK:      %[[A:[^ ]+]], %[[B:[^ ]+]] = loop.for "k_g0" %[[K0:[^ ]+]] = %c0 to %n step 2 iter(%[[X:[^ ]+]] = %z, %[[Y:[^ ]+]] = %z) -> (f32, f32) {
// CHECK-NEXT:   %[[I0:[^ ]+]] = arith.addi %[[K0]], %c1 : index
// CHECK-NEXT:   %[[U:[^ ]+]] = loop.load %1[%[[I0]]] strides [1] : f32
// CHECK-NEXT:   %[[X1:[^ ]+]] = arith.addf %[[X]], %[[U]] : f32
// CHECK-NEXT:   %[[Y1:[^ ]+]] = arith.mulf %[[Y]], %[[U]] : f32
// CHECK-NEXT:   loop.yield %[[X1]], %[[Y1]] : f32, f32
// CHECK-NEXT: }
// CHECK-NEXT: %[[C:[^ ]+]] = loop.for "k_g1" %[[K1:[^ ]+]] = %c0 to %n step 2 iter(%[[W:[^ ]+]] = %z) -> (f32) {
// CHECK-NEXT:   %[[I1:[^ ]+]] = arith.addi %[[K1]], %c1 : index
// CHECK-NEXT:   %[[V:[^ ]+]] = loop.load %2[%[[I1]]] strides [1] : f32
// CHECK-NEXT:   %[[W1:[^ ]+]] = arith.addf %[[W]], %[[V]] : f32
// CHECK-NEXT:   loop.yield %[[W1]] : f32
// CHECK-NEXT: }
// CHECK-NEXT: loop.store %[[A]], %0[%c0] strides [1] : f32
// CHECK-NEXT: loop.store %[[B]], %0[%c1] strides [1] : f32
// CHECK-NEXT: loop.store %[[C]], %0[%c2] strides [1] : f32
// CHECK-NOT:  loop.for "k"
// CHECK-NOT:  sched.
