"""Bind relation names in a pglast tree and lower it to DuckDB SQL.

Every RangeVar that names a table becomes a scan of the table's versions under a
visibility predicate (a given epoch, or the writer's current state); every view
is expanded inline, recursively. CTE names shadow relations as in PostgreSQL.
The tree is deparsed once with placeholders, which are then replaced by the
generated scans: only catalog identifiers and numbers are ever spliced in. The
statement's epoch is a DuckDB parameter ($`epoch_param`), bound when it runs.
"""

from __future__ import annotations

import copy
import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pglast.ast as A
import pglast.stream as pglast_stream
from headwater.catalog.catalog import Catalog
from headwater.catalog.objects import MaterializedView, Relation, Table, View
from headwater.planner import constant_lists, pg_compat
from headwater.planner.naming import targets_named, values_alias, values_query
from headwater.planner.scope import (
    column_types,
    may_be_system,
    names_cte,
    resolve_relation,
    with_ctes,
)
from headwater.planner.syntax import deparse
from headwater.storage.replica import quote
from pglast import parse_sql

from headwater.errors import FeatureNotSupported, SQLError

# Words DuckDB reserves and PostgreSQL does not: an identifier spelled like one must be
# quoted in the SQL DuckDB runs (`SELECT at FROM t` is fine in PostgreSQL).
_DUCKDB_RESERVED = frozenset(
    "anti asof at by describe lambda pivot pivot_longer pivot_wider positional qualify semi"
    " show summarize unpivot".split()
)
pglast_stream.RESERVED_KEYWORDS = frozenset(pglast_stream.RESERVED_KEYWORDS) | _DUCKDB_RESERVED


@dataclass
class Binder:
    """Binds one statement; `scan(table)` gives the subquery that reads a table."""

    catalog: Catalog
    search_path: tuple[str, ...]
    scan: Callable[[Table], str]
    nonce: str = field(default_factory=lambda: secrets.token_hex(4))
    subs: dict[str, str] = field(default_factory=dict)
    tables: set[int] = field(default_factory=set)  # oids of tables read
    depends: set[int] = field(default_factory=set)  # oids of tables and views named
    # A materialized view's rows at the statement's epoch (the engine's state)
    matview: Callable[[MaterializedView], str] | None = None
    matviews: set[int] = field(default_factory=set)  # oids of materialized views read
    # The DuckDB parameter $n that carries the statement's epoch, chosen after binding
    # (params.epoch_parameter: after the client's; 0: the scans name no epoch)
    epoch_param: int = 0
    # Resolves pg_catalog / information_schema / headwater_catalog relations to SQL
    # (schema or None, name) -> a subquery, or None if it is not a system relation.
    system: Callable[[str | None, str], str | None] | None = None
    uses_system: bool = False  # named a system relation (its rows are the statement's own)
    _view_depth: int = 0

    # -- public ---------------------------------------------------------------------
    def to_sql(self, node: Any) -> str:
        """Bind `node` (statement or expression) and return DuckDB SQL for it. `node`
        is not changed (a prepared statement's tree is parsed once, bound many times)."""
        return self.expand(deparse(self.bind(values_query(node), frozenset())))

    def expand(self, sql: str) -> str:
        # Substitutions may nest (views inside views), so repeat until none is left.
        for _ in range(64):
            if f"__hw{self.nonce}_" not in sql:
                return sql
            for key, value in self.subs.items():
                sql = sql.replace(key, value)
        raise FeatureNotSupported("views nested more than 64 levels deep")

    # -- walk -----------------------------------------------------------------------
    def bind(self, node: Any, ctes: frozenset[str]) -> Any:
        """`node` with the relations named below it bound to placeholders. Nodes on the
        way to a bound relation are copied, never changed: the caller's tree stays as
        it was."""
        if isinstance(node, tuple | list):
            if constant_lists.plain(node):  # constants name no relation
                return node
            items = [self.bind(item, ctes) for item in node]
            if all(a is b for a, b in zip(items, node, strict=True)):
                return node
            return type(node)(items)
        if not isinstance(node, A.Node):
            return node
        if constant_lists.long_in_list(node):
            return self._in_list(node, ctes)
        ctes = with_ctes(node, ctes)
        node = targets_named(values_alias(node))  # columns named as PostgreSQL names them
        changes = {}
        for name in node:
            child = given = getattr(node, name)
            if not isinstance(node, A.RangeSubselect):
                child = values_query(child)
            if isinstance(child, A.RangeVar):
                new = self.bind_range_var(child, ctes)
            elif isinstance(child, tuple) and any(isinstance(c, A.RangeVar) for c in child):
                bind = self.bind_range_var
                new = tuple(
                    bind(c, ctes) if isinstance(c, A.RangeVar) else self.bind(c, ctes)
                    for c in child
                )
            else:
                new = self.bind(child, ctes)
            if new is not given:
                changes[name] = new
        if not changes:
            return node
        node = copy.copy(node)
        for name, new in changes.items():
            setattr(node, name, new)
        return node

    def _in_list(self, node: A.A_Expr, ctes: frozenset[str]) -> A.A_Expr:
        """`x IN (<many constants>)` with the constants printed once, as a placeholder
        the deparser prints as a column name (planner/constant_lists.py)."""
        placeholder = f"__hw{self.nonce}_{len(self.subs)}__"
        self.subs[placeholder] = constant_lists.sql(node.rexpr)
        node = copy.copy(node)
        node.lexpr = self.bind(node.lexpr, ctes)
        node.rexpr = (A.ColumnRef(fields=(A.String(sval=placeholder),)),)
        return node

    def bind_range_var(self, rv: A.RangeVar, ctes: frozenset[str]) -> A.RangeVar:
        if names_cte(rv, ctes):
            return rv
        placeholder = f"__hw{self.nonce}_{len(self.subs)}__"
        self.subs[placeholder] = ""  # reserve the name before nested views take theirs
        system_sql = self.system_relation(rv)
        if system_sql is not None:
            self.subs[placeholder] = system_sql
        else:
            self.subs[placeholder] = self.relation_sql(self.resolve(rv))
        alias = rv.alias or A.Alias(aliasname=rv.relname)
        return A.RangeVar(relname=placeholder, inh=True, relpersistence="p", alias=alias)

    def system_relation(self, rv: A.RangeVar) -> str | None:
        """SQL for a system relation: pg_catalog (implicitly first on the search path,
        as in PostgreSQL), information_schema, headwater_catalog."""
        if self.system is not None and may_be_system(self.catalog, rv, self.search_path):
            sql = self.system(rv.schemaname, rv.relname)
            if sql is not None:
                self.uses_system = True
            return sql
        return None

    def resolve(self, rv: A.RangeVar) -> Relation:
        rel = resolve_relation(self.catalog, rv, self.search_path)
        self.depends.add(rel.oid)
        return rel

    def relation_sql(self, rel: Relation) -> str:
        if isinstance(rel, Table):
            self.tables.add(rel.oid)
            return self.scan(rel)
        if isinstance(rel, View):
            return self.view_sql(rel)
        if isinstance(rel, MaterializedView) and self.matview is not None:
            self.matviews.add(rel.oid)
            return self.matview(rel)
        raise FeatureNotSupported(f'relation "{rel.name}" cannot be read here')

    def view_sql(self, view: View) -> str:
        if self._view_depth > 32:
            raise SQLError(
                f'infinite recursion detected in rules for relation "{view.name}"', "42P17"
            )
        stmt = parse_sql(view.definition)[0].stmt
        # catalog functions and casts, as in top-level reads
        pg_compat.rewrite(stmt, column_types=column_types(stmt, self.catalog, self.search_path))
        self._view_depth += 1
        try:
            stmt = self.bind(stmt, frozenset())
        finally:
            self._view_depth -= 1
        cols = ", ".join(quote(c.name) for c in view.columns)
        return f"(SELECT * FROM ({deparse(stmt)}) AS _hw_v({cols}))"


