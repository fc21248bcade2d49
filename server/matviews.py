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
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from queue import SimpleQueue
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa
from headwater.catalog.objects import MaterializedView, Table
from headwater.storage.changelog import EpochRecord
from headwater.storage.duckdb_errors import translate
from headwater.storage.replica import physical, quote, visible_at
from pglast import parse_sql

from headwater.errors import SQLError

if TYPE_CHECKING:  # the engine (and pyspark) is imported once a view needs it
    from headwater.engine.delta import ScanInfo
    from headwater.engine.engine import Engine
    from headwater.engine.spool import SpoolWriter
    from headwater.planner.ir import Plan
    from headwater.server.instance import Instance

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
STOP_WAIT = 30.0  # how long stopping a query may take before its JVM is killed
# the same at shutdown, below process managers' grace before SIGKILL (Docker's 10 s);
# killing the JVM mid-batch is safe: the batch is replayed from Spark's checkpoint
CLOSE_WAIT = 5.0
# Fault injection for tests (tests/test_crash_views.py): with this variable set to 1,
# files in {data_dir}/faults/ make the stage fail: `batch` (one-shot) fails the next
# micro-batch after its views committed; `start` fails every stage start while it exists;
# `stall_timeout` (seconds) replaces the stall timeout while it exists (a test lowers it
# only while it hangs the JVM: on a loaded machine batches can be that far apart).
FAULTS_ENV = "HEADWATER_FAULT_INJECTION"


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
        self._probe = _Probe()

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
            from headwater.engine.engine import Engine
            from headwater.engine.spool import SpoolWriter

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
        """Start the Spark stage and its supervisor in the background (a SparkSession
        takes seconds; the server serves meanwhile)."""
        if self._stage is not None or self.engine is None:
            return
        engine = self.engine
        engine.on_advance.append(self._stage_advanced)
        self.stage_state = "starting"
        self._stage = threading.Thread(
            target=self._supervise, args=(engine,), name="spark-stage", daemon=True
        )
        self._stage.start()

    def stage_fault(self) -> tuple[str, str] | None:
        """(status, error) that every running view shows while the stage is down."""
        error = self.stage_error
        if error is None or self.stage_state not in ("restarting", "error"):
            return None
        return self.stage_state, error

    def _supervise(self, engine: Engine) -> None:
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
            self._reset_stage(engine, full=new_session)
            if self._stopping.wait(wait):
                break
        self.stage_state = "stopped"

    def _run_stage(self, engine: Engine) -> tuple[str, bool] | None:
        """Start the stage and watch it until it fails: returns (error, whether the next
        start needs a new SparkSession), or None when the server shuts down."""
        try:
            self._inject("start")
        except RuntimeError as e:
            return str(e), False
        try:
            engine.start()
        except Exception as e:
            # a new SparkSession if the JVM is gone or the start failed twice in a row
            self._start_failures += 1
            fresh = not _jvm_alive() or self._start_failures >= 2
            return f"the Spark stage failed to start: {_brief(e)}", fresh
        self._start_failures = 0
        if self._stopping.is_set():
            with contextlib.suppress(Exception):
                engine.stop()
            return None
        log.info("Spark stage running")
        if self.stage_state == "starting":
            self.stage_state = "running"
        seen = self._advances
        batched = False  # a batch completed since this start
        progress = time.monotonic()  # the last batch, or the last time there was no work
        pending: Future[tuple[str, bool] | None] | None = None  # a health check asked
        while not self._stopping.wait(STAGE_POLL):
            proc = _jvm_process()
            stopped = proc is not None and _proc_state(proc.pid) in ("T", "t")
            # the query's health, unless a check is still blocked in the JVM or the JVM
            # is stopped (the call would block): then progress alone decides
            if pending is None and not stopped:
                pending = self._probe.submit(lambda: _check_stage_safely(engine))
                with contextlib.suppress(FutureTimeout):
                    pending.result(PROBE_WAIT)
            if pending is not None and pending.done():
                fault, pending = pending.result(), None
                if fault is not None:
                    return fault
            now = time.monotonic()
            if self._advances != seen:
                seen, batched, progress = self._advances, True, now
            elif self._caught_up():
                progress = now
            else:
                limit = self._stall_timeout()
                limit = limit if batched else max(limit, STAGE_START_GRACE)
                if now - progress > limit:
                    return self._stalled(now - progress, limit, proc, stopped), True
                continue
            if self.stage_state != "running":
                log.info("Spark stage recovered (%s)", self.stage_error)
                self.stage_state, self.stage_error = "running", None
        return None

    def _stall_timeout(self) -> float:
        if os.environ.get(FAULTS_ENV) == "1":  # tests (see FAULTS_ENV)
            with contextlib.suppress(OSError, ValueError):
                path = self.instance.config.data_dir / "faults" / "stall_timeout"
                return float(path.read_text())
        return self.stall_timeout

    def _stalled(self, waited: float, limit: float, proc: Any, stopped: bool) -> str:
        """The cause shown for a stalled stage (whose JVM the restart kills)."""
        committer = self.instance.committer
        durable = committer.durable_epoch if committer is not None else 0
        low = min(self.running_frontiers(), default=durable)
        jvm = "its JVM"
        if proc is not None:
            jvm += f" (pid {proc.pid}{', stopped by a signal' if stopped else ''})"
        return (
            f"the Spark stage stalled: no batch in {waited:.0f}s (stall timeout {limit:g}s)"
            f" with views at epoch {low} behind epoch {durable}; {jvm} is killed"
        )

    def _caught_up(self) -> bool:
        """No work for the stage: every running view reflects the durable epoch (also
        when no view runs, else the stall watchdog would kill an idle stage)."""
        committer = self.instance.committer
        fronts = self.running_frontiers()
        return committer is not None and min(fronts, default=2**63) >= committer.durable_epoch

    def _reset_stage(self, engine: Engine, full: bool) -> None:
        """Forget the failed query; with `full`, the SparkSession and its JVM too."""
        query, engine.query = engine.query, None
        if query is not None and not full:
            try:  # a JVM that does not answer in STOP_WAIT is killed
                self._probe.submit(query.stop).result(STOP_WAIT)
            except Exception:
                full = True
        if full:
            try:
                _forget_spark()
            except Exception:
                log.exception("Spark stage: forgetting the SparkSession")

    def _stage_advanced(self, end: int) -> None:  # the stage's thread, after a batch
        self._advances += 1
        self._inject("batch")

    def _inject(self, name: str) -> None:
        """Fault injection for tests (FAULTS_ENV=1): fail if {data_dir}/faults/{name}
        exists (`batch` is consumed by the failure it causes)."""
        if os.environ.get(FAULTS_ENV) != "1":
            return
        path = self.instance.config.data_dir / "faults" / name
        if not path.exists():
            return
        if name == "batch":
            path.unlink(missing_ok=True)
        raise RuntimeError(f"injected fault ({name})")

    def close(self) -> None:
        self._stopping.set()
        if self.engine is not None:
            proc = _jvm_process()
            if proc is not None and _proc_state(proc.pid) in ("T", "t"):
                log.warning("Spark stage: its JVM (pid %d) is stopped; killing it", proc.pid)
                proc.kill()  # stopping the query would wait for it forever
            try:
                self._probe.submit(self.engine.stop).result(CLOSE_WAIT)
            except FutureTimeout:
                log.warning(
                    "Spark stage: the query did not stop in %gs; killing its JVM", CLOSE_WAIT
                )
                if proc is not None:
                    proc.kill()
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
        from headwater.planner.ir import PlanBuilder

        return PlanBuilder(catalog, search_path).build(parse_sql(definition)[0].stmt)

    def scans(self, plan: Plan) -> dict[int, ScanInfo]:
        from headwater.engine.delta import ScanInfo

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

    def fresh_until(self, oid: int) -> int:
        """The newest epoch the view's state answers for: its frontier, extended over
        the following epochs that changed none of the tables under it (its state at
        those epochs is the same). So a view is fresh after writes to other tables or
        DDL without waiting for the stage."""
        front = self.frontier(oid)
        if front < 0:
            return front
        bases = self.base_tables(oid)
        history = self.instance.epoch_history
        last = self.instance.visible_epoch
        e = front
        while e < last:
            changed = history.get(e + 1)
            if changed is None or any(t in changed[1] for t in bases):
                break
            e += 1
        return e

    def base_tables(self, oid: int) -> set[int]:
        """The tables under a view, through the views it reads."""
        engine = self.engine
        prog = engine.views.get(oid) if engine is not None else None
        if prog is None:
            return set()
        out: set[int] = set()
        for t, info in prog.scans.items():
            out |= self.base_tables(info.view) if info.view is not None else {t}
        return out

    def _views_rows(self) -> dict[int, tuple[int, int, str, str | None]]:
        """view -> (frontier, created, status, error): the engine's registry, cheaply
        (Engine.status() also sizes every state table)."""
        if self.engine is None:
            return {}
        from headwater.engine.delta import fetch_all

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


