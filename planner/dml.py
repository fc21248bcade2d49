"""INSERT/UPDATE/DELETE as DuckDB queries that compute their change rows.

A write never modifies the replica by itself: these queries compute the rows to
add (new versions) and the row ids to retire, and the transaction applies them
(storage/replica.py) after the constraint checks, so that the same rows become the
epoch's change log. The target table is read in the writer's current state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pglast.ast as A
from headwater.catalog.objects import Column, Table
from headwater.catalog.types import JSONB
from headwater.planner.relations import Binder
from headwater.storage.changelog import RID
from headwater.storage.replica import CURRENT, physical, quote
from pglast import parse_sql

from headwater.errors import FeatureNotSupported, SQLError, UndefinedColumn


def _col_name(i: int) -> str:
    return f"_hw_c{i}"


def to_column_sql(sql: str, col: Column) -> str:
    """A value cast to a column's type; jsonb input normalizes (keys sorted, spacing)."""
    if col.type.pg is JSONB:
        return f"CAST(hw_jsonb_in(CAST(({sql}) AS VARCHAR)) AS JSON)"
    return f"CAST(({sql}) AS {col.type.duckdb()})"


def default_sql(col: Column, binder: Binder) -> str:
    if col.default is None:
        return f"CAST(NULL AS {col.type.duckdb()})"
    expr = parse_sql(f"SELECT {col.default}")[0].stmt.targetList[0].val
    return to_column_sql(binder.to_sql(expr), col)


def cast_sql(expr: Any, col: Column, binder: Binder) -> str:
    if isinstance(expr, A.SetToDefault):
        return default_sql(col, binder)
    return to_column_sql(binder.to_sql(expr), col)


def target_columns(table: Table, cols: Any) -> list[Column]:
    if not cols:
        return list(table.columns)
    out: list[Column] = []
    for rt in cols:
        if rt.indirection:
            raise FeatureNotSupported(
                "assigning to a field or subscript of a column is not supported"
            )
        c = table.column(rt.name)
        if c is None:
            raise UndefinedColumn(f'column "{rt.name}" of relation "{table.name}" does not exist')
        if c in out:
            raise SQLError(f'column "{c.name}" specified more than once', "42701")
        out.append(c)
    return out


@dataclass
class InsertPlan:
    sql: str  # yields the rows to insert: the table's columns, in order, cast
    source: str | None  # the INSERT ... SELECT query, whose width must be checked
    width: int  # number of target columns


def insert_rows_sql(stmt: A.InsertStmt, table: Table, binder: Binder) -> InsertPlan:
    targets = target_columns(table, stmt.cols)
    src = stmt.selectStmt
    by_name: dict[str, str] = {}
    inner = ""
    if src is None:  # DEFAULT VALUES
        source = "(SELECT 1)"
    elif isinstance(src, A.SelectStmt) and src.valuesLists and not src.withClause:
        rows = []
        for row in src.valuesLists:
            if len(row) > len(targets):
                raise SQLError("INSERT has more expressions than target columns", "42601")
            if len(row) < len(targets):
                raise SQLError("INSERT has more target columns than expressions", "42601")
            rows.append(
                "("
                + ", ".join(cast_sql(v, c, binder) for v, c in zip(row, targets, strict=True))
                + ")"
            )
        names = ", ".join(_col_name(i) for i in range(len(targets)))
        source = f"(VALUES {', '.join(rows)}) AS _hw_src({names})"
        by_name = {c.name: f"_hw_src.{_col_name(i)}" for i, c in enumerate(targets)}
    else:
        inner = binder.to_sql(src)
        names = ", ".join(_col_name(i) for i in range(len(targets)))
        source = f"(SELECT * FROM ({inner}) AS _hw_q) AS _hw_src({names})"
        by_name = {
            c.name: to_column_sql(f"_hw_src.{_col_name(i)}", c)
            for i, c in enumerate(targets)
        }
    select = ", ".join(
        f"{by_name.get(c.name) or default_sql(c, binder)} AS {quote(c.name)}" for c in table.columns
    )
    inner_sql = inner if src is not None and source.startswith("(SELECT * FROM") else None
    return InsertPlan(f"SELECT {select} FROM {source}", inner_sql, len(targets))


def target_scan(table: Table, alias: str) -> str:
    cols = ", ".join(quote(c.name) for c in table.columns)
    sep = ", " if cols else ""
    return f"(SELECT {RID}{sep}{cols} FROM {physical(table.oid)} WHERE {CURRENT}) AS {quote(alias)}"


@dataclass
class Selection:
    """SQL of a query over the target: rid, old columns, then new columns (UPDATE)."""

    sql: str
    alias: str


def _from_and_where(table: Table, alias: str, extra_from: Any, where: Any, binder: Binder) -> str:
    parts = [target_scan(table, alias)]
    for item in extra_from or ():
        parts.append(binder.to_sql(item))
    sql = " FROM " + ", ".join(parts)
    if where is not None:
        sql += f" WHERE {binder.to_sql(where)}"
    return sql


def update_sql(stmt: A.UpdateStmt, table: Table, binder: Binder) -> Selection:
    alias = stmt.relation.alias.aliasname if stmt.relation.alias else table.name
    assignments: dict[str, str] = {}
    for rt in stmt.targetList:
        col = table.column(rt.name)
        if col is None:
            raise UndefinedColumn(f'column "{rt.name}" of relation "{table.name}" does not exist')
        if rt.indirection:
            raise FeatureNotSupported(
                "assigning to a field or subscript of a column is not supported"
            )
        val = rt.val
        if isinstance(val, A.MultiAssignRef):
            if not isinstance(val.source, A.RowExpr):
                raise FeatureNotSupported("UPDATE ... SET (cols) = (SELECT ...) is not supported")
            val = val.source.args[val.colno - 1]
        if col.name in assignments:
            raise SQLError(f'multiple assignments to same column "{col.name}"', "42601")
        assignments[col.name] = cast_sql(val, col, binder)
    a = quote(alias)
    old = ", ".join(f"{a}.{quote(c.name)}" for c in table.columns)
    new = ", ".join(assignments.get(c.name, f"{a}.{quote(c.name)}") for c in table.columns)
    body = _from_and_where(table, alias, stmt.fromClause, stmt.whereClause, binder)
    return Selection(f"SELECT {a}.{RID}, {old}, {new}{body}", alias)


def delete_sql(stmt: A.DeleteStmt, table: Table, binder: Binder) -> Selection:
    alias = stmt.relation.alias.aliasname if stmt.relation.alias else table.name
    a = quote(alias)
    cols = ", ".join(f"{a}.{quote(c.name)}" for c in table.columns)
    sep = ", " if cols else ""
    body = _from_and_where(table, alias, stmt.usingClause, stmt.whereClause, binder)
    return Selection(f"SELECT {a}.{RID}{sep}{cols}{body}", alias)


def returning_sql(returning: Any, rows_name: str, alias: str, binder: Binder) -> str:
    """RETURNING evaluated over the affected rows, registered as `rows_name`."""
    from headwater.planner.naming import name_targets

    sel = A.SelectStmt(targetList=returning, op=0)
    name_targets(sel)
    targets = binder.to_sql(sel)
    assert targets.upper().startswith("SELECT ")
    return f"{targets} FROM {rows_name} AS {quote(alias)}"
