"""Generated columns computed in Python, for the fast INSERT path.

`total numeric GENERATED ALWAYS AS (price * qty) STORED`, `slug text GENERATED ALWAYS
AS (lower(name))`: an INSERT of constants into such a table takes the batcher's fast
path, which has DuckDB compute the generated values for the statement's rows
(server/generated.py `fill_rows`: ~1-1.5 ms a statement, DuckDB's fixed cost). The
common shapes are computed here instead, per row: columns and constants combined with
+, - and * in PostgreSQL's types (integers in the wider operand's type, its range
checked after each operation; a numeric operand makes numeric, exact), || of text
(NULL gives NULL), lower() and upper() of ASCII text (other characters' case mappings
are DuckDB's). The value is then assigned to the column as a VALUES entry is
(batcher.coerce: rounding to its scale, overflow, length). Anything else (division,
other functions, casts, floats, a column of unconstrained numeric) has DuckDB compute
the statement's rows; a value that is not ASCII leaves the statement to the general
path.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable
from typing import Any

import pglast.ast as A
from headwater.catalog.objects import Table
from headwater.catalog.pgtypes import SessionFormat
from headwater.catalog.types import INT2, INT4, INT8, NUMERIC, TEXT, VARCHAR, PgType
from headwater.server.batcher import INT_NAMES, INT_RANGES, coerce
from headwater.server.fast_checks import column_position
from headwater.server.fast_index_keys import NotAscii
from headwater.server.table_cache import per_table
from pglast import enums, parse_sql

from headwater.errors import NumericOutOfRange

Row = tuple[Any, ...]
Fn = Callable[[Row], Any]
_INTS = (INT2, INT4, INT8)  # narrowest first
_EXACT = decimal.Context(prec=2000)  # numeric + - * are exact in PostgreSQL
_CASES: dict[str, Callable[[str], str]] = {"lower": str.lower, "upper": str.upper}


class _Unsupported(Exception):
    pass


@per_table
def compiled(table: Table) -> list[tuple[int, Fn]] | None:
    """Per generated column of the table, its position and a function of a row giving
    its value before the assignment; None when one is of another shape. Worked out once
    per table version."""
    out: list[tuple[int, Fn]] | None = []
    try:
        for i in table.generated_positions:
            col = table.columns[i]
            if col.type.pg is NUMERIC and col.type.precision_scale is None:
                raise _Unsupported  # (its scale: the computed value's, which coerce loses)
            node = parse_sql(f"SELECT ({col.generated})")[0].stmt.targetList[0].val  # type: ignore[union-attr]
            out.append((i, _expr(node, table)[0]))  # type: ignore[union-attr]
    except Exception:  # another shape, a text pglast cannot parse: DuckDB judges it
        return None
    return out


def fill(table: Table, rows: list[list[Any]], fmt: SessionFormat) -> bool:
    """Each row's generated columns, in place (False: a value is not ASCII, the general
    path computes the statement's)."""
    fns = compiled(table)
    assert fns is not None
    try:
        for row in rows:
            snapshot = tuple(row)  # (each expression reads the row as given)
            for i, fn in fns:
                row[i] = coerce(fn(snapshot), table.columns[i], fmt)
    except NotAscii:
        return False
    return True


def _expr(node: Any, table: Table) -> tuple[Fn, PgType]:
    """A function of a row and the PostgreSQL type of its value."""
    at = column_position(node, table)
    if at is not None:
        pg = table.columns[at].type.pg
        if pg not in (*_INTS, NUMERIC, TEXT, VARCHAR):
            raise _Unsupported
        return (lambda row: row[at]), (TEXT if pg is VARCHAR else pg)
    if isinstance(node, A.A_Const):
        v = node.val
        if node.isnull or v is None:
            raise _Unsupported  # (an untyped NULL)
        if isinstance(v, A.Integer):
            return _const(v.ival, INT4)
        if isinstance(v, A.Float):
            d = decimal.Decimal(v.fval)
            if d == d.to_integral_value() and "." not in v.fval and "e" not in v.fval.lower():
                return _const(int(d), INT8 if abs(d) < 2**63 else NUMERIC)  # (beyond int4)
            return _const(d, NUMERIC)
        if isinstance(v, A.String):
            return _const(v.sval, TEXT)
        raise _Unsupported
    if isinstance(node, A.A_Expr) and node.kind == enums.A_Expr_Kind.AEXPR_OP:
        op = node.name[-1].sval if len(node.name) == 1 else ""
        if node.lexpr is None and op == "-":
            fn, pg = _expr(node.rexpr, table)
            if pg not in (*_INTS, NUMERIC):
                raise _Unsupported
            return _arith(lambda row: 0, fn, pg, pg, "-")
        if op in ("+", "-", "*"):
            (lf, lt), (rf, rt) = _expr(node.lexpr, table), _expr(node.rexpr, table)
            return _arith(lf, rf, lt, rt, op)
        if op == "||":
            (lf, lt), (rf, rt) = _expr(node.lexpr, table), _expr(node.rexpr, table)
            if lt is not TEXT or rt is not TEXT:
                raise _Unsupported

            def concat(row: Row) -> Any:
                a, b = lf(row), rf(row)
                return None if a is None or b is None else a + b

            return concat, TEXT
    if (
        isinstance(node, A.FuncCall)
        and len(node.funcname) == 1
        and node.funcname[0].sval in _CASES
        and len(node.args or ()) == 1
        and not (node.agg_star or node.agg_distinct or node.over or node.agg_filter)
    ):
        fn, pg = _expr(node.args[0], table)
        if pg is not TEXT:
            raise _Unsupported
        case = _CASES[node.funcname[0].sval]

        def cased(row: Row) -> Any:
            v = fn(row)
            if v is None:
                return None
            if not v.isascii():
                raise NotAscii
            return case(v)

        return cased, TEXT
    raise _Unsupported


def _const(v: Any, pg: PgType) -> tuple[Fn, PgType]:
    if pg is INT4 and not INT_RANGES[INT4][0] <= v <= INT_RANGES[INT4][1]:
        pg = INT8  # (PostgreSQL types an integer literal beyond int4 as bigint)
    return (lambda row: v), pg


def _arith(lf: Fn, rf: Fn, lt: PgType, rt: PgType, op: str) -> tuple[Fn, PgType]:
    if lt not in (*_INTS, NUMERIC) or rt not in (*_INTS, NUMERIC):
        raise _Unsupported
    if NUMERIC in (lt, rt):
        calc = {"+": _EXACT.add, "-": _EXACT.subtract, "*": _EXACT.multiply}[op]

        def numeric(row: Row) -> Any:
            a, b = lf(row), rf(row)
            if a is None or b is None:
                return None
            return calc(decimal.Decimal(a), decimal.Decimal(b))

        return numeric, NUMERIC
    pg = max(lt, rt, key=_INTS.index)
    lo, hi = INT_RANGES[pg]
    py = {"+": int.__add__, "-": int.__sub__, "*": int.__mul__}[op]

    def integer(row: Row) -> Any:
        a, b = lf(row), rf(row)
        if a is None or b is None:
            return None
        v = py(a, b)
        if not lo <= v <= hi:
            raise NumericOutOfRange(f"{INT_NAMES[pg]} out of range")
        return v

    return integer, pg
