"""DISTINCT ON and GROUPING SETS / ROLLUP / CUBE with grouping() in views, against
PostgreSQL 15 at every epoch.

The machinery of tests/test_engine_windows.py (tables t and u under random INSERT/
UPDATE/DELETE, mirrored into PostgreSQL and the spool): each view is created over
existing data (backfill), then advanced without Spark in batches of 1-5 epochs, and
equals its query in PostgreSQL at every epoch. DISTINCT ON orders are total (ties
broken by `id`), so the row PostgreSQL keeps is the one the view keeps.
HW_ENGINE_SEED=n reruns a seed.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from headwater.engine import executors
from headwater.engine.engine import Engine
from psycopg.types.string import TextLoader

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

QUERIES = [
    # DISTINCT ON: a per-group top-1
    "SELECT DISTINCT ON (a) a, id, b FROM t ORDER BY a, b DESC NULLS LAST, id",
    "SELECT DISTINCT ON (a, s) id, s FROM t ORDER BY s, a, id DESC",
    "SELECT DISTINCT ON (b % 3) b % 3 AS m, id FROM t WHERE b IS NOT NULL ORDER BY b % 3, id",
    "SELECT DISTINCT ON (a) a, count(*) AS n, sum(b) AS sb FROM t GROUP BY a, s"
    " ORDER BY a, count(*) DESC, s NULLS FIRST",
    "SELECT DISTINCT ON (t.a) t.a, u.x, t.id FROM t JOIN u ON t.a = u.a"
    " ORDER BY t.a, u.x DESC NULLS LAST, t.id, u.id",
    "SELECT DISTINCT ON (a) a, id FROM t ORDER BY a, id LIMIT {k3}",
    "SELECT DISTINCT ON (1) a, b FROM t ORDER BY 1, 2 NULLS FIRST",
    # GROUPING SETS, ROLLUP, CUBE with grouping()
    "SELECT a, s, grouping(a, s) AS g, count(*) AS n, sum(b) AS sb FROM t GROUP BY ROLLUP (a, s)",
    "SELECT a, s, grouping(s) AS gs, count(b) AS n, max(b) AS mb FROM t GROUP BY CUBE (a, s)",
    "SELECT a, s, avg(b) AS ab, count(*) AS n FROM t GROUP BY GROUPING SETS ((a, s), (s), ())",
    "SELECT a, b % 2 AS p, count(*) AS n FROM t GROUP BY a, ROLLUP (b % 2) HAVING count(*) > {k}",
    "SELECT s, grouping(s) AS g, count(DISTINCT a) AS da, string_agg(s, ',' ORDER BY s) AS ss"
    " FROM t GROUP BY GROUPING SETS (s, (), s)",
    "SELECT t.a, u.x, count(*) AS n FROM t JOIN u ON t.a = u.a GROUP BY ROLLUP (t.a, u.x)",
    "SELECT count(*) AS n, sum(x) AS sx FROM u WHERE x > 100 GROUP BY ROLLUP (a)",
    "SELECT a, grouping(a) AS g, count(*) AS n FROM t GROUP BY a",
    # ordered-set aggregates
    "SELECT a, percentile_cont(0.5) WITHIN GROUP (ORDER BY b) AS med,"
    " percentile_disc(0.25) WITHIN GROUP (ORDER BY b) AS q1 FROM t GROUP BY a",
    "SELECT percentile_cont(0.9) WITHIN GROUP (ORDER BY b) AS p90 FROM t WHERE s IS NOT NULL",
    "SELECT a, mode() WITHIN GROUP (ORDER BY b) AS m, mode() WITHIN GROUP (ORDER BY s DESC) AS ms"
    " FROM t GROUP BY a",
    "SELECT mode() WITHIN GROUP (ORDER BY b) FILTER (WHERE s <> 'a') AS m FROM t",
    # count(DISTINCT) of several columns: PostgreSQL's row form
    "SELECT a, count(DISTINCT (b, s)) AS n FROM t GROUP BY a",
    "SELECT count(DISTINCT ROW(a, s)) AS n, count(DISTINCT (a, b)) FILTER (WHERE s > 'a') AS f"
    " FROM t",
    # array_agg, json(b)_agg, json(b)_object_agg, string_agg with ORDER BY in the call
    # (orders total: ties broken by id)
    "SELECT a, array_agg(b ORDER BY b DESC, id) AS bs, array_agg(DISTINCT s ORDER BY s) AS ss"
    " FROM t GROUP BY a",
    "SELECT array_agg(id ORDER BY id) AS ids, array_agg(s ORDER BY id) AS ss FROM t WHERE b > {k}",
    "SELECT s, jsonb_agg(b ORDER BY id) AS jb, json_agg(a ORDER BY id) FILTER (WHERE b > {k}) AS ja"
    " FROM t GROUP BY s",
    "SELECT a, json_object_agg(id, s ORDER BY id) AS o, jsonb_object_agg(s, b ORDER BY id) AS ob"
    " FROM t WHERE s IS NOT NULL GROUP BY a",
    "SELECT a, string_agg(s, '|' ORDER BY b DESC NULLS LAST, id) AS ss,"
    " string_agg(DISTINCT s, ',' ORDER BY s DESC) AS ds FROM t GROUP BY a",
    "SELECT t.a, jsonb_agg(u.x ORDER BY u.id, t.id) AS xs FROM t JOIN u ON t.a = u.a GROUP BY t.a",
]


def views_of(rng: random.Random) -> list[str]:
    return [q.format(k=rng.randrange(4), k3=rng.randrange(1, 4)) for q in QUERIES]


@pytest.fixture
def pg(pg_oracle: object) -> Iterator[psycopg.Connection]:
    with psycopg.connect(pg_oracle.dsn) as c:  # type: ignore[attr-defined]
        as_text(c)
        yield c


def as_text(c: psycopg.Connection | psycopg.Cursor) -> None:
    """json and jsonb values as their text: the views' must be PostgreSQL's, spacing and
    key order included."""
    for name in ("json", "jsonb"):
        c.adapters.register_loader(name, TextLoader)


def test_grouping_views_equal_postgres_at_every_epoch(
    pg: psycopg.Connection, tmp_path: Path
) -> None:
    seed, rng, work = seeded_workload(pg, tmp_path / "spool", 20)
    cat, sc = catalog(), scans()
    engine = Engine(tmp_path / "state", tmp_path / "spool")
    sqls = views_of(rng)
    for i, sql in enumerate(sqls):
        plan = plan_of(sql, cat)
        engine.create_view(70000 + i, plan, {o: sc[o] for o in plan.tables}, at_epoch=work.epoch_no)
    expected = {work.epoch_no: query_rows(pg, sqls)}
    expected |= advance_at_random(engine, work, rng, 40, lambda _: query_rows(pg, sqls))
    assert_views_equal(engine, expected, 70000, sqls, seed)


# the collection aggregates and mode(): the views the Spark executor runs too
COLLECTIONS = [q for q in QUERIES if "_agg(" in q and "string_agg" not in q or "mode()" in q]


def test_collection_aggregates_on_both_executors_equal_postgres(
    spark: object, pg: psycopg.Connection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """array_agg, json(b)_agg, json(b)_object_agg and mode() (ORDER BY, DISTINCT, FILTER
    in the call, NULL elements) under `auto` with the executor alternating: backfills
    and every other batch on Spark, the others on DuckDB, each going on from the state
    the other left; PostgreSQL's values (json text included) at every epoch."""
    seed, rng, work = seeded_workload(pg, tmp_path / "spool", 10)
    cat, sc = catalog(), scans()
    engine = Engine(tmp_path / "state", tmp_path / "spool", executor="auto")
    monkeypatch.setattr(executors, "SPARK_MIN_ROWS_LOCAL", SPARK_ALL)
    sqls = [q.format(k=rng.randrange(4), k3=1) for q in COLLECTIONS]
    for i, sql in enumerate(sqls):
        plan = plan_of(sql, cat)
        engine.create_view(71000 + i, plan, {o: sc[o] for o in plan.tables}, at_epoch=work.epoch_no)
    expected = {work.epoch_no: query_rows(pg, sqls)}
    expected |= advance_alternating(engine, work, rng, lambda _: query_rows(pg, sqls), monkeypatch)
    assert_views_equal(engine, expected, 71000, sqls, seed)


