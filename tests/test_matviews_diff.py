"""Materialized views through the server, differential against PostgreSQL 15.

The same tables t(id, a, b, s) and u(id, a, x) live in a Headwater server and in
PostgreSQL 15 (each in a schema of its own). Every view query of the engine's scope
(`QUERIES` of tests/test_engine_diff.py, plus a view over a view and an inline view)
is a MATERIALIZED VIEW in Headwater and a plain VIEW in PostgreSQL. Then 200+ epochs
of random INSERT/UPDATE/DELETE batches run: each batch is one transaction (a lone
statement sometimes in autocommit), the same SQL text sent to both servers, and its
epoch in Headwater is the freshness token the server reports after the commit.

Every view at every one of those epochs equals PostgreSQL's view after that batch,
and so do the tables and one statement joining a table with a materialized view:
- at about one epoch in 16 (and every 30 at least), right after the write, with a
  plain SELECT of each view: the read waits until the view reflects the session's
  write (read-your-writes), and the stage runs single-epoch batches;
- every other epoch with SELECT ... AS OF EPOCH e, read after some more epochs were
  written: the stage took several epochs per micro-batch (per-epoch exactness), and
  the read waits until the view has reached e.
Reading every epoch fresh would cost a Spark micro-batch per epoch for all views
(~1-3 s on this shared machine): 200 epochs would not fit the time budget.

Midway three more views are created (backfilled over the data of that moment) and
dropped again later. Values are compared as tests/test_engine_support.py `normalize`
does: Headwater's avg() is a DuckDB double and its sum() of integers is numeric,
where PostgreSQL has numeric and bigint. The seed is printed on failure; HW_SEED=n
reruns one, HW_EPOCHS=n changes the number of epochs (default 200).
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest

from tests.hwserver import HeadwaterServer
from tests.test_engine_diff import QUERIES
from tests.test_engine_support import INLINE_VIEWS, normalize

pytestmark = pytest.mark.oracle

TABLES = {
    "t": "CREATE TABLE t (id int PRIMARY KEY, a int, b int, s text)",
    "u": "CREATE TABLE u (id int PRIMARY KEY, a int, x int)",
}
COLUMNS = {"t": ("a", "b", "s"), "u": ("a", "x")}
# a materialized view over a materialized view: v1 is "SELECT a, count(*) AS n, ...
# FROM t GROUP BY a" (QUERIES[1])
TOP = "SELECT n, count(*) AS groups, sum(sb) AS total FROM v1 GROUP BY n"
# one statement reading a table and a materialized view together
JOIN_READ = "SELECT t.id, t.b, v1.n, v1.sb FROM t JOIN v1 ON t.a = v1.a"
SYNC = 0.06  # share of epochs read fresh right after their write (the others: AS OF)
MAX_PENDING = 30  # epochs written before they are read at the latest


def lit(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    return str(v)


def read_all(conn: psycopg.Connection, queries: dict[str, str]) -> dict[str, list[tuple]]:
    """The rows of each query (sent in a pipeline: one round trip), normalized."""
    with conn.pipeline():
        cursors = {name: conn.execute(sql) for name, sql in queries.items()}
    return {name: normalize(cur.fetchall()) for name, cur in cursors.items()}


class Workload:
    """Random batches of statements, the same text for both servers."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.live: dict[str, set[int]] = {"t": set(), "u": set()}
        self.next_id = 1

    def _values(self, table: str) -> tuple[Any, ...]:
        r = self.rng
        if table == "t":
            return (
                r.choice([None, 0, 1, 2, 3, 4]),
                r.choice([None, *range(8)]),
                r.choice([None, "a", "b", "c", "d"]),
            )
        return (r.choice([None, 0, 1, 2, 3, 4]), r.choice([None, *range(6)]))

    def statement(self) -> str:
        r = self.rng
        table = r.choice(["t", "u"])
        live = self.live[table]
        cols = COLUMNS[table]
        op = r.random()
        insert_p = 0.55 if len(live) < 25 else 0.3
        if op < insert_p or len(live) < 3:
            rows = []
            for _ in range(r.choice([1, 1, 1, 2, 3])):
                rid = self.next_id
                self.next_id += 1
                live.add(rid)
                rows.append("(" + ", ".join(lit(v) for v in (rid, *self._values(table))) + ")")
            return f"INSERT INTO {table} VALUES {', '.join(rows)}"
        if op < insert_p + 0.25:
            rid = r.choice(sorted(live))
            sets = ", ".join(
                f"{c} = {lit(v)}" for c, v in zip(cols, self._values(table), strict=True)
            )
            return f"UPDATE {table} SET {sets} WHERE id = {rid}"
        if op < insert_p + 0.32:  # a set-based update: several rows, one statement
            col = cols[1]
            return f"UPDATE {table} SET {col} = {col} + 1 WHERE a = {r.randrange(5)} AND {col} < 5"
        if op < insert_p + 0.36:  # a set-based delete
            return f"DELETE FROM {table} WHERE a = {r.randrange(5)} AND id % 5 = {r.randrange(5)}"
        rid = r.choice(sorted(live))
        live.discard(rid)
        return f"DELETE FROM {table} WHERE id = {rid}"

    def batch(self) -> list[str]:
        return [self.statement() for _ in range(self.rng.choice([1, 1, 2, 3, 4, 6]))]


