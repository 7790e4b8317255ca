// One case per verifier error of the loop dialect.
// RUN: nc-opt %s --split-input-file --verify-diagnostics | filecheck %s
//
// Where the custom syntax cannot express the broken op (its parser builds the
// types from another operand), the case is written in the generic form.
//
// Not reachable from text, so no case:
// * "loop.load: expected a !loop.ptr, got ..." and
//   "loop.load: index #0 has type ..., expected index" (_MemoryOp._check):
//   the custom parser resolves the pointer as a !loop.ptr and every index as
//   an index, and in the generic form the IRDL operand constraints
//   (operand_def(PtrType), var_operand_def(IndexType)) reject the op first,
//   with xDSL's "operand 'ptr' at position 0 does not verify" message.
// Parser errors of the dialect are in parse-errors.mlir.

// Kernel ops.

// a size symbol the kernel does not declare
loop.kernel @k() syms ["seq"] access [] footprints [] {
  %n = loop.sym "past"
}
// CHECK: error: loop.sym: 'past' is not a symbol of kernel @k (symbols: ['seq'])

// -----

// one stride per index
loop.kernel @k(%a: !loop.ptr<f32>) syms [] access ["r"] footprints [#loop.fp<[4, 4], [4, 1]>] {
  %i = arith.constant 0 : index
  %x = loop.load %a[%i, %i] strides [1] : f32
}
// CHECK: error: loop.load: 2 indices but 1 strides

// -----

// a value type that is not the pointer's dtype (the custom form would
// resolve %a as a !loop.ptr<i64>)
loop.kernel @k(%a: !loop.ptr<f32>) syms [] access ["r"] footprints [#loop.fp<[4], [1]>] {
  %i = arith.constant 0 : index
  %x = "loop.load"(%a, %i) <{strides = [#graph.dim<1>]}> : (!loop.ptr<f32>, index) -> i64
}
// CHECK: error: loop.load: a !loop.ptr<f32> holds f32, not i64

// -----

// a 2-d vector access
loop.kernel @k(%a: !loop.ptr<f32>) syms [] access ["r"] footprints [#loop.fp<[8], [1]>] {
  %i = arith.constant 0 : index
  %x = loop.load %a[%i] strides [1] : vector<2x4xf32>
}
// CHECK: error: loop.load: vector accesses are 1-d f32 vectors, not vector<2x4xf32>

// -----

// error code 0 is success
loop.kernel @k() syms [] access [] footprints [] {
  %ok = arith.constant true
  loop.check %ok, 0, "never"
}
// CHECK: error: loop.check: error code must be positive, got 0

// -----

// a loop that never advances
loop.kernel @k() syms [] access [] footprints [] {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  loop.for "d0" %i = %c0 to %c4 step 0 {
  }
}
// CHECK: error: loop.for "d0": step must be positive, got 0

// -----

// a parallel loop with loop-carried values
loop.kernel @k() syms [] access [] footprints [] {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %z = arith.constant 0.000000e+00 : f32
  %s = loop.for "d0" %i = %c0 to %c4 parallel 1 iter(%acc = %z) -> (f32) {
    loop.yield %acc : f32
  }
}
// CHECK: error: loop.for "d0": a parallel loop needs a grain >= 1 and no loop-carried values

// -----

// a body with an argument too many
loop.kernel @k() syms [] access [] footprints [] {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  "loop.for"(%c0, %c4) <{name = "d0", step = #builtin.int<1>}> ({
  ^bb0(%i: index, %j: index):
    "loop.yield"() : () -> ()
  }) : (index, index) -> ()
}
// CHECK: error: loop.for "d0": body has 2 arguments, expected 1

// -----

// an induction variable that is not an index
loop.kernel @k() syms [] access [] footprints [] {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  "loop.for"(%c0, %c4) <{name = "d0", step = #builtin.int<1>}> ({
  ^bb0(%i: i64):
    "loop.yield"() : () -> ()
  }) : (index, index) -> ()
}
// CHECK: error: loop.for "d0": induction variable must be an index

