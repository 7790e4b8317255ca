"""The Schedule dialect as data: records -> ops -> text -> ops -> records, and
every verifier error."""

import io

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr, SymbolRefAttr
from xdsl.dialects.test import TestOp as StrayOp
from xdsl.irdl import IRDLOperation
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from nanocompile.dialects import get_all_dialects
from nanocompile.dialects import sched as s
from nanocompile.dialects.sched import (
    Directive,
    Distribute,
    Pack,
    Parallel,
    Prefetch,
    Privatize,
    Reorder,
    ScheduleOp,
    Slp,
    Split,
    Unroll,
    Vectorize,
)

MATMUL = [
    Split("d1", 32, "d1o", "d1i"),
    Split("d0", 2, "d0o", "d0i", peel=True),
    Reorder(("d0o", "d1o", "k", "d0i", "d1i")),
    Privatize("k"),
    Unroll("d0i"),
    Unroll("k", 4),
    Vectorize("d1i", 8),
    Slp("k", 4),
    Parallel("d1o", 4),
    Parallel("d0o"),
    Pack(1, 8),
    Distribute("k"),
    Prefetch(1, 2, 512, 2),
    Prefetch(2, 0, 64, 3, "d0_tail"),
]

MATMUL_TEXT = """\
sched.schedule @fused_matmul {
  sched.split "d1" by 32 into "d1o", "d1i"
  sched.split "d0" by 2 into "d0o", "d0i" peel
  sched.reorder ["d0o", "d1o", "k", "d0i", "d1i"]
  sched.privatize "k"
  sched.unroll "d0i"
  sched.unroll "k" by 4
  sched.vectorize "d1i" width 8
  sched.slp "k" width 4
  sched.parallel "d1o" grain 4
  sched.parallel "d0o"
  sched.pack arg 1 tile 8
  sched.distribute "k"
  sched.prefetch arg 1 dim 2 ahead 512 locality 2
  sched.prefetch arg 2 dim 0 ahead 64 locality 3 within "d0_tail"
}"""


def _context() -> Context:
    ctx = Context()
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    return ctx


def _parse(text: str) -> ModuleOp:
    from xdsl.parser import Parser

    module = Parser(_context(), text).parse_module()
    module.verify()
    return module


def _generic(op: IRDLOperation) -> str:
    buf = io.StringIO()
    Printer(stream=buf, print_generic_format=True).print_op(op)
    return buf.getvalue()


def _schedules(module: ModuleOp) -> list[ScheduleOp]:
    return [op for op in module.ops if isinstance(op, ScheduleOp)]


def test_records_print_as_the_design_text() -> None:
    schedule = ScheduleOp.from_directives("fused_matmul", MATMUL)
    schedule.verify()
    assert str(schedule) == MATMUL_TEXT


def test_records_text_records_round_trip() -> None:
    schedule = ScheduleOp.from_directives("fused_matmul", MATMUL)
    (back,) = _schedules(_parse(str(ModuleOp([schedule]))))
    assert back.kernel_name == "fused_matmul"
    assert back.directives() == MATMUL
    assert str(back) == MATMUL_TEXT


def test_generic_form_round_trips() -> None:
    module = ModuleOp([ScheduleOp.from_directives("fused_matmul", MATMUL)])
    text = _generic(module)
    assert '"sched.split"() <{loop = "d1", factor = 32 : i64' in text
    (back,) = _schedules(_parse(text))
    assert back.directives() == MATMUL
    assert _generic(_parse(text)) == text


def test_empty_schedule_round_trips() -> None:
    empty = ScheduleOp.from_directives("copy", [])
    empty.verify()
    assert str(empty) == "sched.schedule @copy {\n}"
    module = ModuleOp([empty])
    for text in (str(module), _generic(module)):
        (back,) = _schedules(_parse(text))
        assert back.directives() == []


