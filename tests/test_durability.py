"""Invariant 3: no acknowledged write is lost when the server is killed (SIGKILL).

Concurrent writers insert under load (fast-path single-row INSERTs, multi-row
transactions and UPDATEs, blocks of INSERTs, point UPDATEs through the batcher); the
server is killed at random moments and restarted on the same data directory; every
acknowledged row must be there, every UPDATE whose commit was acknowledged must show,
and nothing unacknowledged may be half-applied.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import random
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncpg
import pyarrow as pa
import pytest
from headwater.storage.changelog import decode_arrow, encode_arrow
from headwater.storage.synchronous import FS_SYNC_FL, flags, set_synchronous

from tests.hwserver import HeadwaterServer, free_port

KILLS = int(os.environ.get("HW_KILL_CYCLES", "10"))  # CI; long mode: 100


async def _connect(port: int) -> asyncpg.Connection:
    return await asyncpg.connect(
        host="127.0.0.1", port=port, user="headwater", database="headwater"
    )


async def _writer(
    port: int, stop: asyncio.Event, one: Callable[[asyncpg.Connection, int], Awaitable[None]]
) -> None:
    """Run `one(conn, i)` for i = 0, 1, ... until `stop`, or until the server goes."""
    try:
        conn = await _connect(port)
    except OSError:
        return
    i = 0
    try:
        while not stop.is_set():
            await one(conn, i)
            i += 1
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
        pass


async def _single_writer(port: int, wid: int, acked: set[int], stop: asyncio.Event) -> None:
    async def one(conn: asyncpg.Connection, i: int) -> None:
        key = wid * 1_000_000 + i
        await conn.execute("INSERT INTO acked (id, w) VALUES ($1, $2)", key, wid)
        acked.add(key)

    await _writer(port, stop, one)


async def _txn_writer(port: int, wid: int, acked_batches: set[int], stop: asyncio.Event) -> None:
    """Transactions of 5 rows: after a crash, a batch is all there or not at all."""

    async def one(conn: asyncpg.Connection, b: int) -> None:
        batch = wid * 1_000_000 + b
        async with conn.transaction():
            for j in range(5):
                await conn.execute("INSERT INTO batches VALUES ($1, $2)", batch, j)
            await conn.execute("UPDATE counters SET n = n + 1 WHERE w = $1", wid)
        acked_batches.add(batch)

    await _writer(port, stop, one)


async def _staged_writer(port: int, wid: int, acked_batches: set[int], stop: asyncio.Event) -> None:
    """Blocks of INSERTs only (staged in the session until COMMIT, server/batcher.py
    StagedWrites), into two tables: after a crash, a block is all there or not at all."""

    async def one(conn: asyncpg.Connection, b: int) -> None:
        batch = wid * 1_000_000 + b
        async with conn.transaction():
            for j in range(3):
                await conn.execute("INSERT INTO staged VALUES ($1, $2)", batch, j)
            await conn.execute("INSERT INTO staged_2 VALUES ($1), ($1)", batch)
        acked_batches.add(batch)

    await _writer(port, stop, one)


async def _point_writer(port: int, row: int, acked: list[int], stop: asyncio.Event) -> None:
    """Autocommitted point UPDATEs (server/point_writes.py), several writers on one row:
    after a crash the row holds every acknowledged increment, and at most the ones in
    flight besides."""

    async def one(conn: asyncpg.Connection, i: int) -> None:
        await conn.execute("UPDATE hot SET n = n + 1 WHERE id = $1", row)
        acked[row] += 1

    await _writer(port, stop, one)


async def _point_block_writer(port: int, row: int, acked: list[int], stop: asyncio.Event) -> None:
    """Blocks of point UPDATEs of two tables (staged under row locks, committed by the
    batcher): after a crash both rows hold the same count, at least the acknowledged."""

    async def one(conn: asyncpg.Connection, i: int) -> None:
        async with conn.transaction():
            await conn.execute("UPDATE hot SET m = m + 1 WHERE id = $1", row)
            await conn.execute("UPDATE hot_2 SET m = m + 1 WHERE id = $1", row)
        acked[row] += 1

    await _writer(port, stop, one)


def test_sigkill_loses_no_acknowledged_write(tmp_path: Path) -> None:
    async def run() -> None:
        server = HeadwaterServer(tmp_path / "data", port=free_port()).start()
        conn = await _connect(server.port)
        await conn.execute("CREATE TABLE acked (id bigint PRIMARY KEY, w int)")
        await conn.execute("CREATE TABLE batches (batch bigint, j int)")
        await conn.execute("CREATE TABLE counters (w int PRIMARY KEY, n int)")
        await conn.execute("CREATE TABLE staged (batch bigint, j int, PRIMARY KEY (batch, j))")
        await conn.execute("CREATE TABLE staged_2 (batch bigint)")
        await conn.execute("CREATE TABLE hot (id int PRIMARY KEY, n bigint, m bigint)")
        await conn.execute("CREATE TABLE hot_2 (id int PRIMARY KEY, m bigint)")
        await conn.execute(f"INSERT INTO hot SELECT g, 0, 0 FROM generate_series(0, {KILLS}) g")
        await conn.execute(f"INSERT INTO hot_2 SELECT g, 0 FROM generate_series(0, {KILLS}) g")
        # timestamptz rows written in a session's zone by a writing transaction and by the
        # batcher: Arrow labels them differently, and the log replayed at restart must
        # still concatenate (it did not: the server could not start again)
        await conn.execute("CREATE TABLE zoned (k int, at timestamptz)")
        await conn.execute("SET TimeZone = 'Asia/Kathmandu'")
        await conn.execute("INSERT INTO zoned SELECT 1, now()")
        await conn.execute("INSERT INTO zoned VALUES (2, now()), (3, '2020-01-01 00:00+00')")
        # one counter per transactional writer: two per cycle, never reused (long mode too)
        await conn.execute(
            f"INSERT INTO counters SELECT g, 0 FROM generate_series(0, {2 * KILLS + 1}) AS t(g)"
        )
        await conn.close()
        acked: set[int] = set()
        batches: set[int] = set()
        blocks: set[int] = set()
        increments = [0] * (KILLS + 1)  # acknowledged point UPDATEs per row of `hot`
        block_increments = [0] * (KILLS + 1)  # acknowledged blocks per row of both
        rng = random.Random(int(os.environ.get("HW_SEED", "7")))
        try:
            for cycle in range(KILLS):
                stop = asyncio.Event()
                writers = (
                    [
                        asyncio.create_task(
                            _single_writer(server.port, cycle * 100 + w, acked, stop)
                        )
                        for w in range(6)
                    ]
                    + [
                        asyncio.create_task(
                            _txn_writer(server.port, 2 * cycle + w % 2, batches, stop)
                        )
                        for w in range(2)
                    ]
                    + [asyncio.create_task(_staged_writer(server.port, cycle, blocks, stop))]
                    + [
                        asyncio.create_task(_point_writer(server.port, cycle, increments, stop))
                        for _ in range(3)
                    ]
                    + [
                        asyncio.create_task(
                            _point_block_writer(server.port, cycle, block_increments, stop)
                        )
                        for _ in range(2)
                    ]
                )
                await asyncio.sleep(rng.uniform(0.2, 1.2))
                server.kill()
                stop.set()
                await asyncio.gather(*writers)
                server = HeadwaterServer(server.data_dir, port=server.port).start()
                conn = await _connect(server.port)
                assert await conn.fetchval("SELECT count(*) FROM zoned") == 3
                present = {r[0] for r in await conn.fetch("SELECT id FROM acked")}
                lost = acked - present
                assert not lost, f"cycle {cycle}: {len(lost)} acknowledged rows lost"
                sizes = {
                    r[0]: r[1]
                    for r in await conn.fetch("SELECT batch, count(*) FROM batches GROUP BY batch")
                }
                assert all(n == 5 for n in sizes.values()), (
                    f"cycle {cycle}: a transaction was half-applied"
                )
                assert batches <= set(sizes), f"cycle {cycle}: acknowledged transactions lost"
                staged = {
                    r[0]: (r[1], r[2])
                    for r in await conn.fetch(
                        "SELECT batch, count(*), (SELECT count(*) FROM staged_2 AS s2"
                        " WHERE s2.batch = s.batch) FROM staged AS s GROUP BY batch"
                    )
                }
                assert all(n == (3, 2) for n in staged.values()), (
                    f"cycle {cycle}: a block of INSERTs was half-applied"
                )
                assert blocks <= set(staged), f"cycle {cycle}: acknowledged blocks lost"
                hot, m = await conn.fetchrow("SELECT n, m FROM hot WHERE id = $1", cycle)
                assert increments[cycle] <= hot <= increments[cycle] + 3, (
                    f"cycle {cycle}: {hot} point UPDATEs kept, {increments[cycle]} acknowledged"
                )
                m2 = await conn.fetchval("SELECT m FROM hot_2 WHERE id = $1", cycle)
                assert m == m2, f"cycle {cycle}: a block of point UPDATEs was half-applied"
                assert block_increments[cycle] <= m <= block_increments[cycle] + 2, (
                    f"cycle {cycle}: {m} blocks kept, {block_increments[cycle]} acknowledged"
                )
                counts = {r[0]: r[1] for r in await conn.fetch("SELECT w, n FROM counters")}
                per_writer: dict[int, int] = {}
                for batch in sizes:
                    per_writer[batch // 1_000_000] = per_writer.get(batch // 1_000_000, 0) + 1
                for w, n in per_writer.items():
                    assert counts[w] == n, (
                        f"cycle {cycle}: counter {w} is {counts[w]}, {n} batches committed"
                    )
                await conn.close()
        finally:
            server.stop()
        print(
            f"durability: {KILLS} SIGKILL cycles survived, {len(acked)} acknowledged rows and "
            f"{len(batches)} transactions and {len(blocks)} blocks of INSERTs and "
            f"{sum(increments)} point UPDATEs and {sum(block_increments)} blocks of them, 0 lost, "
            "0 half-applied"
        )
        assert len(acked) > KILLS, "the writers made no progress"

    asyncio.run(run())


def test_logs_written_in_a_sessions_zone_replay() -> None:
    """Change rows an older server logged with a session's zone label (a writing
    transaction's) and with UTC (the batcher's) decode to one label, so that a table's
    log concatenates at recovery (before, the server could not start again)."""
    at = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
    utc = pa.table({"at": pa.array([at], pa.timestamp("us", tz="UTC"))})
    zoned = utc.cast(pa.schema([pa.field("at", pa.timestamp("us", tz="Asia/Kathmandu"))]))
    parts = [decode_arrow(blob) for t in (zoned, utc) for blob in encode_arrow(t)]
    both = pa.concat_tables(parts, promote_options="permissive")
    assert both.column("at").to_pylist() == [at, at]


def _synchronous(root: Path) -> dict[str, bool]:
    """Each directory and file under `root`: whether the kernel writes it synchronously."""
    return {str(p.relative_to(root)): bool(flags(p) & FS_SYNC_FL) for p in root.rglob("*")}


def test_acknowledged_writes_are_on_disk_before_the_ack(tmp_path: Path) -> None:
    """A power loss must not lose an acknowledged commit, as with PostgreSQL's fsync:
    SlateDB's local store links each WAL file into place without fsync, so its
    directories carry the synchronous-updates attribute (chattr +S), which the files it
    writes inherit; `--fsync off` clears it, as PostgreSQL's fsync = off."""
    data, probe = tmp_path / "data", tmp_path / "probe"
    probe.mkdir()
    if set_synchronous(probe, True) is not None:
        pytest.skip(f"the file system of {tmp_path} has no synchronous-updates attribute")

    async def write(port: int, keys: range) -> str:
        conn = await _connect(port)
        await conn.execute("CREATE TABLE IF NOT EXISTS t (k int PRIMARY KEY)")
        for k in keys:  # the fast path's epochs and a writing transaction's
            await conn.execute("INSERT INTO t VALUES ($1)", k)
        await conn.execute(
            "INSERT INTO t SELECT g FROM generate_series($1::int, $2::int) g",
            keys.stop,
            keys.stop + 9,
        )
        setting = await conn.fetchval("SHOW fsync")
        await conn.close()
        return setting

    server = HeadwaterServer(data, port=free_port()).start()
    try:
        assert asyncio.run(write(server.port, range(0, 20))) == "on"
    finally:
        server.stop()
    synced = _synchronous(data / "slatedb")
    assert any(name.startswith("wal/") for name in synced), synced
    assert all(synced.values()), [name for name, on in synced.items() if not on]

    server = HeadwaterServer(data, port=free_port(), args=["--fsync", "off"]).start()
    try:
        assert asyncio.run(write(server.port, range(100, 120))) == "off"
    finally:
        server.stop()
    after = _synchronous(data / "slatedb")
    new = [name for name in after if name not in synced]
    assert new and not any(after[name] for name in new), after
    assert not any(on for name, on in after.items() if (data / "slatedb" / name).is_dir())
