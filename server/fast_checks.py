"""CHECK constraints evaluated in Python, for the fast write paths.

Django puts `CHECK ("qty" >= 0)` on every PositiveIntegerField, SQLAlchemy a
`CHECK (status IN ('a', 'b'))` on a non-native Enum: a table with one took the general
path for every INSERT and point UPDATE (a writing transaction each, ~100 per second).
The common shapes are compiled here once per table into Python functions of a row:
comparisons of columns and constants (=, <>, <, <=, >, >= on numbers and dates; = and
<> on text and booleans), IN lists, BETWEEN, IS [NOT] NULL, AND / OR / NOT, with SQL's
three-valued logic (a row passes when the expression is true or NULL). A table with any
other CHECK keeps the general path (server/checks.py, in DuckDB). Constraints are tested
in name order after NOT NULL, as PostgreSQL's ExecConstraints does.
"""

from __future__ import annotations

import datetime as dt
import decimal
import operator
from collections.abc import Callable
from typing import Any

import pglast.ast as A
from headwater.catalog.objects import Table
from headwater.catalog.pgtypes import text_decoder
from headwater.catalog.types import (
    BOOL,
    DATE,
    FLOAT4,
    FLOAT8,
    INT2,
    INT4,
    INT8,
    NUMERIC,
    TEXT,
    VARCHAR,
    ColumnType,
    PgType,
)
from headwater.server.checks import check_violation
from headwater.server.table_cache import per_table
from pglast import enums, parse_sql

from headwater.errors import SQLError

Row = tuple[Any, ...]
Eval = Callable[[Row], Any]  # True, False or None (NULL)

_NUMBERS = frozenset({INT2, INT4, INT8, NUMERIC, FLOAT4, FLOAT8})
_ORDERED = _NUMBERS | {DATE}
_EQUALITY_ONLY = frozenset({TEXT, VARCHAR, BOOL})
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "<>": operator.ne,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class _Unsupported(Exception):
    """A CHECK this module does not evaluate: the table keeps the general path."""


class _Operand:
    """A compiled operand: its function of the row, and its type (None: a constant not
    typed yet, whose Python value is `value`)."""

    def __init__(self, fn: Eval, pg: PgType | None, value: Any = None) -> None:
        self.fn, self.pg, self.value = fn, pg, value


@per_table
def compiled(table: Table) -> list[tuple[Any, Eval]] | None:
    """The table's CHECKs in name order, each with its function; None when one of them
    is not of the shapes above. Worked out once per table version."""
    out: list[tuple[Any, Eval]] | None = []
    try:
        for check in sorted(table.checks, key=lambda c: c.name):
            node = parse_sql(f"SELECT ({check.expr})")[0].stmt.targetList[0].val
            out.append((check, _boolean(node, table)))  # type: ignore[union-attr]
    except (_Unsupported, SQLError, ValueError, decimal.InvalidOperation):
        out = None
    return out


def condition(expr: str, table: Table) -> Eval | None:
    """One condition over the table's rows (a partial index's WHERE) as a function, or
    None when it is not of the shapes above."""
    try:
        node = parse_sql(f"SELECT ({expr})")[0].stmt.targetList[0].val
        return _boolean(node, table)  # type: ignore[union-attr]
    except (_Unsupported, SQLError, ValueError, decimal.InvalidOperation):
        return None


def column_position(node: Any, table: Table) -> int | None:
    """The position of the table's column that `node` names (a ColumnRef), or None."""
    if not isinstance(node, A.ColumnRef) or len(node.fields) != 1:
        return None
    name = node.fields[0]
    if not isinstance(name, A.String):
        return None
    return next((i for i, c in enumerate(table.columns) if c.name == name.sval), None)


def check_error(table: Table, checks: list[tuple[Any, Eval]], row: Row) -> SQLError | None:
    """PostgreSQL's 23514 for the first CHECK `row` fails, or None."""
    for check, fn in checks:
        if fn(row) is False:
            return check_violation(table, check, list(row))
    return None


def _boolean(node: Any, table: Table) -> Eval:
    if isinstance(node, A.BoolExpr):
        args = [_boolean(a, table) for a in node.args]
        if node.boolop == enums.BoolExprType.AND_EXPR:
            return lambda row: _and(f(row) for f in args)
        if node.boolop == enums.BoolExprType.OR_EXPR:
            return lambda row: _or(f(row) for f in args)
        (arg,) = args
        return lambda row: None if (v := arg(row)) is None else not v
    if isinstance(node, A.NullTest):
        at = column_position(node.arg, table)  # (a column of any type)
        arg = _operand(node.arg, table).fn if at is None else operator.itemgetter(at)
        if node.nulltesttype == enums.NullTestType.IS_NULL:
            return lambda row: arg(row) is None
        return lambda row: arg(row) is not None
    if isinstance(node, A.A_Expr):
        return _expr(node, table)
    op = _operand(node, table)
    if op.pg is not BOOL:
        raise _Unsupported
    return op.fn


def _and(values: Any) -> bool | None:
    return _logic(values, False)


def _or(values: Any) -> bool | None:
    return _logic(values, True)


