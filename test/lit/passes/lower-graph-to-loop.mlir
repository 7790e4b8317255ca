// lower-graph-to-loop: one kernel per compute primitive, views for movement.
// RUN: nc-opt %s --split-input-file -p lower-graph-to-loop | filecheck %s
// RUN: nc-opt %s --split-input-file -p lower-graph-to-loop | filecheck %s --check-prefix=NOGRAPH

// NOGRAPH-NOT: {{(= |^ *)graph\.[a-z_]+ }}

// Elementwise: a kernel over the result shape, operands read through strides
// (a broadcast operand has stride 0), result stored row-major.
graph.func @elementwise {
  %x = graph.input "x" : !graph.tensor<[seq, 8], f32>
  %w = graph.weight "w" : !graph.tensor<[8], f32>
  %wr = graph.reshape %w : !graph.tensor<[8], f32> -> !graph.tensor<[1, 8], f32>
  %wb = graph.broadcast %wr : !graph.tensor<[1, 8], f32> -> !graph.tensor<[seq, 8], f32>
  %y = graph.mul %x, %wb : !graph.tensor<[seq, 8], f32>
  graph.return "y" = %y : !graph.tensor<[seq, 8], f32>
}
// CHECK-LABEL: loop.kernel @mul(
// CHECK-SAME:    access ["w", "r", "r"] footprints [#loop.fp<[seq, 8], [8, 1]>, #loop.fp<[seq, 8], [8, 1]>, #loop.fp<[seq, 8], [0, 1]>]
// CHECK:         loop.for "d0" %[[I:.*]] = %{{.*}} to %{{.*}} {
// CHECK-NEXT:      loop.for "d1" %[[J:.*]] = %{{.*}} to %{{.*}} {
// CHECK-NEXT:        %[[A:.*]] = loop.load %{{.*}}[%[[I]], %[[J]]] strides [8, 1] : f32
// CHECK-NEXT:        %[[B:.*]] = loop.load %{{.*}}[%[[I]], %[[J]]] strides [0, 1] : f32
// CHECK-NEXT:        %[[P:.*]] = arith.mulf %[[A]], %[[B]] : f32
// CHECK-NEXT:        loop.store %[[P]], %{{.*}}[%[[I]], %[[J]]] strides [8, 1] : f32
// CHECK-LABEL: loop.program @elementwise syms ["seq"] {
// CHECK:         %[[W:.*]] = loop.buffer weight "w" : !loop.buf<[8], f32>
// CHECK:         %[[WB:.*]] = loop.view %[[W]] layout <0, [0, 1]> : !loop.buf<[8], f32> -> !loop.view<[seq, 8], f32>
// CHECK:         %[[OUT:.*]] = loop.buffer output "y" : !loop.buf<[seq, 8], f32>
// CHECK:         loop.launch @mul(%{{.*}}, %{{.*}}, %[[WB]])
// CHECK:         loop.output "y" = %[[OUT]]

// -----

// Matmul against a transposed weight: the weight is read with swapped
// strides, never copied (a row of W is contiguous along k). k is a lanes loop
// of 16 partial sums (iteration k updates partial k mod 16, the result is their
// halving tree), each step one fused multiply-add rounded once.
graph.func @linear {
  %x = graph.input "x" : !graph.tensor<[seq, 8], f32>
  %w = graph.weight "w" : !graph.tensor<[4, 8], f32>
  %wt = graph.permute %w perm = [1, 0] : !graph.tensor<[4, 8], f32> -> !graph.tensor<[8, 4], f32>
  %y = graph.matmul %x, %wt : (!graph.tensor<[seq, 8], f32>, !graph.tensor<[8, 4], f32>) -> !graph.tensor<[seq, 4], f32>
  graph.return "y" = %y : !graph.tensor<[seq, 4], f32>
}
// CHECK-LABEL: loop.kernel @matmul(
// CHECK:         %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[R:.*]] = loop.for "k" %[[K:.*]] = %{{[0-9]+}} to %{{[0-9]+}} lanes 16 iter(%[[ACC:.*]] = %[[ZERO]]) -> (f32) {
// CHECK-NEXT:      %[[A:.*]] = loop.load %{{.*}}[%{{.*}}, %[[K]]] strides [8, 1] : f32
// CHECK-NEXT:      %[[B:.*]] = loop.load %{{.*}}[%[[K]], %{{.*}}] strides [1, 8] : f32
// CHECK-NEXT:      %[[F:.*]] = math.fma %[[A]], %[[B]], %[[ACC]] : f32
// CHECK-NEXT:      loop.yield %[[F]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    loop.store %[[R]], %{{.*}} strides [4, 1] : f32
// CHECK-LABEL: loop.program @linear
// CHECK:         loop.view %{{.*}} layout <0, [1, 8]> : !loop.buf<[4, 8], f32> -> !loop.view<[8, 4], f32>
// CHECK-NOT:     loop.launch @copy

