"""Where reads run: worker threads of their own, and results without a detour.

SELECTs run in DuckDB on these threads, never on the default executor that COPY,
commits and the INSERT batcher use: a bulk load or a commit does not hold up the
point reads queued behind it. Statements whose last execution took more than `SLOW`
seconds of CPU run on a smaller pool of their own, so a few big queries cannot take
every read thread either. A statement whose last execution took less than `INLINE`
runs on the event loop itself: the hop to a thread and back (a submit, two wake-ups,
the loop's self-pipe) cost more than the query (issue 16: ~0.2 ms of a 0.7 ms
prepared point read), and the loop is held no longer than by a message's Python work.

A result whose columns are all of a few plain types (integers, double, boolean,
text) is fetched as Python tuples directly; any other goes through Arrow, whose
values the codecs expect (decimals, dates and times, intervals, lists, ...).
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import duckdb
import pyarrow as pa
from headwater.planner.relations import BoundRead
from headwater.storage.duckdb_errors import translate
from pglast.parser import scan

SLOW = 0.1  # CPU seconds: a statement that took more runs on the slow pool next time
INLINE = 0.001  # CPU seconds: a statement that took less runs on the event loop next time,
INLINE_WALL = 0.005  # unless it took longer than this (it waited: a lock, a UDF)
TUPLES_UPTO = 256  # rows of plain types fetched as Python tuples before Arrow takes over
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


async def run(last: float | None, fn: Any, *args: Any) -> Any:
    """fn(*args) where a statement whose last execution took `last` CPU seconds (None:
    not run yet) runs: on the event loop, the fast read pool or the slow one."""
    if last is not None and last < INLINE:
        return fn(*args)
    loop = asyncio.get_running_loop()
    pool = _pool("slow" if last is not None and last > SLOW else "fast")
    return await loop.run_in_executor(pool, fn, *args)


def fetch(
    cur: duckdb.DuckDBPyConnection, query: str | BoundRead, args: Any
) -> tuple[list[str], list[str], Any, float]:
    """(column names, DuckDB types, rows or an Arrow table, CPU seconds this thread
    spent: what a statement costs, whatever the machine's load; at least INLINE if
    it took INLINE_WALL or more). `query` is SQL, or a bound read (DuckDB parses it
    once); `args` come from `args()`."""
    t0 = time.thread_time()
    w0 = time.perf_counter()
    try:
        if isinstance(query, BoundRead):
            if query.duckdb is None:
                query.duckdb = cur.extract_statements(query.sql)[0]
            rel = cur.execute(query.duckdb, args)
        else:
            rel = cur.execute(query, args)
        desc = rel.description or []
        names = [d[0] for d in desc]
        types = [str(d[1]) for d in desc]
        out: Any
        if desc and all(t in _PLAIN for t in types):
            # tuples for a small result (Arrow costs ~0.15 ms more per statement); a
            # large one goes on as Arrow, which the wire encodes a column at a time
            out = rel.fetchmany(TUPLES_UPTO)
            if len(out) == TUPLES_UPTO:
                rest = rel.to_arrow_table()
                cols = zip(*out, strict=True)
                head = [pa.array(c, f.type) for c, f in zip(cols, rest.schema, strict=True)]
                out = pa.concat_tables([pa.Table.from_arrays(head, schema=rest.schema), rest])
        else:
            out = rel.to_arrow_table()
    except duckdb.Error as e:
        raise translate(e) from None
    cpu = time.thread_time() - t0
    return names, types, out, cpu if time.perf_counter() - w0 < INLINE_WALL else max(cpu, INLINE)


# Quoted strings and identifiers (standard: a quote inside is doubled) and $n, left to
# right: what PostgreSQL's lexer finds as parameters in text without the forms below.
_QUOTED_OR_PARAM = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\$(\d+)")
# escape strings (E'\''), dollar quoting ($$, $tag$), a $ after a word (`a$1` is a name,
# `1$1` a number and a parameter) and comments: the lexer reads those
_LEXER_ONLY = re.compile(r"(?<![\w$])[eE]'|\$[A-Za-z_$]|[\w$]\$|--|/\*")


def param_numbers(sql: str) -> frozenset[int] | None:
    """The $n parameters `sql` names (None when it is not PostgreSQL-lexable). Most
    bound SQL is read with a regular expression; the lexer (~0.1 ms for a read of one
    table, once per statement a client does not reuse) reads the rest."""
    balanced = sql.count("'") % 2 == 0 and sql.count('"') % 2 == 0  # (else maybe unlexable)
    if balanced and _LEXER_ONLY.search(sql) is None:
        return frozenset(int(n) for n in _QUOTED_OR_PARAM.findall(sql) if n)
    try:
        return frozenset(int(sql[t.start + 1 : t.end + 1]) for t in scan(sql) if t.name == "PARAM")
    except Exception:
        return None


def split_params(sql: str, epoch_param: int) -> tuple[frozenset[int] | None, int]:
    """The client's $n that bound SQL names (None: not lexable, DuckDB judges), and
    `epoch_param` if the SQL names it too (0 if not: it reads no table or view at an
    epoch, say `SELECT 1` or a writing transaction's own rows)."""
    used = param_numbers(sql)
    if used is None:
        named = re.search(rf"\${epoch_param}(?!\d)", sql) is not None
        return None, epoch_param if named else 0
    return used - {epoch_param}, epoch_param if epoch_param in used else 0


def args(
    used: frozenset[int] | None,
    params: list[Any] | None,
    epoch_param: int = 0,
    epoch: int | None = None,
) -> Any:
    """DuckDB takes exactly the parameters a statement names: the client's `used` ones
    (found once per bound statement, split_params) and $`epoch_param` carrying the
    read's `epoch` (0: the SQL names none). A list when they are $1..$n, else by name."""
    params = params or []
    if used is None:  # not lexable: the client's in order, then the epoch
        if not epoch_param:
            return params or None
        return [*params[: epoch_param - 1], *[None] * (epoch_param - 1 - len(params)), epoch]
    n = len(params)
    if epoch_param:
        if epoch_param == n + 1 and used == frozenset(range(1, n + 1)):
            return [*params, epoch]
        named = {str(i): params[i - 1] for i in used if i <= n}
        named[str(epoch_param)] = epoch
        return named
    if not params:
        return None
    if used == frozenset(range(1, n + 1)):
        return params
    return {str(i): params[i - 1] for i in used if i <= n} or None
