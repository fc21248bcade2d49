"""Name resolution: what a relation name and a column name refer to.

Every pass that needs to know what a name means asks here, so that the serving
path, the view planner, result typing, parameter typing and privilege checks agree.

Relations. A RangeVar names a CTE when it is unqualified and a WITH clause around it
defines that name (CTEs shadow relations, as in PostgreSQL); otherwise it names a
catalog relation, looked up along the search_path, or a system relation:

    >>> stmt = parse_sql("WITH t AS (SELECT 1) SELECT * FROM t, public.t, u")[0].stmt
    >>> [(r.schemaname, r.relname) for r in named_relations(stmt)]
    [('public', 't'), (None, 'u')]

Columns. A `Scope` holds the FROM items of one query level (an alias and its
visible columns, each with whatever the caller binds a column to), and its parent
for correlated references; `lookup` raises PostgreSQL's 42702 / 42703 / 42P01:

    >>> s = Scope([Item("a", [("x", "c1")]), Item("b", [("x", "c2")])])
    >>> s.lookup(["a", "x"], None)
    'c1'
    >>> s.lookup(["x"], None)
    Traceback (most recent call last):
    headwater.errors.AmbiguousColumn: column reference "x" is ambiguous

A qualified name looks in the item of that alias; an unqualified one in the columns
`*` expands to, as PostgreSQL looks in a JOIN's columns: `a JOIN b USING (x)` has one
`x` (`a.x` and `b.x` stay reachable qualified), but another FROM item with an `x`
makes the unqualified name ambiguous again, e.g. `a FULL JOIN b USING (x), c`:

    >>> j = Scope(s.items, star=[("x", "coalesce(c1, c2)")])
    >>> j.lookup(["x"], None), j.lookup(["b", "x"], None)
    ('coalesce(c1, c2)', 'c2')
    >>> Scope(j.items + [Item("c", [("x", "c3")])], star=j.star + [("x", "c3")]).lookup(
    ...     ["x"], None)
    Traceback (most recent call last):
    headwater.errors.AmbiguousColumn: column reference "x" is ambiguous
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pglast.ast as A
from headwater.catalog.catalog import SYSTEM_SCHEMAS, Catalog
from headwater.catalog.objects import Relation
from headwater.catalog.system_shapes import system_column_type_names
from headwater.catalog.types import ColumnType, UserTypes
from headwater.planner.syntax import nodes

from headwater.errors import AmbiguousColumn, FeatureNotSupported, UndefinedColumn, UndefinedTable

SYSTEM_SCHEMA_HINT = "this system relation is not available"


# -- relations ----------------------------------------------------------------------------
def with_ctes(node: Any, ctes: frozenset[str]) -> frozenset[str]:
    """The CTE names visible inside `node`: those of the enclosing queries and its own
    WITH clause's."""
    clause = getattr(node, "withClause", None)
    if isinstance(clause, A.WithClause) and clause.ctes:
        return ctes | {c.ctename for c in clause.ctes}
    return ctes


def names_cte(rv: A.RangeVar, ctes: frozenset[str] | dict[str, Any]) -> bool:
    """Does `rv` name a CTE in scope rather than a relation?"""
    return rv.schemaname is None and rv.relname in ctes


def in_system_schema(rv: A.RangeVar) -> bool:
    """Is `rv` qualified by pg_catalog, information_schema or headwater_catalog?"""
    return rv.schemaname in SYSTEM_SCHEMAS


def may_be_system(catalog: Catalog, rv: A.RangeVar, search_path: tuple[str, ...]) -> bool:
    """Could `rv` name a system relation? Qualified by a system schema, or unqualified
    and not a catalog relation on the search_path (pg_catalog is searched implicitly,
    after the user's relations)."""
    return in_system_schema(rv) or (
        rv.schemaname is None and catalog.resolve(None, rv.relname, search_path) is None
    )


def find_relation(
    catalog: Catalog, rv: A.RangeVar, search_path: tuple[str, ...]
) -> Relation | None:
    """The catalog relation `rv` names, or None (for passes that only annotate)."""
    return catalog.resolve(rv.schemaname, rv.relname, search_path)