// -----

// Reductions keep the axis with size 1; max (its loop "m") starts at -inf and
// takes the elements in order. An f32 sum is a lanes loop (16 partial sums and their halving tree),
// the order of a matmul's k.
graph.func @reduce {
  %x = graph.input "x" : !graph.tensor<[seq, 8], f32>
  %m = graph.reduce_max %x axis = 1 : !graph.tensor<[seq, 8], f32> -> !graph.tensor<[seq, 1], f32>
  %s = graph.reduce_sum %x axis = 1 : !graph.tensor<[seq, 8], f32> -> !graph.tensor<[seq, 1], f32>
  graph.return "m" = %m, "s" = %s : !graph.tensor<[seq, 1], f32>, !graph.tensor<[seq, 1], f32>
}
// CHECK-LABEL: loop.kernel @reduce_max(
// CHECK:         %[[INIT:.*]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:    %{{.*}} = loop.for "m" %{{.*}} = %{{[0-9]+}} to %{{[0-9]+}} iter(%[[ACC:.*]] = %[[INIT]]) -> (f32) {
// CHECK:           arith.maximumf %[[ACC]], %{{.*}} : f32
// CHECK-LABEL: loop.kernel @reduce_sum(
// CHECK:         %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %{{.*}} = loop.for "k" %{{.*}} = %{{[0-9]+}} to %{{[0-9]+}} lanes 16 iter(%[[SACC:.*]] = %[[ZERO]]) -> (f32) {
// CHECK:           arith.addf %[[SACC]], %{{.*}} : f32

// -----

// Movement ops are views: slice moves the offset (symbolic), a reshape that
// strides can express is a view, one they cannot is a copy kernel.
graph.func @movement {
  %p = graph.input "p" : !graph.tensor<[24, 2, past, 64], f32>
  %s = graph.slice %p axis = 0, start = 3, stop = 4 : !graph.tensor<[24, 2, past, 64], f32> -> !graph.tensor<[1, 2, past, 64], f32>
  %r = graph.reshape %s : !graph.tensor<[1, 2, past, 64], f32> -> !graph.tensor<[2, past, 64], f32>
  %t = graph.permute %r perm = [1, 0, 2] : !graph.tensor<[2, past, 64], f32> -> !graph.tensor<[past, 2, 64], f32>
  %f = graph.reshape %t : !graph.tensor<[past, 2, 64], f32> -> !graph.tensor<[past, 128], f32>
  graph.return "f" = %f : !graph.tensor<[past, 128], f32>
}
// CHECK-LABEL: loop.kernel @copy(
// CHECK-LABEL: loop.program @movement syms ["past"] {
// CHECK:         loop.view %{{.*}} layout <384*past, [128*past, 64*past, 64, 1]> : !loop.buf<[24, 2, past, 64], f32> -> !loop.view<[1, 2, past, 64], f32>
// CHECK-NEXT:    loop.view %{{.*}} layout <384*past, [64*past, 64, 1]> : !loop.buf<[24, 2, past, 64], f32> -> !loop.view<[2, past, 64], f32>
// CHECK-NEXT:    %[[T:.*]] = loop.view %{{.*}} layout <384*past, [64, 64*past, 1]> : !loop.buf<[24, 2, past, 64], f32> -> !loop.view<[past, 2, 64], f32>
// CHECK:         loop.launch @copy(%{{.*}}, %[[T]])

