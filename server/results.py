"""What a statement returns: its tag, result columns (`Field`) and rows.

The wire layer (server/protocol.py) and the statement modules both import these
types, so neither imports the other (buenavista's QueryResult is the model).
`arrow_fields` and `rows_of` turn a DuckDB result, fetched as Arrow, into them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from headwater.catalog.types import NUMERIC, ColumnType, from_duckdb

from headwater.errors import SQLError

UNCONSTRAINED_NUMERIC = "DECIMAL(38,16)"  # how DuckDB stores a NUMERIC without a typmod


@dataclass
class Field:
    name: str
    type: ColumnType
    table_oid: int = 0
    attnum: int = 0


@dataclass
class Result:
    tag: str
    fields: list[Field] | None = None
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    notices: list[str | SQLError] = field(default_factory=list)  # SQLError: code, DETAIL


def arrow_fields(schema: pa.Schema, duck_types: list[str] | None = None) -> list[Field]:
    out = []
    for i, f in enumerate(schema):
        dtype = duck_types[i] if duck_types else _arrow_to_duck(f.type)
        ct = from_duckdb(dtype)
        if ct.pg is NUMERIC and dtype.replace(" ", "") == UNCONSTRAINED_NUMERIC:
            ct = ColumnType(NUMERIC)
        out.append(Field(f.name, ct))
    return out


def _arrow_to_duck(t: pa.DataType) -> str:
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision},{t.scale})"
    mapping = [
        (pa.types.is_boolean, "BOOLEAN"),
        (pa.types.is_int8, "TINYINT"),
        (pa.types.is_int16, "SMALLINT"),
        (pa.types.is_int32, "INTEGER"),
        (pa.types.is_int64, "BIGINT"),
        (pa.types.is_float32, "FLOAT"),
        (pa.types.is_float64, "DOUBLE"),
        (pa.types.is_date32, "DATE"),
        (pa.types.is_time, "TIME"),
        (pa.types.is_binary, "BLOB"),
        (pa.types.is_large_binary, "BLOB"),
    ]
    if pa.types.is_timestamp(t):
        return "TIMESTAMP WITH TIME ZONE" if t.tz else "TIMESTAMP"
    if t == pa.month_day_nano_interval():
        return "INTERVAL"
    for pred, name in mapping:
        if pred(t):
            return name
    return "VARCHAR"


def _pylist(col: pa.ChunkedArray) -> list[Any]:
    try:
        return col.to_pylist()
    except (OverflowError, ValueError):
        # BC or infinite dates/timestamps: hand the codecs the raw Arrow integers
        t = col.type
        raw = pa.int32() if pa.types.is_date32(t) else pa.int64()
        return pa.chunked_array([c.view(raw) for c in col.chunks], raw).to_pylist()


def rows_of(table: pa.Table) -> list[tuple[Any, ...]]:
    if table.num_columns == 0:
        return [()] * table.num_rows
    return list(zip(*(_pylist(c) for c in table.columns), strict=True))
