"""Reads see every acknowledged write by default (issue 15), and say why they wait.

headwater.freshness = 'latest' (the default): a statement in any session reflects
every write acknowledged, by any session, before it started, for tables and
materialized views alike (PostgreSQL's read committed). A read that must wait for a
view sends a NOTICE saying what it waits for before it blocks (once per statement):
the maintenance engine starting, or the view reaching an epoch. 'session' and 'none'
keep their behaviour (a reader that never wrote does not wait for others' writes).

One server for this module, with `--executor duckdb` (under the default `auto` views
are maintained on DuckDB while the stage starts, so nothing would wait for it:
tests/test_executor_auto.py): its Spark stage starts during the first test, whose
read must wait for it. The JVM is SIGSTOPped in one test to make a view lag
deterministically. Timings are printed, never asserted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest
from headwater.engine.engine import CATCH_UP_MAX_S
from psycopg import errors

from tests.hwserver import HeadwaterServer

TIMEOUT = "SET headwater.freshness_timeout = '300s'"  # the first Spark start: 10-60 s


@dataclass
class Notices:
    """The NOTICEs a connection received: (time received, message, detail, hint)."""

    items: list[tuple[float, str, str | None, str | None]] = field(default_factory=list)

    def __call__(self, d: psycopg.errors.Diagnostic) -> None:
        assert d.severity == "NOTICE" and d.sqlstate == "00000", (d.severity, d.sqlstate)
        self.items.append(
            (time.monotonic(), d.message_primary or "", d.message_detail, d.message_hint)
        )

    def take(self) -> list[tuple[float, str, str | None, str | None]]:
        out, self.items = self.items, []
        return out


def connect(dsn: str, notices: Notices | None = None) -> psycopg.Connection[Any]:
    c = psycopg.connect(dsn, autocommit=True)
    c.execute(TIMEOUT)
    if notices is not None:
        c.add_notice_handler(notices)
    return c


def token(c: psycopg.Connection[Any]) -> int:
    value = c.info.parameter_status("headwater_epoch")
    assert value is not None
    return int(value)


@dataclass
class FirstRead:
    rows: list[Any]
    notices: list[tuple[float, str, str | None, str | None]]
    started: float
    ended: float
    epoch: int  # the INSERT's


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeadwaterServer]:
    data = tmp_path_factory.mktemp("freshness") / "data"
    srv = HeadwaterServer(data, args=["--executor", "duckdb"]).start(timeout=120)
    yield srv
    srv.stop()


@pytest.fixture(scope="module", autouse=True)
def first_read(server: HeadwaterServer) -> FirstRead:
    """Before any other test of the module: session A creates fq_t and the view fq_v
    (which starts the Spark stage) and inserts a row; session B, which never wrote,
    reads the view at once, with the default freshness: it must wait for the stage."""
    notices = Notices()
    with connect(server.dsn) as a, connect(server.dsn, notices) as b:
        assert b.execute("SHOW headwater.freshness").fetchone() == ("latest",)
        a.execute("CREATE TABLE fq_t (id int PRIMARY KEY, g int)")
        a.execute("CREATE MATERIALIZED VIEW fq_v AS SELECT g, count(*) AS n FROM fq_t GROUP BY g")
        a.execute("INSERT INTO fq_t VALUES (1, 1)")
        started = time.monotonic()
        rows = b.execute("SELECT g, n FROM fq_v").fetchall()
        ended = time.monotonic()
        return FirstRead(rows, notices.take(), started, ended, token(a))


def test_first_view_read_waits_for_the_engine_with_a_notice(first_read: FirstRead) -> None:
    """The first read of a view after a write (another session's) waits for the Spark
    stage to start, sees the write, and says so first: one NOTICE, received before the
    result, naming the view and the epochs."""
    fr = first_read
    print(
        f"first view read: {fr.ended - fr.started:.1f}s; NOTICE after "
        f"{(fr.notices[0][0] - fr.started) if fr.notices else float('nan'):.2f}s"
    )
    assert [tuple(r) for r in fr.rows] == [(1, 1)]
    assert len(fr.notices) == 1, fr.notices
    at, message, detail, hint = fr.notices[0]
    assert message == "waiting for the maintenance engine to start"
    assert detail is not None and 'Materialized view "fq_v"' in detail
    assert f"this read needs epoch {fr.epoch}" in detail
    assert hint is not None and "headwater.freshness = 'none'" in hint
    assert fr.started <= at < fr.ended


def test_cross_session_reads_1000_iterations(server: HeadwaterServer) -> None:
    """1000 iterations in 20 concurrent pairs of sessions: writer g INSERTs a row of
    group g; once it is acknowledged, reader g (a session that never writes, default
    freshness) reads the materialized view and the table. Each read must count the
    writer's k rows exactly and, overall, at least every row acknowledged (by any
    writer) before the read started: 0 stale."""
    with connect(server.dsn) as c:
        c.execute("CREATE TABLE fq_c (id int PRIMARY KEY, g int)")
        c.execute("CREATE MATERIALIZED VIEW fq_cv AS SELECT g, count(*) AS n FROM fq_c GROUP BY g")
        c.execute("SELECT * FROM fq_cv").fetchall()
    pairs, per_pair = 20, 50
    acked = [0]
    stale = {"view": 0, "table": 0}
    done = [0]
    notices: list[str] = []
    failures: list[BaseException] = []
    lock = threading.Lock()
    reads = {
        "view": "SELECT g, n FROM fq_cv",
        "table": "SELECT g, count(*) FROM fq_c GROUP BY g",
    }

    def pair(g: int) -> None:
        seen = Notices()
        try:
            with connect(server.dsn) as w, connect(server.dsn, seen) as r:
                for k in range(1, per_pair + 1):
                    w.execute("INSERT INTO fq_c VALUES (%s, %s)", [g * 1000 + k, g])
                    with lock:
                        acked[0] += 1
                        before = acked[0]
                    for kind, sql in reads.items():
                        counts = {int(a): int(b) for a, b in r.execute(sql).fetchall()}
                        if counts.get(g, 0) != k or sum(counts.values()) < before:
                            with lock:
                                stale[kind] += 1
                    with lock:
                        done[0] += 1
            notices.extend(m for _, m, _, _ in seen.items)
        except BaseException as e:
            failures.append(e)

    t0 = time.time()
    threads = [threading.Thread(target=pair, args=(g,)) for g in range(pairs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(
        f"cross-session reads: {done[0]} iterations ({pairs} pairs), stale: {stale}, "
        f"{len(notices)} NOTICEs (waits > 1 s), {time.time() - t0:.1f}s"
    )
    if failures:
        raise failures[0]
    assert done[0] == pairs * per_pair == 1000
    assert stale == {"view": 0, "table": 0}
    assert all(m.startswith('waiting for materialized view "fq_cv"') for m in notices), notices


# -- the opt-in modes, with the view held behind (the JVM stopped) -------------------------


def jvm_of(server: HeadwaterServer) -> int | None:
    """The Spark stage's JVM: the server's child process running java."""
    assert server.proc is not None
    out = subprocess.run(
        ["ps", "-ww", "-o", "pid=,args=", "--ppid", str(server.proc.pid)],
        capture_output=True,
        text=True,
    ).stdout
    for line in out.splitlines():
        pid, args = line.split(None, 1)
        if "java" in args.split()[0]:
            return int(pid)
    return None


def _n(c: psycopg.Connection[Any], sql: str = "SELECT n FROM fq_v WHERE g = 2") -> int:
    row = c.execute(sql).fetchone()
    return int(row[0]) if row else 0


def test_modes_while_a_view_lags(server: HeadwaterServer) -> None:
    """With the stage's JVM stopped, the view cannot reflect a new write. Session B
    never wrote. 'session' and 'none' read the view as it is, at once and without a
    NOTICE (the stale answer is theirs to accept); a table read under 'session' still
    sees the write. The default waits: one NOTICE naming the view and the epoch it
    needs, then 57014 at headwater.freshness_timeout. 'session' with the writer's
    token (headwater.read_after) waits the same way. Once the JVM runs again the
    default read sees the write."""
    notices = Notices()
    with connect(server.dsn) as a, connect(server.dsn, notices) as b:
        a.execute("INSERT INTO fq_t VALUES (100, 2)")
        assert _n(b) == 1  # the default: waits until the view has it
        jvm = jvm_of(server)
        assert jvm is not None, "no JVM under the server"
        os.kill(jvm, signal.SIGSTOP)
        # the batch in flight goes on advancing the view to newer epochs for up to
        # CATCH_UP_MAX_S in Python (engine.start's on_batch) while its JVM is stopped
        time.sleep(CATCH_UP_MAX_S + 2)
        try:
            a.execute("INSERT INTO fq_t VALUES (101, 2)")
            epoch = token(a)
            notices.take()
            for mode in ("session", "none"):
                b.execute(f"SET headwater.freshness = '{mode}'")
                t0 = time.monotonic()
                assert _n(b) == 1, mode  # the view as it is: before the write
                print(f"'{mode}': a view read while the view lags: {time.monotonic() - t0:.3f}s")
                assert notices.take() == [], mode
            b.execute("SET headwater.freshness = 'session'")
            assert _n(b, "SELECT count(*) FROM fq_t WHERE g = 2") == 2  # tables: every write

            b.execute("SET headwater.freshness_timeout = '3s'")
            for mode, after in (("latest", "0"), ("session", str(epoch))):
                b.execute(f"SET headwater.freshness = '{mode}'")
                b.execute(f"SET headwater.read_after = '{after}'")
                t0 = time.monotonic()
                with pytest.raises(errors.QueryCanceled) as exc:
                    _n(b)
                assert f"this read needs epoch {epoch}" in str(exc.value)
                got = notices.take()
                assert len(got) == 1, (mode, got)
                at, message, detail, _ = got[0]
                assert message == f'waiting for materialized view "fq_v" to reach epoch {epoch}'
                assert detail is not None and 'Materialized view "fq_v" reflects epoch' in detail
                print(f"'{mode}': NOTICE after {at - t0:.2f}s, 57014 after 3s")
        finally:
            os.kill(jvm, signal.SIGCONT)
        b.execute(TIMEOUT)
        b.execute("SET headwater.freshness = 'latest'")
        b.execute("SET headwater.read_after = '0'")
        assert _n(b) == 2
        b.execute("RESET headwater.freshness")
        assert b.execute("SHOW headwater.freshness").fetchone() == ("latest",)
        with pytest.raises(errors.InvalidParameterValue) as bad:
            b.execute("SET headwater.freshness = 'read committed'")
        assert bad.value.diag.message_hint == "Available values: latest, session, none."


def test_as_of_a_future_epoch_says_what_it_waits_for(server: HeadwaterServer) -> None:
    """AS OF an epoch not closed yet waits for it, saying so first."""
    notices = Notices()
    with connect(server.dsn, notices) as c:
        newest = c.execute("SELECT max(epoch) FROM headwater_catalog.epochs").fetchone()[0]
        c.execute("SET headwater.freshness_timeout = '500ms'")
        with pytest.raises(errors.InvalidParameterValue, match="has not closed yet"):
            c.execute(f"SELECT * FROM fq_t AS OF EPOCH {newest + 1000}")
        assert [m for _, m, _, _ in notices.take()] == [
            f"waiting for epoch {newest + 1000} to close"
        ]
