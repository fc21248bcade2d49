"""A plain read's DuckDB SQL from the IR the engine maintains views with.

`serving_sql(stmt, binder)` builds the SELECT's `Plan` (planner/ir.py, `serving=True`)
and renders it (planner/render.py), each Scan reading what the Binder would read: a
table through `binder.scan` (at the statement's epoch), a materialized view through
`binder.matview`. So a function or cast made to work in the IR works in SELECT and in
views alike. It returns None for a statement outside the IR (a system relation, a
function the server binds, ...; tests/test_ir_serving.py counts them): the caller
binds it with relations.Binder instead, which also gives the errors.

The Binder's bookkeeping comes out the same: `binder.tables`, `binder.matviews` and
`binder.depends` hold what the statement reads, and the scans name the statement's
epoch as the same DuckDB parameter, $`binder.epoch_param` (planner/params.py's
epoch_parameter: after the client's), bound when the read runs, as the Binder's SQL
does; `binder.uses_system` stays False (system relations are not in the IR).
"""

from __future__ import annotations

from typing import Any

import pglast.ast as A
from headwater.catalog.objects import MaterializedView, Table
from headwater.planner.ir import PlanBuilder, Scan
from headwater.planner.relations import Binder
from headwater.planner.render import plan_sql

# The server's switch (server/queries.py): plain reads try the IR first, the Binder
# takes what it does not cover (tests/test_ir_serving.py checks the IR's SQL itself).
SERVE_FROM_IR = True

# Calls the server binds itself (server/sequence_calls.py, the session's write fence),
# and the internal functions planner/pg_compat.py's rewrite leaves in a tree it has
# already translated (the IR translates the tree it is given itself).
_BOUND_ELSEWHERE = frozenset(
    {"nextval", "currval", "setval", "lastval", "pg_get_serial_sequence", "headwater_write_fence"}
)


def serving_sql(stmt: Any, binder: Binder) -> str | None:
    """DuckDB SQL for the SELECT `stmt` (not changed) rendered from its IR, reading
    relations as `binder` does; None when the IR does not cover the statement."""
    if not isinstance(stmt, A.SelectStmt) or _bound_elsewhere(stmt):
        return None
    builder = PlanBuilder(binder.catalog, binder.search_path, serving=True)
    try:
        plan = builder.build(stmt)
    except Exception:  # noqa: BLE001 - outside the IR (or its bug): the Binder decides
        return None
    tables: set[int] = set()
    matviews: set[int] = set()

    def scan(node: Scan) -> str:
        rel = binder.catalog.by_oid(node.table)
        if isinstance(rel, Table):
            tables.add(rel.oid)
            return binder.scan(rel)
        if isinstance(rel, MaterializedView) and binder.matview is not None:
            matviews.add(rel.oid)
            return binder.matview(rel)
        raise LookupError(f"no rows for relation {node.table}")

    try:
        sql = plan_sql(plan, scan)
    except LookupError:
        return None
    binder.tables |= tables
    binder.matviews |= matviews
    binder.depends |= builder.depends
    return sql


def _bound_elsewhere(node: Any) -> bool:
    """Does the tree call a function the server binds, or an internal one?"""
    if isinstance(node, tuple | list):
        return any(_bound_elsewhere(n) for n in node)
    if not isinstance(node, A.Node):
        return False
    if isinstance(node, A.FuncCall):
        name = node.funcname[-1].sval.lower()
        if name in _BOUND_ELSEWHERE or name.startswith(("hw_", "_hw")):
            return True
    return any(_bound_elsewhere(getattr(node, attr)) for attr in node)
