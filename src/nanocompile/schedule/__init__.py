"""Schedule primitives: loop transformations on ``loop.kernel`` IR.

Each primitive is a plain function with numbered preconditions; when one
fails it raises a ``ScheduleError`` subclass naming it and leaves the IR
untouched. The ``apply-schedule`` pass applies ``sched.schedule`` ops with
them.
"""
