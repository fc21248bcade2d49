"""Definitions as text, as PostgreSQL's ruleutils.c prints them: pg_get_viewdef(),
pg_get_indexdef() and pg_get_constraintdef() (column defaults: column_default.py)."""

from __future__ import annotations

from typing import Any

import pglast.ast as A
from headwater.catalog.identifiers import quote_ident
from headwater.catalog.objects import Column, Index, Relation, Table, View
from headwater.catalog.pg.expressions import Unsupported, expression_text, pretty_const
from headwater.catalog.pg.snapshot import Builder, RelRow
from pglast import parse_sql

_CMP_OPS = ("=", "<>", "<", ">", "<=", ">=")


def view_definition(r: RelRow, b: Builder, pretty: bool = False) -> str | None:
    d = getattr(r.obj, "definition", None)
    if d is None:
        return None
    try:
        return _pretty_view(d, b, pretty)
    except Unsupported:
        return " " + d.strip().rstrip(";") + ";"


def _pretty_view(sql: str, b: Builder, pretty: bool) -> str:
    """pg_get_viewdef() as PostgreSQL 15 prints a simple view: one table, plain column
    outputs, a WHERE of comparisons with constants. Anything else: Unsupported."""
    stmt = parse_sql(sql)[0].stmt
    if (
        not isinstance(stmt, A.SelectStmt)
        or stmt.op
        or stmt.withClause
        or stmt.distinctClause
        or stmt.groupClause
        or stmt.havingClause
        or stmt.sortClause
        or stmt.limitCount
        or stmt.limitOffset
        or stmt.windowClause
        or stmt.valuesLists
        or not stmt.fromClause
        or len(stmt.fromClause) != 1
        or not isinstance(stmt.fromClause[0], A.RangeVar)
    ):
        raise Unsupported
    rv = stmt.fromClause[0]
    table = b.catalog.resolve(rv.schemaname, rv.relname, b.session.search_path)
    if table is None or not isinstance(table, Table | View):
        raise Unsupported
    qual = rv.alias.aliasname if rv.alias else table.name
    q = quote_ident(qual)
    targets = []
    for rt in stmt.targetList or ():
        val = rt.val
        if not isinstance(val, A.ColumnRef):
            raise Unsupported
        last = val.fields[-1]
        if isinstance(last, A.A_Star):
            targets += [f"{q}.{quote_ident(c.name)}" for c in table.columns]
            continue
        col = last.sval
        if table.column(col) is None:
            raise Unsupported
        out = f"{q}.{quote_ident(col)}"
        if rt.name and rt.name != col:
            out += f" AS {quote_ident(rt.name)}"
        targets.append(out)
    visible = b.visible().get(table.oid, False)
    name = (
        quote_ident(table.name)
        if visible
        else f"{quote_ident(table.schema)}.{quote_ident(table.name)}"
    )
    text = " SELECT " + ",\n    ".join(targets) + "\n   FROM " + name
    if rv.alias:
        text += " " + quote_ident(rv.alias.aliasname)
    if stmt.whereClause is not None:
        where = _pretty_expr(stmt.whereClause, table, q, pretty)
        if pretty and where.startswith("(") and where.endswith(")") and _balanced(where[1:-1]):
            where = where[1:-1]
        text += "\n  WHERE " + where
    return text + ";"


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if depth < 0:
            return False
    return depth == 0


