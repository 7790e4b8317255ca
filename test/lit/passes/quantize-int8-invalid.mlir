// quantize-int8's options: a bad value is one line naming the accepted ones.
// RUN: not nc-opt %s -p 'quantize-int8{kernel=c}' 2>&1 | filecheck %s --check-prefix=KERNEL
// RUN: not nc-opt %s -p 'quantize-int8{embedding=bf16}' 2>&1 | filecheck %s --check-prefix=EMBED
// RUN: not nc-opt %s -p 'quantize-int8' 2>&1 | filecheck %s --check-prefix=TAKEN
// RUN: not nc-opt %s -p 'quantize-int8{head=c}' 2>&1 | filecheck %s --check-prefix=HEAD
// RUN: not nc-opt %s -p 'quantize-int8{head=b}' 2>&1 | filecheck %s --check-prefix=HEADB
// RUN: not nc-opt %s -p 'quantize-int8{kernel=b embedding=f32 head=b}' 2>&1 | filecheck %s --check-prefix=HEADB

// KERNEL:      nc-opt: error: quantize-int8: expected kernel a or b, got 'c'
// KERNEL-NOT:  Traceback
// EMBED:       nc-opt: error: quantize-int8: expected embedding int8 or f32, got 'bf16'
// EMBED-NOT:   Traceback
// TAKEN:       nc-opt: quantize-int8: weight 'w' cannot be quantized: the graph already has a weight 'w.scale'
// TAKEN-NOT:   Traceback
// HEAD:        nc-opt: error: quantize-int8: expected head a or b, got 'c'
// HEAD-NOT:    Traceback
// HEADB:       nc-opt: error: quantize-int8: head=b (the LM head kernel B) needs kernel=b and embedding=int8
// HEADB-NOT:   Traceback

graph.func @f {
  %x = graph.input "x" : !graph.tensor<[seq, 8], f32>
  %w = graph.weight "w" : !graph.tensor<[4, 8], f32>
  %s = graph.weight "w.scale" : !graph.tensor<[4], f32>
  %wt = graph.permute %w perm = [1, 0] : !graph.tensor<[4, 8], f32> -> !graph.tensor<[8, 4], f32>
  %a = graph.matmul %x, %wt : (!graph.tensor<[seq, 8], f32>, !graph.tensor<[8, 4], f32>) -> !graph.tensor<[seq, 4], f32>
  graph.return "a" = %a, "s" = %s : !graph.tensor<[seq, 4], f32>, !graph.tensor<[4], f32>
}
