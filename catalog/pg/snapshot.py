"""The objects of one catalog snapshot as pg_catalog numbers them, for one session.

`Builder` lists the namespaces and relations (the system relations of the specs, then
the catalog's tables, views, materialized views and indexes, and the indexes behind
PRIMARY KEY/UNIQUE constraints); the relation modules (pg_catalog.py,
information_schema.py, roles.py, internal.py) turn them into rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from headwater.catalog.catalog import PUBLIC_SCHEMA_OID, Catalog
from headwater.catalog.objects import Column, Index, Key, Relation, Table
from headwater.catalog.pg import specs
from headwater.catalog.pg.column_default import expr_display
from headwater.catalog.pg.expressions import printed
from headwater.catalog.pg.oids import (
    DATABASE_OWNER_ROLE_OID,
    INFORMATION_SCHEMA_OID,
    PG_CATALOG_OID,
    RELKIND,
    SUPERUSER_OID,
    derived_oid,
)
from headwater.catalog.pg.session import SessionContext
from headwater.catalog.pg.typeinfo import spec_type
from headwater.catalog.types import TEXT

_RELKIND_SYSTEM = {"r": "r", "v": "v"}


@dataclass
class RelRow:
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
    """One catalog snapshot and the session reading it, with what the row functions of
    every system relation share (namespaces, relations, visibility), computed once."""

    def __init__(self, catalog: Catalog, session: SessionContext) -> None:
        self.catalog = catalog
        self.session = session
        self._rels: list[RelRow] | None = None

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

    def relations(self) -> list[RelRow]:
        if self._rels is not None:
            return self._rels
        rels = list(system_rels())
        indexes = [r for r in self.catalog.relations.values() if isinstance(r, Index)]
        by_table: dict[int, list[Index]] = {}
        for ix in indexes:
            by_table.setdefault(ix.table_oid, []).append(ix)
        path = self.session.search_path
        # a column of a domain takes the domain's DEFAULT: not the column's own
        domains = {d.oid: d.default for d in getattr(self.catalog, "domains", {}).values()}

        def relation(oid: int) -> tuple[str, str] | None:
            rel = self.catalog.by_oid(oid)
            return (rel.schema, rel.name) if rel is not None else None

        for obj in sorted(self.catalog.relations.values(), key=lambda r: r.oid):
            nsp = self.nsp_oid(obj.schema)
            if isinstance(obj, Index):
                table = self.catalog.by_oid(obj.table_oid)
                cols = index_columns(table, obj.keys)
                rels.append(
                    RelRow(obj.oid, obj.name, nsp, obj.schema, "i", cols, obj, obj.table_oid)
                )
                rels[-1].index_cols, rels[-1].unique = obj.keys, obj.unique
                continue
            kind = RELKIND.get(obj.kind)
            if kind is None:
                continue
            cols = [
                (c.name, *_type_of(c), c.not_null, _default(c, obj, path, relation, domains))
                for c in obj.columns
            ]
            rels.append(RelRow(obj.oid, obj.name, nsp, obj.schema, kind, cols, obj))
            if isinstance(obj, Table):
                own = {ix.name for ix in by_table.get(obj.oid, [])}
                for n, key in enumerate(obj.keys):
                    if key.name in own:
                        continue  # CREATE UNIQUE INDEX: an index, not a constraint
                    ioid = derived_oid(obj.oid, 0, n)
                    rels.append(
                        RelRow(
                            ioid,
                            key.name,
                            nsp,
                            obj.schema,
                            "i",
                            index_columns(obj, key.columns),
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


def index_columns(table: Relation | None, names: Iterable[str]) -> list[Any]:
    out = []
    for n in names:
        col = table.column(n) if table is not None and n else None
        if col is None:  # (an expression key, "": PostgreSQL names it expr)
            out.append((n or "expr", TEXT.oid, -1, False, None))
        else:
            out.append((n, col.type.pg.oid, col.type.typmod, False, None))
    return out


_SYSTEM_RELS: list[RelRow] | None = None


def system_rels() -> list[RelRow]:
    global _SYSTEM_RELS
    if _SYSTEM_RELS is None:
        out = []
        for (schema, name), (oid, kind, cols) in specs.RELATIONS.items():
            nsp = PG_CATALOG_OID if schema == "pg_catalog" else INFORMATION_SCHEMA_OID
            columns = [(c, *spec_type(t), False, None) for c, t in cols]
            out.append(RelRow(oid, name, nsp, schema, _RELKIND_SYSTEM.get(kind, kind), columns))
        _SYSTEM_RELS = out
    return _SYSTEM_RELS


def index_rels(b: Builder) -> list[RelRow]:
    return [r for r in b.relations() if r.relkind == "i"]


def indexed_tables(b: Builder) -> list[tuple[RelRow, Relation]]:
    """Each index with the relation it indexes (one the catalog still has)."""
    pairs = [(r, b.catalog.by_oid(r.table_oid)) for r in index_rels(b)]
    return [(r, t) for r, t in pairs if t is not None]


def user_rels(b: Builder, *kinds: str) -> list[RelRow]:
    return [r for r in b.relations() if r.obj is not None and r.relkind in kinds]


# The rows of one relation, and the table of such functions each relation module fills.
RowsFn = Callable[["Builder"], list[dict[str, Any]]]
Builders = dict[tuple[str, str], RowsFn]


def registrar(builders: Builders) -> Callable[[str, str], Callable[[RowsFn], RowsFn]]:
    """A decorator that enters a function into `builders` as the rows of (schema, name)."""

    def builder(schema: str, name: str) -> Callable[[RowsFn], RowsFn]:
        def deco(fn: RowsFn) -> RowsFn:
            builders[(schema, name)] = fn
            return fn

        return deco

    return builder


def _type_of(c: Column) -> tuple[int, int]:
    """pg_attribute's atttypid and atttypmod: a domain column's are the domain's."""
    if c.type.domain is not None:
        return c.type.domain.oid, -1
    return c.type.pg.oid, c.type.typmod


def _default(
    c: Column,
    table: Relation,
    path: tuple[str, ...],
    relation: Callable[[int], tuple[str, str] | None],
    domain_defaults: dict[int, str | None],
) -> str | None:
    """pg_attrdef's text of a column: its default, or a generated column's expression."""
    if c.generated is not None:
        return printed(c.generated, table)
    if c.type.domain is not None and domain_defaults.get(c.type.domain.oid, 0) == c.default:
        return None
    return expr_display(c, path, relation)
