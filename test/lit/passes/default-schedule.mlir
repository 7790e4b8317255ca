// default-schedule: every kernel gets the first of its default candidate
// schedules (schedule/defaults.py) whose preconditions hold; a refused
// candidate changes nothing and the next is tried; a kernel whose candidates
// are all refused stays as lowered. The inputs are small graphs, lowered
// first so the kernels are the ones the compiler makes.
// RUN: nc-opt %s --split-input-file -p 'lower-graph-to-loop,default-schedule{arch=avx2}' | filecheck %s
// RUN: nc-opt %s --split-input-file -p 'lower-graph-to-loop,default-schedule{arch=scalar}' | filecheck %s --check-prefix=SCALAR
// RUN: nc-opt %s --split-input-file -p 'lower-graph-to-loop,default-schedule{arch=avx512}' | filecheck %s --check-prefix=AVX512
// RUN: not nc-opt %s --split-input-file -p 'default-schedule{arch=sse}' 2>&1 | filecheck %s --check-prefix=BADARCH

// BADARCH: default-schedule: expected arch host, scalar, avx2, avx512, got 'sse'

// An elementwise kernel: its innermost result loop vectorized (avx2: 8 lanes);
// on a scalar arch it has no candidate and stays as lowered.
graph.func @elementwise {
  %x = graph.input "x" : !graph.tensor<[seq, 16], f32>
  %y = graph.exp %x : !graph.tensor<[seq, 16], f32>
  graph.return "y" = %y : !graph.tensor<[seq, 16], f32>
}
// CHECK-LABEL: loop.kernel @exp(
// CHECK:         loop.for "d0" %[[I:.*]] = %{{.*}} to %{{.*}} {
// CHECK:           loop.for "d1" %[[J:.*]] = %{{.*}} to %{{.*}} step 8 {
// CHECK-NEXT:        %[[X:.*]] = loop.load %{{.*}}[%[[I]], %[[J]]] strides [16, 1] : vector<8xf32>
// CHECK-NEXT:        %[[E:.*]] = math.exp %[[X]] : vector<8xf32>
// CHECK-NEXT:        loop.store %[[E]], %{{.*}}[%[[I]], %[[J]]] strides [16, 1] : vector<8xf32>
// SCALAR-LABEL: loop.kernel @exp(
// SCALAR:         loop.for "d1" %{{.*}} = %{{.*}} to %{{.*}} {
// SCALAR-NOT:     vector
// SCALAR-LABEL: loop.program @elementwise
// AVX512-LABEL: loop.kernel @exp(
// AVX512:         loop.for "d1" %{{.*}} = %{{.*}} to %{{.*}} step 16 {
// AVX512-NEXT:      loop.load %{{.*}} strides [16, 1] : vector<16xf32>
// AVX512-NEXT:      math.exp %{{.*}} : vector<16xf32>

// -----

