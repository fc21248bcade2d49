"""The string types: text, varchar(n), char(n) (bpchar), name, "char" and unknown.

char(n) values are kept without trailing blanks (PostgreSQL ignores them in
comparisons, length() and casts to text); the encoder pads them back to n.
"""

from __future__ import annotations

import json as _json
from collections.abc import Callable
from typing import Any

from headwater.catalog.pgtypes.codec import Decoder, Encoder, as_str
from headwater.catalog.types import ColumnType

from headwater.errors import SQLError, StringTooLong


def _str_fallback(v: Any) -> str:
    """Text of a value DuckDB gave for a text-typed column that is not a str."""
    if isinstance(v, str):
        return v
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return record_text(v)
    if isinstance(v, list):
        return _json.dumps(v, ensure_ascii=False, default=str)
    return str(v)


_RECORD_QUOTE = frozenset('"\\(),')


def record_text(v: dict[str, Any]) -> str:
    """A record (DuckDB's struct) as PostgreSQL shows it: (1,,"x y") -- NULL fields empty,
    fields quoted when empty or holding blanks, quotes, backslashes, commas or parens."""
    if list(v) == ["high", "low"] and all(isinstance(p, dict) for p in v.values()):
        return f"{record_text(v['high'])},{record_text(v['low'])}"  # a box: (1,1),(0,0)
    parts = []
    for x in v.values():
        if x is None:
            parts.append("")
            continue
        if isinstance(x, bool):
            t = "t" if x else "f"
        elif isinstance(x, float):
            from headwater.catalog.pgtypes.floats import _float8_shortest

            t = _float8_shortest(x).decode()
        else:
            t = _str_fallback(x)
        if t == "" or any(c in _RECORD_QUOTE or c.isspace() for c in t):
            t = '"' + t.replace("\\", "\\\\").replace('"', '""') + '"'
        parts.append(t)
    return f"({','.join(parts)})"


def string_out(v: Any) -> bytes:
    try:
        return v.encode()
    except AttributeError:
        return _str_fallback(v).encode()


def bpchar_out(ct: ColumnType) -> Encoder:
    n = ct.length
    if n is None:
        return string_out

    def enc(v: Any) -> bytes:
        if type(v) is not str:
            v = _str_fallback(v)
        return (v.ljust(n) if len(v) < n else v).encode()

    return enc


def string_in(v: Any) -> str:
    """Text as a value of a string type: PostgreSQL strings cannot hold NUL."""
    s = v if type(v) is str else as_str(v)
    if "\x00" in s:
        raise SQLError('invalid byte sequence for encoding "UTF8": 0x00', "22021")
    return s


def _check_length(ct: ColumnType, type_name: str) -> Callable[[str], str]:
    n = ct.length
    if n is None:
        return lambda s: s

    def check(s: str) -> str:
        if len(s) > n:
            if s[n:].strip(" "):
                raise StringTooLong(f"value too long for type {type_name}({n})")
            s = s[:n]  # only blanks beyond n: silently truncated, as in PostgreSQL
        return s

    return check


def varchar_in(ct: ColumnType) -> Decoder:
    check = _check_length(ct, "character varying")
    return lambda v: check(string_in(v))


def bpchar_in(ct: ColumnType) -> Decoder:
    check = _check_length(ct, "character")
    if ct.length is None:
        return string_in
    return lambda v: check(string_in(v)).rstrip(" ")


def name_in(v: Any) -> str:
    s = string_in(v)
    b = s.encode()
    return b[:63].decode("utf-8", "ignore") if len(b) > 63 else s  # NAMEDATALEN - 1


def char_in(v: Any) -> str:
    s = as_str(v)
    return s[:1]


def char_bin(v: Any) -> bytes:
    return v.encode()[:1] if type(v) is str else bytes(v)[:1]


def char_recv(v: Any) -> str:
    return bytes(v)[:1].decode("utf-8", "replace")


def string_recv(v: Any) -> str:
    return string_in(bytes(v))


def via_text(dec: Decoder) -> Decoder:
    """Types whose binary form is their text (varchar, json...): decode, then check."""
    return lambda v: dec(string_recv(v))
