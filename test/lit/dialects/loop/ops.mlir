// Every loop op prints, parses back to the same text, and survives the
// generic form: a scalar kernel (with a prefetch), a vector kernel, lanes loops (scalar and
// vectorized, with math.fma, loop.lanesum, and slp's loop.lanesums,
// loop.vpack and loop.extract), spec §5 kernel A's lanes loop
// (lanes 32, tail 8, a tree) over int8 data and its vectorized form (vector
// i8 loads, loop.vsitofp, loop.lanesum with a tree, loop.foldhalf, loop.half), the program that
// launches them and a program's requirements on its symbols.
// RUN: nc-opt %s | filecheck %s
// RUN: nc-opt %s | nc-opt | filecheck %s
// RUN: nc-opt %s --print-op-generic | nc-opt | filecheck %s
// RUN: nc-opt %s --print-op-generic | nc-opt --print-op-generic | filecheck %s --check-prefix=GENERIC

builtin.module {
  loop.kernel @scalar(%out: !loop.ptr<f32>, %a: !loop.ptr<f32>, %ids: !loop.ptr<i64>) syms ["seq"] access ["w", "r", "r"] footprints [#loop.fp<[seq, 16], [16, 1]>, #loop.fp<[seq, 16], [0, 1]>, #loop.fp<[seq], [1]>] {
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %c16 = arith.constant 16 : index
    %n = loop.sym "seq"
    loop.for "d0" %i = %c0 to %n parallel 4 {
      %id = loop.load %ids[%i] strides [1] : i64
      %zero = arith.constant 0 : i64
      %ok = arith.cmpi sge, %id, %zero : i64
      loop.check %ok, 1, "id out of range"
      %init = arith.constant 0.000000e+00 : f32
      %sum = loop.for "k" %k = %c0 to %c16 iter(%acc = %init) -> (f32) {
        %ahead = arith.addi %k, %c8 : index
        loop.prefetch %a[%i, %ahead] strides [0, 1] : f32 locality 2
        %x = loop.load %a[%i, %k] strides [0, 1] : f32
        %next = arith.addf %acc, %x : f32
        loop.yield %next : f32
      }
      loop.for "d1" %j = %c0 to %c16 step 2 attributes {note = "kept"} {
        %lo = arith.cmpi slt, %j, %c8 : index
        %v = loop.if %lo -> (f32) {
          loop.yield %sum : f32
        } else {
          loop.yield %init : f32
        }
        loop.store %v, %out[%i, %j] strides [16, 1] : f32
        loop.yield
      }
    }
  }
  loop.kernel @vector(%out: !loop.ptr<f32>, %a: !loop.ptr<f32>) syms [] access ["w", "r"] footprints [#loop.fp<[16], [1]>, #loop.fp<[16], [1]>] {
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    %zero = arith.constant 0.000000e+00 : f32
    %true = arith.constant true
    loop.for "d0" %i = %c0 to %c16 step 8 {
      %x = loop.load %a[%i] strides [1] : vector<8xf32>
      %z = loop.splat %zero : f32 -> vector<8xf32>
      %m = loop.vcmp "ole", %x, %z : vector<8xf32>
      %r = loop.vselect %m, %x, %z : vector<8xi1>, vector<8xf32>
      %s = loop.vselect %true, %r, %x : i1, vector<8xf32>
      loop.store %s, %out[%i] strides [1] : vector<8xf32>
    }
  }
  loop.kernel @lanes(%out: !loop.ptr<f32>, %a: !loop.ptr<f32>, %b: !loop.ptr<f32>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[3], [1]>, #loop.fp<[32], [1]>, #loop.fp<[32], [1]>] {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c8 = arith.constant 8 : index
    %c32 = arith.constant 32 : index
    %zero = arith.constant 0.000000e+00 : f32
    %s = loop.for "k" %k = %c0 to %c32 lanes 16 iter(%acc = %zero) -> (f32) {
      %x = loop.load %a[%k] strides [1] : f32
      %y = loop.load %b[%k] strides [1] : f32
      %f = math.fma %x, %y, %acc : f32
      loop.yield %f : f32
    }
    loop.store %s, %out[%c0] strides [1] : f32
    %u, %w = loop.for "k2" %k = %c1 to %c32 lanes 4 iter(%p = %zero, %q = %zero) -> (f32, f32) {
      %x = loop.load %a[%k] strides [1] : f32
      %p2 = arith.addf %p, %x : f32
      %q2 = arith.mulf %q, %x : f32
      loop.yield %p2, %q2 : f32, f32
    }
    loop.store %u, %out[%c1] strides [1] : f32
    %zv = loop.splat %zero : f32 -> vector<8xf32>
    %lo, %hi = loop.for "kv" %k = %c0 to %c32 step 16 iter(%l = %zv, %h = %zv) -> (vector<8xf32>, vector<8xf32>) {
      %x = loop.load %a[%k] strides [1] : vector<8xf32>
      %y = loop.load %b[%k] strides [1] : vector<8xf32>
      %l2 = math.fma %x, %y, %l : vector<8xf32>
      %k8 = arith.addi %k, %c8 : index
      %x8 = loop.load %a[%k8] strides [1] : vector<8xf32>
      %y8 = loop.load %b[%k8] strides [1] : vector<8xf32>
      %h2 = math.fma %x8, %y8, %h : vector<8xf32>
      loop.yield %l2, %h2 : vector<8xf32>, vector<8xf32>
    }
    %v = arith.addf %lo, %hi : vector<8xf32>
    %t = loop.lanesum %v : vector<8xf32> -> f32
    loop.store %t, %out[%c2] strides [1] : f32
    %sums = loop.lanesums %lo, %hi, %lo, %hi : vector<8xf32> -> vector<4xf32>
    %packed = loop.vpack %t, %zero, %t, %zero : f32 -> vector<4xf32>
    %both = arith.addf %sums, %packed : vector<4xf32>
    %lane3 = loop.extract %both[3] : vector<4xf32> -> f32
    loop.store %lane3, %out[%c1] strides [1] : f32
  }
  loop.kernel @kernel_a(%out: !loop.ptr<f32>, %a: !loop.ptr<f32>, %q: !loop.ptr<i8>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[2], [1]>, #loop.fp<[40], [1]>, #loop.fp<[40], [1]>] {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c40 = arith.constant 40 : index
    %zero = arith.constant 0.000000e+00 : f32
    %s = loop.for "k" %k = %c0 to %c40 lanes 32 tail 8 tree [3, 4, 2, 0, 1] iter(%acc = %zero) -> (f32) {
      %x = loop.load %a[%k] strides [1] : f32
      %w8 = loop.load %q[%k] strides [1] : i8
      %w = arith.sitofp %w8 : i8 to f32
      %f = math.fma %x, %w, %acc : f32
      loop.yield %f : f32
    }
    loop.store %s, %out[%c0] strides [1] : f32
    %zv = loop.splat %zero : f32 -> vector<8xf32>
    %v = loop.for "kv" %k = %c0 to %c40 step 8 iter(%l = %zv) -> (vector<8xf32>) {
      %x = loop.load %a[%k] strides [1] : vector<8xf32>
      %w8 = loop.load %q[%k] strides [1] : vector<8xi8>
      %w = loop.vsitofp %w8 : vector<8xi8> -> vector<8xf32>
      %f = math.fma %x, %w, %l : vector<8xf32>
      loop.yield %f : vector<8xf32>
    }
    %t = loop.lanesum %v tree [2, 0, 1] : vector<8xf32> -> f32
    %half = loop.foldhalf %v : vector<8xf32> -> vector<4xf32>
    %high = loop.half %v[1] : vector<8xf32> -> vector<4xf32>
    loop.store %t, %out[%c1] strides [1] : f32
  }
  loop.program @p syms ["seq"] {
    %x = loop.buffer input "x" : !loop.buf<[seq, 16], f32>
    %ids = loop.buffer input "ids" : !loop.buf<[seq], i64>
    %w = loop.buffer weight "w" : !loop.buf<[16, 16], f32>
    %wp = loop.buffer packed "w" tile 8 : !loop.buf<[2, 16, 8], f32>
    %c = loop.buffer const #graph.elements<f32: [1.0, -0.5]> : !loop.buf<[2], f32>
    %t = loop.buffer temp : !loop.buf<[16], f32>
    %y = loop.buffer output "y" : !loop.buf<[seq, 16], f32>
    %vy = loop.view %y layout <0, [16, 1]> : !loop.buf<[seq, 16], f32> -> !loop.view<[seq, 16], f32>
    %vw = loop.view %w layout <16, [0, 1]> : !loop.buf<[16, 16], f32> -> !loop.view<[seq, 16], f32>
    %vi = loop.view %ids layout <0, [1]> : !loop.buf<[seq], i64> -> !loop.view<[seq], i64>
    loop.launch @scalar(%vy, %vw, %vi) : !loop.view<[seq, 16], f32>, !loop.view<[seq, 16], f32>, !loop.view<[seq], i64>
    %vt = loop.view %t layout <0, [1]> : !loop.buf<[16], f32> -> !loop.view<[16], f32>
    %vx = loop.view %x layout <16*seq - 16, [1]> : !loop.buf<[seq, 16], f32> -> !loop.view<[16], f32>
    loop.launch @vector(%vt, %vx) : !loop.view<[16], f32>, !loop.view<[16], f32>
    loop.output "y" = %y, "x" = %x : !loop.buf<[seq, 16], f32>, !loop.buf<[seq, 16], f32>
  }
  loop.program @no_outputs syms [] {
    loop.output
  }
  loop.program @requires syms ["m", "seq"] {
    loop.require seq - 1 >= 0, "seq >= 1"
    loop.require -m + seq >= 0, "m <= seq"
    loop.output
  }
}

