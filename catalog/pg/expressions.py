"""Expressions as PostgreSQL's ruleutils.c prints them: a CHECK's, a column default's
and a generated column's (every operator in parentheses, or with `pretty` only where
precedence needs them; constants typed as the parser typed them, `'x'::text`). Used by
ruleutils.py (pg_get_constraintdef, views) and column_default.py (pg_get_expr)."""

from __future__ import annotations

from typing import Any

import pglast.ast as A
from headwater.catalog.identifiers import quote_ident
from headwater.catalog.objects import Column, Relation
from headwater.catalog.types import BY_NAME
from pglast import parse_sql
from pglast.stream import RawStream


class Unsupported(Exception):
    """An expression of a form the printers do not follow (the caller keeps its text)."""


def pretty_const(col: Column, const: A.A_Const, pretty: bool) -> str:
    t = col.type.pg.name
    v = const.val
    if const.isnull:
        raise Unsupported

    def cast(text: str, to: str) -> str:
        return f"{text}::{to}" if pretty else f"({text})::{to}"

    if isinstance(v, A.Integer) and v.ival >= 0:
        if t in ("int2", "int4", "int8"):
            return str(v.ival)
        if t == "numeric":
            return cast(str(v.ival), "numeric")
        if t in ("float4", "float8"):
            return cast(str(v.ival), "double precision")
    if isinstance(v, A.Float) and not v.fval.startswith("-"):
        if t == "numeric":
            return v.fval
        if t in ("float4", "float8"):
            return cast(v.fval, "double precision")
    if isinstance(v, A.String) and t in ("text", "varchar"):
        return "'" + v.sval.replace("'", "''") + "'::text"
    raise Unsupported


_LOW_OPS, _HIGH_OPS = ("+", "-"), ("*", "/", "%")


def printed(expr: str, table: Relation | None = None, pretty: bool = False) -> str:
    """pg_get_expr() of a default's or generated column's expression: operators in
    parentheses, `lower('X'::text)`; with `pretty` (psql's \\d) only where precedence
    needs them, `a * 2 + 1`. The text as it is where it does not parse or print."""
    try:
        node = parse_sql(f"SELECT ({expr})")[0].stmt.targetList[0].val
        return expression_text(node, table or Relation(0, "", "", ()), pretty, None)
    except Exception:  # noqa: BLE001 - an expression of another form: as it is
        return expr


def _column_of(node: Any, table: Relation) -> Column | None:
    if isinstance(node, A.ColumnRef) and isinstance(node.fields[-1], A.String):
        return table.column(node.fields[-1].sval)
    return None


def _check_side(col: Column, const: A.A_Const, pretty: bool) -> str:
    ref = quote_ident(col.name)
    if col.type.pg.name == "varchar" and isinstance(const.val, A.String):
        return f"{ref}::text" if pretty else f"({ref})::text"
    return ref


def _op_name(node: Any) -> str | None:
    if isinstance(node, A.A_Expr) and node.kind == 0 and len(node.name) == 1 and node.lexpr:
        return node.name[0].sval
    return None


def _simple(node: Any, parent: Any, first: bool) -> bool:
    """ruleutils.c's isSimpleNode for the nodes a CHECK has: no parentheses needed."""
    if parent is None:
        return True
    op, parent_op = _op_name(node), _op_name(parent)
    if op is not None and parent_op is not None:
        lo, hi = op in _LOW_OPS, op in _HIGH_OPS
        plo, phi = parent_op in _LOW_OPS, parent_op in _HIGH_OPS
        if not (lo or hi) or not (plo or phi):
            return False
        if hi and plo:
            return True
        if lo and phi:
            return False
        return first
    if isinstance(node, A.BoolExpr) and isinstance(parent, A.BoolExpr):
        return node.boolop == 2 or node.boolop == parent.boolop == 0  # NOT; AND in AND
    return isinstance(parent, A.BoolExpr | A.FuncCall)


def _constant_cast(node: Any, pretty: bool) -> str | None:
    """`interval '1 day'`, `'1 day'::interval`, `0::numeric` as PostgreSQL prints a typed
    constant: `'1 day'::interval`, `(0)::numeric` (pretty: `0::numeric`); pglast prints
    CAST(... AS interval)."""
    if not (isinstance(node, A.TypeCast) and isinstance(node.arg, A.A_Const)):
        return None
    tn = node.typeName
    names = [n.sval for n in tn.names]
    v = node.arg.val
    if tn.typmods or tn.arrayBounds:
        return None
    t = BY_NAME.get(names[-1])
    type_name = t.sql_name if t else ".".join(quote_ident(n) for n in names)
    if isinstance(v, A.Integer | A.Float) and not node.arg.isnull:
        number = str(v.ival) if isinstance(v, A.Integer) else v.fval
        if number.startswith("-"):
            return None
        return f"{number}::{type_name}" if pretty else f"({number})::{type_name}"
    if not (node.arg.isnull or isinstance(v, A.String)):
        return None
    value = "NULL" if node.arg.isnull else "'" + v.sval.replace("'", "''") + "'"
    return f"{value}::{type_name}"


def expression_text(
    node: Any, table: Relation, pretty: bool, parent: Any, first: bool = True
) -> str:
    def sub(n: Any, is_first: bool = True) -> str:
        return expression_text(n, table, pretty, node, is_first)

    if isinstance(node, A.BoolExpr):
        parts = [sub(a) for a in node.args]
        text = (
            f"NOT {parts[0]}"
            if node.boolop == 2
            else (" AND " if node.boolop == 0 else " OR ").join(parts)
        )
    elif _op_name(node) is not None:
        left, right = sub(node.lexpr), sub(node.rexpr, False)
        lcol, rcol = _column_of(node.lexpr, table), _column_of(node.rexpr, table)
        try:  # a constant takes the column's type, as PostgreSQL's parser casts it
            if lcol is not None and isinstance(node.rexpr, A.A_Const):
                left = _check_side(lcol, node.rexpr, pretty)
                right = pretty_const(lcol, node.rexpr, pretty)
            elif rcol is not None and isinstance(node.lexpr, A.A_Const):
                left = pretty_const(rcol, node.lexpr, pretty)
                right = _check_side(rcol, node.lexpr, pretty)
        except Unsupported:
            pass
        text = f"{left} {node.name[0].sval} {right}"
    elif isinstance(node, A.A_Const) and isinstance(node.val, A.String):
        return "'" + node.val.sval.replace("'", "''") + "'::text"
    elif isinstance(node, A.ColumnRef):
        return quote_ident(node.fields[-1].sval) if isinstance(node.fields[-1], A.String) else "*"
    elif isinstance(node, A.FuncCall) and not node.agg_star and not node.agg_distinct:
        args = ", ".join(expression_text(a, table, pretty, node) for a in node.args or ())
        return f"{'.'.join(n.sval for n in node.funcname if n.sval != 'pg_catalog')}({args})"
    elif (cast := _constant_cast(node, pretty)) is not None:
        return cast
    elif isinstance(node, A.A_Const) and isinstance(node.val, A.Boolean):
        return "true" if node.val.boolval else "false"
    elif isinstance(node, A.NullTest):
        text = f"{sub(node.arg)} IS {'NOT ' if node.nulltesttype else ''}NULL"
    else:
        return str(RawStream()(node))
    if pretty and _simple(node, parent, first):
        return text
    return f"({text})"
