"""Catalog objects: schemas, tables, views, roles. Immutable; a change makes a new object.

They serialise to JSON for storage (catalog keys in SlateDB, written in the same
atomic batch as the epoch that changes them).
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from headwater.catalog.extensions import AVAILABLE
from headwater.catalog.identifiers import quote_ident
from headwater.catalog.types import STORED_TYPES, ColumnType, PgType, domain_type, enum_type


@dataclass(frozen=True)
class Column:
    name: str
    type: ColumnType
    not_null: bool = False
    default: str | None = None  # PostgreSQL expression text, as pg_get_expr shows it
    # GENERATED ALWAYS ('a') / BY DEFAULT ('d') AS IDENTITY, as pg_attribute.attidentity;
    # `default` then holds the nextval() of its sequence (not shown as a default)
    identity: str = ""
    comment: str | None = field(default=None, kw_only=True)  # COMMENT ON COLUMN
    # GENERATED ALWAYS AS (expr) STORED: the expression's text (computed by every write)
    generated: str | None = field(default=None, kw_only=True)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "type": self.type.pg.name,
            "typmod": self.type.typmod,
            "not_null": self.not_null,
            "default": self.default,
        }
        if self.type.pg.category == "E":  # the enum as it is now (ALTER TYPE replaces it)
            t = self.type.pg
            d["enum"] = [t.schema, t.oid, t.array_oid, list(t.labels)]
        if self.type.domain is not None:
            t = self.type.domain
            d["domain"] = [t.schema, t.name, t.oid, t.array_oid]
        if self.identity:
            d["identity"] = self.identity
        if self.comment is not None:
            d["comment"] = self.comment
        if self.generated is not None:
            d["generated"] = self.generated
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> Column:
        enum = d.get("enum")
        if enum is not None:
            pg = enum_type(enum[0], d["type"], enum[1], enum[2], tuple(enum[3]))
        else:
            pg = STORED_TYPES[d["type"]]
        domain = d.get("domain")
        return Column(
            d["name"],
            ColumnType(pg, d["typmod"], domain_type(*domain, pg) if domain else None),
            d["not_null"],
            d["default"],
            d.get("identity", ""),
            comment=d.get("comment"),
            generated=d.get("generated"),
        )


@dataclass(frozen=True)
class Key:
    """A PRIMARY KEY or UNIQUE constraint."""

    name: str
    columns: tuple[str, ...]
    primary: bool


@dataclass(frozen=True)
class IndexKey:
    """A UNIQUE index over expressions or with a WHERE (`CREATE UNIQUE INDEX ON users
    (lower(email))`, `... (email) WHERE deleted_at IS NULL`): per key its text, an
    expression's or a column's quoted name; rows the predicate leaves out, and rows
    with a NULL key, collide with nothing. Enforced by the general write path, and for
    INSERTs of constants by the batcher (DuckDB computes their rows' keys)."""

    name: str
    keys: tuple[str, ...]
    predicate: str | None = None


@dataclass(frozen=True)
class Check:
    """A CHECK constraint: its name and expression (PostgreSQL text, as pglast deparses
    it); a row passes when the expression is true or NULL."""

    name: str
    expr: str
    valid: bool = True  # False: added NOT VALID, existing rows not checked yet
    # a domain's constraint on a column of the domain (name '': its NOT NULL): the
    # domain's name for the error; not one of the table's constraints in the catalog
    domain: str = ""


@dataclass(frozen=True)
class ForeignKey:
    """A FOREIGN KEY constraint: `columns` reference `ref_columns` of the table whose oid
    is `ref_table` (by oid, so renames keep it). Actions are pg_constraint's letters:
    a NO ACTION, r RESTRICT, c CASCADE, n SET NULL, d SET DEFAULT; match s SIMPLE, f FULL."""

    name: str
    columns: tuple[str, ...]
    ref_table: int
    ref_columns: tuple[str, ...]
    on_delete: str = "a"
    on_update: str = "a"
    match: str = "s"
    valid: bool = True  # False: added NOT VALID, existing rows not checked yet


# Privileges (PostgreSQL's aclitem letters): r SELECT, a INSERT, w UPDATE, d DELETE,
# D TRUNCATE on relations; U USAGE, C CREATE on schemas. An ACL is a tuple of
# (grantee role oid, letters); grantee 0 is PUBLIC. The owner holds every privilege
# implicitly. owner 0 means "not set": the bootstrap superuser (BOOTSTRAP_ROLE_OID).
BOOTSTRAP_ROLE_OID = 10
Acl = tuple[tuple[int, str], ...]


@dataclass(frozen=True)
class Schema:
    oid: int
    name: str
    kind: str = field(default="schema", init=False)
    owner: int = field(default=0, kw_only=True)
    acl: Acl = field(default=(), kw_only=True)
    comment: str | None = field(default=None, kw_only=True)  # COMMENT ON SCHEMA


@dataclass(frozen=True)
class DefaultAcl:
    """ALTER DEFAULT PRIVILEGES: the ACL objects of one kind get when `role` creates them,
    in `schema` ('' for anywhere), as pg_default_acl has it (catalog/privileges.py
    initial_acl): `objtype` is defaclobjtype, r tables, S sequences, f functions, T
    types, n schemas; a schema's entry adds to the global one."""

    oid: int
    role: int
    schema: str
    objtype: str
    acl: Acl
    kind: str = field(default="default_acl", init=False)

    @property
    def name(self) -> str:
        return f"{self.role}/{self.schema}/{self.objtype}"


@dataclass(frozen=True)
class Role:
    """CREATE ROLE / USER: login, superuser, password verifier (SCRAM-SHA-256 or md5)."""

    oid: int
    name: str
    login: bool = False
    superuser: bool = False
    createrole: bool = False
    createdb: bool = False
    inherit: bool = True
    password: str | None = None  # 'SCRAM-SHA-256$iter:salt$StoredKey:ServerKey' or 'md5...'
    valid_until: str | None = None  # ISO timestamp with time zone, or None (forever)
    member_of: tuple[int, ...] = ()  # role oids this role was granted
    kind: str = field(default="role", init=False)


@dataclass(frozen=True)
class Relation:
    oid: int
    schema: str
    name: str
    columns: tuple[Column, ...]
    owner: int = field(default=0, kw_only=True)
    acl: Acl = field(default=(), kw_only=True)
    comment: str | None = field(default=None, kw_only=True)  # COMMENT ON TABLE, VIEW, ...
    # CREATE FUNCTION's functions inlined into its definition, defaults or CHECKs (by
    # oid): DROP FUNCTION and CREATE OR REPLACE refuse while it holds their old bodies
    functions: tuple[int, ...] = field(default=(), kw_only=True)

    def column(self, name: str) -> Column | None:
        for c in self.columns:
            if c.name == name:
                return c
        return None

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"


@dataclass(frozen=True)
class Trigger:
    """CREATE TRIGGER name BEFORE INSERT [OR UPDATE] ON table FOR EACH ROW [WHEN (...)]
    EXECUTE FUNCTION f(): a PL/pgSQL function that assigns NEW's fields (planner/
    plpgsql.py), applied to every new row version of those statements (server/
    triggers.py)."""

    oid: int
    name: str
    function: int  # the function's oid
    events: str  # "i", "u" or "iu"
    when: str | None = None  # WHEN's condition, as written
    enabled: bool = True


@dataclass(frozen=True)
class Table(Relation):
    keys: tuple[Key, ...] = ()
    kind: str = field(default="table", init=False)
    checks: tuple[Check, ...] = field(default=(), kw_only=True)  # CHECK constraints
    foreign_keys: tuple[ForeignKey, ...] = field(default=(), kw_only=True)
    index_keys: tuple[IndexKey, ...] = field(default=(), kw_only=True)
    triggers: tuple[Trigger, ...] = field(default=(), kw_only=True)  # by name

    @functools.cached_property
    def general_writes_only(self) -> bool:
        """Do its UPDATEs and DELETEs need the general path (DuckDB computing unique
        expression or partial index keys, generated columns, triggers), not point
        writes? (The fast INSERT path has DuckDB compute keys and generated columns for
        its rows: server/writes.py; a table with triggers takes the general one.)"""
        return bool(self.index_keys) or bool(self.generated_positions) or bool(self.triggers)

    @functools.cached_property
    def generated_positions(self) -> tuple[int, ...]:
        """The positions of its generated columns."""
        return tuple(i for i, c in enumerate(self.columns) if c.generated is not None)

    @property
    def primary_key(self) -> Key | None:
        return next((k for k in self.keys if k.primary), None)


@dataclass(frozen=True)
class View(Relation):
    """A view expanded inline into the queries that read it (CREATE VIEW)."""

    definition: str = ""  # the SELECT, as pglast deparses it
    kind: str = field(default="view", init=False)


@dataclass(frozen=True)
class MaterializedView(Relation):
    """CREATE MATERIALIZED VIEW: kept up to date incrementally by the engine (engine/);
    reads come from the engine's state at an epoch, never by expanding the query."""

    definition: str = ""  # the SELECT, as pglast deparses it
    # WITH (freshness = '1s'): the freshness SLO's target in seconds (server/slo.py)
    freshness: float | None = None
    kind: str = field(default="materialized view", init=False)


@dataclass(frozen=True)
class Index(Relation):
    """CREATE INDEX: a catalog entry (DuckDB scans need no index); UNIQUE ones are enforced.
    An expression or partial index (non-unique) keeps its key list and predicate as
    written, for pg_get_indexdef."""

    table_oid: int = 0
    keys: tuple[str, ...] = ()  # the key columns ("" for an expression key)
    unique: bool = False
    kind: str = field(default="index", init=False)
    method: str = "btree"
    key_exprs: tuple[str, ...] = ()  # per key: its expression's text ("" for a column)
    predicate: str | None = None  # WHERE's condition of a partial index

    def key_texts(self) -> list[str]:
        """Each key as pg_get_indexdef shows it: the column's name or the expression."""
        exprs = self.key_exprs or ("",) * len(self.keys)
        return [e or quote_ident(k) for k, e in zip(self.keys, exprs, strict=True)]


@dataclass(frozen=True)
class Sequence(Relation):
    """CREATE SEQUENCE (or a serial / identity column's): its parameters, as pg_sequence.

    The current value is not here: it changes outside transactions (nextval) and is
    kept by the sequence manager (server/sequences.py, storage/sequences.py). `nonce`
    tells its durable state from that of an earlier sequence that had the same oid in a
    transaction that rolled back."""

    type_name: str = "int8"  # int2 / int4 / int8 (AS smallint | integer | bigint)
    start: int = 1
    increment: int = 1
    min_value: int = 1
    max_value: int = 2**63 - 1
    cache: int = 1
    cycle: bool = False
    owned_by: tuple[int, str] | None = None  # (table oid, column) of OWNED BY
    identity: bool = False  # the sequence of an identity column (internal dependency)
    nonce: int = 0
    kind: str = field(default="sequence", init=False)


@dataclass(frozen=True)
class Sink:
    """CREATE SINK: a table's or materialized view's contents (mode 'mirror') or changes
    (mode 'changes') written continuously to a target outside the database. Where it
    got to is recorded in the target, with the data (server/sinks.py)."""

    oid: int
    schema: str
    name: str
    source: int  # oid of the table or materialized view it reads
    target_kind: str  # parquet | delta | postgres
    target: str  # a directory, a Delta table's path or URI, a PostgreSQL conninfo
    table: str | None = None  # the PostgreSQL target's table
    mode: str = "mirror"
    key: tuple[str, ...] = ()  # mirror: the source's columns that identify a row
    options: tuple[tuple[str, str], ...] = ()  # the other WITH options, as given
    created_epoch: int = 0  # the epoch of its CREATE
    owner: int = field(default=0, kw_only=True)
    kind: str = field(default="sink", init=False)

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"


@dataclass(frozen=True)
class UserType:
    """CREATE TYPE name AS ENUM (labels): pg_type's row (oid; its array type's) and
    pg_enum's. Columns of the type hold its PgType (catalog/types.py enum_type), which
    ALTER TYPE replaces in each of them."""

    oid: int
    schema: str
    name: str
    labels: tuple[str, ...]
    array_oid: int
    owner: int = field(default=0, kw_only=True)
    acl: Acl = field(default=(), kw_only=True)
    comment: str | None = field(default=None, kw_only=True)  # COMMENT ON TYPE
    kind: str = field(default="type", init=False)

    @property
    def pg(self) -> PgType:
        return enum_type(self.schema, self.name, self.oid, self.array_oid, self.labels)

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"


@dataclass(frozen=True)
class Domain:
    """CREATE DOMAIN name AS base [DEFAULT] [NOT NULL] [CHECK (VALUE ...)]: pg_type's row
    (typtype 'd'; its array type's). A column of the domain stores the base type (its
    ColumnType's `domain` names the domain); the table gets the domain's NOT NULL and
    CHECKs as Checks marked with the domain's name (server/domains.py), its DEFAULT
    when the column has none. `checks` hold expressions over VALUE."""

    oid: int
    schema: str
    name: str
    base: ColumnType
    array_oid: int
    not_null: bool = False
    default: str | None = None
    checks: tuple[Check, ...] = ()
    owner: int = field(default=0, kw_only=True)
    acl: Acl = field(default=(), kw_only=True)
    comment: str | None = field(default=None, kw_only=True)
    kind: str = field(default="domain", init=False)

    @property
    def pg(self) -> PgType:
        return domain_type(self.schema, self.name, self.oid, self.array_oid, self.base.pg)

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"


_SINK_FIELDS = ("schema", "source", "target_kind", "target", "table", "mode", "created_epoch")

_SEQUENCE_FIELDS = (
    "type_name",
    "start",
    "increment",
    "min_value",
    "max_value",
    "cache",
    "cycle",
    "identity",
    "nonce",
)


@dataclass(frozen=True)
class Extension:
    """CREATE EXTENSION: one of those whose functions Headwater provides
    (planner/functions/extension_funcs.py), as pg_extension lists it."""

    oid: int
    name: str
    schema: str  # where PostgreSQL would have put its objects
    version: str
    owner: int = field(default=0, kw_only=True)
    comment: str | None = field(default=None, kw_only=True)  # the extension's own, or
    kind: str = field(default="extension", init=False)  # COMMENT ON EXTENSION's


@dataclass(frozen=True)
class Param:
    """A function's input parameter: its name ('' if unnamed), its type as format_type()
    prints it, and its DEFAULT expression's text; `mode` is pg_proc's proargmodes letter
    (i IN, o OUT, b INOUT)."""

    name: str
    type: str
    default: str | None = None
    mode: str = "i"

    @property
    def mode_word(self) -> str:
        """How CREATE FUNCTION writes the mode."""
        return {"i": "IN", "o": "OUT", "b": "INOUT"}[self.mode]


@dataclass(frozen=True)
class Function:
    """CREATE FUNCTION ... LANGUAGE sql: one SELECT that the planner inlines where the
    function is called (planner/sql_functions.py), as PostgreSQL's planner inlines simple
    SQL functions. `columns` are RETURNS TABLE's (name, type); `source` is the body as
    written (pg_proc.prosrc; '' for a RETURN or BEGIN ATOMIC body, which `body` holds as
    the SELECT it stands for)."""

    oid: int
    schema: str
    name: str
    params: tuple[Param, ...]
    returns: str  # format_type() of the result ('record' for RETURNS TABLE)
    returns_set: bool
    body: str  # the SELECT the call is replaced by
    source: str
    volatility: str = "v"  # pg_proc.provolatile: 'i', 's' or 'v'
    strict: bool = False
    columns: tuple[tuple[str, str], ...] = ()
    # or "plpgsql": a trigger function (planner/plpgsql.py), or a function or procedure
    # run by server/plpgsql_exec.py
    language: str = "sql"
    prokind: str = "f"  # pg_proc.prokind: 'f' function, 'p' procedure (CALL)
    # every parameter as declared, where some are OUT or INOUT (else ()): `params` are
    # then those a call gives (a procedure's OUT ones too), `columns` those it returns
    declared: tuple[Param, ...] = field(default=(), kw_only=True)
    owner: int = field(default=0, kw_only=True)
    acl: Acl = field(default=(), kw_only=True)
    comment: str | None = field(default=None, kw_only=True)
    kind: str = field(default="function", init=False)

    @property
    def identity(self) -> str:
        """The argument types that tell overloads apart, as PostgreSQL prints them."""
        return ", ".join(p.type for p in self.params)

    @property
    def required(self) -> int:
        """How many arguments a call must give (the others have defaults)."""
        return sum(1 for p in self.params if p.default is None)


_FUNCTION_FIELDS = (
    *("returns", "returns_set", "body", "source", "volatility", "strict", "language"),
    "prokind",
)
_FUNCTION_DEFAULTS = {"language": "sql", "prokind": "f"}  # fields added since the first

CatalogObject = (
    Schema
    | DefaultAcl
    | Table
    | View
    | MaterializedView
    | Index
    | Role
    | Sequence
    | Sink
    | UserType
    | Domain
    | Extension
    | Function
)

_ROLE_FIELDS = ("login", "superuser", "createrole", "createdb", "inherit", "password")


def to_json(obj: CatalogObject) -> dict[str, Any]:
    d: dict[str, Any] = {"kind": obj.kind, "oid": obj.oid, "name": obj.name}
    if isinstance(obj, Role):
        d.update({f: getattr(obj, f) for f in _ROLE_FIELDS})
        d.update(valid_until=obj.valid_until, member_of=list(obj.member_of))
        return d
    if isinstance(obj, Sink):
        d.update({f: getattr(obj, f) for f in _SINK_FIELDS})
        d.update(key=list(obj.key), options=[list(o) for o in obj.options], owner=obj.owner)
        return d
    if isinstance(obj, Extension):
        d.update(schema=obj.schema, version=obj.version, owner=obj.owner, comment=obj.comment)
        return d
    if isinstance(obj, DefaultAcl):
        d.update(role=obj.role, schema=obj.schema, objtype=obj.objtype)
        d["acl"] = [list(a) for a in obj.acl]
        return d
    if obj.owner:
        d["owner"] = obj.owner
    if obj.acl:
        d["acl"] = [list(a) for a in obj.acl]
    if obj.comment is not None:
        d["comment"] = obj.comment
    if isinstance(obj, UserType):
        d.update(schema=obj.schema, labels=list(obj.labels), array_oid=obj.array_oid)
        return d
    if isinstance(obj, Domain):
        d.update(schema=obj.schema, array_oid=obj.array_oid, not_null=obj.not_null)
        d.update(base=obj.base.pg.name, typmod=obj.base.typmod, default=obj.default)
        d["checks"] = [[c.name, c.expr, c.valid] for c in obj.checks]
        return d
    if isinstance(obj, Function):
        d.update({f: getattr(obj, f) for f in _FUNCTION_FIELDS}, schema=obj.schema)
        d["params"] = [[p.name, p.type, p.default, p.mode] for p in obj.params]
        if obj.declared:
            d["declared"] = [[p.name, p.type, p.default, p.mode] for p in obj.declared]
        d["columns"] = [list(c) for c in obj.columns]
        return d
    if isinstance(obj, Relation):
        d["schema"] = obj.schema
        d["columns"] = [c.to_json() for c in obj.columns]
        if obj.functions:
            d["functions"] = list(obj.functions)
    if isinstance(obj, Table):
        d["keys"] = [asdict(k) for k in obj.keys]
        if obj.checks:
            d["checks"] = [asdict(c) for c in obj.checks]
        if obj.foreign_keys:
            d["foreign_keys"] = [asdict(f) for f in obj.foreign_keys]
        if obj.index_keys:
            d["index_keys"] = [asdict(k) for k in obj.index_keys]
        if obj.triggers:
            d["triggers"] = [asdict(t) for t in obj.triggers]
    if isinstance(obj, View | MaterializedView):
        d["definition"] = obj.definition
    if isinstance(obj, MaterializedView) and obj.freshness is not None:
        d["freshness"] = obj.freshness
    if isinstance(obj, Index):
        d.update(table_oid=obj.table_oid, keys=list(obj.keys), unique=obj.unique)
        if obj.key_exprs:
            d["key_exprs"] = list(obj.key_exprs)
        if obj.predicate is not None:
            d["predicate"] = obj.predicate
        if obj.method != "btree":
            d["method"] = obj.method
    if isinstance(obj, Sequence):
        d.update({f: getattr(obj, f) for f in _SEQUENCE_FIELDS})
        d["owned_by"] = list(obj.owned_by) if obj.owned_by else None
    return d


def from_json(d: dict[str, Any]) -> CatalogObject:
    kind = d["kind"]
    if kind == "role":
        return Role(
            d["oid"],
            d["name"],
            **{f: d[f] for f in _ROLE_FIELDS},
            valid_until=d.get("valid_until"),
            member_of=tuple(d.get("member_of", ())),
        )
    if kind == "sink":
        return Sink(
            d["oid"],
            name=d["name"],
            **{f: d[f] for f in _SINK_FIELDS},
            key=tuple(d["key"]),
            options=tuple((k, v) for k, v in d["options"]),
            owner=d.get("owner", 0),
        )
    if kind == "default_acl":
        acl = tuple((g, p) for g, p in d["acl"])
        return DefaultAcl(d["oid"], d["role"], d["schema"], d["objtype"], acl)
    if kind == "extension":
        default = AVAILABLE[d["name"]].comment if d["name"] in AVAILABLE else None
        return Extension(
            d["oid"],
            d["name"],
            d["schema"],
            d["version"],
            owner=d["owner"],
            comment=d.get("comment", default),  # written before COMMENT ON EXTENSION
        )
    own = {
        "owner": d.get("owner", 0),
        "acl": tuple((g, p) for g, p in d.get("acl", ())),
        "comment": d.get("comment"),
    }
    if kind == "schema":
        return Schema(d["oid"], d["name"], **own)
    if kind == "type":
        labels = tuple(d["labels"])
        return UserType(d["oid"], d["schema"], d["name"], labels, d["array_oid"], **own)
    if kind == "domain":
        return Domain(
            d["oid"],
            d["schema"],
            d["name"],
            ColumnType(STORED_TYPES[d["base"]], d["typmod"]),
            d["array_oid"],
            d["not_null"],
            d["default"],
            tuple(Check(*c) for c in d["checks"]),
            **own,
        )
    if kind == "function":
        return Function(
            d["oid"],
            d["schema"],
            d["name"],
            tuple(Param(*p) for p in d["params"]),
            **{f: d[f] if f in d else _FUNCTION_DEFAULTS[f] for f in _FUNCTION_FIELDS},
            columns=tuple((n, t) for n, t in d["columns"]),
            declared=tuple(Param(*p) for p in d.get("declared", ())),
            **own,
        )
    cols = tuple(Column.from_json(c) for c in d["columns"])
    own["functions"] = tuple(d.get("functions", ()))
    if kind == "table":
        keys = tuple(Key(k["name"], tuple(k["columns"]), k["primary"]) for k in d["keys"])
        checks = tuple(
            Check(c["name"], c["expr"], c.get("valid", True), c.get("domain", ""))
            for c in d.get("checks", ())
        )
        fks = tuple(
            ForeignKey(
                **{**f, "columns": tuple(f["columns"]), "ref_columns": tuple(f["ref_columns"])}
            )
            for f in d.get("foreign_keys", ())
        )
        index_keys = tuple(
            IndexKey(k["name"], tuple(k["keys"]), k["predicate"]) for k in d.get("index_keys", ())
        )
        return Table(
            d["oid"],
            d["schema"],
            d["name"],
            cols,
            keys,
            checks=checks,
            foreign_keys=fks,
            index_keys=index_keys,
            triggers=tuple(Trigger(**t) for t in d.get("triggers", ())),
            **own,
        )
    if kind == "view":
        return View(d["oid"], d["schema"], d["name"], cols, d["definition"], **own)
    if kind == "materialized view":
        return MaterializedView(
            d["oid"],
            d["schema"],
            d["name"],
            cols,
            d["definition"],
            freshness=d.get("freshness"),
            **own,
        )
    if kind == "index":
        return Index(
            d["oid"],
            d["schema"],
            d["name"],
            cols,
            d["table_oid"],
            tuple(d["keys"]),
            d["unique"],
            method=d.get("method", "btree"),
            key_exprs=tuple(d.get("key_exprs", ())),
            predicate=d.get("predicate"),
            **own,
        )
    if kind == "sequence":
        owned = d.get("owned_by")
        return Sequence(
            d["oid"],
            d["schema"],
            d["name"],
            cols,
            **{f: d[f] for f in _SEQUENCE_FIELDS},
            owned_by=(owned[0], owned[1]) if owned else None,
            **own,
        )
    raise ValueError(f"unknown catalog object kind {kind!r}")


__all__ = [
    "BOOTSTRAP_ROLE_OID",
    "Check",
    "Role",
    "Column",
    "ForeignKey",
    "Function",
    "Trigger",
    "Index",
    "IndexKey",
    "Key",
    "MaterializedView",
    "Param",
    "Schema",
    "Relation",
    "Sequence",
    "Sink",
    "Table",
    "UserType",
    "View",
    "to_json",
    "from_json",
    "replace",
]
