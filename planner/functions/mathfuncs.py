"""PostgreSQL 15's mathematical functions DuckDB lacks or computes differently: div,
width_bucket, the degree-based trigonometry (sind, cosd, ...), scale and min_scale,
and the errors ln, log and sqrt raise out of their domain. Macros over native
functions."""

from __future__ import annotations

from typing import Any

from headwater.planner.functions.nodes import call, const


def _err(sqlstate: str, message: str) -> str:
    return f"error('[SQLSTATE {sqlstate}] {message}')"


# a result within 1e-13 of a 10-digit value is that value (sind(30) = 0.5, as PostgreSQL
# computes it exactly)
_SNAP = "CASE WHEN abs(r - round(r, 10)) < 1e-13 THEN round(r, 10) + 0.0 ELSE r END"
_DIV0 = _err("22012", "division by zero")
_NUMTEXT = "CAST(x AS VARCHAR)"
_FRACTION = f"CASE WHEN contains({_NUMTEXT}, '.') THEN split_part({_NUMTEXT}, '.', 2) ELSE '' END"

MACROS = [
    f"CREATE OR REPLACE MACRO hw_snap(r) AS {_SNAP}",
    "CREATE OR REPLACE MACRO sind(x) AS hw_snap(sin(radians(x)))",
    "CREATE OR REPLACE MACRO cosd(x) AS hw_snap(cos(radians(x)))",
    "CREATE OR REPLACE MACRO tand(x) AS hw_snap(tan(radians(x)))",
    "CREATE OR REPLACE MACRO cotd(x) AS hw_snap(cot(radians(x)))",
    "CREATE OR REPLACE MACRO asind(x) AS hw_snap(degrees(asin(x)))",
    "CREATE OR REPLACE MACRO acosd(x) AS hw_snap(degrees(acos(x)))",
    "CREATE OR REPLACE MACRO atand(x) AS hw_snap(degrees(atan(x)))",
    "CREATE OR REPLACE MACRO atan2d(y, x) AS hw_snap(degrees(atan2(y, x)))",
    f"CREATE OR REPLACE MACRO hw_div(a, b) AS CASE WHEN b = 0 THEN {_DIV0} ELSE"
    " CAST(trunc(CAST(a AS DOUBLE) / CAST(b AS DOUBLE)) AS DECIMAL(38, 0)) END",
    f"CREATE OR REPLACE MACRO scale(x) AS CAST(length({_FRACTION}) AS INTEGER)",
    f"CREATE OR REPLACE MACRO min_scale(x) AS CAST(length(rtrim({_FRACTION}, '0')) AS INTEGER)",
    "CREATE OR REPLACE MACRO hw_width_bucket(op, lo, hi, n) AS CASE"
    " WHEN n <= 0 THEN "
    + _err("2201G", "count must be greater than zero")
    + " WHEN lo = hi THEN "
    + _err("2201G", "lower bound cannot equal upper bound")
    + " WHEN lo < hi THEN CAST(CASE WHEN op < lo THEN 0 WHEN op >= hi THEN n + 1"
    " ELSE floor(CAST(op - lo AS DOUBLE) * n / CAST(hi - lo AS DOUBLE)) + 1 END AS INTEGER)"
    " ELSE CAST(CASE WHEN op > lo THEN 0 WHEN op <= hi THEN n + 1"
    " ELSE floor(CAST(lo - op AS DOUBLE) * n / CAST(lo - hi AS DOUBLE)) + 1 END AS INTEGER) END",
    "CREATE OR REPLACE MACRO hw_width_bucket_a(op, th) AS"
    " CAST(len(list_filter(th, lambda t: t <= op)) AS INTEGER)",
    "CREATE OR REPLACE MACRO hw_ln(x) AS CASE WHEN x = 0 THEN "
    + _err("2201E", "cannot take logarithm of zero")
    + " WHEN x < 0 THEN "
    + _err("2201E", "cannot take logarithm of a negative number")
    + " ELSE ln(x) END",
    "CREATE OR REPLACE MACRO hw_log10(x) AS CASE WHEN x = 0 THEN "
    + _err("2201E", "cannot take logarithm of zero")
    + " WHEN x < 0 THEN "
    + _err("2201E", "cannot take logarithm of a negative number")
    + " ELSE log10(x) END",
    # percentile_cont of a sorted list `l` (no NULLs): PostgreSQL's interpolation
    # (percentile_cont_final_common, float8_lerp: lo + pct * (hi - lo); DuckDB's
    # lo * (1 - pct) + hi * pct differs in the last digit), 22003 outside [0, 1]
    "CREATE OR REPLACE MACRO hw_percentile_lerp(l, f) AS CASE WHEN f < 0 OR f > 1 OR isnan(f)"
    " THEN "
    + _err("22003", "percentile value ' || CAST(f AS VARCHAR) || ' is not between 0 and 1")
    + " WHEN len(l) = 0 THEN NULL"
    " WHEN floor(f * (len(l) - 1)) = ceil(f * (len(l) - 1))"
    " THEN l[CAST(floor(f * (len(l) - 1)) AS BIGINT) + 1]"
    " ELSE l[CAST(floor(f * (len(l) - 1)) AS BIGINT) + 1] + (f * (len(l) - 1)"
    " - floor(f * (len(l) - 1))) * (l[CAST(ceil(f * (len(l) - 1)) AS BIGINT) + 1]"
    " - l[CAST(floor(f * (len(l) - 1)) AS BIGINT) + 1]) END",
    # percentile_cont orders float8 or interval values: numbers become float8
    "CREATE OR REPLACE MACRO hw_percentile_cont_arg(x DOUBLE) AS CAST(x AS DOUBLE),"
    " (x INTERVAL) AS x, (x) AS "
    + _err("42883", "function percentile_cont(double precision, unsupported type) does not exist"),
    # sign() is numeric of a numeric and float8 of anything else (DuckDB's: a tinyint);
    # gcd / lcm of integers are int4 (DuckDB's: bigint)
    "CREATE OR REPLACE MACRO hw_sign(x DECIMAL) AS CAST(sign(x) AS DECIMAL(38, 16)),"
    " (x DOUBLE) AS CAST(sign(x) AS DOUBLE)",
    "CREATE OR REPLACE MACRO hw_gcd(a SMALLINT, b SMALLINT) AS CAST(gcd(a, b) AS INTEGER),"
    " (a INTEGER, b INTEGER) AS CAST(gcd(a, b) AS INTEGER), (a BIGINT, b BIGINT) AS gcd(a, b)",
    "CREATE OR REPLACE MACRO hw_lcm(a SMALLINT, b SMALLINT) AS CAST(lcm(a, b) AS INTEGER),"
    " (a INTEGER, b INTEGER) AS CAST(lcm(a, b) AS INTEGER), (a BIGINT, b BIGINT) AS lcm(a, b)",
    "CREATE OR REPLACE MACRO hw_sqrt(x) AS CASE WHEN x < 0 THEN "
    + _err("2201F", "cannot take square root of a negative number")
    + " ELSE sqrt(x) END",
]


