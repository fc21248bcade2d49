"""Autocommitted UPDATE and DELETE of one row by primary key, through the batcher
(server/point_writes.py): what ORMs and pgbench send. Before, each ran a writing
transaction of its own (~140 per second whatever the clients); the results, errors and
rows must stay PostgreSQL's, and a view, a point read, a restart see every change."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import psycopg
import pytest

from tests.hwserver import HeadwaterServer, free_port
from tests.oracle_scripts import assert_same_as_postgres

SETUP = [
    "!CREATE TABLE public.acc (id int PRIMARY KEY, name text NOT NULL, bal int,"
    " small smallint, amt numeric(6,2), day date, code varchar(3), u int UNIQUE,"
    " big bigint, ok boolean, f float8, b bytea)",
    "!INSERT INTO public.acc VALUES (1, 'a', 10, 1, 1.5, '2024-01-01', 'x', 100, 1, true,"
    " 1.5, '\\x01'), (2, 'b', 2147483640, 32767, 9999.99, NULL, 'yy', 200,"
    " 9223372036854775800, NULL, NULL, NULL), (3, 'c', NULL, NULL, NULL, NULL, NULL,"
    " NULL, NULL, NULL, NULL, NULL)",
    "!CREATE TABLE public.txt (k text PRIMARY KEY, v int)",
    "!INSERT INTO public.txt VALUES ('a', 1), ('b ', 2)",
    "!CREATE TABLE public.two (a int, b bigint, v text, PRIMARY KEY (a, b))",
    "!INSERT INTO public.two VALUES (1, 1, 'x'), (1, 2, 'y')",
    "!CREATE TABLE public.parent (id int PRIMARY KEY, v int)",
    "!CREATE TABLE public.child (id int PRIMARY KEY,"
    " p int REFERENCES public.parent ON DELETE CASCADE)",
    "!INSERT INTO public.parent VALUES (1, 0), (2, 0)",
    "!INSERT INTO public.child VALUES (10, 1)",
]
SCRIPT = [
    "UPDATE acc SET bal = bal + 5 WHERE id = 1",
    "UPDATE acc SET bal = bal + 10 WHERE id = 2",  # integer out of range
    "UPDATE acc SET small = small + 1 WHERE id = 2",  # smallint out of range
    "UPDATE acc SET big = big + 100 WHERE id = 2",  # bigint out of range
    "UPDATE acc SET bal = bal - 1, small = small - 1 WHERE id = 3",  # NULL stays NULL
    "UPDATE acc SET name = NULL WHERE id = 1",  # 23502 with the new row
    "UPDATE acc SET name = NULL WHERE id = 99",  # no row: no error
    "UPDATE acc SET code = 'toolong' WHERE id = 99",  # a constant's cast fails anyway
    "UPDATE acc SET amt = 123456 WHERE id = 99",
    "UPDATE acc SET bal = 'abc' WHERE id = 99",
    "UPDATE acc SET small = 100000 WHERE id = 99",
    "UPDATE acc SET bal = 1 WHERE id = 'x'",
    "UPDATE acc SET amt = 2.345, code = 'abc', day = '2024-05-05', ok = false WHERE id = 1",
    "UPDATE acc SET f = 2.5e3, b = '\\xff00', big = -5 WHERE id = 3",
    "UPDATE acc SET bal = 7 WHERE id = '3'",
    "UPDATE acc SET bal = 8 WHERE id = 3.0",  # numeric comparison: the general path
    "UPDATE acc SET bal = 8 WHERE id = 4000000000",  # no int4 row has that id
    "UPDATE acc a SET bal = a.bal + 1 WHERE a.id = 3",
    "UPDATE acc SET bal = 1 + bal WHERE acc.id = 1",
    "UPDATE acc SET bal = bal + NULL WHERE id = 1",
    "UPDATE acc SET bal = bal - -3 WHERE id = 3",
    "UPDATE acc SET bal = 5 WHERE id = 1 AND name = 'a'",  # not a point write
    "UPDATE acc SET u = 100 WHERE id = 3",  # a key column: the general path (23505)
    "DELETE FROM acc WHERE id = 2",
    "DELETE FROM acc WHERE id = 2",
    "INSERT INTO acc (id, name, u) VALUES (2, 'b2', 200)",  # its keys are free again
    "UPDATE acc SET bal = bal + 1 WHERE id = 2",
    "SELECT * FROM acc ORDER BY id",
    "UPDATE txt SET v = v * 2 WHERE k = 'a'",  # not a sum: the general path
    "UPDATE txt SET v = 9 WHERE k = 'b'",  # 'b' is not 'b '
    "UPDATE txt SET v = 9 WHERE k = 'b '",
    "DELETE FROM txt WHERE k = 'a'",
    "SELECT * FROM txt ORDER BY k",
    "UPDATE two SET v = 'z' WHERE a = 1 AND b = 2",
    "UPDATE two SET v = 'w' WHERE b = 1 AND a = 1",
    "UPDATE two SET v = 'q' WHERE a = 1",  # not the whole key
    "DELETE FROM two WHERE a = 1 AND b = 1",
    "SELECT * FROM two ORDER BY a, b",
    "UPDATE parent SET v = v + 1 WHERE id = 1",  # referenced: the general path
    "DELETE FROM parent WHERE id = 1",
    "SELECT * FROM child",
]
PREPARED = [  # (statement, parameters): the extended protocol's values
    ("UPDATE acc SET bal = bal + $1 WHERE id = $2", [5, 1]),
    ("UPDATE acc SET bal = bal + $1 WHERE id = $2", [2**31 - 1, 1]),
    ("UPDATE acc SET name = $1, amt = $2 WHERE id = $3", ["n", 12.345, 1]),
    ("UPDATE acc SET name = $1 WHERE id = $2", [None, 1]),
    ("UPDATE acc SET code = $1 WHERE id = $2", ["long", 1]),
    ("UPDATE acc SET bal = $1 WHERE id = $2", [3, 77]),
    ("DELETE FROM acc WHERE id = $1", [3]),
    ("SELECT id, name, bal, amt, code FROM acc ORDER BY id", None),
]


def test_point_writes_as_postgres(hw_server, pg_oracle) -> None:  # type: ignore[no-untyped-def]
    # (not the error position of a literal: neither write path has it)
    assert_same_as_postgres(
        pg_oracle.dsn, hw_server.dsn, "pw_literal", SETUP + SCRIPT, ignore=("position",)
    )


def _outcomes(dsn: str) -> list[Any]:
    out: list[Any] = []
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("DROP SCHEMA IF EXISTS pw_params CASCADE")
        c.execute("CREATE SCHEMA pw_params")
        c.execute("SET search_path = pw_params")
        for sql in SETUP:
            c.execute(sql[1:].replace("public.", "pw_params."))
        for sql, params in PREPARED:
            for _ in range(2):  # the second time from the prepared statement's template
                try:
                    cur = c.execute(sql, params, prepare=True)
                    rows = cur.fetchall() if cur.description else None
                    out.append((sql, cur.statusmessage, rows))
                except psycopg.Error as e:
                    out.append((sql, e.sqlstate, e.diag.message_primary, e.diag.message_detail))
    return out


def test_prepared_point_writes_as_postgres(hw_server, pg_oracle) -> None:  # type: ignore[no-untyped-def]
    for got, want in zip(_outcomes(hw_server.dsn), _outcomes(pg_oracle.dsn), strict=True):
        assert got == want


def _url(server: HeadwaterServer) -> str:
    return f"postgresql://headwater@127.0.0.1:{server.port}/headwater"


def test_concurrent_point_writes_share_an_epoch(hw_server, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """UPDATEs queued behind a writing transaction commit in one epoch when it ends
    (each was a writing transaction, and an epoch, of its own); the sum, a view over
    the table and the point-read cache all see every change."""
    t = table_name

    async def run() -> None:
        url = _url(hw_server)
        admin = await asyncpg.connect(url, ssl=False)
        await admin.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, n int, s text)")
        await admin.execute(f"CREATE TABLE {t}_other (x int)")
        await admin.execute(f"INSERT INTO {t} SELECT g, 0, 'x' FROM generate_series(1, 5) g")
        await admin.execute(
            f"CREATE MATERIALIZED VIEW {t}_sum AS SELECT sum(n) AS total, count(*) AS c FROM {t}"
        )
        reader = await asyncpg.connect(url, ssl=False)
        read = await reader.prepare(f"SELECT n FROM {t} WHERE id = $1")
        assert await read.fetchval(1) == 0  # cached by the point-read path
        before = await admin.fetchval("SELECT max(epoch) FROM headwater_catalog.epochs")
        clients = [await asyncpg.connect(url, ssl=False) for _ in range(20)]
        blocker = await asyncpg.connect(url, ssl=False)
        block = blocker.transaction()
        await block.start()
        await blocker.execute(f"INSERT INTO {t}_other SELECT 1")  # holds the write lock
        updates = [
            asyncio.create_task(
                c.execute(f"UPDATE {t} SET n = n + $1, s = $2 WHERE id = $3", 1, f"c{i}", 1 + i % 5)
            )
            for i, c in enumerate(clients)
        ]
        await asyncio.sleep(1.0)  # all queued behind the transaction
        await block.commit()
        assert await asyncio.gather(*updates) == ["UPDATE 1"] * 20
        epochs = await admin.fetchval(
            "SELECT count(DISTINCT epoch) FROM headwater_catalog.epochs"
            f" WHERE epoch > {int(before)} AND table_name = '{t}'"
        )
        assert epochs <= 3, f"{epochs} epochs for 20 point UPDATEs queued together"
        assert await admin.fetchval(f"SELECT sum(n) FROM {t}") == 20
        assert await read.fetchval(1) == 4
        assert await admin.fetchrow(f"SELECT total, c FROM {t}_sum") == (20, 5)
        assert await clients[0].execute(f"DELETE FROM {t} WHERE id = $1", 2) == "DELETE 1"
        assert await read.fetchval(2) is None
        assert await admin.fetchrow(f"SELECT total, c FROM {t}_sum") == (16, 4)
        await admin.execute(f"DROP MATERIALIZED VIEW {t}_sum")
        for c in [admin, reader, blocker, *clients]:
            await c.close()

    asyncio.run(run())


@pytest.mark.parametrize("kill", [False, True])
def test_point_writes_survive_a_restart(tmp_path, kill: bool) -> None:  # type: ignore[no-untyped-def]
    """Writers changing the same rows concurrently: batches that share an epoch change
    one row twice, and the epoch's change rows must still replay to one live version
    per row (storage/commit.py `merge`); a DELETE and re-INSERT of a key too."""

    async def run() -> None:
        server = HeadwaterServer(tmp_path / "data", port=free_port()).start()
        try:
            url = _url(server)
            c = await asyncpg.connect(url, ssl=False)
            await c.execute("CREATE TABLE hot (id int PRIMARY KEY, n bigint, tag text)")
            await c.execute("INSERT INTO hot SELECT g, 0, 'x' FROM generate_series(1, 3) g")

            async def writer(w: int) -> int:
                cc = await asyncpg.connect(url, ssl=False)
                for i in range(150):
                    await cc.execute(
                        "UPDATE hot SET n = n + 1, tag = $1 WHERE id = $2", f"{w}", 1 + i % 3
                    )
                    if w == 0 and i % 10 == 0:
                        await cc.execute("DELETE FROM hot WHERE id = 99")
                        await cc.execute("INSERT INTO hot VALUES (99, $1, 'd')", i)
                await cc.close()
                return 150

            total = sum(await asyncio.gather(*[writer(w) for w in range(8)]))
            want = await c.fetch("SELECT * FROM hot ORDER BY id")
            assert sum(r["n"] for r in want if r["id"] != 99) == total
            await c.close()
            if kill:
                server.kill()
            else:
                server.stop()
            server = HeadwaterServer(server.data_dir, port=server.port).start()
            c = await asyncpg.connect(url, ssl=False)
            assert await c.fetch("SELECT * FROM hot ORDER BY id") == want
            assert await c.fetchval("SELECT count(*) FROM hot") == 4
            await c.close()
        finally:
            server.stop()

    asyncio.run(run())
