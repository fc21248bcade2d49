"""Materialized views through a real server and real clients (psycopg, psql).

One Headwater server serves the whole test session (`hw_server`), so every object
here has a name of its own. PostgreSQL 15 (`pg_oracle`) gives the expected wording
of errors and notices. The restart test runs a server of its own.

The first read of a materialized view waits for the Spark stage to start (tens of
seconds on a loaded machine), so connections raise headwater.freshness_timeout;
nothing here sleeps to let views catch up: a session's read waits for its own
writes (read-your-writes).
"""

from __future__ import annotations

import itertools
import re
import shutil
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.hwserver import HeadwaterServer, run_psql, start_temp_server
from tests.test_engine_support import normalize

_ids = itertools.count()
TIMEOUT = "SET headwater.freshness_timeout = '600s'"
BACKFILL = re.compile(
    r'materialized view "(\w+)": backfilled (\d+)/(\d+) input rows at epoch (\d+) in [\d.]+s'
)


def uniq(prefix: str = "mvt") -> str:
    return f"{prefix}{next(_ids)}"


@pytest.fixture
def hw(hw_server: HeadwaterServer) -> Iterator[psycopg.Connection]:
    with psycopg.connect(hw_server.dsn, autocommit=True) as c:
        c.execute(TIMEOUT)
        yield c


Notice = tuple[str, str, str | None]  # (sqlstate, message, detail)


def run_noticed(conn: psycopg.Connection, sql: str) -> list[Notice]:
    """Run `sql`; the NOTICEs it sent."""
    got: list[Notice] = []

    def keep(d: psycopg.errors.Diagnostic) -> None:  # d is only valid during the call
        got.append((d.sqlstate or "", d.message_primary or "", d.message_detail))

    conn.add_notice_handler(keep)
    try:
        conn.execute(sql)
    finally:
        conn.remove_notice_handler(keep)
    return got


def error_of(conn: psycopg.Connection, sql: str) -> tuple[str, str, str | None, str | None]:
    """(SQLSTATE, message, detail, hint) of the error `sql` raises."""
    with pytest.raises(psycopg.Error) as info:
        conn.execute(sql)
    d = info.value.diag
    return (d.sqlstate or "", d.message_primary or "", d.message_detail, d.message_hint)


def rows(conn: psycopg.Connection, sql: str) -> list[tuple]:
    return normalize(conn.execute(sql).fetchall())


def assert_equal_query(conn: psycopg.Connection, view: str, query: str) -> None:
    """The view's rows equal its query's over the tables (both read fresh)."""
    got, exp = rows(conn, f"SELECT * FROM {view}"), rows(conn, query)
    assert got == exp, (view, query, exp[:8], got[:8])


def assert_same_epoch_equal(conn: psycopg.Connection, view: str, query: str) -> None:
    """In one statement (one epoch for every table and view it reads), the view
    and its query have the same rows (EXCEPT ALL both ways is empty)."""
    diff = conn.execute(
        f"(SELECT * FROM {view} EXCEPT ALL ({query})) "
        f"UNION ALL (({query}) EXCEPT ALL SELECT * FROM {view})"
    ).fetchall()
    assert diff == [], (view, query, diff[:8])


def in_both(hw: psycopg.Connection, pg: psycopg.Connection, *sqls: str) -> None:
    for sql in sqls:
        pg.execute(sql)
        hw.execute(sql)


# -- creating, reading, writing ---------------------------------------------------------


