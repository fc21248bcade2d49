"""boolean, smallint, integer, bigint, oid and the int2vector/oidvector system types
(asyncpg keeps bool with the integers too)."""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from typing import Any

from headwater.catalog.pgtypes.codec import (
    I16,
    I32,
    U32,
    WHITESPACE,
    Decoder,
    as_str,
    bad_binary,
    invalid_syntax,
)

from headwater.errors import NumericOutOfRange


def bool_text(v: Any) -> bytes:
    return b"t" if v else b"f"


def int_text(v: Any) -> bytes:
    return b"%d" % v


def bool_bin(v: Any) -> bytes:
    return b"\x01" if v else b"\x00"


def vector_text(v: Any) -> bytes:
    return " ".join(str(x) for x in v).encode()


def int2vector_bin(v: Any) -> bytes:
    return _vector_bin(v, 21, I16.pack)


def oidvector_bin(v: Any) -> bytes:
    return _vector_bin(v, 26, U32.pack)


def _vector_bin(v: Any, elem_oid: int, pack: Callable[[int], bytes]) -> bytes:
    """int2vector/oidvector send: a one-dimensional array with lower bound 0."""
    if not v:
        return struct.pack(">iiI", 0, 0, elem_oid)
    head = struct.pack(">iiIii", 1, 0, elem_oid, len(v), 0)
    return head + b"".join(I32.pack(len(b)) + b for b in (pack(x) for x in v))


_BOOL_WORDS: dict[str, bool] = {}
for _word, _val in (("true", True), ("false", False), ("yes", True), ("no", False)):
    for _i in range(1, len(_word) + 1):
        _BOOL_WORDS[_word[:_i]] = _val
_BOOL_WORDS.update({"on": True, "of": False, "off": False, "1": True, "0": False})


def bool_in(v: Any) -> bool:
    s = as_str(v)
    r = _BOOL_WORDS.get(s.strip(WHITESPACE).lower())
    if r is None:
        raise invalid_syntax("boolean", s)
    return r


_INT_RE = re.compile(r"[ \t\n\r\f\v]*[+-]?[0-9]+[ \t\n\r\f\v]*")


def int_in(type_name: str, lo: int, hi: int) -> Decoder:
    def dec(v: Any) -> int:
        s = v if type(v) is str else as_str(v)
        # int() alone would take '1_000' and non-ASCII digits
        if not ((s.isdigit() and s.isascii()) or _INT_RE.fullmatch(s)):
            raise invalid_syntax(type_name, s)
        n = int(s)
        if lo <= n <= hi:
            return n
        raise NumericOutOfRange(f'value "{s}" is out of range for type {type_name}')

    return dec


def oid_in(v: Any) -> int:
    s = as_str(v)
    if not _INT_RE.fullmatch(s):
        raise invalid_syntax("oid", s)
    n = int(s)
    if -(2**31) <= n < 0:
        return n + 2**32  # strtoul wraps negative input, so PostgreSQL does too
    if 0 <= n < 2**32:
        return n
    raise NumericOutOfRange(f'value "{s}" is out of range for type oid')


def bool_recv(v: Any) -> bool:
    if len(v) != 1:
        raise bad_binary("boolean")
    return v[0] != 0
