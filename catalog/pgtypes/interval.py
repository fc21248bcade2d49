"""interval: the value (months, days, microseconds kept apart) and its four codecs,
text output in each IntervalStyle."""

from __future__ import annotations

import datetime as _dt
import struct
from typing import Any, NamedTuple

from headwater.catalog.pgtypes.codec import Encoder, as_str, bad_binary
from headwater.catalog.pgtypes.datetime_parse import BadField, BadSyntax
from headwater.catalog.pgtypes.days import fmt_frac
from headwater.catalog.pgtypes.interval_parse import parse_interval
from headwater.catalog.pgtypes.session import SessionFormat

from headwater.errors import InvalidDatetimeFormat, SQLError


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
    return (f"{abs(sec):02d}" if fill else str(abs(sec))) + fmt_frac(abs(fsec))


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
                + (fmt_frac(fus) if fus else "")
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


def interval_text(session: SessionFormat) -> Encoder:
    fmt = _INTERVAL_STYLES.get(session.intervalstyle.lower(), _interval_postgres)

    def enc(v: Any) -> bytes:
        return fmt(*_interval_parts(v)).encode()

    return enc


_INTERVAL_BIN = struct.Struct(">qii")


def interval_bin(v: Any) -> bytes:
    months, days, us = _interval_parts(v)
    return _INTERVAL_BIN.pack(us, days, months)


def interval_in(v: Any) -> Interval:
    s = as_str(v)
    try:
        return Interval(*parse_interval(s))
    except (BadSyntax, ValueError):
        raise InvalidDatetimeFormat(f'invalid input syntax for type interval: "{s}"') from None
    except BadField:
        raise SQLError(f'interval field value out of range: "{s}"', "22015") from None


def interval_recv(v: Any) -> Interval:
    if len(v) != 16:
        raise bad_binary("interval")
    us, days, months = _INTERVAL_BIN.unpack(v)
    return Interval(months, days, us)
