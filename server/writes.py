"""INSERT, UPDATE, DELETE, TRUNCATE and COPY FROM: the row changes of a table.

A write computes its change rows in DuckDB (planner/dml.py) on the writing
transaction's connection, checks new versions against the table's constraints
(server/constraints.py), applies them to the replica under the transaction's stamp
and collects them as the epoch's change log. An autocommitted INSERT of constants
skips all that: the batcher (server/batcher.py) adds its rows to a shared epoch.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import itertools
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import duckdb
import pglast.ast as A
import pyarrow as pa
import pyarrow.compute as pc
from headwater.catalog.catalog import is_temp_schema
from headwater.catalog.identifiers import quote_ident
from headwater.catalog.objects import Column, IndexKey, Key, Sequence, Table
from headwater.catalog.pgtypes import SessionFormat
from headwater.catalog.types import ARRAY_ELEMENT, arrow_type
from headwater.planner import dml
from headwater.planner.output_types import returning_sources
from headwater.planner.params import epoch_parameter
from headwater.planner.relations import deparse
from headwater.server import (
    constraints,
    fast_generated,
    fast_index_keys,
    foreign_keys,
    generated,
    point_writes,
    reads,
    triggers,
    value_exprs,
    values_select,
)
from headwater.server.auth import privilege_checks
from headwater.server.batcher import (
    ANY_KEY,
    BlockRow,
    FastRows,
    Row,
    StagedWrites,
    fast_rows,
    per_statement,
    row_ids,
    rows_table,
    upserted_row,
)
from headwater.server.binders import read_binder, write_binder
from headwater.server.copy import copy_options
from headwater.server.duckdb_calls import fetch, unregister_quietly
from headwater.server.fast_refs import ref_checks, sets_reference
from headwater.server.ref_counts import Pair, references, referencing
from headwater.server.results import Field, Result, arrow_fields, rows_of, sourced
from headwater.server.session import Session, WriteTxn
from headwater.storage.changelog import ENCODE_OFF_LOOP_BYTES, RID, WEIGHT
from headwater.storage.replica import CURRENT, Replica, quote
from pglast.enums import OnConflictAction

from headwater.errors import FeatureNotSupported, InFailedTransaction, SQLError, WrongObjectType

_threads = threading.local()  # a worker thread's DuckDB cursor (`_thread_cursor`)


def _thread_cursor(replica: Replica) -> duckdb.DuckDBPyConnection:
    """The calling thread's own cursor of `replica` (a new cursor costs ~0.2 ms)."""
    cur: duckdb.DuckDBPyConnection | None = getattr(_threads, "cursor", None)
    if cur is None or getattr(_threads, "replica", None) is not replica:
        cur = _threads.cursor = replica.cursor()
        _threads.replica = replica
    return cur


def _computed(s: Session, table: Table) -> tuple[Any, bool]:
    """What computes the fast INSERT path's generated columns and unique index keys of
    `table` (`fast_rows`' `generate`; None for a table with neither), and whether it is
    DuckDB (then on a worker thread): Python for the common shapes
    (server/fast_generated.py, server/fast_index_keys.py)."""
    if not table.generated_positions and not table.index_keys:
        return None, False
    if (table.generated_positions and fast_generated.compiled(table) is None) or (
        table.index_keys and fast_index_keys.compiled(table) is None
    ):
        return functools.partial(_in_duckdb, s.instance.replica), True
    return functools.partial(_in_python, s.text_format()), False


def _in_python(
    fmt: SessionFormat, table: Table, rows: list[list[Any]]
) -> list[list[tuple[Any, ...] | None]] | None:
    if table.generated_positions and not fast_generated.fill(table, rows, fmt):
        return None  # (a value that is not ASCII: the general path)
    return fast_index_keys.key_values(table, rows) if table.index_keys else []


def _in_duckdb(
    replica: Replica, table: Table, rows: list[list[Any]]
) -> list[list[tuple[Any, ...] | None]]:
    cur = _thread_cursor(replica)
    if table.generated_positions:
        generated.fill_rows(table, rows, cur)
    return constraints.index_key_values(table, rows, cur) if table.index_keys else []


async def fast_insert(s: Session, stmt: Any, params: list[Any]) -> Result | None:
    """An INSERT of constants through the batcher: autocommitted, it joins the next
    epoch; in a transaction block that has not written otherwise, its rows are staged
    until COMMIT (server/batcher.py StagedWrites). None for any other write (it runs
    in a writing transaction: `change`)."""
    if s.write is not None or s.status == "E" or not isinstance(stmt, A.InsertStmt):
        return None
    rel = s.catalog.resolve(stmt.relation.schemaname, stmt.relation.relname, s.search_path())
    if not isinstance(rel, Table) or rel.triggers:  # (triggers: the general path)
        return None
    if rel.foreign_keys and ref_checks(rel, s.catalog.by_oid) is None:
        return None  # FOREIGN KEYs not checked as lookups (server/fast_refs.py)
    if isinstance(stmt.selectStmt, A.SelectStmt) and not stmt.selectStmt.valuesLists:
        stmt = per_statement(stmt, rel, params, values_select.as_values)  # INSERT ... SELECT
        if stmt is None:
            return None
    fmt = s.text_format()
    started = s.xact_start if s.status == "T" else None
    serials = {
        c: s.instance.sequences.default_generator(s, c)
        for c in rel.columns
        if (c.default or "").startswith("nextval(")
    }
    rows = len(getattr(stmt.selectStmt, "valuesLists", None) or ())
    # nextval now and then makes its log ahead durable (server/sequences.py
    # SEQ_RESERVE): a statement that would wait for that runs on a thread
    waits = not all(g is None or g.spare() >= rows for g in serials.values())
    generate, in_duckdb = _computed(s, rel)
    rest = (fmt, serials.get, started, generate)
    if waits or in_duckdb:
        fast = await asyncio.to_thread(fast_rows, stmt, rel, params, *rest)
    else:
        fast = fast_rows(stmt, rel, params, *rest)
    if fast is None:  # VALUES items that are expressions: computed first, if they may be
        todo = value_exprs.items(stmt, rel)
        if todo is None:
            return None
        stmt, params, started = await value_exprs.with_values(s, stmt, rel, params, todo, started)
        rest = (fmt, serials.get, started, generate)  # (the clock the items read)
        fast = await asyncio.to_thread(fast_rows, stmt, rel, params, *rest)
        if fast is None:
            return None
    if s.status == "T" and fast.skip is not None:
        return await _block_skipping(s, rel, fast)
    if fast.upsert is not None:
        return await (_block_upsert if s.status == "T" else _upsert)(s, rel, fast)
    if s.status == "T":
        if s.staged.deleted(rel.oid):  # a key its point writes deleted is not free yet
            return None
        await s.instance.batcher.check_keys(rel, fast.rows, s.staged)
        s.staged.add(rel, fast.rows)
        return returned(rel, fast.rows, fast.returning, f"INSERT 0 {len(fast.rows)}")
    batcher, rows = s.instance.batcher, fast.rows
    try:
        if fast.skip is not None:  # ON CONFLICT DO NOTHING: the rows it inserted
            rows, epoch = await _skipping(s, rel, fast)
        else:
            epoch = await batcher.insert([(rel, fast.rows)], waits=s.waits)
    except SQLError as e:
        if _retried(s, rel, e):
            return None
        raise
    s.last_write_epoch = epoch or s.last_write_epoch
    return returned(rel, rows, fast.returning, f"INSERT 0 {len(rows)}")


