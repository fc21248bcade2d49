"""Rows of the information_schema relations."""

from __future__ import annotations

from typing import Any

from headwater.catalog.catalog import is_temp_schema
from headwater.catalog.identifiers import quote_ident
from headwater.catalog.objects import Check, Table
from headwater.catalog.pg.foreign_keys import action_word, fk_rows
from headwater.catalog.pg.oids import table_checks
from headwater.catalog.pg.roles import owner_name
from headwater.catalog.pg.ruleutils import check_columns, check_def, view_definition
from headwater.catalog.pg.sequences import identity_fields
from headwater.catalog.pg.snapshot import (
    Builder,
    Builders,
    RelRow,
    indexed_tables,
    registrar,
    user_rels,
)
from headwater.catalog.pg.typeinfo import TYPES_BY_OID
from headwater.catalog.types import BPCHAR, BY_OID, NUMERIC, TEXT, VARCHAR, ColumnType

BUILDERS: Builders = {}
_builder = registrar(BUILDERS)


def _yes(v: bool) -> str:
    return "YES" if v else "NO"


@_builder("information_schema", "schemata")
def _schemata(b: Builder) -> list[dict[str, Any]]:
    return [
        {
            "catalog_name": b.session.database,
            "schema_name": n,
            "schema_owner": owner_name(b, owner),
        }
        for _, n, owner in b.namespaces()
    ]


def _table_type(r: RelRow) -> str:
    if r.relkind == "v":
        return "VIEW"
    if r.schema in ("pg_catalog", "information_schema") and r.relkind == "r":
        return "BASE TABLE"
    if r.relkind == "r" and is_temp_schema(r.schema):
        return "LOCAL TEMPORARY"
    return "BASE TABLE" if r.relkind == "r" else "VIEW"


@_builder("information_schema", "tables")
def _is_tables(b: Builder) -> list[dict[str, Any]]:
    path = b.session.search_path  # the session's own temporary schema; others' are left out
    return [
        {
            "table_catalog": b.session.database,
            "table_schema": r.schema,
            "table_name": r.name,
            "table_type": _table_type(r),
            "is_insertable_into": _yes(r.relkind == "r"),
            "is_typed": "NO",
        }
        for r in b.relations()
        if r.relkind in ("r", "v") and (not is_temp_schema(r.schema) or r.schema in path)
    ]


_IS_DATA_TYPE = {
    "bpchar": "character",
    "varchar": "character varying",
    "int4": "integer",
    "int2": "smallint",
    "int8": "bigint",
    "float4": "real",
    "float8": "double precision",
    "bool": "boolean",
    "timestamp": "timestamp without time zone",
    "timestamptz": "timestamp with time zone",
    "time": "time without time zone",
}


