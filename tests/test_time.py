"""The time model (issue 4) end to end: read-your-writes, freshness tokens and modes,
one epoch per statement, AS OF, retention, SUBSCRIBE (cursors, COPY, psql, ENVELOPE
UPSERT, queries, UP TO, cancel, slow subscribers) and resuming a subscription after
SIGKILL.

Oracles: PostgreSQL 15 runs the same transactions (`Mirror`: after each transaction
it records what PostgreSQL returns for the table, the view queries and a plain
query, keyed by the epoch Headwater gave the transaction), so "the state at epoch e"
is PostgreSQL's state after the last transaction of epoch <= e. Tests share one
Headwater server (object names start with tm_); a server that is killed or started
with --retention is a server of its own. Timings are never asserted: the machine is
shared. Counts are printed (pytest -s shows them).
"""

from __future__ import annotations

import random
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import errors

from tests.hwserver import HeadwaterServer

pytestmark = pytest.mark.oracle

# A read of a view waits for the Spark stage: tens of seconds for the first one.
TIMEOUT = "SET headwater.freshness_timeout = '180s'"
Row = tuple[Any, ...]


def connect(dsn: str) -> psycopg.Connection:
    c = psycopg.connect(dsn, autocommit=True)
    c.execute(TIMEOUT)
    return c


def token(c: psycopg.Connection) -> int:
    """The freshness token of the session's last commit (ParameterStatus)."""
    value = c.info.parameter_status("headwater_epoch")
    assert value is not None
    return int(value)


def norm(v: Any) -> Any:
    """One comparable form for psycopg values, COPY text and PostgreSQL values
    (Headwater's sum() of integers is numeric where PostgreSQL's is bigint)."""
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, int | float | Decimal):
        return round(float(v), 6)
    try:
        return round(float(v), 6)
    except ValueError:
        return v


def bag(rows: Any) -> Counter[Row]:
    return Counter(tuple(norm(v) for v in r) for r in rows)


def copy_rows(c: psycopg.Connection, sql: str) -> list[tuple[str | None, ...]]:
    """All rows of a COPY ... TO STDOUT (text values; None for NULL)."""
    with c.cursor().copy(sql) as cp:
        return [tuple(r) for r in cp.rows()]


class Mirror:
    """The same transactions on Headwater and PostgreSQL; after each one, PostgreSQL's
    answers to `queries` are kept under the epoch Headwater committed it at."""

    def __init__(self, hw: psycopg.Connection, pg: psycopg.Connection, queries: dict[str, str]):
        self.hw, self.pg, self.queries = hw, pg, queries
        self.epochs: list[int] = []
        self.states: list[dict[str, Counter[Row]]] = []
        self.initial = self._pg_state()

    def _pg_state(self) -> dict[str, Counter[Row]]:
        return {name: bag(self.pg.execute(q).fetchall()) for name, q in self.queries.items()}

    def run(self, stmts: list[str]) -> int:
        with self.hw.transaction():
            for s in stmts:
                self.hw.execute(s)
        with self.pg.transaction():
            for s in stmts:
                self.pg.execute(s)
        epoch = token(self.hw)
        state = self._pg_state()
        if self.epochs and epoch == self.epochs[-1]:
            # a transaction that changed no row (an UPDATE whose WHERE matched none: the
            # workload is random) makes no epoch, and PostgreSQL's state is the same
            assert state == self.states[-1]
            return epoch
        assert not self.epochs or epoch > self.epochs[-1]
        self.epochs.append(epoch)
        self.states.append(state)
        return epoch

    def at(self, name: str, epoch: int) -> Counter[Row]:
        """PostgreSQL's answer after the last transaction committed at or before `epoch`."""
        state = self.initial
        for e, st in zip(self.epochs, self.states, strict=True):
            if e > epoch:
                break
            state = st
        return state[name]


class Workload:
    """Random INSERT/UPDATE/DELETE transactions over t(id, a, b, s), the same text for
    both servers."""

    def __init__(self, table: str, seed: int) -> None:
        self.table = table
        self.rng = random.Random(seed)
        self.live: list[int] = []
        self.next_id = 1

    def _vals(self) -> str:
        r = self.rng
        b = r.choice(["NULL", *map(str, range(8))])
        s = r.choice(["NULL", "'a'", "'b'", "'c'", "'d'"])
        return f"{r.randrange(4)}, {b}, {s}"

    def statement(self) -> str:
        r, t = self.rng, self.table
        op = r.random()
        if op < 0.5 or len(self.live) < 4:
            rows = []
            for _ in range(r.choice([1, 1, 2, 3])):
                self.live.append(self.next_id)
                rows.append(f"({self.next_id}, {self._vals()})")
                self.next_id += 1
            return f"INSERT INTO {t} VALUES {', '.join(rows)}"
        if op < 0.75:
            rid = r.choice(self.live)
            return f"UPDATE {t} SET b = {r.randrange(8)}, a = {r.randrange(4)} WHERE id = {rid}"
        if op < 0.8:
            return f"UPDATE {t} SET b = b + 1 WHERE a = {r.randrange(4)}"
        rid = r.choice(self.live)
        self.live.remove(rid)
        return f"DELETE FROM {t} WHERE id = {rid}"

    def transaction(self) -> list[str]:
        return [self.statement() for _ in range(self.rng.choice([1, 1, 1, 2, 3]))]


@pytest.fixture
def pg(pg_oracle: Any) -> Iterator[psycopg.Connection]:
    with psycopg.connect(pg_oracle.dsn, autocommit=True) as c:
        c.execute("CREATE SCHEMA IF NOT EXISTS tm")
        c.execute("SET search_path = tm")
        yield c


# -- a server to SIGKILL, started early: its Spark stage warms up during the other tests


# Set once the shared server's Spark stage runs: the crash server starts its own
# after that, so that the two JVMs do not start at once on a 2-core machine.
SHARED_STAGE_UP = threading.Event()