@contextlib.asynccontextmanager
async def _row_locks(s: Session, rel: Table, keys: list[Row]) -> AsyncIterator[Callable[[], None]]:
    """An autocommitted statement's row locks of `keys` (taken in one order: two
    statements lock shared keys alike), held until its unit is staged: yields the
    callback the batcher calls then; released at the end in any case (the session
    holds no other row lock)."""
    locks, owner = s.instance.key_locks, id(s)
    try:
        for key in sorted(set(keys)):
            await locks.acquire(owner, (rel.oid, key), s.waits)
        yield lambda: locks.release(owner)
    finally:
        locks.release(owner)


async def _skipping(s: Session, rel: Table, fast: FastRows) -> tuple[list[Row], int]:
    """An autocommitted ON CONFLICT DO NOTHING at the batcher's turn, once the row locks
    of its primary keys that blocks hold are free (a block's DO NOTHING or upsert
    staged the key: wait, then skip the row if it committed, as PostgreSQL waits for
    the other inserter)."""
    assert fast.skip is not None
    async with _row_locks(s, rel, _primary_keys(rel, fast.rows)) as staged:
        return await s.instance.batcher.insert_skipping(rel, fast.rows, fast.skip, staged, s.waits)


def _primary_keys(rel: Table, rows: list[Row]) -> list[Row]:
    """The rows' primary key values ([] without a primary key or with a NULL in one)."""
    pk = rel.primary_key
    if pk is None:
        return []
    names = [c.name for c in rel.columns]
    at = [names.index(c) for c in pk.columns]
    keys = [tuple(row[i] for i in at) for row in rows]
    return [] if any(None in k for k in keys) else keys


async def _block_skipping(s: Session, rel: Table, fast: FastRows) -> Result | None:
    """ON CONFLICT DO NOTHING in a transaction block, on the primary key (its arbiter,
    or none where it is the table's only key): a row whose key a live row, the block's
    rows or an earlier row of the statement has is left out, the others are staged as
    the block's INSERT, each key locked until the block ends (as PostgreSQL's
    speculative insertion makes another inserter of the key wait for this transaction).
    None for the general path: another arbiter, unique indexes, a table the block
    deleted from."""
    batcher, pk = s.instance.batcher, rel.primary_key
    if (
        pk is None
        or rel.index_keys
        or s.staged.deleted(rel.oid)
        or fast.skip not in (pk.name, ANY_KEY)
        or (fast.skip == ANY_KEY and len(rel.keys) > 1)
    ):
        return None
    keys = _primary_keys(rel, fast.rows)
    if not keys:
        return None  # (a NULL key: 23502 from the general path)
    await batcher.load_keys([rel.oid])
    kept: list[Row] = []
    seen: set[Row] = set()
    for row, key in zip(fast.rows, keys, strict=True):
        if key in seen or s.staged.inserted_key(rel, key) or batcher.holds_key(rel, pk, key):
            continue
        await s.instance.key_locks.acquire(id(s), (rel.oid, key), s.waits)
        if batcher.holds_key(rel, pk, key):  # committed by another session meanwhile
            continue
        seen.add(key)
        kept.append(row)
    if kept:
        await batcher.check_keys(rel, kept, s.staged)  # (its FOREIGN KEYs, other keys)
        s.staged.add(rel, kept)
    return returned(rel, kept, fast.returning, f"INSERT 0 {len(kept)}")


def _upsert_key(s: Session, rel: Table, fast: FastRows) -> Row | None:
    """The primary key of an upsert's row if it is a point write (one row of a table
    whose rows are kept in Python), else None: the general path."""
    if (
        len(fast.rows) != 1
        or rel.general_writes_only
        or not point_writes.eligible(rel)
        or not s.instance.batcher.point_writable(rel)
    ):
        return None
    keys = _primary_keys(rel, fast.rows)  # (a NULL: 23502 from the general path)
    return keys[0] if keys else None


