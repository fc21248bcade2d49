"""Arrays: array_out and array_send given the element type's encoder, array_in and
array_recv (parameters) given its decoder. Values are Python lists, nested for each
further dimension (lower bounds other than 1 are not kept)."""

from __future__ import annotations

import re
import struct
from typing import Any

from headwater.catalog.pgtypes.codec import I32, U32, Decoder, Encoder, as_str, bad_binary

from headwater.errors import InvalidTextRepresentation, SQLError

_ARRAY_QUOTE = re.compile(rb'[{},"\\\s]')


def array_out(enc: Encoder) -> Encoder:
    """array_out: {a,b,NULL}, elements quoted when empty, NULL-like or holding a delimiter."""

    def item(x: Any) -> bytes:
        if x is None:
            return b"NULL"
        if isinstance(x, list):
            return b"{" + b",".join(item(y) for y in x) + b"}"
        s = enc(x)
        if not s or s.upper() == b"NULL" or _ARRAY_QUOTE.search(s):
            return b'"' + s.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'
        return s

    return lambda v: b"{" + b",".join(item(x) for x in v) + b"}"


def array_send(elem_oid: int, enc: Encoder) -> Encoder:
    """array_send: ndim, has-null, element oid, each dimension's bounds, the items (nested
    lists are the dimensions of a multidimensional array)."""

    def out(v: Any) -> bytes:
        if not v:
            return struct.pack(">iiI", 0, 0, elem_oid)
        dims = []
        level: Any = v
        while isinstance(level, list) and level:
            dims.append(len(level))
            level = level[0]
        flat: list[Any] = list(v)
        for _ in dims[1:]:
            flat = [y for x in flat for y in x]
        items = [None if x is None else enc(x) for x in flat]
        has_null = any(i is None for i in items)
        head = struct.pack(">iiI", len(dims), int(has_null), elem_oid)
        head += b"".join(struct.pack(">ii", n, 1) for n in dims)
        return head + b"".join(
            b"\xff\xff\xff\xff" if i is None else I32.pack(len(i)) + i for i in items
        )

    return out


def parse_array_literal(text: str) -> list[Any] | None:
    """The elements of PostgreSQL's array input syntax ('{1,"a b",NULL,{2}}'): strings,
    None for NULL, lists for sub-arrays; None if `text` is not such a literal (or has
    dimension decorations, which are left to DuckDB to refuse)."""
    pos = 0
    n = len(text)

    def skip_ws() -> None:
        nonlocal pos
        while pos < n and text[pos].isspace():
            pos += 1

    def parse_array() -> list[Any] | None:
        nonlocal pos
        pos += 1  # "{"
        out: list[Any] = []
        skip_ws()
        if pos < n and text[pos] == "}":
            pos += 1
            return out
        while True:
            skip_ws()
            if pos >= n:
                return None
            c = text[pos]
            if c == "{":
                sub = parse_array()
                if sub is None:
                    return None
                out.append(sub)
            elif c == '"':
                pos += 1
                buf = []
                while pos < n and text[pos] != '"':
                    if text[pos] == "\\":
                        pos += 1
                    if pos < n:
                        buf.append(text[pos])
                        pos += 1
                if pos >= n:
                    return None
                pos += 1
                out.append("".join(buf))
            else:
                buf, raw_end, quoted = [], 0, False
                while pos < n and text[pos] not in ',}{"':
                    if text[pos] == "\\":
                        pos += 1
                        if pos >= n:
                            return None
                        quoted = True
                        buf.append(text[pos])
                        raw_end = len(buf)
                    else:
                        buf.append(text[pos])
                        if not text[pos].isspace():
                            raw_end = len(buf)
                    pos += 1
                if pos < n and text[pos] in '{"':
                    return None
                word = "".join(buf[:raw_end])
                if not word:
                    return None
                out.append(None if word.upper() == "NULL" and not quoted else word)
            skip_ws()
            if pos >= n:
                return None
            if text[pos] == ",":
                pos += 1
                continue
            if text[pos] == "}":
                pos += 1
                return out
            return None

    skip_ws()
    if pos >= n or text[pos] != "{":
        return None
    elements = parse_array()
    skip_ws()
    return elements if elements is not None and pos == n else None


