"""Range types (int4range, int8range, numrange, daterange, tsrange, tstzrange) as
expressions: a range is kept as PostgreSQL's text of it ('[1,5)', 'empty'), built and
taken apart by Python functions that know the element type. DuckDB has no range type,
so a range here lives inside one expression (a constructor or a cast to a range type);
lower/upper/isempty and the range operators are rewritten where an operand is one.

Discrete ranges (integers, dates) are canonical as PostgreSQL's are: [lo, hi).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal, InvalidOperation
from typing import Any

import pglast.ast as A
from headwater.planner.functions import udf
from headwater.planner.functions.nodes import call, const

# range type -> (element kind, DuckDB element type)
KINDS = {
    "int4range": ("int", "INTEGER"),
    "int8range": ("int", "BIGINT"),
    "numrange": ("num", "DECIMAL(38,16)"),
    "daterange": ("date", "DATE"),
    "tsrange": ("ts", "TIMESTAMP"),
    "tstzrange": ("ts", "TIMESTAMPTZ"),
}

Bound = Any  # an element value, or None for infinity


class Range:
    def __init__(self, lo: Bound, hi: Bound, lo_inc: bool, hi_inc: bool, empty: bool = False):
        self.lo, self.hi, self.lo_inc, self.hi_inc, self.empty = lo, hi, lo_inc, hi_inc, empty


def _error(sqlstate: str, message: str) -> ValueError:
    return ValueError(f"[SQLSTATE {sqlstate}] {message}")


def _value(kind: str, text: str) -> Any:
    text = text.strip().strip('"')
    try:
        if kind == "int":
            return int(text)
        if kind == "num":
            return Decimal(text)
        if kind == "date":
            return dt.date.fromisoformat(text)
        return dt.datetime.fromisoformat(text)
    except (ValueError, InvalidOperation):
        raise _error("22P02", f'invalid input syntax for range element: "{text}"') from None


def _show(v: Any) -> str:
    if isinstance(v, dt.datetime):
        return f'"{v.isoformat(sep=" ")}"'
    if isinstance(v, dt.date):
        return v.isoformat()
    return str(v)


def _step(kind: str, v: Any) -> Any:
    return v + 1 if kind == "int" else v + dt.timedelta(days=1)


def _make(kind: str, lo: Bound, hi: Bound, lo_inc: bool, hi_inc: bool) -> Range:
    if lo is not None and hi is not None and lo > hi:
        raise _error("22000", "range lower bound must be less than or equal to range upper bound")
    if kind in ("int", "date"):  # canonical [lo, hi)
        if lo is not None and not lo_inc:
            lo, lo_inc = _step(kind, lo), True
        if hi is not None and hi_inc:
            hi, hi_inc = _step(kind, hi), False
    if lo is None:
        lo_inc = False
    if hi is None:
        hi_inc = False
    if lo is not None and hi is not None and (lo > hi or (lo == hi and not (lo_inc and hi_inc))):
        return Range(None, None, False, False, True)
    return Range(lo, hi, lo_inc, hi_inc)


def _text(r: Range) -> str:
    if r.empty:
        return "empty"
    lo = "" if r.lo is None else _show(r.lo)
    hi = "" if r.hi is None else _show(r.hi)
    return f"{'[' if r.lo_inc else '('}{lo},{hi}{']' if r.hi_inc else ')'}"


def _parse(kind: str, text: str) -> Range:
    s = text.strip()
    if s.lower() == "empty":
        return Range(None, None, False, False, True)
    if len(s) < 3 or s[0] not in "[(" or s[-1] not in "])" or "," not in s:
        raise _error("22P02", f'malformed range literal: "{text}"')
    lo_text, hi_text = s[1:-1].split(",", 1)
    lo = _value(kind, lo_text) if lo_text.strip() else None
    hi = _value(kind, hi_text) if hi_text.strip() else None
    return _make(kind, lo, hi, s[0] == "[", s[-1] == "]")


def _construct(kind: str, lo: str | None, hi: str | None, bounds: str) -> str:
    if bounds not in ("[)", "[]", "()", "(]"):
        raise _error("42601", "invalid range bound flags")
    lo_v = None if lo is None else _value(kind, lo)
    hi_v = None if hi is None else _value(kind, hi)
    return _text(_make(kind, lo_v, hi_v, bounds[0] == "[", bounds[1] == "]"))


def _canonical(kind: str, text: str) -> str:
    return _text(_parse(kind, text))


def _below(a: Bound, a_inc: bool, b: Bound, b_inc: bool, upper: bool) -> bool:
    """Does bound a sort before bound b (lower bounds, or upper with `upper`)?"""
    if a is None or b is None:
        if a is None and b is None:
            return False
        return (a is None) != upper
    if a != b:
        return a < b
    if upper:
        return not a_inc and b_inc
    return a_inc and not b_inc


def _overlaps(a: Range, b: Range) -> bool:
    if a.empty or b.empty:
        return False
    return _before_hi(a.lo, a.lo_inc, b) and _before_hi(b.lo, b.lo_inc, a)


def _before_hi(lo: Bound, lo_inc: bool, r: Range) -> bool:
    """Is the lower bound (lo, lo_inc) at or below r's upper bound?"""
    if lo is None or r.hi is None:
        return True
    return lo < r.hi or (lo == r.hi and lo_inc and r.hi_inc)


