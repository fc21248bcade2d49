"""Catalog objects: schemas, tables, views. Immutable; a change makes a new object.

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


@dataclass(frozen=True)
class Schema:
    oid: int
    name: str
    kind: str = field(default="schema", init=False)


@dataclass(frozen=True)
class Relation:
    oid: int
    schema: str
    name: str
    columns: tuple[Column, ...]

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
class Index(Relation):
    """CREATE INDEX: a catalog entry (DuckDB scans need no index); UNIQUE ones are enforced."""

    table_oid: int = 0
    keys: tuple[str, ...] = ()
    unique: bool = False
    kind: str = field(default="index", init=False)


CatalogObject = Schema | Table | View | Index


def to_json(obj: CatalogObject) -> dict[str, Any]:
    d: dict[str, Any] = {"kind": obj.kind, "oid": obj.oid, "name": obj.name}
    if isinstance(obj, Relation):
        d["schema"] = obj.schema
        d["columns"] = [c.to_json() for c in obj.columns]
    if isinstance(obj, Table):
        d["keys"] = [asdict(k) for k in obj.keys]
    if isinstance(obj, View):
        d["definition"] = obj.definition
    if isinstance(obj, Index):
        d.update(table_oid=obj.table_oid, keys=list(obj.keys), unique=obj.unique)
    return d


def from_json(d: dict[str, Any]) -> CatalogObject:
    kind = d["kind"]
    if kind == "schema":
        return Schema(d["oid"], d["name"])
    cols = tuple(Column.from_json(c) for c in d["columns"])
    if kind == "table":
        keys = tuple(Key(k["name"], tuple(k["columns"]), k["primary"]) for k in d["keys"])
        return Table(d["oid"], d["schema"], d["name"], cols, keys)
    if kind == "view":
        return View(d["oid"], d["schema"], d["name"], cols, d["definition"])
    if kind == "index":
        return Index(
            d["oid"], d["schema"], d["name"], cols, d["table_oid"], tuple(d["keys"]), d["unique"]
        )
    raise ValueError(f"unknown catalog object kind {kind!r}")


__all__ = [
    "Column",
    "Index",
    "Key",
    "Schema",
    "Relation",
    "Table",
    "View",
    "to_json",
    "from_json",
    "replace",
]
