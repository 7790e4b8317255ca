// fuse on spec §5 kernel A's MLP shape (after quantize-int8, kernel A):
// silu(x @ Wg^T) * (x @ Wu^T). A kernel A matmul (order = "blocks32") does not
// anchor a region whose epilogue calls exp, so gate and up do not share a k
// loop here (as f32 and bf16 matmuls do): each stores its raw sum, and the
// row scales, the SiLU and the product form one "elementwise" region
// (vectorized at the machine's width; in the decode tile each output took a
// scalar exp and division). The same ops on the same operands: the same bits.
// RUN: nc-opt %s -p 'quantize-int8,fuse' | filecheck %s


graph.func @mlp {
  %x = graph.input "x" : !graph.tensor<[seq, 64], f32>
  %wg = graph.weight "wg" : !graph.tensor<[16, 64], f32>
  %wgt = graph.permute %wg perm = [1, 0] : !graph.tensor<[16, 64], f32> -> !graph.tensor<[64, 16], f32>
  %g = graph.matmul %x, %wgt : (!graph.tensor<[seq, 64], f32>, !graph.tensor<[64, 16], f32>) -> !graph.tensor<[seq, 16], f32>
  %wu = graph.weight "wu" : !graph.tensor<[16, 64], f32>
  %wut = graph.permute %wu perm = [1, 0] : !graph.tensor<[16, 64], f32> -> !graph.tensor<[64, 16], f32>
  %u = graph.matmul %x, %wut : (!graph.tensor<[seq, 64], f32>, !graph.tensor<[64, 16], f32>) -> !graph.tensor<[seq, 16], f32>
  %ng = graph.neg %g : !graph.tensor<[seq, 16], f32>
  %e = graph.exp %ng : !graph.tensor<[seq, 16], f32>
  %c1 = graph.const #graph.elements<f32: [1.0]> : !graph.tensor<[1, 1], f32>
  %one = graph.broadcast %c1 : !graph.tensor<[1, 1], f32> -> !graph.tensor<[seq, 16], f32>
  %den = graph.add %e, %one : !graph.tensor<[seq, 16], f32>
  %s = graph.div %g, %den : !graph.tensor<[seq, 16], f32>
  %y = graph.mul %s, %u : !graph.tensor<[seq, 16], f32>
  graph.return "y" = %y : !graph.tensor<[seq, 16], f32>
}
// CHECK-LABEL: graph.func @mlp {
// CHECK:         %[[G:.*]] = graph.fused "matmul" ({{.*}}) : {{.*}} -> !graph.tensor<[seq, 16], f32> {
// CHECK-NOT:       graph.exp
// CHECK:           graph.matmul {{.*}} order = "blocks32"
// CHECK-NEXT:      graph.yield
// CHECK-NEXT:    }
// CHECK:         %[[U:.*]] = graph.fused "matmul" ({{.*}}) : {{.*}} -> !graph.tensor<[seq, 16], f32> {
// CHECK-NOT:       graph.exp
// CHECK:           graph.matmul {{.*}} order = "blocks32"
// CHECK-NEXT:      graph.yield
// CHECK-NEXT:    }
// CHECK:         %y = graph.fused "elementwise" ({{.*}}%[[G]]{{.*}}%[[U]]{{.*}}) : {{.*}} -> !graph.tensor<[seq, 16], f32> {
// CHECK-NOT:       graph.matmul
// CHECK:           graph.mul
// CHECK:           graph.exp
// CHECK:           graph.div
// CHECK:           graph.mul
// CHECK:           graph.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    graph.return "y" = %y
