"""Definitions as text, as PostgreSQL's ruleutils.c prints them: pg_get_viewdef(),
pg_get_indexdef() and pg_get_constraintdef() (column defaults: column_default.py)."""

from __future__ import annotations

from typing import Any

import pglast.ast as A
from headwater.catalog.identifiers import quote_ident
from headwater.catalog.objects import Column, Index, Relation, Table, View
from headwater.catalog.pg.snapshot import Builder, RelRow
from headwater.catalog.types import BY_NAME
from pglast import parse_sql
from pglast.stream import RawStream


def view_definition(r: RelRow, b: Builder, pretty: bool = False) -> str | None:
    d = getattr(r.obj, "definition", None)
    if d is None:
        return None
    try:
        return _pretty_view(d, b, pretty)
    except _Unsupported:
        return " " + d.strip().rstrip(";") + ";"


class _Unsupported(Exception):
    pass


_CMP_OPS = ("=", "<>", "<", ">", "<=", ">=")


def _pretty_view(sql: str, b: Builder, pretty: bool) -> str:
    """pg_get_viewdef() as PostgreSQL 15 prints a simple view: one table, plain column
    outputs, a WHERE of comparisons with constants. Anything else: _Unsupported."""
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
        raise _Unsupported
    rv = stmt.fromClause[0]
    table = b.catalog.resolve(rv.schemaname, rv.relname, b.session.search_path)
    if table is None or not isinstance(table, Table | View):
        raise _Unsupported
    qual = rv.alias.aliasname if rv.alias else table.name
    q = quote_ident(qual)
    targets = []
    for rt in stmt.targetList or ():
        val = rt.val
        if not isinstance(val, A.ColumnRef):
            raise _Unsupported
        last = val.fields[-1]
        if isinstance(last, A.A_Star):
            targets += [f"{q}.{quote_ident(c.name)}" for c in table.columns]
            continue
        col = last.sval
        if table.column(col) is None:
            raise _Unsupported
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
            raise _Unsupported
        return f"{q}.{quote_ident(col.name)}"
    if isinstance(node, A.A_Expr) and node.kind == 0 and len(node.name) == 1:
        op = node.name[0].sval
        if op not in _CMP_OPS:
            raise _Unsupported
        left, right = node.lexpr, node.rexpr
        if isinstance(left, A.ColumnRef) and isinstance(right, A.ColumnRef):
            lc, rc = _pretty_col(left, table), _pretty_col(right, table)
            if lc.type.pg is not rc.type.pg:
                raise _Unsupported
            text = f"{q}.{quote_ident(lc.name)} {op} {q}.{quote_ident(rc.name)}"
        elif isinstance(left, A.ColumnRef) and isinstance(right, A.A_Const):
            col = _pretty_col(left, table)
            side, const = _pretty_side(col, q, right, pretty), _pretty_const(col, right, pretty)
            text = f"{side} {op} {const}"
        elif isinstance(right, A.ColumnRef) and isinstance(left, A.A_Const):
            col = _pretty_col(right, table)
            side, const = _pretty_side(col, q, left, pretty), _pretty_const(col, left, pretty)
            text = f"{const} {op} {side}"
        else:
            raise _Unsupported
        return text if pretty and parent in (0, 1, 2) else f"({text})"
    raise _Unsupported


def _pretty_col(ref: A.ColumnRef, table: Relation) -> Column:
    last = ref.fields[-1]
    col = table.column(last.sval) if isinstance(last, A.String) else None
    if col is None:
        raise _Unsupported
    return col


def _pretty_side(col: Column, q: str, const: A.A_Const, pretty: bool) -> str:
    ref = f"{q}.{quote_ident(col.name)}"
    if col.type.pg.name == "varchar" and isinstance(const.val, A.String):
        return f"{ref}::text" if pretty else f"({ref})::text"
    return ref


def _pretty_const(col: Column, const: A.A_Const, pretty: bool) -> str:
    t = col.type.pg.name
    v = const.val
    if const.isnull:
        raise _Unsupported

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
    raise _Unsupported


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
_LOW_OPS, _HIGH_OPS = ("+", "-"), ("*", "/", "%")


def check_def(table: Relation, expr: str, pretty: bool = False) -> str:
    """pg_get_constraintdef() of a CHECK: every operator and boolean in parentheses, or
    (pretty) only where precedence needs them; string constants cast as 'x'::text."""
    node = parse_sql(f"SELECT ({expr})")[0].stmt.targetList[0].val
    return f"CHECK ({_check_expr(node, table, pretty, None)})"


def expression_def(expr: str, table: Relation) -> str:
    """pg_get_expr() of a default's or generated column's operators and calls, as a
    CHECK's are printed: `(qty * 2)`, `lower('X'::text)`."""
    node = parse_sql(f"SELECT ({expr})")[0].stmt.targetList[0].val
    return _check_expr(node, table, False, None)


def pretty_expression(expr: str) -> str:
    """pg_get_expr(..., true) of a default or generation expression: parentheses only
    where precedence needs them (psql's \\d shows `a * 2 + 1`)."""
    try:
        node = parse_sql(f"SELECT ({expr})")[0].stmt.targetList[0].val
        return _check_expr(node, Relation(0, "", "", ()), True, None)
    except Exception:  # noqa: BLE001 - an expression of another form: as it is
        return expr


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


def _constant_cast(node: Any) -> str | None:
    """`interval '1 day'`, `'1 day'::interval` as PostgreSQL prints a typed constant:
    `'1 day'::interval` (pglast prints the first as CAST(... AS interval))."""
    if not (isinstance(node, A.TypeCast) and isinstance(node.arg, A.A_Const)):
        return None
    tn = node.typeName
    names = [n.sval for n in tn.names]
    v = node.arg.val
    if tn.typmods or tn.arrayBounds or not (node.arg.isnull or isinstance(v, A.String)):
        return None
    t = BY_NAME.get(names[-1])
    value = "NULL" if node.arg.isnull else "'" + v.sval.replace("'", "''") + "'"
    return f"{value}::{t.sql_name if t else names[-1]}"


def _check_expr(node: Any, table: Relation, pretty: bool, parent: Any, first: bool = True) -> str:
    def sub(n: Any, is_first: bool = True) -> str:
        return _check_expr(n, table, pretty, node, is_first)

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
                right = _pretty_const(lcol, node.rexpr, pretty)
            elif rcol is not None and isinstance(node.lexpr, A.A_Const):
                left = _pretty_const(rcol, node.lexpr, pretty)
                right = _check_side(rcol, node.lexpr, pretty)
        except _Unsupported:
            pass
        text = f"{left} {node.name[0].sval} {right}"
    elif isinstance(node, A.A_Const) and isinstance(node.val, A.String):
        return "'" + node.val.sval.replace("'", "''") + "'::text"
    elif isinstance(node, A.ColumnRef):
        return quote_ident(node.fields[-1].sval) if isinstance(node.fields[-1], A.String) else "*"
    elif isinstance(node, A.FuncCall) and not node.agg_star and not node.agg_distinct:
        args = ", ".join(_check_expr(a, table, pretty, node) for a in node.args or ())
        return f"{'.'.join(n.sval for n in node.funcname if n.sval != 'pg_catalog')}({args})"
    elif (cast := _constant_cast(node)) is not None:
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
