"""Limits: message sizes, the startup packet, the replica's memory limit and work_mem,
the wait for another session's writing transaction.

One server for the file, started with a 1MB message limit, 256MB of DuckDB memory and
a 2s write-lock timeout so that each limit is cheap to reach. Over-long messages end
only their connection (FATAL 08P01, as PostgreSQL's "invalid message length", plus the
limit and the option); COPY streams any total size; a query over the memory limit
spills or gets 53200; a write waiting for another's transaction gets 55P03.
"""

from __future__ import annotations

import io
import socket
import struct
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import errors

from tests.hwserver import HeadwaterServer, rss_kb

LIMIT = 1 << 20  # --max-message-size 1MB


@pytest.fixture(scope="module")
def server() -> Iterator[HeadwaterServer]:
    root = Path(tempfile.mkdtemp(prefix="headwater-limits-"))
    srv = HeadwaterServer(
        root / "data",
        args=["--max-message-size", "1MB", "--memory-limit", "256MB", "--write-lock-timeout", "2s"],
    ).start()
    yield srv
    srv.stop()


@pytest.fixture
def healthy(server: HeadwaterServer) -> Iterator[psycopg.Connection]:
    with psycopg.connect(server.dsn, autocommit=True) as c:
        yield c


def _startup_packet(pad_to: int | None = None) -> bytes:
    body = struct.pack("!i", 196608) + b"user\x00headwater\x00database\x00headwater\x00"
    if pad_to is not None:  # an application_name long enough for the packet to be pad_to bytes
        name = b"application_name\x00"
        body += name + b"a" * (pad_to - 4 - len(body) - len(name) - 2) + b"\x00"
    body += b"\x00"
    return struct.pack("!i", len(body) + 4) + body


def _read_until_closed(s: socket.socket, timeout: float = 10) -> bytes:
    s.settimeout(timeout)
    out = b""
    try:
        while chunk := s.recv(65536):
            out += chunk
    except ConnectionResetError:
        pass
    return out


def _session(server: HeadwaterServer) -> socket.socket:
    """A raw, authenticated (trust) connection that has seen ReadyForQuery."""
    s = socket.create_connection((server.host, server.port), timeout=10)
    s.sendall(_startup_packet())
    got = b""
    while not got.endswith(b"Z\x00\x00\x00\x05I"):
        got += s.recv(65536)
    return s


def test_max_message_size_is_shown_and_read_only(healthy: psycopg.Connection) -> None:
    assert healthy.execute("SHOW headwater.max_message_size").fetchone() == ("1MB",)
    for name, option in (
        ("headwater.max_message_size", "--max-message-size"),
        ("max_connections", "--max-connections"),
    ):
        with pytest.raises(errors.CantChangeRuntimeParam) as err:
            healthy.execute(f"SET {name} = '2MB'")
        assert option in (err.value.diag.message_hint or "")


def test_startup_packet_limit_is_postgres(
    server: HeadwaterServer, healthy: psycopg.Connection
) -> None:
    # PostgreSQL accepts 10000 bytes after the length word (MAX_STARTUP_PACKET_LENGTH)
    with socket.create_connection((server.host, server.port), timeout=10) as s:
        s.sendall(_startup_packet(pad_to=10_004))
        got = b""
        while b"Z\x00\x00\x00\x05I" not in got:
            got += s.recv(65536)
        assert got[:1] == b"R"
    with socket.create_connection((server.host, server.port), timeout=10) as s:
        s.sendall(struct.pack("!i", 10_005))  # one byte more, and no body at all
        reply = _read_until_closed(s)
    assert reply[:1] == b"E" and b"C08P01\x00" in reply and b"SFATAL\x00" in reply
    assert b"invalid length of startup packet" in reply
    assert healthy.execute("SELECT 1").fetchone() == (1,)