// A projection: the first candidate applies, with no packed weight copy. k is
// a lanes loop (16 partial sums); the columns are split into tiles (AVX2: 2
// columns), moved outside the rows, 2 rows jammed with them (the leftover rows
// peeled into d0_tail), k vectorized (its 16 lanes: two vectors of 8 per
// result, so k steps by 16 carrying 2 x 2 x 2 vectors) and the column tiles
// run on the pool. Each 16
// values of k load a row of x and a row of W as they lie in memory (stride 1
// along k) and issue one math.fma per result and vector; after k, the two
// halves of each result are added (lanes l and l + 8) and loop.lanesum ends
// the halving tree. On a scalar arch only the pool is used and k stays the
// scalar lanes loop. (36 columns make no whole tiles of 8 strided decode
// columns, the first candidate otherwise: default-schedule-bf16.mlir.)
graph.func @projection {
  %x = graph.input "x" : !graph.tensor<[seq, 16], f32>
  %w = graph.weight "w" : !graph.tensor<[36, 16], f32>
  %wt = graph.permute %w perm = [1, 0] : !graph.tensor<[36, 16], f32> -> !graph.tensor<[16, 36], f32>
  %y = graph.matmul %x, %wt : (!graph.tensor<[seq, 16], f32>, !graph.tensor<[16, 36], f32>) -> !graph.tensor<[seq, 36], f32>
  graph.return "y" = %y : !graph.tensor<[seq, 36], f32>
}
// CHECK-LABEL: loop.kernel @matmul(
// CHECK-SAME:    footprints [#loop.fp<[seq, 36], [36, 1]>, #loop.fp<[seq, 16], [16, 1]>, #loop.fp<[16, 36], [1, 16]>]
// CHECK:         loop.for "d1o" %{{.*}} = %{{.*}} to %{{.*}} parallel 8 {
// CHECK-NEXT:      loop.for "d0o" %{{.*}} = %{{.*}} to %{{.*}} {
// CHECK:             %[[A0:[0-9]+]], %[[A1:[0-9]+]], %{{.*}} = loop.for "k" %[[K:[0-9]+]] = %{{[0-9]+}} to %{{[0-9]+}} step 16 iter({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>) {
// CHECK-NEXT:          %[[X:[0-9]+]] = loop.load %[[XP:[0-9]+]][%[[ROW:[0-9]+]], %[[K]]] strides [16, 1] : vector<8xf32>
// CHECK-NEXT:          %[[W:[0-9]+]] = loop.load %[[WP:[0-9]+]][%[[K]], %[[COL:[0-9]+]]] strides [1, 16] : vector<8xf32>
// CHECK-NEXT:          %{{[0-9]+}} = math.fma %[[X]], %[[W]], %{{[0-9]+}} : vector<8xf32>
// CHECK-NEXT:          %[[EIGHT:[0-9]+]] = arith.constant 8 : index
// CHECK-NEXT:          %[[K8:[0-9]+]] = arith.addi %[[K]], %[[EIGHT]] : index
// CHECK-NEXT:          %[[XH:[0-9]+]] = loop.load %[[XP]][%[[ROW]], %[[K8]]] strides [16, 1] : vector<8xf32>
// CHECK-NEXT:          %[[WH:[0-9]+]] = loop.load %[[WP]][%[[K8]], %[[COL]]] strides [1, 16] : vector<8xf32>
// CHECK-NEXT:          %{{[0-9]+}} = math.fma %[[XH]], %[[WH]], %{{[0-9]+}} : vector<8xf32>
// CHECK:               loop.yield
// CHECK-NEXT:        }
// CHECK-NEXT:        %[[H:[0-9]+]] = arith.addf %[[A0]], %[[A1]] : vector<8xf32>
// CHECK-NEXT:        %[[S:[0-9]+]] = loop.lanesum %[[H]] : vector<8xf32> -> f32
// CHECK-NEXT:        loop.store %[[S]], %{{[0-9]+}}[%[[ROW]], %[[COL]]] strides [36, 1] : f32
// CHECK:           loop.for "d0_tail" %{{.*}} = %{{.*}} to %{{.*}} {
// CHECK:             loop.for "k_tail" %{{[0-9]+}} = %{{[0-9]+}} to %{{[0-9]+}} step 16 iter({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>) {
// CHECK-LABEL: loop.program @projection
// CHECK-NOT:     packed
// CHECK:         %[[WT:.*]] = loop.view %{{.*}} layout <0, [1, 16]> : !loop.buf<[36, 16], f32> -> !loop.view<[16, 36], f32>
// CHECK-NOT:     packed
// CHECK:         loop.launch @matmul(%{{.*}}, %{{.*}}, %[[WT]])
// CHECK-NOT:     packed
// CHECK:         loop.output
// SCALAR-LABEL: loop.kernel @matmul(
// SCALAR:         loop.for "d0" %{{.*}} = %{{.*}} to %{{.*}} {
// SCALAR-NEXT:      loop.for "d1" %{{.*}} = %{{.*}} to %{{.*}} parallel 1 {
// SCALAR:             %{{.*}} = loop.for "k" %[[K:[0-9]+]] = %{{[0-9]+}} to %{{[0-9]+}} lanes 16 iter(%[[ACC:[0-9]+]] = %{{[0-9]+}}) -> (f32) {
// SCALAR-NEXT:          %[[X:[0-9]+]] = loop.load %{{[0-9]+}}[%{{[0-9]+}}, %[[K]]] strides [16, 1] : f32
// SCALAR-NEXT:          %[[W:[0-9]+]] = loop.load %{{[0-9]+}}[%[[K]], %{{[0-9]+}}] strides [1, 16] : f32
// SCALAR-NEXT:          %[[F:[0-9]+]] = math.fma %[[X]], %[[W]], %[[ACC]] : f32
// SCALAR-NEXT:          loop.yield %[[F]] : f32
// SCALAR-NOT:     vector
// SCALAR-LABEL: loop.program @projection
// SCALAR-NOT:     packed
// SCALAR:         loop.output
// AVX-512: 6 rows x 4 columns, each result one vector of 16 (k's 16 lanes),
// so loop.lanesum takes k's result as it is.
// AVX512-LABEL: loop.kernel @matmul(
// AVX512:         loop.for "d1o" %{{.*}} = %{{.*}} to %{{.*}} parallel 4 {
// AVX512-NEXT:      loop.for "d0o" %{{.*}} = %{{.*}} to %{{.*}} {
// AVX512:             %[[A0:[0-9]+]], %{{.*}} = loop.for "k" %[[K:[0-9]+]] = %{{[0-9]+}} to %{{[0-9]+}} step 16 iter({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
// AVX512-NEXT:          %[[X:[0-9]+]] = loop.load %{{[0-9]+}}[%[[ROW:[0-9]+]], %[[K]]] strides [16, 1] : vector<16xf32>
// AVX512-NEXT:          %[[W:[0-9]+]] = loop.load %{{[0-9]+}}[%[[K]], %[[COL:[0-9]+]]] strides [1, 16] : vector<16xf32>
// AVX512-NEXT:          %{{[0-9]+}} = math.fma %[[X]], %[[W]], %{{[0-9]+}} : vector<16xf32>
// AVX512:               loop.yield
// AVX512-NEXT:        }
// AVX512-NEXT:        %[[S:[0-9]+]] = loop.lanesum %[[A0]] : vector<16xf32> -> f32
// AVX512-NEXT:        loop.store %[[S]], %{{[0-9]+}}[%[[ROW]], %[[COL]]] strides [36, 1] : f32
// AVX512:           loop.for "d0_tail" %{{.*}} = %{{.*}} to %{{.*}} {
// AVX512:             loop.for "k_tail" %{{[0-9]+}} = %{{[0-9]+}} to %{{[0-9]+}} step 16 iter({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
// AVX512-LABEL: loop.program @projection
// AVX512-NOT:     packed
// AVX512:         loop.output