// -----

// Gather checks every id before reading a row.
graph.func @gather {
  %ids = graph.input "ids" : !graph.tensor<[seq], i64>
  %t = graph.weight "t" : !graph.tensor<[100, 8], f32>
  %g = graph.gather %t, %ids : (!graph.tensor<[100, 8], f32>, !graph.tensor<[seq], i64>) -> !graph.tensor<[seq, 8], f32>
  graph.return "g" = %g : !graph.tensor<[seq, 8], f32>
}
// CHECK-LABEL: loop.kernel @gather_1(
// CHECK:         arith.cmpi sge
// CHECK:         arith.cmpi slt
// CHECK:         loop.check %{{.*}}, 1, "graph.gather: id out of range"
// CHECK:         arith.index_cast %{{.*}} : i64 to index

// -----

// Concat: one loop nest per operand, each writing its slab; a zero-length
// operand (past = 0) simply runs no iterations.
graph.func @concat {
  %a = graph.input "a" : !graph.tensor<[2, past, 4], f32>
  %b = graph.input "b" : !graph.tensor<[2, seq, 4], f32>
  %c = graph.concat %a, %b axis = 1 : (!graph.tensor<[2, past, 4], f32>, !graph.tensor<[2, seq, 4], f32>) -> !graph.tensor<[2, past + seq, 4], f32>
  graph.return "c" = %c : !graph.tensor<[2, past + seq, 4], f32>
}
// CHECK-LABEL: loop.kernel @concat_1(
// CHECK:         loop.for "p0d0"
// CHECK:         loop.for "p1d0"
// CHECK:           arith.addi %{{.*}}, %{{.*}} : index
// CHECK:           loop.store %{{.*}} strides [4*past + 4*seq, 4, 1] : f32

// -----

// Returning a view copies it into an output buffer.
graph.func @return_view {
  %x = graph.input "x" : !graph.tensor<[4, seq], f32>
  %t = graph.permute %x perm = [1, 0] : !graph.tensor<[4, seq], f32> -> !graph.tensor<[seq, 4], f32>
  graph.return "t" = %t : !graph.tensor<[seq, 4], f32>
}
// CHECK-LABEL: loop.program @return_view
// CHECK:         %[[O:.*]] = loop.buffer output "t" : !loop.buf<[seq, 4], f32>
// CHECK:         loop.launch @copy(
// CHECK:         loop.output "t" = %[[O]]

// -----

// A slice whose bounds the verifier cannot decide becomes a run-time
// requirement of the program (checked before any kernel runs).
graph.func @last_row {
  %x = graph.input "x" : !graph.tensor<[seq, 8], f32>
  %m = graph.input "m" : !graph.tensor<[m], f32>
  %l = graph.slice %x axis = 0, start = seq - 1, stop = seq : !graph.tensor<[seq, 8], f32> -> !graph.tensor<[1, 8], f32>
  %h = graph.slice %x axis = 0, start = 0, stop = m : !graph.tensor<[seq, 8], f32> -> !graph.tensor<[m, 8], f32>
  %n = graph.neg %l : !graph.tensor<[1, 8], f32>
  %k = graph.neg %h : !graph.tensor<[m, 8], f32>
  graph.return "n" = %n, "k" = %k : !graph.tensor<[1, 8], f32>, !graph.tensor<[m, 8], f32>
}
// CHECK-LABEL: loop.program @last_row syms ["m", "seq"] {
// CHECK:         loop.require seq - 1 >= 0, "graph.slice [seq - 1, seq) of axis 0 (size seq): start < 0"
// CHECK-NOT:     loop.require 1 >= 0
// CHECK:         loop.require -m + seq >= 0, "graph.slice [0, m) of axis 0 (size seq): stop past the end"