def _fixed(name: str, arity: int) -> Any:
    def rewrite(args: list[Any]) -> Any:
        return call(name, *args) if len(args) == arity else None

    return rewrite


def _width_bucket(args: list[Any]) -> Any:
    if len(args) == 4:
        return call("hw_width_bucket", *args)
    if len(args) == 2:
        return call("hw_width_bucket_a", *args)
    return None


_FLOATS = frozenset({"float8", "float4", "double", "real", "float"})


def _round(args: list[Any]) -> Any:
    """round(float8) rounds half to even (rint), as PostgreSQL does."""
    import pglast.ast as A

    arg = args[0] if len(args) == 1 else None
    if isinstance(arg, A.TypeCast):
        names = [n.sval.lower() for n in arg.typeName.names if isinstance(n, A.String)]
        if names[-1:] and names[-1] in _FLOATS:
            return call("round_even", arg, const(0))
    return None


def _trim_scale(args: list[Any]) -> Any:
    """trim_scale(x): x as unconstrained numeric, whose text has no trailing zeros."""
    import pglast.ast as A

    if len(args) != 1:
        return None
    numeric = A.TypeName(
        names=(A.String(sval="numeric"),),
        typmods=(const(38), const(16)),  # DECIMAL(38,16): unconstrained numeric's storage
        typemod=-1,
    )
    return A.TypeCast(arg=args[0], typeName=numeric)


REWRITES = {
    "round": _round,
    "trim_scale": _trim_scale,
    "div": _fixed("hw_div", 2),
    "width_bucket": _width_bucket,
    "ln": _fixed("hw_ln", 1),
    "sqrt": _fixed("hw_sqrt", 1),
    "sign": _fixed("hw_sign", 1),
    "gcd": _fixed("hw_gcd", 2),
    "lcm": _fixed("hw_lcm", 2),
}


def install(db: Any) -> None:
    for sql in MACROS:
        db.execute(sql)
