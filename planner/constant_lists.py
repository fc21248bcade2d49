"""Long lists of plain constants (`x IN (1, 2, ..., 4000)`): passed over by the
per-node passes (planner/pg_compat.py, the Binder) and printed once.

A write or read that names thousands of keys spent most of its planning visiting,
binding and deparsing each constant node by node (~15 µs a constant with pglast's
printer). The passes leave a plain constant as it is (no rule rewrites one, and it
names no relation), so they skip such lists; the Binder prints an IN list here, from
the parsed values exactly as pglast's RawStream prints them (the same SQL text, so
DuckDB reads the same values), and splices it in as one placeholder. An UPDATE or
DELETE whose WHERE names a batch of integer keys gets them as one array (`key_set`).
"""

from __future__ import annotations

import re
from typing import Any

import pglast.ast as A
from pglast.enums import A_Expr_Kind, BoolExprType, SubLinkType

# An IN list at least this long is printed here; shorter ones print as before.
MIN_PRINTED = 32

_PLAIN = (A.Integer, A.String, A.Boolean)
# A numeric token as printed here: others (1_000.5, 0x1F.p1, ...) take the usual path
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def plain(items: Any) -> bool:
    """Is `items` a non-empty tuple of constants no pass changes: numbers, strings,
    booleans, NULL (bit strings are rewritten: planner/pg_compat.py)?"""
    if not isinstance(items, tuple) or not items:
        return False
    for c in items:
        if type(c) is not A.A_Const:
            return False
        if c.isnull or type(c.val) in _PLAIN:
            continue
        if type(c.val) is not A.Float or _NUMBER.fullmatch(c.val.fval) is None:
            return False
    return True


def long_in_list(node: Any) -> bool:
    """`x [NOT] IN (c1, ..., cn)` with n >= MIN_PRINTED plain constants."""
    return (
        isinstance(node, A.A_Expr)
        and node.kind == A_Expr_Kind.AEXPR_IN
        and isinstance(node.rexpr, tuple)
        and len(node.rexpr) >= MIN_PRINTED
        and plain(node.rexpr)
    )


def sql(items: tuple[A.A_Const, ...]) -> str:
    """The constants of a `plain` list as SQL, comma separated, each as pglast prints
    it: the parsed value, never the client's text (strings quoted, quotes doubled)."""
    return ", ".join(map(_constant, items))


def _constant(c: A.A_Const) -> str:
    if c.isnull:
        return "NULL"
    v = c.val
    t = type(v)
    if t is A.Integer:
        return str(int(v.ival))
    if t is A.String:
        return "'" + v.sval.replace("'", "''") + "'"
    if t is A.Boolean:
        return "TRUE" if v.boolval else "FALSE"
    if t is A.Float and _NUMBER.fullmatch(v.fval):  # spliced in unquoted: checked
        return v.fval
    raise TypeError(f"not a plain constant: {c!r}")


def integers(items: Any) -> list[int] | None:
    """The values of a `plain` list of integer constants (no NULL) that fit a bigint."""
    out: list[int] = []
    for c in items:
        v = c.val
        if type(v) is A.Integer:
            out.append(int(v.ival))
        elif type(v) is A.Float and v.fval.lstrip("-").isdigit() and v.fval.isascii():
            n = int(v.fval)
            if not -(2**63) <= n < 2**63:
                return None
            out.append(n)
        else:  # NULL, text, boolean, decimal
            return None
    return out


def key_set(column: Any, negated: bool, keys: list[int]) -> A.Node:
    """`column [NOT] IN (SELECT unnest(CAST('[k1, ...]' AS bigint[])))`: an UPDATE's
    query over 600 k rows with a 4,000-constant IN list costs DuckDB ~56 ms of CPU, most
    of it planning the list; with the one array constant ~13 ms. Only for a numeric
    column (planner/dml.py): there the two compare alike (an IN list of integers also
    matches text, which the subquery refuses), and with no NULL among the keys NOT IN
    does too. The array is printed from the integers, not from the client's text."""
    array = "[" + ", ".join(map(str, keys)) + "]"
    cast = A.TypeCast(
        arg=A.A_Const(isnull=False, val=A.String(sval=array)),
        typeName=A.TypeName(
            names=(A.String(sval="pg_catalog"), A.String(sval="int8")),
            arrayBounds=(A.Integer(ival=-1),),
            typemod=-1,
        ),
    )
    unnest = A.FuncCall(funcname=(A.String(sval="unnest"),), args=(cast,), funcformat=0)
    query = A.SelectStmt(targetList=(A.ResTarget(val=unnest),), op=0)
    sublink = A.SubLink(subLinkType=SubLinkType.ANY_SUBLINK, testexpr=column, subselect=query)
    if not negated:
        return sublink
    return A.BoolExpr(boolop=BoolExprType.NOT_EXPR, args=(sublink,))
