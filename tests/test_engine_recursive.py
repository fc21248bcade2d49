"""WITH RECURSIVE in views (monotone recursion: reachability, bounded paths), against
PostgreSQL 15 at every epoch.

The machinery of tests/test_engine_grouping.py: tables t(id, a, b, s) and u(id, a, x)
under random INSERT/UPDATE/DELETE mirrored into PostgreSQL and the spool (u's rows
are edges a -> x, with cycles); each view is created over existing data, then
advanced in batches of 1-5 epochs, and equals its query in PostgreSQL at every epoch.
HW_ENGINE_SEED=n reruns a seed.
"""

from __future__ import annotations

import importlib
import random
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from headwater.engine import executors
from headwater.engine.engine import Engine
from headwater.planner.incremental import incrementalize

from headwater.errors import SQLError
from tests.test_engine_support import (
    SPARK_ALL,
    advance_alternating,
    advance_at_random,
    assert_views_equal,
    catalog,
    normalize,
    plan_of,
    query_rows,
    scans,
    seeded_workload,
)

pytestmark = pytest.mark.oracle
# (the module: the package's `recursive` is the rule function)
recursive_rule = importlib.import_module("headwater.engine.rules.recursive")

QUERIES = [
    # reachability (transitive closure, cycles: UNION stops them)
    "WITH RECURSIVE r(src, dst) AS (SELECT a, x FROM u UNION"
    " SELECT r.src, u.x FROM r JOIN u ON r.dst = u.a) SELECT src, dst FROM r",
    "WITH RECURSIVE r(src, dst) AS (SELECT a, x FROM u WHERE x IS NOT NULL UNION"
    " SELECT r.src, u.x FROM r, u WHERE r.dst = u.a AND u.x <> r.src)"
    " SELECT src, count(*) AS n FROM r GROUP BY src",
    # paths from t's rows with a bounded depth: UNION ALL keeps every path
    "WITH RECURSIVE p(node, depth, via) AS (SELECT a, 0, id FROM t WHERE b = {k} UNION ALL"
    " SELECT u.x, p.depth + 1, u.id FROM p JOIN u ON u.a = p.node WHERE p.depth < 3)"
    " SELECT node, depth, via FROM p",
    # a recursion without tables, joined with one
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 4)"
    " SELECT t.id, n.i FROM t JOIN n ON t.a = n.i",
    # a base with DISTINCT and a filter reading the recursion; read twice
    "WITH RECURSIVE r(v) AS (SELECT DISTINCT a FROM t WHERE s = 'a' UNION"
    " SELECT u.x FROM r JOIN u ON u.a = r.v WHERE u.x > {k})"
    " SELECT r1.v, r2.v AS w FROM r r1 JOIN r r2 ON r1.v < r2.v",
]


def views_of(rng: random.Random) -> list[str]:
    return [q.format(k=rng.randrange(4)) for q in QUERIES]


@pytest.fixture
def pg(pg_oracle: object) -> Iterator[psycopg.Connection]:
    with psycopg.connect(pg_oracle.dsn) as c:  # type: ignore[attr-defined]
        yield c


def test_recursive_views_equal_postgres_at_every_epoch(
    pg: psycopg.Connection, tmp_path: Path
) -> None:
    seed, rng, work = seeded_workload(pg, tmp_path / "spool", 15)
    cat, sc = catalog(), scans()
    engine = Engine(tmp_path / "state", tmp_path / "spool")
    sqls = views_of(rng)
    for i, sql in enumerate(sqls):
        plan = plan_of(sql, cat)
        engine.create_view(80000 + i, plan, {o: sc[o] for o in plan.tables}, at_epoch=work.epoch_no)
    expected = {work.epoch_no: query_rows(pg, sqls)}
    expected |= advance_at_random(engine, work, rng, 40, lambda _: query_rows(pg, sqls))
    for i, sql in enumerate(sqls):  # (none is trivially empty)
        assert any(per_view[i] for per_view in expected.values()), sql
    assert_views_equal(engine, expected, 80000, sqls, seed)


