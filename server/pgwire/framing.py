"""PostgreSQL protocol v3 message framing: a message's type, length and body, read
from the client with the length limits checked before a body is buffered. No state."""

from __future__ import annotations

import asyncio
import struct

from headwater.server.settings import format_size

from headwater.errors import ProtocolViolation, SQLError, utf8

# Lengths a client may declare. PostgreSQL 15 checks the length word before it reads a
# body (pq_getmessage), so a client cannot make the server allocate more than these.
MAX_MESSAGE = 64 << 20  # default for Query, Parse, Bind, CopyData (--max-message-size)
MAX_MESSAGE_CAP = 1 << 30  # PostgreSQL's PQ_LARGE_MESSAGE_LIMIT: the most the option allows
SMALL_MESSAGE = 10_000  # PQ_SMALL_MESSAGE_LIMIT: Sync, Execute, Describe, Close, CopyDone, ...
AUTH_MESSAGE = 65_535  # PG_MAX_AUTH_TOKEN_LENGTH: a password or SASL message
LARGE_KINDS = frozenset("QPBd")  # the messages that carry statements and data


class Reader:
    """Parses the body of one message. A body too short for what its type carries, a
    string without its terminator or one that is not UTF-8 raise PostgreSQL's errors
    (08P01, 22021): the framing is intact, so the session goes on, as in PostgreSQL."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def _unpack(self, fmt: str, size: int) -> int:
        try:
            v = struct.unpack_from(fmt, self.buf, self.pos)[0]
        except struct.error:
            raise _short() from None
        self.pos += size
        return int(v)

    def int16(self) -> int:
        return self._unpack("!h", 2)

    def int32(self) -> int:
        return self._unpack("!i", 4)

    def uint32(self) -> int:
        return self._unpack("!I", 4)

    def cstr(self) -> str:
        end = self.buf.find(b"\x00", self.pos)
        if end < 0:
            raise SQLError("invalid string in message", "08P01")
        s = utf8(self.buf[self.pos : end])
        self.pos = end + 1
        return s

    def bytes_(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise _short()
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return b

    def byte(self) -> str:
        return chr(self.bytes_(1)[0])

    def rest(self) -> bytes:
        b = self.buf[self.pos :]
        self.pos = len(self.buf)
        return b


def _short() -> SQLError:
    return SQLError("insufficient data left in message", "08P01")


class MessageTooLong(ProtocolViolation):  # type: ignore[misc, valid-type]
    """A declared length over the limit: the body was not read, so the connection ends."""

    def __init__(
        self, message: str, *, detail: str | None = None, hint: str | None = None, unread: int = 0
    ) -> None:
        super().__init__(message, detail=detail, hint=hint)
        self.unread = unread  # bytes the client declared and may still be sending


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


def buffered_message(reader: asyncio.StreamReader, max_size: int) -> tuple[str, Reader] | None:
    """The next message if the reader already holds all of it, else None (then
    `read_message`, which also reports a bad length). A client's pipeline (Bind,
    Execute, Sync) arrives in one packet: taking its messages straight from the buffer
    saves two coroutine round trips per message (issue 16: ~10% of a prepared INSERT's
    Python work). Uses StreamReader's buffer as `readexactly` does."""
    buf: bytearray = reader._buffer  # type: ignore[attr-defined]
    if len(buf) < 5 or reader.exception() is not None:
        return None
    length = int.from_bytes(buf[1:5], "big", signed=True)
    kind = chr(buf[0])
    if length < 4 or length > message_limit(kind, max_size) or len(buf) < length + 1:
        return None
    body = bytes(buf[5 : length + 1])
    del buf[: length + 1]
    reader._maybe_resume_transport()  # type: ignore[attr-defined]
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
