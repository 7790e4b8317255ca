// The C target prints spec §5 kernel B's integer core (graph.matmul_i8, K = 34:
// one whole block and a tail of 2 columns), scalar: the lanes loop (32 lanes,
// tail 8, tree [3, 4, 2, 0, 1]) over the lane terms, each term's exact integer
// dot product of 4 columns in int32_t (loop.dot4: nc_dot4 of two nc_i8x4 loads,
// the prelude's portable C, no intrinsics), converted to float and
// fused-multiply-added with the block's scale (fmaf); the tree; then the tail's
// int32_t sum (each int8_t load widened by a cast, the weight plus 128) converted,
// multiplied by the last block's scale and then added (no fmaf). graph.round
// prints as roundf (halves away from zero, the signed zero kept), the cast to
// i8 as (int8_t). The C compiles warning-free.
// RUN: nc-opt %s -p fuse,lower-graph-to-loop -t c | filecheck %s
// RUN: nc-opt %s -p fuse,lower-graph-to-loop -t c > %t.c && gcc -std=c11 -O3 -ffp-contract=off -fwrapv -fno-math-errno -Wall -Wextra -Werror -c %t.c -o %t.o

graph.func @core {
  %xq = graph.input "xq" : !graph.tensor<[seq, 34], i8>
  %xs = graph.input "xs" : !graph.tensor<[seq, 2], f32>
  %q = graph.weight "q" : !graph.tensor<[8, 34], i8>
  %qt = graph.permute %q perm = [1, 0] : !graph.tensor<[8, 34], i8> -> !graph.tensor<[34, 8], i8>
  %t = graph.matmul_i8 %xq, %xs, %qt : (!graph.tensor<[seq, 34], i8>, !graph.tensor<[seq, 2], f32>, !graph.tensor<[34, 8], i8>) -> !graph.tensor<[seq, 8], f32>
  %x = graph.input "x" : !graph.tensor<[seq, 28], f32>
  %r = graph.round %x : !graph.tensor<[seq, 28], f32>
  %c = graph.cast %r : !graph.tensor<[seq, 28], f32> -> !graph.tensor<[seq, 28], i8>
  graph.return "t" = %t, "c" = %c : !graph.tensor<[seq, 8], f32>, !graph.tensor<[seq, 28], i8>
}
// CHECK-NOT:   immintrin
// CHECK:       static inline int32_t nc_dot4(nc_i8x4 xq, nc_i8x4 w) {
// CHECK-NEXT:    int32_t p = 0;
// CHECK-NEXT:    for (int j = 0; j < 4; ++j) p += ((int32_t)w.b[j] + 128) * (int32_t)xq.b[j];
// CHECK-LABEL: static __attribute__((noinline)) int32_t nck_fused_matmul_i8(float *restrict p0, const int8_t *restrict p1, const int8_t *restrict p2, const float *restrict p3, const int64_t seq) {
// CHECK:         float acc[[A:[0-9]+]][32];
// CHECK:         for (int64_t kb{{[0-9]+}} = {{.*}}; kb{{[0-9]+}} += 32) {  /* k (lanes 32) */
// CHECK:           const int64_t [[COL:v[0-9]+]] = i{{[0-9]+}} * v{{[0-9]+}};
// CHECK-NEXT:      const nc_i8x4 [[XQ:v[0-9]+]] = nc_load_i8x4(&p2[i{{[0-9]+}} * INT64_C(34) + [[COL]]]);
// CHECK-NEXT:      const nc_i8x4 [[W:v[0-9]+]] = nc_load_i8x4(&p1[[[COL]] + i{{[0-9]+}} * INT64_C(34)]);
// CHECK-NEXT:      const int32_t [[P3:v[0-9]+]] = nc_dot4([[XQ]], [[W]]);
// CHECK-NEXT:      const int64_t [[BLK:v[0-9]+]] = i{{[0-9]+}} / v{{[0-9]+}};
// CHECK-NEXT:      const float [[PF:v[0-9]+]] = (float)([[P3]]);
// CHECK-NEXT:      const float [[XS:v[0-9]+]] = p3[i{{[0-9]+}} * INT64_C(2) + [[BLK]]];
// CHECK-NEXT:      const float [[F:v[0-9]+]] = fmaf([[PF]], [[XS]], acc[[A]][kl{{[0-9]+}}]);
// CHECK:         /* k (lanes 32, tail 8) */
// CHECK:         /* the tree [3, 4, 2, 0, 1]: lane j + lane j | bit, for the lanes still live */
// CHECK:         const float [[TF:v[0-9]+]] = (float)(v{{[0-9]+}});
// CHECK-NEXT:    const float [[TS:v[0-9]+]] = p3[i{{[0-9]+}} * INT64_C(2) + v{{[0-9]+}}];
// CHECK-NEXT:    const float [[TP:v[0-9]+]] = [[TF]] * [[TS]];
// CHECK-NEXT:    const float [[OUT:v[0-9]+]] = acc[[A]]_sum + [[TP]];
// CHECK-NEXT:    p0[i{{[0-9]+}} * INT64_C(8) + i{{[0-9]+}}] = [[OUT]];
// CHECK-LABEL: static __attribute__((noinline)) int32_t nck_fused_cast(int8_t *restrict p0, const float *restrict p1, const int64_t seq) {
// CHECK:         const float [[X:v[0-9]+]] = p1[{{.*}}];
// CHECK-NEXT:    const float [[R:v[0-9]+]] = roundf([[X]]);
// CHECK-NEXT:    const int8_t [[C:v[0-9]+]] = (int8_t)([[R]]);
