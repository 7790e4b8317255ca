// apply-schedule with slp: gate/up's epilogue (silu(g) * u, one exp and one
// division per output) over the 4 columns privatize jammed into the k loop
// runs as one vector<4xf32> computation. The 4 gate sums become one
// loop.lanesums (lane i: the halving tree of accumulator i), the 4 up sums
// another; the constants shared by all copies are splats; the SiLU's compare,
// negf, select, exp, add, divide and the two products are the same ops on
// vectors; the stores stay scalar, in the copies' order, each of its lane
// (loop.extract).
// RUN: nc-opt %s -p apply-schedule | filecheck %s

builtin.module {
  loop.kernel @gate_up(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>, %3: !loop.ptr<f32>) syms ["m"] access ["w", "r", "r", "r"] footprints [#loop.fp<[m, 8], [8, 1]>, #loop.fp<[8, 32], [32, 1]>, #loop.fp<[m, 32], [32, 1]>, #loop.fp<[8, 32], [32, 1]>] {
    %m = loop.sym "m"
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %c32 = arith.constant 32 : index
    loop.for "d0" %i = %c0 to %m {
      loop.for "d1" %j = %c0 to %c8 {
        %z0 = arith.constant 0.0 : f32
        %z1 = arith.constant 0.0 : f32
        %g, %u = loop.for "k" %k = %c0 to %c32 lanes 16 iter(%a = %z0, %b = %z1) -> (f32, f32) {
          %x = loop.load %2[%i, %k] strides [32, 1] : f32
          %wg = loop.load %1[%j, %k] strides [32, 1] : f32
          %s = math.fma %x, %wg, %a : f32
          %wu = loop.load %3[%j, %k] strides [32, 1] : f32
          %t = math.fma %x, %wu, %b : f32
          loop.yield %s, %t : f32, f32
        }
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
        %y = arith.mulf %silu, %u : f32
        loop.store %y, %0[%i, %j] strides [8, 1] : f32
      }
    }
  }
  sched.schedule @gate_up {
    sched.split "d1" by 4 into "d1o", "d1i"
    sched.vectorize "k" width 16
    sched.privatize "k"
    sched.slp "k" width 4
  }
}
// CHECK:      %[[G0:[^ ,]+]], %[[U0:[^ ,]+]], %[[G1:[^ ,]+]], %[[U1:[^ ,]+]], %[[G2:[^ ,]+]], %[[U2:[^ ,]+]], %[[G3:[^ ,]+]], %[[U3:[^ ,]+]] = loop.for "k" %{{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
// CHECK:        loop.yield
// CHECK-NEXT: }
// CHECK-NOT:  loop.lanesum %
// CHECK:      %[[ZERO:.*]] = loop.splat %{{.*}} : f32 -> vector<4xf32>
// CHECK-NEXT: %[[S:.*]] = loop.lanesums %[[G0]], %[[G1]], %[[G2]], %[[G3]] : vector<16xf32> -> vector<4xf32>
// CHECK-NEXT: %[[POS:.*]] = loop.vcmp "ole", %[[ZERO]], %[[S]] : vector<4xf32>
// CHECK-NEXT: %[[NEG:.*]] = arith.negf %[[S]] : vector<4xf32>
// CHECK-NEXT: %[[ARG:.*]] = loop.vselect %[[POS]], %[[NEG]], %[[S]] : vector<4xi1>, vector<4xf32>
// CHECK-NEXT: %[[E:.*]] = math.exp %[[ARG]] : vector<4xf32>
// CHECK-NEXT: %[[ONE:.*]] = loop.splat %{{.*}} : f32 -> vector<4xf32>
// CHECK-NEXT: %[[NUM:.*]] = loop.vselect %[[POS]], %[[ONE]], %[[E]] : vector<4xi1>, vector<4xf32>
// CHECK-NEXT: %[[DEN:.*]] = arith.addf %[[E]], %[[ONE]] : vector<4xf32>
// CHECK-NEXT: %[[SIG:.*]] = arith.divf %[[NUM]], %[[DEN]] : vector<4xf32>
// CHECK-NEXT: %[[SILU:.*]] = arith.mulf %[[S]], %[[SIG]] : vector<4xf32>
// CHECK-NEXT: %[[U:.*]] = loop.lanesums %[[U0]], %[[U1]], %[[U2]], %[[U3]] : vector<16xf32> -> vector<4xf32>
// CHECK-NEXT: %[[Y:.*]] = arith.mulf %[[SILU]], %[[U]] : vector<4xf32>
// CHECK-NEXT: %[[Y0:.*]] = loop.extract %[[Y]][0] : vector<4xf32> -> f32
// CHECK-NEXT: loop.store %[[Y0]], %0[%{{.*}}, %{{.*}}] strides [8, 1] : f32
// CHECK-NEXT: %[[Y1:.*]] = loop.extract %[[Y]][1] : vector<4xf32> -> f32
// CHECK-NEXT: loop.store %[[Y1]], %0[%{{.*}}, %{{.*}}] strides [8, 1] : f32
// CHECK-NEXT: %[[Y2:.*]] = loop.extract %[[Y]][2] : vector<4xf32> -> f32
// CHECK-NEXT: loop.store %[[Y2]], %0[%{{.*}}, %{{.*}}] strides [8, 1] : f32
// CHECK-NEXT: %[[Y3:.*]] = loop.extract %[[Y]][3] : vector<4xf32> -> f32
// CHECK-NEXT: loop.store %[[Y3]], %0[%{{.*}}, %{{.*}}] strides [8, 1] : f32
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NOT:  math.exp %{{.*}} : f32
// CHECK-NOT:  sched.