def test_over_long_messages_end_only_their_connection(
    server: HeadwaterServer, healthy: psycopg.Connection
) -> None:
    healthy.execute("CREATE TABLE lim_tx (x int)")
    with healthy.transaction():  # a session mid-transaction is not disturbed
        healthy.execute("INSERT INTO lim_tx VALUES (1)")
        for query, params in (
            ("SELECT '" + "x" * (2 * LIMIT) + "'", None),  # Query
            ("SELECT %s::text", ["x" * (2 * LIMIT)]),  # Bind
        ):
            with psycopg.connect(server.dsn, autocommit=True) as c:
                with pytest.raises(errors.ProtocolViolation) as err:
                    c.execute(query, params)
                assert c.closed or c.broken
            assert err.value.diag.message_primary == "invalid message length"
            assert "--max-message-size" in (err.value.diag.message_hint or "")
            assert "1MB" in (err.value.diag.message_detail or "")
        healthy.execute("INSERT INTO lim_tx VALUES (2)")
    assert healthy.execute("SELECT sum(x) FROM lim_tx").fetchone() == (3,)
    # small messages keep PostgreSQL's 10000-byte bound: a Sync cannot be 20000 bytes
    with _session(server) as s:
        s.sendall(b"S" + struct.pack("!i", 20_000))
        reply = _read_until_closed(s)
    assert b"C08P01\x00" in reply and b"invalid message length" in reply
    # a message just under the limit is still fine
    q = "SELECT length('" + "y" * (LIMIT - 100) + "')"
    assert healthy.execute(q).fetchone() == (LIMIT - 100,)


def test_copy_larger_than_message_limit(
    server: HeadwaterServer, healthy: psycopg.Connection
) -> None:
    healthy.execute("CREATE TABLE lim_copy (id int, name text)")
    rows = 120_000  # ~6MB: six times the message limit, in 64kB CopyData messages
    data = io.StringIO("".join(f"{i}\tname-{i:040d}\n" for i in range(rows)))
    with healthy.cursor().copy("COPY lim_copy FROM STDIN") as cp:
        while chunk := data.read(64 << 10):
            cp.write(chunk)
    assert healthy.execute("SELECT count(*), max(id) FROM lim_copy").fetchone() == (
        rows,
        rows - 1,
    )
    # one CopyData message over the limit ends that connection; nothing is copied
    # (psycopg splits what it sends into 128kB messages: send one by hand)
    with _session(server) as s:
        q = b"COPY lim_copy FROM STDIN\x00"
        s.sendall(b"Q" + struct.pack("!i", len(q) + 4) + q)
        assert s.recv(65536)[:1] == b"G"  # CopyInResponse
        s.sendall(b"d" + struct.pack("!i", 2 * LIMIT) + b"1\tone\n" * 1000)
        reply = _read_until_closed(s)
    assert b"SFATAL\x00" in reply and b"invalid message length" in reply
    assert healthy.execute("SELECT count(*) FROM lim_copy").fetchone() == (rows,)


def test_rss_bounded_when_clients_announce_huge_messages(
    server: HeadwaterServer, healthy: psycopg.Connection
) -> None:
    assert server.proc is not None
    before = rss_kb(server.proc.pid)
    for _ in range(20):  # a 1GB Query announced, nothing sent: refused at once
        with _session(server) as s:
            s.sendall(b"Q" + struct.pack("!i", 1 << 30))
            reply = _read_until_closed(s)  # closed by the server, not waiting for the bytes
        assert b"invalid message length" in reply
    held = []  # within the limit, announced and never sent: nothing is allocated up front
    for _ in range(20):
        s = _session(server)
        s.sendall(b"Q" + struct.pack("!i", LIMIT))
        held.append(s)
    try:
        assert healthy.execute("SELECT 1").fetchone() == (1,)
        grown = rss_kb(server.proc.pid) - before
        print(f"limits: RSS {before} kB -> +{grown} kB with 20 refused and 20 pending messages")
        assert grown < 64 << 10, f"RSS grew by {grown} kB"
    finally:
        for s in held:
            s.close()


def test_work_mem_shows_the_memory_limit(healthy: psycopg.Connection) -> None:
    for name in ("work_mem", "headwater.memory_limit"):
        assert healthy.execute(f"SHOW {name}").fetchone() == ("256MB",)
    assert healthy.execute("SELECT current_setting('work_mem')").fetchone() == ("256MB",)
    with pytest.raises(errors.CantChangeRuntimeParam) as err:
        healthy.execute("SET headwater.memory_limit = '1GB'")
    assert "--memory-limit" in (err.value.diag.message_hint or "")


