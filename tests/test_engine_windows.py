"""Top-N, window functions and scalar subqueries (uncorrelated, and correlated by
equalities) in views, against PostgreSQL 15.

The machinery of tests/test_engine_diff.py (tables t and u under random INSERT/UPDATE/
DELETE, mirrored into PostgreSQL and the spool): every view below equals its query in
PostgreSQL at every epoch, through the Spark stage (batches of several epochs) and
through `advance` alone (backfill, then batches of 1-5 epochs). Orders are total
where the result depends on them (ties broken by `id`); where they are not, ties
leave the result set the same (rank() <= n keeps every tied row). HW_ENGINE_SEED=n
reruns a seed; HW_WINDOW_EPOCHS sets the number of epochs of the stage test.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from headwater.engine.engine import Engine

from tests.test_engine_support import (
    Workload,
    advance_at_random,
    assert_views_equal,
    catalog,
    normalize,
    plan_of,
    scans,
    views_through_server,
)

pytestmark = pytest.mark.oracle

QUERIES = [
    # top-N of a view: ORDER BY ... LIMIT [OFFSET]
    "SELECT id, a, b FROM t ORDER BY b DESC, id LIMIT {k3}",
    "SELECT id, a, b FROM t ORDER BY b DESC NULLS LAST, id LIMIT 4 OFFSET {k}",
    "SELECT a, sum(b) AS sb FROM t GROUP BY a ORDER BY sum(b) DESC NULLS LAST, a LIMIT 2",
    "SELECT a FROM t UNION SELECT a FROM u ORDER BY 1 DESC LIMIT 2",
    "SELECT DISTINCT a FROM t ORDER BY a LIMIT 3",
    "SELECT id, b FROM t ORDER BY b DESC NULLS LAST FETCH FIRST {k3} ROWS WITH TIES",
    "SELECT x.id, x.b FROM (SELECT id, b FROM t ORDER BY b, id LIMIT 5) x WHERE x.b > {k}",
    "SELECT t.id, u.x FROM t JOIN u ON t.a = u.a ORDER BY u.x, t.id, u.id LIMIT 5",
    # top-N per group
    "SELECT * FROM (SELECT id, a, b, row_number() OVER (PARTITION BY a ORDER BY b, id) AS rn"
    " FROM t) x WHERE rn <= {k3}",
    "SELECT id, a FROM (SELECT id, a, rank() OVER (PARTITION BY a ORDER BY b DESC) AS r"
    " FROM t) x WHERE r <= 2",
    "SELECT a, s FROM (SELECT a, s, dense_rank() OVER (PARTITION BY a ORDER BY s) AS r"
    " FROM t) x WHERE r <= 1",
    "SELECT a, n FROM (SELECT a, count(*) AS n, row_number() OVER (ORDER BY count(*) DESC, a)"
    " AS rn FROM t GROUP BY a) x WHERE rn <= 2",
    "SELECT * FROM (SELECT t.id, u.x, row_number() OVER (PARTITION BY t.a ORDER BY u.x DESC,"
    " t.id, u.id) AS rn FROM t JOIN u ON t.a = u.a) x WHERE rn <= 2",
    # window functions
    "SELECT id, a, b, rank() OVER w AS r, dense_rank() OVER w AS dr, percent_rank() OVER w"
    " AS pr, cume_dist() OVER w AS cd FROM t WINDOW w AS (PARTITION BY a ORDER BY b)",
    "SELECT id, ntile(3) OVER (ORDER BY id) AS nt, lag(b) OVER (PARTITION BY a ORDER BY id)"
    " AS lg, lead(b, 2, -1) OVER (PARTITION BY a ORDER BY id) AS ld FROM t",
    "SELECT id, first_value(b) OVER (PARTITION BY a ORDER BY id) AS fv, last_value(b) OVER"
    " (PARTITION BY a ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)"
    " AS lv, nth_value(b, 2) OVER (PARTITION BY a ORDER BY id) AS nv FROM t",
    "SELECT id, sum(b) OVER (PARTITION BY a ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1"
    " FOLLOWING) AS s3, avg(b) OVER (PARTITION BY a) AS ab, count(*) OVER (PARTITION BY a"
    " ORDER BY b) AS cr, min(b) OVER (ORDER BY id RANGE BETWEEN {k} PRECEDING AND CURRENT"
    " ROW) AS mn, max(s) OVER (PARTITION BY b) AS mx FROM t",
    "SELECT id, count(b) OVER () AS n, sum(b) OVER (ORDER BY id) AS running FROM t",
    "SELECT a, sum(b) AS sb, rank() OVER (ORDER BY sum(b) DESC NULLS LAST) AS r FROM t GROUP BY a",
    "SELECT DISTINCT a, max(b) OVER (PARTITION BY a) AS mb FROM t",
    # uncorrelated scalar subqueries
    "SELECT id, (SELECT max(x) FROM u) AS mx FROM t WHERE b > (SELECT avg(x) FROM u)",
    "SELECT a, count(*) AS n FROM t GROUP BY a HAVING count(*) > (SELECT count(*) FROM u) / 4",
    "SELECT id, (SELECT x FROM u WHERE u.id = {k3}) AS x3 FROM t",
    "SELECT (SELECT count(*) FROM t) AS nt, (SELECT sum(x) FROM u) AS sx",
    "SELECT id FROM t WHERE b = (SELECT max(b) FROM t)",
    "SELECT a, b - (SELECT min(x) FROM u WHERE x > {k}) AS d FROM t WHERE s IS NOT NULL",
    "WITH m (top) AS (SELECT max(x) FROM u) SELECT t.id FROM t, m WHERE t.b = m.top"
    " AND t.b > (SELECT min(top) FROM m)",
    # correlated scalar subqueries (by equalities): a grouped aggregate LEFT JOINed
    "SELECT id, b FROM t WHERE b > (SELECT avg(x) FROM u WHERE u.a = t.a)",
    "SELECT id, (SELECT count(*) FROM u WHERE u.a = t.a) AS n, (SELECT max(x) FROM u"
    " WHERE u.a = t.a AND u.x < {k3}) AS mx FROM t",
    "SELECT id FROM t WHERE b = (SELECT min(b) FROM t t2 WHERE t2.a = t.a)",
    "SELECT id, a FROM t WHERE a IN (SELECT u.a FROM u WHERE u.x > (SELECT avg(b) FROM t t3"
    " WHERE t3.a = u.a))",
    # correlated by other predicates: over the outer rows' distinct correlated values
    "SELECT id, (SELECT max(x) FROM u WHERE u.a < t.a) AS m FROM t",
    "SELECT id, b FROM t WHERE b > (SELECT count(*) FROM u WHERE u.x BETWEEN t.a AND t.b)",
    "SELECT id, (SELECT sum(x) FROM u WHERE u.a = t.a AND u.x > t.b) AS sx,"
    " (SELECT count(*) FROM u WHERE u.a IS DISTINCT FROM t.a) AS nd FROM t",
    "SELECT id FROM t WHERE b = (SELECT min(b) FROM t t2 WHERE t2.a <> t.a AND t2.s = t.s)",
    # LATERAL: an aggregate's row per outer row; other rows a join on the correlation
    "SELECT t.id, s.n, s.m FROM t, LATERAL (SELECT count(*) AS n, max(x) AS m FROM u"
    " WHERE u.a < t.a) s",
    "SELECT t.id, s.x FROM t, LATERAL (SELECT u.x FROM u WHERE u.a = t.a AND u.x > t.b) s",
    "SELECT t.id, s.x FROM t LEFT JOIN LATERAL (SELECT u.x FROM u WHERE u.a <= t.a"
    " AND u.x > {k}) s ON true",
    "SELECT t.id, s.id AS uid FROM t CROSS JOIN LATERAL (SELECT * FROM u"
    " WHERE u.x BETWEEN t.a AND t.b) s",
]


def views_of(rng: random.Random) -> list[str]:
    return [q.format(k=rng.randrange(4), k3=rng.randrange(1, 4)) for q in QUERIES]


@pytest.fixture
def pg(pg_oracle: object) -> Iterator[psycopg.Connection]:
    with psycopg.connect(pg_oracle.dsn) as c:  # type: ignore[attr-defined]
        yield c


def _seed() -> int:
    return int(os.environ.get("HW_ENGINE_SEED", random.randrange(1_000_000)))


def _expect(pg: psycopg.Connection, sqls: list[str]) -> list[list[tuple]]:
    out = []
    with pg.cursor() as cur:
        for sql in sqls:
            cur.execute(sql)
            out.append(normalize(cur.fetchall()))
    pg.commit()
    return out


def test_window_views_equal_postgres_at_every_epoch(
    spark: object, pg: psycopg.Connection, tmp_path: Path
) -> None:
    seed = _seed()
    rng = random.Random(seed)
    work = Workload(pg, tmp_path / "spool", seed)
    for _ in range(15):  # data the views start from (backfill)
        work.epoch()
    cat, sc = catalog(), scans()
    engine = Engine(tmp_path / "state", tmp_path / "spool", wait_ms=100)
    sqls = views_of(rng)
    for i, sql in enumerate(sqls):
        plan = plan_of(sql, cat)
        engine.create_view(
            50000 + i, plan, {o: sc[o] for o in plan.tables}, name=f"w{i}", at_epoch=work.epoch_no
        )
    expected = {work.epoch_no: _expect(pg, sqls)}
    engine.start()
    try:
        epochs = int(os.environ.get("HW_WINDOW_EPOCHS", "120"))
        for _ in range(epochs):
            e = work.epoch()
            expected[e] = _expect(pg, sqls)
            if rng.random() < 0.05:
                time.sleep(0.3)  # now and then let the stage catch up (single-epoch batches)
        # (30 views of 10-15 statements each: the stage falls behind while epochs come
        # every few ms, docs/engine.md figures (f), and catches up afterwards)
        caught_up = engine.wait_for(work.epoch_no, timeout=max(300, 3 * epochs))
        assert caught_up, f"seed {seed}: stage behind"
    finally:
        engine.stop()
    assert_views_equal(engine, expected, 50000, sqls, seed)


def test_window_views_backfill_and_batches(pg: psycopg.Connection, tmp_path: Path) -> None:
    """Views created over existing data, then advanced without Spark in batches of 1-5
    epochs; every epoch checked."""
    seed = _seed()
    rng = random.Random(seed)
    work = Workload(pg, tmp_path / "spool", seed)
    for _ in range(30):
        work.epoch()
    cat, sc = catalog(), scans()
    engine = Engine(tmp_path / "state", tmp_path / "spool")
    sqls = views_of(rng)
    for i, sql in enumerate(sqls):
        plan = plan_of(sql, cat)
        engine.create_view(60000 + i, plan, {o: sc[o] for o in plan.tables}, at_epoch=work.epoch_no)
    expected = {work.epoch_no: _expect(pg, sqls)}
    expected |= advance_at_random(engine, work, rng, 40, lambda _: _expect(pg, sqls))
    assert_views_equal(engine, expected, 60000, sqls, seed)


SERVER_VIEWS = {
    "cor_below": "SELECT id, (SELECT max(x) FROM cor_u WHERE cor_u.a < cor_t.a) AS m FROM cor_t",
    "cor_lateral": "SELECT cor_t.id, s.n FROM cor_t, LATERAL (SELECT count(*) AS n FROM cor_u"
    " WHERE cor_u.x BETWEEN cor_t.a AND cor_t.a + 2) s",
    "cor_rows": "SELECT cor_t.id, s.x FROM cor_t LEFT JOIN LATERAL (SELECT cor_u.x FROM cor_u"
    " WHERE cor_u.a <= cor_t.a) s ON true",
}


def test_correlated_through_the_server(conn: psycopg.Connection, pg_oracle: object) -> None:
    """Non-equality correlation and LATERAL through the server (CREATE, writes, reads),
    equal to PostgreSQL after each write."""
    writes = [
        "INSERT INTO cor_t VALUES (1, 1), (2, 3), (3, NULL)",
        "INSERT INTO cor_u VALUES (1, 0, 2), (2, 2, 5), (3, NULL, 1)",
        "UPDATE cor_u SET a = 4 WHERE id = 1",
        "DELETE FROM cor_t WHERE id = 2",
        "INSERT INTO cor_t VALUES (4, 5)",
    ]
    with psycopg.connect(pg_oracle.dsn, autocommit=True) as pg:  # type: ignore[attr-defined]
        ddls = ["CREATE TABLE cor_t (id int, a int)", "CREATE TABLE cor_u (id int, a int, x int)"]
        views_through_server(conn, pg, ddls, SERVER_VIEWS, writes)
