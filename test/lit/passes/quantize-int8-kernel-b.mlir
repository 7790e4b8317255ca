// quantize-int8{kernel=b} (embedding=int8, the default): spec §5 kernel B for
// the projections, W8A8 with integer dot products. The activation %h, read by
// two projections (q with a bias, k), is quantized once, right after it is
// computed: K = 40 is padded with zero columns to two blocks of 32 (zeros
// change neither a block's max|x| nor a sum), per block xs = max|x| / 127 (1.0
// for an all-zero block), xq = clamp(round(x / xs), -127, 127) as i8 (the
// padding sliced off again), offset = 128 * (block sums of xq times xs, summed
// in block order). Each projection is matmul_i8 (kernel B's total) minus the
// offset, times its row scale; a bias comes after. The tied embedding is the
// lookup f32(q[id]) * scale[id] and the LM head kernel A (blocks32): the LM
// head keeps f32 activations.
// RUN: nc-opt %s -p 'quantize-int8{kernel=b}' | filecheck %s
// RUN: nc-opt %s -p 'quantize-int8{kernel=b embedding=int8}' | filecheck %s
// RUN: nc-opt %s -p 'quantize-int8{kernel=b}' | filecheck %s --check-prefix=COUNT

graph.func @block {
  %ids = graph.input "ids" : !graph.tensor<[seq], i64>
  %e = graph.weight "embed" : !graph.tensor<[10, 40], bf16>
  %ef = graph.cast %e : !graph.tensor<[10, 40], bf16> -> !graph.tensor<[10, 40], f32>
  %h = graph.gather %ef, %ids : (!graph.tensor<[10, 40], f32>, !graph.tensor<[seq], i64>) -> !graph.tensor<[seq, 40], f32>
  %wq = graph.weight "q" : !graph.tensor<[8, 40], bf16>
  %wqf = graph.cast %wq : !graph.tensor<[8, 40], bf16> -> !graph.tensor<[8, 40], f32>
  %wqt = graph.permute %wqf perm = [1, 0] : !graph.tensor<[8, 40], f32> -> !graph.tensor<[40, 8], f32>
  %q = graph.matmul %h, %wqt : (!graph.tensor<[seq, 40], f32>, !graph.tensor<[40, 8], f32>) -> !graph.tensor<[seq, 8], f32>
  %bq = graph.weight "q.bias" : !graph.tensor<[8], f32>
  %bqr = graph.reshape %bq : !graph.tensor<[8], f32> -> !graph.tensor<[1, 8], f32>
  %bqb = graph.broadcast %bqr : !graph.tensor<[1, 8], f32> -> !graph.tensor<[seq, 8], f32>
  %qb = graph.add %q, %bqb : !graph.tensor<[seq, 8], f32>
  %wk = graph.weight "k" : !graph.tensor<[8, 40], f32>
  %wkt = graph.permute %wk perm = [1, 0] : !graph.tensor<[8, 40], f32> -> !graph.tensor<[40, 8], f32>
  %k = graph.matmul %h, %wkt : (!graph.tensor<[seq, 40], f32>, !graph.tensor<[40, 8], f32>) -> !graph.tensor<[seq, 8], f32>
  %s = graph.add %qb, %k : !graph.tensor<[seq, 8], f32>
  %et = graph.permute %ef perm = [1, 0] : !graph.tensor<[10, 40], f32> -> !graph.tensor<[40, 10], f32>
  %logits = graph.matmul %h, %et : (!graph.tensor<[seq, 40], f32>, !graph.tensor<[40, 10], f32>) -> !graph.tensor<[seq, 10], f32>
  graph.return "logits" = %logits, "s" = %s : !graph.tensor<[seq, 10], f32>, !graph.tensor<[seq, 8], f32>
}
// CHECK-LABEL: graph.func @block {
// CHECK:         %[[Q:.*]] = graph.weight "embed.int8" : !graph.tensor<[10, 40], i8>
// CHECK-NEXT:    %[[S:.*]] = graph.weight "embed.scale" : !graph.tensor<[10], f32>
// CHECK-NEXT:    %[[QF:.*]] = graph.cast %[[Q]] : !graph.tensor<[10, 40], i8> -> !graph.tensor<[10, 40], f32>
// CHECK:         %h = graph.mul
// The activation's quantization, right after %h; the tail padded to a block:
// CHECK-NEXT:    %[[Z:.*]] = graph.const #graph.elements<f32: [0.0]> : !graph.tensor<[1, 1], f32>
// CHECK-NEXT:    %[[ZB:.*]] = graph.broadcast %[[Z]] : !graph.tensor<[1, 1], f32> -> !graph.tensor<[seq, 24], f32>
// CHECK-NEXT:    %[[XP:.*]] = graph.concat %h, %[[ZB]] axis = 1 : (!graph.tensor<[seq, 40], f32>, !graph.tensor<[seq, 24], f32>) -> !graph.tensor<[seq, 64], f32>
// CHECK-NEXT:    %[[XB:.*]] = graph.reshape %[[XP]] : !graph.tensor<[seq, 64], f32> -> !graph.tensor<[seq, 2, 32], f32>
// |x| and its max per block:
// CHECK-NEXT:    %[[NEG:.*]] = graph.neg %[[XB]]
// CHECK-NEXT:    %[[LE:.*]] = graph.less_equal %[[XB]], %[[NEG]]
// CHECK-NEXT:    %[[ABS:.*]] = graph.where %[[LE]], %[[NEG]], %[[XB]]
// CHECK-NEXT:    %[[MAX:.*]] = graph.reduce_max %[[ABS]] axis = 2 : !graph.tensor<[seq, 2, 32], f32> -> !graph.tensor<[seq, 2, 1], f32>
// xs = max / 127, or 1.0 where the max is 0:
// CHECK-NEXT:    %[[C0:.*]] = graph.const #graph.elements<f32: [0.0]> : !graph.tensor<[1, 1, 1], f32>
// CHECK-NEXT:    %[[B0:.*]] = graph.broadcast %[[C0]] : !graph.tensor<[1, 1, 1], f32> -> !graph.tensor<[seq, 2, 1], f32>
// CHECK-NEXT:    %[[ZERO:.*]] = graph.less_equal %[[MAX]], %[[B0]]
// CHECK-NEXT:    %[[C1:.*]] = graph.const #graph.elements<f32: [1.0]> : !graph.tensor<[1, 1, 1], f32>
// CHECK-NEXT:    %[[B1:.*]] = graph.broadcast %[[C1]]
// CHECK-NEXT:    %[[C127:.*]] = graph.const #graph.elements<f32: [127.0]> : !graph.tensor<[1, 1, 1], f32>
// CHECK-NEXT:    %[[B127:.*]] = graph.broadcast %[[C127]]
// CHECK-NEXT:    %[[DIV:.*]] = graph.div %[[MAX]], %[[B127]] : !graph.tensor<[seq, 2, 1], f32>
// CHECK-NEXT:    %[[XS3:.*]] = graph.where %[[ZERO]], %[[B1]], %[[DIV]] : (!graph.tensor<[seq, 2, 1], bool>, !graph.tensor<[seq, 2, 1], f32>, !graph.tensor<[seq, 2, 1], f32>) -> !graph.tensor<[seq, 2, 1], f32>
// xq = clamp(round(x / xs), -127, 127), as i8:
// CHECK-NEXT:    %[[XSB:.*]] = graph.broadcast %[[XS3]] : !graph.tensor<[seq, 2, 1], f32> -> !graph.tensor<[seq, 2, 32], f32>
// CHECK-NEXT:    %[[V:.*]] = graph.div %[[XB]], %[[XSB]] : !graph.tensor<[seq, 2, 32], f32>
// CHECK-NEXT:    %[[R:.*]] = graph.round %[[V]] : !graph.tensor<[seq, 2, 32], f32>
// CHECK-NEXT:    %[[HI:.*]] = graph.const #graph.elements<f32: [127.0]>
// CHECK-NEXT:    %[[HIB:.*]] = graph.broadcast %[[HI]] : !graph.tensor<[1, 1, 1], f32> -> !graph.tensor<[seq, 2, 32], f32>
// CHECK-NEXT:    %[[LO:.*]] = graph.const #graph.elements<f32: [-127.0]>
// CHECK-NEXT:    %[[LOB:.*]] = graph.broadcast %[[LO]] : !graph.tensor<[1, 1, 1], f32> -> !graph.tensor<[seq, 2, 32], f32>
// CHECK-NEXT:    %[[LE1:.*]] = graph.less_equal %[[R]], %[[HIB]]
// CHECK-NEXT:    %[[CL1:.*]] = graph.where %[[LE1]], %[[R]], %[[HIB]]
// CHECK-NEXT:    %[[LE2:.*]] = graph.less_equal %[[LOB]], %[[CL1]]
// CHECK-NEXT:    %[[CL2:.*]] = graph.where %[[LE2]], %[[CL1]], %[[LOB]]
// CHECK-NEXT:    %[[XQ3:.*]] = graph.cast %[[CL2]] : !graph.tensor<[seq, 2, 32], f32> -> !graph.tensor<[seq, 2, 32], i8>
// CHECK-NEXT:    %[[XQP:.*]] = graph.reshape %[[XQ3]] : !graph.tensor<[seq, 2, 32], i8> -> !graph.tensor<[seq, 64], i8>
// CHECK-NEXT:    %h_q = graph.slice %[[XQP]] axis = 1, start = 0, stop = 40 : !graph.tensor<[seq, 64], i8> -> !graph.tensor<[seq, 40], i8>
// CHECK-NEXT:    %h_xs = graph.reshape %[[XS3]] : !graph.tensor<[seq, 2, 1], f32> -> !graph.tensor<[seq, 2], f32>
// offset = 128 * off, off the blocks' f32(sum xq) * xs summed in block order:
// CHECK-NEXT:    %[[XQI:.*]] = graph.cast %[[XQ3]] : !graph.tensor<[seq, 2, 32], i8> -> !graph.tensor<[seq, 2, 32], i32>
// CHECK-NEXT:    %[[BS:.*]] = graph.reduce_sum %[[XQI]] axis = 2 : !graph.tensor<[seq, 2, 32], i32> -> !graph.tensor<[seq, 2, 1], i32>
// CHECK-NEXT:    %[[BSF:.*]] = graph.cast %[[BS]] : !graph.tensor<[seq, 2, 1], i32> -> !graph.tensor<[seq, 2, 1], f32>
// CHECK-NEXT:    %[[TERMS:.*]] = graph.mul %[[BSF]], %[[XS3]] : !graph.tensor<[seq, 2, 1], f32>
// CHECK-NEXT:    %[[TR:.*]] = graph.reshape %[[TERMS]] : !graph.tensor<[seq, 2, 1], f32> -> !graph.tensor<[seq, 2], f32>
// CHECK-NEXT:    %[[OFF:.*]] = graph.reduce_sum %[[TR]] axis = 1, order = "sequential" : !graph.tensor<[seq, 2], f32> -> !graph.tensor<[seq, 1], f32>
// CHECK-NEXT:    %[[C128:.*]] = graph.const #graph.elements<f32: [128.0]> : !graph.tensor<[1, 1], f32>
// CHECK-NEXT:    %[[B128:.*]] = graph.broadcast %[[C128]] : !graph.tensor<[1, 1], f32> -> !graph.tensor<[seq, 1], f32>
// CHECK-NEXT:    %h_offset = graph.mul %[[OFF]], %[[B128]] : !graph.tensor<[seq, 1], f32>
// The q projection: int8 weights (no f32 copy, no cast), kernel B's total, the
// offset subtracted, the row scale; then the bias, as before:
// CHECK-NEXT:    %[[WQ:.*]] = graph.weight "q.int8" : !graph.tensor<[8, 40], i8>
// CHECK-NEXT:    %[[SQ:.*]] = graph.weight "q.scale" : !graph.tensor<[8], f32>
// CHECK-NEXT:    %[[WQT:.*]] = graph.permute %[[WQ]] perm = [1, 0] : !graph.tensor<[8, 40], i8> -> !graph.tensor<[40, 8], i8>
// CHECK-NEXT:    %[[TQ:.*]] = graph.matmul_i8 %h_q, %h_xs, %[[WQT]] : (!graph.tensor<[seq, 40], i8>, !graph.tensor<[seq, 2], f32>, !graph.tensor<[40, 8], i8>) -> !graph.tensor<[seq, 8], f32>
// CHECK-NEXT:    %[[OQ:.*]] = graph.broadcast %h_offset : !graph.tensor<[seq, 1], f32> -> !graph.tensor<[seq, 8], f32>
// CHECK-NEXT:    %[[DQ:.*]] = graph.sub %[[TQ]], %[[OQ]] : !graph.tensor<[seq, 8], f32>
// CHECK-NEXT:    %[[RQ:.*]] = graph.reshape %[[SQ]] : !graph.tensor<[8], f32> -> !graph.tensor<[1, 8], f32>
// CHECK-NEXT:    %[[BQ:.*]] = graph.broadcast %[[RQ]] : !graph.tensor<[1, 8], f32> -> !graph.tensor<[seq, 8], f32>
// CHECK-NEXT:    %q = graph.mul %[[DQ]], %[[BQ]] : !graph.tensor<[seq, 8], f32>
// CHECK:         %qb = graph.add %q, %bqb
// The k projection (an f32 weight) reads the same quantized activation:
// CHECK-NEXT:    %[[WK:.*]] = graph.weight "k.int8" : !graph.tensor<[8, 40], i8>
// CHECK-NEXT:    %[[SK:.*]] = graph.weight "k.scale" : !graph.tensor<[8], f32>
// CHECK-NEXT:    %[[WKT:.*]] = graph.permute %[[WK]] perm = [1, 0]
// CHECK-NEXT:    %[[TK:.*]] = graph.matmul_i8 %h_q, %h_xs, %[[WKT]]
// CHECK-NEXT:    %[[OK:.*]] = graph.broadcast %h_offset
// CHECK-NEXT:    %[[DK:.*]] = graph.sub %[[TK]], %[[OK]]
// CHECK-NEXT:    %[[RK:.*]] = graph.reshape %[[SK]]
// CHECK-NEXT:    %[[BK:.*]] = graph.broadcast %[[RK]]
// CHECK-NEXT:    %k = graph.mul %[[DK]], %[[BK]] : !graph.tensor<[seq, 8], f32>
// The LM head: kernel A on f32 activations, the int8 embedding widened.
// CHECK:         %[[ET:.*]] = graph.permute %[[QF]] perm = [1, 0] : !graph.tensor<[10, 40], f32> -> !graph.tensor<[40, 10], f32>
// CHECK-NEXT:    %[[DOT:.*]] = graph.matmul %h, %[[ET]] order = "blocks32"
// CHECK-NEXT:    %[[SR:.*]] = graph.reshape %[[S]] : !graph.tensor<[10], f32> -> !graph.tensor<[1, 10], f32>
// CHECK-NEXT:    %[[SRB:.*]] = graph.broadcast %[[SR]]
// CHECK-NEXT:    %logits = graph.mul %[[DOT]], %[[SRB]] : !graph.tensor<[seq, 10], f32>
// CHECK-NEXT:    graph.return "logits" = %logits, "s" = %s

// One quantization for the two projections (the whole output), and nothing
// reads a bf16 or f32 projection weight any more:
// COUNT-NOT:     bf16
// COUNT-COUNT-1: graph.round
// COUNT-NOT:     graph.round
// COUNT-NOT:     bf16