// -----

// a body without its terminator (the custom parser would add it)
loop.kernel @k() syms [] access [] footprints [] {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  "loop.for"(%c0, %c4) <{name = "d0", step = #builtin.int<1>}> ({
  ^bb0(%i: index):
    "test.op"() : () -> ()
  }) : (index, index) -> ()
}
// CHECK: error: loop.for "d0" must end with loop.yield

// -----

// a lanes loop of 64 partial values (lanes are 2, 4, 8, 16 or 32)
loop.kernel @k() syms [] access [] footprints [] {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %z = arith.constant 0.000000e+00 : f32
  %s = loop.for "k" %i = %c0 to %c64 lanes 64 iter(%acc = %z) -> (f32) {
    loop.yield %acc : f32
  }
}
// CHECK: error: loop.for "k": lanes must be one of 2, 4, 8, 16, 32, got 64

// -----

// a tree that combines bit 3 twice and never bit 1 (not an order of the lane bits)
loop.kernel @k() syms [] access [] footprints [] {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %z = arith.constant 0.000000e+00 : f32
  %s = loop.for "k" %i = %c0 to %c64 lanes 32 tree [3, 4, 2, 0, 3] iter(%acc = %z) -> (f32) {
    loop.yield %acc : f32
  }
}
// CHECK: error: loop.for "k": tree [3, 4, 2, 0, 3] is not an order of the bits 0..4 of a lane index of 32 lanes

// -----

// a tree of the wrong length: 16 lanes have 4 bits
loop.kernel @k() syms [] access [] footprints [] {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %z = arith.constant 0.000000e+00 : f32
  %s = loop.for "k" %i = %c0 to %c64 lanes 16 tree [3, 4, 2, 0, 1] iter(%acc = %z) -> (f32) {
    loop.yield %acc : f32
  }
}
// CHECK: error: loop.for "k": tree [3, 4, 2, 0, 1] is not an order of the bits 0..3 of a lane index of 16 lanes

// -----

// a tail that does not divide the lanes
loop.kernel @k() syms [] access [] footprints [] {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %z = arith.constant 0.000000e+00 : f32
  %s = loop.for "k" %i = %c0 to %c64 lanes 32 tail 12 iter(%acc = %z) -> (f32) {
    loop.yield %acc : f32
  }
}
// CHECK: error: loop.for "k": tail 12 must be a power of two dividing the 32 lanes

// -----

// a tail wider than the lanes
loop.kernel @k() syms [] access [] footprints [] {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %z = arith.constant 0.000000e+00 : f32
  %s = loop.for "k" %i = %c0 to %c64 lanes 8 tail 16 iter(%acc = %z) -> (f32) {
    loop.yield %acc : f32
  }
}
// CHECK: error: loop.for "k": tail 16 must be a power of two dividing the 8 lanes

// -----

// a tree on a loop that is no lanes loop
loop.kernel @k() syms [] access [] footprints [] {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %z = arith.constant 0.000000e+00 : f32
  %s = loop.for "k" %i = %c0 to %c64 tree [0] iter(%acc = %z) -> (f32) {
    loop.yield %acc : f32
  }
}
// CHECK: error: loop.for "k": tree and tail order the lanes of a lanes loop (no lanes given)

// -----

// a tail on a loop that is no lanes loop
loop.kernel @k() syms [] access [] footprints [] {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %z = arith.constant 0.000000e+00 : f32
  %s = loop.for "k" %i = %c0 to %c64 tail 8 iter(%acc = %z) -> (f32) {
    loop.yield %acc : f32
  }
}
// CHECK: error: loop.for "k": tree and tail order the lanes of a lanes loop (no lanes given)

// -----

