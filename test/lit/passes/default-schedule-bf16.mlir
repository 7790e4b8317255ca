// default-schedule of a projection whose weight is bf16 (read as 2 bytes,
// widened in registers). The columns are tiles of 8 columns n / 8 apart
// (here n = 128: tile t holds columns t, t + 16, ..., t + 112) on the pool:
// "d1" splits by 64 into "d1q" (the tile's groups of 4 columns) and "d1r",
// which splits by 16 into "d1i" (a group's columns) and "d1o" (the tile),
// moved outermost. Inside a tile the prefill rows are jammed with a group as
// in the plain candidate (AVX-512: 6 rows x 4 columns, 24 accumulators; on
// AVX2 2 x 4, two ymm each), the groups outside the rows; the leftover rows
// (decode: one row) jam all 8 columns: 8 weight rows in 8 places streamed
// at once. An f32 weight gets the same tiles (since session 20: its decode
// read adjacent rows at ~16 GB/s on a Zen 4); 36 columns (no whole tiles of
// 8) the plain candidate: tiles of 4 adjacent columns, 4 jammed at the
// leftover rows.
// test/py/schedule/test_schedule_defaults_bf16.py evaluates the rows a
// decode tile reads.
// RUN: nc-opt %s --split-input-file -p 'fuse,lower-graph-to-loop,default-schedule{arch=avx512}' | filecheck %s
// RUN: nc-opt %s --split-input-file -p 'fuse,lower-graph-to-loop,default-schedule{arch=avx2}' | filecheck %s --check-prefix=AVX2

graph.func @projection_bf16 {
  %x = graph.input "x" : !graph.tensor<[seq, 48], f32>
  %w = graph.weight "w" : !graph.tensor<[128, 48], bf16>
  %wf = graph.cast %w : !graph.tensor<[128, 48], bf16> -> !graph.tensor<[128, 48], f32>
  %wt = graph.permute %wf perm = [1, 0] : !graph.tensor<[128, 48], f32> -> !graph.tensor<[48, 128], f32>
  %y = graph.matmul %x, %wt : (!graph.tensor<[seq, 48], f32>, !graph.tensor<[48, 128], f32>) -> !graph.tensor<[seq, 128], f32>
  graph.return "y" = %y : !graph.tensor<[seq, 128], f32>
}
// CHECK-LABEL: loop.kernel @fused_matmul(
// CHECK-SAME:    %1: !loop.ptr<bf16>
// CHECK:         %[[C64:[0-9]+]] = arith.constant 64 : index
// CHECK:         %[[C16:[0-9]+]] = arith.constant 16 : index
// CHECK:         loop.for "d1o" %[[T:[0-9]+]] = %{{[0-9]+}} to %[[C16]] parallel 2 {
// CHECK-NEXT:      loop.for "d1q" %{{.*}} {
// CHECK-NEXT:        loop.for "d0o" %{{.*}} {
// CHECK:               = loop.for "k" %{{.*}} step 16 iter({{([^,]*, ){23}[^,]*}}) -> ({{(vector<16xf32>, ){23}vector<16xf32>}}) {
// CHECK-COUNT-4:         loop.load %1[%{{.*}}, %{{.*}}] strides [48, 1] : vector<16xbf16>
// CHECK:           loop.for "d0_tail"
// column m of the tile: (m / 4) * 64 + (m % 4) * 16 + t
// CHECK-NEXT:        %[[Q:[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        %[[I:[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:        %[[QS:[0-9]+]] = arith.muli %[[Q]], %[[C64]] : index
// CHECK-NEXT:        %[[QB:[0-9]+]] = arith.addi %{{[0-9]+}}, %[[QS]] : index
// CHECK-NEXT:        %[[IS:[0-9]+]] = arith.muli %[[I]], %[[C16]] : index
// CHECK-NEXT:        %[[IB:[0-9]+]] = arith.addi %{{[0-9]+}}, %[[IS]] : index
// CHECK-NEXT:        %[[IT:[0-9]+]] = arith.addi %[[IB]], %[[T]] : index
// CHECK-NEXT:        arith.addi %[[QB]], %[[IT]] : index
// CHECK:             = loop.for "k_tail" %{{.*}} step 16 iter({{([^,]*, ){7}[^,]*}}) -> ({{(vector<16xf32>, ){7}vector<16xf32>}}) {
// CHECK-COUNT-8:       loop.load %1[%{{.*}}, %{{.*}}] strides [48, 1] : vector<16xbf16>
// CHECK-NOT:           loop.load %1
// CHECK:               loop.yield
// CHECK-COUNT-8:     loop.lanesum
// CHECK-LABEL: loop.program @projection_bf16
// CHECK-NOT:     loop.buffer packed

