"""Arrays (query results only): array_out and array_send, given the
element type's encoder."""

from __future__ import annotations

import re
import struct
from typing import Any

from headwater.catalog.pgtypes.codec import I32, Encoder

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
