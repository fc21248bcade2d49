"""Temporary tables: CREATE TEMP TABLE, session-local, gone when the session ends.

A temporary table is an ordinary catalog Table in its session's schema `pg_temp_N`,
which only that session's search_path holds (first, or where `pg_temp` is listed:
Session.search_path), and its rows live in the serving DuckDB replica as every table's
do, so INSERT/UPDATE/DELETE/COPY, SELECT and joins with regular tables need nothing
new. What differs (docs/storage.md, "Temporary tables"): the catalog entries and change
rows of temporary objects are left out of the durable commit (`durable`), so a crash or
restart forgets them as PostgreSQL does; the batcher's fast path skips them; ON COMMIT
DELETE ROWS / DROP run at each commit (`at_commit`); and the session drops them when it
ends (`drop_all`, scheduled by server/executor.py).
"""

from __future__ import annotations

from collections.abc import Callable

import pglast.ast as A
import pyarrow as pa
from headwater.catalog.catalog import Catalog, is_temp_schema
from headwater.catalog.objects import CatalogObject, Relation, Schema, Table
from headwater.planner.scope import named_relations
from headwater.server.duckdb_calls import fetch
from headwater.server.session import Session, WriteTxn
from headwater.server.writes import apply
from headwater.storage.replica import Replica
from pglast.enums import OnCommitAction

from headwater.errors import FeatureNotSupported, SQLError

FIRST_SLOT = 3  # PostgreSQL's first client backend is usually pg_temp_3
_claimed: set[str] = set()  # pg_temp_N names held by live sessions (of this process)
Drop = Callable[[Session, WriteTxn, Relation, bool], object]  # server/ddl.drop_relation


def wants_temp(rv: A.RangeVar) -> bool:
    """CREATE TEMP ..., or a relation created in schema `pg_temp`."""
    return rv.relpersistence == "t" or rv.schemaname == "pg_temp"


def creation_schema(s: Session, w: WriteTxn, rv: A.RangeVar) -> str:
    """The session's temporary schema, made on first use (42P16 for TEMP with a
    schema that is not temporary, as PostgreSQL)."""
    if rv.schemaname not in (None, "pg_temp", s.temp_schema):
        raise SQLError("cannot create temporary relation in non-temporary schema", "42P16")
    cat = w.catalog
    if s.temp_schema is None:  # the session keeps its slot until it ends (`release`)
        used = _claimed | {n for n in cat.schemas if is_temp_schema(n)}
        slot = FIRST_SLOT
        while f"pg_temp_{slot}" in used:
            slot += 1
        s.temp_schema = f"pg_temp_{slot}"
        _claimed.add(s.temp_schema)
    if s.temp_schema not in cat.schemas:  # first use, or its first use rolled back
        cat.add_schema(s.temp_schema)
    return s.temp_schema


def release(s: Session) -> None:
    """The session ended and its temporary schema is gone: the slot is free again."""
    if s.temp_schema is not None:
        _claimed.discard(s.temp_schema)


def check_on_commit(rv: A.RangeVar, on_commit: OnCommitAction | None) -> None:
    if on_commit not in (None, OnCommitAction.ONCOMMIT_NOOP) and not wants_temp(rv):
        raise SQLError("ON COMMIT can only be used on temporary tables", "42P16")


def created(s: Session, table: Table, on_commit: OnCommitAction | None) -> None:
    """Note a new temporary table's ON COMMIT action (PRESERVE ROWS: nothing to do)."""
    if on_commit in (OnCommitAction.ONCOMMIT_DELETE_ROWS, OnCommitAction.ONCOMMIT_DROP):
        s.temp_on_commit[table.oid] = on_commit.name
    else:
        s.temp_on_commit.pop(table.oid, None)


def at_commit(s: Session, w: WriteTxn, drop: Drop) -> None:
    """ON COMMIT DROP: the table goes; ON COMMIT DELETE ROWS: its rows go (blocking)."""
    for oid, action in list(s.temp_on_commit.items()):
        rel = w.catalog.by_oid(oid)
        if not isinstance(rel, Table) or rel.schema != s.temp_schema:
            del s.temp_on_commit[oid]
        elif action == OnCommitAction.ONCOMMIT_DROP.name:
            drop(s, w, rel, True)
            del s.temp_on_commit[oid]
        elif oid in w.touched:
            old, _ = fetch(w.cur, f"SELECT * FROM {Replica.scan_with_rid(rel)} AS t")
            apply(w, rel, old, None)


def drop_all(s: Session, w: WriteTxn, drop: Drop) -> None:
    """The session ends: its temporary relations and schema go (blocking)."""
    name = s.temp_schema
    if name is None or name not in w.catalog.schemas:
        return
    # newest first: a table before the sequences it owns; what a cascade took is skipped
    for rel in sorted(
        [r for r in w.catalog.relations.values() if r.schema == name], key=lambda r: -r.oid
    ):
        if w.catalog.relations.get((rel.schema, rel.name)) is rel:
            drop(s, w, rel, True)
    w.catalog.drop_schema(name)
    s.temp_on_commit.clear()


def check_access(s: Session, stmt: object) -> None:
    """Another session's temporary relation, named by its schema: 0A000, as PostgreSQL
    (the statement is scanned only while some other session has temporary tables)."""
    if len(_claimed) <= (s.temp_schema in _claimed):  # no other session has any
        return
    for rv in named_relations(stmt):
        if rv.schemaname and is_temp_schema(rv.schemaname) and rv.schemaname != s.temp_schema:
            raise FeatureNotSupported("cannot access temporary tables of other sessions")


def reads_temp(catalog: Catalog, oids: set[int]) -> bool:
    """Does a view's query read a temporary relation?"""
    return any(is_temp_schema(r.schema) for r in map(catalog.by_oid, oids) if r is not None)


def targets_temp(s: Session, stmt: object) -> bool:
    """Does an INSERT write a temporary table (not for the batcher's durable path)?"""
    if s.temp_schema is None or not isinstance(stmt, A.InsertStmt):
        return False
    return is_temp(s.catalog, stmt.relation, s.search_path())


def is_temp(catalog: Catalog, rv: A.RangeVar, search_path: tuple[str, ...]) -> bool:
    rel = catalog.resolve(rv.schemaname, rv.relname, search_path)
    return rel is not None and is_temp_schema(rel.schema)


def durable(
    before: Catalog,
    after: Catalog,
    changes: dict[int, pa.Table],
    objects: dict[int, CatalogObject | None],
) -> tuple[dict[int, pa.Table], dict[int, CatalogObject | None]]:
    """The part of a commit that is made durable: everything but temporary objects
    (their catalog entries, their change rows)."""
    if not any(is_temp_schema(n) for n in (*before.schemas, *after.schemas)):
        return changes, objects
    temp = {
        r.oid for c in (before, after) for r in c.relations.values() if is_temp_schema(r.schema)
    }
    temp |= {s.oid for c in (before, after) for s in c.schemas.values() if is_temp_schema(s.name)}

    def is_temp_object(oid: int, obj: CatalogObject | None) -> bool:
        if isinstance(obj, Schema):
            return is_temp_schema(obj.name)
        if isinstance(obj, Relation):
            return is_temp_schema(obj.schema)
        return oid in temp

    return (
        {oid: t for oid, t in changes.items() if oid not in temp},
        {oid: o for oid, o in objects.items() if not is_temp_object(oid, o)},
    )
