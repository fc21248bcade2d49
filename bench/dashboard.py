"""A dashboard: many connections polling the same aggregate queries while rows arrive.

--clients connections (a BI tool's pool, or as many people with the dashboard open)
each run the --panels prepared queries over a --rows table, one after another, then
wait --interval seconds (jittered) and run them again; one more connection INSERTs a
row every --write-every seconds. For --seconds, Headwater next to PostgreSQL 15 on the
same data. Reported: panel queries answered per second, their latency p50 / p99
(client to last row), the server's CPU per query, with the load average.

PostgreSQL runs every query (its parallel workers scan the table each time);
Headwater keeps each result while no table under it changed, shared by all
connections (server/result_cache.py), so it computes each panel once per write.

    .venv/bin/python bench/dashboard.py
    .venv/bin/python bench/dashboard.py --clients 32 --rows 2000000 --seconds 60
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import statistics
import sys
import time

import asyncpg
import psycopg

try:
    from bench import common
    from bench.point_reads import pct, tree_cpu_seconds
    from bench.reliability import listener_pid, port_of
except ImportError:  # run as a script: bench/ is sys.path[0]
    import common  # type: ignore[no-redef]
    from point_reads import pct, tree_cpu_seconds  # type: ignore[no-redef]
    from reliability import listener_pid, port_of  # type: ignore[no-redef]

TABLE = "dash_events"
PANELS = [  # (query, parameters)
    (f"SELECT region, count(*), sum(amount) FROM {TABLE} GROUP BY region ORDER BY region", ()),
    (f"SELECT product % 20 AS p, avg(amount) FROM {TABLE} GROUP BY 1 ORDER BY 1", ()),
    (f"SELECT count(*), max(amount) FROM {TABLE} WHERE amount > $1", (900,)),
    (f"SELECT region, count(DISTINCT product) FROM {TABLE} WHERE id % 10 = $1 GROUP BY 1", (3,)),
]


def setup(dsn: str, rows: int) -> None:
    with psycopg.connect(dsn, autocommit=True, sslmode="disable") as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")
        c.execute(
            f"CREATE TABLE {TABLE} (id bigint PRIMARY KEY, region int, product int,"
            " amount numeric(12,2))"
        )
        c.execute(
            f"INSERT INTO {TABLE} SELECT i, i % 12, (i * 7) % 500, (i % 1000) + 0.5"
            f" FROM generate_series(1, {int(rows)}) AS i"
        )
        if "PostgreSQL" in common.server_version(dsn):
            c.execute(f"VACUUM ANALYZE {TABLE}")


async def run(
    dsn: str, clients: int, panels: int, interval: float, write_every: float, seconds: float
) -> tuple[list[float], float, int]:
    """(latencies of the panel queries, seconds measured, rows written)."""
    conns = [await asyncpg.connect(dsn, ssl=False) for _ in range(clients + 1)]
    writer, readers = conns[0], conns[1:]
    start = time.monotonic()
    end = start + seconds
    lat: list[float] = []
    written = 0
    next_id = await writer.fetchval(f"SELECT max(id) FROM {TABLE}") + 1

    async def poll(c: asyncpg.Connection, i: int) -> None:
        rng = random.Random(i)
        stmts = [(await c.prepare(sql), args) for sql, args in PANELS[:panels]]
        await asyncio.sleep(rng.uniform(0, interval))  # dashboards opened at different times
        while time.monotonic() < end:
            for stmt, args in stmts:
                t0 = time.perf_counter()
                await stmt.fetch(*args)
                lat.append(time.perf_counter() - t0)
            await asyncio.sleep(interval * rng.uniform(0.8, 1.2))

    async def write() -> None:
        nonlocal written, next_id
        while time.monotonic() < end:
            await asyncio.sleep(write_every)
            await writer.execute(
                f"INSERT INTO {TABLE} VALUES ($1, $2, $3, $4)", next_id, next_id % 12, 7, 42.5
            )
            next_id += 1
            written += 1

    try:
        await asyncio.gather(write(), *(poll(c, i) for i, c in enumerate(readers)))
    finally:
        for c in conns:
            await c.close()
    return lat, time.monotonic() - start, written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--rows", type=int, default=1_000_000, help="rows of the table (1,000,000)")
    p.add_argument("--clients", type=int, default=16, help="polling connections (16)")
    p.add_argument("--panels", type=int, default=len(PANELS), help="queries per poll (4)")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between polls (1)")
    p.add_argument("--write-every", type=float, default=2.0, help="seconds between INSERTs")
    p.add_argument("--seconds", type=float, default=30.0, help="measured per server (30)")
    common.add_server_args(p)
    args = p.parse_args(argv)
    report = common.Report(
        title="Dashboard: connections polling aggregate queries while rows arrive",
        params={
            "rows": args.rows,
            "clients": args.clients,
            "panels": args.panels,
            "interval_s": args.interval,
            "write_every_s": args.write_every,
            "seconds": args.seconds,
            "load_avg_at_start": common.load_avg(),
        },
    )
    report.notes.append("client and server share this machine's CPUs; no TLS")
    rate = report.metric("panel queries answered", "1/s")
    p50 = report.metric("query latency p50", "ms", higher_is_better=False)
    p99 = report.metric("query latency p99", "ms", higher_is_better=False)
    cpu = report.metric("server CPU per query", "ms", higher_is_better=False)
    for side, server in common.sides(args):
        try:
            with server() as dsn:
                report.servers[side] = common.server_version(dsn)
                setup(dsn, args.rows)
                pid = None
                with contextlib.suppress(LookupError):  # not on this machine
                    pid = listener_pid(port_of(dsn))
                cpu0 = tree_cpu_seconds(pid) if pid else 0.0
                load = (args.clients, args.panels, args.interval, args.write_every)
                lat, took, written = asyncio.run(run(dsn, *load, args.seconds))
                rate.put(side, len(lat) / took)
                p50.put(side, 1000 * statistics.median(lat))
                p99.put(side, 1000 * pct(lat, 0.99))
                if pid:
                    cpu.put(side, 1000 * (tree_cpu_seconds(pid) - cpu0) / len(lat))
                common.log(
                    f"{side}: {len(lat)} queries in {took:.1f} s, {written} rows written, "
                    f"p50 {p50.values[side]:.1f} ms, p99 {p99.values[side]:.1f} ms "
                    f"(load {common.load_avg()})"
                )
        except Exception as e:
            common.side_failed(report, side, e)
    return common.finish(report, args.json)


if __name__ == "__main__":
    sys.exit(main())
