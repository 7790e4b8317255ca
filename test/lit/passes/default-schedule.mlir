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

// A projection: the first candidate applies. The weight is packed in tiles of
// one vector, the columns split into tiles of 4 vectors, moved outside the
// rows, 3 rows jammed with them (the leftover rows peeled), and the column
// tiles run on the pool. On a scalar arch only the pool is used.
graph.func @projection {
  %x = graph.input "x" : !graph.tensor<[seq, 16], f32>
  %w = graph.weight "w" : !graph.tensor<[32, 16], f32>
  %wt = graph.permute %w perm = [1, 0] : !graph.tensor<[32, 16], f32> -> !graph.tensor<[16, 32], f32>
  %y = graph.matmul %x, %wt : (!graph.tensor<[seq, 16], f32>, !graph.tensor<[16, 32], f32>) -> !graph.tensor<[seq, 32], f32>
  graph.return "y" = %y : !graph.tensor<[seq, 32], f32>
}
// CHECK-LABEL: loop.kernel @matmul(
// CHECK-SAME:    footprints [#loop.fp<[seq, 32], [32, 1]>, #loop.fp<[seq, 16], [16, 1]>, #loop.fp<[4, 16, 8], [128, 8, 1]>]
// CHECK:         loop.for "d1o" %{{.*}} = %{{.*}} to %{{.*}} parallel 4 {
// CHECK-NEXT:      loop.for "d0o" %{{.*}} = %{{.*}} to %{{.*}} {
// CHECK:             loop.for "k" %{{.*}} = %{{.*}} to %{{.*}} iter({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>) {
// CHECK:               loop.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] strides [128, 8, 1] : vector<8xf32>
// CHECK:           loop.for "d0_tail" %{{.*}} = %{{.*}} to %{{.*}} {
// CHECK:             loop.for "k_tail"
// CHECK-LABEL: loop.program @projection
// CHECK:         %[[P:.*]] = loop.buffer packed "w" tile 8 : !loop.buf<[4, 16, 8], f32>
// CHECK:         %[[PV:.*]] = loop.view %[[P]] layout <0, [128, 8, 1]>
// CHECK:         loop.launch @matmul(%{{.*}}, %{{.*}}, %[[PV]])
// SCALAR-LABEL: loop.kernel @matmul(
// SCALAR:         loop.for "d0" %{{.*}} = %{{.*}} to %{{.*}} {
// SCALAR-NEXT:      loop.for "d1" %{{.*}} = %{{.*}} to %{{.*}} parallel 1 {
// SCALAR-NOT:     vector
// SCALAR-NOT:     packed
// AVX-512's tile is 64 columns (4 vectors of 16): 32 columns are no whole tile,
// so both packing candidates are refused and the pool alone is used.
// AVX512-LABEL: loop.kernel @matmul(
// AVX512:         loop.for "d1" %{{.*}} = %{{.*}} to %{{.*}} parallel 1 {
// AVX512-NOT:     vector
// AVX512-LABEL: loop.program @projection
// AVX512-NOT:     packed

// -----

// A matmul whose right operand is an input, not a weight: both candidates
// that pack it are refused (only weights are packed, once, when the runtime
// binds them); the last candidate, the columns on the pool, applies.
graph.func @scores {
  %x = graph.input "x" : !graph.tensor<[seq, 16], f32>
  %k = graph.input "k" : !graph.tensor<[32, 16], f32>
  %kt = graph.permute %k perm = [1, 0] : !graph.tensor<[32, 16], f32> -> !graph.tensor<[16, 32], f32>
  %y = graph.matmul %x, %kt : (!graph.tensor<[seq, 16], f32>, !graph.tensor<[16, 32], f32>) -> !graph.tensor<[seq, 32], f32>
  graph.return "y" = %y : !graph.tensor<[seq, 32], f32>
}
// CHECK-LABEL: loop.kernel @matmul(
// CHECK-SAME:    footprints [#loop.fp<[seq, 32], [32, 1]>, #loop.fp<[seq, 16], [16, 1]>, #loop.fp<[16, 32], [1, 16]>]
// CHECK:         loop.for "d0" %{{.*}} = %{{.*}} to %{{.*}} {
// CHECK-NEXT:      loop.for "d1" %{{.*}} = %{{.*}} to %{{.*}} parallel 1 {
// CHECK-NOT:     vector
// CHECK-LABEL: loop.program @scores
// CHECK-NOT:     packed

// -----

// A projection with 64 columns on AVX-512 (32 vector registers): the weight
// packed in tiles of 16, one tile of 4 vectors of columns, 6 rows jammed with
// it (24 vector accumulators), the leftover rows peeled.
graph.func @wide {
  %x = graph.input "x" : !graph.tensor<[seq, 16], f32>
  %w = graph.weight "w" : !graph.tensor<[64, 16], f32>
  %wt = graph.permute %w perm = [1, 0] : !graph.tensor<[64, 16], f32> -> !graph.tensor<[16, 64], f32>
  %y = graph.matmul %x, %wt : (!graph.tensor<[seq, 16], f32>, !graph.tensor<[16, 64], f32>) -> !graph.tensor<[seq, 64], f32>
  graph.return "y" = %y : !graph.tensor<[seq, 64], f32>
}
// AVX512-LABEL: loop.program @scores
// AVX512-LABEL: loop.kernel @matmul(
// AVX512-SAME:    footprints [#loop.fp<[seq, 64], [64, 1]>, #loop.fp<[seq, 16], [16, 1]>, #loop.fp<[4, 16, 16], [256, 16, 1]>]
// AVX512:         loop.for "d1o" %{{.*}} = %{{.*}} to %{{.*}} parallel 4 {
// AVX512-NEXT:      loop.for "d0o" %{{.*}} = %{{.*}} to %{{.*}} {
// AVX512:             loop.for "k" %{{.*}} = %{{.*}} to %{{.*}} iter({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
// AVX512:               loop.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] strides [256, 16, 1] : vector<16xf32>
// AVX512:           loop.for "d0_tail" %{{.*}} = %{{.*}} to %{{.*}} {
// AVX512:             loop.for "k_tail" %{{.*}} = %{{.*}} to %{{.*}} iter({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
// AVX512-LABEL: loop.program @wide
// AVX512:         loop.buffer packed "w" tile 16 : !loop.buf<[4, 16, 16], f32>
// AVX2 packs it in tiles of 8 (two tiles of 4 vectors of columns).
// CHECK-LABEL: loop.program @wide
// CHECK:         loop.buffer packed "w" tile 8 : !loop.buf<[8, 16, 8], f32>