def _pretty_expr(node: Any, table: Relation, q: str, pretty: bool, parent: int = -1) -> str:
    """PostgreSQL's ruleutils: every operator in parentheses, or (pretty) only where
    precedence needs them: an OR inside an AND; constants cast as 3::numeric."""
    if isinstance(node, A.BoolExpr):
        op = node.boolop
        parts = [_pretty_expr(a, table, q, pretty, op) for a in node.args]
        if op == 2:
            text = f"NOT {parts[0]}"
        else:
            text = (" AND " if op == 0 else " OR ").join(parts)
        if pretty and (op in (0, 2) and parent in (0, 1) or op == 1 and parent == 1):
            return text
        return f"({text})"
    if isinstance(node, A.ColumnRef):
        col = _pretty_col(node, table)
        if col.type.pg.name != "bool":
            raise Unsupported
        return f"{q}.{quote_ident(col.name)}"
    if isinstance(node, A.A_Expr) and node.kind == 0 and len(node.name) == 1:
        op = node.name[0].sval
        if op not in _CMP_OPS:
            raise Unsupported
        left, right = node.lexpr, node.rexpr
        if isinstance(left, A.ColumnRef) and isinstance(right, A.ColumnRef):
            lc, rc = _pretty_col(left, table), _pretty_col(right, table)
            if lc.type.pg is not rc.type.pg:
                raise Unsupported
            text = f"{q}.{quote_ident(lc.name)} {op} {q}.{quote_ident(rc.name)}"
        elif isinstance(left, A.ColumnRef) and isinstance(right, A.A_Const):
            col = _pretty_col(left, table)
            side, const = _pretty_side(col, q, right, pretty), pretty_const(col, right, pretty)
            text = f"{side} {op} {const}"
        elif isinstance(right, A.ColumnRef) and isinstance(left, A.A_Const):
            col = _pretty_col(right, table)
            side, const = _pretty_side(col, q, left, pretty), pretty_const(col, left, pretty)
            text = f"{const} {op} {side}"
        else:
            raise Unsupported
        return text if pretty and parent in (0, 1, 2) else f"({text})"
    raise Unsupported


def _pretty_col(ref: A.ColumnRef, table: Relation) -> Column:
    last = ref.fields[-1]
    col = table.column(last.sval) if isinstance(last, A.String) else None
    if col is None:
        raise Unsupported
    return col


def _pretty_side(col: Column, q: str, const: A.A_Const, pretty: bool) -> str:
    ref = f"{q}.{quote_ident(col.name)}"
    if col.type.pg.name == "varchar" and isinstance(const.val, A.String):
        return f"{ref}::text" if pretty else f"({ref})::text"
    return ref


def index_def(r: RelRow, table: Relation) -> str:
    obj = r.obj if isinstance(r.obj, Index) else None
    cols = ", ".join(obj.key_texts() if obj is not None else map(quote_ident, r.index_cols))
    unique = "UNIQUE " if r.unique else ""
    method = obj.method if obj is not None else "btree"
    where = f" WHERE ({obj.predicate})" if obj is not None and obj.predicate else ""
    return (
        f"CREATE {unique}INDEX {quote_ident(r.name)} ON "
        f"{quote_ident(table.schema)}.{quote_ident(table.name)} USING {method} ({cols}){where}"
    )


def constraint_def(r: RelRow) -> str:
    cols = ", ".join(quote_ident(c) for c in r.index_cols)
    return f"{'PRIMARY KEY' if r.primary else 'UNIQUE'} ({cols})"


# -- CHECK constraints ----------------------------------------------------------------------
def check_def(table: Relation, expr: str, pretty: bool = False) -> str:
    """pg_get_constraintdef() of a CHECK: every operator and boolean in parentheses, or
    (pretty) only where precedence needs them; string constants cast as 'x'::text."""
    node = parse_sql(f"SELECT ({expr})")[0].stmt.targetList[0].val
    return f"CHECK ({expression_text(node, table, pretty, None)})"


def check_columns(expr: str) -> set[str]:
    """The columns a CHECK expression names."""
    out: set[str] = set()

    def walk(n: Any) -> None:
        if isinstance(n, tuple | list):
            for x in n:
                walk(x)
        elif isinstance(n, A.ColumnRef):
            if isinstance(n.fields[-1], A.String):
                out.add(n.fields[-1].sval)
        elif isinstance(n, A.Node):
            for name in n:
                walk(getattr(n, name))

    walk(parse_sql(f"SELECT ({expr})")[0].stmt)
    return out
