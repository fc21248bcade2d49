"""Materialized views in the server: the engine (engine/) wired to the commit path.

- CREATE MATERIALIZED VIEW plans its query in the writing transaction (planner/ir.py;
  0A000 outside the scope). Once the transaction's epoch c is durable, the view is
  backfilled at c from the replica's versions and joins the Spark stage, which
  advances it over every later epoch.
- Every durable epoch is spooled for the stage (`spool_epoch`, a commit listener),
  from the moment the first materialized view is planned.
- Reads: the engine's DuckDB database is attached to the replica's, so a view's rows
  at epoch E are a scan of its output versions and one statement can join tables and
  views at one epoch.
- Recovery: views in the catalog but not in the engine (a crash between commit and
  backfill) are backfilled; views in the engine but not in the catalog are dropped;
  epochs newer than the oldest frontier are spooled again from the change log.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa
from headwater.catalog.objects import MaterializedView, Table
from headwater.engine.delta import ScanInfo, fetch_all
from headwater.engine.engine import Engine
from headwater.engine.spool import SpoolWriter
from headwater.planner.ir import Plan, PlanBuilder
from headwater.storage.changelog import EpochRecord
from headwater.storage.duckdb_errors import translate
from headwater.storage.replica import physical, quote, visible_at
from pglast import parse_sql

from headwater.errors import SQLError

if TYPE_CHECKING:
    from headwater.server.instance import Instance

log = logging.getLogger("headwater.matviews")


@dataclass
class Backfill:
    rows_total: int = 0
    rows_done: int = 0
    started: float = 0.0
    finished: float | None = None


class MaterializedViews:
    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        self.engine: Engine | None = None
        self.spool: SpoolWriter | None = None
        self.backfills: dict[int, Backfill] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._advanced: asyncio.Event | None = None
        self._stage: threading.Thread | None = None
        self.stage_error: str | None = None

    @property
    def state_dir(self) -> Any:
        return self.instance.config.data_dir / "engine"

    @property
    def spool_dir(self) -> Any:
        return self.instance.config.data_dir / "spool"

    # -- lifecycle ------------------------------------------------------------------
    def open_engine(self) -> Engine:
        """The engine, opened on first use (a server without materialized views never
        starts the JVM)."""
        if self.engine is None:
            self.spool = SpoolWriter(self.spool_dir)
            self.engine = Engine(
                self.state_dir,
                self.spool_dir,
                master=self.instance.config.spark_master,
                snapshot=self._snapshot,
                connection=self.instance.replica._db,
            )
            self.engine.on_advance.append(self._on_advance)
        return self.engine

    def recover_before_replica(self) -> int | None:
        """At start, before the replica is rebuilt: open the engine if there is one and
        return the oldest epoch to spool again (None: nothing to spool)."""
        cat = self.instance.catalog
        if not any(True for _ in cat.matviews()) and not self.state_dir.exists():
            return None
        engine = self.open_engine()
        for oid in [v for v in engine.views if not isinstance(cat.by_oid(v), MaterializedView)]:
            engine.drop_view(oid)  # dropped in the catalog; the engine missed it
        fronts = self.running_frontiers()
        return min(fronts) if fronts else engine.last_epoch

    def respool(self, table_oid: int, log_: list[tuple[int, pa.Table]], after: int) -> None:
        assert self.spool is not None
        for epoch, changes in log_:
            if epoch > after:
                self.spool.write_epoch(epoch, {table_oid: changes})

    def recover_after_replica(self, last_epoch: int) -> None:
        """The replica holds every durable epoch: backfill views the engine lacks."""
        if self.engine is None:
            return
        assert self.spool is not None
        self.spool.set_latest(last_epoch)
        missing = [
            mv
            for mv in sorted(self.instance.catalog.matviews(), key=lambda m: m.oid)
            if mv.oid not in self.engine.views
        ]
        for mv in missing:
            log.info("backfilling materialized view %s (missing from the engine)", mv.name)
            self._backfill(mv, last_epoch)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._advanced = asyncio.Event()
        if self.engine is not None and self.engine.views:
            self.start_stage()

    def start_stage(self) -> None:
        """Start the Spark stage in the background (a SparkSession takes seconds)."""
        if self._stage is not None or self.engine is None:
            return
        engine = self.engine

        def run() -> None:
            try:
                engine.start()
                log.info("Spark stage running")
            except Exception as e:  # shown in headwater_catalog.views
                self.stage_error = f"the Spark stage failed to start: {e}"
                log.exception("the Spark stage failed to start")

        self._stage = threading.Thread(target=run, name="spark-stage", daemon=True)
        self._stage.start()

    def close(self) -> None:
        if self.engine is not None:
            try:
                self.engine.stop()
            except Exception:
                log.exception("stopping the Spark stage")

    # -- the commit path ------------------------------------------------------------
    def spool_epoch(self, rec: EpochRecord) -> None:
        """A durable epoch, for the stage (a commit listener; runs on the event loop)."""
        if self.spool is None:
            return
        self.spool.write_epoch(rec.epoch, {o: t for o, t in rec.changes.items() if t.num_rows})

    def _on_advance(self, end: int) -> None:  # the stage's thread
        loop, ev = self._loop, self._advanced
        if loop is not None and ev is not None:
            loop.call_soon_threadsafe(ev.set)
        if self.spool is not None and self.engine is not None:
            self.spool.truncate(min(self.running_frontiers(), default=end))

    # -- retention ------------------------------------------------------------------
    def clamp_horizon(self, horizon: int) -> int:
        """A view's output changes are read by the views above it until their frontier
        passes them: history is kept back to the oldest running frontier."""
        if self.engine is None:
            return horizon
        return min([horizon, *self.running_frontiers()])

    def vacuum(self, horizon: int) -> None:
        if self.engine is not None:
            self.engine.vacuum(horizon)

    # -- DDL ------------------------------------------------------------------------
    @staticmethod
    def plan(definition: str, catalog: Any, search_path: tuple[str, ...]) -> Plan:
        """The view's plan; FeatureNotSupported (0A000) names what is out of scope."""
        return PlanBuilder(catalog, search_path).build(parse_sql(definition)[0].stmt)

    def scans(self, plan: Plan) -> dict[int, ScanInfo]:
        engine = self.open_engine()
        out: dict[int, ScanInfo] = {}
        for oid in plan.tables:
            rel = self.instance.catalog.by_oid(oid)
            if isinstance(rel, MaterializedView):
                out[oid] = engine.output_scan(oid, oid)
            else:
                assert isinstance(rel, Table)
                out[oid] = ScanInfo(
                    oid, [c.name for c in rel.columns], [c.type.duckdb() for c in rel.columns]
                )
        return out

    def _backfill(self, mv: MaterializedView, epoch: int) -> None:
        engine = self.open_engine()
        plan = self.plan(mv.definition, self.instance.catalog, (mv.schema, "public"))
        scans = self.scans(plan)
        bf = self.backfills[mv.oid] = Backfill(started=time.time())
        bf.rows_total = sum(self._count(o, epoch) for o, i in scans.items() if i.view is None)
        engine.create_view(mv.oid, plan, scans, name=mv.name, at_epoch=epoch)
        bf.rows_done, bf.finished = bf.rows_total, time.time()

    async def created(self, mv: MaterializedView, epoch: int) -> list[str]:
        """Backfill a view whose CREATE is durable at `epoch`; returns its NOTICEs."""
        committer = self.instance.committer
        assert committer is not None
        await committer.wait_visible(epoch)
        try:
            await asyncio.to_thread(self._backfill, mv, epoch)
        except duckdb.Error as e:
            raise translate(e) from None
        self.start_stage()
        bf = self.backfills[mv.oid]
        took = (bf.finished or time.time()) - bf.started
        return [
            f'materialized view "{mv.name}": backfilled {bf.rows_done}/{bf.rows_total} input '
            f"rows at epoch {epoch} in {took:.2f}s"
        ]

    async def dropped(self, oid: int) -> None:
        if self.engine is not None:
            await asyncio.to_thread(self.engine.drop_view, oid)
        self.backfills.pop(oid, None)

    # -- reads ----------------------------------------------------------------------
    def frontier(self, oid: int) -> int:
        return self.engine.frontier(oid) if self.engine is not None else -1

    def _views_rows(self) -> dict[int, tuple[int, int, str, str | None]]:
        """view -> (frontier, created, status, error): the engine's registry, cheaply
        (Engine.status() also sizes every state table)."""
        if self.engine is None:
            return {}
        rows = fetch_all(
            self.engine._reader(), "SELECT view, frontier, created, status, error FROM hw_views"
        )
        return {int(v): (int(f), int(c), st, err) for v, f, c, st, err in rows}

    def running_frontiers(self) -> list[int]:
        return [f for f, _, st, _ in self._views_rows().values() if st == "running"]

    def created_epoch(self, oid: int) -> int | None:
        row = self._views_rows().get(oid)
        return row[1] if row else None

    def status(self, oid: int) -> tuple[str, str | None]:
        row = self._views_rows().get(oid)
        if row is None:
            return "backfilling", None
        return row[2], row[3]

    def read_sql(self, mv: MaterializedView, epoch: str) -> str:
        """The view's rows at `epoch` (an epoch number, or a placeholder the statement
        replaces once it has chosen its epoch), typed as the catalog declares."""
        engine = self.engine
        if engine is None or mv.oid not in engine.views:
            raise SQLError(
                f'materialized view "{mv.name}" has not been populated',
                "55000",
                hint="It is being backfilled; try again when CREATE MATERIALIZED VIEW returns.",
            )
        prog = engine.views[mv.oid]
        cols = ", ".join(
            f"CAST({c} AS {col.type.duckdb()}) AS {quote(col.name)}"
            for c, col in zip(prog.plan.root.columns, mv.columns, strict=True)
        )
        return (
            f"(SELECT {cols} FROM (SELECT * FROM {engine.schema}o{mv.oid}"
            f" WHERE _from <= {epoch} AND _to > {epoch}) _o, range(_o._n))"
        )

    async def wait_frontiers(self, oids: set[int], epoch: int, timeout: float) -> int | None:
        """Wait until every view in `oids` reflects `epoch`; returns the oid of a view
        still behind at the timeout (None when all are there)."""
        assert self._advanced is not None
        deadline = time.monotonic() + timeout
        while True:
            behind = [o for o in sorted(oids) if self.frontier(o) < epoch]
            if not behind:
                return None
            for o in behind:
                st, err = self.status(o)
                if st == "error":
                    return o
            left = deadline - time.monotonic()
            if left <= 0:
                return behind[0]
            self._advanced.clear()
            try:
                await asyncio.wait_for(self._advanced.wait(), min(left, 0.25))
            except TimeoutError:
                pass

    # -- the snapshot the engine backfills from ---------------------------------------
    def _snapshot(self, oid: int, epoch: int) -> pa.Table:
        table = self.instance.table(oid)
        assert table is not None
        cols = ", ".join(quote(c.name) for c in table.columns)
        cur = self.instance.replica.cursor()
        try:
            return cur.execute(
                f"SELECT {cols} FROM {physical(oid)} WHERE {visible_at(epoch)}"
            ).to_arrow_table()
        finally:
            cur.close()

    def _count(self, oid: int, epoch: int) -> int:
        cur = self.instance.replica.cursor()
        try:
            row = cur.execute(
                f"SELECT count(*) FROM {physical(oid)} WHERE {visible_at(epoch)}"
            ).fetchone()
            return int(row[0]) if row else 0
        finally:
            cur.close()
