"""The engine's contract: the only way the server talks to the engine.

After Materialize's compute-client commands (../shared/STYLE.md): a few calls in the
engine's own words (view, epoch, change, frontier, retention, stage). No table names,
plans or Spark objects cross it; views are named by their catalog objects and oids,
and planned here from their definition text, also at every start (nothing is
pickled: a data directory does not depend on the planner's classes).

    api = EngineAPI(state_dir, spool_dir, catalog, connection=replica.cursor(),
                    snapshot=rows_at)                    # views planned again from `catalog`
    api.write_epoch(13, {table_oid: changes})            # what the stage advances views over
    api.create_view(mv, catalog, at_epoch=12)            # plan mv.definition, backfill at 12
    cur.execute(f"SELECT * FROM {api.read_sql(mv, 12)} AS v")          # its rows at 12
    cur.execute(f"SELECT * FROM {api.changes_sql(mv, 12, 20)} AS c")   # (_e, _w, cols...)
    api.frontier(mv.oid); api.view_states(); api.status()
    api.allow_compaction(15)                             # no read needs epochs before 15
    api.drop_view(mv.oid)
    api.start_stage(); api.check_stage().result(1.0); api.reset_stage(new_jvm=True)
    api.stop_stage(wait=5.0)

`read_sql` and `changes_sql` are relations over `connection`'s database (the engine's
is attached to it), so that one statement can join tables and views at one epoch. A
string epoch is spliced in as it is (a placeholder the caller replaces once it has
chosen the statement's epoch).

The stage is one Spark streaming query in one JVM; calls that may block in a hung JVM
(`check_stage`, stopping the query) run on a thread of their own and take a timeout,
so the caller's supervision (server/matviews.py) never hangs with it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from types import MappingProxyType
from typing import Any

import duckdb
import pyarrow as pa
from headwater.catalog.catalog import Catalog
from headwater.catalog.objects import MaterializedView, Table
from headwater.engine.delta import ScanInfo
from headwater.engine.engine import Engine, Snapshot, ViewState, ViewStatus
from headwater.engine.explain import EXECUTOR_REASONS, Operator, ViewExplain, explain_plan
from headwater.engine.explain import rule_name as explain_rule
from headwater.engine.spool import SpoolWriter, read_latest
from headwater.engine.stage import (
    Jvm,
    Probe,
    StageFault,
    brief,
    check_query,
    forget_spark,
    jvm_process,
)
from headwater.engine.state_copy import StateCopy, capture
from headwater.planner.ir import Plan, PlanBuilder
from headwater.planner.temporal import CLOCK_COLUMN, CLOCK_DUCKDB_TYPE, CLOCK_OID
from pglast import parse_sql

from headwater.errors import SQLError

__all__ = ["EngineAPI", "Jvm", "StageFault", "StageStartError", "ViewState", "ViewStatus"]

log = logging.getLogger("headwater.engine")
# change rows the spool keeps in memory before it writes files (engine/spool.py)
SPOOL_MEMORY = int(os.environ.get("HW_SPOOL_MEMORY_MB", "256")) << 20


class StageStartError(Exception):
    """The stage did not start (the message is Spark's, in one line)."""


class EngineAPI:
    def __init__(
        self,
        state_dir: str | os.PathLike[str],
        spool_dir: str | os.PathLike[str],
        catalog: Catalog,
        *,
        connection: duckdb.DuckDBPyConnection,
        snapshot: Snapshot,
        master: str = "local[2]",
        executor: str = "auto",
        memory_limit: int | None = None,
    ) -> None:
        """Open the engine's state and load its views, each planned again from its
        definition in `catalog`: views no longer in the catalog are dropped, and so are
        views whose state no longer matches their plan (and views over them; the caller
        backfills views of the catalog the engine lacks: `views`). `snapshot(table oid,
        epoch)` gives a table's rows at an epoch, to backfill from; `connection` is the
        DuckDB database reads run on (the engine's database is attached to it)."""
        self._spool = SpoolWriter(spool_dir, memory_bytes=SPOOL_MEMORY)
        self._engine = Engine(
            state_dir,
            spool_dir,
            master=master,
            snapshot=snapshot,
            connection=connection,
            executor=executor,
            memory_limit=memory_limit,
        )
        self._engine.spool_reader = self._spool.reader()
        self._engine.restore(lambda oid: self._replan(oid, catalog))
        self._engine.on_advance.append(self._truncate_spool)
        self._probe = Probe()

    # -- views ------------------------------------------------------------------------
    @staticmethod
    def plan(definition: str, catalog: Catalog, search_path: tuple[str, ...]) -> Plan:
        """A view's plan; FeatureNotSupported (0A000) names what is out of scope."""
        return PlanBuilder(catalog, search_path).build(parse_sql(definition)[0].stmt)

    @classmethod
    def plan_view(cls, mv: MaterializedView, catalog: Catalog) -> Plan:
        """The plan of a view of the catalog, from its definition text."""
        return cls.plan(mv.definition, catalog, (mv.schema, "public"))

    @property
    def views(self) -> Mapping[int, object]:
        """The views the engine maintains: oid -> an opaque handle, replaced whenever the
        view is (SQL from `read_sql` stays valid while the handle is the same)."""
        return MappingProxyType(self._engine.views)

    def create_view(self, mv: MaterializedView, catalog: Catalog, at_epoch: int) -> int:
        """Plan a view from its definition and backfill it: its state at `at_epoch` from
        a snapshot of its inputs; from then on the stage advances it. Returns the epoch."""
        plan = self.plan_view(mv, catalog)
        scans = self._scans(plan, catalog)
        return self._engine.create_view(mv.oid, plan, scans, name=mv.name, at_epoch=at_epoch)

    def drop_view(self, oid: int) -> None:
        self._engine.drop_view(oid)

    def allow_compaction(self, epoch: int) -> None:
        """No read needs the views' state before `epoch` any more: forget it. (Keep it
        back to the oldest running frontier: views above a view read its changes.)"""
        self._engine.vacuum(epoch)

    def base_tables(self, oid: int) -> set[int]:
        """The tables under a view, through the views it reads."""
        prog = self._engine.views.get(oid)
        if prog is None:
            return set()
        out: set[int] = set()
        for t, info in prog.scans.items():
            out |= self.base_tables(info.view) if info.view is not None else {t}
        return out

    def explain(self, oid: int) -> ViewExplain | None:
        """What EXPLAIN says of a view the engine maintains (None: it has no such view):
        its lowered plan, each operator's rule and state tables, executor and status."""
        engine = self._engine
        prog = engine.views.get(oid)
        if prog is None:
            return None
        fam = engine._member_of.get(oid)  # its states are its family's tables
        owner = fam.prog if fam is not None and len(fam.prog.nodes) == len(prog.nodes) else prog
        ops = {
            id(node): Operator(
                i,
                explain_rule(node),
                tuple(n for n, _ in owner.state_schemas(i, owner.nodes[i])),
            )
            for i, node in enumerate(prog.nodes)
        }
        state = self.view_state(oid)
        out = ViewExplain(prog.plan, ops, output_tables=(f"o{oid}", f"l{oid}"))
        if fam is not None:
            out.family, out.family_size = fam.name, len(fam.members)
        executor, reason, tasks = engine.executor_of(oid)
        out.executor = executor or f"none yet (--executor {engine.executor})"
        out.executor_reason = (reason or EXECUTOR_REASONS[engine.executor]) + (
            f"; {tasks} Spark tasks run for it so far" if tasks else ""
        )
        if state is not None:
            out.frontier, out.created = state.frontier, state.created
            out.status, out.error = state.status, state.error
        return out

    @classmethod
    def explain_definition(
        cls,
        definition: str,
        catalog: Catalog,
        search_path: tuple[str, ...],
        executor: str = "auto",
    ) -> ViewExplain:
        """What EXPLAIN says of a view not created yet (0A000 if out of scope), with
        who would run its batches under the server's `--executor`."""
        return explain_plan(cls.plan(definition, catalog, search_path), executor=executor)

    # -- reads --------------------------------------------------------------------------
    def read_sql(self, mv: MaterializedView, epoch: int | str) -> str:
        """A relation of the view's rows at `epoch`, typed and named as the catalog
        declares its columns."""
        return f"({self._engine.read_sql(mv.oid, epoch, _columns(mv))})"

    def changes_sql(self, mv: MaterializedView, after: int | str, upto: int | str) -> str:
        """A relation of the view's changes of epochs (after, upto]: (_e, _w, columns...),
        `_w` the change of a row's multiplicity at epoch `_e` (not consolidated)."""
        return f"({self._engine.changes_sql(mv.oid, after, upto, _columns(mv))})"

    # -- progress -----------------------------------------------------------------------
    @property
    def last_epoch(self) -> int:
        """The newest epoch the stage has processed."""
        return self._engine.last_epoch

    def statement_progress(self) -> float | None:
        """Percent done of the DuckDB statement the engine runs now (None: none)."""
        return self._engine.statement_progress()

    def frontier(self, oid: int) -> int:
        """The newest epoch the view's state reflects (-1: no such view)."""
        return self._engine.frontier(oid)

    def view_states(self) -> dict[int, ViewState]:
        return self._engine.registry()

    def view_state(self, oid: int) -> ViewState | None:
        """One view's registry row (None: no such view); no DuckDB statement."""
        return self._engine.registered(oid)

    def status(self) -> list[ViewStatus]:
        """Every view with its size: rows at its frontier and rows of state it keeps
        (a statement over every state table: for monitoring, not for each read)."""
        return self._engine.status()

    def advance_now(self) -> int:
        """Advance every running view to the newest spooled epoch, here and now, without
        the stage (while it starts: `--executor auto`); exactly once with the stage's
        batches (each view only ever processes epochs past its frontier). Returns the
        epoch the views are at."""
        latest = read_latest(self._engine.spool)
        if latest > self._engine.last_epoch:
            self._engine.pace()  # (epochs spooled meanwhile join the batch)
            latest = read_latest(self._engine.spool)
            self._engine.advance(latest)
        return latest

    def wait_spooled(self, seen: int | None, timeout: float) -> int:
        """Wait until an epoch is spooled after the call that returned `seen` (None:
        do not wait), at most `timeout` seconds; returns the value to pass next time."""
        if seen is not None:
            self._engine.wait_spooled(seen, timeout)
        return self._engine.spool_seq

    @property
    def executor(self) -> str:
        return self._engine.executor

    @property
    def last_batch(self) -> tuple[float, frozenset[str]] | None:
        """The last batch that advanced views: its seconds and the executors that ran it
        (read in an `on_advance` callback, on the stage's thread)."""
        return self._engine.last_batch

    def on_progress(self, fn: Callable[[], None]) -> None:
        """Call `fn()` whenever a batch running on Spark completes a step (a batch there
        can take minutes; the stall watchdog counts these as progress)."""
        self._engine.spark.on_step.append(fn)

    def on_advance(self, fn: Callable[[int], None]) -> None:
        """Call `fn(end)` on the stage's thread after each batch advanced the views to
        `end` (an exception fails the batch: the stage restarts)."""
        self._engine.on_advance.append(fn)

    # -- the stage's input ------------------------------------------------------------------
    def write_epoch(self, epoch: int, changes: Mapping[int, pa.Table | bytes]) -> None:
        """A durable epoch's changes (table oid -> change rows) for the stage."""
        self._spool.write_epoch(epoch, changes)
        self._engine.spooled()

    def set_latest(self, epoch: int) -> None:
        """Every epoch up to `epoch` has been written (after a restart's re-spool)."""
        self._spool.set_latest(epoch)
        self._engine.spooled()

    def _truncate_spool(self, end: int) -> None:
        self._spool.truncate(self._engine.low_frontier(end))

    def capture(self, into: Path, previous: tuple[Any, ...] | None) -> StateCopy | None:
        """One consistent copy of the state (the database, its Parquet files, Spark's
        checkpoint) in `into`, for the object store; None if its fingerprint equals
        `previous` (engine/state_copy.py)."""
        return capture(self._engine, into, previous)

    # -- the stage ----------------------------------------------------------------------------
    def start_stage(self) -> None:
        """Start the stage (a new JVM and SparkSession if there is none); from Spark's
        checkpoint, each view goes on from its frontier. StageStartError if it fails."""
        try:
            self._engine.start()
        except Exception as e:
            raise StageStartError(brief(e)) from e

    def check_stage(self) -> Future[StageFault | None]:
        """The stage's health (None: healthy), asked on a thread of its own: a hung
        JVM never answers, so wait on the future with a timeout."""
        engine = self._engine
        return self._probe.submit(lambda: check_query(engine.query))

    @staticmethod
    def stage_process() -> Jvm | None:
        """The JVM the stage runs in, if one was launched."""
        return jvm_process()

    def reset_stage(self, new_jvm: bool, stop_wait: float = 30.0) -> None:
        """Forget a failed stage so that `start_stage` starts it again: stop its query
        (a JVM that does not stop it in `stop_wait` seconds is killed); with `new_jvm`,
        kill the JVM and forget the SparkSession (the next start launches a new one)."""
        query, self._engine.query = self._engine.query, None
        if query is not None and not new_jvm:
            try:
                self._probe.submit(query.stop).result(stop_wait)
            except Exception:
                new_jvm = True
        if new_jvm:
            try:
                forget_spark()
            except Exception:
                log.exception("Spark stage: forgetting the SparkSession")

    def stop_stage(self, wait: float) -> None:
        """Stop the stage at shutdown without hanging: a stopped JVM (SIGSTOP) is killed,
        and so is one whose query does not stop in `wait` seconds (safe: the batch in
        flight is replayed from Spark's checkpoint at the next start)."""
        jvm = jvm_process()
        if jvm is not None and jvm.stopped:
            log.warning("Spark stage: its JVM (pid %d) is stopped; killing it", jvm.pid)
            jvm.kill()  # stopping the query would wait for it forever
        try:
            self._probe.submit(self._engine.stop).result(wait)
        except FutureTimeout:
            log.warning("Spark stage: the query did not stop in %gs; killing its JVM", wait)
            if jvm is not None:
                jvm.kill()
        except Exception:
            log.exception("stopping the Spark stage")

    # -- planning ---------------------------------------------------------------------------
    def _scans(self, plan: Plan, catalog: Catalog) -> dict[int, ScanInfo]:
        """How the plan's relations are scanned: a table's changes come from the spool,
        a materialized view's from the engine (its output changes)."""
        out: dict[int, ScanInfo] = {}
        for oid in plan.tables:
            if oid == CLOCK_OID:  # a temporal filter's clock (planner/temporal.py)
                out[oid] = ScanInfo(oid, [CLOCK_COLUMN], [CLOCK_DUCKDB_TYPE])
                continue
            rel = catalog.by_oid(oid)
            if isinstance(rel, MaterializedView):
                out[oid] = self._engine.output_scan(oid, oid)
            else:
                assert isinstance(rel, Table)
                out[oid] = ScanInfo(
                    oid, [c.name for c in rel.columns], [c.type.duckdb() for c in rel.columns]
                )
        return out

    def _replan(self, oid: int, catalog: Catalog) -> tuple[Plan, dict[int, ScanInfo]] | None:
        """A view's plan at start, from the catalog (None: the engine drops the view)."""
        mv = catalog.by_oid(oid)
        if not isinstance(mv, MaterializedView):
            return None  # dropped in the catalog; the engine missed it
        try:
            plan = self.plan_view(mv, catalog)
            if any(
                isinstance(catalog.by_oid(o), MaterializedView) and o not in self._engine.views
                for o in plan.tables
            ):
                return None  # it reads a view that was dropped (and is backfilled again)
            return plan, self._scans(plan, catalog)
        except SQLError as e:
            log.warning("materialized view %s: its definition no longer plans: %s", mv.name, e)
            return None


def _columns(mv: MaterializedView) -> list[tuple[str, str]]:
    return [(c.name, c.type.duckdb()) for c in mv.columns]
