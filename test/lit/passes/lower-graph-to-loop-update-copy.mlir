// lower-graph-to-loop performs update_slice in place only on a whole state
// buffer whose old value nothing reads after the update. Otherwise it copies
// the destination into a fresh temporary first (functional semantics kept):
// here @not_state updates an input that is not returned (not a state), and
// @read_after reads the state's old value after updating it.
// RUN: nc-opt %s -p lower-graph-to-loop | filecheck %s

graph.func @not_state {
  %d = graph.input "d" : !graph.tensor<[4, 3], f32>
  %u = graph.input "u" : !graph.tensor<[1, 3], f32>
  %r = graph.update_slice %d, %u offsets = [2, 0] : (!graph.tensor<[4, 3], f32>, !graph.tensor<[1, 3], f32>) -> !graph.tensor<[4, 3], f32>
  graph.return "r" = %r : !graph.tensor<[4, 3], f32>
}
// (the copy is the returned buffer itself: a returned temporary is renamed an output)
// CHECK-LABEL: loop.program @not_state
// CHECK:         loop.buffer input "d" : !loop.buf<[4, 3], f32>
// CHECK:         %[[T:.*]] = loop.buffer output "r" : !loop.buf<[4, 3], f32>
// CHECK:         loop.launch @copy(%{{.*}}, %d)
// CHECK:         %[[AT:.*]] = loop.view %[[T]] layout <6, [3, 1]> : !loop.buf<[4, 3], f32> -> !loop.view<[1, 3], f32>
// CHECK-NEXT:    loop.launch @update_slice(%[[AT]], %{{.*}})
// CHECK-NOT:     loop.require
// CHECK:         loop.output "r"

graph.func @read_after {
  %s = graph.input "s" : !graph.tensor<[4, 3], f32>
  %u = graph.input "u" : !graph.tensor<[1, 3], f32>
  %s1 = graph.update_slice %s, %u offsets = [0, 0] : (!graph.tensor<[4, 3], f32>, !graph.tensor<[1, 3], f32>) -> !graph.tensor<[4, 3], f32>
  %old = graph.exp %s : !graph.tensor<[4, 3], f32>
  graph.return "s" = %s1, "old" = %old : !graph.tensor<[4, 3], f32>, !graph.tensor<[4, 3], f32>
}
// CHECK-LABEL: loop.program @read_after
// CHECK:         %[[S:.*]] = loop.buffer state "s" : !loop.buf<[4, 3], f32>
// CHECK:         loop.buffer temp : !loop.buf<[4, 3], f32>
// CHECK:         loop.launch @copy(%{{.*}}, %s)
// CHECK:         loop.launch @update_slice(%{{.*}}, %{{.*}})
// CHECK:         loop.launch @exp(%old, %s)
// CHECK:         loop.launch @copy(%{{.*}}, %s1)
// CHECK:         loop.output "s" = %[[S]], "old" = %{{.*}}
