"""Give every output column of a SELECT the name PostgreSQL would give it.

PostgreSQL names an unaliased target after its column, function or type
(`count`, `?column?`, `case`, `int4` for `1::int`); DuckDB names it after the
expression text. This pass adds those names as explicit aliases, on the select
that defines the output (the left-most one of a set operation).
"""

from __future__ import annotations

import copy
from typing import Any

import pglast.ast as A

_TYPE_NAMES = {
    "int4": "int4",
    "int8": "int8",
    "int2": "int2",
    "float8": "float8",
    "float4": "float4",
    "bool": "bool",
    "varchar": "varchar",
    "bpchar": "bpchar",
    "numeric": "numeric",
    "text": "text",
    "date": "date",
    "timestamp": "timestamp",
    "timestamptz": "timestamptz",
    "interval": "interval",
    "bytea": "bytea",
    "jsonb": "jsonb",
    "json": "json",
}


def pg_column_name(node: Any) -> str:
    """FigureColname() of PostgreSQL's parser, for the cases that arise in practice."""
    if isinstance(node, A.ColumnRef):
        last = node.fields[-1]
        return last.sval if isinstance(last, A.String) else "?column?"
    if isinstance(node, A.FuncCall):
        return node.funcname[-1].sval
    if isinstance(node, A.A_Indirection):  # (r).f is "f"; tags[1] keeps "tags"
        fields = [i.sval for i in node.indirection if isinstance(i, A.String)]
        return fields[-1] if fields else pg_column_name(node.arg)
    if isinstance(node, A.TypeCast):
        if _strong_name(node.arg):
            return pg_column_name(node.arg)
        name = node.typeName.names[-1].sval
        return _TYPE_NAMES.get(name, name)
    if isinstance(node, A.CaseExpr):
        return "case"
    if isinstance(node, A.CoalesceExpr):
        return "coalesce"
    if isinstance(node, A.MinMaxExpr):
        return "greatest" if node.op == 0 else "least"
    if isinstance(node, A.A_Expr) and node.kind == 5:  # AEXPR_NULLIF
        return "nullif"
    if isinstance(node, A.SubLink):
        if node.subLinkType == 0:  # EXISTS_SUBLINK
            return "exists"
        if node.subLinkType == 6:  # ARRAY_SUBLINK
            return "array"
        if node.subLinkType == 4 and isinstance(node.subselect, A.SelectStmt):  # EXPR_SUBLINK
            targets = node.subselect.targetList or ()
            if len(targets) == 1:
                t = targets[0]
                return t.name or pg_column_name(t.val)
        return "?column?"
    if isinstance(node, A.A_ArrayExpr):
        return "array"
    if isinstance(node, A.RowExpr):
        return "row"
    if isinstance(node, A.SQLValueFunction):
        return {
            0: "current_date",
            1: "current_time",
            3: "current_timestamp",
            9: "current_role",
            10: "current_user",
            11: "user",
            12: "session_user",
            13: "current_catalog",
            14: "current_schema",
        }.get(node.op, "?column?")
    return "?column?"


def _strong_name(node: Any) -> bool:
    """Whether a cast keeps the name of what it casts: FigureColname's strength 2 (a
    CASE's name, and a cast's type name, are weaker: `x::float8::text` is "x", but
    `1.5::float8::text` is "text")."""
    if isinstance(node, A.TypeCast):
        return _strong_name(node.arg)
    return not isinstance(node, A.CaseExpr) and pg_column_name(node) != "?column?"


def output_select(stmt: Any) -> A.SelectStmt | None:
    while isinstance(stmt, A.SelectStmt) and stmt.op and stmt.larg is not None:
        stmt = stmt.larg
    return stmt if isinstance(stmt, A.SelectStmt) else None


def name_targets(stmt: Any) -> None:
    sel = output_select(stmt)
    if sel is None or not sel.targetList:
        return
    for rt in sel.targetList:
        if isinstance(rt, A.ResTarget) and rt.name is None and not _is_star(rt.val):
            rt.name = pg_column_name(rt.val)


def targets_named(stmt: Any) -> Any:
    """`stmt` (not changed), or a copy of it whose unnamed targets carry the names
    PostgreSQL gives them: for the selects inside a statement (CTEs, subqueries in
    FROM), whose column names `*` and qualified references see."""
    if not isinstance(stmt, A.SelectStmt) or not stmt.targetList:
        return stmt
    if all(
        not isinstance(rt, A.ResTarget) or rt.name or _is_star(rt.val) for rt in stmt.targetList
    ):
        return stmt
    named = copy.copy(stmt)
    named.targetList = tuple(_named(rt) for rt in stmt.targetList)
    return named


def _named(rt: Any) -> Any:
    if not isinstance(rt, A.ResTarget) or rt.name or _is_star(rt.val):
        return rt
    out = copy.copy(rt)
    out.name = pg_column_name(rt.val)
    return out


def _is_star(node: Any) -> bool:
    return isinstance(node, A.ColumnRef) and isinstance(node.fields[-1], A.A_Star)


VALUES_ALIAS = "_hw_values"


def values_query(stmt: Any) -> Any:
    """A VALUES query as `SELECT * FROM (VALUES ...) AS _hw_values(column1, ...)`, its
    WITH, ORDER BY and LIMIT outside: PostgreSQL names VALUES columns column1, column2,
    ... and DuckDB col0, col1, .... Anything else is returned as it is (never changed).
    Not for the VALUES of a subquery in FROM (see `values_alias`)."""
    if not isinstance(stmt, A.SelectStmt) or not stmt.valuesLists:
        return stmt
    width = len(stmt.valuesLists[0])
    inner = A.SelectStmt(valuesLists=stmt.valuesLists, op=stmt.op, all=False)
    alias = A.Alias(aliasname=VALUES_ALIAS, colnames=_values_names(width, ()))
    return A.SelectStmt(
        targetList=(A.ResTarget(val=A.ColumnRef(fields=(A.A_Star(),))),),
        fromClause=(A.RangeSubselect(lateral=False, subquery=inner, alias=alias),),
        withClause=stmt.withClause,
        sortClause=stmt.sortClause,
        limitCount=stmt.limitCount,
        limitOffset=stmt.limitOffset,
        limitOption=stmt.limitOption,
        op=stmt.op,
        all=False,
    )


def values_alias(node: Any) -> Any:
    """`(VALUES ...) AS v(x)` with the names its alias leaves out: `v(x, column2)`."""
    if not (
        isinstance(node, A.RangeSubselect)
        and isinstance(node.subquery, A.SelectStmt)
        and node.subquery.valuesLists
        and node.alias is not None
    ):
        return node
    given = tuple(node.alias.colnames or ())
    width = len(node.subquery.valuesLists[0])
    if len(given) >= width:
        return node
    alias = A.Alias(aliasname=node.alias.aliasname, colnames=_values_names(width, given))
    return A.RangeSubselect(lateral=node.lateral, subquery=node.subquery, alias=alias)


def _values_names(width: int, given: tuple) -> tuple:
    return given + tuple(A.String(sval=f"column{i + 1}") for i in range(len(given), width))
