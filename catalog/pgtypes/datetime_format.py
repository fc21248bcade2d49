"""PostgreSQL 15's to_char of timestamps, dates, times and intervals and its reverse,
to_date/to_timestamp (formatting.c's DCH_to_char and DCH_from_char), template pattern by
template pattern, in the C locale (English names). Values are PostgreSQL's broken-down
time (`Tm`: astronomical year, so 1 BC is year 0). Errors are SQLErrors with
PostgreSQL's SQLSTATE and wording."""

from __future__ import annotations

import re
from dataclasses import dataclass

from headwater.catalog.pgtypes.days import civil_from_days, days_from_civil, days_in_month
from headwater.catalog.pgtypes.format_template import (
    DCH_DIGIT,
    Node,
    invalid_format,
    is_separator,
    ordinal_suffix,
    parse_format,
)

from headwater.errors import SQLError

MONTHS = (
    "January February March April May June July August September October November December"
).split()
DAYS = "Sunday Monday Tuesday Wednesday Thursday Friday Saturday".split()
_RM = "I II III IV V VI VII VIII IX X XI XII".split()
_JULIAN_1970 = 2440588  # date2j(1970, 1, 1)


# -- to_char of dates and times ----------
@dataclass
class Tm:
    """PostgreSQL's struct pg_tm for to_char: year is astronomical for timestamps."""

    year: int = 0
    mon: int = 0
    mday: int = 0
    hour: int = 0
    min: int = 0
    sec: int = 0
    fsec: int = 0  # microseconds
    wday: int = 0  # 0 = Sunday
    yday: int = 0
    gmtoff: int = 0  # seconds east of UTC
    zone: str | None = None  # the abbreviation TZ prints (None: a timestamp without one)


def tm_from_us(local_us: int, gmtoff: int = 0, zone: str | None = None) -> Tm:
    """The broken-down local time of microseconds since 1970-01-01 (local wall clock)."""
    days, us = divmod(local_us, 86_400_000_000)
    y, m, d = civil_from_days(days)
    secs, fsec = divmod(us, 1_000_000)
    return Tm(
        y, m, d, secs // 3600, secs // 60 % 60, secs % 60, fsec,
        (days + 4) % 7, days - days_from_civil(y, 1, 1) + 1, gmtoff, zone,
    )  # fmt: skip


def tm_from_interval(months: int, days: int, us: int) -> Tm:
    """interval2tm: the time part split into hours (unbounded), minutes and seconds."""
    year, mon = int(months / 12), months - 12 * int(months / 12)
    hour = int(us / 3_600_000_000)
    rest = us - hour * 3_600_000_000
    minute = int(rest / 60_000_000)
    rest -= minute * 60_000_000
    sec = int(rest / 1_000_000)
    return Tm(year, mon, days, hour, minute, sec, rest - sec * 1_000_000, 0,
              (year * 12 + mon) * 30 + days)  # fmt: skip


def _isoweek_start(year: int) -> int:
    """Days since 1970 of the Monday of ISO week 1 of `year`."""
    jan4 = days_from_civil(year, 1, 4)
    return jan4 - (jan4 + 3) % 7


def iso_year_week(year: int, mon: int, mday: int) -> tuple[int, int, int]:
    """(ISO year, ISO week, ISO day of year) of a date."""
    d = days_from_civil(year, mon, mday)
    iy = year
    if d < _isoweek_start(year):
        iy -= 1
    elif d >= _isoweek_start(year + 1):
        iy += 1
    start = _isoweek_start(iy)
    return iy, (d - start) // 7 + 1, d - start + 1


def _pad(value: int, width: int, fm: bool, signed: bool = True) -> str:
    """sprintf("%0*d", fm ? 0 : width (one more if negative and `signed`), value)."""
    if fm:
        return str(value)
    w = width if value >= 0 or not signed else width + 1
    return f"{value:0{w}d}"


def _c_mod(a: int, b: int) -> int:
    """C's %: the remainder has the dividend's sign."""
    return a - b * int(a / b)


def _case(word: str, key: str) -> str:
    """A name in the case the keyword is written: MONTH, Month or month."""
    if key.isupper():
        return word.upper()
    if key.islower():
        return word.lower()
    return word


