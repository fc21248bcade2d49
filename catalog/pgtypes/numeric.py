"""numeric: text and binary (base-10000) codecs, typmod rounding and overflow checks,
and the display scale PostgreSQL gives quotients (select_div_scale)."""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable
from decimal import ROUND_DOWN, ROUND_HALF_UP, Context, Decimal
from typing import Any

from headwater.catalog.pgtypes.codec import (
    WHITESPACE,
    Decoder,
    Encoder,
    as_str,
    bad_binary,
    invalid_syntax,
)
from headwater.catalog.types import ColumnType

from headwater.errors import NumericOutOfRange, SQLError, numeric_overflow

# Decimal arithmetic never rounds behind our back: numeric(1000, s) needs 1000+ digits.
_CTX = Context(prec=140_000, rounding=ROUND_HALF_UP, Emax=10**9, Emin=-(10**9))
_CTX_TRUNC = Context(prec=140_000, rounding=ROUND_DOWN, Emax=10**9, Emin=-(10**9))


def to_decimal(v: Any) -> Decimal:
    if isinstance(v, Decimal):
        return v
    if isinstance(v, float):
        return Decimal(repr(v)) if math.isfinite(v) else Decimal(v)
    return Decimal(v)


# -- numeric quotients --------------------------------------------------------
# PostgreSQL gives a numeric quotient (numeric division, avg of integers or numerics) a
# display scale of its own: at least 16 significant digits (select_div_scale). DuckDB's
# DECIMAL has one scale per column, so such results come as DECIMAL(37, s), exact at
# PostgreSQL's scale, and print at the scale PostgreSQL would have chosen (below).
QUOTIENT_PRECISION = 37
# 16 significant digits, 20 decimals below 1 (1/3 is 0.33333333333333333333); 24+
# decimals (below 0.0001) are cut to 20
QUOTIENT_SCALE = 20
# stddev/variance of integers and numerics (planner/pg_compat.py's hw_spread): quotients,
# but a zero is PostgreSQL's const_zero (no variance), printed 0, not 0.000...
SPREAD_PRECISION = 36
QUOTIENT_PRECISIONS = (QUOTIENT_PRECISION, SPREAD_PRECISION)


def _weight_first(v: Decimal) -> tuple[int, int]:
    """PostgreSQL's base-10000 weight and first digit of |v| (0, 0 for zero)."""
    if not v:
        return 0, 0
    a = abs(v)
    w = a.adjusted() // 4
    return w, int(a.scaleb(-4 * w, _CTX))


def numeric_div_scale(a: Decimal, b: Decimal, ascale: int = 0, bscale: int = 0) -> int:
    """select_div_scale: the display scale of a / b in PostgreSQL."""
    w1, f1 = _weight_first(a)
    w2, f2 = _weight_first(b)
    qweight = w1 - w2 - (1 if f1 <= f2 else 0)
    return min(max(16 - 4 * qweight, ascale, bscale, 0), 1000)


def quotient_text(v: Decimal, stored: int, spread: bool = False) -> str:
    """A quotient's text at PostgreSQL's display scale (`spread`: a zero is 0)."""
    if not v.is_finite():
        return format(v, "f")
    if spread and not v:
        return "0"
    s = format(v.quantize(Decimal(1).scaleb(-quotient_scale(v, stored)), context=_CTX), "f")
    return s[1:] if s[0] == "-" and not v else s


def quotient_scale(v: Decimal, stored: int) -> int:
    """The display scale of a quotient PostgreSQL computed as `v`, found from the value
    alone: exact unless its first base-10000 digit is 1 (the dividend and divisor then
    may or may not have had equal first digits), where 4 more digits are shown only if
    `v` has digits there or is a power of 10000 (x / x); at most `stored`."""
    if not v:
        return min(20, stored)
    w, f = _weight_first(v)
    r = 16 - 4 * w
    if f == 1:
        a = abs(v)
        if (r >= 0 and a != a.quantize(Decimal(1).scaleb(-r), context=_CTX)) or (
            a == Decimal(10000) ** w
        ):
            r += 4
    return max(0, min(r, stored))


def _numeric_str(ct: ColumnType) -> Callable[[Any], str]:
    """Text of a numeric value: at the column's scale, or trimmed when unconstrained."""
    ps = ct.precision_scale
    if ps is not None and ps[0] in QUOTIENT_PRECISIONS:
        stored, spread = ps[1], ps[0] == SPREAD_PRECISION

        def conv_quotient(v: Any) -> str:
            return quotient_text(v if type(v) is Decimal else to_decimal(v), stored, spread)

        return conv_quotient
    if ps is None:

        def conv(v: Any) -> str:
            if type(v) is not Decimal:
                v = to_decimal(v)
            s = format(v.normalize(_CTX), "f")  # trailing zeros gone, never an exponent
            return "0" if s == "-0" else s

        return conv

    scale = ps[1]
    quantum = Decimal(1).scaleb(-scale)

    def conv_scaled(v: Any) -> str:
        if type(v) is not Decimal:
            v = to_decimal(v)
        s = format(v, "f")
        dot = s.find(".")
        if (len(s) - dot - 1 if dot >= 0 else 0) != scale and v.is_finite():
            s = format(v.quantize(quantum, context=_CTX), "f")  # DuckDB gives it at scale
        if s[0] == "-" and not v:
            s = s[1:]
        return s

    return conv_scaled


_NUMERIC_HEAD = struct.Struct(">hhHh")
_NUMERIC_NAN = _NUMERIC_HEAD.pack(0, 0, 0xC000, 0)
# PostgreSQL 15 reports dscale 32 for +-Infinity (its short-header bits leak into it).
_NUMERIC_PINF = _NUMERIC_HEAD.pack(0, 0, 0xD000, 32)
_NUMERIC_NINF = _NUMERIC_HEAD.pack(0, 0, 0xF000, 32)


