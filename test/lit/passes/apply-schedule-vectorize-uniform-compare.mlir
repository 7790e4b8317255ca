// apply-schedule with vectorize on a concatenation's select of its part
// (i < 16, as RoPE's concat of two halves lowers): with the lanes' base a
// multiple of 8 and 16 a multiple of 8, every lane of a vector compares as its
// first does, so the compare stays a scalar on the base and the loop.if one
// branch per vector, yielding a vector (no blend: only the taken part loads).
// RUN: nc-opt %s -p apply-schedule | filecheck %s

builtin.module {
  loop.kernel @concat(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>) syms [] access ["w", "r"] footprints [#loop.fp<[32], [1]>, #loop.fp<[16], [1]>] {
    %c0 = arith.constant 0 : index
    %c32 = arith.constant 32 : index
    %c16 = arith.constant 16 : index
    loop.for "d0" %i = %c0 to %c32 {
      %in = arith.cmpi slt, %i, %c16 : index
      %x = loop.if %in -> (f32) {
        %a = loop.load %1[%i] strides [1] : f32
        loop.yield %a : f32
      } else {
        %j = arith.subi %i, %c16 : index
        %b = loop.load %1[%j] strides [1] : f32
        %n = arith.negf %b : f32
        loop.yield %n : f32
      }
      loop.store %x, %0[%i] strides [1] : f32
    }
  }
  sched.schedule @concat {
    sched.vectorize "d0" width 8
  }
}
// CHECK:        loop.for "d0" %[[I:[0-9a-z_]+]] = %c0 to %{{.*}} step 8 {
// CHECK-NEXT:     %[[IN:[0-9a-z_]+]] = arith.cmpi slt, %[[I]], %c16 : index
// CHECK-NEXT:     %[[X:[0-9a-z_]+]] = loop.if %[[IN]] -> (vector<8xf32>) {
// CHECK-NEXT:       %[[A:[0-9a-z_]+]] = loop.load %1[%[[I]]] strides [1] : vector<8xf32>
// CHECK-NEXT:       loop.yield %[[A]] : vector<8xf32>
// CHECK-NEXT:     } else {
// CHECK-NEXT:       %[[J:[0-9a-z_]+]] = arith.subi %[[I]], %c16 : index
// CHECK-NEXT:       %[[B:[0-9a-z_]+]] = loop.load %1[%[[J]]] strides [1] : vector<8xf32>
// CHECK-NEXT:       %[[N:[0-9a-z_]+]] = arith.negf %[[B]] : vector<8xf32>
// CHECK-NEXT:       loop.yield %[[N]] : vector<8xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:     loop.store %[[X]], %0[%[[I]]] strides [1] : vector<8xf32>
// CHECK-NOT:    loop.vselect
