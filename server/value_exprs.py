"""VALUES items that are expressions, computed by DuckDB for the fast INSERT path.

`INSERT INTO t VALUES ($1, lower($2), $3 + 1, ARRAY[$4, $5], now() + interval '1 day')`:
the batcher takes constants, parameters and the clock in Python (server/batcher.py); an
item that is an expression sent the whole INSERT to the general path, a writing
transaction of its own (~10-13 ms, and every other writer waits for its write lock).
Here such items, if they read no table and change nothing (no column, subquery,
sequence call or other function with a side effect), are computed in one DuckDB
statement as the general path computes them (planner/dml.py `cast_sql`: the item cast
to its column's type, after the PostgreSQL translation), off the write lock; the
statement then goes to the batcher with their values as extra parameters. An
expression that reads the clock stays general: the batcher's own instant for now()
and the columns' DEFAULT now() would differ from DuckDB's by a few microseconds.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import duckdb
import pglast.ast as A
from headwater.catalog.objects import Column, Table
from headwater.planner import dml
from headwater.planner.syntax import nodes
from headwater.server.binders import current_binder
from headwater.server.duckdb_calls import duckdb_params
from headwater.server.session import Session
from headwater.storage.duckdb_errors import translate

# node types an expression computed here may hold (no ColumnRef, SubLink, RangeVar, ...)
_PURE_NODES = (
    A.A_Const,
    A.ParamRef,
    A.A_Expr,
    A.TypeCast,
    A.TypeName,
    A.FuncCall,
    A.A_ArrayExpr,
    A.CoalesceExpr,
    A.MinMaxExpr,
    A.CaseExpr,
    A.CaseWhen,
    A.BoolExpr,
    A.NullTest,
    A.BooleanTest,
    A.String,
    A.Integer,
    A.Float,
    A.Boolean,
)
# the clock: a bare call is the batcher's (its instant), inside an expression general
_CLOCK = frozenset(
    ("now", "transaction_timestamp", "statement_timestamp", "clock_timestamp", "timeofday")
)
# functions that change something or read a table, or the clock: the general path
_SIDE_EFFECTS = _CLOCK | frozenset(
    ("nextval", "currval", "setval", "lastval", "set_config", "pg_notify", "pg_sleep")
    + ("txid_current", "pg_current_xact_id", "pg_cancel_backend", "pg_terminate_backend")
    + ("pg_reload_conf", "pg_rotate_logfile", "pg_switch_wal", "pg_read_file")
)
_SIDE_EFFECT_PREFIXES = ("pg_advisory", "pg_try_advisory", "lo_", "dblink", "pg_stat_reset")


def computable(node: Any) -> bool:
    """Whether `node` is an expression this module computes."""
    for n in nodes(node):
        if not isinstance(n, _PURE_NODES):  # (SQLValueFunction, CURRENT_DATE & co.: the clock)
            return False
        if isinstance(n, A.FuncCall):
            name = n.funcname[-1].sval.lower()
            if (
                n.agg_star
                or n.over is not None
                or n.agg_filter is not None
                or n.agg_order
                or name in _SIDE_EFFECTS
                or name.startswith(_SIDE_EFFECT_PREFIXES)
            ):
                return False
    return True


def _plain(node: Any) -> bool:
    """An item the batcher takes itself, or leaves to the general path (the clock)."""
    return isinstance(node, A.A_Const | A.ParamRef | A.SetToDefault | A.SQLValueFunction) or (
        isinstance(node, A.FuncCall) and not node.args and node.funcname[-1].sval in _CLOCK
    )


def items(stmt: Any, table: Table) -> list[tuple[int, int, Column]] | None:
    """(row, item, column) of each VALUES item to compute; None when the statement is
    not an INSERT ... VALUES whose other items the batcher may take, or none is to be
    computed, or one cannot be."""
    src = stmt.selectStmt
    if not isinstance(src, A.SelectStmt) or not src.valuesLists or stmt.withClause is not None:
        return None
    if stmt.cols:
        cols = [table.column(rt.name) for rt in stmt.cols]
    else:
        cols = list(table.columns)[: len(src.valuesLists[0])]
    out: list[tuple[int, int, Column]] = []
    for r, values in enumerate(src.valuesLists):
        if len(values) != len(cols):
            return None
        for i, (node, col) in enumerate(zip(values, cols, strict=True)):
            if col is None:
                return None
            if not _plain(node):
                if not computable(node):
                    return None
                out.append((r, i, col))
    return out or None


async def with_values(
    s: Session, stmt: Any, table: Table, params: list[Any], todo: list[tuple[int, int, Column]]
) -> tuple[Any, list[Any]]:
    """A copy of `stmt` whose items `todo` are parameters, and the parameters with
    their values (computed as the general path would: 22003, 22P02 ... as its errors)."""
    work = copy.deepcopy(stmt)
    dml.pg_spellings(work, s.catalog, s.search_path())  # as the general path has them
    binder = current_binder(s)
    values = work.selectStmt.valuesLists
    sql = "SELECT " + ", ".join(dml.cast_sql(values[r][i], col, binder) for r, i, col in todo)
    row = await asyncio.to_thread(_compute, s, sql, params)
    out = copy.deepcopy(stmt)
    rows = [list(v) for v in out.selectStmt.valuesLists]
    extra = list(params)
    for (r, i, _), value in zip(todo, row, strict=True):
        extra.append(value)
        rows[r][i] = A.ParamRef(number=len(extra))
    out.selectStmt.valuesLists = tuple(tuple(v) for v in rows)
    return out, extra


def _compute(s: Session, sql: str, params: list[Any]) -> tuple[Any, ...]:
    try:
        (got,) = s.cursor().execute(sql, duckdb_params(sql, params)).fetchall()
    except duckdb.Error as e:
        raise translate(e) from None
    return tuple(got)
