// Every graph op prints, parses back to the same text, and survives the
// generic form.
// RUN: nc-opt %s | filecheck %s
// RUN: nc-opt %s | nc-opt | filecheck %s
// RUN: nc-opt %s --print-op-generic | nc-opt | filecheck %s
// RUN: nc-opt %s --print-op-generic | nc-opt --print-op-generic | filecheck %s --check-prefix=GENERIC

graph.func @all_ops {
  %ids = graph.input "token_ids" : !graph.tensor<[seq], i64>
  %pk = graph.input "past_keys" : !graph.tensor<[2, past, 64], f32>
  %x = graph.input "x" : !graph.tensor<[seq, 896], f32>
  %emb = graph.weight "model.embed_tokens.weight" : !graph.tensor<[151936, 896], f32>
  %wb = graph.weight "bf" : !graph.tensor<[128, 896], bf16>
  %c = graph.const #graph.elements<f32: [0.125, -inf, 9.999999974752427e-07, -0.0]> : !graph.tensor<[2, 2], f32>
  %ci = graph.const #graph.elements<i64: [-3]> : !graph.tensor<[], i64>
  %cb = graph.const #graph.elements<bool: [true, false]> : !graph.tensor<[2], bool>
  %io = graph.iota axis = 0 : !graph.tensor<[seq], i64>
  %d = graph.dim past + seq : !graph.tensor<[], i64>
  %a = graph.add %x, %x : !graph.tensor<[seq, 896], f32>
  %s = graph.sub %a, %x : !graph.tensor<[seq, 896], f32>
  %m = graph.mul %s, %x : !graph.tensor<[seq, 896], f32>
  %q = graph.div %m, %x : !graph.tensor<[seq, 896], f32>
  %le = graph.less_equal %io, %io : !graph.tensor<[seq], i64> -> !graph.tensor<[seq], bool>
  %w = graph.where %le, %io, %io : (!graph.tensor<[seq], bool>, !graph.tensor<[seq], i64>, !graph.tensor<[seq], i64>) -> !graph.tensor<[seq], i64>
  %n = graph.neg %q : !graph.tensor<[seq, 896], f32>
  %e = graph.exp %n : !graph.tensor<[seq, 896], f32>
  %sq = graph.sqrt %e : !graph.tensor<[seq, 896], f32>
  %r = graph.reciprocal %sq : !graph.tensor<[seq, 896], f32>
  %sn = graph.sin %r : !graph.tensor<[seq, 896], f32>
  %cs = graph.cos %sn : !graph.tensor<[seq, 896], f32>
  %f = graph.cast %io : !graph.tensor<[seq], i64> -> !graph.tensor<[seq], f32>
  %wf = graph.cast %wb : !graph.tensor<[128, 896], bf16> -> !graph.tensor<[128, 896], f32>
  %rs = graph.reduce_sum %cs axis = 1 : !graph.tensor<[seq, 896], f32> -> !graph.tensor<[seq, 1], f32>
  %rm = graph.reduce_max %cs axis = 1 : !graph.tensor<[seq, 896], f32> -> !graph.tensor<[seq, 1], f32>
  %ro = graph.reduce_sum %cs axis = 1, order = "sequential" : !graph.tensor<[seq, 896], f32> -> !graph.tensor<[seq, 1], f32>
  %rd = graph.round %cs : !graph.tensor<[seq, 896], f32>
  %rh = graph.reshape %cs : !graph.tensor<[seq, 896], f32> -> !graph.tensor<[seq, 14, 64], f32>
  %pm = graph.permute %rh perm = [1, 0, 2] : !graph.tensor<[seq, 14, 64], f32> -> !graph.tensor<[14, seq, 64], f32>
  %bc = graph.broadcast %rs : !graph.tensor<[seq, 1], f32> -> !graph.tensor<[seq, 896], f32>
  %sl = graph.slice %x axis = 0, start = seq - 1, stop = seq : !graph.tensor<[seq, 896], f32> -> !graph.tensor<[1, 896], f32>
  %new = graph.reshape %sl : !graph.tensor<[1, 896], f32> -> !graph.tensor<[14, 1, 64], f32>
  %kk = graph.concat %pk, %pk axis = 1 : (!graph.tensor<[2, past, 64], f32>, !graph.tensor<[2, past, 64], f32>) -> !graph.tensor<[2, 2*past, 64], f32>
  %wt = graph.permute %wf perm = [1, 0] : !graph.tensor<[128, 896], f32> -> !graph.tensor<[896, 128], f32>
  %mm = graph.matmul %x, %wt : (!graph.tensor<[seq, 896], f32>, !graph.tensor<[896, 128], f32>) -> !graph.tensor<[seq, 128], f32>
  %mo = graph.matmul %x, %wt order = "blocks32" : (!graph.tensor<[seq, 896], f32>, !graph.tensor<[896, 128], f32>) -> !graph.tensor<[seq, 128], f32>
  %xq = graph.cast %rd : !graph.tensor<[seq, 896], f32> -> !graph.tensor<[seq, 896], i8>
  %xs = graph.input "xs" : !graph.tensor<[seq, 28], f32>
  %w8 = graph.weight "w8" : !graph.tensor<[128, 896], i8>
  %w8t = graph.permute %w8 perm = [1, 0] : !graph.tensor<[128, 896], i8> -> !graph.tensor<[896, 128], i8>
  %mi = graph.matmul_i8 %xq, %xs, %w8t : (!graph.tensor<[seq, 896], i8>, !graph.tensor<[seq, 28], f32>, !graph.tensor<[896, 128], i8>) -> !graph.tensor<[seq, 128], f32>
  %g = graph.gather %emb, %ids : (!graph.tensor<[151936, 896], f32>, !graph.tensor<[seq], i64>) -> !graph.tensor<[seq, 896], f32>
  graph.return "out" = %mm, "h" = %g : !graph.tensor<[seq, 128], f32>, !graph.tensor<[seq, 896], f32>
}

