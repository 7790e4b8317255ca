// The Qwen2 graph at real widths, one layer, printed by the frontend and
// parsed + verified by nc-opt: the form the API compiles, its KV cache a state
// of `capacity` positions (`past` a scalar) that each layer updates, then
// attends over (positions 0 .. past + seq of the cache).
// RUN: nanocompile dump --stage graph --layers 1 | nc-opt | filecheck %s
// RUN: nanocompile dump --stage graph --layers 1 --last-only | nc-opt | filecheck %s --check-prefix=LAST

// CHECK-LABEL: graph.func @qwen2 scalars ["past"] {
// CHECK-NEXT:    %token_ids = graph.input "token_ids" : !graph.tensor<[seq], i64>
// CHECK-NEXT:    %key_cache = graph.input "key_cache" : !graph.tensor<[1, 2, capacity, 64], f32>
// CHECK-NEXT:    %value_cache = graph.input "value_cache" : !graph.tensor<[1, 2, capacity, 64], f32>
// CHECK-NEXT:    %{{.*}} = graph.weight "model.embed_tokens.weight" : !graph.tensor<[151936, 896], f32>
// CHECK:         %mask = graph.where {{.*}} -> !graph.tensor<[seq, past + seq], f32>
// CHECK:         graph.weight "model.layers.0.self_attn.q_proj.weight" : !graph.tensor<[896, 896], f32>
// CHECK:         graph.weight "model.layers.0.self_attn.k_proj.weight" : !graph.tensor<[128, 896], f32>
// CHECK:         %[[K1:.*]] = graph.update_slice %key_cache, %{{.*}} offsets = [0, 0, past, 0] : (!graph.tensor<[1, 2, capacity, 64], f32>, !graph.tensor<[1, 2, seq, 64], f32>) -> !graph.tensor<[1, 2, capacity, 64], f32>
// CHECK:         %[[V1:.*]] = graph.update_slice %value_cache, %{{.*}} offsets = [0, 0, past, 0]
// CHECK:         graph.slice {{.*}} axis = 2, start = 0, stop = past + seq : !graph.tensor<[1, 2, capacity, 64], f32> -> !graph.tensor<[1, 2, past + seq, 64], f32>
// CHECK:         graph.matmul {{.*}} -> !graph.tensor<[14, seq, past + seq], f32>
// CHECK:         graph.weight "model.layers.0.mlp.down_proj.weight" : !graph.tensor<[896, 4864], f32>
// CHECK:         %logits = graph.matmul {{.*}} -> !graph.tensor<[seq, 151936], f32>
// CHECK:         graph.return "logits" = %logits, "key_cache" = %[[K1]], "value_cache" = %[[V1]] : !graph.tensor<[seq, 151936], f32>, !graph.tensor<[1, 2, capacity, 64], f32>, !graph.tensor<[1, 2, capacity, 64], f32>

// LAST:         graph.slice {{.*}} axis = 0, start = seq - 1, stop = seq : !graph.tensor<[seq, 896], f32> -> !graph.tensor<[1, 896], f32>
// LAST:         %logits = graph.matmul {{.*}} -> !graph.tensor<[1, 151936], f32>
