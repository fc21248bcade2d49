"""The session's cache of bound reads: a SELECT the client reuses (a prepared
statement, a cached simple query) is bound to DuckDB SQL once and run again while
the catalog, search_path and the programs of the views it reads are unchanged."""

from __future__ import annotations

from typing import Any

from headwater.planner.output_types import output_sources
from headwater.planner.relations import Binder, BoundRead, ReadPlans
from headwater.server import reads
from headwater.server.session import Session


def cached(s: Session, plans: ReadPlans, stmt: Any) -> BoundRead | None:
    """The statement's bound SQL from an earlier execution, if it still holds: same
    catalog, search_path and DateStyle order, outside a writing transaction, same view
    programs."""
    plan = plans.get(stmt)
    if (
        plan is None
        or s.write is not None
        or plan.catalog is not s.catalog
        or plan.search_path != s.search_path()
        or plan.date_order != s.date_order()  # (its date constants were read in that order)
    ):
        return None
    if plan.guards:
        views = s.instance.matviews.engine
        if views is None or any(views.views.get(o) is not p for o, p in plan.guards):
            return None
    return plan


def bound(
    s: Session,
    plans: ReadPlans,
    stmt: Any,
    binder: Binder,
    sql: str,
    *,
    cache: bool,
    translated: Any = None,
) -> BoundRead:
    """The bound read of the client's `stmt` (`sql`, from `binder`; `translated`: the
    copy of `stmt` it was bound from, if not `stmt` itself); kept for the next execution
    when `cache` and the statement is one the client reuses."""
    guards: tuple[tuple[int, Any], ...] = ()
    if binder.matviews:
        engine = s.instance.matviews.engine
        guards = tuple((o, engine.views.get(o) if engine else None) for o in binder.matviews)
    used, epoch = reads.split_params(sql, binder.epoch_param)
    plan = BoundRead(
        stmt,
        sql,
        epoch,
        s.catalog,
        s.search_path(),
        frozenset(binder.matviews),
        guards,
        output_sources(stmt if translated is None else translated, s.catalog, s.search_path()),
        used,
        tables=frozenset(binder.tables),
        depends=frozenset(binder.depends),
        date_order=s.date_order(),
    )
    if cache and s.write is None and not binder.uses_system and plans.kept(stmt):
        plans.put(plan)
    return plan
