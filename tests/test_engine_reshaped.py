"""A batch over views of different frontiers when one table changed shape (ALTER TABLE).

The server rebuilds the views over an ALTERed table at the ALTER's epoch; the spool's
older epochs of that table hold rows of its old shape. A view over another table may
lag behind (the stage starting, a backfill running): the batch that advances both must
read each table's changes after the frontier of the views that scan it. Reading every
table from the lowest frontier of all views mixed both shapes of the ALTERed table, and
every batch failed from then on (pyarrow: "Schema at index 1 was different"), so every
view stopped. Seen under load in tests/test_alter.py on the shared server.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from headwater.catalog.catalog import Catalog
from headwater.catalog.objects import Column, Table
from headwater.catalog.types import INT4, ColumnType
from headwater.engine.delta import ScanInfo
from headwater.engine.engine import Engine
from headwater.engine.spool import SpoolWriter
from headwater.planner.ir import PlanBuilder
from pglast import parse_sql

T1, T2 = 16400, 16401


def _catalog(t2_columns: list[str]) -> Catalog:
    c = Catalog()
    for oid, name, cols in ((T1, "t1", ["k", "v"]), (T2, "t2", t2_columns)):
        c.add_relation(
            Table(oid, "public", name, tuple(Column(n, ColumnType(INT4, -1)) for n in cols))
        )
    return c


def _changes(cols: list[str], rows: list[tuple[int, ...]], weight: int = 1) -> pa.Table:
    data = {c: pa.array([r[i] for r in rows], pa.int32()) for i, c in enumerate(cols)}
    data["_hw_w"] = pa.array([weight] * len(rows), pa.int64())
    return pa.table(data)


def _view(engine: Engine, oid: int, sql: str, cat: Catalog, at: int) -> None:
    plan = PlanBuilder(cat, ("public",)).build(parse_sql(sql)[0].stmt)
    scans = {
        o: ScanInfo(o, [c.name for c in rel.columns], ["INTEGER"] * len(rel.columns))
        for o in plan.tables
        if isinstance(rel := cat.by_oid(o), Table)
    }
    engine.create_view(oid, plan, scans, at_epoch=at)


def test_a_lagging_view_does_not_make_a_batch_read_a_reshaped_tables_old_epochs(
    tmp_path: Path,
) -> None:
    old, new = ["k", "v"], ["k", "v", "w"]
    rows = {T1: [(1, 10)], T2: [(1, 5)]}
    spool = SpoolWriter(tmp_path / "spool")
    engine = Engine(
        tmp_path / "state",
        tmp_path / "spool",
        snapshot=lambda oid, epoch: _changes(new if epoch >= 3 and oid == T2 else old, rows[oid]),
        executor="duckdb",
    )
    try:
        cat = _catalog(old)
        _view(engine, 70001, "SELECT k, sum(v) AS s FROM t1 GROUP BY k", cat, 1)
        _view(engine, 70002, "SELECT k, sum(v) AS s FROM t2 GROUP BY k", cat, 1)
        # epoch 2: both tables written in the old shape; no batch runs (the views lag)
        spool.write_epoch(2, {T1: _changes(old, [(2, 20)]), T2: _changes(old, [(2, 7)])})
        rows[T1].append((2, 20))
        rows[T2].append((2, 7))
        # epoch 3: ALTER TABLE t2 ADD COLUMN w: its view is rebuilt at 3 over the new shape
        engine.drop_view(70002)
        rows[T2] = [(k, v, 0) for k, v in rows[T2]]
        _view(engine, 70002, "SELECT k, sum(v) AS s FROM t2 GROUP BY k", _catalog(new), 3)
        # epoch 4: both written; the batch advances the lagging t1 view from 1, the t2
        # view from 3
        spool.write_epoch(4, {T1: _changes(old, [(1, 1)]), T2: _changes(new, [(1, 1, 9)])})
        engine.advance(4)
        failed = [(s.view, s.error) for s in engine.status() if s.status != "running"]
        assert not failed, failed
        got = {
            v: sorted(tuple(r.values()) for r in engine.read(v).to_pylist()) for v in (70001, 70002)
        }
        assert got == {70001: [(1, 11), (2, 20)], 70002: [(1, 6), (2, 7)]}, got
        assert engine.frontier(70001) == engine.frontier(70002) == 4
    finally:
        engine.close()
        spool.close()