// CHECK-LABEL: loop.kernel @scalar(%out: !loop.ptr<f32>, %a: !loop.ptr<f32>, %ids: !loop.ptr<i64>) syms ["seq"] access ["w", "r", "r"] footprints [#loop.fp<[seq, 16], [16, 1]>, #loop.fp<[seq, 16], [0, 1]>, #loop.fp<[seq], [1]>] {
// CHECK-NEXT:    %c0 = arith.constant 0 : index
// CHECK-NEXT:    %c8 = arith.constant 8 : index
// CHECK-NEXT:    %c16 = arith.constant 16 : index
// CHECK-NEXT:    %n = loop.sym "seq"
// CHECK-NEXT:    loop.for "d0" %i = %c0 to %n parallel 4 {
// CHECK-NEXT:      %id = loop.load %ids[%i] strides [1] : i64
// CHECK-NEXT:      %zero = arith.constant 0 : i64
// CHECK-NEXT:      %ok = arith.cmpi sge, %id, %zero : i64
// CHECK-NEXT:      loop.check %ok, 1, "id out of range"
// CHECK-NEXT:      %init = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %sum = loop.for "k" %k = %c0 to %c16 iter(%acc = %init) -> (f32) {
// CHECK-NEXT:        %ahead = arith.addi %k, %c8 : index
// CHECK-NEXT:        loop.prefetch %a[%i, %ahead] strides [0, 1] : f32 locality 2
// CHECK-NEXT:        %x = loop.load %a[%i, %k] strides [0, 1] : f32
// CHECK-NEXT:        %next = arith.addf %acc, %x : f32
// CHECK-NEXT:        loop.yield %next : f32
// CHECK-NEXT:      }
// CHECK-NEXT:      loop.for "d1" %j = %c0 to %c16 step 2 attributes {note = "kept"} {
// CHECK-NEXT:        %lo = arith.cmpi slt, %j, %c8 : index
// CHECK-NEXT:        %v = loop.if %lo -> (f32) {
// CHECK-NEXT:          loop.yield %sum : f32
// CHECK-NEXT:        } else {
// CHECK-NEXT:          loop.yield %init : f32
// CHECK-NEXT:        }
// CHECK-NEXT:        loop.store %v, %out[%i, %j] strides [16, 1] : f32
// A loop without loop-carried values prints without its empty loop.yield:
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:  }

