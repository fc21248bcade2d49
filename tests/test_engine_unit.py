"""Engine behaviour without Spark or PostgreSQL: `Engine.advance` driven by hand."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
from headwater.catalog.objects import Column, Table
from headwater.catalog.types import INT4, INT8, ColumnType
from headwater.engine import engine as engine_module
from headwater.engine import stage
from headwater.engine.delta import ViewProgram
from headwater.engine.engine import Engine
from headwater.engine.executors import STATE_CHECK_ROWS
from headwater.engine.rules.context import BatchContext
from headwater.engine.rules.output import output
from headwater.engine.spool import SpoolWriter

from tests.test_engine_support import T, U, arrow_rows, catalog, plan_of, replanner, scans


def _t(rows: list[tuple], w: list[int]) -> pa.Table:
    cols = list(zip(*rows, strict=True))
    return pa.table(
        {
            "id": pa.array(cols[0], pa.int32()),
            "a": pa.array(cols[1], pa.int32()),
            "b": pa.array(cols[2], pa.int32()),
            "s": pa.array(cols[3], pa.string()),
            "_hw_w": pa.array(w, pa.int32()),
        }
    )


def _u(rows: list[tuple], w: list[int]) -> pa.Table:
    cols = list(zip(*rows, strict=True))
    return pa.table(
        {
            "id": pa.array(cols[0], pa.int32()),
            "a": pa.array(cols[1], pa.int32()),
            "x": pa.array(cols[2], pa.int32()),
            "_hw_w": pa.array(w, pa.int32()),
        }
    )


def _engine(tmp: Path, **kw: object) -> tuple[Engine, SpoolWriter]:
    w = SpoolWriter(tmp / "spool")
    return Engine(tmp / "state", tmp / "spool", **kw), w  # type: ignore[arg-type]


def _view(engine: Engine, vid: int, sql: str, at: int = 0) -> None:
    plan = plan_of(sql, catalog())
    sc = scans()
    engine.create_view(vid, plan, {o: sc[o] for o in plan.tables}, name=f"v{vid}", at_epoch=at)


def _per_a() -> Any:
    """The test catalog with `per_a(a, n)`: view 1's output (oid 900), for a view over it."""
    cat = catalog()
    cols = (Column("a", ColumnType(INT4, -1)), Column("n", ColumnType(INT8, -1)))
    cat.add_relation(Table(900, "public", "per_a", cols))
    return cat


def test_scalar_aggregate_on_empty_input_is_postgres_answer(tmp_path: Path) -> None:
    engine, w = _engine(tmp_path)
    _view(engine, 1, "SELECT count(*) AS n, sum(b) AS s, max(s) AS m FROM t")
    assert arrow_rows(engine.read(1, 0)) == [(0, None, None)]
    w.write_epoch(1, {T: _t([(1, 1, 5, "x")], [1])})
    w.write_epoch(2, {T: _t([(1, 1, 5, "x")], [-1])})
    engine.advance(2)
    assert arrow_rows(engine.read(1, 1)) == [(1, 5, "x")]
    assert arrow_rows(engine.read(1, 2)) == [(0, None, None)]


def test_a_failing_view_stops_alone(tmp_path: Path) -> None:
    engine, w = _engine(tmp_path)
    _view(engine, 1, "SELECT id, 10 / b AS q FROM t")
    _view(engine, 2, "SELECT count(*) AS n FROM t")
    w.write_epoch(1, {T: _t([(1, 1, 5, "x")], [1])})
    engine.advance(1)
    w.write_epoch(2, {T: _t([(2, 1, 0, "x")], [1])})
    engine.advance(2)
    status = {s.view: s for s in engine.status()}
    assert status[1].status == "error" and "Division by zero" in (status[1].error or "")
    assert status[1].frontier == 1
    assert status[2].status == "running" and status[2].frontier == 2
    assert arrow_rows(engine.read(2, 2)) == [(2,)]


