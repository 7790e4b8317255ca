// default-schedule is the compiler's own scheduling stage: nc-opt, given the
// graph `nanocompile dump` writes for the 1-layer model, prints through the
// graph passes, lower-graph-to-loop and default-schedule the same C, byte for
// byte, as `nanocompile dump --stage c` (the compile driver). And the
// scheduled dump (the Loop IR with each kernel's chosen sched.schedule, the
// refusals as comments with --explain) is what apply-schedule turns into it.
// RUN: nanocompile dump --stage graph --layers 1 > %t.graph.mlir
// RUN: nanocompile dump --stage c --layers 1 > %t.cli.c
// RUN: nc-opt %t.graph.mlir -p cse,fold-constants,dce,fuse,lower-graph-to-loop,default-schedule -t c > %t.nc-opt.c
// RUN: cmp %t.cli.c %t.nc-opt.c
// RUN: nanocompile dump --stage scheduled --layers 1 --explain > %t.scheduled.mlir
// RUN: nc-opt %t.scheduled.mlir -p apply-schedule -t c > %t.applied.c
// RUN: cmp %t.cli.c %t.applied.c
// RUN: filecheck %s < %t.scheduled.mlir

// Whatever the host's arch: attention's context kernel runs its heads on the
// pool (with vectors, its KV heads "d0o": the query heads of one in turn, and
// the rows of values prefetched last).
// CHECK:      // @fused_gather: no candidate schedule
// CHECK:      // @fused_matmul: candidate {{[0-9]+}} of {{[0-9]+}} chosen
// CHECK:      loop.kernel @fused_matmul(
// CHECK:      sched.schedule @fused_matmul {
// CHECK:        sched.parallel "{{d0|d0o}}"
// CHECK-NEXT: {{^ *(sched.prefetch arg 1 dim 2 ahead 512 locality 2|}$)}}
