// One case per verifier error of the graph dialect (spec §2.2).
// RUN: nc-opt %s --split-input-file --verify-diagnostics | filecheck %s

// shape mismatch
graph.func @f {
  %x = graph.input "x" : !graph.tensor<[seq, 896], f32>
  %y = graph.input "y" : !graph.tensor<[seq, 64], f32>
  %z = graph.add %x, %y : (!graph.tensor<[seq, 896], f32>, !graph.tensor<[seq, 64], f32>) -> !graph.tensor<[seq, 896], f32>
  graph.return
}
// CHECK: error: graph.add: shapes of lhs %x [seq, 896] and rhs %y [seq, 64] differ

// -----

// symbolic shape mismatch
graph.func @f {
  %x = graph.input "x" : !graph.tensor<[seq, 64], f32>
  %y = graph.input "y" : !graph.tensor<[past, 64], f32>
  %z = graph.mul %x, %y : (!graph.tensor<[seq, 64], f32>, !graph.tensor<[past, 64], f32>) -> !graph.tensor<[seq, 64], f32>
  graph.return
}
// CHECK: error: graph.mul: shapes of lhs %x [seq, 64] and rhs %y [past, 64] differ

// -----

// dtype mismatch
graph.func @f {
  %x = graph.input "x" : !graph.tensor<[4], f32>
  %y = graph.input "y" : !graph.tensor<[4], i32>
  %z = graph.sub %x, %y : (!graph.tensor<[4], f32>, !graph.tensor<[4], i32>) -> !graph.tensor<[4], f32>
  graph.return
}
// CHECK: error: graph.sub: dtypes of lhs %x (f32) and rhs %y (i32) differ

// -----

// float-only op on ints
graph.func @f {
  %x = graph.input "x" : !graph.tensor<[4], i64>
  %z = graph.exp %x : !graph.tensor<[4], i64>
  graph.return
}
// CHECK: error: graph.exp operand %x must be a float tensor, got i64

// -----

// div on ints
graph.func @f {
  %x = graph.input "x" : !graph.tensor<[4], i32>
  %z = graph.div %x, %x : !graph.tensor<[4], i32>
  graph.return
}
// CHECK: error: graph.div lhs %x must be a float tensor, got i32

// -----

// arithmetic on bool
graph.func @f {
  %x = graph.input "x" : !graph.tensor<[4], bool>
  %z = graph.add %x, %x : !graph.tensor<[4], bool>
  graph.return
}
// CHECK: error: graph.add lhs %x must be a numeric tensor, got bool

// -----

// where cond not bool
graph.func @f {
  %c = graph.input "c" : !graph.tensor<[4], i64>
  %x = graph.input "x" : !graph.tensor<[4], f32>
  %z = graph.where %c, %x, %x : (!graph.tensor<[4], i64>, !graph.tensor<[4], f32>, !graph.tensor<[4], f32>) -> !graph.tensor<[4], f32>
  graph.return
}
// CHECK: error: graph.where condition %c must be bool, got i64

// -----

// where cond shape
graph.func @f {
  %c = graph.input "c" : !graph.tensor<[3], bool>
  %x = graph.input "x" : !graph.tensor<[4], f32>
  %z = graph.where %c, %x, %x : (!graph.tensor<[3], bool>, !graph.tensor<[4], f32>, !graph.tensor<[4], f32>) -> !graph.tensor<[4], f32>
  graph.return
}
// CHECK: error: graph.where: shapes of condition %c [3] and lhs %x [4] differ

// -----

// axis out of range
graph.func @f {
  %x = graph.input "x" : !graph.tensor<[seq, 896], f32>
  %z = graph.reduce_sum %x axis = 2 : !graph.tensor<[seq, 896], f32> -> !graph.tensor<[seq, 1], f32>
  graph.return
}
// CHECK: error: graph.reduce_sum: axis 2 is out of range for operand %x of rank 2

// -----

// reshape count
graph.func @f {
  %x = graph.input "x" : !graph.tensor<[seq, 896], f32>
  %z = graph.reshape %x : !graph.tensor<[seq, 896], f32> -> !graph.tensor<[seq, 14, 60], f32>
  graph.return
}
// CHECK: error: graph.reshape of operand %x: element count of [seq, 896] (896*seq) differs from [seq, 14, 60] (840*seq)

