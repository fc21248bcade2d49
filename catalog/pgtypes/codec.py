"""What every codec module shares: the codec signatures, PostgreSQL's integer limits,
big-endian packers, and the errors for malformed input.

An encoder turns a non-NULL Python value into its wire bytes; a decoder turns a
parameter's wire form (str or bytes for text, bytes for binary) into a Python value.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from headwater.errors import InvalidTextRepresentation, SQLError, utf8

Encoder = Callable[[Any], bytes]
Decoder = Callable[[Any], Any]

INT32_MAX, INT32_MIN = 2**31 - 1, -(2**31)
INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)

I16, I32, I64, U32 = (struct.Struct(f) for f in (">h", ">i", ">q", ">I"))
F4, F8 = struct.Struct(">f"), struct.Struct(">d")


def invalid_syntax(type_name: str, s: str) -> SQLError:
    return InvalidTextRepresentation(f'invalid input syntax for type {type_name}: "{s}"')


def as_str(v: Any) -> str:
    if type(v) is str:
        return v
    return utf8(bytes(v))


WHITESPACE = " \t\n\r\f\v"


def bad_binary(type_name: str) -> SQLError:
    return SQLError(f"incorrect binary data format for type {type_name}", "22P03")


def fixed_recv(st: struct.Struct, type_name: str) -> Decoder:
    size, unpack = st.size, st.unpack

    def dec(v: Any) -> Any:
        if len(v) != size:
            raise bad_binary(type_name)
        return unpack(v)[0]

    return dec
