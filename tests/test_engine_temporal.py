"""Temporal filters (`now()`, `mz_now()`, CURRENT_TIMESTAMP in WHERE) in views,
against PostgreSQL 15 at every epoch.

Each epoch closes at a known time (`closed_at`, 7 s after the previous one) and the
spool carries the clock's change with it, as the server spools it (planner/temporal.py).
Table ev(id, ts, k) gets random INSERT/UPDATE/DELETE with timestamps around the clock,
so rows enter the views (`now() >= ts`) and leave them (`ts + interval > now()`) as
time passes, also at epochs that write nothing. PostgreSQL evaluates each view's
query with now() replaced by the epoch's closed_at. Views are created over existing
data, then advanced without Spark in batches of 1-5 epochs. HW_ENGINE_SEED=n reruns.
"""

from __future__ import annotations

import os
import random
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pytest
from headwater.catalog.catalog import Catalog
from headwater.catalog.objects import Column, Table
from headwater.catalog.types import INT4, TIMESTAMPTZ, ColumnType
from headwater.engine.delta import ScanInfo
from headwater.engine.engine import Engine
from headwater.engine.spool import SpoolWriter
from headwater.planner.incremental import incrementalize
from headwater.planner.temporal import CLOCK_DUCKDB_TYPE, CLOCK_OID, clock_changes

from headwater.errors import SQLError
from tests.test_engine_support import (
    advance_at_random,
    assert_views_equal,
    normalize,
    plan_of,
)

pytestmark = pytest.mark.oracle

EV = 16500
START = datetime(2026, 11, 1, tzinfo=UTC).timestamp()
STEP = 7.0  # seconds between epochs

QUERIES = [
    "SELECT id, k FROM ev WHERE ts + interval '60 seconds' > now()",
    "SELECT k, count(*) AS n FROM ev WHERE mz_now() >= ts AND mz_now() < ts + interval '30 seconds'"
    " GROUP BY k",
    "SELECT count(*) AS n, max(ts) AS latest FROM ev WHERE ts <= now() - interval '20 seconds'",
    "SELECT id, ts FROM ev WHERE k > 1 AND ts BETWEEN CURRENT_TIMESTAMP - interval '45 seconds'"
    " AND CURRENT_TIMESTAMP",
    "SELECT DISTINCT ON (k) k, id, ts FROM ev WHERE ts > now() - interval '1 minute'"
    " ORDER BY k, ts DESC, id",
    "SELECT k, sum(id) AS s FROM ev WHERE now() < ts + k * interval '10 seconds'"
    " GROUP BY ROLLUP (k)",
    "SELECT date_trunc('minute', ts) AS m, count(*) AS n FROM ev GROUP BY 1",
]
_ORIGIN = "'1970-01-01 00:00:00+00'::timestamptz"
# TUMBLE and HOP (RisingWave's), with the same windows in plain SQL for PostgreSQL
WINDOWED = {
    "SELECT k, window_start, window_end, count(*) AS n FROM TUMBLE(ev, ts, INTERVAL '10' SECOND)"
    " GROUP BY k, window_start, window_end": "SELECT k, ws, ws + interval '10 seconds', count(*)"
    f" FROM (SELECT k, date_bin(interval '10 seconds', ts, {_ORIGIN}) AS ws FROM ev) x"
    " GROUP BY k, ws",
    "SELECT window_start, window_end, max(id) AS m, count(*) AS n FROM HOP(ev, ts, interval"
    " '5 seconds', interval '15 seconds') GROUP BY window_start, window_end": "SELECT ws, ws +"
    " interval '15 seconds', max(id), count(*) FROM (SELECT id, date_bin(interval '5 seconds',"
    f" ts, {_ORIGIN}) - g * interval '5 seconds' AS ws FROM ev, generate_series(0, 2) g"
    " WHERE ts IS NOT NULL) x GROUP BY ws",
    "SELECT h.id, h.window_start FROM HOP(ev, ts, interval '10 seconds', interval '20 seconds')"
    " AS h WHERE h.window_end > now()": "SELECT id, ws FROM (SELECT id, date_bin(interval"
    f" '10 seconds', ts, {_ORIGIN}) - g * interval '10 seconds' AS ws FROM ev,"
    " generate_series(0, 1) g WHERE ts IS NOT NULL) x WHERE ws + interval '20 seconds' > now()",
}


QUERIES += list(WINDOWED)


def _catalog() -> Catalog:
    c = Catalog()
    cols = (Column("id", ColumnType(INT4, -1)), Column("ts", ColumnType(TIMESTAMPTZ, -1)))
    c.add_relation(Table(EV, "public", "ev", (*cols, Column("k", ColumnType(INT4, -1)))))
    return c


