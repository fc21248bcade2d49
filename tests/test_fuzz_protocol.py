"""Protocol fuzzing: malformed, truncated, out-of-order and oversized messages.

Each fuzz connection gets a valid startup and then garbage. The server must not
crash, must keep serving a healthy session throughout, and must keep its memory
bounded. CI mode sends HW_FUZZ_MESSAGES (default 100 000) messages.
"""

from __future__ import annotations

import os
import random
import socket
import struct
from pathlib import Path

import psycopg

from tests.hwserver import HeadwaterServer, rss_kb

MESSAGES = int(os.environ.get("HW_FUZZ_MESSAGES", "100000"))
KINDS = b"QPBDESCHXdcfpF?\x00\xff"


def _startup() -> bytes:
    body = struct.pack("!i", 196608) + b"user\x00headwater\x00database\x00headwater\x00\x00"
    return struct.pack("!i", len(body) + 4) + body


def _cstr(rng: random.Random) -> bytes:
    return (
        rng.choice([b"", b"s1", b"p1", rng.randbytes(rng.randint(0, 8)).replace(b"\x00", b"")])
        + b"\x00"
    )


def _well_framed(rng: random.Random) -> bytes:
    """A message with a correct length whose content is random or out of order."""
    kind = rng.choice(b"QPBDESCH")
    if kind == ord("Q"):
        body = rng.choice(
            [
                b"SELECT 1",
                b"SELECT $1",
                b"BEGIN",
                b"COMMIT",
                b"ROLLBACK",
                b"SELEC",
                b"INSERT INTO fuzz_ok VALUES ('x')",
                b"SELECT 1/0",
                b"",
                b"\xff\xfe",
            ]
        )
        body += b"\x00"
    elif kind == ord("P"):
        body = _cstr(rng) + rng.choice([b"SELECT $1::int", b"SELECT 1", b"bad sql", b""]) + b"\x00"
        n = rng.randint(0, 3)
        body += struct.pack("!h", n) + b"".join(
            struct.pack("!I", rng.choice([0, 23, 25, 99999])) for _ in range(n)
        )
    elif kind == ord("B"):
        body = (
            _cstr(rng)
            + _cstr(rng)
            + struct.pack("!h", rng.randint(0, 2))
            + rng.randbytes(rng.randint(0, 12))
        )
    elif kind in (ord("D"), ord("C")):
        body = rng.choice([b"S", b"P", b"X"]) + _cstr(rng)
    elif kind == ord("E"):
        body = _cstr(rng) + struct.pack("!i", rng.randint(-1, 3))
    else:
        body = rng.randbytes(rng.randint(0, 4))
    return bytes([kind]) + struct.pack("!i", len(body) + 4) + body


def _garbage(rng: random.Random) -> bytes:
    roll = rng.random()
    if roll < 0.995:  # most messages are framed right, so connections live long
        return _well_framed(rng)
    kind = bytes([rng.choice(KINDS)])
    payload = rng.randbytes(rng.randint(0, 64))
    if roll < 0.997:
        return kind + struct.pack("!i", rng.choice([-1, 0, 3, 2**31 - 1, 300 << 20]))  # bad length
    if roll < 0.999:
        return rng.randbytes(rng.randint(1, 32))  # raw noise
    return kind + struct.pack("!i", len(payload) + 4) + payload  # unknown or random type


def test_protocol_fuzz(tmp_path: Path) -> None:
    server = HeadwaterServer(tmp_path / "data").start()
    rng = random.Random(int(os.environ.get("HW_SEED", "11")))
    try:
        assert server.proc is not None
        healthy = psycopg.connect(server.dsn, autocommit=True)
        healthy.execute("CREATE TABLE fuzz_ok (x int)")
        sent = 0
        rss_start = rss_kb(server.proc.pid)
        rss_peak = rss_start
        conns = 0
        replies = (
            0  # ErrorResponse + ReadyForQuery + ParseComplete ... bytes seen: proof of processing
        )
        while sent < MESSAGES:
            with socket.create_connection((server.host, server.port), timeout=5) as s:
                conns += 1
                burst = b"".join(_garbage(rng) for _ in range(200))
                if rng.random() < 0.2:  # declared longer than sent: truncated at the end
                    burst += b"Q" + struct.pack("!i", 1000) + b"SELECT"
                try:
                    s.sendall(_startup() + burst)
                    s.shutdown(socket.SHUT_WR)
                    while chunk := s.recv(65536):
                        replies += chunk.count(b"Z\x00\x00\x00\x05") + chunk.count(b"E\x00\x00")
                except OSError:
                    pass  # the server closed the connection on us: that is allowed
                sent += 200
            if conns % 50 == 0:
                assert server.proc.poll() is None, f"server died after {sent} messages"
                healthy.execute("INSERT INTO fuzz_ok VALUES (%s)", (conns,))
                rss_peak = max(rss_peak, rss_kb(server.proc.pid))
        assert server.proc.poll() is None
        n = healthy.execute("SELECT count(*) FROM fuzz_ok").fetchone()
        assert n is not None and n[0] == conns // 50
        print(
            f"fuzz: {sent} messages on {conns} connections, ~{replies} replies; "
            f"RSS {rss_start} -> peak {rss_peak} kB"
        )
        assert replies > MESSAGES // 10, "the server processed too few messages to call this a fuzz"
        assert rss_peak < rss_start + 300_000, "memory grew by more than 300 MB"
        healthy.close()
    finally:
        server.stop()
