"""Interval input: a port of PostgreSQL 15's ParseDateTime + DecodeInterval /
DecodeISO8601Interval.

Fields are read right to left so that a unit applies to the number before it, each
unit may appear once (field masks), and years, months, days and microseconds are
accumulated separately with PostgreSQL's int32/int64 limits and float rounding.
"""

from __future__ import annotations

import math
import re

from headwater.catalog.pgtypes.codec import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, WHITESPACE
from headwater.catalog.pgtypes.datetime_parse import DATETKTBL, BadField, BadSyntax
from headwater.catalog.pgtypes.days import US_PER_DAY

from headwater.errors import DatetimeFieldOverflow

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
        if c in WHITESPACE:
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
            if j < n and (s[j] in "-/." or (s[j] in "+0123456789" and word[:10] not in DATETKTBL)):
                # a date or zone name with punctuation: kept whole, rejected when reached
                while j < n and ((s[j].isascii() and s[j].isalnum()) or s[j] in "+-/_.:"):
                    j += 1
                out.append(("date", s[i:j].lower()))
            else:
                out.append(("string", word))
            i = j
        elif c in "+-":
            j = i + 1
            while j < n and s[j] in WHITESPACE:
                j += 1
            if j < n and s[j] in "0123456789":
                k = j
                while k < n and s[k] in "0123456789:.-":
                    k += 1
                out.append(("tz", c + s[j:k]))
                i = k
            else:
                raise BadSyntax
        elif c in _PUNCT:
            i += 1  # other punctuation only separates fields
        else:
            raise BadSyntax
    return out


class _Itm:
    """PostgreSQL's pg_itm_in, with its overflow checks (BadField = field overflow)."""

    __slots__ = ("year", "mon", "mday", "usec")

    def __init__(self) -> None:
        self.year = self.mon = self.mday = self.usec = 0

    def add_usec(self, us: int) -> None:
        self.usec += us
        if not INT64_MIN <= self.usec <= INT64_MAX:
            raise BadField

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
            self.fract_usec(frac - extra, US_PER_DAY)

    def add(self, val: int, fval: float, unit: int) -> None:
        scale = _US_SCALE.get(unit)
        if scale is not None:
            self.add_usec(_i64(val * scale))
            self.fract_usec(fval, scale)
        elif unit == _DAY:
            self.mday = _i32(self.mday + _i32(val))
            self.fract_usec(fval, US_PER_DAY)
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
    if not INT32_MIN <= v <= INT32_MAX:
        raise BadField
    return v


def _i64(v: int) -> int:
    if not INT64_MIN <= v <= INT64_MAX:
        raise BadField
    return v


_LEAD_INT = re.compile(r"[+-]?[0-9]*")


def _interval_time(tok: str) -> int:
    """DecodeTimeForInterval: h:m[:s[.f]] or m:s.f, hours unbounded."""
    m = re.fullmatch(r"([0-9]+):([0-9]*)(?:(\.[0-9.]*)|:([0-9]*)(\.[0-9.]*)?)?", tok)
    if m is None:
        raise BadSyntax
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
            raise BadSyntax from None
    if mins > 59 or sec > 60 or fsec > 1_000_000:
        raise BadField
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
                if not INT64_MIN <= val <= INT64_MAX:
                    raise BadField
            rest = tok[m.end() :]
            fval = 0.0
            if rest.startswith("-"):  # SQL year-month: 1-2
                m2 = re.fullmatch(r"-([0-9]*)(.*)", rest)
                assert m2 is not None
                val2 = int(m2.group(1) or 0)
                if val2 >= 12:
                    raise BadField
                if m2.group(2):
                    raise BadSyntax
                unit = _MONTH
                val = _i64(val * 12 + (-val2 if tok[0] == "-" else val2))
            elif rest.startswith("."):
                if len(rest) > 1:
                    try:
                        fval = float(rest)
                    except ValueError:
                        raise BadSyntax from None
                if tok[0] == "-":
                    fval = -fval
            elif rest:
                raise BadSyntax
            if unit < 0:  # "ago" right after a plain number
                raise BadSyntax
            itm.add(val, fval, unit)
            tmask = {_SECOND: _SECOND if fval == 0 else _ALL_SECS}.get(unit, unit)
            if unit == _HOUR:
                unit = _DAY
        else:
            u = _UNITS.get(tok[:10], _AGO if tok == "ago" else _IGNORE if tok == "@" else 0)
            if u == 0:
                raise BadSyntax
            if u == _AGO:
                is_before = True
                unit = -3  # a number left of "ago" without its own unit is an error
            elif u != _IGNORE:
                unit = u
            continue
        if tmask & fmask:
            raise BadSyntax
        fmask |= tmask
    if fmask == 0:
        raise BadSyntax
    if is_before:
        itm.year, itm.mon, itm.mday = _i32(-itm.year), _i32(-itm.mon), _i32(-itm.mday)
        itm.usec = _i64(-itm.usec)
    return itm


def _time_ok(tok: str) -> bool:
    try:
        _interval_time(tok)
        return True
    except (BadSyntax, BadField):
        return False


_ISO_NUM = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _iso_number(s: str, pos: int) -> tuple[int, float, int, int]:
    """ParseISO8601Number: (integer part, fraction, digits in the integer, end)."""
    m = _ISO_NUM.match(s, pos)
    if m is None:
        raise BadSyntax
    v = float(m.group())
    if not -1e15 <= v <= 1e15:
        raise BadField
    ipart = math.floor(v) if v >= 0 else -math.floor(-v)
    width = len(re.match(r"-?([0-9]*)", s[pos:]).group(1))  # type: ignore[union-attr]
    return ipart, v - ipart, width, m.end()


def _decode_iso_interval(s: str) -> _Itm:
    """DecodeISO8601Interval: P1Y2M3DT4H5M6S, P1W, P0001-02-03T04:05:06, P00010203T..."""
    if len(s) < 2 or s[0] != "P":
        raise BadSyntax
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
                itm.fract_usec(fval, US_PER_DAY)
                if unit == "":
                    return itm
                datepart = havefield = False
                continue
            elif unit in ("T", "", "-"):
                if havefield:
                    raise BadSyntax
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
                        raise BadSyntax
                    pos += 1
                datepart = havefield = False
                pos += 1
                continue
            else:
                raise BadSyntax
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
                    raise BadSyntax
                itm.add(val, fval, _HOUR)
                if unit == "":
                    return itm
                for u in (_MINUTE, _SECOND):
                    val, fval, _, pos = _iso_number(s, pos)
                    itm.add(val, fval, u)
                    if pos == n:
                        return itm
                    if s[pos] != ":" or u == _SECOND:
                        raise BadSyntax
                    pos += 1
            else:
                raise BadSyntax
        havefield = True
    return itm


def parse_interval(s: str) -> tuple[int, int, int]:
    """(months, days, microseconds) of interval input; BadSyntax, BadField (or
    ValueError) for input PostgreSQL refuses, DatetimeFieldOverflow past its range."""
    try:
        itm = _decode_interval(_pg_fields(s))
    except BadSyntax:
        itm = _decode_iso_interval(s)  # PostgreSQL tries ISO 8601 only after this fails
    months = itm.year * 12 + itm.mon
    if not INT32_MIN <= months <= INT32_MAX:
        raise DatetimeFieldOverflow("interval out of range")
    return months, itm.mday, itm.usec
