"""Load: 200 connections mixing small reads, writes and SUBSCRIBE while a bulk COPY runs.

Every operation must succeed and every acknowledged write must be there; memory
must stay bounded; a subscriber that never reads is cut off (53400) without holding
anyone back. Latency and peak RSS are printed (bench/ owns timing claims).
"""

from __future__ import annotations

import asyncio
import io
import os
import statistics
import time
from pathlib import Path
from typing import Any

import asyncpg
import psycopg
import pytest

from tests.hwserver import HeadwaterServer, rss_kb

CONNECTIONS = int(os.environ.get("HW_LOAD_CONNECTIONS", "200"))
SECONDS = float(os.environ.get("HW_LOAD_SECONDS", "8"))
COPY_ROWS = int(os.environ.get("HW_LOAD_COPY_ROWS", "300000"))


def test_mixed_load_with_bulk_copy(tmp_path: Path) -> None:
    server = HeadwaterServer(
        tmp_path / "data", args=["--max-connections", str(CONNECTIONS + 20)]
    ).start()
    assert server.proc is not None
    pid = server.proc.pid

    async def run() -> dict[str, float]:
        async def connect() -> asyncpg.Connection:
            return await asyncpg.connect(
                host=server.host,
                port=server.port,
                user="headwater",
                database="headwater",
                ssl=False,
            )

        admin = await connect()
        await admin.execute("CREATE TABLE small (k int PRIMARY KEY, v int)")
        await admin.execute("CREATE TABLE bulk (id bigint, name text, amount numeric(12,2))")
        await admin.execute("INSERT INTO small SELECT g, g FROM generate_series(1, 1000) AS t(g)")
        conns = [await connect() for _ in range(CONNECTIONS)]
        latencies: list[float] = []
        acked: list[int] = []
        stop = time.monotonic() + SECONDS
        peak = [rss_kb(pid)]

        async def reader(c: asyncpg.Connection, i: int) -> None:
            while time.monotonic() < stop:
                t0 = time.perf_counter()
                await c.fetchval("SELECT v FROM small WHERE k = $1", (i % 1000) + 1)
                latencies.append(time.perf_counter() - t0)

        async def writer(c: asyncpg.Connection, i: int) -> None:
            n = 0
            while time.monotonic() < stop:
                key = 10_000 + i * 100_000 + n
                await c.execute("INSERT INTO small VALUES ($1, $2)", key, i)
                acked.append(key)
                n += 1

        seen: list[int] = []  # keys the subscribers received

        async def subscriber(c: asyncpg.Connection, i: int) -> None:
            async with c.transaction():
                await c.execute(f"DECLARE s{i} CURSOR FOR SUBSCRIBE small WITH (SNAPSHOT = false)")
                while time.monotonic() < stop:
                    rows = await c.fetch(f"FETCH 1000 s{i} WITH (timeout = '200ms')")
                    seen.extend(r["k"] for r in rows if r["diff"] > 0)

        async def stalled(c: asyncpg.Connection) -> None:
            """Subscribes with a 100-row buffer and never reads until the end."""
            await c.execute("SET headwater.subscribe_buffer_rows = 100")
            async with c.transaction():
                await c.execute("DECLARE slow CURSOR FOR SUBSCRIBE small WITH (SNAPSHOT = false)")
                await asyncio.sleep(max(stop - time.monotonic(), 0))
                with pytest.raises(asyncpg.PostgresError, match="cut off") as err:
                    while True:
                        await c.fetch("FETCH ALL slow WITH (timeout = '1s')")
                assert err.value.sqlstate == "53400"

        async def watch() -> None:
            while time.monotonic() < stop + 5:
                peak[0] = max(peak[0], rss_kb(pid))
                await asyncio.sleep(0.2)

        def bulk_copy() -> int:
            data = io.StringIO("".join(f"{i}\tname{i}\t{i % 1000}.25\n" for i in range(COPY_ROWS)))
            with psycopg.connect(server.dsn, autocommit=True) as c:
                with c.cursor().copy("COPY bulk FROM STDIN") as cp:
                    while chunk := data.read(1 << 20):
                        cp.write(chunk)
                return int(c.execute("SELECT count(*) FROM bulk").fetchone()[0])  # type: ignore[index]

        def role(c: asyncpg.Connection, i: int) -> Any:
            if i == 1:
                return stalled(c)
            if i % 20 == 3:
                return subscriber(c, i)
            return reader(c, i) if i % 4 else writer(c, i)

        tasks = [role(c, i) for i, c in enumerate(conns)]
        copied, *_ = await asyncio.gather(asyncio.to_thread(bulk_copy), watch(), *tasks)
        assert copied == COPY_ROWS
        present = {r[0] for r in await admin.fetch("SELECT k FROM small WHERE k >= 10000")}
        assert set(acked) <= present, (
            f"acknowledged inserts missing: {sorted(set(acked) - present)[:20]} of {len(acked)}"
        )
        assert seen and set(seen) <= present, "subscribers saw rows that are not there"
        for c in [admin, *conns]:
            await c.close()
        latencies.sort()
        return {
            "reads": len(latencies),
            "writes": len(acked),
            "p50_ms": 1000 * statistics.median(latencies),
            "p99_ms": 1000 * latencies[int(len(latencies) * 0.99)],
            "peak_rss_mb": peak[0] / 1024,
            "subscribed": len(seen),
        }

    try:
        figures = asyncio.run(run())
        print(
            f"load: {CONNECTIONS} connections, {figures['reads']} reads, "
            f"{figures['writes']} writes, {figures['subscribed']} rows to subscribers, "
            f"COPY {COPY_ROWS} rows; read p50 "
            f"{figures['p50_ms']:.1f} ms, p99 {figures['p99_ms']:.1f} ms; "
            f"peak RSS {figures['peak_rss_mb']:.0f} MB"
        )
        assert figures["reads"] > 0 and figures["writes"] > 0
        assert figures["peak_rss_mb"] < 4096, "memory must stay bounded"
    finally:
        server.stop()


def test_max_connections_refuses_with_53300(tmp_path: Path) -> None:
    server = HeadwaterServer(tmp_path / "data", args=["--max-connections", "2", "--no-tls"]).start()
    try:
        # superusers may use 3 reserved slots beyond max_connections, as in PostgreSQL
        held = [psycopg.connect(server.dsn) for _ in range(5)]
        with pytest.raises(
            psycopg.OperationalError, match="reserved for superusers|too many clients"
        ):
            psycopg.connect(server.dsn)
        held.pop().close()
        psycopg.connect(server.dsn).close()  # a slot freed is a slot usable
        for c in held:
            c.close()
    finally:
        server.stop()
