// lower-graph-to-loop of a matmul that states spec §5 kernel A's order
// (graph.matmul ... order = "blocks32"): k over [0, K8), K8 = K - K mod 8, is
// a lanes loop of 32 lanes with a tail of 8 and the tree [3, 4, 2, 0, 1] (four
// FMA chains of 8 lanes per block of 32, the groups of 8 after the last block
// into lanes 0..7, then (c0 + c1) + (c2 + c3), v[i] + v[i + 4], (s0 + s1) +
// (s2 + s3)), each step one math.fma from +0.0; then the last K mod 8 terms one
// by one in k order, a multiply and then an add (no FMA). Unfused, the int8
// weight's exact widening is a cast kernel of its own; fused (the second RUN),
// the matmul's k loop loads the i8 weight and widens it in place (arith.sitofp):
// no kernel stores a widened copy. Matmuls of a region that state different
// orders do not share a k loop.
// RUN: nc-opt %s --split-input-file -p lower-graph-to-loop | filecheck %s
// RUN: nc-opt %s --split-input-file -p fuse,lower-graph-to-loop | filecheck %s --check-prefix=FUSED

// K = 43: whole groups of 8 up to 40, a tail of 3 terms.
graph.func @kernel_a {
  %x = graph.input "x" : !graph.tensor<[seq, 43], f32>
  %q = graph.weight "q" : !graph.tensor<[8, 43], i8>
  %s = graph.weight "scale" : !graph.tensor<[8], f32>
  %w = graph.cast %q : !graph.tensor<[8, 43], i8> -> !graph.tensor<[8, 43], f32>
  %wt = graph.permute %w perm = [1, 0] : !graph.tensor<[8, 43], f32> -> !graph.tensor<[43, 8], f32>
  %d = graph.matmul %x, %wt order = "blocks32" : (!graph.tensor<[seq, 43], f32>, !graph.tensor<[43, 8], f32>) -> !graph.tensor<[seq, 8], f32>
  %sr = graph.reshape %s : !graph.tensor<[8], f32> -> !graph.tensor<[1, 8], f32>
  %sb = graph.broadcast %sr : !graph.tensor<[1, 8], f32> -> !graph.tensor<[seq, 8], f32>
  %y = graph.mul %d, %sb : !graph.tensor<[seq, 8], f32>
  graph.return "y" = %y : !graph.tensor<[seq, 8], f32>
}
// CHECK-LABEL: loop.kernel @cast(
// CHECK:           arith.sitofp %{{.*}} : i8 to f32
// CHECK-LABEL: loop.kernel @matmul(
// CHECK-SAME:    footprints [#loop.fp<[seq, 8], [8, 1]>, #loop.fp<[seq, 43], [43, 1]>, #loop.fp<[43, 8], [1, 43]>]
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[C40:.*]] = arith.constant 40 : index
// CHECK-DAG:     %[[C41:.*]] = arith.constant 41 : index
// CHECK-DAG:     %[[C42:.*]] = arith.constant 42 : index
// CHECK:         loop.for "d0" %[[I:.*]] = %[[C0]] to %{{.*}} {
// CHECK-NEXT:      loop.for "d1" %[[J:.*]] = %[[C0]] to %{{.*}} {
// CHECK-NEXT:        %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:        %[[S:.*]] = loop.for "k" %[[K:.*]] = %[[C0]] to %[[C40]] lanes 32 tail 8 tree [3, 4, 2, 0, 1] iter(%[[ACC:.*]] = %[[Z]]) -> (f32) {
// CHECK-NEXT:          %[[A:.*]] = loop.load %1[%[[I]], %[[K]]] strides [43, 1] : f32
// CHECK-NEXT:          %[[B:.*]] = loop.load %2[%[[K]], %[[J]]] strides [1, 43] : f32
// CHECK-NEXT:          %[[F:.*]] = math.fma %[[A]], %[[B]], %[[ACC]] : f32
// CHECK-NEXT:          loop.yield %[[F]] : f32
// CHECK-NEXT:        }
// CHECK-NEXT:        %[[A40:.*]] = loop.load %1[%[[I]], %[[C40]]] strides [43, 1] : f32
// CHECK-NEXT:        %[[B40:.*]] = loop.load %2[%[[C40]], %[[J]]] strides [1, 43] : f32
// CHECK-NEXT:        %[[P40:.*]] = arith.mulf %[[A40]], %[[B40]] : f32
// CHECK-NEXT:        %[[S40:.*]] = arith.addf %[[S]], %[[P40]] : f32
// CHECK-NEXT:        %[[A41:.*]] = loop.load %1[%[[I]], %[[C41]]] strides [43, 1] : f32
// CHECK-NEXT:        %[[B41:.*]] = loop.load %2[%[[C41]], %[[J]]] strides [1, 43] : f32
// CHECK-NEXT:        %[[P41:.*]] = arith.mulf %[[A41]], %[[B41]] : f32
// CHECK-NEXT:        %[[S41:.*]] = arith.addf %[[S40]], %[[P41]] : f32
// CHECK-NEXT:        %[[A42:.*]] = loop.load %1[%[[I]], %[[C42]]] strides [43, 1] : f32
// CHECK-NEXT:        %[[B42:.*]] = loop.load %2[%[[C42]], %[[J]]] strides [1, 43] : f32
// CHECK-NEXT:        %[[P42:.*]] = arith.mulf %[[A42]], %[[B42]] : f32
// CHECK-NEXT:        %[[S42:.*]] = arith.addf %[[S41]], %[[P42]] : f32
// CHECK-NEXT:        loop.store %[[S42]], %0[%[[I]], %[[J]]] strides [8, 1] : f32
// CHECK-LABEL: loop.program @kernel_a

