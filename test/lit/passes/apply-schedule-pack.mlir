// apply-schedule with pack: the projection y = x @ w.T + b (K = 16, N = 24)
// reads its weight w ([N, K] row-major) through the transposed view [K, N]
// strides [1, K]. `pack arg 1 tile 8` re-lays it as [N / 8, K, 8]: the
// program gets a `loop.buffer packed "w" tile 8` (filled by the runtime when
// it binds the weights) and the launch passes a view of it instead of the
// transposed view of w; the kernel's footprint for the argument becomes
// [3, 16, 8] strides [128, 8, 1] and its load reads P[n / 8, k, n % 8].
// (The module is the output of lower_to_loop for that graph.)
// RUN: nc-opt %s -p apply-schedule | filecheck %s

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
    sched.pack arg 1 tile 8
  }
}
// CHECK:      loop.kernel @fused_add(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>, %3: !loop.ptr<f32>) syms ["seq"] access ["w", "r", "r", "r"] footprints [#loop.fp<[seq, 24], [24, 1]>, #loop.fp<[3, 16, 8], [128, 8, 1]>, #loop.fp<[seq, 16], [16, 1]>, #loop.fp<[seq, 24], [0, 1]>] {
// CHECK:        loop.for "d1" %[[N:.*]] = %{{.*}} to %{{.*}} {
// CHECK:          loop.for "k" %[[K:.*]] = %{{.*}} to %{{.*}} iter(%{{.*}}) -> (f32) {
// CHECK-NEXT:       %[[X:.*]] = loop.load %2[%{{.*}}, %[[K]]] strides [16, 1] : f32
// CHECK-NEXT:       %[[T:.*]] = arith.constant 8 : index
// CHECK-NEXT:       %[[Q:.*]] = arith.divsi %[[N]], %[[T]] : index
// CHECK-NEXT:       %[[R:.*]] = arith.remsi %[[N]], %[[T]] : index
// CHECK-NEXT:       %[[W:.*]] = loop.load %1[%[[Q]], %[[K]], %[[R]]] strides [128, 8, 1] : f32
// CHECK-NEXT:       %{{.*}} = arith.mulf %[[X]], %[[W]] : f32
// CHECK-NOT:    strides [1, 16]
// CHECK:      loop.program @mm syms ["seq"] {
// CHECK:        %[[WB:.*]] = loop.buffer weight "w" : !loop.buf<[24, 16], f32>
// CHECK-NEXT:   %[[PB:.*]] = loop.buffer packed "w" tile 8 : !loop.buf<[3, 16, 8], f32>
// CHECK-NOT:    layout <0, [1, 16]>
// CHECK:        %[[PV:.*]] = loop.view %[[PB]] layout <0, [128, 8, 1]> : !loop.buf<[3, 16, 8], f32> -> !loop.view<[3, 16, 8], f32>
// CHECK-NEXT:   loop.launch @fused_add(%{{.*}}, %[[PV]], %x, %{{.*}}) : !loop.view<[seq, 24], f32>, !loop.view<[3, 16, 8], f32>, !loop.view<[seq, 16], f32>, !loop.view<[seq, 24], f32>
// CHECK-NOT:  sched.