@pytest.mark.parametrize(
    ("sql", "state"),
    [
        ("SELECT DISTINCT ON (a) a, b FROM t ORDER BY b, a", "42P10"),
        ("SELECT a, grouping(b) FROM t GROUP BY ROLLUP (a)", "42803"),
        ("SELECT a FROM t WHERE grouping(a) = 0", "42803"),
        ("SELECT a, count(*) FROM t GROUP BY DISTINCT ROLLUP (a, b)", "0A000"),
        # PostgreSQL 15: "function count(integer, integer) does not exist"
        ("SELECT count(DISTINCT a, b) FROM t", "42883"),
        ("SELECT mode(b) FROM t", "42809"),
        ("SELECT a, array_agg(b) OVER (PARTITION BY a) FROM t", "0A000"),
    ],
)
def test_refusals(sql: str, state: str) -> None:
    with pytest.raises(SQLError) as err:
        plan_of(sql, catalog())
    assert err.value.sqlstate == state, err.value


SERVER_VIEWS = {
    "grp_first": "SELECT DISTINCT ON (g) g, id, v FROM grp_t ORDER BY g, v DESC, id",
    "grp_rollup": "SELECT g, h, grouping(g, h) AS gg, count(*) AS n, sum(v) AS sv FROM grp_t"
    " GROUP BY ROLLUP (g, h)",
    "grp_median": "SELECT g, percentile_cont(0.5) WITHIN GROUP (ORDER BY v) AS med FROM grp_t"
    " GROUP BY g",
    "grp_lists": "SELECT g, array_agg(v ORDER BY id) AS vs, array_agg(h ORDER BY id DESC) AS hs,"
    " mode() WITHIN GROUP (ORDER BY v) AS mv, count(DISTINCT (h, v)) AS dn FROM grp_t GROUP BY g",
    "grp_json": "SELECT g, jsonb_agg(h ORDER BY id) AS jh, json_agg(v ORDER BY id) AS jv,"
    " json_object_agg(id, h ORDER BY id) AS oh, jsonb_object_agg(id, v) AS ov,"
    " string_agg(h, ' ' ORDER BY v DESC, id) AS sh FROM grp_t GROUP BY g",
}
# arrays and json as text: the views' text must be PostgreSQL's (quoting, spacing)
TEXT_OIDS = (1007, 1009, 114, 3802)


