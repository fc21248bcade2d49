"""Generated columns (GENERATED ALWAYS AS (expr) STORED): every write computes them.

A write's new row versions get each generated column's value from their other
columns (server/writes.py `apply`: INSERT, UPDATE, COPY, ON CONFLICT, foreign key
actions alike), before the constraints are checked. A statement that gives one a value
of its own is refused as PostgreSQL refuses it (428C9); DEFAULT is allowed. An INSERT
of constants that leaves them out takes the fast path, which computes them for its
rows in one DuckDB statement (`fill_rows`); UPDATEs take the general path (point
writes do not compute them).
"""

from __future__ import annotations

import functools
from typing import Any

import duckdb
import pglast.ast as A
import pyarrow as pa
from headwater.catalog.objects import Column, Table
from headwater.planner.dml import to_column_sql
from headwater.server.checks import condition_sql
from headwater.server.duckdb_calls import fetch, rows_of_params, unregister_quietly
from headwater.storage.duckdb_errors import translate
from headwater.storage.replica import physical, quote

from headwater.errors import SQLError


def has_generated(table: Table) -> bool:
    return any(c.generated is not None for c in table.columns)


def fill(table: Table, new: pa.Table, cur: duckdb.DuckDBPyConnection) -> pa.Table:
    """`new` (a table's row versions, with hidden columns) with its generated columns
    computed from the others."""
    exprs = [
        f"{to_column_sql(condition_sql(c.generated, table.columns), c)} AS {quote(c.name)}"
        for c in table.columns
        if c.generated is not None
    ]
    name = "_hw_generated"
    cur.register(name, new)
    try:
        out, _ = fetch(cur, f"SELECT * REPLACE ({', '.join(exprs)}) FROM {name}")
    finally:
        unregister_quietly(cur, name)
    return out


def fill_rows(table: Table, rows: list[list[Any]], cur: duckdb.DuckDBPyConnection) -> None:
    """The fast INSERT path's rows (server/batcher.py `fast_rows`) with their generated
    columns computed, in place: one DuckDB statement of parameters for the statement's
    rows (~0.5 ms; registering them as Arrow costs twice that, and the general path's
    writing transaction ~14 ms of CPU per INSERT)."""
    given = [i for i, c in enumerate(table.columns) if c.generated is None]
    params = [row[i] for row in rows for i in given]
    try:
        out = cur.execute(_values_sql(table, len(rows)), params).fetchall()
    except duckdb.Error as e:
        raise translate(e) from None
    for row, values in zip(rows, out, strict=True):
        for i, v in zip(table.generated_positions, values, strict=True):
            row[i] = v


@functools.lru_cache(maxsize=64)
def _values_sql(table: Table, n: int) -> str:
    """SELECT of the generated columns of `n` rows given as parameters (in column
    order, the generated ones left out)."""
    exprs = ", ".join(
        to_column_sql(condition_sql(c.generated, table.columns), c)
        for c in table.columns
        if c.generated is not None
    )
    given = [c for c in table.columns if c.generated is None]
    return f"SELECT {exprs} FROM {rows_of_params(given, n)}"


def validate(table: Table, cur: duckdb.DuckDBPyConnection) -> None:
    """The generation expressions bind over the new table (42703 for a missing column)."""
    exprs = [condition_sql(c.generated, table.columns) for c in table.columns if c.generated]
    if exprs:
        try:
            fetch(cur, f"SELECT {', '.join(exprs)} FROM {physical(table.oid)} LIMIT 0")
        except duckdb.Error as e:
            raise translate(e) from None


def _error(message: str, col: Column) -> SQLError:
    return SQLError(message, "428C9", detail=f'Column "{col.name}" is a generated column.')


def check_insert(table: Table, columns: list[Column], stmt: A.InsertStmt) -> None:
    """428C9 for an INSERT giving a generated column a value other than DEFAULT."""
    src = stmt.selectStmt
    rows: list[Any] = list(src.valuesLists or ()) if isinstance(src, A.SelectStmt) else []
    for i, col in enumerate(columns):
        if col.generated is None:
            continue
        given = [r[i] for r in rows if i < len(r)] if rows else [None]
        if any(not isinstance(v, A.SetToDefault) for v in given):
            raise _error(f'cannot insert a non-DEFAULT value into column "{col.name}"', col)


def check_update(table: Table, targets: list[A.ResTarget]) -> None:
    """428C9 for an UPDATE setting a generated column to anything but DEFAULT."""
    for rt in targets:
        col = table.column(rt.name)
        if col is not None and col.generated is not None and not isinstance(rt.val, A.SetToDefault):
            raise _error(f'column "{col.name}" can only be updated to DEFAULT', col)


def copy_columns(table: Table, named: list[Column] | None) -> list[Column]:
    """COPY FROM's columns: without a list, those that are not generated (PostgreSQL's
    default list); a list naming one is refused (42P10, as PostgreSQL)."""
    if named is None:
        return [c for c in table.columns if c.generated is None]
    for c in named:
        if c.generated is not None:
            raise SQLError(
                f'column "{c.name}" is a generated column',
                "42P10",
                detail="Generated columns cannot be used in COPY.",
            )
    return named