def test_backfill_notice_and_read_your_writes(hw: psycopg.Connection) -> None:
    t, mv = uniq(), uniq()
    hw.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, g int, v int)")
    hw.execute(f"INSERT INTO {t} SELECT x, x % 3, x FROM generate_series(1, 120) AS s(x)")
    query = f"SELECT g, count(*) AS n, sum(v) AS total, min(v) AS lo FROM {t} GROUP BY g"
    notices = run_noticed(hw, f"CREATE MATERIALIZED VIEW {mv} AS {query}")
    assert len(notices) == 1, notices
    m = BACKFILL.fullmatch(notices[0][1])
    assert m, notices
    assert (m.group(1), m.group(2), m.group(3)) == (mv, "120", "120")
    # at once, without waiting for the Spark stage: the backfilled rows
    assert rows(hw, f"SELECT * FROM {mv}") == normalize(
        [(0, 40, 2460, 3), (1, 40, 2380, 1), (2, 40, 2420, 2)]
    )
    # read-your-writes: each SELECT right after the write sees it (it waits for the view)
    hw.execute(f"INSERT INTO {t} VALUES (1000, 7, 5)")
    assert rows(hw, f"SELECT * FROM {mv} WHERE g = 7") == normalize([(7, 1, 5, 5)])
    hw.execute(f"UPDATE {t} SET v = v + 100 WHERE g = 7")
    assert rows(hw, f"SELECT n, total FROM {mv} WHERE g = 7") == normalize([(1, 105)])
    hw.execute(f"UPDATE {t} SET g = 7 WHERE id IN (3, 6)")
    assert rows(hw, f"SELECT * FROM {mv} WHERE g IN (0, 7)") == normalize(
        [(0, 38, 2451, 9), (7, 3, 114, 3)]
    )
    hw.execute(f"DELETE FROM {t} WHERE g = 7")
    assert rows(hw, f"SELECT * FROM {mv} WHERE g = 7") == []
    hw.execute(f"DELETE FROM {t} WHERE id > 60")
    assert_equal_query(hw, mv, query)
    # a transaction of several statements: one epoch, seen once committed
    with hw.transaction():
        hw.execute(f"INSERT INTO {t} VALUES (2000, 9, 1), (2001, 9, 2)")
        hw.execute(f"UPDATE {t} SET v = 10 WHERE id = 2000")
        hw.execute(f"DELETE FROM {t} WHERE id = 1")
    assert rows(hw, f"SELECT n, total, lo FROM {mv} WHERE g = 9") == normalize([(2, 12, 2)])
    assert_equal_query(hw, mv, query)
    # fast-path single-row INSERTs (batched by the server) are seen as well
    for i in range(5):
        hw.execute(f"INSERT INTO {t} VALUES ({3000 + i}, 11, {i})")
        assert rows(hw, f"SELECT n FROM {mv} WHERE g = 11") == [(float(i + 1),)]
    assert_equal_query(hw, mv, query)


def test_reads_from_other_sessions(hw: psycopg.Connection, hw_server: HeadwaterServer) -> None:
    """Freshness across sessions: 'latest' waits for every acknowledged write, a
    freshness token (headwater.read_after) for the writes up to it."""
    t, mv = uniq(), uniq()
    hw.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v int)")
    hw.execute(f"CREATE MATERIALIZED VIEW {mv} AS SELECT count(*) AS n, sum(v) AS s FROM {t}")
    with psycopg.connect(hw_server.dsn, autocommit=True) as other:
        other.execute(TIMEOUT)
        other.execute("SET headwater.freshness = 'latest'")
        for i in range(1, 4):
            hw.execute(f"INSERT INTO {t} VALUES ({i}, {i * 10})")
            assert rows(other, f"SELECT * FROM {mv}") == normalize([(i, 5 * i * (i + 1))])
        other.execute("SET headwater.freshness = 'session'")
        hw.execute(f"INSERT INTO {t} VALUES (4, 40)")
        token = hw.info.parameter_status("headwater_epoch")
        assert token is not None and int(token) > 0
        other.execute(f"SET headwater.read_after = '{token}'")
        assert rows(other, f"SELECT * FROM {mv}") == normalize([(4, 100)])
        other.execute("SET headwater.freshness = 'none'")  # whatever is fresh: no wait
        assert len(other.execute(f"SELECT * FROM {mv}").fetchall()) == 1


