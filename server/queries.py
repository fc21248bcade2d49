"""SELECT: bind (or reuse the bound SQL), choose the epoch, run, describe the result.

The statement runs in DuckDB on a read thread (server/reads.py) at the epoch
server/epoch_choice.py picks; plain column references report their column's declared
type, table and attnum, as PostgreSQL's RowDescription does.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pglast.ast as A
import pyarrow as pa
from headwater.planner import pg_compat
from headwater.planner.analysis import check_read
from headwater.planner.extensions import AsOf
from headwater.planner.naming import name_targets
from headwater.planner.output_types import output_sources
from headwater.planner.params import epoch_parameter
from headwater.planner.relations import Binder, ReadPlans
from headwater.planner.scope import column_types
from headwater.planner.serving import SERVE_FROM_IR, serving_sql
from headwater.server import epoch_choice, point_reads, read_plans, reads, result_cache
from headwater.server.binders import read_binder
from headwater.server.duckdb_calls import fetch
from headwater.server.results import ArrowRows, Field, Result, arrow_fields, sourced
from headwater.server.session import Session
from headwater.server.settings import setting_ms
from headwater.server.waits import Waits

from headwater.errors import SQLError


async def select(
    s: Session,
    waits: Waits,
    plans: ReadPlans,
    stmt: A.SelectStmt,
    params: list[Any],
    as_of: AsOf | None = None,
) -> Result:
    catalog = s.catalog
    try:
        return await _select(s, waits, plans, stmt, params, as_of)
    except SQLError as e:
        if not await _altered_meanwhile(s, catalog, e):
            raise
    return await _select(s, waits, plans, stmt, params, as_of)


async def _select(
    s: Session,
    waits: Waits,
    plans: ReadPlans,
    stmt: A.SelectStmt,
    params: list[Any],
    as_of: AsOf | None,
) -> Result:
    if as_of is None:
        point = point_reads.own_row(s, stmt, params)  # a row the block wrote: no wait
        if point is not None:
            return point
        await epoch_choice.await_own_writes(s, waits)
        point = await point_reads.serve(s, waits, stmt, params)  # a key's rows, no DuckDB
        if point is not None:
            return point
    plan = read_plans.cached(s, plans, stmt) if as_of is None else None
    if plan is None:
        binder = read_binder(s, epoch_parameter(stmt), history=as_of is not None)
        name_targets(stmt)
        sql, fenced = (serving_sql(stmt, binder) if SERVE_FROM_IR else None), False
        translated = None
        if sql is None:
            check_read(stmt, binder.catalog, binder.search_path)
            col_types = column_types(stmt, binder.catalog, binder.search_path)
            translated = pg_compat.translate(stmt, column_types=col_types)
            sql, fenced = bind_read(s, binder, translated)
        cache = as_of is None and not fenced
        plan = read_plans.bound(s, plans, stmt, binder, sql, cache=cache, translated=translated)
    epoch = None
    if plan.epoch or as_of is not None:  # AS OF checks its epoch even if none is read
        epoch = await epoch_choice.statement_epoch(s, waits, plan.matviews, as_of)
    args = reads.args(plan.params, params, plan.epoch, epoch)
    # DuckDB parses a bound read once (unless AS OF, or the SQL is not lexable)
    query = plan if as_of is None and plan.params is not None else plan.sql
    cur = s.cursor()
    # the cost of its last execution (shape: it ran before) chooses where it runs; with
    # statement_timeout, never on the event loop (the timer could not interrupt it)
    timed = setting_ms(s.settings.values.get("statement_timeout", "0"))
    last = plan.seconds if plan.shape is not None else None
    if timed and last is not None:
        last = max(last, reads.INLINE)
    # a plan the connection reuses answers from a kept result (any connection's) while
    # that holds (server/result_cache.py)
    reused = epoch is not None and as_of is None and plans.get(stmt) is plan
    kept = result_cache.lookup(s, plan, stmt, params, epoch) if reused else None
    if kept is not None:
        names, types, out = kept
    else:
        names, types, out, took = await reads.run(last, reads.fetch, cur, query, args)
        plan.seconds = took
        if reused:
            result_cache.keep(s, plan, params, epoch, (names, types, out))
    rows = ArrowRows(out) if isinstance(out, pa.Table) else out
    shape = (names, types)
    if plan.shape is not None and plan.shape[0] == shape:
        fields = plan.shape[1]  # the same columns as last time (shared, never changed)
    else:
        fields = arrow_fields(pa.schema([(n, pa.null()) for n in names]), types)
        fields = with_sources(s, stmt, fields, plan.sources)
        plan.shape = (shape, fields)
    return Result(f"SELECT {len(rows)}", fields, rows)


async def _altered_meanwhile(s: Session, catalog: Any, e: SQLError) -> bool:
    """Whether an ALTER TABLE explains the error, and the statement runs again once it
    is done (PostgreSQL's reader would have waited for the ALTER's lock): a column or
    table missing because the table was rewritten after the statement was bound, or a
    materialized view over it being rebuilt (55000)."""
    if s.write is not None:
        return False
    instance = s.instance
    if e.sqlstate == "55000" and instance.rebuilding:
        while instance.rebuilding:
            await asyncio.sleep(0.01)
        return True
    if e.sqlstate not in ("42703", "42P01"):
        return False
    while instance.reshaping:
        await asyncio.sleep(0.002)
    return s.catalog is not catalog


def bind_read(s: Session, binder: Binder, tree: Any) -> tuple[str, bool]:
    """`tree` (a translated copy of the client's statement: it gets the session's write
    fence) as DuckDB SQL, $`binder.epoch_param` standing for its epoch; and whether the
    SQL holds the write fence (then it is good for this statement only)."""
    fenced = bool(epoch_choice.write_fence(s, tree))
    return binder.to_sql(tree), fenced


def with_sources(s: Session, stmt: Any, fields: list[Field], sources: Any = False) -> list[Field]:
    """Plain column references report the column's declared type, table and attnum."""
    if sources is False:
        sources = output_sources(stmt, s.catalog, s.search_path())
    return sourced(fields, sources)


async def describe(s: Session, waits: Waits, stmt: A.SelectStmt, nparams: int) -> list[Field]:
    """The result columns of a SELECT, from running it over no rows."""
    await epoch_choice.await_own_writes(s, waits)
    binder = read_binder(s, epoch_parameter(stmt))
    name_targets(stmt)
    tree = stmt
    sql = serving_sql(stmt, binder) if SERVE_FROM_IR else None
    if sql is None:
        col_types = column_types(stmt, binder.catalog, binder.search_path)
        tree = pg_compat.translate(stmt, column_types=col_types)
        sql = binder.to_sql(tree)
    sql = f"SELECT * FROM ({sql}) AS _hw_d LIMIT 0"
    used, epoch_param = reads.split_params(sql, binder.epoch_param)
    args = reads.args(used, [None] * nparams, epoch_param, 0)  # no rows: any epoch
    cur = s.cursor()
    table, types = await asyncio.to_thread(fetch, cur, sql, args)
    return with_sources(s, tree, arrow_fields(table.schema, types))