// -----

// permute not a permutation
graph.func @f {
  %x = graph.input "x" : !graph.tensor<[2, 3, 4], f32>
  %z = graph.permute %x perm = [0, 2, 2] : !graph.tensor<[2, 3, 4], f32> -> !graph.tensor<[2, 4, 4], f32>
  graph.return
}
// CHECK: error: graph.permute of operand %x: [0, 2, 2] is not a permutation of range(3)

// -----

// broadcast of a non-1 dim
graph.func @f {
  %x = graph.input "x" : !graph.tensor<[seq, 2], f32>
  %z = graph.broadcast %x : !graph.tensor<[seq, 2], f32> -> !graph.tensor<[seq, 896], f32>
  graph.return
}
// CHECK: error: graph.broadcast of operand %x: dim 1 of size 2 is neither 1 nor 896

// -----

// broadcast rank
graph.func @f {
  %s = graph.input "s" : !graph.tensor<[seq], f32>
  %x = graph.input "x" : !graph.tensor<[896], f32>
  %z = graph.broadcast %x : !graph.tensor<[896], f32> -> !graph.tensor<[seq, 896], f32>
  graph.return
}
// CHECK: error: graph.broadcast of operand %x: rank 1 [896] differs from target rank 2 [seq, 896]

// -----

// slice stop past the end
graph.func @f {
  %x = graph.input "x" : !graph.tensor<[seq, 896], f32>
  %z = graph.slice %x axis = 0, start = seq, stop = seq + 1 : !graph.tensor<[seq, 896], f32> -> !graph.tensor<[1, 896], f32>
  graph.return
}
// CHECK: error: graph.slice of operand %x: bounds [seq, seq + 1) do not fit axis 0 of size seq (size - stop = -1 < 0)

// -----

// slice start after stop (the declared result is beside the point; a dim of -2 is a parse error)
graph.func @f {
  %x = graph.input "x" : !graph.tensor<[8, 896], f32>
  %z = graph.slice %x axis = 0, start = 5, stop = 3 : !graph.tensor<[8, 896], f32> -> !graph.tensor<[2, 896], f32>
  graph.return
}
// CHECK: error: graph.slice of operand %x: bounds [5, 3) do not fit axis 0 of size 8 (stop - start = -2 < 0)

// -----

// concat off-axis mismatch
graph.func @f {
  %a = graph.input "a" : !graph.tensor<[2, past, 64], f32>
  %b = graph.input "b" : !graph.tensor<[2, seq, 32], f32>
  %z = graph.concat %a, %b axis = 1 : (!graph.tensor<[2, past, 64], f32>, !graph.tensor<[2, seq, 32], f32>) -> !graph.tensor<[2, past + seq, 64], f32>
  graph.return
}
// CHECK: error: graph.concat along axis 1: dim 2 of operand #0 %a (64) and operand #1 %b (32) differ

// -----

// matmul inner dim
graph.func @f {
  %a = graph.input "a" : !graph.tensor<[seq, 896], f32>
  %b = graph.weight "b" : !graph.tensor<[128, 896], f32>
  %z = graph.matmul %a, %b : (!graph.tensor<[seq, 896], f32>, !graph.tensor<[128, 896], f32>) -> !graph.tensor<[seq, 896], f32>
  graph.return
}
// CHECK: error: graph.matmul: inner dims differ: lhs %a [seq, 896] has K = 896, rhs %b [128, 896] has K = 128

// -----

// matmul rank
graph.func @f {
  %a = graph.input "a" : !graph.tensor<[14, seq, 64], f32>
  %b = graph.weight "b" : !graph.tensor<[64, 64], f32>
  %z = graph.matmul %a, %b : (!graph.tensor<[14, seq, 64], f32>, !graph.tensor<[64, 64], f32>) -> !graph.tensor<[14, seq, 64], f32>
  graph.return
}
// CHECK: error: graph.matmul: ranks of lhs %a (3) and rhs %b (2) must be equal and >= 2

// -----