async def _upsert(s: Session, rel: Table, fast: FastRows) -> Result | None:
    """INSERT of one row ... ON CONFLICT (primary key) DO UPDATE as a point write: under
    the key's row lock, at the batcher's turn (server/batcher.py `_upsert`). None for
    the general path."""
    batcher = s.instance.batcher
    key = _upsert_key(s, rel, fast)
    if key is None:
        return None
    try:
        async with _row_locks(s, rel, [key]) as staged:
            if not await batcher.ensure_live(rel):
                return None
            assert fast.upsert is not None
            row, epoch = await batcher.upsert(rel, fast.rows[0], fast.upsert, staged, s.waits)
    except SQLError as e:
        if _retried(s, rel, e):
            return None
        raise
    s.last_write_epoch = epoch or s.last_write_epoch
    return returned(rel, [row], fast.returning, "INSERT 0 1")


async def _block_upsert(s: Session, rel: Table, fast: FastRows) -> Result | None:
    """The same in a transaction block (what SQLAlchemy and psycopg sessions send):
    under the key's row lock, held until the block ends, the block's point write of the
    key's row (the live one, or the block's own version of it), or, the key free, its
    staged INSERT; both reach the batcher at COMMIT with the block's other staged writes.
    None for the general path: a key the block inserted or deleted itself, or a free key
    in a table the block deleted from (those keys are not free yet)."""
    batcher = s.instance.batcher
    key = _upsert_key(s, rel, fast)
    if key is None or s.staged.inserted_key(rel, key):
        return None
    # (released when the block ends, as its point writes' are)
    await s.instance.key_locks.acquire(id(s), (rel.oid, key), s.waits)
    if not await batcher.ensure_live(rel):
        return None
    assert fast.upsert is not None
    proposed = fast.rows[0]
    mine = s.staged.rows.get((rel.oid, key))
    if mine is not None:
        rid, read, current = mine.rid, mine.read, mine.new
        if current is None:
            return None  # deleted earlier in the block: its key is not free yet
    else:
        entry = batcher.live_row(rel, key)
        if entry is None:
            if s.staged.deleted(rel.oid):
                return None
            await batcher.check_keys(rel, fast.rows, s.staged)
            s.staged.add(rel, fast.rows)
            return returned(rel, fast.rows, fast.returning, "INSERT 0 1")
        rid, read = entry
        current = read
    new = upserted_row(rel, current, proposed, fast.upsert)
    s.staged.rows[(rel.oid, key)] = BlockRow(rel, key, rid, read, new)
    return returned(rel, [new], fast.returning, "INSERT 0 1")


def _retried(s: Session, rel: Table, e: SQLError) -> bool:
    """A fast path's 40001 for a table ALTERed meanwhile (or, for point writes, whose
    rows became too many to keep): the statement goes to the general path, on the table
    as it is now."""
    return e.sqlstate == "40001" and s.catalog.by_oid(rel.oid) is not None


async def fast_point(s: Session, stmt: Any, params: list[Any]) -> Result | None:
    """An UPDATE or DELETE of rows by their primary key (server/point_writes.py): one
    row autocommitted goes through the batcher, computed at its turn; in a transaction
    block that has not written otherwise, or for several keys (`IN (...)`, `= ANY(...)`),
    each row is computed now under its row lock and staged, until COMMIT or as one unit.
    None for any other write (`change`)."""
    if s.write is not None or s.status == "E":
        return None
    if not isinstance(stmt, A.UpdateStmt | A.DeleteStmt):
        return None
    rel = s.catalog.resolve(stmt.relation.schemaname, stmt.relation.relname, s.search_path())
    batcher = s.instance.batcher
    if not isinstance(rel, Table) or not batcher.point_writable(rel):
        return None
    if not point_writes.eligible(rel):
        return None
    block = s.status == "T"
    if block and s.staged.inserted(rel.oid):  # its staged rows are not live rows yet
        return None
    started = s.xact_start if block else None
    writes = point_writes.point_writes(stmt, rel, params, s.text_format(), started)
    if writes is None:  # SET items that are expressions: computed first, if they may be
        todo = value_exprs.set_items(stmt, rel)
        if todo is None:
            return None
        as_params = value_exprs.with_params(stmt, todo, len(params) + 1)
        if not point_writes.shaped(as_params, rel, []):  # ([]: not remembered by its id)
            return None  # (a WHERE of other columns: server/scanned_writes.py)
        # (its errors are raised whether a row matches or not: PostgreSQL's planner folds
        # such constant expressions, and raises them, before it looks for rows)
        stmt, params, started = await value_exprs.with_values(s, stmt, rel, params, todo, started)
        writes = point_writes.point_writes(stmt, rel, params, s.text_format(), started)
    if not writes or _references_change(s, writes[0]):
        return None
    write, now = writes[0], block or len(writes) > 1  # now: computed at the statement
    verb = "DELETE" if write.delete else "UPDATE"
    if write.unique:  # by a UNIQUE key: the row's primary key, from the live rows
        if not await batcher.ensure_live(rel):
            return None
        key = batcher.find(rel, write.unique, write.by)
        if key is None:
            return returned(rel, [], write.returning, f"{verb} 0")
        write = dataclasses.replace(write, key=key)
        writes = [write]
    if sets_reference(rel, {item.column.name for item, _ in write.sets}):
        if ref_checks(rel, s.catalog.by_oid) is None:
            return None
        if now:  # (else the batcher reads them at its turn)
            await batcher.load_keys([fk.ref_table for fk in rel.foreign_keys])
    locks, owner = s.instance.key_locks, id(s)
    try:
        for w in writes:  # (in key order: two statements lock shared keys in one order)
            await locks.acquire(owner, (rel.oid, w.key), s.waits)
        live = await batcher.ensure_live(rel)  # False: too many rows to keep
        if live and write.unique:  # False: the row gave the values away while we waited
            live = batcher.find(rel, write.unique, write.by) == write.key
        rows = await _point_rows(s, rel, writes, block) if live and now else []
    except BaseException:
        if not block:  # (a block's locks go when it ends)
            locks.release(owner)
        raise
    if not live or rows is None:
        if not block:
            locks.release(owner)
        return None
    if now:
        return returned(rel, rows, write.returning, f"{verb} {len(rows)}")
    try:
        row, epoch = await batcher.point(write, lambda: locks.release(owner), s.waits)
    except SQLError as e:
        locks.release(owner)
        if _retried(s, rel, e):
            return None
        raise
    if epoch:
        s.last_write_epoch = epoch
    return returned(rel, [row] if row else [], write.returning, f"{verb} {int(bool(row))}")