SCANS = {
    EV: ScanInfo(EV, ["id", "ts", "k"], ["INTEGER", "TIMESTAMPTZ", "INTEGER"]),
    CLOCK_OID: ScanInfo(CLOCK_OID, ["now"], [CLOCK_DUCKDB_TYPE]),
}


def oracle_sql(sql: str, at: float) -> str:
    """The query as PostgreSQL evaluates it at an epoch closed at `at`."""
    stamp = f"'{datetime.fromtimestamp(at, UTC).isoformat()}'::timestamptz"
    sql = WINDOWED.get(sql, sql)
    sql = re.sub(r"\b(now|mz_now)\(\)", stamp, sql)
    return sql.replace("CURRENT_TIMESTAMP", stamp)


class Workload:
    def __init__(self, pg: psycopg.Connection, spool: Path, seed: int) -> None:
        self.pg, self.rng = pg, random.Random(seed)
        self.writer = SpoolWriter(spool)
        self.live: dict[int, tuple] = {}
        self.epoch_no, self.next_id = 0, 1
        self.closed_at: dict[int, float] = {}
        with pg.cursor() as cur:
            cur.execute("DROP TABLE IF EXISTS ev")
            cur.execute("CREATE TABLE ev (id int PRIMARY KEY, ts timestamptz, k int)")
        pg.commit()

    def _row(self, rid: int, at: float) -> tuple:
        r = self.rng
        ts = None if r.random() < 0.05 else at + r.randrange(-90, 40)
        stamp = datetime.fromtimestamp(ts, UTC) if ts is not None else None
        return (rid, stamp, r.choice([None, 0, 1, 2, 3]))

    def epoch(self) -> int:
        """One epoch: some writes (or none), closed STEP seconds after the previous."""
        self.epoch_no += 1
        at = START + STEP * self.epoch_no
        rows: list[tuple] = []
        with self.pg.cursor() as cur:
            for _ in range(self.rng.choice([0, 0, 1, 2, 4])):
                op = self.rng.random()
                if op < 0.6 or len(self.live) < 3:
                    rid, self.next_id = self.next_id, self.next_id + 1
                    new = self.live[rid] = self._row(rid, at)
                    rows.append((*new, 1))
                    cur.execute("INSERT INTO ev VALUES (%s, %s, %s)", new)
                elif op < 0.8:
                    rid = self.rng.choice(list(self.live))
                    old, new = self.live[rid], self._row(rid, at)
                    self.live[rid] = new
                    rows += [(*old, -1), (*new, 1)]
                    cur.execute("UPDATE ev SET ts = %s, k = %s WHERE id = %s", (*new[1:], rid))
                else:
                    rid = self.rng.choice(list(self.live))
                    rows.append((*self.live.pop(rid), -1))
                    cur.execute("DELETE FROM ev WHERE id = %s", (rid,))
        self.pg.commit()
        changes = {CLOCK_OID: clock_changes(self.closed_at.get(self.epoch_no - 1), at)}
        if rows:
            data = list(zip(*rows, strict=True))
            changes[EV] = pa.table(
                {
                    "id": pa.array(data[0], pa.int32()),
                    "ts": pa.array(data[1], pa.timestamp("us", tz="UTC")),
                    "k": pa.array(data[2], pa.int32()),
                    "_hw_w": pa.array(data[3], pa.int32()),
                }
            )
        self.closed_at[self.epoch_no] = at
        self.writer.write_epoch(self.epoch_no, changes)
        return self.epoch_no


@pytest.fixture
def pg(pg_oracle: object) -> Iterator[psycopg.Connection]:
    with psycopg.connect(pg_oracle.dsn) as c:  # type: ignore[attr-defined]
        yield c


def _expect(pg: psycopg.Connection, sqls: list[str], at: float) -> list[list[tuple]]:
    out = []
    with pg.cursor() as cur:
        for sql in sqls:
            cur.execute(oracle_sql(sql, at))
            out.append(normalize(cur.fetchall()))
    pg.commit()
    return out


def test_temporal_views_equal_postgres_at_every_epoch(
    pg: psycopg.Connection, tmp_path: Path
) -> None:
    seed = int(os.environ.get("HW_ENGINE_SEED", random.randrange(1_000_000)))
    rng = random.Random(seed)
    work = Workload(pg, tmp_path / "spool", seed)
    for _ in range(15):
        work.epoch()
    cat = _catalog()
    engine = Engine(tmp_path / "state", tmp_path / "spool")
    for i, sql in enumerate(QUERIES):
        plan = plan_of(sql, cat)
        engine.create_view(80000 + i, plan, {o: SCANS[o] for o in plan.tables}, at_epoch=15)
    expected = {15: _expect(pg, QUERIES, work.closed_at[15])}
    expected |= advance_at_random(
        engine, work, rng, 45, lambda e: _expect(pg, QUERIES, work.closed_at[e])
    )
    assert_views_equal(engine, expected, 80000, QUERIES, seed)


