"""CHECK constraints: their condition as DuckDB SQL, and the rows that violate one.

A row passes a CHECK when its expression is true or NULL (PostgreSQL). Constraints
are tested in name order, as PostgreSQL's relcache sorts them, so the one reported
first is the same.
"""

from __future__ import annotations

from functools import lru_cache

import duckdb
import pyarrow as pa
from headwater.catalog.catalog import Catalog
from headwater.catalog.constraints import typed_text
from headwater.catalog.objects import Check, Column, Table
from headwater.catalog.types import PgType
from headwater.planner import pg_compat
from headwater.planner.relations import Binder
from headwater.planner.scope import TypeNames, type_kind
from headwater.server.duckdb_calls import fetch, unregister_quietly
from headwater.server.py_values import first_row
from headwater.storage.replica import quote
from pglast import parse_sql

from headwater.errors import SQLError


@lru_cache(maxsize=512)
def condition_sql(expr: str, columns: tuple[Column, ...]) -> str:
    """The CHECK expression as DuckDB SQL over the table's `columns` (no relations:
    PostgreSQL refuses subqueries in CHECK), translated knowing their types (an enum
    column's `'blue'::color`, its `< 'blue'`)."""
    stmt = parse_sql(f"SELECT ({expr})")[0].stmt
    types = TypeNames(lambda names: _enum_named(columns, names))
    types.update((c.name, type_kind(c.type)) for c in columns)
    pg_compat.rewrite(stmt, column_types=types)
    binder = Binder(Catalog(), (), lambda t: "")
    return binder.to_sql(stmt.targetList[0].val)


def _enum_named(columns: tuple[Column, ...], names: list[str]) -> PgType | None:
    for c in columns:
        pg = c.type.pg
        if pg.category == "E" and names[-1] == pg.name and names[:-1] in ([], [pg.schema]):
            return pg
    return None


def failing_sql(check: Check, table: Table, source: str) -> str:
    """The rows of `source` (a relation with `table`'s columns) that violate `check`."""
    cond = condition_sql(check.expr, table.columns)
    return f"SELECT * FROM {source} AS _hw_c WHERE NOT coalesce(CAST(({cond}) AS BOOLEAN), true)"


def _shown(table: Table, row: list[object]) -> str:
    return typed_text(table, [c.name for c in table.columns], row)


def check_violation(table: Table, check: Check, row: list[object] | None) -> SQLError:
    if check.domain and not check.name:  # a domain's NOT NULL
        return SQLError(f"domain {check.domain} does not allow null values", "23502")
    if check.domain:
        return SQLError(
            f'value for domain {check.domain} violates check constraint "{check.name}"',
            "23514",
        )
    if row is None:  # ALTER TABLE ADD CONSTRAINT over existing rows
        return SQLError(
            f'check constraint "{check.name}" of relation "{table.name}" is violated by some row',
            "23514",
        )
    return SQLError(
        f'new row for relation "{table.name}" violates check constraint "{check.name}"',
        "23514",
        detail=f"Failing row contains ({_shown(table, row)}).",
    )


def check_rows(table: Table, new: pa.Table, cur: duckdb.DuckDBPyConnection) -> None:
    """Raise 23514 for the first of `new`'s rows (user columns by name) that violates
    one of the table's CHECK constraints."""
    if not table.checks or not new.num_rows:
        return
    name = "_hw_check_rows"
    cols = ", ".join(quote(c.name) for c in table.columns)
    cur.register(name, new)
    try:
        for check in sorted(table.checks, key=lambda c: c.name):
            bad, _ = fetch(cur, f"SELECT {cols} FROM ({failing_sql(check, table, name)}) LIMIT 1")
            if bad.num_rows:
                raise check_violation(table, check, list(first_row(bad)))
    finally:
        unregister_quietly(cur, name)
