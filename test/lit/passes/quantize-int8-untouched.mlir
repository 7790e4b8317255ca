// quantize-int8 leaves alone: a matmul whose rhs is no weight (attention), a
// weight read some other way too (here also by an add: all its uses stay
// f32), a weight read untransposed, and a matmul that states an order.
// RUN: nc-opt %s --split-input-file -p quantize-int8 | filecheck %s

graph.func @attention {
  %q = graph.input "q" : !graph.tensor<[2, seq, 8], f32>
  %k = graph.input "k" : !graph.tensor<[2, seq, 8], f32>
  %kt = graph.permute %k perm = [0, 2, 1] : !graph.tensor<[2, seq, 8], f32> -> !graph.tensor<[2, 8, seq], f32>
  %s = graph.matmul %q, %kt : (!graph.tensor<[2, seq, 8], f32>, !graph.tensor<[2, 8, seq], f32>) -> !graph.tensor<[2, seq, seq], f32>
  graph.return "s" = %s : !graph.tensor<[2, seq, seq], f32>
}
// CHECK-LABEL: graph.func @attention {
// CHECK:         %s = graph.matmul %q, %kt : (
// CHECK-NOT:     blocks32

// -----

graph.func @other_uses {
  %x = graph.input "x" : !graph.tensor<[8, 8], f32>
  %w = graph.weight "w" : !graph.tensor<[8, 8], f32>
  %wt = graph.permute %w perm = [1, 0] : !graph.tensor<[8, 8], f32>
  %a = graph.matmul %x, %wt : !graph.tensor<[8, 8], f32>
  %v = graph.weight "v" : !graph.tensor<[8, 8], f32>
  %b = graph.matmul %x, %v : !graph.tensor<[8, 8], f32>
  %ab = graph.add %a, %b : !graph.tensor<[8, 8], f32>
  %y = graph.add %ab, %w : !graph.tensor<[8, 8], f32>
  graph.return "y" = %y : !graph.tensor<[8, 8], f32>
}
// CHECK-LABEL: graph.func @other_uses {
// CHECK-NEXT:    %x = graph.input "x"
// CHECK-NEXT:    %w = graph.weight "w" : !graph.tensor<[8, 8], f32>
// CHECK-NEXT:    %wt = graph.permute %w perm = [1, 0]
// CHECK-NEXT:    %a = graph.matmul %x, %wt : !graph.tensor<[8, 8], f32>
// CHECK-NEXT:    %v = graph.weight "v" : !graph.tensor<[8, 8], f32>
// CHECK-NEXT:    %b = graph.matmul %x, %v : !graph.tensor<[8, 8], f32>
// CHECK-NOT:     int8

// -----

graph.func @ordered {
  %x = graph.input "x" : !graph.tensor<[seq, 8], f32>
  %w = graph.weight "w" : !graph.tensor<[4, 8], f32>
  %wt = graph.permute %w perm = [1, 0] : !graph.tensor<[4, 8], f32> -> !graph.tensor<[8, 4], f32>
  %a = graph.matmul %x, %wt order = "blocks32" : (!graph.tensor<[seq, 8], f32>, !graph.tensor<[8, 4], f32>) -> !graph.tensor<[seq, 4], f32>
  graph.return "a" = %a : !graph.tensor<[seq, 4], f32>
}
// CHECK-LABEL: graph.func @ordered {
// CHECK-NEXT:    %x = graph.input "x"
// CHECK-NEXT:    %w = graph.weight "w" : !graph.tensor<[4, 8], f32>
// CHECK-NEXT:    %wt = graph.permute %w
// CHECK-NEXT:    %a = graph.matmul %x, %wt order = "blocks32"
// CHECK-NEXT:    graph.return
