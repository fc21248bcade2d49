"""to_char, to_date, to_timestamp(text, text) and to_number on DuckDB.

The templates are PostgreSQL's (catalog/pgtypes/datetime_format.py and number_format.py
do the work): a call becomes `hw_to_char(x, fmt)` etc., a DuckDB macro with one overload
per argument type that hands a vectorized Arrow UDF the value's parts (local microseconds
and zone offset of a timestamp, months/days/microseconds of an interval, the exact text of
a number); the template is parsed once per distinct string.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from headwater.catalog.pgtypes import datetime_format as D
from headwater.catalog.pgtypes import number_format as N
from headwater.catalog.pgtypes.timezones import local_offset, resolve_timezone
from headwater.planner.functions.nodes import call, const, text_of

from headwater.errors import SQLError

_NUMERIC = "DECIMAL(38,16)"  # unconstrained numeric
_TIME_US = (
    "(CAST(hour(x) AS BIGINT) * 3600000000 + CAST(minute(x) AS BIGINT) * 60000000"
    " + date_part('microseconds', x))"
)
_IV_US = (
    "(date_part('hour', x) * 3600000000 + date_part('minute', x) * 60000000"
    " + date_part('microseconds', x))"
)
_IV_MONTHS = "(date_part('year', x) * 12 + date_part('month', x))"
_TZ_PARTS = (
    "epoch_us(CAST(x AS TIMESTAMP)), date_part('timezone', x), epoch_us(x),"
    " current_setting('TimeZone')"
)


# Template patterns DuckDB's strftime prints exactly as PostgreSQL does, for years 1000 to
# 9999 (keyed by the pattern as written, with FM/TM prefixes).
_STRFTIME = {
    "YYYY": "%Y", "YY": "%y", "MM": "%m", "DD": "%d", "HH24": "%H", "HH": "%I", "HH12": "%I",
    "MI": "%M", "SS": "%S", "MS": "%g", "US": "%f", "FF3": "%g", "FF6": "%f", "DDD": "%j",
    "Mon": "%b", "Dy": "%a", "AM": "%p", "PM": "%p", "FMDD": "%-d", "FMMM": "%-m",
    "FMHH24": "%-H", "FMHH": "%-I", "FMHH12": "%-I", "FMMI": "%-M", "FMSS": "%-S",
    "FMDDD": "%-j", "FMYYYY": "%Y", "FMMonth": "%B", "FMDay": "%A", "TMMonth": "%B",
    "TMDay": "%A", "TMMon": "%b", "TMDy": "%a", "FMMon": "%b", "FMDy": "%a",
}  # fmt: skip


def strftime_format(template: str) -> str | None:
    """The strftime format printing `template` as to_char does (for years 1000-9999),
    or None if some pattern needs PostgreSQL's own formatting."""
    out = []
    for n in D.parse_format(template, False):
        if n.kind != "action":
            out.append(n.text.replace("%", "%%"))
            continue
        if n.th or n.sp:
            return None
        key = ("FM" if n.fm else "") + ("TM" if n.tm and not n.fm else "") + n.key
        if key not in _STRFTIME:
            return None
        out.append(_STRFTIME[key])
    return "".join(out)


