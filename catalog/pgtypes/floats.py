"""real and double precision: shortest round-trip output as PostgreSQL's Ryu prints
it (extra_float_digits > 0) or %g at 6/15 digits, input with PostgreSQL's range errors,
binary receive."""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from headwater.catalog.pgtypes.codec import (
    F4,
    WHITESPACE,
    Decoder,
    Encoder,
    as_str,
    bad_binary,
    invalid_syntax,
)

from headwater.errors import NumericOutOfRange


def _shortest_digits(r: str) -> tuple[str, int]:
    """(significant digits, decimal exponent of the first) from a float's repr."""
    mant, _, exp = r.partition("e")
    ip, _, fp = mant.partition(".")
    e = int(exp) if exp else 0
    if ip.strip("0"):
        digits = (ip.lstrip("0") + fp).rstrip("0")
        return digits or "0", e + len(ip.lstrip("0")) - 1
    stripped = fp.lstrip("0")
    return stripped.rstrip("0") or "0", e - (len(fp) - len(stripped)) - 1


def _fmt_shortest(neg: bool, digits: str, exp: int, fixed_below: int) -> str:
    """Ryu-style output as PostgreSQL prints it: fixed for -4 <= exp < fixed_below."""
    sign = "-" if neg else ""
    if -4 <= exp < fixed_below:
        if exp >= 0:
            ip, fp = digits[: exp + 1].ljust(exp + 1, "0"), digits[exp + 1 :]
        else:
            ip, fp = "0", "0" * (-exp - 1) + digits
        return sign + ip + ("." + fp if fp else "")
    mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{mant}e{'-' if exp < 0 else '+'}{abs(exp):02d}"


def _float_special(v: float) -> bytes:
    if v != v:
        return b"NaN"
    return b"Infinity" if v > 0 else b"-Infinity"


def _float8_shortest(v: float) -> bytes:
    a = abs(v)
    if 1e-4 <= a < 1e15 or a == 0.0:
        # repr uses fixed notation here, as PostgreSQL does; only '.0' differs.
        r = repr(v)
        return (r[:-2] if r.endswith(".0") else r).encode()
    if a == math.inf or v != v:
        return _float_special(v)
    digits, exp = _shortest_digits(repr(a))
    if a >= 9007199254740992.0:  # 2**53: only here can repr land exactly on a bound
        digits, exp = _strict_shortest(a, digits, exp)
    return _fmt_shortest(v < 0, digits, exp, 15).encode()


def _strictly_inside(r: str, a: float) -> bool:
    """Whether decimal r is strictly nearer to a (an integer-valued double >= 2**53) than
    to either neighbouring double. The midpoints are integers, so integers suffice."""
    mant, _, e = r.partition("e")
    digits = mant.replace(".", "")
    shift = int(e) - len(digits) + 1
    if shift < 0:
        return True  # r has a fraction: it cannot be an (integer) midpoint
    diff = int(digits) * 10**shift - int(a)
    if diff == 0:
        return True
    step = int(math.ulp(a)) if diff > 0 else int(a - math.nextafter(a, 0.0))
    return 2 * abs(diff) < step


def _strict_shortest(a: float, digits: str, exp: int) -> tuple[str, int]:
    """PostgreSQL's Ryu never picks a decimal exactly halfway to the next double (Python's
    repr may, when the tie would round back to even): then one more digit is needed."""
    r = f"{digits[0]}.{digits[1:] or '0'}e{exp}"
    n = len(digits)
    while not _strictly_inside(r, a) and n < 17:
        r = f"%.{n}e" % a
        n += 1
    mant, _, e = r.partition("e")
    return mant.replace(".", "").rstrip("0") or "0", int(e)


_F32 = struct.Struct("f")
_U32N = struct.Struct("I")
try:  # optional speed-up: numpy comes with pyarrow and pandas
    import numpy as _numpy

    _np_shortest: Callable[..., str] | None = _numpy.format_float_scientific
    _np_f32: Callable[[float], Any] = _numpy.float32
except ImportError:  # pragma: no cover
    _np_shortest, _np_f32 = None, float
_F32_FORMATS = tuple(f"%.{n}e" for n in range(9))


