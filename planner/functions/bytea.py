"""PostgreSQL 15's bytea: '\\x...' and escape-format literals (decoded at plan time with
catalog/pgtypes/bytea.py), and the binary string functions DuckDB lacks for BLOB:
length, bit_length, octet_length, trim, substring, overlay, position, get/set_bit,
get/set_byte, bit_count, sha224..sha512, encode/decode, convert/convert_from/convert_to.

A call is taken for the bytea form when its first argument is visibly bytea (a bytea
literal or cast, or one of these functions' bytea results)."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pglast.ast as A
from headwater.catalog.pgtypes.bytea import bytea_in
from headwater.planner.functions import udf
from headwater.planner.functions.nodes import call, cast, column_type, const, text_of

from headwater.errors import SQLError

_BYTEA_RESULTS = frozenset(
    """from_hex hw_bytea_substr hw_bytea_overlay hw_bytea_trim hw_set_bit hw_set_byte
    hw_sha224 hw_sha256 hw_sha384 hw_sha512 hw_decode hw_convert hw_convert_to
    digest hmac gen_random_bytes hw_digest hw_hmac hw_gen_random_bytes""".split()
)


def _names(node: Any) -> list[str]:
    return [n.sval.lower() for n in node if isinstance(n, A.String)]


def is_bytea(node: Any) -> bool:
    if column_type(node) == "bytea":
        return True
    if isinstance(node, A.TypeCast):
        return _names(node.typeName.names)[-1:] == ["bytea"]
    if isinstance(node, A.FuncCall):
        return _names(node.funcname)[-1:][0] in _BYTEA_RESULTS if node.funcname else False
    return False


def typed_literal(tc: A.TypeCast) -> Any | None:
    """`'\\x1234'::bytea`, `E'\\\\000'::bytea` -> from_hex('1234') (a BLOB)."""
    text = text_of(tc.arg)
    if text is None or _names(tc.typeName.names)[-1:] != ["bytea"] or tc.typeName.arrayBounds:
        return None
    try:
        value = bytea_in(text)
    except SQLError:
        return None  # the error comes at run time, from the cast as before
    return call("from_hex", const(value.hex()))


def _bytes_arg(node: Any) -> Any:
    """An unknown-typed string constant taken as bytea input."""
    text = text_of(node)
    if text is not None and not is_bytea(node):
        try:
            return call("from_hex", const(bytea_in(text).hex()))
        except SQLError:
            return node
    return node


def _err(sqlstate: str, message: str) -> ValueError:
    return ValueError(f"[SQLSTATE {sqlstate}] {message}")


def _substr(b: bytes | None, start: int | None, count: int | None) -> bytes | None:
    if b is None or start is None:  # (not strict: a NULL count is "to the end")
        return None
    if count is not None and count < 0:
        raise _err("22011", "negative substring length not allowed")
    first = max(start, 1)
    end = len(b) + 1 if count is None else start + count
    return b[first - 1 : max(end - 1, first - 1)]


def _overlay(
    b: bytes | None, placing: bytes | None, start: int | None, count: int | None
) -> bytes | None:
    if b is None or placing is None or start is None:
        return None
    if count is None:
        count = len(placing)
    return _substr(b, 1, start - 1) + placing + _substr(b, start + count, None)


def _position(haystack: bytes, needle: bytes) -> int:
    return haystack.find(needle) + 1


def _trim(b: bytes, chars: bytes, mode: str) -> bytes:
    if mode in ("both", "leading"):
        b = b.lstrip(chars)
    if mode in ("both", "trailing"):
        b = b.rstrip(chars)
    return b


def _check(n: int, size: int) -> None:
    if not 0 <= n < size:
        raise _err("2202E", f"index {n} out of valid range, 0..{size - 1}")


def _get_bit(b: bytes, n: int) -> int:
    _check(n, len(b) * 8)
    return (b[n // 8] >> (n % 8)) & 1


def _set_bit(b: bytes, n: int, v: int) -> bytes:
    _check(n, len(b) * 8)
    if v not in (0, 1):
        raise _err("22023", "new bit must be 0 or 1")
    out = bytearray(b)
    out[n // 8] = (out[n // 8] & ~(1 << (n % 8))) | (v << (n % 8))
    return bytes(out)


def _get_byte(b: bytes, n: int) -> int:
    _check(n, len(b))
    return b[n]


def _set_byte(b: bytes, n: int, v: int) -> bytes:
    _check(n, len(b))
    out = bytearray(b)
    out[n] = v & 0xFF
    return bytes(out)


def _bit_count(b: bytes) -> int:
    return sum(bin(x).count("1") for x in b)


def _encode(b: bytes, fmt: str) -> str:
    f = fmt.lower()
    if f == "hex":
        return b.hex()
    if f == "base64":
        text = base64.b64encode(b).decode()
        return "\n".join(text[i : i + 76] for i in range(0, len(text), 76))
    if f == "escape":
        out = []
        for x in b:
            if x == 0x5C:
                out.append("\\\\")
            elif x == 0 or x >= 0x80:
                out.append(f"\\{x:03o}")
            else:
                out.append(chr(x))
        return "".join(out)
    raise _err("22023", f'unrecognized encoding: "{fmt}"')


def _decode(s: str, fmt: str) -> bytes:
    f = fmt.lower()
    if f == "hex":
        digits = "".join(s.split())
        for c in digits:
            if c not in "0123456789abcdefABCDEF":
                raise _err("22023", f'invalid hexadecimal digit: "{c}"')
        if len(digits) % 2:
            raise _err("22023", "invalid hexadecimal data: odd number of digits")
        return bytes.fromhex(digits)
    if f == "base64":
        try:
            return base64.b64decode("".join(s.split()), validate=True)
        except ValueError:
            raise _err("22023", "invalid base64 end sequence") from None
    if f == "escape":
        try:
            return bytea_in(s)
        except SQLError as e:
            raise _err(e.sqlstate, e.message) from None
    raise _err("22023", f'unrecognized encoding: "{fmt}"')


def _codec(name: str) -> str:
    n = name.lower().replace("_", "").replace("-", "")
    return {"utf8": "utf-8", "sqlascii": "ascii", "latin1": "latin-1"}.get(n, n)


def _convert(b: bytes, src: str, dst: str) -> bytes:
    try:
        return b.decode(_codec(src)).encode(_codec(dst))
    except LookupError:
        raise _err("22023", f'invalid encoding name "{src}"') from None
    except UnicodeError:
        raise _err("22021", f'invalid byte sequence for encoding "{src.upper()}"') from None


def _convert_from(b: bytes, src: str) -> str:
    return _convert(b, src, "utf8").decode()


def _convert_to(s: str, dst: str) -> bytes:
    return _convert(s.encode(), "utf8", dst)


def _hash(name: str) -> Any:
    return lambda b: hashlib.new(name, b).digest()


def _on_bytea(rewrite: Any) -> Any:
    """The rewrite, for a call whose first argument is bytea."""
    return lambda args: rewrite(args) if args and is_bytea(args[0]) else None


def _opt(args: list[Any], i: int) -> Any:
    return args[i] if len(args) > i else cast(const(None), "int4")


def _int(node: Any) -> Any:
    return cast(node, "int4")


REWRITES = {
    "length": _on_bytea(
        lambda a: (
            _int(call("octet_length", a[0]))
            if len(a) == 1
            else _int(call("length", call("hw_convert_from", a[0], cast(a[1], "text"))))
        )
    ),
    "octet_length": _on_bytea(lambda a: call("hw_bytea_length", a[0])),
    "bit_length": _on_bytea(lambda a: call("hw_bytea_bit_length", a[0])),
    "btrim": _on_bytea(lambda a: call("hw_bytea_trim", a[0], _bytes_arg(a[1]), const("both"))),
    "ltrim": _on_bytea(lambda a: call("hw_bytea_trim", a[0], _bytes_arg(a[1]), const("leading"))),
    "rtrim": _on_bytea(lambda a: call("hw_bytea_trim", a[0], _bytes_arg(a[1]), const("trailing"))),
    "substring": _on_bytea(lambda a: call("hw_bytea_substr", a[0], a[1], _opt(a, 2))),
    "substr": _on_bytea(lambda a: call("hw_bytea_substr", a[0], a[1], _opt(a, 2))),
    "overlay": _on_bytea(
        lambda a: call("hw_bytea_overlay", a[0], _bytes_arg(a[1]), a[2], _opt(a, 3))
    ),
    "position": lambda a: (
        call("hw_bytea_position", a[0], _bytes_arg(a[1]))
        if len(a) == 2 and (is_bytea(a[0]) or is_bytea(a[1]))
        else None
    ),
    "get_bit": _on_bytea(lambda a: call("hw_get_bit", a[0], a[1])),
    "set_bit": _on_bytea(lambda a: call("hw_set_bit", *a)),
    "get_byte": _on_bytea(lambda a: call("hw_get_byte", a[0], a[1])),
    "set_byte": _on_bytea(lambda a: call("hw_set_byte", *a)),
    "bit_count": _on_bytea(lambda a: call("hw_bit_count", a[0])),
    "md5": _on_bytea(lambda a: call("hw_bytea_md5", a[0])),
    "sha224": lambda a: call("hw_sha224", _bytes_arg(a[0])),
    "sha256": lambda a: call("hw_sha256", _bytes_arg(a[0])),
    "sha384": lambda a: call("hw_sha384", _bytes_arg(a[0])),
    "sha512": lambda a: call("hw_sha512", _bytes_arg(a[0])),
    "encode": lambda a: call("hw_encode", _bytes_arg(a[0]), cast(a[1], "text")),
    "decode": lambda a: (
        call("hw_decode", cast(a[0], "text"), cast(a[1], "text")) if len(a) == 2 else None
    ),
    "convert_from": lambda a: call("hw_convert_from", _bytes_arg(a[0]), cast(a[1], "text")),
    "convert_to": lambda a: call("hw_convert_to", cast(a[0], "text"), cast(a[1], "text")),
    "convert": lambda a: call(
        "hw_convert", _bytes_arg(a[0]), cast(a[1], "text"), cast(a[2], "text")
    ),
}


def install(db: Any) -> None:
    B, I, V = "BLOB", "INTEGER", "VARCHAR"  # noqa: E741
    db.execute(
        "CREATE OR REPLACE MACRO hw_bytea_bit_length(b) AS CAST(octet_length(b) * 8 AS INTEGER)"
    )
    db.execute("CREATE OR REPLACE MACRO hw_bytea_length(b) AS CAST(octet_length(b) AS INTEGER)")
    db.execute("CREATE OR REPLACE MACRO hw_bytea_md5(b) AS md5(b)")
    reg = udf.register
    reg(db, "hw_bytea_substr", _substr, [B, I, I], B, strict=False)
    reg(db, "hw_bytea_overlay", _overlay, [B, B, I, I], B, strict=False)
    reg(db, "hw_bytea_position", _position, [B, B], I)
    reg(db, "hw_bytea_trim", _trim, [B, B, V], B)
    reg(db, "hw_get_bit", _get_bit, [B, I], I)
    reg(db, "hw_set_bit", _set_bit, [B, I, I], B)
    reg(db, "hw_get_byte", _get_byte, [B, I], I)
    reg(db, "hw_set_byte", _set_byte, [B, I, I], B)
    reg(db, "hw_bit_count", _bit_count, [B], "BIGINT")
    for n in ("sha224", "sha256", "sha384", "sha512"):
        reg(db, f"hw_{n}", _hash(n), [B], B)
    reg(db, "hw_encode", _encode, [B, V], V)
    reg(db, "hw_decode", _decode, [V, V], B)
    reg(db, "hw_convert", _convert, [B, V, V], B)
    reg(db, "hw_convert_from", _convert_from, [B, V], V)
    reg(db, "hw_convert_to", _convert_to, [V, V], B)
