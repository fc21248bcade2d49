"""LATERAL subqueries with GROUP BY, HAVING, DISTINCT [ON], ORDER BY ... LIMIT, window
functions and aggregates without GROUP BY, decorrelated on their equalities (planner/ir.py
`lateral_grouped`), against PostgreSQL 15 at every epoch.

The workload of tests/test_engine_support.py (t and u under random INSERT/UPDATE/DELETE;
t.a and u.a take few values and NULL, so that many outer rows share a correlation key and
some have none): views created before the data and over loaded data, advanced in
batches of 1-5 epochs, every epoch checked. Orders are total where the rows kept depend
on them. HW_ENGINE_SEED=n reruns a seed.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from headwater.engine.engine import Engine

from headwater.errors import SQLError
from tests.test_engine_support import (
    advance_at_random,
    assert_views_equal,
    catalog,
    plan_of,
    query_rows,
    scans,
    seeded_workload,
    views_through_server,
)

pytestmark = pytest.mark.oracle

QUERIES = [
    # top-N per outer row
    "SELECT t.id, s.x, s.uid FROM t, LATERAL (SELECT u.x, u.id AS uid FROM u WHERE u.a = t.a"
    " ORDER BY u.x DESC, u.id LIMIT 2) s",
    "SELECT t.id, s.x FROM t LEFT JOIN LATERAL (SELECT u.x FROM u WHERE u.a = t.a"
    " ORDER BY u.x LIMIT 1 OFFSET 1) s ON true",
    "SELECT t.id, s.uid FROM t CROSS JOIN LATERAL (SELECT u.id AS uid FROM u WHERE t.b - 1 = u.x"
    " AND u.a = t.a ORDER BY u.id DESC LIMIT 1) s",
    "SELECT t.id, s.x FROM t, LATERAL (SELECT x FROM u WHERE u.a = t.a ORDER BY x NULLS FIRST"
    " FETCH FIRST 1 ROWS WITH TIES) s",
    "SELECT s.x, count(*) AS n FROM t, LATERAL (SELECT u.x FROM u WHERE u.a = t.a"
    " ORDER BY u.x DESC NULLS LAST LIMIT 1) s GROUP BY s.x",
    # aggregates without GROUP BY: one row per outer row (count 0, sum NULL on no rows)
    "SELECT t.id, s.n, s.sx FROM t, LATERAL (SELECT count(*) AS n, sum(x) AS sx FROM u"
    " WHERE u.a = t.a) s",
    "SELECT t.id, s.* FROM t, LATERAL (SELECT count(*) AS n, sum(x) AS sx, 7 AS seven,"
    " coalesce(max(x), -1) + count(DISTINCT x) AS v FROM u WHERE u.a = t.a AND u.x > 0) s",
    "SELECT t.id, s.n FROM t, LATERAL (SELECT count(*) AS n FROM u WHERE u.a = t.a"
    " HAVING count(*) < 2) s",
    "SELECT t.id, s.m, s.n FROM t LEFT JOIN LATERAL (SELECT max(x) AS m, count(*) AS n FROM u"
    " WHERE u.a = t.a HAVING count(*) > 1) s ON true",
    "SELECT t.id, s.sx FROM t, LATERAL (SELECT sum(x) AS sx FROM u WHERE u.a = t.a"
    " ORDER BY 1 LIMIT 1) s",
    "SELECT t.id, s.* FROM t, LATERAL (SELECT count(*) AS n, row_number() OVER () AS r,"
    " 1 AS one FROM u WHERE u.a = t.a HAVING sum(x) IS NOT NULL OR count(*) = 0) s",
    "SELECT t.id, s.sx FROM t LEFT JOIN LATERAL (SELECT sum(x) AS sx FROM u WHERE u.a = t.a"
    " OFFSET 1) s ON true",
    # GROUP BY and DISTINCT inside
    "SELECT t.id, s.x, s.n FROM t, LATERAL (SELECT u.x, count(*) AS n FROM u WHERE u.a = t.a"
    " GROUP BY u.x) s",
    "SELECT t.id, s.x, s.c FROM t, LATERAL (SELECT u.x, count(*) AS c FROM u WHERE u.a = t.a"
    " GROUP BY u.x HAVING count(*) > 1 OR u.x IS NULL ORDER BY count(*) DESC, u.x LIMIT 2) s",
    "SELECT t.id, s.x FROM t LEFT JOIN LATERAL (SELECT DISTINCT u.x FROM u WHERE u.a = t.a"
    " AND u.x > 1) s ON true",
    "SELECT t.id, s.x FROM t, LATERAL (SELECT DISTINCT u.x FROM u WHERE u.a = t.a"
    " ORDER BY u.x DESC LIMIT 2) s",
    "SELECT t.id, s.x, s.uid FROM t, LATERAL (SELECT DISTINCT ON (u.x) u.x, u.id AS uid FROM u"
    " WHERE u.a = t.a ORDER BY u.x, u.id DESC) s",
    # window functions inside: over each outer row's rows
    "SELECT t.id, s.uid, s.r, s.tot FROM t, LATERAL (SELECT u.id AS uid, rank() OVER"
    " (ORDER BY u.x) AS r, sum(x) OVER () AS tot FROM u WHERE u.a = t.a) s",
    # the outer side a subquery, a join, another LATERAL; an inner join's ON condition
    "SELECT d.a, s.x FROM (SELECT DISTINCT a FROM t) d, LATERAL (SELECT u.x FROM u"
    " WHERE u.a = d.a ORDER BY u.x DESC NULLS LAST LIMIT 1) s",
    "SELECT t.id, s1.uid, s2.n FROM t, LATERAL (SELECT u.id AS uid, u.x FROM u WHERE u.a = t.a"
    " ORDER BY u.id LIMIT 2) s1, LATERAL (SELECT count(*) AS n FROM u WHERE u.x = s1.x"
    " AND u.a = t.a HAVING count(*) > 0) s2",
    "SELECT t.id, s.x FROM t JOIN LATERAL (SELECT u.x, count(*) AS n FROM u WHERE u.a = t.a"
    " GROUP BY u.x) s ON s.n > 1 AND s.x < t.b",
    "SELECT t.id, s.x FROM t, LATERAL (SELECT u.x FROM u WHERE u.a = t.a AND u.x IN"
    " (SELECT b FROM t) ORDER BY u.x LIMIT 1) s",
]


@pytest.mark.parametrize("loaded", [0, 25])
def test_lateral_views_equal_postgres_at_every_epoch(
    pg: psycopg.Connection, tmp_path: Path, loaded: int
) -> None:
    """Views created before the data (loaded=0) and over data (backfill), then batches
    (`pg`: conftest's, autocommit: an epoch's statements commit one by one, and what
    each view must be is read after the epoch)."""
    seed, rng, work = seeded_workload(pg, tmp_path / "spool", loaded)
    cat, sc = catalog(), scans()
    engine = Engine(tmp_path / "state", tmp_path / "spool")
    for i, sql in enumerate(QUERIES):
        plan = plan_of(sql, cat)
        engine.create_view(70000 + i, plan, {o: sc[o] for o in plan.tables}, at_epoch=work.epoch_no)
    expected = {work.epoch_no: query_rows(pg, QUERIES)}
    expected |= advance_at_random(engine, work, rng, 25, lambda _: query_rows(pg, QUERIES))
    assert_views_equal(engine, expected, 70000, QUERIES, seed)


# what stays out: 0A000 naming the construct, at CREATE
REFUSED = {
    "SELECT t.id, s.x FROM t, LATERAL (SELECT u.x FROM u WHERE u.a < t.a ORDER BY u.x LIMIT 1) s": (
        "correlated other than by equalities"
    ),
    "SELECT t.id, s.y FROM t, LATERAL (SELECT u.x + t.b AS y FROM u WHERE u.a = t.a"
    " ORDER BY u.x LIMIT 1) s": "reading outer columns other than in equalities",
    "SELECT t.id, s.n FROM t, LATERAL (SELECT count(*) AS n FROM u WHERE u.a = t.a"
    " LIMIT t.b) s": "a LIMIT other than a constant",
    "SELECT t.id, s.x FROM t, LATERAL (SELECT x FROM u WHERE u.a = t.a UNION"
    " SELECT b FROM t t2 WHERE t2.a = t.a) s": "UNION, INTERSECT or EXCEPT",
}

# errors PostgreSQL gives for these, the same through the server
INVALID = [
    # a subquery in FROM without LATERAL does not see the items before it
    "SELECT * FROM lat_t, (SELECT x FROM lat_u WHERE lat_u.a = lat_t.a LIMIT 1) s",
    "SELECT * FROM lat_t RIGHT JOIN LATERAL (SELECT x FROM lat_u WHERE lat_u.a = lat_t.a"
    " LIMIT 1) s ON true",
    "SELECT * FROM lat_t FULL JOIN LATERAL (SELECT count(*) FROM lat_u WHERE lat_u.a = lat_t.a"
    " GROUP BY x) s ON true",
    "SELECT * FROM lat_t, LATERAL (SELECT lat_u.x FROM lat_u WHERE lat_u.a = lat_t.a"
    " GROUP BY lat_u.a) s",
    "SELECT * FROM lat_t, LATERAL (SELECT lat_u.x FROM lat_u WHERE lat_u.a = lat_t.nope"
    " ORDER BY 1 LIMIT 1) s",
    "SELECT * FROM lat_t, LATERAL (SELECT DISTINCT ON (x) x FROM lat_u WHERE lat_u.a = lat_t.a"
    " ORDER BY id) s",
]


def test_refused_constructs_name_themselves() -> None:
    cat = catalog()
    for sql, words in REFUSED.items():
        with pytest.raises(SQLError) as e:
            plan_of(sql, cat)
        assert e.value.sqlstate == "0A000", (sql, e.value)
        assert words in str(e.value), (sql, str(e.value))


def test_lateral_through_the_server(conn: psycopg.Connection, pg: psycopg.Connection) -> None:
    """CREATE MATERIALIZED VIEW with LATERAL top-N and aggregates through the server,
    equal to PostgreSQL after each write; invalid LATERAL queries fail there with
    PostgreSQL's SQLSTATE."""
    views = {
        "lat_top": "SELECT lat_t.id, s.x FROM lat_t, LATERAL (SELECT x FROM lat_u"
        " WHERE lat_u.a = lat_t.a ORDER BY x DESC, id LIMIT 2) s",
        "lat_agg": "SELECT lat_t.id, s.n, s.sx FROM lat_t LEFT JOIN LATERAL (SELECT count(*) AS n,"
        " sum(x) AS sx FROM lat_u WHERE lat_u.a = lat_t.a HAVING count(*) <> 1) s ON true",
    }
    writes = [
        "INSERT INTO lat_t VALUES (1, 1), (2, 1), (3, NULL), (4, 2)",
        "INSERT INTO lat_u VALUES (1, 1, 5), (2, 1, 7), (3, NULL, 1), (4, 1, 6)",
        "UPDATE lat_u SET a = 2 WHERE id = 2",
        "DELETE FROM lat_t WHERE id = 2",
        "INSERT INTO lat_u VALUES (5, 2, NULL), (6, 3, 1)",
        "INSERT INTO lat_t VALUES (5, 3), (6, 1)",
    ]
    ddls = ["CREATE TABLE lat_t (id int, a int)", "CREATE TABLE lat_u (id int, a int, x int)"]
    views_through_server(conn, pg, ddls, views, writes)
    for sql in INVALID:
        with pytest.raises(psycopg.Error) as want:
            pg.execute(sql)
        with pytest.raises(psycopg.Error) as got:
            conn.execute(f"CREATE MATERIALIZED VIEW lat_bad AS {sql}")
        assert got.value.sqlstate == want.value.sqlstate, (sql, got.value, want.value)
