"""Sinks: a table's or materialized view's rows leave the database, continuously, once.

    CREATE SINK s FROM v INTO PARQUET '/data/v' [WITH (mode = 'mirror' | 'changes')]
    CREATE SINK s FROM v INTO DELTA '/lake/v' | 's3://bucket/v' [WITH (...)]
    CREATE SINK s FROM v INTO ICEBERG '/lake' WITH (namespace = 'n', table = 't', ...)
    CREATE SINK s FROM v INTO POSTGRES 'host=... dbname=...' TABLE t [WITH (...)]
    DROP SINK [IF EXISTS] s

WITH options: `mode` ('mirror', the default: the target equals the source; 'changes':
the target gets every epoch's `(epoch, diff, columns...)`), `key` ('a, b': the columns
that identify a row of the source, for a mirror's upserts and deletes; a table's
primary key by default; none: rows are matched whole), `interval` (seconds from the
start of a batch to the start of the next, at least; 1 by default); INTO ICEBERG's
`namespace`, `table`, `catalog_uri` (storage/sinks/iceberg.py).

The definition is a catalog object (catalog/objects.Sink), durable with the DDL's
epoch (CREATE and DROP: server/sink_ddl.py); a `SinkRunner` task per sink
(`SinkManager`, started with the server) reads the source's changes the way SUBSCRIBE
does (a table's versions in the replica, a view's changes from the engine) in batches
of epochs `(written, frontier]`, and hands each to its target (storage/sinks/), which
records the batch's last epoch atomically with its rows. At start, and after any
failure, the runner asks the target where it got to and goes on from there: no batch
is written twice or skipped. A failing target is retried with backoff
(headwater_catalog.sinks says why) while the server and the views go on; history is
retained back to the oldest epoch a sink has written (`clamp_horizon`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from headwater.catalog.objects import MaterializedView, Sink, Table
from headwater.storage.replica import FROM, TO, physical, quote, visible_at
from headwater.storage.sinks import DIFF, EPOCH, NET_DIFF, SinkSpec, Target, open_target

if TYPE_CHECKING:
    from headwater.server.instance import Instance

log = logging.getLogger("headwater.sinks")

POLL = 0.25  # longest wait for the source's frontier before looking again
HEARTBEAT = 30.0  # seconds after which a batch without changes is written anyway
BACKOFF = (1.0, 2.0, 5.0, 10.0, 30.0)  # waits before retry 1, 2, ... of a failing target


# -- a batch of a source's changes ---------------------------------------------------------
class SourceBatch:
    """The epochs (after, upto] of a table or materialized view (storage/sinks'
    BatchReader): SQL over the replica and the engine, run on worker threads."""

    def __init__(
        self, instance: Instance, rel: Table | MaterializedView, after: int | None, upto: int
    ) -> None:
        self.instance = instance
        self.rel = rel
        self.after = after
        self.upto = upto
        self.cols = ", ".join(quote(c.name) for c in rel.columns)

    def _at(self) -> str:
        rel = self.rel
        if isinstance(rel, MaterializedView):
            return self.instance.matviews.read_sql(rel, str(self.upto))
        return f"(SELECT {self.cols} FROM {physical(rel.oid)} WHERE {visible_at(self.upto)})"

    def _inner(self) -> str:
        """The relation's changes (_e, _w, cols...), not consolidated."""
        rel, after, upto = self.rel, self.after, self.upto
        if isinstance(rel, MaterializedView):
            assert after is not None
            sql = self.instance.matviews.changes_sql(rel, after, upto)
            return f"SELECT * FROM {sql} AS _v"
        t = physical(rel.oid)
        return (
            f"SELECT {FROM} AS _e, 1 AS _w, {self.cols} FROM {t}"
            f" WHERE {FROM} > {after} AND {FROM} <= {upto}"
            f" UNION ALL SELECT {TO}, -1, {self.cols} FROM {t}"
            f" WHERE {TO} > {after} AND {TO} <= {upto}"
        )

    def _arrow(self, sql: str) -> pa.Table:
        cur = self.instance.replica.cursor()
        try:
            cur.execute("SET TimeZone = 'UTC'")
            return cur.execute(sql).to_arrow_table()
        finally:
            cur.close()

    def changes(self) -> pa.Table:
        if self.after is None:
            return self._arrow(
                f"SELECT {self.upto}::BIGINT AS {EPOCH}, count(*)::BIGINT AS {DIFF},"
                f" {self.cols} FROM {self._at()} AS _s GROUP BY ALL"
            )
        return self._arrow(
            f"SELECT _e::BIGINT AS {EPOCH}, sum(_w)::BIGINT AS {DIFF}, {self.cols}"
            f" FROM ({self._inner()}) AS _c GROUP BY ALL HAVING sum(_w) <> 0 ORDER BY 1"
        )

    def net(self) -> pa.Table:
        if self.after is None:
            return self._arrow(
                f"SELECT count(*)::BIGINT AS {NET_DIFF}, {self.cols} FROM {self._at()} AS _s"
                " GROUP BY ALL"
            )
        return self._arrow(
            f"SELECT sum(_w)::BIGINT AS {NET_DIFF}, {self.cols}"
            f" FROM ({self._inner()}) AS _c GROUP BY ALL HAVING sum(_w) <> 0"
        )

    def state(self) -> pa.Table:
        return self._arrow(f"SELECT {self.cols} FROM {self._at()} AS _s")

    def python_rows(self, table: pa.Table) -> list[tuple[Any, ...]]:
        cur = self.instance.replica.cursor()
        try:
            cur.execute("SET TimeZone = 'UTC'")
            cur.register("_hw_sink_rows", table)
            return cur.execute("SELECT * FROM _hw_sink_rows").fetchall()
        finally:
            cur.close()