// matmul batch
graph.func @f {
  %a = graph.input "a" : !graph.tensor<[14, seq, 64], f32>
  %b = graph.input "b" : !graph.tensor<[2, 64, seq], f32>
  %z = graph.matmul %a, %b : (!graph.tensor<[14, seq, 64], f32>, !graph.tensor<[2, 64, seq], f32>) -> !graph.tensor<[14, seq, seq], f32>
  graph.return
}
// CHECK: error: graph.matmul: batch dims of lhs %a [14] and rhs %b [2] differ

// -----

// gather with non-integer ids
graph.func @f {
  %t = graph.weight "t" : !graph.tensor<[100, 8], f32>
  %i = graph.input "i" : !graph.tensor<[seq], f32>
  %z = graph.gather %t, %i : (!graph.tensor<[100, 8], f32>, !graph.tensor<[seq], f32>) -> !graph.tensor<[seq, 8], f32>
  graph.return
}
// CHECK: error: graph.gather ids %i must be an integer tensor, got f32

// -----

// unbound symbol
graph.func @f {
  %x = graph.input "x" : !graph.tensor<[seq, 896], f32>
  %i = graph.iota axis = 0 : !graph.tensor<[past], i64>
  graph.return
}
// CHECK: error: graph.iota: symbol 'past' in %i is not bound by any graph.input (bound: ['seq'])

// -----

// unbound symbol in a property
graph.func @f {
  %x = graph.input "x" : !graph.tensor<[seq], i64>
  %d = graph.dim past : !graph.tensor<[], i64>
  graph.return
}
// CHECK: error: graph.dim: symbol 'past' in %d is not bound by any graph.input (bound: ['seq'])

// -----

// declared result type differs
graph.func @f {
  %x = graph.input "x" : !graph.tensor<[seq, 896], f32>
  %z = graph.reduce_max %x axis = 1 : !graph.tensor<[seq, 896], f32> -> !graph.tensor<[seq, 896], f32>
  graph.return
}
// CHECK: error: graph.reduce_max: declared result type %z [seq, 896] f32 differs from inferred type [seq, 1] f32

// -----

// symbolic weight
graph.func @f {
  %x = graph.input "x" : !graph.tensor<[seq], i64>
  %w = graph.weight "w" : !graph.tensor<[seq, 4], f32>
  graph.return
}
// CHECK: error: graph.weight 'w' must have a concrete shape, got symbolic dims ['seq']

// -----

// bf16 is storage only
graph.func @f {
  %w = graph.weight "w" : !graph.tensor<[4], bf16>
  %z = graph.cast %w : !graph.tensor<[4], bf16> -> !graph.tensor<[4], i32>
  graph.return
}
// CHECK: error: graph.cast: bf16 operand %w can only be cast to f32, not i32

// -----

// const value count
graph.func @f {
  %c = graph.const #graph.elements<f32: [1.0, 2.0]> : !graph.tensor<[3], f32>
  graph.return
}
// CHECK: error: graph.const: 2 values for a result of 3 elements ([3] f32)

// -----

// duplicate input names
graph.func @f {
  %a = graph.input "x" : !graph.tensor<[4], f32>
  %b = graph.input "x" : !graph.tensor<[4], f32>
  graph.return
}
// CHECK: error: graph.func @f: input names ['x'] are not unique

// -----

// use before definition
graph.func @f {
  %z = graph.neg %x : !graph.tensor<[4], f32>
  %x = graph.input "x" : !graph.tensor<[4], f32>
  graph.return
}
// CHECK: error: graph.neg: %x is used before it is defined

// -----

// a matmul order that is not one of MATMUL_ORDERS
graph.func @f {
  %x = graph.input "x" : !graph.tensor<[2, 40], f32>
  %w = graph.input "w" : !graph.tensor<[40, 3], f32>
  %y = graph.matmul %x, %w order = "k_ascending" : (!graph.tensor<[2, 40], f32>, !graph.tensor<[40, 3], f32>) -> !graph.tensor<[2, 3], f32>
  graph.return
}
// CHECK: error: graph.matmul: unknown order "k_ascending", expected one of blocks32

// -----

