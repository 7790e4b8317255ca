// fuse on spec §5 kernel B's MLP shape (after quantize-int8{kernel=b}):
// silu(x @ Wg^T) * (x @ Wu^T). Each graph.matmul_i8 anchors a region of its
// own that stores its raw integer-dot total (the gate's region takes no exp:
// a matmul_i8 does not anchor an epilogue that calls exp), and the SiLU is not
// a prologue of the up projection's region (it is not computed from that
// region's matmul_i8), and a matmul_i8 whose consumers' region holds it
// stores its total: the offsets and row scales of both, the SiLU and the
// product form one "elementwise" region
// (vectorized at the machine's width: in a tile's copies it ran 4 lanes at a
// time at best). The same ops on the same operands: the same bits.
// RUN: nc-opt %s -p 'quantize-int8{kernel=b},fuse' | filecheck %s

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
// CHECK:           graph.matmul_i8
// CHECK-NEXT:      graph.yield
// CHECK-NEXT:    }
// CHECK:         %[[U:.*]] = graph.fused "matmul" ({{.*}}) : {{.*}} -> !graph.tensor<[seq, 16], f32> {
// CHECK-NOT:       graph.exp
// CHECK:           graph.matmul_i8
// CHECK-NEXT:      graph.yield
// CHECK-NEXT:    }
// CHECK:         %y = graph.fused "elementwise" ({{.*}}%[[G]]{{.*}}%[[U]]{{.*}}) : {{.*}} -> !graph.tensor<[seq, 16], f32> {
// CHECK-NOT:       graph.matmul
// CHECK:           graph.exp
// CHECK:           graph.div
// CHECK:           graph.mul
// CHECK:           graph.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    graph.return "y" = %y
