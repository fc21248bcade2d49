"""extract(field FROM x) and date_part('field', x) as PostgreSQL 15 computes them.

extract gives numeric and date_part double precision, for every field PostgreSQL knows,
on date, time, timestamp, timestamptz and interval (DuckDB's date_part gives bigint and
loses the fraction of seconds, and has no `extract` function). The field is a constant
in nearly every query, so the call becomes `hw_extract_<field>(x)`: a DuckDB macro with
one overload per argument type, exact decimal arithmetic over DuckDB's native parts,
vectorized. A field the type has no value for raises PostgreSQL's error (0A000, or
22023 for a unit PostgreSQL does not know).
"""

from __future__ import annotations

from typing import Any

from headwater.planner.functions.nodes import call, cast, const, text_of

# The DuckDB types of PostgreSQL's date/time types, and PostgreSQL's names in errors.
_TYPES = {
    "DATE": "date",
    "TIMESTAMP": "timestamp without time zone",
    "TIMESTAMP WITH TIME ZONE": "timestamp with time zone",
    "TIME": "time without time zone",
    "TIME WITH TIME ZONE": "time with time zone",
    "INTERVAL": "interval",
}

# PostgreSQL's unit spellings (datetime.c's deltatktbl and datetktbl; tokens are cut to
# 10 characters before the lookup, as PostgreSQL does).
_UNITS: dict[str, str] = {}
for _field, _spellings in {
    "microseconds": "microsecon us usec usecs usecond useconds",
    "milliseconds": "millisecon ms msec msecs msecond mseconds",
    "second": "s sec secs second seconds",
    "minute": "m min mins minute minutes",
    "hour": "h hr hrs hour hours",
    "day": "d day days",
    "week": "w week weeks",
    "month": "mon mons month months",
    "quarter": "qtr quarter",
    "year": "y yr yrs year years",
    "decade": "dec decs decade decades",
    "century": "c cent century centuries",
    "millennium": "mil mils millennia millennium",
    "dow": "dow",
    "isodow": "isodow",
    "doy": "doy",
    "isoyear": "isoyear",
    "epoch": "epoch",
    "julian": "j jd julian",
    "timezone": "timezone",
    "timezone_hour": "timezone_h",
    "timezone_minute": "timezone_m",
}.items():
    for _s in _spellings.split():
        _UNITS[_s] = _field


def canonical_unit(text: str) -> str | None:
    return _UNITS.get(text.strip().lower()[:10])


# -- the parts, as DuckDB SQL over the argument `x` ----------
_US_6 = "CAST(0.000001 AS DECIMAL(6,6))"
_US_3 = "CAST(0.001 AS DECIMAL(3,3))"


def _num(expr: str) -> str:
    return f"CAST({expr} AS DECIMAL(18,0))"


def _calendar(y: str = "year(x)") -> dict[str, str]:
    """The fields of a date (or of a timestamp's local date): PostgreSQL's years have no
    year 0 (DuckDB's year 0 is 1 BC), and its decades, centuries and millennia count from
    there, as timestamp_part_common does."""
    iy = "isoyear(x)"
    return {
        "year": _num(f"CASE WHEN {y} > 0 THEN {y} ELSE {y} - 1 END"),
        "month": _num("month(x)"),
        "day": _num("day(x)"),
        "quarter": _num("quarter(x)"),
        "week": _num("week(x)"),
        "dow": _num("dayofweek(x)"),
        "isodow": _num("isodow(x)"),
        "doy": _num("dayofyear(x)"),
        "isoyear": _num(f"CASE WHEN {iy} > 0 THEN {iy} ELSE {iy} - 1 END"),
        "decade": _num(f"CASE WHEN {y} >= 0 THEN {y} // 10 ELSE -((8 - ({y} - 1)) // 10) END"),
        "century": _num(
            f"CASE WHEN {y} > 0 THEN ({y} + 99) // 100 ELSE -((99 - ({y} - 1)) // 100) END"
        ),
        "millennium": _num(
            f"CASE WHEN {y} > 0 THEN ({y} + 999) // 1000 ELSE -((999 - ({y} - 1)) // 1000) END"
        ),
    }


def _clock(us_of_day: str) -> dict[str, str]:
    """The fields of a time of day (of a time, or of a timestamp's local time)."""
    us = "date_part('microseconds', x)"  # seconds and their fraction, in microseconds
    return {
        "hour": _num("hour(x)"),
        "minute": _num("minute(x)"),
        "second": f"CAST({us} AS DECIMAL(18,0)) * {_US_6}",
        "milliseconds": f"CAST({us} AS DECIMAL(18,0)) * {_US_3}",
        "microseconds": _num(us),
        "_us_of_day": us_of_day,
    }


_TIME_US = (
    "(CAST(hour(x) AS BIGINT) * 3600000000 + CAST(minute(x) AS BIGINT) * 60000000"
    " + date_part('microseconds', x))"
)