// CHECK-LABEL: graph.func @all_ops {
// CHECK-NEXT:    %ids = graph.input "token_ids" : !graph.tensor<[seq], i64>
// CHECK-NEXT:    %pk = graph.input "past_keys" : !graph.tensor<[2, past, 64], f32>
// CHECK-NEXT:    %x = graph.input "x" : !graph.tensor<[seq, 896], f32>
// CHECK-NEXT:    %emb = graph.weight "model.embed_tokens.weight" : !graph.tensor<[151936, 896], f32>
// CHECK-NEXT:    %wb = graph.weight "bf" : !graph.tensor<[128, 896], bf16>
// CHECK-NEXT:    %c = graph.const #graph.elements<f32: [0.125, -inf, 9.999999974752427e-07, -0.0]> : !graph.tensor<[2, 2], f32>
// CHECK-NEXT:    %ci = graph.const #graph.elements<i64: [-3]> : !graph.tensor<[], i64>
// CHECK-NEXT:    %cb = graph.const #graph.elements<bool: [true, false]> : !graph.tensor<[2], bool>
// CHECK-NEXT:    %io = graph.iota axis = 0 : !graph.tensor<[seq], i64>
// CHECK-NEXT:    %d = graph.dim past + seq : !graph.tensor<[], i64>
// CHECK-NEXT:    %a = graph.add %x, %x : !graph.tensor<[seq, 896], f32>
// CHECK-NEXT:    %s = graph.sub %a, %x : !graph.tensor<[seq, 896], f32>
// CHECK-NEXT:    %m = graph.mul %s, %x : !graph.tensor<[seq, 896], f32>
// CHECK-NEXT:    %q = graph.div %m, %x : !graph.tensor<[seq, 896], f32>
// CHECK-NEXT:    %le = graph.less_equal %io, %io : !graph.tensor<[seq], i64> -> !graph.tensor<[seq], bool>
// CHECK-NEXT:    %w = graph.where %le, %io, %io : (!graph.tensor<[seq], bool>, !graph.tensor<[seq], i64>, !graph.tensor<[seq], i64>) -> !graph.tensor<[seq], i64>
// CHECK-NEXT:    %n = graph.neg %q : !graph.tensor<[seq, 896], f32>
// CHECK-NEXT:    %e = graph.exp %n : !graph.tensor<[seq, 896], f32>
// CHECK-NEXT:    %sq = graph.sqrt %e : !graph.tensor<[seq, 896], f32>
// CHECK-NEXT:    %r = graph.reciprocal %sq : !graph.tensor<[seq, 896], f32>
// CHECK-NEXT:    %sn = graph.sin %r : !graph.tensor<[seq, 896], f32>
// CHECK-NEXT:    %cs = graph.cos %sn : !graph.tensor<[seq, 896], f32>
// CHECK-NEXT:    %f = graph.cast %io : !graph.tensor<[seq], i64> -> !graph.tensor<[seq], f32>
// CHECK-NEXT:    %wf = graph.cast %wb : !graph.tensor<[128, 896], bf16> -> !graph.tensor<[128, 896], f32>
// CHECK-NEXT:    %rs = graph.reduce_sum %cs axis = 1 : !graph.tensor<[seq, 896], f32> -> !graph.tensor<[seq, 1], f32>
// CHECK-NEXT:    %rm = graph.reduce_max %cs axis = 1 : !graph.tensor<[seq, 896], f32> -> !graph.tensor<[seq, 1], f32>
// CHECK-NEXT:    %ro = graph.reduce_sum %cs axis = 1, order = "sequential" : !graph.tensor<[seq, 896], f32> -> !graph.tensor<[seq, 1], f32>
// CHECK-NEXT:    %rd = graph.round %cs : !graph.tensor<[seq, 896], f32>
// CHECK-NEXT:    %rh = graph.reshape %cs : !graph.tensor<[seq, 896], f32> -> !graph.tensor<[seq, 14, 64], f32>
// CHECK-NEXT:    %pm = graph.permute %rh perm = [1, 0, 2] : !graph.tensor<[seq, 14, 64], f32> -> !graph.tensor<[14, seq, 64], f32>
// CHECK-NEXT:    %bc = graph.broadcast %rs : !graph.tensor<[seq, 1], f32> -> !graph.tensor<[seq, 896], f32>
// CHECK-NEXT:    %sl = graph.slice %x axis = 0, start = seq - 1, stop = seq : !graph.tensor<[seq, 896], f32> -> !graph.tensor<[1, 896], f32>
// CHECK-NEXT:    %new = graph.reshape %sl : !graph.tensor<[1, 896], f32> -> !graph.tensor<[14, 1, 64], f32>
// CHECK-NEXT:    %kk = graph.concat %pk, %pk axis = 1 : !graph.tensor<[2, past, 64], f32> -> !graph.tensor<[2, 2*past, 64], f32>
// CHECK-NEXT:    %wt = graph.permute %wf perm = [1, 0] : !graph.tensor<[128, 896], f32> -> !graph.tensor<[896, 128], f32>
// CHECK-NEXT:    %mm = graph.matmul %x, %wt : (!graph.tensor<[seq, 896], f32>, !graph.tensor<[896, 128], f32>) -> !graph.tensor<[seq, 128], f32>
// CHECK-NEXT:    %mo = graph.matmul %x, %wt order = "blocks32" : (!graph.tensor<[seq, 896], f32>, !graph.tensor<[896, 128], f32>) -> !graph.tensor<[seq, 128], f32>
// CHECK-NEXT:    %xq = graph.cast %rd : !graph.tensor<[seq, 896], f32> -> !graph.tensor<[seq, 896], i8>
// CHECK-NEXT:    %xs = graph.input "xs" : !graph.tensor<[seq, 28], f32>
// CHECK-NEXT:    %w8 = graph.weight "w8" : !graph.tensor<[128, 896], i8>
// CHECK-NEXT:    %w8t = graph.permute %w8 perm = [1, 0] : !graph.tensor<[128, 896], i8> -> !graph.tensor<[896, 128], i8>
// CHECK-NEXT:    %mi = graph.matmul_i8 %xq, %xs, %w8t : (!graph.tensor<[seq, 896], i8>, !graph.tensor<[seq, 28], f32>, !graph.tensor<[896, 128], i8>) -> !graph.tensor<[seq, 128], f32>
// CHECK-NEXT:    %g = graph.gather %emb, %ids : (!graph.tensor<[151936, 896], f32>, !graph.tensor<[seq], i64>) -> !graph.tensor<[seq, 896], f32>
// CHECK-NEXT:    graph.return "out" = %mm, "h" = %g : !graph.tensor<[seq, 128], f32>, !graph.tensor<[seq, 896], f32>
// CHECK-NEXT:  }