async def _point_rows(
    s: Session, rel: Table, writes: list[point_writes.PointWrite], block: bool
) -> list[tuple[Any, ...]] | None:
    """Compute the point writes now, under their row locks: staged in the block, or
    (autocommitted) handed to the batcher as one unit, all or none. Returns the rows
    they changed; None for the general path (a referenced row to delete)."""
    batcher = s.instance.batcher
    pairs = referencing(s.catalog, rel) if writes[0].delete else None
    if pairs:
        if block and any(s.staged.inserted(t.oid) or s.staged.written(t.oid) for t, _ in pairs):
            return None  # the block's own rows of a referencing table: DuckDB counts them
        await batcher.load_refs(pairs)
    staged = s.staged if block else StagedWrites()
    prior: dict[tuple[int, Any], BlockRow | None] = {}  # to undo: the rows before
    rows = []
    try:
        for w in writes:
            k = (rel.oid, w.key)
            prior.setdefault(k, staged.rows.get(k))
            row = _stage_point(s, w, pairs, staged)
            if row is not None:
                rows.append(row)
    except (SQLError, _General) as e:
        for k, was in prior.items():  # (not a copy of the block's rows per statement)
            if was is None:
                staged.rows.pop(k, None)
            else:
                staged.rows[k] = was
        if isinstance(e, _General):
            return None
        raise
    if block or not staged.rows:
        return rows
    locks, owner = s.instance.key_locks, id(s)
    try:
        rows_written = list(staged.rows.values())
        epoch = await batcher.insert([], rows_written, lambda: locks.release(owner), s.waits)
    except SQLError as e:
        if _retried(s, rel, e):
            return None
        raise
    s.last_write_epoch = epoch
    return rows


def _references_change(s: Session, write: point_writes.PointWrite) -> bool:
    """Does the write change what a FOREIGN KEY references, or delete from a table
    whose referencing values are not counted (server/ref_counts.py)? Then the general
    path takes the referencing rows' actions."""
    pairs = references(s.catalog, write.table)
    if not pairs:
        return False
    if write.delete:
        return referencing(s.catalog, write.table) is None
    return any(i.column.name in fk.ref_columns for _, fk in pairs for i, _ in write.sets)


class _General(Exception):
    """A point write the general path must take after all (a referenced row to delete)."""


def _stage_point(
    s: Session,
    write: point_writes.PointWrite,
    pairs: list[Pair] | None,
    staged_writes: StagedWrites,
) -> tuple[Any, ...] | None:
    """A point write computed now into `staged_writes` (the block's, or a statement's
    own), against an earlier one of the row there or the live row (which its lock
    keeps as it is); returns the row it changed (its new version; a DELETE's old one),
    None when it found none. A DELETE of a row that `pairs` (the FOREIGN KEYs
    referencing the table) reference raises _General."""
    table, key = write.table, write.key
    staged = staged_writes.rows.get((table.oid, key))
    if staged is not None:
        _, _, rid, read, current = staged
    else:
        entry = s.instance.batcher.live_row(table, key)
        if entry is None:
            return None
        rid, read = entry
        current = read
    if current is None:  # deleted earlier in the block
        return None
    if pairs and s.instance.batcher.refs.referenced(table, current, pairs) is not False:
        raise _General
    new = None if write.delete else write.new_row(current)
    if new is not None and table.foreign_keys:
        err = s.instance.batcher.refs_error(table, new, current, staged_writes)
        if err is not None:
            raise err
    staged_writes.rows[(table.oid, key)] = BlockRow(table, key, rid, read, new)
    return current if new is None else new


def apply_staged(s: Session, w: WriteTxn) -> Result:
    """The block's staged INSERTs and point writes into its writing transaction
    (blocking), for a statement that reads or writes otherwise: from here on the block
    writes there (its row locks are held until it ends). What each SAVEPOINT of the
    block followed is written under its own stamp (WriteTxn.mark), so that ROLLBACK TO
    can still take it back."""
    staged = s.staged
    tables = {id(t): t for t, _ in staged.parts}
    for table, key, rid, read, new in staged.rows.values():
        tables[id(table)] = table
        if new != read and s.instance.batcher.live_row(table, key) != (rid, read):
            raise SQLError("could not serialize access due to concurrent update", "40001")
    s.staged = StagedWrites()
    for table in tables.values():
        current = w.catalog.by_oid(table.oid)
        if current is not table and current != table:  # ALTERed or dropped meanwhile
            raise SQLError(
                f'relation "{table.name}" changed during the transaction; retry', "40001"
            )
    bounds = [(0, {}), *(sp.staged for sp in s.savepoints), (len(staged.parts), staged.rows)]
    for i, ((start, before), (end, after)) in enumerate(itertools.pairwise(bounds)):
        if i:  # what was staged before the savepoint is written now
            s.savepoints[i - 1].written, s.savepoints[i - 1].staged = w.mark(), s.staged.mark()
        _apply_segment(s, w, staged.parts[start:end], before, after)
    return Result("")