def test_views_over_views_inline_views_and_joins(hw: psycopg.Connection) -> None:
    t, u, big, agg, top, both, plain = (uniq() for _ in range(7))
    hw.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, k int, v int)")
    hw.execute(f"CREATE TABLE {u} (k int PRIMARY KEY, label text)")
    hw.execute(f"INSERT INTO {t} SELECT x, x % 4, x FROM generate_series(1, 40) AS s(x)")
    hw.execute(f"INSERT INTO {u} VALUES (0, 'zero'), (1, 'one'), (2, 'two')")
    # an inline view inside a materialized view
    hw.execute(f"CREATE VIEW {big} AS SELECT id, k, v FROM {t} WHERE v > 10")
    q_agg = f"SELECT k, count(*) AS n, sum(v) AS total FROM {big} GROUP BY k"
    hw.execute(f"CREATE MATERIALIZED VIEW {agg} AS {q_agg}")
    # a materialized view over a materialized view, and one joining a table with it
    q_top = f"SELECT n, count(*) AS groups FROM {agg} GROUP BY n"
    hw.execute(f"CREATE MATERIALIZED VIEW {top} AS {q_top}")
    q_both = f"SELECT {u}.label, {agg}.total FROM {u} JOIN {agg} ON {u}.k = {agg}.k"
    hw.execute(f"CREATE MATERIALIZED VIEW {both} AS {q_both}")
    # a plain view over a materialized view
    hw.execute(f"CREATE VIEW {plain} AS SELECT k, total FROM {agg} WHERE n > 5")
    exp = {
        agg: f"SELECT k, count(*) AS n, sum(v) AS total FROM {t} WHERE v > 10 GROUP BY k",
        top: f"SELECT n, count(*) AS groups FROM ({q_agg}) a GROUP BY n",
        both: f"SELECT {u}.label, a.total FROM {u} JOIN ({q_agg}) a ON {u}.k = a.k",
        plain: f"SELECT k, total FROM ({q_agg}) a WHERE n > 5",
    }
    writes = [
        f"INSERT INTO {t} VALUES (100, 1, 1000), (101, 3, 5)",
        f"UPDATE {t} SET k = 2 WHERE id BETWEEN 11 AND 20",
        f"INSERT INTO {u} VALUES (3, 'three')",
        f"UPDATE {u} SET label = 'ONE' WHERE k = 1",
        f"DELETE FROM {t} WHERE k = 0",
        f"DELETE FROM {u} WHERE k = 2",
        f"UPDATE {t} SET v = 0 WHERE id > 30",
    ]
    for w in [None, *writes]:
        if w:
            hw.execute(w)
        for view, query in exp.items():
            assert_equal_query(hw, view, query)
            assert_same_epoch_equal(hw, view, query)
        # a table joined with a materialized view in one statement, at one epoch
        join = f"SELECT {t}.id, {agg}.n FROM {t} JOIN {agg} ON {t}.k = {agg}.k WHERE {t}.v > 10"
        inline = f"SELECT {t}.id, a.n FROM {t} JOIN ({exp[agg]}) a ON {t}.k = a.k WHERE {t}.v > 10"
        assert rows(hw, join) == rows(hw, inline)
        assert hw.execute(f"SELECT count(*) FROM ({join} EXCEPT ALL {inline}) d").fetchone() == (0,)


# -- DDL: names, dependencies and PostgreSQL's wording ------------------------------------


def test_replacing_a_view_a_materialized_view_reads_is_refused(hw: psycopg.Connection) -> None:
    """A maintained view's state was built from the old definition: CREATE OR REPLACE of
    a view under it (directly or through another view) is refused, naming both."""
    t, base, mid, mv, free = (uniq() for _ in range(5))
    hw.execute(f"CREATE TABLE {t} (k int, v int)")
    hw.execute(f"INSERT INTO {t} VALUES (1, 10), (2, 20)")
    hw.execute(f"CREATE VIEW {base} AS SELECT k, v FROM {t} WHERE v > 5")
    hw.execute(f"CREATE VIEW {mid} AS SELECT k, v FROM {base}")
    hw.execute(f"CREATE MATERIALIZED VIEW {mv} AS SELECT k, sum(v) AS s FROM {mid} GROUP BY k")
    for view in (base, mid):
        with pytest.raises(psycopg.errors.FeatureNotSupported) as e:
            hw.execute(f"CREATE OR REPLACE VIEW {view} AS SELECT k, v FROM {t} WHERE v > 15")
        assert e.value.diag.message_primary == (
            f'cannot replace view "{view}" because materialized view "{mv}" depends on it'
        )
    assert rows(hw, f"SELECT k, s FROM {mv} ORDER BY k") == [(1, 10), (2, 20)]
    hw.execute(f"CREATE VIEW {free} AS SELECT k FROM {t}")
    hw.execute(f"CREATE OR REPLACE VIEW {free} AS SELECT k FROM {t} WHERE k > 1")  # no matview
    assert rows(hw, f"SELECT k FROM {free}") == [(2,)]


