// The Qwen2 graph at real widths, one layer, printed by the frontend and
// parsed + verified by nc-opt.
// RUN: nanocompile dump --stage graph --layers 1 | nc-opt | filecheck %s
// RUN: nanocompile dump --stage graph --layers 1 --last-only | nc-opt | filecheck %s --check-prefix=LAST

// CHECK-LABEL: graph.func @qwen2 {
// CHECK-NEXT:    %token_ids = graph.input "token_ids" : !graph.tensor<[seq], i64>
// CHECK-NEXT:    %past_keys = graph.input "past_keys" : !graph.tensor<[1, 2, past, 64], f32>
// CHECK-NEXT:    %past_values = graph.input "past_values" : !graph.tensor<[1, 2, past, 64], f32>
// CHECK-NEXT:    %{{.*}} = graph.weight "model.embed_tokens.weight" : !graph.tensor<[151936, 896], f32>
// CHECK:         %mask = graph.where {{.*}} -> !graph.tensor<[seq, past + seq], f32>
// CHECK:         graph.weight "model.layers.0.self_attn.q_proj.weight" : !graph.tensor<[896, 896], f32>
// CHECK:         graph.weight "model.layers.0.self_attn.k_proj.weight" : !graph.tensor<[128, 896], f32>
// CHECK:         graph.concat {{.*}} axis = 1 : ({{.*}}) -> !graph.tensor<[2, past + seq, 64], f32>
// CHECK:         graph.matmul {{.*}} -> !graph.tensor<[14, seq, past + seq], f32>
// CHECK:         graph.weight "model.layers.0.mlp.down_proj.weight" : !graph.tensor<[896, 4864], f32>
// CHECK:         %logits = graph.matmul {{.*}} -> !graph.tensor<[seq, 151936], f32>
// CHECK:         graph.return "logits" = %logits, "keys" = %keys, "values" = %values : !graph.tensor<[seq, 151936], f32>, !graph.tensor<[1, 2, seq, 64], f32>, !graph.tensor<[1, 2, seq, 64], f32>

// LAST:         graph.slice {{.*}} axis = 0, start = seq - 1, stop = seq : !graph.tensor<[seq, 896], f32> -> !graph.tensor<[1, 896], f32>
// LAST:         %logits = graph.matmul {{.*}} -> !graph.tensor<[1, 151936], f32>
