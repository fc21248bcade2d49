"""UPDATE and DELETE by any WHERE clause, read off the write lock.

`UPDATE sessions SET last_seen = now() WHERE token = $1`, `UPDATE users SET logins =
logins + 1 WHERE email = $1`, `DELETE FROM jobs WHERE done AND finished < $1`: a WHERE
that is not a primary key's (server/point_writes.py takes those) ran as a writing
transaction, ~7 DuckDB statements under the instance's one write lock (~100-140 such
statements a second, whatever the clients). Here an autocommitted one is computed as
the general path computes it (planner/dml.py's SQL: the rows it matches with their new
versions, PostgreSQL's casts and errors), but as a read without the write lock: of the
replica's current rows, those whose changes the batcher staged but has not flushed yet
replaced by their current versions (`InsertBatcher.pending_rows`: the statement sees
every write staged before it, acknowledged or not, without waiting for a flush). Then
the rows are locked in key order (server/key_locks.py) and, if each is still the
version read (the batcher's live rows say so), checked (NOT NULL, varchar(n), CHECK:
server/constraints.py) and handed to the batcher as one unit, all or none, which
verifies them again at its turn. A row another writer changed in between is read
again with its lock held (its version then stays), up to ATTEMPTS reads, then the
general path runs the statement: as in PostgreSQL's READ COMMITTED, the rows are those
a read matched, each in its newest version.

Not taken (the general path): blocks, FROM / USING / WITH, RETURNING of expressions,
sequence calls, WHERE CURRENT OF, a SET of a PRIMARY KEY / UNIQUE or FOREIGN KEY
column, a DELETE from a table some FOREIGN KEY references, tables point writes do not
keep in Python (point_writes.eligible), and statements matching more than
point_writes.MANY_MAX rows.
"""

from __future__ import annotations

import asyncio
from typing import Any

import duckdb
import pglast.ast as A
import pyarrow as pa
from headwater.catalog.catalog import is_temp_schema
from headwater.catalog.objects import Table
from headwater.planner import dml
from headwater.planner.pg_compat import copy_tree
from headwater.planner.syntax import nodes
from headwater.server import constraints, point_writes
from headwater.server.batcher import BlockRow, Row, returning_columns, rows_table
from headwater.server.binders import current_binder
from headwater.server.duckdb_calls import duckdb_params
from headwater.server.py_values import py_list
from headwater.server.ref_counts import references
from headwater.server.results import Result
from headwater.server.session import Session
from headwater.server.writes import returned
from headwater.storage.changelog import RID
from headwater.storage.duckdb_errors import translate
from headwater.storage.replica import CURRENT, physical, quote

from headwater.errors import SQLError

_SEQUENCE_CALLS = frozenset({"nextval", "currval", "setval", "lastval"})
ATTEMPTS = 3  # reads of a statement whose rows other writers keep changing, then general


def _takes(s: Session, stmt: Any) -> tuple[Table, tuple[tuple[str, int], ...]] | None:
    """The statement's table and RETURNING columns if this module takes the statement."""
    if s.status != "I" or s.write is not None:
        return None
    if not isinstance(stmt, A.UpdateStmt | A.DeleteStmt) or stmt.withClause is not None:
        return None
    # more listed values than point writes take: the general path, without `_many`'s
    # count (~6-10 ms of a 4,000-key UPDATE or DELETE of 600 k rows: issue 16)
    if point_writes.names_many(stmt.whereClause):
        return None
    if getattr(stmt, "fromClause", None) or getattr(stmt, "usingClause", None):
        return None
    rel = s.catalog.resolve(stmt.relation.schemaname, stmt.relation.relname, s.search_path())
    if not isinstance(rel, Table) or is_temp_schema(rel.schema):
        return None
    if not point_writes.eligible(rel) or not s.instance.batcher.point_writable(rel):
        return None
    if rel.general_writes_only:  # (generated values, unique index keys: the general path)
        return None
    returning = returning_columns(stmt, rel)
    if returning is None:  # RETURNING of expressions
        return None
    for node in nodes(stmt, A.A_Const):
        if isinstance(node, A.CurrentOfExpr):  # WHERE CURRENT OF a cursor
            return None
        if isinstance(node, A.FuncCall) and node.funcname[-1].sval.lower() in _SEQUENCE_CALLS:
            return None
    if isinstance(stmt, A.DeleteStmt):
        return None if references(s.catalog, rel) else (rel, returning)
    keyed = {c for k in rel.keys for c in k.columns}
    keyed |= {c for fk in rel.foreign_keys for c in fk.columns}
    return None if any(rt.name in keyed for rt in stmt.targetList) else (rel, returning)


