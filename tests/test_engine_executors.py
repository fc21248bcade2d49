"""Both executors against PostgreSQL 15 (issue 13): `spark`, `duckdb`, and `auto` with
the executor changing between batches; every view equals PostgreSQL at every epoch.

The workload and oracle are test_engine_diff's (tests/test_engine_support.Workload):
random INSERT/UPDATE/DELETE epochs mirrored into PostgreSQL and the spool. Under
`auto`, the rows threshold is lowered so that big epochs (up to 40 changes a table)
go to Spark and small ones to DuckDB: the state Spark wrote as Parquet is what DuckDB
goes on from, and the other way round. One SparkSession (one JVM) for the module.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from headwater.engine import executors
from headwater.engine.engine import Engine
from headwater.engine.stage import spark_session

from tests.test_engine_support import Workload, arrow_rows, catalog, normalize, plan_of, scans

pytestmark = pytest.mark.oracle

# view shapes of test_engine_diff, one per kind of rule
QUERIES = [
    "SELECT id, a, b * 2 + 1 AS bb, CASE WHEN s IS NULL THEN 'none' ELSE upper(s) END AS ss"
    " FROM t WHERE b > 1 OR a IS NULL",
    "SELECT a, count(*) AS n, count(b) AS nb, sum(b) AS sb FROM t GROUP BY a",
    "SELECT count(*) AS n, sum(b) AS sb, min(s) AS lo, max(b) AS hi FROM t",
    "SELECT a, min(b) AS lo, max(s) AS hi, count(DISTINCT b) AS nd FROM t GROUP BY a",
    "SELECT t.id, t.b, u.x FROM t JOIN u ON t.a = u.a",
    "SELECT t.id, t.a, u.x FROM t LEFT JOIN u ON t.a = u.a AND u.x > 2",
    "SELECT u.a, count(*) AS n, sum(t.b) AS sb FROM t JOIN u ON t.a = u.a GROUP BY u.a",
    "SELECT DISTINCT a, s FROM t",
    "SELECT a FROM t EXCEPT ALL SELECT a FROM u",
    "SELECT id, a FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.a = t.a AND u.x < t.b)",
]
# Spark's cost is seconds per view and batch (minutes at this machine's usual load
# average of 20-50): a subset there (tests/test_matviews_spark.py covers more shapes)
ON_SPARK = [1, 4]  # aggregate, join
BATCHES = 4  # after the backfill; each of 1-3 epochs (2 on Spark)


@pytest.fixture(scope="module")
def spark() -> object:
    return spark_session("local[2]")


@pytest.fixture
def pg(pg_oracle: object) -> Iterator[psycopg.Connection]:
    with psycopg.connect(pg_oracle.dsn) as c:  # type: ignore[attr-defined]
        yield c


@pytest.mark.parametrize("mode", ["spark", "auto", "duckdb"])
def test_executors_equal_postgres_at_every_epoch(
    spark: object,
    pg: psycopg.Connection,
    tmp_path: Path,
    mode: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seed = {"spark": 1, "auto": 2, "duckdb": 3}[mode]
    rng = random.Random(seed)
    # under auto, a batch of 30+ changed rows goes to Spark (one machine: local master)
    monkeypatch.setattr(executors, "SPARK_MIN_ROWS_LOCAL", 30)
    work = Workload(pg, tmp_path / "spool", seed)
    for _ in range(10):
        work.epoch(max_ops=6)
    engine = Engine(tmp_path / "state", tmp_path / "spool", executor=mode)
    cat, sc = catalog(), scans()
    expected: dict[int, dict[int, list[tuple]]] = {}

    def snapshot_pg(epoch: int) -> None:
        with pg.cursor() as cur:
            for i, sql in queries.items():
                cur.execute(sql)
                expected.setdefault(50000 + i, {})[epoch] = normalize(cur.fetchall())
        pg.commit()

    queries = dict(enumerate(QUERIES))
    if mode != "duckdb":
        queries = {i: queries[i] for i in ON_SPARK}
    for i, sql in queries.items():
        plan = plan_of(sql, cat)
        engine.create_view(50000 + i, plan, {o: sc[o] for o in plan.tables}, at_epoch=1)
    snapshot_pg(work.epoch_no)  # (backfilled at epoch 1 from the spool, then advanced)
    engine.advance(work.epoch_no)
    used: dict[str, int] = {}
    for choice in engine.last_choice.values():
        used[choice.executor] = used.get(choice.executor, 0) + 1
    for _ in range(BATCHES if mode == "duckdb" else 2):
        for _ in range(rng.randrange(1, 4)):
            snapshot_pg(work.epoch(max_ops=rng.choice([1, 2, 30])))
        engine.advance(work.epoch_no)
        for choice in engine.last_choice.values():
            used[choice.executor] = used.get(choice.executor, 0) + 1
    failed = {s.name: s.error for s in engine.status() if s.status != "running"}
    assert not failed, f"views failed: {failed}"
    bad = []
    for vid, per_epoch in expected.items():
        for epoch, rows in per_epoch.items():
            got = normalize(arrow_rows(engine.read(vid, epoch)))
            if got != rows:
                bad.append((QUERIES[vid - 50000], epoch, rows[:5], got[:5]))
    tasks = sum(engine.spark.tasks.values())
    engine.close()
    assert not bad, f"{len(bad)} mismatches, first: {bad[0]}"
    if mode == "duckdb":
        assert set(used) == {"duckdb"} and tasks == 0
    elif mode == "spark":
        assert set(used) == {"spark"} and tasks > 0
    else:
        assert set(used) == {"spark", "duckdb"}, used
