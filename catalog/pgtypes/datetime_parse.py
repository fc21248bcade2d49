"""Date/time input split into fields, much like PostgreSQL 15's ParseDateTime and
DecodeDateTime: tokens, month and day names, AM/PM, BC, zones, run-together numbers.
The codecs in datetimes.py turn the fields into values and PostgreSQL's errors."""

from __future__ import annotations

import datetime as _dt
import re

from headwater.catalog.pgtypes.codec import WHITESPACE
from headwater.catalog.pgtypes.days import days_in_month
from headwater.catalog.pgtypes.timezones import TZ_ABBREVIATIONS, find_zone

from headwater.errors import InvalidParameterValue

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
DATETKTBL = frozenset(
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


class BadSyntax(Exception):
    pass


class BadField(Exception):
    pass


def _year(f: _Fields, text: str) -> int:
    f.y2 = len(text) <= 2
    return int(text)


def _set_ymd(f: _Fields, parts: list[str], order: str) -> None:
    """Assign the three fields of a date token (a month may be a name)."""
    named = [i for i, p in enumerate(parts) if not p.isdigit()]
    if named:
        if len(named) > 1 or parts[named[0]] not in _MONTHS:
            raise BadSyntax
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
        raise BadField
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
        raise BadField
    return sign * (h * 3600 + m * 60 + s)


def decode_datetime(s: str, order: str, time_only: bool = False) -> _Fields:
    """Split date/time input into fields, much like PostgreSQL's DecodeDateTime."""
    f = _Fields()
    text = _split_t(s.strip(WHITESPACE).lower())
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
            raise BadSyntax
        pos = m.end()
        kind, tok = m.lastgroup, m.group()
        if kind == "sep":
            continue
        if kind == "time":
            if f.us is not None:
                raise BadSyntax
            f.us = _parse_time_token(tok)
        elif kind == "date":
            if f.has_date:
                raise BadSyntax
            _set_ymd(f, re.split(r"[-/.]", tok), order)
        elif kind == "num":
            if text.startswith("-", pos) and ":" in text[pos:].split(None, 1)[0]:
                raise BadSyntax  # PostgreSQL reads 120000-08:00 as a broken date
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
                    raise BadField
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
                raise BadSyntax
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
                raise BadSyntax
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
                zone = TZ_ABBREVIATIONS.get(tok)
                f.zone = zone if zone is not None else find_zone(tok)
                if f.zone is None:
                    if "/" in tok:
                        raise InvalidParameterValue(f'time zone "{tok}" not recognized')
                    raise BadSyntax
            else:
                raise BadSyntax
    if f.m and not f.has_date:  # Jan 8 1999, 8 January 1999, January 8, 1999
        if len(nums) != 2:
            raise BadSyntax
        a, b = nums
        if len(a) >= 3 or (a.isdigit() and int(a) > 31):
            f.y, f.d = _year(f, a), int(b)
        else:
            f.d, f.y = int(a), _year(f, b)
        f.has_date = True
    elif nums:
        raise BadSyntax
    if ampm and f.us is not None:
        h = f.us // 3_600_000_000
        if h > 12:
            raise BadField
        if ampm == "am" and h == 12:
            f.us -= 12 * 3_600_000_000
        elif ampm == "pm" and h != 12:
            f.us += 12 * 3_600_000_000
    if f.has_date:
        if f.y2 and not f.bc:
            f.y += 2000 if f.y < 70 else 1900
        if f.y == 0 or not 1 <= f.m <= 12:
            raise BadField
        if f.bc:
            f.y = 1 - f.y
        if not 1 <= f.d <= days_in_month(f.y, f.m):
            raise BadField
    return f
