// Every sched op prints, parses back to the same text, and survives the
// generic form; a schedule sits next to the kernel it names.
// RUN: nc-opt %s | filecheck %s
// RUN: nc-opt %s | nc-opt | filecheck %s
// RUN: nc-opt %s --print-op-generic | nc-opt | filecheck %s
// RUN: nc-opt %s --print-op-generic | nc-opt --print-op-generic | filecheck %s --check-prefix=GENERIC

builtin.module {
  loop.kernel @matmul(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[2, 3], [3, 1]>, #loop.fp<[2, 4], [4, 1]>, #loop.fp<[4, 3], [3, 1]>] {
    %c0 = arith.constant 0 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c4 = arith.constant 4 : index
    loop.for "d0" %i = %c0 to %c2 {
      loop.for "d1" %j = %c0 to %c3 {
        %z = arith.constant 0.000000e+00 : f32
        %s = loop.for "k" %k = %c0 to %c4 iter(%acc = %z) -> (f32) {
          %a = loop.load %1[%i, %k] strides [4, 1] : f32
          %b = loop.load %2[%k, %j] strides [3, 1] : f32
          %p = arith.mulf %a, %b : f32
          %q = arith.addf %acc, %p : f32
          loop.yield %q : f32
        }
        loop.store %s, %0[%i, %j] strides [3, 1] : f32
      }
    }
  }
  sched.schedule @matmul {
    sched.split "d1" by 32 into "d1o", "d1i"
    sched.split "d0" by 2 into "d0o", "d0i"
    sched.reorder ["d0o", "d1o", "k", "d0i", "d1i"]
    sched.privatize "k"
    sched.unroll "d0i"
    sched.unroll "k" by 4
    sched.vectorize "d1i" width 8
    sched.parallel "d1o" grain 4
    sched.pack arg 2 tile 8
  }
  sched.schedule @row_kernel attributes {tuned = "by hand"} {
    sched.split "d1o" by 2 into "d1oo", "d1oi"
    sched.split "d1oo" by 2 into "p0d0", "p0_d1"
    sched.vectorize "d1oi" width 16 {note = "avx512"}
    sched.vectorize "p0_d1" width 4
    sched.slp "k" width 4
    sched.parallel "d0"
    sched.parallel "d2" grain 1
    sched.pack arg 0 tile 2
    sched.prefetch arg 1 dim 2 ahead 512 locality 2
    sched.prefetch arg 1 dim 2 ahead 64 locality 3 within "d0_tail"
  }
  sched.schedule @unscheduled {
  }
}

// CHECK:       loop.kernel @matmul(
// CHECK:       sched.schedule @matmul {
// CHECK-NEXT:    sched.split "d1" by 32 into "d1o", "d1i"
// CHECK-NEXT:    sched.split "d0" by 2 into "d0o", "d0i"
// CHECK-NEXT:    sched.reorder ["d0o", "d1o", "k", "d0i", "d1i"]
// CHECK-NEXT:    sched.privatize "k"
// CHECK-NEXT:    sched.unroll "d0i"
// CHECK-NEXT:    sched.unroll "k" by 4
// CHECK-NEXT:    sched.vectorize "d1i" width 8
// CHECK-NEXT:    sched.parallel "d1o" grain 4
// CHECK-NEXT:    sched.pack arg 2 tile 8
// CHECK-NEXT:  }
// CHECK-NEXT:  sched.schedule @row_kernel attributes {tuned = "by hand"} {
// CHECK-NEXT:    sched.split "d1o" by 2 into "d1oo", "d1oi"
// CHECK-NEXT:    sched.split "d1oo" by 2 into "p0d0", "p0_d1"
// CHECK-NEXT:    sched.vectorize "d1oi" width 16 {note = "avx512"}
// CHECK-NEXT:    sched.vectorize "p0_d1" width 4
// CHECK-NEXT:    sched.slp "k" width 4
// CHECK-NEXT:    sched.parallel "d0"
// The default grain prints as nothing, so `grain 1` reads back without it:
// CHECK-NEXT:    sched.parallel "d2"
// CHECK-NEXT:    sched.pack arg 0 tile 2
// CHECK-NEXT:    sched.prefetch arg 1 dim 2 ahead 512 locality 2
// CHECK-NEXT:    sched.prefetch arg 1 dim 2 ahead 64 locality 3 within "d0_tail"
// CHECK-NEXT:  }
// CHECK-NEXT:  sched.schedule @unscheduled {
// CHECK-NEXT:  }

// GENERIC:      "sched.schedule"() <{kernel = @matmul}> ({
// GENERIC-NEXT:   "sched.split"() <{loop = "d1", factor = 32 : i64, outer = "d1o", inner = "d1i"}> : () -> ()
// GENERIC-NEXT:   "sched.split"() <{loop = "d0", factor = 2 : i64, outer = "d0o", inner = "d0i"}> : () -> ()
// GENERIC-NEXT:   "sched.reorder"() <{loops = ["d0o", "d1o", "k", "d0i", "d1i"]}> : () -> ()
// GENERIC-NEXT:   "sched.privatize"() <{loop = "k"}> : () -> ()
// GENERIC-NEXT:   "sched.unroll"() <{loop = "d0i"}> : () -> ()
// GENERIC-NEXT:   "sched.unroll"() <{loop = "k", factor = 4 : i64}> : () -> ()
// GENERIC-NEXT:   "sched.vectorize"() <{loop = "d1i", width = 8 : i64}> : () -> ()
// GENERIC-NEXT:   "sched.parallel"() <{loop = "d1o", grain = 4 : i64}> : () -> ()
// GENERIC-NEXT:   "sched.pack"() <{arg = 2 : i64, tile = 8 : i64}> : () -> ()
// GENERIC-NEXT: }) : () -> ()
// GENERIC-NEXT: "sched.schedule"() <{kernel = @row_kernel}> ({
// GENERIC:        "sched.vectorize"() <{loop = "d1oi", width = 16 : i64}> {note = "avx512"} : () -> ()
// GENERIC:        "sched.slp"() <{loop = "k", width = 4 : i64}> : () -> ()
// GENERIC-NEXT:   "sched.parallel"() <{loop = "d0", grain = 1 : i64}> : () -> ()
// GENERIC-NEXT:   "sched.parallel"() <{loop = "d2", grain = 1 : i64}> : () -> ()
// GENERIC-NEXT:   "sched.pack"() <{arg = 0 : i64, tile = 2 : i64}> : () -> ()
// GENERIC-NEXT:   "sched.prefetch"() <{arg = 1 : i64, dim = 2 : i64, ahead = 512 : i64, locality = 2 : i64}> : () -> ()
// GENERIC-NEXT:   "sched.prefetch"() <{arg = 1 : i64, dim = 2 : i64, ahead = 64 : i64, locality = 3 : i64, within = "d0_tail"}> : () -> ()
// GENERIC:      }) {tuned = "by hand"} : () -> ()
// GENERIC-NEXT: "sched.schedule"() <{kernel = @unscheduled}> ({
// GENERIC-NEXT:   ^bb0:
// GENERIC-NEXT: }) : () -> ()
