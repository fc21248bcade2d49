"""Point reads from one client, Headwater next to PostgreSQL 15, on the same data.

`SELECT v FROM pr_small WHERE k = $1` over a 1,000-row table, one connection, one
statement at a time, for --seconds each way after a short warm-up:

prepared   asyncpg: Parse once, then Bind/Execute/Sync per read (extended protocol)
simple     psycopg: a Query message per read with the key inlined (simple protocol)
filter     the same with `WHERE v = <k * 10>`: no key answers it, so each new text is
           planned (psycopg2, Django, psql send values inlined)
unnamed    psycopg: Parse/Bind/Execute/Sync of the unnamed statement per read
           (psycopg's default for parameters)
view       asyncpg, prepared: the whole of a 10-row aggregate materialized view,
           `SELECT * FROM pr_agg` (a dashboard's read; PostgreSQL's matview is a table)
busy       prepared, while --busy-clients other connections run an aggregate over a
           --big-rows table in a loop (small queries next to big ones; the CPU time
           per read then includes the big queries')

Connections are not encrypted unless --tls is given (the PostgreSQL the bench starts
has no TLS; the drivers would otherwise use TLS with Headwater only).

Reported: reads/s and per-read latency p50/p99, with the machine's load average
at the start of each section (the CPUs are shared with the client and anything
else running), and the CPU time the server's whole process tree spent per read
(user + system, from /proc: the figure that load on the machine disturbs least).

    .venv/bin/python bench/point_reads.py
    .venv/bin/python bench/point_reads.py --seconds 5 --hw-dsn postgresql://headwater@127.0.0.1:6544/headwater
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import asyncpg
import psycopg

try:
    from bench import common
    from bench.reliability import listener_pid, port_of, process_tree
except ImportError:  # run as a script: bench/ is sys.path[0]
    import common  # type: ignore[no-redef]
    from reliability import listener_pid, port_of, process_tree  # type: ignore[no-redef]

QUERY = "SELECT v FROM pr_small WHERE k = $1"
ROWS = 1000
TLS = False  # --tls: the drivers' default (TLS when the server offers it)
SERVER: list[int] = []  # the server's listening process, when it runs on this machine


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU time of `root` and its descendants (threads included), and of
    the children they reaped (PostgreSQL's parallel workers exit after each query)."""
    ticks = 0
    for pid in process_tree(root):
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def server_cpu() -> float:
    """The server's CPU seconds so far (0 when it is not on this machine)."""
    return tree_cpu_seconds(SERVER[0]) if SERVER else 0.0


def connect(dsn: str) -> psycopg.Connection:
    return psycopg.connect(dsn, autocommit=True, **({} if TLS else {"sslmode": "disable"}))


VIEW = "SELECT k % 10 AS b, count(*) AS n, sum(v) AS s FROM pr_small GROUP BY 1"


def setup(dsn: str) -> None:
    with connect(dsn) as c:
        c.execute("DROP MATERIALIZED VIEW IF EXISTS pr_agg")
        c.execute("DROP TABLE IF EXISTS pr_small")
        c.execute("CREATE TABLE pr_small (k int PRIMARY KEY, v int)")
        c.execute(f"INSERT INTO pr_small SELECT g, g * 10 FROM generate_series(1, {ROWS}) g")
        c.execute(f"CREATE MATERIALIZED VIEW pr_agg AS {VIEW}")
        c.execute("SELECT * FROM pr_agg").fetchall()  # (Headwater: current once)


class Timer:
    """Latencies after the warm-up, and the server's CPU time over the same reads
    (measured while the connection is open: a PostgreSQL backend's CPU time leaves
    the process tree with it)."""

    def __init__(self, seconds: float, warmup: float) -> None:
        self.start = time.perf_counter()
        self.warm_until = self.start + warmup
        self.end = self.warm_until + seconds
        self.lat: list[float] = []
        self.cpu0: float | None = None
        self.cpu = 0.0

    def more(self) -> bool:
        now = time.perf_counter()
        if now >= self.warm_until and self.cpu0 is None:
            self.cpu0 = server_cpu()
        if now < self.end:
            return True
        self.cpu = server_cpu() - (self.cpu0 or 0.0)
        return False

    def add(self, t0: float) -> None:
        if t0 >= self.warm_until:
            self.lat.append(time.perf_counter() - t0)


def timed(step: Callable[[int], object], seconds: float, warmup: float) -> Timer:
    timer = Timer(seconds, warmup)
    i = 0
    while timer.more():
        t0 = time.perf_counter()
        got = step(i % ROWS + 1)
        timer.add(t0)
        if got != (i % ROWS + 1) * 10:
            raise AssertionError(f"read {got!r} for key {i % ROWS + 1}")
        i += 1
    return timer


async def _prepared(dsn: str, seconds: float, warmup: float) -> Timer:
    c = await asyncpg.connect(**common.asyncpg_kwargs(dsn), **({} if TLS else {"ssl": False}))
    try:
        stmt = await c.prepare(QUERY)
        timer = Timer(seconds, warmup)
        i = 0
        while timer.more():
            k = i % ROWS + 1
            t0 = time.perf_counter()
            got = await stmt.fetchval(k)
            timer.add(t0)
            if got != k * 10:
                raise AssertionError(f"read {got!r} for key {k}")
            i += 1
        return timer
    finally:
        await c.close()


async def _view(dsn: str, seconds: float, warmup: float) -> Timer:
    c = await asyncpg.connect(**common.asyncpg_kwargs(dsn), **({} if TLS else {"ssl": False}))
    try:
        stmt = await c.prepare("SELECT * FROM pr_agg")
        timer = Timer(seconds, warmup)
        while timer.more():
            t0 = time.perf_counter()
            rows = await stmt.fetch()
            timer.add(t0)
            if len(rows) != 10 or sum(r["n"] for r in rows) != ROWS:
                raise AssertionError(f"read {rows!r} from pr_agg")
        return timer
    finally:
        await c.close()