def test_set_work_mem_is_answered_not_ignored(healthy: psycopg.Connection) -> None:
    notices: list[tuple[str | None, ...]] = []  # (a Diagnostic is valid only in the handler)
    healthy.add_notice_handler(
        lambda d: notices.append((d.severity, d.sqlstate, d.message_primary, d.message_hint))
    )
    healthy.execute("SET work_mem = '64MB'")  # within the shared limit: a NOTICE
    healthy.execute("SET work_mem = '1GB'")  # more than it: a WARNING naming the option
    assert [n[:2] for n in notices] == [
        ("NOTICE", "00000"),
        ("WARNING", "01000"),
    ]
    assert all("server-wide" in (n[2] or "") for n in notices)
    assert "--memory-limit 1GB" in (notices[1][3] or "")
    assert healthy.execute("SHOW work_mem").fetchone() == ("256MB",)  # the effective value
    for bad in ("'64mb'", "10", "'lots'"):  # checked as PostgreSQL checks it
        with pytest.raises(errors.InvalidParameterValue):
            healthy.execute(f"SET work_mem = {bad}")
    with healthy.transaction():  # a script's SET work_mem does not abort its transaction
        healthy.execute("SET LOCAL work_mem = '512MB'")
        assert healthy.execute("SELECT 1").fetchone() == (1,)
    healthy.execute("RESET work_mem")
    assert healthy.execute("SHOW work_mem").fetchone() == ("256MB",)


def test_memory_limit_spills_then_53200(
    server: HeadwaterServer, healthy: psycopg.Connection
) -> None:
    # a sort of ~6M strings (well over 256MB of state) spills into the data directory
    spill = server.data_dir / "duckdb_tmp"  # DuckDB creates it when it first spills
    assert not spill.exists()
    t0 = time.monotonic()
    n = healthy.execute(
        "SELECT count(*) FROM (SELECT x::text || 'abcdefghijabcdefghij' AS s "
        "FROM generate_series(1, 6000000) AS g(x) ORDER BY s DESC OFFSET 1) q"
    ).fetchone()
    assert n == (5_999_999,)
    assert spill.is_dir()
    spill_s = time.monotonic() - t0
    # one aggregate value of ~500MB cannot spill: 53200, naming the statement and the option
    big = "SELECT length(string_agg(repeat('x', 100), ',')) FROM generate_series(1, 5000000) g(x)"
    with pytest.raises(errors.OutOfMemory) as err:
        healthy.execute(big)
    assert err.value.diag.message_primary == "out of memory"
    assert "string_agg" in (err.value.diag.message_detail or "")
    assert "--memory-limit" in (err.value.diag.message_hint or "")
    assert healthy.execute("SELECT 1").fetchone() == (1,)  # the session goes on
    healthy.execute("BEGIN")
    with pytest.raises(errors.OutOfMemory):
        healthy.execute(big)
    with pytest.raises(errors.InFailedSqlTransaction):
        healthy.execute("SELECT 1")
    healthy.execute("ROLLBACK")
    assert healthy.execute("SELECT 2").fetchone() == (2,)
    print(f"limits: a 6M-row sort spilled under 256MB in {spill_s:.1f}s")


def test_writes_wait_for_a_writing_transaction_at_most_the_timeout(server: HeadwaterServer) -> None:
    """A block's writing transaction holds the write lock between its statements. Another
    session's INSERT (the fast path's queue) waited for it without end; it now fails
    with 55P03 after --write-lock-timeout, as a general writer does, and the server
    and both sessions go on."""
    import threading

    with (
        psycopg.connect(server.dsn, autocommit=True) as a,
        psycopg.connect(server.dsn, autocommit=True) as b,
    ):
        a.execute("CREATE TABLE wl (k int PRIMARY KEY, v text)")
        a.execute("BEGIN")
        a.execute("INSERT INTO wl SELECT g, 'a' FROM generate_series(1, 3) AS g")  # general
        got: list[BaseException | None] = []

        def insert() -> None:
            try:
                b.execute("INSERT INTO wl VALUES (10, 'b')")
                got.append(None)
            except psycopg.Error as e:
                got.append(e)

        writer = threading.Thread(target=insert)
        writer.start()
        writer.join(20)
        finished = not writer.is_alive()
        a.execute("COMMIT")  # (first: a failed check must not leave the block open)
        writer.join()
        assert finished, "the INSERT waited for the block with no end"
        assert isinstance(got[0], errors.LockNotAvailable), got
        assert "write lock" in str(got[0])
        b.execute("INSERT INTO wl VALUES (10, 'b')")
        assert b.execute("SELECT count(*) FROM wl").fetchone() == (4,)
        a.execute("DROP TABLE wl")
