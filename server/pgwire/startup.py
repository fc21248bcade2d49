"""The startup packet: the first message of a connection, which has no type byte.

Its code is the protocol version or a request (SSL, GSSAPI encryption, cancel); a
protocol 3.0 packet carries the parameters (user, database, options, settings).
"""

from __future__ import annotations

import asyncio
import struct

from headwater.server.pgwire.framing import MessageTooLong, Reader

MAX_STARTUP = 10_000  # MAX_STARTUP_PACKET_LENGTH: the packet after its length word
SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102
PROTOCOL_3 = 196608


async def read_startup(reader: asyncio.StreamReader) -> tuple[int, Reader]:
    """The startup packet (or SSLRequest, GSSENCRequest, CancelRequest): its code and body."""
    head = await reader.readexactly(4)
    (length,) = struct.unpack("!i", head)
    if length < 8 or length - 4 > MAX_STARTUP:  # PostgreSQL's test, to the byte
        raise MessageTooLong(
            "invalid length of startup packet",
            detail=f"The packet declares {length} bytes; PostgreSQL's limit is "
            f"{MAX_STARTUP + 4} bytes."
            if length >= 8
            else None,
        )
    body = await reader.readexactly(length - 4)
    r = Reader(body)
    return r.int32(), r


def startup_parameters(r: Reader) -> dict[str, str]:
    """A protocol 3.0 packet's name/value pairs, up to the empty name that ends them."""
    params: dict[str, str] = {}
    while True:
        key = r.cstr()
        if not key:
            break
        params[key] = r.cstr()
    return params


def startup_options(text: str) -> list[tuple[str, str]]:
    """The startup packet's `options` (libpq PGOPTIONS): `-c name=value` or
    `--name=value`, separated by spaces; a backslash escapes the next character."""
    words: list[str] = []
    cur: list[str] = []
    escaped = False
    for ch in text:
        if escaped:
            cur.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch.isspace():
            if cur:
                words.append("".join(cur))
                cur = []
        else:
            cur.append(ch)
    if cur:
        words.append("".join(cur))
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(words):
        w = words[i]
        if w == "-c" and i + 1 < len(words):
            w, i = words[i + 1], i + 1
        elif w.startswith("-c"):
            w = w[2:]
        elif w.startswith("--"):
            w = w[2:]
        else:
            i += 1
            continue
        if "=" in w:
            name, value = w.split("=", 1)
            out.append((name.replace("-", "_"), value))
        i += 1
    return out
