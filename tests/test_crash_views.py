"""Invariant 3 with materialized views: SIGKILL at random points, and Spark faults.

test_sigkill_with_views: HW_KILL_CYCLES cycles (7 by default; long mode:
HW_KILL_CYCLES=100, seed HW_SEED) on one data directory, with views defined
(aggregate with MIN/MAX, join + aggregate, view over a view, join of a big table)
and concurrent writers (single-row INSERTs, 5-row transactions that UPDATE a
counter, transactions that DELETE an earlier batch and decrement its counter).
Each cycle SIGKILLs the server during one of:

  batch     a Spark micro-batch: after a bulk load, the kill comes while Spark's offset
            log holds a batch its commit log does not (the batch is in flight), with a
            SUBSCRIBE streaming v_agg's changes (resumed after the restart)
  commit    group commit under the writers, right after a restart (the new JVM is
            still starting)
  backfill  CREATE MATERIALIZED VIEW over the big table, before it returns

After each restart: no acknowledged write lost, no transaction half applied, nothing
unwritten present; every view equal, at its recovered frontier and at an older epoch
(AS OF), to its query over the tables computed by Headwater's plain SELECT (which the
rest of the suite proves equal to PostgreSQL): a change counted twice or lost would
show at those epochs. Before each batch cycle and at the end, every view must catch
up with the last durable epoch (the stage recovers); the subscriber, resumed AS OF its
last progress epoch, must integrate to the view's contents; at the end every view
equals PostgreSQL 15's answer over the final tables.

test_spark_faults_restart_the_stage: the stage's query fails in a micro-batch
(injected) and its restarts fail until 'error' shows (retries going on), its Python
source worker dies, its JVM dies; test_spark_stall_restarts_the_stage: its JVM is
SIGSTOPped, and the stall watchdog kills it. Meanwhile headwater_catalog.views shows
'restarting' (or 'error') with the cause, reads and writes go on, and (the default
`--executor auto`) the views advance on DuckDB while the stage is down; then the
views catch up, exact. Both run on one server (the `stage` fixture).

test_sigkill_during_spark_executed_batch: `--executor spark`, SIGKILL while a batch
runs as Spark jobs (below).
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg
import psycopg
import pytest
from headwater.engine.engine import CATCH_UP_MAX_S

from tests.hwserver import HeadwaterServer, free_port

KILLS = int(os.environ.get("HW_KILL_CYCLES", "7"))
SEED = int(os.environ.get("HW_SEED", "11"))
FAULTS_ENV = "HEADWATER_FAULT_INJECTION"  # server/matviews.py: files in {data_dir}/faults/
BACKOFF_ENV = "HEADWATER_STAGE_BACKOFF"  # server/matviews.py: the restarts' backoff
# The stall timeout while the JVM is stopped ({data_dir}/faults/stall_timeout); the server
# runs with --spark-stall-timeout 2min otherwise: at load average 30 here, batches of
# this light load came more than 15 s apart (a 15 s timeout killed healthy JVMs)
STALL_TIMEOUT = 10
BIG_LOAD = 60_000  # rows per bulk load of `big` (a heavy micro-batch, a long backfill)
WAIT = 900.0  # generous bound on waiting for the stage (a JVM takes 10-70 s here)

SCHEMA = [
    "CREATE TABLE acked (id bigint PRIMARY KEY, w int, v int)",
    "CREATE TABLE batches (batch bigint, j int, w int)",
    "CREATE TABLE counters (w int PRIMARY KEY, n int)",
    "CREATE TABLE big (k bigint, x int, load int)",
    "CREATE TABLE dim (x int PRIMARY KEY, label text)",
    "INSERT INTO dim SELECT g, 'l' || (g % 7) FROM generate_series(0, 999) AS t(g)",
]
V_AGG = "SELECT w, count(*) AS n, sum(id) AS s, min(id) AS lo, max(id) AS hi FROM acked GROUP BY w"
VIEWS = {
    "v_agg": V_AGG,
    "v_join": "SELECT c.w, count(*) AS rows, sum(b.j) AS js, max(c.n) AS n"
    " FROM batches b JOIN counters c ON b.w = c.w GROUP BY c.w",
    "v_top": "SELECT count(*) AS groups, sum(n) AS total, max(hi) AS hi FROM v_agg",
    "v_big": "SELECT b.x % 5 AS g, d.label, count(*) AS n, sum(b.k) AS s"
    " FROM big b JOIN dim d ON b.x = d.x GROUP BY b.x % 5, d.label",
}
# each view's query over the tables only (the view over a view unfolded)
QUERIES = {
    **VIEWS,
    "v_top": f"SELECT count(*) AS groups, sum(n) AS total, max(hi) AS hi FROM ({V_AGG}) a",
}
BACKFILL = (
    "SELECT b.x % 13 AS g, count(*) AS n, sum(b.k) AS s, count(DISTINCT d.label) AS labels"
    " FROM big b JOIN dim d ON b.x = d.x GROUP BY b.x % 13"
)
CONN_ERRORS = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, ConnectionError)


# -- what the writers were told ---------------------------------------------------------
@dataclass
class Model:
    acked: set[int] = field(default_factory=set)  # ids in `acked`, acknowledged
    maybe: set[int] = field(default_factory=set)  # ids whose INSERT got no answer
    batches: dict[int, int] = field(default_factory=dict)  # batch -> w, insert acknowledged
    deleted: set[int] = field(default_factory=set)  # batches whose DELETE was acknowledged
    doubt: set[int] = field(default_factory=set)  # batches of a commit that got no answer
    loads: set[int] = field(default_factory=set)  # bulk loads of `big`, acknowledged
    maybe_loads: set[int] = field(default_factory=set)
    views: dict[str, str] = field(default_factory=lambda: dict(QUERIES))  # live views
    connected: int = 0  # writers connected so far


async def connect(port: int) -> asyncpg.Connection:
    return await asyncpg.connect(
        host="127.0.0.1",
        port=port,
        user="headwater",
        database="headwater",
        statement_cache_size=0,
        timeout=60,
        ssl=False,
    )


async def single_writer(port: int, wid: int, m: Model, stop: asyncio.Event) -> None:
    try:
        conn = await connect(port)
    except CONN_ERRORS:
        return
    m.connected += 1
    i = 0
    try:
        while not stop.is_set():
            key = wid * 10_000_000 + i
            m.maybe.add(key)
            await conn.execute("INSERT INTO acked (id, w, v) VALUES ($1, $2, $3)", key, wid % 17, i)
            m.acked.add(key)
            m.maybe.discard(key)
            i += 1
    except CONN_ERRORS:
        pass
    finally:
        conn.terminate()


async def txn_writer(port: int, w: int, m: Model, stop: asyncio.Event) -> None:
    """5-row transactions with their counter's UPDATE; every third one also DELETEs an
    earlier batch of this writer and decrements the counter."""
    try:
        conn = await connect(port)
    except CONN_ERRORS:
        return
    m.connected += 1
    b = 0
    mine: list[int] = []
    try:
        while not stop.is_set():
            batch = w * 100_000 + b
            victim = mine.pop(0) if b % 3 == 2 and mine else None
            m.doubt.update({batch} if victim is None else {batch, victim})
            async with conn.transaction():
                for j in range(5):
                    await conn.execute("INSERT INTO batches VALUES ($1, $2, $3)", batch, j, w)
                await conn.execute("UPDATE counters SET n = n + 1 WHERE w = $1", w)
                if victim is not None:
                    await conn.execute("DELETE FROM batches WHERE batch = $1", victim)
                    await conn.execute("UPDATE counters SET n = n - 1 WHERE w = $1", w)
            m.batches[batch] = w
            mine.append(batch)
            m.doubt.discard(batch)
            if victim is not None:
                m.deleted.add(victim)
                m.doubt.discard(victim)
            b += 1
    except CONN_ERRORS:
        pass
    finally:
        conn.terminate()


async def start_writers(port: int, cycle: int, m: Model, stop: asyncio.Event) -> list[asyncio.Task]:
    """Five writers, connected when this returns."""
    before = m.connected
    tasks = [
        *(asyncio.create_task(single_writer(port, cycle * 10 + s, m, stop)) for s in range(3)),
        *(asyncio.create_task(txn_writer(port, cycle * 10 + s, m, stop)) for s in range(2)),
    ]
    deadline = time.monotonic() + 60
    while m.connected < before + len(tasks) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return tasks


async def bulk_load(conn: asyncpg.Connection, load: int, m: Model) -> None:
    m.maybe_loads.add(load)
    await conn.execute(
        f"INSERT INTO big SELECT g, (g * 7 + {load}) % 1100, {load}"
        f" FROM generate_series(1, {BIG_LOAD}) AS t(g)"
    )
    m.loads.add(load)
    m.maybe_loads.discard(load)


# -- checks ------------------------------------------------------------------------------
def norm(v: Any) -> Any:
    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(round(v, 6))
    if isinstance(v, float):
        return round(v, 6)
    return v


def rows_of(records: list[Any]) -> Counter:
    return Counter(tuple(norm(v) for v in r.values()) for r in records)


async def check_tables(conn: asyncpg.Connection, m: Model, where: str, big: bool = True) -> None:
    present = {r[0] for r in await conn.fetch("SELECT id FROM acked")}
    lost = m.acked - present
    assert not lost, f"{where}: {len(lost)} acknowledged rows lost, e.g. {sorted(lost)[:5]}"
    extra = present - m.acked - m.maybe
    assert not extra, f"{where}: rows nobody wrote: {sorted(extra)[:5]}"
    sizes = {
        r[0]: (r[1], r[2])
        for r in await conn.fetch("SELECT batch, count(*), min(w) FROM batches GROUP BY batch")
    }
    half = {b: n for b, (n, _) in sizes.items() if n != 5}
    assert not half, f"{where}: transactions half applied: {dict(list(half.items())[:5])}"
    for b in m.batches:
        if b in m.deleted:
            assert b not in sizes, f"{where}: batch {b} deleted (acknowledged) is back"
        elif b not in m.doubt:
            assert b in sizes, f"{where}: acknowledged batch {b} lost"
    unknown = set(sizes) - set(m.batches) - m.doubt
    assert not unknown, f"{where}: batches nobody committed: {sorted(unknown)[:5]}"
    per_w = Counter(w for _, w in sizes.values())
    counters = {r[0]: r[1] for r in await conn.fetch("SELECT w, n FROM counters WHERE n <> 0")}
    assert counters == dict(per_w), (
        f"{where}: counters disagree with the batches present (UPDATE and INSERT/DELETE"
        f" of one transaction split): {sorted(set(counters.items()) ^ set(per_w.items()))[:5]}"
    )
    if not big:
        return
    loads = {r[0]: r[1] for r in await conn.fetch("SELECT load, count(*) FROM big GROUP BY load")}
    assert set(loads) >= m.loads, f"{where}: acknowledged bulk loads lost"
    assert set(loads) <= m.loads | m.maybe_loads, f"{where}: bulk loads nobody wrote"
    assert all(n == BIG_LOAD for n in loads.values()), f"{where}: a bulk load half applied"


async def catalog_views(conn: asyncpg.Connection) -> dict[str, Any]:
    rows = await conn.fetch(
        "SELECT name, status, error, frontier, created_epoch FROM headwater_catalog.views"
    )
    return {r["name"]: r for r in rows}


async def check_view(conn: asyncpg.Connection, name: str, query: str, epoch: int, where: str):
    got = rows_of(await conn.fetch(f"SELECT * FROM {name} AS OF {epoch}"))
    want = rows_of(await conn.fetch(f"{query} AS OF {epoch}"))
    assert got == want, (
        f"{where}: view {name} at epoch {epoch} differs from its query: "
        f"missing {list((want - got).items())[:4]}, extra {list((got - want).items())[:4]}"
    )


async def check_views(
    conn: asyncpg.Connection, m: Model, rng: random.Random, where: str, older: bool = True
) -> dict[str, int]:
    """Every view equals its query at its frontier (and at an older epoch)."""
    cat = await catalog_views(conn)
    fronts = {}
    for name, query in m.views.items():
        row = cat.get(name)
        assert row is not None, f"{where}: view {name} is missing: {sorted(cat)}"
        assert row["status"] in ("running", "restarting"), f"{where}: {name}: {dict(row)}"
        f, created = row["frontier"], row["created_epoch"]
        await check_view(conn, name, query, f, where)
        if older and f > created:
            await check_view(conn, name, query, rng.randint(created, f - 1), where)
        fronts[name] = f
    return fronts


async def durable_epoch(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval("SELECT max(epoch) FROM headwater_catalog.epochs") or 0)


async def wait_caught_up(conn: asyncpg.Connection, where: str, timeout: float = WAIT) -> int:
    """Wait until every view reflects the newest durable epoch; returns that epoch."""
    target = await durable_epoch(conn)
    deadline = time.monotonic() + timeout
    while True:
        cat = await catalog_views(conn)
        bad = [dict(r) for r in cat.values() if r["status"] == "error"]
        assert not bad, f"{where}: a view failed: {bad}"
        if cat and min(r["frontier"] for r in cat.values()) >= target:
            return target
        if time.monotonic() >= deadline:  # a hang guard, not a speed check
            pytest.fail(f"{where}: views did not catch up: {cat}")
        await asyncio.sleep(0.5)


# -- the subscriber ----------------------------------------------------------------------
class Subscriber:
    """SUBSCRIBE v_agg WITH (PROGRESS) through DECLARE/FETCH. `state` is the view at
    epoch `progress` (changes past the last progress row are not yet complete)."""

    def __init__(self) -> None:
        self.state: Counter = Counter()
        self.progress: int | None = None
        self.pending: list[tuple[int, int, tuple]] = []
        self.changes = 0  # change rows received

    def take(self, rows: list[Any]) -> None:
        for rec in rows:
            r = tuple(rec)
            epoch, progressed, diff = r[0], r[1], r[2]
            if progressed:
                for e, d, row in self.pending:
                    assert e <= epoch
                    self.state[row] += d
                self.pending.clear()
                self.progress = epoch
                self.state = Counter({k: n for k, n in self.state.items() if n})
            else:
                self.pending.append((epoch, diff, tuple(norm(v) for v in r[3:])))
                self.changes += 1

    async def run(self, port: int, subscribe: str, until: int | None = None) -> None:
        """Follow the subscription until progress reaches `until` (or the connection
        dies)."""
        conn = await connect(port)
        try:
            await conn.execute("BEGIN")
            await conn.execute(f"DECLARE c CURSOR FOR {subscribe}")
            while until is None or self.progress is None or self.progress < until:
                self.take(await conn.fetch("FETCH 1000 c WITH (timeout = '0.5s')"))
        finally:
            conn.terminate()

    async def follow(self, port: int, ready: asyncio.Event) -> None:
        async def watch() -> None:
            while self.progress is None:
                await asyncio.sleep(0.05)
            ready.set()

        w = asyncio.create_task(watch())
        try:
            await self.run(port, "SUBSCRIBE v_agg WITH (PROGRESS)")
        except CONN_ERRORS:
            self.pending.clear()  # past the last progress: not complete, not kept
        finally:
            w.cancel()


async def resume_subscription(
    conn: asyncpg.Connection, port: int, sub: Subscriber, upto: int, where: str
) -> None:
    """Resubscribe AS OF the last progress epoch without snapshot: the changes since
    then, integrated into the state kept before the crash, give the view at `upto`."""
    assert sub.progress is not None
    resume = f"SUBSCRIBE v_agg WITH (SNAPSHOT = false, PROGRESS) AS OF {sub.progress}"
    await asyncio.wait_for(sub.run(port, resume, upto), WAIT)
    want = rows_of(await conn.fetch(f"SELECT * FROM v_agg AS OF {sub.progress}"))
    assert sub.state == want, (
        f"{where}: the resumed SUBSCRIBE integrates to something else than v_agg at epoch"
        f" {sub.progress}: missing {list((want - sub.state).items())[:4]},"
        f" extra {list((sub.state - want).items())[:4]}"
    )


# -- processes -----------------------------------------------------------------------------
def children(pid: int) -> list[tuple[int, str]]:
    out = subprocess.run(
        ["ps", "-ww", "-o", "pid=,args=", "--ppid", str(pid)], capture_output=True, text=True
    ).stdout
    return [(int(line.split(None, 1)[0]), line.split(None, 1)[1]) for line in out.splitlines()]


def jvm_of(server: HeadwaterServer) -> int | None:
    """The server's current Spark JVM: its newest live java child. A JVM the stage
    replaced may linger while it shuts down (or as a zombie until reaped): stopping
    that one instead would stall nothing."""
    assert server.proc is not None
    live = [
        (int(start), pid)
        for pid, args in children(server.proc.pid)
        if "java" in args.split()[0] and (start := started(pid)) is not None
    ]
    return max(live)[1] if live else None


def started(pid: int) -> str | None:
    """When the process started (field 22 of /proc/pid/stat): with the pid, its
    identity across exec and pid reuse. None when gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else fields[19]