def test_defaults_are_the_absent_forms() -> None:
    assert Unroll("k").factor is None
    assert Parallel("d0").grain == 1
    assert str(Unroll("k").to_op()) == 'sched.unroll "k"'
    assert str(Parallel("d0", 1).to_op()) == 'sched.parallel "d0"'
    (back,) = _schedules(_parse('sched.schedule @f {\n  sched.parallel "d0" grain 1\n}'))
    assert back.directives() == [Parallel("d0")]
    (back,) = _schedules(_parse('"sched.schedule"() <{kernel = @f}> ({\n'
                                '  "sched.parallel"() <{loop = "d0"}> : () -> ()\n'
                                '}) : () -> ()'))
    assert back.directives() == [Parallel("d0", 1)]
    assert Prefetch(1, 2, 512).within is None
    assert str(Prefetch(1, 2, 512).to_op()) == "sched.prefetch arg 1 dim 2 ahead 512 locality 2"
    (back,) = _schedules(_parse('"sched.schedule"() <{kernel = @f}> ({\n'
                                '  "sched.prefetch"() <{arg = 1 : i64, dim = 2 : i64, '
                                'ahead = 512 : i64, locality = 2 : i64}> : () -> ()\n'
                                '}) : () -> ()'))
    assert back.directives() == [Prefetch(1, 2, 512, 2, None)]


def test_records_are_frozen_hashable_values() -> None:
    reorder = Reorder(["k", "d0"])  # type: ignore[arg-type]  # a list becomes a tuple
    assert reorder.loops == ("k", "d0")
    assert len({*MATMUL, Split("d1", 32, "d1o", "d1i")}) == len(MATMUL)
    with pytest.raises(AttributeError):
        reorder.loops = ("d0", "k")  # type: ignore[misc]


def test_op_accessors() -> None:
    op = s.SplitOp("d1", 32, "d1o", "d1i")
    assert (op.loop.data, op.factor.value.data, op.outer.data, op.inner.data) == (
        "d1", 32, "d1o", "d1i")
    assert op.loop_names() == ("d1",)  # the names it introduces are not "named"
    assert s.ReorderOp(["a", "b"]).loop_names() == ("a", "b")
    assert s.UnrollOp("k").factor_value is None
    assert s.UnrollOp("k", 4).factor_value == 4
    assert s.PackOp(1, 8).loop_names() == ()
    assert s.PrefetchOp(1, 2, 512, 2).loop_names() == ()
    assert s.PrefetchOp(1, 2, 512, 2, "d0_tail").loop_names() == ("d0_tail",)
    schedule = ScheduleOp.from_directives("f", MATMUL)
    assert [type(op) for op in schedule.directive_ops()] == [type(d.to_op()) for d in MATMUL]


def test_schedule_sits_next_to_its_kernel() -> None:
    kernel = """\
loop.kernel @f(%0: !loop.ptr<f32>) syms [] access ["w"] footprints [#loop.fp<[4], [1]>] {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  loop.for "d0" %i = %c0 to %c4 {
    %z = arith.constant 0.000000e+00 : f32
    loop.store %z, %0[%i] strides [1] : f32
  }
}
"""
    module = _parse(kernel + str(ScheduleOp.from_directives("f", [Vectorize("d0", 4)])))
    (schedule,) = _schedules(module)
    assert schedule.kernel == SymbolRefAttr("f")


def test_every_op_class_name_ends_in_op() -> None:
    dialect = get_all_dialects()["sched"]()
    assert dialect is s.Sched
    for op in dialect.operations:
        assert issubclass(op, IRDLOperation)
        assert op.__name__.endswith("Op"), op.__name__
        assert op.name.startswith("sched."), op.name
        assert "sched." in (op.__doc__ or ""), op.__name__


def test_every_record_has_an_op_and_back() -> None:
    records = {type(d) for d in MATMUL}
    assert records == set(Directive.__args__)  # type: ignore[attr-defined]
    directive_ops = {op for op in s.Sched.operations if op is not ScheduleOp}
    assert {type(d.to_op()) for d in MATMUL} == directive_ops


# --------------------------------------------------------------------------
# Verifier errors: one case each
# --------------------------------------------------------------------------

NAME = r"expected a loop name made of letters, digits and '_' \(not starting with a digit\)"

