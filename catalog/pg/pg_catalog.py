"""Rows of the pg_catalog relations (roles: roles.py; the _hw_ relations: internal.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from headwater.catalog.catalog import is_temp_schema
from headwater.catalog.extensions import AVAILABLE, BUILT_IN, PLPGSQL_OID
from headwater.catalog.objects import Index
from headwater.catalog.pg import domains, specs
from headwater.catalog.pg.foreign_keys import fk_rows
from headwater.catalog.pg.functions import trigger_rows
from headwater.catalog.pg.oids import (
    BTREE_AM,
    DATABASE_OID,
    HEAP_AM,
    PG_CATALOG_OID,
    SUPERUSER_OID,
    UTF8_ENCODING,
    check_oid,
    derived_oid,
    table_checks,
)
from headwater.catalog.pg.roles import acl, owner_name
from headwater.catalog.pg.ruleutils import check_columns, index_def, view_definition
from headwater.catalog.pg.snapshot import (
    Builder,
    Builders,
    RelRow,
    index_rels,
    indexed_tables,
    registrar,
    user_rels,
)
from headwater.catalog.pg.typeinfo import TYPES_BY_OID

BUILDERS: Builders = {}
_builder = registrar(BUILDERS)

# Default btree operator classes: type oid -> (opclass oid, name, family oid, input type).
_BTREE_OPCLASSES: dict[int, tuple[int, str, int, int]] = {
    23: (1978, "int4_ops", 1976, 23),
    21: (1979, "int2_ops", 1976, 21),
    26: (1981, "oid_ops", 1989, 26),
    1082: (3122, "date_ops", 434, 1082),
    701: (3123, "float8_ops", 1970, 701),
    20: (3124, "int8_ops", 1976, 20),
    1700: (3125, "numeric_ops", 1988, 1700),
    25: (3126, "text_ops", 1994, 25),
    1043: (3126, "text_ops", 1994, 25),  # varchar indexes use text's operators
    1184: (3127, "timestamptz_ops", 434, 1184),
    1114: (3128, "timestamp_ops", 434, 1114),
    16: (10003, "bool_ops", 424, 16),
    1042: (10004, "bpchar_ops", 426, 1042),
    17: (10006, "bytea_ops", 428, 17),
    18: (10007, "char_ops", 429, 18),
    700: (10012, "float4_ops", 1970, 700),
    1186: (10022, "interval_ops", 1982, 1186),
    19: (10028, "name_ops", 1994, 19),
    1083: (10038, "time_ops", 1996, 1083),
    2950: (10065, "uuid_ops", 2968, 2950),
    3802: (10088, "jsonb_ops", 4033, 3802),
}

# Settings that exist in pg_settings but not as session settings.
_EXTRA_SETTINGS = {
    "max_index_keys": "32",
    "block_size": "8192",
    "max_function_args": "100",
    "segment_size": "131072",
    "wal_block_size": "8192",
    "data_checksums": "off",
    "lc_collate": "C",
    "lc_ctype": "C",
}


@_builder("pg_catalog", "pg_namespace")
def _pg_namespace(b: Builder) -> list[dict[str, Any]]:
    return [
        {"oid": o, "nspname": n, "nspowner": w, "nspacl": acl(b, b.catalog.schemas.get(n))}
        for o, n, w in b.namespaces()
    ]


@_builder("pg_catalog", "pg_class")
def _pg_class(b: Builder) -> list[dict[str, Any]]:
    out = []
    has_index = {r.table_oid for r in b.relations() if r.relkind == "i"}
    fk_tables = {
        oid for t in b.catalog.tables() for f in t.foreign_keys for oid in (t.oid, f.ref_table)
    }
    for r in b.relations():
        kind = r.relkind
        out.append(
            {
                "oid": r.oid,
                "relname": r.name,
                "relnamespace": r.nsp_oid,
                "reltype": 0,
                "reloftype": 0,
                "relowner": getattr(r.obj, "owner", 0) or SUPERUSER_OID,
                "relacl": acl(b, r.obj),
                "reloptions": _reloptions(r.obj),
                "relam": HEAP_AM if kind in ("r", "m") else BTREE_AM if kind == "i" else 0,
                "relfilenode": r.oid if kind in ("r", "m", "i") else 0,
                "reltablespace": 0,
                "relpages": 1 if kind == "S" else 0,
                "reltuples": -1.0 if kind in ("r", "m") else 1.0 if kind == "S" else 0.0,
                "relallvisible": 0,
                "reltoastrelid": 0,
                "relhasindex": r.oid in has_index,
                "relisshared": False,
                "relpersistence": "t" if is_temp_schema(r.schema) else "p",
                "relkind": kind,
                "relnatts": len(r.columns),
                "relchecks": len(getattr(r.obj, "checks", ())),
                "relhasrules": kind == "v",
                "relhastriggers": r.oid in fk_tables or bool(getattr(r.obj, "triggers", ())),
                "relhassubclass": False,
                "relrowsecurity": False,
                "relforcerowsecurity": False,
                "relispopulated": True,
                "relreplident": "n" if kind in ("v", "i", "S") else "d",
                "relispartition": False,
                "relrewrite": 0,
                "relfrozenxid": 0 if kind in ("v", "i", "S") else 716,
                "relminmxid": 0 if kind in ("v", "i", "S") else 1,
            }
        )
    return out


def _reloptions(obj: Any) -> list[str] | None:
    """A materialized view's WITH (freshness = ...), as PostgreSQL lists options."""
    secs = getattr(obj, "freshness", None)
    if secs is None:
        return None
    text = f"{secs:g}s" if secs >= 1 else f"{secs * 1000:g}ms"
    return [f"freshness={text}"]


