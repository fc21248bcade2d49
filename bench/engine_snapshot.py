"""What a copy of the engine's state to the bucket costs (server/engine_snapshots.py).

moto's S3 server in this process on loopback; `headwater start --object-store` with
debug logging; a table of `--rows` rows and a view of `--groups` groups over it. Prints
each copy the server logged (files, uploads, bytes, seconds) while it (1) backfills,
(2) takes small writes, (3) is idle (no copy: nothing changed), then the restart from
an empty data directory (the snapshot's fetch, and the time to the view's first read).

    .venv/bin/python bench/engine_snapshot.py --rows 1000000 --groups 100000
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg  # noqa: E402

from tests.hwserver import HeadwaterServer, free_port  # noqa: E402


def copies(log: str) -> list[str]:
    return [ln for ln in log.splitlines() if "views' state copied" in ln or "fetched" in ln]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--groups", type=int, default=100_000)
    ap.add_argument("--period", type=float, default=2.0)
    a = ap.parse_args()
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request

    port = free_port()
    env = {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
        "HEADWATER_ENGINE_SNAPSHOT_S": str(a.period),
    }
    os.environ.update(env)
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    moto.start()
    boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"]).create_bucket(Bucket="bench")
    root = Path(tempfile.mkdtemp(prefix="hw-snapbench-"))
    args = ["--object-store", "s3://bench/p", "--metrics-address", "off", "--log-level", "debug"]
    srv = HeadwaterServer(root / "a" / "data", args=args)
    (root / "a").mkdir()
    srv.start()
    try:
        with psycopg.connect(srv.dsn, autocommit=True) as c:
            c.execute("CREATE TABLE t (id bigint PRIMARY KEY, g bigint, v bigint)")
            c.execute(
                f"INSERT INTO t SELECT i, i % {a.groups}, i FROM generate_series(1, {a.rows}) i"
            )
            c.execute("CREATE MATERIALIZED VIEW mv AS SELECT g, count(*), sum(v) FROM t GROUP BY g")
            time.sleep(3 * a.period)
            print("-- after the backfill")
            print("\n".join(copies(srv.log_tail(10**7))[-2:]))
            for i in range(5):
                c.execute("INSERT INTO t VALUES (%s, 1, 1)", (a.rows + 1 + i,))
                c.execute("SELECT count(*) FROM mv").fetchone()
                time.sleep(a.period * 1.5)
            print("-- one small write per period")
            print("\n".join(copies(srv.log_tail(10**7))[-5:]))
            n = len(copies(srv.log_tail(10**7)))
            time.sleep(5 * a.period)
            print(f"-- idle for {5 * a.period:g}s: {len(copies(srv.log_tail(10**7))) - n} copies")
        srv.kill()
        shutil.rmtree(root / "a" / "data")
        (root / "b").mkdir()
        again = HeadwaterServer(root / "b" / "data", args=args)
        t0 = time.monotonic()
        again.start(timeout=600)
        with psycopg.connect(again.dsn, autocommit=True) as c:
            c.execute("SELECT count(*) FROM mv").fetchone()
        took = time.monotonic() - t0
        print(f"-- restart on an empty directory to the view's first read: {took:.1f}s")
        print("\n".join(ln for ln in copies(again.log_tail(10**7)) if "fetched" in ln))
        again.stop()
    finally:
        srv.kill()
        moto.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
