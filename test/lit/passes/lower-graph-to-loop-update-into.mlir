// A kernel whose result only feeds an in-place update_slice (through a reshape
// strides can say) stores it straight into that block of the state: no
// temporary, no copy kernel (here the exp region of `fuse` writes the cache
// at [0, 0, past, 0] through the cache's strides).
// RUN: nc-opt %s -p fuse,lower-graph-to-loop | filecheck %s

graph.func @into scalars ["past"] {
  %x = graph.input "x" : !graph.tensor<[2, seq, 4], f32>
  %kc = graph.input "kc" : !graph.tensor<[1, 2, capacity, 4], f32>
  %e = graph.exp %x : !graph.tensor<[2, seq, 4], f32>
  %r = graph.reshape %e : !graph.tensor<[2, seq, 4], f32> -> !graph.tensor<[1, 2, seq, 4], f32>
  %k1 = graph.update_slice %kc, %r offsets = [0, 0, past, 0] : (!graph.tensor<[1, 2, capacity, 4], f32>, !graph.tensor<[1, 2, seq, 4], f32>) -> !graph.tensor<[1, 2, capacity, 4], f32>
  graph.return "kc" = %k1 : !graph.tensor<[1, 2, capacity, 4], f32>
}
// CHECK:      loop.kernel @fused_exp(%{{.*}}: !loop.ptr<f32>, %{{.*}}: !loop.ptr<f32>) syms ["capacity", "past", "seq"] access ["w", "r"] footprints [#loop.fp<[2, seq, 4], [4*capacity, 4, 1]>, #loop.fp<[2, seq, 4], [4*seq, 4, 1]>]
// CHECK-NOT:  loop.kernel @update_slice
// CHECK:      %[[KC:.*]] = loop.buffer state "kc" : !loop.buf<[1, 2, capacity, 4], f32>
// CHECK-NOT:  loop.buffer temp
// CHECK:      loop.require capacity - past - seq >= 0, "graph.update_slice at [0, 0, past, 0]: axis 2 past the end"
// CHECK:      %[[AT:.*]] = loop.view %[[KC]] layout <4*past, [4*capacity, 4, 1]> : !loop.buf<[1, 2, capacity, 4], f32> -> !loop.view<[2, seq, 4], f32>
// CHECK-NEXT: loop.launch @fused_exp(%[[AT]], %x)
// CHECK-NOT:  loop.launch
// CHECK:      loop.output "kc" = %[[KC]]
