// One case per verifier error of loop.dot4 (generic form where the custom syntax
// would build the types itself).
// RUN: nc-opt %s --split-input-file --verify-diagnostics | filecheck %s

// bytes: vectors of i8
loop.kernel @k() syms [] access [] footprints [] {
  %a = "test.op"() : () -> vector<32xi16>
  %p = "loop.dot4"(%a, %a) : (vector<32xi16>, vector<32xi16>) -> vector<8xi32>
}
// CHECK: error: loop.dot4: expected vectors of 4, 16, 32 or 64 i8 (4 bytes per i32 lane), got vector<32xi16>

// -----

// 4 bytes per lane, 1, 4, 8 or 16 lanes
loop.kernel @k() syms [] access [] footprints [] {
  %a = "test.op"() : () -> vector<12xi8>
  %p = "loop.dot4"(%a, %a) : (vector<12xi8>, vector<12xi8>) -> vector<3xi32>
}
// CHECK: error: loop.dot4: expected vectors of 4, 16, 32 or 64 i8 (4 bytes per i32 lane), got vector<12xi8>

// -----

// both operands the same type
loop.kernel @k() syms [] access [] footprints [] {
  %a = "test.op"() : () -> vector<32xi8>
  %b = "test.op"() : () -> vector<64xi8>
  %p = "loop.dot4"(%a, %b) : (vector<32xi8>, vector<64xi8>) -> vector<8xi32>
}
// CHECK: error: loop.dot4: operands differ in type (vector<32xi8> and vector<64xi8>)

// -----

// one i32 lane per 4 bytes (4 bytes: a scalar i32)
loop.kernel @k() syms [] access [] footprints [] {
  %a = "test.op"() : () -> vector<32xi8>
  %p = loop.dot4 %a, %a : vector<32xi8> -> vector<16xi32>
}
// CHECK: error: loop.dot4: the result of vector<32xi8> must be vector<8xi32>, got vector<16xi32>

// -----

loop.kernel @k() syms [] access [] footprints [] {
  %a = "test.op"() : () -> vector<4xi8>
  %p = loop.dot4 %a, %a : vector<4xi8> -> vector<1xi32>
}
// CHECK: error: loop.dot4: the result of vector<4xi8> must be i32, got vector<1xi32>