def test_drop_and_dependents_as_postgres(hw: psycopg.Connection, pg: psycopg.Connection) -> None:
    t, m1, m2, v3, m4, m5, m6 = (uniq("dd") for _ in range(7))
    in_both(
        hw,
        pg,
        f"CREATE TABLE {t} (id int PRIMARY KEY, a int, b int)",
        f"INSERT INTO {t} VALUES (1, 1, 2), (2, 1, 3), (3, 2, 4)",
        f"CREATE MATERIALIZED VIEW {m1} AS SELECT a, count(*) AS n FROM {t} GROUP BY a",
        f"CREATE MATERIALIZED VIEW {m2} AS SELECT n, count(*) AS c FROM {m1} GROUP BY n",
        f"CREATE VIEW {v3} AS SELECT * FROM {m2}",
        f"CREATE MATERIALIZED VIEW {m4} AS SELECT id FROM {t} WHERE b > 2",
        f"CREATE MATERIALIZED VIEW {m5} AS SELECT a FROM {t}",
        # depends on the table twice: directly and through m1
        f"CREATE MATERIALIZED VIEW {m6} AS SELECT {t}.id, {m1}.n FROM {t} JOIN {m1} USING (a)",
    )
    # 2BP01: every object that depends on it, directly or not, as PostgreSQL lists them
    for sql in (
        f"DROP TABLE {t}",
        f"DROP MATERIALIZED VIEW {m1}",
        f"DROP MATERIALIZED VIEW {m2}",
    ):
        exp, got = error_of(pg, sql), error_of(hw, sql)
        assert got[:3] == exp[:3], sql
        assert got[0] == "2BP01"
    # the wrong DROP for the kind of relation (42809), a missing one with IF EXISTS
    for sql in (
        f"DROP VIEW {m1}",
        f"DROP MATERIALIZED VIEW {v3}",
        f"DROP TABLE {m1}",
        f"DROP MATERIALIZED VIEW {t}",
        f"DROP MATERIALIZED VIEW {m1}_nope",
    ):
        exp, got = error_of(pg, sql), error_of(hw, sql)
        assert got[:3] == exp[:3], sql
    sql = f"DROP MATERIALIZED VIEW IF EXISTS {m1}_nope"
    assert run_noticed(hw, sql) == run_noticed(pg, sql)
    # nothing was dropped by the failed statements
    in_both(hw, pg, f"INSERT INTO {t} VALUES (4, 2, 9)")
    assert rows(hw, f"SELECT * FROM {v3}") == normalize([(2, 2)])
    # CASCADE: PostgreSQL's NOTICE (one object; several, listed in DETAIL)
    sql = f"DROP MATERIALIZED VIEW {m2} CASCADE"
    assert run_noticed(hw, sql) == run_noticed(pg, sql)
    assert error_of(hw, f"SELECT * FROM {v3}")[0] == "42P01"
    in_both(
        hw, pg, f"CREATE MATERIALIZED VIEW {m2} AS SELECT n, count(*) AS c FROM {m1} GROUP BY n"
    )
    in_both(hw, pg, f"CREATE VIEW {v3} AS SELECT * FROM {m2}")
    sql = f"DROP MATERIALIZED VIEW {m5}"
    assert run_noticed(hw, sql) == run_noticed(pg, sql) == []
    sql = f"DROP TABLE {t} CASCADE"
    assert run_noticed(hw, sql) == run_noticed(pg, sql)
    for name in (t, m1, m2, v3, m4, m5, m6):
        assert error_of(hw, f"SELECT * FROM {name}")[0] == "42P01"
    names = [r[0] for r in hw.execute("SELECT name FROM headwater_catalog.views")]
    assert not {m1, m2, m4, m5, m6} & set(names)
    # the names can be used again, and the new views are maintained
    hw.execute(f"CREATE TABLE {t} (a int)")
    hw.execute(f"CREATE MATERIALIZED VIEW {m1} AS SELECT sum(a) AS s FROM {t}")
    hw.execute(f"INSERT INTO {t} VALUES (5), (6)")
    assert rows(hw, f"SELECT * FROM {m1}") == [(11.0,)]


