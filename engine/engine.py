"""The maintenance engine: one shared Spark stage that advances every view by epoch.

    engine = Engine(state_dir, spool_dir)               # opens (or recovers) the state
    engine.create_view(16500, plan, scans)              # backfills at the last epoch
    engine.start()                                      # the Spark stage (lazy session)
    engine.frontier(16500); engine.read(16500, epoch)   # state at any retained epoch

Design (docs/engine.md): ONE Spark Structured Streaming query per process, the
stage, whose source is the spool (offsets = epochs) and whose plan does not depend
on the views (so views come and go without restarting it, and N views cost one
query's per-batch overhead, not N). Its foreachBatch sink runs in the driver's
Python process and advances every view over the batch's epochs with the operator
rules of engine/delta.py, evaluated by DuckDB over the engine's state database. Each
view's batch is one DuckDB transaction that also moves its frontier, so a batch
replayed after SIGKILL (Spark re-runs the last uncommitted batch from its offset
log) is skipped by the views that committed it and redone by the others: no
change lost, none counted twice.
"""

from __future__ import annotations

import bisect
import json
import logging
import os
import pickle
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
from headwater.engine import spool as sp
from headwater.engine.delta import LIVE, Batch, ScanInfo, ViewProgram, arrow_rows, fetch_all
from headwater.engine.family import TAG_V, Tagged, is_tag, tag_plan, tag_source, view_tag
from headwater.planner.incremental import incrementalize
from headwater.planner.ir import Plan

log = logging.getLogger("headwater.engine")

ATTACHED = "hw_engine"  # the engine's database, when attached to the server's DuckDB
# The most epochs one step of `Engine.advance` covers (docs/engine.md, figures (f)).
STEP_EPOCHS = int(os.environ.get("HW_ENGINE_STEP_EPOCHS", "300"))
# How long a micro-batch's sink goes on advancing to newer durable epochs (see start()).
CATCH_UP_S = float(os.environ.get("HW_ENGINE_CATCH_UP_S", "1.0"))
Snapshot = Callable[[int, int], pa.Table]  # (table oid, epoch) -> rows (cols...) at that epoch


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


_spark_lock = threading.Lock()
_spark: Any = None


def spark_session(master: str = "local[2]", conf: dict[str, str] | None = None) -> Any:
    """The process's one SparkSession, started on first use."""
    global _spark
    with _spark_lock:
        if _spark is None:
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            from pyspark.sql import SparkSession

            b = (
                SparkSession.builder.master(master)
                .appName("headwater-engine")
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.sql.shuffle.partitions", "1")
                # idle cost vs latency (docs/engine.md, figures (d)): 100 ms adds ~35 ms
                # to the median freshness and takes idle CPU from ~8% to ~1% of a core
                .config("spark.sql.streaming.pollingDelay", "100ms")
                .config("spark.sql.streaming.minBatchesToRetain", "20")
                .config("spark.driver.memory", "1g")
            )
            for k, v in (conf or {}).items():
                b = b.config(k, v)
            _spark = b.getOrCreate()
            _spark.sparkContext.setLogLevel("ERROR")
            _spark.dataSource.register(sp.EpochSource)
            _spark.dataSource.register(sp.ChangeSource)
        return _spark