def _has(kind: str, text: str, elem: str) -> bool:
    r, v = _parse(kind, text), _value(kind, elem)
    if r.empty:
        return False
    lo_ok = r.lo is None or v > r.lo or (v == r.lo and r.lo_inc)
    hi_ok = r.hi is None or v < r.hi or (v == r.hi and r.hi_inc)
    return lo_ok and hi_ok


def _op(kind: str, op: str, a_text: str, b_text: str) -> Any:
    a, b = _parse(kind, a_text), _parse(kind, b_text)
    if op == "&&":
        return _overlaps(a, b)
    if op == "@>":
        return b.empty or (not a.empty and _contains(a, b))
    if op == "<@":
        return a.empty or (not b.empty and _contains(b, a))
    if op == "*":
        if not _overlaps(a, b):
            return "empty"
        lo = (b.lo, b.lo_inc) if _below(a.lo, a.lo_inc, b.lo, b.lo_inc, False) else (a.lo, a.lo_inc)
        hi = (a.hi, a.hi_inc) if _below(a.hi, a.hi_inc, b.hi, b.hi_inc, True) else (b.hi, b.hi_inc)
        return _text(_make(kind, lo[0], hi[0], lo[1], hi[1]))
    if op == "+":
        if a.empty or b.empty:
            return _text(b if a.empty else a)
        adjacent = (a.hi == b.lo and a.hi_inc != b.lo_inc) or (
            b.hi == a.lo and b.hi_inc != a.lo_inc
        )
        if not _overlaps(a, b) and not adjacent:
            raise _error("22000", "result of range union would not be contiguous")
        lo = (a.lo, a.lo_inc) if _below(a.lo, a.lo_inc, b.lo, b.lo_inc, False) else (b.lo, b.lo_inc)
        hi = (b.hi, b.hi_inc) if _below(a.hi, a.hi_inc, b.hi, b.hi_inc, True) else (a.hi, a.hi_inc)
        return _text(_make(kind, lo[0], hi[0], lo[1], hi[1]))
    raise _error("42883", f"operator does not exist: range {op} range")


def _contains(a: Range, b: Range) -> bool:
    return not _below(b.lo, b.lo_inc, a.lo, a.lo_inc, False) and not _below(
        a.hi, a.hi_inc, b.hi, b.hi_inc, True
    )


def _part(kind: str, text: str, part: str) -> Any:
    """A part of a range as text (booleans as true/false): the caller casts it."""
    r = _parse(kind, text)
    if part in ("lower", "upper"):
        v = r.lo if part == "lower" else r.hi
        return None if v is None else _show(v).strip('"')
    if part == "isempty":
        flag = r.empty
    elif part in ("lower_inc", "upper_inc"):
        flag = r.lo_inc if part == "lower_inc" else r.hi_inc
    else:
        flag = (r.lo is None if part == "lower_inf" else r.hi is None) and not r.empty
    return "true" if flag else "false"


