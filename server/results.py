"""What a statement returns: its tag, result columns (`Field`) and rows.

The wire layer (server/protocol.py) and the statement modules both import these
types, so neither imports the other (buenavista's QueryResult is the model).
`arrow_fields` and `rows_of` turn a DuckDB result, fetched as Arrow, into them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import pyarrow as pa
from headwater.catalog.pgtypes import binary_encoder, text_encoder
from headwater.catalog.pgtypes.arrow_out import column_encoder
from headwater.catalog.pgtypes.session import SessionFormat
from headwater.catalog.types import NUMERIC, ColumnType, from_duckdb
from headwater.planner.output_types import Source
from headwater.server.pgwire import messages

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
    rows: Sequence[tuple[Any, ...]] = field(default_factory=list)  # or ArrowRows
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


def sourced(fields: list[Field], sources: Sequence[Source | None] | None) -> list[Field]:
    """`fields` whose output column is a plain column reference (planner/output_types.py)
    with the column's declared type, table and attnum."""
    if sources is None or len(sources) != len(fields):
        return fields
    for f, src in zip(fields, sources, strict=True):
        if src is not None:
            f.type, f.table_oid, f.attnum = src.column.type, src.table_oid, src.attnum
    return fields


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


class ArrowRows(Sequence[tuple[Any, ...]]):
    """A result's rows as the Arrow table DuckDB returned. The wire encodes them a
    column at a time (`data_rows`); Python tuples are made only for a caller that
    indexes or iterates them (a cursor, a SUBSCRIBE, a test). Slices stay Arrow."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self._tuples: list[tuple[Any, ...]] | None = None

    def __len__(self) -> int:
        return self.table.num_rows

    @overload
    def __getitem__(self, i: int) -> tuple[Any, ...]: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[tuple[Any, ...]]: ...
    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step == 1:
                return ArrowRows(self.table.slice(start, max(0, stop - start)))
        return self.tuples()[i]

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.tuples())

    def tuples(self) -> list[tuple[Any, ...]]:
        if self._tuples is None:
            self._tuples = rows_of(self.table)
        return self._tuples


# From this many rows a result is encoded a column at a time: below, Python per value is
# cheaper (the column path costs ~30-50 µs a column whatever its length; 10 columns
# broke even at ~48 rows)
COLUMNWISE_ROWS = 64
CHUNK_ROWS = 8192  # rows encoded at once (numpy's scatter indexes take 16 bytes a byte)


def data_rows(
    table: pa.Table, fields: list[Field], formats: list[int], session: SessionFormat
) -> Iterator[bytes]:
    """The DataRow messages of an Arrow result, in chunks of CHUNK_ROWS rows: each
    column encoded whole where catalog/pgtypes/arrow_out.py can, else value by value
    with the registry's encoders (the same bytes either way)."""
    encoders = []
    for i, (col, fld) in enumerate(zip(table.columns, fields, strict=True)):
        binary = messages.format_code(formats, i) == 1
        whole = column_encoder(col.type, fld.type, binary=binary, session=session)
        each = (binary_encoder if binary else text_encoder)(fld.type, session=session)
        encoders.append((whole, each))
    for at in range(0, table.num_rows, CHUNK_ROWS):
        part = table.slice(at, CHUNK_ROWS)
        cols = []
        for col, (whole, each) in zip(part.columns, encoders, strict=True):
            arr = col.combine_chunks()
            out = whole(arr) if whole is not None else None
            if out is None:
                values = _pylist(pa.chunked_array([arr], arr.type))
                out = pa.array([None if v is None else each(v) for v in values], pa.binary())
            cols.append(out)
        yield messages.data_rows(cols, part.num_rows)
