"""Sinks: how fast a table's changes reach a Parquet, Delta, Iceberg and PostgreSQL
target.

Headwater: a table `t (id bigint PRIMARY KEY, g int, x numeric(12,2))` with four sinks
(Parquet changes, Delta mirror keyed by id, Iceberg mirror keyed by id (SQLite catalog),
PostgreSQL 15 mirror keyed by id; interval 0.2 s). (1) bulk: --rows rows inserted in
batches of --batch; the time from the first INSERT until each sink's recorded epoch
reaches the last one, as rows/s. (2) latency: --singles single-row INSERTs 0.5 s apart;
per INSERT, the time from its acknowledgement until each sink records its epoch (p50 /
max; batches start at least 0.2 s apart). Bulk times include Headwater's own INSERTs.

The peer: PostgreSQL 15's logical replication (a publication on one cluster, a
subscription on another) of the same table and the same writes; the times until the
subscriber holds the rows.

    .venv/bin/python bench/sinks.py [--rows 100000] [--batch 10000] [--singles 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.hwserver import HeadwaterServer  # noqa: E402
from tests.pg_oracle import start_postgres  # noqa: E402

SINKS = ("b_parquet", "b_delta", "b_iceberg", "b_postgres")


def wait_until(check: Callable[[], bool], timeout: float = 600.0, step: float = 0.01) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError
        time.sleep(step)


def load(c: psycopg.Connection[Any], rows: int, batch: int) -> None:
    for lo in range(1, rows + 1, batch):
        c.execute(
            "INSERT INTO t SELECT g, g %% 100, g * 0.5"
            " FROM generate_series(%s::bigint, %s::bigint) AS s(g)",
            (lo, min(lo + batch - 1, rows)),
        )


def headwater(args: argparse.Namespace, target_dsn: str) -> dict[str, tuple[float, list[float]]]:
    root = Path(tempfile.mkdtemp(prefix="hw-bench-sinks-"))
    hw = HeadwaterServer(root / "data", args=["--metrics-address", "off"]).start()
    out: dict[str, tuple[float, list[float]]] = {}
    try:
        c = psycopg.connect(hw.dsn, autocommit=True)
        c.execute("CREATE TABLE t (id bigint PRIMARY KEY, g int, x numeric(12,2))")
        opts = "WITH (interval = '0.2'"
        c.execute(
            f"CREATE SINK b_parquet FROM t INTO PARQUET '{root}/pq' {opts}, mode = 'changes')"
        )
        c.execute(f"CREATE SINK b_delta FROM t INTO DELTA '{root}/delta' {opts})")
        c.execute(
            f"CREATE SINK b_iceberg FROM t INTO ICEBERG '{root}/iceberg'"
            f" {opts}, namespace = 'bench', table = 't')"
        )
        c.execute(f"CREATE SINK b_postgres FROM t INTO POSTGRES '{target_dsn}' TABLE t {opts})")

        def written() -> dict[str, int]:
            rows = c.execute("SELECT name, epoch_written FROM headwater_catalog.sinks")
            return {n: (e if e is not None else -1) for n, e in rows}

        def epoch() -> int:
            return int(c.execute("SELECT max(epoch) FROM headwater_catalog.epochs").fetchone()[0])

        wait_until(lambda: min(written().values()) >= 0)
        t0 = time.monotonic()
        load(c, args.rows, args.batch)
        last = epoch()
        bulk: dict[str, float] = {}
        while len(bulk) < len(SINKS):
            for n, e in written().items():
                if e >= last and n not in bulk:
                    bulk[n] = time.monotonic() - t0
            time.sleep(0.01)
        lat: dict[str, list[float]] = {n: [] for n in SINKS}
        for i in range(args.singles):
            c.execute("INSERT INTO t VALUES (%s, 1, 1)", (10_000_000 + i,))
            acked, e = time.monotonic(), epoch()
            seen: set[str] = set()
            while len(seen) < len(SINKS):
                for n, w in written().items():
                    if w >= e and n not in seen:
                        seen.add(n)
                        lat[n].append(time.monotonic() - acked)
                time.sleep(0.005)
            time.sleep(0.5)
        for n in SINKS:
            out[n] = (args.rows / bulk[n], lat[n])
    finally:
        hw.stop()
    return out


def logical_replication(args: argparse.Namespace) -> tuple[float, list[float]]:
    pub = start_postgres(user="headwater", dbname="b", settings={"wal_level": "logical"})
    sub = start_postgres(user="headwater", dbname="b")
    try:
        p = psycopg.connect(pub.dsn, autocommit=True)
        s = psycopg.connect(sub.dsn, autocommit=True)
        ddl = "CREATE TABLE t (id bigint PRIMARY KEY, g int, x numeric(12,2))"
        p.execute(ddl)
        s.execute(ddl)
        p.execute("CREATE PUBLICATION pb FOR TABLE t")
        s.execute(f"CREATE SUBSCRIPTION sb CONNECTION '{pub.dsn}' PUBLICATION pb")

        def count() -> int:
            return int(s.execute("SELECT count(*) FROM t").fetchone()[0])

        t0 = time.monotonic()
        load(p, args.rows, args.batch)
        wait_until(lambda: count() >= args.rows)
        rate = args.rows / (time.monotonic() - t0)
        lat = []
        for i in range(args.singles):
            key = 10_000_000 + i
            p.execute("INSERT INTO t VALUES (%s, 1, 1)", (key,))
            acked = time.monotonic()
            wait_until(
                lambda k=key: (
                    s.execute("SELECT 1 FROM t WHERE id = %s", (k,)).fetchone() is not None
                ),
                step=0.002,
            )
            lat.append(time.monotonic() - acked)
            time.sleep(0.5)
        s.execute("DROP SUBSCRIPTION sb")
        return rate, lat
    finally:
        sub.stop()
        pub.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--singles", type=int, default=20)
    args = ap.parse_args()
    target = start_postgres(user="headwater", dbname="target")
    try:
        hw = headwater(args, target.dsn)
    finally:
        target.stop()
    peer = logical_replication(args)

    def ms(xs: list[float]) -> str:
        return f"{statistics.median(xs) * 1000:.0f} / {max(xs) * 1000:.0f} ms"

    print(f"load average {os.getloadavg()[0]:.1f}; {args.rows} rows in batches of {args.batch}")
    print(f"{'target':<34} {'bulk rows/s':>12}  {'1-row latency p50 / max':>24}")
    for n in SINKS:
        rate, lat = hw[n]
        print(f"{'Headwater sink ' + n:<34} {rate:>12,.0f}  {ms(lat):>24}")
    rate, lat = peer
    print(f"{'PostgreSQL 15 logical replication':<34} {rate:>12,.0f}  {ms(lat):>24}")


if __name__ == "__main__":
    main()