// FUSED-NOT:     loop.kernel @fused_cast
// FUSED-LABEL:   loop.kernel @fused_mul(
// FUSED-SAME:      %1: !loop.ptr<i8>
// FUSED-SAME:      footprints [#loop.fp<[seq, 8], [8, 1]>, #loop.fp<[43, 8], [1, 43]>, #loop.fp<[seq, 43], [43, 1]>, #loop.fp<[seq, 8], [0, 1]>]
// FUSED:           %[[S:.*]] = loop.for "k" %[[K:.*]] = %{{.*}} to %{{.*}} lanes 32 tail 8 tree [3, 4, 2, 0, 1] iter(%[[ACC:.*]] = %{{.*}}) -> (f32) {
// FUSED-NEXT:        %[[A:.*]] = loop.load %2[%{{.*}}, %[[K]]] strides [43, 1] : f32
// FUSED-NEXT:        %[[Q:.*]] = loop.load %1[%{{.*}}, %[[K]]] strides [43, 1] : i8
// FUSED-NEXT:        %[[B:.*]] = arith.sitofp %[[Q]] : i8 to f32
// FUSED-NEXT:        %[[F:.*]] = math.fma %[[A]], %[[B]], %[[ACC]] : f32
// FUSED-NEXT:        loop.yield %[[F]] : f32
// FUSED-NEXT:      }
// FUSED-COUNT-3:   arith.sitofp %{{.*}} : i8 to f32
// FUSED:           %[[D:.*]] = arith.addf %{{.*}}, %{{.*}} : f32
// FUSED-NEXT:      %[[SC:.*]] = loop.load %3[%{{.*}}, %{{.*}}] strides [0, 1] : f32
// FUSED-NEXT:      %[[Y:.*]] = arith.mulf %[[D]], %[[SC]] : f32
// FUSED-NEXT:      loop.store %[[Y]], %0
// FUSED-LABEL:   loop.program @kernel_a
// FUSED-NOT:       loop.buffer temp

// -----

// K = 5 (< 8): the lanes loop runs no iteration (its tree of +0.0 lanes is
// +0.0) and the 5 terms are the tail.
graph.func @short {
  %x = graph.input "x" : !graph.tensor<[seq, 5], f32>
  %w = graph.weight "w" : !graph.tensor<[5, 4], f32>
  %d = graph.matmul %x, %w order = "blocks32" : (!graph.tensor<[seq, 5], f32>, !graph.tensor<[5, 4], f32>) -> !graph.tensor<[seq, 4], f32>
  graph.return "y" = %d : !graph.tensor<[seq, 4], f32>
}
// CHECK-LABEL: loop.kernel @matmul(
// CHECK:         %[[C0:.*]] = arith.constant 0 : index
// CHECK:         loop.for "k" %{{.*}} = %[[C0]] to %[[C0]] lanes 32 tail 8 tree [3, 4, 2, 0, 1]
// CHECK-COUNT-5: arith.mulf
// CHECK-NOT:     arith.mulf
// CHECK:         loop.store

// -----

// gate in kernel A's order, up in the default one, fused into one region:
// each order has its own k loop ("k", then "k1").
graph.func @mixed {
  %x = graph.input "x" : !graph.tensor<[seq, 32], f32>
  %g = graph.weight "g" : !graph.tensor<[32, 4], f32>
  %u = graph.weight "u" : !graph.tensor<[32, 4], f32>
  %a = graph.matmul %x, %g order = "blocks32" : (!graph.tensor<[seq, 32], f32>, !graph.tensor<[32, 4], f32>) -> !graph.tensor<[seq, 4], f32>
  %b = graph.matmul %x, %u : (!graph.tensor<[seq, 32], f32>, !graph.tensor<[32, 4], f32>) -> !graph.tensor<[seq, 4], f32>
  %y = graph.mul %a, %b : !graph.tensor<[seq, 4], f32>
  graph.return "y" = %y : !graph.tensor<[seq, 4], f32>
}
// FUSED-LABEL: loop.kernel @fused_mul(
// FUSED:         %[[A:.*]] = loop.for "k" %{{.*}} lanes 32 tail 8 tree [3, 4, 2, 0, 1] iter(%{{[^,]*}}) -> (f32) {
// FUSED:         %[[B:.*]] = loop.for "k1" %{{.*}} lanes 16 iter(%{{[^,]*}}) -> (f32) {
// FUSED:         %{{.*}} = arith.mulf %[[A]], %[[B]] : f32
// FUSED-LABEL: loop.program @mixed