def resolve_relation(catalog: Catalog, rv: A.RangeVar, search_path: tuple[str, ...]) -> Relation:
    """The catalog relation `rv` names. A missing one is 42P01 (3F000 for a missing
    schema) pointing at the name; a system relation (not a catalog relation) is 0A000."""
    if in_system_schema(rv):
        raise FeatureNotSupported(f'relation "{rv.schemaname}.{rv.relname}": {SYSTEM_SCHEMA_HINT}')
    try:
        return catalog.get_relation(rv.schemaname, rv.relname, search_path)
    except UndefinedTable as e:
        if rv.location is not None and rv.location >= 0:
            e.position = rv.location + 1
        raise


def named_relations(
    node: Any, ctes: frozenset[str] = frozenset(), skip: Any = None
) -> list[A.RangeVar]:
    """Every RangeVar in `node` that names a relation (not a CTE), in tree order: what
    a statement reads or writes, for privilege checks. `skip` is left out (a DML
    statement's target, checked for its own privilege)."""
    out: list[A.RangeVar] = []

    def visit(n: Any, ctes: frozenset[str]) -> None:
        if isinstance(n, tuple | list):
            for item in n:
                visit(item, ctes)
            return
        if not isinstance(n, A.Node):
            return
        if isinstance(n, A.RangeVar):
            if n is not skip and not names_cte(n, ctes):
                out.append(n)
            return
        ctes = with_ctes(n, ctes)
        for attr in n:
            visit(getattr(n, attr), ctes)

    visit(node, ctes)
    return out


def column_types(node: Any, catalog: Catalog, search_path: tuple[str, ...]) -> Mapping[str, str]:
    """The types (PostgreSQL type names) of the columns of the relations a statement
    names, by column name: what planner/pg_compat.py's type-dependent rewrites need to
    know of a bare column (`data @> '{"a": 1}'` on jsonb, `price * qty` on a real),
    also renamed by a subquery (`SELECT j AS doc`). A name of two types in two
    relations is left out (its references are then untyped). Found when first asked
    (walking the tree costs ~20 µs; most statements never ask)."""

    def find() -> dict[str, str]:
        kinds: dict[str, str | None] = {}

        def note(name: str, kind: str | None) -> None:
            if kinds.setdefault(name, kind) != kind:
                kinds[name] = None

        renamed = []
        for n in nodes(node, A.A_Const):  # (a CTE's name: a relation of that name, if any)
            if isinstance(n, A.RangeVar):
                rel = find_relation(catalog, n, search_path)
                for col in getattr(rel, "columns", ()) if rel is not None else ():
                    note(col.name, type_kind(col.type))
                if rel is None:  # a system relation's (pg_index.indkey: int2vector)
                    for cname, kind in system_column_type_names(n.schemaname, n.relname):
                        note(cname, kind)
            elif isinstance(n, A.ResTarget) and n.name and isinstance(n.val, A.ColumnRef):
                renamed.append(n)
        for n in renamed:
            last = n.val.fields[-1]
            if isinstance(last, A.String) and kinds.get(last.sval) is not None:
                note(n.name, kinds[last.sval])
        return {name: kind for name, kind in kinds.items() if kind is not None}

    return _Lazy(find, lambda names: catalog.type_named(names, search_path))


def type_kind(ct: ColumnType) -> str:
    """A column's type as the translation's type-dependent rewrites know it: its name,
    an enum's DuckDB type (`ENUM('a', 'b')`: the type its compared constants take)."""
    return ct.duckdb() if ct.pg.category == "E" else ct.pg.name


class TypeNames(dict[str, str]):
    """Column types by (internal) column name, and the database's enums by type name."""

    def __init__(self, user_type: UserTypes | None = None) -> None:
        super().__init__()
        self.user_type = user_type


