// reorder moves index arithmetic between the loops that depends on none of
// their indices before the nest (here d1's bound past + seq, as attention's
// scores compute it inside the rows loop), so the nest stays perfect; the
// arithmetic that depends on them (a split's offsets) still sinks inside.
// RUN: nc-opt %s -p apply-schedule | filecheck %s

builtin.module {
  loop.kernel @k(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>) syms ["past", "seq"] access ["w", "r"] footprints [#loop.fp<[seq, past + seq], [past + seq, 1]>, #loop.fp<[seq, past + seq], [past + seq, 1]>] {
    %seq = loop.sym "seq"
    %past = loop.sym "past"
    %c0 = arith.constant 0 : index
    loop.for "d0" %i = %c0 to %seq {
      %n = arith.addi %past, %seq : index
      loop.for "d1" %j = %c0 to %n {
        %x = loop.load %1[%i, %j] strides [past + seq, 1] : f32
        loop.store %x, %0[%i, %j] strides [past + seq, 1] : f32
      }
    }
  }
  sched.schedule @k {
    sched.reorder ["d1", "d0"]
  }
}
// CHECK:       %[[N:[0-9a-z_]+]] = arith.addi %past, %seq : index
// CHECK-NEXT:  loop.for "d1" %[[J:[0-9a-z_]+]] = %c0 to %[[N]] {
// CHECK-NEXT:    loop.for "d0" %[[I:[0-9a-z_]+]] = %c0 to %seq {
// CHECK-NEXT:      %{{.*}} = loop.load %1[%[[I]], %[[J]]] strides [past + seq, 1] : f32