def _text_rows(c: psycopg.Connection, sql: str) -> list[tuple]:
    cur = c.cursor()
    for oid in TEXT_OIDS:
        cur.adapters.register_loader(oid, TextLoader)
    return normalize(cur.execute(sql).fetchall())


def test_through_the_server(conn: psycopg.Connection, pg: psycopg.Connection) -> None:
    """The same shapes through the server (CREATE, writes, reads), equal to PostgreSQL."""
    ddl = "CREATE TABLE grp_t (id int, g int, h text, v int)"
    pg.execute("DROP TABLE IF EXISTS grp_t")
    pg.execute(ddl)
    conn.execute(ddl)
    writes = [
        "INSERT INTO grp_t VALUES (1, 1, 'a', 5), (2, 1, 'b', 7), (3, 2, 'a', NULL),"
        " (4, 2, NULL, 1)",
        "UPDATE grp_t SET v = 9 WHERE id = 1",
        "DELETE FROM grp_t WHERE id = 2",
        "INSERT INTO grp_t VALUES (5, NULL, 'c', 3), (6, 1, 'a', 9)",
        "INSERT INTO grp_t VALUES (7, 2, 'x y', 1), (8, 2, '', 1), (9, 2, 'NULL', NULL),"
        " (10, 1, 'q\"', 3)",
        "UPDATE grp_t SET h = NULL WHERE id = 7",
    ]
    for name, sql in SERVER_VIEWS.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
    for w in writes:
        conn.execute(w)
        pg.execute(w)
        pg.commit()
        for name, sql in SERVER_VIEWS.items():
            got = _text_rows(conn, f"SELECT * FROM {name}")
            assert got == _text_rows(pg, sql), (name, w)