# -- running sinks --------------------------------------------------------------------------
class SourceGone(Exception):
    """The sink cannot go on (its source was dropped, its history is gone)."""


@dataclass
class SinkState:
    status: str = "starting"  # starting | running | retrying | error
    error: str | None = None
    written: int | None = None  # the newest epoch the target holds (None: unknown yet)
    position: int | None = None  # the newest epoch looked at (>= written)
    rows: int = 0  # rows written since the server started
    batches: int = 0
    last_write: float = 0.0  # time.monotonic() of the last batch written


class SinkRunner:
    def __init__(
        self,
        instance: Instance,
        sink: Sink,
        listeners: list[Callable[[str, float], None]] | None = None,
    ) -> None:
        self.instance = instance
        self.sink = sink
        self.listeners = listeners if listeners is not None else []  # (sink, seconds) a batch
        self.state = SinkState()
        self.task: asyncio.Task[None] | None = None
        options = dict(sink.options)
        self.interval = float(options.get("interval") or 1.0)

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(
            self._run(), name=f"sink {self.sink.name}"
        )

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()

    def _source(self) -> Table | MaterializedView:
        rel = self.instance.catalog.by_oid(self.sink.source)
        if not isinstance(rel, Table | MaterializedView):
            raise SourceGone("the relation it reads was dropped")
        return rel

    def _spec(self, rel: Table | MaterializedView) -> SinkSpec:
        sink = self.sink
        return SinkSpec(
            name=sink.qualified,
            oid=sink.oid,
            target=sink.target,
            table=sink.table,
            mode=sink.mode,
            columns=rel.columns,
            key=sink.key,
            options=dict(sink.options),
        )

    async def _run(self) -> None:
        st = self.state
        failures = 0
        while True:
            target: Target | None = None
            written_before = st.batches
            try:
                rel = self._source()
                target = open_target(self.sink.target_kind, self._spec(rel))
                await self._stream(target)
            except asyncio.CancelledError:
                raise
            except SourceGone as e:
                st.status, st.error = "error", f"sink stopped: {e}"
                log.error("sink %s: %s", self.sink.qualified, st.error)
                return
            except Exception as e:
                failures = 1 if st.batches != written_before else failures + 1
                wait = BACKOFF[min(failures, len(BACKOFF)) - 1]
                st.status = "retrying"
                st.error = f"{type(e).__name__}: {e}; retry {failures} in {wait:g}s"
                log.warning("sink %s: %s", self.sink.qualified, st.error)
                await asyncio.sleep(wait)
            finally:
                if target is not None:
                    try:
                        await target.close()
                    except Exception:
                        log.exception("sink %s: closing its target", self.sink.qualified)

    def _frontier(self, rel: Table | MaterializedView) -> int:
        if isinstance(rel, MaterializedView):
            return min(self.instance.visible_epoch, self.instance.matviews.fresh_until(rel.oid))
        return self.instance.visible_epoch

    def _changed(self, rel: Table | MaterializedView, after: int, upto: int) -> bool:
        """Whether a table under the source changed in epochs (after, upto]."""
        if isinstance(rel, MaterializedView):
            bases = self.instance.matviews.base_tables(rel.oid)
        else:
            bases = {rel.oid}
        history = self.instance.epoch_history
        for e in range(after + 1, upto + 1):
            h = history.get(e)
            if h is None or any(t in h[1] for t in bases):
                return True
        return False

    def _resumable(self, rel: Table | MaterializedView, pos: int) -> bool:
        """Whether the source's changes after `pos` can still be read."""
        if pos < self.instance.retained_from:
            return False
        if isinstance(rel, MaterializedView):
            created = self.instance.matviews.created_epoch(rel.oid)
            return created is not None and created <= pos
        return True

    async def _stream(self, target: Target) -> None:
        st = self.state
        pos = await target.last_epoch()
        st.written = st.position = pos
        st.status, st.error = "running", None
        while True:
            rel = self._source()
            end = self._frontier(rel)
            if end < 0:  # a view not backfilled yet
                await asyncio.sleep(POLL)
                continue
            if pos is not None and end <= pos:
                await self._wait(rel, pos + 1)
                continue
            after: int | None = pos
            if pos is not None and not self._resumable(rel, pos):
                if self.sink.mode == "changes":
                    raise SourceGone(
                        f"the changes after epoch {pos} are no longer retained"
                        f" (history starts at epoch {self.instance.retained_from})"
                    )
                log.warning("sink %s: rewriting its mirror at epoch %d", self.sink.name, end)
                after = None
            if after is not None and not self._changed(rel, after, end):
                st.position = end
                if time.monotonic() - st.last_write < HEARTBEAT:
                    await self._wait(rel, end + 1)
                    continue
            began = time.monotonic()
            batch = SourceBatch(self.instance, rel, after, end)
            rows = await target.write(batch)
            for fn in self.listeners:
                try:
                    fn(self.sink.qualified, time.monotonic() - began)
                except Exception:  # (metrics): the batch is written all the same
                    log.exception("sink %s: a batch listener failed", self.sink.qualified)
            pos = st.written = st.position = end
            st.rows += rows
            st.batches += 1
            st.last_write = time.monotonic()
            st.status, st.error = "running", None
            await asyncio.sleep(max(self.interval - (time.monotonic() - began), 0.0))

    async def _wait(self, rel: Table | MaterializedView, epoch: int) -> None:
        """Until the source reflects `epoch` (woken by the epoch closing, or the view's
        stage advancing), or POLL seconds pass."""
        if isinstance(rel, MaterializedView):
            await self.instance.matviews.wait_frontiers({rel.oid}, epoch, POLL)
        else:
            committer = self.instance.committer
            assert committer is not None
            await committer.wait_visible(epoch, POLL)


