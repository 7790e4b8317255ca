// One case per verifier error of the sched dialect.
// RUN: nc-opt %s --split-input-file --verify-diagnostics | filecheck %s

// a directive outside a schedule
sched.unroll "d0"
// CHECK: error: 'sched.unroll' expects parent op 'sched.schedule'

// -----

// an op that is not a directive inside a schedule
sched.schedule @f {
  "test.op"() : () -> ()
}
// CHECK: error: sched.schedule @f: expected only sched directives, got test.op

// -----

// a nested kernel reference (only the generic form can write one)
"sched.schedule"() <{kernel = @m::@f}> ({
  sched.unroll "d0"
}) : () -> ()
// CHECK: error: sched.schedule @m: expected a flat kernel name, got @m::@f

// -----

// a loop named after it was split away
sched.schedule @f {
  sched.split "d1" by 32 into "d1o", "d1i"
  sched.vectorize "d1" width 8
}
// CHECK: error: sched.schedule @f: sched.vectorize names loop 'd1', but loop 'd1' was split into 'd1o', 'd1i' earlier

// -----

// a loop split twice
sched.schedule @f {
  sched.split "d1" by 32 into "d1o", "d1i"
  sched.split "d1" by 8 into "a", "b"
}
// CHECK: error: sched.schedule @f: sched.split names loop 'd1', but loop 'd1' was split into 'd1o', 'd1i' earlier

// -----

// a reorder naming a loop that was split away
sched.schedule @f {
  sched.split "d0" by 2 into "d0o", "d0i"
  sched.reorder ["d1", "d0"]
}
// CHECK: error: sched.schedule @f: sched.reorder names loop 'd0', but loop 'd0' was split into 'd0o', 'd0i' earlier

// -----

// two splits introducing the same name
sched.schedule @f {
  sched.split "d0" by 2 into "o", "d0i"
  sched.split "d1" by 8 into "o", "d1i"
}
// CHECK: error: sched.schedule @f: split of 'd1' introduces 'o', which an earlier split already introduced

// -----

// a split introducing a name used earlier
sched.schedule @f {
  sched.unroll "d1i"
  sched.split "d1" by 8 into "d1o", "d1i"
}
// CHECK: error: sched.schedule @f: split of 'd1' introduces 'd1i', a name used earlier in the schedule

// -----

// split: factor below 2
sched.schedule @f {
  sched.split "d1" by 1 into "d1o", "d1i"
}
// CHECK: error: sched.split "d1": expected a factor >= 2, got 1

// -----

// split: a negative factor
sched.schedule @f {
  sched.split "d1" by -4 into "d1o", "d1i"
}
// CHECK: error: sched.split "d1": expected a factor >= 2, got -4

// -----

// split: names not distinct
sched.schedule @f {
  sched.split "d1" by 8 into "d1x", "d1x"
}
// CHECK: error: sched.split "d1": expected three distinct names (loop, outer, inner), got ['d1', 'd1x', 'd1x']

// -----

// split: outer keeps the loop's name
sched.schedule @f {
  sched.split "d1" by 8 into "d1", "d1i"
}
// CHECK: error: sched.split "d1": expected three distinct names (loop, outer, inner), got ['d1', 'd1', 'd1i']

// -----

// split: a name that is not an identifier
sched.schedule @f {
  sched.split "d1" by 8 into "d1-o", "d1i"
}
// CHECK: error: sched.split: expected a loop name made of letters, digits and '_' (not starting with a digit), got 'd1-o'

// -----

// reorder: one loop
sched.schedule @f {
  sched.reorder ["d0"]
}
// CHECK: error: sched.reorder: expected at least 2 loops, got ['d0']

// -----

// reorder: a loop twice
sched.schedule @f {
  sched.reorder ["d0", "k", "d0"]
}
// CHECK: error: sched.reorder: expected distinct loops, got ['d0'] more than once in ['d0', 'k', 'd0']

// -----

// reorder: an empty name
sched.schedule @f {
  sched.reorder ["d0", ""]
}
// CHECK: error: sched.reorder: expected a loop name made of letters, digits and '_' (not starting with a digit), got ''

// -----

// unroll: factor below 2
sched.schedule @f {
  sched.unroll "k" by 1
}
// CHECK: error: sched.unroll "k": expected a factor >= 2 (omit it for a full unroll), got 1

// -----

// unroll: a name starting with a digit
sched.schedule @f {
  sched.unroll "0k"
}
// CHECK: error: sched.unroll: expected a loop name made of letters, digits and '_' (not starting with a digit), got '0k'

// -----

// privatize: an empty name
sched.schedule @f {
  sched.privatize ""
}
// CHECK: error: sched.privatize: expected a loop name made of letters, digits and '_' (not starting with a digit), got ''

// -----

// vectorize: a width no register has
sched.schedule @f {
  sched.vectorize "d1" width 6
}
// CHECK: error: sched.vectorize "d1": expected a width in [4, 8, 16], got 6

// -----

// vectorize: a name with a space
sched.schedule @f {
  sched.vectorize "d 1" width 8
}
// CHECK: error: sched.vectorize: expected a loop name made of letters, digits and '_' (not starting with a digit), got 'd 1'

// -----

// slp: groups of 4 copies only (an SSE vector)
sched.schedule @f {
  sched.slp "k" width 8
}
// CHECK: error: sched.slp "k": expected a width in [4], got 8

// -----

// parallel: grain 0
sched.schedule @f {
  sched.parallel "d0" grain 0
}
// CHECK: error: sched.parallel "d0": expected a grain >= 1, got 0

// -----

// parallel: a name with a dot
sched.schedule @f {
  sched.parallel "d0.o"
}
// CHECK: error: sched.parallel: expected a loop name made of letters, digits and '_' (not starting with a digit), got 'd0.o'

// -----

// pack: a negative argument index
sched.schedule @f {
  sched.pack arg -1 tile 8
}
// CHECK: error: sched.pack: expected an argument index >= 0, got -1

// -----

// pack: tile below 2
sched.schedule @f {
  sched.pack arg 1 tile 1
}
// CHECK: error: sched.pack arg 1: expected a tile >= 2, got 1

// -----

// prefetch: a locality gcc has no number for
sched.schedule @f {
  sched.prefetch arg 1 dim 2 ahead 512 locality 4
}
// CHECK: error: sched.prefetch arg 1: expected a locality in [0, 1, 2, 3], got 4

// -----

// prefetch: nothing ahead
sched.schedule @f {
  sched.prefetch arg 1 dim 2 ahead 0 locality 2
}
// CHECK: error: sched.prefetch arg 1: expected ahead >= 1, got 0

// -----

// prefetch: within an empty loop name
sched.schedule @f {
  sched.prefetch arg 1 dim 2 ahead 512 locality 2 within ""
}
// CHECK: error: sched.prefetch arg 1: expected a loop name after 'within', got an empty one (omit 'within' to prefetch before every load)

// -----

// prefetch: a loop directive after it (it would drop the prefetches)
sched.schedule @f {
  sched.prefetch arg 1 dim 2 ahead 512 locality 2
  sched.unroll "k" by 2
}
// CHECK: error: sched.schedule @f: sched.unroll follows a sched.prefetch; prefetches come last (a loop directive would drop them, a pack would move the loads)
