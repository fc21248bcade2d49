"""pg_catalog and information_schema, built from a catalog snapshot and the session.

Every system relation a client can name is listed in `pg_specs.RELATIONS` with
PostgreSQL 15's column names and types. A statement that names one gets it as an
Arrow table registered on the statement's DuckDB connection (only the relations the
statement references are built); the Binder splices in a scan of it through its
`system` hook (see `SystemRelations`). Rows come from the Headwater catalog, so
the system relations always agree with it; what Headwater does not have (triggers,
policies, publications, comments, ...) is an empty relation of the right shape.

Relations whose name starts with `_hw_` are internal: planner/pg_compat.py rewrites
the functions and casts clients use (pg_get_indexdef, pg_table_is_visible,
'name'::regclass, current_user, ...) into subqueries over them.

OIDs: relations, schemas and indexes use their catalog oid; key constraints, the
indexes behind PRIMARY KEY/UNIQUE constraints and column defaults get oids derived
from their table's oid (`derived_oid`), stable as long as the table exists.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pglast.ast as A
import pyarrow as pa
from headwater.catalog import pg_specs
from headwater.catalog.catalog import PUBLIC_SCHEMA_OID, Catalog
from headwater.catalog.objects import Column, Index, Key, Relation, Table, View
from headwater.catalog.types import BPCHAR, NUMERIC, TEXT, VARCHAR, ColumnType
from pglast import parse_sql
from pglast.keywords import UNRESERVED_KEYWORDS

PG_CATALOG_OID = 11
INFORMATION_SCHEMA_OID = 13207
SUPERUSER_OID = 10
DATABASE_OWNER_ROLE_OID = 6171  # pg_database_owner: owns schema public in PostgreSQL 15
DATABASE_OID = 16384
HEAP_AM = 2
BTREE_AM = 403
DEFAULT_COLLATION = 100
C_COLLATION = 950
UTF8_ENCODING = 6
SERVER_VERSION_TEXT = (
    "PostgreSQL 15.0 (Headwater 0.1.0) on x86_64-pc-linux-gnu, "
    "compiled by gcc (Debian 12.2.0-14) 12.2.0, 64-bit"
)

# relkind per catalog object kind. A new kind of relation (materialized views) is
# one entry here; pg_matviews lists every relation whose relkind is 'm'.
RELKIND: dict[str, str] = {
    "table": "r",
    "view": "v",
    "index": "i",
    "materialized view": "m",
    "materialized_view": "m",
}

_RELKIND_SYSTEM = {"r": "r", "v": "v"}

# PostgreSQL 15's predefined roles (not shown by \du, named by pg_get_userbyid).
_PREDEFINED_ROLES = (
    (3373, "pg_monitor"),
    (3374, "pg_read_all_settings"),
    (3375, "pg_read_all_stats"),
    (3377, "pg_stat_scan_tables"),
    (4200, "pg_signal_backend"),
    (4544, "pg_checkpoint"),
    (4569, "pg_read_server_files"),
    (4570, "pg_write_server_files"),
    (4571, "pg_execute_server_program"),
    (6171, "pg_database_owner"),
    (6181, "pg_read_all_data"),
    (6182, "pg_write_all_data"),
)

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


# -- types ----------
@dataclass(frozen=True)
class TypeRow:
    oid: int
    name: str
    typlen: int
    typbyval: bool
    typalign: str
    typstorage: str
    typcollation: int
    typelem: int
    typcategory: str


def _type_rows() -> dict[int, TypeRow]:
    cols = pg_specs.TYPE_COLUMNS
    out = {}
    for r in pg_specs.TYPES:
        d = dict(zip(cols, r, strict=True))
        out[int(d["oid"])] = TypeRow(
            int(d["oid"]),
            str(d["typname"]),
            int(d["typlen"]),
            bool(d["typbyval"]),
            str(d["typalign"]),
            str(d["typstorage"]),
            int(d["typcollation"]),
            int(d["typelem"]),
            str(d["typcategory"]),
        )
    return out


TYPES_BY_OID: dict[int, TypeRow] = _type_rows()
_TYPE_OID_BY_NAME = {t.name: t.oid for t in TYPES_BY_OID.values()}

# format_type() names (as in pg_specs.RELATIONS) -> (type oid, typmod)
_SPEC_TYPES: dict[str, tuple[int, int]] = {
    "oid": (26, -1),
    "name": (19, -1),
    "text": (25, -1),
    '"char"': (18, -1),
    "boolean": (16, -1),
    "smallint": (21, -1),
    "integer": (23, -1),
    "bigint": (20, -1),
    "real": (700, -1),
    "double precision": (701, -1),
    "regproc": (24, -1),
    "regtype": (2206, -1),
    "xid": (28, -1),
    "pg_node_tree": (194, -1),
    "timestamp with time zone": (1184, -1),
    "interval": (1186, -1),
    "bytea": (17, -1),
    "int2vector": (22, -1),
    "oidvector": (30, -1),
    "anyarray": (2277, -1),
    "pg_lsn": (3220, -1),
    "pg_ndistinct": (3361, -1),
    "pg_dependencies": (3402, -1),
    "pg_mcv_list": (5017, -1),
    "aclitem": (1033, -1),
    # information_schema's domains, shown as their base types
    "sql_identifier": (19, -1),
    "cardinal_number": (23, -1),
    "character_data": (1043, -1),
    "yes_or_no": (1043, 7),
    "time_stamp": (1184, -1),
}
_ARRAY_OF = {t.typelem: t.oid for t in TYPES_BY_OID.values() if t.typcategory == "A"}


def spec_type(t: str) -> tuple[int, int]:
    if t.endswith("[]"):
        elem, _ = spec_type(t[:-2])
        return _ARRAY_OF.get(elem, 0), -1
    return _SPEC_TYPES.get(t, (25, -1))


def _arrow_type(t: str) -> pa.DataType:
    if t.endswith("[]"):
        return pa.list_(_arrow_type(t[:-2]))
    return _ARROW_TYPES.get(t, pa.string())


_ARROW_TYPES: dict[str, pa.DataType] = {
    "oid": pa.int64(),
    "xid": pa.int64(),
    "regtype": pa.int64(),
    "boolean": pa.bool_(),
    "smallint": pa.int16(),
    "integer": pa.int32(),
    "cardinal_number": pa.int32(),
    "bigint": pa.int64(),
    "real": pa.float32(),
    "double precision": pa.float64(),
    "timestamp with time zone": pa.timestamp("us", tz="UTC"),
    "time_stamp": pa.timestamp("us", tz="UTC"),
    "interval": pa.month_day_nano_interval(),
    "bytea": pa.binary(),
    "int2vector": pa.list_(pa.uint16()),  # USMALLINT[]: results report int2vector
    "oidvector": pa.list_(pa.uint32()),  # UINTEGER[]: results report oidvector
}

# Columns of internal relations (used by planner/pg_compat.py rewrites only). Their
# columns start with hw_ so that they never capture a column the rewritten
# function's arguments name (the rows below use the names without the prefix).
INTERNAL: dict[str, tuple[tuple[str, str], ...]] = {
    "_hw_session": (
        ("hw_user_name", "text"),
        ("hw_session_user_name", "text"),
        ("hw_database", "text"),
        ("hw_current_schema", "text"),
        ("hw_schemas", "text[]"),
        ("hw_schemas_implicit", "text[]"),
        ("hw_pid", "integer"),
        ("hw_version", "text"),
    ),
    # every pg_class row: is it visible on the search path, and its regclass text
    "_hw_relvis": (("hw_oid", "oid"), ("hw_visible", "boolean"), ("hw_display", "text")),
    # every accepted spelling of a relation name ('t', 'public.t', '"T"', ...)
    "_hw_relnames": (("hw_name", "text"), ("hw_folds", "boolean"), ("hw_oid", "oid")),
    # pg_get_indexdef/constraintdef/viewdef text: n = 0 whole, n > 0 a column, -1 pretty
    "_hw_defs": (("hw_oid", "oid"), ("hw_n", "integer"), ("hw_def", "text")),
    # type names accepted by ::regtype and to_regtype()
    "_hw_typnames": (("hw_name", "text"), ("hw_oid", "oid")),
    # format_type(): base name, typmod rule (varchar/bpchar/numeric/plain), '[]' for arrays
    "_hw_typfmt": (
        ("hw_oid", "oid"),
        ("hw_base", "text"),
        ("hw_kind", "text"),
        ("hw_suffix", "text"),
    ),
    # names of schemas, roles and functions by oid: hw_kind is 'namespace', 'role', 'proc'
    "_hw_objnames": (("hw_kind", "text"), ("hw_oid", "oid"), ("hw_name", "text")),
    # privileges the session's role holds on each user table, view and schema; a row
    # with hw_priv '-' marks every object (objects without rows: system ones, all allowed)
    "_hw_privs": (("hw_oid", "oid"), ("hw_priv", "text")),
    # current_setting(): lower-case name -> value
    "_hw_settings": (("hw_name", "text"), ("hw_setting", "text")),
}


# -- session ----------
@dataclass(frozen=True)
class SessionInfo:
    user: str = "headwater"
    database: str = "headwater"
    search_path: tuple[str, ...] = ("public",)
    settings: Mapping[str, str] = field(default_factory=dict)
    defaults: Mapping[str, str] = field(default_factory=dict)
    pid: int = 0
    # pg_stat_activity rows of the server's sessions (asked only when named)
    activity: Callable[[], list[dict[str, Any]]] | None = None


# -- helpers ----------
def quote_ident(name: str) -> str:
    """PostgreSQL's quote_ident(): quoted unless a plain lower-case non-keyword."""
    simple = (
        bool(name)
        and (name[0].islower() or name[0] == "_")
        and all(c.islower() or c.isdigit() or c in "_$" for c in name)
        and name.isascii()
    )
    if simple and (name not in _KEYWORDS or name in UNRESERVED_KEYWORDS):
        return name
    return '"' + name.replace('"', '""') + '"'


