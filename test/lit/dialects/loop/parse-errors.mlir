// One case per parser error of the loop dialect (its custom syntax).
// RUN: nc-opt %s --split-input-file --parsing-diagnostics | filecheck %s

// an iter() list and a result list of different lengths
loop.kernel @k() syms [] access [] footprints [] {
  %c0 = arith.constant 0 : index
  %s = loop.for "d0" %i = %c0 to %c0 iter(%a = %c0) -> () {
  }
}
// CHECK: loop.for "d0": 1 loop-carried values but 0 result types

// -----

// a dtype the dialect does not know
loop.kernel @k(%a: !loop.ptr<f16>) syms [] access ["r"] footprints [#loop.fp<[4], [1]>] {
}
// CHECK: unknown dtype 'f16'

// -----

// a view typed as a buffer
loop.program @p syms [] {
  %b = loop.buffer temp : !loop.buf<[4], f32>
  %v = loop.view %b layout <0, [1]> : !loop.buf<[4], f32> -> !loop.buf<[4], f32>
  loop.output
}
// CHECK: expected a !loop.view type, got !loop.buf<[4], f32>

// -----

// a splat into a 2-d vector
loop.kernel @k() syms [] access [] footprints [] {
  %x = "test.op"() : () -> f32
  %v = loop.splat %x : f32 -> vector<2x4xf32>
}
// CHECK: expected a 1-d vector type, got vector<2x4xf32>

// -----

// an access type no buffer holds (located at the type)
loop.kernel @k(%a: !loop.ptr<f32>) syms [] access ["r"] footprints [#loop.fp<[8], [1]>] {
  %i = arith.constant 0 : index
  %x = loop.load %a[%i] strides [1] : f16
}
// CHECK:      {{.*}}parse-errors.mlir:[[# @LINE - 2]]:39
// CHECK-NEXT:   %x = loop.load %a[%i] strides [1] : f16
// CHECK-NEXT:                                       ^^^
// CHECK-NEXT:                                       f16 is not an element type of a buffer

// -----

// a requirement that is not "expr >= 0"
loop.program @p syms ["seq"] {
  loop.require seq >= 1, "seq >= 1"
  loop.output
}
// CHECK:      loop.require seq >= 1, "seq >= 1"
// CHECK-NEXT:                  ^^^^
// CHECK-NEXT:                  expected '>= 0'

// -----

// `>` and `=` apart are not `>=`
loop.program @p syms ["seq"] {
  loop.require seq > = 0, "seq >= 0"
  loop.output
}
// CHECK:      loop.require seq > = 0, "seq >= 0"
// CHECK-NEXT:                  ^^
// CHECK-NEXT:                  expected '>= 0'

// -----

// a tree belongs to loop.lanesum, not to loop.splat (which shares its syntax)
loop.kernel @k() syms [] access [] footprints [] {
  %z = arith.constant 0.000000e+00 : f32
  %v = loop.splat %z tree [0] : f32 -> vector<2xf32>
}
// CHECK:      %v = loop.splat %z tree [0] : f32 -> vector<2xf32>
// CHECK-NEXT:                ^^^^
// CHECK-NEXT:                only loop.lanesum takes a tree

// -----

// a lanes loop's tree lists bits, not lanes
loop.kernel @k() syms [] access [] footprints [] {
  %c0 = arith.constant 0 : index
  %z = arith.constant 0.000000e+00 : f32
  %s = loop.for "k" %i = %c0 to %c0 lanes 4 tree [-1, 0] iter(%a = %z) -> (f32) {
    loop.yield %a : f32
  }
}
// CHECK: Expected integer literal
