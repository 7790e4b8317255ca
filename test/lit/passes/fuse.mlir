// fuse groups ops into graph.fused regions, one per future kernel.
// RUN: nc-opt %s --split-input-file -p fuse | filecheck %s

// rms_norm: one row kernel; the weight is read through reshape+broadcast.
graph.func @rms {
  %x = graph.input "x" : !graph.tensor<[seq, 8], f32>
  %w = graph.weight "w" : !graph.tensor<[8], f32>
  %sq = graph.mul %x, %x : !graph.tensor<[seq, 8], f32>
  %s = graph.reduce_sum %sq axis = 1 : !graph.tensor<[seq, 8], f32> -> !graph.tensor<[seq, 1], f32>
  %n = graph.const #graph.elements<f32: [8.0]> : !graph.tensor<[], f32>
  %nr = graph.reshape %n : !graph.tensor<[], f32> -> !graph.tensor<[1, 1], f32>
  %nb = graph.broadcast %nr : !graph.tensor<[1, 1], f32> -> !graph.tensor<[seq, 1], f32>
  %ms = graph.div %s, %nb : !graph.tensor<[seq, 1], f32>
  %r = graph.reciprocal %ms : !graph.tensor<[seq, 1], f32>
  %rb = graph.broadcast %r : !graph.tensor<[seq, 1], f32> -> !graph.tensor<[seq, 8], f32>
  %xr = graph.mul %x, %rb : !graph.tensor<[seq, 8], f32>
  %wr = graph.reshape %w : !graph.tensor<[8], f32> -> !graph.tensor<[1, 8], f32>
  %wb = graph.broadcast %wr : !graph.tensor<[1, 8], f32> -> !graph.tensor<[seq, 8], f32>
  %y = graph.mul %xr, %wb : !graph.tensor<[seq, 8], f32>
  graph.return "y" = %y : !graph.tensor<[seq, 8], f32>
}
// CHECK-LABEL: graph.func @rms {
// CHECK:         %y = graph.fused "row" (%x, %w) : (!graph.tensor<[seq, 8], f32>, !graph.tensor<[8], f32>) -> !graph.tensor<[seq, 8], f32> {
// CHECK:           graph.reduce_sum
// CHECK:           graph.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    graph.return "y" = %y
// CHECK-NOT:     graph.fused

// -----

// A linear with bias and a residual: one matmul kernel with its epilogue;
// the transposed weight is read through the permute.
graph.func @linear {
  %x = graph.input "x" : !graph.tensor<[seq, 8], f32>
  %w = graph.weight "w" : !graph.tensor<[8, 8], f32>
  %b = graph.weight "b" : !graph.tensor<[8], f32>
  %wt = graph.permute %w perm = [1, 0] : !graph.tensor<[8, 8], f32> -> !graph.tensor<[8, 8], f32>
  %mm = graph.matmul %x, %wt : (!graph.tensor<[seq, 8], f32>, !graph.tensor<[8, 8], f32>) -> !graph.tensor<[seq, 8], f32>
  %br = graph.reshape %b : !graph.tensor<[8], f32> -> !graph.tensor<[1, 8], f32>
  %bb = graph.broadcast %br : !graph.tensor<[1, 8], f32> -> !graph.tensor<[seq, 8], f32>
  %h = graph.add %mm, %bb : !graph.tensor<[seq, 8], f32>
  %y = graph.add %x, %h : !graph.tensor<[seq, 8], f32>
  graph.return "y" = %y : !graph.tensor<[seq, 8], f32>
}
// CHECK-LABEL: graph.func @linear {
// CHECK:         %y = graph.fused "matmul" (%w, %x, %b)
// CHECK:           graph.permute
// CHECK:           graph.matmul
// CHECK:           graph.add
// CHECK:           graph.add
// CHECK-NOT:     graph.fused

// -----

// A value read twice through different index maps (rotate-half) is stored:
// the exp is its own kernel, the rotation another.
graph.func @stored {
  %x = graph.input "x" : !graph.tensor<[seq, 4], f32>
  %e = graph.exp %x : !graph.tensor<[seq, 4], f32>
  %a = graph.slice %e axis = 1, start = 0, stop = 2 : !graph.tensor<[seq, 4], f32> -> !graph.tensor<[seq, 2], f32>
  %b = graph.slice %e axis = 1, start = 2, stop = 4 : !graph.tensor<[seq, 4], f32> -> !graph.tensor<[seq, 2], f32>
  %nb = graph.neg %b : !graph.tensor<[seq, 2], f32>
  %r = graph.concat %nb, %a axis = 1 : !graph.tensor<[seq, 2], f32> -> !graph.tensor<[seq, 4], f32>
  graph.return "r" = %r : !graph.tensor<[seq, 4], f32>
}
// CHECK-LABEL: graph.func @stored {
// CHECK:         %[[E:.*]] = graph.fused "elementwise" (%x)
// CHECK:           graph.exp
// CHECK:         %r = graph.fused "elementwise" (%[[E]])
// CHECK:           graph.neg
// CHECK:           graph.concat