def _keywords() -> frozenset[str]:
    from pglast import keywords

    return frozenset(
        keywords.RESERVED_KEYWORDS
        | keywords.COL_NAME_KEYWORDS
        | keywords.TYPE_FUNC_NAME_KEYWORDS
        | keywords.UNRESERVED_KEYWORDS
    )


_KEYWORDS = _keywords()


def derived_oid(table_oid: int, kind: int, n: int) -> int:
    """Oids of objects Headwater's catalog has no oid for, derived from their table's:
    kind 0 the index behind key n, 1 the constraint of key n, 2 the default of column n."""
    slot = kind * 64 + n if kind < 2 else 128 + (n % 128)
    return 2_000_000_000 + (table_oid - 16384) * 256 + slot


def format_type(ct: ColumnType) -> str:
    return ct.sql()


def expr_display(col: Column) -> str | None:
    """A column default as pg_get_expr() shows it (PostgreSQL adds the casts it inferred)."""
    if col.default is None:
        return None
    try:
        node = parse_sql(f"SELECT {col.default}")[0].stmt.targetList[0].val
    except Exception:  # noqa: BLE001 - keep what was stored
        return col.default
    ct = col.type
    base = ct.pg.sql_name if ct.pg is not BPCHAR else "bpchar"
    if isinstance(node, A.A_Const) and not node.isnull:
        v = node.val
        if isinstance(v, A.String):
            if ct.pg.name == "bool":
                low = v.sval.strip().lower()
                if low in ("t", "true", "yes", "y", "on", "1"):
                    return "true"
                if low in ("f", "false", "no", "n", "off", "0"):
                    return "false"
            if ct.pg.category == "N" and _is_number(v.sval):
                return (
                    v.sval.strip()
                    if not v.sval.strip().startswith("-")
                    else (f"'{v.sval.strip()}'::{base}")
                )
            return "'" + v.sval.replace("'", "''") + f"'::{base}"
        if isinstance(v, A.Integer | A.Float):
            text = str(v.ival) if isinstance(v, A.Integer) else v.fval
            if text.startswith("-"):
                return f"'{text}'::{base}"
            if ct.pg.category == "N":
                return text
            return f"'{text}'::{base}"
        if isinstance(v, A.Boolean):
            return "true" if v.boolval else "false"
    if isinstance(node, A.A_Const) and node.isnull:
        return f"NULL::{base}"
    if isinstance(node, A.TypeCast) and isinstance(node.arg, A.A_Const):
        inner = Column(col.name, ct, col.not_null, _deparse(node.arg))
        return expr_display(inner)
    return col.default


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def _deparse(node: Any) -> str:
    from pglast.stream import RawStream

    return str(RawStream()(node))


# -- building rows ----------
@dataclass
class _Rel:
    """One pg_class row's worth of facts."""

    oid: int
    name: str
    nsp_oid: int
    schema: str
    relkind: str
    columns: list[tuple[str, int, int, bool, str | None]]  # name, type oid, typmod, notnull, def
    obj: Relation | None = None
    table_oid: int = 0  # for indexes
    index_cols: tuple[str, ...] = ()
    unique: bool = False
    primary: bool = False
    constraint_oid: int = 0  # index backing a key constraint
    key: Key | None = None


