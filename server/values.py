"""PostgreSQL value codecs: Python values <-> PostgreSQL text and binary wire formats.

The server asks once per result column for an encoder (`text_encoder`,
`binary_encoder`) and once per parameter for a decoder (`text_decoder`,
`binary_decoder`); each returns a plain function built for that type and session,
so the per-value path is one call with no type dispatch.

Python representation (what DuckDB hands us through pyarrow `to_pylist()`):

  bool, int, float, decimal.Decimal (numeric), str (text family, json, jsonb),
  bytes (bytea), uuid.UUID or str (uuid), datetime.date, datetime.time,
  datetime.datetime naive (timestamp) or aware (timestamptz, any zone),
  interval as pyarrow.MonthDayNano, `Interval` (below) or datetime.timedelta.

Values Python's datetime cannot hold (BC, year > 9999, +-infinity, time 24:00:00)
travel as ints holding the Arrow raw value: date = days since 1970-01-01,
timestamp/timestamptz = microseconds since 1970-01-01 00:00 UTC, time =
microseconds since midnight. Infinity uses DuckDB's values: +-(2**31 - 1) days,
+-(2**63 - 1) microseconds. Decoders return the same forms.

char(n) values are kept without trailing blanks (PostgreSQL ignores them in
comparisons, length() and casts to text); encoders pad them back to n.
"""

from __future__ import annotations

import datetime as _dt
import json as _json
import math
import re
import struct
import uuid as _uuid
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_DOWN, ROUND_HALF_UP, Context, Decimal
from functools import cache, cached_property, lru_cache
from typing import Any, NamedTuple

from headwater.catalog.types import ARRAY_ELEMENT, ColumnType

from headwater.errors import (
    DatetimeFieldOverflow,
    InvalidDatetimeFormat,
    InvalidParameterValue,
    InvalidTextRepresentation,
    NumericOutOfRange,
    SQLError,
    StringTooLong,
)

Encoder = Callable[[Any], bytes]
Decoder = Callable[[Any], Any]

__all__ = [
    "DATE_INFINITY",
    "DATE_NEG_INFINITY",
    "TIMESTAMP_INFINITY",
    "TIMESTAMP_NEG_INFINITY",
    "Interval",
    "SessionFormat",
    "DEFAULT_SESSION",
    "text_encoder",
    "binary_encoder",
    "text_decoder",
    "binary_decoder",
    "parse_literal",
    "normalize_jsonb",
    "resolve_timezone",
]

# DuckDB's infinities, as ints in the Arrow representation (see module docstring).
DATE_INFINITY = 2**31 - 1
DATE_NEG_INFINITY = -(2**31 - 1)
TIMESTAMP_INFINITY = 2**63 - 1
TIMESTAMP_NEG_INFINITY = -(2**63 - 1)

_UTC = _dt.UTC
_US_PER_DAY = 86_400_000_000
_UNIX_TO_PG_DAYS = 10_957  # 2000-01-01 - 1970-01-01
_UNIX_TO_PG_US = _UNIX_TO_PG_DAYS * _US_PER_DAY
_ORD_2000 = 730_120  # date(2000, 1, 1).toordinal()
_ORD_1970 = 719_163
_EPOCH2000 = _dt.datetime(2000, 1, 1)
_EPOCH2000_UTC = _dt.datetime(2000, 1, 1, tzinfo=_UTC)
_INT32_MAX, _INT32_MIN = 2**31 - 1, -(2**31)
_INT64_MAX, _INT64_MIN = 2**63 - 1, -(2**63)
# PostgreSQL's ranges: dates from Julian day 0 (4714-11-24 BC) to 5874897-12-31;
# timestamps to 294276-12-31 23:59:59.999999 (in days/us since 1970).
_MIN_DAYS = -2_440_588  # Julian day 0
_END_DATE_DAYS = 2_145_042_906  # 5874898-01-01, exclusive
_END_TS_US = 9_223_371_331_200_000_000 + _UNIX_TO_PG_US  # 294277-01-01, exclusive
_MIN_TS_US = _MIN_DAYS * _US_PER_DAY
_PY_MIN_DAYS = 1 - _ORD_1970  # 0001-01-01
_PY_MAX_DAYS = 3_652_059 - _ORD_1970  # 9999-12-31

# Decimal arithmetic never rounds behind our back: numeric(1000, s) needs 1000+ digits.
_CTX = Context(prec=140_000, rounding=ROUND_HALF_UP, Emax=10**9, Emin=-(10**9))
_CTX_TRUNC = Context(prec=140_000, rounding=ROUND_DOWN, Emax=10**9, Emin=-(10**9))


class Interval(NamedTuple):
    """PostgreSQL's interval: months, days and microseconds, kept apart as it does."""

    months: int = 0
    days: int = 0
    microseconds: int = 0


def _interval_parts(v: Any) -> tuple[int, int, int]:
    """(months, days, microseconds) of any accepted interval value."""
    t = type(v)
    if t is Interval:
        return v
    if t is _dt.timedelta:
        # Split the magnitude so a negative timedelta reads as PostgreSQL's
        # '-02:00:00' rather than '-1 days +22:00:00'.
        neg = v < _dt.timedelta(0)
        a = -v if neg else v
        d, us = a.days, a.seconds * 1_000_000 + a.microseconds
        return (0, -d, -us) if neg else (0, d, us)
    m, d, ns = v  # pyarrow.MonthDayNano and other (months, days, nanoseconds) tuples
    return m, d, (ns // 1000 if ns >= 0 else -(-ns // 1000))


# ---------------------------------------------------------------------------
# Session settings that change how values are printed or parsed.


@dataclass(frozen=True)
class SessionFormat:
    """The session GUCs that affect value formats (defaults are PostgreSQL's)."""

    timezone: str = "UTC"
    extra_float_digits: int = 1
    datestyle: str = "ISO, MDY"
    intervalstyle: str = "postgres"
    bytea_output: str = "hex"

    @cached_property
    def tzinfo(self) -> _dt.tzinfo:
        return resolve_timezone(self.timezone)

    @cached_property
    def date_order(self) -> str:
        """'MDY', 'DMY' or 'YMD': how ambiguous input like 01/02/03 is read."""
        s = self.datestyle.upper()
        for order in ("DMY", "YMD", "MDY"):
            if order in s:
                return order
        if "EURO" in s or "GERMAN" in s:
            return "DMY"
        return "MDY"


DEFAULT_SESSION = SessionFormat()


@cache
def _zone_names() -> dict[str, str]:
    """Lower-cased IANA zone name -> its spelling (PostgreSQL matches names ignoring case)."""
    names = {n.lower(): n for n in zoneinfo.available_timezones()}
    names.setdefault("utc", "UTC")
    return names


_POSIX_TZ = re.compile(r"(?:<[^>]+>|[A-Za-z]{3,})([+-]?\d{1,2}(?::\d{1,2}(?::\d{1,2})?)?)")
_NUMERIC_TZ = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)")


def _zone(name: str) -> zoneinfo.ZoneInfo | None:
    key = _zone_names().get(name.lower())
    return zoneinfo.ZoneInfo(key) if key else None


@cache
def resolve_timezone(name: str) -> _dt.tzinfo:
    """The tzinfo for a TimeZone setting: an IANA name (any case), a number of hours
    east of UTC ('+5', '-3.5'), or a POSIX 'STDoffset' spec (hours *west*: 'UTC+5').
    Raises InvalidParameterValue as SET TIME ZONE does for anything else."""
    z = _zone(name.strip())
    if z is not None:
        return z
    s = name.strip()
    if _NUMERIC_TZ.fullmatch(s):  # SQL convention: hours east of Greenwich
        secs = round(float(s) * 3600)
        if abs(secs) < 168 * 3600:
            return _dt.timezone(_dt.timedelta(seconds=secs))
    m = _POSIX_TZ.fullmatch(s)
    if m:  # POSIX convention: the offset is hours west of Greenwich
        parts = [int(p) for p in m.group(1).lstrip("+-").split(":")] + [0, 0]
        secs = parts[0] * 3600 + parts[1] * 60 + parts[2]
        if secs < 24 * 3600:
            return _dt.timezone(_dt.timedelta(seconds=secs if m.group(1)[0] == "-" else -secs))
    raise InvalidParameterValue(f'invalid value for parameter "TimeZone": "{name}"')


# ---------------------------------------------------------------------------
# Calendar arithmetic on day numbers, for dates Python's datetime cannot hold.


def _days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of proleptic Gregorian y-m-d (astronomical year: 1 BC = 0)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


def _civil_from_days(z: int) -> tuple[int, int, int]:
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    return yoe + era * 400 + (m <= 2), m, d


def _days_in_month(y: int, m: int) -> int:
    if m == 2:
        return 29 if (y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)) else 28
    return 30 if m in (4, 6, 9, 11) else 31


def _ts_us(v: Any) -> int:
    """Microseconds since 1970 (UTC for aware values) of a datetime or its int form."""
    if type(v) is int:
        return v
    off = v.utcoffset()
    days = v.toordinal() - _ORD_1970
    us = (days * 86400 + v.hour * 3600 + v.minute * 60 + v.second) * 1_000_000 + v.microsecond
    if off is not None:
        us -= (off.days * 86400 + off.seconds) * 1_000_000 + off.microseconds
    return us


_CYCLE_US = 146_097 * _US_PER_DAY  # 400 Gregorian years: a whole number of weeks


