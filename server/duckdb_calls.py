"""Calling DuckDB from statement code: PostgreSQL parameters in the form DuckDB binds,
DuckDB's errors in PostgreSQL's terms (storage/duckdb_errors.py)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import duckdb
import pyarrow as pa
from headwater.catalog.objects import Column
from headwater.catalog.pgtypes import Interval
from headwater.storage.duckdb_errors import translate
from headwater.storage.replica import quote
from pglast.parser import scan

# DuckDB warns that DB-API results copy once more into Arrow; results are small
# next to that cost, and the DB-API form is the one that takes parameters.
warnings.filterwarnings("ignore", message="Arrow output on a DB-API result")


def fetch(
    cur: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | dict[str, Any] | None = None
) -> tuple[pa.Table, list[str]]:
    """The rows of `sql` as Arrow, and DuckDB's names of the column types."""
    try:
        rel = cur.execute(sql, duckdb_params(sql, params))
        types = [str(d[1]) for d in rel.description] if rel.description else []
        return rel.to_arrow_table(), types
    except duckdb.Error as e:
        raise translate(e) from None


def duckdb_params(sql: str, params: Any) -> Any:
    """DuckDB takes exactly the parameters a statement names: a part of a statement
    (its RETURNING, its VALUES) gets only those it uses, by number."""
    if not params or isinstance(params, dict):
        return params or None
    try:
        used = {int(sql[t.start + 1 : t.end + 1]) for t in scan(sql) if t.name == "PARAM"}
    except Exception:  # not PostgreSQL-lexable: let DuckDB judge
        return params
    if used == set(range(1, len(params) + 1)):
        return params
    return {str(n): params[n - 1] for n in used if n <= len(params)} or None


def duckdb_param(value: Any) -> Any:
    """A decoded parameter in a form DuckDB binds (intervals keep their months)."""
    if isinstance(value, Interval):
        return f"{value.months} months {value.days} days {value.microseconds} microseconds"
    return value


def unregister_quietly(cur: duckdb.DuckDBPyConnection, name: str) -> None:
    """Unregister an Arrow table in a `finally`: after a failed statement DuckDB refuses
    it (the transaction is aborted), and the statement's error is the one to report."""
    try:
        cur.unregister(name)
    except duckdb.Error:
        pass


def rows_of_params(columns: Sequence[Column], n: int) -> str:
    """`n` rows given as parameters (each row's values of `columns`, in order), as a FROM
    item `_hw_r` whose columns are named and typed as the table's."""
    row = "(" + ", ".join(f"CAST(? AS {c.type.duckdb()})" for c in columns) + ")"
    names = ", ".join(quote(c.name) for c in columns)
    return f"(VALUES {', '.join([row] * n)}) AS _hw_r({names})"