@dataclass
class BoundRead:
    """A SELECT bound once and run many times (a prepared statement, or a query text the
    connection has seen before): its DuckDB SQL, whose parameter $`epoch` carries the
    epoch each execution chooses, and what the SQL was generated from, to tell when it
    is stale."""

    stmt: Any  # the client's pglast tree (through name_targets; the SQL is of a copy)
    sql: str
    epoch: int  # the number of the parameter carrying the epoch (0: the SQL reads none)
    catalog: Catalog  # catalogs are replaced, never changed, once current
    search_path: tuple[str, ...]
    matviews: frozenset[int]  # materialized views read: they choose the epoch
    guards: tuple[tuple[int, Any], ...] = ()  # (view oid, engine program) the SQL came from
    sources: Any = None  # output_sources() of the statement, for its RowDescription
    params: frozenset[int] | None = None  # the client's $n the SQL uses (None: unknown)
    duckdb: Any = None  # the SQL parsed by DuckDB once (server/reads.py)
    shape: Any = None  # ((names, DuckDB types), fields) of its last result
    seconds: float = 0.0  # CPU its last execution took in DuckDB (server/reads.py)
    tables: frozenset[int] = frozenset()  # tables read
    depends: frozenset[int] = frozenset()  # tables and views named, plain views expanded
    # server/result_cache.py: the tables its result follows (False: not worked out yet,
    # None: not to be reused)
    deps: frozenset[int] | bool | None = False
    date_order: str = "MDY"  # the session's DateStyle order its date constants were read in


class ReadPlans:
    """A connection's bound reads, by statement tree: only trees the connection reuses
    (`keep`) get a plan; the least recently used are forgotten beyond `size`."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._entries: OrderedDict[int, tuple[Any, BoundRead | None]] = OrderedDict()

    def keep(self, stmt: Any) -> None:
        """`stmt` will be run again: plan it at its next execution."""
        key = id(stmt)
        entry = self._entries.get(key)
        if entry is None or entry[0] is not stmt:
            self._entries[key] = (stmt, None)
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def get(self, stmt: Any) -> BoundRead | None:
        entry = self._entries.get(id(stmt))
        if entry is None or entry[0] is not stmt:
            return None
        self._entries.move_to_end(id(stmt))
        return entry[1]

    def kept(self, stmt: Any) -> bool:
        entry = self._entries.get(id(stmt))
        return entry is not None and entry[0] is stmt

    def put(self, plan: BoundRead) -> None:
        if self.kept(plan.stmt):
            self._entries[id(plan.stmt)] = (plan.stmt, plan)

    def forget(self, stmt: Any) -> None:
        if self.kept(stmt):
            del self._entries[id(stmt)]
