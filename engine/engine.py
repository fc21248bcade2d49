"""The maintenance engine: one shared Spark stage that advances every view by epoch.

    engine = Engine(state_dir, spool_dir, replan=plans) # opens the state; views are
                                                        # planned again from their text
    engine.create_view(16500, plan, scans)              # backfills at the last epoch
    engine.start()                                      # the Spark stage (lazy session)
    engine.frontier(16500); engine.read(16500, epoch)   # state at any retained epoch

Design (docs/engine.md): ONE Spark Structured Streaming query per process, the
stage, whose source is the spool (offsets = epochs) and whose plan does not depend
on the views (so views come and go without restarting it, and N views cost one
query's per-batch overhead, not N). Its foreachBatch sink runs in the driver's
Python process and advances every view over the batch's epochs with the operator
rules of engine/delta.py, evaluated by DuckDB over the engine's state database. Each
view's (or family's) batch is one DuckDB transaction, on a cursor of its own, that
also moves its frontier: independent views advance on several threads, and a batch
replayed after SIGKILL (Spark re-runs the last uncommitted batch from its offset
log) is skipped by the views that committed it and redone by the others: no
change lost, none counted twice.
"""

from __future__ import annotations

import bisect
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
from headwater.engine import spool as sp
from headwater.engine import stage
from headwater.engine.delta import Batch, ScanInfo, ViewProgram, arrow_rows, fetch_all
from headwater.engine.executors import EXECUTORS, Choice, choose
from headwater.engine.family import TAG_V, Tagged, is_tag, tag_plan, tag_source, view_tag
from headwater.engine.parquet_state import Manifest
from headwater.engine.priority import background, run_delay
from headwater.engine.rules.output import LIVE
from headwater.engine.spark_executor import SparkExecutor
from headwater.planner.incremental import incrementalize
from headwater.planner.ir import Plan, unique_columns
from headwater.planner.pg_compat import install_functions
from headwater.storage.changelog import WEIGHT
from headwater.storage.replica import quote

log = logging.getLogger("headwater.engine")

ATTACHED = "hw_engine"  # the engine's database, when attached to the server's DuckDB
# The most epochs one step of `Engine.advance` covers (docs/engine.md, figures (f)).
STEP_EPOCHS = int(os.environ.get("HW_ENGINE_STEP_EPOCHS", "300"))
# A micro-batch's sink goes on advancing to newer durable epochs until none came for
# CATCH_UP_S, at most CATCH_UP_MAX_S after it started (see start()).
CATCH_UP_S = float(os.environ.get("HW_ENGINE_CATCH_UP_S", "1.0"))
CATCH_UP_MAX_S = float(os.environ.get("HW_ENGINE_CATCH_UP_MAX_S", "5.0"))
# A batch that had to wait for the CPU (its thread's run-queue delay: the write path and
# reads wanted it) while epochs were spooled delays the next one by PACE x that wait (at
# most PACE_MAX_S); the next batch then takes every epoch that arrived meanwhile. A
# batch's cost hardly grows with its epochs (DuckDB's planning is most of it), so under
# contention maintenance runs fewer, larger batches and CPU per INSERT falls; with the
# CPU free, or no epoch spooled during the batch, the next one is not delayed.
PACE = float(os.environ.get("HW_ENGINE_PACE", "2.0"))
PACE_MAX_S = float(os.environ.get("HW_ENGINE_PACE_MAX_S", "0.25"))
# Threads that advance a batch's independent units (a view, or a family) at once, each
# on its own cursor in its own transaction: most of a unit's time is DuckDB binding and
# optimizing statements on one core, and leaves it idle part of the time (2 cores, 3
# views: 1 thread 57-62 ms per batch, 2: 45-48, 4: 40-41; docs/engine.md (l)).
# 1: one unit after the other.
UNIT_THREADS = int(os.environ.get("HW_ENGINE_UNIT_THREADS", "4"))
# ... only for a batch where some unit has at least this many changed input rows. A
# stream of small writes makes small batches, whose Python parts on several threads
# take the GIL from the server's event loop while it has writes to take (issue 16:
# 4 writers with 5 views, 1,636 INSERTs/s on 4 threads against 2,272 on one; none:
# 2,717); bulk changes (a 4,000-row batch of the maintenance bench) still go wide.
PARALLEL_ROWS = int(os.environ.get("HW_ENGINE_PARALLEL_ROWS", "2000"))
Snapshot = Callable[[int, int], pa.Table]  # (table oid, epoch) -> rows (cols...) at that epoch
# view -> its plan and scans, planned again from its definition (None: it no longer exists)
Columns = Sequence[tuple[str, str]]  # (name, DuckDB type) of each column of a view
Replan = Callable[[int], "tuple[Plan, dict[int, ScanInfo]] | None"]


@dataclass
class Family:
    """Views that share one program (engine/family.py): their rows carry the view
    (`vcol`) and its integer constants; tables are named after the family."""

    name: str  # "f{first view}": its tables are o{name}, l{name}, s{name}_...
    key: str
    prog: ViewProgram
    members: dict[int, tuple[str, ...]]  # view -> its constants (integer literals)
    tables: list[tuple[str, str]] | None = None  # (see Engine._family_tables)

    @property
    def vcol(self) -> str:
        return view_tag(self.prog.plan.root)

    def pv(self, afters: dict[int, int]) -> str:
        """The `_pv` relation of some of its views: (view, constants..., frontier)."""
        types = self.prog.tag_types[1:]
        rows = ", ".join(
            "("
            + ", ".join(
                [f"CAST({v} AS BIGINT)"]
                + [f"CAST({x} AS {t})" for x, t in zip(self.members[v], types, strict=True)]
                + [f"CAST({a} AS BIGINT)"]
            )
            + ")"
            for v, a in afters.items()
        )
        cols = [TAG_V, *(tag_source(j) for j in range(len(types))), "_after"]
        return f"(VALUES {rows}) AS _pv({', '.join(cols)})"


@dataclass(frozen=True)
class ViewState:
    """A view as the engine's registry has it (cheap: no state sizes, see `status`)."""

    frontier: int  # the newest epoch its state reflects
    created: int  # the epoch it was backfilled at
    status: str  # running | error
    error: str | None


@dataclass
class ViewStatus:
    view: int
    name: str
    frontier: int
    created: int
    status: str  # running | error
    error: str | None
    rows: int  # rows of the view at its frontier
    state_rows: int  # rows the view keeps: operator states, output versions and changes
    executor: str | None = None  # who ran its last batch (spark | duckdb; None: none yet)
    executor_reason: str | None = None
    spark_tasks: int = 0  # Spark tasks run for it so far (its family's, for a member)


