"""Helpers for the engine tests: a random workload mirrored into PostgreSQL and the spool.

`Workload` keeps tables t(id, a, b, s) and u(id, a, x) in three places at once: a
PostgreSQL 15 database (the oracle), a Python model (row id -> row) and the spool
the engine reads (one Arrow file per table per epoch, as the server writes them).
Each `epoch()` applies a random batch of INSERT/UPDATE/DELETE in one PostgreSQL
transaction and spools the same changes as Z-set rows.
"""

from __future__ import annotations

import decimal
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import headwater.engine.delta as delta
import pyarrow as pa
from headwater.catalog.catalog import Catalog
from headwater.catalog.objects import Column, Table, View
from headwater.catalog.types import INT4, TEXT, ColumnType
from headwater.engine.delta import ScanInfo
from headwater.engine.spool import SpoolWriter
from headwater.planner.ir import Plan, PlanBuilder
from pglast import parse_sql

T, U = 16400, 16401
delta.CHECKS = True  # the engine's consistency checks, on in every engine test


def _col(name: str, t: Any = INT4) -> Column:
    return Column(name, ColumnType(t, -1))


TABLES = {
    T: (
        "t",
        [
            ("id", INT4, "INTEGER"),
            ("a", INT4, "INTEGER"),
            ("b", INT4, "INTEGER"),
            ("s", TEXT, "VARCHAR"),
        ],
    ),
    U: ("u", [("id", INT4, "INTEGER"), ("a", INT4, "INTEGER"), ("x", INT4, "INTEGER")]),
}
ARROW = {"INTEGER": pa.int32(), "VARCHAR": pa.string()}


def catalog() -> Catalog:
    c = Catalog()
    for oid, (name, cols) in TABLES.items():
        c.add_relation(Table(oid, "public", name, tuple(_col(n, t) for n, t, _ in cols)))
    # an inline view, expanded into the materialized views that read it
    c.add_relation(
        View(
            16402,
            "public",
            "big_t",
            (_col("id"), _col("a"), _col("b")),
            "SELECT id, a, b FROM t WHERE b >= 3",
        )
    )
    return c


INLINE_VIEWS = {"big_t": "SELECT id, a, b FROM t WHERE b >= 3"}


def scans() -> dict[int, ScanInfo]:
    return {
        oid: ScanInfo(oid, [n for n, _, _ in cols], [d for _, _, d in cols])
        for oid, (_, cols) in TABLES.items()
    }


def plan_of(sql: str, cat: Catalog) -> Plan:
    return PlanBuilder(cat, ("public",)).build(parse_sql(sql)[0].stmt)


def replanner(views: dict[int, str]) -> Callable[[int], tuple[Plan, dict[int, ScanInfo]] | None]:
    """`Engine(replan=...)` when reopening a state: each view planned again from its SQL
    (as the server plans them from the catalog's definitions); None for others."""
    cat, sc = catalog(), scans()

    def replan(view: int) -> tuple[Plan, dict[int, ScanInfo]] | None:
        sql = views.get(view)
        if sql is None:
            return None
        plan = plan_of(sql, cat)
        return plan, {o: sc[o] for o in plan.tables}

    return replan


@dataclass
class Workload:
    pg: Any  # psycopg connection (autocommit off)
    spool: Path
    seed: int
    live: dict[int, dict[int, tuple]] = field(default_factory=lambda: {T: {}, U: {}})
    epoch_no: int = 0
    next_id: int = 1

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.writer = SpoolWriter(self.spool)
        with self.pg.cursor() as cur:
            cur.execute("DROP TABLE IF EXISTS t CASCADE")
            cur.execute("DROP TABLE IF EXISTS u CASCADE")
            cur.execute("CREATE TABLE t (id int PRIMARY KEY, a int, b int, s text)")
            cur.execute("CREATE TABLE u (id int PRIMARY KEY, a int, x int)")
            for name, sql in INLINE_VIEWS.items():
                cur.execute(f"CREATE VIEW {name} AS {sql}")
        self.pg.commit()

    def _row(self, oid: int, rid: int) -> tuple:
        r = self.rng
        if oid == T:
            return (
                rid,
                r.choice([None, 0, 1, 2, 3, 4]),
                r.choice([None, *range(8)]),
                r.choice([None, "a", "b", "c", "d"]),
            )
        return (rid, r.choice([None, 0, 1, 2, 3, 4]), r.choice([None, *range(6)]))

    def epoch(self, max_ops: int = 4) -> int:
        """One epoch of random changes, committed in PostgreSQL and spooled."""
        self.epoch_no += 1
        changes: dict[int, pa.Table] = {}
        with self.pg.cursor() as cur:
            for oid, (name, cols) in TABLES.items():
                rows: list[tuple] = []
                live = self.live[oid]
                for _ in range(self.rng.randrange(0, max_ops + 1)):
                    op = self.rng.random()
                    if op < 0.5 or len(live) < 3:
                        rid = self.next_id
                        self.next_id += 1
                        new = self._row(oid, rid)
                        live[rid] = new
                        rows.append((*new, 1))
                        marks = ", ".join(["%s"] * len(new))
                        cur.execute(f"INSERT INTO {name} VALUES ({marks})", new)
                    elif op < 0.8:
                        rid = self.rng.choice(list(live))
                        old, new = live[rid], self._row(oid, rid)
                        live[rid] = new
                        rows += [(*old, -1), (*new, 1)]
                        sets = ", ".join(f"{c} = %s" for c, _, _ in cols[1:])
                        cur.execute(f"UPDATE {name} SET {sets} WHERE id = %s", (*new[1:], rid))
                    else:
                        rid = self.rng.choice(list(live))
                        rows.append((*live.pop(rid), -1))
                        cur.execute(f"DELETE FROM {name} WHERE id = %s", (rid,))
                if rows:
                    data = list(zip(*rows, strict=True))
                    arrays = {c: pa.array(data[i], ARROW[d]) for i, (c, _, d) in enumerate(cols)}
                    arrays["_hw_w"] = pa.array(data[-1], pa.int32())
                    changes[oid] = pa.table(arrays)
        self.pg.commit()
        self.writer.write_epoch(self.epoch_no, changes)
        return self.epoch_no


