// apply-schedule refuses to pack an argument that a launch passes from an
// input buffer: w is an input here (it changes every call), and only weights
// are packed, once, when the runtime binds them.
// RUN: not nc-opt %s -p apply-schedule 2>&1 | filecheck %s

builtin.module {
  loop.kernel @fused_matmul(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms ["seq"] access ["w", "r", "r"] footprints [#loop.fp<[seq, 24], [24, 1]>, #loop.fp<[16, 24], [1, 16]>, #loop.fp<[seq, 16], [16, 1]>] {
    %3 = loop.sym "seq"
    %4 = arith.constant 24 : index
    %5 = arith.constant 16 : index
    %6 = arith.constant 0 : index
    loop.for "d0" %7 = %6 to %3 {
      loop.for "d1" %8 = %6 to %4 {
        %9 = arith.constant 0.000000e+00 : f32
        %10 = loop.for "k" %11 = %6 to %5 iter(%12 = %9) -> (f32) {
          %13 = loop.load %2[%7, %11] strides [16, 1] : f32
          %14 = loop.load %1[%11, %8] strides [1, 16] : f32
          %15 = arith.mulf %13, %14 : f32
          %16 = arith.addf %12, %15 : f32
          loop.yield %16 : f32
        }
        loop.store %10, %0[%7, %8] strides [24, 1] : f32
      }
    }
  }
  loop.program @mm syms ["seq"] {
    %0 = loop.buffer input "x" : !loop.buf<[seq, 16], f32>
    %x = loop.view %0 layout <0, [16, 1]> : !loop.buf<[seq, 16], f32> -> !loop.view<[seq, 16], f32>
    %1 = loop.buffer input "w" : !loop.buf<[24, 16], f32>
    %w = loop.view %1 layout <0, [16, 1]> : !loop.buf<[24, 16], f32> -> !loop.view<[24, 16], f32>
    %2 = loop.view %1 layout <0, [1, 16]> : !loop.buf<[24, 16], f32> -> !loop.view<[16, 24], f32>
    %3 = loop.buffer output "y" : !loop.buf<[seq, 24], f32>
    %4 = loop.view %3 layout <0, [24, 1]> : !loop.buf<[seq, 24], f32> -> !loop.view<[seq, 24], f32>
    loop.launch @fused_matmul(%4, %2, %x) : !loop.view<[seq, 24], f32>, !loop.view<[16, 24], f32>, !loop.view<[seq, 16], f32>
    loop.output "y" = %3 : !loop.buf<[seq, 24], f32>
  }
  sched.schedule @fused_matmul {
    sched.pack arg 1 tile 8
  }
}
// CHECK: apply-schedule: pack @fused_matmul arg 1: launch 1 of 1 passes a view of an input buffer