// CHECK-LABEL: loop.kernel @vector(%out: !loop.ptr<f32>, %a: !loop.ptr<f32>) syms [] access ["w", "r"] footprints [#loop.fp<[16], [1]>, #loop.fp<[16], [1]>] {
// CHECK:         loop.for "d0" %i = %c0 to %c16 step 8 {
// CHECK-NEXT:      %x = loop.load %a[%i] strides [1] : vector<8xf32>
// CHECK-NEXT:      %z = loop.splat %zero : f32 -> vector<8xf32>
// CHECK-NEXT:      %m = loop.vcmp "ole", %x, %z : vector<8xf32>
// CHECK-NEXT:      %r = loop.vselect %m, %x, %z : vector<8xi1>, vector<8xf32>
// CHECK-NEXT:      %s = loop.vselect %true, %r, %x : i1, vector<8xf32>
// CHECK-NEXT:      loop.store %s, %out[%i] strides [1] : vector<8xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }

// CHECK-LABEL: loop.kernel @lanes(%out: !loop.ptr<f32>, %a: !loop.ptr<f32>, %b: !loop.ptr<f32>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[3], [1]>, #loop.fp<[32], [1]>, #loop.fp<[32], [1]>] {
// CHECK:         %s = loop.for "k" %k = %c0 to %c32 lanes 16 iter(%acc = %zero) -> (f32) {
// CHECK-NEXT:      %x = loop.load %a[%k] strides [1] : f32
// CHECK-NEXT:      %y = loop.load %b[%k] strides [1] : f32
// CHECK-NEXT:      %f = math.fma %x, %y, %acc : f32
// CHECK-NEXT:      loop.yield %f : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    loop.store %s, %out[%c0] strides [1] : f32
// CHECK-NEXT:    %u, %w = loop.for "k2" %k_1 = %c1 to %c32 lanes 4 iter(%p = %zero, %q = %zero) -> (f32, f32) {
// CHECK:             loop.yield %p2, %q2 : f32, f32
// CHECK-NEXT:    }
// CHECK:         %lo, %hi = loop.for "kv" %k_2 = %c0 to %c32 step 16 iter(%l = %zv, %h = %zv) -> (vector<8xf32>, vector<8xf32>) {
// CHECK:           %l2 = math.fma %x_2, %y_1, %l : vector<8xf32>
// CHECK:           %h2 = math.fma %x8, %y8, %h : vector<8xf32>
// CHECK-NEXT:      loop.yield %l2, %h2 : vector<8xf32>, vector<8xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %v = arith.addf %lo, %hi : vector<8xf32>
// CHECK-NEXT:    %t = loop.lanesum %v : vector<8xf32> -> f32
// CHECK-NEXT:    loop.store %t, %out[%c2] strides [1] : f32
// CHECK-NEXT:    %sums = loop.lanesums %lo, %hi, %lo, %hi : vector<8xf32> -> vector<4xf32>
// CHECK-NEXT:    %packed = loop.vpack %t, %zero, %t, %zero : f32 -> vector<4xf32>
// CHECK-NEXT:    %both = arith.addf %sums, %packed : vector<4xf32>
// CHECK-NEXT:    %lane3 = loop.extract %both[3] : vector<4xf32> -> f32
// CHECK-NEXT:    loop.store %lane3, %out[%c1] strides [1] : f32
// CHECK-NEXT:  }

