"""Time zones as PostgreSQL names them: IANA names in any case, numeric and POSIX
offsets (SET TIME ZONE), the abbreviations date/time input accepts, and the offset of
a zone at a local wall time."""

from __future__ import annotations

import datetime as _dt
import re
import zoneinfo
from functools import cache

from headwater.catalog.pgtypes.days import in_py_range, ts_from_us

from headwater.errors import InvalidParameterValue


@cache
def _zone_names() -> dict[str, str]:
    """Lower-cased IANA zone name -> its spelling (PostgreSQL matches names ignoring case)."""
    names = {n.lower(): n for n in zoneinfo.available_timezones()}
    names.setdefault("utc", "UTC")
    return names


_POSIX_TZ = re.compile(r"(?:<[^>]+>|[A-Za-z]{3,})([+-]?\d{1,2}(?::\d{1,2}(?::\d{1,2})?)?)")
_NUMERIC_TZ = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)")


def find_zone(name: str) -> zoneinfo.ZoneInfo | None:
    key = _zone_names().get(name.lower())
    return zoneinfo.ZoneInfo(key) if key else None


@cache
def resolve_timezone(name: str) -> _dt.tzinfo:
    """The tzinfo for a TimeZone setting: an IANA name (any case), a number of hours
    east of UTC ('+5', '-3.5'), or a POSIX 'STDoffset' spec (hours *west*: 'UTC+5').
    Raises InvalidParameterValue as SET TIME ZONE does for anything else."""
    z = find_zone(name.strip())
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


# A subset of PostgreSQL's default timezone_abbreviations (seconds east of UTC).
TZ_ABBREVIATIONS = {
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


def local_offset(zone: int | _dt.tzinfo, local_us: int) -> int:
    """Seconds east of UTC for a local wall time in `zone`. In a DST gap PostgreSQL
    takes the offset before the jump and in an overlap the one after it; both are
    the smaller of the two candidate offsets."""
    if isinstance(zone, int):
        return zone
    naive = ts_from_us(in_py_range(local_us), False)
    offs = []
    for fold in (0, 1):
        off = zone.utcoffset(naive.replace(fold=fold))
        assert off is not None
        offs.append(off.days * 86400 + off.seconds)
    return min(offs)
