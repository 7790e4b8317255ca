// The C target: one const local per SSA value, exact hex-float literals,
// restrict pointers, symbols as int64_t parameters, kernel-name prefixes.
// RUN: nc-opt %s -t c | filecheck %s
// RUN: nc-opt %s -t c > %t.c && gcc -std=c11 -O3 -march=native -ffp-contract=off -fwrapv -fno-math-errno -Wall -Wextra -Werror -fsyntax-only %t.c
// Same module, same C, byte for byte:
// RUN: nc-opt %s -t c > %t.1.c && nc-opt %s -t c > %t.2.c && cmp %t.1.c %t.2.c

builtin.module {
  // -(a + b): the negation applies to the sum, never to a alone (a sign-bit
  // flip, which gcc cannot fold into a neighbouring add or mul)
  loop.kernel @neg_sum(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms ["seq"] access ["w", "r", "r"] footprints [#loop.fp<[seq], [1]>, #loop.fp<[seq], [1]>, #loop.fp<[seq], [1]>] {
    %n = loop.sym "seq"
    %c0 = arith.constant 0 : index
    loop.for "d0" %i = %c0 to %n {
      %a = loop.load %1[%i] strides [1] : f32
      %b = loop.load %2[%i] strides [1] : f32
      %s = arith.addf %a, %b : f32
      %m = arith.negf %s : f32
      %k = arith.constant -0.1 : f32
      %r = arith.mulf %m, %k : f32
      loop.store %r, %0[%i] strides [1] : f32
    }
  }
  loop.program @p syms ["seq"] {
    %x = loop.buffer input "x" : !loop.buf<[seq], f32>
    %vx = loop.view %x layout <0, [1]> : !loop.buf<[seq], f32> -> !loop.view<[seq], f32>
    %o = loop.buffer output "o" : !loop.buf<[seq], f32>
    %vo = loop.view %o layout <0, [1]> : !loop.buf<[seq], f32> -> !loop.view<[seq], f32>
    loop.launch @neg_sum(%vo, %vx, %vx) : !loop.view<[seq], f32>, !loop.view<[seq], f32>, !loop.view<[seq], f32>
    loop.output "o" = %o : !loop.buf<[seq], f32>
  }
}

// CHECK:      static __attribute__((noinline)) int32_t nck_neg_sum(float *restrict p0, const float *restrict p1, const float *restrict p2, const int64_t seq) {
// CHECK-NEXT:   const int64_t v0 = seq;
// CHECK-NEXT:   const int64_t v1 = INT64_C(0);
// CHECK-NEXT:   for (int64_t i2 = v1; i2 < v0; ++i2) {  /* d0 */
// CHECK-NEXT:     const float v3 = p1[i2];
// CHECK-NEXT:     const float v4 = p2[i2];
// CHECK-NEXT:     const float v5 = v3 + v4;
// CHECK-NEXT:     const float v6 = nc_negf(v5);
// CHECK-NEXT:     const float v7 = (-0x1.99999a0000000p-4f);
// CHECK-NEXT:     const float v8 = v6 * v7;
// CHECK-NEXT:     p0[i2] = v8;
// CHECK-NEXT:   }
// CHECK-NEXT:   return 0;
// CHECK-NEXT: }
// CHECK:      int32_t nc_run_p(const int64_t *restrict syms, void *const *restrict io,
// CHECK:        const int64_t seq = syms[0];
// CHECK:        float *const b0 = (float *)io[0];  /* input x */
// CHECK:        float *const b1 = (float *)io[1];  /* output o */
// CHECK:        if ((nc_rc_ = nck_neg_sum(b1, b0, b0, seq)) != 0) return 0 * 256 + nc_rc_;