class _Lazy(Mapping[str, str]):
    """A mapping computed at its first use; `user_type` finds the database's enums by
    name (planner/functions/nodes.py `user_type`)."""

    def __init__(
        self, compute: Callable[[], dict[str, str]], user_type: UserTypes | None = None
    ) -> None:
        self._compute: Callable[[], dict[str, str]] | None = compute
        self._data: dict[str, str] = {}
        self.user_type = user_type

    def _get(self) -> dict[str, str]:
        if self._compute is not None:
            self._data, self._compute = self._compute(), None
        return self._data

    def __getitem__(self, key: str) -> str:
        return self._get()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


# -- columns ------------------------------------------------------------------------------
T = TypeVar("T")


@dataclass
class Item(Generic[T]):
    """One FROM item in scope: its alias and its columns (visible name -> binding)."""

    alias: str | None
    cols: list[tuple[str, T]]


@dataclass
class Scope(Generic[T]):
    """The FROM items of one query level, and the level around it (correlation)."""

    items: list[Item[T]]
    # what * expands to, and what an unqualified name may mean (empty: every item's
    # columns); a JOIN ... USING column is in it once
    star: list[tuple[str, T]] = field(default_factory=list)
    parent: Scope[T] | None = None
    outer_refs: set[T] = field(default_factory=set)  # bindings found in a parent

    def candidates(self, fields: list[str]) -> list[T]:
        """Every column of this level that `fields` (name or alias.name) could mean."""
        name = fields[-1]
        if len(fields) == 1:
            return [b for n, b in self.unqualified() if n == name]
        items = self.with_alias(fields[-2])
        return [b for n, b in items[0].cols if n == name] if items else []

    def unqualified(self) -> list[tuple[str, T]]:
        """The columns an unqualified name is looked up in."""
        return self.star or [c for i in self.items for c in i.cols]

    def with_alias(self, alias: str) -> list[Item[T]]:
        return [i for i in self.items if i.alias == alias]

    def find(self, fields: list[str]) -> T | None:
        """The column `fields` means at this level, None if none; 42702 if ambiguous."""
        hits = self.candidates(fields)
        if len(hits) > 1:
            raise AmbiguousColumn(f'column reference "{fields[-1]}" is ambiguous')
        return hits[0] if hits else None

    def lookup(self, fields: list[str], location: int | None) -> T:
        """The column `fields` means here or in an enclosing level (noted in
        `outer_refs`); 42P01 for an unknown alias, 42703 for an unknown column."""
        depth = 0
        for scope in self.chain():
            found = scope.find(fields)
            if found is not None:
                if depth:
                    self.outer_refs.add(found)
                return found
            depth += 1
        pos = location + 1 if location is not None and location >= 0 else None
        if len(fields) >= 2:
            alias = fields[-2]
            if not any(s.with_alias(alias) for s in self.chain()):
                raise UndefinedTable(f'missing FROM-clause entry for table "{alias}"', position=pos)
            raise UndefinedColumn(f"column {alias}.{fields[-1]} does not exist", position=pos)
        raise UndefinedColumn(f'column "{fields[-1]}" does not exist', position=pos)

    def star_of(self, alias: str) -> list[tuple[str, T]]:
        """What `alias.*` expands to; 42P01 if no FROM item has that alias."""
        items = self.with_alias(alias)
        if not items:
            raise UndefinedTable(f'missing FROM-clause entry for table "{alias}"')
        return items[0].cols

    def using_column(self, name: str, side: str) -> T:
        """The one column `name` of the `side` ("left" or "right") of a JOIN ... USING
        or NATURAL JOIN: 42703 if it has none, 42702 if several."""
        hits = self.candidates([name])
        if not hits:
            raise UndefinedColumn(
                f'column "{name}" specified in USING clause does not exist in {side} table'
            )
        if len(hits) > 1:
            raise AmbiguousColumn(
                f'common column name "{name}" appears more than once in {side} table'
            )
        return hits[0]

    def chain(self) -> Iterator[Scope[T]]:
        s: Scope[T] | None = self
        while s is not None:
            yield s
            s = s.parent
