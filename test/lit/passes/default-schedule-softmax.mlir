// default-schedule of a softmax row kernel whose rows have a symbolic length
// (attention's scores: past + seq keys). Its max (loop "m") is vectorized
// with its exact fallback: lanes of partial maxima, folded by halves down to 4
// lanes and then in lane order, the tail after them, and where that is NaN or
// zero the sequential loop again ("m_seq": which NaN or zero wins is the
// order's). Its sum's lanes loop "k"
// (16 lanes, a symbolic trip count) runs its whole groups of 16 as vectors
// (two of 8 on AVX2, one of 16 on AVX-512), then its lanes as scalars, the
// 15 iterations that may follow each adding to its lane under a loop.if, and
// the halving tree (the lanes loop's order); the loop "e" that stores the
// terms exp(x - max) first is vectorized, as the row's store loop "d1" is:
// exp runs as nc_expf8 / nc_expf16 (the model's exp, the scalar form's bits).
// The rows (a constant 4 here, the heads) run on the pool. Scalar: the pool
// only.
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
// CHECK:          %[[V:[^ ]+]] = loop.for "m" {{.*}} step 8 iter({{.*}}) -> (vector<8xf32>) {
// CHECK:            arith.maximumf {{.*}} : vector<8xf32>
// CHECK:          %[[LO:[^ ]+]] = loop.half %[[V]][0] : vector<8xf32> -> vector<4xf32>
// CHECK-NEXT:     %[[HI:[^ ]+]] = loop.half %[[V]][1] : vector<8xf32> -> vector<4xf32>
// CHECK-NEXT:     %[[H:[^ ]+]] = arith.maximumf %[[LO]], %[[HI]] : vector<4xf32>
// CHECK-COUNT-4:  loop.extract %[[H]]
// CHECK:          %[[R:[^ ]+]] = loop.for "m_tail" {{.*}} -> (f32) {
// CHECK:          %[[NAN:[^ ]+]] = arith.cmpf une, %[[R]], %[[R]] : f32
// CHECK-NEXT:     %[[ZERO:[^ ]+]] = arith.cmpf oeq, %[[R]], %{{.*}} : f32
// CHECK-NEXT:     %[[TRUE:[^ ]+]] = arith.constant true
// CHECK-NEXT:     %[[SLOW:[^ ]+]] = arith.select %[[NAN]], %[[TRUE]], %[[ZERO]] : i1
// CHECK-NEXT:     %{{.*}} = loop.if %[[SLOW]] -> (f32) {
// CHECK-NEXT:       %[[S:[^ ]+]] = loop.for "m_seq" {{.*}} -> (f32) {
// CHECK:              arith.maximumf {{.*}} : f32
// CHECK:            loop.yield %[[S]] : f32
// CHECK-NEXT:     } else {
// CHECK-NEXT:       loop.yield %[[R]] : f32
// CHECK-NEXT:     }
// CHECK:          loop.for "e" {{.*}} step 8 {
// CHECK:            math.exp {{.*}} : vector<8xf32>
// CHECK:          loop.for "e_tail"
// CHECK:            math.exp {{.*}} : f32
// CHECK:          %[[K0:[^ ]+]], %[[K1:[^ ]+]] = loop.for "k" {{.*}} step 16 iter({{.*}}) -> (vector<8xf32>, vector<8xf32>) {
// CHECK-COUNT-2:    arith.addf {{.*}} : vector<8xf32>
// CHECK:          loop.yield
// CHECK-COUNT-8:  loop.extract %[[K0]]
// CHECK-COUNT-8:  loop.extract %[[K1]]
// CHECK-COUNT-15: loop.if
// CHECK-COUNT-15: arith.addf {{.*}} : f32
// CHECK:          loop.for "d1" {{.*}} step 8 {
// AVX512:       loop.for "d0" {{.*}} parallel 1 {
// AVX512:         loop.for "m" {{.*}} step 16 iter({{.*}}) -> (vector<16xf32>) {
// AVX512:         loop.for "m_seq"
// AVX512:         loop.for "e" {{.*}} step 16 {
// AVX512:           math.exp {{.*}} : vector<16xf32>
// AVX512:         loop.for "k" {{.*}} step 16 iter({{.*}}) -> (vector<16xf32>) {
// AVX512:         loop.for "d1" {{.*}} step 16 {
// SCALAR:       loop.for "d0" {{.*}} parallel 1 {
// SCALAR:         loop.for "m" {{.*}} iter({{.*}}) -> (f32) {
// SCALAR-NOT:     loop.for "m_seq"
// SCALAR:         loop.for "e" {{.*}} {
// SCALAR-NOT:     vector
// SCALAR:         loop.for "k" {{.*}} lanes 16