// GENERIC:      "graph.func"() <{sym_name = "all_ops"}> ({
// GENERIC-NEXT:   %ids = "graph.input"() <{name = "token_ids"}> : () -> !graph.tensor<[seq], i64>
// GENERIC:        %c = "graph.const"() <{value = #graph.elements<f32: [0.125, -inf, 9.999999974752427e-07, -0.0]>}> : () -> !graph.tensor<[2, 2], f32>
// GENERIC:        %io = "graph.iota"() <{axis = #builtin.int<0>}> : () -> !graph.tensor<[seq], i64>
// GENERIC:        %d = "graph.dim"() <{expr = #graph.dim<past + seq>}> : () -> !graph.tensor<[], i64>
// GENERIC:        %a = "graph.add"(%x, %x) : (!graph.tensor<[seq, 896], f32>, !graph.tensor<[seq, 896], f32>) -> !graph.tensor<[seq, 896], f32>
// GENERIC:        %ro = "graph.reduce_sum"(%cs) <{axis = #builtin.int<1>, order = "sequential"}>
// GENERIC:        %rd = "graph.round"(%cs) : (!graph.tensor<[seq, 896], f32>) -> !graph.tensor<[seq, 896], f32>
// GENERIC:        %pm = "graph.permute"(%rh) <{perm = [#builtin.int<1>, #builtin.int<0>, #builtin.int<2>]}>
// GENERIC:        %sl = "graph.slice"(%x) <{axis = #builtin.int<0>, start = #graph.dim<seq - 1>, stop = #graph.dim<seq>}>
// GENERIC:        %kk = "graph.concat"(%pk, %pk) <{axis = #builtin.int<1>}>
// GENERIC:        %mo = "graph.matmul"(%x, %wt) <{order = "blocks32"}>
// GENERIC:        %mi = "graph.matmul_i8"(%xq, %xs, %w8t) : (!graph.tensor<[seq, 896], i8>, !graph.tensor<[seq, 28], f32>, !graph.tensor<[896, 128], i8>) -> !graph.tensor<[seq, 128], f32>
// GENERIC:        "graph.return"(%mm, %g) <{names = ["out", "h"]}>

