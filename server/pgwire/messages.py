"""PostgreSQL protocol v3 backend messages: Python values in, the bytes to send out.

One function per message the server sends; each returns the whole message (type
byte, length word, body). No state.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from headwater.errors import SQLError

# Authentication request codes (the 'R' message)
AUTH_OK, AUTH_CLEARTEXT, AUTH_MD5 = 0, 3, 5
AUTH_SASL, AUTH_SASL_CONTINUE, AUTH_SASL_FINAL = 10, 11, 12


def msg(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def cstr(s: str) -> bytes:
    return s.encode("utf-8") + b"\x00"


def authentication(code: int, data: bytes = b"") -> bytes:
    """An Authentication* message: AUTH_OK, or a request for a password or SASL step."""
    return msg(b"R", struct.pack("!i", code) + data)


def auth_ok() -> bytes:
    return authentication(AUTH_OK)


def parameter_status(name: str, value: str) -> bytes:
    return msg(b"S", cstr(name) + cstr(value))


def backend_key(pid: int, secret: int) -> bytes:
    return msg(b"K", struct.pack("!ii", pid, secret))


def ready(status: str) -> bytes:
    return msg(b"Z", status.encode())


def notification_response(pid: int, channel: str, payload: str) -> bytes:
    """NotificationResponse: a NOTIFY on a channel the session listens on."""
    return msg(b"A", struct.pack("!i", pid) + cstr(channel) + cstr(payload))


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


def format_code(codes: Sequence[int], i: int) -> int:
    """Value i's format in a Bind message's format codes: none (all text), one for all,
    or one each."""
    return codes[i] if i < len(codes) else (codes[0] if len(codes) == 1 else 0)


def row_description(fields: list[Any], formats: list[int]) -> bytes:
    """fields: objects with .name and .type (ColumnType)."""
    parts = [struct.pack("!h", len(fields))]
    for i, f in enumerate(fields):
        fmt = format_code(formats, i)
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


def data_rows(columns: Sequence[pa.Array], n: int) -> bytes:
    """The DataRow messages of `n` rows given column-wise, each column a binary array of
    its values' encoded bytes (NULL: length -1), as one buffer: the same bytes as
    `data_row` per row, assembled by numpy scatters instead of per-value Python."""
    sizes = np.full(n, 7, dtype=np.int64)  # type byte, length word, column count
    parts = []
    for col in columns:
        valid = (
            col.is_valid().to_numpy(zero_copy_only=False)
            if col.null_count
            else np.ones(n, dtype=bool)
        )
        wide = pa.types.is_large_binary(col.type)
        offs = np.frombuffer(col.buffers()[1], dtype=np.int64 if wide else np.int32)
        offs = offs[col.offset : col.offset + n + 1].astype(np.int64)
        data = col.buffers()[2]
        lens = np.where(valid, offs[1:] - offs[:-1], 0)
        parts.append((sizes.copy(), offs[:-1], lens, valid, data))
        sizes += 4 + lens
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=starts[1:])
    out = np.empty(int(starts[-1]), dtype=np.uint8)
    row = starts[:-1]
    out[row] = ord("D")
    _put(out, row + 1, (sizes - 1).astype(">i4"))
    _put(out, row + 5, np.full(n, len(columns), dtype=">i2"))
    for at, src, lens, valid, data in parts:
        field = row + at
        _put(out, field, np.where(valid, lens, -1).astype(">i4"))
        total = int(lens.sum())
        if total:
            # byte j of a value goes from src + j to field + 4 + j
            take = np.arange(total, dtype=np.int64) + np.repeat(src - np.cumsum(lens) + lens, lens)
            out[take + np.repeat(field + 4 - src, lens)] = np.frombuffer(data, np.uint8)[take]
    return out.tobytes()


def _put(out: np.ndarray, at: np.ndarray, values: np.ndarray) -> None:
    """Write fixed-width `values` (big-endian numpy scalars) at byte positions `at`."""
    width = values.dtype.itemsize
    raw = np.ascontiguousarray(values).view(np.uint8).reshape(-1, width)
    out[at[:, None] + np.arange(width)] = raw


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
    if getattr(err, "internal_position", None):
        parts.append(b"p" + cstr(str(err.internal_position)))
        parts.append(b"q" + cstr(err.internal_query or ""))
    if getattr(err, "context", None):
        parts.append(b"W" + cstr(err.context))
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
