// quantize-int8{kernel=b head=b}: spec §5's switch, the int8 LM head on kernel
// B too. The LM head's activation %x (the block's output, not read by any
// other projection) gets a quantization of its own, right after it is
// computed, and the LM head is matmul_i8 on the embedding's int8 values (no
// f32 copy for it: the widened copy %QF serves the lookup only), minus %x's
// offset, times the row scale. K = 64: two whole blocks, no padding.
// RUN: nc-opt %s -p 'quantize-int8{kernel=b head=b}' | filecheck %s
// RUN: nc-opt %s -p 'quantize-int8{kernel=b embedding=int8 head=b}' | filecheck %s
// RUN: nc-opt %s -p 'quantize-int8{kernel=b head=b}' | filecheck %s --check-prefix=COUNT
// Without the switch the LM head stays kernel A (the default, head=a):
// RUN: nc-opt %s -p 'quantize-int8{kernel=b head=a}' | filecheck %s --check-prefix=HEADA
// RUN: nc-opt %s -p 'quantize-int8{kernel=b}' | filecheck %s --check-prefix=HEADA

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
// CHECK-LABEL: graph.func @block {
// CHECK:         %[[Q:.*]] = graph.weight "embed.int8" : !graph.tensor<[10, 64], i8>
// CHECK-NEXT:    %[[S:.*]] = graph.weight "embed.scale" : !graph.tensor<[10], f32>
// CHECK-NEXT:    %[[QF:.*]] = graph.cast %[[Q]] : !graph.tensor<[10, 64], i8> -> !graph.tensor<[10, 64], f32>
// The lookup reads the widened copy:
// CHECK:         graph.gather %[[QF]], %ids
// CHECK:         %h = graph.mul
// CHECK:         %h_offset = graph.mul
// CHECK:         graph.matmul_i8 %h_q, %h_xs,
// CHECK:         %x = graph.add %h, %u
// %x's quantization, right after it:
// CHECK-NEXT:    %[[XB:.*]] = graph.reshape %x : !graph.tensor<[seq, 64], f32> -> !graph.tensor<[seq, 2, 32], f32>
// CHECK:         %[[XQ3:.*]] = graph.cast %{{.*}} : !graph.tensor<[seq, 2, 32], f32> -> !graph.tensor<[seq, 2, 32], i8>
// CHECK-NEXT:    %x_q = graph.reshape %[[XQ3]] : !graph.tensor<[seq, 2, 32], i8> -> !graph.tensor<[seq, 64], i8>
// CHECK-NEXT:    %x_xs = graph.reshape
// CHECK:         %[[OFF:.*]] = graph.reduce_sum %{{.*}} axis = 1, order = "sequential"
// CHECK:         %x_offset = graph.mul %[[OFF]],
// The LM head: kernel B on the int8 embedding values themselves:
// CHECK-NEXT:    %[[QT:.*]] = graph.permute %[[Q]] perm = [1, 0] : !graph.tensor<[10, 64], i8> -> !graph.tensor<[64, 10], i8>
// CHECK-NEXT:    %[[T:.*]] = graph.matmul_i8 %x_q, %x_xs, %[[QT]] : (!graph.tensor<[seq, 64], i8>, !graph.tensor<[seq, 2], f32>, !graph.tensor<[64, 10], i8>) -> !graph.tensor<[seq, 10], f32>
// CHECK-NEXT:    %[[OB:.*]] = graph.broadcast %x_offset : !graph.tensor<[seq, 1], f32> -> !graph.tensor<[seq, 10], f32>
// CHECK-NEXT:    %[[D:.*]] = graph.sub %[[T]], %[[OB]] : !graph.tensor<[seq, 10], f32>
// CHECK-NEXT:    %[[SR:.*]] = graph.reshape %[[S]] : !graph.tensor<[10], f32> -> !graph.tensor<[1, 10], f32>
// CHECK-NEXT:    %[[SB:.*]] = graph.broadcast %[[SR]] : !graph.tensor<[1, 10], f32> -> !graph.tensor<[seq, 10], f32>
// CHECK-NEXT:    %logits = graph.mul %[[D]], %[[SB]] : !graph.tensor<[seq, 10], f32>
// CHECK-NEXT:    graph.return "logits" = %logits

// Two quantizations (%h's and %x's), two matmul_i8, no kernel-A matmul left:
// COUNT-NOT:     order = "blocks32"
// COUNT-COUNT-2: graph.round
// COUNT-NOT:     graph.round
// COUNT-NOT:     order = "blocks32"

// HEADA:         %x = graph.add %h, %u
// HEADA-NOT:     graph.round
// HEADA:         %logits = graph.mul
// HEADA-NOT:     graph.matmul_i8
