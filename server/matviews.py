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
- Supervision: a thread (`_supervise`) starts the Spark stage and watches it: the
  JVM process, the streaming query (`isActive`, `exception()`, asked on a thread of
  their own: a hung JVM never answers), and progress (views behind the durable
  epoch and no batch for the stall timeout: the JVM hangs, and is killed). A failed
  query, a dead or stalled JVM restarts the stage (a new SparkSession if the JVM
  died) with backoff, from Spark's checkpoint: each view goes on from its last
  committed frontier. Meanwhile headwater_catalog.views shows 'restarting' (then
  'error' after repeated failures) with the error, and reads and writes go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa
from headwater.catalog.objects import MaterializedView, Table
from headwater.planner.temporal import CLOCK_OID, clock_changes, clock_rows
from headwater.storage.changelog import EpochRecord
from headwater.storage.duckdb_errors import translate
from headwater.storage.replica import physical, quote, visible_at

from headwater import faults
from headwater.errors import SQLError

if TYPE_CHECKING:  # the engine (and pyspark) is imported once a view needs it
    from headwater.engine.api import EngineAPI, Jvm, StageFault, ViewState
    from headwater.planner.ir import Plan
    from headwater.server.instance import Instance
    from headwater.server.progress import Task

log = logging.getLogger("headwater.matviews")

# Supervision of the Spark stage (`MaterializedViews._supervise`).
STAGE_POLL = 0.5  # seconds between health checks of the JVM and the streaming query
STAGE_BACKOFF = (1.0, 2.0, 5.0, 10.0, 30.0)  # waits before restart attempt 1, 2, ...
# tests shorten the schedule: comma-separated seconds, e.g. "0.5,0.5,1"
BACKOFF_ENV = "HEADWATER_STAGE_BACKOFF"
STAGE_GIVE_UP = 5  # consecutive failures after which the status says 'error' (retries go on)
# A stall (Config.spark_stall_timeout, `--spark-stall-timeout`, 120 s by default) is the
# stage having work and finishing no batch for that long. Until a started stage's first
# batch the bound is at least STAGE_START_GRACE: a new JVM plans and compiles its first
# batch for up to ~45 s here at load average 20.
STAGE_START_GRACE = 300.0
PROBE_WAIT = 1.0  # how long a health check may take before the supervisor goes on
INTERIM_POLL = 0.05  # seconds between advances while the stage starts (--executor auto)
STOP_WAIT = 30.0  # how long stopping a query may take before its JVM is killed
# the same at shutdown, below process managers' grace before SIGKILL (Docker's 10 s);
# killing the JVM mid-batch is safe: the batch is replayed from Spark's checkpoint
CLOSE_WAIT = 5.0
# Fault injection for tests (tests/test_crash_views.py; headwater/faults.py): with
# HEADWATER_FAULT_INJECTION=1, files in {data_dir}/faults/ make the stage fail: `batch`
# (one-shot) fails the next micro-batch after its views committed; `start` fails every
# stage start while it exists; `backfill_pause` holds a backfill after each input it read
# while it exists (_hold); `stall_timeout` (seconds) replaces the stall timeout while it
# exists (a test lowers it only while it hangs the JVM: on a loaded machine batches can
# be that far apart).


@dataclass
class Backfill:
    rows_total: int = 0
    rows_done: int = 0
    started: float = 0.0
    finished: float | None = None
    task: Task | None = None  # on the progress board while it runs


