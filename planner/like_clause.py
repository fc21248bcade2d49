"""CREATE TABLE t (LIKE s [INCLUDING ...]): the clause as the column definitions and
constraints it stands for, so that the rest of CREATE TABLE reads them as written.

As PostgreSQL (transformTableLikeClause): names, types and NOT NULL always; defaults
(INCLUDING DEFAULTS; a serial's nextval() names the source's sequence), generation
expressions (GENERATED), identity (IDENTITY: a sequence of its own), CHECKs under their
names (CONSTRAINTS), primary key and UNIQUE constraints under new names (INDEXES).
Comments, statistics, storage and compression options have nothing to copy here;
non-unique and expression indexes are not copied (DuckDB scans need none).
"""

from __future__ import annotations

import copy
from typing import Any

import pglast.ast as A
from headwater.catalog.catalog import Catalog
from headwater.catalog.identifiers import quote_ident
from headwater.catalog.objects import Column, Table
from pglast import parse_sql
from pglast.enums import TableLikeOption as O

from headwater.errors import UndefinedTable


def expand_like(stmt: A.CreateStmt, catalog: Catalog, search_path: tuple[str, ...]) -> A.CreateStmt:
    """`stmt` with its LIKE clauses replaced by what they copy (a copy: the client's
    tree may be a prepared statement's, run again after the source changed)."""
    elts = stmt.tableElts or ()
    if not any(isinstance(e, A.TableLikeClause) for e in elts):
        return stmt
    out: list[Any] = []
    for elt in elts:
        if not isinstance(elt, A.TableLikeClause):
            out.append(elt)
            continue
        rv = elt.relation
        source = catalog.resolve(rv.schemaname, rv.relname, search_path)
        if source is None:
            raise UndefinedTable(f'relation "{rv.relname}" does not exist')
        out.extend(_elements(source, elt.options))
    new = copy.copy(stmt)  # (shallow: only its list of elements changes)
    new.tableElts = tuple(out)
    return new


def _elements(source: Any, options: int) -> list[Any]:
    """The column definitions and table constraints LIKE `source` copies, parsed from
    their text (the catalog keeps types, defaults and checks as PostgreSQL prints them)."""

    def has(option: O) -> bool:
        return bool(options & option.value)

    parts = [_column_sql(c, has) for c in source.columns]
    if isinstance(source, Table):
        if has(O.CREATE_TABLE_LIKE_CONSTRAINTS):
            own = [k for k in source.checks if not k.domain]  # (a domain's: not copied)
            parts += [f"CONSTRAINT {quote_ident(k.name)} CHECK ({k.expr})" for k in own]
        if has(O.CREATE_TABLE_LIKE_INDEXES):
            for key in source.keys:
                cols = ", ".join(quote_ident(c) for c in key.columns)
                parts.append(f"{'PRIMARY KEY' if key.primary else 'UNIQUE'} ({cols})")
    if not parts:
        return []
    made = parse_sql(f"CREATE TABLE _hw_like ({', '.join(parts)})")[0].stmt
    return list(made.tableElts)


def _column_sql(c: Column, has: Any) -> str:
    t = c.type
    type_sql = (
        f"{quote_ident(t.pg.schema)}.{quote_ident(t.pg.name)}" if t.pg.category == "E" else t.sql()
    )
    sql = f"{quote_ident(c.name)} {type_sql}"
    if c.not_null:
        sql += " NOT NULL"
    if c.identity:
        if has(O.CREATE_TABLE_LIKE_IDENTITY):
            sql += f" GENERATED {'ALWAYS' if c.identity == 'a' else 'BY DEFAULT'} AS IDENTITY"
    elif c.generated is not None:
        if has(O.CREATE_TABLE_LIKE_GENERATED):
            sql += f" GENERATED ALWAYS AS ({c.generated}) STORED"
    elif c.default is not None and has(O.CREATE_TABLE_LIKE_DEFAULTS):
        sql += f" DEFAULT {c.default}"
    return sql
