"""date, time, timestamp and timestamptz: the four codecs of each.

Values Python's datetime cannot hold (BC, year > 9999, +-infinity, time 24:00:00)
travel as ints (see days.py); decoders return the same forms.
"""

from __future__ import annotations

import datetime as _dt
import re
from functools import cache
from typing import Any

from headwater.catalog.pgtypes.codec import (
    I32,
    I64,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    Decoder,
    Encoder,
    as_str,
    bad_binary,
)
from headwater.catalog.pgtypes.datetime_parse import BadField, BadSyntax, decode_datetime
from headwater.catalog.pgtypes.days import (
    DATE_INFINITY,
    DATE_NEG_INFINITY,
    END_DATE_DAYS,
    END_TS_US,
    EPOCH2000,
    EPOCH2000_UTC,
    MIN_DAYS,
    MIN_TS_US,
    ORD_1970,
    ORD_2000,
    TIMESTAMP_INFINITY,
    TIMESTAMP_NEG_INFINITY,
    UNIX_TO_PG_DAYS,
    UNIX_TO_PG_US,
    US_PER_DAY,
    UTC,
    civil_from_days,
    date_from_days,
    days_from_civil,
    fmt_frac,
    in_py_range,
    time_from_us,
    ts_from_us,
    ts_us,
)
from headwater.catalog.pgtypes.session import SessionFormat
from headwater.catalog.pgtypes.timezones import local_offset

from headwater.errors import DatetimeFieldOverflow, InvalidDatetimeFormat

# -- Text output.


def _fmt_date_days(days: int) -> str:
    if days >= DATE_INFINITY:
        return "infinity"
    if days <= DATE_NEG_INFINITY:
        return "-infinity"
    y, m, d = civil_from_days(days)
    if y <= 0:
        return f"{1 - y:04d}-{m:02d}-{d:02d} BC"
    return f"{y:04d}-{m:02d}-{d:02d}"


