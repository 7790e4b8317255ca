// apply-schedule with slp on kernel B's up projection shape: SiLU of a gate the
// kernel loads (%1, written by another kernel) stands ahead of the sum, times
// the sum after it. slp first moves the SiLU's loads and float ops after the
// k loop (only the epilogue uses them; the loads read an argument the kernel
// does not write), then runs them with the epilogue as vectors: the 6 columns
// privatize jammed make one group of 4 and a padded group whose last two
// lanes repeat the last copy (vpack of 2 values then that one twice); only
// the 6 real copies store.
// RUN: nc-opt %s -p apply-schedule | filecheck %s

builtin.module {
  loop.kernel @up(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>, %3: !loop.ptr<f32>) syms ["m"] access ["w", "r", "r", "r"] footprints [#loop.fp<[m, 6], [6, 1]>, #loop.fp<[m, 6], [6, 1]>, #loop.fp<[m, 32], [32, 1]>, #loop.fp<[6, 32], [32, 1]>] {
    %m = loop.sym "m"
    %c0 = arith.constant 0 : index
    %c6 = arith.constant 6 : index
    %c32 = arith.constant 32 : index
    loop.for "d0" %i = %c0 to %m {
      loop.for "d1" %j = %c0 to %c6 {
        %g = loop.load %1[%i, %j] strides [6, 1] : f32
        %zero = arith.constant 0.0 : f32
        %pos = arith.cmpf ole, %zero, %g : f32
        %one = arith.constant 1.0 : f32
        %neg = arith.negf %g : f32
        %arg = arith.select %pos, %neg, %g : f32
        %e = math.exp %arg : f32
        %num = arith.select %pos, %one, %e : f32
        %den = arith.addf %e, %one : f32
        %sig = arith.divf %num, %den : f32
        %silu = arith.mulf %g, %sig : f32
        %z = arith.constant 0.0 : f32
        %u = loop.for "k" %k = %c0 to %c32 lanes 16 iter(%a = %z) -> (f32) {
          %x = loop.load %2[%i, %k] strides [32, 1] : f32
          %w = loop.load %3[%j, %k] strides [32, 1] : f32
          %s = math.fma %x, %w, %a : f32
          loop.yield %s : f32
        }
        %y = arith.mulf %silu, %u : f32
        loop.store %y, %0[%i, %j] strides [6, 1] : f32
      }
    }
  }
  sched.schedule @up {
    sched.split "d1" by 6 into "d1o", "d1i"
    sched.vectorize "k" width 16
    sched.privatize "k"
    sched.slp "k" width 4
  }
}
// CHECK:      loop.for "d1o"
// CHECK-NOT:  loop.load %1[
// CHECK-NOT:  math.exp
// CHECK:      loop.for "k"
// CHECK:        loop.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[G0:[^ ]+]] = loop.load %1[
// CHECK:      loop.vpack %[[G0]], %{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}} : f32 -> vector<4xf32>
// CHECK:      math.exp %{{.*}} : vector<4xf32>
// CHECK:      loop.lanesums %{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}} : vector<16xf32> -> vector<4xf32>
// CHECK-COUNT-4: loop.store %{{.*}} : f32
// CHECK:      loop.vpack %[[A:[^,]+]], %[[B:[^,]+]], %[[B]], %[[B]] : f32 -> vector<4xf32>
// CHECK:      math.exp %{{.*}} : vector<4xf32>
// CHECK:      loop.lanesums %{{[^,]+}}, %[[S:[^,]+]], %[[S]], %[[S]] : vector<16xf32> -> vector<4xf32>
// CHECK-COUNT-2: loop.store %{{.*}} : f32
// CHECK-NOT:  loop.store
// CHECK-NOT:  math.exp %{{.*}} : f32
