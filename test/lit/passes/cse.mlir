// cse (xDSL's pass) merges identical pure graph ops; graph.input and
// graph.weight are not pure, so two inputs of one type stay two inputs.
// RUN: nc-opt %s -p cse | filecheck %s

graph.func @f {
  %x = graph.input "x" : !graph.tensor<[seq, 8], f32>
  %y = graph.input "y" : !graph.tensor<[seq, 8], f32>
  %d1 = graph.dim past : !graph.tensor<[], i64>
  %d2 = graph.dim past : !graph.tensor<[], i64>
  %p = graph.input "p" : !graph.tensor<[past], f32>
  %e1 = graph.exp %x : !graph.tensor<[seq, 8], f32>
  %e2 = graph.exp %x : !graph.tensor<[seq, 8], f32>
  %e3 = graph.exp %y : !graph.tensor<[seq, 8], f32>
  %s = graph.add %e1, %e2 : !graph.tensor<[seq, 8], f32>
  %t = graph.add %s, %e3 : !graph.tensor<[seq, 8], f32>
  graph.return "t" = %t, "d1" = %d1, "d2" = %d2 : !graph.tensor<[seq, 8], f32>, !graph.tensor<[], i64>, !graph.tensor<[], i64>
}
// CHECK:      %x = graph.input "x"
// CHECK-NEXT: %y = graph.input "y"
// CHECK-NEXT: %[[D:.*]] = graph.dim past
// CHECK-NEXT: %p = graph.input "p"
// CHECK-NEXT: %[[E:.*]] = graph.exp %x
// CHECK-NEXT: %[[E3:.*]] = graph.exp %y
// CHECK-NEXT: %[[S:.*]] = graph.add %[[E]], %[[E]]
// CHECK-NEXT: %{{.*}} = graph.add %[[S]], %[[E3]]
// CHECK-NEXT: graph.return "t" = %{{.*}}, "d1" = %[[D]], "d2" = %[[D]]