@_builder("pg_catalog", "pg_attribute")
def _pg_attribute(b: Builder) -> list[dict[str, Any]]:
    out = []
    for r in b.relations():
        for i, (name, toid, typmod, notnull, default) in enumerate(r.columns, start=1):
            t = TYPES_BY_OID.get(toid)
            out.append(
                {
                    "attrelid": r.oid,
                    "attname": name,
                    "atttypid": toid,
                    "attstattarget": -1,
                    "attlen": t.typlen if t else -1,
                    "attnum": i,
                    "attndims": 1 if t is not None and t.is_array else 0,
                    "attcacheoff": -1,
                    "atttypmod": typmod,
                    "attbyval": t.typbyval if t else False,
                    "attalign": t.typalign if t else "i",
                    "attstorage": t.typstorage if t else "x",
                    "attcompression": "",
                    "attnotnull": notnull,
                    "atthasdef": default is not None,
                    "atthasmissing": False,
                    "attidentity": _identity(r.obj, i),
                    "attgenerated": _generated(r.obj, i),
                    "attisdropped": False,
                    "attislocal": True,
                    "attinhcount": 0,
                    "attcollation": t.typcollation if t else 0,
                }
            )
    return out


def _generated(obj: Any, attnum: int) -> str:
    """pg_attribute.attgenerated: 's' for GENERATED ALWAYS AS (...) STORED."""
    cols = getattr(obj, "columns", ())
    return "s" if attnum <= len(cols) and getattr(cols[attnum - 1], "generated", None) else ""


def _identity(obj: Any, attnum: int) -> str:
    """pg_attribute.attidentity: 'a' / 'd' for identity columns (planner/sequences.py)."""
    cols = getattr(obj, "columns", ())
    return getattr(cols[attnum - 1], "identity", "") if attnum <= len(cols) else ""


@_builder("pg_catalog", "pg_attrdef")
def _pg_attrdef(b: Builder) -> list[dict[str, Any]]:
    out = []
    for r in b.relations():
        if r.obj is None:
            continue
        for i, (_, _, _, _, default) in enumerate(r.columns, start=1):
            if default is not None:
                out.append(
                    {
                        "oid": derived_oid(r.oid, 2, i),
                        "adrelid": r.oid,
                        "adnum": i,
                        "adbin": default,
                    }
                )
    return out


@_builder("pg_catalog", "pg_type")
def _pg_type(b: Builder) -> list[dict[str, Any]]:
    cols = specs.TYPE_COLUMNS
    return [_listify(dict(zip(cols, r, strict=True))) for r in specs.TYPES]


@_builder("pg_catalog", "pg_proc")
def pg_proc(b: Builder) -> list[dict[str, Any]]:
    cols = specs.PROC_COLUMNS
    return [_listify(dict(zip(cols, r, strict=True))) for r in specs.PROCS]