def macros() -> list[str]:
    # hw_to_char(x, template, strftime format or NULL). kind: 0 timestamp, 1 timestamptz
    # (local us, offset, utc us, zone), 2 interval (months, days, us). A date is a
    # timestamptz, as PostgreSQL resolves to_char(date).
    date_parts = (
        "epoch_us(CAST(CAST(x AS TIMESTAMP WITH TIME ZONE) AS TIMESTAMP)),"
        " date_part('timezone', CAST(x AS TIMESTAMP WITH TIME ZONE)),"
        " epoch_us(CAST(x AS TIMESTAMP WITH TIME ZONE)), current_setting('TimeZone')"
    )
    by_type = {
        "TIMESTAMP": "hw_to_char_time(0, epoch_us(x), 0, 0, NULL, f)",
        "TIMESTAMP WITH TIME ZONE": f"hw_to_char_time(1, {_TZ_PARTS}, f)",
        "DATE": f"hw_to_char_time(1, {date_parts}, f)",
    }
    # a constant template strftime prints: vectorized; PostgreSQL's code for the rest
    to_char = [
        f"(x {t}, f, s) AS CASE WHEN s IS NOT NULL AND year(x) BETWEEN 1000 AND 9999"
        f" THEN strftime(x, s) ELSE {call_sql} END"
        for t, call_sql in by_type.items()
    ]
    to_char += [
        f"(x TIME, f, s) AS hw_to_char_time(2, 0, 0, {_TIME_US}, NULL, f)",
        f"(x INTERVAL, f, s) AS hw_to_char_time(2, {_IV_MONTHS}, date_part('day', x), {_IV_US},"
        " NULL, f)",
        # numbers: typed overloads would send integers and decimals to the DOUBLE one;
        # typeof(x) is a constant DuckDB folds, so one branch runs
        "(x, f, s) AS CASE typeof(x)"
        " WHEN 'DOUBLE' THEN hw_to_char_float(CAST(x AS DOUBLE), 15, f)"
        " WHEN 'FLOAT' THEN hw_to_char_float(CAST(x AS DOUBLE), 6, f)"
        " WHEN 'VARCHAR' THEN error('[SQLSTATE 42725] function to_char(unknown, unknown)"
        " is not unique')"
        " WHEN 'BOOLEAN' THEN error('[SQLSTATE 42883] function to_char(boolean, unknown)"
        " does not exist')"
        " ELSE hw_to_char_numeric(CAST(x AS VARCHAR), f) END",
    ]
    return [
        f"CREATE OR REPLACE MACRO hw_to_char {', '.join(to_char)}",
        "CREATE OR REPLACE MACRO hw_to_timestamp (t, f) AS"
        " hw_to_timestamp_udf(t, f, current_setting('TimeZone'))",
        f"CREATE OR REPLACE MACRO hw_to_number (t, f) AS CAST(hw_to_number_udf(t, f)"
        f" AS {_NUMERIC})",
    ]


def _pg_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """PostgreSQL's errors out of a UDF, tagged for storage/duckdb_errors.py."""

    @functools.wraps(fn)
    def wrapped(*args: Any) -> Any:
        try:
            return fn(*args)
        except SQLError as e:
            raise ValueError(f"[SQLSTATE {e.sqlstate}] {e.message}") from None

    return wrapped


def _zone_abbrev(zone_name: str, utc_us: int, gmtoff: int) -> str:
    import datetime as dt

    try:
        tz = resolve_timezone(zone_name)
    except SQLError:
        tz = None
    if tz is not None and not isinstance(tz, dt.timezone):
        # beyond Python's years, the zone's abbreviation at the nearest year it has
        utc_us = min(max(utc_us, -62135596800000000 + 86400000000), 253402214400000000)
        when = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=utc_us)
        try:
            name = when.astimezone(tz).tzname()
        except (OverflowError, ValueError):
            name = None
        if name:
            return name
    sign = "+" if gmtoff >= 0 else "-"
    g = abs(gmtoff)
    text = f"{sign}{g // 3600:02d}"
    if g % 3600:
        text += f":{g % 3600 // 60:02d}"
    return text


@_pg_errors
def _to_char_time(kinds: Any, a: Any, b: Any, c: Any, zones: Any, fmts: Any) -> Any:
    import pyarrow as pa

    out = []
    for kind, x, y, z, zone, fmt in zip(
        kinds.to_pylist(), a.to_pylist(), b.to_pylist(), c.to_pylist(), zones.to_pylist(),
        fmts.to_pylist(), strict=True,
    ):  # fmt: skip
        if x is None or fmt is None or kind is None:
            out.append(None)
        elif kind == 2:
            out.append(D.dch_to_char(D.tm_from_interval(x, y, z), fmt, interval=True))
        elif kind == 1:
            tm = D.tm_from_us(x, y, _zone_abbrev(zone, z, y))
            out.append(D.dch_to_char(tm, fmt))
        else:
            out.append(D.dch_to_char(D.tm_from_us(x), fmt))
    return pa.array(out, pa.string())


