"""Date/time constants in PostgreSQL's input syntax, for DuckDB.

`date 'Feb 16, 2001'`, `'20010216'::date`, `date '2001-02-16 BC'`, `interval '1-2'`,
`interval 'P1Y2M3DT4H5M6S'`, `time(2) '04:05:06.789'`, `'today'::date`, `'allballs'::time`:
DuckDB reads only ISO forms (and refuses typmods on time). A constant is read here with
PostgreSQL's rules (the codecs of catalog/pgtypes) and written back in the ISO form DuckDB
reads, rounded to the typmod's precision; invalid input raises PostgreSQL's error. The
words naming the clock ('now', 'today', ...) become expressions over the statement's
now(), in the session's time zone. Plain ISO constants are left as written. Ambiguous
dates (01/02/2020) are read in the order of the session's DateStyle (`DATE_ORDER`, which
the server sets for each statement), as PostgreSQL reads them when it parses them.
"""

from __future__ import annotations

import re
from contextvars import ContextVar
from typing import Any

import pglast.ast as A
from headwater.catalog.pgtypes import DEFAULT_SESSION, SessionFormat
from headwater.catalog.pgtypes.datetime_parse import BadField, BadSyntax, decode_datetime
from headwater.catalog.pgtypes.datetimes import date_in, time_in, timestamp_in
from headwater.catalog.pgtypes.days import US_PER_DAY, civil_from_days, days_from_civil
from headwater.catalog.pgtypes.interval import interval_in
from headwater.catalog.pgtypes.interval_parse import parse_interval
from headwater.planner.functions.nodes import call, cast, const

# 'MDY', 'DMY' or 'YMD': the statement's session's DateStyle order (server/executor.py)
DATE_ORDER: ContextVar[str] = ContextVar("DATE_ORDER", default="MDY")
_ORDERED = {o: SessionFormat(datestyle=f"ISO, {o}") for o in ("MDY", "DMY", "YMD")}


def _session() -> SessionFormat:
    """The input format of the statement's session (its DateStyle order)."""
    return _ORDERED.get(DATE_ORDER.get(), DEFAULT_SESSION)


_ISO_DATE = re.compile(r"\s*\d{4,}-\d\d-\d\d(?: \(BC\))?\s*")  # as this module writes it
# an ISO date or timestamp as DuckDB reads it (planner/pg_compat.py leaves such text too)
ISO_TIMESTAMP = re.compile(r"\s*\d{4}-\d\d-\d\d(?:[ T]\d\d:\d\d(?::\d\d(?:\.\d{1,6})?)?)?\s*")
_ISO_TIME = re.compile(r"\s*(?:[01]\d|2[0-4]):\d\d(?::\d\d(?:\.\d{1,6})?)?\s*")
# interval text DuckDB reads as PostgreSQL does: numbers with units, then hh:mm:ss
_PLAIN_INTERVAL = re.compile(
    r"\s*(?:-?\d+(?:\.\d+)?\s*[a-z]+\s*)*(?:-?\d+:\d\d(?::\d\d(?:\.\d+)?)?)?\s*", re.I
)
_FULL_RANGE = 32767  # INTERVAL_FULL_RANGE: no field restriction


def _type_of(tc: A.TypeCast) -> str:
    names = [n.sval for n in tc.typeName.names if isinstance(n, A.String)]
    return names[-1].lower() if names else ""


def _int_typmods(tc: A.TypeCast) -> list[int] | None:
    mods = tc.typeName.typmods or ()
    out = []
    for m in mods:
        if not (isinstance(m, A.A_Const) and isinstance(m.val, A.Integer)):
            return None
        out.append(m.val.ival)
    return out


