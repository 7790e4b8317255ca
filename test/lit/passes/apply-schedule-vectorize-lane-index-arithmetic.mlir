// apply-schedule refuses to vectorize a loop whose index is scaled per lane:
// 2 * i steps by 2 from lane to lane, which no vector load can follow.
// RUN: not nc-opt %s -p apply-schedule 2>&1 | filecheck %s

builtin.module {
  loop.kernel @k(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[16], [1]>, #loop.fp<[32], [1]>, #loop.fp<[16], [1]>] {
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    %c2 = arith.constant 2 : index
    loop.for "d0" %i = %c0 to %c16 {
      %j = arith.muli %i, %c2 : index
      %x = loop.load %1[%j] strides [1] : f32
      loop.store %x, %0[%i] strides [1] : f32
    }
  }
  sched.schedule @k {
    sched.vectorize "d0" width 8
  }
}
// CHECK: apply-schedule: vectorize 'd0': arith.muli makes an index that differs per lane in a way no vector load can follow