def _in_py_range(us: int) -> int:
    """An instant Python's datetime can hold that a time zone treats like `us`: before
    year 2 the zone's first offset (its LMT) applies; after year 9998 its rules repeat
    every 400 years, as PostgreSQL extrapolates them."""
    if us < (_PY_MIN_DAYS + 2) * _US_PER_DAY:
        return (_PY_MIN_DAYS + 2) * _US_PER_DAY
    limit = (_PY_MAX_DAYS - 2) * _US_PER_DAY
    if us > limit:
        us -= -(-(us - limit) // _CYCLE_US) * _CYCLE_US
    return us


def _date_from_days(days: int) -> Any:
    if _PY_MIN_DAYS <= days <= _PY_MAX_DAYS:
        return _dt.date.fromordinal(days + _ORD_1970)
    return days


def _ts_from_us(us: int, aware: bool) -> Any:
    if _PY_MIN_DAYS * _US_PER_DAY <= us < (_PY_MAX_DAYS + 1) * _US_PER_DAY:
        days, rem = divmod(us, _US_PER_DAY)
        secs, micro = divmod(rem, 1_000_000)
        v = _dt.datetime.fromordinal(days + _ORD_1970)
        v = v.replace(
            hour=secs // 3600,
            minute=secs // 60 % 60,
            second=secs % 60,
            microsecond=micro,
            tzinfo=_UTC if aware else None,
        )
        return v
    return us


def _time_from_us(us: int) -> Any:
    if 0 <= us < _US_PER_DAY:
        secs, micro = divmod(us, 1_000_000)
        return _dt.time(secs // 3600, secs // 60 % 60, secs % 60, micro)
    return us


# ---------------------------------------------------------------------------
# Text output.


def _fmt_frac(us: int) -> str:
    """'.5' for 500000 microseconds; '' for none (PostgreSQL drops trailing zeros)."""
    return ("." + f"{us:06d}".rstrip("0")) if us else ""


def _fmt_date_days(days: int) -> str:
    if days >= DATE_INFINITY:
        return "infinity"
    if days <= DATE_NEG_INFINITY:
        return "-infinity"
    y, m, d = _civil_from_days(days)
    if y <= 0:
        return f"{1 - y:04d}-{m:02d}-{d:02d} BC"
    return f"{y:04d}-{m:02d}-{d:02d}"


def _fmt_ts_us(us: int, offset: str | None = None) -> str:
    """Timestamp text for local microseconds since 1970, with an optional zone suffix."""
    days, rem = divmod(us, _US_PER_DAY)
    y, mo, d = _civil_from_days(days)
    secs, micro = divmod(rem, 1_000_000)
    s = (
        f"{1 - y if y <= 0 else y:04d}-{mo:02d}-{d:02d} {secs // 3600:02d}:"
        f"{secs // 60 % 60:02d}:{secs % 60:02d}{_fmt_frac(micro)}{offset or ''}"
    )
    return s + " BC" if y <= 0 else s


@cache
def _fmt_offset(secs: int) -> str:
    """PostgreSQL's EncodeTimezone for ISO style: +01, +05:30, +00:09:21."""
    sign = "-" if secs < 0 else "+"
    h, rest = divmod(abs(secs), 3600)
    m, s = divmod(rest, 60)
    if s:
        return f"{sign}{h:02d}:{m:02d}:{s:02d}"
    if m:
        return f"{sign}{h:02d}:{m:02d}"
    return f"{sign}{h:02d}"


@cache
def _iso_offset(iso: str) -> str:
    """'+01:00' (datetime.isoformat's offset) -> '+01'."""
    sign = -1 if iso[0] == "-" else 1
    parts = [int(p) for p in iso[1:].split(":")] + [0]
    return _fmt_offset(sign * (parts[0] * 3600 + parts[1] * 60 + parts[2]))


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


def _float_text(digs: int, efd: int) -> Encoder:
    if efd > 0:
        return _float8_shortest if digs == 15 else _float4_shortest
    fmt = f"%.{max(1, digs + efd)}g"

    def enc(v: float) -> bytes:
        if v != v or v in (math.inf, -math.inf):
            return _float_special(v)
        return (fmt % v).encode()

    return enc


def _to_decimal(v: Any) -> Decimal:
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
    if ps is not None and ps[0] == QUOTIENT_PRECISION:
        stored = ps[1]

        def conv_quotient(v: Any) -> str:
            if type(v) is not Decimal:
                v = _to_decimal(v)
            if not v.is_finite():
                return format(v, "f")
            scale = quotient_scale(v, stored)
            s = format(v.quantize(Decimal(1).scaleb(-scale), context=_CTX), "f")
            return s[1:] if s[0] == "-" and not v else s

        return conv_quotient
    if ps is None:

        def conv(v: Any) -> str:
            if type(v) is not Decimal:
                v = _to_decimal(v)
            s = format(v.normalize(_CTX), "f")  # trailing zeros gone, never an exponent
            return "0" if s == "-0" else s

        return conv

    scale = ps[1]
    quantum = Decimal(1).scaleb(-scale)

    def conv_scaled(v: Any) -> str:
        if type(v) is not Decimal:
            v = _to_decimal(v)
        s = format(v, "f")
        dot = s.find(".")
        if (len(s) - dot - 1 if dot >= 0 else 0) != scale and v.is_finite():
            s = format(v.quantize(quantum, context=_CTX), "f")  # DuckDB gives it at scale
        if s[0] == "-" and not v:
            s = s[1:]
        return s

    return conv_scaled


_BYTEA_ESCAPE = [
    ("\\\\" if b == 0x5C else chr(b) if 0x20 <= b < 0x7F else f"\\{b:03o}") for b in range(256)
]


def _bytea_escape(v: bytes) -> bytes:
    return "".join([_BYTEA_ESCAPE[b] for b in v]).encode("ascii")


def _str_fallback(v: Any) -> str:
    """Text of a value DuckDB gave for a text-typed column that is not a str."""
    if isinstance(v, str):
        return v
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        return _json.dumps(v, ensure_ascii=False, default=str)
    return str(v)


def _text_str(v: Any) -> bytes:
    try:
        return v.encode()
    except AttributeError:
        return _str_fallback(v).encode()


def _text_bpchar(ct: ColumnType) -> Encoder:
    n = ct.length
    if n is None:
        return _text_str

    def enc(v: Any) -> bytes:
        if type(v) is not str:
            v = _str_fallback(v)
        return (v.ljust(n) if len(v) < n else v).encode()

    return enc


def _date_text(v: Any) -> bytes:
    try:
        return v.isoformat().encode()  # pads years < 1000 to 4 digits like PostgreSQL
    except AttributeError:
        return _fmt_date_days(v).encode()


def _time_text(v: Any) -> bytes:
    if type(v) is int:
        secs, micro = divmod(v, 1_000_000)
        return (
            f"{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}{_fmt_frac(micro)}"
        ).encode()
    s = v.isoformat()  # HH:MM:SS[.ffffff], then an offset for an aware time (ignored)
    if v.microsecond:
        return s[:15].rstrip("0").encode()
    return s[:8].encode()


def _ts_int_text(us: int) -> str:
    # == and not >=: PostgreSQL's range reaches past DuckDB's infinity (its epoch is 2000)
    if us == TIMESTAMP_INFINITY:
        return "infinity"
    if us <= TIMESTAMP_NEG_INFINITY:
        return "-infinity"
    return _fmt_ts_us(us)


def _timestamp_text(v: Any) -> bytes:
    if type(v) is int:
        return _ts_int_text(v).encode()
    s = v.isoformat(" ")
    if v.microsecond:
        return s[:26].rstrip("0").encode()
    return s[:19].encode()


def _timestamptz_text(session: SessionFormat) -> Encoder:
    tz = session.tzinfo

    def from_int(us: int) -> bytes:
        if us == TIMESTAMP_INFINITY or us <= TIMESTAMP_NEG_INFINITY:
            return _ts_int_text(us).encode()
        off = _ts_from_us(_in_py_range(us), True).astimezone(tz).utcoffset()
        assert off is not None
        secs = off.days * 86400 + off.seconds
        return _fmt_ts_us(us + secs * 1_000_000, _fmt_offset(secs)).encode()

    def enc(v: Any) -> bytes:
        if type(v) is int:
            return from_int(v)
        if v.tzinfo is None:
            v = v.replace(tzinfo=_UTC)
        try:
            local = v.astimezone(tz)
        except OverflowError:  # the local time falls outside years 1..9999
            return from_int(_ts_us(v))
        s = local.isoformat(" ")
        if local.microsecond:
            return (s[:26].rstrip("0") + _iso_offset(s[26:])).encode()
        return (s[:19] + _iso_offset(s[19:])).encode()

    return enc


def _tdiv(a: int, b: int) -> int:
    """C's truncating integer division."""
    q = abs(a) // b
    return -q if a < 0 else q


def _split_interval(months: int, days: int, us: int) -> tuple[int, ...]:
    """PostgreSQL's interval2itm: every field truncated toward zero."""
    year, mon = _tdiv(months, 12), months - _tdiv(months, 12) * 12
    hour = _tdiv(us, 3_600_000_000)
    us -= hour * 3_600_000_000
    mins = _tdiv(us, 60_000_000)
    us -= mins * 60_000_000
    sec = _tdiv(us, 1_000_000)
    return year, mon, days, hour, mins, sec, us - sec * 1_000_000


def _secs(sec: int, fsec: int, fill: bool) -> str:
    """PostgreSQL's AppendSeconds: absolute values, trailing fraction zeros dropped."""
    return (f"{abs(sec):02d}" if fill else str(abs(sec))) + _fmt_frac(abs(fsec))


def _interval_postgres(months: int, days: int, us: int) -> str:
    if months >= 0 and days >= 0 and us >= 0:  # no signs to place: the common case
        out = []
        if months:
            year, mon = divmod(months, 12)
            if year:
                out.append("1 year" if year == 1 else f"{year} years")
            if mon:
                out.append("1 mon" if mon == 1 else f"{mon} mons")
        if days:
            out.append("1 day" if days == 1 else f"{days} days")
        if us or not out:
            secs, fus = divmod(us, 1_000_000)
            out.append(
                f"{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}"
                + (_fmt_frac(fus) if fus else "")
            )
        return " ".join(out)
    year, mon, mday, hour, mins, sec, fsec = _split_interval(months, days, us)
    out: list[str] = []
    is_before = False
    for value, unit in ((year, "year"), (mon, "mon"), (mday, "day")):
        if value:
            plus = "+" if is_before and value > 0 else ""
            out.append(f"{plus}{value} {unit}{'' if value == 1 else 's'}")
            is_before = value < 0
    if not out or hour or mins or sec or fsec:
        minus = hour < 0 or mins < 0 or sec < 0 or fsec < 0
        sign = "-" if minus else "+" if is_before else ""
        out.append(f"{sign}{abs(hour):02d}:{abs(mins):02d}:{_secs(sec, fsec, True)}")
    return " ".join(out)


def _interval_iso(months: int, days: int, us: int) -> str:
    year, mon, mday, hour, mins, sec, fsec = _split_interval(months, days, us)
    if not (year or mon or mday or hour or mins or sec or fsec):
        return "PT0S"
    s = "P" + "".join(f"{v}{u}" for v, u in ((year, "Y"), (mon, "M"), (mday, "D")) if v)
    if hour or mins or sec or fsec:
        s += "T" + "".join(f"{v}{u}" for v, u in ((hour, "H"), (mins, "M")) if v)
        if sec or fsec:
            s += ("-" if sec < 0 or fsec < 0 else "") + _secs(sec, fsec, False) + "S"
    return s


def _interval_verbose(months: int, days: int, us: int) -> str:
    year, mon, mday, hour, mins, sec, fsec = _split_interval(months, days, us)
    s = "@"
    is_zero, is_before = True, False
    for value, unit in ((year, "year"), (mon, "mon"), (mday, "day"), (hour, "hour"), (mins, "min")):
        if not value:
            continue
        if is_zero:
            is_before = value < 0
            value = abs(value)
        elif is_before:
            value = -value
        s += f" {value} {unit}{'' if value == 1 else 's'}"
        is_zero = False
    if sec or fsec:
        s += " "
        if sec < 0 or (sec == 0 and fsec < 0):
            if is_zero:
                is_before = True
            elif not is_before:
                s += "-"
        elif is_before:
            s += "-"
        s += _secs(sec, fsec, False) + " sec" + ("s" if abs(sec) != 1 or fsec else "")
        is_zero = False
    if is_zero:
        s += " 0"
    return s + " ago" if is_before else s


def _interval_sql(months: int, days: int, us: int) -> str:
    year, mon, mday, hour, mins, sec, fsec = _split_interval(months, days, us)
    fields = (year, mon, mday, hour, mins, sec, fsec)
    has_neg = any(f < 0 for f in fields)
    has_pos = any(f > 0 for f in fields)
    has_ym = bool(year or mon)
    has_dt = bool(mday or hour or mins or sec or fsec)
    standard = not (has_neg and has_pos) and not (has_ym and has_dt)
    sign = ""
    if has_neg and standard:
        sign = "-"
        year, mon, mday, hour, mins, sec, fsec = (-f for f in fields)
    if not has_neg and not has_pos:
        return "0"
    if not standard:
        ys = "-" if year < 0 or mon < 0 else "+"
        ds = "-" if mday < 0 else "+"
        ss = "-" if hour < 0 or mins < 0 or sec < 0 or fsec < 0 else "+"
        return (
            f"{ys}{abs(year)}-{abs(mon)} {ds}{abs(mday)} "
            f"{ss}{abs(hour)}:{abs(mins):02d}:{_secs(sec, fsec, True)}"
        )
    if has_ym:
        return f"{sign}{year}-{mon}"
    if mday:
        return f"{sign}{mday} {hour}:{mins:02d}:{_secs(sec, fsec, True)}"
    return f"{sign}{hour}:{mins:02d}:{_secs(sec, fsec, True)}"


_INTERVAL_STYLES = {
    "postgres": _interval_postgres,
    "iso_8601": _interval_iso,
    "postgres_verbose": _interval_verbose,
    "sql_standard": _interval_sql,
}


def _interval_text(session: SessionFormat) -> Encoder:
    fmt = _INTERVAL_STYLES.get(session.intervalstyle.lower(), _interval_postgres)

    def enc(v: Any) -> bytes:
        return fmt(*_interval_parts(v)).encode()

    return enc


def _uuid_text(v: Any) -> bytes:
    if type(v) is str and len(v) == 36 and v.islower():
        return v.encode()
    return str(v if type(v) is _uuid.UUID else _uuid.UUID(str(v))).encode()


def _jsonb_text(v: Any) -> bytes:
    if type(v) is str:
        return v.encode()
    return _jsonb_dump(v).encode()  # a parsed value (dict/list/...) from somewhere else


def _bool_text(v: Any) -> bytes:
    return b"t" if v else b"f"


def _int_text(v: Any) -> bytes:
    return b"%d" % v


_TextFactory = Callable[[ColumnType, SessionFormat], Encoder]
_TEXT_FACTORIES: dict[str, _TextFactory] = {
    "bool": lambda ct, s: _bool_text,
    "int2": lambda ct, s: _int_text,
    "int4": lambda ct, s: _int_text,
    "int8": lambda ct, s: _int_text,
    "oid": lambda ct, s: _int_text,
    "float4": lambda ct, s: _float_text(6, s.extra_float_digits),
    "float8": lambda ct, s: _float_text(15, s.extra_float_digits),
    "numeric": lambda ct, s: (lambda f: lambda v: f(v).encode())(_numeric_str(ct)),
    "text": lambda ct, s: _text_str,
    "varchar": lambda ct, s: _text_str,
    "name": lambda ct, s: _text_str,
    "char": lambda ct, s: _text_str,
    "unknown": lambda ct, s: _text_str,
    "json": lambda ct, s: _text_str,
    "jsonb": lambda ct, s: _jsonb_text,
    "bpchar": lambda ct, s: _text_bpchar(ct),
    "bytea": lambda ct, s: (
        _bytea_escape
        if s.bytea_output.lower() == "escape"
        else lambda v: b"\\x" + v.hex().encode()  # bytes, bytearray, memoryview
    ),
    "date": lambda ct, s: _date_text,
    "time": lambda ct, s: _time_text,
    "timestamp": lambda ct, s: _timestamp_text,
    "timestamptz": lambda ct, s: _timestamptz_text(s),
    "interval": lambda ct, s: _interval_text(s),
    "uuid": lambda ct, s: _uuid_text,
    "int2vector": lambda ct, s: _vector_text,
    "oidvector": lambda ct, s: _vector_text,
}


def _vector_text(v: Any) -> bytes:
    return " ".join(str(x) for x in v).encode()


@lru_cache(maxsize=4096)  # callers may ask per value; ColumnType/SessionFormat are frozen
def text_encoder(ct: ColumnType, *, session: SessionFormat = DEFAULT_SESSION) -> Encoder:
    """A function turning a non-NULL value of `ct` into PostgreSQL's text output."""
    if ct.pg.name in ARRAY_ELEMENT:
        return _array_text(ct, session)
    factory = _TEXT_FACTORIES.get(ct.pg.name)
    return factory(ct, session) if factory else _text_str


_ARRAY_QUOTE = re.compile(rb'[{},"\\\s]')


def _array_text(ct: ColumnType, session: SessionFormat) -> Encoder:
    """array_out: {a,b,NULL}, elements quoted when empty, NULL-like or holding a delimiter."""
    enc = text_encoder(ColumnType(ARRAY_ELEMENT[ct.pg.name]), session=session)

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


# ---------------------------------------------------------------------------
# Binary output (PostgreSQL's typsend functions).

_I16, _I32, _I64, _U32 = (struct.Struct(f) for f in (">h", ">i", ">q", ">I"))
_F4, _F8 = struct.Struct(">f"), struct.Struct(">d")
_INTERVAL_BIN = struct.Struct(">qii")
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


def _date_bin(v: Any) -> bytes:
    if type(v) is int:
        if v >= DATE_INFINITY:
            return _I32.pack(_INT32_MAX)
        if v <= DATE_NEG_INFINITY:
            return _I32.pack(_INT32_MIN)
        return _I32.pack(v - _UNIX_TO_PG_DAYS)
    return _I32.pack(v.toordinal() - _ORD_2000)


def _ts_int_bin(us: int) -> bytes:
    if us == TIMESTAMP_INFINITY:
        return _I64.pack(_INT64_MAX)
    if us <= TIMESTAMP_NEG_INFINITY:
        return _I64.pack(_INT64_MIN)
    return _I64.pack(us - _UNIX_TO_PG_US)


def _timestamp_bin(v: Any) -> bytes:
    if type(v) is int:
        return _ts_int_bin(v)
    if v.tzinfo is not None:  # a timestamptz value in a timestamp column: keep wall time
        v = v.replace(tzinfo=None)
    d = v - _EPOCH2000
    return _I64.pack((d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds)


def _timestamptz_bin(v: Any) -> bytes:
    if type(v) is int:
        return _ts_int_bin(v)
    d = v - (_EPOCH2000_UTC if v.tzinfo is not None else _EPOCH2000)
    return _I64.pack((d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds)


def _time_bin(v: Any) -> bytes:
    if type(v) is int:
        return _I64.pack(v)
    return _I64.pack((v.hour * 3600 + v.minute * 60 + v.second) * 1_000_000 + v.microsecond)


def _interval_bin(v: Any) -> bytes:
    months, days, us = _interval_parts(v)
    return _INTERVAL_BIN.pack(us, days, months)


def _uuid_bin(v: Any) -> bytes:
    if type(v) is _uuid.UUID:
        return v.bytes
    if type(v) is str and len(v) == 36:
        return bytes.fromhex(v.replace("-", ""))  # DuckDB's canonical text; UUID() is slow
    return _uuid.UUID(str(v)).bytes


def _bytea_bin(v: Any) -> bytes:
    return v if type(v) is bytes else bytes(v)


def _char_bin(v: Any) -> bytes:
    return v.encode()[:1] if type(v) is str else bytes(v)[:1]


_BinFactory = Callable[[ColumnType, SessionFormat], Encoder]
_BIN_FACTORIES: dict[str, _BinFactory] = {
    "bool": lambda ct, s: lambda v: b"\x01" if v else b"\x00",
    "int2": lambda ct, s: _I16.pack,
    "int4": lambda ct, s: _I32.pack,
    "int8": lambda ct, s: _I64.pack,
    "oid": lambda ct, s: _U32.pack,
    "float4": lambda ct, s: _F4.pack,
    "float8": lambda ct, s: _F8.pack,
    "numeric": lambda ct, s: (lambda f: lambda v: _numeric_send(f(v)))(_numeric_str(ct)),
    "text": lambda ct, s: _text_str,
    "varchar": lambda ct, s: _text_str,
    "name": lambda ct, s: _text_str,
    "unknown": lambda ct, s: _text_str,
    "json": lambda ct, s: _text_str,
    "jsonb": lambda ct, s: lambda v: b"\x01" + _jsonb_text(v),
    "bpchar": lambda ct, s: _text_bpchar(ct),
    "char": lambda ct, s: _char_bin,
    "bytea": lambda ct, s: _bytea_bin,
    "date": lambda ct, s: _date_bin,
    "time": lambda ct, s: _time_bin,
    "timestamp": lambda ct, s: _timestamp_bin,
    "timestamptz": lambda ct, s: _timestamptz_bin,
    "interval": lambda ct, s: _interval_bin,
    "uuid": lambda ct, s: _uuid_bin,
    "int2vector": lambda ct, s: lambda v: _vector_bin(v, 21, _I16.pack),
    "oidvector": lambda ct, s: lambda v: _vector_bin(v, 26, _U32.pack),
}


def _vector_bin(v: Any, elem_oid: int, pack: Callable[[int], bytes]) -> bytes:
    """int2vector/oidvector send: a one-dimensional array with lower bound 0."""
    if not v:
        return struct.pack(">iiI", 0, 0, elem_oid)
    head = struct.pack(">iiIii", 1, 0, elem_oid, len(v), 0)
    return head + b"".join(_I32.pack(len(b)) + b for b in (pack(x) for x in v))


@lru_cache(maxsize=4096)
def binary_encoder(ct: ColumnType, *, session: SessionFormat = DEFAULT_SESSION) -> Encoder:
    """A function turning a non-NULL value of `ct` into PostgreSQL's binary (send) format."""
    if ct.pg.name in ARRAY_ELEMENT:
        return _array_bin(ct, session)
    factory = _BIN_FACTORIES.get(ct.pg.name)
    return factory(ct, session) if factory else _text_str


def _array_bin(ct: ColumnType, session: SessionFormat) -> Encoder:
    """array_send of a one-dimensional array: ndim, has-null, element oid, bounds, items."""
    elem = ARRAY_ELEMENT[ct.pg.name]
    enc = binary_encoder(ColumnType(elem), session=session)

    def out(v: Any) -> bytes:
        if not v:
            return struct.pack(">iiI", 0, 0, elem.oid)
        items = [None if x is None else enc(x) for x in v]
        has_null = any(i is None for i in items)
        head = struct.pack(">iiIii", 1, int(has_null), elem.oid, len(items), 1)
        return head + b"".join(
            b"\xff\xff\xff\xff" if i is None else _I32.pack(len(i)) + i for i in items
        )

    return out


# ---------------------------------------------------------------------------
# Text input.


def _invalid(type_name: str, s: str) -> SQLError:
    return InvalidTextRepresentation(f'invalid input syntax for type {type_name}: "{s}"')


def _as_str(v: Any) -> str:
    if type(v) is str:
        return v
    try:
        return bytes(v).decode("utf-8")
    except UnicodeDecodeError:
        raise SQLError('invalid byte sequence for encoding "UTF8"', "22021") from None


def _text_in(v: Any) -> str:
    """Text as a value of a string type: PostgreSQL strings cannot hold NUL."""
    s = v if type(v) is str else _as_str(v)
    if "\x00" in s:
        raise SQLError('invalid byte sequence for encoding "UTF8": 0x00', "22021")
    return s


_WS = " \t\n\r\f\v"
_BOOL_WORDS: dict[str, bool] = {}
for _word, _val in (("true", True), ("false", False), ("yes", True), ("no", False)):
    for _i in range(1, len(_word) + 1):
        _BOOL_WORDS[_word[:_i]] = _val
_BOOL_WORDS.update({"on": True, "of": False, "off": False, "1": True, "0": False})


def _bool_in(v: Any) -> bool:
    s = _as_str(v)
    r = _BOOL_WORDS.get(s.strip(_WS).lower())
    if r is None:
        raise _invalid("boolean", s)
    return r


_INT_RE = re.compile(r"[ \t\n\r\f\v]*[+-]?[0-9]+[ \t\n\r\f\v]*")


def _int_in(type_name: str, lo: int, hi: int) -> Decoder:
    def dec(v: Any) -> int:
        s = v if type(v) is str else _as_str(v)
        # int() alone would take '1_000' and non-ASCII digits
        if not ((s.isdigit() and s.isascii()) or _INT_RE.fullmatch(s)):
            raise _invalid(type_name, s)
        n = int(s)
        if lo <= n <= hi:
            return n
        raise NumericOutOfRange(f'value "{s}" is out of range for type {type_name}')

    return dec


def _oid_in(v: Any) -> int:
    s = _as_str(v)
    if not _INT_RE.fullmatch(s):
        raise _invalid("oid", s)
    n = int(s)
    if -(2**31) <= n < 0:
        return n + 2**32  # strtoul wraps negative input, so PostgreSQL does too
    if 0 <= n < 2**32:
        return n
    raise NumericOutOfRange(f'value "{s}" is out of range for type oid')


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


def _float_in(type_name: str, single: bool) -> Decoder:
    def dec(v: Any) -> float:
        s = _as_str(v)
        m = _FLOAT_RE.fullmatch(s)
        if m is None:
            special = _FLOAT_WORDS.get(s.strip(_WS).lower())
            if special is None:
                raise _invalid(type_name, s)
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
            maxdigits = precision - scale
            raise NumericOutOfRange(
                "numeric field overflow",
                detail=f"A field with precision {precision}, scale {scale} must round to an "
                f"absolute value less than {f'10^{maxdigits}' if maxdigits else '1'}.",
            )
        return d

    return apply


def _numeric_in(ct: ColumnType) -> Decoder:
    typmod = _numeric_typmod(ct)

    def dec(v: Any) -> Decimal:
        s = _as_str(v)
        m = _NUMERIC_RE.fullmatch(s)
        if m is None:
            special = _NUMERIC_WORDS.get(s.strip(_WS).lower())
            if special is None:
                raise _invalid("numeric", s)
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


def _varchar_in(ct: ColumnType) -> Decoder:
    check = _check_length(ct, "character varying")
    return lambda v: check(_text_in(v))


def _bpchar_in(ct: ColumnType) -> Decoder:
    check = _check_length(ct, "character")
    if ct.length is None:
        return _text_in
    return lambda v: check(_text_in(v)).rstrip(" ")


def _name_in(v: Any) -> str:
    s = _text_in(v)
    b = s.encode()
    return b[:63].decode("utf-8", "ignore") if len(b) > 63 else s  # NAMEDATALEN - 1


def _char_in(v: Any) -> str:
    s = _as_str(v)
    return s[:1]


_HEX = frozenset("0123456789abcdefABCDEF")


def _bytea_in(v: Any) -> bytes:
    s = _as_str(v)
    if s.startswith("\\x"):
        body = s[2:]
        try:
            return bytes.fromhex(body)  # accepts whitespace between bytes, like hex_decode
        except ValueError:
            pass
        h = [c for c in body if c not in " \t\n\r"]
        for c in h:
            if c not in _HEX:
                raise InvalidParameterValue(f'invalid hexadecimal digit: "{c}"')
        raise InvalidParameterValue("invalid hexadecimal data: odd number of digits")
    if "\\" not in s:
        return s.encode()
    out = bytearray()
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c != "\\":
            out += c.encode()
            i += 1
        elif s[i + 1 : i + 2] == "\\":
            out.append(0x5C)
            i += 2
        elif i + 3 < n and s[i + 1] in "0123" and s[i + 2] in "01234567" and s[i + 3] in "01234567":
            out.append(int(s[i + 1 : i + 4], 8))
            i += 4
        else:
            raise InvalidTextRepresentation("invalid input syntax for type bytea")
    return bytes(out)


_UUID_RE = re.compile(r"(\{)?(?:[0-9a-fA-F]{4}-?){7}[0-9a-fA-F]{4}(?(1)\})")


def _uuid_in(v: Any) -> _uuid.UUID:
    s = _as_str(v)
    if not _UUID_RE.fullmatch(s):  # uuid.UUID also takes 'urn:uuid:' and stray hyphens
        raise _invalid("uuid", s)
    return _uuid.UUID(s)


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


def _json_in(v: Any) -> str:
    s = _text_in(v)
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
        return format(_to_decimal(v), "f")
    if isinstance(v, int):
        return str(v)
    return _jsonb_string(str(v))


def normalize_jsonb(text: str) -> str:
    """The text PostgreSQL prints for `text::jsonb`: validated, keys deduplicated (the
    last wins) and sorted by length then bytes, numbers as numerics, `{"a": 1}` spacing."""
    # Decimal for ints too: int() refuses more than 4300 digits, numeric does not
    return _jsonb_dump(_json_load(text, True, parse_float=Decimal, parse_int=Decimal))


def _jsonb_in(v: Any) -> str:
    return normalize_jsonb(_text_in(v))


# -- dates and times --------------------------------------------------------

_MONTHS = {
    "jan": 1,
    "january": 1,
    "feb": 2,
    "february": 2,
    "mar": 3,
    "march": 3,
    "apr": 4,
    "april": 4,
    "may": 5,
    "jun": 6,
    "june": 6,
    "jul": 7,
    "july": 7,
    "aug": 8,
    "august": 8,
    "sep": 9,
    "sept": 9,
    "september": 9,
    "oct": 10,
    "october": 10,
    "nov": 11,
    "november": 11,
    "dec": 12,
    "december": 12,
}
_KEYWORDS = frozenset(("am", "pm", "bc", "ad"))
# PostgreSQL's datetktbl: words its tokenizer knows, so 'm5' is the word m then 5.
_DATETKTBL = frozenset(
    "-infinity ad allballs am apr april at aug august bc d dec december dow doy dst epoch "
    "feb february fri friday h infinity isodow isoyear j jan january jd jul julian july jun "
    "june m mar march may mm mon monday nov november now oct october on pm s sat saturday "
    "sep sept september sun sunday t thu thur thurs thursday today tomorrow tue tues "
    "tuesday wed wednesday weds y yesterday".split()
)
_DAYNAMES = frozenset(
    "sun sunday mon monday tue tues tuesday wed wednesday thu thur thurs thursday fri "
    "friday sat saturday".split()
)
# A subset of PostgreSQL's default timezone_abbreviations (seconds east of UTC).
_TZ_ABBREVS = {
    "utc": 0,
    "gmt": 0,
    "z": 0,
    "zulu": 0,
    "ut": 0,
    "est": -18000,
    "edt": -14400,
    "cst": -21600,
    "cdt": -18000,
    "mst": -25200,
    "mdt": -21600,
    "pst": -28800,
    "pdt": -25200,
    "akst": -32400,
    "akdt": -28800,
    "hst": -36000,
    "ast": -14400,
    "adt": -10800,
    "nst": -12600,
    "ndt": -9000,
    "wet": 0,
    "west": 3600,
    "bst": 3600,
    "cet": 3600,
    "cest": 7200,
    "met": 3600,
    "mest": 7200,
    "eet": 7200,
    "eest": 10800,
    "msk": 10800,
    "ist": 7200,
    "jst": 32400,
    "kst": 32400,
    "hkt": 28800,
    "sgt": 28800,
    "awst": 28800,
    "acst": 34200,
    "acdt": 37800,
    "aest": 36000,
    "aedt": 39600,
    "nzst": 43200,
    "nzdt": 46800,
}

_DT_TOKEN = re.compile(
    r"(?P<time>\d+:\d+(?::\d+)?(?:\.\d*)?)"
    r"|(?P<date>\d+[-/.][a-z]+[-/.]\d+|[a-z]+[-/.]\d+[-/.]\d+|\d+[-/.]\d+[-/.]\d+)"
    r"|(?P<num>\d+(?:\.\d*)?)"
    r"|(?P<offset>[+-]\d+(?::\d+(?::\d+)?)?)"
    r"|(?P<posix>[a-z]+[+-]\d+(?::\d+(?::\d+)?)?)"  # UTC+3: a POSIX zone, hours west
    r"|(?P<word>[a-z][a-z0-9_]*(?:/[a-z0-9_+-]+)*)"
    r"|(?P<sep>[\s,]+)"
)
_T_SEP = re.compile(r"(?<=\d)t(?=\d)")


def _split_t(text: str) -> str:
    """ISO 8601's 'T' between date and time, only after an all-numeric date (as
    PostgreSQL: in 'jan-08-1999t12:00' the T is part of a bad date)."""

    def repl(m: re.Match[str]) -> str:
        word = text[: m.start()].rsplit(None, 1)[-1]
        return "t" if any(c.isalpha() for c in word) else " "

    return _T_SEP.sub(repl, text) if "t" in text else text


class _Fields:
    __slots__ = ("y", "m", "d", "us", "zone", "bc", "special", "has_date", "y2")

    def __init__(self) -> None:
        self.y = self.m = self.d = 0
        self.us: int | None = None
        self.zone: int | _dt.tzinfo | None = None
        self.bc = False
        self.special: str | None = None
        self.has_date = False
        self.y2 = False  # the year had one or two digits: 1970..2069 unless BC


class _BadSyntax(Exception):
    pass


class _BadField(Exception):
    pass


def _year(f: _Fields, text: str) -> int:
    f.y2 = len(text) <= 2
    return int(text)


def _set_ymd(f: _Fields, parts: list[str], order: str) -> None:
    """Assign the three fields of a date token (a month may be a name)."""
    named = [i for i, p in enumerate(parts) if not p.isdigit()]
    if named:
        if len(named) > 1 or parts[named[0]] not in _MONTHS:
            raise _BadSyntax
        i = named[0]
        f.m = _MONTHS[parts[i]]
        rest = [p for j, p in enumerate(parts) if j != i]
        if i == 0:  # Mon-DD-YYYY
            d, y = rest
        elif i == 1 and len(rest[0]) >= 3:  # YYYY-Mon-DD
            y, d = rest
        else:  # DD-Mon-YYYY
            d, y = rest
        f.d, f.y = int(d), _year(f, y)
    elif len(parts[0]) >= 3 or order == "YMD":
        f.y, f.m, f.d = _year(f, parts[0]), int(parts[1]), int(parts[2])
    elif order == "DMY":
        f.d, f.m, f.y = int(parts[0]), int(parts[1]), _year(f, parts[2])
    else:
        f.m, f.d, f.y = int(parts[0]), int(parts[1]), _year(f, parts[2])
    f.has_date = True


def _parse_time_token(tok: str) -> int:
    """Microseconds of day for h:m[:s[.f]] (a fraction after m:s means minutes:seconds)."""
    main, _, frac = tok.partition(".")
    parts = [int(p) for p in main.split(":")]
    if len(parts) == 2 and "." in tok:
        h, mi, s = 0, parts[0], parts[1]
    else:
        h, mi, s = (parts + [0])[:3]
    fus = round(float("0." + frac) * 1_000_000) if frac else 0  # rint(), as PostgreSQL
    if mi > 59 or s > 60 or h > 24 or (h == 24 and (mi or s or fus)):
        raise _BadField
    return ((h * 60 + mi) * 60 + s) * 1_000_000 + fus


def _parse_offset(tok: str) -> int:
    sign = -1 if tok[0] == "-" else 1
    body = tok[1:]
    if ":" in body:
        parts = [int(p) for p in body.split(":")]
    elif len(body) <= 2:
        parts = [int(body)]
    elif len(body) <= 4:
        parts = [int(body[:-2]), int(body[-2:])]
    else:
        parts = [int(body[:-4]), int(body[-4:-2]), int(body[-2:])]
    parts += [0, 0]
    h, m, s = parts[:3]
    if h > 15 or m > 59 or s > 59:
        raise _BadField
    return sign * (h * 3600 + m * 60 + s)


def _decode_datetime(s: str, order: str, time_only: bool = False) -> _Fields:
    """Split date/time input into fields, much like PostgreSQL's DecodeDateTime."""
    f = _Fields()
    text = _split_t(s.strip(_WS).lower())
    if text in (
        "infinity",
        "+infinity",
        "-infinity",
        "epoch",
        "now",
        "today",
        "tomorrow",
        "yesterday",
        "allballs",
    ):
        f.special = text.lstrip("+")
        return f
    nums: list[str] = []
    ampm = None
    pos = 0
    while pos < len(text):
        m = _DT_TOKEN.match(text, pos)
        if m is None:
            raise _BadSyntax
        pos = m.end()
        kind, tok = m.lastgroup, m.group()
        if kind == "sep":
            continue
        if kind == "time":
            if f.us is not None:
                raise _BadSyntax
            f.us = _parse_time_token(tok)
        elif kind == "date":
            if f.has_date:
                raise _BadSyntax
            _set_ymd(f, re.split(r"[-/.]", tok), order)
        elif kind == "num":
            if text.startswith("-", pos) and ":" in text[pos:].split(None, 1)[0]:
                raise _BadSyntax  # PostgreSQL reads 120000-08:00 as a broken date
            ip = tok.partition(".")[0]
            date_done = f.has_date or time_only or (f.m and len(nums) >= 2)
            if f.us is None and date_done and len(ip) in (4, 6):
                # hhmm / hhmmss[.f] run together, after the date (DecodeNumberField)
                h, mi, secs = int(ip[:2]), int(ip[2:4]), int(ip[4:6] or 0)
                fus = round(float("0" + tok[len(ip) :]) * 1_000_000) if "." in tok else 0
                # PostgreSQL range-checks these only for type time: in a timestamp
                # '2024-01-01 256000' is 2024-01-02 02:00
                if time_only and (
                    h > 24 or mi > 59 or secs > 60 or (h == 24 and (mi or secs or fus))
                ):
                    raise _BadField
                f.us = (h * 3600 + mi * 60 + secs) * 1_000_000 + fus
            elif f.us is None and len(tok) >= 6 and tok.isdigit() and not f.has_date and not nums:
                # YYYYMMDD (or YYMMDD) run together
                f.y, f.m, f.d = _year(f, tok[:-4]), int(tok[-4:-2]), int(tok[-2:])
                f.has_date = True
            else:
                nums.append(tok)
        elif kind == "offset":
            # a zone may follow a bare date too ('2024-02-29 +00': pgjdbc sends dates so)
            if (f.us is None and not f.has_date) or f.zone is not None:
                raise _BadSyntax
            f.zone = _parse_offset(tok)
        elif kind == "posix":
            off = re.search(r"[+-]", tok)
            assert off is not None
            word = tok[: off.start()]
            if word in _KEYWORDS and tok[off.start()] == "+":  # 'pm+05': keyword, offset
                pos -= len(tok) - len(word)
                if word in ("am", "pm"):
                    ampm = word
                elif word in ("bc", "ad"):
                    f.bc = word == "bc"
                continue
            if f.zone is not None:
                raise _BadSyntax
            f.zone = -_parse_offset(tok[off.start() :])
        else:
            if tok in _MONTHS and not f.has_date and f.m == 0:
                f.m = _MONTHS[tok]
            elif tok in _DAYNAMES:
                pass
            elif tok in ("bc", "ad"):
                f.bc = tok == "bc"
            elif tok in ("am", "pm"):
                ampm = tok
            elif f.zone is None:
                zone = _TZ_ABBREVS.get(tok)
                f.zone = zone if zone is not None else _zone(tok)
                if f.zone is None:
                    if "/" in tok:
                        raise InvalidParameterValue(f'time zone "{tok}" not recognized')
                    raise _BadSyntax
            else:
                raise _BadSyntax
    if f.m and not f.has_date:  # Jan 8 1999, 8 January 1999, January 8, 1999
        if len(nums) != 2:
            raise _BadSyntax
        a, b = nums
        if len(a) >= 3 or (a.isdigit() and int(a) > 31):
            f.y, f.d = _year(f, a), int(b)
        else:
            f.d, f.y = int(a), _year(f, b)
        f.has_date = True
    elif nums:
        raise _BadSyntax
    if ampm and f.us is not None:
        h = f.us // 3_600_000_000
        if h > 12:
            raise _BadField
        if ampm == "am" and h == 12:
            f.us -= 12 * 3_600_000_000
        elif ampm == "pm" and h != 12:
            f.us += 12 * 3_600_000_000
    if f.has_date:
        if f.y2 and not f.bc:
            f.y += 2000 if f.y < 70 else 1900
        if f.y == 0 or not 1 <= f.m <= 12:
            raise _BadField
        if f.bc:
            f.y = 1 - f.y
        if not 1 <= f.d <= _days_in_month(f.y, f.m):
            raise _BadField
    return f


def _now_us() -> int:
    return _ts_us(_dt.datetime.now(_UTC))


def _local_offset(zone: int | _dt.tzinfo, local_us: int) -> int:
    """Seconds east of UTC for a local wall time in `zone`. In a DST gap PostgreSQL
    takes the offset before the jump and in an overlap the one after it; both are
    the smaller of the two candidate offsets."""
    if isinstance(zone, int):
        return zone
    naive = _ts_from_us(_in_py_range(local_us), False)
    offs = []
    for fold in (0, 1):
        off = zone.utcoffset(naive.replace(fold=fold))
        assert off is not None
        offs.append(off.days * 86400 + off.seconds)
    return min(offs)


def _special_days(special: str, session: SessionFormat) -> int:
    if special == "infinity":
        return DATE_INFINITY
    if special == "-infinity":
        return DATE_NEG_INFINITY
    if special == "epoch":
        return 0
    if special not in ("now", "today", "tomorrow", "yesterday"):
        raise _BadSyntax
    now = _dt.datetime.now(session.tzinfo).date()
    return now.toordinal() - _ORD_1970 + {"tomorrow": 1, "yesterday": -1}.get(special, 0)


def _date_in(session: SessionFormat) -> Decoder:
    def dec(v: Any) -> Any:
        s = v if type(v) is str else _as_str(v)
        if len(s) == 10 and s[4] == "-" and s[7] == "-" and s.isascii() and s[5:7].isdigit():
            try:
                return _dt.date.fromisoformat(s)  # the common YYYY-MM-DD; else the full parser
            except ValueError:
                pass
        try:
            f = _decode_datetime(s, session.date_order)
            if f.special:
                days = _special_days(f.special, session)
                return days if days in (DATE_INFINITY, DATE_NEG_INFINITY) else _date_from_days(days)
            if not f.has_date:
                raise _BadSyntax
        except _BadSyntax:
            raise InvalidDatetimeFormat(f'invalid input syntax for type date: "{s}"') from None
        except _BadField:
            raise DatetimeFieldOverflow(f'date/time field value out of range: "{s}"') from None
        days = _days_from_civil(f.y, f.m, f.d)
        if not _MIN_DAYS <= days < _END_DATE_DAYS:
            raise DatetimeFieldOverflow(f'date out of range: "{s}"')
        return _date_from_days(days)

    return dec


def _time_in(v: Any) -> Any:
    s = _as_str(v)
    try:
        f = _decode_datetime(s, "MDY", time_only=True)
        if f.special == "allballs":
            return _dt.time(0)
        if f.special == "now":
            return _dt.datetime.now(_UTC).time()
        if f.special or f.us is None:
            raise _BadSyntax
    except _BadSyntax:
        raise InvalidDatetimeFormat(f'invalid input syntax for type time: "{s}"') from None
    except _BadField:
        raise DatetimeFieldOverflow(f'date/time field value out of range: "{s}"') from None
    return _time_from_us(f.us)


_ISO_TS = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d)(?::(\d\d)(?:\.(\d{1,6}))?)?"
    r"(?:([zZ])|([+-])(\d\d)(?::?(\d\d))?)?"
)


def _ts_fast(s: str, tz: _dt.tzinfo | None) -> _dt.datetime | None:
    """YYYY-MM-DD[ T]HH:MM[:SS[.ffffff]][zone offset], what drivers send; None for any
    other form or a value needing PostgreSQL's full rules (24:00, year 0...).
    `tz` None: timestamp without time zone (any zone is ignored)."""
    m = _ISO_TS.fullmatch(s)
    if m is None:
        return None
    y, mo, d, h, mi, sec, frac, z, sign, oh, om = m.groups()
    try:
        v = _dt.datetime(
            int(y),
            int(mo),
            int(d),
            int(h),
            int(mi),
            int(sec or 0),
            int(frac.ljust(6, "0")) if frac else 0,
        )
        if tz is None:
            return v
        if sign:
            off = (int(oh) * 3600 + int(om or 0) * 60) * (-1 if sign == "-" else 1)
        elif z:
            off = 0
        else:
            off = _local_offset(tz, _ts_us(v))
        return (v - _dt.timedelta(seconds=off)).replace(tzinfo=_UTC)
    except (ValueError, OverflowError):
        return None


def _timestamp_in(session: SessionFormat, with_tz: bool) -> Decoder:
    type_name = "timestamp with time zone" if with_tz else "timestamp"
    fast_tz = session.tzinfo if with_tz else None

    def dec(v: Any) -> Any:
        s = v if type(v) is str else _as_str(v)
        if len(s) >= 16 and s[4] == "-":
            fast = _ts_fast(s, fast_tz)
            if fast is not None:
                return fast
        try:
            f = _decode_datetime(s, session.date_order)
            if f.special:
                if f.special == "infinity":
                    return TIMESTAMP_INFINITY
                if f.special == "-infinity":
                    return TIMESTAMP_NEG_INFINITY
                if f.special == "now":
                    us = _now_us()
                    if not with_tz:
                        us += _local_offset(session.tzinfo, us) * 1_000_000
                    return _ts_from_us(us, with_tz)
                f.us = 0
                days = _special_days(f.special, session)
                f.y, f.m, f.d = _civil_from_days(days)
                f.zone = 0 if f.special == "epoch" else None
            elif not f.has_date:
                raise _BadSyntax
        except _BadSyntax:
            raise InvalidDatetimeFormat(
                f'invalid input syntax for type {type_name}: "{s}"'
            ) from None
        except _BadField:
            raise DatetimeFieldOverflow(f'date/time field value out of range: "{s}"') from None
        us = _days_from_civil(f.y, f.m, f.d) * _US_PER_DAY + (f.us or 0)
        if with_tz:  # a timestamp without time zone ignores any zone given
            us -= _local_offset(session.tzinfo if f.zone is None else f.zone, us) * 1_000_000
        if not _MIN_TS_US <= us < _END_TS_US:
            raise DatetimeFieldOverflow(f'timestamp out of range: "{s}"')
        return _ts_from_us(us, with_tz)

    return dec


# -- intervals --------------------------------------------------------------
# A port of PostgreSQL 15's ParseDateTime + DecodeInterval / DecodeISO8601Interval:
# fields are read right to left so that a unit applies to the number before it, each
# unit may appear once (field masks), and years, months, days and microseconds are
# accumulated separately with PostgreSQL's int32/int64 limits and float rounding.

_YEAR, _MONTH, _DAY, _HOUR, _MINUTE, _SECOND, _MS, _US, _WEEK, _DECADE, _CENTURY, _MILLENNIUM = (
    1 << i for i in range(12)
)
_ALL_SECS = _SECOND | _MS | _US
_TIME_M = _HOUR | _MINUTE | _ALL_SECS

_UNITS: dict[str, int] = {}
for _names, _unit in (
    ("microsecond microseconds us usec usecs useconds", _US),
    ("millisecond milliseconds ms msec msecs mseconds", _MS),
    ("second seconds s sec secs", _SECOND),
    ("minute minutes m min mins", _MINUTE),
    ("hour hours h hr hrs", _HOUR),
    ("day days d", _DAY),
    ("week weeks w", _WEEK),
    ("month months mon mons", _MONTH),
    ("year years y yr yrs", _YEAR),
    ("decade decades dec decs", _DECADE),
    ("century centuries c cent", _CENTURY),
    ("millennium millennia mil mils", _MILLENNIUM),
):
    for _n in _names.split():
        _UNITS[_n[:10]] = _unit  # PostgreSQL compares at most TOKMAXLEN (10) characters
_AGO, _IGNORE = -1, -2
_US_SCALE = {_US: 1, _MS: 1000, _SECOND: 1_000_000, _MINUTE: 60_000_000, _HOUR: 3_600_000_000}
_YEAR_SCALE = {_YEAR: 1, _DECADE: 10, _CENTURY: 100, _MILLENNIUM: 1000}
_PUNCT = frozenset("!\"#$%&'()*,/:;<=>?@[\\]^_`{|}~")


def _pg_fields(s: str) -> list[tuple[str, str]]:
    """PostgreSQL's ParseDateTime, for interval input: (kind, text) fields, kinds
    'time', 'date', 'number', 'tz' (signed), 'string'."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c in _WS:
            i += 1
        elif c.isdigit() and c.isascii():
            j = i
            while j < n and s[j] in "0123456789":
                j += 1
            if j < n and s[j] == ":":
                j += 1
                while j < n and s[j] in "0123456789:.":
                    j += 1
                out.append(("time", s[i:j]))
            elif j < n and s[j] in "-/.":
                delim = s[j]
                j += 1
                if j < n and s[j] in "0123456789":
                    kind = "number" if delim == "." else "date"
                    while j < n and s[j] in "0123456789":
                        j += 1
                    if j < n and s[j] == delim:
                        kind = "date"
                        while j < n and (s[j] in "0123456789" or s[j] == delim):
                            j += 1
                    out.append((kind, s[i:j]))
                else:
                    while j < n and (s[j].isalnum() or s[j] == delim):
                        j += 1
                    out.append(("date", s[i:j].lower()))
            else:
                out.append(("number", s[i:j]))
            i = j
        elif c == ".":
            j = i + 1
            while j < n and s[j] in "0123456789":
                j += 1
            out.append(("number", s[i:j]))
            i = j
        elif c.isalpha() and c.isascii():
            j = i
            while j < n and s[j].isascii() and s[j].isalpha():
                j += 1
            word = s[i:j].lower()
            if j < n and (s[j] in "-/." or (s[j] in "+0123456789" and word[:10] not in _DATETKTBL)):
                # a date or zone name with punctuation: kept whole, rejected when reached
                while j < n and ((s[j].isascii() and s[j].isalnum()) or s[j] in "+-/_.:"):
                    j += 1
                out.append(("date", s[i:j].lower()))
            else:
                out.append(("string", word))
            i = j
        elif c in "+-":
            j = i + 1
            while j < n and s[j] in _WS:
                j += 1
            if j < n and s[j] in "0123456789":
                k = j
                while k < n and s[k] in "0123456789:.-":
                    k += 1
                out.append(("tz", c + s[j:k]))
                i = k
            else:
                raise _BadSyntax
        elif c in _PUNCT:
            i += 1  # other punctuation only separates fields
        else:
            raise _BadSyntax
    return out


class _Itm:
    """PostgreSQL's pg_itm_in, with its overflow checks (_BadField = field overflow)."""

    __slots__ = ("year", "mon", "mday", "usec")

    def __init__(self) -> None:
        self.year = self.mon = self.mday = self.usec = 0

    def add_usec(self, us: int) -> None:
        self.usec += us
        if not _INT64_MIN <= self.usec <= _INT64_MAX:
            raise _BadField

    def fract_usec(self, frac: float, scale: int) -> None:
        if frac:
            frac *= scale
            us = int(frac)
            self.add_usec(us + round(frac - us))

    def fract_days(self, frac: float, scale: int) -> None:
        if frac:
            frac *= scale
            extra = int(frac)
            self.mday = _i32(self.mday + extra)
            self.fract_usec(frac - extra, _US_PER_DAY)

    def add(self, val: int, fval: float, unit: int) -> None:
        scale = _US_SCALE.get(unit)
        if scale is not None:
            self.add_usec(_i64(val * scale))
            self.fract_usec(fval, scale)
        elif unit == _DAY:
            self.mday = _i32(self.mday + _i32(val))
            self.fract_usec(fval, _US_PER_DAY)
        elif unit == _WEEK:
            self.mday = _i32(self.mday + _i32(_i32(val) * 7))
            self.fract_days(fval, 7)
        elif unit == _MONTH:
            self.mon = _i32(self.mon + _i32(val))
            self.fract_days(fval, 30)
        else:
            scale = _YEAR_SCALE[unit]
            self.year = _i32(self.year + _i32(_i32(val) * scale))
            self.mon = _i32(self.mon + int(round(fval * scale * 12)))


def _i32(v: int) -> int:
    if not _INT32_MIN <= v <= _INT32_MAX:
        raise _BadField
    return v


def _i64(v: int) -> int:
    if not _INT64_MIN <= v <= _INT64_MAX:
        raise _BadField
    return v


_LEAD_INT = re.compile(r"[+-]?[0-9]*")


def _interval_time(tok: str) -> int:
    """DecodeTimeForInterval: h:m[:s[.f]] or m:s.f, hours unbounded."""
    m = re.fullmatch(r"([0-9]+):([0-9]*)(?:(\.[0-9.]*)|:([0-9]*)(\.[0-9.]*)?)?", tok)
    if m is None:
        raise _BadSyntax
    hour, mins = _i64(int(m.group(1))), int(m.group(2) or 0)
    sec, frac = 0, m.group(3) or m.group(5)
    if m.group(3):  # mm:ss.fff
        hour, mins, sec = 0, hour, mins
    elif m.group(4) is not None:
        sec = int(m.group(4) or 0)
    fsec = 0
    if frac:
        try:
            fsec = round(float(frac) * 1_000_000)
        except ValueError:
            raise _BadSyntax from None
    if mins > 59 or sec > 60 or fsec > 1_000_000:
        raise _BadField
    return _i64(hour * 3_600_000_000 + mins * 60_000_000 + sec * 1_000_000 + fsec)


def _decode_interval(fields: list[tuple[str, str]]) -> _Itm:
    itm = _Itm()
    fmask = 0
    unit = 0  # the unit named to the right of the current field; 0: none yet
    is_before = False
    for kind, tok in reversed(fields):
        tmask = 0
        if kind == "time" or (kind == "tz" and ":" in tok[1:] and _time_ok(tok[1:])):
            us = _interval_time(tok.lstrip("+-"))
            itm.usec = -us if tok[0] == "-" else us  # replaces, as in PostgreSQL
            tmask, unit = _TIME_M, _DAY
        elif kind in ("tz", "date", "number"):
            if unit == 0:
                unit = _SECOND
            m = _LEAD_INT.match(tok)
            assert m is not None
            digits = m.group()
            if digits.lstrip("+-") == "":
                val = 0
            else:
                val = int(digits)
                if not _INT64_MIN <= val <= _INT64_MAX:
                    raise _BadField
            rest = tok[m.end() :]
            fval = 0.0
            if rest.startswith("-"):  # SQL year-month: 1-2
                m2 = re.fullmatch(r"-([0-9]*)(.*)", rest)
                assert m2 is not None
                val2 = int(m2.group(1) or 0)
                if val2 >= 12:
                    raise _BadField
                if m2.group(2):
                    raise _BadSyntax
                unit = _MONTH
                val = _i64(val * 12 + (-val2 if tok[0] == "-" else val2))
            elif rest.startswith("."):
                if len(rest) > 1:
                    try:
                        fval = float(rest)
                    except ValueError:
                        raise _BadSyntax from None
                if tok[0] == "-":
                    fval = -fval
            elif rest:
                raise _BadSyntax
            if unit < 0:  # "ago" right after a plain number
                raise _BadSyntax
            itm.add(val, fval, unit)
            tmask = {_SECOND: _SECOND if fval == 0 else _ALL_SECS}.get(unit, unit)
            if unit == _HOUR:
                unit = _DAY
        else:
            u = _UNITS.get(tok[:10], _AGO if tok == "ago" else _IGNORE if tok == "@" else 0)
            if u == 0:
                raise _BadSyntax
            if u == _AGO:
                is_before = True
                unit = -3  # a number left of "ago" without its own unit is an error
            elif u != _IGNORE:
                unit = u
            continue
        if tmask & fmask:
            raise _BadSyntax
        fmask |= tmask
    if fmask == 0:
        raise _BadSyntax
    if is_before:
        itm.year, itm.mon, itm.mday = _i32(-itm.year), _i32(-itm.mon), _i32(-itm.mday)
        itm.usec = _i64(-itm.usec)
    return itm


def _time_ok(tok: str) -> bool:
    try:
        _interval_time(tok)
        return True
    except (_BadSyntax, _BadField):
        return False


_ISO_NUM = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _iso_number(s: str, pos: int) -> tuple[int, float, int, int]:
    """ParseISO8601Number: (integer part, fraction, digits in the integer, end)."""
    m = _ISO_NUM.match(s, pos)
    if m is None:
        raise _BadSyntax
    v = float(m.group())
    if not -1e15 <= v <= 1e15:
        raise _BadField
    ipart = math.floor(v) if v >= 0 else -math.floor(-v)
    width = len(re.match(r"-?([0-9]*)", s[pos:]).group(1))  # type: ignore[union-attr]
    return ipart, v - ipart, width, m.end()


def _decode_iso_interval(s: str) -> _Itm:
    """DecodeISO8601Interval: P1Y2M3DT4H5M6S, P1W, P0001-02-03T04:05:06, P00010203T..."""
    if len(s) < 2 or s[0] != "P":
        raise _BadSyntax
    itm = _Itm()
    datepart, havefield = True, False
    pos, n = 1, len(s)
    while pos < n:
        if s[pos] == "T":
            datepart, havefield = False, False
            pos += 1
            continue
        val, fval, width, pos = _iso_number(s, pos)
        unit = s[pos] if pos < n else ""
        pos += 1
        if datepart:
            if unit in ("Y", "M", "W", "D"):
                itm.add(val, fval, {"Y": _YEAR, "M": _MONTH, "W": _WEEK, "D": _DAY}[unit])
            elif unit in ("T", "") and width == 8 and not havefield:
                itm.year = _i32(itm.year + val // 10000)
                itm.mon = _i32(itm.mon + val // 100 % 100)
                itm.mday = _i32(itm.mday + val % 100)
                itm.fract_usec(fval, _US_PER_DAY)
                if unit == "":
                    return itm
                datepart = havefield = False
                continue
            elif unit in ("T", "", "-"):
                if havefield:
                    raise _BadSyntax
                itm.add(val, fval, _YEAR)
                if unit == "":
                    return itm
                if unit == "T":
                    datepart = havefield = False
                    continue
                for u in (_MONTH, _DAY):
                    val, fval, _, pos = _iso_number(s, pos)
                    itm.add(val, fval, u)
                    if pos == n:
                        return itm
                    if s[pos] == "T":
                        break
                    if s[pos] != "-" or u == _DAY:
                        raise _BadSyntax
                    pos += 1
                datepart = havefield = False
                pos += 1
                continue
            else:
                raise _BadSyntax
        else:
            if unit in ("H", "M", "S"):
                itm.add(val, fval, {"H": _HOUR, "M": _MINUTE, "S": _SECOND}[unit])
            elif unit == "" and width == 6 and not havefield:
                itm.add(val // 10000, 0.0, _HOUR)
                itm.add(val // 100 % 100, 0.0, _MINUTE)
                itm.add(val % 100, 0.0, _SECOND)
                itm.fract_usec(fval, 1)
                return itm
            elif unit in ("", ":"):
                if havefield:
                    raise _BadSyntax
                itm.add(val, fval, _HOUR)
                if unit == "":
                    return itm
                for u in (_MINUTE, _SECOND):
                    val, fval, _, pos = _iso_number(s, pos)
                    itm.add(val, fval, u)
                    if pos == n:
                        return itm
                    if s[pos] != ":" or u == _SECOND:
                        raise _BadSyntax
                    pos += 1
            else:
                raise _BadSyntax
        havefield = True
    return itm


def _parse_interval(s: str) -> Interval:
    try:
        itm = _decode_interval(_pg_fields(s))
    except _BadSyntax:
        itm = _decode_iso_interval(s)  # PostgreSQL tries ISO 8601 only after this fails
    months = itm.year * 12 + itm.mon
    if not _INT32_MIN <= months <= _INT32_MAX:
        raise DatetimeFieldOverflow("interval out of range")
    return Interval(months, itm.mday, itm.usec)


def _interval_in(v: Any) -> Interval:
    s = _as_str(v)
    try:
        return _parse_interval(s)
    except (_BadSyntax, ValueError):
        raise InvalidDatetimeFormat(f'invalid input syntax for type interval: "{s}"') from None
    except _BadField:
        raise SQLError(f'interval field value out of range: "{s}"', "22015") from None


_DecFactory = Callable[[ColumnType, SessionFormat], Decoder]
_TEXT_DECODERS: dict[str, _DecFactory] = {
    "bool": lambda ct, s: _bool_in,
    "int2": lambda ct, s: _int_in("smallint", -(2**15), 2**15 - 1),
    "int4": lambda ct, s: _int_in("integer", _INT32_MIN, _INT32_MAX),
    "int8": lambda ct, s: _int_in("bigint", _INT64_MIN, _INT64_MAX),
    "oid": lambda ct, s: _oid_in,
    "float4": lambda ct, s: _float_in("real", True),
    "float8": lambda ct, s: _float_in("double precision", False),
    "numeric": lambda ct, s: _numeric_in(ct),
    "text": lambda ct, s: _text_in,
    "unknown": lambda ct, s: _text_in,
    "varchar": lambda ct, s: _varchar_in(ct),
    "bpchar": lambda ct, s: _bpchar_in(ct),
    "name": lambda ct, s: _name_in,
    "char": lambda ct, s: _char_in,
    "bytea": lambda ct, s: _bytea_in,
    "json": lambda ct, s: _json_in,
    "jsonb": lambda ct, s: _jsonb_in,
    "uuid": lambda ct, s: _uuid_in,
    "date": lambda ct, s: _date_in(s),
    "time": lambda ct, s: _time_in,
    "timestamp": lambda ct, s: _timestamp_in(s, False),
    "timestamptz": lambda ct, s: _timestamp_in(s, True),
    "interval": lambda ct, s: _interval_in,
}


@lru_cache(maxsize=4096)
def text_decoder(ct: ColumnType, *, session: SessionFormat = DEFAULT_SESSION) -> Decoder:
    """A function parsing a parameter in text format (str or UTF-8 bytes) into the
    Python representation, raising PostgreSQL's errors for bad input. `session`
    supplies the TimeZone for timestamptz input without a zone and the DateStyle
    field order."""
    factory = _TEXT_DECODERS.get(ct.pg.name)
    return factory(ct, session) if factory else _as_str


def parse_literal(ct: ColumnType, text: str, *, session: SessionFormat = DEFAULT_SESSION) -> Any:
    """The value of a literal `'text'::ct` (slow path: builds the decoder each call)."""
    return text_decoder(ct, session=session)(text)


# ---------------------------------------------------------------------------
# Binary input (PostgreSQL's typreceive functions).


def _bad_binary(type_name: str) -> SQLError:
    return SQLError(f"incorrect binary data format for type {type_name}", "22P03")


def _fixed(st: struct.Struct, type_name: str) -> Decoder:
    size, unpack = st.size, st.unpack

    def dec(v: Any) -> Any:
        if len(v) != size:
            raise _bad_binary(type_name)
        return unpack(v)[0]

    return dec


def _bool_recv(v: Any) -> bool:
    if len(v) != 1:
        raise _bad_binary("boolean")
    return v[0] != 0


def _float4_recv(v: Any) -> float:
    if len(v) != 4:
        raise _bad_binary("real")
    return _F4.unpack(v)[0]


def _numeric_recv(ct: ColumnType) -> Decoder:
    typmod = _numeric_typmod(ct)

    def dec(v: Any) -> Decimal:
        v = bytes(v)
        if len(v) < 8:
            raise _bad_binary("numeric")
        ndigits, weight, sign, dscale = _NUMERIC_HEAD.unpack_from(v)
        if len(v) != 8 + 2 * ndigits or ndigits < 0:
            raise _bad_binary("numeric")
        if sign == 0xC000:
            return typmod(Decimal("NaN"))
        if sign in (0xD000, 0xF000):
            return typmod(Decimal("Infinity" if sign == 0xD000 else "-Infinity"))
        if sign not in (0, 0x4000) or dscale < 0:
            raise SQLError('invalid sign in external "numeric" value', "22P03")
        digits = struct.unpack(f">{ndigits}H", v[8:])
        if any(dg > 9999 for dg in digits):
            raise SQLError('invalid digit in external "numeric" value', "22P03")
        coef = int("".join(f"{dg:04d}" for dg in digits) or "0")
        d = Decimal(f"{'-' if sign else ''}{coef}E{4 * (weight - ndigits + 1)}")
        # More digits than dscale shows are truncated away, as numeric_recv does.
        d = d.quantize(Decimal(1).scaleb(-dscale), context=_CTX_TRUNC)
        if not d and d.is_signed():
            d = -d
        return typmod(d)

    return dec


def _utf8_recv(v: Any) -> str:
    return _text_in(bytes(v))


def _date_recv(v: Any) -> Any:
    if len(v) != 4:
        raise _bad_binary("date")
    days = _I32.unpack(v)[0]
    if days == _INT32_MAX:
        return DATE_INFINITY
    if days == _INT32_MIN:
        return DATE_NEG_INFINITY
    return _date_from_days(days + _UNIX_TO_PG_DAYS)


def _ts_recv(with_tz: bool) -> Decoder:
    def dec(v: Any) -> Any:
        if len(v) != 8:
            raise _bad_binary("timestamp")
        us = _I64.unpack(v)[0]
        if us == _INT64_MAX:
            return TIMESTAMP_INFINITY
        if us == _INT64_MIN:
            return TIMESTAMP_NEG_INFINITY
        us += _UNIX_TO_PG_US
        if not _MIN_TS_US <= us < _END_TS_US:
            raise DatetimeFieldOverflow("timestamp out of range")
        return _ts_from_us(us, with_tz)

    return dec


def _time_recv(v: Any) -> Any:
    if len(v) != 8:
        raise _bad_binary("time")
    us = _I64.unpack(v)[0]
    if not 0 <= us <= _US_PER_DAY:
        raise DatetimeFieldOverflow("time out of range")
    return _time_from_us(us)


def _interval_recv(v: Any) -> Interval:
    if len(v) != 16:
        raise _bad_binary("interval")
    us, days, months = _INTERVAL_BIN.unpack(v)
    return Interval(months, days, us)


def _uuid_recv(v: Any) -> _uuid.UUID:
    if len(v) != 16:
        raise _bad_binary("uuid")
    return _uuid.UUID(bytes=bytes(v))


def _jsonb_recv(v: Any) -> str:
    v = bytes(v)
    if not v or v[0] != 1:
        raise SQLError(f"unsupported jsonb version number {v[0] if v else 0}", "22P03")
    return normalize_jsonb(_utf8_recv(v[1:]))


def _via_text(dec: Decoder) -> Decoder:
    """Types whose binary form is their text (varchar, json...): decode, then check."""
    return lambda v: dec(_utf8_recv(v))


_BIN_DECODERS: dict[str, _DecFactory] = {
    "bool": lambda ct, s: _bool_recv,
    "int2": lambda ct, s: _fixed(_I16, "smallint"),
    "int4": lambda ct, s: _fixed(_I32, "integer"),
    "int8": lambda ct, s: _fixed(_I64, "bigint"),
    "oid": lambda ct, s: _fixed(_U32, "oid"),
    "float4": lambda ct, s: _float4_recv,
    "float8": lambda ct, s: _fixed(_F8, "double precision"),
    "numeric": lambda ct, s: _numeric_recv(ct),
    "text": lambda ct, s: _utf8_recv,
    "unknown": lambda ct, s: _utf8_recv,
    "name": lambda ct, s: _via_text(_name_in),
    "varchar": lambda ct, s: _via_text(_varchar_in(ct)),
    "bpchar": lambda ct, s: _via_text(_bpchar_in(ct)),
    "char": lambda ct, s: lambda v: bytes(v)[:1].decode("utf-8", "replace"),
    "json": lambda ct, s: _via_text(_json_in),
    "jsonb": lambda ct, s: _jsonb_recv,
    "bytea": lambda ct, s: bytes,
    "uuid": lambda ct, s: _uuid_recv,
    "date": lambda ct, s: _date_recv,
    "time": lambda ct, s: _time_recv,
    "timestamp": lambda ct, s: _ts_recv(False),
    "timestamptz": lambda ct, s: _ts_recv(True),
    "interval": lambda ct, s: _interval_recv,
}


@lru_cache(maxsize=4096)
def binary_decoder(ct: ColumnType, *, session: SessionFormat = DEFAULT_SESSION) -> Decoder:
    """A function parsing a parameter in binary format (bytes) into the Python
    representation, validating it like PostgreSQL's receive functions."""
    factory = _BIN_DECODERS.get(ct.pg.name)
    return factory(ct, session) if factory else _utf8_recv
