"""The last result of a bound read, reused while nothing under it changed.

A dashboard polls the same statement over a materialized view (`SELECT * FROM
revenue_by_region`, prepared or as the same text): each read ran the view's state
query in DuckDB (~0.6 ms, ~1.4 ms of CPU for a 10-row view) although the view changes
only when a table under it does. A bound read (planner/relations.py BoundRead) keeps
its last result with the epoch it was read at; a later execution with the same
parameters, at an epoch no newer write to a table under it (read directly or through
its views) precedes, answers from it. The epoch is still chosen as before (freshness
waits unchanged): only the DuckDB query is skipped.

What is never reused: a statement that calls a volatile or session-dependent
function (now(), random(), current_user, pg_*, ...), reads a temporary table (its
writes are not epochs) or a view over the clock (temporal filters change every
epoch); reads in a writing block; results over MAX_ROWS rows or MAX_BYTES of Arrow
(memory: one result per plan, up to 64 plans per connection: ~0.1-0.3 MB per plan at
most). DDL and a rebuilt view already make the plan itself stale
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
    """(names, types, rows) of the plan's last result if it holds at `epoch`, else None."""
    if plan.deps is False:
        plan.deps = _dependencies(s, plan, stmt)
    kept = plan.result
    if kept is None or plan.deps is None or s.write is not None or s.staged:
        return None
    read_at, args, zone, result = kept
    if epoch < read_at or zone != s.settings.values.get("TimeZone") or args != repr(params):
        return None
    changed = s.instance.table_changed
    if any(changed.get(oid, 0) > read_at for oid in plan.deps):
        return None
    s.instance.reads_reused += 1
    return result


def keep(
    s: Session, plan: BoundRead, params: list[Any], epoch: int, result: tuple[Any, Any, Any]
) -> None:
    """Keep `result` (names, types, rows read at `epoch`) for the plan's next execution."""
    if plan.deps is None or plan.deps is False or s.write is not None or s.staged:
        return
    rows = result[2]
    if len(rows) > MAX_ROWS or (isinstance(rows, pa.Table) and rows.nbytes > MAX_BYTES):
        plan.result = None
        return
    # parameters by their repr: equal values may still print differently (1.0, 1.00)
    plan.result = (epoch, repr(params), s.settings.values.get("TimeZone"), result)
