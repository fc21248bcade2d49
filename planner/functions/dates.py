"""The other date/time functions of PostgreSQL 15 that DuckDB lacks or computes
differently: justify_*, make_interval, make_date/make_time with PostgreSQL's checks,
date_bin, date_trunc (centuries and millennia start in years ending in 01, a date gives
timestamptz, the three-argument form with a zone), isfinite(interval), OVERLAPS,
clock_timestamp/statement_timestamp/timeofday, and CURRENT_DATE & co. All are DuckDB
macros over native functions, except the wall clock (a Python function: it must change
within a statement).
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

import pglast.ast as A
from headwater.planner.functions.extract import canonical_unit
from headwater.planner.functions.nodes import call, cast, const, copy, text_of

_DAY = "86400000000"
# an interval's parts, as interval2itm has them (months, days, microseconds)
_MONTHS = "(date_part('year', x) * 12 + date_part('month', x))"
_DAYS = "date_part('day', x)"
_US = (
    "(date_part('hour', x) * 3600000000 + date_part('minute', x) * 60000000"
    " + date_part('microseconds', x))"
)


def _err(sqlstate: str, message_sql: str) -> str:
    return f"error('[SQLSTATE {sqlstate}] ' || {message_sql})"


XACT_START = "hw_xact_start"  # the DuckDB variable holding a transaction block's start
MACROS = [
    "CREATE OR REPLACE MACRO hw_make_iv(m, d, t) AS"
    " to_months(CAST(m AS INTEGER)) + to_days(CAST(d AS INTEGER)) + to_microseconds(t)",
    # justify_hours: whole days out of the time, signs made to agree
    "CREATE OR REPLACE MACRO hw_jh(m, d, t) AS hw_make_iv(m,"
    " CASE WHEN d > 0 AND t < 0 THEN d - 1 WHEN d < 0 AND t > 0 THEN d + 1 ELSE d END,"
    f" CASE WHEN d > 0 AND t < 0 THEN t + {_DAY} WHEN d < 0 AND t > 0 THEN t - {_DAY}"
    " ELSE t END)",
    f"CREATE OR REPLACE MACRO justify_hours(x) AS hw_jh({_MONTHS}, {_DAYS} + {_US} // {_DAY},"
    f" {_US} % {_DAY})",
    # justify_days: whole 30-day months out of the days
    "CREATE OR REPLACE MACRO hw_jd(m, d, t) AS hw_make_iv("
    " CASE WHEN m > 0 AND d < 0 THEN m - 1 WHEN m < 0 AND d > 0 THEN m + 1 ELSE m END,"
    " CASE WHEN m > 0 AND d < 0 THEN d + 30 WHEN m < 0 AND d > 0 THEN d - 30 ELSE d END, t)",
    f"CREATE OR REPLACE MACRO justify_days(x) AS hw_jd({_MONTHS} + {_DAYS} // 30,"
    f" {_DAYS} % 30, {_US})",
    # justify_interval, step by step as PostgreSQL 15 does it
    "CREATE OR REPLACE MACRO hw_ji_d(m, d, t) AS hw_jh("
    " CASE WHEN m > 0 AND (d < 0 OR (d = 0 AND t < 0)) THEN m - 1"
    " WHEN m < 0 AND (d > 0 OR (d = 0 AND t > 0)) THEN m + 1 ELSE m END,"
    " CASE WHEN m > 0 AND (d < 0 OR (d = 0 AND t < 0)) THEN d + 30"
    " WHEN m < 0 AND (d > 0 OR (d = 0 AND t > 0)) THEN d - 30 ELSE d END, t)",
    "CREATE OR REPLACE MACRO hw_ji_c(m, d, t) AS hw_ji_d(m + d // 30, d % 30, t)",
    f"CREATE OR REPLACE MACRO hw_ji_b(m, d, t) AS hw_ji_c(m, d + t // {_DAY}, t % {_DAY})",
    "CREATE OR REPLACE MACRO hw_ji_a(m, d, t) AS hw_ji_b("
    " CASE WHEN (d > 0 AND t > 0) OR (d < 0 AND t < 0) THEN m + d // 30 ELSE m END,"
    " CASE WHEN (d > 0 AND t > 0) OR (d < 0 AND t < 0) THEN d % 30 ELSE d END, t)",
    f"CREATE OR REPLACE MACRO justify_interval(x) AS hw_ji_a({_MONTHS}, {_DAYS}, {_US})",
    # make_interval(years, months, weeks, days, hours, mins, secs); secs rounded to even
    "CREATE OR REPLACE MACRO hw_make_interval(y, mo, w, d, h, mi, s) AS hw_make_iv("
    " y * 12 + mo, w * 7 + d, CAST(h AS BIGINT) * 3600000000 + CAST(mi AS BIGINT) * 60000000"
    " + CAST(round_even(CAST(s AS DOUBLE) * 1000000, 0) AS BIGINT))",
    # make_date: a negative year is BC (there is no year 0), and fields are checked
    "CREATE OR REPLACE MACRO hw_make_date(y, m, d) AS CASE"
    " WHEN y = 0 OR m < 1 OR m > 12 OR d < 1"
    " OR d > day(last_day(make_date(CASE WHEN y < 0 THEN y + 1 ELSE y END, m, 1))) THEN "
    + _err(
        "22008",
        "'date field value out of range: ' || y || '-' || lpad(CAST(m AS VARCHAR),"
        " 2, '0') || '-' || lpad(CAST(d AS VARCHAR), 2, '0')",
    )
    + " ELSE make_date(CASE WHEN y < 0 THEN y + 1 ELSE y END, m, d) END",
    "CREATE OR REPLACE MACRO hw_make_time(h, m, s) AS CASE"
    " WHEN h < 0 OR m < 0 OR s < 0 OR m > 59 OR s > 60 OR h > 24"
    " OR (h = 24 AND (m > 0 OR s > 0)) THEN "
    + _err(
        "22008",
        "'time field value out of range: ' || h || ':' || lpad(CAST(m AS VARCHAR),"
        " 2, '0') || ':' || lpad(CAST(s AS VARCHAR), 2, '0')",
    )
    + " ELSE make_time(h, m, s) END",
    # date_bin(stride, source, origin): stride in days and microseconds only
    "CREATE OR REPLACE MACRO hw_stride_us(s) AS CASE"
    " WHEN date_part('year', s) * 12 + date_part('month', s) <> 0 THEN "
    + _err("0A000", "'timestamps cannot be binned into intervals containing months or years'")
    + " WHEN date_part('day', s) * 86400000000 + date_part('hour', s) * 3600000000"
    " + date_part('minute', s) * 60000000 + date_part('microseconds', s) <= 0 THEN "
    + _err("22023", "'stride must be greater than zero'")
    + " ELSE date_part('day', s) * 86400000000 + date_part('hour', s) * 3600000000"
    " + date_part('minute', s) * 60000000 + date_part('microseconds', s) END",
    "CREATE OR REPLACE MACRO hw_bin_us(s, x, o) AS"
    " o + ((x - o) - (x - o) % s) - CASE WHEN o > x AND s > 1 THEN s ELSE 0 END",
    "CREATE OR REPLACE MACRO hw_date_bin"
    " (s, x TIMESTAMP, o) AS make_timestamp(hw_bin_us(hw_stride_us(CAST(s AS INTERVAL)),"
    " epoch_us(x), epoch_us(CAST(o AS TIMESTAMP)))),"
    " (s, x TIMESTAMP WITH TIME ZONE, o) AS make_timestamp(hw_bin_us(hw_stride_us(CAST(s AS"
    " INTERVAL)), epoch_us(x), epoch_us(CAST(o AS TIMESTAMP WITH TIME ZONE)))) AT TIME ZONE"
    " 'UTC'",
    # date_trunc: a date truncates as timestamptz; centuries start in years ending in 01
    "CREATE OR REPLACE MACRO hw_date_as_tstz"
    " (x DATE) AS CAST(x AS TIMESTAMP WITH TIME ZONE), (x) AS x",
    "CREATE OR REPLACE MACRO hw_century_start(y, n) AS CASE WHEN y > 0"
    " THEN ((y + n - 1) // n) * n - n + 1 ELSE -((n - 1 - (y - 1)) // n) * n + 1 END",
    "CREATE OR REPLACE MACRO hw_trunc_years"
    " (x TIMESTAMP, n) AS make_timestamp(hw_century_start(year(x), n), 1, 1, 0, 0, 0),"
    " (x TIMESTAMP WITH TIME ZONE, n) AS"
    " make_timestamptz(hw_century_start(year(x), n), 1, 1, 0, 0, 0),"
    " (x, n) AS date_trunc(CASE n WHEN 100 THEN 'century' ELSE 'millennium' END, x)",
    "CREATE OR REPLACE MACRO hw_isfinite"
    " (x INTERVAL) AS CASE WHEN x IS NULL THEN NULL ELSE true END, (x) AS isfinite(x)",
    # (s1, e1) OVERLAPS (s2, e2); an end may be an interval from its start
    "CREATE OR REPLACE MACRO hw_period_end (s, e INTERVAL) AS s + e, (s, e) AS e",
    "CREATE OR REPLACE MACRO hw_overlaps_sorted(s1, e1, s2, e2) AS"
    " CASE WHEN s1 > s2 THEN s1 < e2 WHEN s2 > s1 THEN s2 < e1 ELSE true END",
    "CREATE OR REPLACE MACRO hw_overlaps_ends(a1, b1, a2, b2) AS hw_overlaps_sorted("
    " CASE WHEN a1 > b1 THEN b1 ELSE a1 END, CASE WHEN a1 > b1 THEN a1 ELSE b1 END,"
    " CASE WHEN a2 > b2 THEN b2 ELSE a2 END, CASE WHEN a2 > b2 THEN a2 ELSE b2 END)",
    "CREATE OR REPLACE MACRO hw_overlaps(a1, b1, a2, b2) AS"
    " hw_overlaps_ends(a1, hw_period_end(a1, b1), a2, hw_period_end(a2, b2))",
    # a zone written as an offset ('+05', '-03:30'), which ICU does not know: seconds east
    # in ISO 8601's sign (make_timestamptz), or west in POSIX's (timezone, AT TIME ZONE)
    "CREATE OR REPLACE MACRO hw_fixed_zone(z) AS"
    " regexp_full_match(trim(z), '[+-]\\d{1,2}(:\\d\\d)?')",
    "CREATE OR REPLACE MACRO hw_zone_secs(z) AS"
    " CASE WHEN trim(z) LIKE '-%' THEN -1 ELSE 1 END"
    " * (CAST(regexp_extract(trim(z), '^[+-](\\d{1,2})', 1) AS INTEGER) * 3600"
    " + coalesce(TRY_CAST(regexp_extract(trim(z), ':(\\d\\d)$', 1) AS INTEGER), 0) * 60)",
    "CREATE OR REPLACE MACRO hw_make_timestamptz(y, mo, d, h, mi, s, z) AS"
    " CASE WHEN hw_fixed_zone(z) THEN timezone('UTC', make_timestamp(y, mo, d, h, mi, s)"
    " - to_seconds(hw_zone_secs(z))) ELSE make_timestamptz(y, mo, d, h, mi, s, z) END",
    "CREATE OR REPLACE MACRO hw_timezone"
    " (z VARCHAR, x TIMESTAMP WITH TIME ZONE) AS CASE WHEN hw_fixed_zone(z)"
    " THEN timezone('UTC', x) - to_seconds(hw_zone_secs(z)) ELSE timezone(z, x) END,"
    " (z VARCHAR, x TIMESTAMP) AS CASE WHEN hw_fixed_zone(z)"
    " THEN timezone('UTC', x + to_seconds(hw_zone_secs(z))) ELSE timezone(z, x) END,"
    " (z, x) AS timezone(z, x)",
    # to_timestamp(double precision): PostgreSQL's infinities
    "CREATE OR REPLACE MACRO hw_to_timestamp_epoch(x) AS CASE"
    " WHEN isinf(CAST(x AS DOUBLE)) AND x > 0 THEN CAST('infinity' AS TIMESTAMP WITH TIME ZONE)"
    " WHEN isinf(CAST(x AS DOUBLE)) THEN CAST('-infinity' AS TIMESTAMP WITH TIME ZONE)"
    " ELSE to_timestamp(x) END",
    "CREATE OR REPLACE MACRO hw_timeofday() AS"
    " strftime(hw_clock_timestamp(), '%a %b %d %H:%M:%S.%f %Y %Z')",
    # CURRENT_TIMESTAMP(p) and friends: now() rounded to p fractional digits
    "CREATE OR REPLACE MACRO hw_us_rounded(us, q) AS"
    " make_timestamp(((us + q // 2) // q) * q) AT TIME ZONE 'UTC'",
    # now(): a transaction block's start (PostgreSQL's), which the server sets on the
    # session's DuckDB connections for the block (server/session.py in_session_zone);
    # outside one, DuckDB's now(): the statement's start
    f"CREATE OR REPLACE MACRO hw_now() AS coalesce(getvariable('{XACT_START}'), now())",
    "CREATE OR REPLACE MACRO hw_now_rounded(p) AS hw_us_rounded(epoch_us(hw_now()),"
    " CAST(power(10, 6 - least(greatest(p, 0), 6)) AS BIGINT))",
]


def _clock_timestamp() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def install(db: Any) -> None:
    db.create_function(
        "hw_clock_timestamp", _clock_timestamp, [], "TIMESTAMP WITH TIME ZONE",
        side_effects=True,
    )  # fmt: skip
    for sql in MACROS:
        db.execute(sql)


# -- call rewrites ----------
_MAKE_INTERVAL_PARAMS = ("years", "months", "weeks", "days", "hours", "mins", "secs")


def _make_interval(args: list[Any]) -> Any | None:
    values: list[Any] = [const(0)] * 7
    for i, a in enumerate(args):
        if isinstance(a, A.NamedArgExpr):
            if a.name not in _MAKE_INTERVAL_PARAMS:
                return None
            values[_MAKE_INTERVAL_PARAMS.index(a.name)] = a.arg
        elif i < 7:
            values[i] = a
        else:
            return None
    return call("hw_make_interval", *values)


def _date_trunc(args: list[Any]) -> Any | None:
    if len(args) not in (2, 3) or (unit := text_of(args[0])) is None:
        return None
    field = canonical_unit(unit)
    x = call("hw_date_as_tstz", args[1])
    zone = args[2] if len(args) == 3 else None
    if zone is not None:
        x = call("timezone", zone, x)  # the wall clock in that zone
    if field is None:
        return call("hw_extract_unknown", x, const(unit.strip().lower()))
    if field in ("century", "millennium"):
        out = call("hw_trunc_years", x, const(100 if field == "century" else 1000))
    else:
        out = call("datetrunc", const(field), x)  # DuckDB's name, not rewritten again
    if zone is not None:
        out = call("timezone", copy(zone), out)
    return out


def _renamed(name: str, arity: int) -> Any:
    def rewrite(args: list[Any]) -> Any | None:
        return call(name, *args) if len(args) == arity else None

    return rewrite


def _generate_series(args: list[Any]) -> Any | None:
    """generate_series(date, date, interval) is the timestamptz one in PostgreSQL."""
    if len(args) != 3 or any(_is_call(a, "hw_date_as_tstz") for a in args[:2]):
        return None
    return call("generate_series", *(call("hw_date_as_tstz", a) for a in args[:2]), args[2])


def _is_call(node: Any, name: str) -> bool:
    return isinstance(node, A.FuncCall) and node.funcname[-1].sval == name


REWRITES = {
    "make_interval": _make_interval,
    "date_trunc": _date_trunc,
    "date_bin": _renamed("hw_date_bin", 3),
    "make_date": _renamed("hw_make_date", 3),
    "make_time": _renamed("hw_make_time", 3),
    "isfinite": _renamed("hw_isfinite", 1),
    "overlaps": _renamed("hw_overlaps", 4),
    "clock_timestamp": _renamed("hw_clock_timestamp", 0),
    "now": _renamed("hw_now", 0),
    "transaction_timestamp": _renamed("hw_now", 0),
    # DuckDB's now() under another name (a `now` call becomes hw_now): the statement's
    # start, or a DuckDB transaction's (a block's writes)
    "statement_timestamp": _renamed("get_current_timestamp", 0),
    # Materialize's (a view: the epoch's time, planner/temporal.py)
    "mz_now": _renamed("get_current_timestamp", 0),
    "timeofday": _renamed("hw_timeofday", 0),
    "make_timestamptz": _renamed("hw_make_timestamptz", 7),
    "timezone": _renamed("hw_timezone", 2),  # AT TIME ZONE too
    "generate_series": _generate_series,
}


# SQLValueFunctionOp: CURRENT_DATE 0, CURRENT_TIME 1, CURRENT_TIME(p) 2, CURRENT_TIMESTAMP 3,
# CURRENT_TIMESTAMP(p) 4, LOCALTIME 5, LOCALTIME(p) 6, LOCALTIMESTAMP 7, LOCALTIMESTAMP(p) 8.
# As DuckDB keywords they are column names first (`SELECT current_date AS current_date`
# fails there), so they become calls of the transaction's timestamp.
def value_function(op: int, typmod: int) -> Any | None:
    if op > 8:
        return None
    now = call("hw_now") if op in (0, 1, 3, 5, 7) else call("hw_now_rounded", const(typmod))
    if op == 0:
        return cast(now, "date")
    if op in (1, 2):
        return cast(now, "timetz")
    if op in (3, 4):
        return now
    if op in (5, 6):
        return cast(cast(now, "timestamp"), "time")
    return cast(now, "timestamp")