class CrashServer:
    TABLE = "CREATE TABLE tm_k (id int PRIMARY KEY, g int, x int)"
    VIEW = (
        "CREATE MATERIALIZED VIEW tm_k_v AS "
        "SELECT g, count(*) AS n, sum(x) AS s FROM tm_k GROUP BY g"
    )

    def __init__(self, root: Path, after_shared_stage: bool) -> None:
        self.server = HeadwaterServer(root / "data")
        self.after_shared_stage = after_shared_stage
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._prepare, daemon=True)
        self.thread.start()

    def _prepare(self) -> None:
        try:
            self.server.start(timeout=240)
            if self.after_shared_stage:
                SHARED_STAGE_UP.wait(timeout=300)
            with connect(self.server.dsn) as c:
                c.execute(self.TABLE)
                c.execute(self.VIEW)
                c.execute("INSERT INTO tm_k VALUES (0, 0, 0)")
                c.execute("SELECT * FROM tm_k_v").fetchall()  # waits for the Spark stage
        except BaseException as e:  # reported by the test
            self.error = e

    def ready(self) -> HeadwaterServer:
        self.thread.join(timeout=300)
        assert not self.thread.is_alive(), "the crash server did not get ready"
        if self.error is not None:
            raise self.error
        return self.server


@pytest.fixture(scope="module", autouse=True)
def crash_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CrashServer | None]:
    """Started with the module when the SIGKILL test is selected."""
    names = {i.name for i in request.session.items}
    if "test_resubscribe_after_sigkill" not in names:
        yield None
        return
    cs = CrashServer(
        tmp_path_factory.mktemp("crash"), "test_read_your_writes_1000_iterations" in names
    )
    yield cs
    cs.thread.join(timeout=300)
    cs.server.stop()


# -- read-your-writes ---------------------------------------------------------------


