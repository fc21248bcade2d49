"""Result sets of many rows, one client, Headwater next to PostgreSQL 15, on the same data.

A --rows table (id int, price numeric(12,2), qty numeric(12,2), name text, d date,
k int) read whole or in part, one statement at a time, --repeat times each (median):

text     psycopg (text format), `SELECT * FROM rs_wide LIMIT n` for n = 1,000 / 10,000
         / all, and `SELECT id, k` (plain types) of all rows
binary   asyncpg (binary format), the same statements

This is what a BI tool or a dashboard's extract does, and what reading a large
materialized view costs. Reported: milliseconds per statement (client to last row
decoded) and rows/s, with the load average at the start of each section.

    .venv/bin/python bench/result_sets.py
    .venv/bin/python bench/result_sets.py --rows 1000000 --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

import asyncpg
import psycopg

try:
    from bench import common
except ImportError:  # run as a script: bench/ is sys.path[0]
    import common  # type: ignore[no-redef]

TABLE = "rs_wide"


def setup(dsn: str, rows: int) -> None:
    with psycopg.connect(dsn, autocommit=True, sslmode="disable") as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")
        c.execute(
            f"CREATE TABLE {TABLE} (id int PRIMARY KEY, price numeric(12,2), qty numeric(12,2),"
            " name text, d date, k int)"
        )
        c.execute(
            f"INSERT INTO {TABLE} SELECT i, i * 1.25, i % 100, 'name ' || i,"
            f" DATE '2020-01-01' + i % 1000, i % 7 FROM generate_series(1, {int(rows)}) AS i"
        )


def statements(rows: int) -> dict[str, str]:
    out = {}
    for n in (1_000, 10_000):
        if n < rows:
            out[f"{n:,} rows"] = f"SELECT * FROM {TABLE} LIMIT {n}"
    out[f"all {rows:,} rows"] = f"SELECT * FROM {TABLE}"
    out[f"all {rows:,} rows, 2 int columns"] = f"SELECT id, k FROM {TABLE}"
    return out


def time_text(dsn: str, sql: str, repeat: int) -> float:
    with psycopg.connect(dsn, autocommit=True, sslmode="disable") as c:
        c.execute(sql).fetchall()  # warm: plans, caches
        took = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            c.execute(sql).fetchall()
            took.append(time.perf_counter() - t0)
    return statistics.median(took)


def time_binary(dsn: str, sql: str, repeat: int) -> float:
    async def run() -> float:
        c = await asyncpg.connect(dsn, ssl=False)
        try:
            await c.fetch(sql)
            took = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                await c.fetch(sql)
                took.append(time.perf_counter() - t0)
            return statistics.median(took)
        finally:
            await c.close()

    return asyncio.run(run())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--rows", type=int, default=100_000, help="rows of the table (100,000)")
    p.add_argument("--repeat", type=int, default=7, help="runs of each statement (median)")
    common.add_server_args(p)
    args = p.parse_args(argv)
    report = common.Report(
        title="Result sets, one client",
        params={"rows": args.rows, "repeat": args.repeat, "load_avg_at_start": common.load_avg()},
    )
    report.notes.append("client and server share this machine's CPUs; no TLS")
    sqls = statements(args.rows)
    formats = {"text (psycopg)": time_text, "binary (asyncpg)": time_binary}
    for side, server in common.sides(args):
        try:
            with server() as dsn:
                report.servers[side] = common.server_version(dsn)
                setup(dsn, args.rows)
                for fmt, timer in formats.items():
                    load = common.load_avg()
                    for label, sql in sqls.items():
                        m = report.metric(f"{fmt}: {label}", "ms", higher_is_better=False)
                        m.values[side] = 1000 * timer(dsn, sql, args.repeat)
                        common.log(f"{side} {fmt} {label}: {m.values[side]:.1f} ms (load {load})")
        except Exception as e:
            common.side_failed(report, side, e)
    return common.finish(report, args.json)


if __name__ == "__main__":
    sys.exit(main())
