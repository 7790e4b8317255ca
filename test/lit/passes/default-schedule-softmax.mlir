// default-schedule of a softmax row kernel whose rows have a symbolic length
// (attention's scores: past + seq keys). Its sum's lanes loop "k" cannot be
// vectorized (its trip count is not a known multiple of 16), so it stays as
// lowered; the loop "e" that stores the terms exp(x - max) first is
// vectorized, as the row's store loop "d1" is: exp runs as nc_expf8 /
// nc_expf16 (the model's exp, the scalar form's bits), the sum keeps its
// order. The rows (a constant 4 here, the heads) run on the pool. Scalar: the
// pool only.
// RUN: nc-opt %s -p 'fuse,lower-graph-to-loop,default-schedule{arch=avx2}' | filecheck %s
// RUN: nc-opt %s -p 'fuse,lower-graph-to-loop,default-schedule{arch=avx512}' | filecheck %s --check-prefix=AVX512
// RUN: nc-opt %s -p 'fuse,lower-graph-to-loop,default-schedule{arch=scalar}' | filecheck %s --check-prefix=SCALAR

graph.func @softmax {
  %x = graph.input "x" : !graph.tensor<[4, n], f32>
  %m = graph.reduce_max %x axis = 1 : !graph.tensor<[4, n], f32> -> !graph.tensor<[4, 1], f32>
  %mb = graph.broadcast %m : !graph.tensor<[4, 1], f32> -> !graph.tensor<[4, n], f32>
  %d = graph.sub %x, %mb : !graph.tensor<[4, n], f32>
  %e = graph.exp %d : !graph.tensor<[4, n], f32>
  %s = graph.reduce_sum %e axis = 1 : !graph.tensor<[4, n], f32> -> !graph.tensor<[4, 1], f32>
  %sb = graph.broadcast %s : !graph.tensor<[4, 1], f32> -> !graph.tensor<[4, n], f32>
  %y = graph.div %e, %sb : !graph.tensor<[4, n], f32>
  graph.return "y" = %y : !graph.tensor<[4, n], f32>
}
// CHECK:      loop.kernel @fused_div
// CHECK:        loop.for "d0" {{.*}} parallel 1 {
// CHECK:          loop.for "k"
// CHECK:          loop.for "e" {{.*}} step 8 {
// CHECK:            math.exp {{.*}} : vector<8xf32>
// CHECK:          loop.for "e_tail"
// CHECK:            math.exp {{.*}} : f32
// CHECK:          loop.for "k" {{.*}} lanes 16 iter({{.*}}) -> (f32) {
// CHECK:          loop.for "d1" {{.*}} step 8 {
// AVX512:       loop.for "d0" {{.*}} parallel 1 {
// AVX512:         loop.for "e" {{.*}} step 16 {
// AVX512:           math.exp {{.*}} : vector<16xf32>
// AVX512:         loop.for "k" {{.*}} lanes 16 iter({{.*}}) -> (f32) {
// AVX512:         loop.for "d1" {{.*}} step 16 {
// SCALAR:       loop.for "d0" {{.*}} parallel 1 {
// SCALAR:         loop.for "e" {{.*}} {
// SCALAR-NOT:     vector
// SCALAR:         loop.for "k" {{.*}} lanes 16