class Builder:
    """Rows of every system relation for one catalog snapshot and session."""

    def __init__(self, catalog: Catalog, session: SessionInfo) -> None:
        self.catalog = catalog
        self.session = session
        self._rels: list[_Rel] | None = None

    # -- the objects --------------------------------------------------------------------
    def namespaces(self) -> list[tuple[int, str, int]]:
        out = [
            (PG_CATALOG_OID, "pg_catalog", SUPERUSER_OID),
            (INFORMATION_SCHEMA_OID, "information_schema", SUPERUSER_OID),
        ]
        for s in sorted(self.catalog.schemas.values(), key=lambda s: s.oid):
            owner = getattr(s, "owner", 0) or (
                DATABASE_OWNER_ROLE_OID if s.oid == PUBLIC_SCHEMA_OID else SUPERUSER_OID
            )
            out.append((s.oid, s.name, owner))
        return out

    def nsp_oid(self, schema: str) -> int:
        if schema == "pg_catalog":
            return PG_CATALOG_OID
        if schema == "information_schema":
            return INFORMATION_SCHEMA_OID
        s = self.catalog.schemas.get(schema)
        return s.oid if s is not None else 0

    def relations(self) -> list[_Rel]:
        if self._rels is not None:
            return self._rels
        rels = list(_system_rels())
        indexes = [r for r in self.catalog.relations.values() if isinstance(r, Index)]
        by_table: dict[int, list[Index]] = {}
        for ix in indexes:
            by_table.setdefault(ix.table_oid, []).append(ix)
        for obj in sorted(self.catalog.relations.values(), key=lambda r: r.oid):
            nsp = self.nsp_oid(obj.schema)
            if isinstance(obj, Index):
                table = self.catalog.by_oid(obj.table_oid)
                cols = _index_columns(table, obj.keys)
                rels.append(_Rel(obj.oid, obj.name, nsp, obj.schema, "i", cols, obj, obj.table_oid))
                rels[-1].index_cols, rels[-1].unique = obj.keys, obj.unique
                continue
            kind = RELKIND.get(obj.kind)
            if kind is None:
                continue
            cols = [
                (c.name, c.type.pg.oid, c.type.typmod, c.not_null, expr_display(c))
                for c in obj.columns
            ]
            rels.append(_Rel(obj.oid, obj.name, nsp, obj.schema, kind, cols, obj))
            if isinstance(obj, Table):
                own = {ix.name for ix in by_table.get(obj.oid, [])}
                for n, key in enumerate(obj.keys):
                    if key.name in own:
                        continue  # CREATE UNIQUE INDEX: an index, not a constraint
                    ioid = derived_oid(obj.oid, 0, n)
                    rels.append(
                        _Rel(
                            ioid,
                            key.name,
                            nsp,
                            obj.schema,
                            "i",
                            _index_columns(obj, key.columns),
                            None,
                            obj.oid,
                            key.columns,
                            True,
                            key.primary,
                            derived_oid(obj.oid, 1, n),
                            key,
                        )
                    )
        self._rels = rels
        return rels

    def visible(self) -> dict[int, bool]:
        """pg_table_is_visible() of every relation: pg_catalog first, then the path."""
        path = ["pg_catalog"] + [s for s in self.session.search_path if s != "pg_catalog"]
        seen: dict[str, int] = {}
        order = {s: i for i, s in enumerate(path)}
        best: dict[str, tuple[int, int]] = {}
        for r in self.relations():
            if r.schema in order:
                rank = order[r.schema]
                cur = best.get(r.name)
                if cur is None or rank < cur[0]:
                    best[r.name] = (rank, r.oid)
        seen = {name: oid for name, (_, oid) in best.items()}
        return {r.oid: seen.get(r.name) == r.oid for r in self.relations()}

    # -- relation rows -----------------------------------------------------------------------
    def rows(self, schema: str, name: str) -> list[dict[str, Any]]:
        fn = _BUILDERS.get((schema, name))
        return fn(self) if fn is not None else []


def _index_columns(table: Relation | None, names: Iterable[str]) -> list[Any]:
    out = []
    for n in names:
        col = table.column(n) if table is not None else None
        if col is None:
            out.append((n, TEXT.oid, -1, False, None))
        else:
            out.append((n, col.type.pg.oid, col.type.typmod, False, None))
    return out


_SYSTEM_RELS: list[_Rel] | None = None


def _system_rels() -> list[_Rel]:
    global _SYSTEM_RELS
    if _SYSTEM_RELS is None:
        out = []
        for (schema, name), (oid, kind, cols) in pg_specs.RELATIONS.items():
            nsp = PG_CATALOG_OID if schema == "pg_catalog" else INFORMATION_SCHEMA_OID
            columns = [(c, *spec_type(t), False, None) for c, t in cols]
            out.append(_Rel(oid, name, nsp, schema, _RELKIND_SYSTEM.get(kind, kind), columns))
        _SYSTEM_RELS = out
    return _SYSTEM_RELS


# -- builders per relation ----------
_BUILDERS: dict[tuple[str, str], Callable[[Builder], list[dict[str, Any]]]] = {}


def _builder(schema: str, name: str) -> Callable[[Any], Any]:
    def deco(fn: Callable[[Builder], list[dict[str, Any]]]) -> Any:
        _BUILDERS[(schema, name)] = fn
        return fn

    return deco


@_builder("pg_catalog", "pg_namespace")
def _pg_namespace(b: Builder) -> list[dict[str, Any]]:
    return [
        {"oid": o, "nspname": n, "nspowner": w, "nspacl": _acl(b, b.catalog.schemas.get(n))}
        for o, n, w in b.namespaces()
    ]


def _role_name(oid: int, b: Builder) -> str:
    return _owner_name(b, oid)