# -- the planner's side: which expressions are ranges, and their rewrites ---------------


def range_type(node: Any) -> str | None:
    """The range type an expression syntactically is (a constructor or a cast), else None."""
    if isinstance(node, A.TypeCast) and not node.typeName.arrayBounds:
        names = [n.sval.lower() for n in node.typeName.names if isinstance(n, A.String)]
        return names[-1] if names and names[-1] in KINDS else None
    if isinstance(node, A.FuncCall):
        names = [n.sval.lower() for n in node.funcname if isinstance(n, A.String)]
        if names and names[-1] in KINDS:
            return names[-1]
        if names and names[-1] == "hw_range" and isinstance(node.args[0], A.A_Const):
            return str(node.args[0].val.sval)
    return None


def _text_of(node: Any) -> Any:
    return A.TypeCast(arg=node, typeName=A.TypeName(names=(A.String(sval="varchar"),), typemod=-1))


def constructor(name: str, args: list[Any]) -> Any | None:
    """int4range(lo, hi [, bounds]) -> hw_range('int4range', text)."""
    if name not in KINDS or len(args) not in (2, 3):
        return None
    kind = KINDS[name][0]
    bounds = args[2] if len(args) == 3 else const("[)")
    built = call("hw_range_make", const(kind), _text_of(args[0]), _text_of(args[1]), bounds)
    return call("hw_range", const(name), built)


def cast(name: str, arg: Any) -> Any | None:
    """'[1,5)'::int4range -> hw_range('int4range', canonical text)."""
    if name not in KINDS:
        return None
    return call("hw_range", const(name), call("hw_range_in", const(KINDS[name][0]), arg))


def rewrite_function(name: str, args: list[Any]) -> Any | None:
    """lower/upper/isempty/lower_inc/... of a range expression."""
    if name not in PARTS or len(args) != 1 or (rt := range_type(args[0])) is None:
        return None
    kind, element = KINDS[rt]
    part = call("hw_range_part", const(kind), args[0], const(name))
    if name in ("lower", "upper"):
        return A.TypeCast(
            arg=part, typeName=A.TypeName(names=(A.String(sval=element.lower()),), typemod=-1)
        )
    return A.TypeCast(arg=part, typeName=A.TypeName(names=(A.String(sval="bool"),), typemod=-1))


def rewrite_operator(op: str, left: Any, right: Any) -> Any | None:
    if op not in ("&&", "@>", "<@", "*", "+", "-"):
        return None
    lt, rt = range_type(left), range_type(right)
    if lt is None and rt is None:
        return None
    kind = KINDS[lt or rt or ""][0]  # type: ignore[index]
    if op == "@>" and lt is not None and rt is None:
        return call("hw_range_has", const(kind), left, _text_of(right))
    if op == "<@" and rt is not None and lt is None:
        return call("hw_range_has", const(kind), right, _text_of(left))
    if lt is None or rt is None:
        return None
    if op in ("&&", "@>", "<@"):
        return call("hw_range_test", const(kind), const(op), left, right)
    return call("hw_range", const(lt), call("hw_range_op", const(kind), const(op), left, right))


PARTS = ("lower", "upper", "isempty", "lower_inc", "upper_inc", "lower_inf", "upper_inf")


def _make_udf(kind: str, lo: str | None, hi: str | None, bounds: str | None) -> str:
    return _construct(kind, lo, hi, bounds or "[)")


def install(db: Any) -> None:
    V, B = "VARCHAR", "BOOLEAN"
    db.execute("CREATE OR REPLACE MACRO hw_range(t, r) AS r")  # t: the range type, for the planner
    udf.register(db, "hw_range_make", _make_udf, [V, V, V, V], V, strict=False)
    udf.register(db, "hw_range_in", _canonical, [V, V], V)
    udf.register(db, "hw_range_has", _has, [V, V, V], B)
    udf.register(db, "hw_range_test", _op, [V, V, V, V], B)
    udf.register(db, "hw_range_op", _op, [V, V, V, V], V)
    udf.register(db, "hw_range_part", _part, [V, V, V], V)