@_builder("information_schema", "columns")
def _is_columns(b: Builder) -> list[dict[str, Any]]:
    out = []
    user_types = {t.oid: t for t in b.catalog.types.values()}
    for r in b.relations():
        if r.relkind not in ("r", "v", "m"):
            continue
        for i, (name, toid, typmod, notnull, default) in enumerate(r.columns, start=1):
            t = TYPES_BY_OID.get(toid)
            typname = t.name if t else "text"
            ct = ColumnType(_pg_type_of(toid), typmod)
            data_type = (
                "ARRAY" if t is not None and t.is_array else _IS_DATA_TYPE.get(typname, typname)
            )
            udt_schema = "pg_catalog"
            col = r.obj.columns[i - 1] if r.obj is not None and r.relkind == "r" else None
            generated = getattr(col, "generated", None)
            enum = user_types.get(toid)
            if enum is not None:  # CREATE TYPE ... AS ENUM
                typname, udt_schema, data_type = enum.name, enum.schema, "USER-DEFINED"
            length = ct.length if ct.pg in (VARCHAR, BPCHAR) else None
            ps = ct.precision_scale if ct.pg is NUMERIC else None
            num_prec, num_scale, radix = None, None, None
            if typname in ("int2", "int4", "int8"):
                num_prec, num_scale, radix = {"int2": 16, "int4": 32, "int8": 64}[typname], 0, 2
            elif typname in ("float4", "float8"):
                num_prec, radix = (24 if typname == "float4" else 53), 2
            elif typname == "numeric":
                radix = 10
                if ps is not None:
                    num_prec, num_scale = ps
            dt_prec = (
                6
                if typname in ("timestamp", "timestamptz", "time", "interval")
                else 0
                if typname == "date"
                else None
            )
            out.append(
                {
                    "table_catalog": b.session.database,
                    "table_schema": r.schema,
                    "table_name": r.name,
                    "column_name": name,
                    "ordinal_position": i,
                    "column_default": default if generated is None else None,
                    "is_nullable": _yes(not notnull),
                    "data_type": data_type,
                    "character_maximum_length": length,
                    "character_octet_length": (
                        length * 4
                        if length is not None
                        else 1073741824
                        if typname in ("text", "varchar", "bpchar")
                        else None
                    ),
                    "numeric_precision": num_prec,
                    "numeric_precision_radix": radix,
                    "numeric_scale": num_scale,
                    "datetime_precision": dt_prec,
                    "udt_catalog": b.session.database,
                    "udt_schema": udt_schema,
                    "udt_name": typname,
                    "dtd_identifier": str(i),
                    "is_self_referencing": "NO",
                    "is_identity": "NO",
                    "identity_cycle": "NO",
                    "is_generated": "NEVER" if generated is None else "ALWAYS",
                    "generation_expression": default if generated is not None else None,
                    "is_updatable": _yes(r.relkind == "r"),
                    **identity_fields(b, r.oid, name),
                }
            )
    return out


def _pg_type_of(toid: int) -> Any:
    return BY_OID.get(toid, TEXT)


@_builder("information_schema", "views")
def _is_views(b: Builder) -> list[dict[str, Any]]:
    return [
        {
            "table_catalog": b.session.database,
            "table_schema": r.schema,
            "table_name": r.name,
            "view_definition": view_definition(r, b),
            "check_option": "NONE",
            "is_updatable": "NO",
            "is_insertable_into": "NO",
            "is_trigger_updatable": "NO",
            "is_trigger_deletable": "NO",
            "is_trigger_insertable_into": "NO",
        }
        for r in user_rels(b, "v")
    ]


def _not_null_checks(b: Builder) -> list[tuple[RelRow, int, str]]:
    out = []
    for r in user_rels(b, "r"):
        for i, (name, _, _, notnull, _) in enumerate(r.columns, start=1):
            if notnull:
                out.append((r, i, name))
    return out


def _constraint(db: str, schema: str, name: str, table: Any) -> dict[str, Any]:
    """The columns naming a constraint and its table (`table`: a Relation or a RelRow)."""
    return {
        "constraint_catalog": db,
        "constraint_schema": schema,
        "constraint_name": name,
        "table_catalog": db,
        "table_schema": table.schema,
        "table_name": table.name,
    }


# Constraints are checked at once, always (no DEFERRABLE, no NOT ENFORCED)
_IMMEDIATE = {"is_deferrable": "NO", "initially_deferred": "NO", "enforced": "YES"}


@_builder("information_schema", "table_constraints")
def _is_table_constraints(b: Builder) -> list[dict[str, Any]]:
    db = b.session.database
    out = []
    for r, table in indexed_tables(b):
        if r.constraint_oid:
            kind = "PRIMARY KEY" if r.primary else "UNIQUE"
            out.append(
                {
                    **_constraint(db, r.schema, r.name, table),
                    "constraint_type": kind,
                    **_IMMEDIATE,
                    "nulls_distinct": "YES",
                }
            )
    for table, check in _checks(b):
        out.append(
            {
                **_constraint(db, table.schema, check.name, table),
                "constraint_type": "CHECK",
                **_IMMEDIATE,
            }
        )
    for f in fk_rows(b):
        fk = _constraint(db, f.table.schema, f.fk.name, f.table)
        out.append({**fk, "constraint_type": "FOREIGN KEY", **_IMMEDIATE})
    for r, i, _ in _not_null_checks(b):
        name = f"{r.nsp_oid}_{r.oid}_{i}_not_null"
        out.append({**_constraint(db, r.schema, name, r), "constraint_type": "CHECK", **_IMMEDIATE})
    return out


