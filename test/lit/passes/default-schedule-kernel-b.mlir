// default-schedule of spec §5 kernel B's projection (graph.matmul_i8, K = 160:
// 5 blocks, 40 lane terms; then its epilogue, here total - 128 * off per row),
// AVX-512. The lanes loop "k" (32 lanes, tail 8, tree [3, 4, 2, 0, 1]) is
// privatized, then vectorized by 8 (the tree combines vectors of 8 first): each
// lane term's loop.dot4 of 4 bytes becomes one of 32 bytes (8 terms, 8 i32
// lanes). fuse stores the row-invariant 128 * off (a kernel of its own here,
// the offset's row kernel in the model): in the projection the rows are a
// perfect nest, so the projections' candidates apply (kernel A's): column
// tiles of 8 columns n / 8 apart on the pool (d1o; strided since session 20,
// 16 adjacent before), their pairs of columns (d1q) outside the rows, 3 rows
// x 2 columns jammed (d0o: 6 x 4 vector accumulators, the whole group of 32
// terms stepping by 32, the last block's 8 terms in "k_groups"), and the
// leftover rows (d0_tail, all of them at decode) jamming all 8 columns of the
// tile (8 x 4 accumulators, one 32-byte read of xq per block serving 8 weight
// rows).
// The second case, the integer core without an epilogue, schedules the same.
// RUN: nc-opt %s --split-input-file -p 'fuse,lower-graph-to-loop,default-schedule{arch=avx512}' | filecheck %s

graph.func @projection {
  %xq = graph.input "xq" : !graph.tensor<[seq, 160], i8>
  %xs = graph.input "xs" : !graph.tensor<[seq, 5], f32>
  %off = graph.input "off" : !graph.tensor<[seq, 1], f32>
  %q = graph.weight "q" : !graph.tensor<[32, 160], i8>
  %qt = graph.permute %q perm = [1, 0] : !graph.tensor<[32, 160], i8> -> !graph.tensor<[160, 32], i8>
  %t = graph.matmul_i8 %xq, %xs, %qt : (!graph.tensor<[seq, 160], i8>, !graph.tensor<[seq, 5], f32>, !graph.tensor<[160, 32], i8>) -> !graph.tensor<[seq, 32], f32>
  %c = graph.const #graph.elements<f32: [128.0]> : !graph.tensor<[1, 1], f32>
  %cb = graph.broadcast %c : !graph.tensor<[1, 1], f32> -> !graph.tensor<[seq, 1], f32>
  %o = graph.mul %off, %cb : !graph.tensor<[seq, 1], f32>
  %ob = graph.broadcast %o : !graph.tensor<[seq, 1], f32> -> !graph.tensor<[seq, 32], f32>
  %y = graph.sub %t, %ob : !graph.tensor<[seq, 32], f32>
  graph.return "y" = %y : !graph.tensor<[seq, 32], f32>
}
// CHECK-LABEL: loop.kernel @fused_mul(
// CHECK:         arith.constant 1.280000e+02 : f32
// CHECK:         arith.mulf
// CHECK-LABEL: loop.kernel @fused_sub(
// CHECK-NOT:     arith.mulf
// CHECK:         loop.for "d1o" %{{.*}} parallel 2 {
// CHECK-NEXT:      loop.for "d1q" %{{.*}} {
// CHECK-NEXT:        loop.for "d0o" %{{.*}} {
// CHECK:               loop.for "k" %{{.*}} step 32 iter({{.*}}) -> ({{.*}}) {
// CHECK-COUNT-24:        loop.dot4 %{{.*}}, %{{.*}} : vector<32xi8> -> vector<8xi32>
// CHECK:                 loop.yield
// CHECK-NEXT:          }
// CHECK-NEXT:          loop.for "k_groups" %{{.*}} step 8 iter({{.*}}) -> ({{.*}}) {
// CHECK-COUNT-6:         loop.dot4 %{{.*}}, %{{.*}} : vector<32xi8> -> vector<8xi32>
// CHECK:                 loop.yield
// CHECK-NEXT:          }
// CHECK-COUNT-6:       loop.lanesum %{{.*}} tree [2, 0, 1] : vector<8xf32> -> f32
// CHECK:           loop.for "d0_tail" %{{.*}} {
// CHECK:             loop.for "k_tail" %{{.*}} step 32 iter({{.*}}) -> ({{.*}}) {
// CHECK-COUNT-32:      loop.dot4 %{{.*}}, %{{.*}} : vector<32xi8> -> vector<8xi32>
// CHECK:               loop.yield
// CHECK-NEXT:        }
// CHECK-NEXT:        loop.for "k_tail_groups" %{{.*}} step 8 iter({{.*}}) -> ({{.*}}) {
// CHECK-COUNT-8:       loop.dot4 %{{.*}}, %{{.*}} : vector<32xi8> -> vector<8xi32>
// CHECK:               loop.yield
// CHECK-NEXT:        }
// CHECK-COUNT-8:     loop.lanesum %{{.*}} tree [2, 0, 1] : vector<8xf32> -> f32
// CHECK-LABEL: loop.program @projection

// -----

graph.func @core {
  %xq = graph.input "xq" : !graph.tensor<[seq, 160], i8>
  %xs = graph.input "xs" : !graph.tensor<[seq, 5], f32>
  %q = graph.weight "q" : !graph.tensor<[32, 160], i8>
  %qt = graph.permute %q perm = [1, 0] : !graph.tensor<[32, 160], i8> -> !graph.tensor<[160, 32], i8>
  %t = graph.matmul_i8 %xq, %xs, %qt : (!graph.tensor<[seq, 160], i8>, !graph.tensor<[seq, 5], f32>, !graph.tensor<[160, 32], i8>) -> !graph.tensor<[seq, 32], f32>
  graph.return "t" = %t : !graph.tensor<[seq, 32], f32>
}
// CHECK-LABEL: loop.kernel @fused_matmul_i8(
// CHECK:         loop.for "d1o" %{{.*}} parallel 2 {
// CHECK-NEXT:      loop.for "d1q" %{{.*}} {
// CHECK-NEXT:        loop.for "d0o" %{{.*}} {
// CHECK:               loop.for "k" %{{.*}} step 32 iter({{.*}}) -> ({{.*}}) {
// CHECK-COUNT-24:        loop.dot4 %{{.*}}, %{{.*}} : vector<32xi8> -> vector<8xi32>
// CHECK:             loop.for "d0_tail" %{{.*}} {
// CHECK-LABEL: loop.program @core