// AVX2-LABEL: loop.kernel @fused_matmul(
// AVX2:         loop.for "d1o" %{{.*}} parallel 2 {
// AVX2-NEXT:      loop.for "d1q"
// AVX2-NEXT:        loop.for "d0o"
// AVX2:               = loop.for "k" %{{.*}} step 16 iter({{([^,]*, ){7}[^,]*}}) -> ({{(vector<8xf32>, ){7}vector<8xf32>}}) {
// AVX2:           loop.for "d0_tail"
// AVX2:             = loop.for "k_tail" %{{.*}} step 16 iter({{([^,]*, ){15}[^,]*}}) -> ({{(vector<8xf32>, ){15}vector<8xf32>}}) {
// AVX2-COUNT-16:      loop.load %1[%{{.*}}, %{{.*}}] strides [48, 1] : vector<8xbf16>

// -----

graph.func @projection_f32 {
  %x = graph.input "x" : !graph.tensor<[seq, 32], f32>
  %w = graph.weight "w" : !graph.tensor<[64, 32], f32>
  %wt = graph.permute %w perm = [1, 0] : !graph.tensor<[64, 32], f32> -> !graph.tensor<[32, 64], f32>
  %y = graph.matmul %x, %wt : (!graph.tensor<[seq, 32], f32>, !graph.tensor<[32, 64], f32>) -> !graph.tensor<[seq, 64], f32>
  graph.return "y" = %y : !graph.tensor<[seq, 64], f32>
}
// CHECK-LABEL: loop.kernel @fused_matmul(
// CHECK-SAME:    %1: !loop.ptr<f32>
// CHECK:         loop.for "d1o" %{{.*}} parallel 2 {
// CHECK-NEXT:      loop.for "d1q" %{{.*}} {
// CHECK-NEXT:        loop.for "d0o"
// CHECK:           loop.for "d0_tail"
// CHECK:             = loop.for "k_tail" %{{.*}} step 16 iter({{([^,]*, ){7}[^,]*}}) -> ({{(vector<16xf32>, ){7}vector<16xf32>}}) {
// CHECK-LABEL: loop.program @projection_f32

// AVX2-LABEL: loop.kernel @fused_matmul(
// AVX2-SAME:    %1: !loop.ptr<f32>
// AVX2:         loop.for "d1o" %{{.*}} parallel 2 {
// AVX2-NEXT:      loop.for "d1q" %{{.*}} {
// AVX2-LABEL: loop.program @projection_f32

// -----

graph.func @projection_bf16_36 {
  %x = graph.input "x" : !graph.tensor<[seq, 32], f32>
  %w = graph.weight "w" : !graph.tensor<[36, 32], bf16>
  %wf = graph.cast %w : !graph.tensor<[36, 32], bf16> -> !graph.tensor<[36, 32], f32>
  %wt = graph.permute %wf perm = [1, 0] : !graph.tensor<[36, 32], f32> -> !graph.tensor<[32, 36], f32>
  %y = graph.matmul %x, %wt : (!graph.tensor<[seq, 32], f32>, !graph.tensor<[32, 36], f32>) -> !graph.tensor<[seq, 36], f32>
  graph.return "y" = %y : !graph.tensor<[seq, 36], f32>
}
// CHECK-LABEL: loop.kernel @fused_matmul(
// CHECK:         loop.for "d1o" %{{.*}} parallel 4 {
// CHECK:             = loop.for "k_tail" %{{.*}} step 16 iter({{([^,]*, ){3}[^,]*}}) -> (
// CHECK-NOT:     "d1q"
// CHECK-LABEL: loop.program @projection_bf16_36