def _fmt_ts_us(us: int, offset: str | None = None) -> str:
    """Timestamp text for local microseconds since 1970, with an optional zone suffix."""
    days, rem = divmod(us, US_PER_DAY)
    y, mo, d = civil_from_days(days)
    secs, micro = divmod(rem, 1_000_000)
    s = (
        f"{1 - y if y <= 0 else y:04d}-{mo:02d}-{d:02d} {secs // 3600:02d}:"
        f"{secs // 60 % 60:02d}:{secs % 60:02d}{fmt_frac(micro)}{offset or ''}"
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


def date_text(v: Any) -> bytes:
    try:
        return v.isoformat().encode()  # pads years < 1000 to 4 digits like PostgreSQL
    except AttributeError:
        return _fmt_date_days(v).encode()


def time_text(v: Any) -> bytes:
    if type(v) is int:
        secs, micro = divmod(v, 1_000_000)
        return (
            f"{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}{fmt_frac(micro)}"
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


def timestamp_text(v: Any) -> bytes:
    if type(v) is int:
        return _ts_int_text(v).encode()
    s = v.isoformat(" ")
    if v.microsecond:
        return s[:26].rstrip("0").encode()
    return s[:19].encode()


def timestamptz_text(session: SessionFormat) -> Encoder:
    tz = session.tzinfo

    def from_int(us: int) -> bytes:
        if us == TIMESTAMP_INFINITY or us <= TIMESTAMP_NEG_INFINITY:
            return _ts_int_text(us).encode()
        off = ts_from_us(in_py_range(us), True).astimezone(tz).utcoffset()
        assert off is not None
        secs = off.days * 86400 + off.seconds
        return _fmt_ts_us(us + secs * 1_000_000, _fmt_offset(secs)).encode()

    def enc(v: Any) -> bytes:
        if type(v) is int:
            return from_int(v)
        if v.tzinfo is None:
            v = v.replace(tzinfo=UTC)
        try:
            local = v.astimezone(tz)
        except OverflowError:  # the local time falls outside years 1..9999
            return from_int(ts_us(v))
        s = local.isoformat(" ")
        if local.microsecond:
            return (s[:26].rstrip("0") + _iso_offset(s[26:])).encode()
        return (s[:19] + _iso_offset(s[19:])).encode()

    return enc


# -- Binary output (typsend).


def date_bin(v: Any) -> bytes:
    if type(v) is int:
        if v >= DATE_INFINITY:
            return I32.pack(INT32_MAX)
        if v <= DATE_NEG_INFINITY:
            return I32.pack(INT32_MIN)
        return I32.pack(v - UNIX_TO_PG_DAYS)
    return I32.pack(v.toordinal() - ORD_2000)


def _ts_int_bin(us: int) -> bytes:
    if us == TIMESTAMP_INFINITY:
        return I64.pack(INT64_MAX)
    if us <= TIMESTAMP_NEG_INFINITY:
        return I64.pack(INT64_MIN)
    return I64.pack(us - UNIX_TO_PG_US)


def timestamp_bin(v: Any) -> bytes:
    if type(v) is int:
        return _ts_int_bin(v)
    if v.tzinfo is not None:  # a timestamptz value in a timestamp column: keep wall time
        v = v.replace(tzinfo=None)
    d = v - EPOCH2000
    return I64.pack((d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds)


def timestamptz_bin(v: Any) -> bytes:
    if type(v) is int:
        return _ts_int_bin(v)
    d = v - (EPOCH2000_UTC if v.tzinfo is not None else EPOCH2000)
    return I64.pack((d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds)


def time_bin(v: Any) -> bytes:
    if type(v) is int:
        return I64.pack(v)
    return I64.pack((v.hour * 3600 + v.minute * 60 + v.second) * 1_000_000 + v.microsecond)


# -- Text input, over datetime_parse's fields.


def _now_us() -> int:
    return ts_us(_dt.datetime.now(UTC))


def _special_days(special: str, session: SessionFormat) -> int:
    if special == "infinity":
        return DATE_INFINITY
    if special == "-infinity":
        return DATE_NEG_INFINITY
    if special == "epoch":
        return 0
    if special not in ("now", "today", "tomorrow", "yesterday"):
        raise BadSyntax
    now = _dt.datetime.now(session.tzinfo).date()
    return now.toordinal() - ORD_1970 + {"tomorrow": 1, "yesterday": -1}.get(special, 0)


def date_in(session: SessionFormat) -> Decoder:
    def dec(v: Any) -> Any:
        s = v if type(v) is str else as_str(v)
        if len(s) == 10 and s[4] == "-" and s[7] == "-" and s.isascii() and s[5:7].isdigit():
            try:
                return _dt.date.fromisoformat(s)  # the common YYYY-MM-DD; else the full parser
            except ValueError:
                pass
        try:
            f = decode_datetime(s, session.date_order)
            if f.special:
                days = _special_days(f.special, session)
                return days if days in (DATE_INFINITY, DATE_NEG_INFINITY) else date_from_days(days)
            if not f.has_date:
                raise BadSyntax
        except BadSyntax:
            raise InvalidDatetimeFormat(f'invalid input syntax for type date: "{s}"') from None
        except BadField:
            raise DatetimeFieldOverflow(f'date/time field value out of range: "{s}"') from None
        days = days_from_civil(f.y, f.m, f.d)
        if not MIN_DAYS <= days < END_DATE_DAYS:
            raise DatetimeFieldOverflow(f'date out of range: "{s}"')
        return date_from_days(days)

    return dec


def time_in(v: Any) -> Any:
    s = as_str(v)
    try:
        f = decode_datetime(s, "MDY", time_only=True)
        if f.special == "allballs":
            return _dt.time(0)
        if f.special == "now":
            return _dt.datetime.now(UTC).time()
        if f.special or f.us is None:
            raise BadSyntax
    except BadSyntax:
        raise InvalidDatetimeFormat(f'invalid input syntax for type time: "{s}"') from None
    except BadField:
        raise DatetimeFieldOverflow(f'date/time field value out of range: "{s}"') from None
    return time_from_us(f.us)


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
            off = local_offset(tz, ts_us(v))
        return (v - _dt.timedelta(seconds=off)).replace(tzinfo=UTC)
    except (ValueError, OverflowError):
        return None


def timestamp_in(session: SessionFormat, with_tz: bool) -> Decoder:
    type_name = "timestamp with time zone" if with_tz else "timestamp"
    fast_tz = session.tzinfo if with_tz else None

    def dec(v: Any) -> Any:
        s = v if type(v) is str else as_str(v)
        if len(s) >= 16 and s[4] == "-":
            fast = _ts_fast(s, fast_tz)
            if fast is not None:
                return fast
        try:
            f = decode_datetime(s, session.date_order)
            if f.special:
                if f.special == "infinity":
                    return TIMESTAMP_INFINITY
                if f.special == "-infinity":
                    return TIMESTAMP_NEG_INFINITY
                if f.special == "now":
                    us = _now_us()
                    if not with_tz:
                        us += local_offset(session.tzinfo, us) * 1_000_000
                    return ts_from_us(us, with_tz)
                f.us = 0
                days = _special_days(f.special, session)
                f.y, f.m, f.d = civil_from_days(days)
                f.zone = 0 if f.special == "epoch" else None
            elif not f.has_date:
                raise BadSyntax
        except BadSyntax:
            raise InvalidDatetimeFormat(
                f'invalid input syntax for type {type_name}: "{s}"'
            ) from None
        except BadField:
            raise DatetimeFieldOverflow(f'date/time field value out of range: "{s}"') from None
        us = days_from_civil(f.y, f.m, f.d) * US_PER_DAY + (f.us or 0)
        if with_tz:  # a timestamp without time zone ignores any zone given
            us -= local_offset(session.tzinfo if f.zone is None else f.zone, us) * 1_000_000
        if not MIN_TS_US <= us < END_TS_US:
            raise DatetimeFieldOverflow(f'timestamp out of range: "{s}"')
        return ts_from_us(us, with_tz)

    return dec


# -- Binary input (typreceive).


def date_recv(v: Any) -> Any:
    if len(v) != 4:
        raise bad_binary("date")
    days = I32.unpack(v)[0]
    if days == INT32_MAX:
        return DATE_INFINITY
    if days == INT32_MIN:
        return DATE_NEG_INFINITY
    return date_from_days(days + UNIX_TO_PG_DAYS)


def ts_recv(with_tz: bool) -> Decoder:
    def dec(v: Any) -> Any:
        if len(v) != 8:
            raise bad_binary("timestamp")
        us = I64.unpack(v)[0]
        if us == INT64_MAX:
            return TIMESTAMP_INFINITY
        if us == INT64_MIN:
            return TIMESTAMP_NEG_INFINITY
        us += UNIX_TO_PG_US
        if not MIN_TS_US <= us < END_TS_US:
            raise DatetimeFieldOverflow("timestamp out of range")
        return ts_from_us(us, with_tz)

    return dec


def time_recv(v: Any) -> Any:
    if len(v) != 8:
        raise bad_binary("time")
    us = I64.unpack(v)[0]
    if not 0 <= us <= US_PER_DAY:
        raise DatetimeFieldOverflow("time out of range")
    return time_from_us(us)