def _checks(b: Builder) -> list[tuple[Table, Check]]:
    """CHECK constraints of the tables the session may see."""
    visible = {r.oid for r in user_rels(b, "r")}
    return [(t, c) for t in b.catalog.tables() if t.oid in visible for c in table_checks(t)]


@_builder("information_schema", "check_constraints")
def _is_check_constraints(b: Builder) -> list[dict[str, Any]]:
    db = b.session.database
    return [
        {
            "constraint_catalog": db,
            "constraint_schema": t.schema,
            "constraint_name": c.name,
            "check_clause": check_def(t, c.expr).removeprefix("CHECK "),
        }
        for t, c in _checks(b)
    ] + [
        {
            "constraint_catalog": db,
            "constraint_schema": r.schema,
            "constraint_name": f"{r.nsp_oid}_{r.oid}_{i}_not_null",
            "check_clause": f"{quote_ident(name)} IS NOT NULL",
        }
        for r, i, name in _not_null_checks(b)
    ]


@_builder("information_schema", "key_column_usage")
def _is_key_column_usage(b: Builder) -> list[dict[str, Any]]:
    db = b.session.database
    out = [
        {**_constraint(db, r.schema, r.name, table), "column_name": col, "ordinal_position": pos}
        for r, table in indexed_tables(b)
        if r.constraint_oid
        for pos, col in enumerate(r.index_cols, start=1)
    ]
    for f in fk_rows(b):
        key = next((k for k in f.ref.keys if k.name == f.key_name), None)
        pairs = zip(f.fk.columns, f.fk.ref_columns, strict=True)
        for pos, (col, ref_col) in enumerate(pairs, start=1):
            out.append(
                {
                    **_constraint(db, f.table.schema, f.fk.name, f.table),
                    "column_name": col,
                    "ordinal_position": pos,
                    "position_in_unique_constraint": (
                        key.columns.index(ref_col) + 1 if key is not None else None
                    ),
                }
            )
    return out


@_builder("information_schema", "referential_constraints")
def _is_referential_constraints(b: Builder) -> list[dict[str, Any]]:
    db = b.session.database
    return [
        {
            "constraint_catalog": db,
            "constraint_schema": f.table.schema,
            "constraint_name": f.fk.name,
            "unique_constraint_catalog": db,
            "unique_constraint_schema": f.ref.schema,
            "unique_constraint_name": f.key_name,
            "match_option": "FULL" if f.fk.match == "f" else "NONE",
            "update_rule": action_word(f.fk.on_update),
            "delete_rule": action_word(f.fk.on_delete),
        }
        for f in fk_rows(b)
    ]


@_builder("information_schema", "constraint_column_usage")
def _is_constraint_column_usage(b: Builder) -> list[dict[str, Any]]:
    db = b.session.database
    return (
        [
            {k: v for k, v in row.items() if k not in ("ordinal_position",)}
            for row in _is_key_column_usage(b)
            if "position_in_unique_constraint" not in row  # foreign keys: below
        ]
        + [  # a foreign key uses the referenced table's columns
            {**_constraint(db, f.table.schema, f.fk.name, f.ref), "column_name": col}
            for f in fk_rows(b)
            for col in f.fk.ref_columns
        ]
        + [
            {**_constraint(db, t.schema, c.name, t), "column_name": col}
            for t, c in _checks(b)
            for col in sorted(check_columns(c.expr))
        ]
    )
