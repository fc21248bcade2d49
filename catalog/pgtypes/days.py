"""Dates and times as day and microsecond numbers since 1970-01-01: PostgreSQL's
ranges, DuckDB's infinities, calendar arithmetic for dates Python's datetime cannot
hold, and conversions to and from Python's datetime values.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

# DuckDB's infinities, as ints in the Arrow representation (see the package docstring).
DATE_INFINITY = 2**31 - 1
DATE_NEG_INFINITY = -(2**31 - 1)
TIMESTAMP_INFINITY = 2**63 - 1
TIMESTAMP_NEG_INFINITY = -(2**63 - 1)

UTC = _dt.UTC
US_PER_DAY = 86_400_000_000
UNIX_TO_PG_DAYS = 10_957  # 2000-01-01 - 1970-01-01
UNIX_TO_PG_US = UNIX_TO_PG_DAYS * US_PER_DAY
ORD_2000 = 730_120  # date(2000, 1, 1).toordinal()
ORD_1970 = 719_163
EPOCH2000 = _dt.datetime(2000, 1, 1)
EPOCH2000_UTC = _dt.datetime(2000, 1, 1, tzinfo=UTC)

# PostgreSQL's ranges: dates from Julian day 0 (4714-11-24 BC) to 5874897-12-31;
# timestamps to 294276-12-31 23:59:59.999999 (in days/us since 1970).
MIN_DAYS = -2_440_588  # Julian day 0
END_DATE_DAYS = 2_145_042_906  # 5874898-01-01, exclusive
END_TS_US = 9_223_371_331_200_000_000 + UNIX_TO_PG_US  # 294277-01-01, exclusive
MIN_TS_US = MIN_DAYS * US_PER_DAY
_PY_MIN_DAYS = 1 - ORD_1970  # 0001-01-01
_PY_MAX_DAYS = 3_652_059 - ORD_1970  # 9999-12-31


def days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of proleptic Gregorian y-m-d (astronomical year: 1 BC = 0)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


def civil_from_days(z: int) -> tuple[int, int, int]:
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    return yoe + era * 400 + (m <= 2), m, d


def days_in_month(y: int, m: int) -> int:
    if m == 2:
        return 29 if (y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)) else 28
    return 30 if m in (4, 6, 9, 11) else 31


def ts_us(v: Any) -> int:
    """Microseconds since 1970 (UTC for aware values) of a datetime or its int form."""
    if type(v) is int:
        return v
    off = v.utcoffset()
    days = v.toordinal() - ORD_1970
    us = (days * 86400 + v.hour * 3600 + v.minute * 60 + v.second) * 1_000_000 + v.microsecond
    if off is not None:
        us -= (off.days * 86400 + off.seconds) * 1_000_000 + off.microseconds
    return us


_CYCLE_US = 146_097 * US_PER_DAY  # 400 Gregorian years: a whole number of weeks


def in_py_range(us: int) -> int:
    """An instant Python's datetime can hold that a time zone treats like `us`: before
    year 2 the zone's first offset (its LMT) applies; after year 9998 its rules repeat
    every 400 years, as PostgreSQL extrapolates them."""
    if us < (_PY_MIN_DAYS + 2) * US_PER_DAY:
        return (_PY_MIN_DAYS + 2) * US_PER_DAY
    limit = (_PY_MAX_DAYS - 2) * US_PER_DAY
    if us > limit:
        us -= -(-(us - limit) // _CYCLE_US) * _CYCLE_US
    return us


def date_from_days(days: int) -> Any:
    if _PY_MIN_DAYS <= days <= _PY_MAX_DAYS:
        return _dt.date.fromordinal(days + ORD_1970)
    return days


def ts_from_us(us: int, aware: bool) -> Any:
    if _PY_MIN_DAYS * US_PER_DAY <= us < (_PY_MAX_DAYS + 1) * US_PER_DAY:
        days, rem = divmod(us, US_PER_DAY)
        secs, micro = divmod(rem, 1_000_000)
        v = _dt.datetime.fromordinal(days + ORD_1970)
        v = v.replace(
            hour=secs // 3600,
            minute=secs // 60 % 60,
            second=secs % 60,
            microsecond=micro,
            tzinfo=UTC if aware else None,
        )
        return v
    return us


def time_from_us(us: int) -> Any:
    if 0 <= us < US_PER_DAY:
        secs, micro = divmod(us, 1_000_000)
        return _dt.time(secs // 3600, secs // 60 % 60, secs % 60, micro)
    return us


def fmt_frac(us: int) -> str:
    """'.5' for 500000 microseconds; '' for none (PostgreSQL drops trailing zeros)."""
    return ("." + f"{us:06d}".rstrip("0")) if us else ""
