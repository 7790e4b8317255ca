// lower-graph-to-loop of spec §5 kernel B's primitives.
// graph.matmul_i8 (K = 34: one whole block, a tail of 2 columns): a lanes loop
// "k" of 32 lanes, tail 8, kernel A's tree [3, 4, 2, 0, 1] over the 8 lane
// terms of the whole block (term t: lane t mod 8 of block t div 8, so blocks
// four at a time into four accumulators of 8, leftover blocks into acc0), each
// term one math.fma of f32(p) by the block's scale xs[m, t div 8], p the exact
// i32 sum over the 4 columns 4t + j (j = 0..3) of (w + 128) * xq: one loop.dot4
// of the 4 bytes of each from column 4t (vector<4xi8> loads, stride 1 along the
// columns); then the 2 tail columns unrolled in column order (both i8 widened by
// arith.extsi)
// into one i32 sum, converted, multiplied by xs[m, 1] and then added (no FMA).
// graph.reduce_sum order = "sequential" is one accumulator in index order
// (no lanes), where the default f32 sum is a lanes loop of 16; graph.round is
// math.round (C's roundf). Fused (the second RUN), the same loops read the
// views in place (the i8 weight through its transpose).
// RUN: nc-opt %s --split-input-file -p lower-graph-to-loop | filecheck %s
// RUN: nc-opt %s --split-input-file -p fuse,lower-graph-to-loop | filecheck %s --check-prefix=FUSED

graph.func @core {
  %xq = graph.input "xq" : !graph.tensor<[seq, 34], i8>
  %xs = graph.input "xs" : !graph.tensor<[seq, 2], f32>
  %q = graph.weight "q" : !graph.tensor<[8, 34], i8>
  %qt = graph.permute %q perm = [1, 0] : !graph.tensor<[8, 34], i8> -> !graph.tensor<[34, 8], i8>
  %t = graph.matmul_i8 %xq, %xs, %qt : (!graph.tensor<[seq, 34], i8>, !graph.tensor<[seq, 2], f32>, !graph.tensor<[34, 8], i8>) -> !graph.tensor<[seq, 8], f32>
  graph.return "t" = %t : !graph.tensor<[seq, 8], f32>
}

// CHECK-LABEL: loop.kernel @matmul_i8(
// CHECK-SAME:    footprints [#loop.fp<[seq, 8], [8, 1]>, #loop.fp<[seq, 34], [34, 1]>, #loop.fp<[seq, 2], [2, 1]>, #loop.fp<[34, 8], [1, 34]>]
// CHECK-DAG:     %[[C8:.*]] = arith.constant 8 : index
// CHECK-DAG:     %[[C4:.*]] = arith.constant 4 : index
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[C32:.*]] = arith.constant 32 : index
// CHECK-DAG:     %[[C33:.*]] = arith.constant 33 : index
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : index
// CHECK:         loop.for "d0" %[[M:.*]] = %[[C0]] to %{{.*}} {
// CHECK-NEXT:      loop.for "d1" %[[N:.*]] = %[[C0]] to %[[C8]] {
// CHECK-NEXT:        %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        %[[TOT:.*]] = loop.for "k" %[[T:.*]] = %[[C0]] to %[[C8]] lanes 32 tail 8 tree [3, 4, 2, 0, 1] iter(%[[ACC:.*]] = %[[Z]]) -> (f32) {
// CHECK-NEXT:          %[[COL0:.*]] = arith.muli %[[T]], %[[C4]] : index
// CHECK-NEXT:          %[[XQ4:.*]] = loop.load %1[%[[M]], %[[COL0]]] strides [34, 1] : vector<4xi8>
// CHECK-NEXT:          %[[W4:.*]] = loop.load %3[%[[COL0]], %[[N]]] strides [1, 34] : vector<4xi8>
// CHECK-NEXT:          %[[P:.*]] = loop.dot4 %[[XQ4]], %[[W4]] : vector<4xi8> -> i32
// CHECK-NEXT:          %[[BLK:.*]] = arith.divsi %[[T]], %[[C8]] : index
// CHECK-NEXT:          %[[PF:.*]] = arith.sitofp %[[P]] : i32 to f32
// CHECK-NEXT:          %[[XS:.*]] = loop.load %2[%[[M]], %[[BLK]]] strides [2, 1] : f32
// CHECK-NEXT:          %[[F:.*]] = math.fma %[[PF]], %[[XS]], %[[ACC]] : f32
// CHECK-NEXT:          loop.yield %[[F]] : f32
// CHECK-NEXT:        }
// The tail: columns 32 and 33, one exact i32 sum, then multiply, then add:
// CHECK-NEXT:        %[[T0:.*]] = arith.constant 0 : i32
// CHECK-NEXT:        %[[XQ32:.*]] = loop.load %1[%[[M]], %[[C32]]] strides [34, 1] : i8
// CHECK-NEXT:        %[[W32:.*]] = loop.load %3[%[[C32]], %[[N]]] strides [1, 34] : i8
// CHECK:             %[[S32:.*]] = arith.addi %[[T0]], %{{.*}} : i32
// CHECK-NEXT:        %[[XQ33:.*]] = loop.load %1[%[[M]], %[[C33]]] strides [34, 1] : i8
// CHECK-NEXT:        %[[W33:.*]] = loop.load %3[%[[C33]], %[[N]]] strides [1, 34] : i8
// CHECK:             %[[S33:.*]] = arith.addi %[[S32]], %{{.*}} : i32
// CHECK-NEXT:        %[[TF:.*]] = arith.sitofp %[[S33]] : i32 to f32
// CHECK-NEXT:        %[[XSL:.*]] = loop.load %2[%[[M]], %[[C1]]] strides [2, 1] : f32
// CHECK-NEXT:        %[[PROD:.*]] = arith.mulf %[[TF]], %[[XSL]] : f32
// CHECK-NEXT:        %[[OUT:.*]] = arith.addf %[[TOT]], %[[PROD]] : f32
// CHECK-NEXT:        loop.store %[[OUT]], %0[%[[M]], %[[N]]] strides [8, 1] : f32
// CHECK-LABEL: loop.program @core
// CHECK:         loop.launch @matmul_i8(%t, %xq, %xs, %qt)