@_builder("pg_catalog", "pg_class")
def _pg_class(b: Builder) -> list[dict[str, Any]]:
    out = []
    has_index = {r.table_oid for r in b.relations() if r.relkind == "i"}
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
                "relacl": _acl(b, r.obj),
                "relam": HEAP_AM if kind in ("r", "m") else BTREE_AM if kind == "i" else 0,
                "relfilenode": r.oid if kind in ("r", "m", "i") else 0,
                "reltablespace": 0,
                "relpages": 0 if kind != "v" else 0,
                "reltuples": -1.0 if kind in ("r", "m") else 0.0,
                "relallvisible": 0,
                "reltoastrelid": 0,
                "relhasindex": r.oid in has_index,
                "relisshared": False,
                "relpersistence": "p",
                "relkind": kind,
                "relnatts": len(r.columns),
                "relchecks": 0,
                "relhasrules": kind == "v",
                "relhastriggers": False,
                "relhassubclass": False,
                "relrowsecurity": False,
                "relforcerowsecurity": False,
                "relispopulated": True,
                "relreplident": "n" if kind in ("v", "i") else "d",
                "relispartition": False,
                "relrewrite": 0,
                "relfrozenxid": 0 if kind in ("v", "i") else 716,
                "relminmxid": 0 if kind in ("v", "i") else 1,
            }
        )
    return out


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
                    "attndims": 1 if t is not None and t.typcategory == "A" else 0,
                    "attcacheoff": -1,
                    "atttypmod": typmod,
                    "attbyval": t.typbyval if t else False,
                    "attalign": t.typalign if t else "i",
                    "attstorage": t.typstorage if t else "x",
                    "attcompression": "",
                    "attnotnull": notnull,
                    "atthasdef": default is not None,
                    "atthasmissing": False,
                    "attidentity": "",
                    "attgenerated": "",
                    "attisdropped": False,
                    "attislocal": True,
                    "attinhcount": 0,
                    "attcollation": t.typcollation if t else 0,
                }
            )
    return out


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
    cols = pg_specs.TYPE_COLUMNS
    return [_listify(dict(zip(cols, r, strict=True))) for r in pg_specs.TYPES]


@_builder("pg_catalog", "pg_proc")
def _pg_proc(b: Builder) -> list[dict[str, Any]]:
    cols = pg_specs.PROC_COLUMNS
    return [_listify(dict(zip(cols, r, strict=True))) for r in pg_specs.PROCS]


def _listify(d: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


def _index_rels(b: Builder) -> list[_Rel]:
    return [r for r in b.relations() if r.relkind == "i"]


def _attnums(b: Builder, table_oid: int, names: Iterable[str]) -> list[int]:
    table = b.catalog.by_oid(table_oid)
    if table is None:
        return [0 for _ in names]
    pos = {c.name: i for i, c in enumerate(table.columns, start=1)}
    return [pos.get(n, 0) for n in names]


@_builder("pg_catalog", "pg_index")
def _pg_index(b: Builder) -> list[dict[str, Any]]:
    out = []
    for r in _index_rels(b):
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
            }
        )
    return out