// a reduce_sum order that is not one of REDUCE_ORDERS
graph.func @f {
  %x = graph.input "x" : !graph.tensor<[2, 40], f32>
  %y = graph.reduce_sum %x axis = 1, order = "pairwise" : !graph.tensor<[2, 40], f32> -> !graph.tensor<[2, 1], f32>
  graph.return
}
// CHECK: error: graph.reduce_sum: unknown order "pairwise", expected one of sequential

// -----

// round is float only
graph.func @f {
  %x = graph.input "x" : !graph.tensor<[4], i32>
  %y = graph.round %x : !graph.tensor<[4], i32>
  graph.return
}
// CHECK: error: graph.round operand %x must be a float tensor, got i32

// -----

// matmul_i8: the activations are int8
graph.func @f {
  %x = graph.input "x" : !graph.tensor<[seq, 40], f32>
  %xs = graph.input "xs" : !graph.tensor<[seq, 2], f32>
  %w = graph.input "w" : !graph.tensor<[40, 3], i8>
  %y = graph.matmul_i8 %x, %xs, %w : (!graph.tensor<[seq, 40], f32>, !graph.tensor<[seq, 2], f32>, !graph.tensor<[40, 3], i8>) -> !graph.tensor<[seq, 3], f32>
  graph.return
}
// CHECK: error: graph.matmul_i8: lhs %x must be i8, got f32

// -----

// matmul_i8: the block scales are f32
graph.func @f {
  %x = graph.input "x" : !graph.tensor<[seq, 40], i8>
  %xs = graph.input "xs" : !graph.tensor<[seq, 2], i8>
  %w = graph.input "w" : !graph.tensor<[40, 3], i8>
  %y = graph.matmul_i8 %x, %xs, %w : (!graph.tensor<[seq, 40], i8>, !graph.tensor<[seq, 2], i8>, !graph.tensor<[40, 3], i8>) -> !graph.tensor<[seq, 3], f32>
  graph.return
}
// CHECK: error: graph.matmul_i8: lhs_scale %xs must be f32, got i8

// -----

// matmul_i8: the weights are int8
graph.func @f {
  %x = graph.input "x" : !graph.tensor<[seq, 40], i8>
  %xs = graph.input "xs" : !graph.tensor<[seq, 2], f32>
  %w = graph.input "w" : !graph.tensor<[40, 3], f32>
  %y = graph.matmul_i8 %x, %xs, %w : (!graph.tensor<[seq, 40], i8>, !graph.tensor<[seq, 2], f32>, !graph.tensor<[40, 3], f32>) -> !graph.tensor<[seq, 3], f32>
  graph.return
}
// CHECK: error: graph.matmul_i8: rhs %w must be i8, got f32

// -----

// matmul_i8: rank 2 only
graph.func @f {
  %x = graph.input "x" : !graph.tensor<[2, seq, 40], i8>
  %xs = graph.input "xs" : !graph.tensor<[seq, 2], f32>
  %w = graph.input "w" : !graph.tensor<[40, 3], i8>
  %y = graph.matmul_i8 %x, %xs, %w : (!graph.tensor<[2, seq, 40], i8>, !graph.tensor<[seq, 2], f32>, !graph.tensor<[40, 3], i8>) -> !graph.tensor<[seq, 3], f32>
  graph.return
}
// CHECK: error: graph.matmul_i8: lhs %x must have rank 2, got 3 [2, seq, 40]

// -----

// matmul_i8 inner dim
graph.func @f {
  %x = graph.input "x" : !graph.tensor<[seq, 40], i8>
  %xs = graph.input "xs" : !graph.tensor<[seq, 2], f32>
  %w = graph.input "w" : !graph.tensor<[3, 40], i8>
  %y = graph.matmul_i8 %x, %xs, %w : (!graph.tensor<[seq, 40], i8>, !graph.tensor<[seq, 2], f32>, !graph.tensor<[3, 40], i8>) -> !graph.tensor<[seq, 40], f32>
  graph.return
}
// CHECK: error: graph.matmul_i8: inner dims differ: lhs %x [seq, 40] has K = 40, rhs %w [3, 40] has K = 3

// -----

