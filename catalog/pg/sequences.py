"""Rows of pg_sequence, pg_sequences and information_schema.sequences."""

from __future__ import annotations

from typing import Any

from headwater.catalog.objects import Sequence
from headwater.catalog.pg.oids import SUPERUSER_OID
from headwater.catalog.pg.roles import owner_name
from headwater.catalog.pg.snapshot import Builder, Builders, registrar

BUILDERS: Builders = {}
_builder = registrar(BUILDERS)

PG_CLASS_OID = 1259
_TYPE_OID = {"int2": 21, "int4": 23, "int8": 20}
_SQL_TYPE = {"int2": "smallint", "int4": "integer", "int8": "bigint"}
_PRECISION = {"int2": 16, "int4": 32, "int8": 64}


def _sequences(b: Builder) -> list[Sequence]:
    return sorted(
        (r for r in b.catalog.relations.values() if isinstance(r, Sequence)), key=lambda r: r.oid
    )


@_builder("pg_catalog", "pg_sequence")
def _pg_sequence(b: Builder) -> list[dict[str, Any]]:
    return [
        {
            "seqrelid": s.oid,
            "seqtypid": _TYPE_OID[s.type_name],
            "seqstart": s.start,
            "seqincrement": s.increment,
            "seqmax": s.max_value,
            "seqmin": s.min_value,
            "seqcache": s.cache,
            "seqcycle": s.cycle,
        }
        for s in _sequences(b)
    ]


@_builder("pg_catalog", "pg_sequences")
def _pg_sequences(b: Builder) -> list[dict[str, Any]]:
    last = b.session.sequence_last_value
    return [
        {
            "schemaname": s.schema,
            "sequencename": s.name,
            "sequenceowner": owner_name(b, s.owner or SUPERUSER_OID),
            "data_type": _TYPE_OID[s.type_name],
            "start_value": s.start,
            "min_value": s.min_value,
            "max_value": s.max_value,
            "increment_by": s.increment,
            "cycle": s.cycle,
            "cache_size": s.cache,
            "last_value": last(s) if last is not None else None,
        }
        for s in _sequences(b)
    ]


@_builder("information_schema", "sequences")
def _is_sequences(b: Builder) -> list[dict[str, Any]]:
    return [
        {
            "sequence_catalog": b.session.database,
            "sequence_schema": s.schema,
            "sequence_name": s.name,
            "data_type": _SQL_TYPE[s.type_name],
            "numeric_precision": _PRECISION[s.type_name],
            "numeric_precision_radix": 2,
            "numeric_scale": 0,
            "start_value": str(s.start),
            "minimum_value": str(s.min_value),
            "maximum_value": str(s.max_value),
            "increment": str(s.increment),
            "cycle_option": "YES" if s.cycle else "NO",
        }
        for s in _sequences(b)
    ]


@_builder("pg_catalog", "pg_depend")
def _pg_depend(b: Builder) -> list[dict[str, Any]]:
    """Only what sequences record: owned by a column (auto, or internal for identity)."""
    out = []
    for s in _sequences(b):
        if s.owned_by is None:
            continue
        table = b.catalog.by_oid(s.owned_by[0])
        names = [c.name for c in getattr(table, "columns", ())]
        if s.owned_by[1] not in names:
            continue
        out.append(
            {
                "classid": PG_CLASS_OID,
                "objid": s.oid,
                "objsubid": 0,
                "refclassid": PG_CLASS_OID,
                "refobjid": s.owned_by[0],
                "refobjsubid": names.index(s.owned_by[1]) + 1,
                "deptype": "i" if s.identity else "a",
            }
        )
    return out


def identity_fields(b: Builder, table_oid: int, column: str) -> dict[str, Any]:
    """information_schema.columns' identity_* of a column (nothing if not identity)."""
    for s in _sequences(b):
        if s.identity and s.owned_by == (table_oid, column):
            table = b.catalog.by_oid(table_oid)
            col = table.column(column) if table is not None else None
            kind = getattr(col, "identity", "")
            return {
                "is_identity": "YES",
                "identity_generation": "ALWAYS" if kind == "a" else "BY DEFAULT",
                "identity_start": str(s.start),
                "identity_increment": str(s.increment),
                "identity_maximum": str(s.max_value),
                "identity_minimum": str(s.min_value),
                "identity_cycle": "YES" if s.cycle else "NO",
            }
    return {}