// CHECK-LABEL: loop.kernel @kernel_a(%out: !loop.ptr<f32>, %a: !loop.ptr<f32>, %q: !loop.ptr<i8>) syms [] access ["w", "r", "r"] footprints [#loop.fp<[2], [1]>, #loop.fp<[40], [1]>, #loop.fp<[40], [1]>] {
// CHECK:         %s = loop.for "k" %k = %c0 to %c40 lanes 32 tail 8 tree [3, 4, 2, 0, 1] iter(%acc = %zero) -> (f32) {
// CHECK-NEXT:      %x = loop.load %a[%k] strides [1] : f32
// CHECK-NEXT:      %w8 = loop.load %q[%k] strides [1] : i8
// CHECK-NEXT:      %w = arith.sitofp %w8 : i8 to f32
// CHECK-NEXT:      %f = math.fma %x, %w, %acc : f32
// CHECK-NEXT:      loop.yield %f : f32
// CHECK-NEXT:    }
// CHECK:         %v = loop.for "kv" %k_1 = %c0 to %c40 step 8 iter(%l = %zv) -> (vector<8xf32>) {
// CHECK-NEXT:      %x_1 = loop.load %a[%k_1] strides [1] : vector<8xf32>
// CHECK-NEXT:      %w8_1 = loop.load %q[%k_1] strides [1] : vector<8xi8>
// CHECK-NEXT:      %w_1 = loop.vsitofp %w8_1 : vector<8xi8> -> vector<8xf32>
// CHECK-NEXT:      %f_1 = math.fma %x_1, %w_1, %l : vector<8xf32>
// CHECK-NEXT:      loop.yield %f_1 : vector<8xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %t = loop.lanesum %v tree [2, 0, 1] : vector<8xf32> -> f32
// CHECK-NEXT:    %half = loop.foldhalf %v : vector<8xf32> -> vector<4xf32>
// CHECK-NEXT:    %high = loop.half %v[1] : vector<8xf32> -> vector<4xf32>

