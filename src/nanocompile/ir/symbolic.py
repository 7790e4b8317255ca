"""Shape expressions: integer polynomials over named, non-negative symbols.

A shape entry of the Graph IR is either an integer or a polynomial such as
``past + seq`` or ``14*seq``. ``Expr`` keeps one canonical form (a sorted
tuple of ``(monomial, coefficient)`` pairs, a monomial being a sorted tuple of
``(symbol, power)``), so structural equality is polynomial equality:
``seq*14*64 == 896*seq`` and ``past + seq == seq + past``.

Symbols stand for sizes, so they are never negative; that is what makes
``provably_negative`` a sound build-time check.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import reduce

Monomial = tuple[tuple[str, int], ...]
Terms = tuple[tuple[Monomial, int], ...]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.$]*")


class UnboundSymbolError(KeyError):
    """An expression was evaluated without a value for one of its symbols."""

    def __init__(self, symbol: str, expr: Expr) -> None:
        super().__init__(symbol)
        self.symbol = symbol
        self.expr = expr

    def __str__(self) -> str:
        return f"symbol '{self.symbol}' of '{self.expr}' has no binding"


class ExprSyntaxError(ValueError):
    """A shape expression could not be parsed."""


def _mono_mul(a: Monomial, b: Monomial) -> Monomial:
    powers: dict[str, int] = dict(a)
    for sym, p in b:
        powers[sym] = powers.get(sym, 0) + p
    return tuple(sorted(powers.items()))


def _degree(m: Monomial) -> int:
    return sum(p for _, p in m)


@dataclass(frozen=True)
class Expr:
    """An integer polynomial in canonical form. Build with ``sym``/``const``."""

    terms: Terms

    # -- construction -----------------------------------------------------
    @staticmethod
    def _from_dict(d: Mapping[Monomial, int]) -> Expr:
        return Expr(tuple(sorted((m, c) for m, c in d.items() if c != 0)))

    @staticmethod
    def const(value: int) -> Expr:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"expected an int, got {value!r}")
        return Expr._from_dict({(): value})

    @staticmethod
    def sym(name: str) -> Expr:
        if not _IDENT.fullmatch(name):
            raise ExprSyntaxError(f"'{name}' is not a valid symbol name")
        return Expr(((((name, 1),), 1),))

    @staticmethod
    def lift(value: ExprLike) -> Expr:
        """An ``Expr`` from an ``Expr``, an int, or the text of an expression."""
        if isinstance(value, Expr):
            return value
        if isinstance(value, str):
            return parse_expr(value)
        return Expr.const(value)

    # -- queries ----------------------------------------------------------
    @property
    def is_const(self) -> bool:
        return all(m == () for m, _ in self.terms)

    @property
    def const_value(self) -> int:
        """The constant term (the whole value when ``is_const``)."""
        for m, c in self.terms:
            if m == ():
                return c
        return 0

    @property
    def symbols(self) -> frozenset[str]:
        return frozenset(s for m, _ in self.terms for s, _ in m)

    @property
    def single_symbol(self) -> str | None:
        """The symbol's name if the expression is exactly one symbol."""
        if len(self.terms) == 1:
            (m, c) = self.terms[0]
            if c == 1 and len(m) == 1 and m[0][1] == 1:
                return m[0][0]
        return None

    def coefficient(self, monomial: str | Monomial = "") -> int:
        """The coefficient of a monomial, given as ``"past*seq"`` or a tuple."""
        if isinstance(monomial, str):
            key = parse_expr(monomial).terms[0][0] if monomial else ()
        else:
            key = monomial
        return dict(self.terms).get(key, 0)

    def provably_negative(self) -> bool:
        """True if the value is negative for every non-negative binding."""
        return self.const_value < 0 and all(c <= 0 for _, c in self.terms)

    def provably_nonnegative(self) -> bool:
        return all(c >= 0 for _, c in self.terms)

    def evaluate(self, bindings: Mapping[str, int]) -> int:
        total = 0
        for m, c in self.terms:
            value = c
            for s, p in m:
                if s not in bindings:
                    raise UnboundSymbolError(s, self)
                value *= bindings[s] ** p
            total += value
        return total

    def substitute(self, bindings: Mapping[str, ExprLike]) -> Expr:
        out = Expr.const(0)
        for m, c in self.terms:
            term = Expr.const(c)
            for s, p in m:
                base = Expr.lift(bindings[s]) if s in bindings else Expr.sym(s)
                for _ in range(p):
                    term = term * base
            out = out + term
        return out

    def exact_div(self, divisor: int) -> Expr | None:
        """``self / divisor`` if every coefficient divides exactly, else None."""
        if divisor == 0 or any(c % divisor for _, c in self.terms):
            return None
        return Expr(tuple((m, c // divisor) for m, c in self.terms))

    # -- arithmetic -------------------------------------------------------
    def __add__(self, other: ExprLike) -> Expr:
        o = Expr.lift(other)
        d = dict(self.terms)
        for m, c in o.terms:
            d[m] = d.get(m, 0) + c
        return Expr._from_dict(d)

    __radd__ = __add__

    def __neg__(self) -> Expr:
        return Expr(tuple((m, -c) for m, c in self.terms))

    def __sub__(self, other: ExprLike) -> Expr:
        return self + (-Expr.lift(other))

    def __rsub__(self, other: ExprLike) -> Expr:
        return Expr.lift(other) - self

    def __mul__(self, other: ExprLike) -> Expr:
        o = Expr.lift(other)
        d: dict[Monomial, int] = {}
        for m1, c1 in self.terms:
            for m2, c2 in o.terms:
                m = _mono_mul(m1, m2)
                d[m] = d.get(m, 0) + c1 * c2
        return Expr._from_dict(d)

    __rmul__ = __mul__

    def __eq__(self, other: object) -> bool:
        if isinstance(other, int) and not isinstance(other, bool):
            return self.is_const and self.const_value == other
        if isinstance(other, Expr):
            return self.terms == other.terms
        return NotImplemented

    def __hash__(self) -> int:
        if self.is_const:
            return hash(self.const_value)
        return hash(self.terms)

    # -- printing ---------------------------------------------------------
    def __str__(self) -> str:
        if not self.terms:
            return "0"
        ordered = sorted(self.terms, key=lambda t: (-_degree(t[0]), t[0]))
        out = ""
        for m, c in ordered:
            factors = [s for s, p in m for _ in range(p)]
            if not factors:
                body = str(abs(c))
            elif abs(c) == 1:
                body = "*".join(factors)
            else:
                body = "*".join([str(abs(c)), *factors])
            if not out:
                out = f"-{body}" if c < 0 else body
            else:
                out += f" - {body}" if c < 0 else f" + {body}"
        return out

    def __repr__(self) -> str:
        return f"Expr('{self}')"


ExprLike = Expr | int | str


def product(dims: tuple[Expr, ...] | list[Expr]) -> Expr:
    return reduce(lambda a, b: a * b, dims, Expr.const(1))


_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_.$]*)|(.))")