class Engine:
    def __init__(
        self,
        state_dir: str | os.PathLike[str],
        spool_dir: str | os.PathLike[str],
        master: str = "local[2]",
        snapshot: Snapshot | None = None,
        wait_ms: int = 0,
        connection: duckdb.DuckDBPyConnection | None = None,
        replan: Replan | None = None,
        executor: str = "auto",
        memory_limit: int | None = None,
    ) -> None:
        """`connection`: a DuckDB database to attach the engine's database to (the
        server's replica), so that reads of views are plain SQL on it (`read_sql`).
        `replan`: each view's plan, built again from its definition (see `restore`);
        without it, the views of an existing state are not loaded until `restore`.
        `executor`: who runs each batch's rules, `duckdb`, `spark` or `auto` (the
        server's default too; engine/executors.py; `memory_limit`, the server's,
        weighs in for `auto`)."""
        if executor not in EXECUTORS:
            raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}: {executor!r}")
        self.executor = executor
        self.memory_limit = memory_limit
        self.state_dir = Path(state_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.spool = Path(spool_dir)
        self.master = master
        self.wait_ms = wait_ms
        self._snapshot = snapshot or self._spool_snapshot
        path = str(self.state_dir / "engine.duckdb")
        if connection is None:
            self._db = duckdb.connect(path)
            # what view expressions call (planner/ir.py `pg_semantics`); the server's
            # replica connection has them already
            install_functions(self._db)
            self.schema = ""
        else:
            self._db = connection
            connection.execute(f"ATTACH '{path}' AS {ATTACHED}")
            self.schema = f"{ATTACHED}."
        self._lock = threading.RLock()  # one batch (or DDL) at a time
        # the registry's cursor; each unit (a plain view's program, or a family's) has a
        # cursor of its own (`ViewProgram.db`: its scratch tables are temp tables of it)
        self._cur = self._cursor()
        self.unit_threads = UNIT_THREADS
        self._pool: ThreadPoolExecutor | None = None
        self._busy: duckdb.DuckDBPyConnection | None = None  # a backfill's (its progress)
        # The registry. A data directory written before plans were re-planned from their
        # definitions has a `plan` column (pickled plans) in hw_views and hw_families:
        # it is ignored, and rows are written naming their columns.
        self._cur.execute(
            "CREATE TABLE IF NOT EXISTS hw_views (view BIGINT PRIMARY KEY, name VARCHAR,"
            " created BIGINT, frontier BIGINT, status VARCHAR, error VARCHAR)"
        )
        self._cur.execute("CREATE TABLE IF NOT EXISTS hw_stage (k VARCHAR PRIMARY KEY, v BIGINT)")
        self._cur.execute(
            "CREATE TABLE IF NOT EXISTS hw_families (family VARCHAR PRIMARY KEY, key VARCHAR)"
        )
        self._cur.execute(
            "CREATE TABLE IF NOT EXISTS hw_members (view BIGINT PRIMARY KEY, family VARCHAR,"
            " params VARCHAR)"
        )
        self.views: dict[int, ViewProgram] = {}
        self.names: dict[int, str] = {
            int(v): name for v, name in fetch_all(self._cur, "SELECT view, name FROM hw_views")
        }
        self.families: dict[str, Family] = {}  # by name
        self._member_of: dict[int, Family] = {}
        self._shapes: dict[int, str | None] = {}  # plain views' family keys (`_shape`)
        self._last: int | None = None  # last_epoch, cached
        # hw_views as committed, for the stage and for readers: a read asks for its
        # views' frontiers and status, and a DuckDB statement for that cost more than the
        # read of a small view (~0.5 ms each, several per read, on the server's event
        # loop). Written only after the COMMIT that changes the row; entries are
        # replaced whole.
        self._registry: dict[int, ViewState] = {
            int(v): ViewState(int(f), int(c), st, err)
            for v, f, c, st, err in fetch_all(
                self._cur, "SELECT view, frontier, created, status, error FROM hw_views"
            )
        }
        self.query: Any = None
        self.on_advance: list[Callable[[int], None]] = []
        self.step_epochs = STEP_EPOCHS
        self.catch_up_s = CATCH_UP_S
        self.catch_up_max_s = CATCH_UP_MAX_S
        self._stopping = False
        # the spool's epochs kept in memory by this process's writer (None: files only)
        self.spool_reader: sp.MemorySpool | None = None
        self._spooled = threading.Condition()  # notified by `spooled`
        self._next_batch = 0.0  # (monotonic) when the next batch may start: `pace`
        self._spool_seq = 0
        # the state both executors share (engine/parquet_state.py)
        self.manifest = Manifest(self.state_dir, self._cur)
        self.spark = SparkExecutor(
            self.state_dir, lambda: stage.spark_session(self.master), self.manifest
        )
        self.last_choice: dict[int, Choice] = {}  # view -> executor of its last batch, and why
        # the last batch that advanced views: (seconds it took, executors that ran it)
        self.last_batch: tuple[float, frozenset[str]] | None = None
        if replan is not None:
            self.restore(replan)

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        cur = self._db.cursor()
        cur.execute("SET integer_division = true")
        # DuckDB tracks a statement's progress (statement_progress), printing nothing
        cur.execute("SET enable_progress_bar = true")
        cur.execute("SET enable_progress_bar_print = false")
        if self.schema:
            home = cur.execute("SELECT current_database()").fetchone()[0]  # type: ignore[index]
            cur.execute(f"USE {ATTACHED}")
            # the server's macros (planner/functions/) live in its own database
            cur.execute(f"SET search_path = '{ATTACHED}.main,{home}.main'")
        return cur

    # -- restart ----------------------------------------------------------------------
    def restore(self, replan: Replan) -> list[int]:
        """Load the views of the state. Plans are not stored (the state would then
        depend on the planner's classes): each view is planned again from its definition
        (`replan`, in creation order, so that a view over a view finds it loaded), and
        its tables are checked against that plan. A view that no longer exists (`replan`
        gives None) is dropped, and so is one whose tables do not match its plan (the
        planner now plans it differently): the caller backfills it again. A view over a
        dropped view should then be given as None too. Returns the views dropped."""
        with self._lock:
            cur = self._cur
            members = {
                int(v): (f, tuple(json.loads(p)))
                for v, f, p in fetch_all(cur, "SELECT view, family, params FROM hw_members")
            }
            keys = dict(fetch_all(cur, "SELECT family, key FROM hw_families"))
            tables = {r[0] for r in fetch_all(cur, _TABLES)}
            dropped: list[int] = []
            for view in sorted(self.names):
                plan = replan(view)
                if plan is None:
                    dropped.append(view)
                    continue
                prog = ViewProgram(view, incrementalize(plan[0]), plan[1])
                # (a member's own program only types it: its family's runs its batches)
                prog.db = cur if view in members else self._cursor()
                try:
                    prog.type_nodes(prog.db)
                    if view in members:
                        ok = self._restore_member(prog, *members[view], keys[members[view][0]])
                    else:
                        ok = self._restore_tables(prog, tables)
                except duckdb.Error as e:
                    log.warning("view %s: planned again, it cannot be typed: %s", view, e)
                    ok = False
                if not ok:
                    self._close(prog)
                    log.warning("view %s: its state does not match its plan; dropped", view)
                    dropped.append(view)
                    continue
                self.views[view] = prog
            for view in dropped:
                self._forget(view, members.get(view, (None,))[0], tables)
            for fname in set(keys) - set(self.families):  # no member left
                self._drop_tables(fname, tables)
                cur.execute("DELETE FROM hw_families WHERE family = ?", [fname])
            return dropped

    def _restore_member(
        self, prog: ViewProgram, fname: str, params: tuple[str, ...], key: str
    ) -> bool:
        """A view of a family (its tables are its family's): the family's program is
        its template, built from the first member planned again."""
        tagged = tag_plan(prog.plan, prog.scans)
        if tagged is None or tagged.key != key:
            return False
        fam = self.families.get(fname)
        if fam is None:
            fprog = ViewProgram(fname, tagged.plan, prog.scans, tag_types=tagged.tag_types)
            fprog.db = self._cursor()
            try:
                fprog.type_nodes(fprog.db)
                tables = {r[0] for r in fetch_all(self._cur, _TABLES)}
                ok = self._restore_tables(fprog, tables)
            except duckdb.Error:
                ok = False
            if not ok:
                self._close(fprog)
                return False
            fam = self.families[fname] = Family(fname, key, fprog, {})
        fam.members[prog.view] = params
        self._member_of[prog.view] = fam
        return True

    def _restore_tables(self, prog: ViewProgram, tables: set[str]) -> bool:
        """Whether the view's tables are those its program makes (names and columns);
        if so, its scratch tables are created."""
        v = prog.view
        want = {f"o{v}", f"l{v}"} | {
            name for i, node in enumerate(prog.nodes) for name, _ in prog.state_schemas(i, node)
        }
        if want != {t for t in tables if t in (f"o{v}", f"l{v}") or t.startswith(f"s{v}_")}:
            return False
        prog.create_tables(prog.db)  # only its scratch tables: the others exist
        root = prog.plan.root
        cols = list(zip(root.columns, prog.types[prog.index[id(root)]], strict=True))
        expect = {
            f"o{v}": [*cols, ("_n", "BIGINT"), ("_from", "BIGINT"), ("_to", "BIGINT")],
            f"l{v}": [*cols, ("_w", "BIGINT"), ("_e", "BIGINT")],
        }
        for name, want_cols in expect.items():
            have = [(r[0], r[1]) for r in fetch_all(prog.db, f"DESCRIBE {name}")]
            if have != [(c, t) for c, t in want_cols]:
                return False
        for i, node in enumerate(prog.nodes):
            for name, sql in prog.state_schemas(i, node):
                have_names = [r[0] for r in fetch_all(prog.db, f"DESCRIBE {name}")]
                if have_names != [r[0] for r in fetch_all(prog.db, f"DESCRIBE {sql}")]:
                    return False
        return True

    def _forget(self, view: int, family: str | None, tables: set[str]) -> None:
        """Drop a view that has no program (see `restore`)."""
        cur = self._cur
        self.names.pop(view, None)
        cur.execute("DELETE FROM hw_views WHERE view = ?", [view])
        self._registry.pop(view, None)
        if family is None:
            self._drop_tables(str(view), tables)
            return
        cur.execute("DELETE FROM hw_members WHERE view = ?", [view])
        cur.execute(f"DROP VIEW IF EXISTS o{view}")
        cur.execute(f"DROP VIEW IF EXISTS l{view}")
        fam = self.families.get(family)
        if fam is not None:
            for table, col in self._family_tables(fam, cur):
                cur.execute(f"DELETE FROM {table} WHERE {col} = {view}")

    def _drop_tables(self, owner: str, tables: set[str]) -> None:
        """The output and state tables of a view or family by their names alone, and
        their Parquet copies (the view or family planned again makes tables of the same
        names, maybe with other columns: Spark must not read the old copies)."""
        owned = sorted(
            t for t in tables if t in (f"o{owner}", f"l{owner}") or t.startswith(f"s{owner}_")
        )
        self.manifest.forget(self._cur, owned)
        self.manifest.commit()
        for t in owned:
            self._cur.execute(f"DROP TABLE IF EXISTS {t}")

    # -- views ----------------------------------------------------------------------
    @property
    def last_epoch(self) -> int:
        """The newest epoch the stage has processed (views are created at it)."""
        last = self._last
        if last is None:
            # under the lock: another thread may be running a batch on the cursor
            # (DuckDB refuses a second call on a busy connection)
            with self._lock:
                rows = fetch_all(self._cur, "SELECT v FROM hw_stage WHERE k = 'end'")
                last = self._last = int(rows[0][0]) if rows else 0
        return last

    def low_frontier(self, default: int) -> int:
        """The oldest frontier of the running views (`default` if none runs), as
        committed: what the spool must still hold is newer."""
        with self._lock:
            return min(self._running().values(), default=default)

    def create_view(
        self,
        view: int,
        plan: Plan,
        scans: dict[int, ScanInfo],
        name: str = "",
        at_epoch: int | None = None,
    ) -> int:
        """Register a view and backfill it: its state at `at_epoch` (default: the last
        epoch the stage processed) from a snapshot of its inputs. Returns that epoch."""
        lowered = incrementalize(plan)
        with self._lock:
            epoch = self.last_epoch if at_epoch is None else at_epoch
            prog = ViewProgram(view, lowered, scans)
            prog.db = self._cur
            prog.type_nodes(self._cur)
            fam, new = self._family(prog)
            if fam is None:
                prog.db = self._cursor()
                prog.create_tables(prog.db)
            # the transaction is the cursor's of the program that runs the view's batches
            cur = self._busy = (prog if fam is None else fam.prog).db
            cur.execute("BEGIN")
            try:
                if fam is not None:
                    choice = self._join_family(fam, new, view, epoch)
                else:
                    choice = self._backfill(prog, epoch)
                cur.execute(
                    "INSERT INTO hw_views (view, name, created, frontier, status, error)"
                    " VALUES (?, ?, ?, ?, 'running', NULL)",
                    [view, name or str(view), epoch, epoch],
                )
                cur.execute("COMMIT")
                self.manifest.commit()
            except BaseException:
                cur.execute("ROLLBACK")
                self.manifest.rollback(cur)
                if fam is None:
                    prog.drop(cur)
                    self._close(prog)
                else:
                    fam.prog.forget_scratch()
                    fam.members.pop(view, None)
                    if new:
                        fam.prog.drop(cur)
                        self._close(fam.prog)
                raise
            finally:
                self._busy = None
            if fam is not None:
                self.families[fam.name] = fam
                self._member_of[view] = fam
            self.last_choice[view] = choice
            self.views[view] = prog
            self.names[view] = name or str(view)
            self._registry[view] = ViewState(epoch, epoch, "running", None)
            if at_epoch is None and epoch == 0:
                self._set_end(0)
            return epoch

    def output_scan(self, view: int, oid: int) -> ScanInfo:
        """How a view over this view scans it: its output columns and their types."""
        prog = self.views[view]
        root = prog.index[id(prog.plan.root)]
        return ScanInfo(
            oid,
            list(prog.plan.output),
            list(prog.types[root]),
            view=view,
            internal=list(prog.plan.root.columns),
        )

    def drop_view(self, view: int) -> None:
        with self._lock:
            cur = self._cur
            prog = self.views.pop(view, None)
            self.names.pop(view, None)
            self._registry.pop(view, None)
            self.last_choice.pop(view, None)
            self._shapes.pop(view, None)
            fam = self._member_of.pop(view, None)
            if fam is None:
                cur.execute("DELETE FROM hw_views WHERE view = ?", [view])
                if prog is not None:
                    self.manifest.forget(cur, prog.tables())
                    self.manifest.commit()
                    self.spark.forget(prog.view)
                    prog.drop(cur)
                    self._close(prog)
                return
            cur.execute("BEGIN")
            cur.execute("DELETE FROM hw_views WHERE view = ?", [view])
            cur.execute("DELETE FROM hw_members WHERE view = ?", [view])
            cur.execute(f"DROP VIEW IF EXISTS o{view}")
            cur.execute(f"DROP VIEW IF EXISTS l{view}")
            fam.members.pop(view, None)
            if fam.members:
                for table, col in self._family_tables(fam, cur):
                    cur.execute(f"DELETE FROM {table} WHERE {col} = {view}")
            else:
                cur.execute("DELETE FROM hw_families WHERE family = ?", [fam.name])
                self.families.pop(fam.name, None)
            cur.execute("COMMIT")
            if not fam.members:
                fam.prog.drop(cur)
                self._close(fam.prog)

    # -- families (engine/family.py) ------------------------------------------------
    def _family(self, prog: ViewProgram) -> tuple[Family | None, bool]:
        """The family a new view joins (and whether it is a new one), or None when the
        view cannot share: its plan has no template, or a type would differ."""
        tagged = tag_plan(prog.plan, prog.scans)
        if tagged is None:
            return None, False
        fam = next((f for f in self.families.values() if f.key == tagged.key), None)
        new = fam is None
        if fam is None and not any(self._shape(v) == tagged.key for v in self._plain()):
            # The first view of a shape stays a plain program: a family's rules carry
            # the tags through every join, group and fold, which made a lone view's
            # batch 5-15% dearer (docs/engine.md (k)). The second view of the shape
            # starts the family; the first stays plain (its history stays where it is).
            return None, False
        if fam is None:
            fprog = ViewProgram(
                f"f{prog.view}", tagged.plan, prog.scans, tag_types=tagged.tag_types
            )
            fprog.db = self._cursor()
            try:
                fprog.type_nodes(fprog.db)
            except duckdb.Error:  # e.g. a function that wants a constant argument
                self._close(fprog)
                return None, False
            fam = Family(str(fprog.view), tagged.key, fprog, {})
        if not self._same_types(prog, fam, tagged):
            if new:
                self._close(fam.prog)
            return None, False
        if new:
            fam.prog.create_tables(fam.prog.db)
        fam.members[prog.view] = tuple(tagged.params)
        return fam, new

    def _plain(self) -> list[int]:
        """The views in no family."""
        return [v for v in self.views if v not in self._member_of]

    def _shape(self, view: int) -> str | None:
        """A plain view's family key (None: it has no template), worked out once."""
        if view not in self._shapes:
            prog = self.views[view]
            tagged = tag_plan(prog.plan, prog.scans)
            self._shapes[view] = tagged.key if tagged is not None else None
        return self._shapes[view]

    @staticmethod
    def _same_types(prog: ViewProgram, fam: Family, tagged: Tagged) -> bool:
        """Every operator of the view has, in the family, the types it has alone."""
        shape = ViewProgram(fam.name, tagged.plan, prog.scans)  # (indexes its nodes only)
        for node, tnode in tagged.pairs:
            i, ti = prog.index[id(node)], shape.index[id(tnode)]
            ftypes = dict(zip(fam.prog.nodes[ti].columns, fam.prog.types[ti], strict=True))
            for c, t in zip(node.columns, prog.types[i], strict=True):
                if ftypes.get(c) != t:
                    return False
        return True

    def _join_family(self, fam: Family, new: bool, view: int, epoch: int) -> Choice:
        """Backfill a new member (the caller holds the transaction) and give it its
        output as SQL views over its family's tables."""
        cur = fam.prog.db
        if new:
            cur.execute("INSERT INTO hw_families (family, key) VALUES (?, ?)", [fam.name, fam.key])
        cur.execute(
            "INSERT INTO hw_members VALUES (?, ?, ?)",
            [view, fam.name, json.dumps(list(fam.members[view]))],
        )
        choice = self._backfill(fam.prog, epoch, fam.pv({view: epoch - 1}))
        cols = ", ".join(c for c in fam.prog.plan.root.columns if not is_tag(c))
        sep = ", " if cols else ""
        cur.execute(
            f"CREATE VIEW o{view} AS SELECT {cols}{sep}_n, _from, _to FROM o{fam.name}"
            f" WHERE {fam.vcol} = {view}"
        )
        cur.execute(
            f"CREATE VIEW l{view} AS SELECT {cols}{sep}_w, _e FROM l{fam.name}"
            f" WHERE {fam.vcol} = {view}"
        )
        return choice

    @staticmethod
    def _family_tables(fam: Family, cur: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
        """The family's tables (output, changes, then states) and, for each, a column
        holding the view."""
        if fam.tables is None:
            out = [(f"o{fam.name}", fam.vcol), (f"l{fam.name}", fam.vcol)]
            prog = fam.prog
            for i, node in enumerate(prog.nodes):
                for table, _ in prog.state_schemas(i, node):
                    cols = [r[0] for r in fetch_all(cur, f"DESCRIBE {table}")]
                    out.append((table, next(c for c in cols if c.startswith("hv") and is_tag(c))))
            fam.tables = out
        return fam.tables

    def _backfill(self, prog: ViewProgram, epoch: int, pv: str | None = None) -> Choice:
        """Fill a program (a family's: the members `pv` names) with its inputs at `epoch`,
        on its cursor (the caller holds the transaction); returns who ran it."""
        registered: list[str] = []
        snaps = {oid: self._snapshot(oid, epoch) for oid, i in prog.scans.items() if i.view is None}
        arrows = {f"_snap{oid}": t for oid, t in snaps.items() if t.num_rows}

        def changes(oid: int, after: str, end: str) -> str:
            info = prog.scans[oid]
            name = f"_snap{oid}"
            if info.view is not None:
                cols = info.select_from_view()
                return (
                    f"(SELECT {cols}, _n AS _hw_w, {epoch} AS _hw_epoch FROM o{info.view}"
                    f" WHERE _from <= {epoch} AND _to > {epoch})"
                )
            t = snaps[oid]
            if t.num_rows == 0:
                return empty_changes(info)
            if name not in registered:
                prog.db.register(name, t)
                registered.append(name)
            if WEIGHT in t.column_names:
                return f"(SELECT *, {epoch} AS _hw_epoch FROM {name})"
            return f"(SELECT *, 1 AS _hw_w, {epoch} AS _hw_epoch FROM {name})"

        rows = sum(t.num_rows for t in snaps.values())
        try:
            batch = Batch(epoch, changes)
            return self._execute(
                prog, batch, epoch - 1, True, False, pv, arrows, rows, backfill=True
            )[1]
        finally:
            for n in registered:
                try:
                    prog.db.unregister(n)
                except duckdb.Error:
                    pass

    def _spool_snapshot(self, oid: int, epoch: int) -> pa.Table:
        """A table's rows at `epoch` by integrating the spool from its start (for
        standalone use; the server passes the DuckDB replica's versions instead)."""
        batches = list(sp.read_table_changes(self.spool, oid, 0, epoch, self.spool_reader))
        if not batches:
            return pa.table({WEIGHT: pa.array([], pa.int64())})
        t = pa.Table.from_batches(batches)
        cols = [c for c in t.column_names if c not in (WEIGHT, sp.EPOCH)]
        cur = self._db.cursor()
        cur.register("_s", t)
        q = ", ".join(f'"{c}"' for c in cols)
        out = arrow_rows(
            cur,
            f"SELECT {q}, sum({WEIGHT})::BIGINT AS _hw_w FROM _s GROUP BY ALL"
            f" HAVING sum({WEIGHT}) > 0",
        )
        cur.close()
        return out

    # -- advancing ------------------------------------------------------------------
    def _set_end(self, end: int) -> None:
        if end != self.last_epoch:
            # (an UPDATE costs a third of an INSERT OR REPLACE into the keyed table)
            n = fetch_all(self._cur, "UPDATE hw_stage SET v = ? WHERE k = 'end'", [end])[0][0]
            if not n:
                self._cur.execute("INSERT INTO hw_stage VALUES ('end', ?)", [end])
            self._last = end

    def advance(self, end: int) -> dict[int, int]:
        """Advance every running view to `end`; returns output changes per view (for
        views of a family: the family's). A view that fails is marked failed with its
        error; the others go on.

        Per batch: each changed table's spool files are read once (one Arrow table
        registered per table); a view none of whose inputs changed since its frontier
        costs nothing but its frontier; a view whose inputs changed at one epoch only
        runs its rules without window functions (`ViewProgram.advance(multi=False)`);
        the views of a family run together, one statement per rule.

        A batch of more than `step_epochs` epochs (a backlog: after a restart, or
        when the stage fell behind) is advanced in steps of that many epochs, each
        committed and announced to `on_advance` on its own: some rules cost more than
        linearly in the epochs of a batch (a group that changes at each of E epochs
        is re-aggregated E times), and the first epochs of a backlog become readable
        sooner."""
        background()
        out: dict[int, int] = {}
        while True:
            with self._lock:
                low = min(self._running().values(), default=end)
            step = end if end - low <= self.step_epochs else low + self.step_epochs
            for v, n in self._advance(step).items():
                out[v] = out.get(v, 0) + n
            if step >= end:
                return out

    def _advance(self, end: int) -> dict[int, int]:
        began, waited, seq = time.monotonic(), run_delay(), self._spool_seq
        out: dict[int, int] = {}
        with self._lock:
            fronts = self._running()
            todo = [v for v in self._order() if v in fronts and fronts[v] < end]
            if not todo:
                self._set_end(max(end, self.last_epoch))
                return out
            registered: dict[int, str] = {}
            arrows: dict[str, pa.Table] = {}  # registered name -> its rows
            epochs: dict[int, list[int]] = {}  # table -> epochs of the batch that changed it
            # Each table's changes after the lowest frontier of the views that scan it, not
            # of all views: an ALTER rebuilt those views at its epoch, and the spool's
            # older epochs hold rows of the table's old shape.
            lows: dict[int, int] = {}
            for v in todo:
                for o, i in self.views[v].scans.items():
                    if i.view is None:
                        lows[o] = min(lows.get(o, fronts[v]), fronts[v])
            # every changed table's changes, read once (each unit's cursor registers them)
            for oid, low in lows.items():
                parts, epochs[oid] = sp.read_table_epochs(
                    self.spool, oid, low, end, self.spool_reader
                )
                if parts:
                    name = f"_chg{oid}"  # (one name each batch: statements keep their text)
                    arrows[name] = pa.concat_tables(parts)
                    registered[oid] = name

            def changes(oid: int, after: str, upto: str) -> str:
                """A scanned relation's changes of epochs (after, upto], SQL expressions
                of the batch's bounds (upto: `end`)."""
                info = next(p.scans[oid] for p in self.views.values() if oid in p.scans)
                if info.view is not None:
                    cols = info.select_from_view()
                    return (
                        f"(SELECT {cols}, _w AS _hw_w, _e AS _hw_epoch FROM l{info.view}"
                        f" WHERE _e > {after} AND _e <= {upto})"
                    )
                name = registered.get(oid)
                if name is None:  # no change in the batch: an empty relation of its type
                    return empty_changes(info)
                return f"(SELECT * FROM {name} WHERE _hw_epoch > {after})"

            def changed_at(prog: ViewProgram, after: int) -> int:
                """At how many epochs of (after, end] the view's inputs changed."""
                seen: set[int] = set()
                for oid, info in prog.scans.items():
                    if info.view is None:
                        eps = epochs.get(oid, [])
                        seen.update(eps[bisect.bisect_right(eps, after) :])
                    else:  # (committed by its unit, which ran before on this thread)
                        rows = fetch_all(
                            self._unit(int(prog.view)).db,
                            f"SELECT DISTINCT _e FROM l{info.view}"
                            f" WHERE _e > {after} AND _e <= {end}",
                        )
                        seen.update(int(r[0]) for r in rows)
                return len(seen)

            def rows_of(prog: ViewProgram) -> int:
                return sum(arrows[registered[o]].num_rows for o in prog.scans if o in registered)

            def run(views: list[int]) -> None:
                """Advance views (one view, or views of one family) over the batch, in a
                transaction of their program's cursor that also moves their frontiers."""
                at = {v: changed_at(self.views[v], fronts[v]) for v in views}
                moved = [v for v in views if at[v]]
                prog = self._unit(views[0])
                cur = prog.db
                cur.execute("BEGIN")
                try:
                    n, choice = 0, None
                    if moved:
                        fam = self._member_of.get(views[0])
                        pv = None if fam is None else fam.pv({v: fronts[v] for v in moved})
                        unchanged = frozenset(
                            o
                            for o, i in prog.scans.items()
                            if i.view is None and o not in registered
                        )
                        n, choice = self._execute(
                            prog,
                            Batch(end, changes),
                            min(fronts[v] for v in moved),
                            False,
                            max(at.values()),
                            pv,
                            arrows,
                            rows_of(prog),
                            unchanged,
                        )
                    marks = ", ".join("?" for _ in views)
                    cur.execute(
                        f"UPDATE hw_views SET frontier = ? WHERE view IN ({marks})", [end, *views]
                    )
                    cur.execute("COMMIT")
                except BaseException:
                    cur.execute("ROLLBACK")
                    prog.forget_scratch()  # its temp tables made in the transaction are gone
                    self.manifest.rollback(cur)
                    raise
                self.manifest.commit()
                for v in views:
                    out[v] = n
                    self._registry[v] = replace(self._registry[v], frontier=end)
                    if choice is not None and v in moved:
                        self.last_choice[v] = choice

            def fail(v: int, e: Exception) -> None:
                """A view's error stops that view only."""
                log.warning("view %s failed at epochs (%s, %s]: %s", v, fronts[v], end, e)
                # the error names the view (a rule's message knows only its id)
                why = f'materialized view "{self.names.get(v, v)}": {e}'
                self._unit(v).db.execute(
                    "UPDATE hw_views SET status = 'error', error = ? WHERE view = ?", [why, v]
                )
                self._registry[v] = replace(self._registry[v], status="error", error=why)

            def advance_units(units: list[list[int]]) -> None:
                """Units one after the other (a unit reads the changes its predecessors
                committed); a family that fails is redone one view at a time, so that
                only the failing view stops."""
                for views in units:
                    prog = self._unit(views[0])
                    cur = prog.db
                    names = [registered[o] for o in prog.scans if o in registered]
                    for name in names:
                        cur.register(name, arrows[name])
                    try:
                        try:
                            run(views)
                            continue
                        except Exception as e:
                            if len(views) == 1:
                                fail(views[0], e)
                                continue
                        for v in views:
                            try:
                                run([v])
                            except Exception as e:
                                fail(v, e)
                    finally:
                        for name in names:
                            cur.unregister(name)

            # units: a view, or the views of a family (at its first member's place)
            by_unit: dict[object, list[int]] = {}
            for v in todo:
                fam = self._member_of.get(v)
                by_unit.setdefault(fam.name if fam is not None else v, []).append(v)
            groups = self._independent(list(by_unit.values()))
            pooled: list[float] = []  # the unit threads' waits for a CPU (for PACE)

            def on_thread(units: list[list[int]]) -> None:
                w0 = run_delay()
                try:
                    advance_units(units)
                finally:
                    pooled.append(run_delay() - w0)

            if len(groups) > 1 and self._parallel(by_unit.values(), rows_of):
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(
                        self.unit_threads, "hw-units", initializer=background
                    )
                for f in [self._pool.submit(on_thread, g) for g in groups]:
                    f.result()
            else:
                for g in groups:
                    advance_units(g)
            self._set_end(max(end, self.last_epoch))
            ran = frozenset(self.last_choice[v].executor for v in out if v in self.last_choice)
            took = time.monotonic() - began
            self.last_batch = (took, ran)
            # (only while epochs stream in: a write that waits for its views is not
            # delayed when nothing was spooled during the batch)
            streaming = self._spool_seq != seq
            wait = run_delay() - waited + sum(pooled)
            delay = PACE * max(0.0, wait) if streaming else 0.0
            self._next_batch = time.monotonic() + min(PACE_MAX_S, delay)
        for fn in self.on_advance:
            fn(end)
        return out

    def _unit(self, view: int) -> ViewProgram:
        """The program that runs a view's batches: its family's, or its own."""
        fam = self._member_of.get(view)
        return fam.prog if fam is not None else self.views[view]

    def _independent(self, units: list[list[int]]) -> list[list[list[int]]]:
        """The units in groups: a unit whose views read another unit's views is in its
        group, after it (as in `units`); groups can run at once."""
        owner = {v: i for i, views in enumerate(units) for v in views}
        parent = list(range(len(units)))

        def root(i: int) -> int:
            while parent[i] != i:
                i = parent[i]
            return i

        for i, views in enumerate(units):
            for v in views:
                for info in self.views[v].scans.values():
                    if info.view is not None and info.view in owner:
                        parent[root(i)] = root(owner[info.view])
        groups: dict[int, list[list[int]]] = {}
        for i, views in enumerate(units):
            groups.setdefault(root(i), []).append(views)
        return list(groups.values())

    def _parallel(self, units: Iterable[list[int]], rows_of: Callable[[ViewProgram], int]) -> bool:
        """Whether the units may run at once: a batch large enough (PARALLEL_ROWS), every
        unit surely on DuckDB (the Spark executor and the Parquet manifest are used by
        one batch at a time)."""
        if self.unit_threads < 2:
            return False
        units = list(units)
        if max((rows_of(self._unit(views[0])) for views in units), default=0) < PARALLEL_ROWS:
            return False
        for views in units:
            prog = self._unit(views[0])
            if any(t in self.manifest.live for t in prog.tables()):
                return False
            if self._choose(prog, rows_of(prog), None).executor != "duckdb":
                return False
        return True

    def _choose(
        self, prog: ViewProgram, rows: int, why_not: str | None, backfill: bool = False
    ) -> Choice:
        return choose(
            self.executor,
            rows=rows,
            why_not=why_not,
            spark_up=stage.spark_started(),
            local=self.master.startswith("local"),
            state_bytes=lambda: self._state_bytes(prog),
            memory_limit=self.memory_limit,
            backfill=backfill,
        )

    def _execute(
        self,
        prog: ViewProgram,
        batch: Batch,
        after: int,
        first: bool,
        multi: bool | int,
        pv: str | None,
        arrows: dict[str, pa.Table],
        rows: int,
        unchanged: frozenset[int] = frozenset(),
        backfill: bool = False,
    ) -> tuple[int, Choice]:
        """Run one batch of a program on the executor `choose` picks, on the program's
        cursor (the caller holds its transaction); returns its output changes and the
        choice. DuckDB changes the tables in place and unlists their Parquet copies;
        Spark writes new Parquet generations and loads them (spark_executor)."""
        ctx = prog.context(batch, after, first, multi, pv)
        why_not = None if self.executor == "duckdb" else self.spark.expressible(prog, ctx)
        choice = self._choose(prog, rows, why_not, backfill)
        if choice.executor == "spark":
            return self.spark.advance(prog.db, prog, ctx, arrows), choice
        self.manifest.forget(prog.db, prog.tables())
        n = prog.advance(prog.db, batch, after, first, multi=multi, pv=pv, unchanged=unchanged)
        return n, choice

    def _state_bytes(self, prog: ViewProgram) -> int:
        """DuckDB's estimate of the bytes of a program's tables (on its cursor: units
        run on several threads, and a DuckDB connection serves one call at a time)."""
        names = prog.tables()
        marks = ", ".join("?" for _ in names)
        rows = fetch_all(
            prog.db,
            "SELECT coalesce(sum(estimated_size * column_count * 8), 0) FROM duckdb_tables()"
            f" WHERE database_name = current_database() AND table_name IN ({marks})",
            names,
        )
        return int(rows[0][0])

    def _order(self) -> list[int]:
        """The views, each after the views it reads (whose changes of a batch it
        reads in the same batch)."""
        order: list[int] = []
        seen: set[int] = set()

        def visit(v: int) -> None:
            if v in seen or v not in self.views:
                return
            seen.add(v)
            for info in self.views[v].scans.values():
                if info.view is not None:
                    visit(info.view)
            order.append(v)

        for v in self.views:
            visit(v)
        return order

    def _close(self, prog: ViewProgram) -> None:
        """Close a program's own cursor (its temp tables go with it)."""
        if prog.db is not self._cur:
            prog.db.close()

    # -- the Spark stage ------------------------------------------------------------
    def start(self, conf: dict[str, str] | None = None) -> None:
        """Start the stage: a streaming query over the spool that calls `advance`."""
        if self.query is not None:
            return
        spark = stage.spark_session(self.master, conf)
        ck = str(self.state_dir / "checkpoint")
        stage.drop_unrenamed_logs(ck)
        start = self.last_epoch

        def on_batch(df: Any, batch_id: int) -> None:
            end = stage.batch_end(ck, batch_id)
            if end is None:
                return
            began = time.monotonic()
            self.advance(end)
            # Epochs that become durable while the batch runs, or until none came for
            # `catch_up_s` (at most `catch_up_max_s` after the batch started), are
            # advanced as soon as they are spooled (`spooled` wakes the wait) rather
            # than at Spark's next trigger: a micro-batch costs Spark 0.1-0.3 s of
            # polling delay, offset and commit logs on this machine (up to seconds at
            # a high load), which would add to the freshness of every epoch written
            # after a pause, and to every write of a steady stream once the window
            # closed. Exactly once still holds: each view's frontier moves with its
            # state, and Spark's next batches (epochs up to theirs) find those views
            # past them.
            cap = began + self.catch_up_max_s
            deadline = min(cap, time.monotonic() + self.catch_up_s)
            while not self._stopping and (left := deadline - time.monotonic()) > 0:
                seen = self._spool_seq
                if sp.read_latest(self.spool) > self.last_epoch:
                    self.pace()
                    self.advance(sp.read_latest(self.spool))
                    deadline = min(cap, time.monotonic() + self.catch_up_s)
                    continue
                with self._spooled:
                    if self._spool_seq == seen:
                        self._spooled.wait(min(left, 0.05))  # (slices: `stop` is prompt)

        self.query = (
            spark.readStream.format("hw_epochs")
            .option("root", str(self.spool))
            .option("start_epoch", str(start))
            .option("wait_ms", str(self.wait_ms))
            .load()
            .writeStream.option("checkpointLocation", ck)
            .queryName(f"headwater-stage-{os.getpid()}")
            .foreachBatch(on_batch)
            .start()
        )

    def pace(self) -> None:
        """Wait until the next batch may start (see PACE): epochs that arrive meanwhile
        join it."""
        while not self._stopping and (left := self._next_batch - time.monotonic()) > 0:
            time.sleep(min(left, 0.05))

    def spooled(self) -> None:
        """A new epoch is in the spool: a batch waiting in its catch-up window (see
        `start`) advances to it now."""
        with self._spooled:
            self._spool_seq += 1
            self._spooled.notify_all()

    @property
    def spool_seq(self) -> int:
        """How many times `spooled` was called (for `wait_spooled`)."""
        return self._spool_seq

    def wait_spooled(self, seen: int, timeout: float) -> None:
        """Wait until `spooled` is called after `spool_seq` was `seen`, at most `timeout`."""
        with self._spooled:
            if self._spool_seq == seen:
                self._spooled.wait(timeout)

    def stop(self) -> None:
        if self.query is not None:
            self._stopping = True
            try:
                self.query.stop()
            finally:
                self._stopping = False
            self.query = None

    def close(self) -> None:
        self.stop()
        if self._pool is not None:
            self._pool.shutdown()
        for prog in [*self.views.values(), *(f.prog for f in self.families.values())]:
            self._close(prog)
        self._cur.close()
        if self.schema:
            self._db.execute(f"DETACH {ATTACHED}")
        else:
            self._db.close()

    def wait_for(self, epoch: int, timeout: float = 60.0) -> bool:
        """Wait until every running view's frontier is >= epoch."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.query is not None and self.query.exception() is not None:
                raise RuntimeError(f"the stage failed: {self.query.exception()}")
            low = min(self._running().values(), default=None)
            if low is None or low >= epoch:
                return True
            time.sleep(0.01)
        return False

    # -- reading --------------------------------------------------------------------
    def statement_progress(self) -> float | None:
        """DuckDB's percent done of the statement a view's backfill runs now; None when
        none runs. Any thread, without the lock."""
        cur = self._busy
        p = cur.query_progress() if cur is not None else -1
        return p if p >= 0 else None

    def frontier(self, view: int) -> int:
        """The view's committed frontier (-1: no such view). Any thread, no lock."""
        row = self._registry.get(view)
        return row.frontier if row is not None else -1

    def _running(self) -> dict[int, int]:
        """The running views' committed frontiers."""
        return {v: r.frontier for v, r in self.registry().items() if r.status == "running"}

    def registered(self, view: int) -> ViewState | None:
        """The view's row of the registry as committed. Any thread, no lock."""
        return self._registry.get(view)

    def registry(self) -> dict[int, ViewState]:
        """Every view's row of the registry as committed (cheap: no sizes, no DuckDB)."""
        return dict(self._registry)  # (one call under the GIL: a consistent copy)

    def _reader(self) -> duckdb.DuckDBPyConnection:
        local = getattr(self, "_tls", None)
        if local is None:
            local = self._tls = threading.local()
        cur = getattr(local, "cur", None)
        if cur is None:
            cur = local.cur = self._cursor()
        return cur

    def read_sql(
        self, view: int, epoch: int | str | None = None, columns: Columns | None = None
    ) -> str:
        """SQL (over the engine's database, or the one it is attached to) for the view's
        rows at `epoch` (default: its frontier; a string is spliced in as it is, say a
        placeholder the caller replaces). Columns are named as the view's query names
        them, or as `columns` says ((name, DuckDB type) each: cast to that type)."""
        e = self.frontier(view) if epoch is None else epoch
        plan = self.views[view].plan
        # each stored row as many times as its multiplicity, unless rows never repeat
        # (an aggregate's, DISTINCT's): the join with range(_n) costs a read ~0.5-0.8 ms
        repeat = "" if unique_columns(plan.root) is not None else ", range(_o._n)"
        order = plan.order  # a top-N view's rows come in its order
        return (
            f"SELECT {self._columns(view, columns)} FROM (SELECT * FROM {self.schema}o{view}"
            f" WHERE _from <= {e} AND _to > {e}) _o{repeat}"
            + (f" ORDER BY {', '.join(f'_o.{k}' for k in order)}" if order else "")
        )

    def changes_sql(
        self, view: int, after: int | str, upto: int | str, columns: Columns | None = None
    ) -> str:
        """SQL for the view's changes of epochs (after, upto]: (_e, _w, columns...),
        columns as in `read_sql`, in no particular order."""
        cols = self._columns(view, columns)
        return (
            f"SELECT _e, _w{', ' if cols else ''}{cols} FROM {self.schema}l{view}"
            f" WHERE _e > {after} AND _e <= {upto}"
        )

    def _columns(self, view: int, columns: Columns | None) -> str:
        internal = self.views[view].plan.root.columns
        if columns is None:
            names = self.views[view].plan.output
            return ", ".join(f'{c} AS "{n}"' for c, n in zip(internal, names, strict=True))
        return ", ".join(
            f"CAST({c} AS {t}) AS {quote(n)}" for c, (n, t) in zip(internal, columns, strict=True)
        )

    def read(self, view: int, epoch: int | None = None) -> pa.Table:
        """The view's rows at `epoch` (default: its frontier)."""
        return arrow_rows(self._reader(), self.read_sql(view, epoch))

    def changes(self, view: int, after: int, upto: int) -> pa.Table:
        """The view's changes of epochs (after, upto]: (columns..., _w, _e)."""
        return arrow_rows(
            self._reader(), f"SELECT * FROM l{view} WHERE _e > {after} AND _e <= {upto} ORDER BY _e"
        )

    def status(self) -> list[ViewStatus]:
        rows = fetch_all(
            self._reader(),
            "SELECT view, name, frontier, created, status, error FROM hw_views ORDER BY view",
        )
        cur = self._reader()
        parts = []  # one statement for every view's sizes (a statement costs ~1-2 ms)
        for v, *_ in rows:
            prog = self.views.get(int(v))
            fam = self._member_of.get(int(v))
            tables = [f"o{v}", f"l{v}"]
            if fam is not None:
                tables += [
                    f"{t} WHERE {c} = {int(v)}" for t, c in self._family_tables(fam, cur)[2:]
                ]
            elif prog is not None:
                tables += [
                    t for i, node in enumerate(prog.nodes) for t, _ in prog.state_schemas(i, node)
                ]
            size = " + ".join(f"(SELECT count(*) FROM {t})" for t in tables)
            parts.append(
                f"SELECT {int(v)}, (SELECT coalesce(sum(_n), 0) FROM o{v} WHERE _to = {LIVE}),"
                f" {size}"
            )
        if not parts:  # no views: an empty statement is an error
            return []
        sizes = {int(r[0]): (r[1], r[2]) for r in fetch_all(cur, " UNION ALL ".join(parts))}
        return [
            ViewStatus(
                int(v),
                name,
                int(fr),
                int(created),
                st,
                err,
                *map(int, sizes[int(v)]),
                *self.executor_of(int(v)),
            )
            for v, name, fr, created, st, err in rows
        ]

    def executor_of(self, view: int) -> tuple[str | None, str | None, int]:
        """(executor of the view's last batch, why, Spark tasks run for it so far)."""
        choice = self.last_choice.get(view)
        fam = self._member_of.get(view)
        tasks = self.spark.tasks.get(fam.name if fam is not None else view, 0)
        if choice is None:
            return None, None, tasks
        return choice.executor, choice.reason, tasks

    def vacuum(self, horizon: int) -> None:
        """Forget versions and changes no read at or after `horizon` needs."""
        with self._lock:
            owners = [str(v) for v in self.views if v not in self._member_of]
            self.manifest.forget(self._cur, [t for o in owners for t in (f"o{o}", f"l{o}")])
            self.manifest.commit()
            for o in owners + list(self.families):
                self._cur.execute(f"DELETE FROM o{o} WHERE _to <= {horizon}")
                self._cur.execute(f"DELETE FROM l{o} WHERE _e <= {horizon}")


# the tables of the engine's database (its cursors USE it)
_TABLES = (
    "SELECT table_name FROM duckdb_tables()"
    " WHERE database_name = current_database() AND schema_name = 'main'"
)


def empty_changes(info: ScanInfo) -> str:
    """An empty change relation with the scanned relation's columns and types."""
    cols = ", ".join(f'NULL::{t} AS "{c}"' for c, t in zip(info.columns, info.types, strict=True))
    sep = ", " if cols else ""
    return f"(SELECT {cols}{sep}0::BIGINT AS _hw_w, 0::BIGINT AS _hw_epoch WHERE false)"