def _to_f32(v: float) -> float:
    return _F32.unpack(_F32.pack(v))[0]


def _float4_shortest(v: float) -> bytes:
    if v != v or v in (math.inf, -math.inf):
        return _float_special(v)
    if v == 0.0:
        return b"-0" if math.copysign(1.0, v) < 0 else b"0"
    f = _to_f32(abs(v))
    # The shortest decimal strictly inside f's rounding interval (at most 9 digits); like
    # PostgreSQL's Ryu it never takes a decimal exactly halfway to a neighbour. Halfway
    # points are doubles, and only from 2**23 on can one be short enough to be tried.
    # numpy's Dragon4 (C) finds the same digits except on such ties, so it goes first.
    best = _np_shortest(_np_f32(f), unique=True, trim="-") if _np_shortest else ""
    lo_mid = hi_mid = -1.0
    if f < 8388608.0 and best:
        return _fmt_f32_digits(v < 0, best)
    if f >= 8388608.0:
        b = _U32N.unpack(_F32.pack(f))[0]
        lo_mid = (f + _F32.unpack(_U32N.pack(b - 1))[0]) / 2
        hi_mid = (f + _F32.unpack(_U32N.pack(b + 1))[0]) / 2 if b < 0x7F7FFFFF else math.inf

    def reads_back(r: str) -> bool:
        x = float(r)
        if x == lo_mid:
            return Decimal(r) > Decimal(lo_mid)
        if x == hi_mid:
            return Decimal(r) < Decimal(hi_mid)
        return _to_f32(x) == f

    if best and reads_back(best):
        return _fmt_f32_digits(v < 0, best)
    # Binary search on the digit count: with more digits the nearest decimal only gets
    # nearer, so "reads back" is monotone in the count.
    lo, hi, best = 0, 8, _F32_FORMATS[8] % f
    while lo < hi:
        mid = (lo + hi) // 2
        r = _F32_FORMATS[mid] % f
        if reads_back(r):
            hi, best = mid, r
        else:
            lo = mid + 1
    return _fmt_f32_digits(v < 0, best)


def _fmt_f32_digits(neg: bool, r: str) -> bytes:
    """PostgreSQL's float4 text for a shortest repr in %e form ('1.5e+06', '1e-05')."""
    mant, _, exp = r.partition("e")
    digits = mant.replace(".", "").rstrip("0") or "0"
    return _fmt_shortest(neg, digits, int(exp), 6).encode()


def float_text(digs: int, efd: int) -> Encoder:
    if efd > 0:
        return _float8_shortest if digs == 15 else _float4_shortest
    fmt = f"%.{max(1, digs + efd)}g"

    def enc(v: float) -> bytes:
        if v != v or v in (math.inf, -math.inf):
            return _float_special(v)
        return (fmt % v).encode()

    return enc


_FLOAT_RE = re.compile(
    r"[ \t\n\r\f\v]*([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
    r"[ \t\n\r\f\v]*"
)
_FLOAT_WORDS = {
    "nan": math.nan,
    "infinity": math.inf,
    "+infinity": math.inf,
    "-infinity": -math.inf,
    "inf": math.inf,
    "+inf": math.inf,
    "-inf": -math.inf,
}


def float_in(type_name: str, single: bool) -> Decoder:
    def dec(v: Any) -> float:
        s = as_str(v)
        m = _FLOAT_RE.fullmatch(s)
        if m is None:
            special = _FLOAT_WORDS.get(s.strip(WHITESPACE).lower())
            if special is None:
                raise invalid_syntax(type_name, s)
            return special
        text = m.group(1)
        f = float(text)
        if single:
            try:
                f = _to_f32(f)
            except OverflowError:
                f = math.inf
        if f in (math.inf, -math.inf) or (
            f == 0.0 and text.lstrip("+-.0").rstrip(".")[:1] not in ("", "e", "E")
        ):
            raise NumericOutOfRange(f'"{text}" is out of range for type {type_name}')
        return f

    return dec


def float4_recv(v: Any) -> float:
    if len(v) != 4:
        raise bad_binary("real")
    return F4.unpack(v)[0]