def test_read_your_writes_1000_iterations(hw_server: HeadwaterServer) -> None:
    """1000 write-then-read iterations through psycopg in 90 concurrent sessions: after
    each INSERT its session reads the aggregate view, which must already count it
    (headwater.freshness = 'session': its own writes; the default, 'latest', is
    tests/test_freshness.py's): 0 stale reads. Session g owns group g, so
    its k-th read must show exactly n = k and s = 1 + ... + k."""
    t_stage = time.time()
    with connect(hw_server.dsn) as c:
        c.execute("CREATE TABLE tm_rw (id int PRIMARY KEY, g int, x int)")
        c.execute(
            "CREATE MATERIALIZED VIEW tm_rw_v AS "
            "SELECT g, count(*) AS n, sum(x) AS s FROM tm_rw GROUP BY g"
        )
        c.execute("INSERT INTO tm_rw VALUES (0, -1, 0)")
        try:
            c.execute("SELECT * FROM tm_rw_v").fetchall()  # waits for the Spark stage
        finally:
            SHARED_STAGE_UP.set()
    t_stage = time.time() - t_stage
    sessions, total = 90, 1000
    counts = [total // sessions + (g < total % sessions) for g in range(sessions)]
    stale, wrong, done = [0], [0], [0]
    failures: list[BaseException] = []
    lock = threading.Lock()

    def session(g: int) -> None:
        try:
            with connect(hw_server.dsn) as s:
                s.execute("SET headwater.freshness = 'session'")
                last = 0
                for k in range(1, counts[g] + 1):
                    s.execute("INSERT INTO tm_rw VALUES (%s, %s, %s)", [g * 1000 + k, g, k])
                    assert token(s) > last
                    last = token(s)
                    row = s.execute("SELECT n, s FROM tm_rw_v WHERE g = %s", [g]).fetchone()
                    with lock:
                        done[0] += 1
                        if row is None or row[0] < k:
                            stale[0] += 1
                        elif (row[0], int(row[1])) != (k, k * (k + 1) // 2):
                            wrong[0] += 1
        except BaseException as e:
            failures.append(e)

    t0 = time.time()
    threads = [threading.Thread(target=session, args=(g,)) for g in range(sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(
        f"read-your-writes: {done[0]} iterations in {sessions} sessions, {stale[0]} stale, "
        f"{wrong[0]} wrong, {time.time() - t0:.1f}s (after {t_stage:.0f}s for the Spark stage)"
    )
    if failures:
        raise failures[0]
    assert done[0] == total
    assert stale[0] == 0
    assert wrong[0] == 0
    with connect(hw_server.dsn) as c:
        c.execute("DROP MATERIALIZED VIEW tm_rw_v")
        c.execute("DROP TABLE tm_rw")


def test_acknowledged_inserts_visible_to_every_session(hw_server: HeadwaterServer) -> None:
    """400 rounds of 8 concurrent single-row INSERTs (the batched fast path), each round
    then counted by a session that wrote nothing: every acknowledged row is seen. (A bug
    made an epoch readable while rows it took after a replica flush were still staged:
    ~1 stale round in 1000 under load.)"""
    import asyncio

    import asyncpg

    async def run() -> int:
        async def connect() -> asyncpg.Connection:
            return await asyncpg.connect(
                host=hw_server.host, port=hw_server.port, user="headwater", database="headwater"
            )

        admin = await connect()
        await admin.execute("CREATE TABLE tm_ack (id int PRIMARY KEY)")
        writers = [await connect() for _ in range(8)]
        reader = await connect()
        stale = 0
        for r in range(400):
            await asyncio.gather(
                *(
                    w.execute("INSERT INTO tm_ack VALUES ($1)", r * 8 + i)
                    for i, w in enumerate(writers)
                )
            )
            stale += await reader.fetchval("SELECT count(*) FROM tm_ack") != 8 * (r + 1)
        for c in [admin, reader, *writers]:
            await c.close()
        return stale

    stale = asyncio.run(run())
    print(f"acknowledged inserts: 400 rounds of 8, {stale} stale reads")
    assert stale == 0


@pytest.fixture
def fr(hw_server: HeadwaterServer) -> Iterator[str]:
    """tm_fr(id, g) and the view tm_fr_v (count per g) for the freshness tests."""
    with connect(hw_server.dsn) as c:
        c.execute("CREATE TABLE tm_fr (id int PRIMARY KEY, g int)")
        c.execute(
            "CREATE MATERIALIZED VIEW tm_fr_v AS SELECT g, count(*) AS n FROM tm_fr GROUP BY g"
        )
        c.execute("SELECT * FROM tm_fr_v").fetchall()
        yield hw_server.dsn
        c.execute("DROP MATERIALIZED VIEW tm_fr_v")
        c.execute("DROP TABLE tm_fr")


def _n(c: psycopg.Connection) -> int:
    row = c.execute("SELECT n FROM tm_fr_v WHERE g = 1").fetchone()
    return int(row[0]) if row else 0


def test_freshness_token_between_sessions(fr: str) -> None:
    """Session A writes and hands its token to B (ParameterStatus headwater_epoch, or
    SELECT headwater_write_fence(): the same number); B sets headwater.read_after to
    it and its next read of the view sees A's write (under 'session': the default,
    'latest', waits for every acknowledged write anyway)."""
    with connect(fr) as a, connect(fr) as b:
        b.execute("SET headwater.freshness = 'session'")
        assert a.execute("SELECT headwater_write_fence()").fetchone() == (0,)
        stale = 0
        for i in range(1, 7):
            a.execute("INSERT INTO tm_fr VALUES (%s, 1)", [i])
            fence = a.execute("SELECT headwater_write_fence()").fetchone()
            assert fence == (token(a),)
            passed = token(a) if i % 2 else fence[0]
            b.execute(f"SET headwater.read_after = '{passed}'")
            assert b.execute("SHOW headwater.read_after").fetchone() == (str(passed),)
            stale += _n(b) != i
        print(f"tokens: 6 hand-overs, {stale} stale reads")
        assert stale == 0
        with pytest.raises(errors.InvalidParameterValue, match="freshness token"):
            b.execute("SET headwater.read_after = 'soon'")


def test_freshness_latest_and_none(fr: str) -> None:
    """'latest': a session that never wrote sees every write acknowledged before its
    read. 'none': a read does not wait, so right after a write it may see the view
    before the write (seen at least once here), but always a state the view had."""
    with connect(fr) as a, connect(fr) as b:
        b.execute("SET headwater.freshness = 'latest'")
        stale = 0
        for i in range(1, 5):
            a.execute("INSERT INTO tm_fr VALUES (%s, 1)", [i])
            stale += _n(b) != i
        assert stale == 0
        b.execute("SET headwater.freshness = 'none'")
        a.execute("SET headwater.freshness = 'none'")
        seen_stale, low_a, low_b = 0, 4, 4
        for i in range(5, 25):
            a.execute("INSERT INTO tm_fr VALUES (%s, 1)", [i])
            own, other = _n(a), _n(b)  # the writer itself, and another session
            # a state the view had: never newer than the write, never older than before
            assert low_a <= own <= i and low_b <= other <= i
            low_a, low_b = own, other
            seen_stale += (own < i) + (other < i)
            if seen_stale >= 2:
                break
        print(f"freshness: 'latest' 4 reads, 0 stale; 'none' {seen_stale} stale reads seen")
        assert seen_stale > 0
        a.execute("SET headwater.freshness = 'session'")
        assert _n(a) == i
        with pytest.raises(errors.InvalidParameterValue):
            a.execute("SET headwater.freshness = 'sometimes'")


def test_freshness_timeout_names_the_lagging_view(fr: str) -> None:
    """A read that needs the session's write but finds the view behind it after
    headwater.freshness_timeout fails with 57014 naming the view, its epoch and the
    epoch needed; the session goes on."""
    with connect(fr) as c:
        c.execute("SET headwater.freshness_timeout = '1ms'")
        err = None
        for i in range(100, 110):  # the view catches up in tens of ms at best
            c.execute("INSERT INTO tm_fr VALUES (%s, 1)", [i])
            try:
                c.execute("SELECT * FROM tm_fr_v").fetchall()
            except errors.QueryCanceled as e:
                err = e
                break
        assert err is not None, "the view never lagged behind a write"
        msg = str(err)
        assert 'materialized view "tm_fr_v" is at epoch' in msg
        assert f"this read needs epoch {token(c)}" in msg
        assert err.diag.message_detail and "headwater.freshness_timeout" in (
            err.diag.message_detail
        )
        assert err.diag.message_hint and "headwater.freshness = 'none'" in err.diag.message_hint
        c.execute(TIMEOUT)
        assert c.execute("SELECT count(*) FROM tm_fr_v").fetchone() is not None


def test_cancel_ends_a_freshness_wait(fr: str) -> None:
    """A read waiting for a lagging view (or a future epoch) is ended by a
    CancelRequest (57014, as by statement_timeout), not by its freshness timeout."""
    with connect(fr) as c:
        c.execute("SET statement_timeout = '300ms'")
        future = 1_000_000_000
        # (after the 180 s freshness timeout it would be 22023 "has not closed yet")
        with pytest.raises(errors.QueryCanceled, match="statement timeout"):
            c.execute(f"SELECT * FROM tm_fr AS OF EPOCH {future}")
        c.execute("SET statement_timeout = 0")
        assert c.execute("SELECT 1").fetchone() == (1,)


# -- one epoch per statement ---------------------------------------------------------


def test_join_of_table_and_lagging_view_reads_one_epoch(hw_server: HeadwaterServer) -> None:
    """While a writer inserts, a reader with headwater.freshness = 'none' (the view lags
    behind the table) joins the table with its aggregate view in one statement: every
    table row finds its group, and each group's row count in the table equals the
    view's count: both read at one epoch. The lag is real: a table-only statement
    right after sees more rows than the join did."""
    with connect(hw_server.dsn) as c:
        c.execute("CREATE TABLE tm_snap (id int PRIMARY KEY, g int)")
        c.execute(
            "CREATE MATERIALIZED VIEW tm_snap_v AS SELECT g, count(*) AS n FROM tm_snap GROUP BY g"
        )
        c.execute("INSERT INTO tm_snap VALUES (0, 0)")
        c.execute("SELECT * FROM tm_snap_v").fetchall()
    stop = threading.Event()

    def writer() -> None:
        with connect(hw_server.dsn) as w:
            i = 1
            while not stop.is_set():
                w.execute("INSERT INTO tm_snap VALUES (%s, %s)", [i, i % 5])
                i += 1

    th = threading.Thread(target=writer)
    th.start()
    reads = inconsistent = lagging = 0
    try:
        with connect(hw_server.dsn) as r:
            r.execute("SET headwater.freshness = 'none'")
            while reads < 300 and not (reads >= 40 and lagging >= 5):
                rows = r.execute(
                    "SELECT t.g, t.id, v.n FROM tm_snap t LEFT JOIN tm_snap_v v ON t.g = v.g"
                ).fetchall()
                newest = r.execute("SELECT count(*) FROM tm_snap").fetchone()
                reads += 1
                per_group = Counter(g for g, _, _ in rows)
                views = {g: n for g, _, n in rows}
                if any(views[g] != k for g, k in per_group.items()):
                    inconsistent += 1
                lagging += newest is not None and newest[0] > len(rows)
    finally:
        stop.set()
        th.join()
    print(f"one epoch: {reads} joins, {inconsistent} inconsistent, {lagging} read a lagging view")
    assert inconsistent == 0
    assert lagging > 0
    with connect(hw_server.dsn) as c:
        c.execute("DROP MATERIALIZED VIEW tm_snap_v")
        c.execute("DROP TABLE tm_snap")


# -- AS OF -------------------------------------------------------------------------------

HIST_TABLES = [
    "CREATE TABLE tm_h (id int PRIMARY KEY, a int, b int, s text)",
    "CREATE TABLE tm_hu (id int PRIMARY KEY, a int, x int)",
]
HIST_VIEWS = {
    "tm_h_v": "SELECT a, count(*) AS n, sum(b) AS sb, min(s) AS lo, max(b) AS hi "
    "FROM tm_h GROUP BY a",
    "tm_h_j": "SELECT u.a, count(*) AS n, sum(t.b) AS sb FROM tm_h t JOIN tm_hu u ON t.a = u.a "
    "GROUP BY u.a",
}


def test_as_of_epochs_equal_postgres(hw_server: HeadwaterServer, pg: psycopg.Connection) -> None:
    """150 random transactions on Headwater and PostgreSQL (two tables, an aggregate
    view and a join view). At 100 sampled epochs (including epochs between the
    transactions), SELECT ... AS OF EPOCH e of each table and view equals PostgreSQL's
    state after the transactions of epochs <= e. AS OF TIMESTAMP of an epoch's closed_at
    (as headwater_catalog.epochs shows it, in two time zones) and of a moment before
    the next epoch closed reads that epoch."""
    hw = connect(hw_server.dsn)
    pg.execute("DROP TABLE IF EXISTS tm_h, tm_hu")
    for sql in HIST_TABLES:
        hw.execute(sql)
        pg.execute(sql)
    for name, q in HIST_VIEWS.items():
        hw.execute(f"CREATE MATERIALIZED VIEW {name} AS {q}")
    created = token(hw)
    queries = {
        "tm_h": "SELECT * FROM tm_h",
        "tm_hu": "SELECT * FROM tm_hu",
        **{name: q for name, q in HIST_VIEWS.items()},
    }
    mirror = Mirror(hw, pg, queries)
    seed = random.randrange(1_000_000)
    rng = random.Random(seed)
    wt = Workload("tm_h", seed)
    for _ in range(150):
        if rng.random() < 0.3:
            uid = rng.randrange(1, 12)
            mirror.run(
                [
                    f"DELETE FROM tm_hu WHERE id = {uid}",
                    f"INSERT INTO tm_hu VALUES ({uid}, {rng.randrange(4)}, {rng.randrange(9)})",
                ]
            )
        else:
            mirror.run(wt.transaction())
    first, last = mirror.epochs[0], mirror.epochs[-1]
    epochs = sorted(rng.sample(range(created, last + 1), 100))
    mismatches: list[str] = []
    for e in epochs:
        for name in queries:
            got = bag(hw.execute(f"SELECT * FROM {name} AS OF EPOCH {e}").fetchall())
            if got != mirror.at(name, e):
                mismatches.append(f"{name} AS OF {e}")
    # AS OF TIMESTAMP: closed_at as headwater_catalog.epochs shows it, in two zones
    checked_ts = 0
    for zone in ("UTC", "America/New_York"):
        hw.execute(f"SET TimeZone = '{zone}'")
        closed = dict(
            hw.execute(
                "SELECT epoch, closed_at::text FROM headwater_catalog.epochs "
                "WHERE epoch >= %s AND epoch <= %s",
                [first, last],
            ).fetchall()
        )
        for e in rng.sample(mirror.epochs[:-1], 10):
            want = mirror.at("tm_h_v", e)
            got = hw.execute(f"SELECT * FROM tm_h_v AS OF TIMESTAMP '{closed[e]}'").fetchall()
            if bag(got) != want:
                mismatches.append(f"tm_h_v AS OF TIMESTAMP '{closed[e]}' (epoch {e})")
            # a moment before the next epoch closed: still epoch e
            nxt = datetime.fromisoformat(closed[e + 1]) - timedelta(microseconds=1)
            got = hw.execute(f"SELECT * FROM tm_h_v AS OF TIMESTAMP '{nxt}'").fetchall()
            if nxt >= datetime.fromisoformat(closed[e]) and bag(got) != want:
                mismatches.append(f"tm_h_v AS OF TIMESTAMP '{nxt}' (epoch {e})")
            checked_ts += 1
    print(
        f"AS OF: seed {seed}, 150 transactions (epochs {first}-{last}), {len(epochs)} sampled "
        f"epochs x {len(queries)} relations, {checked_ts} timestamps, "
        f"{len(mismatches)} mismatches"
    )
    assert not mismatches, mismatches[:10]
    # one statement AS OF an epoch reads the table and the view at that epoch
    e = epochs[len(epochs) // 2]
    rows = hw.execute(
        "SELECT v.a, v.n, (SELECT count(*) FROM tm_h t WHERE t.a = v.a) FROM tm_h_v v "
        f"AS OF EPOCH {e}"
    ).fetchall()
    assert all(n == k for _, n, k in rows)
    # outside the range: a view before it existed, an epoch not closed yet
    with pytest.raises(errors.InvalidParameterValue, match="has no state before epoch"):
        hw.execute(f"SELECT * FROM tm_h_j AS OF EPOCH {created - 1}")
    hw.execute("SET headwater.freshness_timeout = '200ms'")
    with pytest.raises(errors.InvalidParameterValue, match="has not closed yet"):
        hw.execute(f"SELECT * FROM tm_h AS OF EPOCH {last + 10_000_000}")
    with pytest.raises(errors.InvalidParameterValue, match="no retained epoch closed at"):
        hw.execute("SELECT * FROM tm_h AS OF TIMESTAMP '2001-01-01 00:00:00+00'")
    hw.execute(TIMEOUT)
    for name in HIST_VIEWS:
        hw.execute(f"DROP MATERIALIZED VIEW {name}")
    hw.execute("DROP TABLE tm_h")
    hw.execute("DROP TABLE tm_hu")
    hw.close()


def test_retention_range(tmp_path: Path) -> None:
    """headwater start --retention 2s: history older than 2 s goes; AS OF (and
    SUBSCRIBE ... AS OF) an epoch before the retained range fails with 22023 naming
    the range [oldest retained, newest], which headwater_catalog.epochs agrees with;
    AS OF inside the range still reads."""
    server = HeadwaterServer(tmp_path / "data", args=["--retention", "2s"]).start(timeout=120)
    try:
        with connect(server.dsn) as c:
            assert c.execute("SHOW headwater.retention").fetchone() == ("2s",)
            c.execute("CREATE TABLE tm_r (id int)")
            epochs = []
            for i in range(3):
                c.execute("INSERT INTO tm_r VALUES (%s)", [i])
                epochs.append(token(c))
            deadline = time.time() + 120
            while True:  # the vacuum runs every second
                try:
                    c.execute(f"SELECT * FROM tm_r AS OF EPOCH {epochs[0]}").fetchall()
                except errors.InvalidParameterValue as e:
                    err = e
                    break
                if time.time() >= deadline:  # a hang guard, not a speed check
                    pytest.fail("history was never vacuumed")
                time.sleep(0.5)
            low = c.execute("SELECT min(epoch) FROM headwater_catalog.epochs").fetchone()[0]
            high = c.execute("SELECT max(epoch) FROM headwater_catalog.epochs").fetchone()[0]
            assert low is not None and epochs[0] < low <= high
            msg = err.diag.message_primary or ""
            assert msg.startswith(f"epoch {epochs[0]} is outside the retained range [")
            assert err.diag.message_hint and "headwater.retention = 2s" in err.diag.message_hint
            msg_low, msg_high = msg.split("[")[1].rstrip("]").split(", ")
            assert int(msg_low) <= low and int(msg_high) >= epochs[-1]
            assert sorted(
                v for (v,) in c.execute(f"SELECT * FROM tm_r AS OF EPOCH {high}").fetchall()
            ) == [0, 1, 2]
            with pytest.raises(errors.InvalidParameterValue, match="outside the retained range"):
                copy_rows(c, f"COPY (SUBSCRIBE tm_r AS OF {epochs[0]}) TO STDOUT")
            assert c.execute("SELECT count(*) FROM tm_r").fetchone() == (3,)
    finally:
        server.stop()


# -- SUBSCRIBE ---------------------------------------------------------------------------

SUB_VIEW = "SELECT a, count(*) AS n, sum(b) AS sb FROM tm_s GROUP BY a"
SUB_QUERY = "SELECT a, count(*) AS n, max(b) AS hi FROM tm_s WHERE b > 2 GROUP BY a"


class Reassembler:
    """A SUBSCRIBE client: applies (epoch, [progressed,] diff, cols...) rows and checks
    the state against `expect(epoch)` after every epoch it completes."""

    def __init__(self, progress: bool, state: Counter[Row] | None = None) -> None:
        self.progress = progress
        self.state: Counter[Row] = Counter(state or {})
        self.epoch: int | None = None  # epoch of the rows being applied
        self.progress_epochs: list[int] = []
        self.checkpoints: list[tuple[int, Counter[Row]]] = []  # state after each epoch

    def _close_epoch(self) -> None:
        if self.epoch is not None:
            self.checkpoints.append((self.epoch, +self.state))
            self.epoch = None

    def feed(self, row: Row) -> None:
        epoch = int(row[0])
        if self.progress and norm(row[1]) in (True, "t"):
            self._close_epoch()
            self.progress_epochs.append(epoch)
            self.checkpoints.append((epoch, +self.state))
            return
        if self.epoch is not None and epoch != self.epoch:
            assert epoch > self.epoch, "epochs out of order"
            self._close_epoch()
        self.epoch = epoch
        diff, cols = (row[2], row[3:]) if self.progress else (row[1], row[2:])
        self.state[tuple(norm(v) for v in cols)] += int(diff)

    def finish(self) -> Counter[Row]:
        self._close_epoch()
        return +self.state


def mismatches(checkpoints: list[tuple[int, Counter[Row]]], expect: Any) -> list[int]:
    return [e for e, st in checkpoints if st != expect(e)]


@pytest.fixture
def sub(hw_server: HeadwaterServer, pg: psycopg.Connection) -> Iterator[tuple[Mirror, int]]:
    """tm_s, its view tm_s_v, and 60 recorded transactions: (mirror, epoch before them)."""
    hw = connect(hw_server.dsn)
    hw.execute("CREATE TABLE tm_s (id int PRIMARY KEY, a int, b int, s text)")
    pg.execute("DROP TABLE IF EXISTS tm_s")
    pg.execute("CREATE TABLE tm_s (id int PRIMARY KEY, a int, b int, s text)")
    hw.execute(f"CREATE MATERIALIZED VIEW tm_s_v AS {SUB_VIEW}")
    hw.execute("INSERT INTO tm_s VALUES (100000, 0, 1, 'x')")
    pg.execute("INSERT INTO tm_s VALUES (100000, 0, 1, 'x')")
    hw.execute("SELECT * FROM tm_s_v").fetchall()
    start = token(hw)
    mirror = Mirror(hw, pg, {"tm_s": "SELECT * FROM tm_s", "tm_s_v": SUB_VIEW, "query": SUB_QUERY})
    yield mirror, start
    hw.execute("DROP MATERIALIZED VIEW tm_s_v")
    hw.execute("DROP TABLE tm_s")
    hw.close()


def test_subscribe_cursor_holds_the_view_state_at_every_epoch(
    hw_server: HeadwaterServer, sub: tuple[Mirror, int]
) -> None:
    """DECLARE c CURSOR FOR SUBSCRIBE tm_s_v WITH (PROGRESS); FETCH ALL c WITH (timeout)
    while 60 transactions run in another session: the client that applies the snapshot
    and then the diffs holds exactly PostgreSQL's view state after every epoch it
    completes and at every progress epoch."""
    mirror, _ = sub
    wl = Workload("tm_s", 7)
    done = threading.Event()
    failures: list[BaseException] = []

    def writer() -> None:
        try:
            for _ in range(60):
                mirror.run(wl.transaction())
        except BaseException as e:
            failures.append(e)
        finally:
            done.set()

    r = Reassembler(progress=True)
    with connect(hw_server.dsn) as c, c.transaction():
        c.execute("DECLARE c CURSOR FOR SUBSCRIBE tm_s_v WITH (PROGRESS)")
        th = threading.Thread(target=writer)
        th.start()
        deadline = time.time() + 300
        while not (
            done.is_set()
            and r.progress_epochs
            and r.progress_epochs[-1] >= (mirror.epochs[-1] if mirror.epochs else 0)
        ):
            if time.time() >= deadline:  # a hang guard, not a speed check
                pytest.fail("the subscription fell silent")
            cur = c.execute("FETCH ALL c WITH (timeout = '1s')")
            assert [d.name for d in cur.description or []][:3] == ["epoch", "progressed", "diff"]
            for row in cur.fetchall():
                r.feed(row)
        th.join()
        c.execute("CLOSE c")
    if failures:
        raise failures[0]
    bad = mismatches(r.checkpoints, lambda e: mirror.at("tm_s_v", e))
    print(
        f"SUBSCRIBE cursor: {len(r.checkpoints)} checkpoints, {len(r.progress_epochs)} "
        f"progress epochs, {len(bad)} mismatches"
    )
    assert len(r.progress_epochs) >= 2
    assert not bad


def _record(mirror: Mirror, n: int, seed: int) -> int:
    wl = Workload("tm_s", seed)
    wl.next_id = 1000 * seed
    for _ in range(n):
        mirror.run(wl.transaction())
    return mirror.epochs[-1]


def test_subscribe_replays_history_over_copy(
    hw_server: HeadwaterServer, sub: tuple[Mirror, int]
) -> None:
    """After 60 recorded transactions, COPY (SUBSCRIBE ... AS OF start UP TO end+1) TO
    STDOUT replays them and ends by itself (UP TO): for the view, the table and a
    (SELECT ...) query, the reassembled state equals PostgreSQL's after every epoch;
    psql streams the same rows (COPY and a bare SUBSCRIBE); ENVELOPE UPSERT (KEY (id))
    keeps the table's rows by key."""
    mirror, start = sub
    end = _record(mirror, 60, 11)
    c = connect(hw_server.dsn)
    checked = 0
    for name, target in (
        ("tm_s_v", "tm_s_v"),
        ("tm_s", "TO tm_s"),
        ("query", f"({SUB_QUERY})"),
    ):
        rows = copy_rows(
            c, f"COPY (SUBSCRIBE {target} WITH (PROGRESS) AS OF {start} UP TO {end + 1}) TO STDOUT"
        )
        assert rows and int(rows[0][0]) == start
        assert max(int(r[0]) for r in rows) <= end
        r = Reassembler(progress=True)
        for row in rows:
            r.feed(row)
        final = r.finish()
        assert r.progress_epochs[0] == start and r.progress_epochs[-1] == end
        bad = mismatches(r.checkpoints, lambda e, n=name: mirror.at(n, e))
        assert not bad, (name, bad[:5])
        assert final == mirror.at(name, end)
        checked += len(r.checkpoints)
    # psql: COPY (SUBSCRIBE ...) TO STDOUT and a bare SUBSCRIBE, ended by UP TO
    for sql in (
        f"COPY (SUBSCRIBE tm_s_v AS OF {start} UP TO {end + 1}) TO STDOUT",
        f"SUBSCRIBE tm_s_v AS OF {start} UP TO {end + 1}",
    ):
        out = subprocess.run(
            [
                "psql", "-X", "-q", "-h", hw_server.host, "-p", str(hw_server.port),
                "-U", "headwater", "-d", "headwater", "-v", "ON_ERROR_STOP=1", "-c", sql,
            ],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        r = Reassembler(progress=False)
        for line in out.stdout.splitlines():
            r.feed(tuple(None if v == r"\N" else v for v in line.split("\t")))
        assert r.finish() == mirror.at("tm_s_v", end)
        assert not mismatches(r.checkpoints, lambda e: mirror.at("tm_s_v", e))
        checked += len(r.checkpoints)
    # ENVELOPE UPSERT: (epoch, state, key, values...)
    rows = copy_rows(
        c,
        f"COPY (SUBSCRIBE tm_s ENVELOPE UPSERT (KEY (id)) AS OF {start} UP TO {end + 1}) TO STDOUT",
    )
    by_key: dict[Any, Row] = {}
    epoch = None
    for e, state, key, *vals in rows:
        if epoch is not None and int(e) != epoch:
            assert bag(by_key.values()) == mirror.at("tm_s", epoch)
            checked += 1
        epoch = int(e)
        assert state in ("upsert", "delete"), state
        if state == "upsert":
            by_key[norm(key)] = (key, *vals)
        else:
            assert all(v is None for v in vals)
            del by_key[norm(key)]
    assert bag(by_key.values()) == mirror.at("tm_s", end)
    # ENVELOPE UPSERT of the view, keyed by its group
    rows = copy_rows(
        c,
        f"COPY (SUBSCRIBE tm_s_v ENVELOPE UPSERT (KEY (a)) AS OF {start} UP TO {end + 1}) "
        "TO STDOUT",
    )
    groups: dict[Any, Row] = {}
    for _, state, key, *vals in rows:
        if state == "upsert":
            groups[key] = (key, *vals)
        else:
            assert state == "delete", state
            del groups[key]
    assert bag(groups.values()) == mirror.at("tm_s_v", end)
    # UP TO at or before the start epoch: nothing
    assert copy_rows(c, f"COPY (SUBSCRIBE tm_s_v AS OF {end} UP TO {end}) TO STDOUT") == []
    # psycopg's server-side cursors (DECLARE, Describe of the portal, FETCH FORWARD n)
    with psycopg.connect(hw_server.dsn) as tx:  # (a transaction: cursors live in one)
        tx.execute(TIMEOUT)
        mid = mirror.epochs[len(mirror.epochs) // 2]
        named = tx.cursor(name="tm_hist")
        named.execute(f"SELECT * FROM tm_s_v WHERE n > %s AS OF {mid}", [0])
        assert bag(named.fetchall()) == mirror.at("tm_s_v", mid)
        named.close()
        named = tx.cursor(name="tm_sub")
        named.execute(f"SUBSCRIBE tm_s_v WITH (PROGRESS) AS OF {start} UP TO {end + 1}")
        r = Reassembler(progress=True)
        while batch := named.fetchmany(50):  # ends when UP TO ends the subscription
            for row in batch:
                r.feed(row)
        assert r.finish() == mirror.at("tm_s_v", end)
        assert not mismatches(r.checkpoints, lambda e: mirror.at("tm_s_v", e))
        checked += len(r.checkpoints)
        named.close()
    print(f"SUBSCRIBE replay: {end - start} epochs, {checked} checkpoints, 0 mismatches")
    c.close()


def test_as_of_and_subscribe_need_the_select_privilege(hw_server: HeadwaterServer) -> None:
    """A role without SELECT on a table can read it neither AS OF an epoch nor by
    SUBSCRIBE (COPY, DECLARE, a query over it): 42501; with the grant it can."""
    with connect(hw_server.dsn) as c:
        c.execute("CREATE TABLE tm_priv (id int)")
        c.execute("INSERT INTO tm_priv VALUES (7)")
        e = token(c)
        c.execute("CREATE ROLE tm_reader LOGIN")
    reader = hw_server.dsn.replace("user=headwater", "user=tm_reader")
    denied = [
        f"SELECT * FROM tm_priv AS OF {e}",
        f"COPY (SUBSCRIBE tm_priv AS OF {e} UP TO {e + 1}) TO STDOUT",
        f"COPY (SUBSCRIBE (SELECT count(*) FROM tm_priv) AS OF {e} UP TO {e + 1}) TO STDOUT",
        "DECLARE c CURSOR FOR SUBSCRIBE tm_priv",
        f"DECLARE c CURSOR FOR SELECT * FROM tm_priv AS OF {e}",
    ]
    with connect(reader) as r:
        for sql in denied:
            with pytest.raises(errors.InsufficientPrivilege), r.transaction():
                if sql.startswith("COPY"):
                    copy_rows(r, sql)
                else:
                    r.execute(sql)
    with connect(hw_server.dsn) as c:
        c.execute("GRANT SELECT ON tm_priv TO tm_reader")
    with connect(reader) as r:
        assert r.execute(f"SELECT * FROM tm_priv AS OF {e}").fetchall() == [(7,)]
        rows = copy_rows(r, f"COPY (SUBSCRIBE tm_priv AS OF {e} UP TO {e + 1}) TO STDOUT")
        assert rows == [(str(e), "1", "7")]
    with connect(hw_server.dsn) as c:
        c.execute("DROP TABLE tm_priv")
        c.execute("DROP ROLE tm_reader")


def test_subscribe_copy_live_up_to_and_cancel(
    hw_server: HeadwaterServer, sub: tuple[Mirror, int]
) -> None:
    """A live COPY (SUBSCRIBE ... UP TO a future epoch) reassembles the view while the
    transactions run and ends once the epochs before UP TO are sent. A CancelRequest
    ends a COPY SUBSCRIBE and a waiting FETCH with 57014; both sessions go on."""
    mirror, start = sub
    up_to = start + 30
    got: list[Row] = []
    failures: list[BaseException] = []
    started = threading.Event()

    def subscriber() -> None:
        try:
            with connect(hw_server.dsn) as s:
                sql = f"COPY (SUBSCRIBE tm_s_v WITH (PROGRESS) UP TO {up_to}) TO STDOUT"
                with s.cursor().copy(sql) as cp:
                    for row in cp.rows():
                        got.append(tuple(row))
                        started.set()
        except BaseException as e:
            failures.append(e)
        started.set()

    th = threading.Thread(target=subscriber)
    th.start()
    # The writes start once the snapshot came: a subscription that began after epoch
    # up_to would rightly send nothing (point writes commit 30 transactions quickly).
    assert started.wait(120)
    wl = Workload("tm_s", 13)
    wl.next_id = 13000
    while th.is_alive() and (not mirror.epochs or mirror.epochs[-1] < up_to + 5):
        mirror.run(wl.transaction())
    th.join(timeout=300)
    assert not th.is_alive(), "UP TO did not end the COPY"
    if failures:
        raise failures[0]
    r = Reassembler(progress=True)
    for row in got:
        r.feed(row)
    assert r.progress_epochs[-1] == up_to - 1
    assert all(int(row[0]) < up_to for row in got)
    assert not mismatches(r.checkpoints, lambda e: mirror.at("tm_s_v", e))
    # cancel: COPY
    c = connect(hw_server.dsn)
    first = threading.Event()
    outcome: list[BaseException] = []

    def streaming() -> None:
        try:
            with c.cursor().copy("COPY (SUBSCRIBE tm_s_v) TO STDOUT") as cp:
                for _ in cp.rows():
                    first.set()
        except BaseException as e:
            outcome.append(e)
        first.set()

    th = threading.Thread(target=streaming)
    th.start()
    assert first.wait(120)
    c.cancel()
    th.join(timeout=60)
    assert not th.is_alive()
    assert outcome and isinstance(outcome[0], errors.QueryCanceled), outcome
    assert c.execute("SELECT count(*) FROM tm_s_v").fetchone() is not None
    # cancel: a FETCH waiting without a timeout (cancels until it ends)
    c.execute("BEGIN")
    c.execute("DECLARE w CURSOR FOR SUBSCRIBE tm_s WITH (SNAPSHOT = false)")
    fetched = threading.Event()

    def canceller() -> None:
        while not fetched.wait(0.5):
            c.cancel()

    th = threading.Thread(target=canceller)
    th.start()
    try:
        with pytest.raises(errors.QueryCanceled):
            c.execute("FETCH ALL w")
    finally:
        fetched.set()
        th.join()
    with pytest.raises(errors.InFailedSqlTransaction):
        c.execute("FETCH ALL w")
    c.execute("ROLLBACK")
    assert c.execute("SELECT 1").fetchone() == (1,)
    c.close()
    print(f"SUBSCRIBE live: {len(r.checkpoints)} checkpoints up to {up_to}; cancels: 2")


def test_slow_subscriber_is_cut_off(hw_server: HeadwaterServer) -> None:
    """A subscriber that does not read, with headwater.subscribe_buffer_rows = 100, is
    cut off (53400, told to resubscribe AS OF) while 600 rows are written; the writer
    and another subscriber are not held back (it receives every row); its session goes on."""
    with (
        connect(hw_server.dsn) as w,
        connect(hw_server.dsn) as slow,
        connect(hw_server.dsn) as fast,
    ):
        w.execute("CREATE TABLE tm_slow (id int PRIMARY KEY, v int)")
        slow.execute("SET headwater.subscribe_buffer_rows = 100")
        with pytest.raises(errors.InvalidParameterValue):
            slow.execute("SET headwater.subscribe_buffer_rows = 'many'")
        slow.execute("BEGIN")
        slow.execute("DECLARE s CURSOR FOR SUBSCRIBE tm_slow")
        fast.execute("BEGIN")
        fast.execute("DECLARE f CURSOR FOR SUBSCRIBE tm_slow")
        received: Counter[Row] = Counter()
        for i in range(30):
            w.execute(
                "INSERT INTO tm_slow SELECT g, g FROM generate_series(%s, %s) AS g",
                [i * 20, i * 20 + 19],
            )
            for row in fast.execute("FETCH ALL f WITH (timeout = '0')").fetchall():
                received[row[2:]] += row[1]
        last = token(w)
        deadline = time.time() + 120
        while sum(received.values()) < 600:
            if time.time() >= deadline:  # a hang guard, not a speed check
                pytest.fail("timed out")
            for row in fast.execute("FETCH ALL f WITH (timeout = '1s')").fetchall():
                assert row[0] <= last
                received[row[2:]] += row[1]
        assert +received == Counter((i, i) for i in range(600))
        with pytest.raises(errors.ConfigurationLimitExceeded) as info:
            slow.execute("FETCH ALL s WITH (timeout = '1s')")
        assert info.value.sqlstate == "53400"
        assert "more than 100 rows behind" in str(info.value)
        assert "AS OF" in (info.value.diag.message_hint or "")
        slow.execute("ROLLBACK")
        fast.execute("COMMIT")
        assert slow.execute("SELECT count(*) FROM tm_slow").fetchone() == (600,)
        w.execute("DROP TABLE tm_slow")
    print("slow subscriber: cut off with 53400; the other received 600/600 rows")


# -- SIGKILL mid-subscription ----------------------------------------------------------


def test_resubscribe_after_sigkill(crash_server: CrashServer | None) -> None:
    """A client streams COPY (SUBSCRIBE tm_k_v WITH (PROGRESS)) while a writer inserts,
    updates and deletes; the server is SIGKILLed mid-stream. The client keeps the state
    at the last progress epoch P it saw. After restart (and more writes), it
    resubscribes AS OF P WITH (SNAPSHOT = false): every row is of an epoch > P, and the
    state it reassembles equals, at every epoch, the view's query over the table at
    that epoch (and the view read AS OF the last one)."""
    assert crash_server is not None
    t_ready = time.time()
    server = crash_server.ready()
    t_ready = time.time() - t_ready
    confirmed: Counter[Row] = Counter()  # state at the last progress epoch seen
    pending: list[tuple[int, Row]] = []
    progress: list[int] = []
    acked: set[int] = set()
    stop = threading.Event()

    def subscriber() -> None:
        try:
            with connect(server.dsn) as s:
                with s.cursor().copy("COPY (SUBSCRIBE tm_k_v WITH (PROGRESS)) TO STDOUT") as cp:
                    for row in cp.rows():
                        if row[1] == "t":
                            for diff, cols in pending:
                                confirmed[cols] += diff
                            pending.clear()
                            progress.append(int(row[0]))
                        else:
                            pending.append((int(row[2]), tuple(norm(v) for v in row[3:])))
        except psycopg.Error:
            pass  # the server died

    def writer() -> None:
        i = 1
        try:
            with connect(server.dsn) as w:
                while not stop.is_set():
                    w.execute("INSERT INTO tm_k VALUES (%s, %s, %s)", [i, i % 5, i])
                    acked.add(i)
                    if i % 3 == 0:
                        w.execute("UPDATE tm_k SET x = x + 1 WHERE id = %s", [i - 1])
                    if i % 4 == 0:
                        acked.discard(i - 2)  # (a delete in flight at the kill may commit)
                        w.execute("DELETE FROM tm_k WHERE id = %s", [i - 2])
                    i += 1
        except psycopg.Error:
            pass

    ts = threading.Thread(target=subscriber)
    tw = threading.Thread(target=writer)
    ts.start()
    tw.start()
    deadline = time.time() + 180
    while len(progress) < 5:
        if time.time() >= deadline:  # a hang guard, not a speed check
            pytest.fail("no progress from the subscription")
        time.sleep(0.05)
    server.kill()
    stop.set()
    ts.join(timeout=60)
    tw.join(timeout=60)
    p = progress[-1]
    at_p = +confirmed
    t0 = time.time()
    server.start(timeout=300)
    restart = time.time() - t0
    with connect(server.dsn) as c:
        kept = {r[0] for r in c.execute("SELECT id FROM tm_k").fetchall()}
        assert acked - kept == set(), "acknowledged rows lost"
        for j in range(10):
            c.execute("INSERT INTO tm_k VALUES (%s, %s, %s)", [1_000_000 + j, j % 7, j])
        end = token(c)
        rows = copy_rows(
            c,
            f"COPY (SUBSCRIBE tm_k_v WITH (SNAPSHOT = false, PROGRESS) AS OF {p} "
            f"UP TO {end + 1}) TO STDOUT",
        )
        assert all(int(r[0]) > p for r in rows if r[1] == "f"), "a change at or before P again"
        r = Reassembler(progress=True, state=at_p)
        for row in rows:
            r.feed(row)
        final = r.finish()
        truth_q = "SELECT g, count(*), sum(x) FROM tm_k GROUP BY g AS OF EPOCH {}"
        assert at_p == bag(c.execute(truth_q.format(p)).fetchall()), "wrong before the kill"
        bad = mismatches(r.checkpoints, lambda e: bag(c.execute(truth_q.format(e)).fetchall()))
        view_at_end = bag(c.execute(f"SELECT g, n, s FROM tm_k_v AS OF EPOCH {end}").fetchall())
    print(
        f"SIGKILL: waited {t_ready:.0f}s for the server, last progress {p} "
        f"({len(progress)} progress rows), restart {restart:.0f}s, "
        f"resumed to {end}: {len(r.checkpoints)} checkpoints, {len(bad)} mismatches"
    )
    assert not bad, bad[:5]
    assert final == view_at_end