def _timestamp(with_zone: bool) -> dict[str, str]:
    parts = {**_calendar(), **_clock(_TIME_US)}
    parts["epoch"] = f"CAST(epoch_us(x) AS DECIMAL(38,0)) * {_US_6}"
    # date2j + the day's fraction, a numeric quotient PostgreSQL shows with 20 decimals
    frac = f"(CAST({_TIME_US} AS HUGEINT) * 100000000000000000000 + 43200000000) // 86400000000"
    parts["julian"] = (
        "CAST(CAST(date_diff('day', DATE '2000-01-01', CAST(x AS DATE)) + 2451545 AS VARCHAR)"
        f" || '.' || lpad(CAST({frac} AS VARCHAR), 20, '0') AS DECIMAL(38,20))"
    )
    if with_zone:
        parts["timezone"] = _num("date_part('timezone', x)")
        parts["timezone_hour"] = _num("date_part('timezone_hour', x)")
        parts["timezone_minute"] = _num("date_part('timezone_minute', x)")
    del parts["_us_of_day"]
    return parts


def _date() -> dict[str, str]:
    parts = _calendar()
    parts["epoch"] = "CAST(date_diff('day', DATE '1970-01-01', x) AS DECIMAL(38,0)) * 86400"
    parts["julian"] = _num("date_diff('day', DATE '2000-01-01', x) + 2451545")
    return parts


def _time() -> dict[str, str]:
    parts = _clock(_TIME_US)
    parts["epoch"] = f"CAST({parts.pop('_us_of_day')} AS DECIMAL(38,0)) * {_US_6}"
    return parts


def _interval() -> dict[str, str]:
    """interval2itm's parts: months split into years and months, days as they are, the
    time into hours (unbounded), minutes and seconds; the epoch counts a year as 365.25
    days and a month as 30."""
    months = "(date_part('year', x) * 12 + date_part('month', x))"
    secs = (
        f"(31557600 * ({months} // 12) + 2592000 * ({months} % 12) + 86400 * date_part('day', x))"
    )
    parts = _clock(_TIME_US)
    parts["epoch"] = (
        f"CAST(CAST({secs} AS HUGEINT) * 1000000 + {parts.pop('_us_of_day')}"
        f" AS DECIMAL(38,0)) * {_US_6}"
    )
    year = "date_part('year', x)"
    parts.update(
        {
            "hour": _num("date_part('hour', x)"),
            "minute": _num("date_part('minute', x)"),
            "day": _num("date_part('day', x)"),
            "month": _num("date_part('month', x)"),
            "quarter": _num("date_part('month', x) // 3 + 1"),
            "year": _num(year),
            "decade": _num(f"{year} // 10"),
            "century": _num(f"{year} // 100"),
            "millennium": _num(f"{year} // 1000"),
        }
    )
    return parts


_PARTS: dict[str, dict[str, str]] = {
    "DATE": _date(),
    "TIMESTAMP": _timestamp(with_zone=False),
    "TIMESTAMP WITH TIME ZONE": _timestamp(with_zone=True),
    "TIME": _time(),
    "INTERVAL": _interval(),
}
FIELDS = sorted({f for parts in _PARTS.values() for f in parts})


def _raise(sqlstate: str, message: str) -> str:
    """An error with PostgreSQL's SQLSTATE (storage/duckdb_errors.py reads the tag);
    NULL for a NULL argument, as the function is strict."""
    message = message.replace("'", "''")
    return f"CASE WHEN x IS NULL THEN NULL ELSE error('[SQLSTATE {sqlstate}] {message}') END"


def macros() -> list[str]:
    """CREATE MACRO statements: hw_extract_<field> for every field, one overload per
    type; hw_extract_unknown(x, unit) raises PostgreSQL's error for an unknown unit."""
    out = []
    for field in FIELDS:
        overloads = []
        for duck, pg in _TYPES.items():
            expr = _PARTS.get(duck, {}).get(field)
            if expr is None:
                expr = _raise("0A000", f'unit "{field}" not supported for type {pg}')
            overloads.append(f"(x {duck}) AS {expr}")
        out.append(f"CREATE OR REPLACE MACRO hw_extract_{field} {', '.join(overloads)}")
    unknown = [
        f"(x {duck}, u) AS CASE WHEN x IS NULL THEN NULL ELSE error('[SQLSTATE 22023] unit \"'"
        f" || u || '\" not recognized for type {pg}') END"
        for duck, pg in _TYPES.items()
    ]
    out.append(f"CREATE OR REPLACE MACRO hw_extract_unknown {', '.join(unknown)}")
    # date_part(text, date) is date_part(text, timestamp) in PostgreSQL (no date variant)
    out.append(
        "CREATE OR REPLACE MACRO hw_date_as_timestamp (x DATE) AS CAST(x AS TIMESTAMP), (x) AS x"
    )
    return out


def _extract_call(unit: str, arg: Any) -> Any:
    field = canonical_unit(unit)
    if field is None:
        return call("hw_extract_unknown", arg, const(unit.strip().lower()))
    return call(f"hw_extract_{field}", arg)


def rewrite_extract(args: list[Any]) -> Any | None:
    if len(args) != 2 or (unit := text_of(args[0])) is None:
        return None
    return _extract_call(unit, args[1])


def rewrite_date_part(args: list[Any]) -> Any | None:
    if len(args) != 2 or (unit := text_of(args[0])) is None:
        return None
    inner = _extract_call(unit, call("hw_date_as_timestamp", args[1]))
    return cast(inner, "float8")