Proc = tuple[int, str | None, str]  # pid, start time, command line


def kill_server(server: HeadwaterServer, wait: bool) -> list[Proc]:
    """SIGKILL the server. Its JVM follows its parent's stdin and exits once it is up;
    with `wait` (the stage was running), wait for that before a new server runs the
    stage on the same checkpoint. Returns the children, which must all go."""
    assert server.proc is not None
    kids = [(pid, started(pid), args) for pid, args in children(server.proc.pid)]
    server.kill()
    if wait:
        wait_gone(kids)
    return kids


def wait_gone(procs: list[Proc], timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    for pid, start, args in procs:
        while start is not None and started(pid) == start:
            if time.monotonic() >= deadline:  # a hang guard, not a speed check
                pytest.fail(f"{pid} ({args[:80]}) outlived its server")
            time.sleep(0.1)


def report_failure(server: HeadwaterServer) -> None:
    """On a failure, show whether the server still runs and the end of its log."""
    if sys.exc_info()[0] is None:
        return
    code = server.proc.poll() if server.proc is not None else None
    print(f"\nserver pid {server.proc and server.proc.pid}, exit code {code}, log:")
    print(server.log_tail(6000))


async def kill_while_starting(server: HeadwaterServer, delay: float) -> tuple[str, list[Proc]]:
    """Start `server` and SIGKILL it `delay` seconds later: while it recovers (replays
    the log, backfills views missing from the engine) or, if it was quicker, once it
    listens. Returns which, and its children."""
    starting = asyncio.create_task(asyncio.to_thread(server.start, WAIT))
    await asyncio.sleep(delay)
    listening = starting.done() and starting.exception() is None
    kids = kill_server(server, wait=False) if server.proc is not None else []
    try:
        await starting
    except RuntimeError:  # "headwater exited with -9"
        pass
    return ("after a restart" if listening else "during recovery"), kids


def in_flight(checkpoint: Path) -> int | None:
    """A micro-batch Spark has planned (offset log) and not committed (commit log)."""

    def ids(d: str) -> list[int]:
        try:
            return [int(p.name) for p in (checkpoint / d).iterdir() if p.name.isdigit()]
        except FileNotFoundError:
            return []

    offsets, commits = ids("offsets"), ids("commits")
    if offsets and max(offsets) > max(commits, default=-1):
        return max(offsets)
    return None


# -- the harness ----------------------------------------------------------------------------
# batch cycles wait for a new JVM (10-70 s here); the others kill while it starts
KINDS = ["batch", "commit", "backfill", "commit", "backfill"]


@pytest.mark.oracle
def test_sigkill_with_views(tmp_path: Path, pg_oracle: Any) -> None:
    asyncio.run(_crash_cycles(tmp_path, pg_oracle))


async def _crash_cycles(tmp_path: Path, pg: Any) -> None:
    rng = random.Random(SEED)
    m = Model()
    server = HeadwaterServer(tmp_path / "data", port=free_port()).start()
    checkpoint = server.data_dir / "engine" / "checkpoint"
    stats: Counter = Counter()
    t_start = time.monotonic()
    sub: Subscriber | None = None
    orphans: list[Proc] = []  # children of killed servers: they must go
    total_changes = 0
    try:
        conn = await connect(server.port)
        for sql in SCHEMA:
            await conn.execute(sql)
        await conn.execute(
            f"INSERT INTO counters SELECT g, 0 FROM generate_series(0, {(KILLS + 2) * 10}) AS t(g)"
        )
        await bulk_load(conn, 0, m)
        for name, sql in VIEWS.items():
            await conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
        t0 = time.monotonic()  # how long a backfill takes: the window of backfill kills
        await conn.execute(f"CREATE MATERIALIZED VIEW bf AS {BACKFILL}")
        backfill_time = time.monotonic() - t0
        await conn.execute("DROP MATERIALIZED VIEW bf")
        await conn.close()
        for cycle in range(KILLS):
            kind = KINDS[cycle % len(KINDS)]
            where = f"cycle {cycle} ({kind})"
            t_cycle = time.monotonic()
            conn = await connect(server.port)
            await conn.execute("SET headwater.freshness = 'none'")
            if kind == "batch":
                # the stage must be up: wait for the views, and check the resumed SUBSCRIBE
                await wait_caught_up(conn, where)
                await check_views(conn, m, rng, where + ", caught up", older=False)
                if sub is not None and sub.progress is not None:
                    await resume_subscription(
                        conn, server.port, sub, await durable_epoch(conn), where
                    )
                    stats["subscriptions resumed"] += 1
                total_changes += sub.changes if sub is not None else 0
                sub = Subscriber()
                ready = asyncio.Event()
                follower = asyncio.create_task(sub.follow(server.port, ready))
                await asyncio.wait_for(ready.wait(), WAIT)
            stop = asyncio.Event()
            writers = await start_writers(server.port, cycle, m, stop)
            await asyncio.sleep(rng.uniform(0.1, 0.5))
            if kind == "batch":
                await bulk_load(conn, cycle + 1, m)
                deadline = time.monotonic() + 60
                while in_flight(checkpoint) is None and time.monotonic() < deadline:
                    await asyncio.sleep(0.005)
                await asyncio.sleep(rng.uniform(0, 0.2))
            elif kind == "backfill":
                creator = await connect(server.port)
                name = f"bf_{cycle}"
                t0 = time.monotonic()
                create = asyncio.create_task(
                    creator.execute(f"CREATE MATERIALIZED VIEW {name} AS {BACKFILL}")
                )
                await asyncio.wait({create}, timeout=rng.uniform(0.05, 1.5 * backfill_time))
            else:
                await asyncio.sleep(rng.uniform(0.2, 1.2))
            orphans += kill_server(server, wait=kind == "batch")
            t_kill = time.monotonic()
            if kind == "batch":  # planned by Spark, not committed: the kill hit it
                stats["batch kills in flight" if in_flight(checkpoint) else "batch kills"] += 1
            redone = server.log_tail(1 << 30).count("missing from the engine")
            stop.set()
            await asyncio.gather(*writers)
            if kind == "batch":
                await follower
            created = False
            if kind == "backfill":
                created = create.done() and create.exception() is None
                if created:
                    backfill_time = time.monotonic() - t0
                    stats["backfill kills after CREATE returned"] += 1
                else:
                    stats["backfill kills during CREATE"] += 1
                    if not create.done():
                        create.cancel()
                creator.terminate()
                if cycle % 10 == 4:  # once in 10 cycles: kill the restart while it recovers
                    server = HeadwaterServer(server.data_dir, port=server.port)
                    kill, kids = await kill_while_starting(server, rng.uniform(0.5, 4.0))
                    stats[f"kills {kill}"] += 1
                    orphans += kids
            server = HeadwaterServer(server.data_dir, port=server.port).start(timeout=WAIT)
            t_up = time.monotonic() - t_kill
            if server.log_tail(1 << 30).count("missing from the engine") > redone:
                stats["backfills redone by recovery"] += 1
            conn = await connect(server.port)
            await conn.execute("SET headwater.freshness = 'none'")
            await check_tables(conn, m, where)
            if kind == "backfill":
                present = name in await catalog_views(conn)
                assert present or not created, f"{where}: acknowledged view {name} is missing"
                if present:
                    m.views[name] = BACKFILL
                    await check_views(conn, m, rng, where)
                    await conn.execute(f"DROP MATERIALIZED VIEW {name}")
                    del m.views[name]
                    stats["backfilled views recovered"] += 1
            else:
                await check_views(conn, m, rng, where)
            await conn.close()
            stats["cycles"] += 1
            print(
                f"\n{where}: {time.monotonic() - t_cycle:.1f}s, restart {t_up:.1f}s,"
                f" checks {time.monotonic() - t_kill - t_up:.1f}s,"
                f" {len(m.acked)} rows, {len(m.batches)} batches, {len(m.loads)} loads",
                end="",
            )
        # the end: the stage recovers, every view catches up and equals PostgreSQL
        conn = await connect(server.port)
        await conn.execute("SET headwater.freshness = 'none'")
        await check_tables(conn, m, "end")
        final = await wait_caught_up(conn, "end")
        await check_views(conn, m, rng, "end")
        if sub is not None and sub.progress is not None:
            await resume_subscription(conn, server.port, sub, final, "end")
            stats["subscriptions resumed"] += 1
        stats["subscribed change rows"] = total_changes + (sub.changes if sub else 0)
        await compare_with_postgres(conn, pg, final)
        await conn.close()
        wait_gone(orphans)  # no JVM or spark-submit of a killed server is left
    finally:
        report_failure(server)
        server.stop()
        print(f"\n{dict(stats)} in {time.monotonic() - t_start:.0f}s (seed {SEED})")
    assert stats["cycles"] == KILLS
    assert len(m.acked) > KILLS, "the writers made no progress"


async def compare_with_postgres(
    conn: asyncpg.Connection, pg: Any, epoch: int, views: list[str] | None = None
) -> None:
    """Copy the tables at `epoch` into PostgreSQL 15; every view at `epoch` (of VIEWS,
    or those named) must equal PostgreSQL's answer to its definition."""
    names = list(VIEWS) if views is None else views
    schema = SCHEMA[:5] if "v_big" in names else SCHEMA[:3]
    tables = [sql.split()[2] for sql in schema]
    with psycopg.connect(pg.dsn, autocommit=True) as p:
        for sql in schema:
            name = sql.split()[2]
            p.execute(f"DROP TABLE IF EXISTS {name} CASCADE")
            p.execute(sql)
        for t in tables:
            rows = await conn.fetch(f"SELECT * FROM {t} AS OF {epoch}")
            with p.cursor().copy(f"COPY {t} FROM STDIN") as cp:
                for r in rows:
                    cp.write_row(tuple(r.values()))
        for name in names:
            p.execute(f"CREATE VIEW {name} AS {VIEWS[name]}")
        for name in names:
            cur = p.execute(f"SELECT * FROM {name}")
            cols = [d.name for d in cur.description or []]
            want = Counter(tuple(norm(v) for v in r) for r in cur.fetchall())
            got = rows_of(await conn.fetch(f"SELECT * FROM {name} AS OF {epoch}"))
            assert got == want, (
                f"{name} ({', '.join(cols)}) differs from PostgreSQL at epoch {epoch}: "
                f"missing {list((want - got).items())[:4]}, extra {list((got - want).items())[:4]}"
            )
        for name in reversed(names):
            p.execute(f"DROP VIEW {name}")
        for t in tables:
            p.execute(f"DROP TABLE {t}")


# -- SIGKILL during a batch the Spark executor runs ----------------------------------------------
SPARK_KILLS = int(os.environ.get("HW_SPARK_KILL_CYCLES", "1"))
SPARK_VIEWS = ("v_agg", "v_join", "v_top")


def spark_batch_running(data_dir: Path) -> bool:
    """A batch of the Spark executor is running: the scratch directory of its inputs
    (engine/spark_executor.py: {state}/parquet/_in/{seq}) lives from the batch's start
    to its end, and a killed batch leaves it (the next start removes it)."""
    try:
        return any((data_dir / "engine" / "parquet" / "_in").iterdir())
    except FileNotFoundError:
        return False


@pytest.mark.oracle
def test_sigkill_during_spark_executed_batch(tmp_path: Path, pg_oracle: Any) -> None:
    """`--executor spark`: every batch's rules run as Spark jobs over the Parquet state,
    whose new generations are loaded and listed in the transaction that moves the
    views' frontiers. HW_SPARK_KILL_CYCLES cycles (1 by default) SIGKILL the server
    while such a batch runs (its inputs written, jobs running, or its Parquet written
    and not committed), under the writers of test_sigkill_with_views. After each
    restart: no acknowledged write lost, every view equal to its query at its recovered
    frontier and at an older epoch (a change counted twice or lost would show); at the
    end the views catch up (the replayed batch on Spark again) and equal PostgreSQL 15."""
    asyncio.run(_spark_kills(tmp_path, pg_oracle))


async def _spark_kills(tmp_path: Path, pg: Any) -> None:
    rng = random.Random(SEED)
    m = Model(views={k: QUERIES[k] for k in SPARK_VIEWS})
    args = ["--executor", "spark", "--spark-stall-timeout", "10min"]
    server = HeadwaterServer(tmp_path / "data", port=free_port(), args=args).start()
    stats: Counter = Counter()
    orphans: list[Proc] = []
    t_start = time.monotonic()
    try:
        conn = await connect(server.port)
        for sql in SCHEMA[:3]:
            await conn.execute(sql)
        await conn.execute("INSERT INTO counters SELECT g, 0 FROM generate_series(0, 99) AS t(g)")
        for name in SPARK_VIEWS:
            await conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {VIEWS[name]}")
        await conn.close()
        for cycle in range(SPARK_KILLS):
            where = f"spark cycle {cycle}"
            conn = await connect(server.port)
            await conn.execute("SET headwater.freshness = 'none'")
            await wait_caught_up(conn, where)  # the stage is up
            await conn.close()
            stop = asyncio.Event()
            writers = await start_writers(server.port, cycle, m, stop)
            # into a Spark batch (the next one, if the first ends before the delay is over)
            deadline = time.monotonic() + WAIT
            delay = rng.uniform(0, 1.0)
            while True:
                while not spark_batch_running(server.data_dir):
                    if time.monotonic() >= deadline:  # a hang guard, not a speed check
                        pytest.fail(f"{where}: no Spark batch ran")
                    await asyncio.sleep(0.005)
                await asyncio.sleep(delay)
                if spark_batch_running(server.data_dir):
                    break
                delay /= 2
            orphans += kill_server(server, wait=True)
            if spark_batch_running(server.data_dir):  # its scratch is left: killed inside
                stats["kills inside a Spark batch"] += 1
            stop.set()
            await asyncio.gather(*writers)
            server = HeadwaterServer(server.data_dir, port=server.port, args=args).start(WAIT)
            conn = await connect(server.port)
            await conn.execute("SET headwater.freshness = 'none'")
            await check_tables(conn, m, where, big=False)
            fronts = await check_views(conn, m, rng, where)
            await conn.close()
            stats["cycles"] += 1
            print(f"\n{where}: recovered frontiers {fronts}, {len(m.acked)} rows", end="")
        stop = asyncio.Event()  # writes after the last restart: every view has a batch
        writers = await start_writers(server.port, SPARK_KILLS, m, stop)
        await writes_go_on(m, "end")
        stop.set()
        await asyncio.gather(*writers)
        conn = await connect(server.port)
        await conn.execute("SET headwater.freshness = 'none'")
        final = await wait_caught_up(conn, "end")
        await check_tables(conn, m, "end", big=False)
        await check_views(conn, m, rng, "end")
        await compare_with_postgres(conn, pg, final, list(SPARK_VIEWS))
        ran = await conn.fetch(
            "SELECT name, executor, spark_tasks FROM headwater_catalog.views ORDER BY name"
        )
        assert all(r["executor"] == "spark" and r["spark_tasks"] > 0 for r in ran), ran
        await conn.close()
        wait_gone(orphans)
    finally:
        report_failure(server)
        server.stop()
        print(f"\n{dict(stats)} in {time.monotonic() - t_start:.0f}s (seed {SEED})")
    assert stats["cycles"] == SPARK_KILLS
    assert stats["kills inside a Spark batch"] == SPARK_KILLS


# -- Spark faults ------------------------------------------------------------------------------
async def wait_status(
    conn: asyncpg.Connection, status: str, text: str, where: str, timeout: float = WAIT
) -> dict[str, Any]:
    """Wait until every view shows `status` with one of `text` ('|'-separated) in its
    error."""
    deadline = time.monotonic() + timeout

    def shows(r: Any) -> bool:
        return r["status"] == status and any(t in (r["error"] or "") for t in text.split("|"))

    while True:
        cat = await catalog_views(conn)
        if cat and all(shows(r) for r in cat.values()):
            return {k: dict(v) for k, v in cat.items()}
        if time.monotonic() >= deadline:  # a hang guard, not a speed check
            pytest.fail(f"{where}: no '{status}' with '{text}': {cat}")
        await asyncio.sleep(0.1)


async def wait_recovered(conn: asyncpg.Connection, where: str) -> int:
    deadline = time.monotonic() + WAIT
    while True:
        cat = await catalog_views(conn)
        if all(r["status"] == "running" and r["error"] is None for r in cat.values()):
            break
        if time.monotonic() >= deadline:  # a hang guard, not a speed check
            pytest.fail(f"{where}: the stage did not recover: {cat}")
        await asyncio.sleep(0.2)
    return await wait_caught_up(conn, where)


async def reader(port: int, stop: asyncio.Event, errors: list[str], reads: Counter) -> None:
    """Reads of tables and views go on whatever the stage does."""
    conn = await connect(port)
    await conn.execute("SET headwater.freshness = 'none'")
    try:
        while not stop.is_set():
            for sql in ("SELECT count(*) FROM acked", "SELECT * FROM v_agg", "SELECT * FROM v_top"):
                try:
                    await conn.fetch(sql)
                    reads["ok"] += 1
                except asyncpg.PostgresError as e:
                    errors.append(f"{sql}: {e}")
            await asyncio.sleep(0.05)
    finally:
        await conn.close()


async def writes_go_on(m: Model, where: str, n: int = 10) -> None:
    before = len(m.acked)
    deadline = time.monotonic() + WAIT
    while len(m.acked) < before + n:
        if time.monotonic() >= deadline:  # a hang guard, not a speed check
            pytest.fail(f"{where}: writes stopped")
        await asyncio.sleep(0.05)


async def reads_go_on(reads: Counter, where: str, n: int = 6) -> None:
    before = reads["ok"]
    deadline = time.monotonic() + 60
    while reads["ok"] < before + n:
        if time.monotonic() >= deadline:  # a hang guard, not a speed check
            pytest.fail(f"{where}: reads stopped")
        await asyncio.sleep(0.05)


def attempt(row: dict[str, Any]) -> int:
    """The restart attempt a view's error names ('restarting (attempt N, in Xs)')."""
    return int((row["error"] or "").rsplit("(attempt ", 1)[1].split(",")[0])


@dataclass
class Stage:
    """The server of the Spark fault tests: views over acked, batches and counters."""

    server: HeadwaterServer
    faults: Path  # {data_dir}/faults (FAULTS_ENV)
    m: Model
    rng: random.Random


@pytest.fixture(scope="module")
def stage(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stage]:
    """One server for the fault tests (each test gets its own time limit; a JVM start
    costs 40-90 s here). Faults can be injected; restarts back off 1 s four times, then
    1.5 s ('error' from the fifth failure, STAGE_GIVE_UP)."""
    data = tmp_path_factory.mktemp("stage") / "data"
    args = ["--spark-stall-timeout", "2min"]
    with pytest.MonkeyPatch.context() as mp:  # the server's environment
        mp.setenv(FAULTS_ENV, "1")
        mp.setenv(BACKOFF_ENV, "1,1,1,1,1.5")
        server = HeadwaterServer(data, port=free_port(), args=args).start()
    try:
        asyncio.run(_stage_views(server))
        faults = server.data_dir / "faults"
        faults.mkdir()
        m = Model(views={k: QUERIES[k] for k in ("v_agg", "v_join", "v_top")})
        yield Stage(server, faults, m, random.Random(SEED))
    finally:
        server.stop()


async def _stage_views(server: HeadwaterServer) -> None:
    conn = await connect(server.port)
    for sql in SCHEMA[:3]:
        await conn.execute(sql)
    await conn.execute("INSERT INTO counters SELECT g, 0 FROM generate_series(0, 19) AS t(g)")
    for name in ("v_agg", "v_join", "v_top"):
        await conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {VIEWS[name]}")
    await conn.close()


class Load:
    """Writers (cycle `cycle` of start_writers) and a reader while a test runs."""

    def __init__(self, st: Stage, cycle: int) -> None:
        self.st, self.cycle = st, cycle
        self.stop = asyncio.Event()
        self.tasks: list[asyncio.Task] = []
        self.errors: list[str] = []
        self.reads: Counter = Counter()

    async def __aenter__(self) -> Load:
        port = self.st.server.port
        self.tasks = [
            *(await start_writers(port, self.cycle, self.st.m, self.stop)),
            asyncio.create_task(reader(port, self.stop, self.errors, self.reads)),
        ]
        await writes_go_on(self.st.m, "writers started")
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def end(self, conn: asyncpg.Connection, where: str) -> None:
        """Writers stopped: no acknowledged write lost, every view caught up and equal
        to its query, no read failed."""
        self.stop.set()
        await asyncio.gather(*self.tasks)
        m, rng = self.st.m, self.st.rng
        await wait_caught_up(conn, where)
        await check_tables(conn, m, where, big=False)
        await check_views(conn, m, rng, where)
        assert not self.errors, f"{where}: reads failed: {self.errors[:5]}"
        assert self.reads["ok"] > 0


def test_spark_faults_restart_the_stage(stage: Stage) -> None:
    asyncio.run(_spark_faults(stage))


async def _spark_faults(st: Stage) -> None:
    server, faults, m, rng = st.server, st.faults, st.m, st.rng
    t_start = time.monotonic()
    conn = await connect(server.port)
    await conn.execute("SET headwater.freshness = 'none'")
    load = Load(st, 0)
    try:
        async with load:
            # 1. the stage's query fails in a micro-batch (after its views committed:
            #    the batch is replayed and skipped); restarts fail while faults/start
            #    exists: 'error' after STAGE_GIVE_UP failures, with the cause, and
            #    retries go on
            (faults / "start").touch()
            (faults / "batch").touch()
            await wait_status(conn, "restarting", "injected fault (batch)", "query failure")
            since = time.monotonic()
            await writes_go_on(m, "query failure")
            cat = await wait_status(conn, "error", "injected fault (batch)", "restarts failing")
            row = next(iter(cat.values()))
            assert "injected fault (start)" in row["error"], row
            while attempt(next(iter(cat.values()))) < attempt(row) + 2:  # retries go on
                cat = await wait_status(conn, "error", "injected fault (batch)", "retries", 60)
                await asyncio.sleep(0.2)
            await writes_go_on(m, "restarts failing")
            await reads_go_on(load.reads, "restarts failing")
            # --executor auto (the default): DuckDB advances the views while the stage is
            # down, so a read that needs every acknowledged write is answered (with
            # --executor duckdb it would wait for the stage, failing with 57014)
            fresh = await connect(server.port)
            await fresh.execute("SET headwater.freshness_timeout = '60s'")
            await fresh.fetch("SELECT * FROM v_top")
            await fresh.close()
            await wait_status(conn, "error", "injected fault", "the stage still down", 5)
            (faults / "start").unlink()
            await wait_recovered(conn, "query failure")
            await check_views(conn, m, rng, "after the query failure")
            print(f"\nerror state: {row['error']} ({time.monotonic() - since:.0f}s)")

            # 2. the source's Python worker dies (the JVM stays)
            jvm = jvm_of(server)
            assert jvm is not None
            workers = [p for p, args in children(jvm) if "python_streaming_source_runner" in args]
            assert workers, f"no streaming source worker under the JVM: {children(jvm)}"
            (faults / "start").touch()
            for p in workers:
                os.kill(p, signal.SIGKILL)
            row = await wait_status(conn, "restarting", "", "worker death")
            await writes_go_on(m, "worker death")
            (faults / "start").unlink()
            await wait_recovered(conn, "worker death")
            await check_views(conn, m, rng, "after the worker's death")
            print(f"worker death: {next(iter(row.values()))['error']}")

            # 3. the JVM dies: a new SparkSession, the stage from its checkpoint
            (faults / "start").touch()
            os.kill(jvm, signal.SIGKILL)
            row = await wait_status(conn, "restarting", "Spark JVM|Spark driver", "JVM death")
            await writes_go_on(m, "JVM death")
            (faults / "start").unlink()
            await wait_recovered(conn, "JVM death")
            assert jvm_of(server) not in (None, jvm), "no new JVM"
            print(f"JVM death: {next(iter(row.values()))['error']}")
            await load.end(conn, "end")
    finally:
        report_failure(server)
        await conn.close()
        print(
            f"{load.reads['ok']} reads, {len(m.acked)} writes in {time.monotonic() - t_start:.0f}s"
        )


def test_spark_stall_restarts_the_stage(stage: Stage) -> None:
    asyncio.run(_spark_stall(stage))


def wait_stage_batched(server: HeadwaterServer, timeout: float = WAIT) -> None:
    """Wait until the stage has completed a batch since its last start (before that,
    `--executor auto` advances the views from its interim thread, which a stopped JVM
    does not hold up): the server logs each start and the first batch after it."""
    deadline = time.monotonic() + timeout
    while True:
        text = server.log_path.read_text(errors="replace") if server.log_path else ""
        started = text.rfind("Spark stage running")
        if started >= 0 and text.rfind("Spark stage: first batch completed") > started:
            return
        if time.monotonic() >= deadline:  # a hang guard, not a speed check
            pytest.fail(f"the stage ran no batch: {server.log_tail()}")
        time.sleep(0.5)


async def _spark_stall(st: Stage) -> None:
    """The JVM hangs (SIGSTOP): views fall behind and no batch completes; after the stall
    timeout the supervisor kills the JVM and starts a new one. Meanwhile reads and
    writes go on, and a read that needs the views waits and fails with 57014 naming
    the view; then every view catches up, exact."""
    server, m = st.server, st.m
    t_start = time.monotonic()
    conn = await connect(server.port)
    await conn.execute("SET headwater.freshness = 'none'")
    load = Load(st, 1)
    jvm: int | None = None
    jvm_started: str | None = None
    try:
        async with load:
            await wait_caught_up(conn, "before")
            await asyncio.to_thread(wait_stage_batched, server)
            jvm = jvm_of(server)
            assert jvm is not None
            jvm_started = started(jvm)
            (st.faults / "stall_timeout").write_text(str(STALL_TIMEOUT))
            since = time.monotonic()
            os.kill(jvm, signal.SIGSTOP)
            # a batch in flight goes on advancing the views to newer epochs for up to
            # CATCH_UP_MAX_S in Python (engine.start's on_batch) while its JVM is stopped
            await asyncio.sleep(CATCH_UP_MAX_S + 2)
            await writes_go_on(m, "JVM stopped")
            await reads_go_on(load.reads, "JVM stopped")
            fresh = await connect(server.port)
            await fresh.execute("SET headwater.freshness = 'latest'")
            await fresh.execute("SET headwater.freshness_timeout = '1s'")
            with pytest.raises(asyncpg.PostgresError) as exc:
                await fresh.fetch("SELECT * FROM v_agg")
            assert exc.value.sqlstate == "57014" and "v_agg" in str(exc.value), exc.value
            await fresh.close()
            cat = await wait_status(
                conn, "restarting", "stalled", "JVM stopped", 60 + STALL_TIMEOUT
            )
            stalled = time.monotonic() - since
            (st.faults / "stall_timeout").unlink()
            error = next(iter(cat.values()))["error"]
            assert f"pid {jvm}, stopped" in error, error
            assert stalled > STALL_TIMEOUT - 1, f"killed before the stall timeout: {error}"
            await writes_go_on(m, "JVM stopped, restarting")
            await reads_go_on(load.reads, "JVM stopped, restarting")
            await asyncio.to_thread(wait_gone, [(jvm, jvm_started, "the stopped JVM")], 60)
            await wait_recovered(conn, "JVM stopped")
            assert jvm_of(server) not in (None, jvm), "no new JVM"
            print(
                f"\nJVM stopped: {error} (detected in {stalled:.0f}s,"
                f" recovered in {time.monotonic() - since:.0f}s)"
            )
            await load.end(conn, "end")
    finally:
        report_failure(server)
        (st.faults / "stall_timeout").unlink(missing_ok=True)
        if jvm is not None and jvm_started is not None and started(jvm) == jvm_started:
            os.kill(jvm, signal.SIGKILL)  # still stopped (the test failed): not left behind
        await conn.close()
        print(
            f"{load.reads['ok']} reads, {len(m.acked)} writes in {time.monotonic() - t_start:.0f}s"
        )
