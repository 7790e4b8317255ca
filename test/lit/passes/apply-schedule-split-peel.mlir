// apply-schedule with split ... peel: the row loop over a symbolic extent is
// split into whole tiles of 4 (the inner loop has a constant trip count, so
// privatize could jam it) and a tail loop "d0_tail" for the leftover rows;
// the loops nested in the tail get the suffix too, so names stay unique.
// RUN: nc-opt %s -p apply-schedule | filecheck %s

builtin.module {
  loop.kernel @rows(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>) syms ["m"] access ["w", "r"] footprints [#loop.fp<[m, 8], [8, 1]>, #loop.fp<[m, 8], [8, 1]>] {
    %m = loop.sym "m"
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    loop.for "d0" %i = %c0 to %m {
      loop.for "d1" %j = %c0 to %c8 {
        %x = loop.load %1[%i, %j] strides [8, 1] : f32
        %y = arith.mulf %x, %x : f32
        loop.store %y, %0[%i, %j] strides [8, 1] : f32
      }
    }
  }
  sched.schedule @rows {
    sched.split "d0" by 4 into "d0o", "d0i" peel
  }
}
// CHECK:      %[[F:.*]] = arith.constant 4 : index
// CHECK:      %[[N:.*]] = arith.subi %m, %c0 : index
// CHECK-NEXT: %[[TILES:.*]] = arith.divsi %[[N]], %[[F]] : index
// CHECK-NEXT: loop.for "d0o" %[[O:.*]] = %{{.*}} to %[[TILES]] {
// CHECK:        loop.for "d0i" %{{.*}} = %{{.*}} to %[[F]] {
// CHECK:          loop.for "d1" %{{.*}} = %c0 to %c8 {
// CHECK:      %[[SPAN:.*]] = arith.muli %[[TILES]], %[[F]] : index
// CHECK-NEXT: %[[START:.*]] = arith.addi %c0, %[[SPAN]] : index
// CHECK-NEXT: loop.for "d0_tail" %[[T:.*]] = %[[START]] to %m {
// CHECK-NEXT:   loop.for "d1_tail" %[[J:.*]] = %c0 to %c8 {
// CHECK-NEXT:     %{{.*}} = loop.load %1[%[[T]], %[[J]]] strides [8, 1] : f32
// CHECK-NOT:  sched.
