// default-schedule of spec §5 kernel A (a graph.matmul in order "blocks32" of
// an int8 weight, widened where it is read, then scaled per column). k is
// vectorized by 8 on both vector archs (the tree adds the four accumulators
// of 8 lanes first, so 16 lanes would mix them): four vectors per sum. It is
// privatized before it is vectorized (its tail becomes the loop "k_groups",
// which privatize could not jam). K = 72: two blocks of 32, one group of 8.
// The columns are tiles of 8 columns n / 8 apart on the pool (strided, as every
// format's since session 20; the adjacent 16 before); inside a tile, the
// prefill rows are jammed with pairs of columns (AVX2: 2 rows x 2 columns, 16
// accumulators; AVX-512: 3 x 2, 24 of its 32 registers), the pairs outside
// the rows, and the leftover rows (decode: one row) jam all 8 columns: 8
// weight rows streamed from 8 places at once. The int8 weight is read as
// vector<8xi8> and widened in registers (loop.vsitofp), never copied. With 20
// columns (no whole tile of 8) the first candidate is refused and the 2 x 2
// row jam without a decode tile is chosen. Scalar: the lanes
// loop as lowered, columns on the pool.
// RUN: nc-opt %s --split-input-file -p 'fuse,lower-graph-to-loop,default-schedule{arch=avx2}' | filecheck %s
// RUN: nc-opt %s --split-input-file -p 'fuse,lower-graph-to-loop,default-schedule{arch=avx512}' | filecheck %s --check-prefix=AVX512
// RUN: nc-opt %s --split-input-file -p 'fuse,lower-graph-to-loop,default-schedule{arch=scalar}' | filecheck %s --check-prefix=SCALAR

graph.func @kernel_a {
  %x = graph.input "x" : !graph.tensor<[seq, 72], f32>
  %q = graph.weight "q" : !graph.tensor<[32, 72], i8>
  %s = graph.weight "scale" : !graph.tensor<[32], f32>
  %w = graph.cast %q : !graph.tensor<[32, 72], i8> -> !graph.tensor<[32, 72], f32>
  %wt = graph.permute %w perm = [1, 0] : !graph.tensor<[32, 72], f32> -> !graph.tensor<[72, 32], f32>
  %d = graph.matmul %x, %wt order = "blocks32" : (!graph.tensor<[seq, 72], f32>, !graph.tensor<[72, 32], f32>) -> !graph.tensor<[seq, 32], f32>
  %sr = graph.reshape %s : !graph.tensor<[32], f32> -> !graph.tensor<[1, 32], f32>
  %sb = graph.broadcast %sr : !graph.tensor<[1, 32], f32> -> !graph.tensor<[seq, 32], f32>
  %y = graph.mul %d, %sb : !graph.tensor<[seq, 32], f32>
  graph.return "y" = %y : !graph.tensor<[seq, 32], f32>
}
// CHECK-LABEL: loop.kernel @fused_mul(
// CHECK-SAME:    %1: !loop.ptr<i8>
// CHECK:         loop.for "d1o" %{{.*}} parallel 2 {
// CHECK-NEXT:      loop.for "d1q"
// CHECK-NEXT:        loop.for "d0o"
// CHECK:               = loop.for "k" %[[K:[0-9a-z_]+]] = %{{.*}} step 32 iter({{([^,]*, ){15}[^,]*}}) -> ({{(vector<8xf32>, ){15}vector<8xf32>}}) {
// CHECK:                 loop.load %1[%{{.*}}, %[[K]]] strides [72, 1] : vector<8xi8>
// CHECK-NEXT:            loop.vsitofp %{{.*}} : vector<8xi8> -> vector<8xf32>
// CHECK:               = loop.for "k_groups" %{{.*}} step 8 iter({{([^,]*, ){3}[^,]*}}) -> ({{(vector<8xf32>, ){3}vector<8xf32>}}) {
// CHECK-COUNT-4:       loop.lanesum %{{.*}} tree [2, 0, 1] : vector<8xf32> -> f32
// CHECK-NOT:           loop.lanesum
// CHECK:           loop.for "d0_tail"
// CHECK:             = loop.for "k_tail" %{{.*}} step 32 iter({{([^,]*, ){31}[^,]*}}) -> (
// CHECK:             = loop.for "k_tail_groups" %{{.*}} step 8 iter({{([^,]*, ){7}[^,]*}}) -> (
// CHECK-COUNT-8:     loop.lanesum %{{.*}} tree [2, 0, 1] : vector<8xf32> -> f32
// CHECK-NOT:     lanes 32
// CHECK-LABEL: loop.program @kernel_a
// CHECK-NOT:     loop.buffer temp
// CHECK-NOT:     loop.buffer packed

// AVX512-LABEL: loop.kernel @fused_mul(
// AVX512:         = loop.for "k" %{{.*}} step 32 iter({{([^,]*, ){23}[^,]*}}) -> ({{(vector<8xf32>, ){23}vector<8xf32>}}) {
// AVX512:         = loop.for "k_groups" %{{.*}} step 8 iter({{([^,]*, ){5}[^,]*}}) -> (
// AVX512-COUNT-6:   loop.lanesum %{{.*}} tree [2, 0, 1] : vector<8xf32> -> f32
// AVX512:         loop.for "d0_tail"
// AVX512:           = loop.for "k_tail" %{{.*}} step 32 iter({{([^,]*, ){31}[^,]*}}) -> (
// AVX512-NOT:     vector<16xf32>

// SCALAR-LABEL: loop.kernel @fused_mul(
// SCALAR:         loop.for "d1" %{{.*}} parallel 1 {
// SCALAR-NEXT:      arith.constant 0.000000e+00 : f32
// SCALAR-NEXT:      loop.for "k" %{{.*}} lanes 32 tail 8 tree [3, 4, 2, 0, 1] iter(
// SCALAR-NOT:     vector

// -----

graph.func @kernel_a_20 {
  %x = graph.input "x" : !graph.tensor<[seq, 72], f32>
  %q = graph.weight "q" : !graph.tensor<[20, 72], i8>
  %s = graph.weight "scale" : !graph.tensor<[20], f32>
  %w = graph.cast %q : !graph.tensor<[20, 72], i8> -> !graph.tensor<[20, 72], f32>
  %wt = graph.permute %w perm = [1, 0] : !graph.tensor<[20, 72], f32> -> !graph.tensor<[72, 20], f32>
  %d = graph.matmul %x, %wt order = "blocks32" : (!graph.tensor<[seq, 72], f32>, !graph.tensor<[72, 20], f32>) -> !graph.tensor<[seq, 20], f32>
  %sr = graph.reshape %s : !graph.tensor<[20], f32> -> !graph.tensor<[1, 20], f32>
  %sb = graph.broadcast %sr : !graph.tensor<[1, 20], f32> -> !graph.tensor<[seq, 20], f32>
  %y = graph.mul %d, %sb : !graph.tensor<[seq, 20], f32>
  graph.return "y" = %y : !graph.tensor<[seq, 20], f32>
}
// CHECK-LABEL: loop.kernel @fused_mul(
// CHECK:         loop.for "d1o" %{{.*}} parallel 8 {
// CHECK-NEXT:      loop.for "d0o"
// CHECK:             = loop.for "k" %{{.*}} step 32 iter({{([^,]*, ){15}[^,]*}}) -> (
// CHECK:           loop.for "d0_tail"
// CHECK:             = loop.for "k_tail" %{{.*}} step 32 iter({{([^,]*, ){7}[^,]*}}) -> (
// CHECK-NOT:     loop.for "d1mo"
// CHECK-LABEL: loop.program @kernel_a_20