// FUSED-LABEL: loop.kernel @fused_matmul_i8(
// FUSED-SAME:    footprints [#loop.fp<[seq, 8], [8, 1]>, #loop.fp<[34, 8], [1, 34]>, #loop.fp<[seq, 34], [34, 1]>, #loop.fp<[seq, 2], [2, 1]>]
// FUSED:           loop.for "k" %{{.*}} lanes 32 tail 8 tree [3, 4, 2, 0, 1] iter(%{{.*}}) -> (f32) {
// FUSED-NOT:         loop.for
// FUSED:             loop.load %{{.*}} : vector<4xi8>
// FUSED:             loop.load %{{.*}} strides [1, 34] : vector<4xi8>
// FUSED:             loop.dot4 %{{.*}} : vector<4xi8> -> i32
// FUSED:             math.fma
// FUSED:           arith.mulf
// FUSED-NEXT:      arith.addf
// FUSED-NEXT:      loop.store
// FUSED-LABEL: loop.program @core

// -----

graph.func @offset {
  %x = graph.input "x" : !graph.tensor<[seq, 28], f32>
  %s = graph.reduce_sum %x axis = 1, order = "sequential" : !graph.tensor<[seq, 28], f32> -> !graph.tensor<[seq, 1], f32>
  %d = graph.reduce_sum %x axis = 1 : !graph.tensor<[seq, 28], f32> -> !graph.tensor<[seq, 1], f32>
  %r = graph.round %x : !graph.tensor<[seq, 28], f32>
  graph.return "s" = %s, "d" = %d, "r" = %r : !graph.tensor<[seq, 1], f32>, !graph.tensor<[seq, 1], f32>, !graph.tensor<[seq, 28], f32>
}
// The sequential sum: one accumulator, no lanes; the default one: 16 lanes.
// CHECK-LABEL: loop.kernel @reduce_sum(
// CHECK:         loop.for "k" %{{.*}} = %{{.*}} to %{{.*}} iter(%[[A:.*]] = %{{.*}}) -> (f32) {
// CHECK-NEXT:      %[[V:.*]] = loop.load %1
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[A]], %[[V]] : f32
// CHECK-LABEL: loop.kernel @reduce_sum_1(
// CHECK:         loop.for "k" %{{.*}} lanes 16 iter
// CHECK-LABEL: loop.kernel @round(
// CHECK:         math.round %{{.*}} : f32
// CHECK-LABEL: loop.program @offset
// CHECK:         loop.launch @reduce_sum(%s, %x)
// CHECK:         loop.launch @reduce_sum_1(%d, %x)

// FUSED-LABEL: loop.kernel @fused_reduce_sum(
// FUSED:         loop.for "k" %{{.*}} = %{{.*}} to %{{.*}} iter(%{{.*}}) -> (f32) {
// FUSED-LABEL: loop.kernel @fused_reduce_sum_1(
// FUSED:         loop.for "k" %{{.*}} lanes 16 iter
// FUSED-LABEL: loop.kernel @fused_round(
// FUSED:         math.round %{{.*}} : f32
// FUSED-LABEL: loop.program @offset
// FUSED:         loop.launch @fused_reduce_sum(%s, %x)
// FUSED:         loop.launch @fused_reduce_sum_1(%d, %x)