@_pg_errors
def _to_char_numeric(values: Any, fmts: Any) -> Any:
    import pyarrow as pa

    out = []
    for v, fmt in zip(values.to_pylist(), fmts.to_pylist(), strict=True):
        if v is None or fmt is None:
            out.append(None)
            continue
        out.append(N.numeric_to_char(Decimal(v), fmt))
    return pa.array(out, pa.string())


@_pg_errors
def _to_char_float(values: Any, digits: Any, fmts: Any) -> Any:
    import pyarrow as pa

    out = []
    for v, d, fmt in zip(values.to_pylist(), digits.to_pylist(), fmts.to_pylist(), strict=True):
        out.append(None if v is None or fmt is None else N.float_to_char(v, fmt, d))
    return pa.array(out, pa.string())


@_pg_errors
def _to_date(texts: Any, fmts: Any) -> Any:
    import pyarrow as pa

    out = []
    for t, fmt in zip(texts.to_pylist(), fmts.to_pylist(), strict=True):
        out.append(None if t is None or fmt is None else D.to_date_days(t, fmt))
    return pa.array(out, pa.date32())


@_pg_errors
def _to_timestamp(texts: Any, fmts: Any, zones: Any) -> Any:
    import pyarrow as pa

    out = []
    for t, fmt, zone in zip(texts.to_pylist(), fmts.to_pylist(), zones.to_pylist(), strict=True):
        if t is None or fmt is None:
            out.append(None)
            continue
        local, offset = D.to_timestamp_local(t, fmt)
        if offset is None:
            offset = local_offset(resolve_timezone(zone or "UTC"), local)
        out.append(local - offset * 1_000_000)
    return pa.array(out, pa.timestamp("us", tz="UTC"))


@_pg_errors
def _to_number(texts: Any, fmts: Any) -> Any:
    import pyarrow as pa

    out = []
    for t, fmt in zip(texts.to_pylist(), fmts.to_pylist(), strict=True):
        out.append(None if t is None or fmt is None else format(N.to_number(t, fmt), "f"))
    return pa.array(out, pa.string())


def install(db: Any) -> None:
    db.create_function(
        "hw_to_char_time", _to_char_time,
        ["INTEGER", "BIGINT", "BIGINT", "BIGINT", "VARCHAR", "VARCHAR"], "VARCHAR",
        type="arrow", null_handling="special",
    )  # fmt: skip
    db.create_function(
        "hw_to_char_numeric", _to_char_numeric, ["VARCHAR", "VARCHAR"], "VARCHAR", type="arrow"
    )
    db.create_function(
        "hw_to_char_float", _to_char_float, ["DOUBLE", "INTEGER", "VARCHAR"], "VARCHAR",
        type="arrow",
    )  # fmt: skip
    db.create_function("hw_to_date", _to_date, ["VARCHAR", "VARCHAR"], "DATE", type="arrow")
    db.create_function(
        "hw_to_timestamp_udf", _to_timestamp, ["VARCHAR", "VARCHAR", "VARCHAR"],
        "TIMESTAMP WITH TIME ZONE", type="arrow",
    )  # fmt: skip
    db.create_function(
        "hw_to_number_udf", _to_number, ["VARCHAR", "VARCHAR"], "VARCHAR", type="arrow"
    )
    for sql in macros():
        db.execute(sql)


def _rename(name: str, arity: int) -> Callable[[list[Any]], Any | None]:
    def rewrite(args: list[Any]) -> Any | None:
        return call(name, *args) if len(args) == arity else None

    return rewrite


def _to_timestamp_call(args: list[Any]) -> Any | None:
    """to_timestamp(text, text), or to_timestamp(double precision) of an epoch."""
    if len(args) == 2:
        return call("hw_to_timestamp", *args)
    return call("hw_to_timestamp_epoch", *args) if len(args) == 1 else None


def _to_char_call(args: list[Any]) -> Any | None:
    if len(args) != 2:
        return None
    template = text_of(args[1])
    strf = strftime_format(template) if template is not None else None
    return call("hw_to_char", args[0], args[1], const(strf))


REWRITES = {
    "to_char": _to_char_call,
    "to_date": _rename("hw_to_date", 2),
    "to_timestamp": _to_timestamp_call,
    "to_number": _rename("hw_to_number", 2),
}
