// apply-schedule on attention's scores with grouped query heads (GQA): 4
// query heads read 2 KV heads, head h the keys of h / 2 (the key cache's
// second index h % 2 at stride 0). The split of the heads by the group folds
// h / 2 and h % 2 into the tile indices "d0o" and "d0i"; privatize "k" jams
// the group's 2 heads into one k loop whose copies share the key load (one
// load of the KV head's key per k, a query load per head), each head keeping
// its own accumulator and its own terms in k order.
// RUN: nc-opt %s -p apply-schedule | filecheck %s

builtin.module {
  loop.kernel @scores(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms ["n"] access ["w", "r", "r"] footprints [#loop.fp<[4, n], [n, 1]>, #loop.fp<[2, 2, n, 8], [8*n, 0, 8, 1]>, #loop.fp<[4, 8], [8, 1]>] {
    %n = loop.sym "n"
    %c0 = arith.constant 0 : index
    %c2 = arith.constant 2 : index
    %c4 = arith.constant 4 : index
    %c8 = arith.constant 8 : index
    loop.for "d0" %h = %c0 to %c4 {
      loop.for "d1" %j = %c0 to %n {
        %z = arith.constant 0.0 : f32
        %s = loop.for "k" %k = %c0 to %c8 iter(%acc = %z) -> (f32) {
          %q = loop.load %2[%h, %k] strides [8, 1] : f32
          %g = arith.divsi %h, %c2 : index
          %r = arith.remsi %h, %c2 : index
          %key = loop.load %1[%g, %r, %j, %k] strides [8*n, 0, 8, 1] : f32
          %t = math.fma %q, %key, %acc : f32
          loop.yield %t : f32
        }
        loop.store %s, %0[%h, %j] strides [n, 1] : f32
      }
    }
  }
  sched.schedule @scores {
    sched.split "d0" by 2 into "d0o", "d0i"
    sched.reorder ["d0o", "d1", "d0i"]
    sched.privatize "k"
  }
}
// CHECK:      loop.for "d0o" %[[G:[^ ]+]] = %{{.*}} to %{{.*}} {
// CHECK-NEXT:   loop.for "d1" %[[J:[^ ]+]] = %{{.*}} to %{{.*}} {
// CHECK-NOT:      arith.divsi
// CHECK-NOT:      arith.remsi
// CHECK:          %[[S0:[^ ]+]], %[[S1:[^ ]+]] = loop.for "k" %[[K:[^ ]+]] = %{{.*}} to %{{.*}} iter(%[[A0:[^ ]+]] = %{{.*}}, %[[A1:[^ ]+]] = %{{.*}}) -> (f32, f32) {
// CHECK-NEXT:       %[[Q0:[^ ]+]] = loop.load %2[%[[H0:[^ ]+]], %[[K]]] strides [8, 1] : f32
// CHECK-NEXT:       %[[KEY:[^ ]+]] = loop.load %1[%[[G]], %{{.*}}, %[[J]], %[[K]]] strides [8*n, 0, 8, 1] : f32
// CHECK-NEXT:       %[[T0:[^ ]+]] = math.fma %[[Q0]], %[[KEY]], %[[A0]] : f32
// CHECK-NEXT:       %[[Q1:[^ ]+]] = loop.load %2[%[[H1:[^ ]+]], %[[K]]] strides [8, 1] : f32
// CHECK-NEXT:       %[[T1:[^ ]+]] = math.fma %[[Q1]], %[[KEY]], %[[A1]] : f32
// CHECK-NEXT:       loop.yield %[[T0]], %[[T1]] : f32, f32
// CHECK-NEXT:     }
// CHECK-NEXT:     loop.store %[[S0]], %0[%[[H0]], %[[J]]] strides [n, 1] : f32
// CHECK-NEXT:     loop.store %[[S1]], %0[%[[H1]], %[[J]]] strides [n, 1] : f32
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK-NOT:  loop.for "d0i"
// CHECK-NOT:  sched.
