"""`x::text` of numbers as PostgreSQL prints them, in both executors.

DuckDB's and Spark's casts to text print doubles and reals their own way: '0.0' and
'1000000000000000.0' where PostgreSQL prints '0' and '1e+15', 'nan'/'inf' (Spark:
'NaN', '1.0E15') for 'NaN'/'Infinity'; an unconstrained numeric (kept as
DECIMAL(38,16)) shows 16 decimals where the wire shows the value trimmed; a quotient
(DECIMAL(37,20)) shows 20. planner/pg_compat.py makes every cast to text of a
non-constant `hw_text(x)`: by the argument's type, the wire's own text functions
(catalog/pgtypes) over the executor's text of the value, which reads back exactly
(DuckDB's and Java's float text are round-trip exact); other types keep the cast.

Arrays (DuckDB lists) print as PostgreSQL's array_out prints them ('{a,"b c",NULL}',
not '[a, b c, NULL]'): their JSON text read back by a UDF (DuckDB only so far; Spark
keeps its own text of arrays).

typeof(x) is a constant both optimizers fold, so one branch runs. Spark evaluates a
Python UDF for every row even under a CASE branch not taken, so the UDF answers NULL
for text it cannot read instead of failing.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from headwater.catalog.pgtypes.arrays import array_out
from headwater.catalog.pgtypes.floats import float_text
from headwater.catalog.pgtypes.numeric import (
    QUOTIENT_PRECISION,
    QUOTIENT_SCALE,
    SPREAD_PRECISION,
    quotient_text,
)

NAME = "hw_text"
OUT_NAME = "hw_text_out"  # format('%s') and concat(): hw_text, and booleans as t / f
UDF = "hw_pg_text"
ARRAY_UDF = "hw_pg_array_text"
_FLOAT8, _FLOAT4 = float_text(15, 1), float_text(6, 1)


_KINDS = {
    "float8": lambda s: _FLOAT8(float(s)).decode(),
    "float4": lambda s: _FLOAT4(float(s)).decode(),
    "quotient": lambda s: quotient_text(Decimal(s), QUOTIENT_SCALE),
    "spread": lambda s: quotient_text(Decimal(s), QUOTIENT_SCALE, spread=True),
}


def pg_text(texts: Any, kinds: Any) -> Any:
    """Arrow UDF: each value's text (as the executor cast it) as PostgreSQL prints it."""
    import pyarrow as pa

    out: list[str | None] = []
    for s, kind in zip(texts.to_pylist(), kinds.to_pylist(), strict=True):
        try:
            out.append(None if s is None else _KINDS[kind](s))
        except (ValueError, InvalidOperation, KeyError):
            out.append(None)  # a branch not taken (see the module's docstring)
    return pa.array(out, pa.string())


def _case(typeof: str, to_text: str, types: dict[str, str], trim: str, other: str = "") -> str:
    """The CASE over typeof(x), in one dialect's type names and text cast (`other`: the
    text of any other type; by default the cast)."""
    branches = "".join(f" WHEN '{types[kind]}' THEN {UDF}({to_text}, '{kind}')" for kind in _KINDS)
    return (
        f"CASE {typeof}{branches} WHEN '{types['numeric']}' THEN"
        f" regexp_replace({to_text}, '{trim}', '') ELSE {other or to_text} END"
    )


def _element(kind: str) -> Any:
    """An array element's text (array_out quotes it), by the list's DuckDB type."""
    if kind.startswith("BOOLEAN"):
        return lambda v: b"t" if v else b"f"
    if kind.startswith(("DOUBLE", "FLOAT")):
        enc = _FLOAT8 if kind.startswith("DOUBLE") else _FLOAT4
        return lambda v: enc(float(v))
    return lambda v: str(v).encode()


def pg_array_text(texts: Any, kinds: Any) -> Any:
    """Arrow UDF: a list's JSON text (DuckDB's to_json: round-trip exact floats,
    Infinity, NaN) as PostgreSQL's array_out prints the array."""
    import json

    import pyarrow as pa

    out: list[str | None] = []
    for s, kind in zip(texts.to_pylist(), kinds.to_pylist(), strict=True):
        out.append(None if s is None else array_out(_element(kind))(json.loads(s)).decode())
    return pa.array(out, pa.string())


_DUCKDB_TYPES = {
    "float8": "DOUBLE",
    "float4": "FLOAT",
    "quotient": f"DECIMAL({QUOTIENT_PRECISION},{QUOTIENT_SCALE})",
    "spread": f"DECIMAL({SPREAD_PRECISION},{QUOTIENT_SCALE})",
    "numeric": "DECIMAL(38,16)",  # unconstrained numeric: trimmed, as the wire prints it
}
_SPARK_TYPES = {k: v.lower() for k, v in _DUCKDB_TYPES.items()}
# trailing zeros of the fraction, and its point if nothing is left of it
_TRIM = r"[.]?0+$"


def _out_case(typeof: str, to_text: str, boolean: str, arg: str, text: str) -> str:
    """hw_text_out: a boolean as t / f (its text cast is 'true' / 'false'), else `text`."""
    return (
        f"CASE WHEN {typeof} = '{boolean}' THEN CASE WHEN {to_text} = 'true' THEN 't'"
        f" WHEN {arg} IS NULL THEN NULL ELSE 'f' END ELSE {text} END"
    )


def spark_sql(arg: str, out: bool = False) -> str:
    """hw_text(arg) (or hw_text_out(arg)) as Spark SQL (engine/spark_sql.py), `arg`
    already Spark's."""
    typeof, to_text = f"typeof({arg})", f"CAST({arg} AS STRING)"
    text = _case(typeof, to_text, _SPARK_TYPES, _TRIM)
    return _out_case(typeof, to_text, "boolean", arg, text) if out else text


def install(db: Any) -> None:
    db.create_function(UDF, pg_text, ["VARCHAR", "VARCHAR"], "VARCHAR", type="arrow")
    db.create_function(ARRAY_UDF, pg_array_text, ["VARCHAR", "VARCHAR"], "VARCHAR", type="arrow")
    lists = (  # a list: PostgreSQL's '{a,"b c"}', not DuckDB's '[a, b c]'
        f"CASE WHEN typeof(x) LIKE '%[]' THEN {ARRAY_UDF}(CAST(to_json(x) AS VARCHAR),"
        " typeof(x)) ELSE CAST(x AS VARCHAR) END"
    )
    body = _case("typeof(x)", "CAST(x AS VARCHAR)", _DUCKDB_TYPES, _TRIM, lists)
    db.execute(f"CREATE OR REPLACE MACRO {NAME}(x) AS {body}")
    out = _out_case("typeof(x)", "CAST(x AS VARCHAR)", "BOOLEAN", "x", f"{NAME}(x)")
    db.execute(f"CREATE OR REPLACE MACRO {OUT_NAME}(x) AS {out}")
