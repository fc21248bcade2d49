"""The single-row write path (issue 16): pipelined extended-protocol messages taken from
the socket buffer, group commit whose replica apply is lazy, reads after the
acknowledgement, errors of one statement in a shared epoch."""

from __future__ import annotations

import asyncio
import socket
import struct

import asyncpg
import psycopg
import pytest
from psycopg import errors


async def _connect(hw_server) -> asyncpg.Connection:  # type: ignore[no-untyped-def]
    return await asyncpg.connect(
        host=hw_server.host, port=hw_server.port, user="headwater", database="headwater", ssl=False
    )


def test_acknowledged_inserts_are_read_by_other_sessions(hw_server, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """Rows reach DuckDB lazily, yet a read that starts after an INSERT's acknowledgement
    sees it, from any session (the reader hurries the apply)."""

    async def run() -> None:
        writers = [await _connect(hw_server) for _ in range(6)]
        readers = [await _connect(hw_server) for _ in writers]  # each writer's own reader
        reader = readers[0]
        await reader.execute(f"CREATE TABLE {table_name} (id bigint PRIMARY KEY, v numeric(8,2))")
        sql = f"INSERT INTO {table_name} (id, v) VALUES ($1, $2)"
        count = f"SELECT count(*) FROM {table_name}"

        async def write(k: int) -> None:
            for i in range(30):
                key = k * 1000 + i
                await writers[k].execute(sql, key, i / 4)
                seen = await readers[k].fetchval(count + " WHERE id = $1", key)
                assert seen == 1, f"row {key} acknowledged but not read"

        await asyncio.gather(*(write(k) for k in range(len(writers))))
        assert await reader.fetchval(f"SELECT count(*) FROM {table_name}") == 180
        # a duplicate key in a shared epoch fails only its own statement, with 23505
        results = await asyncio.gather(
            *(w.execute(sql, 90000 + (k % 3), 1) for k, w in enumerate(writers)),
            return_exceptions=True,
        )
        failed = [r for r in results if isinstance(r, Exception)]
        assert len(failed) == 3
        assert all(isinstance(e, asyncpg.UniqueViolationError) for e in failed)
        assert await reader.fetchval(f"SELECT count(*) FROM {table_name} WHERE id >= 90000") == 3
        for c in (*writers, *readers):
            await c.close()

    asyncio.run(run())


def test_pipelined_binds_and_executes(hw_server, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """asyncpg's executemany sends many Bind/Execute pairs before one Sync: they are read
    from the buffer as they arrive in one packet, each applied once."""

    async def run() -> None:
        conn = await _connect(hw_server)
        await conn.execute(f"CREATE TABLE {table_name} (id int NOT NULL, name text)")
        await conn.executemany(
            f"INSERT INTO {table_name} VALUES ($1, $2)", [(i, f"n{i}") for i in range(500)]
        )
        assert await conn.fetchval(f"SELECT count(DISTINCT id) FROM {table_name}") == 500
        with pytest.raises(asyncpg.NotNullViolationError):
            await conn.executemany(
                f"INSERT INTO {table_name} VALUES ($1, $2)", [(1000, "a"), (None, "b")]
            )
        await conn.close()

    asyncio.run(run())


def _message(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def _read_until_ready(s: socket.socket) -> list[tuple[bytes, bytes]]:
    data, out = b"", []
    while True:
        while len(data) < 5 or len(data) < 1 + struct.unpack_from("!i", data, 1)[0]:
            chunk = s.recv(65536)
            if not chunk:
                return out
            data += chunk
        n = struct.unpack_from("!i", data, 1)[0]
        out.append((data[:1], data[5 : 1 + n]))
        data = data[1 + n :]
        if out[-1][0] == b"Z":
            return out


def test_one_packet_of_messages_then_a_bad_length(hw_server, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """Parse, Bind, Execute (x3) and Sync in one write: three INSERTs, each acknowledged;
    then a Sync declaring a negative length in the same packet as a valid Query: the
    server reports 08P01 and hangs up, as PostgreSQL does."""
    with psycopg.connect(hw_server.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table_name} (x int)")
        with socket.create_connection((hw_server.host, hw_server.port)) as s:
            s.settimeout(10)
            params = b"user\x00headwater\x00database\x00headwater\x00\x00"
            s.sendall(struct.pack("!ii", 8 + len(params), 196608) + params)
            assert _read_until_ready(s)[-1][0] == b"Z"
            sql = f"INSERT INTO {table_name} VALUES ($1)".encode()
            packet = _message(b"P", b"\x00" + sql + b"\x00" + struct.pack("!h", 0))
            for v in (1, 2, 3):
                value = str(v).encode()
                bind = b"\x00\x00" + struct.pack("!hh", 0, 1) + struct.pack("!i", len(value))
                packet += _message(b"B", bind + value + struct.pack("!h", 0))
                packet += _message(b"E", b"\x00" + struct.pack("!i", 0))
            packet += _message(b"S", b"")
            s.sendall(packet)
            kinds = [k for k, _ in _read_until_ready(s)]
            assert kinds.count(b"C") == 3 and b"E" not in kinds
            s.sendall(_message(b"Q", b"SELECT 1\x00") + b"S" + struct.pack("!i", -1))
            data = b""
            while chunk := s.recv(65536):  # until the server hangs up
                data += chunk
            replies = []
            while data:
                n = struct.unpack_from("!i", data, 1)[0]
                replies.append((data[:1], data[5 : 1 + n]))
                data = data[1 + n :]
            assert [k for k, _ in replies] == [b"T", b"D", b"C", b"Z", b"E"]  # SELECT 1, then
            assert b"C08P01" in replies[-1][1]
        assert conn.execute(f"SELECT sum(x) FROM {table_name}").fetchone() == (6,)
        with pytest.raises(errors.UndefinedTable):
            conn.execute("INSERT INTO no_such_table_here VALUES (1)")


def _fields(body: bytes) -> dict[str, str]:
    """An ErrorResponse's fields by code: S, C, M, ..."""
    return {f[:1].decode(): f[1:].decode() for f in body.split(b"\x00") if f}


def _bad_content_replies(host: str, port: int) -> list[tuple[str, str]]:
    """Extended-protocol messages whose framing is right but whose content is not; after
    each, a Sync and a query on the same connection."""
    c = b"\x00"
    bad = [
        _message(b"B", c + c + struct.pack("!h", 1)),  # cut short in the format codes
        _message(b"P", c + b"SELECT 1"),  # the statement's text lacks its terminator
        _message(b"P", c + b"SELECT '\xff'" + c + struct.pack("!h", 0)),  # not UTF-8
        _message(b"P", c + b"SELECT $1::int" + c + struct.pack("!h", 0))
        + _message(b"B", c + c + struct.pack("!hhi", 0, 1, 3) + b"\xc3\x28x" + b"\x00\x00"),
    ]
    out = []
    with socket.create_connection((host, port)) as s:
        s.settimeout(10)
        params = b"user\x00headwater\x00database\x00headwater\x00\x00"
        s.sendall(struct.pack("!ii", 8 + len(params), 196608) + params)
        assert _read_until_ready(s)[-1][0] == b"Z"
        for messages in bad:
            s.sendall(messages + _message(b"S", b""))
            errs = [_fields(body) for k, body in _read_until_ready(s) if k == b"E"]
            assert len(errs) == 1 and errs[0]["S"] == "ERROR"
            out.append((errs[0]["C"], errs[0]["M"]))
            s.sendall(_message(b"Q", b"SELECT 41 + 1\x00"))
            rows = [body for k, body in _read_until_ready(s) if k == b"D"]
            assert rows == [struct.pack("!hi", 1, 2) + b"42"]
    return out


def test_bad_message_content_as_postgres(hw_server, pg_oracle) -> None:  # type: ignore[no-untyped-def]
    """A message too short for what it carries, a string without its terminator and one
    that is not UTF-8 are errors PostgreSQL names (08P01, 22021), not internal ones; the
    session goes on."""
    got = _bad_content_replies(hw_server.host, hw_server.port)
    assert got == _bad_content_replies(pg_oracle.host, pg_oracle.port)
