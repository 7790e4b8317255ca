// fuse on spec §5 kernel B (after quantize-int8{kernel=b}): graph.matmul_i8 is
// a contraction, the anchor of a "matmul" region with its epilogue (minus the
// offset, times the row scale, plus the bias), reading the quantized
// activations (i8) and their block scales stored by the quantization's
// regions, never recomputing them (no prologue): a "row" region for the block
// maxima and scales, an "elementwise" one rounding (graph.round), clamping and
// storing xq as i8, a "row" one for the i32 block sums and a "row" one for the
// offset: its sequential sum, then the 128 multiplying once at the end (128 *
// off is row-invariant in the projection: stored, not recomputed per row before
// the column loop, so the projection's rows stay a perfect nest for reorder's
// row tiles).
// RUN: nc-opt %s -p 'quantize-int8{kernel=b},fuse' | filecheck %s

graph.func @proj {
  %x = graph.input "x" : !graph.tensor<[seq, 40], f32>
  %w = graph.weight "w" : !graph.tensor<[8, 40], f32>
  %wt = graph.permute %w perm = [1, 0] : !graph.tensor<[8, 40], f32> -> !graph.tensor<[40, 8], f32>
  %y = graph.matmul %x, %wt : (!graph.tensor<[seq, 40], f32>, !graph.tensor<[40, 8], f32>) -> !graph.tensor<[seq, 8], f32>
  %b = graph.weight "b" : !graph.tensor<[8], f32>
  %br = graph.reshape %b : !graph.tensor<[8], f32> -> !graph.tensor<[1, 8], f32>
  %bb = graph.broadcast %br : !graph.tensor<[1, 8], f32> -> !graph.tensor<[seq, 8], f32>
  %z = graph.add %y, %bb : !graph.tensor<[seq, 8], f32>
  graph.return "z" = %z : !graph.tensor<[seq, 8], f32>
}
// CHECK-LABEL: graph.func @proj {
// CHECK:         %[[XS:.*]] = graph.fused "row" (%x) : (!graph.tensor<[seq, 40], f32>) -> !graph.tensor<[seq, 2, 1], f32> {
// CHECK:           graph.reduce_max
// CHECK:         }
// CHECK-NEXT:    %[[XQ:.*]] = graph.fused "elementwise" (%x, %[[XS]]) : (!graph.tensor<[seq, 40], f32>, !graph.tensor<[seq, 2, 1], f32>) -> !graph.tensor<[seq, 2, 32], i8> {
// CHECK-NOT:       graph.reduce
// CHECK:           graph.round
// CHECK:           graph.cast %{{.*}} : !graph.tensor<[seq, 2, 32], f32> -> !graph.tensor<[seq, 2, 32], i8>
// CHECK:         }
// CHECK-NEXT:    %[[BS:.*]] = graph.fused "row" (%[[XQ]]) : (!graph.tensor<[seq, 2, 32], i8>) -> !graph.tensor<[seq, 2, 1], i32> {
// CHECK:           graph.reduce_sum %{{.*}} axis = 2 : !graph.tensor<[seq, 2, 32], i32> -> !graph.tensor<[seq, 2, 1], i32>
// CHECK:         }
// CHECK-NEXT:    %[[OFF:.*]] = graph.fused "row" (%[[BS]], %[[XS]]) : {{.*}} -> !graph.tensor<[seq, 1], f32> {
// CHECK:           graph.reduce_sum %{{.*}} axis = 1, order = "sequential"
// CHECK:           graph.mul %{{.*}} : !graph.tensor<[seq, 1], f32>
// CHECK-NEXT:      graph.yield
// CHECK-NEXT:    }
// CHECK:         %[[Q:.*]] = graph.weight "w.int8" : !graph.tensor<[8, 40], i8>
// CHECK:         %z = graph.fused "matmul" (%[[XQ]], %[[XS]], %[[Q]], %[[OFF]], %{{.*}}, %b) : {{.*}} -> !graph.tensor<[seq, 8], f32> {
// CHECK-NOT:       graph.round
// CHECK-NOT:       graph.reduce
// CHECK:           graph.matmul_i8
// CHECK-NOT:       graph.mul
// CHECK:           graph.broadcast %{{.*}} : !graph.tensor<[seq, 1], f32> -> !graph.tensor<[seq, 8], f32>
// CHECK-NEXT:      graph.sub
// CHECK:           graph.mul
// CHECK:           graph.add
// CHECK-NEXT:      graph.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    graph.return "z" = %z
