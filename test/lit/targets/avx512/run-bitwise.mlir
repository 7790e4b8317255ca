// AVX-512 code run on this CPU: one kernel vectorized by 16 (@k_vec, program
// @vec) and scalar (@k_ref, program @ref) give the same bits for every op the
// target prints for 16 lanes (splat, mul, add, div, sqrt, the ole compare and
// its blend, the NaN-propagating max, negation, exp), on NaN payloads,
// infinities, signed zeros and subnormals, main loop and scalar tail.
// RUN: nc-opt %s -p apply-schedule -t c > %t.c
// RUN: gcc -std=c11 -O3 -march=native -ffp-contract=off -fwrapv -fno-math-errno %t.c %S/Inputs/bitwise_driver.c -lm -o %t.exe
// RUN: %t.exe | filecheck %s
// RUN: filecheck %s --check-prefix=C < %t.c

// CHECK: bitwise equal: 200 floats
// C-LABEL: int32_t nck_k_vec(
// C:       _mm512_cmp_ps_mask
// C-LABEL: int32_t nck_k_ref(
// C-NOT:   _mm512
// C-LABEL: int32_t nc_run_vec(

builtin.module {
  loop.kernel @k_vec(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[5, 40], [40, 1]>, #loop.fp<[40], [1]>, #loop.fp<[40], [1]>] {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c4 = arith.constant 4 : index
    %c40 = arith.constant 40 : index
    loop.for "d0" %i = %c0 to %c40 {
      %a = loop.load %1[%i] strides [1] : f32
      %b = loop.load %2[%i] strides [1] : f32
      %k = arith.constant 0.5 : f32
      %p = arith.mulf %a, %k : f32
      %s = arith.addf %p, %b : f32
      loop.store %s, %0[%c0, %i] strides [40, 1] : f32
      %m = arith.cmpf ole, %a, %b : f32
      %sel = arith.select %m, %a, %b : f32
      loop.store %sel, %0[%c1, %i] strides [40, 1] : f32
      %mx = arith.maximumf %a, %b : f32
      %n = arith.negf %mx : f32
      loop.store %n, %0[%c2, %i] strides [40, 1] : f32
      %e = math.exp %a : f32
      loop.store %e, %0[%c3, %i] strides [40, 1] : f32
      %d = arith.divf %a, %b : f32
      %r = math.sqrt %d : f32
      loop.store %r, %0[%c4, %i] strides [40, 1] : f32
    }
  }
  sched.schedule @k_vec {
    sched.vectorize "d0" width 16
  }
  loop.kernel @k_ref(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[5, 40], [40, 1]>, #loop.fp<[40], [1]>, #loop.fp<[40], [1]>] {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c4 = arith.constant 4 : index
    %c40 = arith.constant 40 : index
    loop.for "d0" %i = %c0 to %c40 {
      %a = loop.load %1[%i] strides [1] : f32
      %b = loop.load %2[%i] strides [1] : f32
      %k = arith.constant 0.5 : f32
      %p = arith.mulf %a, %k : f32
      %s = arith.addf %p, %b : f32
      loop.store %s, %0[%c0, %i] strides [40, 1] : f32
      %m = arith.cmpf ole, %a, %b : f32
      %sel = arith.select %m, %a, %b : f32
      loop.store %sel, %0[%c1, %i] strides [40, 1] : f32
      %mx = arith.maximumf %a, %b : f32
      %n = arith.negf %mx : f32
      loop.store %n, %0[%c2, %i] strides [40, 1] : f32
      %e = math.exp %a : f32
      loop.store %e, %0[%c3, %i] strides [40, 1] : f32
      %d = arith.divf %a, %b : f32
      %r = math.sqrt %d : f32
      loop.store %r, %0[%c4, %i] strides [40, 1] : f32
    }
  }
  loop.program @vec syms [] {
    %x = loop.buffer input "x" : !loop.buf<[40], f32>
    %vx = loop.view %x layout <0, [1]> : !loop.buf<[40], f32> -> !loop.view<[40], f32>
    %y = loop.buffer input "y" : !loop.buf<[40], f32>
    %vy = loop.view %y layout <0, [1]> : !loop.buf<[40], f32> -> !loop.view<[40], f32>
    %o = loop.buffer output "o" : !loop.buf<[5, 40], f32>
    %vo = loop.view %o layout <0, [40, 1]> : !loop.buf<[5, 40], f32> -> !loop.view<[5, 40], f32>
    loop.launch @k_vec(%vo, %vx, %vy) : !loop.view<[5, 40], f32>, !loop.view<[40], f32>, !loop.view<[40], f32>
    loop.output "o" = %o : !loop.buf<[5, 40], f32>
  }
  loop.program @ref syms [] {
    %x = loop.buffer input "x" : !loop.buf<[40], f32>
    %vx = loop.view %x layout <0, [1]> : !loop.buf<[40], f32> -> !loop.view<[40], f32>
    %y = loop.buffer input "y" : !loop.buf<[40], f32>
    %vy = loop.view %y layout <0, [1]> : !loop.buf<[40], f32> -> !loop.view<[40], f32>
    %o = loop.buffer output "o" : !loop.buf<[5, 40], f32>
    %vo = loop.view %o layout <0, [40, 1]> : !loop.buf<[5, 40], f32> -> !loop.view<[5, 40], f32>
    loop.launch @k_ref(%vo, %vx, %vy) : !loop.view<[5, 40], f32>, !loop.view<[40], f32>, !loop.view<[40], f32>
    loop.output "o" = %o : !loop.buf<[5, 40], f32>
  }
}