def _apply_segment(
    s: Session,
    w: WriteTxn,
    parts: list[tuple[Table, Any]],
    before: dict[tuple[int, Any], BlockRow],
    after: dict[tuple[int, Any], BlockRow],
) -> None:
    """The staged INSERTs `parts`, and the point writes that took the rows from their
    versions in `before` (or the live ones) to those in `after`."""
    by_table: dict[int, tuple[Table, list[tuple[Any, ...]]]] = {}
    for table, rows in parts:  # one DuckDB check and insert per table
        by_table.setdefault(id(table), (table, []))[1].extend(rows)
    written: dict[int, tuple[Table, list[Any]]] = {}
    for k, row in after.items():
        prior = before.get(k)
        old = row.read if prior is None else prior.new
        if prior is not row and old != row.new:
            written.setdefault(id(row.table), (row.table, []))[1].append((row.rid, old, row.new))
    for table, rows in by_table.values():
        apply(w, table, None, rows_table(table, rows, s.instance.allocate_rids(len(rows))))
    for table, changed in written.values():
        old = rows_table(table, [r for _, r, _ in changed], [rid for rid, _, _ in changed])
        kept = [(rid, n) for rid, _, n in changed if n is not None]
        new = rows_table(table, [n for _, n in kept], [rid for rid, _ in kept]) if kept else None
        apply(w, table, old, new)


def returned(
    table: Table, rows: list[tuple[Any, ...]], returning: tuple[tuple[str, int], ...], tag: str
) -> Result:
    """A fast write's RETURNING columns, typed as PostgreSQL types them (the column's
    declared type, table and attnum), as the general path does."""
    if not returning:
        return Result(tag)
    out = pa.table(
        [pa.array([r[i] for r in rows], arrow_type(table.columns[i].type)) for _, i in returning],
        names=[name for name, _ in returning],
    )
    fields = [Field(name, table.columns[i].type, table.oid, i + 1) for name, i in returning]
    return Result(tag, fields, rows_of(out))


def change(s: Session, w: WriteTxn, stmt: Any, params: list[Any]) -> Result:
    """INSERT, UPDATE, DELETE or TRUNCATE in the writing transaction `w` (blocking)."""
    if getattr(stmt, "withClause", None) is not None:
        raise FeatureNotSupported("WITH in INSERT, UPDATE or DELETE is not supported")
    if isinstance(stmt, A.InsertStmt | A.UpdateStmt | A.DeleteStmt):
        dml.pg_spellings(stmt, s.catalog, s.search_path())
    if isinstance(stmt, A.InsertStmt):
        return _insert(s, w, stmt, params)
    if isinstance(stmt, A.UpdateStmt):
        return _update(s, w, stmt, params)
    if isinstance(stmt, A.DeleteStmt):
        return _delete(s, w, stmt, params)
    if isinstance(stmt, A.TruncateStmt):
        return _truncate(s, w, stmt)
    raise FeatureNotSupported(f"{type(stmt).__name__} is not supported")


def target_table(s: Session, w: WriteTxn, rv: A.RangeVar) -> Table:
    rel = w.catalog.get_relation(rv.schemaname, rv.relname, s.search_path())
    if not isinstance(rel, Table):
        raise WrongObjectType(
            f'cannot change {rel.kind} "{rel.name}"',
            hint="Only tables accept INSERT, UPDATE, DELETE and TRUNCATE.",
        )
    return rel


def _insert(s: Session, w: WriteTxn, stmt: A.InsertStmt, params: list[Any]) -> Result:
    table = target_table(s, w, stmt.relation)
    binder = write_binder(s, w)
    plan = dml.insert_rows_sql(stmt, table, binder)
    if plan.source is not None:
        probe, _ = fetch(w.cur, f"SELECT * FROM ({plan.source}) AS _hw_p LIMIT 0", params)
        if not stmt.cols and probe.num_columns < plan.width:  # the rest take defaults
            plan = dml.insert_rows_sql(stmt, table, binder, probe.num_columns)
        if probe.num_columns > plan.width:
            raise SQLError("INSERT has more expressions than target columns", "42601")
        if probe.num_columns < plan.width:
            raise SQLError("INSERT has more target columns than expressions", "42601")
    if table.general_writes_only and generated.has_generated(table):
        generated.check_insert(table, dml.target_columns(table, stmt.cols)[: plan.width], stmt)
    if plan.values is not None:  # many rows of constants, as Arrow (planner/dml.py)
        w.cur.register(dml.VALUES_TABLE, plan.values)
    try:
        new, _ = fetch(w.cur, plan.sql, params)
    finally:
        if plan.values is not None:
            unregister_quietly(w.cur, dml.VALUES_TABLE)
    alias = stmt.relation.alias.aliasname if stmt.relation.alias else table.name
    old = None
    conflict = stmt.onConflictClause
    if conflict is not None:
        new, old_upd, new_upd = _on_conflict(s, w, table, new, conflict, alias, params)
        old = old_upd
    else:
        new_upd = None
    first = s.instance.allocate_rids(new.num_rows)
    new = new.add_column(0, RID, row_ids(first, new.num_rows))
    if new_upd is not None and new_upd.num_rows:
        new = pa.concat_tables([new, new_upd.select(new.column_names)])
    new = apply(w, table, old, new) or new
    n = new.num_rows
    sel = dml.Selection("", alias)
    return _returning(s, w, stmt, new, sel, f"INSERT 0 {n}", params)


