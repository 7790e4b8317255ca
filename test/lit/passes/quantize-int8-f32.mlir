// quantize-int8 on an f32 projection weight (no cast to remove); two
// projections reading one transposed weight share its int8 copy.
// RUN: nc-opt %s -p quantize-int8 | filecheck %s
// RUN: nc-opt %s -p quantize-int8 | filecheck %s --check-prefix=GONE

graph.func @shared {
  %x = graph.input "x" : !graph.tensor<[seq, 8], f32>
  %z = graph.input "z" : !graph.tensor<[seq, 8], f32>
  %w = graph.weight "w" : !graph.tensor<[4, 8], f32>
  %wt = graph.permute %w perm = [1, 0] : !graph.tensor<[4, 8], f32> -> !graph.tensor<[8, 4], f32>
  %a = graph.matmul %x, %wt : (!graph.tensor<[seq, 8], f32>, !graph.tensor<[8, 4], f32>) -> !graph.tensor<[seq, 4], f32>
  %c = graph.matmul %z, %wt : (!graph.tensor<[seq, 8], f32>, !graph.tensor<[8, 4], f32>) -> !graph.tensor<[seq, 4], f32>
  %y = graph.add %a, %c : !graph.tensor<[seq, 4], f32>
  graph.return "y" = %y : !graph.tensor<[seq, 4], f32>
}
// CHECK-LABEL: graph.func @shared {
// CHECK:         %[[Q:.*]] = graph.weight "w.int8" : !graph.tensor<[4, 8], i8>
// CHECK-NEXT:    %[[S:.*]] = graph.weight "w.scale" : !graph.tensor<[4], f32>
// CHECK-NEXT:    %[[QF:.*]] = graph.cast %[[Q]] : !graph.tensor<[4, 8], i8> -> !graph.tensor<[4, 8], f32>
// CHECK:         graph.matmul %x, %{{.*}} order = "blocks32"
// CHECK:         %a = graph.mul
// CHECK:         graph.matmul %z, %{{.*}} order = "blocks32"
// CHECK:         %c = graph.mul
// CHECK-NEXT:    %y = graph.add %a, %c
// GONE-NOT:      graph.weight "w" :
// GONE-NOT:      graph.matmul %{{.*}}, %wt