async def scanned_write(s: Session, stmt: Any, params: list[Any]) -> Result | None:
    """The statement's result, or None for the general path (see the module's docstring)."""
    taken = _takes(s, stmt)
    if taken is None:
        return None
    batcher = s.instance.batcher
    rel, returning = taken
    delete = isinstance(stmt, A.DeleteStmt)
    stmt = copy_tree(stmt)  # (the client's tree as written: the general path may run it)
    dml.pg_spellings(stmt, s.catalog, s.search_path())
    binder = current_binder(s)
    sqls: dict[tuple[bool, bool], str] = {}

    def sql(stale: bool, pending: bool) -> str:  # bound once per shape of the target
        if (stale, pending) not in sqls:
            target = _target(rel, stale, pending)
            sel = (
                dml.delete_sql(stmt, rel, binder, target)
                if delete
                else dml.update_sql(stmt, rel, binder, target)
            )
            sqls[stale, pending] = f"{sel.sql} LIMIT {point_writes.MANY_MAX + 1}"
        return sqls[stale, pending]

    if not batcher.live_current(rel) and await _many(s, rel, sql(False, False), params):
        return None
    if not await batcher.ensure_live(rel):
        return None
    locks, owner = s.instance.key_locks, id(s)
    try:
        # a row another writer changed between the read and its lock: read again, its
        # lock held (its version stays), as PostgreSQL re-reads a row it waited for
        for _ in range(ATTEMPTS):
            stale, pending = batcher.pending_rows(rel)
            overlay = rows_table(rel, [r for _, r in pending], [rid for rid, _ in pending])
            query = sql(bool(stale), bool(pending))
            both = await asyncio.to_thread(_scan, s.cursor(), query, params, overlay, stale)
            if both.num_rows > point_writes.MANY_MAX:
                locks.release(owner)
                return None
            rows = _rows(rel, both, delete)
            # in key order, as point writes lock theirs (keys are never NULL, one type)
            for key in sorted(key for key, *_ in rows):
                await locks.acquire(owner, (rel.oid, key), s.waits)
            if not await batcher.ensure_live(rel):  # (too many rows to keep by now)
                locks.release(owner)
                return None
            if all(batcher.live_row(rel, key) == (rid, read) for key, rid, read, _ in rows):
                break
        else:
            locks.release(owner)
            return None
        if not delete and rows:
            await asyncio.to_thread(_check, s, rel, both)
    except BaseException:
        locks.release(owner)
        raise
    changed = [BlockRow(rel, key, rid, read, n) for key, rid, read, n in rows if n != read]
    if changed:
        try:
            epoch = await batcher.insert([], changed, lambda: locks.release(owner), s.waits)
        except SQLError as e:
            locks.release(owner)
            if e.sqlstate == "40001" and s.catalog.by_oid(rel.oid) is not None:
                return None  # ALTERed meanwhile: the general path
            raise
        s.last_write_epoch = epoch
    else:
        locks.release(owner)
    verb = "DELETE" if delete else "UPDATE"
    out = [read if delete else n for _, _, read, n in rows]  # in the order read, as PostgreSQL
    return returned(rel, out, returning, f"{verb} {len(rows)}")


async def _many(s: Session, rel: Table, query: str, params: list[Any]) -> bool:
    """Does the statement match more rows than point writes take, in DuckDB's rows (a
    guess: without changes staged and not flushed yet)? Asked before the table's live
    rows are read into Python for it, or brought up to date with general transactions'
    changes (issue 16: ~3 s for 600 k rows, each time a 4,000-row UPDATE of such a
    table then took the general path)."""
    counted = f"SELECT count(*) FROM (SELECT 1 FROM ({query}))"  # (no column fetched)
    try:
        found = await asyncio.to_thread(_scan, s.cursor(), counted, params, _NO_ROWS, [])
    except SQLError:  # (maybe of a row a staged change replaced): the full read decides
        return False
    return bool(found.column(0)[0].as_py() > point_writes.MANY_MAX)


_NO_ROWS = pa.table({})


def _rows(rel: Table, both: pa.Table, delete: bool) -> list[tuple[Row, int, Row, Row | None]]:
    """(key, row id, row read, its new version: None for a DELETE) of each row matched."""
    n = len(rel.columns)
    cols = [py_list(c) for c in both.columns]
    old = list(zip(*cols[1 : 1 + n], strict=True)) if n else [()] * both.num_rows
    new: list[Any] = [None] * len(old) if delete else list(zip(*cols[1 + n :], strict=True))
    pk = rel.primary_key
    assert pk is not None
    names = [c.name for c in rel.columns]
    at = [names.index(c) for c in pk.columns]  # the key's values in its own order
    return [
        (tuple(r[i] for i in at), rid, r, v) for rid, r, v in zip(cols[0], old, new, strict=True)
    ]


def _target(rel: Table, stale: bool, pending: bool) -> str:
    """The table's rows as the batcher has them: DuckDB's current ones but those whose
    changes are staged and not flushed yet (`stale`: their row ids in _hw_stale_rids),
    and the current versions of those (`pending`: _hw_pending_rows)."""
    cols = ", ".join(quote(c.name) for c in rel.columns)
    sep = ", " if cols else ""
    sql = f"SELECT {RID}{sep}{cols} FROM {physical(rel.oid)} WHERE {CURRENT}"
    if stale:
        sql += f" AND {RID} NOT IN (SELECT {RID} FROM _hw_stale_rids)"
    if pending:
        sql += f" UNION ALL SELECT {RID}{sep}{cols} FROM _hw_pending_rows"
    return f"({sql})"


def _scan(cur: Any, sql: str, params: list[Any], pending: pa.Table, stale: list[int]) -> pa.Table:
    # DuckDB reads these locals by their names (replacement scans): registering them
    # would be catalog changes, a fifth of the statement's CPU
    _hw_pending_rows = pending  # noqa: F841
    _hw_stale_rids = pa.table({RID: pa.array(stale, pa.int64())})  # noqa: F841
    try:
        return cur.execute(sql, duckdb_params(sql, params)).to_arrow_table()
    except duckdb.Error as e:
        raise translate(e) from None


def _check(s: Session, rel: Table, both: pa.Table) -> None:
    """The new versions' constraints, checked as the general path checks them."""
    n = len(rel.columns)
    names = [RID] + [c.name for c in rel.columns]
    versions = both.select([0, *range(1 + n, 1 + 2 * n)]).rename_columns(names)
    before = both.select(list(range(1 + n))).rename_columns(names)
    constraints.check(rel, versions, s.cursor(), before)