def _on_conflict(
    s: Session,
    w: WriteTxn,
    table: Table,
    new: pa.Table,
    clause: A.OnConflictClause,
    alias: str,
    params: list[Any],
) -> tuple[pa.Table | None, pa.Table | None, pa.Table | None]:
    """Split proposed rows into inserts and (for DO UPDATE) updates of existing rows.
    The arbiter is a unique key or a unique expression or partial index
    (`ON CONFLICT (lower(email))`, `ON CONFLICT (email) WHERE deleted_at IS NULL`)."""
    infer = clause.infer
    updates = clause.action == OnConflictAction.ONCONFLICT_UPDATE
    if not updates and (infer is None or not (infer.indexElems or infer.conname)):
        return _not_conflicting(w, table, new), None, None
    key = _arbiter(table, clause)
    name = "_hw_proposed"
    w.cur.register(name, new.append_column("_hw_pos", row_ids(0, new.num_rows)))
    try:
        mine = constraints.index_key_rows(table, key, name, carry="_hw_pos")
        theirs = constraints.index_key_rows(table, key, Replica.scan_with_rid(table), carry=RID)
        on = " AND ".join(f"m.k{i} = t.k{i}" for i in range(len(key.keys)))
        hits, _ = fetch(
            w.cur, f"SELECT m._hw_pos, t.{RID} FROM ({mine}) m JOIN ({theirs}) t ON {on}"
        )
        # later rows with an earlier row's key: DO NOTHING keeps the first
        keyed, _ = fetch(w.cur, f"SELECT * FROM ({mine}) ORDER BY _hw_pos")
        seen: set[tuple[Any, ...]] = set()
        repeated = set()
        for row in zip(*(c.to_pylist() for c in keyed.columns), strict=True):
            if row[1:] in seen:
                repeated.add(row[0])
            seen.add(row[1:])
        if updates and repeated:
            raise SQLError(
                "ON CONFLICT DO UPDATE command cannot affect row a second time",
                "21000",
                hint="Ensure that no rows proposed for insertion within the same command "
                "have duplicate constrained values.",
            )
        taken = set(hits.column(0).to_pylist()) | repeated
        inserts = new.filter(pa.array([i not in taken for i in range(new.num_rows)], pa.bool_()))
        if not updates or hits.num_rows == 0:
            return inserts, None, None
        binder = write_binder(s, w)
        sets = []
        for rt in clause.targetList:
            col = table.column(rt.name)
            if col is None:
                raise SQLError(
                    f'column "{rt.name}" of relation "{table.name}" does not exist', "42703"
                )
            sets.append((col.name, dml.cast_sql(rt.val, col, binder)))
        assigned = dict(sets)
        a = quote(alias)
        new_exprs = ", ".join(
            f"{assigned.get(c.name, f'{a}.{quote(c.name)}')} AS {quote(c.name)}"
            for c in table.columns
        )
        old_exprs = ", ".join(f"{a}.{quote(c.name)}" for c in table.columns)
        where = (
            f" AND ({binder.to_sql(clause.whereClause)})" if clause.whereClause is not None else ""
        )
        w.cur.register("_hw_pairs", hits)  # (proposed row, the existing row it hits)
        sql = (
            f"SELECT {a}.{RID}, {old_exprs}, {new_exprs} FROM {dml.target_scan(table, alias)} "
            f"JOIN _hw_pairs ON {a}.{RID} = _hw_pairs.{RID} "
            f"JOIN {name} AS excluded ON excluded._hw_pos = _hw_pairs._hw_pos WHERE true{where}"
        )
        both, _ = fetch(w.cur, sql, params)
    finally:
        unregister_quietly(w.cur, name)
        unregister_quietly(w.cur, "_hw_pairs")
    n = len(table.columns)
    old = _slice_cols(both, 0, n, table)
    upd = pa.table(
        [both.column(0)] + both.columns[1 + n :], names=[RID] + [c.name for c in table.columns]
    )
    return inserts, old, upd


def _not_conflicting(w: WriteTxn, table: Table, new: pa.Table) -> pa.Table:
    """ON CONFLICT DO NOTHING without a target: the proposed rows that collide on none
    of the table's unique keys and indexes with a row of the table or with an earlier
    proposed row that is inserted (PostgreSQL inserts them one after the other)."""
    arbiters = [_key_of(k) for k in table.keys] + list(table.index_keys)
    if not arbiters or not new.num_rows:
        return new
    name = "_hw_proposed"
    w.cur.register(name, new.append_column("_hw_pos", row_ids(0, new.num_rows)))
    clash: set[int] = set()  # rows whose key a row of the table has
    keys: list[dict[int, tuple[Any, ...]]] = []  # per arbiter: each row's key (not NULL)
    try:
        for k in arbiters:
            mine = constraints.index_key_rows(table, k, name, carry="_hw_pos")
            theirs = constraints.index_key_rows(table, k, Replica.scan(table, CURRENT))
            on = " AND ".join(f"m.k{i} = t.k{i}" for i in range(len(k.keys)))
            hits, _ = fetch(w.cur, f"SELECT m._hw_pos FROM ({mine}) m JOIN ({theirs}) t ON {on}")
            clash.update(hits.column(0).to_pylist())
            rows, _ = fetch(w.cur, mine)
            columns = [c.to_pylist() for c in rows.columns]
            keys.append({r[0]: r[1:] for r in zip(*columns, strict=True)})
    finally:
        unregister_quietly(w.cur, name)
    seen: list[set[tuple[Any, ...]]] = [set() for _ in arbiters]
    keep = []
    for pos in range(new.num_rows):
        row_keys = [(k[pos], taken) for k, taken in zip(keys, seen, strict=True) if pos in k]
        ok = pos not in clash and not any(v in taken for v, taken in row_keys)
        keep.append(ok)
        for v, taken in row_keys if ok else ():
            taken.add(v)
    return new.filter(pa.array(keep, pa.bool_()))


def _key_of(k: Key) -> IndexKey:
    """A unique key as the index that enforces it."""
    return IndexKey(k.name, tuple(quote_ident(c) for c in k.columns))


def _arbiter(table: Table, clause: A.OnConflictClause) -> IndexKey:
    """The unique key or index ON CONFLICT names or infers, as PostgreSQL finds it: by
    constraint name; by its columns and expressions in any order, a partial index when
    the inference's WHERE is its predicate."""
    infer = clause.infer
    if infer is not None and infer.conname:  # ON CONFLICT ON CONSTRAINT name
        key = next((k for k in table.keys if k.name == infer.conname), None)
        if key is None:
            raise SQLError(
                f'constraint "{infer.conname}" for table "{table.name}" does not exist',
                "42704",
            )
        return _key_of(key)
    if infer is None or not infer.indexElems:
        raise SQLError(
            "ON CONFLICT DO UPDATE requires inference specification or constraint name",
            "42601",
        )
    # (the texts CREATE UNIQUE INDEX kept: server/ddl.py `_create_index`)
    texts = {quote_ident(e.name) if e.name else deparse(e.expr) for e in infer.indexElems}
    where = deparse(infer.whereClause) if infer.whereClause is not None else None
    for k in [_key_of(k) for k in table.keys] + list(table.index_keys):
        if set(k.keys) == texts and k.predicate in (None, where):
            return k
    raise SQLError(
        "there is no unique or exclusion constraint matching the ON CONFLICT specification",
        "42P10",
    )


