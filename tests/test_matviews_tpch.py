"""TPC-H 1, 3, 5, 6, 10, 12, 14 as materialized views through the server, under churn.

Everything goes over the wire (psycopg to a real `headwater start` and to PostgreSQL
15): the data is TPC-H from tpchgen-cli (scale factor 0.01, generated offline), loaded
with COPY into a schema of this test's own on both servers (the Headwater server is
shared by the whole test session). Then batches of INSERT/UPDATE/DELETE on lineitem
and orders (bench/tpch.py: `Churn`) go to both servers, as one transaction, as
single autocommit statements, or rolled back (Headwater only); after each batch
every view must equal its query on PostgreSQL.

Reads alternate between the writing session (headwater.freshness = session: its own
writes) and another session (freshness = latest: every acknowledged write), so both
freshness rules are exercised; neither may return a view older than the writes.

Queries 3 and 10 end in ORDER BY ... LIMIT, which materialized views refuse (0A000,
checked here): their views are the queries without ORDER BY/LIMIT (every group), and
the top rows are then read from the view with the original ORDER BY/LIMIT.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from bench import tpch
from tests.hwserver import HeadwaterServer

pytestmark = pytest.mark.oracle

SCALE = 0.01  # lineitem ~60 k rows, orders 15 k
BATCHES = 9
# The first read waits for the Spark stage to start (a JVM: 10-70 s on a loaded machine).
FRESHNESS_TIMEOUT = "240s"


@pytest.fixture(scope="module")
def tpch_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tpch.generate(tmp_path_factory.mktemp("tpch"), SCALE)


def _rows(cur: psycopg.Cursor[Any], sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    cur.execute(sql)
    assert cur.description is not None
    return [d.name for d in cur.description], cur.fetchall()


@pytest.fixture
def sessions(
    hw_server: HeadwaterServer, pg_oracle: Any
) -> Iterator[tuple[psycopg.Connection[Any], psycopg.Connection[Any], psycopg.Connection[Any]]]:
    """(Headwater writer, Headwater reader, PostgreSQL), each in this test's schema."""
    schema = f"tpch_mv_{os.getpid()}"
    hw = psycopg.connect(hw_server.dsn, autocommit=True)
    reader = psycopg.connect(hw_server.dsn, autocommit=True)
    pg = psycopg.connect(pg_oracle.dsn, autocommit=True)
    try:
        for c in (hw, pg):
            c.execute(f"CREATE SCHEMA {schema}")
        for c in (hw, reader, pg):
            c.execute(f"SET search_path TO {schema}")
        for c in (hw, reader):
            c.execute(f"SET headwater.freshness_timeout = '{FRESHNESS_TIMEOUT}'")
        hw.execute("SET headwater.freshness = 'session'")  # the default is 'latest'
        reader.execute("SET headwater.freshness = 'latest'")
        yield hw, reader, pg
    finally:
        # the views leave the shared server's Spark stage with the schema
        for name in reversed(tpch.QUERIES):
            try:
                hw.execute(f"DROP MATERIALIZED VIEW IF EXISTS {name}")
            except psycopg.Error:
                pass
        for c in (hw, pg):
            try:
                c.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            except psycopg.Error:
                pass
        for c in (hw, reader, pg):
            c.close()


def test_tpch_views_under_churn_equal_postgres(
    sessions: tuple[psycopg.Connection[Any], psycopg.Connection[Any], psycopg.Connection[Any]],
    tpch_data: Path,
) -> None:
    hw, reader, pg = sessions
    seed = random.randrange(1_000_000)
    loaded = tpch.load(pg, tpch_data)
    assert tpch.load(hw, tpch_data).rows == loaded.rows

    # the views without their ORDER BY ... LIMIT (the top-N is read from them below;
    # top-N views themselves: tests/test_engine_tpch22.py)
    for name, sql in tpch.QUERIES.items():
        hw.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")

    answers: dict[str, set[str]] = {name: set() for name in tpch.QUERIES}

    def check(step: str, conn: psycopg.Connection[Any]) -> None:
        bad: list[str] = []
        with pg.cursor() as pcur, conn.cursor() as hcur:
            for name, sql in tpch.QUERIES.items():
                want = _rows(pcur, sql)
                answers[name].add(repr(sorted(want[1])))
                bad += tpch.compare(name, want, _rows(hcur, f"SELECT * FROM {name}"))
            for name, top in tpch.TOP_N.items():  # the original top-N, read from the view
                cols = ", ".join(_rows(pcur, f"{tpch.QUERIES[name]} LIMIT 0")[0])
                want = _rows(pcur, tpch.QUERIES[name] + top)
                got = _rows(hcur, f"SELECT {cols} FROM {name}{top}")
                bad += tpch.compare(name, want, got)
        assert not bad, f"seed {seed}, {step}: {len(bad)} differences:\n" + "\n".join(bad[:10])

    check("after backfill", hw)
    churn = tpch.Churn(seed, next_orderkey=loaded.max_orderkey + 1)
    for b in range(BATCHES):
        # q5's few rows (one region, one year) escape the churn's key arithmetic now and
        # then; this statement reaches them at every batch
        stmts = churn.batch() + [
            "UPDATE lineitem SET l_extendedprice = l_extendedprice + 1 WHERE l_orderkey IN"
            " (SELECT o_orderkey FROM orders WHERE o_orderdate >= date '1994-01-01'"
            f" AND o_orderdate < date '1995-01-01' AND o_orderkey % 4 = {b % 4})"
        ]
        mode = ("transaction", "autocommit", "rolled back")[b % 3]
        if mode == "rolled back":  # nothing of it may show; then the next batch
            with hw.transaction(force_rollback=True):
                for s in stmts:
                    hw.execute(s)
            stmts = churn.batch()
            mode = "transaction"
        for conn in (hw, pg):
            if mode == "transaction":
                with conn.transaction():
                    for s in stmts:
                        conn.execute(s)
            else:
                for s in stmts:
                    conn.execute(s)
        # the writer reads its own writes; the other session every acknowledged write
        check(f"batch {b + 1} ({mode})", hw if b % 2 else reader)

    # the churn reached every view (else the checks above proved little)
    assert all(len(a) > 1 for a in answers.values()), {n: len(a) for n, a in answers.items()}
    wrote = int(hw.info.parameter_status("headwater_epoch") or 0)
    assert wrote > 0
    views = {
        r[0]: r[1:]
        for r in hw.execute(
            "SELECT name, status, error, frontier FROM headwater_catalog.views"
            " WHERE schema = current_schema()"
        ).fetchall()
    }
    assert set(views) == set(tpch.QUERIES)
    for name, (status, error, frontier) in views.items():
        assert status == "running" and error is None, (name, status, error)
        assert frontier >= wrote, (name, frontier, wrote)