def test_view_over_view_and_drop(tmp_path: Path) -> None:
    engine, w = _engine(tmp_path)
    _view(engine, 1, "SELECT a, count(*) AS n FROM t GROUP BY a")
    plan = plan_of("SELECT n, count(*) AS groups FROM per_a GROUP BY n", _per_a())
    engine.create_view(2, plan, {900: engine.output_scan(1, 900)}, at_epoch=0)
    w.write_epoch(1, {T: _t([(1, 1, 0, None), (2, 1, 0, None), (3, 2, 0, None)], [1, 1, 1])})
    w.write_epoch(2, {T: _t([(3, 2, 0, None)], [-1])})
    engine.advance(2)
    assert sorted(arrow_rows(engine.read(2, 1))) == [(1, 1), (2, 1)]
    assert sorted(arrow_rows(engine.read(2, 2))) == [(2, 1)]
    engine.drop_view(2)
    assert 2 not in engine.views and [s.view for s in engine.status()] == [1]


def test_batches_run_the_same_statement_texts(tmp_path: Path) -> None:
    """A batch's epoch bounds are parameters of its statements: from the second
    one-epoch batch on, a view (and a view over it) parses no new statement text,
    and every epoch's state is still right."""
    engine, w = _engine(tmp_path, executor="duckdb")
    _view(engine, 1, "SELECT a, count(*) AS n FROM t GROUP BY a")
    plan = plan_of("SELECT n, count(*) AS groups FROM per_a GROUP BY n", _per_a())
    engine.create_view(2, plan, {900: engine.output_scan(1, 900)}, at_epoch=0)
    live: list[tuple] = []
    parsed: dict[int, set[str]] = {}
    for e in range(1, 7):
        row = (e, e % 2, 0, None)
        w.write_epoch(e, {T: _t([row], [1])})
        live.append(row)
        engine.advance(e)
        texts = {v: set(engine.views[v]._parsed) for v in (1, 2)}
        if e >= 3:  # (the first batches create the scratch tables)
            assert texts == parsed, f"epoch {e}: new statement texts"
        parsed = texts
        per_a: dict[int, int] = {}
        for r in live:
            per_a[r[1]] = per_a.get(r[1], 0) + 1
        assert sorted(arrow_rows(engine.read(1, e))) == sorted(per_a.items())
        groups: dict[int, int] = {}
        for n in per_a.values():
            groups[n] = groups.get(n, 0) + 1
        assert sorted(arrow_rows(engine.read(2, e))) == sorted(groups.items())


