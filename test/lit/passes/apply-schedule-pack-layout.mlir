// apply-schedule refuses to pack an argument that is not a transposed weight:
// argument 2 of the projection is the input x, rows [seq, 16] of a symbolic
// length, not a read-only [K, N] matrix of constant shape with strides [1, K].
// RUN: not nc-opt %s -p apply-schedule 2>&1 | filecheck %s

builtin.module {
  loop.kernel @fused_add(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>, %3: !loop.ptr<f32>) syms ["seq"] access ["w", "r", "r", "r"] footprints [#loop.fp<[seq, 24], [24, 1]>, #loop.fp<[16, 24], [1, 16]>, #loop.fp<[seq, 16], [16, 1]>, #loop.fp<[seq, 24], [0, 1]>] {
    %4 = loop.sym "seq"
    %5 = arith.constant 24 : index
    %6 = arith.constant 16 : index
    %7 = arith.constant 0 : index
    loop.for "d0" %8 = %7 to %4 {
      loop.for "d1" %9 = %7 to %5 {
        %10 = arith.constant 0.000000e+00 : f32
        %11 = loop.for "k" %12 = %7 to %6 iter(%13 = %10) -> (f32) {
          %14 = loop.load %2[%8, %12] strides [16, 1] : f32
          %15 = loop.load %1[%12, %9] strides [1, 16] : f32
          %16 = arith.mulf %14, %15 : f32
          %17 = arith.addf %13, %16 : f32
          loop.yield %17 : f32
        }
        %18 = loop.load %3[%8, %9] strides [0, 1] : f32
        %19 = arith.addf %11, %18 : f32
        loop.store %19, %0[%8, %9] strides [24, 1] : f32
      }
    }
  }
  loop.program @mm syms ["seq"] {
    %0 = loop.buffer input "x" : !loop.buf<[seq, 16], f32>
    %x = loop.view %0 layout <0, [16, 1]> : !loop.buf<[seq, 16], f32> -> !loop.view<[seq, 16], f32>
    %1 = loop.buffer weight "w" : !loop.buf<[24, 16], f32>
    %2 = loop.view %1 layout <0, [16, 1]> : !loop.buf<[24, 16], f32> -> !loop.view<[24, 16], f32>
    %3 = loop.buffer weight "b" : !loop.buf<[24], f32>
    %4 = loop.view %3 layout <0, [1]> : !loop.buf<[24], f32> -> !loop.view<[24], f32>
    %5 = loop.view %1 layout <0, [1, 16]> : !loop.buf<[24, 16], f32> -> !loop.view<[16, 24], f32>
    %6 = loop.view %3 layout <0, [0, 1]> : !loop.buf<[24], f32> -> !loop.view<[1, 24], f32>
    %7 = loop.view %3 layout <0, [0, 1]> : !loop.buf<[24], f32> -> !loop.view<[seq, 24], f32>
    %8 = loop.buffer output "y" : !loop.buf<[seq, 24], f32>
    %9 = loop.view %8 layout <0, [24, 1]> : !loop.buf<[seq, 24], f32> -> !loop.view<[seq, 24], f32>
    loop.launch @fused_add(%9, %5, %x, %7) : !loop.view<[seq, 24], f32>, !loop.view<[16, 24], f32>, !loop.view<[seq, 16], f32>, !loop.view<[seq, 24], f32>
    loop.output "y" = %8 : !loop.buf<[seq, 24], f32>
  }
  sched.schedule @fused_add {
    sched.pack arg 2 tile 8
  }
}
// CHECK: apply-schedule: pack @fused_add arg 2: expected a read-only f32 matrix of constant shape, got a read f32 [seq, 16]
