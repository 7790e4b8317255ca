// quantize-int8 on a bf16 projection weight and its exact cast to f32: both
// go, the int8 weight and its scales come in, the bias is added after the
// scaled product (whatever read the matmul reads the mul).
// RUN: nc-opt %s -p quantize-int8 | filecheck %s
// RUN: nc-opt %s -p quantize-int8 | filecheck %s --check-prefix=GONE

graph.func @linear {
  %x = graph.input "x" : !graph.tensor<[seq, 40], f32>
  %w = graph.weight "layer.q_proj.weight" : !graph.tensor<[16, 40], bf16>
  %wf = graph.cast %w : !graph.tensor<[16, 40], bf16> -> !graph.tensor<[16, 40], f32>
  %b = graph.weight "layer.q_proj.bias" : !graph.tensor<[16], bf16>
  %bf = graph.cast %b : !graph.tensor<[16], bf16> -> !graph.tensor<[16], f32>
  %wt = graph.permute %wf perm = [1, 0] : !graph.tensor<[16, 40], f32> -> !graph.tensor<[40, 16], f32>
  %mm = graph.matmul %x, %wt : (!graph.tensor<[seq, 40], f32>, !graph.tensor<[40, 16], f32>) -> !graph.tensor<[seq, 16], f32>
  %br = graph.reshape %bf : !graph.tensor<[16], f32> -> !graph.tensor<[1, 16], f32>
  %bb = graph.broadcast %br : !graph.tensor<[1, 16], f32> -> !graph.tensor<[seq, 16], f32>
  %y = graph.add %mm, %bb : !graph.tensor<[seq, 16], f32>
  graph.return "y" = %y : !graph.tensor<[seq, 16], f32>
}
// CHECK-LABEL: graph.func @linear {
// CHECK-NEXT:    %x = graph.input "x"
// CHECK-NEXT:    %[[Q:.*]] = graph.weight "layer.q_proj.weight.int8" : !graph.tensor<[16, 40], i8>
// CHECK-NEXT:    %[[S:.*]] = graph.weight "layer.q_proj.weight.scale" : !graph.tensor<[16], f32>
// CHECK-NEXT:    %[[QF:.*]] = graph.cast %[[Q]] : !graph.tensor<[16, 40], i8> -> !graph.tensor<[16, 40], f32>
// CHECK-NEXT:    %b = graph.weight "layer.q_proj.bias" : !graph.tensor<[16], bf16>
// CHECK-NEXT:    %bf = graph.cast %b
// CHECK-NEXT:    %[[QT:.*]] = graph.permute %[[QF]] perm = [1, 0] : !graph.tensor<[16, 40], f32> -> !graph.tensor<[40, 16], f32>
// CHECK-NEXT:    %[[DOT:.*]] = graph.matmul %x, %[[QT]] order = "blocks32" : (!graph.tensor<[seq, 40], f32>, !graph.tensor<[40, 16], f32>) -> !graph.tensor<[seq, 16], f32>
// CHECK-NEXT:    %[[SR:.*]] = graph.reshape %[[S]] : !graph.tensor<[16], f32> -> !graph.tensor<[1, 16], f32>
// CHECK-NEXT:    %[[SB:.*]] = graph.broadcast %[[SR]] : !graph.tensor<[1, 16], f32> -> !graph.tensor<[seq, 16], f32>
// CHECK-NEXT:    %mm = graph.mul %[[DOT]], %[[SB]] : !graph.tensor<[seq, 16], f32>
// CHECK-NEXT:    %br = graph.reshape %bf
// CHECK-NEXT:    %bb = graph.broadcast %br
// CHECK-NEXT:    %y = graph.add %mm, %bb
// GONE-NOT:      "layer.q_proj.weight"
// GONE-NOT:      [16, 40], bf16