def test_create_errors_as_postgres(hw: psycopg.Connection, pg: psycopg.Connection) -> None:
    t, mv = uniq("ce"), uniq("ce")
    in_both(
        hw,
        pg,
        f"CREATE TABLE {t} (id int PRIMARY KEY, a int)",
        f"INSERT INTO {t} VALUES (1, 10)",
        f"CREATE MATERIALIZED VIEW {mv} AS SELECT id, a FROM {t}",
    )
    # 42P07, and IF NOT EXISTS (a NOTICE, nothing changed)
    for sql in (
        f"CREATE MATERIALIZED VIEW {mv} AS SELECT 1 AS x",
        f"CREATE MATERIALIZED VIEW {t} AS SELECT 1 AS x",
    ):
        exp, got = error_of(pg, sql), error_of(hw, sql)
        assert got[:3] == exp[:3] and got[0] == "42P07", sql
    sql = f"CREATE MATERIALIZED VIEW IF NOT EXISTS {mv} AS SELECT 1 AS x"
    assert run_noticed(hw, sql) == run_noticed(pg, sql)
    assert rows(hw, f"SELECT * FROM {mv}") == [(1.0, 10.0)]
    # binding errors keep PostgreSQL's SQLSTATEs and nothing is created
    for sql in (
        f"CREATE MATERIALIZED VIEW {mv}_x AS SELECT nope FROM {t}",
        f"CREATE MATERIALIZED VIEW {mv}_x AS SELECT a FROM {t}_nope",
    ):
        assert error_of(hw, sql)[:2] == error_of(pg, sql)[:2], sql
    assert error_of(hw, f"SELECT * FROM {mv}_x")[0] == "42P01"


def test_writes_into_a_materialized_view_refused_as_postgres(
    hw: psycopg.Connection, pg: psycopg.Connection
) -> None:
    t, mv = uniq("wr"), uniq("wr")
    in_both(
        hw,
        pg,
        f"CREATE TABLE {t} (id int PRIMARY KEY, a int)",
        f"INSERT INTO {t} VALUES (1, 10)",
        f"CREATE MATERIALIZED VIEW {mv} AS SELECT id, a FROM {t}",
    )
    for sql in (
        f"INSERT INTO {mv} VALUES (2, 20)",
        f"INSERT INTO {mv} SELECT * FROM {t}",
        f"UPDATE {mv} SET a = 0",
        f"DELETE FROM {mv}",
        f"TRUNCATE {mv}",
    ):
        exp, got = error_of(pg, sql), error_of(hw, sql)
        assert got[:3] == exp[:3], sql
        assert got[0] == "42809"
    assert rows(hw, f"SELECT * FROM {mv}") == [(1.0, 10.0)]


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("SELECT id, var_pop(a) OVER () AS v FROM {t}", "window function var_pop"),
        ("SELECT id, array_agg(a) OVER (PARTITION BY a) AS r FROM {t}", "window function"),
        ("SELECT id, now() AS at FROM {t}", "now()"),
        ("SELECT id FROM {t} WHERE a > random()", "random()"),
        (
            "SELECT a, (SELECT max(a) FROM {t} u WHERE u.a < s.a) AS m FROM {t} s GROUP BY a",
            "correlated",
        ),
        (
            "WITH RECURSIVE r(n) AS (SELECT a FROM {t} UNION SELECT r.n FROM r"
            " LEFT JOIN {t} ON {t}.a = r.n + 1) SELECT n FROM r",
            "RECURSIVE",
        ),
        ("SELECT id FROM {t} WHERE a > ALL (SELECT a FROM {t})", "subquery in this position"),
    ],
)
def test_out_of_scope_is_0a000_naming_the_construct(
    hw: psycopg.Connection, query: str, named: str
) -> None:
    t, mv = uniq("os"), uniq("os")
    hw.execute(f"CREATE TABLE {t} (id int, a int)")
    state, message, _, _ = error_of(hw, f"CREATE MATERIALIZED VIEW {mv} AS {query.format(t=t)}")
    assert state == "0A000", message
    assert named.lower() in message.lower(), message
    assert error_of(hw, f"SELECT * FROM {mv}")[0] == "42P01"
    assert hw.execute(
        "SELECT count(*) FROM headwater_catalog.views WHERE name = %s", (mv,)
    ).fetchone() == (0,)


# -- failures -------------------------------------------------------------------------