@_builder("pg_catalog", "pg_constraint")
def _pg_constraint(b: Builder) -> list[dict[str, Any]]:
    out = []
    for r in _index_rels(b):
        if not r.constraint_oid:
            continue
        out.append(
            {
                "oid": r.constraint_oid,
                "conname": r.name,
                "connamespace": r.nsp_oid,
                "contype": "p" if r.primary else "u",
                "condeferrable": False,
                "condeferred": False,
                "convalidated": True,
                "conrelid": r.table_oid,
                "contypid": 0,
                "conindid": r.oid,
                "conparentid": 0,
                "confrelid": 0,
                "confupdtype": " ",
                "confdeltype": " ",
                "confmatchtype": " ",
                "conislocal": True,
                "coninhcount": 0,
                "connoinherit": True,
                "conkey": _attnums(b, r.table_oid, r.index_cols),
            }
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


def _roles(b: Builder) -> list[dict[str, Any]]:
    """The catalog's roles (CREATE ROLE) and PostgreSQL's predefined roles."""
    out = []
    roles = getattr(b.catalog, "roles", None) or {}
    if not roles:  # a catalog without roles: the session user is the superuser
        out.append(_role_row(SUPERUSER_OID, b.session.user, super_=True, login=True))
    for r in sorted(roles.values(), key=lambda r: r.oid):
        row = _role_row(r.oid, r.name, super_=r.superuser, login=r.login)
        bootstrap = r.oid == SUPERUSER_OID
        row.update(
            rolinherit=r.inherit,
            rolcreaterole=r.createrole or bootstrap,
            rolcreatedb=r.createdb or bootstrap,
            rolreplication=bootstrap,
            rolbypassrls=bootstrap,
            rolpassword=r.password,
            rolvaliduntil=_timestamp(r.valid_until),
            member_of=r.member_of,
        )
        out.append(row)
    for oid, name in _PREDEFINED_ROLES:
        out.append(_role_row(oid, name, super_=False, login=False))
    return out


def _role_row(oid: int, name: str, *, super_: bool, login: bool) -> dict[str, Any]:
    return {
        "oid": oid,
        "rolname": name,
        "rolsuper": super_,
        "rolinherit": True,
        "rolcreaterole": super_,
        "rolcreatedb": super_,
        "rolcanlogin": login,
        "rolreplication": super_,
        "rolbypassrls": super_,
        "rolconnlimit": -1,
        "member_of": (),
    }


def _timestamp(text: str | None) -> Any:
    if not text:
        return None
    import datetime as dt

    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        return None


@_builder("pg_catalog", "pg_auth_members")
def _pg_auth_members(b: Builder) -> list[dict[str, Any]]:
    return [
        {"roleid": m, "member": r["oid"], "grantor": SUPERUSER_OID, "admin_option": False}
        for r in _roles(b)
        for m in r["member_of"]
    ]


def _owner_name(b: Builder, oid: int) -> str:
    for r in _roles(b):
        if r["oid"] == oid:
            return str(r["rolname"])
    return f"unknown (OID={oid})"


def _acl(b: Builder, obj: Any) -> list[str] | None:
    if obj is None or not getattr(obj, "acl", None):
        return None
    from headwater.server.auth import acl_items

    return acl_items(b.catalog, obj)


@_builder("pg_catalog", "pg_authid")
def _pg_authid(b: Builder) -> list[dict[str, Any]]:
    return _roles(b)


@_builder("pg_catalog", "pg_roles")
def _pg_roles(b: Builder) -> list[dict[str, Any]]:
    return [{**r, "rolpassword": "********"} for r in _roles(b)]


@_builder("pg_catalog", "pg_shadow")
def _pg_shadow(b: Builder) -> list[dict[str, Any]]:
    return [
        {
            "usename": r["rolname"],
            "usesysid": r["oid"],
            "usecreatedb": r["rolcreatedb"],
            "usesuper": r["rolsuper"],
            "userepl": r["rolreplication"],
            "usebypassrls": r["rolbypassrls"],
            "passwd": r.get("rolpassword"),
            "valuntil": r.get("rolvaliduntil"),
        }
        for r in _roles(b)
        if r["rolcanlogin"]
    ]


@_builder("pg_catalog", "pg_user")
def _pg_user(b: Builder) -> list[dict[str, Any]]:
    return [
        {
            "usename": r["rolname"],
            "usesysid": r["oid"],
            "usecreatedb": r["rolcreatedb"],
            "usesuper": r["rolsuper"],
            "userepl": r["rolreplication"],
            "usebypassrls": r["rolbypassrls"],
            "passwd": "********",
            "valuntil": r.get("rolvaliduntil"),
        }
        for r in _roles(b)
        if r["rolcanlogin"]
    ]


@_builder("pg_catalog", "pg_settings")
def _pg_settings(b: Builder) -> list[dict[str, Any]]:
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


def _activity(session: Any) -> list[dict[str, Any]]:
    server = getattr(session.instance, "server", None)
    conns = list(getattr(server, "sessions", {}).values()) if server is not None else []
    out = []
    for conn in conns:
        s = getattr(conn, "session", None)
        if s is None:
            continue
        state = {"I": "idle", "T": "idle in transaction", "E": "idle in transaction (aborted)"}
        out.append(
            {
                "datname": s.database,
                "pid": s.pid,
                "usesysid": getattr(s, "role_oid", 0) or None,
                "usename": s.user,
                "application_name": s.settings.values.get("application_name", ""),
                "client_addr": getattr(conn, "peer_host", None),
                "client_port": -1,
                "state": "active" if s is session else state.get(s.status, "idle"),
                "query": "",
            }
        )
    return out


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


@_builder("pg_catalog", "pg_language")
def _pg_language(b: Builder) -> list[dict[str, Any]]:
    rows = [(12, "internal", False), (13, "c", False), (14, "sql", True)]
    return [
        {
            "oid": o,
            "lanname": n,
            "lanowner": SUPERUSER_OID,
            "lanispl": False,
            "lanpltrusted": t,
            "lanplcallfoid": 0,
            "laninline": 0,
            "lanvalidator": 0,
        }
        for o, n, t in rows
    ]


def _user_rels(b: Builder, *kinds: str) -> list[_Rel]:
    return [r for r in b.relations() if r.obj is not None and r.relkind in kinds]


def _definition(r: _Rel, b: Builder, pretty: bool = False) -> str | None:
    d = getattr(r.obj, "definition", None)
    if d is None:
        return None
    try:
        return _pretty_view(d, b, pretty)
    except _Unsupported:
        return " " + d.strip().rstrip(";") + ";"


class _Unsupported(Exception):
    pass


_CMP_OPS = ("=", "<>", "<", ">", "<=", ">=")


def _pretty_view(sql: str, b: Builder, pretty: bool) -> str:
    """pg_get_viewdef() as PostgreSQL 15 prints a simple view: one table, plain column
    outputs, a WHERE of comparisons with constants. Anything else: _Unsupported."""
    stmt = parse_sql(sql)[0].stmt
    if (
        not isinstance(stmt, A.SelectStmt)
        or stmt.op
        or stmt.withClause
        or stmt.distinctClause
        or stmt.groupClause
        or stmt.havingClause
        or stmt.sortClause
        or stmt.limitCount
        or stmt.limitOffset
        or stmt.windowClause
        or stmt.valuesLists
        or not stmt.fromClause
        or len(stmt.fromClause) != 1
        or not isinstance(stmt.fromClause[0], A.RangeVar)
    ):
        raise _Unsupported
    rv = stmt.fromClause[0]
    table = b.catalog.resolve(rv.schemaname, rv.relname, b.session.search_path)
    if table is None or not isinstance(table, Table | View):
        raise _Unsupported
    qual = rv.alias.aliasname if rv.alias else table.name
    q = quote_ident(qual)
    targets = []
    for rt in stmt.targetList or ():
        val = rt.val
        if not isinstance(val, A.ColumnRef):
            raise _Unsupported
        last = val.fields[-1]
        if isinstance(last, A.A_Star):
            targets += [f"{q}.{quote_ident(c.name)}" for c in table.columns]
            continue
        col = last.sval
        if table.column(col) is None:
            raise _Unsupported
        out = f"{q}.{quote_ident(col)}"
        if rt.name and rt.name != col:
            out += f" AS {quote_ident(rt.name)}"
        targets.append(out)
    visible = b.visible().get(table.oid, False)
    name = (
        quote_ident(table.name)
        if visible
        else f"{quote_ident(table.schema)}.{quote_ident(table.name)}"
    )
    text = " SELECT " + ",\n    ".join(targets) + "\n   FROM " + name
    if rv.alias:
        text += " " + quote_ident(rv.alias.aliasname)
    if stmt.whereClause is not None:
        where = _pretty_expr(stmt.whereClause, table, q, pretty)
        if pretty and where.startswith("(") and where.endswith(")") and _balanced(where[1:-1]):
            where = where[1:-1]
        text += "\n  WHERE " + where
    return text + ";"


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if depth < 0:
            return False
    return depth == 0


def _pretty_expr(node: Any, table: Relation, q: str, pretty: bool, parent: int = -1) -> str:
    """PostgreSQL's ruleutils: every operator in parentheses, or (pretty) only where
    precedence needs them: an OR inside an AND; constants cast as 3::numeric."""
    if isinstance(node, A.BoolExpr):
        op = node.boolop
        parts = [_pretty_expr(a, table, q, pretty, op) for a in node.args]
        if op == 2:
            text = f"NOT {parts[0]}"
        else:
            text = (" AND " if op == 0 else " OR ").join(parts)
        if pretty and (op in (0, 2) and parent in (0, 1) or op == 1 and parent == 1):
            return text
        return f"({text})"
    if isinstance(node, A.ColumnRef):
        col = _pretty_col(node, table)
        if col.type.pg.name != "bool":
            raise _Unsupported
        return f"{q}.{quote_ident(col.name)}"
    if isinstance(node, A.A_Expr) and node.kind == 0 and len(node.name) == 1:
        op = node.name[0].sval
        if op not in _CMP_OPS:
            raise _Unsupported
        left, right = node.lexpr, node.rexpr
        if isinstance(left, A.ColumnRef) and isinstance(right, A.ColumnRef):
            lc, rc = _pretty_col(left, table), _pretty_col(right, table)
            if lc.type.pg is not rc.type.pg:
                raise _Unsupported
            text = f"{q}.{quote_ident(lc.name)} {op} {q}.{quote_ident(rc.name)}"
        elif isinstance(left, A.ColumnRef) and isinstance(right, A.A_Const):
            col = _pretty_col(left, table)
            side, const = _pretty_side(col, q, right, pretty), _pretty_const(col, right, pretty)
            text = f"{side} {op} {const}"
        elif isinstance(right, A.ColumnRef) and isinstance(left, A.A_Const):
            col = _pretty_col(right, table)
            side, const = _pretty_side(col, q, left, pretty), _pretty_const(col, left, pretty)
            text = f"{const} {op} {side}"
        else:
            raise _Unsupported
        return text if pretty and parent in (0, 1, 2) else f"({text})"
    raise _Unsupported


def _pretty_col(ref: A.ColumnRef, table: Relation) -> Column:
    last = ref.fields[-1]
    col = table.column(last.sval) if isinstance(last, A.String) else None
    if col is None:
        raise _Unsupported
    return col


def _pretty_side(col: Column, q: str, const: A.A_Const, pretty: bool) -> str:
    ref = f"{q}.{quote_ident(col.name)}"
    if col.type.pg.name == "varchar" and isinstance(const.val, A.String):
        return f"{ref}::text" if pretty else f"({ref})::text"
    return ref


def _pretty_const(col: Column, const: A.A_Const, pretty: bool) -> str:
    t = col.type.pg.name
    v = const.val
    if const.isnull:
        raise _Unsupported

    def cast(text: str, to: str) -> str:
        return f"{text}::{to}" if pretty else f"({text})::{to}"

    if isinstance(v, A.Integer) and v.ival >= 0:
        if t in ("int2", "int4", "int8"):
            return str(v.ival)
        if t == "numeric":
            return cast(str(v.ival), "numeric")
        if t in ("float4", "float8"):
            return cast(str(v.ival), "double precision")
    if isinstance(v, A.Float) and not v.fval.startswith("-"):
        if t == "numeric":
            return v.fval
        if t in ("float4", "float8"):
            return cast(v.fval, "double precision")
    if isinstance(v, A.String) and t in ("text", "varchar"):
        return "'" + v.sval.replace("'", "''") + "'::text"
    raise _Unsupported


@_builder("pg_catalog", "pg_views")
def _pg_views(b: Builder) -> list[dict[str, Any]]:
    return [
        {
            "schemaname": r.schema,
            "viewname": r.name,
            "viewowner": _owner_name(b, getattr(r.obj, "owner", 0) or SUPERUSER_OID),
            "definition": _definition(r, b),
        }
        for r in b.relations()
        if r.relkind == "v"
    ]


@_builder("pg_catalog", "pg_matviews")
def _pg_matviews(b: Builder) -> list[dict[str, Any]]:
    has_index = {r.table_oid for r in _index_rels(b)}
    return [
        {
            "schemaname": r.schema,
            "matviewname": r.name,
            "matviewowner": _owner_name(b, getattr(r.obj, "owner", 0) or SUPERUSER_OID),
            "hasindexes": r.oid in has_index,
            "ispopulated": True,
            "definition": _definition(r, b),
        }
        for r in _user_rels(b, "m")
    ]


@_builder("pg_catalog", "pg_tables")
def _pg_tables(b: Builder) -> list[dict[str, Any]]:
    has_index = {r.table_oid for r in _index_rels(b)}
    return [
        {
            "schemaname": r.schema,
            "tablename": r.name,
            "tableowner": _owner_name(b, getattr(r.obj, "owner", 0) or SUPERUSER_OID),
            "hasindexes": r.oid in has_index,
            "hasrules": False,
            "hastriggers": False,
            "rowsecurity": False,
        }
        for r in b.relations()
        if r.relkind == "r"
    ]


@_builder("pg_catalog", "pg_indexes")
def _pg_indexes(b: Builder) -> list[dict[str, Any]]:
    out = []
    for r in _index_rels(b):
        table = b.catalog.by_oid(r.table_oid)
        if table is None:
            continue
        out.append(
            {
                "schemaname": r.schema,
                "tablename": table.name,
                "indexname": r.name,
                "indexdef": index_def(r, table),
            }
        )
    return out


def index_def(r: _Rel, table: Relation) -> str:
    cols = ", ".join(quote_ident(c) for c in r.index_cols)
    unique = "UNIQUE " if r.unique else ""
    return (
        f"CREATE {unique}INDEX {quote_ident(r.name)} ON "
        f"{quote_ident(table.schema)}.{quote_ident(table.name)} USING btree ({cols})"
    )


def constraint_def(r: _Rel) -> str:
    cols = ", ".join(quote_ident(c) for c in r.index_cols)
    return f"{'PRIMARY KEY' if r.primary else 'UNIQUE'} ({cols})"


# -- information_schema ----------
def _yes(v: bool) -> str:
    return "YES" if v else "NO"


@_builder("information_schema", "schemata")
def _schemata(b: Builder) -> list[dict[str, Any]]:
    return [
        {
            "catalog_name": b.session.database,
            "schema_name": n,
            "schema_owner": _role_name(owner, b),
        }
        for _, n, owner in b.namespaces()
    ]


def _table_type(r: _Rel) -> str:
    if r.relkind == "v":
        return "VIEW"
    if r.schema in ("pg_catalog", "information_schema") and r.relkind == "r":
        return "BASE TABLE"
    return "BASE TABLE" if r.relkind == "r" else "VIEW"


@_builder("information_schema", "tables")
def _is_tables(b: Builder) -> list[dict[str, Any]]:
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
        if r.relkind in ("r", "v")
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
    for r in b.relations():
        if r.relkind not in ("r", "v", "m"):
            continue
        for i, (name, toid, typmod, notnull, default) in enumerate(r.columns, start=1):
            t = TYPES_BY_OID.get(toid)
            typname = t.name if t else "text"
            ct = ColumnType(_pg_type_of(toid), typmod)
            data_type = (
                "ARRAY"
                if t is not None and t.typcategory == "A"
                else _IS_DATA_TYPE.get(typname, typname)
            )
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
                    "column_default": default,
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
                    "udt_schema": "pg_catalog",
                    "udt_name": typname,
                    "dtd_identifier": str(i),
                    "is_self_referencing": "NO",
                    "is_identity": "NO",
                    "identity_cycle": "NO",
                    "is_generated": "NEVER",
                    "is_updatable": _yes(r.relkind == "r"),
                }
            )
    return out