// CHECK-LABEL: loop.program @p syms ["seq"] {
// CHECK-NEXT:    %x = loop.buffer input "x" : !loop.buf<[seq, 16], f32>
// CHECK-NEXT:    %ids = loop.buffer input "ids" : !loop.buf<[seq], i64>
// CHECK-NEXT:    %w = loop.buffer weight "w" : !loop.buf<[16, 16], f32>
// CHECK-NEXT:    %wp = loop.buffer packed "w" tile 8 : !loop.buf<[2, 16, 8], f32>
// CHECK-NEXT:    %c = loop.buffer const #graph.elements<f32: [1.0, -0.5]> : !loop.buf<[2], f32>
// CHECK-NEXT:    %t = loop.buffer temp : !loop.buf<[16], f32>
// CHECK-NEXT:    %y = loop.buffer output "y" : !loop.buf<[seq, 16], f32>
// CHECK-NEXT:    %vy = loop.view %y layout <0, [16, 1]> : !loop.buf<[seq, 16], f32> -> !loop.view<[seq, 16], f32>
// CHECK-NEXT:    %vw = loop.view %w layout <16, [0, 1]> : !loop.buf<[16, 16], f32> -> !loop.view<[seq, 16], f32>
// CHECK-NEXT:    %vi = loop.view %ids layout <0, [1]> : !loop.buf<[seq], i64> -> !loop.view<[seq], i64>
// CHECK-NEXT:    loop.launch @scalar(%vy, %vw, %vi) : !loop.view<[seq, 16], f32>, !loop.view<[seq, 16], f32>, !loop.view<[seq], i64>
// CHECK-NEXT:    %vt = loop.view %t layout <0, [1]> : !loop.buf<[16], f32> -> !loop.view<[16], f32>
// CHECK-NEXT:    %vx = loop.view %x layout <16*seq - 16, [1]> : !loop.buf<[seq, 16], f32> -> !loop.view<[16], f32>
// CHECK-NEXT:    loop.launch @vector(%vt, %vx) : !loop.view<[16], f32>, !loop.view<[16], f32>
// CHECK-NEXT:    loop.output "y" = %y, "x" = %x : !loop.buf<[seq, 16], f32>, !loop.buf<[seq, 16], f32>
// CHECK-NEXT:  }
// CHECK-NEXT:  loop.program @no_outputs syms [] {
// CHECK-NEXT:    loop.output
// CHECK-NEXT:  }
// CHECK-NEXT:  loop.program @requires syms ["m", "seq"] {
// CHECK-NEXT:    loop.require seq - 1 >= 0, "seq >= 1"
// CHECK-NEXT:    loop.require -m + seq >= 0, "m <= seq"
// CHECK-NEXT:    loop.output
// CHECK-NEXT:  }

