// apply-schedule with vectorize on spec §5 kernel B's quantization of the
// activations (the fused_cast kernel quantize-int8{kernel=b} lowers to): per
// block of 32, xq = clamp(roundf(x / xs), -127, 127) as int8. Vectorized by 16:
// math.round on the f32 lanes (roundf per lane), the clamp's compares and
// selects per lane, the f32 -> i8 arith.fptosi (its one use a store) as
// loop.vfptosi, stored as a vector<16xi8>; the block's scale is uniform along
// the block (stride 0): a scalar load, broadcast. 32 = 2 vectors, no tail.
// RUN: nc-opt %s -p apply-schedule | filecheck %s

builtin.module {
  loop.kernel @fused_cast(%0: !loop.ptr<i8>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms ["seq"] access ["w", "r", "r"] footprints [#loop.fp<[seq, 3, 32], [96, 32, 1]>, #loop.fp<[seq, 3, 32], [96, 32, 1]>, #loop.fp<[seq, 3, 32], [3, 1, 0]>] {
    %3 = loop.sym "seq"
    %4 = arith.constant 3 : index
    %5 = arith.constant 32 : index
    %6 = arith.constant 0 : index
    loop.for "d0" %7 = %6 to %3 {
      loop.for "d1" %8 = %6 to %4 {
        loop.for "d2" %9 = %6 to %5 {
          %10 = arith.constant -1.270000e+02 : f32
          %11 = loop.load %1[%7, %8, %9] strides [96, 32, 1] : f32
          %12 = loop.load %2[%7, %8, %9] strides [3, 1, 0] : f32
          %13 = arith.divf %11, %12 : f32
          %14 = math.round %13 : f32
          %15 = arith.constant 1.270000e+02 : f32
          %16 = arith.cmpf ole, %14, %15 : f32
          %17 = arith.select %16, %14, %15 : f32
          %18 = arith.cmpf ole, %10, %17 : f32
          %19 = arith.select %18, %17, %10 : f32
          %20 = arith.fptosi %19 : f32 to i8
          loop.store %20, %0[%7, %8, %9] strides [96, 32, 1] : i8
        }
      }
    }
  }
  sched.schedule @fused_cast {
    sched.vectorize "d2" width 16
  }
}

// CHECK:      loop.for "d2" %{{.*}} = %{{.*}} to %{{.*}} step 16 {
// CHECK:        %[[X:.*]] = loop.load %1[%{{.*}}, %{{.*}}, %{{.*}}] strides [96, 32, 1] : vector<16xf32>
// CHECK-NEXT:   %[[S:.*]] = loop.load %2[%{{.*}}, %{{.*}}, %{{.*}}] strides [3, 1, 0] : f32
// CHECK-NEXT:   %[[SV:.*]] = loop.splat %[[S]] : f32 -> vector<16xf32>
// CHECK-NEXT:   %[[D:.*]] = arith.divf %[[X]], %[[SV]] : vector<16xf32>
// CHECK-NEXT:   %[[R:.*]] = math.round %[[D]] : vector<16xf32>
// CHECK:        %[[C:.*]] = loop.vselect %{{.*}}, %[[R]], %{{.*}} : vector<16xi1>, vector<16xf32>
// CHECK:        %[[C2:.*]] = loop.vselect %{{.*}}, %[[C]], %{{.*}} : vector<16xi1>, vector<16xf32>
// CHECK-NEXT:   %[[Q:.*]] = loop.vfptosi %[[C2]] : vector<16xf32> -> vector<16xi8>
// CHECK-NEXT:   loop.store %[[Q]], %0[%{{.*}}, %{{.*}}, %{{.*}}] strides [96, 32, 1] : vector<16xi8>
// CHECK-NEXT: }
// CHECK-NOT:  loop.for "d2_tail"
