// quantize-int8 (default: kernel=a embedding=int8): spec §5's int8 weights.
// A tied bf16 embedding, read by the lookup and by the LM head, becomes one
// int8 copy and its scales serving both uses: the lookup f32(q[id]) *
// scale[id], the LM head kernel A's sum (order "blocks32") times the row
// scale; the bf16 weight and its cast are gone. The norm weight and the
// attention-like matmul (its rhs is no weight) stay as they are.
// RUN: nc-opt %s -p quantize-int8 | filecheck %s
// RUN: nc-opt %s -p 'quantize-int8{kernel=a embedding=int8}' | filecheck %s
// RUN: nc-opt %s -p quantize-int8 | filecheck %s --check-prefix=GONE

graph.func @tied {
  %ids = graph.input "ids" : !graph.tensor<[seq], i64>
  %e = graph.weight "embed" : !graph.tensor<[10, 8], bf16>
  %ef = graph.cast %e : !graph.tensor<[10, 8], bf16> -> !graph.tensor<[10, 8], f32>
  %x = graph.gather %ef, %ids : (!graph.tensor<[10, 8], f32>, !graph.tensor<[seq], i64>) -> !graph.tensor<[seq, 8], f32>
  %nw = graph.weight "norm" : !graph.tensor<[8], f32>
  %nr = graph.reshape %nw : !graph.tensor<[8], f32> -> !graph.tensor<[1, 8], f32>
  %nb = graph.broadcast %nr : !graph.tensor<[1, 8], f32> -> !graph.tensor<[seq, 8], f32>
  %h = graph.mul %x, %nb : !graph.tensor<[seq, 8], f32>
  %ht = graph.permute %h perm = [1, 0] : !graph.tensor<[seq, 8], f32> -> !graph.tensor<[8, seq], f32>
  %scores = graph.matmul %h, %ht : (!graph.tensor<[seq, 8], f32>, !graph.tensor<[8, seq], f32>) -> !graph.tensor<[seq, seq], f32>
  %et = graph.permute %ef perm = [1, 0] : !graph.tensor<[10, 8], f32> -> !graph.tensor<[8, 10], f32>
  %logits = graph.matmul %h, %et : (!graph.tensor<[seq, 8], f32>, !graph.tensor<[8, 10], f32>) -> !graph.tensor<[seq, 10], f32>
  graph.return "logits" = %logits, "scores" = %scores : !graph.tensor<[seq, 10], f32>, !graph.tensor<[seq, seq], f32>
}
// CHECK-LABEL: graph.func @tied {
// CHECK:         %[[Q:.*]] = graph.weight "embed.int8" : !graph.tensor<[10, 8], i8>
// CHECK-NEXT:    %[[S:.*]] = graph.weight "embed.scale" : !graph.tensor<[10], f32>
// CHECK-NEXT:    %[[QF:.*]] = graph.cast %[[Q]] : !graph.tensor<[10, 8], i8> -> !graph.tensor<[10, 8], f32>
// The lookup: the int8 rows widened, times their rows' scales.
// CHECK-NEXT:    %[[ROWS:.*]] = graph.gather %[[QF]], %ids
// CHECK-NEXT:    %[[SV:.*]] = graph.reshape %[[S]] : !graph.tensor<[10], f32> -> !graph.tensor<[10, 1], f32>
// CHECK-NEXT:    %[[SG:.*]] = graph.gather %[[SV]], %ids : (!graph.tensor<[10, 1], f32>, !graph.tensor<[seq], i64>) -> !graph.tensor<[seq, 1], f32>
// CHECK-NEXT:    %[[SB:.*]] = graph.broadcast %[[SG]] : !graph.tensor<[seq, 1], f32> -> !graph.tensor<[seq, 8], f32>
// CHECK-NEXT:    %x = graph.mul %[[ROWS]], %[[SB]] : !graph.tensor<[seq, 8], f32>
// The norm weight and the attention-like matmul are untouched:
// CHECK:         graph.weight "norm" : !graph.tensor<[8], f32>
// CHECK:         %scores = graph.matmul %h, %ht : (
// The LM head: kernel A's sum, then the scale of each output row.
// CHECK:         %[[QT:.*]] = graph.permute %[[QF]] perm = [1, 0] : !graph.tensor<[10, 8], f32> -> !graph.tensor<[8, 10], f32>
// CHECK-NEXT:    %[[DOT:.*]] = graph.matmul %h, %[[QT]] order = "blocks32" : (!graph.tensor<[seq, 8], f32>, !graph.tensor<[8, 10], f32>) -> !graph.tensor<[seq, 10], f32>
// CHECK-NEXT:    %[[SR:.*]] = graph.reshape %[[S]] : !graph.tensor<[10], f32> -> !graph.tensor<[1, 10], f32>
// CHECK-NEXT:    %[[SRB:.*]] = graph.broadcast %[[SR]] : !graph.tensor<[1, 10], f32> -> !graph.tensor<[seq, 10], f32>
// CHECK-NEXT:    %logits = graph.mul %[[DOT]], %[[SRB]] : !graph.tensor<[seq, 10], f32>
// CHECK-NEXT:    graph.return "logits" = %logits, "scores" = %scores
// Nothing reads the bf16 embedding or its cast any more (the whole output):
// GONE-NOT:      graph.weight "embed" :
// GONE-NOT:      bf16
