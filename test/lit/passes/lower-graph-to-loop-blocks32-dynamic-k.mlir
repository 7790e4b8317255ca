// lower-graph-to-loop refuses kernel A's order on a symbolic K (its blocks of
// 32 columns and the tail of K mod 8 are fixed at lowering): one line naming
// the order and K, no traceback.
// RUN: not nc-opt %s -p lower-graph-to-loop 2>&1 | filecheck %s

graph.func @dynamic_k {
  %x = graph.input "x" : !graph.tensor<[seq, kk], f32>
  %w = graph.input "w" : !graph.tensor<[kk, 8], f32>
  %y = graph.matmul %x, %w order = "blocks32" : (!graph.tensor<[seq, kk], f32>, !graph.tensor<[kk, 8], f32>) -> !graph.tensor<[seq, 8], f32>
  graph.return "y" = %y : !graph.tensor<[seq, 8], f32>
}
// CHECK:     lower-graph-to-loop: graph.matmul order "blocks32" needs a constant K (spec §5's blocks of 32 columns), got K = kk
// CHECK-NOT: Traceback