def _pg_type_of(toid: int) -> Any:
    from headwater.catalog.types import BY_OID

    return BY_OID.get(toid, TEXT)


@_builder("information_schema", "views")
def _is_views(b: Builder) -> list[dict[str, Any]]:
    return [
        {
            "table_catalog": b.session.database,
            "table_schema": r.schema,
            "table_name": r.name,
            "view_definition": _definition(r, b),
            "check_option": "NONE",
            "is_updatable": "NO",
            "is_insertable_into": "NO",
            "is_trigger_updatable": "NO",
            "is_trigger_deletable": "NO",
            "is_trigger_insertable_into": "NO",
        }
        for r in _user_rels(b, "v")
    ]


def _not_null_checks(b: Builder) -> list[tuple[_Rel, int, str]]:
    out = []
    for r in _user_rels(b, "r"):
        for i, (name, _, _, notnull, _) in enumerate(r.columns, start=1):
            if notnull:
                out.append((r, i, name))
    return out


@_builder("information_schema", "table_constraints")
def _is_table_constraints(b: Builder) -> list[dict[str, Any]]:
    db = b.session.database
    out = []
    for r in _index_rels(b):
        if not r.constraint_oid:
            continue
        table = b.catalog.by_oid(r.table_oid)
        if table is None:
            continue
        out.append(
            {
                "constraint_catalog": db,
                "constraint_schema": r.schema,
                "constraint_name": r.name,
                "table_catalog": db,
                "table_schema": table.schema,
                "table_name": table.name,
                "constraint_type": "PRIMARY KEY" if r.primary else "UNIQUE",
                "is_deferrable": "NO",
                "initially_deferred": "NO",
                "enforced": "YES",
                "nulls_distinct": "YES",
            }
        )
    for r, i, _ in _not_null_checks(b):
        out.append(
            {
                "constraint_catalog": db,
                "constraint_schema": r.schema,
                "constraint_name": f"{r.nsp_oid}_{r.oid}_{i}_not_null",
                "table_catalog": db,
                "table_schema": r.schema,
                "table_name": r.name,
                "constraint_type": "CHECK",
                "is_deferrable": "NO",
                "initially_deferred": "NO",
                "enforced": "YES",
            }
        )
    return out


