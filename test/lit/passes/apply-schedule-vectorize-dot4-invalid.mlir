// apply-schedule refuses to vectorize 4-byte groups (loop.dot4's operands,
// apply-schedule-vectorize-dot4.mlir) read other than by loop.dot4.
// RUN: not nc-opt %s -p apply-schedule 2>&1 | filecheck %s

// Refused: the 4 bytes of a lane term read by anything but loop.dot4 (here their
// widening to f32: no 4-byte-per-lane vector form).
builtin.module {
  loop.kernel @k(%0: !loop.ptr<f32>, %1: !loop.ptr<i8>) syms [] access ["w", "r"] footprints [#loop.fp<[32], [1]>, #loop.fp<[128], [1]>] {
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %c32 = arith.constant 32 : index
    loop.for "d0" %t = %c0 to %c32 {
      %col = arith.muli %t, %c4 : index
      %x = loop.load %1[%col] strides [1] : vector<4xi8>
      %f = loop.vsitofp %x : vector<4xi8> -> vector<4xf32>
      %s = loop.lanesum %f : vector<4xf32> -> f32
      loop.store %s, %0[%t] strides [1] : f32
    }
  }
  sched.schedule @k {
    sched.vectorize "d0" width 8
  }
}
// CHECK: apply-schedule: vectorize 'd0': a lane-varying load of 4 bytes used other than by loop.dot4