ERRORS: list[tuple[str, list[Directive], str]] = [
    ("use after split", [Split("d1", 32, "d1o", "d1i"), Vectorize("d1", 8)],
     r"sched.schedule @f: sched.vectorize names loop 'd1', but loop 'd1' was split into "
     r"'d1o', 'd1i' earlier"),
    ("split twice", [Split("d1", 32, "d1o", "d1i"), Split("d1", 8, "a", "b")],
     r"sched.split names loop 'd1', but loop 'd1' was split into 'd1o', 'd1i' earlier"),
    ("reorder after split", [Split("d0", 2, "d0o", "d0i"), Reorder(("d1", "d0"))],
     r"sched.reorder names loop 'd0', but loop 'd0' was split"),
    ("use after distribute", [Distribute("k"), Unroll("k", 4)],
     r"sched.schedule @f: sched.unroll names loop 'k', but loop 'k' was distributed into "
     r"'k_g0', 'k_g1', ... earlier"),
    ("two splits introduce a name", [Split("d0", 2, "o", "d0i"), Split("d1", 8, "o", "d1i")],
     r"split of 'd1' introduces 'o', which an earlier split already introduced"),
    ("split reuses a named loop", [Unroll("d1i"), Split("d1", 8, "d1o", "d1i")],
     r"split of 'd1' introduces 'd1i', a name used earlier in the schedule"),
    ("split reuses a split-away name",
     [Split("d1", 8, "d1o", "d1i"), Split("d1o", 2, "d1", "x")],
     r"split of 'd1o' introduces 'd1', a name used earlier in the schedule"),
    ("split factor 1", [Split("d1", 1, "d1o", "d1i")],
     r'sched.split "d1": expected a factor >= 2, got 1'),
    ("split factor negative", [Split("d1", -4, "d1o", "d1i")],
     r'sched.split "d1": expected a factor >= 2, got -4'),
    ("split same names", [Split("d1", 8, "x", "x")],
     r"sched.split \"d1\": expected three distinct names \(loop, outer, inner\), "
     r"got \['d1', 'x', 'x'\]"),
    ("split keeps the loop name", [Split("d1", 8, "d1", "d1i")],
     r"expected three distinct names"),
    ("split bad name", [Split("d1", 8, "d1-o", "d1i")], rf"sched.split: {NAME}, got 'd1-o'"),
    ("reorder one loop", [Reorder(("d0",))],
     r"sched.reorder: expected at least 2 loops, got \['d0'\]"),
    ("reorder duplicate", [Reorder(("d0", "k", "d0"))],
     r"sched.reorder: expected distinct loops, got \['d0'\] more than once in "
     r"\['d0', 'k', 'd0'\]"),
    ("reorder empty name", [Reorder(("d0", ""))], rf"sched.reorder: {NAME}, got ''"),
    ("unroll factor 1", [Unroll("k", 1)],
     r'sched.unroll "k": expected a factor >= 2 \(omit it for a full unroll\), got 1'),
    ("unroll digit first", [Unroll("0k")], rf"sched.unroll: {NAME}, got '0k'"),
    ("privatize empty", [Privatize("")], rf"sched.privatize: {NAME}, got ''"),
    ("vectorize width 6", [Vectorize("d1", 6)],
     r'sched.vectorize "d1": expected a width in \[4, 8, 16\], got 6'),
    ("vectorize space", [Vectorize("d 1", 8)], rf"sched.vectorize: {NAME}, got 'd 1'"),
    ("slp width 8", [Slp("k", 8)], r'sched.slp "k": expected a width in \[4\], got 8'),
    ("parallel grain 0", [Parallel("d0", 0)],
     r'sched.parallel "d0": expected a grain >= 1, got 0'),
    ("parallel dot", [Parallel("d0.o")], rf"sched.parallel: {NAME}, got 'd0.o'"),
    ("pack negative arg", [Pack(-1, 8)], r"sched.pack: expected an argument index >= 0, got -1"),
    ("pack tile 1", [Pack(1, 1)], r"sched.pack arg 1: expected a tile >= 2, got 1"),
    ("prefetch negative arg", [Prefetch(-1, 2, 512)],
     r"sched.prefetch: expected an argument index >= 0, got -1"),
    ("prefetch negative dim", [Prefetch(1, -1, 512)],
     r"sched.prefetch arg 1: expected an index number >= 0, got -1"),
    ("prefetch ahead 0", [Prefetch(1, 2, 0)],
     r"sched.prefetch arg 1: expected ahead >= 1, got 0"),
    ("prefetch locality 4", [Prefetch(1, 2, 512, 4)],
     r"sched.prefetch arg 1: expected a locality in \[0, 1, 2, 3\], got 4"),
    ("prefetch within an empty name", [Prefetch(1, 2, 512, 2, "")],
     r"sched.prefetch arg 1: expected a loop name after 'within', got an empty one"),
    ("prefetch within a bad name", [Prefetch(1, 2, 512, 2, "d0 tail")],
     rf"sched.prefetch: {NAME}, got 'd0 tail'"),
    ("prefetch within a loop split away",
     [Split("d0", 2, "d0o", "d0i", peel=True), Prefetch(1, 2, 512, 2, "d0")],
     r"sched.schedule @f: sched.prefetch names loop 'd0', but loop 'd0' was split into "
     r"'d0o', 'd0i' earlier"),
    ("loop directive after a prefetch", [Prefetch(1, 2, 512), Unroll("k", 2)],
     r"sched.schedule @f: sched.unroll follows a sched.prefetch; prefetches come last"),
    ("pack after a prefetch", [Prefetch(1, 2, 512), Prefetch(2, 0, 8), Pack(1, 8)],
     r"sched.schedule @f: sched.pack follows a sched.prefetch"),
]