// a lanes loop that steps by 2 (iteration i updates lane (i - lb) mod L: step 1 only)
loop.kernel @k() syms [] access [] footprints [] {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %z = arith.constant 0.000000e+00 : f32
  %s = loop.for "k" %i = %c0 to %c32 step 2 lanes 16 iter(%acc = %z) -> (f32) {
    loop.yield %acc : f32
  }
}
// CHECK: error: loop.for "k": a lanes loop needs step 1 and loop-carried values

// -----

// a lanes loop with no loop-carried value to split into lanes
loop.kernel @k() syms [] access [] footprints [] {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  loop.for "k" %i = %c0 to %c32 lanes 16 {
  }
}
// CHECK: error: loop.for "k": a lanes loop needs step 1 and loop-carried values

// -----

// yielding an index for an f32 accumulator
loop.kernel @k() syms [] access [] footprints [] {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %z = arith.constant 0.000000e+00 : f32
  %s = loop.for "k" %i = %c0 to %c4 iter(%acc = %z) -> (f32) {
    loop.yield %i : index
  }
}
// CHECK: error: loop.for "k": loop-carried types [f32] differ from the body's arguments or yield

// -----

// branches that yield different types
loop.kernel @k() syms [] access [] footprints [] {
  %c = arith.constant true
  %z = arith.constant 0.000000e+00 : f32
  %v = loop.if %c -> (f32) {
    loop.yield %z : f32
  } else {
    loop.yield %c : i1
  }
}
// CHECK: error: loop.if: each branch must yield [f32]

// -----

// an access mode missing
loop.kernel @k(%a: !loop.ptr<f32>, %b: !loop.ptr<f32>) syms [] access ["w"] footprints [#loop.fp<[4], [1]>, #loop.fp<[4], [1]>] {
}
// CHECK: error: loop.kernel @k: 2 arguments but 1 access modes and 2 footprints

// -----

// a kernel argument that is not a pointer
loop.kernel @k(%a: !loop.ptr<f32>, %n: index) syms [] access ["w", "r"] footprints [#loop.fp<[4], [1]>, #loop.fp<[], []>] {
}
// CHECK: error: loop.kernel @k: argument #1 must be a !loop.ptr, got index

// -----

// an access mode other than "r" or "w"
loop.kernel @k(%a: !loop.ptr<f32>) syms [] access ["rw"] footprints [#loop.fp<[4], [1]>] {
}
// CHECK: error: loop.kernel @k: access mode 'rw' of argument #0 is not 'r' or 'w'

// -----

// Program ops.

// an unknown buffer kind
loop.program @p syms [] {
  %b = loop.buffer scratch : !loop.buf<[4], f32>
  loop.output
}
// CHECK: error: loop.buffer: unknown kind 'scratch', expected one of input, weight, output, const, temp, packed

// -----

// a packed weight without its tile
loop.program @p syms [] {
  %b = loop.buffer packed "w" : !loop.buf<[2, 16, 8], f32>
  loop.output
}
// CHECK: error: loop.buffer packed: a tile is required

// -----

// a tile on a buffer that is not packed
loop.program @p syms [] {
  %b = loop.buffer temp tile 8 : !loop.buf<[2, 16, 8], f32>
  loop.output
}
// CHECK: error: loop.buffer temp: a tile is not allowed

// -----

// a packed buffer that is not [N / tile, K, tile]
loop.program @p syms [] {
  %b = loop.buffer packed "w" tile 8 : !loop.buf<[16, 16], f32>
  loop.output
}
// CHECK: error: loop.buffer packed: expected a [N / 8, K, 8] buffer, got [16, 16]

// -----

// an input without its name
loop.program @p syms [] {
  %b = loop.buffer input : !loop.buf<[4], f32>
  loop.output
}
// CHECK: error: loop.buffer input: a name is required

// -----

// a temporary with a name
loop.program @p syms [] {
  %b = loop.buffer temp "t" : !loop.buf<[4], f32>
  loop.output
}
// CHECK: error: loop.buffer temp: a name is not allowed