@_builder("information_schema", "check_constraints")
def _is_check_constraints(b: Builder) -> list[dict[str, Any]]:
    return [
        {
            "constraint_catalog": b.session.database,
            "constraint_schema": r.schema,
            "constraint_name": f"{r.nsp_oid}_{r.oid}_{i}_not_null",
            "check_clause": f"{quote_ident(name)} IS NOT NULL",
        }
        for r, i, name in _not_null_checks(b)
    ]


@_builder("information_schema", "key_column_usage")
def _is_key_column_usage(b: Builder) -> list[dict[str, Any]]:
    db = b.session.database
    out = []
    for r in _index_rels(b):
        table = b.catalog.by_oid(r.table_oid)
        if not r.constraint_oid or table is None:
            continue
        for pos, col in enumerate(r.index_cols, start=1):
            out.append(
                {
                    "constraint_catalog": db,
                    "constraint_schema": r.schema,
                    "constraint_name": r.name,
                    "table_catalog": db,
                    "table_schema": table.schema,
                    "table_name": table.name,
                    "column_name": col,
                    "ordinal_position": pos,
                }
            )
    return out


@_builder("information_schema", "constraint_column_usage")
def _is_constraint_column_usage(b: Builder) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in row.items() if k not in ("ordinal_position",)}
        for row in _is_key_column_usage(b)
    ]


# -- internal relations ----------
@_builder("pg_catalog", "_hw_session")
def _hw_session(b: Builder) -> list[dict[str, Any]]:
    existing = [s for s in b.session.search_path if s in b.catalog.schemas or s == "pg_catalog"]
    implicit = existing if "pg_catalog" in existing else ["pg_catalog"] + existing
    return [
        {
            "user_name": b.session.user,
            "session_user_name": b.session.user,
            "database": b.session.database,
            "current_schema": existing[0] if existing else None,
            "schemas": existing,
            "schemas_implicit": implicit,
            "pid": b.session.pid,
            "version": SERVER_VERSION_TEXT,
        }
    ]


@_builder("pg_catalog", "_hw_relvis")
def _hw_relvis(b: Builder) -> list[dict[str, Any]]:
    vis = b.visible()
    return [
        {
            "oid": r.oid,
            "visible": vis[r.oid],
            "display": quote_ident(r.name)
            if vis[r.oid]
            else f"{quote_ident(r.schema)}.{quote_ident(r.name)}",
        }
        for r in b.relations()
    ]


@_builder("pg_catalog", "_hw_relnames")
def _hw_relnames(b: Builder) -> list[dict[str, Any]]:
    vis = b.visible()
    out = []
    for r in b.relations():
        forms = [(_quoted(r.schema) + "." + _quoted(r.name), False)]
        if vis[r.oid]:
            forms.append((_quoted(r.name), False))
        for s_plain in (True, False):
            for n_plain in (True, False):
                if (s_plain and not _plain(r.schema)) or (n_plain and not _plain(r.name)):
                    continue
                s = r.schema if s_plain else _quoted(r.schema)
                n = r.name if n_plain else _quoted(r.name)
                forms.append((f"{s}.{n}", s_plain or n_plain))
                if vis[r.oid] and s_plain:
                    forms.append((n, n_plain))
        seen = set()
        for name, folds in forms:
            if (name, folds) not in seen:
                seen.add((name, folds))
                out.append({"name": name, "folds": folds, "oid": r.oid})
    return out


def _plain(name: str) -> bool:
    return quote_ident(name) == name or (name == name.lower() and '"' not in name)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@_builder("pg_catalog", "_hw_defs")
def _hw_defs(b: Builder) -> list[dict[str, Any]]:
    out = []
    for r in _index_rels(b):
        table = b.catalog.by_oid(r.table_oid)
        if table is None:
            continue
        out.append({"oid": r.oid, "n": 0, "def": index_def(r, table)})
        for i, c in enumerate(r.index_cols, start=1):
            out.append({"oid": r.oid, "n": i, "def": quote_ident(c)})
        if r.constraint_oid:
            out.append({"oid": r.constraint_oid, "n": 0, "def": constraint_def(r)})
    for r in _user_rels(b, "v", "m"):
        out.append({"oid": r.oid, "n": 0, "def": _definition(r, b)})
        out.append({"oid": r.oid, "n": -1, "def": _definition(r, b, pretty=True)})
    return out


@_builder("pg_catalog", "_hw_objnames")
def _hw_objnames(b: Builder) -> list[dict[str, Any]]:
    out = [{"kind": "namespace", "oid": o, "name": n} for o, n, _ in b.namespaces()]
    out += [{"kind": "role", "oid": r["oid"], "name": r["rolname"]} for r in _roles(b)]
    out += [{"kind": "proc", "oid": r["oid"], "name": r["proname"]} for r in _pg_proc(b)]
    return out


_TABLE_PRIVS = ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER")
_SCHEMA_PRIVS = ("USAGE", "CREATE")


@_builder("pg_catalog", "_hw_privs")
def _hw_privs(b: Builder) -> list[dict[str, Any]]:
    find = getattr(b.catalog, "role", None)
    role = find(b.session.user) if find is not None else None
    if role is None or role.superuser:
        return []  # a superuser holds every privilege
    from headwater.server.auth import has_privilege

    out = []
    objects: list[tuple[Any, tuple[str, ...]]] = [
        (r, _TABLE_PRIVS) for r in b.catalog.relations.values() if not isinstance(r, Index)
    ]
    objects += [(sch, _SCHEMA_PRIVS) for sch in b.catalog.schemas.values()]
    for obj, privs in objects:
        out.append({"oid": obj.oid, "priv": "-"})
        out += [
            {"oid": obj.oid, "priv": p} for p in privs if has_privilege(b.catalog, role.oid, obj, p)
        ]
    return out


