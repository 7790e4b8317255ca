// vectorize accepts a loop that loads the argument it stores when each
// iteration reads and writes only its own element (the same indices and
// strides, the loop's own index among them): no iteration reads what another
// wrote, so lanes see what the scalar loop saw (a softmax's store loop
// dividing the terms its sum stored). A shifted store stays refused
// (apply-schedule-vectorize-reads-own-writes.mlir).
// RUN: nc-opt %s -p apply-schedule | filecheck %s

builtin.module {
  loop.kernel @k(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>) syms ["m"] access ["w", "r"] footprints [#loop.fp<[m, 8], [8, 1]>, #loop.fp<[m, 8], [8, 1]>] {
    %m = loop.sym "m"
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    loop.for "d0" %i = %c0 to %m {
      loop.for "d1" %j = %c0 to %c8 {
        %x = loop.load %0[%i, %j] strides [8, 1] : f32
        %y = loop.load %1[%i, %j] strides [8, 1] : f32
        %z = arith.divf %x, %y : f32
        loop.store %z, %0[%i, %j] strides [8, 1] : f32
      }
    }
  }
  sched.schedule @k {
    sched.vectorize "d1" width 8
  }
}
// CHECK:      loop.for "d1" %[[J:.*]] = %{{.*}} to %{{.*}} step 8 {
// CHECK-NEXT:   %[[X:.*]] = loop.load %0[%{{.*}}, %[[J]]] strides [8, 1] : vector<8xf32>
// CHECK-NEXT:   %[[Y:.*]] = loop.load %1[%{{.*}}, %[[J]]] strides [8, 1] : vector<8xf32>
// CHECK-NEXT:   %[[Z:.*]] = arith.divf %[[X]], %[[Y]] : vector<8xf32>
// CHECK-NEXT:   loop.store %[[Z]], %0[%{{.*}}, %[[J]]] strides [8, 1] : vector<8xf32>