// A graph with a scalar symbol (bound by the caller, not by a shape) and a
// state updated by update_slice (issue 19's KV cache).
graph.func @cache scalars ["past"] {
  %kc = graph.input "key_cache" : !graph.tensor<[2, 2, capacity, 64], f32>
  %k = graph.input "k" : !graph.tensor<[1, 2, seq, 64], f32>
  %k1 = graph.update_slice %kc, %k offsets = [1, 0, past, 0] : (!graph.tensor<[2, 2, capacity, 64], f32>, !graph.tensor<[1, 2, seq, 64], f32>) -> !graph.tensor<[2, 2, capacity, 64], f32>
  graph.return "key_cache" = %k1 : !graph.tensor<[2, 2, capacity, 64], f32>
}
// CHECK-LABEL: graph.func @cache scalars ["past"] {
// CHECK-NEXT:    %kc = graph.input "key_cache" : !graph.tensor<[2, 2, capacity, 64], f32>
// CHECK-NEXT:    %k = graph.input "k" : !graph.tensor<[1, 2, seq, 64], f32>
// CHECK-NEXT:    %k1 = graph.update_slice %kc, %k offsets = [1, 0, past, 0] : (!graph.tensor<[2, 2, capacity, 64], f32>, !graph.tensor<[1, 2, seq, 64], f32>) -> !graph.tensor<[2, 2, capacity, 64], f32>
// CHECK-NEXT:    graph.return "key_cache" = %k1 : !graph.tensor<[2, 2, capacity, 64], f32>
// GENERIC:      "graph.func"() <{sym_name = "cache", scalars = ["past"]}> ({
// GENERIC:        %k1 = "graph.update_slice"(%kc, %k) <{offsets = [#graph.dim<1>, #graph.dim<0>, #graph.dim<past>, #graph.dim<0>]}>
