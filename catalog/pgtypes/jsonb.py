"""json (kept as written, validated) and jsonb (normalised as PostgreSQL prints it:
keys deduplicated and sorted, numbers as numerics, its own spacing)."""

from __future__ import annotations

import json as _json
import re
from decimal import Decimal
from typing import Any

from headwater.catalog.pgtypes.numeric import to_decimal
from headwater.catalog.pgtypes.text import string_in, string_recv

from headwater.errors import InvalidTextRepresentation, SQLError


def jsonb_text(v: Any) -> bytes:
    if type(v) is str:
        return v.encode()
    return _jsonb_dump(v).encode()  # a parsed value (dict/list/...) from somewhere else


def jsonb_bin(v: Any) -> bytes:
    return b"\x01" + jsonb_text(v)


def _reject_constant(c: str) -> Any:
    raise ValueError(f'Token "{c}" is invalid.')


_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(v: Any) -> bool:
    """Python decodes an unpaired \\ud800 escape to a lone surrogate; PostgreSQL refuses."""
    if isinstance(v, str):
        return _SURROGATE.search(v) is not None
    if isinstance(v, dict):
        return any(_lone_surrogate(k) or _lone_surrogate(x) for k, x in v.items())
    if isinstance(v, list):
        return any(_lone_surrogate(x) for x in v)
    return False


def _json_load(s: str, jsonb: bool, **kw: Any) -> Any:
    try:
        v = _json.loads(s, parse_constant=_reject_constant, **kw)
    except (ValueError, RecursionError) as e:
        msg = e.msg if isinstance(e, _json.JSONDecodeError) else str(e)
        raise InvalidTextRepresentation("invalid input syntax for type json", detail=msg) from None
    if jsonb and "\\u" in s and _lone_surrogate(v):  # json keeps the escape as text
        raise InvalidTextRepresentation(
            "invalid input syntax for type json",
            detail="Unicode low surrogate must follow a high surrogate.",
        )
    return v


def json_in(v: Any) -> str:
    s = string_in(v)
    _json_load(s, False, parse_float=str, parse_int=str)  # json keeps the text as written
    return s


def _jsonb_key(k: str) -> tuple[int, bytes]:
    b = k.encode()
    return len(b), b  # jsonb orders keys by length, then bytewise


_encode_json_str = _json.encoder.encode_basestring  # type: ignore[attr-defined]


def _jsonb_string(s: str) -> str:
    if "\x00" in s:
        raise SQLError(
            "unsupported Unicode escape sequence",
            "22P05",
            detail="\\u0000 cannot be converted to text.",
        )
    return _encode_json_str(s)


def _jsonb_dump(v: Any) -> str:
    if isinstance(v, str):
        return _jsonb_string(v)
    if isinstance(v, dict):
        items = sorted(v.items(), key=lambda kv: _jsonb_key(kv[0]))
        return "{" + ", ".join(_jsonb_string(k) + ": " + _jsonb_dump(x) for k, x in items) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_jsonb_dump(x) for x in v) + "]"
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, Decimal):
        s = format(v, "f")  # jsonb numbers are numerics: no exponent, scale kept
        return s[1:] if s[0] == "-" and not v else s
    if isinstance(v, float):
        return format(to_decimal(v), "f")
    if isinstance(v, int):
        return str(v)
    return _jsonb_string(str(v))


def normalize_jsonb(text: str) -> str:
    """The text PostgreSQL prints for `text::jsonb`: validated, keys deduplicated (the
    last wins) and sorted by length then bytes, numbers as numerics, `{"a": 1}` spacing."""
    # Decimal for ints too: int() refuses more than 4300 digits, numeric does not
    return _jsonb_dump(_json_load(text, True, parse_float=Decimal, parse_int=Decimal))


def jsonb_in(v: Any) -> str:
    return normalize_jsonb(string_in(v))


def jsonb_recv(v: Any) -> str:
    v = bytes(v)
    if not v or v[0] != 1:
        raise SQLError(f"unsupported jsonb version number {v[0] if v else 0}", "22P03")
    return normalize_jsonb(string_recv(v[1:]))


def jsonb_load(text: str) -> Any:
    """A json/jsonb text as Python values (numbers as Decimal), for jsonb functions."""
    return _json_load(text, True, parse_float=Decimal, parse_int=Decimal)


def jsonb_dump(v: Any) -> str:
    """A Python value as PostgreSQL prints it as jsonb."""
    return _jsonb_dump(v)
