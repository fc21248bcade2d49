"""The columns of the system relations, for what needs their types without their rows:
a parameter compared with a system column is typed as PostgreSQL types it (asyncpg
encodes `WHERE oid = $1` by the type the server announces).

headwater_catalog's shapes live here (server/hw_catalog.py fills their rows);
pg_catalog's and information_schema's come from catalog/pg/specs.py.
"""

from __future__ import annotations

import pyarrow as pa
from headwater.catalog.pg.hook import lookup
from headwater.catalog.pg.tables import columns_of
from headwater.catalog.pg.typeinfo import spec_type
from headwater.catalog.types import (
    FLOAT8,
    INT8,
    INTERVAL,
    PARAM_TYPES,
    TEXT,
    TIMESTAMPTZ,
    ColumnType,
)

VIEWS = pa.schema(
    [
        ("oid", pa.int64()),
        ("schema", pa.string()),
        ("name", pa.string()),
        ("definition", pa.string()),
        ("status", pa.string()),
        ("error", pa.string()),
        ("frontier", pa.int64()),
        ("lag_epochs", pa.int64()),
        ("lag_ms", pa.float64()),
        ("rows", pa.int64()),
        ("state_rows", pa.int64()),
        ("created_epoch", pa.int64()),
        ("backfill_rows_done", pa.int64()),
        ("backfill_rows_total", pa.int64()),
        ("executor", pa.string()),  # who ran the view's last batch: spark | duckdb
        ("executor_reason", pa.string()),
        ("spark_tasks", pa.int64()),  # Spark tasks run for the view so far
        ("progress", pa.float64()),  # percent of its backfill's phase, while it runs
        ("progress_phase", pa.string()),  # counting inputs | reading inputs | computing
        # the freshness SLO (server/slo.py): WITH (freshness = ...), the share of the
        # recent window within it, and why not (NULL at 1.0 or without a target)
        ("freshness_target", pa.duration("us")),
        ("slo_compliance", pa.float64()),
        ("degraded_reason", pa.string()),
    ]
)

EPOCHS = pa.schema(
    [
        ("epoch", pa.int64()),
        ("closed_at", pa.timestamp("us", tz="UTC")),
        ("table_oid", pa.int64()),
        ("table_name", pa.string()),
        ("rows_changed", pa.int64()),
    ]
)

PROGRESS = pa.schema(
    [
        ("id", pa.int64()),
        ("kind", pa.string()),  # backfill | copy
        ("target", pa.string()),
        ("phase", pa.string()),
        ("done", pa.int64()),
        ("total", pa.int64()),
        ("unit", pa.string()),
        ("percent", pa.float64()),
        ("detail", pa.string()),
        ("elapsed_s", pa.float64()),
    ]
)

SINKS = pa.schema(
    [
        ("oid", pa.int64()),
        ("schema", pa.string()),
        ("name", pa.string()),
        ("source", pa.string()),
        ("target_kind", pa.string()),
        ("target", pa.string()),
        ("table_name", pa.string()),
        ("mode", pa.string()),
        ("key", pa.string()),
        ("epoch_written", pa.int64()),
        ("lag_epochs", pa.int64()),
        ("lag_ms", pa.float64()),
        ("rows", pa.int64()),
        ("batches", pa.int64()),
        ("status", pa.string()),
        ("error", pa.string()),
    ]
)

HW_CATALOG = {"views": VIEWS, "epochs": EPOCHS, "progress": PROGRESS, "sinks": SINKS}


def _arrow_column_type(t: pa.DataType) -> ColumnType:
    if pa.types.is_integer(t):
        return ColumnType(INT8)
    if pa.types.is_floating(t):
        return ColumnType(FLOAT8)
    if pa.types.is_timestamp(t):
        return ColumnType(TIMESTAMPTZ)
    if pa.types.is_duration(t):
        return ColumnType(INTERVAL)
    return ColumnType(TEXT)


def system_column_type_names(schema: str | None, name: str) -> list[tuple[str, str]]:
    """The columns of the pg_catalog / information_schema relation `schema.name` names
    with their PostgreSQL type names (int2vector, oidvector, ... as PostgreSQL has
    them; none for another name)."""
    found = lookup(schema, name) if schema != "headwater_catalog" else None
    return list(columns_of(*found) or ()) if found is not None else []


def system_columns(schema: str | None, name: str) -> list[tuple[str, ColumnType]] | None:
    """The columns of the system relation `schema.name` names (pg_catalog's also
    unqualified), or None when it names none."""
    if schema == "headwater_catalog":
        shape = HW_CATALOG.get(name)
        return None if shape is None else [(f.name, _arrow_column_type(f.type)) for f in shape]
    found = lookup(schema, name)
    cols = columns_of(*found) if found is not None else None
    if cols is None:
        return None
    out = []
    for cname, ctype in cols:
        oid, typmod = spec_type(ctype)
        pg = PARAM_TYPES.get(oid)
        out.append((cname, ColumnType(pg, typmod) if pg is not None else ColumnType(TEXT)))
    return out