def test_view_failing_at_run_time_stops_alone(hw: psycopg.Connection) -> None:
    t, bad, good, other_t, other = (uniq("rt") for _ in range(5))
    hw.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, a int, b int)")
    hw.execute(f"CREATE TABLE {other_t} (id int PRIMARY KEY)")
    hw.execute(f"INSERT INTO {t} VALUES (1, 10, 2)")
    hw.execute(f"CREATE MATERIALIZED VIEW {bad} AS SELECT id, a / b AS q FROM {t}")
    hw.execute(f"CREATE MATERIALIZED VIEW {good} AS SELECT count(*) AS n FROM {t}")
    hw.execute(f"CREATE MATERIALIZED VIEW {other} AS SELECT count(*) AS n FROM {other_t}")
    assert rows(hw, f"SELECT * FROM {bad}") == normalize([(1, 5)])
    hw.execute(f"INSERT INTO {t} VALUES (2, 1, 0)")  # acknowledged: the table has it
    state, message, _, _ = error_of(hw, f"SELECT * FROM {bad}")
    assert "division by zero" in message.lower() and bad in message, message
    assert state == "22012", state
    status, error = hw.execute(
        "SELECT status, error FROM headwater_catalog.views WHERE name = %s", (bad,)
    ).fetchone()
    assert status == "error" and "division by zero" in error.lower(), (status, error)
    # reading it among other relations fails too; the others go on
    assert error_of(hw, f"SELECT * FROM {good}, {bad}")[0] == state
    assert hw.execute(f"SELECT count(*) FROM {t}").fetchone() == (2,)
    hw.execute(f"INSERT INTO {t} VALUES (3, 1, 1)")
    hw.execute(f"INSERT INTO {other_t} VALUES (1), (2)")
    assert rows(hw, f"SELECT * FROM {good}") == [(3.0,)]
    assert rows(hw, f"SELECT * FROM {other}") == [(2.0,)]
    statuses = dict(
        hw.execute(
            "SELECT name, status FROM headwater_catalog.views WHERE name IN (%s, %s, %s)",
            (bad, good, other),
        ).fetchall()
    )
    assert statuses == {bad: "error", good: "running", other: "running"}
    # the failed view can be dropped and created again once the data allows it
    hw.execute(f"DROP MATERIALIZED VIEW {bad}")
    hw.execute(f"DELETE FROM {t} WHERE b = 0")
    hw.execute(f"CREATE MATERIALIZED VIEW {bad} AS SELECT id, a / b AS q FROM {t}")
    assert rows(hw, f"SELECT * FROM {bad}") == normalize([(1, 5), (3, 1)])