class SinkManager:
    """The instance's running sinks, following the catalog's."""

    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        self.runners: dict[int, SinkRunner] = {}
        self.batch_listeners: list[Callable[[str, float], None]] = []  # metrics
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.reconcile()
        self._task = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        """Catch CREATE/DROP SINK committed in transaction blocks (and restarts)."""
        while True:
            await asyncio.sleep(1.0)
            self.reconcile()

    def reconcile(self) -> None:
        sinks = {s.oid: s for s in self.instance.catalog.sinks.values()}
        for oid in [o for o in self.runners if o not in sinks]:
            self.runners.pop(oid).stop()
        for oid, sink in sinks.items():
            if oid not in self.runners:
                runner = self.runners[oid] = SinkRunner(self.instance, sink, self.batch_listeners)
                runner.start()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        tasks = [r.task for r in self.runners.values() if r.task is not None]
        for r in self.runners.values():
            r.stop()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def clamp_horizon(self, horizon: int) -> int:
        """History is kept back to the oldest epoch a sink's target holds (a sink whose
        target has not answered yet holds it where it is)."""
        for r in self.runners.values():
            if r.state.status == "error":  # it stopped for good (its source is gone)
                continue
            written = r.state.written
            horizon = min(horizon, self.instance.retained_from if written is None else written)
        return horizon

    def rows(self) -> list[dict[str, Any]]:
        """headwater_catalog.sinks"""
        inst = self.instance
        visible = inst.visible_epoch
        now = time.time()
        out = []
        for sink in sorted(inst.catalog.sinks.values(), key=lambda s: s.oid):
            runner = self.runners.get(sink.oid)
            st = runner.state if runner is not None else SinkState()
            source = inst.catalog.by_oid(sink.source)
            lag = lag_ms = None
            if st.position is not None:
                lag = max(visible - st.position, 0)
                closed = inst.epoch_closed_at(st.position + 1) if lag else None
                lag_ms = max(now - closed, 0.0) * 1000.0 if closed else 0.0
            out.append(
                {
                    "oid": sink.oid,
                    "schema": sink.schema,
                    "name": sink.name,
                    "source": source.qualified if source is not None else None,
                    "target_kind": sink.target_kind,
                    "target": _shown_target(sink),
                    "table_name": sink.table,
                    "mode": sink.mode,
                    "key": ", ".join(sink.key) or None,
                    "epoch_written": st.written,
                    "lag_epochs": lag,
                    "lag_ms": lag_ms,
                    "rows": st.rows,
                    "batches": st.batches,
                    "status": st.status,
                    "error": st.error,
                }
            )
        return out


def _shown_target(sink: Sink) -> str:
    """The target without a password (a conninfo may hold one)."""
    if sink.target_kind != "postgres":
        return sink.target
    parts = [p for p in sink.target.split() if not p.lower().startswith("password=")]
    return " ".join(parts)
