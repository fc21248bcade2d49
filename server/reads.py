"""Where reads run: worker threads of their own, and results without a detour.

SELECTs run in DuckDB on these threads, never on the default executor that COPY,
commits and the INSERT batcher use: a bulk load or a commit does not hold up the
point reads queued behind it. Statements whose last execution took more than `SLOW`
seconds of CPU run on a smaller pool of their own, so a few big queries cannot take
every read thread either.

A result whose columns are all of a few plain types (integers, double, boolean,
text) is fetched as Python tuples directly; any other goes through Arrow, whose
values the codecs expect (decimals, dates and times, intervals, lists, ...).
"""

from __future__ import annotations

import asyncio
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import duckdb
from headwater.planner.relations import BoundRead
from headwater.storage.duckdb_errors import translate
from pglast.parser import scan

SLOW = 0.1  # CPU seconds: a statement that took more runs on the slow pool next time
_PLAIN = frozenset({"BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "DOUBLE", "VARCHAR"})
_pools: dict[str, ThreadPoolExecutor] = {}


def _pool(kind: str) -> ThreadPoolExecutor:
    pool = _pools.get(kind)
    if pool is None:
        cpus = os.cpu_count() or 2
        # Threads mostly wait (for DuckDB, the GIL, a CPU): more of them than cores
        workers = max(8, cpus * 4) if kind == "fast" else max(2, cpus)
        pool = _pools[kind] = ThreadPoolExecutor(workers, thread_name_prefix=f"hw-read-{kind}")
    return pool


async def run(slow: bool, fn: Any, *args: Any) -> Any:
    """fn(*args) on a read thread (the slow pool when `slow`)."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_pool("slow" if slow else "fast"), fn, *args)


def fetch(
    cur: duckdb.DuckDBPyConnection, query: str | BoundRead, args: Any
) -> tuple[list[str], list[str], Any, float]:
    """(column names, DuckDB types, rows or an Arrow table, CPU seconds this thread
    spent: what a statement costs, whatever the machine's load). `query` is
    SQL, or a bound read whose epoch is a parameter (`args`, from `args()`)."""
    t0 = time.thread_time()
    try:
        if isinstance(query, BoundRead):
            if query.duckdb is None:
                query.duckdb = cur.extract_statements(epoch_sql(query))[0]
            rel = cur.execute(query.duckdb, args)
        else:
            rel = cur.execute(query, args)
        desc = rel.description or []
        names = [d[0] for d in desc]
        types = [str(d[1]) for d in desc]
        if desc and all(t in _PLAIN for t in types):
            out: Any = rel.fetchall()
        else:
            out = rel.to_arrow_table()
    except duckdb.Error as e:
        raise translate(e) from None
    return names, types, out, time.thread_time() - t0


def param_numbers(sql: str) -> frozenset[int] | None:
    """The $n parameters `sql` names (None when it is not PostgreSQL-lexable)."""
    try:
        return frozenset(int(sql[t.start + 1 : t.end + 1]) for t in scan(sql) if t.name == "PARAM")
    except Exception:
        return None


def epoch_param(used: frozenset[int]) -> int:
    """The number of the parameter that carries a bound read's epoch: after the client's."""
    return max(used, default=0) + 1


def epoch_sql(plan: BoundRead) -> str:
    """The bound read's SQL with its epoch a parameter: DuckDB parses it once, and binds
    parameters as constants when it plans (filters on the epoch still prune)."""
    assert plan.params is not None
    return plan.sql.replace(plan.mark, f"${epoch_param(plan.params)}") if plan.mark else plan.sql


def args(used: frozenset[int] | None, params: list[Any] | None, epoch: int | None = None) -> Any:
    """DuckDB takes exactly the parameters a statement names (executor.duckdb_params,
    with the names found once per bound statement); `epoch` is the read's, for epoch_sql."""
    params = params or []
    if epoch is not None:
        assert used is not None
        if used == frozenset(range(1, len(params) + 1)):
            return [*params, epoch]
        named = {str(n): params[n - 1] for n in used if n <= len(params)}
        named[str(epoch_param(used))] = epoch
        return named
    if not params or used is None:
        return params or None
    if used == frozenset(range(1, len(params) + 1)):
        return params
    return {str(n): params[n - 1] for n in used if n <= len(params)} or None
