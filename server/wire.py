"""PostgreSQL protocol v3 message framing: bytes in, bytes out. No state."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from headwater.server.settings import format_size

from headwater.errors import ProtocolViolation, SQLError

# Lengths a client may declare. PostgreSQL 15 checks the length word before it reads a
# body (pq_getmessage), so a client cannot make the server allocate more than these.
MAX_MESSAGE = 64 << 20  # default for Query, Parse, Bind, CopyData (--max-message-size)
MAX_MESSAGE_CAP = 1 << 30  # PostgreSQL's PQ_LARGE_MESSAGE_LIMIT: the most the option allows
MAX_STARTUP = 10_000  # MAX_STARTUP_PACKET_LENGTH: the packet after its length word
SMALL_MESSAGE = 10_000  # PQ_SMALL_MESSAGE_LIMIT: Sync, Execute, Describe, Close, CopyDone, ...
AUTH_MESSAGE = 65_535  # PG_MAX_AUTH_TOKEN_LENGTH: a password or SASL message
LARGE_KINDS = frozenset("QPBd")  # the messages that carry statements and data

SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102
PROTOCOL_3 = 196608


class Reader:
    """Parses the body of one message."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def int16(self) -> int:
        v = struct.unpack_from("!h", self.buf, self.pos)[0]
        self.pos += 2
        return int(v)

    def int32(self) -> int:
        v = struct.unpack_from("!i", self.buf, self.pos)[0]
        self.pos += 4
        return int(v)

    def uint32(self) -> int:
        v = struct.unpack_from("!I", self.buf, self.pos)[0]
        self.pos += 4
        return int(v)

    def cstr(self) -> str:
        end = self.buf.index(b"\x00", self.pos)
        s = self.buf[self.pos : end].decode("utf-8")
        self.pos = end + 1
        return s

    def bytes_(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise ValueError("insufficient data left in message")
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return b

    def byte(self) -> str:
        return chr(self.bytes_(1)[0])

    def rest(self) -> bytes:
        b = self.buf[self.pos :]
        self.pos = len(self.buf)
        return b


class MessageTooLong(ProtocolViolation):  # type: ignore[misc, valid-type]
    """A declared length over the limit: the body was not read, so the connection ends."""

    def __init__(
        self, message: str, *, detail: str | None = None, hint: str | None = None, unread: int = 0
    ) -> None:
        super().__init__(message, detail=detail, hint=hint)
        self.unread = unread  # bytes the client declared and may still be sending


async def read_startup(reader: asyncio.StreamReader) -> tuple[int, Reader]:
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


def message_limit(kind: str, max_size: int) -> int:
    """The longest message of this type a client may send (bytes, length word included)."""
    if kind in LARGE_KINDS:
        return max_size
    return AUTH_MESSAGE if kind == "p" else SMALL_MESSAGE


async def read_message(
    reader: asyncio.StreamReader, max_size: int = AUTH_MESSAGE
) -> tuple[str, Reader]:
    """One message. max_size bounds Query, Parse, Bind and CopyData (the server's
    --max-message-size once the client is authenticated; before, PostgreSQL's bound
    for a password message, so an unknown client cannot make the server buffer more)."""
    head = await reader.readexactly(5)
    kind = chr(head[0])
    (length,) = struct.unpack_from("!i", head, 1)
    limit = message_limit(kind, max_size)
    if length < 4 or length > limit:
        raise _too_long(kind, length, limit, max_size)
    body = await reader.readexactly(length - 4)
    return kind, Reader(body)


def _too_long(kind: str, length: int, limit: int, max_size: int) -> MessageTooLong:
    """PostgreSQL only logs "invalid message length" (08P01) and hangs up; the client
    is told here why, and which option raises the limit."""
    if length < 4:
        return MessageTooLong("invalid message length")
    shown = kind if kind.isprintable() else f"0x{ord(kind):02x}"
    detail = (
        f'The message (type "{shown}") declares {length} bytes; the limit for this type '
        f"is {format_size(limit)}."
    )
    hint = None
    if kind in LARGE_KINDS and max_size != AUTH_MESSAGE:
        hint = (
            f"The limit is headwater.max_message_size ({format_size(max_size)}); start the "
            f"server with headwater start --max-message-size to raise it (at most 1GB). "
            "COPY FROM STDIN data of any total size may be sent in several CopyData messages."
        )
    return MessageTooLong("invalid message length", detail=detail, hint=hint, unread=length - 4)


def msg(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def cstr(s: str) -> bytes:
    return s.encode("utf-8") + b"\x00"


def auth_ok() -> bytes:
    return msg(b"R", struct.pack("!i", 0))


def parameter_status(name: str, value: str) -> bytes:
    return msg(b"S", cstr(name) + cstr(value))


def backend_key(pid: int, secret: int) -> bytes:
    return msg(b"K", struct.pack("!ii", pid, secret))


def ready(status: str) -> bytes:
    return msg(b"Z", status.encode())


def command_complete(tag: str) -> bytes:
    return msg(b"C", cstr(tag))


def empty_query() -> bytes:
    return msg(b"I")


def parse_complete() -> bytes:
    return msg(b"1")


def bind_complete() -> bytes:
    return msg(b"2")


def close_complete() -> bytes:
    return msg(b"3")


def no_data() -> bytes:
    return msg(b"n")


def portal_suspended() -> bytes:
    return msg(b"s")


def parameter_description(oids: list[int]) -> bytes:
    return msg(b"t", struct.pack("!h", len(oids)) + b"".join(struct.pack("!I", o) for o in oids))


def row_description(fields: list[Any], formats: list[int]) -> bytes:
    """fields: objects with .name and .type (ColumnType)."""
    parts = [struct.pack("!h", len(fields))]
    for i, f in enumerate(fields):
        fmt = formats[i] if i < len(formats) else (formats[0] if len(formats) == 1 else 0)
        t = f.type
        parts.append(
            cstr(f.name)
            + struct.pack(
                "!IhIhih",
                getattr(f, "table_oid", 0),
                getattr(f, "attnum", 0),
                t.pg.oid,
                t.pg.typlen,
                t.typmod,
                fmt,
            )
        )
    return msg(b"T", b"".join(parts))


def data_row(values: list[bytes | None]) -> bytes:
    parts = [struct.pack("!h", len(values))]
    for v in values:
        if v is None:
            parts.append(b"\xff\xff\xff\xff")
        else:
            parts.append(struct.pack("!i", len(v)))
            parts.append(v)
    body = b"".join(parts)
    return b"D" + struct.pack("!i", len(body) + 4) + body


def copy_in_response(ncols: int, binary: bool = False) -> bytes:
    fmt = 1 if binary else 0
    return msg(b"G", struct.pack("!bh", fmt, ncols) + struct.pack("!h", fmt) * ncols)


def copy_out_response(ncols: int) -> bytes:
    return msg(b"H", struct.pack("!bh", 0, ncols) + struct.pack("!h", 0) * ncols)


def copy_data(data: bytes) -> bytes:
    return msg(b"d", data)


def copy_done() -> bytes:
    return msg(b"c")


def _fields(err: SQLError) -> bytes:
    sev = err.severity
    parts = [
        b"S" + cstr(sev),
        b"V" + cstr(sev),
        b"C" + cstr(err.sqlstate),
        b"M" + cstr(err.message),
    ]
    if err.detail:
        parts.append(b"D" + cstr(err.detail))
    if err.hint:
        parts.append(b"H" + cstr(err.hint))
    if err.position:
        parts.append(b"P" + cstr(str(err.position)))
    return b"".join(parts) + b"\x00"


def error_response(err: SQLError) -> bytes:
    return msg(b"E", _fields(err))


def notice_response(
    message: str | SQLError, code: str = "00000", severity: str = "NOTICE"
) -> bytes:
    """A NoticeResponse: a message, or an SQLError for a notice with a code or DETAIL."""
    if isinstance(message, SQLError):
        return msg(b"N", _fields(message))
    return msg(b"N", _fields(SQLError(message, code, severity=severity)))