def _malformed(text: str, detail: str) -> SQLError:
    return InvalidTextRepresentation(f'malformed array literal: "{text}"', detail=detail)


def _rectangular(items: list[Any]) -> bool:
    """PostgreSQL's arrays are rectangular: sibling sub-arrays have the same shape and
    scalars never sit beside sub-arrays ('{{1,2},{3}}' and '{1,{2}}' are malformed)."""
    nested = [isinstance(x, list) for x in items]
    if not any(nested):
        return True
    if not all(nested) or len({_shape(x) for x in items}) != 1:
        return False
    return all(_rectangular(x) for x in items)


def _shape(items: list[Any]) -> tuple[int, ...]:
    return (len(items), *(_shape(items[0]) if items and isinstance(items[0], list) else ()))


def array_in(dec: Decoder) -> Decoder:
    """array_in: '{1,NULL,"a b",{2}}' into a list, each item read by the element's
    input function (its errors, e.g. 22P02 for '{1,x}' as integer[], are PostgreSQL's)."""

    def item(x: Any) -> Any:
        if x is None:
            return None
        if isinstance(x, list):
            return [item(y) for y in x]
        return dec(x)

    def parse(v: Any) -> list[Any]:
        text = as_str(v)
        elements = parse_array_literal(text)
        if elements is None:
            if not text.lstrip().startswith(("{", "[")):
                raise _malformed(text, 'Array value must start with "{" or dimension information.')
            raise _malformed(
                text,
                "Unexpected end of input."
                if text.count("{") > text.count("}")
                else "Unexpected array element.",
            )
        if not _rectangular(elements):
            raise _malformed(
                text, "Multidimensional arrays must have sub-arrays with matching dimensions."
            )
        return [item(x) for x in elements]

    return parse


def array_recv(elem_oid: int, elem_name: str, dec: Decoder) -> Decoder:
    """array_recv: ndim, has-null flag, element oid, (length, lower bound) per dimension,
    then each item as a length (-1: NULL) and the element's binary form."""

    def parse(v: Any) -> list[Any]:
        data = bytes(v)
        try:
            ndim, _flags, oid = (
                I32.unpack_from(data, 0)[0],
                I32.unpack_from(data, 4)[0],
                U32.unpack_from(data, 8)[0],
            )
            if ndim < 0 or ndim > 6:
                raise SQLError(
                    f"number of array dimensions ({ndim}) exceeds the maximum allowed (6)",
                    "54000",
                )
            if oid != elem_oid:
                raise SQLError(
                    f"binary data has array element type {oid} instead of expected "
                    f"{elem_oid} ({elem_name})",
                    "42804",
                )
            pos = 12
            dims = []
            for _ in range(ndim):
                dims.append(I32.unpack_from(data, pos)[0])
                pos += 8  # the lower bound is not kept
            if any(d < 0 for d in dims):
                raise bad_binary(elem_name + "[]")
            total = 1 if dims else 0
            for d in dims:
                total *= d
            flat: list[Any] = []
            for _ in range(total):
                size = I32.unpack_from(data, pos)[0]
                pos += 4
                if size == -1:
                    flat.append(None)
                    continue
                if size < 0 or pos + size > len(data):
                    raise bad_binary(elem_name + "[]")
                flat.append(dec(data[pos : pos + size]))
                pos += size
        except struct.error:
            raise bad_binary(elem_name + "[]") from None
        if pos != len(data):
            raise bad_binary(elem_name + "[]")
        for d in reversed(dims[1:]):  # innermost dimension first
            flat = [flat[i : i + d] for i in range(0, len(flat), d)]
        return flat

    return parse