def test_recursive_views_on_both_executors_equal_postgres(
    spark: object, pg: psycopg.Connection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same views under `auto` with the executor alternating: backfills and the
    second batch on Spark (the fixpoint iterated there), the first on DuckDB, each going
    on from the state the other left; PostgreSQL's rows at every epoch. A recursion that
    never terminates fails on Spark too, after the limit."""
    seed, rng, work = seeded_workload(pg, tmp_path / "spool", 10)
    cat, sc = catalog(), scans()
    engine = Engine(tmp_path / "state", tmp_path / "spool", executor="auto")
    monkeypatch.setattr(executors, "SPARK_MIN_ROWS_LOCAL", SPARK_ALL)
    monkeypatch.setattr(recursive_rule, "RECURSION_LIMIT", 5)
    # (Spark costs seconds per iteration: reachability, bounded paths under UNION ALL, a
    # recursion without tables)
    sqls = [views_of(rng)[i] for i in (0, 2, 3)]
    for i, sql in enumerate(sqls):
        plan = plan_of(sql, cat)
        engine.create_view(81000 + i, plan, {o: sc[o] for o in plan.tables}, at_epoch=work.epoch_no)
    endless = (  # n + 1 without a bound
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION SELECT i + 1 FROM n)"
        " SELECT t.id, n.i FROM t JOIN n ON t.a = n.i"
    )
    plan = plan_of(endless, cat)
    with pytest.raises(Exception, match="did not terminate within 5 iterations"):
        engine.create_view(81999, plan, {o: sc[o] for o in plan.tables}, at_epoch=work.epoch_no)
    expected = {work.epoch_no: query_rows(pg, sqls)}
    expected |= advance_alternating(engine, work, rng, lambda _: query_rows(pg, sqls), monkeypatch)
    assert_views_equal(engine, expected, 81000, sqls, seed)


@pytest.mark.parametrize(
    ("sql", "state", "named"),
    [
        (
            "WITH RECURSIVE r(v) AS (SELECT a FROM t UNION"
            " SELECT max(u.x) FROM r JOIN u ON u.a = r.v) SELECT v FROM r",
            "42P19",
            "aggregate functions are not allowed",
        ),
        (
            "WITH RECURSIVE r(v) AS (SELECT a FROM t UNION SELECT u.x FROM r JOIN u ON"
            " u.a = r.v WHERE NOT EXISTS (SELECT 1 FROM t WHERE t.b = u.x)) SELECT v FROM r",
            "0A000",
            "NOT EXISTS",
        ),
        (
            "WITH RECURSIVE r(v) AS (SELECT a FROM t UNION SELECT u.x FROM r LEFT JOIN u"
            " ON u.a = r.v) SELECT v FROM r",
            "0A000",
            "LEFT JOIN",
        ),
        (
            "WITH RECURSIVE r(v) AS (SELECT a FROM t EXCEPT SELECT v FROM r) SELECT v FROM r",
            "42P19",
            "form",
        ),
        (
            "WITH RECURSIVE r(v) AS (SELECT a FROM t UNION SELECT r.v FROM r, r AS r2)"
            " SELECT v FROM r",
            "42P19",
            "more than once",
        ),
    ],
)
def test_refusals(sql: str, state: str, named: str) -> None:
    """Non-monotone recursion is 0A000 naming what makes it so; PostgreSQL's own
    errors (42P19) as PostgreSQL words them."""
    with pytest.raises(SQLError) as err:
        incrementalize(plan_of(sql, catalog()))
    assert err.value.sqlstate == state, err.value
    assert named in err.value.message, err.value.message


def test_through_the_server(conn: psycopg.Connection, pg: psycopg.Connection) -> None:
    """A reachability view through the server (CREATE, writes, reads, EXPLAIN), equal to
    PostgreSQL after each write."""
    ddl = "CREATE TABLE rec_e (id int, src int, dst int)"
    pg.execute("DROP TABLE IF EXISTS rec_e")
    pg.execute(ddl)
    conn.execute(ddl)
    view = (
        "WITH RECURSIVE r(a, b) AS (SELECT src, dst FROM rec_e UNION"
        " SELECT r.a, e.dst FROM r JOIN rec_e e ON e.src = r.b) SELECT a, b FROM r"
    )
    conn.execute(f"CREATE MATERIALIZED VIEW rec_reach AS {view}")
    writes = [
        "INSERT INTO rec_e VALUES (1, 1, 2), (2, 2, 3), (3, 3, 4)",
        "INSERT INTO rec_e VALUES (4, 4, 1), (5, 5, NULL)",
        "DELETE FROM rec_e WHERE id = 2",
        "UPDATE rec_e SET dst = 5 WHERE id = 3",
    ]
    for w in writes:
        conn.execute(w)
        pg.execute(w)
        pg.commit()
        got = normalize(conn.execute("SELECT * FROM rec_reach").fetchall())
        assert got == normalize(pg.execute(view).fetchall()), w
    plan = "\n".join(r[0] for r in conn.execute("EXPLAIN MATERIALIZED VIEW rec_reach"))
    assert "recursive" in plan.lower(), plan


def test_non_terminating_recursion_fails_its_view_only(
    conn: psycopg.Connection, pg: psycopg.Connection
) -> None:
    """A recursion that never terminates (a cycle under UNION ALL; n + 1 without a bound,
    under UNION) fails its view's batch after RECURSION_LIMIT iterations, with an error naming the
    view and what to do, in headwater_catalog.views; the other views keep advancing."""
    ddl = "CREATE TABLE rec_cyc (id int, src int, dst int)"
    pg.execute("DROP TABLE IF EXISTS rec_cyc")
    pg.execute(ddl)
    pg.commit()
    conn.execute(ddl)
    paths = (
        "WITH RECURSIVE r(a, b) AS (SELECT src, dst FROM rec_cyc UNION ALL"
        " SELECT r.a, e.dst FROM r JOIN rec_cyc e ON e.src = r.b) SELECT a, b FROM r"
    )
    count = (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION SELECT i + 1 FROM n)"
        " SELECT c.id, n.i FROM rec_cyc c JOIN n ON c.dst = n.i"
    )
    conn.execute(f"CREATE MATERIALIZED VIEW rec_paths AS {paths}")
    conn.execute("CREATE MATERIALIZED VIEW rec_edges AS SELECT count(*) AS n FROM rec_cyc")
    with pytest.raises(psycopg.Error) as err:  # its backfill: at CREATE
        conn.execute(f"CREATE MATERIALIZED VIEW rec_count AS {count}")
    assert "did not terminate within 1000 iterations" in str(err.value), err.value
    w = "INSERT INTO rec_cyc VALUES (1, 1, 2), (2, 2, 3)"  # no cycle: the view is exact
    conn.execute(w)
    pg.execute(w)
    pg.commit()
    got = normalize(conn.execute("SELECT * FROM rec_paths").fetchall())
    assert got == normalize(pg.execute(paths).fetchall())
    conn.execute("INSERT INTO rec_cyc VALUES (3, 3, 1)")  # a cycle: paths without end
    conn.execute("INSERT INTO rec_cyc VALUES (4, 4, 4)")
    assert conn.execute("SELECT n FROM rec_edges").fetchone() == (4,)
    # views advance on their own (engine/engine.py: independent units at once): the
    # count is current while rec_paths may still iterate towards its limit
    deadline = time.monotonic() + 120
    while True:
        status, error = conn.execute(
            "SELECT status, error FROM headwater_catalog.views WHERE name = 'rec_paths'"
        ).fetchone()
        if status != "running" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert status == "error", (status, error)
    assert "did not terminate within 1000 iterations" in error, error
    assert "rec_paths" in error and "HW_RECURSION_LIMIT" in error, error