def _listify(d: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


def _attnums(b: Builder, table_oid: int, names: Iterable[str]) -> list[int]:
    table = b.catalog.by_oid(table_oid)
    if table is None:
        return [0 for _ in names]
    pos = {c.name: i for i, c in enumerate(table.columns, start=1)}
    return [pos.get(n, 0) for n in names]


@_builder("pg_catalog", "pg_index")
def _pg_index(b: Builder) -> list[dict[str, Any]]:
    out = []
    for r in index_rels(b):
        keys = _attnums(b, r.table_oid, r.index_cols)
        colls = [TYPES_BY_OID[t].typcollation if t in TYPES_BY_OID else 0 for _, t, *_ in r.columns]
        out.append(
            {
                "indexrelid": r.oid,
                "indrelid": r.table_oid,
                "indnatts": len(keys),
                "indnkeyatts": len(keys),
                "indisunique": r.unique,
                "indnullsnotdistinct": False,
                "indisprimary": r.primary,
                "indisexclusion": False,
                "indimmediate": True,
                "indisclustered": False,
                "indisvalid": True,
                "indcheckxmin": False,
                "indisready": True,
                "indislive": True,
                "indisreplident": False,
                "indkey": keys,
                "indcollation": colls,
                "indclass": [_BTREE_OPCLASSES.get(t, (0,))[0] for _, t, *_ in r.columns],
                "indoption": [0] * len(keys),
                # (PostgreSQL's node trees; clients test them for NULL, psql prints
                # pg_get_indexdef's text)
                "indexprs": _index_text(r.obj, "key_exprs"),
                "indpred": _index_text(r.obj, "predicate"),
            }
        )
    return out


def _index_text(obj: Any, attr: str) -> str | None:
    value = getattr(obj, attr, None) if isinstance(obj, Index) else None
    if isinstance(value, tuple):
        value = ", ".join(e for e in value if e) or None
    return value


# pg_constraint's columns as most constraints have them (none is deferrable, a
# domain's or inherited; only a foreign key references a table)
_CONSTRAINT = {
    "condeferrable": False,
    "condeferred": False,
    "contypid": 0,
    "conparentid": 0,
    "confrelid": 0,
    "confupdtype": " ",
    "confdeltype": " ",
    "confmatchtype": " ",
    "conislocal": True,
    "coninhcount": 0,
}


@_builder("pg_catalog", "pg_constraint")
def _pg_constraint(b: Builder) -> list[dict[str, Any]]:
    out = []
    for r in index_rels(b):
        if not r.constraint_oid:
            continue
        out.append(
            {
                **_CONSTRAINT,
                "oid": r.constraint_oid,
                "conname": r.name,
                "connamespace": r.nsp_oid,
                "contype": "p" if r.primary else "u",
                "convalidated": True,
                "conrelid": r.table_oid,
                "conindid": r.oid,
                "connoinherit": True,
                "conkey": _attnums(b, r.table_oid, r.index_cols),
            }
        )
    nsp = {s.name: s.oid for s in b.catalog.schemas.values()}
    for table in b.catalog.tables():
        for n, check in enumerate(table_checks(table)):
            out.append(
                {
                    **_CONSTRAINT,
                    "oid": check_oid(table.oid, n),
                    "conname": check.name,
                    "connamespace": nsp.get(table.schema, 0),
                    "contype": "c",
                    "convalidated": check.valid,
                    "conrelid": table.oid,
                    "conindid": 0,
                    "connoinherit": False,
                    "conkey": _attnums(b, table.oid, sorted(check_columns(check.expr))),
                }
            )
    out += domains.constraint_rows(b, _CONSTRAINT)
    for f in fk_rows(b):
        out.append(
            {
                **_CONSTRAINT,
                "oid": f.oid,
                "conname": f.fk.name,
                "connamespace": f.nsp_oid,
                "contype": "f",
                "convalidated": f.fk.valid,
                "conrelid": f.table.oid,
                "conindid": f.index_oid,
                "confrelid": f.ref.oid,
                "confupdtype": f.fk.on_update,
                "confdeltype": f.fk.on_delete,
                "confmatchtype": f.fk.match,
                "connoinherit": True,
                "conkey": _attnums(b, f.table.oid, f.fk.columns),
                "confkey": _attnums(b, f.ref.oid, f.fk.ref_columns),
            }
        )
    return out


@_builder("pg_catalog", "pg_description")
def _pg_description(b: Builder) -> list[dict[str, Any]]:
    """COMMENT ON: relations and their columns (pg_class), schemas (pg_namespace), enums
    (pg_type); and the extensions' own comments (pg_extension: psql's \\dx shows them)."""
    out = [
        {"objoid": oid, "classoid": 3079, "objsubid": 0, "description": comment}
        for oid, comment in [(PLPGSQL_OID, AVAILABLE[BUILT_IN].comment)]
        + [(e.oid, e.comment) for e in b.catalog.extensions.values()]
        if comment is not None
    ]
    for s in b.catalog.schemas.values():
        if s.comment is not None:
            out.append({"objoid": s.oid, "classoid": 2615, "objsubid": 0, "description": s.comment})
    for t in [*b.catalog.types.values(), *b.catalog.domains.values()]:  # (pg_type's)
        if t.comment is not None:
            out.append({"objoid": t.oid, "classoid": 1247, "objsubid": 0, "description": t.comment})
    for fs in b.catalog.functions.values():  # (pg_proc's)
        for f in fs:
            if f.comment is not None:
                out.append(
                    {"objoid": f.oid, "classoid": 1255, "objsubid": 0, "description": f.comment}
                )
    for r in b.catalog.relations.values():
        if r.comment is not None:
            out.append({"objoid": r.oid, "classoid": 1259, "objsubid": 0, "description": r.comment})
        for i, c in enumerate(r.columns, start=1):
            if c.comment is not None:
                out.append(
                    {"objoid": r.oid, "classoid": 1259, "objsubid": i, "description": c.comment}
                )
    return out


@_builder("pg_catalog", "pg_database")
def _pg_database(b: Builder) -> list[dict[str, Any]]:
    return [
        {
            "oid": DATABASE_OID,
            "datname": b.session.database,
            "datdba": SUPERUSER_OID,
            "encoding": UTF8_ENCODING,
            "datlocprovider": "c",
            "datistemplate": False,
            "datallowconn": True,
            "datconnlimit": -1,
            "datfrozenxid": 716,
            "datminmxid": 1,
            "dattablespace": 1663,
            "datcollate": "C",
            "datctype": "C",
        }
    ]


@_builder("pg_catalog", "pg_settings")
def pg_settings(b: Builder) -> list[dict[str, Any]]:
    values = dict(b.session.settings)
    values.pop("datestyle", None)  # an alias of DateStyle
    for k, v in _EXTRA_SETTINGS.items():
        values.setdefault(k, v)
    out = []
    for name in sorted(values, key=str.lower):
        default = b.session.defaults.get(name, values[name])
        out.append(
            {
                "name": name,
                "setting": values[name],
                "category": "Headwater" if name.startswith("headwater.") else "",
                "short_desc": "",
                "context": "internal" if name in _EXTRA_SETTINGS else "user",
                "vartype": "string",
                "source": "default" if values[name] == default else "session",
                "boot_val": default,
                "reset_val": default,
                "pending_restart": False,
            }
        )
    return out


@_builder("pg_catalog", "pg_stat_activity")
def _pg_stat_activity(b: Builder) -> list[dict[str, Any]]:
    rows = b.session.activity() if b.session.activity is not None else []
    return [{"datid": DATABASE_OID, "backend_type": "client backend", **r} for r in rows]


@_builder("pg_catalog", "pg_extension")
def _pg_extension(b: Builder) -> list[dict[str, Any]]:
    rows = [(PLPGSQL_OID, BUILT_IN, SUPERUSER_OID, PG_CATALOG_OID, AVAILABLE[BUILT_IN].version)]
    for e in sorted(b.catalog.extensions.values(), key=lambda e: e.oid):
        rows.append((e.oid, e.name, e.owner or SUPERUSER_OID, b.nsp_oid(e.schema), e.version))
    return [
        {
            "oid": oid,
            "extname": name,
            "extowner": owner,
            "extnamespace": nsp,
            "extrelocatable": AVAILABLE[name].relocatable,
            "extversion": version,
        }
        for oid, name, owner, nsp, version in rows
    ]


@_builder("pg_catalog", "pg_available_extensions")
def _pg_available_extensions(b: Builder) -> list[dict[str, Any]]:
    installed = {BUILT_IN, *b.catalog.extensions}
    return [
        {
            "name": name,
            "default_version": a.version,
            "installed_version": a.version if name in installed else None,
            "comment": a.comment,
        }
        for name, a in sorted(AVAILABLE.items())
    ]


@_builder("pg_catalog", "pg_prepared_statements")
def _pg_prepared_statements(b: Builder) -> list[dict[str, Any]]:
    """The session's prepared statements, PREPAREd in SQL or Parsed by the protocol."""
    return b.session.prepared_statements() if b.session.prepared_statements is not None else []


@_builder("pg_catalog", "pg_am")
def _pg_am(b: Builder) -> list[dict[str, Any]]:
    rows = [
        (HEAP_AM, "heap", "heap_tableam_handler", "t"),
        (BTREE_AM, "btree", "bthandler", "i"),
        (405, "hash", "hashhandler", "i"),
        (783, "gist", "gisthandler", "i"),
        (2742, "gin", "ginhandler", "i"),
        (4000, "spgist", "spghandler", "i"),
        (3580, "brin", "brinhandler", "i"),
    ]
    return [{"oid": o, "amname": n, "amhandler": h, "amtype": t} for o, n, h, t in rows]


@_builder("pg_catalog", "pg_opclass")
def _pg_opclass(b: Builder) -> list[dict[str, Any]]:
    rows = sorted({v for k, v in _BTREE_OPCLASSES.items()})
    return [
        {
            "oid": o,
            "opcmethod": BTREE_AM,
            "opcname": n,
            "opcnamespace": PG_CATALOG_OID,
            "opcowner": SUPERUSER_OID,
            "opcfamily": f,
            "opcintype": t,
            "opcdefault": True,
            "opckeytype": 0,
        }
        for o, n, f, t in rows
    ]


@_builder("pg_catalog", "pg_collation")
def _pg_collation(b: Builder) -> list[dict[str, Any]]:
    rows = [(100, "default", "d", None), (950, "C", "c", "C"), (951, "POSIX", "c", "POSIX")]
    return [
        {
            "oid": o,
            "collname": n,
            "collnamespace": PG_CATALOG_OID,
            "collowner": SUPERUSER_OID,
            "collprovider": p,
            "collisdeterministic": True,
            "collencoding": -1,
            "collcollate": c,
            "collctype": c,
        }
        for o, n, p, c in rows
    ]


@_builder("pg_catalog", "pg_tablespace")
def _pg_tablespace(b: Builder) -> list[dict[str, Any]]:
    return [
        {"oid": 1663, "spcname": "pg_default", "spcowner": SUPERUSER_OID},
        {"oid": 1664, "spcname": "pg_global", "spcowner": SUPERUSER_OID},
    ]


@_builder("pg_catalog", "pg_trigger")
def _pg_trigger(b: Builder) -> list[dict[str, Any]]:
    return trigger_rows(b)


@_builder("pg_catalog", "pg_language")
def _pg_language(b: Builder) -> list[dict[str, Any]]:
    rows = [
        (12, "internal", False, False, 0, 0, 2246),
        (13, "c", False, False, 0, 0, 2247),
        (14, "sql", False, True, 0, 0, 2248),
        (13563, "plpgsql", True, True, 13560, 13561, 13562),  # (trigger functions)
    ]
    return [
        {
            "oid": o,
            "lanname": n,
            "lanowner": SUPERUSER_OID,
            "lanispl": pl,
            "lanpltrusted": t,
            "lanplcallfoid": call,
            "laninline": inline,
            "lanvalidator": validator,
        }
        for o, n, pl, t, call, inline, validator in rows
    ]


def _owned(b: Builder, r: RelRow, noun: str, indexed: set[int] | None = None) -> dict[str, Any]:
    """schemaname, {noun}name, {noun}owner (and hasindexes, given the `indexed`
    relations) of pg_views, pg_matviews and pg_tables."""
    owner = owner_name(b, getattr(r.obj, "owner", 0) or SUPERUSER_OID)
    row = {"schemaname": r.schema, f"{noun}name": r.name, f"{noun}owner": owner}
    if indexed is not None:
        row["hasindexes"] = r.oid in indexed
    return row


@_builder("pg_catalog", "pg_views")
def _pg_views(b: Builder) -> list[dict[str, Any]]:
    return [
        {**_owned(b, r, "view"), "definition": view_definition(r, b)}
        for r in b.relations()
        if r.relkind == "v"
    ]


@_builder("pg_catalog", "pg_matviews")
def _pg_matviews(b: Builder) -> list[dict[str, Any]]:
    indexed = {r.table_oid for r in index_rels(b)}
    return [
        {
            **_owned(b, r, "matview", indexed),
            "ispopulated": True,
            "definition": view_definition(r, b),
        }
        for r in user_rels(b, "m")
    ]


@_builder("pg_catalog", "pg_tables")
def _pg_tables(b: Builder) -> list[dict[str, Any]]:
    indexed = {r.table_oid for r in index_rels(b)}
    no = {"hasrules": False, "hastriggers": False, "rowsecurity": False}
    return [{**_owned(b, r, "table", indexed), **no} for r in b.relations() if r.relkind == "r"]


@_builder("pg_catalog", "pg_indexes")
def _pg_indexes(b: Builder) -> list[dict[str, Any]]:
    return [
        {
            "schemaname": r.schema,
            "tablename": table.name,
            "indexname": r.name,
            "indexdef": index_def(r, table),
        }
        for r, table in indexed_tables(b)
    ]
