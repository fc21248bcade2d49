"""Transactions: BEGIN / COMMIT / ROLLBACK / savepoints, and the writing transaction.

A transaction that writes holds the instance's write lock from its first write until
it ends (server/session.py). At COMMIT its DuckDB transaction commits, its change rows
(consolidated per table) and catalog changes go to the committer under its epoch, and
once that epoch is durable the engine follows the catalog (views dropped, new views
backfilled).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

import duckdb
import pglast.ast as A
import pyarrow as pa
from headwater.catalog.objects import MaterializedView, Table
from headwater.server import cursors, ddl, read_only, temp_tables
from headwater.server.batcher import StagedWrites
from headwater.server.results import Result
from headwater.server.session import Savepoint, Session, WriteMark, WriteTxn
from headwater.storage.changelog import (
    RETAINED_FROM,
    RID,
    WEIGHT,
    consolidate_pair,
    consolidate_rows,
    log_form,
)
from headwater.storage.commit import write_lock_timed_out
from headwater.storage.duckdb_errors import translate
from headwater.storage.replica import PENDING, Replica, quote
from pglast.enums import TransactionStmtKind

from headwater.errors import FeatureNotSupported, InFailedTransaction, SQLError

log = logging.getLogger("headwater.transactions")

_SAVEPOINT_KINDS = (
    TransactionStmtKind.TRANS_STMT_SAVEPOINT,
    TransactionStmtKind.TRANS_STMT_RELEASE,
    TransactionStmtKind.TRANS_STMT_ROLLBACK_TO,
)


async def transaction(s: Session, stmt: A.TransactionStmt) -> Result:
    kind = stmt.kind
    if kind in (TransactionStmtKind.TRANS_STMT_BEGIN, TransactionStmtKind.TRANS_STMT_START):
        tag = "BEGIN" if kind == TransactionStmtKind.TRANS_STMT_BEGIN else "START TRANSACTION"
        if s.status != "I":
            return Result(tag, notices=["there is already a transaction in progress"])
        s.settings.begin()
        read_only.begin(s, stmt)
        s.status = "T"
        s.xact_start = dt.datetime.now(dt.UTC)
        return Result(tag)
    if kind in (TransactionStmtKind.TRANS_STMT_COMMIT, TransactionStmtKind.TRANS_STMT_ROLLBACK):
        read_only.end(s)
        s.savepoints.clear()
        if s.cursors:  # cursors live until the end of their transaction
            cursors.close(s, None)
    if kind == TransactionStmtKind.TRANS_STMT_COMMIT:
        if s.status == "I":
            return Result("COMMIT", notices=["there is no transaction in progress"])
        if s.status == "E":
            await rollback_write(s)
            s.settings.end(committed=False)
            s.sync_role()
            s.status = "I"
            return Result("ROLLBACK")
        s.settings.end(committed=True)
        s.sync_role()
        try:
            notices = await commit_write(s)
        finally:
            s.status = "I"
        return Result("COMMIT", notices=notices)
    if kind == TransactionStmtKind.TRANS_STMT_ROLLBACK:
        if s.status == "I":
            return Result("ROLLBACK", notices=["there is no transaction in progress"])
        await rollback_write(s)
        s.settings.end(committed=False)
        s.sync_role()
        s.status = "I"
        return Result("ROLLBACK")
    if kind in _SAVEPOINT_KINDS:
        return await _savepoint(s, stmt)
    if s.status == "E":
        raise InFailedTransaction(
            "current transaction is aborted, commands ignored until end of transaction block"
        )
    raise FeatureNotSupported("two-phase commit is not supported")


async def _savepoint(s: Session, stmt: A.TransactionStmt) -> Result:
    """SAVEPOINT, RELEASE and ROLLBACK TO. Rolling back takes back the staged writes
    since the savepoint and, in the writing transaction, the versions stamped since
    (`undo_writes`)."""
    savepoints = s.savepoints
    if s.status == "I":
        savepoints.clear()
        word = stmt.kind.name.removeprefix("TRANS_STMT_").replace("_", " ")
        raise SQLError(f"{word} can only be used in transaction blocks", "25P01")
    name = stmt.savepoint_name
    if stmt.kind == TransactionStmtKind.TRANS_STMT_SAVEPOINT:
        if s.status == "E":
            raise InFailedTransaction(
                "current transaction is aborted, commands ignored until end of transaction block"
            )
        written = s.write.mark() if s.write is not None else None
        savepoints.append(Savepoint(name, s.staged.mark(), written))
        return Result("SAVEPOINT")
    names = [sp.name for sp in savepoints]
    if name not in names:
        raise SQLError(f'savepoint "{name}" does not exist', "3B001")
    pos = len(names) - 1 - names[::-1].index(name)
    if stmt.kind == TransactionStmtKind.TRANS_STMT_RELEASE:
        if s.status == "E":
            raise InFailedTransaction(
                "current transaction is aborted, commands ignored until end of transaction block"
            )
        del savepoints[pos:]
        return Result("RELEASE")
    mark = savepoints[pos].written
    if s.write is not None and mark is not None:
        await asyncio.to_thread(undo_writes, s.write, mark)
    s.staged.truncate(savepoints[pos].staged)  # fast-path writes since then (staged) go
    del savepoints[pos + 1 :]
    s.status = "T"
    return Result("ROLLBACK")


def undo_writes(w: WriteTxn, mark: WriteMark) -> None:
    """ROLLBACK TO SAVEPOINT in the writing transaction (blocking): the versions stamped
    since `mark` go, those ended since live again, and the change rows recorded since
    are forgotten. A schema change since, or a statement DuckDB failed (its transaction
    then takes only ROLLBACK), cannot be taken back: 0A000."""
    if w.schema_changed_since(mark):
        raise FeatureNotSupported(
            "ROLLBACK TO SAVEPOINT after a schema change since the savepoint is not supported",
            hint="ROLLBACK the transaction and run it again.",
        )
    try:
        Replica.undo_stamps(w.cur, w.touched, mark.stamp)
    except duckdb.Error:
        raise FeatureNotSupported(
            "ROLLBACK TO SAVEPOINT after this failed statement is not supported",
            hint="ROLLBACK the transaction and run it again.",
        ) from None
    for oid in list(w.changes):
        del w.changes[oid][mark.changes.get(oid, 0) :]
        if not w.changes[oid]:
            del w.changes[oid]


async def in_write(s: Session, blocking: Callable[..., Result], *args: Any) -> Result:
    """Run `blocking(txn, *args)` in a writing transaction; autocommit ends it here."""
    w = await begin_write(s)
    try:
        result = await asyncio.to_thread(blocking, w, *args)
    except BaseException:
        if not w.explicit:
            await rollback_write(s)
        raise
    if not w.explicit:
        result.notices = [*(result.notices or []), *await commit_write(s)]
    return result


async def begin_write(s: Session) -> WriteTxn:
    if s.write is not None:
        return s.write
    instance = s.instance
    committer = instance.committer
    assert committer is not None
    # no other session's point write holds a row this transaction could change
    await instance.key_locks.drain(id(s), s.waits)
    timeout = s.waits.lock_timeout()
    try:
        await s.waits.interruptible(asyncio.wait_for(committer.write_lock.acquire(), timeout))
    except BaseException as e:
        instance.key_locks.end_general()
        if isinstance(e, TimeoutError):
            raise s.waits.lock_timed_out(write_lock_timed_out(timeout)) from None
        raise
    explicit = s.status == "T"
    epoch = None if explicit else committer.begin_stamp()
    try:
        await instance.batcher.flush_now()  # fast-path rows first
        cur = await asyncio.to_thread(_new_write_cursor, s)
    except BaseException:
        if epoch is not None:
            committer.end_stamp(epoch, None)
        committer.write_lock.release()
        instance.key_locks.end_general()
        raise
    s.write = WriteTxn(
        cur=cur,
        explicit=explicit,
        stamp=PENDING if explicit else epoch or 0,
        epoch=epoch,
        catalog=instance.catalog.copy(),
    )
    s.write.catalog.creator = s.role_oid  # owner of what this transaction creates
    begun = WriteMark(PENDING, {}, s.write.ddl())
    for sp in s.savepoints:  # taken before it began: ROLLBACK TO takes back all of it
        sp.written = begun
    return s.write


def _new_write_cursor(s: Session) -> duckdb.DuckDBPyConnection:
    cur = s.in_session_zone(s.instance.replica.cursor(), fresh=True)
    cur.execute("BEGIN TRANSACTION")
    return cur


async def commit_write(s: Session) -> list[str]:
    """Commit the writing transaction, or the block's staged INSERTs; returns NOTICEs
    (materialized view backfills)."""
    w = s.write
    if w is None:
        await _commit_staged(s)
        return []
    instance = s.instance
    committer = instance.committer
    assert committer is not None
    epoch = w.epoch if w.epoch is not None else committer.begin_stamp()
    reshaping = bool(w.rewritten)
    instance.reshaping += reshaping  # until the catalog below is current
    try:
        if s.temp_on_commit:  # ON COMMIT DELETE ROWS / DROP of temporary tables
            await asyncio.to_thread(temp_tables.at_commit, s, w, ddl.drop_relation)
        changes, rewrites = await asyncio.to_thread(_finish_duckdb, w, epoch)
        for oid in rewrites:  # what the older log of these tables held is superseded
            w.dropped_logs.extend(await asyncio.to_thread(instance.changelog.log_keys, oid))
            # history vacuumed before the rewrite is not in it: AS OF stays refused there
            rewrites[oid] = rewrites[oid].replace_schema_metadata(
                {RETAINED_FROM: str(instance.retained_from)}
            )
        instance.rebuilding.update(w.rebuilt_matviews)  # reads of them wait (queries.py)
        for oid in reversed(w.rebuilt_matviews):  # before the epoch is spooled
            await instance.matviews.dropped(oid)
    except BaseException:
        instance.reshaping -= reshaping
        instance.rebuilding.difference_update(w.rebuilt_matviews)
        committer.end_stamp(epoch, None)
        await _release(s, w)
        raise
    has_catalog = bool(w.catalog.changes)
    # temporary tables' rows and catalog entries are not made durable
    durable, objects = temp_tables.durable(instance.catalog, w.catalog, changes, w.catalog.changes)
    durable_rewrites, _ = temp_tables.durable(instance.catalog, w.catalog, rewrites, {})
    fut = (
        committer.end_stamp(epoch, durable, objects or None, w.dropped_logs, durable_rewrites)
        if (changes or has_catalog or rewrites)
        else committer.end_stamp(epoch, None)
    )
    if has_catalog:
        dropped = {oid for oid, obj in w.catalog.changes.items() if obj is None}
        instance.catalog = w.catalog
        w.catalog.changes = {}
        instance.batcher.forget(dropped | set(rewrites))
    instance.reshaping -= reshaping
    if changes:
        try:
            instance.batcher.observe(changes, epoch)
        except Exception:  # the fast paths' caches only: read again when next needed
            log.exception("keeping the batcher's key sets in step failed; they are re-read")
            instance.batcher.forget()
    s.write = None
    committer.write_lock.release()
    _end_locks(s)
    await asyncio.to_thread(w.cur.close)
    if fut is None:
        return []
    try:
        await fut
    except BaseException:
        instance.rebuilding.difference_update(w.rebuilt_matviews)
        raise
    s.last_write_epoch = epoch
    return await _after_commit(s, w, epoch)


async def _commit_staged(s: Session) -> None:
    """The block's staged writes to the batcher as one unit: all or none (a key taken
    meanwhile fails the COMMIT: 23505); its row locks go once the unit is staged."""
    staged, s.staged = s.staged, StagedWrites()
    rows = [r for r in staged.rows.values() if r.new != r.read]
    locks, owner = s.instance.key_locks, id(s)
    if not staged.parts and not rows:
        locks.release(owner)
        return
    try:
        s.last_write_epoch = await s.instance.batcher.insert(
            staged.parts, rows, staged=lambda: locks.release(owner)
        )
    finally:
        locks.release(owner)


def _end_locks(s: Session) -> None:
    """A general writing transaction ended: its row locks and its turn go."""
    s.instance.key_locks.release(id(s))
    s.instance.key_locks.end_general()


async def _after_commit(s: Session, w: WriteTxn, epoch: int) -> list[str]:
    """The engine follows the catalog: drop views, backfill new ones at `epoch`. A
    backfill that fails (say, division by zero over existing rows) drops the view
    again, so that CREATE fails as a whole, as in PostgreSQL."""
    mv = s.instance.matviews
    for oid in w.dropped_matviews:
        await mv.dropped(oid)
    notices: list[str] = []
    try:
        for oid in w.rebuilt_matviews:  # a table under it was ALTERed: no NOTICE, as PostgreSQL
            view = s.instance.catalog.by_oid(oid)
            if isinstance(view, MaterializedView) and oid not in w.created_matviews:
                try:
                    await mv.created(view, epoch)
                except Exception:  # the ALTER is durable; a restart backfills it again
                    log.exception("rebuilding materialized view %s after ALTER", view.name)
            s.instance.rebuilding.discard(oid)
    finally:
        s.instance.rebuilding.difference_update(w.rebuilt_matviews)
    for oid in w.created_matviews:
        view = s.instance.catalog.by_oid(oid)
        assert isinstance(view, MaterializedView)
        try:
            notices += await mv.created(view, epoch)
        except BaseException:
            await _drop_failed(s, view)
            raise
    return notices


async def _drop_failed(s: Session, view: MaterializedView) -> None:
    w = await begin_write(s)
    try:
        current = w.catalog.by_oid(view.oid)
        if current is not None:
            ddl.drop_relation(s, w, current, cascade=True)
    except BaseException:
        await rollback_write(s)
        raise
    await commit_write(s)


def _finish_duckdb(w: WriteTxn, epoch: int) -> tuple[dict[int, pa.Table], dict[int, pa.Table]]:
    """Commit in DuckDB; returns the change rows per table, and the whole history of
    each table ALTER rewrote (its changes are in it)."""
    rewritten = {o for o in w.rewritten if isinstance(w.catalog.by_oid(o), Table)}
    try:
        if w.explicit:
            Replica.restamp(w.cur, w.touched, epoch)
        rewrites = {oid: Replica.history(w.cur, w.catalog.by_oid(oid)) for oid in rewritten}
        w.cur.execute("COMMIT")
    except duckdb.Error as e:
        raise translate(e) from None
    changes = {
        oid: consolidate(w.cur, parts) for oid, parts in w.changes.items() if oid not in rewritten
    }
    return changes, rewrites


async def rollback_write(s: Session) -> None:
    s.staged = StagedWrites()
    w = s.write
    if w is None:
        s.instance.key_locks.release(id(s))
        return
    committer = s.instance.committer
    assert committer is not None
    if w.epoch is not None:
        committer.end_stamp(w.epoch, None)
    await _release(s, w)


async def _release(s: Session, w: WriteTxn) -> None:
    s.write = None
    committer = s.instance.committer
    assert committer is not None

    def _close() -> None:
        try:
            w.cur.execute("ROLLBACK")
        except duckdb.Error:
            pass
        w.cur.close()

    await asyncio.to_thread(_close)
    if committer.write_lock.locked():
        committer.write_lock.release()
    _end_locks(s)


def consolidate(cur: duckdb.DuckDBPyConnection, parts: list[pa.Table]) -> pa.Table:
    """Sum the weights of equal change rows and drop those that cancel out. In Arrow: a
    transaction's few rows (an UPDATE's old and new versions) took a DuckDB statement
    ~1-2 ms a table; types Arrow cannot group go to DuckDB. One statement's two parts
    are compared row by row (consolidate_pair)."""
    if len(parts) == 1:
        return parts[0]
    parts = [log_form(p) for p in parts]
    if len(parts) == 2 and (pair := consolidate_pair(*parts)) is not None:
        return pair
    t = pa.concat_tables(parts, promote_options="permissive")
    try:
        return consolidate_rows(t)
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return _consolidate_in_duckdb(cur, t)


def _consolidate_in_duckdb(cur: duckdb.DuckDBPyConnection, t: pa.Table) -> pa.Table:
    cur.register("_hw_parts", t)
    try:
        names = [c for c in t.column_names if c != WEIGHT]
        cols = ", ".join(quote(c) for c in names)
        # DuckDB groups 0.0 with -0.0; their texts tell them apart (as Arrow's grouping)
        texts = "".join(
            f", CAST({quote(c)} AS VARCHAR)"
            for c in names
            if pa.types.is_floating(t.schema.field(c).type)
        )
        return cur.execute(
            f"SELECT {cols}, CAST(sum({WEIGHT}) AS BIGINT) AS {WEIGHT} FROM _hw_parts "
            f"GROUP BY {cols}{texts} HAVING sum({WEIGHT}) <> 0 ORDER BY {RID}"
        ).to_arrow_table()
    finally:
        cur.unregister("_hw_parts")


# LOCK TABLE's modes (lockdefs.h) from SHARE up conflict with ROW EXCLUSIVE, every
# writer's: the session takes the writing transaction, whose lock excludes the others'
# writes until it ends (readers still see the last committed state)
_EXCLUDES_WRITERS = 5


async def lock_table(s: Session, stmt: A.LockStmt) -> Result:
    """LOCK [TABLE] t [, ...] [IN mode MODE] [NOWAIT]: in a transaction block only (25P01
    as in PostgreSQL); the tables must exist."""
    if s.status == "I":
        raise SQLError("LOCK TABLE can only be used in transaction blocks", "25P01")
    for rv in stmt.relations:
        if s.catalog.resolve(rv.schemaname, rv.relname, s.search_path()) is None:
            raise SQLError(f'relation "{rv.relname}" does not exist', "42P01")
    if stmt.mode >= _EXCLUDES_WRITERS and s.write is None:
        if stmt.nowait and s.instance.committer.write_lock.locked():
            name = stmt.relations[0].relname
            raise SQLError(f'could not obtain lock on relation "{name}"', "55P03")
        await begin_write(s)
    return Result("LOCK TABLE")
