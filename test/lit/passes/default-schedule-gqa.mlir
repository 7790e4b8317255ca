// default-schedule of attention's scores and context with grouped query heads
// (GQA: 4 query heads, 2 KV heads; head h reads KV head h / 2). The scores
// get the group's tile: the heads split by 2, the group moved innermost and
// jammed into "k" (vectorized by 16), so one load of a key serves both query
// heads of its KV head; the KV heads "d0o" on the pool. The context (head
// dim 32) jams its two vectors of the head dim and then the group's two
// heads into its sum over the positions (2 x 2 x 16 explicit partials: the
// sum's 16 lanes per vector), splits that sum into blocks of 16 groups of 16
// positions ("kb", carrying the 64 partials) and distributes the block's loop
// "ki" by partial: "ki_g0" .. "ki_g15", each carrying its partial's 4
// vectors, loading a row's two vectors of values once for both heads and a
// position's weight once per head; the KV heads on the pool.
// Scalar: the heads on the pool only.
// RUN: nc-opt %s -p 'default-schedule{arch=avx512}' | filecheck %s
// RUN: nc-opt %s -p 'default-schedule{arch=scalar}' | filecheck %s --check-prefix=SCALAR

builtin.module {
  loop.kernel @scores(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms ["n", "seq"] access ["w", "r", "r"] footprints [#loop.fp<[4, seq, n], [n*seq, n, 1]>, #loop.fp<[2, 2, n, 16], [16*n, 0, 16, 1]>, #loop.fp<[4, seq, 16], [16*seq, 16, 1]>] {
    %n = loop.sym "n"
    %seq = loop.sym "seq"
    %c0 = arith.constant 0 : index
    %c2 = arith.constant 2 : index
    %c4 = arith.constant 4 : index
    %c16 = arith.constant 16 : index
    loop.for "d0" %h = %c0 to %c4 {
      loop.for "d1" %i = %c0 to %seq {
        loop.for "d2" %j = %c0 to %n {
          %z = arith.constant 0.0 : f32
          %s = loop.for "k" %k = %c0 to %c16 lanes 16 iter(%acc = %z) -> (f32) {
            %q = loop.load %2[%h, %i, %k] strides [16*seq, 16, 1] : f32
            %g = arith.divsi %h, %c2 : index
            %r = arith.remsi %h, %c2 : index
            %key = loop.load %1[%g, %r, %j, %k] strides [16*n, 0, 16, 1] : f32
            %t = math.fma %q, %key, %acc : f32
            loop.yield %t : f32
          }
          loop.store %s, %0[%h, %i, %j] strides [n*seq, n, 1] : f32
        }
      }
    }
  }
  loop.kernel @context(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms ["n", "seq"] access ["w", "r", "r"] footprints [#loop.fp<[4, seq, 32], [32*seq, 32, 1]>, #loop.fp<[2, 2, n, 32], [32*n, 0, 32, 1]>, #loop.fp<[4, seq, n], [n*seq, n, 1]>] {
    %n = loop.sym "n"
    %seq = loop.sym "seq"
    %c0 = arith.constant 0 : index
    %c2 = arith.constant 2 : index
    %c4 = arith.constant 4 : index
    %c32 = arith.constant 32 : index
    loop.for "d0" %h = %c0 to %c4 {
      loop.for "d1" %i = %c0 to %seq {
        loop.for "d2" %d = %c0 to %c32 {
          %z = arith.constant 0.0 : f32
          %s = loop.for "k" %k = %c0 to %n lanes 16 iter(%acc = %z) -> (f32) {
            %p = loop.load %2[%h, %i, %k] strides [n*seq, n, 1] : f32
            %g = arith.divsi %h, %c2 : index
            %r = arith.remsi %h, %c2 : index
            %v = loop.load %1[%g, %r, %k, %d] strides [32*n, 0, 32, 1] : f32
            %t = math.fma %p, %v, %acc : f32
            loop.yield %t : f32
          }
          loop.store %s, %0[%h, %i, %d] strides [32*seq, 32, 1] : f32
        }
      }
    }
  }
}
// CHECK-LABEL: loop.kernel @scores
// CHECK:         loop.for "d0o" %[[G:[^ ]+]] = %{{.*}} to %{{.*}} parallel 1 {
// CHECK-NEXT:      loop.for "d1"
// CHECK-NEXT:        loop.for "d2" %[[J:[^ ]+]] =
// CHECK-NOT:           loop.for "d0i"
// CHECK:               loop.for "k" %[[K:[^ ]+]] = {{.*}} iter({{[^,]*}}, {{[^,]*}}) -> (vector<16xf32>, vector<16xf32>) {
// CHECK-NEXT:            loop.load %2[{{.*}}, %[[K]]] strides [16*seq, 16, 1] : vector<16xf32>
// CHECK-NEXT:            %[[AHEAD:[^ ]+]] = arith.constant 512 : index
// CHECK-NEXT:            %[[ROW:[^ ]+]] = arith.addi %[[J]], %[[AHEAD]] : index
// CHECK-NEXT:            loop.prefetch %1[%[[G]], {{.*}}, %[[ROW]], %[[K]]] strides [16*n, 0, 16, 1] : f32 locality 2
// CHECK-NEXT:            loop.load %1[%[[G]], {{.*}}, %[[J]], %[[K]]] strides [16*n, 0, 16, 1] : vector<16xf32>
// CHECK-NEXT:            math.fma
// CHECK-NEXT:            loop.load %2[{{.*}}, %[[K]]] strides [16*seq, 16, 1] : vector<16xf32>
// CHECK-NEXT:            math.fma
// CHECK-NEXT:            loop.yield
// CHECK-LABEL: loop.kernel @context
// CHECK:         loop.for "d0o" %[[G2:[^ ]+]] = %{{.*}} to %{{.*}} parallel 1 {
// CHECK-NEXT:      loop.for "d1"
// CHECK-NOT:         loop.for "d0i"
// CHECK:             loop.for "kb" {{.*}} -> ({{(vector<16xf32>, ){62}vector<16xf32>, }}vector<16xf32>) {
// CHECK-NOT:           loop.load
// CHECK:               loop.for "ki_g0" {{.*}} step 16 iter({{[^,]*, [^,]*, [^,]*, [^,]*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
// CHECK-NOT:             loop.for
// CHECK-COUNT-2:         loop.load %1[%[[G2]], {{.*}}] strides [32*n, 0, 32, 1] : vector<16xf32>
// CHECK-NOT:             loop.load %1
// CHECK:                 loop.yield
// CHECK:               loop.for "ki_g1"
// CHECK-COUNT-2:         loop.load %2[{{.*}}] strides [n*seq, n, 1] : f32
// CHECK:               loop.for "ki_g15"
// CHECK:               loop.yield
// CHECK:             loop.if
// SCALAR-LABEL: loop.kernel @scores
// SCALAR:         loop.for "d0" {{.*}} parallel 1 {
// SCALAR-LABEL: loop.kernel @context
// SCALAR:         loop.for "d0" {{.*}} parallel 1 {