def bench_simple(dsn: str, seconds: float, warmup: float) -> Timer:
    with connect(dsn) as c:

        def step(k: int) -> object:
            row = c.execute(f"SELECT v FROM pr_small WHERE k = {k}", prepare=False).fetchone()
            return row[0] if row else None

        return timed(step, seconds, warmup)


def bench_filter(dsn: str, seconds: float, warmup: float) -> Timer:
    """A read no key answers (`v` is no key), its value inlined as psycopg2, Django or
    psql send it: the server plans each new text (PostgreSQL: a scan of 1,000 rows)."""
    with connect(dsn) as c:

        def step(k: int) -> object:
            row = c.execute(f"SELECT v FROM pr_small WHERE v = {k * 10}", prepare=False).fetchone()
            return row[0] if row else None

        return timed(step, seconds, warmup)


def bench_unnamed(dsn: str, seconds: float, warmup: float) -> Timer:
    with connect(dsn) as c:
        q = QUERY.replace("$1", "%s")

        def step(k: int) -> object:
            row = c.execute(q, (k,), prepare=False).fetchone()
            return row[0] if row else None

        return timed(step, seconds, warmup)


BIG_QUERY = "SELECT g % 97 AS b, count(*), sum(x), avg(length(t)) FROM pr_big GROUP BY 1"
BUSY = {"clients": 2, "rows": 1_000_000}


def bench_busy(dsn: str, seconds: float, warmup: float) -> Timer:
    with connect(dsn) as c:
        c.execute("DROP TABLE IF EXISTS pr_big")
        c.execute("CREATE TABLE pr_big (g int, x bigint, t text)")
        c.execute(
            "INSERT INTO pr_big SELECT g, g * 7, 'row ' || g "
            f"FROM generate_series(1, {BUSY['rows']}) g"
        )
    stop = threading.Event()
    big: list[float] = []

    def busy() -> None:
        with connect(dsn) as b:
            while not stop.is_set():
                t0 = time.perf_counter()
                b.execute(BIG_QUERY).fetchall()
                big.append(time.perf_counter() - t0)

    threads = [threading.Thread(target=busy) for _ in range(BUSY["clients"])]
    for t in threads:
        t.start()
    try:
        return asyncio.run(_prepared(dsn, seconds, warmup))
    finally:
        stop.set()
        for t in threads:
            t.join()
        if big:
            common.log(f"  big query: {len(big)} runs, median {statistics.median(big):.2f} s")


SECTIONS = {
    "prepared": lambda dsn, s, w: asyncio.run(_prepared(dsn, s, w)),
    "simple": bench_simple,
    "filter": bench_filter,
    "unnamed": bench_unnamed,
    "view": lambda dsn, s, w: asyncio.run(_view(dsn, s, w)),
    "busy": bench_busy,
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--seconds", type=float, default=5.0, help="per section and server")
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--only", default=",".join(SECTIONS), help="sections: " + ",".join(SECTIONS))
    p.add_argument("--tls", action="store_true", help="let the drivers use TLS where offered")
    p.add_argument("--busy-clients", type=int, default=BUSY["clients"])
    p.add_argument("--big-rows", type=int, default=BUSY["rows"])
    common.add_server_args(p)
    args = p.parse_args(argv)
    global TLS
    TLS = args.tls
    BUSY.update(clients=args.busy_clients, rows=args.big_rows)
    sections = [s for s in args.only.split(",") if s]
    report = common.Report(
        title="Point reads, one client",
        params={
            "seconds": args.seconds,
            "table_rows": ROWS,
            "tls": args.tls,
            "load_avg_at_start": common.load_avg(),
        },
    )
    report.notes.append("client and server share this machine's CPUs")
    metrics = {}
    for name in sections:
        metrics[name] = (
            report.metric(f"{name}: reads/s", "1/s"),
            report.metric(f"{name}: p50", "ms", higher_is_better=False),
            report.metric(f"{name}: p99", "ms", higher_is_better=False),
            report.metric(f"{name}: server CPU per read", "ms", higher_is_better=False),
        )
    for side, server in common.sides(args):
        try:
            with server() as dsn:
                report.servers[side] = common.server_version(dsn)
                setup(dsn)
                SERVER.clear()
                with contextlib.suppress(LookupError):  # not on this machine
                    SERVER.append(listener_pid(port_of(dsn)))
                for name in sections:
                    load = common.load_avg()
                    timer = SECTIONS[name](dsn, args.seconds, args.warmup)
                    lat = timer.lat
                    rate, p50, p99, per_read = metrics[name]
                    rate.values[side] = len(lat) / sum(lat)
                    p50.values[side] = 1000 * statistics.median(lat)
                    p99.values[side] = 1000 * pct(lat, 0.99)
                    if timer.cpu:
                        per_read.values[side] = 1000 * timer.cpu / len(lat)
                    common.log(
                        f"{side} {name}: {rate.values[side]:,.0f} reads/s, "
                        f"p50 {p50.values[side]:.2f} ms, p99 {p99.values[side]:.2f} ms, "
                        f"server CPU {per_read.values.get(side, 0):.2f} ms/read (load {load})"
                    )
        except Exception as e:
            common.log(f"{side} failed: {type(e).__name__}: {e}")
            for rate, *_ in metrics.values():
                rate.errors[side] = f"{type(e).__name__}: {e}"
    return common.finish(report, args.json)


if __name__ == "__main__":
    sys.exit(main())