def _round_us(us: int, precision: int | None) -> int:
    """AdjustTimestampForTypmod: half away from zero to `precision` fractional digits."""
    if precision is None or precision >= 6:
        return us
    q = 10 ** (6 - max(precision, 0))
    return (us + q // 2) // q * q if us >= 0 else -((-us + q // 2) // q * q)


def _clock(word: str, kind: str) -> Any:
    """'now', 'today', 'tomorrow', 'yesterday' as of the statement, in the session's zone."""
    now = call("now")
    if word == "now":
        value = now
    else:
        value = cast(now, "date")
        if word != "today":
            offset = const(1 if word == "tomorrow" else -1)
            value = A.A_Expr(kind=0, name=(A.String(sval="+"),), lexpr=value, rexpr=offset)
        if kind == "date":
            return value
    if kind == "timestamptz":
        return cast(value, "timestamptz") if word != "now" else value
    value = cast(value, "timestamp")
    return cast(value, "time") if kind == "time" else value


def _hms(us: int) -> str:
    secs, frac = divmod(us, 1_000_000)
    text = f"{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}"
    return text + (f".{frac:06d}" if frac else "")


def _text_cast(text: str, type_name: str) -> A.TypeCast:
    return cast(const(text), type_name)


def typed_literal(tc: A.TypeCast) -> Any | None:
    """The rewrite of `type 'text'` / `'text'::type` for date, time, timestamp,
    timestamptz and interval constants, or None to leave it as it is."""
    arg = tc.arg
    if not (isinstance(arg, A.A_Const) and isinstance(arg.val, A.String)):
        return None
    if tc.typeName.arrayBounds:  # '{2024-01-02}'::date[]: a list, each item DuckDB's cast
        return None
    kind = _type_of(tc)
    if kind not in ("date", "time", "timestamp", "timestamptz", "interval"):
        return None
    text = arg.val.sval
    mods = _int_typmods(tc)
    if mods is None:
        return None
    if kind == "interval":
        return _interval(text, mods)
    word = text.strip().lower()
    if word in ("now", "today", "tomorrow", "yesterday") and not (kind == "time" and word != "now"):
        return _clock(word, kind)
    if kind == "date":
        return _date(text)
    if kind == "time":
        return _time(text, mods[0] if mods else None)
    if kind == "timestamp":
        return _timestamp(text, mods[0] if mods else None)
    return None


def _fields(text: str, time_only: bool = False) -> Any | None:
    try:
        return decode_datetime(text, DATE_ORDER.get(), time_only=time_only)
    except (BadSyntax, BadField):
        return None  # the codec raises PostgreSQL's error


def _date(text: str) -> Any | None:
    if _ISO_DATE.fullmatch(text):
        if "(" not in text:
            date_in(DEFAULT_SESSION)(text)  # PostgreSQL's error for a bad day
        return None
    date_in(_session())(text)  # PostgreSQL's error for bad input
    f = _fields(text)
    if f is None or f.special:
        return None
    y, m, d = f.y, f.m, f.d
    iso = f"{y:04d}-{m:02d}-{d:02d}" if y > 0 else f"{1 - y:04d}-{m:02d}-{d:02d} (BC)"
    return _text_cast(iso, "date")


def _time(text: str, precision: int | None) -> Any | None:
    f = _fields(text, time_only=True)
    if f is not None and f.special == "allballs":
        return _text_cast("00:00:00", "time")
    if f is None or f.special or f.us is None:
        time_in(text)  # PostgreSQL's error
        return None
    if precision is None and _ISO_TIME.fullmatch(text):
        return None
    us = _round_us(f.us, precision)
    return _text_cast(_hms(us), "time")


def _timestamp(text: str, precision: int | None) -> Any | None:
    timestamp_in(_session(), False)(text)  # PostgreSQL's error for bad input
    if precision is None and ISO_TIMESTAMP.fullmatch(text):
        return None
    f = _fields(text)
    if f is None or f.special:
        return None
    us = days_from_civil(f.y, f.m, f.d) * US_PER_DAY + _round_us(f.us or 0, precision)
    days, tod = divmod(us, US_PER_DAY)
    y, m, d = civil_from_days(days)
    if y <= 0:
        return call("make_timestamp", const(us))
    return _text_cast(f"{y:04d}-{m:02d}-{d:02d} {_hms(tod)}", "timestamp")


def _interval(text: str, mods: list[int]) -> Any | None:
    precision = None
    if mods:
        if mods[0] != _FULL_RANGE or len(mods) != 2:
            return None  # fields (interval '90' day): pg_compat.interval_literal
        precision = mods[1]
    elif _PLAIN_INTERVAL.fullmatch(text):
        return None
    interval_in(text)  # PostgreSQL's error for bad input
    months, days, us = parse_interval(text)
    us = _round_us(us, precision)
    return _text_cast(f"{months} months {days} days {us} microseconds", "interval")