// -----

// a constant without values (the custom form always parses them)
loop.program @p syms [] {
  %b = "loop.buffer"() <{kind = "const"}> : () -> !loop.buf<[2], f32>
  loop.output
}
// CHECK: error: loop.buffer const: values are required

// -----

// values on a buffer that is not a constant (the custom form never parses them)
loop.program @p syms [] {
  %b = "loop.buffer"() <{kind = "temp", value = #graph.elements<f32: [1.0, 2.0]>}> : () -> !loop.buf<[2], f32>
  loop.output
}
// CHECK: error: loop.buffer temp: values are not allowed

// -----

// one stride per view dim
loop.program @p syms ["seq"] {
  %b = loop.buffer temp : !loop.buf<[seq, 4], f32>
  %v = loop.view %b layout <0, [1]> : !loop.buf<[seq, 4], f32> -> !loop.view<[seq, 4], f32>
  loop.output
}
// CHECK: error: loop.view: 2 dims but 1 strides

// -----

// an i32 view of an f32 buffer
loop.program @p syms [] {
  %b = loop.buffer temp : !loop.buf<[4], f32>
  %v = loop.view %b layout <0, [1]> : !loop.buf<[4], f32> -> !loop.view<[4], i32>
  loop.output
}
// CHECK: error: loop.view: the view and its buffer differ in dtype

// -----

// a program without its outputs
loop.program @p syms [] {
  %b = loop.buffer temp : !loop.buf<[4], f32>
}
// CHECK: error: loop.program @p must end with loop.output

// -----

// Vector ops.

// a 2-d vector (the custom form of loop.splat rejects it while parsing)
loop.kernel @k() syms [] access [] footprints [] {
  %x = "test.op"() : () -> f32
  %v = "loop.splat"(%x) : (f32) -> vector<2x4xf32>
}
// CHECK: error: loop.splat: expected a 1-d vector type, got vector<2x4xf32>

// -----

// an i64 splat into f32 lanes
loop.kernel @k() syms [] access [] footprints [] {
  %x = "test.op"() : () -> i64
  %v = loop.splat %x : i64 -> vector<8xf32>
}
// CHECK: error: loop.splat: a i64 cannot fill vector<8xf32>

// -----

// a predicate that arith.cmpf does not have
loop.kernel @k() syms [] access [] footprints [] {
  %a = "test.op"() : () -> vector<8xf32>
  %m = loop.vcmp "lt", %a, %a : vector<8xf32>
}
// CHECK: error: loop.vcmp: unknown predicate 'lt', expected one of oeq, ogt, oge, olt, ole, one, une, ord, uno

// -----

// operands of different widths (the custom form has one type for both)
loop.kernel @k() syms [] access [] footprints [] {
  %a, %b = "test.op"() : () -> (vector<8xf32>, vector<4xf32>)
  %m = "loop.vcmp"(%a, %b) <{predicate = "olt"}> : (vector<8xf32>, vector<4xf32>) -> vector<8xi1>
}
// CHECK: error: loop.vcmp: operands differ in type (vector<8xf32> and vector<4xf32>)

// -----

// a result that is not the mask
loop.kernel @k() syms [] access [] footprints [] {
  %a = "test.op"() : () -> vector<8xf32>
  %m = "loop.vcmp"(%a, %a) <{predicate = "olt"}> : (vector<8xf32>, vector<8xf32>) -> vector<8xf32>
}
// CHECK: error: loop.vcmp: the result must be vector<8xi1>

// -----

// operands of different widths (the custom form has one type for both)
loop.kernel @k() syms [] access [] footprints [] {
  %c, %a, %b = "test.op"() : () -> (i1, vector<8xf32>, vector<4xf32>)
  %r = "loop.vselect"(%c, %a, %b) : (i1, vector<8xf32>, vector<4xf32>) -> vector<8xf32>
}
// CHECK: error: loop.vselect: operands and result must all be vector<8xf32>

// -----

// a mask of the wrong width
loop.kernel @k() syms [] access [] footprints [] {
  %c, %a = "test.op"() : () -> (vector<4xi1>, vector<8xf32>)
  %r = loop.vselect %c, %a, %a : vector<4xi1>, vector<8xf32>
}
// CHECK: error: loop.vselect: the condition must be i1 or vector<8xi1>, got vector<4xi1>

// -----

// a fold of a vector into a result that is not its half
loop.kernel @k() syms [] access [] footprints [] {
  %v = "test.op"() : () -> vector<16xf32>
  %h = loop.foldhalf %v : vector<16xf32> -> vector<4xf32>
}
// CHECK: error: loop.foldhalf: the result of vector<16xf32> must be vector<8xf32>, got vector<4xf32>

// -----

// a fold of integer lanes (only f32 lanes are added)
loop.kernel @k() syms [] access [] footprints [] {
  %v = "test.op"() : () -> vector<16xi32>
  %h = loop.foldhalf %v : vector<16xi32> -> vector<8xi32>
}
// CHECK: error: loop.foldhalf: expected a vector of 4 to 32 f32 lanes, got vector<16xi32>

// -----

// a half that is neither the low (0) nor the high (1) one
loop.kernel @k() syms [] access [] footprints [] {
  %v = "test.op"() : () -> vector<16xf32>
  %h = loop.half %v[2] : vector<16xf32> -> vector<8xf32>
}
// CHECK: error: loop.half: the half is 0 (low) or 1 (high), got 2

// -----

// a half of the wrong width
loop.kernel @k() syms [] access [] footprints [] {
  %v = "test.op"() : () -> vector<16xf32>
  %h = loop.half %v[0] : vector<16xf32> -> vector<16xf32>
}
// CHECK: error: loop.half: the result of vector<16xf32> must be vector<8xf32>, got vector<16xf32>

// -----

// the halving tree of 64 lanes (lanes are 2, 4, 8, 16 or 32)
loop.kernel @k() syms [] access [] footprints [] {
  %v = "test.op"() : () -> vector<64xf32>
  %s = loop.lanesum %v : vector<64xf32> -> f32
}
// CHECK: error: loop.lanesum: expected 2, 4, 8, 16, 32 lanes, got 64

// -----

// a lane tree that is not an order of the 3 bits of 8 lanes
loop.kernel @k() syms [] access [] footprints [] {
  %v = "test.op"() : () -> vector<8xf32>
  %s = loop.lanesum %v tree [2, 0] : vector<8xf32> -> f32
}
// CHECK: error: loop.lanesum: tree [2, 0] is not an order of the bits 0..2 of a lane index of 8 lanes

// -----

// a lane sum into a wider type than the lanes'
loop.kernel @k() syms [] access [] footprints [] {
  %v = "test.op"() : () -> vector<8xf32>
  %s = loop.lanesum %v : vector<8xf32> -> f64
}
// CHECK: error: loop.lanesum: the result must be f32, got f64

// -----

// a 2-d vector (the custom form of loop.lanesum rejects it while parsing)
loop.kernel @k() syms [] access [] footprints [] {
  %v = "test.op"() : () -> vector<2x8xf32>
  %s = "loop.lanesum"(%v) : (vector<2x8xf32>) -> f32
}
// CHECK: error: loop.lanesum: expected a 1-d vector type, got vector<2x8xf32>

// -----

// the exact widening of int8 lanes (or of loop.dot4's i32) takes i8 or i32, not i16
loop.kernel @k() syms [] access [] footprints [] {
  %v = "test.op"() : () -> vector<8xi16>
  %f = loop.vsitofp %v : vector<8xi16> -> vector<8xf32>
}
// CHECK: error: loop.vsitofp: expected a vector of i8 or i32, got vector<8xi16>

// -----

// and gives as many f32 lanes
loop.kernel @k() syms [] access [] footprints [] {
  %v = "test.op"() : () -> vector<8xi8>
  %f = loop.vsitofp %v : vector<8xi8> -> vector<4xf32>
}
// CHECK: error: loop.vsitofp: the result must be vector<8xf32>, got vector<4xf32>

// -----

// the narrowing of quantized lanes takes f32 lanes
loop.kernel @k() syms [] access [] footprints [] {
  %v = "test.op"() : () -> vector<16xi32>
  %q = loop.vfptosi %v : vector<16xi32> -> vector<16xi8>
}
// CHECK: error: loop.vfptosi: expected a vector of f32, got vector<16xi32>

// -----

// and gives as many i8 lanes
loop.kernel @k() syms [] access [] footprints [] {
  %v = "test.op"() : () -> vector<16xf32>
  %q = loop.vfptosi %v : vector<16xf32> -> vector<16xi32>
}
// CHECK: error: loop.vfptosi: the result must be vector<16xi8>, got vector<16xi32>

// -----

// lanesums: operands of two vector types
loop.kernel @k(%a: !loop.ptr<f32>) syms [] access ["r"] footprints [#loop.fp<[16], [1]>] {
  %i = arith.constant 0 : index
  %x = loop.load %a[%i] strides [1] : vector<16xf32>
  %y = loop.load %a[%i] strides [1] : vector<8xf32>
  %s = "loop.lanesums"(%x, %y, %x, %x) : (vector<16xf32>, vector<8xf32>, vector<16xf32>, vector<16xf32>) -> vector<4xf32>
}
// CHECK: error: loop.lanesums: the operands differ in type

// -----

// lanesums: 4 sums give 4 lanes
loop.kernel @k(%a: !loop.ptr<f32>) syms [] access ["r"] footprints [#loop.fp<[16], [1]>] {
  %i = arith.constant 0 : index
  %x = loop.load %a[%i] strides [1] : vector<16xf32>
  %s = loop.lanesums %x, %x, %x, %x : vector<16xf32> -> vector<8xf32>
}
// CHECK: error: loop.lanesums: 4 operands of vector<16xf32> give vector<4xf32>, got vector<8xf32>

// -----

// vpack: 3 lanes is no vector
loop.kernel @k(%a: !loop.ptr<f32>) syms [] access ["r"] footprints [#loop.fp<[16], [1]>] {
  %i = arith.constant 0 : index
  %x = loop.load %a[%i] strides [1] : f32
  %p = loop.vpack %x, %x, %x : f32 -> vector<3xf32>
}
// CHECK: error: loop.vpack: expected 2, 4, 8, 16, 32 operands (one per lane), got 3

// -----

// extract: a lane the vector does not have
loop.kernel @k(%a: !loop.ptr<f32>) syms [] access ["r"] footprints [#loop.fp<[16], [1]>] {
  %i = arith.constant 0 : index
  %x = loop.load %a[%i] strides [1] : vector<4xf32>
  %e = loop.extract %x[4] : vector<4xf32> -> f32
}
// CHECK: error: loop.extract: lane 4 of vector<4xf32> (lanes 0..3)

// -----

// prefetch: a locality gcc has no number for
loop.kernel @k(%a: !loop.ptr<f32>) syms [] access ["r"] footprints [#loop.fp<[16], [1]>] {
  %i = arith.constant 0 : index
  loop.prefetch %a[%i] strides [1] : f32 locality 5
}
// CHECK: error: loop.prefetch: expected a locality in [0, 1, 2, 3], got 5

// -----

// prefetch: one index for two strides
loop.kernel @k(%a: !loop.ptr<f32>) syms [] access ["r"] footprints [#loop.fp<[4, 4], [4, 1]>] {
  %i = arith.constant 0 : index
  loop.prefetch %a[%i] strides [4, 1] : f32 locality 2
}
// CHECK: error: loop.prefetch: 1 indices but 2 strides
