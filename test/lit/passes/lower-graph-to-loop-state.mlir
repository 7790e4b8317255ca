// lower-graph-to-loop on a state (an input returned under its own name and
// type: a KV cache of `capacity` positions, `past` a scalar): one `state`
// buffer that is both the input and the output; each update_slice is a copy
// kernel of the update's elements only, launched on a view of the state at the
// offsets (in place, no copy of the cache), with run-time requirements for the
// bounds the verifier could not decide; the reads after an update read the
// same buffer.
// RUN: nc-opt %s -p lower-graph-to-loop | filecheck %s

graph.func @cache scalars ["past"] {
  %new = graph.input "new" : !graph.tensor<[2, seq, 4], f32>
  %kc = graph.input "kc" : !graph.tensor<[2, 2, capacity, 4], f32>
  %n0 = graph.reshape %new : !graph.tensor<[2, seq, 4], f32> -> !graph.tensor<[1, 2, seq, 4], f32>
  %k1 = graph.update_slice %kc, %n0 offsets = [1, 0, past, 0] : (!graph.tensor<[2, 2, capacity, 4], f32>, !graph.tensor<[1, 2, seq, 4], f32>) -> !graph.tensor<[2, 2, capacity, 4], f32>
  %l1 = graph.slice %k1 axis = 0, start = 1, stop = 2 : !graph.tensor<[2, 2, capacity, 4], f32> -> !graph.tensor<[1, 2, capacity, 4], f32>
  %h = graph.slice %l1 axis = 2, start = 0, stop = past + seq : !graph.tensor<[1, 2, capacity, 4], f32> -> !graph.tensor<[1, 2, past + seq, 4], f32>
  %e = graph.exp %h : !graph.tensor<[1, 2, past + seq, 4], f32>
  graph.return "e" = %e, "kc" = %k1 : !graph.tensor<[1, 2, past + seq, 4], f32>, !graph.tensor<[2, 2, capacity, 4], f32>
}
// CHECK:      loop.kernel @update_slice(%{{.*}}: !loop.ptr<f32>, %{{.*}}: !loop.ptr<f32>) syms ["capacity", "past", "seq"] access ["w", "r"] footprints [#loop.fp<[1, 2, seq, 4], [8*capacity, 4*capacity, 4, 1]>, #loop.fp<[1, 2, seq, 4], [0, 4*seq, 4, 1]>]
// CHECK:      loop.program @cache syms ["capacity", "past", "seq"]
// CHECK:        %[[KC:.*]] = loop.buffer state "kc" : !loop.buf<[2, 2, capacity, 4], f32>
// CHECK:        loop.require capacity - past - seq >= 0, "graph.update_slice at [1, 0, past, 0]: axis 2 past the end"
// CHECK:        %[[AT:.*]] = loop.view %[[KC]] layout <8*capacity + 4*past, [8*capacity, 4*capacity, 4, 1]>
// CHECK-NEXT:   loop.launch @update_slice(%[[AT]], %{{.*}})
// CHECK-NOT:    loop.buffer temp : !loop.buf<[2, 2, capacity, 4], f32>
// CHECK:        loop.view %[[KC]] layout <8*capacity, [8*capacity, 4*capacity, 4, 1]> : !loop.buf<[2, 2, capacity, 4], f32> -> !loop.view<[1, 2, past + seq, 4], f32>
// CHECK:        loop.output "e" = %{{.*}}, "kc" = %[[KC]]