@pytest.mark.parametrize(
    ("sql", "named"),
    [
        ("SELECT id, now() AS at FROM ev", "now()"),
        ("SELECT k FROM ev GROUP BY k HAVING max(ts) > now()", "now()"),
        ("SELECT id FROM ev WHERE ts > now() OR k = 1", ""),
    ],
)
def test_clock_outside_where_conjuncts(sql: str, named: str) -> None:
    if not named:  # a disjunction is still one conjunct: planned as a temporal filter
        assert CLOCK_OID in plan_of(sql, _catalog()).tables
        return
    with pytest.raises(SQLError) as err:
        incrementalize(plan_of(sql, _catalog()))
    assert err.value.sqlstate == "0A000"
    assert named in err.value.message


def _temporal_reads(conn: psycopg.Connection, views: dict[str, str]) -> dict[str, list[int]]:
    """Each view's ids, equal to its query at the read epoch's closed_at (the newest
    epoch's, unchanged across the reads: else read again, an epoch closed meanwhile)."""

    def newest() -> Any:
        return conn.execute("SELECT max(closed_at) FROM headwater_catalog.epochs").fetchone()[0]  # type: ignore[index]

    while True:
        before = newest()
        got = {n: [r[0] for r in conn.execute(f"SELECT id FROM {n} ORDER BY id")] for n in views}
        if newest() == before:
            break
    for name, sql in views.items():
        at = oracle_sql(sql, before.timestamp())
        assert got[name] == [r[0] for r in conn.execute(at + " ORDER BY id")], name
    return got


def test_server_rows_leave_as_time_passes(conn: psycopg.Connection) -> None:
    """Through the server: rows enter and leave temporal views as epochs close later
    (a write to another table closes one); each read equals the query at the read
    epoch's closed_at (headwater_catalog.epochs)."""
    conn.execute("CREATE TABLE tmp_ev (id int, ts timestamptz)")
    conn.execute("CREATE TABLE tmp_tick (n int)")
    views = {
        "tmp_recent": "SELECT id FROM tmp_ev WHERE ts + interval '2 seconds' > now()",
        "tmp_due": "SELECT id FROM tmp_ev WHERE mz_now() >= ts",
    }
    try:
        for name, sql in views.items():
            conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
        conn.execute(
            "INSERT INTO tmp_ev VALUES (1, now() - interval '1.5 seconds'),"
            " (2, now() + interval '1 hour'), (3, now() - interval '1 hour'),"
            " (4, now() + interval '1 second')"
        )
        _temporal_reads(conn, views)
        time.sleep(3.5)  # past every deadline but row 2's (T + 3 s for row 4)
        conn.execute("INSERT INTO tmp_tick VALUES (1)")  # an epoch closes 3.5 s later
        assert _temporal_reads(conn, views) == {"tmp_recent": [2], "tmp_due": [1, 3, 4]}
    finally:  # the shared server ticks while a temporal view exists
        for name in views:
            conn.execute(f"DROP MATERIALIZED VIEW IF EXISTS {name}")


def test_server_clock_ticks_without_writes(conn: psycopg.Connection) -> None:
    """With no write at all, a temporal view's rows leave as time passes: the server
    closes an empty epoch each --clock-tick (1 s) while a temporal view exists, and
    none when no view has a clock."""
    conn.execute("CREATE TABLE tmp_quiet (id int, ts timestamptz)")
    conn.execute("INSERT INTO tmp_quiet VALUES (1, now()), (2, now() + interval '1 hour')")
    epochs = "SELECT count(*) FROM headwater_catalog.epochs"
    views = {"tmp_quiet_v": "SELECT id FROM tmp_quiet WHERE ts + interval '1 second' > now()"}
    try:
        conn.execute(f"CREATE MATERIALIZED VIEW tmp_quiet_v AS {views['tmp_quiet_v']}")
        n = conn.execute(epochs).fetchone()[0]  # type: ignore[index]
        time.sleep(2.5)
        assert conn.execute(epochs).fetchone()[0] > n, "no epoch closed without writes"  # type: ignore[index]
        deadline = time.monotonic() + 60
        while _temporal_reads(conn, views)["tmp_quiet_v"] != [2]:  # no write in between
            if time.monotonic() >= deadline:  # a hang guard, not a speed check
                pytest.fail("row 1 did not leave the view without writes")
            time.sleep(0.5)
    finally:
        conn.execute("DROP MATERIALIZED VIEW IF EXISTS tmp_quiet_v")
    time.sleep(1.5)  # a tick already under way
    n = conn.execute(epochs).fetchone()[0]  # type: ignore[index]
    time.sleep(2.5)
    assert conn.execute(epochs).fetchone()[0] == n  # type: ignore[index]
