// fold-constants evaluates primitives of constants with the interpreter's
// own kernels (exact f32), and never folds a symbolic shape.
// RUN: nc-opt %s -p fold-constants,dce | filecheck %s

graph.func @f {
  %x = graph.input "x" : !graph.tensor<[seq, 2], f32>
  %a = graph.const #graph.elements<f32: [1.0, 2.0]> : !graph.tensor<[2], f32>
  %b = graph.const #graph.elements<f32: [3.0]> : !graph.tensor<[], f32>
  %br = graph.reshape %b : !graph.tensor<[], f32> -> !graph.tensor<[1], f32>
  %bb = graph.broadcast %br : !graph.tensor<[1], f32> -> !graph.tensor<[2], f32>
  %q = graph.div %a, %bb : !graph.tensor<[2], f32>
  %qr = graph.reshape %q : !graph.tensor<[2], f32> -> !graph.tensor<[1, 2], f32>
  %sym = graph.broadcast %qr : !graph.tensor<[1, 2], f32> -> !graph.tensor<[seq, 2], f32>
  %y = graph.mul %x, %sym : !graph.tensor<[seq, 2], f32>
  graph.return "y" = %y : !graph.tensor<[seq, 2], f32>
}
// 1/3 and 2/3 rounded once to f32, as NumPy's f32 division does:
// CHECK:      %qr = graph.const #graph.elements<f32: [0.3333333432674408, 0.6666666865348816]> : !graph.tensor<[1, 2], f32>
// CHECK-NEXT: %sym = graph.broadcast %qr : !graph.tensor<[1, 2], f32> -> !graph.tensor<[seq, 2], f32>
// CHECK-NEXT: %y = graph.mul %x, %sym