# -- the Spark stage's health -------------------------------------------------------
class _Probe:
    """Calls into the JVM on a thread of their own: Py4J has no timeout, and a call
    into a JVM that hangs (SIGSTOP, a deadlock) blocks until that JVM dies. One
    long-lived thread, since pyspark pins a JVM thread and connection to each Python
    thread that calls it."""

    def __init__(self) -> None:
        self._jobs: SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = SimpleQueue()
        self._thread: threading.Thread | None = None

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="spark-probe", daemon=True)
            self._thread.start()
        fut: Future[Any] = Future()
        self._jobs.put((fn, fut))
        return fut

    def _work(self) -> None:
        while True:
            fn, fut = self._jobs.get()
            try:
                fut.set_result(fn())
            except BaseException as e:
                fut.set_exception(e)


def _backoff_schedule() -> tuple[float, ...]:
    """STAGE_BACKOFF, or the schedule BACKOFF_ENV gives (tests)."""
    text = os.environ.get(BACKOFF_ENV, "")
    try:
        waits = tuple(float(w) for w in text.split(",") if w.strip())
    except ValueError:
        log.warning("ignoring %s=%r (comma-separated seconds)", BACKOFF_ENV, text)
        waits = ()
    return waits or STAGE_BACKOFF


def _proc_state(pid: int) -> str | None:
    """A process's state (/proc/<pid>/stat: R, S, D, T stopped, Z...); None if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _jvm_process() -> Any:
    """The JVM that pyspark launched for this process (a Popen), if any."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    # not getattr: a Py4J gateway resolves unknown attributes in the JVM
    return gateway.__dict__.get("proc") if gateway is not None else None