@pytest.mark.parametrize(("case", "directives", "message"), ERRORS, ids=[e[0] for e in ERRORS])
def test_verifier_error(case: str, directives: list[Directive], message: str) -> None:
    schedule = ScheduleOp.from_directives("f", directives)
    with pytest.raises(VerifyException, match=message) as info:
        schedule.verify()
    if str(info.value).startswith("sched.schedule @f: "):
        # an error across directives names the culprit, so nc-opt points at its line
        assert getattr(info.value, "op", None) is schedule.directive_ops()[-1], case


@pytest.mark.parametrize(("case", "directives", "message"), ERRORS, ids=[e[0] for e in ERRORS])
def test_verifier_error_survives_text(case: str, directives: list[Directive],
                                      message: str) -> None:
    text = str(ModuleOp([ScheduleOp.from_directives("f", directives)]))
    with pytest.raises(VerifyException, match=message):
        _parse(text)


def test_each_error_case_is_one_edit_from_valid() -> None:
    # the valid neighbours verify, so the errors above come from the edited value
    ScheduleOp.from_directives("f", [
        Split("d1", 2, "d1o", "d1i"), Vectorize("d1i", 4), Vectorize("d1o", 16),
        Reorder(("d0", "k")), Unroll("k", 2), Privatize("_k9"), Parallel("d0", 1),
        Pack(0, 2), Split("d1o", 2, "p0d0", "p0_d1"), Prefetch(0, 0, 1, 0),
        Prefetch(1, 2, 512, 3), Prefetch(1, 2, 512, 2, "d0_tail"),
    ]).verify()


def test_directive_outside_a_schedule() -> None:
    message = r"'sched\.unroll' expects parent op 'sched\.schedule'"
    with pytest.raises(VerifyException, match=message):
        ModuleOp([s.UnrollOp("d0")]).verify()


def test_non_directive_inside_a_schedule() -> None:
    schedule = ScheduleOp("f", [s.UnrollOp("d0")])
    stray = StrayOp()
    schedule.block.add_op(stray)
    with pytest.raises(VerifyException,
                       match=r"@f: expected only sched directives, got test\.op") as e:
        schedule.verify()
    assert e.value.op is stray  # type: ignore[attr-defined]


def test_nested_kernel_reference() -> None:
    schedule = ScheduleOp("m", [])
    schedule.properties["kernel"] = SymbolRefAttr("m", [StringAttr("f")])
    with pytest.raises(VerifyException, match="@m: expected a flat kernel name, got @m::@f"):
        schedule.verify()


def test_malformed_directive_is_a_verify_error_not_a_crash() -> None:
    text = ('"sched.schedule"() <{kernel = @f}> ({\n'
            '  "sched.split"() <{loop = "d1"}> : () -> ()\n'
            '}) : () -> ()')
    with pytest.raises(VerifyException, match="property 'factor' expected"):
        _parse(text)


def test_every_directive_maps_to_a_directive_record() -> None:
    # DirectiveOp.to_directive is abstract: check every registered directive
    # overrides it, so apply-schedule never meets the base method.
    directives = [op for op in s.Sched.operations if issubclass(op, s.DirectiveOp)]
    assert len(directives) == 10
    missing = [op.name for op in directives if op.to_directive is s.DirectiveOp.to_directive]
    assert missing == []
