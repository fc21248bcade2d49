"""Arrow tables of the system relations, cached per catalog snapshot."""

from __future__ import annotations

import threading
import weakref
from typing import Any

import pyarrow as pa
from headwater.catalog.catalog import Catalog
from headwater.catalog.pg import (
    enums,
    functions,
    information_schema,
    internal,
    pg_catalog,
    roles,
    sequences,
    specs,
)
from headwater.catalog.pg.internal import INTERNAL
from headwater.catalog.pg.session import SessionContext
from headwater.catalog.pg.snapshot import Builder, Builders
from headwater.catalog.types import ColumnType, arrow_type, type_named

# Every relation's rows; a relation without an entry (pg_trigger, pg_policy, ...) is empty.
BUILDERS: Builders = {
    **pg_catalog.BUILDERS,
    **roles.BUILDERS,
    **information_schema.BUILDERS,
    **internal.BUILDERS,
    **sequences.BUILDERS,
    **enums.BUILDERS,
}


def _rows(
    catalog: Catalog, session: SessionContext, schema: str, name: str
) -> list[dict[str, Any]]:
    fn = BUILDERS.get((schema, name))
    return fn(Builder(catalog, session)) if fn is not None else []


def _arrow_type(t: str) -> pa.DataType:
    """The Arrow type of a spec column's type: catalog/types.py's for the types it
    knows, the emulation's own for the rest (text for what has no entry)."""
    if t in _ARROW_TYPES:
        return _ARROW_TYPES[t]
    if t.endswith("[]"):
        return pa.list_(_arrow_type(t[:-2]))
    pg = type_named(t)
    return arrow_type(ColumnType(pg)) if pg is not None else pa.string()


# Types of the system catalogs that PostgreSQL's type map does not store this way
_ARROW_TYPES: dict[str, pa.DataType] = {
    "oid": pa.uint32(),  # UINTEGER: results report oid (asyncpg's introspection needs it)
    "xid": pa.int64(),
    "regtype": pa.int64(),
    "cardinal_number": pa.int32(),
    "time_stamp": pa.timestamp("us", tz="UTC"),
    "int2vector": pa.list_(pa.uint16()),  # USMALLINT[]: results report int2vector
    "oidvector": pa.list_(pa.uint64()),  # UBIGINT[]: results report oidvector
    "regtype[]": pa.list_(pa.string()),  # type names, as regtype's output prints them
}


def columns_of(schema: str, name: str) -> tuple[tuple[str, str], ...] | None:
    if schema == "pg_catalog" and name in INTERNAL:
        return INTERNAL[name]
    spec = specs.RELATIONS.get((schema, name))
    return spec[2] if spec is not None else None


def arrow_table(schema: str, name: str, rows: list[dict[str, Any]]) -> pa.Table:
    cols = columns_of(schema, name)
    assert cols is not None
    arrays = []
    internal = schema == "pg_catalog" and name in INTERNAL
    for cname, ctype in cols:
        t = _arrow_type(ctype)
        key = cname[3:] if internal else cname
        values = [r.get(key) for r in rows]
        if pa.types.is_list(t):  # int2vector/oidvector text from the specs: '23 25'
            values = [[int(x) for x in v.split()] if isinstance(v, str) else v for v in values]
        arrays.append(pa.array(values, type=t))
    return pa.Table.from_arrays(arrays, names=[c for c, _ in cols])


# Tables that depend only on the catalog snapshot (not on the session) are cached
# per snapshot: a published Catalog is never changed again (writers work on copies).
_SESSION_DEPENDENT = {
    ("pg_catalog", n)
    for n in (
        "_hw_session",
        "_hw_relvis",
        "_hw_relnames",
        "_hw_defs",
        "_hw_objnames",
        "_hw_settings",
        "pg_settings",
        "pg_stat_activity",
        "pg_prepared_statements",
        "pg_database",
        "pg_roles",
        "pg_authid",
        "pg_shadow",
        "pg_auth_members",
        "_hw_privs",
        "_hw_role_privs",
        "pg_user",
        "pg_views",
        "pg_tables",
        "pg_matviews",
        "pg_namespace",
    )
} | {("information_schema", n) for n in ("schemata", "tables", "columns", "views")}

# built once per catalog version and search path: a default names the sequences and
# types the path does not reach with their schema
_PATH_DEPENDENT = {("pg_catalog", "pg_attrdef")}

_STATIC = {("pg_catalog", n) for n in ("pg_type", "pg_proc", "_hw_typnames", "_hw_typfmt")}

_static_cache: dict[tuple[str, str], pa.Table] = {}

_snapshot_cache: weakref.WeakKeyDictionary[Catalog, tuple[tuple[Any, ...], dict[Any, pa.Table]]]
_snapshot_cache = weakref.WeakKeyDictionary()

_cache_lock = threading.Lock()


def _fingerprint(catalog: Catalog) -> tuple[Any, ...]:
    roles = getattr(catalog, "roles", None) or {}
    return (
        tuple(catalog.relations.values())
        + tuple(catalog.schemas.values())
        + tuple(roles.values())
        + tuple(catalog.types.values())
        + tuple(getattr(catalog, "domains", {}).values())
        + (getattr(catalog, "functions", None),)
    )


def build(catalog: Catalog, session: SessionContext, schema: str, name: str) -> pa.Table:
    key = (schema, name)
    if key in _STATIC:
        with _cache_lock:
            t = _static_cache.get(key)
        if t is None:
            t = arrow_table(schema, name, _rows(catalog, session, schema, name))
            with _cache_lock:
                _static_cache[key] = t
        own = catalog.types or getattr(catalog, "domains", None)
        if own and key in enums.APPENDED:  # CREATE TYPE's and CREATE DOMAIN's rows
            rows = enums.APPENDED[key](Builder(catalog, session))
            t = pa.concat_tables([t, arrow_table(schema, name, rows)])
        if getattr(catalog, "functions", None) and key == (
            "pg_catalog",
            "pg_proc",
        ):  # CREATE FUNCTION's
            rows = functions.pg_proc_rows(Builder(catalog, session))
            t = pa.concat_tables([t, arrow_table(schema, name, rows)])
        return t
    if key in _SESSION_DEPENDENT:
        return arrow_table(schema, name, _rows(catalog, session, schema, name))
    fp = _fingerprint(catalog)
    if key in _PATH_DEPENDENT:  # kept per search path
        key = (*key, *session.search_path)
    with _cache_lock:
        entry = _snapshot_cache.get(catalog)
        if entry is not None and (
            len(entry[0]) != len(fp) or any(a is not b for a, b in zip(entry[0], fp, strict=True))
        ):
            entry = None
        if entry is None:
            entry = (fp, {})
            _snapshot_cache[catalog] = entry
        t = entry[1].get(key)
    if t is None:
        t = arrow_table(schema, name, _rows(catalog, session, schema, name))
        with _cache_lock:
            entry[1][key] = t
    return t
