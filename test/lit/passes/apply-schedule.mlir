// apply-schedule: sched.parallel marks a loop to run on the thread pool; a
// directive whose precondition fails stops the pass with the reason.
// RUN: nc-opt %s --split-input-file -p apply-schedule | filecheck %s
// RUN: nc-opt %s --split-input-file -p apply-schedule -t c | filecheck %s --check-prefix=C

builtin.module {
  loop.kernel @k(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>) syms ["n"] access ["w", "r"] footprints [#loop.fp<[n, 4], [4, 1]>, #loop.fp<[n, 4], [4, 1]>] {
    %n = loop.sym "n"
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    loop.for "d0" %i = %c0 to %n {
      loop.for "d1" %j = %c0 to %c4 {
        %a = loop.load %1[%i, %j] strides [4, 1] : f32
        %e = math.exp %a : f32
        loop.store %e, %0[%i, %j] strides [4, 1] : f32
      }
    }
  }
  sched.schedule @k {
    sched.parallel "d0" grain 16
  }
}
// CHECK:      loop.for "d0" %{{.*}} = %{{.*}} to %{{.*}} parallel 16 {
// CHECK-NEXT:   loop.for "d1"
// CHECK-NOT:  sched.
// C:          static void nck_k_task0(void *nc_arg_, int64_t nc_b_, int64_t nc_e_) {
// C:            for (int64_t [[I:i[0-9]+]] = v1 + nc_b_; [[I]] < v1 + nc_e_; ++[[I]]) {  /* d0 (parallel) */
// C:          nc_parallel_for(v0 - v1, 16, nck_k_task0, &nc_ctx0_);
