"""Top-N, window functions and scalar subqueries as CREATE MATERIALIZED VIEW, through
the server, against PostgreSQL 15.

The same tables and writes go to a Headwater server and to PostgreSQL (a schema of
its own on each); after every batch each materialized view equals PostgreSQL's
answer to its query, read fresh (read-your-writes). A top-N view is read in its
order: `SELECT * FROM v` gives the rows as the view's ORDER BY does (the orders here
are total), as PostgreSQL's REFRESHed matview holds them.
"""

from __future__ import annotations

import random

import psycopg
import pytest

from tests.hwserver import HeadwaterServer
from tests.test_engine_support import normalize

pytestmark = pytest.mark.oracle

SCHEMA = "topn_mv"
TABLES = (
    "CREATE TABLE scores (id int PRIMARY KEY, grp int, pts int, name text)",
    "CREATE TABLE bonus (id int PRIMARY KEY, grp int, amount int)",
)
VIEWS = {
    "top3": "SELECT id, grp, pts FROM scores ORDER BY pts DESC, id LIMIT 3",
    "page2": "SELECT id, pts FROM scores ORDER BY pts, id LIMIT 3 OFFSET 3",
    "best_groups": "SELECT grp, sum(pts) AS total FROM scores GROUP BY grp"
    " ORDER BY total DESC NULLS LAST, grp LIMIT 2",
    "top2_per_grp": "SELECT id, grp, pts FROM (SELECT id, grp, pts, row_number() OVER"
    " (PARTITION BY grp ORDER BY pts DESC, id) AS rn FROM scores) s WHERE rn <= 2",
    "ranked": "SELECT id, grp, rank() OVER (PARTITION BY grp ORDER BY pts) AS r,"
    " sum(pts) OVER (PARTITION BY grp ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)"
    " AS s2, lag(name) OVER (ORDER BY id) AS prev FROM scores",
    "above_avg": "SELECT id, pts, (SELECT max(amount) FROM bonus) AS top_bonus FROM scores"
    " WHERE pts > (SELECT avg(pts) FROM scores)",
    "big_groups": "SELECT grp, count(*) AS n FROM scores GROUP BY grp"
    " HAVING count(*) >= (SELECT count(*) FROM bonus) / 3",
}
ORDERED = {  # views read in their order: the query with which to compare the order
    "top3": VIEWS["top3"],
    "page2": VIEWS["page2"],
    "best_groups": VIEWS["best_groups"],
}


def _both(hw: psycopg.Connection, pg: psycopg.Connection, sql: str) -> None:
    hw.execute(sql)
    pg.execute(sql)


def _batch(rng: random.Random, live: set[int], next_id: list[int]) -> list[str]:
    out = []
    for _ in range(rng.randrange(1, 5)):
        op = rng.random()
        if op < 0.5 or len(live) < 4:
            i = next_id[0]
            next_id[0] += 1
            live.add(i)
            pts = rng.choice(["NULL", *map(str, range(20))])
            out.append(
                f"INSERT INTO scores VALUES ({i}, {rng.randrange(4)}, {pts}, 'n{rng.randrange(9)}')"
            )
            if rng.random() < 0.3:
                amount = rng.randrange(50)
                out.append(f"INSERT INTO bonus VALUES ({i}, {rng.randrange(4)}, {amount})")
        elif op < 0.8:
            i = rng.choice(sorted(live))
            out.append(f"UPDATE scores SET pts = {rng.randrange(20)} WHERE id = {i}")
        else:
            i = rng.choice(sorted(live))
            live.discard(i)
            out.append(f"DELETE FROM scores WHERE id = {i}")
            out.append(f"DELETE FROM bonus WHERE id = {i}")
    return out


def test_topn_window_and_scalar_views_equal_postgres(
    hw_server: HeadwaterServer, pg: psycopg.Connection
) -> None:
    rng = random.Random(14)
    with psycopg.connect(hw_server.dsn, autocommit=True) as hw:
        for c in (hw, pg):
            c.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
            c.execute(f"CREATE SCHEMA {SCHEMA}")
            c.execute(f"SET search_path = {SCHEMA}")
        hw.execute("SET headwater.freshness_timeout = '600s'")  # Spark starts slowly when loaded
        for sql in TABLES:
            _both(hw, pg, sql)
        live: set[int] = set()
        next_id = [1]
        for sql in _batch(rng, live, next_id) + _batch(rng, live, next_id):
            _both(hw, pg, sql)
        for name, sql in VIEWS.items():  # over existing data (backfill)
            hw.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
        bad = []
        for step in range(25):
            for sql in _batch(rng, live, next_id):
                _both(hw, pg, sql)
            for name, sql in VIEWS.items():
                got = hw.execute(f"SELECT * FROM {name}").fetchall()
                want = pg.execute(sql).fetchall()
                if normalize(got) != normalize(want):
                    bad.append((step, name, want, got))
                elif name in ORDERED and [tuple(r) for r in got] != [tuple(r) for r in want]:
                    bad.append((step, f"{name} (order)", want, got))
        for name in VIEWS:
            hw.execute(f"DROP MATERIALIZED VIEW {name}")
        hw.execute(f"DROP SCHEMA {SCHEMA} CASCADE")
    assert not bad, f"{len(bad)} mismatches, first: {bad[0]}"