def _update(s: Session, w: WriteTxn, stmt: A.UpdateStmt, params: list[Any]) -> Result:
    table = target_table(s, w, stmt.relation)
    if table.general_writes_only:
        generated.check_update(table, list(stmt.targetList))
    sel = dml.update_sql(stmt, table, write_binder(s, w))
    both, _ = fetch(w.cur, sel.sql, params)
    both = _dedupe_rids(both)
    n = len(table.columns)
    old = _slice_cols(both, 0, n, table)
    new = _slice_cols(both, n, n, table)
    new = apply(w, table, old, new) or new
    rows = _with_extras(new, both, 1 + 2 * n, sel.extras)
    tag = f"UPDATE {new.num_rows}"
    return _returning(s, w, stmt, rows, sel, tag, params)


def _delete(s: Session, w: WriteTxn, stmt: A.DeleteStmt, params: list[Any]) -> Result:
    table = target_table(s, w, stmt.relation)
    sel = dml.delete_sql(stmt, table, write_binder(s, w))
    old, _ = fetch(w.cur, sel.sql, params)
    both = _dedupe_rids(old)
    old = _slice_cols(both, 0, len(table.columns), table)
    apply(w, table, old, None)
    rows = _with_extras(old, both, 1 + len(table.columns), sel.extras)
    tag = f"DELETE {old.num_rows}"
    return _returning(s, w, stmt, rows, sel, tag, params)


def _with_extras(rows: pa.Table, both: pa.Table, start: int, extras: tuple[str, ...]) -> pa.Table:
    """The affected rows and, for RETURNING, the FROM items' rows that matched them:
    then the target's row is the struct `_hw_t`, each FROM item's `_hw_f<i>`."""
    if not extras:
        return rows
    target = rows.drop_columns([RID])
    struct = pa.StructArray.from_arrays(
        [c.combine_chunks() for c in target.columns], names=target.column_names
    )
    cols = [rows.column(RID), struct] + [both.column(start + i) for i in range(len(extras))]
    return pa.table(cols, names=[RID, "_hw_t"] + [f"_hw_f{i}" for i in range(len(extras))])


def _truncate(s: Session, w: WriteTxn, stmt: A.TruncateStmt) -> Result:
    tables: list[Table] = []
    for rv in stmt.relations:
        rel = w.catalog.get_relation(rv.schemaname, rv.relname, s.search_path())
        if not isinstance(rel, Table):
            raise WrongObjectType(f'"{rv.relname}" is not a table')  # PostgreSQL's words
        tables.append(target_table(s, w, rv))
    # referencing tables: 0A000, or (CASCADE) truncated too
    extra = foreign_keys.truncate_check(w.catalog, tables, bool(stmt.behavior))
    for table in tables + extra:
        w.fresh.add(table.oid)
        old, _ = fetch(w.cur, f"SELECT * FROM {Replica.scan_with_rid(table)} AS t")
        apply(w, table, old, None, actions=False)
        if stmt.restart_seqs:  # RESTART IDENTITY: the sequences the table's columns own
            restart_owned_sequences(s, w.catalog, table)
    notices: list[str | SQLError] = [f'truncate cascades to table "{t.name}"' for t in extra]
    return Result("TRUNCATE TABLE", notices=notices)


def restart_owned_sequences(s: Session, catalog: Any, table: Table) -> None:
    for rel in list(catalog.relations.values()):
        if isinstance(rel, Sequence) and rel.owned_by and rel.owned_by[0] == table.oid:
            s.instance.sequences.restart(rel, rel.start)


def returning_list(stmt: Any) -> Any:
    rc = stmt.returningClause
    return rc.exprs if rc is not None else None


def _returning(
    s: Session,
    w: WriteTxn,
    stmt: Any,
    rows: pa.Table,
    sel: dml.Selection,
    tag: str,
    params: list[Any],
) -> Result:
    returning = returning_list(stmt)
    if not returning:
        return Result(tag)
    name = "_hw_affected"
    w.cur.register(name, rows.drop_columns([RID]))
    try:
        sql = dml.returning_sql(returning, name, sel.alias, write_binder(s, w), sel.extras)
        out, types = fetch(w.cur, sql, params)
    finally:
        try:
            unregister_quietly(w.cur, name)
        except duckdb.Error:
            pass  # the transaction failed; the error above is the one to report
    fields = arrow_fields(out.schema, types)
    sources = returning_sources(stmt, w.catalog, s.search_path())
    return Result(tag, sourced(fields, sources), rows_of(out))


async def describe_returning(s: Session, stmt: Any, nparams: int) -> list[Field] | None:
    """The RETURNING columns of an INSERT, UPDATE or DELETE, without running it."""
    rel = s.catalog.get_relation(stmt.relation.schemaname, stmt.relation.relname, s.search_path())
    if not isinstance(rel, Table):
        return None
    alias = stmt.relation.alias.aliasname if stmt.relation.alias else rel.name
    binder = read_binder(s, epoch_parameter(stmt))
    sql = dml.returning_shape_sql(stmt, Replica.scan(rel, "false"), alias, binder)
    sql += " LIMIT 0"
    used, epoch_param = reads.split_params(sql, binder.epoch_param)
    args = reads.args(used, [None] * nparams, epoch_param, 0)  # no rows: any epoch
    cur = s.cursor()
    table, types = await asyncio.to_thread(fetch, cur, sql, args)
    sources = returning_sources(stmt, s.catalog, s.search_path())
    return sourced(arrow_fields(table.schema, types), sources)