@_builder("pg_catalog", "_hw_settings")
def _hw_settings(b: Builder) -> list[dict[str, Any]]:
    return [{"name": r["name"].lower(), "setting": r["setting"]} for r in _pg_settings(b)]


@_builder("pg_catalog", "_hw_typnames")
def _hw_typnames(b: Builder) -> list[dict[str, Any]]:
    return list(_TYPNAMES)


def _typnames() -> list[dict[str, Any]]:
    from headwater.catalog.types import _ALIASES, BY_NAME

    out = []
    seen = set()
    for t in TYPES_BY_OID.values():
        for n in (t.name, f"pg_catalog.{t.name}"):
            out.append({"name": n, "oid": t.oid})
            seen.add(n)
    for alias, pg in list(_ALIASES.items()) + [(p.sql_name, p) for p in BY_NAME.values()]:
        if alias not in seen:
            seen.add(alias)
            out.append({"name": alias, "oid": pg.oid})
    return out


_TYPNAMES = _typnames()

_FORMAT_NAMES = {
    "bool": "boolean",
    "int2": "smallint",
    "int4": "integer",
    "int8": "bigint",
    "float4": "real",
    "float8": "double precision",
    "char": '"char"',
    "timestamp": "timestamp without time zone",
    "timestamptz": "timestamp with time zone",
    "time": "time without time zone",
    "timetz": "time with time zone",
    "bit": "bit",
    "varbit": "bit varying",
    "interval": "interval",
}


@_builder("pg_catalog", "_hw_typfmt")
def _hw_typfmt(b: Builder) -> list[dict[str, Any]]:
    out = []
    for t in TYPES_BY_OID.values():
        elem = TYPES_BY_OID.get(t.typelem) if t.typcategory == "A" else None
        base = elem if elem is not None else t
        kind = base.name if base.name in ("varchar", "bpchar", "numeric") else "plain"
        out.append(
            {
                "oid": t.oid,
                "base": _FORMAT_NAMES.get(base.name, base.name),
                "kind": kind,
                "suffix": "[]" if elem is not None else "",
            }
        )
    return out


# -- Arrow materialisation ----------
def columns_of(schema: str, name: str) -> tuple[tuple[str, str], ...] | None:
    if schema == "pg_catalog" and name in INTERNAL:
        return INTERNAL[name]
    spec = pg_specs.RELATIONS.get((schema, name))
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
        "pg_database",
        "pg_roles",
        "pg_authid",
        "pg_shadow",
        "pg_auth_members",
        "_hw_privs",
        "pg_user",
        "pg_views",
        "pg_tables",
        "pg_matviews",
        "pg_namespace",
    )
} | {("information_schema", n) for n in ("schemata", "tables", "columns", "views")}
_STATIC = {("pg_catalog", n) for n in ("pg_type", "pg_proc", "_hw_typnames", "_hw_typfmt")}
_static_cache: dict[tuple[str, str], pa.Table] = {}
_snapshot_cache: weakref.WeakKeyDictionary[Catalog, tuple[tuple[Any, ...], dict[Any, pa.Table]]]
_snapshot_cache = weakref.WeakKeyDictionary()
_cache_lock = threading.Lock()


def _fingerprint(catalog: Catalog) -> tuple[Any, ...]:
    roles = getattr(catalog, "roles", None) or {}
    return (
        tuple(catalog.relations.values()) + tuple(catalog.schemas.values()) + tuple(roles.values())
    )


def build(catalog: Catalog, session: SessionInfo, schema: str, name: str) -> pa.Table:
    key = (schema, name)
    if key in _STATIC:
        with _cache_lock:
            t = _static_cache.get(key)
        if t is None:
            t = arrow_table(schema, name, Builder(catalog, session).rows(schema, name))
            with _cache_lock:
                _static_cache[key] = t
        return t
    if key in _SESSION_DEPENDENT:
        return arrow_table(schema, name, Builder(catalog, session).rows(schema, name))
    fp = _fingerprint(catalog)
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
        t = arrow_table(schema, name, Builder(catalog, session).rows(schema, name))
        with _cache_lock:
            entry[1][key] = t
    return t


def lookup(schema: str | None, name: str) -> tuple[str, str] | None:
    """The system relation (schema, name) a reference names, or None.

    Unqualified names find pg_catalog relations (pg_catalog is implicitly first on
    every search path); information_schema relations need their schema.
    """
    if schema is None or schema == "pg_catalog":
        if name in INTERNAL or ("pg_catalog", name) in pg_specs.RELATIONS:
            return ("pg_catalog", name)
        return None
    if schema == "information_schema" and (schema, name) in pg_specs.RELATIONS:
        return (schema, name)
    return None


class SystemRelations:
    """The Binder's `system` hook for one statement: registers the system relations it
    names on the statement's DuckDB connection and returns a scan of each."""

    def __init__(
        self,
        catalog: Catalog,
        session: Any,
        cursor: Callable[[], duckdb.DuckDBPyConnection],
    ) -> None:
        self.catalog = catalog
        self.session = session  # a server session, or a SessionInfo
        self.cursor = cursor
        self._info: SessionInfo | None = None

    @property
    def info(self) -> SessionInfo:
        if self._info is None:
            s = self.session
            self._info = s if isinstance(s, SessionInfo) else session_info(s)
        return self._info

    def __call__(self, schema: str | None, name: str) -> str | None:
        found = lookup(schema, name)
        if found is None:
            return None
        table = build(self.catalog, self.info, *found)
        view = f"_hwsys_{found[0]}_{found[1]}"
        self.cursor().register(view, table)
        return f'(SELECT * FROM "{view}")'


def session_info(session: Any) -> SessionInfo:
    """SessionInfo of a server session (server/session.py)."""
    from headwater.server.settings import DEFAULTS

    return SessionInfo(
        user=session.user,
        database=session.database,
        search_path=session.search_path(),
        settings=dict(session.settings.values),
        defaults=DEFAULTS,
        pid=session.pid,
        activity=lambda: _activity(session),
    )


def system_relations(
    session: Any, catalog: Catalog, cursor: Callable[[], duckdb.DuckDBPyConnection]
) -> SystemRelations:
    """The Binder hook for a statement of `session` reading `catalog` on `cursor()`."""
    return SystemRelations(catalog, session, cursor)
