"""Catalog objects: schemas, tables, views, roles. Immutable; a change makes a new object.

They serialise to JSON for storage (catalog keys in SlateDB, written in the same
atomic batch as the epoch that changes them).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from headwater.catalog.types import BY_NAME, ColumnType


@dataclass(frozen=True)
class Column:
    name: str
    type: ColumnType
    not_null: bool = False
    default: str | None = None  # PostgreSQL expression text, as pg_get_expr shows it

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type.pg.name,
            "typmod": self.type.typmod,
            "not_null": self.not_null,
            "default": self.default,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> Column:
        return Column(
            d["name"], ColumnType(BY_NAME[d["type"]], d["typmod"]), d["not_null"], d["default"]
        )


@dataclass(frozen=True)
class Key:
    """A PRIMARY KEY or UNIQUE constraint."""

    name: str
    columns: tuple[str, ...]
    primary: bool


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

    def column(self, name: str) -> Column | None:
        for c in self.columns:
            if c.name == name:
                return c
        return None

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"


@dataclass(frozen=True)
class Table(Relation):
    keys: tuple[Key, ...] = ()
    kind: str = field(default="table", init=False)

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
    kind: str = field(default="materialized view", init=False)


@dataclass(frozen=True)
class Index(Relation):
    """CREATE INDEX: a catalog entry (DuckDB scans need no index); UNIQUE ones are enforced."""

    table_oid: int = 0
    keys: tuple[str, ...] = ()
    unique: bool = False
    kind: str = field(default="index", init=False)


CatalogObject = Schema | Table | View | MaterializedView | Index | Role

_ROLE_FIELDS = ("login", "superuser", "createrole", "createdb", "inherit", "password")


def to_json(obj: CatalogObject) -> dict[str, Any]:
    d: dict[str, Any] = {"kind": obj.kind, "oid": obj.oid, "name": obj.name}
    if isinstance(obj, Role):
        d.update({f: getattr(obj, f) for f in _ROLE_FIELDS})
        d.update(valid_until=obj.valid_until, member_of=list(obj.member_of))
        return d
    if obj.owner:
        d["owner"] = obj.owner
    if obj.acl:
        d["acl"] = [list(a) for a in obj.acl]
    if isinstance(obj, Relation):
        d["schema"] = obj.schema
        d["columns"] = [c.to_json() for c in obj.columns]
    if isinstance(obj, Table):
        d["keys"] = [asdict(k) for k in obj.keys]
    if isinstance(obj, View | MaterializedView):
        d["definition"] = obj.definition
    if isinstance(obj, Index):
        d.update(table_oid=obj.table_oid, keys=list(obj.keys), unique=obj.unique)
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
    own = {"owner": d.get("owner", 0), "acl": tuple((g, p) for g, p in d.get("acl", ()))}
    if kind == "schema":
        return Schema(d["oid"], d["name"], **own)
    cols = tuple(Column.from_json(c) for c in d["columns"])
    if kind == "table":
        keys = tuple(Key(k["name"], tuple(k["columns"]), k["primary"]) for k in d["keys"])
        return Table(d["oid"], d["schema"], d["name"], cols, keys, **own)
    if kind == "view":
        return View(d["oid"], d["schema"], d["name"], cols, d["definition"], **own)
    if kind == "materialized view":
        return MaterializedView(d["oid"], d["schema"], d["name"], cols, d["definition"], **own)
    if kind == "index":
        return Index(
            d["oid"],
            d["schema"],
            d["name"],
            cols,
            d["table_oid"],
            tuple(d["keys"]),
            d["unique"],
            **own,
        )
    raise ValueError(f"unknown catalog object kind {kind!r}")


__all__ = [
    "BOOTSTRAP_ROLE_OID",
    "Role",
    "Column",
    "Index",
    "Key",
    "MaterializedView",
    "Schema",
    "Relation",
    "Table",
    "View",
    "to_json",
    "from_json",
    "replace",
]