# -- COPY FROM ------------------------------------------------------------------------------
def copy_target(s: Session, stmt: A.CopyStmt) -> list[Column]:
    """The columns COPY FROM fills (checked before the client sends data)."""
    if s.status == "E":
        raise InFailedTransaction(
            "current transaction is aborted, commands ignored until end of transaction block"
        )
    table = s.catalog.get_relation(stmt.relation.schemaname, stmt.relation.relname, s.search_path())
    if not isinstance(table, Table):
        raise WrongObjectType(f'cannot copy to {table.kind} "{table.name}"')
    privilege_checks.check_copy_in(s, stmt.relation)
    named = [A.ResTarget(name=a.sval) for a in stmt.attlist] if stmt.attlist else None
    return generated.copy_columns(table, dml.target_columns(table, named) if named else None)


def copy_rows(
    s: Session, w: WriteTxn, stmt: A.CopyStmt, cols: list[Column], data: pa.Table
) -> Result:
    """COPY FROM STDIN (blocking): the strings in `data` become rows of the table."""
    table = target_table(s, w, stmt.relation)
    if copy_options(stmt).freeze and table.oid not in w.fresh:
        raise SQLError(
            "cannot perform COPY FREEZE because the table was not created or truncated in the"
            " current subtransaction",
            "55000",
        )
    binder = write_binder(s, w)
    given = {c.name for c in cols}
    for i, c in enumerate(cols):  # arrays' text ('{a,"b c"}') as DuckDB's list input
        element = ARRAY_ELEMENT.get(c.type.pg.name)
        if element is not None:
            values = data.column(i).to_pylist()
            texts = [None if v is None else dml.list_text(v, element.name) for v in values]
            data = data.set_column(i, data.field(i).name, pa.array(texts, pa.string()))
    name = "_hw_copy"
    w.cur.register(name, data)
    try:
        select = ", ".join(
            (
                f"CAST({quote(c.name)} AS {c.type.duckdb()})"
                if c.name in given
                else dml.default_sql(c, binder)
            )
            + f" AS {quote(c.name)}"
            for c in table.columns
        )
        new, _ = fetch(w.cur, f"SELECT {select} FROM {name}")
    finally:  # (after a failed cast DuckDB refuses it: the transaction is aborted)
        with contextlib.suppress(duckdb.Error):
            unregister_quietly(w.cur, name)
    first = s.instance.allocate_rids(new.num_rows)
    new = new.add_column(0, RID, row_ids(first, new.num_rows))
    # the epoch's change for the table (unless other writers' rows join it): its Arrow
    # IPC is encoded while the replica takes the rows
    alone = not w.explicit and not w.changes.get(table.oid) and not is_temp_schema(table.schema)
    big = alone and new.nbytes > ENCODE_OFF_LOOP_BYTES
    apply(w, table, None, new, encode=s.instance.changelog.encode_ahead if big else None)
    return Result(f"COPY {new.num_rows}")


# -- applying changes -----------------------------------------------------------------------
def apply(
    w: WriteTxn,
    table: Table,
    old: pa.Table | None,
    new: pa.Table | None,
    actions: bool = True,
    encode: Callable[[pa.Table], None] | None = None,
) -> pa.Table | None:
    """Retire `old` versions, check and add `new` ones, record the change rows; then the
    foreign keys (server/foreign_keys.py; `actions` False: TRUNCATE, which checks its
    referencing tables itself). `encode` is handed the change rows of `new` once they
    pass the checks (COPY: the change log encodes them meanwhile). Returns `new` as
    stored: triggers and generated columns applied (what RETURNING shows)."""
    cur = w.cur
    if old is not None and old.num_rows:
        born = not w.explicit or table.oid in w.inserted
        Replica.retire_versions(cur, table, old.column(RID), w.stamp, born)
    added = None
    if new is not None and new.num_rows:
        if table.triggers:  # BEFORE INSERT / UPDATE row triggers (server/triggers.py)
            new = triggers.fire(w.catalog, table, new, old, cur)
        if table.general_writes_only and generated.has_generated(table):
            new = generated.fill(table, new, cur)
        new = constraints.check(table, new, cur, old)
        added = new.append_column(WEIGHT, pa.repeat(pa.scalar(1, pa.int64()), new.num_rows))
        if encode is not None:
            encode(added)
        Replica.insert_versions(cur, table, new, w.stamp)
        w.inserted.add(table.oid)
        foreign_keys.check_rows(w.catalog, table, new, cur)
    if actions and old is not None and old.num_rows:
        foreign_keys.on_parent_change(w, table, old, new, apply)
    w.touched.add(table.oid)
    if old is not None and old.num_rows:
        w.changes[table.oid].append(
            old.append_column(WEIGHT, pa.repeat(pa.scalar(-1, pa.int64()), old.num_rows))
        )
    if added is not None:
        w.changes[table.oid].append(added)
    return new


def _slice_cols(both: pa.Table, start: int, n: int, table: Table) -> pa.Table:
    return pa.table(
        [both.column(0)] + both.columns[1 + start : 1 + start + n],
        names=[RID] + [c.name for c in table.columns],
    )


def _dedupe_rids(t: pa.Table) -> pa.Table:
    """UPDATE/DELETE ... FROM may match a row several times; it changes once."""
    if t.num_rows < 2:
        return t
    rids = t.column(0)
    if pc.count_distinct(rids).as_py() == t.num_rows:
        return t
    positions = pa.table({"r": rids, "i": row_ids(0, t.num_rows)})
    first = positions.group_by("r").aggregate([("i", "min")]).column("i_min")
    return t.take(first.take(pc.sort_indices(first)))
