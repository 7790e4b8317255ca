// dce (xDSL's pass) removes pure ops whose results are unused; unused
// inputs and weights are the graph's signature and stay.
// RUN: nc-opt %s -p dce | filecheck %s

graph.func @f {
  %x = graph.input "x" : !graph.tensor<[seq, 8], f32>
  %unused_in = graph.input "u" : !graph.tensor<[seq], f32>
  %w = graph.weight "w" : !graph.tensor<[8], f32>
  %dead = graph.exp %x : !graph.tensor<[seq, 8], f32>
  %dead2 = graph.neg %dead : !graph.tensor<[seq, 8], f32>
  %live = graph.sqrt %x : !graph.tensor<[seq, 8], f32>
  graph.return "y" = %live : !graph.tensor<[seq, 8], f32>
}
// CHECK:      %x = graph.input "x"
// CHECK-NEXT: %unused_in = graph.input "u"
// CHECK-NEXT: %w = graph.weight "w"
// CHECK-NEXT: %live = graph.sqrt %x
// CHECK-NOT:  graph.exp
// CHECK-NOT:  graph.neg