def test_independent_views_advance_at_once(tmp_path: Path, monkeypatch: Any) -> None:
    """Views that read no other view of the batch run on threads of their own, each in
    its own transaction on its own cursor; a view over a view runs after it (and reads
    the changes it committed in the same batch). Proven by a barrier that the batches
    of views 1 and 2 must reach together: one after the other, it would time out."""
    engine, w = _engine(tmp_path)
    engine.unit_threads = 4  # (whatever HW_ENGINE_UNIT_THREADS says)
    monkeypatch.setattr(engine_module, "PARALLEL_ROWS", 3)  # (this batch's 3 rows go wide)
    _view(engine, 1, "SELECT a, count(*) AS n FROM t GROUP BY a")
    _view(engine, 2, "SELECT max(b) AS m FROM t")
    plan = plan_of("SELECT sum(n) AS total FROM per_a", _per_a())
    engine.create_view(3, plan, {900: engine.output_scan(1, 900)}, at_epoch=0)
    assert len({id(engine.views[v].db) for v in (1, 2, 3)} | {id(engine._cur)}) == 4
    together = threading.Barrier(2, timeout=20)
    threads: dict[int, str] = {}
    advance = ViewProgram.advance

    def meet(prog: ViewProgram, *args: Any, **kw: Any) -> int:
        threads[int(prog.view)] = threading.current_thread().name
        if prog.view in (1, 2):
            together.wait()
        return advance(prog, *args, **kw)

    monkeypatch.setattr(ViewProgram, "advance", meet)
    w.write_epoch(1, {T: _t([(1, 1, 5, None), (2, 1, 7, None), (3, 2, 9, None)], [1, 1, 1])})
    engine.advance(1)
    assert [s.status for s in engine.status()] == ["running"] * 3
    assert threads[1] != threads[2] and threads[3] == threads[1]
    assert sorted(arrow_rows(engine.read(1, 1))) == [(1, 2), (2, 1)]
    assert arrow_rows(engine.read(2, 1)) == [(9,)]
    assert arrow_rows(engine.read(3, 1)) == [(3,)]
    # one thread: the same answers, one unit after the other (the barrier would break)
    monkeypatch.setattr(ViewProgram, "advance", advance)
    engine.unit_threads = 1
    w.write_epoch(2, {T: _t([(3, 2, 9, None)], [-1])})
    engine.advance(2)
    assert arrow_rows(engine.read(2, 2)) == [(7,)] and arrow_rows(engine.read(3, 2)) == [(2,)]

    # a batch smaller than PARALLEL_ROWS stays on the batch's thread, however many
    def where(prog: ViewProgram, *args: Any, **kw: Any) -> int:
        threads[int(prog.view)] = threading.current_thread().name
        return advance(prog, *args, **kw)

    monkeypatch.setattr(ViewProgram, "advance", where)
    monkeypatch.setattr(engine_module, "PARALLEL_ROWS", 2)
    engine.unit_threads = 4
    w.write_epoch(3, {T: _t([(4, 3, 1, None)], [1])})
    engine.advance(3)
    assert threads[1] == threads[2] == threading.current_thread().name
    assert sorted(arrow_rows(engine.read(1, 3))) == [(1, 2), (3, 1)]
    engine.close()


