// loop.dot4, spec §5 kernel B's integer core: lane l of the result is the exact
// i32 sum_{j<4} (w[4l+j] + 128) * xq[4l+j] of two vectors of 4L bytes; 4 bytes
// (one lane term, the lowering's form) give a scalar i32, 32 bytes (vectorized by
// 8) a vector<8xi32>, 64 a vector<16xi32>; loop.vsitofp converts the i32 lanes.
// Printed, parsed and printed again, custom and generic forms.
// RUN: nc-opt %s | nc-opt | filecheck %s
// RUN: nc-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

builtin.module {
  loop.kernel @dots(%0: !loop.ptr<f32>, %1: !loop.ptr<i8>, %2: !loop.ptr<i8>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[8], [1]>, #loop.fp<[64], [1]>, #loop.fp<[64], [1]>] {
    %c0 = arith.constant 0 : index
    %x4 = loop.load %1[%c0] strides [1] : vector<4xi8>
    %w4 = loop.load %2[%c0] strides [1] : vector<4xi8>
    %p = loop.dot4 %x4, %w4 : vector<4xi8> -> i32
    %x32 = loop.load %1[%c0] strides [1] : vector<32xi8>
    %w32 = loop.load %2[%c0] strides [1] : vector<32xi8>
    %d = loop.dot4 %x32, %w32 : vector<32xi8> -> vector<8xi32>
    %f = loop.vsitofp %d : vector<8xi32> -> vector<8xf32>
    %x64 = loop.load %1[%c0] strides [1] : vector<64xi8>
    %w64 = loop.load %2[%c0] strides [1] : vector<64xi8>
    %e = loop.dot4 %x64, %w64 : vector<64xi8> -> vector<16xi32>
    loop.store %f, %0[%c0] strides [1] : vector<8xf32>
  }
}
// CHECK:      %p = loop.dot4 %x4, %w4 : vector<4xi8> -> i32
// CHECK:      %d = loop.dot4 %x32, %w32 : vector<32xi8> -> vector<8xi32>
// CHECK-NEXT: %f = loop.vsitofp %d : vector<8xi32> -> vector<8xf32>
// CHECK:      %e = loop.dot4 %x64, %w64 : vector<64xi8> -> vector<16xi32>
// GENERIC:    %p = "loop.dot4"(%x4, %w4) : (vector<4xi8>, vector<4xi8>) -> i32
// GENERIC:    %d = "loop.dot4"(%x32, %w32) : (vector<32xi8>, vector<32xi8>) -> vector<8xi32>