class _ExprParser:
    """``expr := term (('+'|'-') term)*``, ``term := factor ('*' factor)*``,
    ``factor := INT | SYMBOL | '(' expr ')' | '-' factor``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = [m.group(1) or m.group(2) or m.group(3)
                       for m in _TOKEN.finditer(text) if m.group(0).strip()]
        self.pos = 0

    def error(self, what: str) -> ExprSyntaxError:
        return ExprSyntaxError(f"{what} in shape expression '{self.text}'")

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        if self.pos >= len(self.tokens):
            raise self.error("unexpected end")
        self.pos += 1
        return self.tokens[self.pos - 1]

    def factor(self) -> Expr:
        tok = self.take()
        if tok == "-":
            return -self.factor()
        if tok == "(":
            e = self.expr()
            if self.take() != ")":
                raise self.error("expected ')'")
            return e
        if tok.isdigit():
            return Expr.const(int(tok))
        if _IDENT.fullmatch(tok):
            return Expr.sym(tok)
        raise self.error(f"unexpected '{tok}'")

    def term(self) -> Expr:
        e = self.factor()
        while self.peek() == "*":
            self.take()
            e = e * self.factor()
        return e

    def expr(self) -> Expr:
        e = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            e = e + self.term() if op == "+" else e - self.term()
        return e


def parse_expr(text: str) -> Expr:
    """Parse the text of a shape expression (``past + seq``, ``14*seq``, ``seq - 1``)."""
    parser = _ExprParser(text)
    result = parser.expr()
    if parser.pos != len(parser.tokens):
        raise parser.error(f"unexpected '{parser.tokens[parser.pos]}'")
    return result