_NUMERIC_FMT = [struct.Struct(f">hhHh{n}H") for n in range(64)]


def _numeric_send(s: str) -> bytes:
    """numeric_send of a plain decimal string (no exponent): base-10000 digit groups,
    leading and trailing zero groups dropped, weight = index of the first group."""
    if s[0] in "NI-" and not s[-1].isdigit():
        return _NUMERIC_NAN if s == "NaN" else _NUMERIC_NINF if s[0] == "-" else _NUMERIC_PINF
    neg = s[0] == "-"
    ip, _, fp = (s[1:] if neg else s).partition(".")
    dscale = len(fp)
    ip = ip.lstrip("0")
    lead = -len(ip) % 4
    d = "0" * lead + ip + fp + "0" * (-dscale % 4)  # aligned on base-10000 groups
    weight = (len(ip) + lead) // 4 - 1
    rest = d.lstrip("0")
    if not rest:
        return _NUMERIC_HEAD.pack(0, 0, 0, dscale)
    skip = (len(d) - len(rest)) // 4
    d = d[skip * 4 :]
    trail = (len(d) - len(d.rstrip("0"))) // 4
    if trail:
        d = d[: len(d) - trail * 4]
    n = len(d) // 4
    groups = [int(d[i : i + 4]) for i in range(0, len(d), 4)]
    fmt = _NUMERIC_FMT[n] if n < 64 else struct.Struct(f">hhHh{n}H")
    return fmt.pack(n, weight - skip, 0x4000 if neg else 0, dscale, *groups)


_NUMERIC_RE = re.compile(
    r"[ \t\n\r\f\v]*([+-]?)([0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE]([+-]?[0-9]+))?"
    r"[ \t\n\r\f\v]*"
)
_NUMERIC_WORDS = {
    "nan": Decimal("NaN"),
    "infinity": Decimal("Infinity"),
    "+infinity": Decimal("Infinity"),
    "-infinity": Decimal("-Infinity"),
    "inf": Decimal("Infinity"),
    "+inf": Decimal("Infinity"),
    "-inf": Decimal("-Infinity"),
}


def _numeric_typmod(ct: ColumnType) -> Callable[[Decimal], Decimal]:
    """PostgreSQL's apply_typmod: round half away from zero to the scale, check precision."""
    ps = ct.precision_scale
    if ps is None:
        return lambda d: d
    precision, scale = ps
    quantum = Decimal(1).scaleb(-scale)
    limit = Decimal(10) ** (precision - scale)

    def apply(d: Decimal) -> Decimal:
        if d.is_nan():
            return d
        if d.is_infinite():
            raise NumericOutOfRange(
                "numeric field overflow",
                detail=f"A field with precision {precision}, scale {scale} cannot hold an "
                "infinite value.",
            )
        d = d.quantize(quantum, context=_CTX)
        if abs(d) >= limit:
            raise numeric_overflow(precision, scale)
        return d

    return apply


def numeric_text(ct: ColumnType) -> Encoder:
    conv = _numeric_str(ct)
    return lambda v: conv(v).encode()


def numeric_bin(ct: ColumnType) -> Encoder:
    conv = _numeric_str(ct)
    return lambda v: _numeric_send(conv(v))


def numeric_in(ct: ColumnType) -> Decoder:
    typmod = _numeric_typmod(ct)

    def dec(v: Any) -> Decimal:
        s = as_str(v)
        m = _NUMERIC_RE.fullmatch(s)
        if m is None:
            special = _NUMERIC_WORDS.get(s.strip(WHITESPACE).lower())
            if special is None:
                raise invalid_syntax("numeric", s)
            return typmod(special)
        sign, digits, exp = m.groups()
        if exp and abs(int(exp)) > 200_000:
            raise NumericOutOfRange("value overflows numeric format")
        d = Decimal(sign + digits + ("e" + exp if exp else ""))
        if d.as_tuple().exponent > 0:  # type: ignore[operator]
            d = d.quantize(Decimal(1), context=_CTX)  # 1e3 is 1000, never 1E+3
        if sign == "-" and not d:
            d = -d  # PostgreSQL has no negative zero
        return typmod(d)

    return dec


def numeric_recv(ct: ColumnType) -> Decoder:
    typmod = _numeric_typmod(ct)

    def dec(v: Any) -> Decimal:
        v = bytes(v)
        if len(v) < 8:
            raise bad_binary("numeric")
        ndigits, weight, sign, dscale = _NUMERIC_HEAD.unpack_from(v)
        if len(v) != 8 + 2 * ndigits or ndigits < 0:
            raise bad_binary("numeric")
        if sign == 0xC000:
            return typmod(Decimal("NaN"))
        if sign in (0xD000, 0xF000):
            return typmod(Decimal("Infinity" if sign == 0xD000 else "-Infinity"))
        if sign not in (0, 0x4000) or dscale < 0:
            raise SQLError('invalid sign in external "numeric" value', "22P03")
        coef = 0
        for dg in struct.unpack_from(f">{ndigits}H", v, 8):  # base-10000 digits
            if dg > 9999:
                raise SQLError('invalid digit in external "numeric" value', "22P03")
            coef = coef * 10000 + dg
        d = Decimal(f"{'-' if sign else ''}{coef}E{4 * (weight - ndigits + 1)}")
        # More digits than dscale shows are truncated away, as numeric_recv does.
        d = d.quantize(Decimal(1).scaleb(-dscale), context=_CTX_TRUNC)
        if not d and d.is_signed():
            d = -d
        return typmod(d)

    return dec
