"""Differential tests of the maintenance engine against PostgreSQL 15.

Random tables, the view queries in the engine's scope, random INSERT/UPDATE/DELETE
batches over 200+ epochs; after every epoch each view's state at that epoch equals
its query run in PostgreSQL on the same data. The Spark stage runs while epochs are
written, so micro-batches cover several epochs (per-epoch exactness is what is
checked). The seed is printed on failure; HW_ENGINE_SEED=n reruns one.

test_executors_equal_postgres_at_every_epoch runs the same view shapes through each
executor of issue 13 (engine/executors.py): `spark` (every backfill and batch as Spark
SQL jobs over the Parquet state), `duckdb`, and `auto` with the executor alternating
(the views' backfills alternate, then every other batch goes to Spark: the state one
executor left is what the other goes on from). Batches of 1-3 epochs, advanced by
hand; every view equals PostgreSQL at every epoch. Spark costs seconds per view and
batch (~30 s at load average 20 here: the 27 views' backfills alone took 14 min), so
by default `spark` and `auto` run one view per kind of rule not covered by
tests/test_engine_executors.py (EXEC_SHAPES, and the view over a view), `spark` one
batch after the backfill, `auto` two (DuckDB, then Spark); HW_ENGINE_EXEC_ALL=1 runs
every shape, HW_ENGINE_EXEC_BATCHES=n n (2n under auto) batches.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest
from headwater.catalog.objects import Table
from headwater.engine import executors
from headwater.engine import spool as sp
from headwater.engine.engine import Engine

from tests.test_engine_support import (
    T,
    U,
    Workload,
    arrow_rows,
    catalog,
    normalize,
    plan_of,
    scans,
)

pytestmark = pytest.mark.oracle

# The scope of issue 3, as view templates ({k}: a random small constant).
QUERIES = [
    "SELECT id, a, b * 2 + {k} AS bb, CASE WHEN s IS NULL THEN 'none' ELSE upper(s) END AS ss"
    " FROM t WHERE b > {k} OR a IS NULL",
    "SELECT a, count(*) AS n, count(b) AS nb, sum(b) AS sb, avg(b) AS ab FROM t GROUP BY a",
    "SELECT a % 2 AS p, sum(b) AS sb FROM t WHERE s <> 'a' GROUP BY a % 2 HAVING count(*) > 1",
    "SELECT count(*) AS n, sum(b) AS sb, avg(b) AS ab, min(s) AS lo, max(b) AS hi FROM t",
    "SELECT sum(x) AS sx, count(x) AS cx FROM u WHERE x > 100",
    "SELECT a, min(b) AS lo, max(s) AS hi, count(DISTINCT b) AS nd, bool_and(b > {k}) AS ba,"
    " bool_or(s = 'a') AS bo, string_agg(s, ',' ORDER BY s) AS ss FROM t GROUP BY a",
    "SELECT t.id, t.b, u.x FROM t JOIN u ON t.a = u.a",
    "SELECT t.id, u.id AS uid, t.b + u.x AS bx FROM t, u WHERE t.a = u.a AND t.b > u.x",
    "SELECT t.id, t.a, u.x FROM t LEFT JOIN u ON t.a = u.a AND u.x > {k}",
    "SELECT t.id, u.id AS uid FROM t RIGHT JOIN u ON t.a = u.a",
    "SELECT t.id, u.id AS uid, t.b, u.x FROM t FULL JOIN u ON t.a = u.a AND t.b < u.x",
    "SELECT u.a, count(*) AS n, sum(t.b) AS sb FROM t JOIN u ON t.a = u.a GROUP BY u.a",
    "SELECT t1.id, t2.id AS id2, u.x FROM t t1 JOIN t t2 ON t1.a = t2.a AND t1.id < t2.id"
    " JOIN u ON u.a = t2.a WHERE u.x >= {k}",
    "SELECT DISTINCT a, s FROM t",
    "SELECT a FROM t UNION SELECT a FROM u",
    "SELECT a, b FROM t UNION ALL SELECT a, x FROM u",
    "SELECT a FROM t INTERSECT SELECT a FROM u",
    "SELECT a FROM t INTERSECT ALL SELECT a FROM u",
    "SELECT a FROM t EXCEPT SELECT a FROM u",
    "SELECT a FROM t EXCEPT ALL SELECT a FROM u",
    "SELECT id, a FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.a = t.a AND u.x > {k})",
    "SELECT id, a FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.a = t.a AND u.x < t.b)",
    "SELECT id, b FROM t WHERE a IN (SELECT a FROM u WHERE x > {k})",
    "SELECT id, b FROM t WHERE a NOT IN (SELECT a FROM u WHERE x > {k})",
    "SELECT a, count(*) AS n FROM big_t GROUP BY a",
    "SELECT 1 AS one, 'x' AS two",
]
# Shapes of issue 14 (collection aggregates, recursion, windows, top-N, subqueries,
# grouping sets): here only, not in QUERIES, which tests/test_engine_families.py (they
# have no family form) and tests/test_matviews_diff.py also draw from
MORE_QUERIES = [
    "SELECT a, array_agg(b ORDER BY b DESC, id) AS bs, mode() WITHIN GROUP (ORDER BY b) AS m,"
    " count(DISTINCT (b, s)) AS nd FROM t WHERE id % 3 <> {k} GROUP BY a",
    "WITH RECURSIVE r(src, dst) AS (SELECT a, x FROM u WHERE x > {k} UNION"
    " SELECT r.src, u.x FROM r JOIN u ON r.dst = u.a)"
    " SELECT src, count(*) AS n FROM r GROUP BY src",
    "SELECT id, (SELECT count(*) FROM u WHERE u.x < t.b) AS n FROM t",
    # issue 14's shapes: windows, top-N (whole and per group), an uncorrelated scalar
    # subquery, grouping sets
    "SELECT id, a, b, row_number() OVER (PARTITION BY a ORDER BY b, id) AS rn, sum(b)"
    " OVER (PARTITION BY a ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS s2 FROM t",
    "SELECT id, b FROM t ORDER BY b DESC NULLS LAST, id LIMIT 3",
    "SELECT id, a, b FROM (SELECT id, a, b, rank() OVER (PARTITION BY a ORDER BY b DESC) AS r"
    " FROM t) q WHERE r <= 2",
    "SELECT id, b FROM t WHERE b > (SELECT avg(x) FROM u WHERE x > {k})",
    "SELECT a, s, count(*) AS n, sum(b) AS sb, grouping(a, s) AS g FROM t GROUP BY ROLLUP (a, s)",
]
ALL_QUERIES = QUERIES + MORE_QUERIES


@pytest.fixture
def pg(pg_oracle: object) -> Iterator[psycopg.Connection]:
    with psycopg.connect(pg_oracle.dsn) as c:  # type: ignore[attr-defined]
        yield c


def _seed() -> int:
    return int(os.environ.get("HW_ENGINE_SEED", random.randrange(1_000_000)))


def test_views_equal_postgres_at_every_epoch(
    spark: object, pg: psycopg.Connection, tmp_path: Path
) -> None:
    seed = _seed()
    rng = random.Random(seed)
    work = Workload(pg, tmp_path / "spool", seed)
    for _ in range(15):  # data the views start from (backfill)
        work.epoch()
    engine = Engine(tmp_path / "state", tmp_path / "spool", wait_ms=100)
    views = _create_views(engine, pg, rng, work.epoch_no)

    oracle = Oracle(pg, views)
    oracle.snapshot(work.epoch_no)
    engine.start()
    try:
        for _ in range(200):
            oracle.snapshot(work.epoch())
            if rng.random() < 0.05:
                time.sleep(0.3)  # now and then let the stage catch up (single-epoch batches)
        assert engine.wait_for(work.epoch_no, timeout=240), f"seed {seed}: stage did not catch up"
    finally:
        engine.stop()
    bad = oracle.mismatches(engine, seed)
    engine.close()
    assert not bad, f"seed {seed}: {len(bad)} mismatches, first: {bad[0]}"


@dataclass
class Oracle:
    """Each view's rows in PostgreSQL at each epoch, compared with the engine's."""

    pg: psycopg.Connection
    views: dict[int, str]  # view id -> its query
    rows: dict[int, dict[int, list[tuple]]] = field(default_factory=dict)

    def snapshot(self, epoch: int) -> None:
        with self.pg.cursor() as cur:
            for vid, sql in self.views.items():
                cur.execute(sql)
                self.rows.setdefault(vid, {})[epoch] = normalize(cur.fetchall())
        self.pg.commit()

    def mismatches(self, engine: Engine, seed: int) -> list[tuple]:
        """(query, epoch, PostgreSQL's rows, the view's) wherever they differ."""
        failed = {s.name: s.error for s in engine.status() if s.status != "running"}
        assert not failed, f"seed {seed}: views failed: {failed}"
        bad = []
        for vid, per_epoch in self.rows.items():
            for epoch, rows in per_epoch.items():
                got = normalize(arrow_rows(engine.read(vid, epoch)))
                if got != rows:
                    bad.append((self.views[vid], epoch, rows[:5], got[:5]))
        return bad


def _create_views(
    engine: Engine,
    pg: psycopg.Connection,
    rng: random.Random,
    epoch: int,
    before: Callable[[int], None] = lambda i: None,
    shapes: list[int] | None = None,
) -> dict[int, str]:
    """Every view shape of ALL_QUERIES (or those of `shapes`, with QUERIES[1]), and a view
    over a view, backfilled at `epoch` (`before(i)` is called before the i-th);
    returns view id -> its query."""
    cat = catalog()
    sc = scans()
    views: dict[int, str] = {}
    for i, template in enumerate(ALL_QUERIES):
        sql = template.format(k=rng.randrange(4))
        if shapes is not None and i not in shapes:
            continue
        plan = plan_of(sql, cat)
        vid = 30000 + i
        before(i)
        engine.create_view(vid, plan, {o: sc[o] for o in plan.tables}, name=f"v{i}", at_epoch=epoch)
        views[vid] = sql
    # a materialized view over a materialized view
    cat.add_relation(Table(30100, "public", "mv_agg", tuple(_c for _c in _agg_columns())))
    upstream = 30000 + 1  # "SELECT a, count(*) AS n, ... FROM t GROUP BY a"
    top_sql = "SELECT n, count(*) AS groups, sum(sb) AS total FROM mv_agg GROUP BY n"
    plan = plan_of(top_sql, cat)
    up = engine.output_scan(upstream, 30100)
    before(len(ALL_QUERIES))
    engine.create_view(30099, plan, {30100: up}, name="top", at_epoch=epoch)
    with pg.cursor() as cur:
        cur.execute(f"CREATE VIEW mv_agg AS {views[upstream]}")
    pg.commit()
    views[30099] = top_sql
    return views


EXEC_BATCHES = int(os.environ.get("HW_ENGINE_EXEC_BATCHES", "1"))
# QUERIES' shapes run through `spark` and `auto` by default: the general aggregate,
# a FULL JOIN, a three-way self-join, UNION, INTERSECT ALL, IN and NOT IN (and the view
# over a view, over QUERIES[1]); test_engine_executors has a linear aggregate and a join
EXEC_SHAPES = [1, 5, 10, 12, 14, 17, 22, 23]
EXEC_ALL = os.environ.get("HW_ENGINE_EXEC_ALL") == "1"
ALL_ROWS, NO_ROWS = 0, 1 << 62  # `auto`'s rows floor: every batch to Spark, none


@pytest.mark.parametrize("mode", ["spark", "auto", "duckdb"])
def test_executors_equal_postgres_at_every_epoch(
    request: pytest.FixtureRequest,
    pg: psycopg.Connection,
    tmp_path: Path,
    mode: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if mode != "duckdb":
        request.getfixturevalue("spark")  # the process's SparkSession (one JVM)
    seed = _seed()
    rng = random.Random(seed)
    work = Workload(pg, tmp_path / "spool", seed)
    for _ in range(10):  # data the views start from (backfill)
        work.epoch()
    engine = Engine(tmp_path / "state", tmp_path / "spool", executor=mode)

    def alternate(i: int) -> None:  # under auto: even batches (and backfills) on Spark
        floor = ALL_ROWS if i % 2 == 0 else NO_ROWS
        monkeypatch.setattr(executors, "SPARK_MIN_ROWS_LOCAL", floor)

    ran: dict[int, set[str]] = {}  # view -> executors that ran its batches
    reasons: set[str] = set()

    def record() -> None:
        for v, choice in engine.last_choice.items():
            ran.setdefault(v, set()).add(choice.executor)
            reasons.add(choice.reason)
        engine.last_choice.clear()

    t0 = time.monotonic()
    # (MORE_QUERIES: not here; the collection aggregates and recursion under both
    # executors: tests/test_engine_grouping.py, tests/test_engine_recursive.py)
    every = list(range(len(QUERIES)))
    shapes = None if mode == "duckdb" else every if EXEC_ALL else EXEC_SHAPES
    views = _create_views(engine, pg, rng, work.epoch_no, alternate, shapes)
    record()
    oracle = Oracle(pg, views)
    oracle.snapshot(work.epoch_no)
    batches = EXEC_BATCHES * (2 if mode == "auto" else 1)
    for b in range(batches):
        alternate(b + 1)  # the backfill of view 0 was on Spark: the first batch on DuckDB
        first = work.epoch_no + 1
        for _ in range(rng.randrange(1, 4)):
            oracle.snapshot(work.epoch())
        while not all(  # both tables change in the batch: every view has work
            any(sp.table_file(work.spool, e, oid).exists() for e in range(first, work.epoch_no + 1))
            for oid in (T, U)
        ):
            oracle.snapshot(work.epoch())
        engine.advance(work.epoch_no)
        record()
    bad = oracle.mismatches(engine, seed)
    tasks = sum(engine.spark.tasks.values())
    engine.close()
    print(
        f"\n{mode}: {len(views)} views, {batches} batches, {len(oracle.rows[30099])} epochs"
        f" checked, {tasks} Spark tasks, {time.monotonic() - t0:.0f}s; reasons: {sorted(reasons)}"
    )
    assert not bad, f"seed {seed}: {len(bad)} mismatches, first: {bad[0]}"
    used = set().union(*ran.values())
    if mode == "duckdb":
        assert used == {"duckdb"} and tasks == 0
    elif mode == "spark":
        assert used == {"spark"} and tasks > 0, sorted(reasons)
    else:  # every view ran on both (a view whose inputs never changed: its backfill only)
        assert used == {"spark", "duckdb"} and tasks > 0
        once = {views[v] for v, ex in ran.items() if len(ex) < 2}
        assert once <= {"SELECT 1 AS one, 'x' AS two"}, once  # (no input: never changes)


def _agg_columns() -> list:
    from headwater.catalog.objects import Column
    from headwater.catalog.types import FLOAT8, INT4, INT8, NUMERIC, ColumnType

    return [
        Column("a", ColumnType(INT4, -1)),
        Column("n", ColumnType(INT8, -1)),
        Column("nb", ColumnType(INT8, -1)),
        Column("sb", ColumnType(NUMERIC, -1)),
        Column("ab", ColumnType(FLOAT8, -1)),
    ]


def test_backfill_equals_postgres(pg: psycopg.Connection, tmp_path: Path) -> None:
    """Views created over existing data start from it (no Spark needed: advance())."""
    seed = _seed()
    work = Workload(pg, tmp_path / "spool", seed)
    for _ in range(30):
        work.epoch()
    cat = catalog()
    engine = Engine(tmp_path / "state", tmp_path / "spool")
    sc = scans()
    bad = []
    with pg.cursor() as cur:
        for i, template in enumerate(ALL_QUERIES):
            sql = template.format(k=1)
            plan = plan_of(sql, cat)
            engine.create_view(
                40000 + i, plan, {o: sc[o] for o in plan.tables}, at_epoch=work.epoch_no
            )
            cur.execute(sql)
            exp = normalize(cur.fetchall())
            got = normalize(arrow_rows(engine.read(40000 + i)))
            if exp != got:
                bad.append((sql, exp[:5], got[:5]))
    pg.commit()
    # then without Spark, in batches of 1-5 epochs, every epoch checked
    rng = random.Random(seed)
    expected: dict[int, list[list[tuple]]] = {}
    for _ in range(60):
        e = work.epoch()
        with pg.cursor() as cur:
            for template in ALL_QUERIES:
                cur.execute(template.format(k=1))
                expected.setdefault(e, []).append(normalize(cur.fetchall()))
        pg.commit()
        if rng.random() < 0.4:
            engine.advance(e)
    engine.advance(work.epoch_no)
    for e, per_view in expected.items():
        for i, exp in enumerate(per_view):
            got = normalize(arrow_rows(engine.read(40000 + i, e)))
            if exp != got:
                bad.append((ALL_QUERIES[i], e, exp[:5], got[:5]))
    engine.close()
    assert not bad, f"seed {seed}: {len(bad)} mismatches, first: {bad[0]}"
