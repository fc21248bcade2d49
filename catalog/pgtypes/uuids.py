"""uuid: PostgreSQL's input forms (braces, hyphens anywhere in groups of four)."""

from __future__ import annotations

import re
import uuid as _uuid
from typing import Any

from headwater.catalog.pgtypes.codec import as_str, bad_binary, invalid_syntax


def uuid_text(v: Any) -> bytes:
    if type(v) is str and len(v) == 36 and v.islower():
        return v.encode()
    return str(v if type(v) is _uuid.UUID else _uuid.UUID(str(v))).encode()


def uuid_bin(v: Any) -> bytes:
    if type(v) is _uuid.UUID:
        return v.bytes
    if type(v) is str and len(v) == 36:
        return bytes.fromhex(v.replace("-", ""))  # DuckDB's canonical text; UUID() is slow
    return _uuid.UUID(str(v)).bytes


_UUID_RE = re.compile(r"(\{)?(?:[0-9a-fA-F]{4}-?){7}[0-9a-fA-F]{4}(?(1)\})")


def uuid_in(v: Any) -> _uuid.UUID:
    s = as_str(v)
    if not _UUID_RE.fullmatch(s):  # uuid.UUID also takes 'urn:uuid:' and stray hyphens
        raise invalid_syntax("uuid", s)
    return _uuid.UUID(s)


def uuid_recv(v: Any) -> _uuid.UUID:
    if len(v) != 16:
        raise bad_binary("uuid")
    return _uuid.UUID(bytes=bytes(v))