def test_failed_backfill_leaves_no_view(hw: psycopg.Connection, pg: psycopg.Connection) -> None:
    t, mv = uniq("fb"), uniq("fb")
    in_both(
        hw,
        pg,
        f"CREATE TABLE {t} (id int PRIMARY KEY, a int, b int)",
        f"INSERT INTO {t} VALUES (1, 10, 2), (2, 5, 0)",
    )
    sql = f"CREATE MATERIALIZED VIEW {mv} AS SELECT id, a / b AS q FROM {t}"
    exp, got = error_of(pg, sql), error_of(hw, sql)
    assert got[:2] == exp[:2] == ("22012", "division by zero")
    assert error_of(hw, f"SELECT * FROM {mv}")[0] == "42P01"
    for q in (
        "SELECT count(*) FROM headwater_catalog.views WHERE name = %s",
        "SELECT count(*) FROM pg_matviews WHERE matviewname = %s",
        "SELECT count(*) FROM pg_class WHERE relname = %s",
    ):
        assert hw.execute(q, (mv,)).fetchone() == (0,), q
    # in a transaction block: the CREATE fails, and with it the whole transaction
    outcomes = []
    for c in (pg, hw):
        c.execute("BEGIN")
        c.execute(f"INSERT INTO {t} VALUES (3, 1, 1)")
        failed = error_of(c, sql)[:2]
        try:
            tag = c.execute("COMMIT").statusmessage
        except psycopg.Error as e:
            tag = e.sqlstate
        outcomes.append((failed, tag, c.execute(f"SELECT count(*) FROM {t}").fetchone()))
    assert outcomes[1] == outcomes[0] == (("22012", "division by zero"), "ROLLBACK", (2,))
    assert error_of(hw, f"SELECT * FROM {mv}")[0] == "42P01"
    # the name is free: once the data allows it, the view is created
    hw.execute(f"DELETE FROM {t} WHERE b = 0")
    hw.execute(sql)
    assert rows(hw, f"SELECT * FROM {mv}") == normalize(
        [(i, a // b) for i, a, b in hw.execute(f"SELECT * FROM {t}").fetchall()]
    )


# -- introspection ----------------------------------------------------------------------


def test_headwater_catalog_views_and_epochs(hw: psycopg.Connection) -> None:
    t, mv = uniq("hc"), uniq("hc")
    hw.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, g int)")
    hw.execute(f"INSERT INTO {t} SELECT x, x % 5 FROM generate_series(1, 50) AS s(x)")
    query = f"SELECT g, count(*) AS n FROM {t} GROUP BY g"
    hw.execute(f"CREATE MATERIALIZED VIEW {mv} AS {query}")
    created = int(hw.info.parameter_status("headwater_epoch") or 0)
    hw.execute(f"INSERT INTO {t} VALUES (100, 7), (101, 7), (102, 8)")
    written = int(hw.info.parameter_status("headwater_epoch") or 0)
    assert written > created > 0
    assert len(hw.execute(f"SELECT * FROM {mv}").fetchall()) == 7  # waits for the view
    cur = hw.execute("SELECT * FROM headwater_catalog.views WHERE name = %s", (mv,))
    row = dict(zip([d.name for d in cur.description or ()], cur.fetchone() or (), strict=True))
    assert row["schema"] == "public" and row["status"] == "running" and row["error"] is None
    assert f"FROM {t}" in row["definition"]
    assert row["created_epoch"] == created
    assert row["frontier"] >= written
    assert row["lag_epochs"] >= 0 and row["lag_ms"] >= 0
    assert row["rows"] == 7 and row["state_rows"] > 0
    assert (row["backfill_rows_done"], row["backfill_rows_total"]) == (50, 50)
    # lag: frontier + lag_epochs is an epoch the server has made visible
    newest = hw.execute("SELECT max(epoch) FROM headwater_catalog.epochs").fetchone()[0]
    assert row["frontier"] + row["lag_epochs"] <= newest
    # the epochs: each write's epoch names the table and the rows it changed
    hw.execute(f"UPDATE {t} SET g = 9 WHERE id = 100")
    updated = int(hw.info.parameter_status("headwater_epoch") or 0)
    changed = dict(
        (e, n)
        for e, n in hw.execute(
            "SELECT epoch, rows_changed FROM headwater_catalog.epochs WHERE table_name = %s",
            (t,),
        ).fetchall()
    )
    assert changed[written] == 3 and changed[updated] == 2  # an UPDATE is -old +new
    assert created not in changed  # CREATE MATERIALIZED VIEW changed no table
    assert rows(hw, f"SELECT * FROM {mv} WHERE g = 9") == [(9.0, 1.0)]
    frontier = hw.execute(
        "SELECT frontier FROM headwater_catalog.views WHERE name = %s", (mv,)
    ).fetchone()[0]
    assert frontier >= updated


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")
def test_psql_dm_and_pg_matviews_as_postgres(
    hw_server: HeadwaterServer, pg_oracle: Any, hw: psycopg.Connection, pg: psycopg.Connection
) -> None:
    schema = uniq("dm")
    setup = (
        f"CREATE SCHEMA {schema}",
        f"CREATE TABLE {schema}.orders (id int PRIMARY KEY, customer text, amount int)",
        f"INSERT INTO {schema}.orders VALUES (1, 'ada', 5), (2, 'bob', 7)",
        f"CREATE MATERIALIZED VIEW {schema}.totals AS "
        f"SELECT customer, sum(amount) AS total FROM {schema}.orders GROUP BY customer",
        f"CREATE MATERIALIZED VIEW {schema}.big AS SELECT id FROM {schema}.orders WHERE amount > 6",
        f"CREATE VIEW {schema}.plain AS SELECT id FROM {schema}.orders",
    )
    in_both(hw, pg, *setup)
    script = f"\\dm {schema}.*\n\\dm {schema}.tot*\n\\dv {schema}.*\n"

    def psql(host: str, port: int) -> str:
        return run_psql(host, port, script, timeout=60)

    exp, got = psql(pg_oracle.host, pg_oracle.port), psql(hw_server.host, hw_server.port)
    assert "materialized view" in got and "totals" in got, got
    assert got == exp
    q = (
        "SELECT schemaname, matviewname, matviewowner, tablespace, hasindexes, ispopulated "
        "FROM pg_matviews WHERE schemaname = %s ORDER BY matviewname"
    )
    assert hw.execute(q, (schema,)).fetchall() == pg.execute(q, (schema,)).fetchall()
    q = (
        "SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n "
        "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind IN ('m', 'v') ORDER BY 1"
    )
    assert hw.execute(q, (schema,)).fetchall() == pg.execute(q, (schema,)).fetchall()
    q = (
        "SELECT table_name, table_type FROM information_schema.tables "
        "WHERE table_schema = %s ORDER BY 1"
    )
    assert hw.execute(q, (schema,)).fetchall() == pg.execute(q, (schema,)).fetchall()
    pg.execute(f"DROP SCHEMA {schema} CASCADE")


# -- restart ---------------------------------------------------------------------------


RESTART_VIEWS = {
    "agg": "SELECT g, count(*) AS n, sum(v) AS total, max(v) AS hi FROM t GROUP BY g",
    "joined": "SELECT t.id, t.v, u.label FROM t JOIN u ON t.g = u.g",
    "distinct_g": "SELECT DISTINCT g FROM t",
    "over_agg": "SELECT n, count(*) AS groups FROM agg GROUP BY n",
    # an array column in the catalog: a restart could not load its type (KeyError '_int4')
    "lists": "SELECT g, array_agg(v ORDER BY id) AS vs FROM t GROUP BY g",
}
EXPECTED = {
    **RESTART_VIEWS,
    "over_agg": f"SELECT n, count(*) AS groups FROM ({RESTART_VIEWS['agg']}) a GROUP BY n",
}


def _check_restart_views(server: HeadwaterServer) -> None:
    with psycopg.connect(server.dsn, autocommit=True) as c:
        c.execute(TIMEOUT)
        c.execute("SET headwater.freshness = 'latest'")  # every acknowledged write
        for view, query in EXPECTED.items():
            assert_equal_query(c, view, query)


def _write(server: HeadwaterServer, first: int, n: int, check: bool) -> None:
    """n epochs of writes (ids from `first`); with check, the views after each."""
    with psycopg.connect(server.dsn, autocommit=True) as c:
        c.execute(TIMEOUT)
        for i in range(first, first + n):
            with c.transaction():
                c.execute(f"INSERT INTO t VALUES ({i}, {i % 4}, {i})")
                c.execute(f"UPDATE t SET v = v + 1, g = {i % 5} WHERE id = {i % 30 + 1}")
                c.execute(f"DELETE FROM t WHERE id = {i * 7 % 30 + 1}")
            if i % 5 == 0:
                c.execute(f"UPDATE u SET label = 'l{i}' WHERE g = {i % 4}")
            if check:
                for view, query in EXPECTED.items():
                    assert_equal_query(c, view, query)


def _stop(server: HeadwaterServer, *, kill: bool) -> None:
    assert server.proc is not None
    if kill:
        server.kill()
        return
    server.proc.terminate()  # SIGTERM: a clean shutdown, stage included
    assert server.proc.wait(timeout=60) is not None, server.log_tail()


def test_restart_after_sigterm_and_sigkill() -> None:
    """Views survive a clean stop and a SIGKILL: equal to their query after restart,
    and maintained from there on."""
    server = start_temp_server()
    try:
        with psycopg.connect(server.dsn, autocommit=True) as c:
            c.execute("CREATE TABLE t (id int PRIMARY KEY, g int, v int)")
            c.execute("CREATE TABLE u (g int PRIMARY KEY, label text)")
            c.execute("INSERT INTO t SELECT x, x % 4, x FROM generate_series(1, 30) AS s(x)")
            c.execute("INSERT INTO u VALUES (0, 'a'), (1, 'b'), (2, 'c')")
            for name, query in RESTART_VIEWS.items():
                c.execute(f"CREATE MATERIALIZED VIEW {name} AS {query}")
        # acknowledged writes, then a clean stop, maybe before the stage ran at all
        _write(server, 100, 5, check=False)
        _stop(server, kill=False)
        server.start()
        _check_restart_views(server)
        _write(server, 200, 4, check=True)  # maintained after the restart
        _write(server, 300, 6, check=False)  # SIGKILL with epochs still to process
        _stop(server, kill=True)
        server.start()
        _check_restart_views(server)
        _write(server, 400, 4, check=True)
        with psycopg.connect(server.dsn, autocommit=True) as c:
            statuses = c.execute("SELECT name, status FROM headwater_catalog.views").fetchall()
        assert sorted(statuses) == sorted((n, "running") for n in RESTART_VIEWS)
    finally:
        server.stop()
