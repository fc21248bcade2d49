"""Results of bound reads, reused while nothing under them changed, by every connection.

A dashboard polls the same statement over a materialized view (`SELECT * FROM
revenue_by_region`, prepared or as the same text): each read ran the view's state
query in DuckDB (~0.6 ms, ~1.4 ms of CPU for a 10-row view) although the view changes
only when a table under it does. A bound read (planner/relations.py BoundRead) that
its connection reuses keeps its result with the epoch it was read at, in one cache of
the instance keyed by the read's DuckDB SQL (names resolved: the same text means the
same relations), its parameters and TimeZone: a pool of connections (a BI tool's, an
application server's) computes each statement once per change, not once per
connection. A later execution answers from it when no write to a table under it (read
directly or through its views) came after the older of the two epochs, the result's
and the one the statement chose; the epoch is still chosen as before (freshness waits
unchanged): only the DuckDB query is skipped. Each connection binds (and so checks
privileges for) its own statement; a result is reused only over the catalog it was
read with.

What is never reused: a statement that calls a volatile or session-dependent
function (now(), random(), current_user, pg_*, ...), reads a temporary table (its
writes are not epochs) or a view over the clock (temporal filters change every
epoch); reads in a writing block; results over MAX_ROWS rows or MAX_BYTES of Arrow.
The cache holds at most MAX_ENTRIES results and MAX_TOTAL_BYTES, least recently
used out first. DDL and a rebuilt view already make the plan itself stale
(server/read_plans.py).
"""

from __future__ import annotations

from typing import Any

import pglast.ast as A
import pyarrow as pa
from headwater.catalog.catalog import is_temp_schema
from headwater.catalog.objects import Table, View
from headwater.planner.ir import VOLATILE_FUNCS
from headwater.planner.relations import BoundRead
from headwater.planner.syntax import nodes
from headwater.planner.temporal import CLOCK_OID
from headwater.server.session import Session
from pglast import parse_sql

MAX_ROWS = 1_000
MAX_BYTES = 256 << 10
MAX_ENTRIES = 1_024
MAX_TOTAL_BYTES = 64 << 20
# functions whose value depends on more than their arguments: the session, the
# catalog, the clock or chance
_UNSTABLE_PREFIXES = ("pg_", "current_", "session_", "inet_", "txid_", "has_", "to_reg")
_UNSTABLE = VOLATILE_FUNCS | {
    "currval",
    "lastval",
    "setval",
    "random_normal",
    "version",
    "user",
    "headwater_write_fence",
    "set_config",
    "obj_description",
    "col_description",
    "format_type",
}


def deterministic(stmt: Any) -> bool:
    """Whether the statement's result is a function of its relations and parameters."""
    for node in nodes(stmt):
        if isinstance(node, A.SQLValueFunction):  # CURRENT_DATE, CURRENT_USER, ...
            return False
        if isinstance(node, A.FuncCall):
            name = node.funcname[-1].sval.lower()
            if name in _UNSTABLE or name.startswith(_UNSTABLE_PREFIXES):
                return False
    return True


def _dependencies(s: Session, plan: BoundRead, stmt: Any) -> frozenset[int] | None:
    """The tables the plan's result follows (None: not to be reused)."""
    if not plan.epoch or not deterministic(stmt):
        return None
    deps = set(plan.tables)
    for oid in plan.matviews:
        deps |= s.instance.matviews.base_tables(oid)
    if CLOCK_OID in deps:
        return None
    for oid in plan.depends | plan.tables:
        rel = plan.catalog.by_oid(oid)
        if isinstance(rel, Table) and is_temp_schema(rel.schema):
            return None
        if isinstance(rel, View) and not deterministic(parse_sql(rel.definition)):
            return None
    return frozenset(deps)


def lookup(s: Session, plan: BoundRead, stmt: Any, params: list[Any], epoch: int) -> Any:
    """(names, types, rows) of the plan's result if one read holds at `epoch`, else None."""
    if plan.deps is False:
        plan.deps = _dependencies(s, plan, stmt)
    if plan.deps is None or s.write is not None or s.staged:
        return None
    results = s.instance.read_results
    key = _key(s, plan, params)
    kept = results.get(key)
    if kept is None:
        return None
    read_at, catalog, result, _ = kept
    upto = min(epoch, read_at)  # no change after it: the same rows at both epochs
    changed = s.instance.table_changed
    if catalog is not plan.catalog or any(changed.get(oid, 0) > upto for oid in plan.deps):
        return None
    results.move_to_end(key)
    s.instance.reads_reused += 1
    return result


def keep(
    s: Session, plan: BoundRead, params: list[Any], epoch: int, result: tuple[Any, Any, Any]
) -> None:
    """Keep `result` (names, types, rows read at `epoch`) for the next execution of the
    plan's SQL with these parameters, by any connection."""
    if plan.deps is None or plan.deps is False or s.write is not None or s.staged:
        return
    rows = result[2]
    size = rows.nbytes if isinstance(rows, pa.Table) else 64 * len(rows)
    if len(rows) > MAX_ROWS or size > MAX_BYTES:
        return
    results = s.instance.read_results
    key = _key(s, plan, params)
    old = results.pop(key, None)
    if old is not None:
        s.instance.read_results_bytes -= old[3]
    results[key] = (epoch, plan.catalog, result, size)
    s.instance.read_results_bytes += size
    while len(results) > MAX_ENTRIES or s.instance.read_results_bytes > MAX_TOTAL_BYTES:
        s.instance.read_results_bytes -= results.popitem(last=False)[1][3]


def _key(s: Session, plan: BoundRead, params: list[Any]) -> tuple[str, str, str | None]:
    # parameters by their repr: equal values may still print differently (1.0, 1.00)
    return plan.sql, repr(params), s.settings.values.get("TimeZone")
