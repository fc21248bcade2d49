"""bit and bit varying: DuckDB's BIT values as PostgreSQL prints and sends them.

DuckDB hands a BIT over as bytes: the first byte counts the padding bits that open the
second byte, then the bits, most significant first (B'10001' is b'\\x03\\xf1')."""

from __future__ import annotations

import struct
from typing import Any

from headwater.catalog.pgtypes.codec import as_str

from headwater.errors import InvalidTextRepresentation

_I32 = struct.Struct("!i")


def _bits(v: Any) -> str:
    raw = bytes(v)
    if not raw:
        return ""
    return "".join(f"{b:08b}" for b in raw[1:])[raw[0] :]


def bit_text(v: Any) -> bytes:
    return _bits(v).encode("ascii")


def bit_bin(v: Any) -> bytes:
    """varbit_send: the length in bits, then the bits left-aligned, zero-padded."""
    bits = _bits(v)
    pad = -len(bits) % 8
    data = int(bits + "0" * pad, 2).to_bytes((len(bits) + pad) // 8, "big") if bits else b""
    return _I32.pack(len(bits)) + data


def bit_in(v: Any) -> bytes:
    """'10001' -> DuckDB's BIT bytes."""
    s = as_str(v)
    if any(c not in "01" for c in s):
        bad = next(c for c in s if c not in "01")
        raise InvalidTextRepresentation(f'"{bad}" is not a valid binary digit')
    pad = -len(s) % 8
    if not s:
        return b"\x00"
    padded = "1" * pad + s
    return bytes([pad]) + int(padded, 2).to_bytes(len(padded) // 8, "big")


def bit_recv(v: Any) -> bytes:
    raw = bytes(v)
    (n,) = _I32.unpack_from(raw)
    bits = "".join(f"{b:08b}" for b in raw[4:])[:n]
    return bit_in(bits)