// matmul_i8: one scale per row and block of 32 (40 columns: 2 blocks)
graph.func @f {
  %x = graph.input "x" : !graph.tensor<[seq, 40], i8>
  %xs = graph.input "xs" : !graph.tensor<[seq, 1], f32>
  %w = graph.input "w" : !graph.tensor<[40, 3], i8>
  %y = graph.matmul_i8 %x, %xs, %w : (!graph.tensor<[seq, 40], i8>, !graph.tensor<[seq, 1], f32>, !graph.tensor<[40, 3], i8>) -> !graph.tensor<[seq, 3], f32>
  graph.return
}
// CHECK: error: graph.matmul_i8: lhs_scale %xs [seq, 1] must be [seq, 2] (a scale per row of lhs %x and block of 32 of its K = 40)

// -----

// matmul_i8: K must be a constant (the number of blocks is ceil(K / 32))
graph.func @f {
  %x = graph.input "x" : !graph.tensor<[seq, seq], i8>
  %xs = graph.input "xs" : !graph.tensor<[seq, 1], f32>
  %w = graph.input "w" : !graph.tensor<[seq, 3], i8>
  %y = graph.matmul_i8 %x, %xs, %w : (!graph.tensor<[seq, seq], i8>, !graph.tensor<[seq, 1], f32>, !graph.tensor<[seq, 3], i8>) -> !graph.tensor<[seq, 3], f32>
  graph.return
}
// CHECK: error: graph.matmul_i8: K of lhs %x [seq, seq] must be a constant, got seq

// -----

// matmul_i8: the result is f32 [M, N]
graph.func @f {
  %x = graph.input "x" : !graph.tensor<[seq, 40], i8>
  %xs = graph.input "xs" : !graph.tensor<[seq, 2], f32>
  %w = graph.input "w" : !graph.tensor<[40, 3], i8>
  %y = graph.matmul_i8 %x, %xs, %w : (!graph.tensor<[seq, 40], i8>, !graph.tensor<[seq, 2], f32>, !graph.tensor<[40, 3], i8>) -> !graph.tensor<[seq, 3], i8>
  graph.return
}
// CHECK: error: graph.matmul_i8: declared result type %y [seq, 3] i8 differs from inferred type [seq, 3] f32

// -----

// update_slice: the update does not fit at its offset
graph.func @f {
  %d = graph.input "d" : !graph.tensor<[4, 3], f32>
  %u = graph.input "u" : !graph.tensor<[2, 3], f32>
  %r = graph.update_slice %d, %u offsets = [3, 0] : (!graph.tensor<[4, 3], f32>, !graph.tensor<[2, 3], f32>) -> !graph.tensor<[4, 3], f32>
  graph.return
}
// CHECK: error: graph.update_slice: update %u at offset 3 does not fit axis 0 of dest %d (size 4; dest dim - offset - update dim = -1 < 0)

// -----

// update_slice: one offset per axis
graph.func @f {
  %d = graph.input "d" : !graph.tensor<[4, 3], f32>
  %u = graph.input "u" : !graph.tensor<[2, 3], f32>
  %r = graph.update_slice %d, %u offsets = [0] : (!graph.tensor<[4, 3], f32>, !graph.tensor<[2, 3], f32>) -> !graph.tensor<[4, 3], f32>
  graph.return
}
// CHECK: error: graph.update_slice: dest %d has rank 2, update %u rank 2 and 1 offsets given

// -----

// a scalar symbol that an input's shape binds too
graph.func @f scalars ["n"] {
  %x = graph.input "x" : !graph.tensor<[n], f32>
  graph.return
}
// CHECK: error: graph.func @f: scalars ['n'] are declared twice or bound by an input's shape

// -----

// a symbol that neither an input nor a scalar binds
graph.func @f scalars ["past"] {
  %x = graph.input "x" : !graph.tensor<[seq], f32>
  %y = graph.slice %x axis = 0, start = 0, stop = past : !graph.tensor<[seq], f32> -> !graph.tensor<[past], f32>
  %z = graph.slice %x axis = 0, start = 0, stop = other : !graph.tensor<[seq], f32> -> !graph.tensor<[other], f32>
  graph.return
}
// CHECK: error: graph.slice: symbol 'other' in %z is not bound by any graph.input (bound: ['past', 'seq'])
