"""What each headwater.freshness mode costs a reader, for a table and a view.

One writer session inserts a row every --interval seconds (autocommit, the batched
fast path); one reader session, which never writes, reads `SELECT count(*) FROM fm_t`
(a table) and `SELECT n FROM fm_v` (a materialized view over it: count(*)) in turn,
--reads times per mode and relation. Before each read the rows the writer has had
acknowledged so far are noted: a read that returns fewer is stale. Reported per mode
and relation: latency p50 / p90 / p99 and stale reads. An idle pass (no writer) shows
the cost when nothing is in flight.

    .venv/bin/python bench/freshness_modes.py             # starts its own server
    .venv/bin/python bench/freshness_modes.py --dsn 'host=127.0.0.1 port=6544 user=headwater'
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.hwserver import HeadwaterServer  # noqa: E402

MODES = ("latest", "session", "none")
READS = {"table": "SELECT count(*) FROM fm_t", "view": "SELECT n FROM fm_v"}


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


class Writer(threading.Thread):
    """Inserts a row every `interval` s; `acked` is the rows acknowledged so far."""

    def __init__(self, dsn: str, interval: float) -> None:
        super().__init__(daemon=True)
        self.dsn, self.interval = dsn, interval
        self.acked = 0
        self.stop = threading.Event()

    def run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as c:
            i = self.acked = c.execute("SELECT count(*) FROM fm_t").fetchone()[0]
            while not self.stop.wait(self.interval):
                i += 1
                c.execute("INSERT INTO fm_t VALUES (%s)", [i])
                self.acked = i


def measure(dsn: str, reads: int, writer: Writer | None) -> list[tuple[str, str, list[float], int]]:
    out = []
    with psycopg.connect(dsn, autocommit=True) as r:
        r.execute("SET headwater.freshness_timeout = '600s'")
        for mode in MODES:
            r.execute(f"SET headwater.freshness = '{mode}'")
            for rel, sql in READS.items():
                times: list[float] = []
                stale = 0
                for _ in range(reads):
                    before = writer.acked if writer else 0
                    t0 = time.perf_counter()
                    row = r.execute(sql).fetchone()
                    times.append(time.perf_counter() - t0)
                    stale += row is None or row[0] < before
                    if writer is None:
                        time.sleep(0.01)
                out.append((mode, rel, times, stale))
    return out


def report(title: str, rows: list[tuple[str, str, list[float], int]]) -> None:
    print(f"\n{title} (load average {'/'.join(f'{x:.1f}' for x in os.getloadavg())})\n")
    print("| headwater.freshness | read | p50 | p90 | p99 | stale |")
    print("|---|---|---|---|---|---|")
    for mode, rel, times, stale in rows:
        ms = [t * 1000 for t in times]
        print(
            f"| {mode} | {rel} | {pct(ms, 0.5):.1f} ms | {pct(ms, 0.9):.1f} ms | "
            f"{pct(ms, 0.99):.1f} ms | {stale}/{len(ms)} |"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dsn", help="an existing server (default: start one)")
    p.add_argument("--reads", type=int, default=200, help="reads per mode and relation")
    p.add_argument("--interval", type=float, default=0.02, help="seconds between INSERTs")
    args = p.parse_args()
    server = None
    dsn = args.dsn
    if dsn is None:
        root = Path(tempfile.mkdtemp(prefix="headwater-fm-"))
        server = HeadwaterServer(root / "data").start()
        dsn = server.dsn
    try:
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute("SET headwater.freshness_timeout = '600s'")
            c.execute("DROP MATERIALIZED VIEW IF EXISTS fm_v")
            c.execute("DROP TABLE IF EXISTS fm_t")
            c.execute("CREATE TABLE fm_t (id int PRIMARY KEY)")
            c.execute("CREATE MATERIALIZED VIEW fm_v AS SELECT count(*) AS n FROM fm_t")
            c.execute("INSERT INTO fm_t VALUES (0)")
            t0 = time.time()
            c.execute("SELECT n FROM fm_v").fetchone()  # waits for the Spark stage
            print(f"Spark stage up in {time.time() - t0:.0f}s")
        report("idle: no writes in flight", measure(dsn, args.reads, None))
        writer = Writer(dsn, args.interval)
        writer.start()
        time.sleep(2)
        try:
            rows = measure(dsn, args.reads, writer)
        finally:
            writer.stop.set()
            writer.join()
        report(f"a writer in another session, an INSERT every {args.interval * 1000:g} ms", rows)
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