// -----

// A matmul whose right operand is an input, not a weight (the scores against
// the keys): the same register tile applies, reading the input as it lies
// (nothing is packed, so nothing needs a weight).
graph.func @scores {
  %x = graph.input "x" : !graph.tensor<[seq, 16], f32>
  %k = graph.input "k" : !graph.tensor<[36, 16], f32>
  %kt = graph.permute %k perm = [1, 0] : !graph.tensor<[36, 16], f32> -> !graph.tensor<[16, 36], f32>
  %y = graph.matmul %x, %kt : (!graph.tensor<[seq, 16], f32>, !graph.tensor<[16, 36], f32>) -> !graph.tensor<[seq, 36], f32>
  graph.return "y" = %y : !graph.tensor<[seq, 36], f32>
}
// CHECK-LABEL: loop.kernel @matmul(
// CHECK-SAME:    footprints [#loop.fp<[seq, 36], [36, 1]>, #loop.fp<[seq, 16], [16, 1]>, #loop.fp<[16, 36], [1, 16]>]
// CHECK:         loop.for "d1o" %{{.*}} = %{{.*}} to %{{.*}} parallel 8 {
// CHECK-NEXT:      loop.for "d0o" %{{.*}} = %{{.*}} to %{{.*}} {
// CHECK:             loop.for "k" %{{[0-9]+}} = %{{[0-9]+}} to %{{[0-9]+}} step 16 iter({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>) {
// CHECK:               math.fma %{{.*}} : vector<8xf32>
// CHECK-LABEL: loop.program @scores
// CHECK-NOT:     packed
// CHECK:         loop.output

// -----

// k = 20 is no whole number of 16 lanes: vectorizing k is refused (the vectors
// would not hold whole lane groups), so both tile candidates are refused and
// the pool alone is used; k stays the scalar lanes loop (16 partial sums, the
// last 4 lanes of the second group untouched).
graph.func @ragged {
  %x = graph.input "x" : !graph.tensor<[seq, 20], f32>
  %w = graph.weight "w" : !graph.tensor<[32, 20], f32>
  %wt = graph.permute %w perm = [1, 0] : !graph.tensor<[32, 20], f32> -> !graph.tensor<[20, 32], f32>
  %y = graph.matmul %x, %wt : (!graph.tensor<[seq, 20], f32>, !graph.tensor<[20, 32], f32>) -> !graph.tensor<[seq, 32], f32>
  graph.return "y" = %y : !graph.tensor<[seq, 32], f32>
}
// CHECK-LABEL: loop.kernel @matmul(
// CHECK:         loop.for "d0" %{{.*}} = %{{.*}} to %{{.*}} {
// CHECK-NEXT:      loop.for "d1" %{{.*}} = %{{.*}} to %{{.*}} parallel 1 {
// CHECK:             loop.for "k" %{{[0-9]+}} = %{{[0-9]+}} to %{{[0-9]+}} lanes 16 iter(%{{[0-9]+}} = %{{[0-9]+}}) -> (f32) {
// CHECK:               math.fma %{{.*}} : f32
// CHECK-NOT:     vector
// CHECK-LABEL: loop.program @ragged
// AVX512-LABEL: loop.program @scores
// AVX512-LABEL: loop.kernel @matmul(
// AVX512:         loop.for "d0" %{{.*}} = %{{.*}} to %{{.*}} {
// AVX512-NEXT:      loop.for "d1" %{{.*}} = %{{.*}} to %{{.*}} parallel 1 {
// AVX512:             loop.for "k" %{{[0-9]+}} = %{{[0-9]+}} to %{{[0-9]+}} lanes 16 iter(%{{[0-9]+}} = %{{[0-9]+}}) -> (f32) {
// AVX512-NOT:     vector
// AVX512-LABEL: loop.program @ragged