@pytest.fixture
def hw(hw_server: HeadwaterServer) -> Iterator[psycopg.Connection]:
    with psycopg.connect(hw_server.dsn, autocommit=True) as c:
        # the first read waits for the Spark stage to start (tens of seconds when loaded)
        c.execute("SET headwater.freshness_timeout = '600s'")
        yield c


def _only_in(a: list[tuple], b: list[tuple]) -> tuple[list[tuple], list[tuple]]:
    """The rows of a not in b and of b not in a, as multisets (a short diff to print)."""
    ca, cb = Counter(a), Counter(b)
    return sorted((ca - cb).elements(), key=repr), sorted((cb - ca).elements(), key=repr)


def reads_of(views: dict[str, str]) -> dict[str, str]:
    """The reads compared at an epoch: each view, each table, and JOIN_READ."""
    queries = {name: f"SELECT * FROM {name}" for name in [*views, *TABLES]}
    if "v1" in views:
        queries["join"] = JOIN_READ
    return queries


def _seed() -> int:
    return int(os.environ.get("HW_SEED", random.randrange(1_000_000)))


def test_matviews_equal_postgres_at_every_epoch(
    hw: psycopg.Connection, pg: psycopg.Connection
) -> None:
    seed = _seed()
    epochs = int(os.environ.get("HW_EPOCHS", "200"))
    rng = random.Random(seed)
    schema = f"mvdiff_{os.getpid()}_{seed}"
    both = (hw, pg)
    for c in both:
        c.execute(f"CREATE SCHEMA {schema}")
        c.execute(f"SET search_path = {schema}")
        for ddl in TABLES.values():
            c.execute(ddl)
        for name, sql in INLINE_VIEWS.items():
            c.execute(f"CREATE VIEW {name} AS {sql}")
    work = Workload(rng)
    oracle = ThreadPoolExecutor(1)
    t0 = t1 = time.monotonic()
    reads = {"fresh": 0, "as of": 0}
    spent = {"writes": 0.0, "fresh": 0.0, "as of": 0.0}  # seconds
    # epoch -> (the views that exist then, PostgreSQL's rows of reads_of(views))
    expected: dict[int, tuple[dict[str, str], dict[str, list[tuple]]]] = {}
    pending: list[int] = []  # epochs not checked yet
    checked: set[int] = set()  # epochs at which every view was read and equal
    history: list[tuple[int, list[str]]] = []  # (epoch, batch) in order, for failures

    def pg_rows(views: dict[str, str]) -> dict[str, list[tuple]]:
        return read_all(pg, reads_of(views))

    def apply(batch: list[str], views: dict[str, str]) -> int:
        """One transaction in both; PostgreSQL's rows computed while Headwater commits.
        Returns the batch's epoch in Headwater (its freshness token)."""
        start = time.monotonic()
        lone = len(batch) == 1 and rng.random() < 0.5  # autocommit: a lone INSERT is
        for c in both:  # batched by the server (its fast path)
            if lone:
                c.execute(batch[0])
            else:
                with c.transaction():
                    for stmt in batch:
                        c.execute(stmt)
            if c is pg:
                rows = oracle.submit(pg_rows, dict(views))
        epoch = int(hw.info.parameter_status("headwater_epoch") or 0)
        expected[epoch] = (dict(views), rows.result())
        history.append((epoch, batch))
        for table in work.live:  # set-based deletes: follow what is there
            work.live[table] = {r[0] for r in pg.execute(f"SELECT id FROM {table}")}
        spent["writes"] += time.monotonic() - start
        return epoch

    def compare(epoch: int, as_of: bool, where: str) -> None:
        start = time.monotonic()
        views, exp = expected[epoch]
        queries = reads_of(views)
        suffix = f" AS OF EPOCH {epoch}" if as_of else ""
        got = read_all(hw, {name: sql + suffix for name, sql in queries.items()})
        checked.add(epoch)
        reads["as of" if as_of else "fresh"] += len(got)
        spent["as of" if as_of else "fresh"] += time.monotonic() - start
        bad = [
            (name, queries[name], _only_in(exp[name], got[name]))
            for name in got
            if got[name] != exp[name]
        ]
        if bad:
            status = hw.execute(
                "SELECT name, status, error, frontier FROM headwater_catalog.views "
                f"WHERE schema = '{schema}'"
            ).fetchall()
            pytest.fail(
                f"seed {seed} (epoch {epoch}, {where}, {'AS OF' if as_of else 'fresh'} "
                f"read): {len(bad)} of {len(got)} reads differ; first (name, query, "
                f"rows only in PostgreSQL, only in Headwater): {bad[0]}\nview status: {status}\n"
                f"batches near it: {[h for h in history if abs(h[0] - epoch) <= 3]}"
            )

    def check_now(where: str) -> None:
        """Fresh reads of the newest epoch (each waits until the view reflects this
        session's last write), then AS OF reads of every epoch not checked yet."""
        newest = pending.pop()
        compare(newest, False, where)
        for epoch in pending:
            compare(epoch, True, where)
        pending.clear()

    try:
        views: dict[str, str] = {}
        for _ in range(12):  # data the views start from (backfill)
            apply(work.batch(), views)
        for i, template in enumerate(QUERIES):
            views[f"v{i}"] = template.format(k=rng.randrange(4))
        views["top"] = TOP
        for name, sql in views.items():
            hw.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
            pg.execute(f"CREATE VIEW {name} AS {sql}")
        created = int(hw.info.parameter_status("headwater_epoch") or 0)
        expected[created] = (dict(views), pg_rows(views))
        pending.append(created)
        check_now("after backfill")
        t1 = time.monotonic()
        extra: dict[str, str] = {}
        e = 0
        while len(checked) < epochs + 1:  # + the epoch the views were created at
            if e in (epochs // 2, epochs * 3 // 4) and pending:
                check_now(f"before DDL at epoch {e}")  # a dropped view has no AS OF
            if e == epochs // 2:  # backfill over the data of this moment
                for j, template in enumerate(rng.sample(QUERIES, 3)):
                    extra[f"x{j}"] = template.format(k=rng.randrange(4))
                for name, sql in extra.items():
                    hw.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
                    pg.execute(f"CREATE VIEW {name} AS {sql}")
            if e == epochs * 3 // 4:
                for name in extra:
                    hw.execute(f"DROP MATERIALIZED VIEW {name}")
                    pg.execute(f"DROP VIEW {name}")
                extra = {}
            batch = work.batch()
            epoch = apply(batch, {**views, **extra})
            if epoch not in pending:
                pending.append(epoch)
            # now and then (and at the end) read at once: the stage runs 1-epoch batches;
            # otherwise epochs pile up and the stage takes several per batch
            e += 1
            last = len(checked) + len(pending) >= epochs + 1
            if rng.random() < SYNC or len(pending) >= MAX_PENDING or last:
                check_now(f"batch {e}: {batch}")
        failed = hw.execute(
            "SELECT name, status, error FROM headwater_catalog.views "
            f"WHERE schema = '{schema}' AND status <> 'running'"
        ).fetchall()
        assert not failed, f"seed {seed}: {failed}"
    finally:
        oracle.shutdown()
        print(
            f"seed {seed}: {len(checked)} epochs, {reads['fresh']} fresh and "
            f"{reads['as of']} AS OF reads equal to PostgreSQL; setup and backfill "
            f"{t1 - t0:.1f}s, batches {time.monotonic() - t1:.1f}s ("
            + ", ".join(f"{k} {v:.1f}s" for k, v in spent.items())
            + ")"
        )
        for c in both:
            try:
                c.execute(f"DROP SCHEMA {schema} CASCADE")
            except psycopg.Error:
                pass
