"""bytea: hex or escape output (bytea_output), both input forms, raw binary."""

from __future__ import annotations

from typing import Any

from headwater.catalog.pgtypes.codec import Encoder, as_str
from headwater.catalog.pgtypes.session import SessionFormat

from headwater.errors import InvalidParameterValue, InvalidTextRepresentation

_BYTEA_ESCAPE = [
    ("\\\\" if b == 0x5C else chr(b) if 0x20 <= b < 0x7F else f"\\{b:03o}") for b in range(256)
]


def _bytea_escape(v: bytes) -> bytes:
    return "".join([_BYTEA_ESCAPE[b] for b in v]).encode("ascii")


def _bytea_hex(v: Any) -> bytes:
    return b"\\x" + v.hex().encode()  # bytes, bytearray, memoryview


def bytea_text(session: SessionFormat) -> Encoder:
    return _bytea_escape if session.bytea_output.lower() == "escape" else _bytea_hex


def bytea_bin(v: Any) -> bytes:
    return v if type(v) is bytes else bytes(v)


_HEX = frozenset("0123456789abcdefABCDEF")


def bytea_in(v: Any) -> bytes:
    s = as_str(v)
    if s.startswith("\\x"):
        body = s[2:]
        try:
            return bytes.fromhex(body)  # accepts whitespace between bytes, like hex_decode
        except ValueError:
            pass
        h = [c for c in body if c not in " \t\n\r"]
        for c in h:
            if c not in _HEX:
                raise InvalidParameterValue(f'invalid hexadecimal digit: "{c}"')
        raise InvalidParameterValue("invalid hexadecimal data: odd number of digits")
    if "\\" not in s:
        return s.encode()
    out = bytearray()
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c != "\\":
            out += c.encode()
            i += 1
        elif s[i + 1 : i + 2] == "\\":
            out.append(0x5C)
            i += 2
        elif i + 3 < n and s[i + 1] in "0123" and s[i + 2] in "01234567" and s[i + 3] in "01234567":
            out.append(int(s[i + 1 : i + 4], 8))
            i += 4
        else:
            raise InvalidTextRepresentation("invalid input syntax for type bytea")
    return bytes(out)
