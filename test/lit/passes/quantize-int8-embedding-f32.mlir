// quantize-int8{embedding=f32}: the embedding weights (a lookup table, or a
// projection that is a graph output: the LM head) keep f32, both uses; the
// other projections are int8 as by default.
// RUN: nc-opt %s -p 'quantize-int8{embedding=f32}' | filecheck %s
// RUN: nc-opt %s -p 'quantize-int8{embedding=f32}' | filecheck %s --check-prefix=GONE

graph.func @tied {
  %ids = graph.input "ids" : !graph.tensor<[seq], i64>
  %e = graph.weight "embed" : !graph.tensor<[10, 8], bf16>
  %ef = graph.cast %e : !graph.tensor<[10, 8], bf16> -> !graph.tensor<[10, 8], f32>
  %x = graph.gather %ef, %ids : (!graph.tensor<[10, 8], f32>, !graph.tensor<[seq], i64>) -> !graph.tensor<[seq, 8], f32>
  %w = graph.weight "proj" : !graph.tensor<[8, 8], f32>
  %wt = graph.permute %w perm = [1, 0] : !graph.tensor<[8, 8], f32> -> !graph.tensor<[8, 8], f32>
  %h = graph.matmul %x, %wt : (!graph.tensor<[seq, 8], f32>, !graph.tensor<[8, 8], f32>) -> !graph.tensor<[seq, 8], f32>
  %et = graph.permute %ef perm = [1, 0] : !graph.tensor<[10, 8], f32> -> !graph.tensor<[8, 10], f32>
  %logits = graph.matmul %h, %et : (!graph.tensor<[seq, 8], f32>, !graph.tensor<[8, 10], f32>) -> !graph.tensor<[seq, 10], f32>
  %u = graph.weight "untied_head" : !graph.tensor<[10, 8], f32>
  %ut = graph.permute %u perm = [1, 0] : !graph.tensor<[10, 8], f32> -> !graph.tensor<[8, 10], f32>
  %head = graph.matmul %h, %ut : (!graph.tensor<[seq, 8], f32>, !graph.tensor<[8, 10], f32>) -> !graph.tensor<[seq, 10], f32>
  graph.return "logits" = %logits, "head" = %head : !graph.tensor<[seq, 10], f32>, !graph.tensor<[seq, 10], f32>
}
// CHECK-LABEL: graph.func @tied {
// CHECK-NEXT:    %ids = graph.input "ids"
// CHECK-NEXT:    %e = graph.weight "embed" : !graph.tensor<[10, 8], bf16>
// CHECK-NEXT:    %ef = graph.cast %e
// CHECK-NEXT:    %x = graph.gather %ef, %ids
// CHECK-NEXT:    %[[Q:.*]] = graph.weight "proj.int8" : !graph.tensor<[8, 8], i8>
// CHECK-NEXT:    %[[S:.*]] = graph.weight "proj.scale" : !graph.tensor<[8], f32>
// CHECK:         %[[DOT:.*]] = graph.matmul %x, %{{.*}} order = "blocks32"
// CHECK:         %h = graph.mul %[[DOT]], %{{.*}} : !graph.tensor<[seq, 8], f32>
// CHECK-NEXT:    %et = graph.permute %ef perm = [1, 0]
// CHECK-NEXT:    %logits = graph.matmul %h, %et : (
// CHECK-NEXT:    %u = graph.weight "untied_head" : !graph.tensor<[10, 8], f32>
// CHECK-NEXT:    %ut = graph.permute %u perm = [1, 0]
// CHECK-NEXT:    %head = graph.matmul %h, %ut : (
// GONE-NOT:      "embed.int8"
// GONE-NOT:      "untied_head.int8"