def test_units_at_once_weigh_their_state_on_their_own_cursors(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """With a memory limit and Spark up, `auto` weighs a unit's state for a batch of
    10,000 rows or more: units running at once each ask on their own cursor (a shared
    one refuses a second caller: "connection is busy")."""
    monkeypatch.setattr(stage, "spark_started", lambda: True)  # (it is not started)
    engine, w = _engine(tmp_path, memory_limit=8 << 30)
    engine.unit_threads = 4
    _view(engine, 1, "SELECT a, count(*) AS n FROM t GROUP BY a")
    _view(engine, 2, "SELECT max(b) AS m FROM t")
    _view(engine, 3, "SELECT s, sum(b) AS total FROM t GROUP BY s")
    n = STATE_CHECK_ROWS + 1
    w.write_epoch(1, {T: _t([(i, i % 7, i, str(i % 3)) for i in range(n)], [1] * n)})
    engine.advance(1)
    assert [(s.view, s.status, s.error) for s in engine.status()] == [
        (v, "running", None) for v in (1, 2, 3)
    ]
    assert arrow_rows(engine.read(2, 1)) == [(n - 1,)]
    engine.close()


def test_reads_through_an_attached_database(tmp_path: Path) -> None:
    replica = duckdb.connect(":memory:")
    engine, w = _engine(tmp_path, connection=replica)
    _view(engine, 1, "SELECT t.id, u.x FROM t JOIN u ON t.a = u.a")
    w.write_epoch(1, {T: _t([(1, 7, 0, None)], [1]), U: _u([(5, 7, 42)], [1])})
    engine.advance(1)
    rows = replica.execute(engine.read_sql(1, 1)).fetchall()
    assert rows == [(1, 42)]
    assert replica.execute(engine.read_sql(1, 0)).fetchall() == []


def test_restart_keeps_state_and_frontier(tmp_path: Path) -> None:
    engine, w = _engine(tmp_path)
    sql = "SELECT a, string_agg(s, ',' ORDER BY s) AS ss FROM t GROUP BY a"
    _view(engine, 1, sql)
    w.write_epoch(1, {T: _t([(1, 1, 0, "b"), (2, 1, 0, "a")], [1, 1])})
    engine.advance(1)
    engine.close()
    # the view is planned again from its SQL (no plan is stored)
    engine = Engine(tmp_path / "state", tmp_path / "spool", replan=replanner({1: sql}))
    assert engine.frontier(1) == 1
    engine.advance(1)  # a replayed batch is a no-op
    w.write_epoch(2, {T: _t([(3, 1, 0, "c")], [1])})
    engine.advance(2)
    assert arrow_rows(engine.read(1, 1)) == [(1, "a,b")]
    assert arrow_rows(engine.read(1, 2)) == [(1, "a,b,c")]


def test_restart_drops_views_without_a_definition_or_whose_plan_changed(tmp_path: Path) -> None:
    """Plans are not stored: at a restart a view whose definition is gone is dropped, and
    so is one whose definition now plans into other state tables (the caller backfills
    it again); a view of a family that keeps its plan goes on, its dropped fellow member
    and the plain view of its shape gone."""
    engine, w = _engine(tmp_path)
    sqls = {
        1: "SELECT a, count(*) AS n FROM t GROUP BY a",
        2: "SELECT a % 2 AS k, count(*) AS n FROM t GROUP BY 1",
        3: "SELECT a % 3 AS k, count(*) AS n FROM t GROUP BY 1",
        4: "SELECT id FROM t",
        5: "SELECT a % 5 AS k, count(*) AS n FROM t GROUP BY 1",
    }
    for vid, sql in sqls.items():
        _view(engine, vid, sql)
    # the first view of a shape stays plain; the second starts the family, the third joins
    assert 2 not in engine._member_of and engine._member_of[3] is engine._member_of[5]
    w.write_epoch(1, {T: _t([(1, 1, 0, "x"), (2, 2, 0, "y")], [1, 1])})
    engine.advance(1)
    engine.close()
    changed = {1: "SELECT a, sum(b) AS n, count(*) AS c FROM t GROUP BY a", 3: sqls[3], 4: sqls[4]}
    engine = Engine(tmp_path / "state", tmp_path / "spool")
    assert engine.restore(replanner(changed)) == [1, 2, 5]
    assert sorted(engine.views) == [3, 4] and [s.view for s in engine.status()] == [3, 4]
    tables = {r[0] for r in engine._cur.sql("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert not {"o1", "l1", "o2", "l2"} & tables
    w.write_epoch(2, {T: _t([(3, 1, 0, "z")], [1])})
    engine.advance(2)
    assert sorted(arrow_rows(engine.read(3, 2))) == [(1, 2), (2, 1)]
    assert sorted(arrow_rows(engine.read(4, 2))) == [(1,), (2,), (3,)]
    engine.close()


def test_spool_in_memory_spills_to_files_beyond_its_budget(tmp_path: Path) -> None:
    """The server's spool keeps epochs in memory (engine/spool.py) and writes files only
    beyond its budget: a view reads the same changes either way, epoch by epoch, and
    truncation forgets both."""
    one = _t([(1, 1, 5, "x")], [1]).nbytes
    w = SpoolWriter(tmp_path / "spool", memory_bytes=3 * one)  # 3 such epochs fit
    engine = Engine(tmp_path / "state", tmp_path / "spool")
    engine.spool_reader = w.reader()
    _view(engine, 1, "SELECT a, count(*) AS n, sum(b) AS s FROM t GROUP BY a")
    for e in range(1, 7):  # epochs 4-6 go to files
        w.write_epoch(e, {T: _t([(e, e % 2, e, "x")], [1])})
    files = sorted(p.name for p in (tmp_path / "spool").glob("*.arrows"))
    assert files == [f"{e:016x}.{T}.arrows" for e in (4, 5, 6)]
    w.write_epoch(7, {T: _t([(1, 1, 1, "x")], [-1])})  # memory is full: a file
    engine.advance(7)
    assert sorted(arrow_rows(engine.read(1, 3))) == [(0, 1, 2), (1, 2, 4)]
    assert sorted(arrow_rows(engine.read(1, 7))) == [(0, 3, 12), (1, 2, 8)]
    w.truncate(5)
    assert sorted(p.name for p in (tmp_path / "spool").glob("*.arrows")) == [
        f"{e:016x}.{T}.arrows" for e in (6, 7)
    ]
    w.truncate(7)
    assert not list((tmp_path / "spool").glob("*.arrows"))
    w.write_epoch(8, {T: _t([(2, 0, 2, "x")], [-1])})  # memory again, no file
    assert not list((tmp_path / "spool").glob("*.arrows"))
    engine.advance(8)
    assert sorted(arrow_rows(engine.read(1, 8))) == [(0, 2, 10), (1, 2, 8)]


def test_unique_rows_fold_without_reading_the_output(tmp_path: Path) -> None:
    """An aggregate's rows are unique by its group (planner/ir.py `unique_columns`): a
    one-epoch batch folds them into the output without joining its live versions, and
    closes a version by key (engine/rules/output.py). Groups appear, change, keep their
    value, leave and come back, with NULL keys and a HAVING; one-epoch and multi-epoch
    batches give the answer DuckDB computes from the rows at every epoch."""
    ctx = BatchContext(1, 0, 1, False, 1, lambda o, e: "")
    keyed = output(["a", "n"], "_c", ctx, frozenset({"a"}))
    assert "JOIN" not in keyed.ranked.select and "o1" not in keyed.ranked.select
    assert "o1.n" not in keyed.fold[1].sql  # closed by key
    assert "JOIN" in output(["a", "n"], "_c", ctx).ranked.select
    engine, w = _engine(tmp_path)
    sqls = {
        1: "SELECT a, count(*) AS n, sum(b) AS s FROM t GROUP BY a",
        2: "SELECT a, sum(b) AS s FROM t GROUP BY a HAVING sum(b) > 2",
        3: "SELECT count(*) AS n, sum(b) AS s FROM t",
        4: "SELECT DISTINCT a FROM t",
    }
    for vid, sql in sqls.items():
        _view(engine, vid, sql)
    epochs = [  # (rows, weights): id, a, b, s
        ([(1, 1, 1, "x"), (2, 1, 2, "x"), (3, None, 5, "x")], [1, 1, 1]),
        ([(4, 2, 3, "x")], [1]),
        ([(1, 1, 1, "x"), (5, 1, 1, "x")], [-1, 1]),  # group 1 keeps its count and sum
        ([(2, 1, 2, "x"), (5, 1, 1, "x"), (3, None, 5, "x")], [-1, -1, -1]),  # 1 and NULL go
        ([(6, 1, 7, "x"), (7, None, 0, "x")], [1, 1]),  # and come back
        ([(4, 2, 3, "x"), (8, 2, 1, "x")], [-1, 1]),
        ([(9, 3, 4, "x")], [1]),
        ([(9, 3, 4, "x"), (10, 3, 4, "x")], [-1, 1]),
    ]
    live: dict[tuple, int] = {}
    want: dict[int, dict[int, list[tuple]]] = {}
    db = duckdb.connect()
    for e, (rows, ws) in enumerate(epochs, 1):
        w.write_epoch(e, {T: _t(rows, ws)})
        for r, x in zip(rows, ws, strict=True):
            live[r] = live.get(r, 0) + x
        db.execute("CREATE OR REPLACE TABLE t (id INT, a INT, b INT, s VARCHAR)")
        for r, n in live.items():
            for _ in range(n):
                db.execute("INSERT INTO t VALUES (?, ?, ?, ?)", list(r))
        want[e] = {v: sorted(db.execute(sql).fetchall(), key=repr) for v, sql in sqls.items()}
        if e <= 4:
            engine.advance(e)  # one epoch per batch
    engine.advance(len(epochs))  # the rest in one batch
    for e in want:
        for v in sqls:
            assert sorted(arrow_rows(engine.read(v, e)), key=repr) == want[e][v], (e, v)