// GENERIC:      "loop.kernel"() <{sym_name = "scalar", syms = ["seq"], access = ["w", "r", "r"], footprints = [#loop.fp<[seq, 16], [16, 1]>, #loop.fp<[seq, 16], [0, 1]>, #loop.fp<[seq], [1]>]}> ({
// GENERIC-NEXT:   ^bb0(%out: !loop.ptr<f32>, %a: !loop.ptr<f32>, %ids: !loop.ptr<i64>):
// GENERIC:        %n = "loop.sym"() <{symbol = "seq"}> : () -> index
// GENERIC-NEXT:   "loop.for"(%c0, %n) <{name = "d0", step = #builtin.int<1>, parallel = #builtin.int<4>}> ({
// GENERIC-NEXT:   ^bb0(%i: index):
// GENERIC-NEXT:     %id = "loop.load"(%ids, %i) <{strides = [#graph.dim<1>]}> : (!loop.ptr<i64>, index) -> i64
// GENERIC:          "loop.check"(%ok) <{code = #builtin.int<1>, message = "id out of range"}> : (i1) -> ()
// GENERIC:          %sum = "loop.for"(%c0, %c16, %init) <{name = "k", step = #builtin.int<1>}> ({
// GENERIC-NEXT:     ^bb0(%k: index, %acc: f32):
// GENERIC-NEXT:       %ahead = "arith.addi"(%k, %c8) <{overflowFlags = #arith.overflow<none>}> : (index, index) -> index
// GENERIC-NEXT:       "loop.prefetch"(%a, %i, %ahead) <{strides = [#graph.dim<0>, #graph.dim<1>], locality = #builtin.int<2>}> : (!loop.ptr<f32>, index, index) -> ()
// GENERIC:            "loop.yield"(%next) : (f32) -> ()
// GENERIC-NEXT:     }) : (index, index, f32) -> f32
// GENERIC-NEXT:     "loop.for"(%c0, %c16) <{name = "d1", step = #builtin.int<2>}> ({
// GENERIC:            %v = "loop.if"(%lo) ({
// GENERIC-NEXT:         "loop.yield"(%sum) : (f32) -> ()
// GENERIC-NEXT:       }, {
// GENERIC-NEXT:         "loop.yield"(%init) : (f32) -> ()
// GENERIC-NEXT:       }) : (i1) -> f32
// GENERIC-NEXT:       "loop.store"(%v, %out, %i, %j) <{strides = [#graph.dim<16>, #graph.dim<1>]}> : (f32, !loop.ptr<f32>, index, index) -> ()
// GENERIC-NEXT:       "loop.yield"() : () -> ()
// GENERIC-NEXT:     }) {note = "kept"} : (index, index) -> ()
// GENERIC:        %z = "loop.splat"(%zero) : (f32) -> vector<8xf32>
// GENERIC-NEXT:   %m = "loop.vcmp"(%x, %z) <{predicate = "ole"}> : (vector<8xf32>, vector<8xf32>) -> vector<8xi1>
// GENERIC-NEXT:   %r = "loop.vselect"(%m, %x, %z) : (vector<8xi1>, vector<8xf32>, vector<8xf32>) -> vector<8xf32>
// GENERIC:        %s = "loop.for"(%c0, %c32, %zero) <{name = "k", step = #builtin.int<1>, lanes = #builtin.int<16>}> ({
// GENERIC-NEXT:   ^bb0(%k: index, %acc: f32):
// GENERIC:          %f = "math.fma"(%x, %y, %acc) <{fastmath = #arith.fastmath<none>}> : (f32, f32, f32) -> f32
// GENERIC:        %u, %w = "loop.for"(%c1, %c32, %zero, %zero) <{name = "k2", step = #builtin.int<1>, lanes = #builtin.int<4>}> ({
// GENERIC:          %l2 = "math.fma"(%x_2, %y_1, %l) <{fastmath = #arith.fastmath<none>}> : (vector<8xf32>, vector<8xf32>, vector<8xf32>) -> vector<8xf32>
// GENERIC:        %t = "loop.lanesum"(%v) : (vector<8xf32>) -> f32
// GENERIC:        %s = "loop.for"(%c0, %c40, %zero) <{name = "k", step = #builtin.int<1>, lanes = #builtin.int<32>, tree = [#builtin.int<3>, #builtin.int<4>, #builtin.int<2>, #builtin.int<0>, #builtin.int<1>], tail = #builtin.int<8>}> ({
// GENERIC:          %w_1 = "loop.vsitofp"(%w8_1) : (vector<8xi8>) -> vector<8xf32>
// GENERIC:        %t = "loop.lanesum"(%v) <{tree = [#builtin.int<2>, #builtin.int<0>, #builtin.int<1>]}> : (vector<8xf32>) -> f32
// GENERIC-NEXT:   %half = "loop.foldhalf"(%v) : (vector<8xf32>) -> vector<4xf32>
// GENERIC-NEXT:   %high = "loop.half"(%v) <{half = #builtin.int<1>}> : (vector<8xf32>) -> vector<4xf32>
// GENERIC:        "loop.program"() <{sym_name = "p", syms = ["seq"]}> ({
// GENERIC:          %wp = "loop.buffer"() <{kind = "packed", name = "w", tile = #builtin.int<8>}> : () -> !loop.buf<[2, 16, 8], f32>
// GENERIC-NEXT:     %c = "loop.buffer"() <{kind = "const", value = #graph.elements<f32: [1.0, -0.5]>}> : () -> !loop.buf<[2], f32>
// GENERIC-NEXT:     %t = "loop.buffer"() <{kind = "temp"}> : () -> !loop.buf<[16], f32>
// GENERIC:          %vw = "loop.view"(%w) <{layout = #loop.layout<16, [0, 1]>}> : (!loop.buf<[16, 16], f32>) -> !loop.view<[seq, 16], f32>
// GENERIC:          "loop.launch"(%vy, %vw, %vi) <{kernel = @scalar}> : (!loop.view<[seq, 16], f32>, !loop.view<[seq, 16], f32>, !loop.view<[seq], i64>) -> ()
// GENERIC:          "loop.output"(%y, %x) <{names = ["y", "x"]}> : (!loop.buf<[seq, 16], f32>, !loop.buf<[seq, 16], f32>) -> ()
// GENERIC:          "loop.output"() <{names = []}> : () -> ()
// GENERIC:        "loop.program"() <{sym_name = "requires", syms = ["m", "seq"]}> ({
// GENERIC-NEXT:     "loop.require"() <{expr = #graph.dim<seq - 1>, message = "seq >= 1"}> : () -> ()
// GENERIC-NEXT:     "loop.require"() <{expr = #graph.dim<-m + seq>, message = "m <= seq"}> : () -> ()