def seeded_workload(pg: Any, spool: Path, epochs: int) -> tuple[int, random.Random, Workload]:
    """A Workload with `epochs` epochs applied, seeded from HW_ENGINE_SEED (to replay a
    failure) or at random; returns its seed and a Random of it for the test's draws."""
    seed = int(os.environ.get("HW_ENGINE_SEED", random.randrange(1_000_000)))
    work = Workload(pg, spool, seed)
    for _ in range(epochs):
        work.epoch()
    return seed, random.Random(seed), work


def normalize(rows: list[tuple]) -> list[tuple]:
    """Rows comparable across PostgreSQL and the engine (numeric types, float noise)."""

    def norm(v: Any) -> Any:
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return v
        if isinstance(v, int | float | decimal.Decimal):
            return round(float(v), 6)
        return v

    return sorted((tuple(norm(v) for v in r) for r in rows), key=repr)


def query_rows(pg: Any, sqls: list[str]) -> list[list[tuple]]:
    """Each query's rows in PostgreSQL now (normalized), in one transaction."""
    out = []
    with pg.cursor() as cur:
        for sql in sqls:
            cur.execute(sql)
            out.append(normalize(cur.fetchall()))
    pg.commit()
    return out


def arrow_rows(t: pa.Table) -> list[tuple]:
    cols = [c.to_pylist() for c in t.columns]
    return list(zip(*cols, strict=True)) if cols else []


Expected = dict[int, list[list[tuple]]]  # epoch -> each view's rows (normalized)


def advance_at_random(
    engine: Any, work: Any, rng: random.Random, epochs: int, expect: Callable[[int], Any]
) -> Expected:
    """Write `epochs` more epochs, noting after each what every view must be then
    (`expect(epoch)`); the engine advances after about 40% of them (batches of one to
    several epochs), and to the last one at the end."""
    expected: Expected = {}
    for _ in range(epochs):
        e = work.epoch()
        expected[e] = expect(e)
        if rng.random() < 0.4:
            engine.advance(e)
    engine.advance(work.epoch_no)
    return expected


SPARK_ALL, SPARK_NONE = 0, 1 << 62  # `auto`'s rows floor: every batch to Spark, none


def advance_alternating(
    engine: Any, work: Any, rng: random.Random, expect: Callable[[int], Any], monkeypatch: Any
) -> Expected:
    """Under `auto`, with the views' backfills on Spark (the caller set SPARK_ALL):
    a batch of 1-3 epochs on DuckDB (more until t and u both changed: every view has
    work), then one on Spark, each going on from the state the other left, noting what
    every view must be at each epoch; asserts that each view ran on both executors."""
    from headwater.engine import executors
    from headwater.engine.spool import table_file

    ran: dict[int, set[str]] = {}

    def record() -> None:
        for v, choice in engine.last_choice.items():
            ran.setdefault(v, set()).add(choice.executor)
        engine.last_choice.clear()

    expected: Expected = {}
    for floor in (SPARK_NONE, SPARK_ALL):
        record()
        monkeypatch.setattr(executors, "SPARK_MIN_ROWS_LOCAL", floor)
        first = work.epoch_no + 1
        for _ in range(rng.randrange(1, 4)):
            e = work.epoch()
            expected[e] = expect(e)
        while not all(
            any(table_file(work.spool, e, oid).exists() for e in range(first, work.epoch_no + 1))
            for oid in (T, U)
        ):
            e = work.epoch()
            expected[e] = expect(e)
        engine.advance(work.epoch_no)
    record()
    assert {v: ex for v, ex in ran.items() if ex != {"spark", "duckdb"}} == {}, ran
    return expected


def assert_views_equal(
    engine: Any, expected: Expected, first_oid: int, names: list[str], seed: int, shown: int = 5
) -> None:
    """No view failed, and view `first_oid + i` equals `expected` at every epoch there;
    closes the engine."""
    failed = {s.name: s.error for s in engine.status() if s.status != "running"}
    bad = []
    for e, per_view in expected.items():
        for i, exp in enumerate(per_view):
            got = normalize(arrow_rows(engine.read(first_oid + i, e)))
            if exp != got:
                bad.append((names[i], e, exp[:shown], got[:shown]))
    engine.close()
    assert not failed, f"seed {seed}: views failed: {failed}"
    assert not bad, f"seed {seed}: {len(bad)} mismatches, first: {bad[0]}"


def views_through_server(
    conn: Any, pg: Any, ddls: list[str], views: dict[str, str], writes: list[str]
) -> None:
    """Tables created in the server (`conn`) and PostgreSQL (`pg`, autocommit), views
    created in the server, then each write applied to both: every view equals its
    query in PostgreSQL after each write."""
    for ddl in ddls:  # CREATE TABLE name (...)
        pg.execute(f"DROP TABLE IF EXISTS {ddl.split()[2]} CASCADE")
        pg.execute(ddl)
        conn.execute(ddl)
    for name, sql in views.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
    for w in writes:
        conn.execute(w)
        pg.execute(w)
        for name, sql in views.items():
            got = normalize(conn.execute(f"SELECT * FROM {name}").fetchall())
            assert got == normalize(pg.execute(sql).fetchall()), (name, w)
