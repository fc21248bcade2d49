"""PostgreSQL functions DuckDB lacks or computes differently, one module per family.

`REWRITES` maps a function name to a rewrite of its call (the argument nodes in, the
replacement node out, or None to leave the call as it is); planner/pg_compat.py consults
it. `install(db)` defines on a DuckDB connection the macros and functions the
rewritten calls name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from headwater.planner.functions import (
    arrays,
    boolean,
    bytea,
    dates,
    extension_funcs,
    extract,
    formatting,
    json,
    literals,
    mathfuncs,
    network,
    numeric_consts,
    ranges,
    regex,
    strings,
    sysinfo,
    text_casts,
    typeof,
)

Rewrite = Callable[[list[Any]], Any | None]

REWRITES: dict[str, Rewrite] = {
    "extract": extract.rewrite_extract,
    "date_part": extract.rewrite_date_part,
    **formatting.REWRITES,
    **dates.REWRITES,
    "pg_typeof": typeof.rewrite_pg_typeof,
    "enum_range": typeof.rewrite_enum_range,
    **strings.REWRITES,
    **regex.REWRITES,
    **mathfuncs.REWRITES,
    **json.REWRITES,
    **arrays.REWRITES,
    **sysinfo.REWRITES,
    **network.REWRITES,
    **extension_funcs.REWRITES,
}

# bytea's form of a function first, then the text form
for _name, _bytea_rewrite in bytea.REWRITES.items():
    _other = REWRITES.get(_name)
    REWRITES[_name] = (
        _bytea_rewrite if _other is None
        else lambda args, b=_bytea_rewrite, o=_other: b(args) or o(args)
    )  # fmt: skip

# numeric's exp, ln, log, power, sqrt of constants first (exact), then the double forms
for _name in numeric_consts.FUNCS:
    _other = REWRITES.get(_name)
    REWRITES[_name] = (
        lambda args, n=_name: numeric_consts.fold_call(n, args)
    ) if _other is None else (
        lambda args, n=_name, o=_other: numeric_consts.fold_call(n, args) or o(args)
    )  # fmt: skip
# range constructors and lower/upper/isempty & co. of a range, before the other forms
for _name in (*ranges.KINDS, *ranges.PARTS):
    _other = REWRITES.get(_name)
    REWRITES[_name] = lambda args, n=_name, o=_other: (
        ranges.constructor(n, args)
        or ranges.rewrite_function(n, args)
        or (o(args) if o is not None else None)
    )
fold_power_operator = numeric_consts.fold_power_operator
constant_number = numeric_consts.evaluate
# x::inet, x::cidr: (type name, argument) -> node or None
network_cast = network.cast
# x::int4range & co.: (type name, argument) -> node or None
range_cast = ranges.cast

# json_agg & co.: aggregate FuncCall -> node (keeping its ORDER BY)
AGGREGATES = json.AGGREGATES
# FROM json_each(j) & co.: RangeFunction -> node or None
table_function = json.table_function
# CURRENT_DATE, CURRENT_TIME(p), LOCALTIMESTAMP, ...: (op, typmod) -> node or None
value_function = dates.value_function


def typed_literal(tc: Any) -> Any | None:
    """date '...', interval '...', '$.a'::jsonpath, '\\x01'::bytea ... in PostgreSQL's
    input syntax: TypeCast -> node or None."""
    boolean.check_integer_literal(tc)
    parsers = (json.jsonpath_literal, literals.typed_literal, bytea.typed_literal)
    for parse in (*parsers, boolean.typed_literal):
        new = parse(tc)
        if new is not None:
            return new
    return None


# x LIKE ANY/ALL (patterns): (op, is_any, left, right) -> node or None
rewrite_like_any = arrays.rewrite_like_any


def rewrite_operator(op: str, left: Any, right: Any) -> Any | None:
    """jsonb's and arrays' operators: (op, left, right) -> node or None."""
    new = ranges.rewrite_operator(op, left, right)
    if new is None:
        new = json.rewrite_operator(op, left, right)
    if new is None:
        new = network.rewrite_operator(op, left, right)
    return new if new is not None else arrays.rewrite_operator(op, left, right)


def install(db: Any) -> None:
    for sql in extract.macros() + typeof.macros():
        db.execute(sql)
    formatting.install(db)
    dates.install(db)
    strings.install(db), regex.install(db), mathfuncs.install(db), bytea.install(db)
    json.install(db)
    arrays.install(db)
    sysinfo.install(db)
    network.install(db)
    ranges.install(db)
    text_casts.install(db)
    extension_funcs.install(db)