class Engine:
    def __init__(
        self,
        state_dir: str | os.PathLike[str],
        spool_dir: str | os.PathLike[str],
        master: str = "local[2]",
        snapshot: Snapshot | None = None,
        wait_ms: int = 0,
        connection: duckdb.DuckDBPyConnection | None = None,
    ) -> None:
        """`connection`: a DuckDB database to attach the engine's database to (the
        server's replica), so that reads of views are plain SQL on it (`read_sql`)."""
        self.state_dir = Path(state_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.spool = Path(spool_dir)
        self.master = master
        self.wait_ms = wait_ms
        self._snapshot = snapshot or self._spool_snapshot
        path = str(self.state_dir / "engine.duckdb")
        if connection is None:
            self._db = duckdb.connect(path)
            self.schema = ""
        else:
            self._db = connection
            connection.execute(f"ATTACH '{path}' AS {ATTACHED}")
            self.schema = f"{ATTACHED}."
        self._lock = threading.RLock()  # one batch (or DDL) at a time
        self._cur = self._cursor()
        self._cur.execute(
            "CREATE TABLE IF NOT EXISTS hw_views (view BIGINT PRIMARY KEY, name VARCHAR,"
            " created BIGINT, frontier BIGINT, status VARCHAR, error VARCHAR, plan BLOB)"
        )
        self._cur.execute("CREATE TABLE IF NOT EXISTS hw_stage (k VARCHAR PRIMARY KEY, v BIGINT)")
        self._cur.execute(
            "CREATE TABLE IF NOT EXISTS hw_families (family VARCHAR PRIMARY KEY, key VARCHAR,"
            " plan BLOB)"
        )
        self._cur.execute(
            "CREATE TABLE IF NOT EXISTS hw_members (view BIGINT PRIMARY KEY, family VARCHAR,"
            " params VARCHAR)"
        )
        self.views: dict[int, ViewProgram] = {}
        self.names: dict[int, str] = {}
        self.families: dict[str, Family] = {}  # by name
        self._member_of: dict[int, Family] = {}
        for fname, key, blob in fetch_all(self._cur, "SELECT * FROM hw_families ORDER BY 1"):
            tplan, scans, tag_types = pickle.loads(blob)
            fprog = ViewProgram(fname, tplan, scans, tag_types=tuple(tag_types))
            fprog.db = self._cur
            fprog.prepare(self._cur)
            self.families[fname] = Family(fname, key, fprog, {})
        for view, fname, params in fetch_all(self._cur, "SELECT * FROM hw_members"):
            fam = self.families[fname]
            fam.members[int(view)] = tuple(json.loads(params))
            self._member_of[int(view)] = fam
        for view, name, blob in fetch_all(
            self._cur, "SELECT view, name, plan FROM hw_views ORDER BY view"
        ):
            plan, scans = pickle.loads(blob)
            prog = ViewProgram(int(view), plan, scans)
            prog.db = self._cur
            if int(view) in self._member_of:
                prog.type_nodes(self._cur)  # its tables are its family's
            else:
                prog.prepare(self._cur)
            self.views[int(view)] = prog
            self.names[int(view)] = name
        self._last: int | None = None  # last_epoch, cached
        # frontiers of the running views, as committed (the stage's own copy)
        self._fronts: dict[int, int] = {
            int(v): int(f)
            for v, f in fetch_all(
                self._cur, "SELECT view, frontier FROM hw_views WHERE status = 'running'"
            )
        }
        self.query: Any = None
        self.on_advance: list[Callable[[int], None]] = []
        self.step_epochs = STEP_EPOCHS
        self.catch_up_s = CATCH_UP_S
        self._stopping = False

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        cur = self._db.cursor()
        cur.execute("SET integer_division = true")
        if self.schema:
            cur.execute(f"USE {ATTACHED}")
        return cur

    # -- views ----------------------------------------------------------------------
    @property
    def last_epoch(self) -> int:
        """The newest epoch the stage has processed (views are created at it)."""
        if self._last is None:
            rows = fetch_all(self._cur, "SELECT v FROM hw_stage WHERE k = 'end'")
            self._last = int(rows[0][0]) if rows else 0
        return self._last

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
            cur = self._cur
            prog = ViewProgram(view, lowered, scans)
            prog.db = cur
            prog.type_nodes(cur)
            fam, new = self._family(prog)
            if fam is None:
                prog.create_tables(cur)
            blob = pickle.dumps((lowered, scans))
            cur.execute("BEGIN")
            try:
                if fam is not None:
                    self._join_family(fam, new, view, epoch)
                else:
                    self._backfill(prog, epoch)
                cur.execute(
                    "INSERT INTO hw_views VALUES (?, ?, ?, ?, 'running', NULL, ?)",
                    [view, name or str(view), epoch, epoch, blob],
                )
                cur.execute("COMMIT")
            except BaseException:
                cur.execute("ROLLBACK")
                self._forget_scratch()
                if fam is None:
                    prog.drop(cur)
                else:
                    fam.members.pop(view, None)
                    if new:
                        fam.prog.drop(cur)
                raise
            if fam is not None:
                self.families[fam.name] = fam
                self._member_of[view] = fam
            self.views[view] = prog
            self.names[view] = name or str(view)
            self._fronts[view] = epoch
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
            self._fronts.pop(view, None)
            fam = self._member_of.pop(view, None)
            if fam is None:
                cur.execute("DELETE FROM hw_views WHERE view = ?", [view])
                if prog is not None:
                    prog.drop(cur)
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

    # -- families (engine/family.py) ------------------------------------------------
    def _family(self, prog: ViewProgram) -> tuple[Family | None, bool]:
        """The family a new view joins (and whether it is a new one), or None when the
        view cannot share: its plan has no template, or a type would differ."""
        tagged = tag_plan(prog.plan, prog.scans)
        if tagged is None:
            return None, False
        fam = next((f for f in self.families.values() if f.key == tagged.key), None)
        new = fam is None
        if fam is None:
            fprog = ViewProgram(
                f"f{prog.view}", tagged.plan, prog.scans, tag_types=tagged.tag_types
            )
            fprog.db = self._cur
            try:
                fprog.type_nodes(self._cur)
            except duckdb.Error:  # e.g. a function that wants a constant argument
                return None, False
            fam = Family(str(fprog.view), tagged.key, fprog, {})
        if not self._same_types(prog, fam, tagged):
            return None, False
        if new:
            fam.prog.create_tables(self._cur)
        fam.members[prog.view] = tuple(tagged.params)
        return fam, new

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

    def _join_family(self, fam: Family, new: bool, view: int, epoch: int) -> None:
        """Backfill a new member (the caller holds the transaction) and give it its
        output as SQL views over its family's tables."""
        cur = self._cur
        if new:
            cur.execute(
                "INSERT INTO hw_families VALUES (?, ?, ?)",
                [
                    fam.name,
                    fam.key,
                    pickle.dumps((fam.prog.plan, fam.prog.scans, fam.prog.tag_types)),
                ],
            )
        cur.execute(
            "INSERT INTO hw_members VALUES (?, ?, ?)",
            [view, fam.name, json.dumps(list(fam.members[view]))],
        )
        self._backfill(fam.prog, epoch, fam.pv({view: epoch - 1}))
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

    def _backfill(self, prog: ViewProgram, epoch: int, pv: str | None = None) -> None:
        registered: list[str] = []

        def changes(oid: int, after: int) -> str:
            info = prog.scans[oid]
            name = f"_snap{oid}"
            if info.view is not None:
                cols = info.select_from_view()
                return (
                    f"(SELECT {cols}, _n AS _hw_w, {epoch} AS _hw_epoch FROM o{info.view}"
                    f" WHERE _from <= {epoch} AND _to > {epoch})"
                )
            t = self._snapshot(oid, epoch)
            if t.num_rows == 0:
                return empty_changes(info)
            self._cur.register(name, t)
            registered.append(name)
            if sp.WEIGHT in t.column_names:
                return f"(SELECT *, {epoch} AS _hw_epoch FROM {name})"
            return f"(SELECT *, 1 AS _hw_w, {epoch} AS _hw_epoch FROM {name})"

        try:
            prog.advance(self._cur, Batch(epoch, changes), epoch - 1, True, multi=False, pv=pv)
        finally:
            for n in registered:
                try:
                    self._cur.unregister(n)
                except duckdb.Error:
                    pass

    def _spool_snapshot(self, oid: int, epoch: int) -> pa.Table:
        """A table's rows at `epoch` by integrating the spool from its start (for
        standalone use; the server passes the DuckDB replica's versions instead)."""
        batches = list(sp.read_table_changes(self.spool, oid, 0, epoch))
        if not batches:
            return pa.table({"_hw_w": pa.array([], pa.int64())})
        t = pa.Table.from_batches(batches)
        cols = [c for c in t.column_names if c not in (sp.WEIGHT, sp.EPOCH)]
        cur = self._db.cursor()
        cur.register("_s", t)
        q = ", ".join(f'"{c}"' for c in cols)
        out = arrow_rows(
            cur,
            f"SELECT {q}, sum({sp.WEIGHT})::BIGINT AS _hw_w FROM _s GROUP BY ALL"
            f" HAVING sum({sp.WEIGHT}) > 0",
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
        out: dict[int, int] = {}
        while True:
            with self._lock:
                low = min(self._fronts.values(), default=end)
            step = end if end - low <= self.step_epochs else low + self.step_epochs
            for v, n in self._advance(step).items():
                out[v] = out.get(v, 0) + n
            if step >= end:
                return out

    def _advance(self, end: int) -> dict[int, int]:
        out: dict[int, int] = {}
        with self._lock:
            cur = self._cur
            fronts = self._fronts
            todo = [v for v in self._order() if v in fronts and fronts[v] < end]
            if not todo:
                self._set_end(max(end, self.last_epoch))
                return out
            low = min(fronts[v] for v in todo)
            self._seq = getattr(self, "_seq", 0) + 1
            registered: dict[int, str] = {}
            epochs: dict[int, list[int]] = {}  # table -> epochs of the batch that changed it
            # every changed table's changes, registered once, before any transaction
            for oid in {o for v in todo for o, i in self.views[v].scans.items() if i.view is None}:
                parts, epochs[oid] = sp.read_table_epochs(self.spool, oid, low, end)
                if parts:
                    name = f"_chg{oid}_{self._seq}"
                    cur.register(name, pa.concat_tables(parts))
                    registered[oid] = name

            def changes(oid: int, after: int) -> str:
                """A scanned relation's changes of epochs (after, end]."""
                info = next(p.scans[oid] for p in self.views.values() if oid in p.scans)
                if info.view is not None:
                    cols = info.select_from_view()
                    return (
                        f"(SELECT {cols}, _w AS _hw_w, _e AS _hw_epoch FROM l{info.view}"
                        f" WHERE _e > {after} AND _e <= {end})"
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
                    else:
                        rows = fetch_all(
                            cur,
                            f"SELECT DISTINCT _e FROM l{info.view}"
                            f" WHERE _e > {after} AND _e <= {end}",
                        )
                        seen.update(int(r[0]) for r in rows)
                return len(seen)

            def run(views: list[int]) -> int:
                """Advance views (one view, or views of one family) over the batch."""
                fam = self._member_of.get(views[0])
                at = {v: changed_at(self.views[v], fronts[v]) for v in views}
                moved = [v for v in views if at[v]]
                if not moved:
                    return 0
                multi = max(at.values())
                after = min(fronts[v] for v in moved)
                batch = Batch(end, changes)
                if fam is None:
                    return self.views[views[0]].advance(cur, batch, after, False, multi=multi)
                pv = fam.pv({v: fronts[v] for v in moved})
                return fam.prog.advance(cur, batch, after, False, multi=multi, pv=pv)

            # units: a view, or the views of a family (at its first member's place)
            units: dict[object, list[int]] = {}
            for v in todo:
                fam = self._member_of.get(v)
                units.setdefault(fam.name if fam is not None else v, []).append(v)

            def advance_frontiers(views: list[int]) -> None:
                marks = ", ".join("?" for _ in views)
                cur.execute(
                    f"UPDATE hw_views SET frontier = ? WHERE view IN ({marks})", [end, *views]
                )

            # Every view in one transaction (a commit costs ~3 ms); if any view fails,
            # redo the batch one view per transaction, so that only that view stops.
            last = max(end, self.last_epoch)
            cur.execute("BEGIN")
            try:
                for views in units.values():
                    n = run(views)
                    for v in views:
                        out[v] = n
                advance_frontiers(todo)
                self._set_end(last)
                cur.execute("COMMIT")
                for v in todo:
                    fronts[v] = end
            except Exception:
                cur.execute("ROLLBACK")
                self._last = None
                self._forget_scratch()
                out.clear()
                for v in todo:
                    cur.execute("BEGIN")
                    try:
                        out[v] = run([v])
                        advance_frontiers([v])
                        cur.execute("COMMIT")
                        fronts[v] = end
                    except Exception as e:  # a view's error stops that view only
                        cur.execute("ROLLBACK")
                        self._forget_scratch()
                        log.warning("view %s failed at epochs (%s, %s]: %s", v, fronts[v], end, e)
                        cur.execute(
                            "UPDATE hw_views SET status = 'error', error = ? WHERE view = ?",
                            [str(e), v],
                        )
                        fronts.pop(v, None)
                self._set_end(last)
            for name in registered.values():
                cur.unregister(name)
        for fn in self.on_advance:
            fn(end)
        return out

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

    def _forget_scratch(self) -> None:
        for prog in self.views.values():
            prog.forget_scratch()
        for fam in self.families.values():
            fam.prog.forget_scratch()

    # -- the Spark stage ------------------------------------------------------------
    def start(self, conf: dict[str, str] | None = None) -> None:
        """Start the stage: a streaming query over the spool that calls `advance`."""
        if self.query is not None:
            return
        spark = spark_session(self.master, conf)
        ck = str(self.state_dir / "checkpoint")
        _drop_unrenamed_logs(ck)
        start = self.last_epoch

        def on_batch(df: Any, batch_id: int) -> None:
            end = _batch_end(ck, batch_id)
            if end is None:
                return
            self.advance(end)
            # Epochs that became durable while the batch ran are advanced to now, for
            # up to `catch_up_s`, rather than after Spark's next trigger: a micro-batch
            # costs Spark 0.1-0.3 s of offset and commit logs on this machine, which
            # under a steady stream of epochs would add to every epoch's freshness.
            # Exactly once still holds: each view's frontier moves with its state, and
            # Spark's next batches (epochs up to theirs) find those views past them.
            deadline = time.monotonic() + self.catch_up_s
            while not self._stopping and time.monotonic() < deadline:
                latest = sp.read_latest(self.spool)
                if latest <= self.last_epoch:
                    break
                self.advance(latest)

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
            low = fetch_all(
                self._reader(), "SELECT min(frontier) FROM hw_views WHERE status = 'running'"
            )[0][0]
            if low is None or low >= epoch:
                return True
            time.sleep(0.01)
        return False

    # -- reading --------------------------------------------------------------------
    def frontier(self, view: int) -> int:
        rows = fetch_all(self._reader(), "SELECT frontier FROM hw_views WHERE view = ?", [view])
        return int(rows[0][0]) if rows else -1

    def _reader(self) -> duckdb.DuckDBPyConnection:
        local = getattr(self, "_tls", None)
        if local is None:
            local = self._tls = threading.local()
        cur = getattr(local, "cur", None)
        if cur is None:
            cur = local.cur = self._cursor()
        return cur

    def read_sql(self, view: int, epoch: int | None = None) -> str:
        """SQL (over the engine's database) for the view's rows at `epoch`."""
        prog = self.views[view]
        e = self.frontier(view) if epoch is None else epoch
        names = ", ".join(
            f'{c} AS "{n}"' for c, n in zip(prog.plan.root.columns, prog.plan.output, strict=True)
        )
        return (
            f"SELECT {names} FROM (SELECT * FROM {self.schema}o{view}"
            f" WHERE _from <= {e} AND _to > {e}) _o,"
            " range(_o._n)"
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
        sizes = {int(r[0]): (r[1], r[2]) for r in fetch_all(cur, " UNION ALL ".join(parts))}
        return (
            [
                ViewStatus(int(v), name, int(fr), int(created), st, err, *map(int, sizes[int(v)]))
                for v, name, fr, created, st, err in rows
            ]
            if parts
            else []
        )

    def vacuum(self, horizon: int) -> None:
        """Forget versions and changes no read at or after `horizon` needs."""
        with self._lock:
            owners = [str(v) for v in self.views if v not in self._member_of]
            for o in owners + list(self.families):
                self._cur.execute(f"DELETE FROM o{o} WHERE _to <= {horizon}")
                self._cur.execute(f"DELETE FROM l{o} WHERE _e <= {horizon}")


def empty_changes(info: ScanInfo) -> str:
    """An empty change relation with the scanned relation's columns and types."""
    cols = ", ".join(f'NULL::{t} AS "{c}"' for c, t in zip(info.columns, info.types, strict=True))
    sep = ", " if cols else ""
    return f"(SELECT {cols}{sep}0::BIGINT AS _hw_w, 0::BIGINT AS _hw_epoch WHERE false)"


def _drop_unrenamed_logs(checkpoint: str) -> None:
    """Spark writes each offset/commit log entry to a hidden temp file, then renames it;
    a kill in between leaves the temp file, and Spark 4 then refuses to start at batch 0
    (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY). No query runs here: they are garbage."""
    for log_dir in ("offsets", "commits"):
        for tmp in Path(checkpoint, log_dir).glob(".*.tmp*"):
            tmp.unlink(missing_ok=True)


def _batch_end(checkpoint: str, batch_id: int) -> int | None:
    """The last epoch of a micro-batch, from Spark's offset log (written before the
    batch runs, so it is there when the batch is replayed after a crash)."""
    path = Path(checkpoint, "offsets", str(batch_id))
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return None
    ends = [json.loads(line)["epoch"] for line in lines[2:] if line.startswith("{")]
    return int(max(ends)) if ends else None
