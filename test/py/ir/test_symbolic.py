"""Shape expressions: canonical form, arithmetic, evaluation, printing, parsing."""

import pytest

from nanocompile.ir.symbolic import Expr, ExprSyntaxError, UnboundSymbolError, parse_expr

seq, past = Expr.sym("seq"), Expr.sym("past")


def test_commutative_products_are_equal() -> None:
    assert seq * 14 * 64 == 896 * seq
    assert str(seq * 14 * 64) == "896*seq"


def test_sum_order_does_not_matter() -> None:
    assert past + seq == seq + past
    assert hash(past + seq) == hash(seq + past)
    assert str(seq + past) == "past + seq"


def test_square_expands() -> None:
    e = (seq + 1) * (seq + 1)
    assert e == seq * seq + 2 * seq + 1
    assert str(e) == "seq*seq + 2*seq + 1"
    assert e.evaluate({"seq": 5}) == 36


def test_cancellation_gives_a_constant() -> None:
    e = (past + seq) - seq
    assert e == past
    z = (past + seq) - (seq + past)
    assert z.is_const
    assert z == 0
    assert str(z) == "0"


def test_constants_equal_ints() -> None:
    assert Expr.const(7) == 7
    assert hash(Expr.const(7)) == hash(7)
    assert Expr.lift(3) + 4 == 7
    assert seq != 7


def test_printing_orders_by_degree_then_name() -> None:
    e = 18966 * past * seq + 18966 * seq * seq + 417792 * past + 16357208 * seq + 1976743344
    assert str(e) == (
        "18966*past*seq + 18966*seq*seq + 417792*past + 16357208*seq + 1976743344"
    )
    assert str(seq - 1) == "seq - 1"
    assert str(-seq) == "-seq"
    assert str(3 - 2 * seq) == "-2*seq + 3"


def test_parse_round_trips() -> None:
    for text in ["past + seq", "14*seq", "seq - 1", "seq*seq + 2*seq + 1", "0", "-seq + 3",
                 "18966*past*seq + 24576*past + 1976742656"]:
        assert str(parse_expr(text)) == text
    assert parse_expr("(seq + 1) * 2") == 2 * seq + 2
    assert parse_expr("seq*14*64") == parse_expr("896*seq")


@pytest.mark.parametrize("bad", ["", "seq +", "2 ** seq", "(seq", "seq)", "3 seq", "seq / 2"])
def test_parse_errors(bad: str) -> None:
    with pytest.raises(ExprSyntaxError):
        parse_expr(bad)


def test_evaluation_names_the_missing_symbol() -> None:
    e = past + seq
    assert e.evaluate({"past": 3, "seq": 4}) == 7
    with pytest.raises(UnboundSymbolError) as info:
        e.evaluate({"seq": 4})
    assert info.value.symbol == "past"
    assert "past" in str(info.value)
    assert "past + seq" in str(info.value)


def test_sign_decisions() -> None:
    assert Expr.const(-1).provably_negative()
    assert (seq - (seq + 1)).provably_negative()
    assert not (seq - 1).provably_negative()  # seq may be 0 or 5: undecidable
    assert (-seq - 1).provably_negative()
    assert (seq + past).provably_nonnegative()
    assert not (seq - 1).provably_nonnegative()


def test_queries() -> None:
    assert seq.single_symbol == "seq"
    assert (2 * seq).single_symbol is None
    assert (seq + 1).single_symbol is None
    assert (past * seq + seq).symbols == {"past", "seq"}
    e = 5376 * past * seq + 24576 * past + 7
    assert e.coefficient("past") == 24576
    assert e.coefficient("past*seq") == 5376
    assert e.coefficient() == 7
    assert e.const_value == 7
    assert (896 * seq).exact_div(64) == 14 * seq
    assert (896 * seq + 1).exact_div(64) is None


def test_substitute() -> None:
    e = past * seq + seq
    assert e.substitute({"seq": 1}) == past + 1
    assert e.substitute({"past": 0, "seq": 3}) == 3


def test_bad_constructors() -> None:
    with pytest.raises(TypeError):
        Expr.const(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Expr.const(True)
    with pytest.raises(ExprSyntaxError):
        Expr.sym("9lives")
