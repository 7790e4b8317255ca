// quantize-int8{kernel=b embedding=f32}: the projections kernel B, the tied
// embedding (lookup and LM head) left f32 as it was. K = 64 is two whole
// blocks: no padding, no slice.
// RUN: nc-opt %s -p 'quantize-int8{kernel=b embedding=f32}' | filecheck %s
// RUN: nc-opt %s -p 'quantize-int8{kernel=b embedding=f32}' | filecheck %s --check-prefix=WHOLE

graph.func @block {
  %ids = graph.input "ids" : !graph.tensor<[seq], i64>
  %e = graph.weight "embed" : !graph.tensor<[10, 64], bf16>
  %ef = graph.cast %e : !graph.tensor<[10, 64], bf16> -> !graph.tensor<[10, 64], f32>
  %h = graph.gather %ef, %ids : (!graph.tensor<[10, 64], f32>, !graph.tensor<[seq], i64>) -> !graph.tensor<[seq, 64], f32>
  %w = graph.weight "up" : !graph.tensor<[64, 64], bf16>
  %wf = graph.cast %w : !graph.tensor<[64, 64], bf16> -> !graph.tensor<[64, 64], f32>
  %wt = graph.permute %wf perm = [1, 0] : !graph.tensor<[64, 64], f32> -> !graph.tensor<[64, 64], f32>
  %u = graph.matmul %h, %wt : (!graph.tensor<[seq, 64], f32>, !graph.tensor<[64, 64], f32>) -> !graph.tensor<[seq, 64], f32>
  %x = graph.add %h, %u : !graph.tensor<[seq, 64], f32>
  %et = graph.permute %ef perm = [1, 0] : !graph.tensor<[10, 64], f32> -> !graph.tensor<[64, 10], f32>
  %logits = graph.matmul %x, %et : (!graph.tensor<[seq, 64], f32>, !graph.tensor<[64, 10], f32>) -> !graph.tensor<[seq, 10], f32>
  graph.return "logits" = %logits : !graph.tensor<[seq, 10], f32>
}
// The embedding as it was:
// CHECK-LABEL: graph.func @block {
// CHECK:         %e = graph.weight "embed" : !graph.tensor<[10, 64], bf16>
// CHECK-NEXT:    %ef = graph.cast %e
// CHECK-NEXT:    %h = graph.gather %ef, %ids
// %h's blocks straight from a reshape:
// CHECK-NEXT:    %[[XB:.*]] = graph.reshape %h : !graph.tensor<[seq, 64], f32> -> !graph.tensor<[seq, 2, 32], f32>
// CHECK:         %[[XQ3:.*]] = graph.cast %{{.*}} : !graph.tensor<[seq, 2, 32], f32> -> !graph.tensor<[seq, 2, 32], i8>
// CHECK-NEXT:    %h_q = graph.reshape %[[XQ3]] : !graph.tensor<[seq, 2, 32], i8> -> !graph.tensor<[seq, 64], i8>
// CHECK-NEXT:    %h_xs = graph.reshape
// CHECK:         %h_offset = graph.mul
// CHECK-NEXT:    %[[W:.*]] = graph.weight "up.int8" : !graph.tensor<[64, 64], i8>
// CHECK-NEXT:    %[[S:.*]] = graph.weight "up.scale" : !graph.tensor<[64], f32>
// CHECK-NEXT:    %[[WT:.*]] = graph.permute %[[W]] perm = [1, 0] : !graph.tensor<[64, 64], i8>{{$}}
// CHECK-NEXT:    %[[T:.*]] = graph.matmul_i8 %h_q, %h_xs, %[[WT]] : (!graph.tensor<[seq, 64], i8>, !graph.tensor<[seq, 2], f32>, !graph.tensor<[64, 64], i8>) -> !graph.tensor<[seq, 64], f32>
// CHECK:         %u = graph.mul
// CHECK-NEXT:    %x = graph.add %h, %u
// The LM head as it was (f32, the default order):
// CHECK-NEXT:    %et = graph.permute %ef perm = [1, 0]
// CHECK-NEXT:    %logits = graph.matmul %x, %et : (
// CHECK-NEXT:    graph.return "logits" = %logits

// The whole output: no padding, the embedding's rows are not quantized, one
// matmul_i8.
// WHOLE-NOT:     graph.concat
// WHOLE-NOT:     graph.slice
// WHOLE-NOT:     "embed.int8"
// WHOLE-COUNT-1: graph.matmul_i8
// WHOLE-NOT:     graph.matmul_i8
// WHOLE-NOT:     "embed.int8"