class MaterializedViews:
    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        self.engine: EngineAPI | None = None
        self.backfills: dict[int, Backfill] = {}
        # .bf: the backfill whose inputs _snapshot reads (on the backfill's own thread)
        self._reading = threading.local()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._advanced: asyncio.Event | None = None
        # called on the stage's thread after each batch: (end, seconds, executors) (metrics)
        self.batch_listeners: list[Callable[[int, float, frozenset[str]], None]] = []
        self._stage: threading.Thread | None = None
        # `--executor auto`: advances the views on DuckDB while the stage is down
        self._interim_thread: threading.Thread | None = None
        self._stopping = threading.Event()
        # the stage as the supervisor sees it: starting | running | restarting | error
        # | stopped; stage_error: why it is restarting (None while healthy)
        self.stage_state = "stopped"
        self.stage_error: str | None = None
        self.stage_restarts = 0
        self._advances = 0  # batches the stage completed (views advanced)
        self._start_failures = 0  # consecutive failures of Engine.start()
        self.backoff = _backoff_schedule()
        self.stall_timeout = instance.config.spark_stall_timeout
        # the epoch durable when the server started: views behind it are recovering
        self.recovery_epoch: int | None = None
        self._started_at = -1  # _advances when the stage last started

    @property
    def state_dir(self) -> Any:
        return self.instance.config.data_dir / "engine"

    @property
    def spool_dir(self) -> Any:
        return self.instance.config.data_dir / "spool"

    # -- lifecycle ------------------------------------------------------------------
    def open_engine(self) -> EngineAPI:
        """The engine, opened on first use (a server without materialized views never
        starts the JVM); its views are planned again from the catalog's definitions."""
        if self.engine is None:
            from headwater.engine.api import EngineAPI

            self.engine = EngineAPI(
                self.state_dir,
                self.spool_dir,
                self.instance.catalog,
                connection=self.instance.replica.cursor(),
                snapshot=self._snapshot,
                master=self.instance.config.spark_master,
                executor=self.instance.config.executor,
                memory_limit=self.instance.replica.memory_limit,
            )
            self.engine.on_advance(self._on_advance)
        return self.engine

    def recover_before_replica(self) -> int | None:
        """At start, before the replica is rebuilt: open the engine if there is one and
        return the oldest epoch to spool again (None: nothing to spool)."""
        cat = self.instance.catalog
        if not any(True for _ in cat.matviews()) and not self.state_dir.exists():
            return None
        engine = self.open_engine()  # (drops views no longer in the catalog)
        for oid in [v for v in engine.views if self._stale(v)]:
            engine.drop_view(oid)  # a table under it changed shape (ALTER): backfilled again
        fronts = self.running_frontiers()
        self._respool_after = min(fronts) if fronts else engine.last_epoch
        return self._respool_after

    def _stale(self, oid: int) -> bool:
        """The engine planned the view over tables whose columns have changed since
        (ALTER TABLE, then a crash before the view was rebuilt)."""
        assert self.engine is not None
        for t, info in self.engine.views[oid].scans.items():
            rel = self.instance.catalog.by_oid(t)
            if (
                t != CLOCK_OID
                and info.view is None
                and (
                    not isinstance(rel, Table)
                    or info.columns != [c.name for c in rel.columns]
                    or info.types != [c.type.duckdb() for c in rel.columns]
                )
            ):
                return True
        return False

    def respool(self, table_oid: int, log_: list[tuple[int, pa.Table]], after: int) -> None:
        assert self.engine is not None
        for epoch, changes in log_:
            if epoch > after:
                self.engine.write_epoch(epoch, {table_oid: changes})

    def recover_after_replica(self, last_epoch: int) -> None:
        """The replica holds every durable epoch: backfill views the engine lacks."""
        self.recovery_epoch = last_epoch
        if self.engine is None:
            return
        after = getattr(self, "_respool_after", None)
        if after is not None:  # the clock of temporal filters, as spool_epoch writes it
            for epoch in sorted(self.instance.epoch_history):
                if after < epoch <= last_epoch:
                    self.engine.write_epoch(epoch, {CLOCK_OID: self._clock_change(epoch)})
        self.engine.set_latest(last_epoch)
        missing = [
            mv
            for mv in sorted(self.instance.catalog.matviews(), key=lambda m: m.oid)
            if mv.oid not in self.engine.views
        ]
        for mv in missing:
            log.info("backfilling materialized view %s (missing from the engine)", mv.name)
            try:
                self._backfill(mv, last_epoch)
            except (SQLError, duckdb.Error) as e:  # the server starts; reads say 55000
                log.error("materialized view %s cannot be backfilled: %s", mv.name, e)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._advanced = asyncio.Event()
        if self.engine is not None and self.engine.views:
            self.start_stage()

    def start_stage(self) -> None:
        """Start the Spark stage and its supervisor in the background (a SparkSession
        takes seconds; the server serves meanwhile)."""
        if self._stage is not None or self.engine is None:
            return
        engine = self.engine
        engine.on_advance(self._stage_advanced)
        engine.on_progress(self._stage_progress)
        self.stage_state = "starting"
        self._stage = threading.Thread(
            target=self._supervise, args=(engine,), name="spark-stage", daemon=True
        )
        self._stage.start()
        if engine.executor == "auto":
            self._interim_thread = threading.Thread(
                target=self._interim, args=(engine,), name="views-interim", daemon=True
            )
            self._interim_thread.start()

    def _interim(self, engine: EngineAPI) -> None:
        """`--executor auto`: while the Spark stage is not running (starting: 6-70 s;
        restarting) or has not completed its first batch (a new JVM plans it for
        seconds), advance the views on DuckDB from here, so that Spark's start is off
        the read path. Exactly once with the stage: views skip epochs they have. It
        wakes as soon as an epoch is spooled (at the latest every INTERIM_POLL)."""
        seen: int | None = None
        while not self._stopping.is_set():
            seen = engine.wait_spooled(seen, INTERIM_POLL)
            if self._stopping.is_set() or self.stage_state == "running" and not self.stage_warming:
                continue
            try:
                engine.advance_now()
            except Exception:
                log.exception("advancing views while the Spark stage starts")

    @property
    def stage_warming(self) -> bool:
        """The stage is starting, or started and has not completed a batch yet (a new
        JVM plans and compiles its first batch for seconds)."""
        return self.stage_state == "starting" or (
            self.stage_state == "running" and self._advances == self._started_at
        )

    @property
    def interim(self) -> bool:
        """Views advance on DuckDB while the stage is down (`--executor auto` while it
        starts, warms up or restarts: `_interim`), so a lagging view is only moments
        behind."""
        return self._interim_thread is not None and (
            self.stage_state in ("restarting", "error") or self.stage_warming
        )

    def stage_fault(self) -> tuple[str, str] | None:
        """(status, error) that every running view shows while the stage is down."""
        error = self.stage_error
        if error is None or self.stage_state not in ("restarting", "error"):
            return None
        return self.stage_state, error

    def _supervise(self, engine: EngineAPI) -> None:
        """The supervisor (thread `spark-stage`): start the stage, watch it, and restart
        it with backoff when its query fails or its JVM dies. A restarted query goes on
        from Spark's checkpoint (the batch in flight is replayed; views whose frontier
        covers it skip it), so every view resumes from its last committed epoch."""
        failures = 0
        first = ""  # the fault that began the current outage
        while not self._stopping.is_set():
            fault = self._run_stage(engine)
            if fault is None:  # shutting down
                break
            error, new_session = fault
            if self.stage_state in ("starting", "running"):  # a new outage
                failures, first = 0, error
            failures += 1
            self.stage_restarts += 1
            wait = self.backoff[min(failures, len(self.backoff)) - 1]
            text = first
            if failures > 1:
                text += f"; restart attempt {failures - 1} failed: {error}"
            self.stage_error = f"{text}; restarting (attempt {failures}, in {wait:g}s)"
            self.stage_state = "restarting" if failures < STAGE_GIVE_UP else "error"
            log.warning("Spark stage: %s", self.stage_error)
            engine.reset_stage(new_jvm=new_session, stop_wait=STOP_WAIT)
            if self._stopping.wait(wait):
                break
        self.stage_state = "stopped"

    def _run_stage(self, engine: EngineAPI) -> tuple[str, bool] | None:
        """Start the stage and watch it until it fails: returns (error, whether the next
        start needs a new SparkSession), or None when the server shuts down."""
        try:
            self._inject("start")
        except RuntimeError as e:
            return str(e), False
        try:
            engine.start_stage()
        except Exception as e:  # StageStartError: Spark's message in one line
            # a new SparkSession if the JVM is gone or the start failed twice in a row
            self._start_failures += 1
            jvm = engine.stage_process()
            fresh = jvm is None or not jvm.alive or self._start_failures >= 2
            return f"the Spark stage failed to start: {e}", fresh
        self._start_failures = 0
        if self._stopping.is_set():
            with contextlib.suppress(Exception):
                engine.stop_stage(CLOSE_WAIT)
            return None
        log.info("Spark stage running")
        if self.stage_state == "starting":
            self.stage_state = "running"
        seen = self._started_at = self._advances
        batched = False  # a batch completed since this start
        progress = time.monotonic()  # the last batch, or the last time there was no work
        pending: Future[StageFault | None] | None = None  # a health check asked
        while not self._stopping.wait(STAGE_POLL):
            jvm = engine.stage_process()
            stopped = jvm is not None and jvm.stopped
            # the query's health, unless a check is still blocked in the JVM or the JVM
            # is stopped (the call would block): then progress alone decides
            if pending is None and not stopped:
                pending = engine.check_stage()
                with contextlib.suppress(FutureTimeout):
                    pending.result(PROBE_WAIT)
            if pending is not None and pending.done():
                fault, pending = pending.result(), None
                if fault is not None:
                    return fault.error, fault.new_jvm
            now = time.monotonic()
            if self._advances != seen:
                if not batched:  # from now on the stage, not the interim thread, advances
                    log.info("Spark stage: first batch completed")
                seen, batched, progress = self._advances, True, now
            elif self._caught_up():
                progress = now
            else:
                limit = self._stall_timeout()
                limit = limit if batched else max(limit, STAGE_START_GRACE)
                if now - progress > limit:
                    return self._stalled(now - progress, limit, jvm), True
                continue
            if self.stage_state != "running":
                log.info("Spark stage recovered (%s)", self.stage_error)
                self.stage_state, self.stage_error = "running", None
        return None

    def _stall_timeout(self) -> float:
        if faults.enabled():  # tests (see the fault names above)
            with contextlib.suppress(OSError, ValueError):
                path = self.instance.config.data_dir / "faults" / "stall_timeout"
                return float(path.read_text())
        return self.stall_timeout

    def _stalled(self, waited: float, limit: float, jvm: Jvm | None) -> str:
        """The cause shown for a stalled stage (whose JVM the restart kills)."""
        committer = self.instance.committer
        durable = committer.durable_epoch if committer is not None else 0
        low = min(self.running_frontiers(), default=durable)
        which = "its JVM"
        if jvm is not None:
            which += f" (pid {jvm.pid}{', stopped by a signal' if jvm.stopped else ''})"
        return (
            f"the Spark stage stalled: no batch in {waited:.0f}s (stall timeout {limit:g}s)"
            f" with views at epoch {low} behind epoch {durable}; {which} is killed"
        )

    def _caught_up(self) -> bool:
        """No work for the stage: every running view reflects the durable epoch (also
        when no view runs, else the stall watchdog would kill an idle stage)."""
        committer = self.instance.committer
        fronts = self.running_frontiers()
        return committer is not None and min(fronts, default=2**63) >= committer.durable_epoch

    def _stage_progress(self) -> None:  # a step of a batch on Spark: not stalled
        self._advances += 1

    def _stage_advanced(self, end: int) -> None:  # after a batch
        if threading.current_thread() is self._interim_thread:
            return  # not the stage's progress (the stall watchdog's measure)
        self._advances += 1
        self._inject("batch")

    def _inject(self, name: str) -> None:
        """Fault injection for tests (headwater/faults.py): fail if {data_dir}/faults/{name}
        exists (`batch` is consumed by the failure it causes)."""
        if faults.injected(self.instance.config.data_dir, name, consume=name == "batch"):
            raise RuntimeError(f"injected fault ({name})")

    def _hold(self, name: str, limit: float = 300.0) -> None:
        """Fault injection for tests (headwater/faults.py): wait while {data_dir}/faults/{name}
        exists, at most `limit` seconds (`backfill_pause`: a backfill after each input
        it read, so that its progress can be watched)."""
        if not faults.enabled():
            return
        path = self.instance.config.data_dir / "faults" / name
        deadline = time.monotonic() + limit
        while path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)

    def close(self) -> None:
        self._stopping.set()
        if self.engine is not None:
            self.engine.stop_stage(CLOSE_WAIT)

    # -- the commit path ------------------------------------------------------------
    def spool_epoch(self, rec: EpochRecord) -> None:
        """A durable epoch, for the stage (a commit listener; runs on the event loop)."""
        if self.engine is None:
            return
        changes = {o: t for o, t in rec.changes.items() if t.num_rows}
        changes[CLOCK_OID] = self._clock_change(rec.epoch, rec.closed_at)
        self.engine.write_epoch(rec.epoch, changes)

    def _closed_at(self, epoch: int) -> float:
        """When an epoch closed (the newest recorded epoch at or before it)."""
        history = self.instance.epoch_history
        for e in range(epoch, max(epoch - 1000, 0), -1):
            if e in history:
                return history[e][0]
        return 0.0

    def _clock_change(self, epoch: int, closed_at: float | None = None) -> pa.Table:
        """The clock's change at an epoch (planner/temporal.py): -the previous epoch's
        close time, +this one's. Every epoch gets one: a temporal view's time moves
        with each epoch, and reads of it are fresh only at its frontier."""
        at = self._closed_at(epoch) if closed_at is None else closed_at
        return clock_changes(self._closed_at(epoch - 1) if epoch > 1 else None, at)

    def _on_advance(self, end: int) -> None:  # the stage's thread
        loop, ev = self._loop, self._advanced
        if loop is not None and ev is not None:
            loop.call_soon_threadsafe(ev.set)
        batch = self.engine.last_batch if self.engine is not None else None
        if batch is not None:
            for fn in self.batch_listeners:
                try:  # (an exception here would fail the batch: metrics must not)
                    fn(end, *batch)
                except Exception:
                    log.exception("a batch listener failed")

    # -- retention ------------------------------------------------------------------
    def clamp_horizon(self, horizon: int) -> int:
        """A view's output changes are read by the views above it until their frontier
        passes them: history is kept back to the oldest running frontier."""
        if self.engine is None:
            return horizon
        return min([horizon, *self.running_frontiers()])

    def vacuum(self, horizon: int) -> None:
        if self.engine is not None:
            self.engine.allow_compaction(horizon)

    # -- DDL ------------------------------------------------------------------------
    @staticmethod
    def plan(definition: str, catalog: Any, search_path: tuple[str, ...]) -> Plan:
        """The view's plan; FeatureNotSupported (0A000) names what is out of scope."""
        from headwater.engine.api import EngineAPI

        return EngineAPI.plan(definition, catalog, search_path)

    def _backfill(self, mv: MaterializedView, epoch: int) -> None:
        from headwater.engine.api import EngineAPI

        engine = self.open_engine()
        catalog = self.instance.catalog
        plan = EngineAPI.plan_view(mv, catalog)
        bf = self.backfills[mv.oid] = Backfill(started=time.time())
        board = self.instance.progress
        with board.task("backfill", f"{mv.schema}.{mv.name}", "counting inputs") as task:
            bf.task = task
            bf.rows_total = task.total = sum(
                self._count(o, epoch) for o in plan.tables if isinstance(catalog.by_oid(o), Table)
            )
            task.phase = "reading inputs"  # _snapshot counts the rows read
            self._reading.bf = bf
            try:
                engine.create_view(mv, catalog, at_epoch=epoch)
            finally:
                self._reading.bf, bf.task = None, None
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

    def fresh_until(self, oid: int, frontier: int | None = None) -> int:
        """The newest epoch the view's state answers for: its frontier (given, or read
        from the engine), extended over the following epochs that changed none of the
        tables under it (its state at those epochs is the same). So a view is fresh
        after writes to other tables or DDL without waiting for the stage."""
        front = self.frontier(oid) if frontier is None else frontier
        if front < 0:
            return front
        bases = self.base_tables(oid)
        if CLOCK_OID in bases:  # a temporal filter: its time changes at every epoch
            return front
        history = self.instance.epoch_history
        last = self.instance.visible_epoch
        e = front
        while e < last:
            changed = history.get(e + 1)
            if changed is None or any(t in changed[1] for t in bases):
                break
            e += 1
        return e

    def has_temporal_views(self) -> bool:
        """Whether a view reads the clock (a temporal filter: server/clock_tick.py)."""
        engine = self.engine
        return engine is not None and any(
            CLOCK_OID in engine.base_tables(oid) for oid in list(engine.views)
        )

    def base_tables(self, oid: int) -> set[int]:
        """The tables under a view, through the views it reads."""
        return self.engine.base_tables(oid) if self.engine is not None else set()

    def _view_states(self) -> dict[int, ViewState]:
        """The engine's registry, cheaply (EngineAPI.status() also sizes every state)."""
        return self.engine.view_states() if self.engine is not None else {}

    def running_frontiers(self) -> list[int]:
        return [s.frontier for s in self._view_states().values() if s.status == "running"]

    def _view_state(self, oid: int) -> ViewState | None:
        return self.engine.view_state(oid) if self.engine is not None else None

    def created_epoch(self, oid: int) -> int | None:
        row = self._view_state(oid)
        return row.created if row else None

    def status(self, oid: int) -> tuple[str, str | None]:
        row = self._view_state(oid)
        if row is None:
            return "backfilling", None
        return row.status, row.error

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
        return engine.read_sql(mv, epoch)

    def changes_sql(self, mv: MaterializedView, after: int | str, upto: int | str) -> str:
        """The view's changes of epochs (after, upto]: (_e, _w, columns...)."""
        assert self.engine is not None
        return self.engine.changes_sql(mv, after, upto)

    async def wait_frontiers(self, oids: set[int], epoch: int, timeout: float) -> int | None:
        """Wait until every view in `oids` reflects `epoch`; returns the oid of a view
        still behind at the timeout (None when all are there)."""
        assert self._advanced is not None
        deadline = time.monotonic() + timeout
        while True:
            behind = [o for o in sorted(oids) if self.fresh_until(o) < epoch]
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
        if oid == CLOCK_OID:
            return clock_rows(self._closed_at(epoch))
        table = self.instance.table(oid)
        assert table is not None
        cols = ", ".join(quote(c.name) for c in table.columns)
        cur = self.instance.replica.cursor()
        try:
            rows = cur.execute(
                f"SELECT {cols} FROM {physical(oid)} WHERE {visible_at(epoch)}"
            ).to_arrow_table()
        finally:
            cur.close()
        bf: Backfill | None = getattr(self._reading, "bf", None)
        if bf is not None and bf.task is not None:  # a backfill reads its inputs
            bf.rows_done = bf.task.done = min(bf.task.done + rows.num_rows, bf.rows_total)
            if bf.task.done >= bf.rows_total:  # all read: the engine's statements run
                bf.task.phase = "computing"
                bf.task.poll = self.engine.statement_progress if self.engine else None
            self._hold("backfill_pause")
        return rows

    def _count(self, oid: int, epoch: int) -> int:
        cur = self.instance.replica.cursor()
        try:
            row = cur.execute(
                f"SELECT count(*) FROM {physical(oid)} WHERE {visible_at(epoch)}"
            ).fetchone()
            return int(row[0]) if row else 0
        finally:
            cur.close()


# -- the Spark stage's supervision ------------------------------------------------
def _backoff_schedule() -> tuple[float, ...]:
    """STAGE_BACKOFF, or the schedule BACKOFF_ENV gives (tests)."""
    text = os.environ.get(BACKOFF_ENV, "")
    try:
        waits = tuple(float(w) for w in text.split(",") if w.strip())
    except ValueError:
        log.warning("ignoring %s=%r (comma-separated seconds)", BACKOFF_ENV, text)
        waits = ()
    return waits or STAGE_BACKOFF