def _logic(values: Any, decisive: bool) -> bool | None:
    """SQL's AND (`decisive` False) or OR (True): the decisive value wins, else NULL if
    any is NULL."""
    out: bool | None = not decisive
    for v in values:
        if v is decisive:
            return decisive
        if v is None:
            out = None
    return out


def _expr(node: A.A_Expr, table: Table) -> Eval:
    name = node.name[-1].sval if node.name and isinstance(node.name[-1], A.String) else None
    kind = node.kind
    if kind == enums.A_Expr_Kind.AEXPR_OP and name in _OPS:
        return _comparison(_OPS[name], name, node.lexpr, node.rexpr, table)
    if kind == enums.A_Expr_Kind.AEXPR_IN and name in ("=", "<>"):
        tests = [_comparison(operator.eq, "=", node.lexpr, v, table) for v in node.rexpr]
        if name == "=":
            return lambda row: _or(t(row) for t in tests)
        return lambda row: None if (v := _or(t(row) for t in tests)) is None else not v
    if kind in (enums.A_Expr_Kind.AEXPR_BETWEEN, enums.A_Expr_Kind.AEXPR_NOT_BETWEEN):
        lo, hi = node.rexpr
        low = _comparison(operator.ge, ">=", node.lexpr, lo, table)
        high = _comparison(operator.le, "<=", node.lexpr, hi, table)
        if kind == enums.A_Expr_Kind.AEXPR_BETWEEN:
            return lambda row: _and((low(row), high(row)))
        return lambda row: None if (v := _and((low(row), high(row)))) is None else not v
    raise _Unsupported


def _comparison(
    op: Callable[[Any, Any], bool], name: str, left: Any, right: Any, table: Table
) -> Eval:
    a, b = _operand(left, table), _operand(right, table)
    if a.pg is None and b.pg is None:
        raise _Unsupported  # (constants alone: PostgreSQL folds them; rare in a CHECK)
    if a.pg is None:
        a = _typed(a, b.pg)  # type: ignore[arg-type]
    if b.pg is None:
        b = _typed(b, a.pg)  # type: ignore[arg-type]
    kinds = {a.pg, b.pg}
    same = kinds <= _NUMBERS or len(kinds) == 1 or kinds <= {TEXT, VARCHAR}
    if not same:
        raise _Unsupported
    if not (kinds <= _ORDERED or (kinds <= _EQUALITY_ONLY and name in ("=", "<>", "!="))):
        raise _Unsupported  # (text order depends on the collation)
    fa, fb = a.fn, b.fn
    if kinds & {FLOAT4, FLOAT8} and kinds & {NUMERIC}:
        raise _Unsupported  # numeric = float8 compares in float8: not worth the care

    def compare(row: Row) -> bool | None:
        x, y = fa(row), fb(row)
        if x is None or y is None:
            return None
        if x != x or y != y:  # NaN: PostgreSQL orders it above every number, equal to itself
            x, y = (x != x, 0 if x != x else x), (y != y, 0 if y != y else y)
        return op(x, y)

    return compare


def _typed(const: _Operand, pg: PgType) -> _Operand:
    """An untyped constant as the other side's type (PostgreSQL resolves it so)."""
    v = const.value
    if v is None:
        return _Operand(lambda row: None, pg)
    if isinstance(v, str):
        v = text_decoder(ColumnType(pg))(v.encode())
        if pg is DATE:
            v = _days(v)
    elif isinstance(v, bool) or pg not in _NUMBERS:
        raise _Unsupported
    elif pg in (FLOAT4, FLOAT8):
        v = float(v)  # PostgreSQL compares a float column with a numeric constant in float8
    return _Operand(lambda row, v=v: v, pg)


_EPOCH = dt.date(1970, 1, 1)


def _days(v: Any) -> Any:
    """A date as days since 1970-01-01: the batcher keeps BC and infinite dates as
    Arrow's day numbers, other dates as datetime.date."""
    return (v - _EPOCH).days if isinstance(v, dt.date) else v


def _operand(node: Any, table: Table) -> _Operand:
    if isinstance(node, A.ColumnRef):
        fields = node.fields
        if len(fields) != 1 or not isinstance(fields[0], A.String):
            raise _Unsupported
        names = [c.name for c in table.columns]
        if fields[0].sval not in names:
            raise _Unsupported
        i = names.index(fields[0].sval)
        pg = table.columns[i].type.pg
        if pg not in _ORDERED | _EQUALITY_ONLY:
            raise _Unsupported
        if pg is DATE:
            return _Operand(lambda row: _days(row[i]), pg)
        return _Operand(lambda row: row[i], pg)
    if isinstance(node, A.A_Const):
        if node.isnull:
            return _Operand(lambda row: None, None, None)
        val = node.val
        if isinstance(val, A.Integer):
            return _Operand(lambda row: val.ival, None, val.ival)
        if isinstance(val, A.Float):
            d = decimal.Decimal(val.fval)  # (Python compares int and Decimal exactly)
            return _Operand(lambda row: d, None, d)
        if isinstance(val, A.String):
            return _Operand(lambda row: val.sval, None, val.sval)
        if isinstance(val, A.Boolean):
            b = bool(val.boolval)
            return _Operand(lambda row: b, BOOL, b)
    raise _Unsupported
