// apply-schedule splits a loop of step 16 (a vectorized sum's groups of
// lanes) by 3: "ko" over ceil(ceil((n - 0) / 16) / 3) tiles of 48 indices,
// "ki" over the offsets [0, min(n - base, 48)) of its tile, still step 16,
// from base = 0 + ko * 48; the sum is carried through both loops.
// RUN: nc-opt %s -p apply-schedule | filecheck %s

builtin.module {
  loop.kernel @k(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>) syms ["n"] access ["w", "r"] footprints [#loop.fp<[], []>, #loop.fp<[n], [1]>] {
    %n = loop.sym "n"
    %c0 = arith.constant 0 : index
    %z = arith.constant 0.0 : f32
    %s = loop.for "k" %k = %c0 to %n step 16 iter(%acc = %z) -> (f32) {
      %x = loop.load %1[%k] strides [1] : f32
      %t = arith.addf %acc, %x : f32
      loop.yield %t : f32
    }
    loop.store %s, %0[] strides [] : f32
  }
  sched.schedule @k {
    sched.split "k" by 3 into "ko", "ki"
  }
}
// CHECK:      %[[SPAN:[^ ]+]] = arith.constant 48 : index
// CHECK-NEXT: %[[S1:[^ ]+]] = arith.constant 15 : index
// CHECK-NEXT: %[[S:[^ ]+]] = arith.constant 16 : index
// CHECK-NEXT: %[[F:[^ ]+]] = arith.constant 3 : index
// CHECK-NEXT: %[[ZERO:[^ ]+]] = arith.constant 0 : index
// CHECK-NEXT: %[[N:[^ ]+]] = arith.subi %n, %c0 : index
// CHECK-NEXT: %[[R:[^ ]+]] = arith.addi %[[N]], %[[S1]] : index
// CHECK-NEXT: %[[COUNT:[^ ]+]] = arith.divsi %[[R]], %[[S]] : index
// CHECK-NEXT: %[[F1:[^ ]+]] = arith.constant 2 : index
// CHECK-NEXT: %[[P:[^ ]+]] = arith.addi %[[COUNT]], %[[F1]] : index
// CHECK-NEXT: %[[TILES:[^ ]+]] = arith.divsi %[[P]], %[[F]] : index
// CHECK:      %[[SUM:[^ ]+]] = loop.for "ko" %[[O:[^ ]+]] = %[[ZERO]] to %[[TILES]] iter(%[[A:[^ ]+]] = %z) -> (f32) {
// CHECK-NEXT:   %[[START:[^ ]+]] = arith.muli %[[O]], %[[SPAN]] : index
// CHECK-NEXT:   %[[BASE:[^ ]+]] = arith.addi %c0, %[[START]] : index
// CHECK-NEXT:   %[[LEFT:[^ ]+]] = arith.subi %n, %[[BASE]] : index
// CHECK-NEXT:   %[[END:[^ ]+]] = arith.minsi %[[LEFT]], %[[SPAN]] : index
// CHECK-NEXT:   %[[IN:[^ ]+]] = loop.for "ki" %[[I:[^ ]+]] = %[[ZERO]] to %[[END]] step 16 iter(%[[B:[^ ]+]] = %[[A]]) -> (f32) {
// CHECK-NEXT:     %[[K:[^ ]+]] = arith.addi %[[BASE]], %[[I]] : index
// CHECK-NEXT:     %[[X:[^ ]+]] = loop.load %1[%[[K]]] strides [1] : f32
// CHECK-NEXT:     %[[T:[^ ]+]] = arith.addf %[[B]], %[[X]] : f32
// CHECK-NEXT:     loop.yield %[[T]] : f32
// CHECK-NEXT:   }
// CHECK-NEXT:   loop.yield %[[IN]] : f32
// CHECK-NEXT: }
// CHECK-NEXT: loop.store %[[SUM]], %0[] strides [] : f32