def _adjust_year(year: int, interval: bool) -> int:
    return year if interval or year > 0 else -(year - 1)


def dch_to_char(tm: Tm, fmt: str, interval: bool = False) -> str:
    out: list[str] = []
    for n in parse_format(fmt, False):
        if n.kind != "action":
            out.append(n.text)
            continue
        k, u = n.key, n.upper
        if interval and u in ("MONTH", "MON", "DAY", "DY", "D", "ID", "A.D.", "B.C.", "AD", "BC"):
            raise invalid_format(
                "invalid format specification for an interval value",
                "Intervals are not tied to specific calendar dates.",
            )
        s: str | None = None  # a number, to which TH applies
        if u in ("A.M.", "P.M.", "AM", "PM"):
            pm = _c_mod(tm.hour, 24) >= 12
            word = ("P.M." if pm else "A.M.") if "." in u else ("PM" if pm else "AM")
            out.append(word if k[0].isupper() else word.lower())
        elif u in ("HH", "HH12"):
            h = _c_mod(tm.hour, 12)  # an interval's hours may be negative
            s = _pad(12 if h == 0 else h, 2, n.fm)
        elif u == "HH24":
            s = _pad(tm.hour, 2, n.fm)
        elif u == "MI":
            s = _pad(tm.min, 2, n.fm)
        elif u == "SS":
            s = _pad(tm.sec, 2, n.fm)
        elif u.startswith("FF") or u in ("MS", "US"):
            digits = 3 if u == "MS" else 6 if u == "US" else int(u[2])
            s = f"{int(tm.fsec / 10 ** (6 - digits)):0{digits}d}"
        elif u in ("SSSS", "SSSSS"):
            s = str(tm.hour * 3600 + tm.min * 60 + tm.sec)
        elif u == "TZ":
            if tm.zone is not None:
                out.append(tm.zone if k == "TZ" else tm.zone.lower())
        elif u == "TZH":
            out.append(f"{'+' if tm.gmtoff >= 0 else '-'}{abs(tm.gmtoff) // 3600:02d}")
        elif u == "TZM":
            out.append(f"{abs(tm.gmtoff) % 3600 // 60:02d}")
        elif u == "OF":
            g = abs(tm.gmtoff)
            text = f"{'+' if tm.gmtoff >= 0 else '-'}{_pad(g // 3600, 2, n.fm)}"
            if g % 3600:
                text += f":{g % 3600 // 60:02d}"
            out.append(text)
        elif u in ("A.D.", "B.C.", "AD", "BC"):
            bc = tm.year <= 0
            word = ("B.C." if bc else "A.D.") if "." in u else ("BC" if bc else "AD")
            out.append(word if k[0].isupper() else word.lower())
        elif u in ("MONTH", "MON"):
            if not tm.mon:
                continue
            name = MONTHS[tm.mon - 1]
            if u == "MON":
                out.append(_case(name[:3], k))
            elif n.tm or n.fm:
                out.append(_case(name, k))
            else:
                out.append(f"{_case(name, k):<9}")
        elif u == "MM":
            s = _pad(tm.mon, 2, n.fm)
        elif u in ("DAY", "DY"):
            name = DAYS[tm.wday]
            if u == "DY":
                out.append(_case(name[:3], k))
            elif n.tm or n.fm:
                out.append(_case(name, k))
            else:
                out.append(f"{_case(name, k):<9}")
        elif u == "DDD":
            s = _pad(tm.yday, 3, n.fm, signed=False)
        elif u == "IDDD":
            s = _pad(iso_year_week(tm.year, tm.mon, tm.mday)[2], 3, n.fm, signed=False)
        elif u == "DD":
            s = _pad(tm.mday, 2, n.fm, signed=False)
        elif u == "D":
            s = str(tm.wday + 1)
        elif u == "ID":
            s = str(7 if tm.wday == 0 else tm.wday)
        elif u == "WW":
            s = _pad((tm.yday - 1) // 7 + 1, 2, n.fm, signed=False)
        elif u == "IW":
            s = _pad(iso_year_week(tm.year, tm.mon, tm.mday)[1] if tm.mon else 0, 2, n.fm)
        elif u == "Q":
            if not tm.mon:
                continue
            s = str((tm.mon - 1) // 3 + 1)
        elif u == "CC":
            if interval:
                i = int(tm.year / 100)
            else:
                i = (tm.year - 1) // 100 + 1 if tm.year > 0 else int(tm.year / 100) - 1
            s = _pad(i, 2, n.fm) if -99 <= i <= 99 else str(i)
        elif u == "Y,YYY":
            y = _adjust_year(tm.year, interval)
            s = f"{int(y / 1000)},{y - int(y / 1000) * 1000:03d}"
        elif u in ("YYYY", "IYYY", "YYY", "IYY", "YY", "IY", "Y", "I"):
            year = tm.year
            if u[0] == "I" and tm.mon:
                year = iso_year_week(tm.year, tm.mon, tm.mday)[0]
            y = _adjust_year(year, interval)
            width = {"YYYY": 4, "IYYY": 4, "YYY": 3, "IYY": 3, "YY": 2, "IY": 2}.get(u, 1)
            if width == 4:
                s = _pad(y, 4, n.fm)
            else:
                mod = 10**width
                v = y - int(y / mod) * mod  # C's %
                s = _pad(v, width, n.fm) if width > 1 else str(v)
        elif u == "RM":
            if not tm.mon:
                continue
            word = _RM[tm.mon - 1]
            word = word if k == "RM" else word.lower()
            out.append(word if n.fm else f"{word:<4}")
        elif u == "W":
            s = str((tm.mday - 1) // 7 + 1)
        elif u == "J":
            s = str(days_from_civil(tm.year, tm.mon, tm.mday) + _JULIAN_1970)
        # FX and anything else print nothing
        if s is not None:
            if n.th:
                s += ordinal_suffix(s, n.th == "TH")
            out.append(s)
    return "".join(out)


# -- to_date / to_timestamp ----------
_AMPM = ("am", "pm", "AM", "PM")
_AMPM_LONG = ("a.m.", "p.m.", "A.M.", "P.M.")
_ADBC = ("ad", "bc", "AD", "BC")
_ADBC_LONG = ("a.d.", "b.c.", "A.D.", "B.C.")
_RM_LOWER = ("xii", "xi", "x", "ix", "viii", "vii", "vi", "v", "iv", "iii", "ii", "i")


@dataclass
class _From:
    mode: str = ""  # "", "gregorian", "iso"
    hh: int = 0
    pm: int = 0
    mi: int = 0
    ss: int = 0
    ssss: int = 0
    d: int = 0
    dd: int = 0
    ddd: int = 0
    mm: int = 0
    ms: int = 0
    year: int = 0
    bc: int = 0
    ww: int = 0
    w: int = 0
    cc: int = 0
    j: int = 0
    us: int = 0
    yysz: int = 0
    clock12: bool = False
    tzsign: int = 0
    tzh: int = 0
    tzm: int = 0
    ff: int = 0


_ISO_KEYS = frozenset("IDDD ID IW IYYY IYY IY I".split())
_GREG_KEYS = frozenset("DDD DD D WW W MM MONTH MON Y,YYY YYYY YYY YY Y CC RM".split())


def _field_error(value: str, key: str, detail: str) -> SQLError:
    return invalid_format(f'invalid value "{value}" for "{key}"', detail)


def _set(out: _From, attr: str, value: int, key: str) -> None:
    old = getattr(out, attr)
    if old != 0 and old != value:
        raise invalid_format(
            f'conflicting values for "{key}" field in formatting string',
            "This value contradicts a previous setting for the same field type.",
        )
    setattr(out, attr, value)


_STRTOL = re.compile(r"\s*[+-]?\d+")


def _is_next_separator(nodes: tuple[Node, ...], i: int) -> bool:
    n = nodes[i]
    if n.kind == "action" and n.th:
        return True
    if i + 1 >= len(nodes):
        return True
    nxt = nodes[i + 1]
    if nxt.kind == "action":
        return nxt.key.upper() not in DCH_DIGIT and nxt.key not in DCH_DIGIT
    return not (len(nxt.text) == 1 and nxt.text.isdigit())


def from_char(text: str, fmt: str) -> tuple[int, int, int, int, int, int, int, int | None]:
    """do_to_timestamp: (year (astronomical), month, day, hour, minute, second,
    microseconds, zone offset in seconds east or None)."""
    nodes = parse_format(fmt, False)
    out = _From()
    s = 0
    n_in = len(text)
    fx = False
    extra_skip = 0

    def parse_int(attr: str | None, i: int, length: int) -> int:
        nonlocal s
        init = s
        while s < n_in and text[s].isspace():
            s += 1
        node = nodes[i]
        copy = text[s : s + length]
        if node.fm or _is_next_separator(nodes, i):
            m = _STRTOL.match(text, s)
            if not m:
                raise _field_error(copy, node.key, "Value must be an integer.")
            value = int(m.group())
            s = m.end()
        else:
            if len(copy) < length:
                raise invalid_format(
                    f'source string too short for "{node.key}" formatting field',
                    f"Field requires {length} characters, but only {len(copy)} remain.",
                )
            m = _STRTOL.match(copy)
            if not m:
                raise _field_error(copy, node.key, "Value must be an integer.")
            used = m.end()
            if 0 < used < length:
                raise _field_error(
                    copy, node.key,
                    f"Field requires {length} characters, but only {used} could be parsed.",
                )  # fmt: skip
            value = int(m.group())
            s += used
        if not -(2**31) <= value < 2**31:
            raise SQLError(
                f'value for "{node.key}" in source string is out of range', "22008",
                detail="Value must be in the range -2147483648 to 2147483647.",
            )  # fmt: skip
        if attr is not None:
            _set(out, attr, value, node.key)
        return s - init

    def seq_search(words: tuple[str, ...] | list[str], i: int) -> int:
        nonlocal s
        low = text[s:].lower()
        for idx, w in enumerate(words):
            if low.startswith(w.lower()):
                s += len(w)
                return idx
        copy = text[s : s + 9]
        copy = re.split(r"\s", copy)[0]
        raise _field_error(
            copy, nodes[i].key, "The given value did not match any of the allowed values "
            "for this field.",
        )  # fmt: skip

    def skip_th(node: Node) -> None:
        nonlocal s
        if node.th:
            s = min(s + 2, n_in)

    for i, n in enumerate(nodes):
        if s >= n_in:
            break
        if (
            not fx
            and not (n.kind == "action" and n.upper == "FX")
            and (n.kind == "action" or i == 0)
        ):
            while s < n_in and text[s].isspace():
                s += 1
                extra_skip += 1
        if n.kind in ("space", "separator"):
            if not fx:
                extra_skip -= 1
                if s < n_in and (text[s].isspace() or is_separator(text[s])):
                    s += 1
                    extra_skip += 1
            else:
                s += 1
            continue
        if n.kind != "action":
            if not fx:
                if extra_skip > 0:
                    extra_skip -= 1
                else:
                    s += 1
            else:
                s += 1
            continue
        u, k = n.upper, n.key
        mode = "iso" if k.upper() in _ISO_KEYS else "gregorian" if u in _GREG_KEYS else ""
        if mode:
            if out.mode and out.mode != mode:
                raise invalid_format(
                    "invalid combination of date conventions",
                    "Do not mix Gregorian and ISO week date conventions in a formatting template.",
                )
            out.mode = mode
        if u == "FX":
            fx = True
        elif u in ("A.M.", "P.M."):
            out.pm = seq_search(_AMPM_LONG, i) % 2
            out.clock12 = True
        elif u in ("AM", "PM"):
            out.pm = seq_search(_AMPM, i) % 2
            out.clock12 = True
        elif u in ("HH", "HH12"):
            parse_int("hh", i, 2)
            out.clock12 = True
            skip_th(n)
        elif u == "HH24":
            parse_int("hh", i, 2)
            skip_th(n)
        elif u == "MI":
            parse_int("mi", i, 2)
            skip_th(n)
        elif u == "SS":
            parse_int("ss", i, 2)
            skip_th(n)
        elif u == "MS":
            length = parse_int("ms", i, 3)
            out.ms *= 100 if length == 1 else 10 if length == 2 else 1
            skip_th(n)
        elif u.startswith("FF") or u == "US":
            width = 6 if u == "US" else int(u[2])
            if u != "US":
                out.ff = width
            length = parse_int("us", i, width)
            out.us *= 10 ** (6 - length) if length < 6 else 1
            skip_th(n)
        elif u in ("SSSS", "SSSSS"):
            parse_int("ssss", i, len(u))
            skip_th(n)
        elif u in ("TZ", "OF"):
            raise SQLError(f'formatting field "{k}" is only supported in to_char', "0A000")
        elif u == "TZH":
            c = text[s] if s < n_in else ""
            if c in ("+", "-", " "):
                out.tzsign = -1 if c == "-" else 1
                s += 1
            else:
                out.tzsign = -1 if extra_skip > 0 and s > 0 and text[s - 1] == "-" else 1
            parse_int("tzh", i, 2)
        elif u == "TZM":
            if not out.tzsign:
                out.tzsign = 1
            parse_int("tzm", i, 2)
        elif u in ("A.D.", "B.C."):
            out.bc = seq_search(_ADBC_LONG, i) % 2
        elif u in ("AD", "BC"):
            out.bc = seq_search(_ADBC, i) % 2
        elif u == "MONTH":
            _set(out, "mm", seq_search(MONTHS, i) + 1, k)
        elif u == "MON":
            _set(out, "mm", seq_search([m[:3] for m in MONTHS], i) + 1, k)
        elif u == "MM":
            parse_int("mm", i, 2)
            skip_th(n)
        elif u == "DAY":
            _set(out, "d", seq_search(DAYS, i) + 1, k)
        elif u == "DY":
            _set(out, "d", seq_search([x[:3] for x in DAYS], i) + 1, k)
        elif u == "DDD":
            parse_int("ddd", i, 3)
            skip_th(n)
        elif u == "IDDD":
            parse_int("ddd", i, 3)
            skip_th(n)
        elif u == "DD":
            parse_int("dd", i, 2)
            skip_th(n)
        elif u == "D":
            parse_int("d", i, 1)
            skip_th(n)
        elif u == "ID":
            parse_int("d", i, 1)
            out.d = 1 if out.d + 1 > 7 else out.d + 1
            skip_th(n)
        elif u in ("WW", "IW"):
            parse_int("ww", i, 2)
            skip_th(n)
        elif u == "Q":
            parse_int(None, i, 1)
            skip_th(n)
        elif u == "CC":
            parse_int("cc", i, 2)
            skip_th(n)
        elif u == "Y,YYY":
            m = re.match(r"\s*([+-]?\d+),(\d{3})", text[s:])
            if not m:
                raise invalid_format('invalid input string for "Y,YYY"')
            _set(out, "year", int(m.group(1)) * 1000 + int(m.group(2)), k)
            out.yysz = 4
            s += m.end()
            skip_th(n)
        elif u in ("YYYY", "IYYY", "YYY", "IYY", "YY", "IY", "Y", "I"):
            width = {"YYYY": 4, "IYYY": 4, "YYY": 3, "IYY": 3, "YY": 2, "IY": 2}.get(u, 1)
            length = parse_int("year", i, width)
            if width < 4 and length < 4:
                out.year = _adjust_partial_year(out.year)
            out.yysz = width
            skip_th(n)
        elif u == "RM":
            _set(out, "mm", 12 - seq_search(_RM_LOWER, i), k)
        elif u == "W":
            parse_int("w", i, 1)
            skip_th(n)
        elif u == "J":
            parse_int("j", i, 1)
            skip_th(n)
        if not fx:
            extra_skip = 0
            while s < n_in and text[s].isspace():
                s += 1
                extra_skip += 1
    return _finish(out, text)


def _adjust_partial_year(year: int) -> int:
    if year < 70:
        return year + 2000
    if year < 100:
        return year + 1900
    if year < 520:
        return year + 2000
    if year < 1000:
        return year + 1000
    return year


def _out_of_range(text: str) -> SQLError:
    return SQLError(f'date/time field value out of range: "{text}"', "22008")


def _finish(t: _From, text: str) -> tuple[int, int, int, int, int, int, int, int | None]:
    year, mon, mday, hour, minute, sec = 0, 1, 1, 0, 0, 0
    fmask_year = fmask_mon = fmask_day = False
    if t.ssss:
        hour, minute, sec = t.ssss // 3600, t.ssss % 3600 // 60, t.ssss % 60
    if t.ss:
        sec = t.ss
    if t.mi:
        minute = t.mi
    if t.hh:
        hour = t.hh
    if t.clock12:
        if hour < 1 or hour > 12:
            raise SQLError(
                f'hour "{hour}" is invalid for the 12-hour clock', "22007",
                hint="Use the 24-hour clock, or give an hour between 1 and 12.",
            )  # fmt: skip
        if t.pm and hour < 12:
            hour += 12
        elif not t.pm and hour == 12:
            hour = 0
    if t.year:
        if t.cc and t.yysz <= 2:
            cc = -t.cc if t.bc else t.cc
            year = t.year % 100
            if year:
                year = year + (cc - 1) * 100 if cc >= 0 else (cc + 1) * 100 - year + 1
            else:
                year = cc * 100 + (0 if cc >= 0 else 1)
        else:
            year = -t.year if t.bc else t.year
            if year < 0:
                year += 1
        fmask_year = True
    elif t.cc:
        cc = -t.cc if t.bc else t.cc
        year = (cc - 1) * 100 + 1 if cc >= 0 else cc * 100 + 1
        fmask_year = True
    full_date = False
    if t.j:
        year, mon, mday = civil_from_days(t.j - _JULIAN_1970)
        full_date = True
    if t.ww:
        if t.mode == "iso":
            start = _isoweek_start(year)
            day = start + (t.ww - 1) * 7 + ((t.d - 2) % 7 if t.d else 0)
            year, mon, mday = civil_from_days(day)
            full_date = True
        else:
            t.ddd = (t.ww - 1) * 7 + 1
    if t.w:
        t.dd = (t.w - 1) * 7 + 1
    if t.dd:
        mday = t.dd
        fmask_day = True
    if t.mm:
        mon = t.mm
        fmask_mon = True
    if t.ddd and (mon <= 1 or mday <= 1):
        if not year and not t.bc:
            raise invalid_format("cannot calculate day of year without year information")
        if t.mode == "iso":
            y, m, dd = civil_from_days(_isoweek_start(year) - 1 + t.ddd)
            year, mon, mday = y, m, dd
            full_date = True
        else:
            y, m, dd = civil_from_days(days_from_civil(year, 1, 1) + t.ddd - 1)
            if mon <= 1:
                mon = m
            if mday <= 1:
                mday = (
                    dd
                    if m == mon
                    else t.ddd - (days_from_civil(year, mon, 1) - days_from_civil(year, 1, 1))
                )
            fmask_mon = fmask_day = True
    fsec = t.ms * 1000 + t.us
    if fmask_year or fmask_mon or fmask_day or full_date:
        if (fmask_mon or full_date) and not 1 <= mon <= 12:
            raise _out_of_range(text)
        if (fmask_day or full_date) and not 1 <= mday <= 31:
            raise _out_of_range(text)
        if (full_date or (fmask_year and fmask_mon and fmask_day)) and mday > days_in_month(
            year, mon
        ):
            raise _out_of_range(text)
    if not (0 <= hour < 24 and 0 <= minute < 60 and 0 <= sec < 60 and 0 <= fsec < 1_000_000):
        raise _out_of_range(text)
    zone = None
    if t.tzsign:
        if not (0 <= t.tzh <= 15 and 0 <= t.tzm < 60):
            raise SQLError(f'time zone displacement out of range: "{text}"', "22009")
        zone = t.tzsign * (t.tzh * 3600 + t.tzm * 60)
    return year, mon, mday, hour, minute, sec, fsec, zone


def to_date_days(text: str, fmt: str) -> int:
    """to_date: days since 1970-01-01."""
    year, mon, mday, *_ = from_char(text, fmt)
    days = days_from_civil(year, mon, mday)
    if not -2_440_588 <= days < 2_145_042_906:
        raise SQLError(f'date out of range: "{text}"', "22008")
    return days


def to_timestamp_local(text: str, fmt: str) -> tuple[int, int | None]:
    """to_timestamp: (local microseconds since 1970, the zone offset given, if any)."""
    year, mon, mday, hour, minute, sec, fsec, zone = from_char(text, fmt)
    days = days_from_civil(year, mon, mday)
    us = ((days * 24 + hour) * 60 + minute) * 60_000_000 + sec * 1_000_000 + fsec
    return us, zone
