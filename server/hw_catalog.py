"""headwater_catalog: Headwater's own system relations, built per statement.

headwater_catalog.views   one row per materialized view: frontier, lag, rows,
                          state size, status, last error, backfill progress,
                          freshness target, SLO compliance, degraded reason (server/slo.py)
headwater_catalog.progress one row per backfill or COPY running now: phase, done of
                          total, percent (server/progress.py)
headwater_catalog.epochs  one row per retained epoch and table it changed:
                          closed_at, rows changed (table NULL: no table changed)
headwater_catalog.sinks   one row per sink: source, target, mode, epoch written, lag,
                          rows, status, last error (server/sinks.py)
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pyarrow as pa
from headwater.catalog.system_shapes import EPOCHS, PROGRESS, SINKS, VIEWS

if TYPE_CHECKING:
    from headwater.server.instance import Instance


def relation(instance: Instance, name: str) -> pa.Table | None:
    if name == "views":
        return views(instance)
    if name == "epochs":
        return epochs(instance)
    if name == "sinks":
        return pa.Table.from_pylist(instance.sinks.rows(), schema=SINKS)
    if name == "progress":
        return pa.Table.from_pylist(instance.progress.rows(), schema=PROGRESS)
    return None


def views(instance: Instance) -> pa.Table:
    mv = instance.matviews
    engine = mv.engine
    status = {s.view: s for s in engine.status()} if engine is not None else {}
    visible = instance.visible_epoch
    now = time.time()
    rows = []
    for v in sorted(instance.catalog.matviews(), key=lambda m: m.oid):
        st = status.get(v.oid)
        bf = mv.backfills.get(v.oid)
        task = bf.task if bf else None
        # the newest epoch the view reflects: its engine frontier, extended over epochs
        # that changed none of its tables (MaterializedViews.fresh_until)
        frontier = mv.fresh_until(v.oid) if st is not None else None
        lag, lag_ms = view_lag(instance, frontier, visible, now)
        compliance = reason = None
        if v.freshness is not None:
            compliance, reason = instance.slo.verdict(v)
        state = st.status if st is not None else "backfilling"
        stage = mv.stage_fault()  # the Spark stage restarting: ('restarting'|'error', why)
        if state == "running" and stage is not None:
            state, error = stage
        else:
            error = st.error if st is not None else None
        rows.append(
            {
                "oid": v.oid,
                "schema": v.schema,
                "name": v.name,
                "definition": v.definition,
                "status": state,
                "error": error,
                "frontier": frontier,
                "lag_epochs": lag,
                "lag_ms": lag_ms,
                "rows": st.rows if st is not None else None,
                "state_rows": st.state_rows if st is not None else None,
                "created_epoch": st.created if st is not None else None,
                "backfill_rows_done": bf.rows_done if bf else None,
                "backfill_rows_total": bf.rows_total if bf else None,
                "executor": st.executor if st is not None else None,
                "executor_reason": st.executor_reason if st is not None else None,
                "spark_tasks": st.spark_tasks if st is not None else None,
                "progress": task.percent() if task else None,
                "progress_phase": task.phase if task else None,
                "freshness_target": (
                    timedelta(seconds=v.freshness) if v.freshness is not None else None
                ),
                "slo_compliance": compliance,
                "degraded_reason": reason,
            }
        )
    return pa.Table.from_pylist(rows, schema=VIEWS)


def view_lag(
    instance: Instance, frontier: int | None, visible: int, now: float
) -> tuple[int | None, float | None]:
    """(epochs visible the view does not reflect, ms since the oldest of them closed)."""
    if frontier is None:
        return None, None
    lag = max(visible - frontier, 0)
    closed = instance.epoch_closed_at(frontier + 1) if lag else None
    return lag, max(now - closed, 0.0) * 1000.0 if closed else 0.0


def view_lags(instance: Instance) -> dict[str, float]:
    """lag_ms of every running view by 'schema.name', cheaply (no sizes): the status
    page samples it every second for its freshness sparklines."""
    mv = instance.matviews
    if mv.engine is None:
        return {}
    states = mv.engine.view_states()
    visible, now = instance.visible_epoch, time.time()
    out = {}
    for v in instance.catalog.matviews():
        st = states.get(v.oid)
        if st is not None and st.status == "running":
            _, lag_ms = view_lag(instance, mv.fresh_until(v.oid, st.frontier), visible, now)
            if lag_ms is not None:
                out[f"{v.schema}.{v.name}"] = lag_ms
    return out


def epochs(instance: Instance) -> pa.Table:
    names = {t.oid: t.name for t in instance.catalog.tables()}
    rows = []
    for epoch, (closed_at, changed) in sorted(instance.epoch_history.items()):
        at = datetime.fromtimestamp(closed_at, UTC)
        if not changed:
            rows.append({"epoch": epoch, "closed_at": at})
        for oid, n in sorted(changed.items()):
            rows.append(
                {
                    "epoch": epoch,
                    "closed_at": at,
                    "table_oid": oid,
                    "table_name": names.get(oid),
                    "rows_changed": n,
                }
            )
    return pa.Table.from_pylist(rows, schema=EPOCHS)