def _jvm_alive() -> bool:
    proc = _jvm_process()
    return proc is not None and proc.poll() is None


def _check_stage(engine: Engine) -> tuple[str, bool] | None:
    """None while the stage is healthy; else (error, whether the JVM is gone)."""
    proc = _jvm_process()
    if proc is not None and proc.poll() is not None:
        return f"the Spark JVM (pid {proc.pid}) exited with code {proc.returncode}", True
    query = engine.query
    if query is None:
        return "the Spark stage's query is gone", False
    try:
        if query.isActive:
            return None
        exc = query.exception()
    except Exception as e:  # Py4J: the driver's JVM does not answer; did it exit?
        with contextlib.suppress(Exception):
            if proc is not None and proc.wait(timeout=2) is not None:
                return f"the Spark JVM (pid {proc.pid}) exited with code {proc.returncode}", True
        return f"the Spark driver does not answer: {_brief(e)}", True
    if exc is None:
        return "the Spark stage's query stopped", False
    text = _brief(exc)
    cause = getattr(exc, "_cause", None)  # pyspark's converted Java cause
    if cause is not None and _brief(cause) not in text:
        text += f" (caused by {_brief(cause)})"
    return f"the Spark stage's query failed: {text}", False


def _check_stage_safely(engine: Engine) -> tuple[str, bool] | None:
    try:
        return _check_stage(engine)
    except Exception as e:  # a fault to restart from, not a dead supervisor
        return f"checking the Spark stage failed: {_brief(e)}", False


def _forget_spark() -> None:
    """Drop the process's SparkSession, SparkContext and Py4J gateway (their JVM died or
    does not answer: it is killed), so that the next start launches a new JVM."""
    from headwater.engine import engine as engine_module
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    from pyspark.sql.context import SQLContext

    with engine_module._spark_lock:
        spark, engine_module._spark = engine_module._spark, None
    gateway = SparkContext._gateway
    proc = gateway.__dict__.get("proc") if gateway is not None else None
    if proc is not None and proc.poll() is None:
        proc.kill()  # the JVM this process started, which no longer answers
        proc.wait()
    if spark is not None:
        with contextlib.suppress(Exception):
            spark.stop()  # Python-side cleanup (accumulator server); the JVM calls fail
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None
    SQLContext._instantiatedContext = None
    with SparkContext._lock:
        SparkContext._gateway = None
        SparkContext._jvm = None
        SparkContext._active_spark_context = None
    if gateway is not None:
        with contextlib.suppress(Exception):
            gateway.shutdown()


def _brief(e: BaseException) -> str:
    """An exception in one line. Spark's messages run over many lines (a Python
    traceback from the foreachBatch sink, the query's description): keep the first
    line and the Python exception that ends an embedded traceback."""
    text = str(e)
    for cut in ("=== Streaming Query ===", "JVM stacktrace:", "\n\tat "):
        text = text.split(cut, 1)[0]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return type(e).__name__
    head = lines[0].split(" Return Message:", 1)[0]
    if len(lines) > 1:
        raised = [ln for ln in lines[1:] if _EXCEPTION_LINE.match(ln)]
        if raised:
            head = f"{head} {raised[-1]}"
    return head if len(head) <= 500 else head[:497] + "..."


_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)(: |$)")
