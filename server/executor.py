"""Statement execution: dispatch, transactions, and the read and write paths.

Reads run in DuckDB at the newest durable epoch (or, inside a writing transaction,
on its current state). Writes compute their change rows in DuckDB (planner/dml.py),
are checked against the table's constraints, applied to the replica under the
transaction's stamp, and collected as the epoch's change log. Blocking DuckDB work
runs in worker threads; the event loop only coordinates.
"""

from __future__ import annotations

import asyncio
import secrets
import warnings
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pglast.ast as A
import pyarrow as pa
import pyarrow.compute as pc
from headwater.catalog.constraints import not_null_violation, unique_violation
from headwater.catalog.objects import (
    Column,
    Index,
    Key,
    MaterializedView,
    Relation,
    Table,
    View,
    replace,
)
from headwater.catalog.system import system_relations
from headwater.catalog.types import BPCHAR, NUMERIC, TEXT, VARCHAR, ColumnType, from_duckdb
from headwater.planner import ddl, dml, pg_compat
from headwater.planner.extensions import (
    AsOf,
    CopySubscribe,
    DeclareSelectAsOf,
    DeclareSubscribe,
    FetchTimeout,
    SelectAsOf,
    Subscribe,
    replace_calls,
    restore,
)
from headwater.planner.naming import name_targets
from headwater.planner.output_types import output_sources
from headwater.planner.relations import Binder, BoundRead, ReadPlans, deparse
from headwater.server import auth, hw_catalog, reads
from headwater.server.batcher import fast_rows
from headwater.server.session import Session, WriteTxn
from headwater.server.settings import seconds
from headwater.server.subscribe import Subscription
from headwater.server.values import Interval, SessionFormat
from headwater.storage.changelog import RID, WEIGHT
from headwater.storage.duckdb_errors import translate
from headwater.storage.replica import CURRENT, PENDING, Replica, quote, visible_at
from pglast import parse_sql
from pglast.enums import (
    FetchDirection,
    ObjectType,
    OnConflictAction,
    TransactionStmtKind,
    VariableSetKind,
)
from pglast.parser import scan

from headwater.errors import (
    DependentObjects,
    FeatureNotSupported,
    InFailedTransaction,
    LockNotAvailable,
    SQLError,
    StringTooLong,
    UndefinedTable,
    UniqueViolation,
    WrongObjectType,
)

UNCONSTRAINED_NUMERIC = "DECIMAL(38,16)"
_SAVEPOINT_KINDS = (
    TransactionStmtKind.TRANS_STMT_SAVEPOINT,
    TransactionStmtKind.TRANS_STMT_RELEASE,
    TransactionStmtKind.TRANS_STMT_ROLLBACK_TO,
)
# DuckDB warns that DB-API results copy once more into Arrow; results are small
# next to that cost, and the DB-API form is the one that takes parameters.
warnings.filterwarnings("ignore", message="Arrow output on a DB-API result")


@dataclass
class Field:
    name: str
    type: ColumnType
    table_oid: int = 0
    attnum: int = 0


@dataclass
class Result:
    tag: str
    fields: list[Field] | None = None
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    notices: list[str | SQLError] = field(default_factory=list)  # SQLError: code, DETAIL


@dataclass
class RowsCursor:
    """DECLARE ... CURSOR FOR SELECT: the result, handed out by FETCH."""

    fields: list[Field]
    rows: list[tuple[Any, ...]]
    pos: int = 0

    def take(self, n: int | None) -> list[tuple[Any, ...]]:
        end = len(self.rows) if n is None else min(self.pos + n, len(self.rows))
        out = self.rows[self.pos : end]
        self.pos = end
        return out

    def close(self) -> None:
        self.rows = []


def arrow_fields(schema: pa.Schema, duck_types: list[str] | None = None) -> list[Field]:
    out = []
    for i, f in enumerate(schema):
        dtype = duck_types[i] if duck_types else _arrow_to_duck(f.type)
        ct = from_duckdb(dtype)
        if ct.pg is NUMERIC and dtype.replace(" ", "") == UNCONSTRAINED_NUMERIC:
            ct = ColumnType(NUMERIC)
        out.append(Field(f.name, ct))
    return out


def _arrow_to_duck(t: pa.DataType) -> str:
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision},{t.scale})"
    mapping = [
        (pa.types.is_boolean, "BOOLEAN"),
        (pa.types.is_int8, "TINYINT"),
        (pa.types.is_int16, "SMALLINT"),
        (pa.types.is_int32, "INTEGER"),
        (pa.types.is_int64, "BIGINT"),
        (pa.types.is_float32, "FLOAT"),
        (pa.types.is_float64, "DOUBLE"),
        (pa.types.is_date32, "DATE"),
        (pa.types.is_time, "TIME"),
        (pa.types.is_binary, "BLOB"),
        (pa.types.is_large_binary, "BLOB"),
    ]
    if pa.types.is_timestamp(t):
        return "TIMESTAMP WITH TIME ZONE" if t.tz else "TIMESTAMP"
    if t == pa.month_day_nano_interval():
        return "INTERVAL"
    for pred, name in mapping:
        if pred(t):
            return name
    return "VARCHAR"


def _pylist(col: pa.ChunkedArray) -> list[Any]:
    try:
        return col.to_pylist()
    except (OverflowError, ValueError):
        # BC or infinite dates/timestamps: hand the codecs the raw Arrow integers
        t = col.type
        raw = pa.int32() if pa.types.is_date32(t) else pa.int64()
        return pa.chunked_array([c.view(raw) for c in col.chunks], raw).to_pylist()


def rows_of(table: pa.Table) -> list[tuple[Any, ...]]:
    if table.num_columns == 0:
        return [()] * table.num_rows
    return list(zip(*(_pylist(c) for c in table.columns), strict=True))


def _fetch(
    cur: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | dict[str, Any] | None = None
) -> tuple[pa.Table, list[str]]:
    try:
        rel = cur.execute(sql, duckdb_params(sql, params))
        types = [str(d[1]) for d in rel.description] if rel.description else []
        return rel.to_arrow_table(), types
    except duckdb.Error as e:
        raise translate(e) from None


def duckdb_params(sql: str, params: Any) -> Any:
    """DuckDB takes exactly the parameters a statement names: a part of a statement
    (its RETURNING, its VALUES) gets only those it uses, by number."""
    if not params or isinstance(params, dict):
        return params or None
    try:
        used = {int(sql[t.start + 1 : t.end + 1]) for t in scan(sql) if t.name == "PARAM"}
    except Exception:  # not PostgreSQL-lexable: let DuckDB judge
        return params
    if used == set(range(1, len(params) + 1)):
        return params
    return {str(n): params[n - 1] for n in used if n <= len(params)} or None


def _run(cur: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> None:
    try:
        cur.execute(sql, duckdb_params(sql, params))
    except duckdb.Error as e:
        raise translate(e) from None


class Executor:
    def __init__(self, session: Session) -> None:
        self.s = session
        self.instance = session.instance
        self.savepoints: list[tuple[str, bool]] = []  # (name, had written)
        self._interrupted = asyncio.Event()  # a CancelRequest for the waiting statement
        self._waits = 0
        self.plans = ReadPlans()  # SELECTs bound once for statements the client reuses

    def interrupt(self) -> None:
        """CancelRequest (or statement_timeout): a statement waiting for lagging views,
        a future epoch or SUBSCRIBE rows ends with 57014 (when idle: nothing)."""
        if self._waits:
            self._interrupted.set()

    async def _interruptible(self, aw: Any) -> Any:
        """Await `aw` unless a CancelRequest comes first (then 57014)."""
        if not self._waits:
            self._interrupted.clear()
        self._waits += 1
        work = asyncio.ensure_future(aw)
        stop = asyncio.ensure_future(self._interrupted.wait())
        try:
            await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._waits -= 1
            stop.cancel()
            if not work.done():
                work.cancel()
        if not work.done() or work.cancelled():
            raise SQLError("canceling statement due to user request", "57014")
        return work.result()

    # -- entry ----------------------------------------------------------------------
    async def execute(self, stmt: Any, params: list[Any]) -> Result:
        s = self.s
        if isinstance(stmt, A.TransactionStmt):
            return await self.transaction(stmt)
        if s.status == "E":
            raise InFailedTransaction(
                "current transaction is aborted, commands ignored until end of transaction block"
            )
        params = [duckdb_param(p) for p in params] if params else params
        try:
            auth.check(s, stmt)  # privileges (42501); a dict lookup for superusers
            return await self._dispatch(stmt, params)
        except BaseException:
            await self.fail()
            raise

    async def fail(self) -> None:
        """An error: end an autocommit write, or mark the block failed."""
        s = self.s
        if s.status == "T":
            s.status = "E"
        elif s.write is not None and not s.write.explicit:
            await self._rollback_write()

    async def _dispatch(self, stmt: Any, params: list[Any]) -> Result:
        if isinstance(stmt, SelectAsOf):
            auth.check(self.s, stmt.stmt)  # the privileges of the SELECT it wraps
            return await self.select(stmt.stmt, params, as_of=stmt.as_of)
        if isinstance(stmt, DeclareSubscribe | DeclareSelectAsOf | A.DeclareCursorStmt):
            return await self.declare(stmt, params)
        if isinstance(stmt, A.FetchStmt | FetchTimeout):
            return await self.fetch(stmt)
        if isinstance(stmt, A.ClosePortalStmt):
            return self.close_cursor(stmt.portalname)
        if isinstance(stmt, Subscribe | CopySubscribe):
            raise FeatureNotSupported(
                "SUBSCRIBE is delivered through COPY (SUBSCRIBE ...) TO STDOUT or "
                "DECLARE c CURSOR FOR SUBSCRIBE ...; FETCH",
                hint="psql streams it with COPY; drivers use a cursor in a transaction.",
            )
        if isinstance(stmt, A.SelectStmt):
            if stmt.intoClause:
                raise FeatureNotSupported(
                    "SELECT INTO is not supported; use CREATE TABLE and INSERT"
                )
            signal = auth.signal_call(stmt, params)
            if signal is not None:
                return auth.signal_backend(self, *signal)
            return await self.select(stmt, params)
        if isinstance(stmt, A.InsertStmt | A.UpdateStmt | A.DeleteStmt):
            return await self.write(stmt, params)
        if isinstance(
            stmt,
            A.CreateStmt
            | A.ViewStmt
            | A.CreateSchemaStmt
            | A.DropStmt
            | A.TruncateStmt
            | A.IndexStmt,
        ) or isinstance(stmt, auth.ROLE_STMTS):
            return await self.write(stmt, params)
        if isinstance(stmt, A.VariableSetStmt):
            return self.set_var(stmt)
        if isinstance(stmt, A.VariableShowStmt):
            return self.show_var(stmt)
        if isinstance(stmt, A.CreateTableAsStmt):
            if stmt.objtype == ObjectType.OBJECT_MATVIEW:
                return await self.write(stmt, params)
            raise FeatureNotSupported("CREATE TABLE AS is not supported yet")
        if isinstance(stmt, A.RefreshMatViewStmt):
            return Result(
                "REFRESH MATERIALIZED VIEW",
                notices=[
                    "materialized views are always up to date in Headwater; REFRESH does nothing"
                ],
            )
        if isinstance(stmt, A.DiscardStmt):
            return Result("DISCARD ALL")
        if isinstance(stmt, A.DeallocateStmt):  # psycopg evicting its prepared statements
            prepared = self.s.prepared
            if stmt.isall or stmt.name is None:
                for name in [n for n in prepared if n]:
                    del prepared[name]
                return Result("DEALLOCATE ALL")
            if prepared.pop(stmt.name, None) is None:
                raise SQLError(f'prepared statement "{stmt.name}" does not exist', "26000")
            return Result("DEALLOCATE")
        raise FeatureNotSupported(f"statement {type(stmt).__name__} is not supported")

    # -- cursors: DECLARE / FETCH / CLOSE ------------------------------------------------
    async def declare(self, stmt: Any, params: list[Any]) -> Result:
        s = self.s
        if s.status == "I":
            raise SQLError("DECLARE CURSOR can only be used in transaction blocks", "25P01")
        name = stmt.portalname if isinstance(stmt, A.DeclareCursorStmt) else stmt.name
        if name in s.cursors:
            raise SQLError(f'cursor "{name}" already exists', "42P03")
        if isinstance(stmt, DeclareSubscribe):
            sub = Subscription(self, stmt.subscribe)
            await sub.open()
            s.cursors[name] = sub
        elif isinstance(stmt, DeclareSelectAsOf):
            auth.check(s, stmt.select.stmt)
            result = await self.select(stmt.select.stmt, params, as_of=stmt.select.as_of)
            s.cursors[name] = RowsCursor(result.fields or [], result.rows)
        else:
            if not isinstance(stmt.query, A.SelectStmt):
                raise FeatureNotSupported("DECLARE CURSOR supports SELECT and SUBSCRIBE")
            result = await self.select(stmt.query, params)
            s.cursors[name] = RowsCursor(result.fields or [], result.rows)
        return Result("DECLARE CURSOR")

    def cursor_fields(self, stmt: Any) -> list[Field] | None:
        """What a FETCH returns (Describe before Execute)."""
        cur = self.s.cursors.get(stmt.name if isinstance(stmt, FetchTimeout) else stmt.portalname)
        return cur.fields if cur is not None else None

    async def fetch(self, stmt: Any) -> Result:
        s = self.s
        if isinstance(stmt, FetchTimeout):
            name, count = stmt.name, stmt.count
            timeout: float | None = seconds(stmt.timeout, "timeout")
            move = False
        else:
            if stmt.direction not in (FetchDirection.FETCH_FORWARD,):
                raise FeatureNotSupported("cursors only move forward (FETCH [FORWARD] n | ALL)")
            name, move = stmt.portalname, stmt.ismove
            count = None if stmt.howMany >= 2**62 else int(stmt.howMany)
            timeout = None
        cur = s.cursors.get(name)
        if cur is None:
            raise SQLError(f'cursor "{name}" does not exist', "34000")
        if isinstance(cur, RowsCursor):
            rows = cur.take(count)
        else:
            rows = await self._interruptible(cur.take(count, timeout))
        tag = f"{'MOVE' if move else 'FETCH'} {len(rows)}"
        return Result(tag) if move else Result(tag, cur.fields, rows)

    def close_cursor(self, name: str | None) -> Result:
        cursors = self.s.cursors
        if name is None:  # CLOSE ALL
            for c in cursors.values():
                c.close()
            cursors.clear()
        else:
            cur = cursors.pop(name, None)
            if cur is None:
                raise SQLError(f'cursor "{name}" does not exist', "34000")
            cur.close()
        return Result("CLOSE CURSOR")

    def format(self) -> SessionFormat:
        v = self.s.settings.values
        return SessionFormat(
            timezone=v["TimeZone"], extra_float_digits=int(v["extra_float_digits"])
        )

    # -- transactions ---------------------------------------------------------------
    async def transaction(self, stmt: A.TransactionStmt) -> Result:
        s = self.s
        kind = stmt.kind
        if kind in (TransactionStmtKind.TRANS_STMT_BEGIN, TransactionStmtKind.TRANS_STMT_START):
            if s.status != "I":
                return Result("BEGIN", notices=["there is already a transaction in progress"])
            s.status = "T"
            return Result("BEGIN")
        if kind in (TransactionStmtKind.TRANS_STMT_COMMIT, TransactionStmtKind.TRANS_STMT_ROLLBACK):
            self.savepoints = []
            if s.cursors:  # cursors live until the end of their transaction
                self.close_cursor(None)
        if kind == TransactionStmtKind.TRANS_STMT_COMMIT:
            if s.status == "I":
                return Result("COMMIT", notices=["there is no transaction in progress"])
            if s.status == "E":
                await self._rollback_write()
                s.status = "I"
                return Result("ROLLBACK")
            try:
                notices = await self._commit_write()
            finally:
                s.status = "I"
            return Result("COMMIT", notices=notices)
        if kind == TransactionStmtKind.TRANS_STMT_ROLLBACK:
            if s.status == "I":
                return Result("ROLLBACK", notices=["there is no transaction in progress"])
            await self._rollback_write()
            s.status = "I"
            return Result("ROLLBACK")
        if kind in _SAVEPOINT_KINDS:
            return self._savepoint(stmt)
        if s.status == "E":
            raise InFailedTransaction(
                "current transaction is aborted, commands ignored until end of transaction block"
            )
        raise FeatureNotSupported("two-phase commit is not supported")

    def _savepoint(self, stmt: A.TransactionStmt) -> Result:
        """SAVEPOINT, RELEASE and ROLLBACK TO. Rolling back to a savepoint undoes reads
        only: a transaction that wrote since then cannot go back (0A000)."""
        s = self.s
        if s.status == "I":
            self.savepoints = []
            word = stmt.kind.name.removeprefix("TRANS_STMT_").replace("_", " ")
            raise SQLError(f"{word} can only be used in transaction blocks", "25P01")
        name = stmt.savepoint_name
        if stmt.kind == TransactionStmtKind.TRANS_STMT_SAVEPOINT:
            if s.status == "E":
                raise InFailedTransaction(
                    "current transaction is aborted, commands ignored until end of transaction "
                    "block"
                )
            self.savepoints.append((name, s.write is not None))
            return Result("SAVEPOINT")
        names = [n for n, _ in self.savepoints]
        if name not in names:
            raise SQLError(f'savepoint "{name}" does not exist', "3B001")
        pos = len(names) - 1 - names[::-1].index(name)
        if stmt.kind == TransactionStmtKind.TRANS_STMT_RELEASE:
            if s.status == "E":
                raise InFailedTransaction(
                    "current transaction is aborted, commands ignored until end of transaction "
                    "block"
                )
            del self.savepoints[pos:]
            return Result("RELEASE")
        if s.write is not None:
            raise FeatureNotSupported(
                "ROLLBACK TO SAVEPOINT after a write in the transaction is not supported"
            )
        del self.savepoints[pos + 1 :]
        s.status = "T"
        return Result("ROLLBACK")

    async def _begin_write(self) -> WriteTxn:
        s = self.s
        if s.write is not None:
            return s.write
        committer = self.instance.committer
        assert committer is not None
        try:
            await asyncio.wait_for(
                committer.write_lock.acquire(), self.instance.config.write_lock_timeout
            )
        except TimeoutError:
            raise LockNotAvailable(
                "could not obtain the write lock: another transaction has been writing for "
                f"{self.instance.config.write_lock_timeout:.0f}s",
                hint="Headwater runs one writing transaction at a time; end open transactions "
                "with COMMIT or ROLLBACK.",
            ) from None
        explicit = s.status == "T"
        epoch = None if explicit else committer.begin_stamp()
        try:
            await self.instance.batcher.flush_now()  # fast-path rows first
            cur = await asyncio.to_thread(self._new_write_cursor)
        except BaseException:
            if epoch is not None:
                committer.end_stamp(epoch, None)
            committer.write_lock.release()
            raise
        s.write = WriteTxn(
            cur=cur,
            explicit=explicit,
            stamp=PENDING if explicit else epoch or 0,
            epoch=epoch,
            catalog=self.instance.catalog.copy(),
        )
        s.write.catalog.creator = s.role_oid  # owner of what this transaction creates
        return s.write

    def _new_write_cursor(self) -> duckdb.DuckDBPyConnection:
        cur = self.s.in_session_zone(self.instance.replica.cursor(), fresh=True)
        cur.execute("BEGIN TRANSACTION")
        return cur

    async def _commit_write(self) -> list[str]:
        """Commit the writing transaction; returns NOTICEs (materialized view backfills)."""
        s = self.s
        w = s.write
        if w is None:
            return []
        committer = self.instance.committer
        assert committer is not None
        epoch = w.epoch if w.epoch is not None else committer.begin_stamp()
        try:
            changes = await asyncio.to_thread(self._finish_duckdb, w, epoch)
        except BaseException:
            committer.end_stamp(epoch, None)
            await self._release(w)
            raise
        has_catalog = bool(w.catalog.changes)
        fut = (
            committer.end_stamp(
                epoch, changes, w.catalog.changes if has_catalog else None, w.dropped_logs
            )
            if (changes or has_catalog)
            else committer.end_stamp(epoch, None)
        )
        if has_catalog:
            dropped = {oid for oid, obj in w.catalog.changes.items() if obj is None}
            self.instance.catalog = w.catalog
            w.catalog.changes = {}
            self.instance.batcher.forget(dropped)
        if changes:
            self.instance.batcher.observe(changes)
        s.write = None
        committer.write_lock.release()
        await asyncio.to_thread(w.cur.close)
        if fut is None:
            return []
        await fut
        s.last_write_epoch = epoch
        return await self._after_commit(w, epoch)

    async def _after_commit(self, w: WriteTxn, epoch: int) -> list[str]:
        """The engine follows the catalog: drop views, backfill new ones at `epoch`. A
        backfill that fails (say, division by zero over existing rows) drops the view
        again, so that CREATE fails as a whole, as in PostgreSQL."""
        mv = self.instance.matviews
        for oid in w.dropped_matviews:
            await mv.dropped(oid)
        notices: list[str] = []
        for oid in w.created_matviews:
            view = self.instance.catalog.by_oid(oid)
            assert isinstance(view, MaterializedView)
            try:
                notices += await mv.created(view, epoch)
            except BaseException:
                await self._drop_failed(view)
                raise
        return notices

    async def _drop_failed(self, view: MaterializedView) -> None:
        w = await self._begin_write()
        try:
            current = w.catalog.by_oid(view.oid)
            if current is not None:
                self._drop_relation(w, current, cascade=True)
        except BaseException:
            await self._rollback_write()
            raise
        await self._commit_write()

    def _finish_duckdb(self, w: WriteTxn, epoch: int) -> dict[int, pa.Table]:
        try:
            if w.stamp == PENDING:
                Replica.restamp(w.cur, w.touched, epoch)
            w.cur.execute("COMMIT")
        except duckdb.Error as e:
            raise translate(e) from None
        return {oid: consolidate(w.cur, parts) for oid, parts in w.changes.items()}

    async def _rollback_write(self) -> None:
        w = self.s.write
        if w is None:
            return
        committer = self.instance.committer
        assert committer is not None
        if w.epoch is not None:
            committer.end_stamp(w.epoch, None)
        await self._release(w)

    async def _release(self, w: WriteTxn) -> None:
        self.s.write = None
        committer = self.instance.committer
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

    # -- reads ----------------------------------------------------------------------
    def _binder(self, history: bool = False) -> Binder:
        """A binder for a read. Tables and materialized views are scanned at the
        statement's epoch, which is chosen after binding (`statement_sql`), once the
        views the statement reads are known: `binder.epoch_mark` stands for it. In a
        writing transaction tables are read as it left them, unless `history` (AS OF)."""
        s = self.s
        mark = f"__hw_epoch_{secrets.token_hex(6)}__"
        reading = CURRENT if s.write is not None and not history else visible_at(mark)
        binder = Binder(
            s.catalog,
            s.search_path(),
            lambda t: Replica.scan(t, reading),
            system=self._system(s.catalog, s.cursor),
            matview=lambda m: self.instance.matviews.read_sql(m, mark),
        )
        binder.epoch_mark = mark
        return binder

    def _system(self, catalog: Any, cursor: Any) -> Any:
        pg = system_relations(self.s, catalog, cursor)
        instance = self.instance

        def system(schema: str | None, name: str) -> str | None:
            if schema == "headwater_catalog":
                table = hw_catalog.relation(instance, name)
                if table is None:
                    raise UndefinedTable(f'relation "headwater_catalog.{name}" does not exist')
                view = f"_hwsys_headwater_catalog_{name}"
                cursor().register(view, table)
                return f'(SELECT * FROM "{view}")'
            return pg(schema, name)

        return system

    async def statement_sql(self, binder: Binder, stmt: Any, as_of: AsOf | None = None) -> str:
        """Bind `stmt` and fix the one epoch it reads every table and view at."""
        sql, _ = self.bind_read(binder, stmt)
        return await self.at_epoch(sql, binder.epoch_mark, binder.matviews, as_of)

    def bind_read(self, binder: Binder, stmt: Any) -> tuple[str, bool]:
        """`stmt` as DuckDB SQL, `binder.epoch_mark` standing for its epoch; and whether
        the SQL holds the session's write fence (then it is good for this statement only)."""
        fence = A.TypeCast(
            arg=A.A_Const(val=A.Integer(ival=self.s.last_write_epoch)),
            typeName=A.TypeName(names=(A.String(sval="int8"),)),
        )
        undo = replace_calls(stmt, "headwater_write_fence", fence)
        fenced = bool(undo)
        try:
            sql = binder.to_sql(stmt)
        finally:
            restore(undo)
        return sql, fenced

    async def at_epoch(
        self, sql: str, mark: str, views: set[int] | frozenset[int], as_of: AsOf | None = None
    ) -> str:
        """The bound SQL at the one epoch the statement reads every table and view at."""
        if as_of is not None:
            epoch = await self.as_of_epoch(as_of, set(views))
        elif not mark or mark not in sql:
            return sql
        else:
            epoch = await self.read_epoch(set(views))
        return sql.replace(mark, str(epoch))

    async def as_of_epoch(self, as_of: AsOf, views: set[int]) -> int:
        """The epoch AS OF names, checked against the retained history; a future epoch
        is waited for (up to headwater.freshness_timeout), as are lagging views."""
        s = self.s
        instance = self.instance
        low, high = instance.retained_range()
        epoch = as_of.epoch if as_of.epoch is not None else self._epoch_at(as_of.timestamp or "")
        hint = (
            f"History is kept for headwater.retention = "
            f"{s.settings.values['headwater.retention']}; "
            "headwater_catalog.epochs lists the retained epochs."
        )
        if epoch < low:
            raise SQLError(
                f"epoch {epoch} is outside the retained range [{low}, {high}]", "22023", hint=hint
            )
        timeout = seconds(s.settings.values["headwater.freshness_timeout"], "timeout")
        committer = instance.committer
        assert committer is not None
        if epoch > instance.visible_epoch and not await self._interruptible(
            committer.wait_visible(epoch, timeout)
        ):
            raise SQLError(
                f"epoch {epoch} has not closed yet (the newest is {committer.durable_epoch})",
                "22023",
            )
        mv = instance.matviews
        for oid in views:
            name = getattr(s.catalog.by_oid(oid), "name", oid)
            created = mv.created_epoch(oid)
            if created is not None and epoch < created:
                raise SQLError(
                    f'materialized view "{name}" has no state before epoch {created}, '
                    "when it was created",
                    "22023",
                )
        await self._wait_views(views, epoch)
        return epoch

    def _epoch_at(self, timestamp: str) -> int:
        """The newest epoch closed at or before `timestamp` (in the session's TimeZone).
        Compared in microseconds, as headwater_catalog.epochs shows closed_at: AS OF
        TIMESTAMP of an epoch's closed_at reads that epoch."""
        from datetime import UTC, datetime

        try:
            row = (
                self.s.cursor()
                .execute("SELECT epoch_us(CAST(? AS TIMESTAMPTZ))", [timestamp])
                .fetchone()
            )
        except duckdb.Error as e:
            raise translate(e) from None
        at = int(row[0]) if row else 0
        origin = datetime.fromtimestamp(0, UTC)
        best = None
        for epoch, (closed_at, _) in self.instance.epoch_history.items():
            shown = datetime.fromtimestamp(closed_at, UTC) - origin
            closed_us = (shown.days * 86400 + shown.seconds) * 1_000_000 + shown.microseconds
            if closed_us <= at and (best is None or epoch > best):
                best = epoch
        if best is None:
            low, high = self.instance.retained_range()
            raise SQLError(
                f"no retained epoch closed at or before {timestamp}",
                "22023",
                hint=f"The retained epochs are [{low}, {high}]; see headwater_catalog.epochs.",
            )
        return best

    async def read_epoch(self, views: set[int]) -> int:
        """The statement's epoch: the newest at which every view it reads is fresh,
        never older than what headwater.freshness asks for (waiting for lagging views
        up to headwater.freshness_timeout). Without views: the newest visible epoch."""
        s = self.s
        mv = self.instance.matviews
        for oid in views:
            status, error = mv.status(oid)
            if status == "error":
                raise _view_failed(getattr(s.catalog.by_oid(oid), "name", oid), error)
        visible = self.instance.visible_epoch
        if s.write is not None:  # the transaction reads tables as it wrote them
            return min((mv.fresh_until(o) for o in views), default=visible)
        if not views:
            return visible
        need = self.required_epoch()
        if need > 0:
            await self._wait_views(views, need)
        return min([self.instance.visible_epoch, *(mv.fresh_until(o) for o in views)])

    async def _wait_views(self, views: set[int], epoch: int) -> None:
        """Wait until every view reflects `epoch`, or fail naming the one that does not."""
        s = self.s
        mv = self.instance.matviews
        timeout = seconds(s.settings.values["headwater.freshness_timeout"], "timeout")
        behind = await self._interruptible(mv.wait_frontiers(views, epoch, timeout))
        if behind is None:
            return
        name = getattr(s.catalog.by_oid(behind), "name", behind)
        status, error = mv.status(behind)
        if status == "error":
            raise _view_failed(name, error)
        raise SQLError(
            f'materialized view "{name}" is at epoch {mv.frontier(behind)}; '
            f"this read needs epoch {epoch}",
            "57014",
            detail=f"Waited {timeout:g}s (headwater.freshness_timeout).",
            hint="SET headwater.freshness = 'none' reads what is fresh now; "
            "headwater_catalog.views shows the view's lag and status.",
        )

    def required_epoch(self) -> int:
        """The oldest epoch a read may see, as headwater.freshness says: 'session' the
        session's own last write (and headwater.read_after), 'latest' everything
        acknowledged before the statement started, 'none' anything."""
        s = self.s
        values = s.settings.values
        mode = values["headwater.freshness"]
        if mode == "none":
            return 0
        need = max(s.last_write_epoch, int(values["headwater.read_after"]))
        if mode == "latest":
            committer = self.instance.committer
            assert committer is not None
            need = max(need, committer.durable_epoch)
        return need

    async def await_own_writes(self) -> None:
        """A statement sees every write acknowledged before it started, by any session.

        Acknowledgement comes at durability; the replica may apply an epoch a few
        milliseconds later, so a read waits for that (and hurries it along).
        """
        committer = self.instance.committer
        assert committer is not None
        if self.s.settings.values["headwater.freshness"] == "none":
            return
        target = max(self.required_epoch(), committer.durable_epoch)
        if self.s.write is None and committer.visible_epoch < target:
            self.instance.batcher.hurry()
            if not await self._interruptible(committer.wait_visible(target, timeout=30)):
                raise SQLError(f"timed out waiting for epoch {target} to become readable", "57014")

    async def select(
        self, stmt: A.SelectStmt, params: list[Any], as_of: AsOf | None = None
    ) -> Result:
        if as_of is None:
            await self.await_own_writes()
        plan = self._bound_read(stmt) if as_of is None else None
        if plan is None:
            binder = self._binder(history=as_of is not None)
            name_targets(stmt)
            pg_compat.rewrite(stmt)
            sql, fenced = self.bind_read(binder, stmt)
            plan = self._plan_read(stmt, binder, sql, cache=as_of is None and not fenced)
        if as_of is None and plan.params is not None:  # DuckDB parses it once
            epoch = await self.read_epoch(set(plan.matviews)) if plan.mark else None
            query, args = plan, reads.args(plan.params, params, epoch)
        else:
            query = await self.at_epoch(plan.sql, plan.mark, plan.matviews, as_of)
            args = reads.args(plan.params, params)
        cur = self.s.cursor()
        names, types, out, took = await reads.run(
            plan.seconds > reads.SLOW, reads.fetch, cur, query, args
        )
        plan.seconds = took
        rows = rows_of(out) if isinstance(out, pa.Table) else out
        shape = (names, types)
        if plan.shape is not None and plan.shape[0] == shape:
            fields = plan.shape[1]  # the same columns as last time (shared, never changed)
        else:
            fields = arrow_fields(pa.schema([(n, pa.null()) for n in names]), types)
            fields = self._with_sources(stmt, fields, plan.sources)
            plan.shape = (shape, fields)
        return Result(f"SELECT {len(rows)}", fields, rows)

    def _bound_read(self, stmt: Any) -> BoundRead | None:
        """The statement's bound SQL from an earlier execution, if it still holds: same
        catalog and search_path, outside a writing transaction, same view programs."""
        s = self.s
        plan = self.plans.get(stmt)
        if (
            plan is None
            or s.write is not None
            or plan.catalog is not s.catalog
            or plan.search_path != s.search_path()
        ):
            return None
        if plan.guards:
            views = self.instance.matviews.engine
            if views is None or any(views.views.get(o) is not p for o, p in plan.guards):
                return None
        return plan

    def _plan_read(self, stmt: Any, binder: Binder, sql: str, *, cache: bool) -> BoundRead:
        s = self.s
        guards: tuple[tuple[int, Any], ...] = ()
        if binder.matviews:
            engine = self.instance.matviews.engine
            guards = tuple((o, engine.views.get(o) if engine else None) for o in binder.matviews)
        plan = BoundRead(
            stmt,
            sql,
            binder.epoch_mark if binder.epoch_mark in sql else "",
            s.catalog,
            s.search_path(),
            frozenset(binder.matviews),
            guards,
            output_sources(stmt, s.catalog, s.search_path()),
            reads.param_numbers(sql),
        )
        if cache and s.write is None and not binder.uses_system and self.plans.kept(stmt):
            self.plans.put(plan)
        return plan

    def _with_sources(self, stmt: Any, fields: list[Field], sources: Any = False) -> list[Field]:
        """Plain column references report the column's declared type, table and attnum."""
        if sources is False:
            sources = output_sources(stmt, self.s.catalog, self.s.search_path())
        if sources is None or len(sources) != len(fields):
            return fields
        for f, src in zip(fields, sources, strict=True):
            if src is not None:
                f.type, f.table_oid, f.attnum = src.column.type, src.table_oid, src.attnum
        return fields

    async def describe_select(self, stmt: A.SelectStmt, nparams: int) -> list[Field]:
        await self.await_own_writes()
        binder = self._binder()
        name_targets(stmt)
        pg_compat.rewrite(stmt)
        sql = binder.to_sql(stmt).replace(binder.epoch_mark, "0")  # no rows: any epoch
        sql = f"SELECT * FROM ({sql}) AS _hw_d LIMIT 0"
        cur = self.s.cursor()
        table, types = await asyncio.to_thread(_fetch, cur, sql, [None] * nparams)
        return self._with_sources(stmt, arrow_fields(table.schema, types))

    async def describe(self, stmt: Any, nparams: int) -> list[Field] | None:
        """Result columns of a statement without running it (Describe of a statement)."""
        if isinstance(stmt, SelectAsOf):
            stmt = stmt.stmt
        if isinstance(stmt, A.SelectStmt):
            return await self.describe_select(stmt, nparams)
        if isinstance(stmt, A.FetchStmt | FetchTimeout):
            return None if getattr(stmt, "ismove", False) else self.cursor_fields(stmt)
        if isinstance(stmt, A.InsertStmt | A.UpdateStmt | A.DeleteStmt) and returning_list(stmt):
            s = self.s
            rel = s.catalog.get_relation(
                stmt.relation.schemaname, stmt.relation.relname, s.search_path()
            )
            if not isinstance(rel, Table):
                return None
            alias = stmt.relation.alias.aliasname if stmt.relation.alias else rel.name
            binder = self._binder()
            sql = dml.returning_sql(returning_list(stmt), Replica.scan(rel, "false"), alias, binder)
            cur = s.cursor()
            table, types = await asyncio.to_thread(_fetch, cur, sql + " LIMIT 0", [None] * nparams)
            return arrow_fields(table.schema, types)
        if isinstance(stmt, A.VariableShowStmt):
            return self.show_var(stmt).fields
        return None

    # -- COPY -----------------------------------------------------------------------------
    async def copy_target(self, stmt: A.CopyStmt) -> list[Column]:
        s = self.s
        if s.status == "E":
            raise InFailedTransaction(
                "current transaction is aborted, commands ignored until end of transaction block"
            )
        table = s.catalog.get_relation(
            stmt.relation.schemaname, stmt.relation.relname, s.search_path()
        )
        if not isinstance(table, Table):
            raise WrongObjectType(f'cannot copy to {table.kind} "{table.name}"')
        auth.check_copy_in(s, stmt.relation)
        return dml.target_columns(
            table, [A.ResTarget(name=a.sval) for a in stmt.attlist] if stmt.attlist else None
        )

    async def copy_in(self, stmt: A.CopyStmt, cols: list[Column], data: pa.Table) -> Result:
        """COPY FROM STDIN: the strings in `data` become rows of the table."""
        try:
            return await self._in_write(self._copy_blocking, stmt, cols, data)
        except BaseException:
            await self.fail()
            raise

    def _copy_blocking(
        self, w: WriteTxn, stmt: A.CopyStmt, cols: list[Column], data: pa.Table
    ) -> Result:
        table = self._target(w, stmt.relation)
        binder = self._write_binder(w)
        given = {c.name for c in cols}
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
            new, _ = _fetch(w.cur, f"SELECT {select} FROM {name}")
        finally:
            w.cur.unregister(name)
        first = self.instance.allocate_rids(new.num_rows)
        new = new.add_column(0, RID, pa.array(range(first, first + new.num_rows), pa.int64()))
        self._apply(w, table, None, new)
        return Result(f"COPY {new.num_rows}")

    async def copy_source(self, stmt: A.CopyStmt, params: list[Any]) -> Result:
        if stmt.query is not None:
            query = stmt.query
            if not isinstance(query, A.SelectStmt):
                raise FeatureNotSupported("COPY (statement) TO supports SELECT only")
        else:
            targets = (
                [
                    A.ResTarget(val=A.ColumnRef(fields=(A.String(sval=a.sval),)))
                    for a in stmt.attlist
                ]
                if stmt.attlist
                else [A.ResTarget(val=A.ColumnRef(fields=(A.A_Star(),)))]
            )
            query = A.SelectStmt(targetList=targets, fromClause=(stmt.relation,), op=0)
        return await self.execute(query, params)

    # -- writes ---------------------------------------------------------------------
    async def write(self, stmt: Any, params: list[Any]) -> Result:
        s = self.s
        if s.status == "I" and s.write is None and isinstance(stmt, A.InsertStmt):
            rel = s.catalog.resolve(
                stmt.relation.schemaname, stmt.relation.relname, s.search_path()
            )
            if isinstance(rel, Table):
                rows = fast_rows(stmt, rel, params, self.format())
                if rows is not None:
                    s.last_write_epoch = await self.instance.batcher.insert(rel, rows)
                    return Result(f"INSERT 0 {len(rows)}")
        return await self._in_write(self._write_blocking, stmt, params)

    async def _in_write(self, blocking: Any, *args: Any) -> Result:
        """Run `blocking(txn, *args)` in a writing transaction; autocommit ends it here."""
        w = await self._begin_write()
        try:
            result = await asyncio.to_thread(blocking, w, *args)
        except BaseException:
            if not w.explicit:
                await self._rollback_write()
            raise
        if not w.explicit:
            result.notices = [*(result.notices or []), *await self._commit_write()]
        return result

    def _write_blocking(self, w: WriteTxn, stmt: Any, params: list[Any]) -> Result:
        if getattr(stmt, "withClause", None) is not None:
            raise FeatureNotSupported("WITH in INSERT, UPDATE or DELETE is not supported")
        if isinstance(stmt, A.InsertStmt | A.UpdateStmt | A.DeleteStmt):
            # PostgreSQL's spellings, as SELECT has them (interval '1' minute,
            # pg_catalog.timezone(...), ...); string constants stay as written
            pg_compat.rewrite(stmt, array_literals=False)
        if isinstance(stmt, A.InsertStmt):
            return self._insert(w, stmt, params)
        if isinstance(stmt, A.UpdateStmt):
            return self._update(w, stmt, params)
        if isinstance(stmt, A.DeleteStmt):
            return self._delete(w, stmt, params)
        if isinstance(stmt, A.TruncateStmt):
            return self._truncate(w, stmt)
        return self._ddl(w, stmt)

    def _write_binder(self, w: WriteTxn) -> Binder:
        """Writes read tables as the transaction left them and views at their frontier."""
        mv = self.instance.matviews
        return Binder(
            w.catalog,
            self.s.search_path(),
            lambda t: Replica.scan(t, CURRENT),
            system=self._system(w.catalog, lambda: w.cur),
            matview=lambda m: mv.read_sql(m, str(mv.fresh_until(m.oid))),
        )

    def _target(self, w: WriteTxn, rv: A.RangeVar) -> Table:
        rel = w.catalog.get_relation(rv.schemaname, rv.relname, self.s.search_path())
        if not isinstance(rel, Table):
            raise WrongObjectType(
                f'cannot change {rel.kind} "{rel.name}"',
                hint="Only tables accept INSERT, UPDATE, DELETE and TRUNCATE.",
            )
        return rel

    def _insert(self, w: WriteTxn, stmt: A.InsertStmt, params: list[Any]) -> Result:
        table = self._target(w, stmt.relation)
        binder = self._write_binder(w)
        plan = dml.insert_rows_sql(stmt, table, binder)
        if plan.source is not None:
            probe, _ = _fetch(w.cur, f"SELECT * FROM ({plan.source}) AS _hw_p LIMIT 0", params)
            if probe.num_columns > plan.width:
                raise SQLError("INSERT has more expressions than target columns", "42601")
            if probe.num_columns < plan.width:
                raise SQLError("INSERT has more target columns than expressions", "42601")
        new, _ = _fetch(w.cur, plan.sql, params)
        alias = stmt.relation.alias.aliasname if stmt.relation.alias else table.name
        old = None
        conflict = stmt.onConflictClause
        if conflict is not None:
            new, old_upd, new_upd = self._on_conflict(w, table, new, conflict, alias, params)
            old = old_upd
        else:
            new_upd = None
        first = self.instance.allocate_rids(new.num_rows)
        new = new.add_column(0, RID, pa.array(range(first, first + new.num_rows), pa.int64()))
        if new_upd is not None and new_upd.num_rows:
            new = pa.concat_tables([new, new_upd.select(new.column_names)])
        self._apply(w, table, old, new)
        n = new.num_rows
        return self._returning(returning_list(stmt), new, alias, f"INSERT 0 {n}", params)

    def _on_conflict(
        self,
        w: WriteTxn,
        table: Table,
        new: pa.Table,
        clause: A.OnConflictClause,
        alias: str,
        params: list[Any],
    ) -> tuple[pa.Table | None, pa.Table | None, pa.Table | None]:
        """Split proposed rows into inserts and (for DO UPDATE) updates of existing rows."""
        key = self._conflict_key(table, clause)
        cols = list(key.columns)
        # Later duplicates of a key within the statement: DO NOTHING keeps the first.
        dup = _duplicate_mask(new, cols)
        if (
            clause.action == OnConflictAction.ONCONFLICT_UPDATE
            and dup is not None
            and pc.any(dup).as_py()
        ):
            raise SQLError(
                "ON CONFLICT DO UPDATE command cannot affect row a second time",
                "21000",
                hint="Ensure that no rows proposed for insertion within the same command "
                "have duplicate constrained values.",
            )
        if dup is not None:
            new = new.filter(pc.invert(dup))
        name = "_hw_proposed"
        w.cur.register(
            name, new.append_column("_hw_pos", pa.array(range(new.num_rows), pa.int64()))
        )
        try:
            on = " AND ".join(f"t.{quote(c)} = p.{quote(c)}" for c in cols)
            existing = Replica.scan_with_rid(table)
            hits, _ = _fetch(
                w.cur, f"SELECT p._hw_pos, t.{RID} FROM {name} p JOIN {existing} t ON {on}"
            )
            hit_pos = hits.column(0)
            mask = pc.is_in(pa.array(range(new.num_rows), pa.int64()), value_set=hit_pos)
            inserts = new.filter(pc.invert(mask))
            if clause.action != OnConflictAction.ONCONFLICT_UPDATE or hits.num_rows == 0:
                return inserts, None, None
            binder = self._write_binder(w)
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
                f" AND ({binder.to_sql(clause.whereClause)})"
                if clause.whereClause is not None
                else ""
            )
            match = " AND ".join(f"{a}.{quote(c)} = excluded.{quote(c)}" for c in cols)
            sql = (
                f"SELECT {a}.{RID}, {old_exprs}, {new_exprs} FROM {dml.target_scan(table, alias)} "
                f"JOIN {name} AS excluded ON {match} WHERE true{where}"
            )
            both, _ = _fetch(w.cur, sql, params)
        finally:
            w.cur.unregister(name)
        n = len(table.columns)
        old = _slice_cols(both, 0, n, table)
        upd = pa.table(
            [both.column(0)] + both.columns[1 + n :], names=[RID] + [c.name for c in table.columns]
        )
        return inserts, old, upd

    def _conflict_key(self, table: Table, clause: A.OnConflictClause) -> Any:
        infer = clause.infer
        if infer is None or not infer.indexElems:
            if clause.action == OnConflictAction.ONCONFLICT_UPDATE:
                raise SQLError(
                    "ON CONFLICT DO UPDATE requires inference specification or constraint name",
                    "42601",
                )
            if infer is not None and infer.conname:
                key = next((k for k in table.keys if k.name == infer.conname), None)
                if key is None:
                    raise SQLError(
                        f'constraint "{infer.conname}" for table "{table.name}" does not exist',
                        "42704",
                    )
                return key
            if not table.keys:
                return _NoKey()
            return table.primary_key or table.keys[0]
        cols = tuple(e.name for e in infer.indexElems)
        for k in table.keys:
            if set(k.columns) == set(cols):
                return k
        raise SQLError(
            "there is no unique or exclusion constraint matching the ON CONFLICT specification",
            "42P10",
        )

    def _update(self, w: WriteTxn, stmt: A.UpdateStmt, params: list[Any]) -> Result:
        table = self._target(w, stmt.relation)
        sel = dml.update_sql(stmt, table, self._write_binder(w))
        both, _ = _fetch(w.cur, sel.sql, params)
        both = _dedupe_rids(both)
        n = len(table.columns)
        old = _slice_cols(both, 0, n, table)
        new = pa.table(
            [both.column(0)] + both.columns[1 + n :], names=[RID] + [c.name for c in table.columns]
        )
        self._apply(w, table, old, new)
        return self._returning(
            returning_list(stmt), new, sel.alias, f"UPDATE {new.num_rows}", params
        )

    def _delete(self, w: WriteTxn, stmt: A.DeleteStmt, params: list[Any]) -> Result:
        table = self._target(w, stmt.relation)
        sel = dml.delete_sql(stmt, table, self._write_binder(w))
        old, _ = _fetch(w.cur, sel.sql, params)
        old = _dedupe_rids(old)
        old = old.rename_columns([RID] + [c.name for c in table.columns])
        self._apply(w, table, old, None)
        return self._returning(
            returning_list(stmt), old, sel.alias, f"DELETE {old.num_rows}", params
        )

    def _truncate(self, w: WriteTxn, stmt: A.TruncateStmt) -> Result:
        for rv in stmt.relations:
            rel = w.catalog.get_relation(rv.schemaname, rv.relname, self.s.search_path())
            if not isinstance(rel, Table):
                raise WrongObjectType(f'"{rv.relname}" is not a table')  # PostgreSQL's words
            table = self._target(w, rv)
            old, _ = _fetch(w.cur, f"SELECT * FROM {Replica.scan_with_rid(table)} AS t")
            self._apply(w, table, old, None)
        return Result("TRUNCATE TABLE")

    def _returning(
        self, returning: Any, rows: pa.Table, alias: str, tag: str, params: list[Any]
    ) -> Result:
        if not returning:
            return Result(tag)
        name = "_hw_affected"
        w = self.s.write
        assert w is not None
        w.cur.register(name, rows.drop_columns([RID]))
        try:
            sql = dml.returning_sql(returning, name, alias, self._write_binder(w))
            out, types = _fetch(w.cur, sql, params)
        finally:
            try:
                w.cur.unregister(name)
            except duckdb.Error:
                pass  # the transaction failed; the error above is the one to report
        return Result(tag, arrow_fields(out.schema, types), rows_of(out))

    # -- applying changes -------------------------------------------------------------
    def _apply(self, w: WriteTxn, table: Table, old: pa.Table | None, new: pa.Table | None) -> None:
        """Retire `old` versions, check and add `new` ones, record the change rows."""
        cur = w.cur
        if old is not None and old.num_rows:
            Replica.retire_versions(cur, table, old.column(RID), w.stamp)
        if new is not None and new.num_rows:
            new = self._check(table, new, cur)
            Replica.insert_versions(cur, table, new, w.stamp)
        w.touched.add(table.oid)
        if old is not None and old.num_rows:
            w.changes[table.oid].append(
                old.append_column(WEIGHT, pa.array([-1] * old.num_rows, pa.int64()))
            )
        if new is not None and new.num_rows:
            w.changes[table.oid].append(
                new.append_column(WEIGHT, pa.array([1] * new.num_rows, pa.int64()))
            )

    def _check(self, table: Table, new: pa.Table, cur: duckdb.DuckDBPyConnection) -> pa.Table:
        for col in table.columns:
            arr = new.column(col.name)
            if col.not_null and arr.null_count:
                row = new.filter(pc.is_null(arr)).slice(0, 1).to_pylist()[0]
                raise not_null_violation(table, col.name, [row[c.name] for c in table.columns])
            n = col.type.length
            if n is not None and col.type.pg in (VARCHAR, BPCHAR):
                lengths = pc.utf8_length(arr)
                if pc.any(pc.greater(lengths, n)).as_py():
                    raise StringTooLong(f"value too long for type {col.type.sql()}")
        for key in table.keys:
            self._check_unique(table, key, new, cur)
        return new

    def _check_unique(
        self, table: Table, key: Any, new: pa.Table, cur: duckdb.DuckDBPyConnection
    ) -> None:
        cols = list(key.columns)
        dup = _duplicate_mask(new, cols)
        if dup is not None and pc.any(dup).as_py():
            row = new.filter(dup).slice(0, 1)
            raise unique_violation(key, [row.to_pylist()[0][c] for c in key.columns])
        name = "_hw_check"
        cur.register(name, new.select(cols))
        try:
            on = " AND ".join(f"t.{quote(c)} = n.{quote(c)}" for c in cols)
            hit, _ = _fetch(
                cur,
                f"SELECT n.* FROM {name} n JOIN {Replica.scan(table, CURRENT)} t ON {on} LIMIT 1",
            )
        finally:
            cur.unregister(name)
        if hit.num_rows:
            raise unique_violation(key, [hit.to_pylist()[0][c] for c in key.columns])

    # -- DDL ------------------------------------------------------------------------------
    def _ddl(self, w: WriteTxn, stmt: Any) -> Result:
        cat = w.catalog
        sp = self.s.search_path()
        if isinstance(stmt, A.CreateStmt):
            schema = cat.creation_schema(stmt.relation.schemaname, sp)
            if cat.resolve(schema, stmt.relation.relname, ()) is not None:
                if stmt.if_not_exists:
                    return Result(
                        "CREATE TABLE",
                        notices=[f'relation "{stmt.relation.relname}" already exists, skipping'],
                    )
            table = ddl.table_from_create(stmt, cat.next_oid, schema)
            cat.add_relation(table)
            cat.allocate_oid()
            try:
                Replica.create_table(w.cur, table)
            except duckdb.Error as e:
                raise translate(e) from None
            w.touched.add(table.oid)
            return Result("CREATE TABLE")
        if isinstance(stmt, A.ViewStmt):
            return self._create_view(w, stmt)
        if isinstance(stmt, A.CreateTableAsStmt):
            return self._create_matview(w, stmt)
        if isinstance(stmt, A.CreateSchemaStmt):
            if stmt.schemaElts:
                raise FeatureNotSupported("CREATE SCHEMA with elements is not supported")
            if stmt.schemaname in cat.schemas and stmt.if_not_exists:
                return Result(
                    "CREATE SCHEMA",
                    notices=[f'schema "{stmt.schemaname}" already exists, skipping'],
                )
            cat.add_schema(stmt.schemaname)
            return Result("CREATE SCHEMA")
        if isinstance(stmt, A.DropStmt):
            return self._drop(w, stmt)
        if isinstance(stmt, A.IndexStmt):
            return self._create_index(w, stmt)
        if isinstance(stmt, auth.ROLE_STMTS):
            return auth.execute(self, w, stmt)
        raise FeatureNotSupported(f"{type(stmt).__name__} is not supported")

    def _create_view(self, w: WriteTxn, stmt: A.ViewStmt) -> Result:
        cat = w.catalog
        rv = stmt.view
        if rv.relpersistence == "t":
            raise FeatureNotSupported("temporary views are not supported")
        schema = cat.creation_schema(rv.schemaname, self.s.search_path())
        existing = cat.resolve(schema, rv.relname, ())
        if existing is not None and not (stmt.replace and isinstance(existing, View)):
            if stmt.replace:
                raise WrongObjectType(f'"{rv.relname}" is not a view')
            raise SQLError(f'relation "{rv.relname}" already exists', "42P07")
        definition, cols, depends = self._view_columns(w, stmt.query, stmt.aliases, "CREATE VIEW")
        if existing is not None:
            view = View(existing.oid, schema, rv.relname, cols, definition)
            cat.replace_relation(view)
        else:
            view = View(cat.allocate_oid(), schema, rv.relname, cols, definition)
            cat.add_relation(view)
        self.instance.view_deps[view.oid] = depends
        return Result("CREATE VIEW")

    def _view_columns(
        self, w: WriteTxn, query: Any, aliases: Any, what: str
    ) -> tuple[str, tuple[Column, ...], set[int]]:
        """A view's definition text, its columns (names and types, as a SELECT of the
        query would describe them) and the relations it names."""
        binder = self._write_binder(w)
        name_targets(query)
        definition = deparse(query)
        pg_compat.rewrite(query)
        probe, types = _fetch(w.cur, f"SELECT * FROM ({binder.to_sql(query)}) AS _hw_v LIMIT 0")
        fields = self._with_sources(query, arrow_fields(probe.schema, types))
        names = [f.name for f in fields]
        if aliases:
            given = [a.sval for a in aliases]
            if len(given) > len(names):
                raise SQLError(f"{what} specifies more column names than columns", "42601")
            names[: len(given)] = given
        if len(set(names)) != len(names):
            dupe = next(n for n in names if names.count(n) > 1)
            raise SQLError(f'column "{dupe}" specified more than once', "42701")
        cols = tuple(Column(n, f.type) for n, f in zip(names, fields, strict=True))
        return definition, cols, set(binder.depends)

    def _create_matview(self, w: WriteTxn, stmt: A.CreateTableAsStmt) -> Result:
        """CREATE MATERIALIZED VIEW: planned now (0A000 outside the engine's scope),
        backfilled once this transaction's epoch is durable (`_commit_write`)."""
        cat = w.catalog
        into = stmt.into
        rv = into.rel
        if into.skipData:
            raise FeatureNotSupported(
                "WITH NO DATA is not supported: materialized views are always populated"
            )
        if into.options or into.accessMethod or into.tableSpaceName:
            raise FeatureNotSupported("storage options on a materialized view are not supported")
        schema = cat.creation_schema(rv.schemaname, self.s.search_path())
        if cat.resolve(schema, rv.relname, ()) is not None:
            if stmt.if_not_exists:
                return Result(
                    "CREATE MATERIALIZED VIEW",
                    notices=[
                        SQLError(
                            f'relation "{rv.relname}" already exists, skipping',
                            "42P07",
                            severity="NOTICE",
                        )
                    ],
                )
            raise SQLError(f'relation "{rv.relname}" already exists', "42P07")
        if not isinstance(stmt.query, A.SelectStmt):
            raise FeatureNotSupported("a materialized view must be defined by a SELECT")
        definition, cols, depends = self._view_columns(
            w, stmt.query, into.colNames, "CREATE MATERIALIZED VIEW"
        )
        mv = self.instance.matviews
        plan = mv.plan(definition, cat, self.s.search_path())  # 0A000 names what is out of scope
        if len(plan.output) != len(cols):
            raise FeatureNotSupported("this materialized view's output columns")
        for c in cols:  # e.g. an array: the view's rows are stored and read as this type
            try:
                c.type.duckdb()
            except KeyError:
                raise FeatureNotSupported(
                    f'type {c.type.sql()} (column "{c.name}") is not supported in '
                    "materialized views"
                ) from None
        if w.explicit:  # fail here, as PostgreSQL does, not at a COMMIT that keeps the rest
            self._evaluate(w, definition)
        view = MaterializedView(cat.allocate_oid(), schema, rv.relname, cols, definition)
        cat.add_relation(view)
        self.instance.view_deps[view.oid] = depends
        mv.open_engine()  # spooling starts before this epoch closes
        w.created_matviews.append(view.oid)
        return Result("CREATE MATERIALIZED VIEW")

    def _evaluate(self, w: WriteTxn, definition: str) -> None:
        """Run a view's query over the transaction's data (every row and column: hashing
        the row keeps DuckDB from skipping any), so that its errors (22012, ...) come now."""
        query = parse_sql(definition)[0].stmt
        name_targets(query)
        pg_compat.rewrite(query)
        sql = self._write_binder(w).to_sql(query)
        _fetch(w.cur, f"SELECT count(*), max(hash(_hw_v)) FROM ({sql}) AS _hw_v")

    def _create_index(self, w: WriteTxn, stmt: A.IndexStmt) -> Result:
        cat = w.catalog
        rv = stmt.relation
        if isinstance(
            cat.resolve(rv.schemaname, rv.relname, self.s.search_path()), MaterializedView
        ):
            raise FeatureNotSupported("CREATE INDEX on a materialized view is not supported")
        table = self._target(w, stmt.relation)
        if stmt.whereClause is not None or any(e.expr is not None for e in stmt.indexParams):
            raise FeatureNotSupported("partial and expression indexes are not supported")
        cols = tuple(e.name for e in stmt.indexParams)
        for c in cols:
            if table.column(c) is None:
                raise SQLError(f'column "{c}" does not exist', "42703")
        name = stmt.idxname or f"{table.name}_{'_'.join(cols)}_idx"
        if cat.resolve(table.schema, name, ()) is not None:
            if stmt.if_not_exists:
                return Result(
                    "CREATE INDEX", notices=[f'relation "{name}" already exists, skipping']
                )
            raise SQLError(f'relation "{name}" already exists', "42P07")
        if stmt.unique:
            qcols = ", ".join(quote(c) for c in cols)
            notnull = " AND ".join(f"{quote(c)} IS NOT NULL" for c in cols)
            dup, _ = _fetch(
                w.cur,
                f"SELECT {qcols} FROM {Replica.scan(table, CURRENT)} AS t WHERE {notnull} "
                f"GROUP BY {qcols} HAVING count(*) > 1 LIMIT 1",
            )
            if dup.num_rows:
                shown = ", ".join(str(v) for v in dup.to_pylist()[0].values())
                raise UniqueViolation(
                    f'could not create unique index "{name}"',
                    detail=f"Key ({', '.join(cols)})=({shown}) is duplicated.",
                )
            table = replace(table, keys=table.keys + (Key(name, cols, False),))
            cat.replace_relation(table)
        cat.add_relation(
            Index(cat.allocate_oid(), table.schema, name, (), table.oid, cols, bool(stmt.unique))
        )
        return Result("CREATE INDEX")

    def _dependents(self, w: WriteTxn, oid: int) -> list[Relation]:
        out: list[Relation] = []
        for view in [*w.catalog.views(), *w.catalog.matviews()]:
            deps = self.instance.view_deps.get(view.oid)
            if deps is None:
                deps = self.instance.view_deps[view.oid] = self._names_in(w, view)
            if oid in deps:
                out.append(view)
        return out

    def _dependency_order(self, w: WriteTxn, rel: Relation) -> list[tuple[Relation, Relation]]:
        """Everything that depends on `rel`, directly or not, each once with the object it
        was reached from, in PostgreSQL's order (findDependentObjects: dependents in
        descending OID order, depth first, each added after its own dependents; reported
        last added first)."""
        seen = {rel.oid}
        post: list[tuple[Relation, Relation]] = []

        def visit(obj: Relation) -> None:
            for d in sorted(self._dependents(w, obj.oid), key=lambda r: r.oid, reverse=True):
                if d.oid not in seen:
                    seen.add(d.oid)
                    visit(d)
                    post.append((d, obj))

        visit(rel)
        return post[::-1]

    def _names_in(self, w: WriteTxn, view: View | MaterializedView) -> set[int]:
        """The relations a view's definition names (after a restart, from its text)."""
        binder = self._write_binder(w)
        try:
            if isinstance(view, View):
                binder.view_sql(view)
            else:
                stmt = parse_sql(view.definition)[0].stmt
                binder.bind(stmt, frozenset())
        except SQLError:
            pass
        return set(binder.depends)

    def _drop(self, w: WriteTxn, stmt: A.DropStmt) -> Result:
        cat = w.catalog
        kinds = {
            ObjectType.OBJECT_TABLE: ("table", Table, "DROP TABLE"),
            ObjectType.OBJECT_VIEW: ("view", View, "DROP VIEW"),
            ObjectType.OBJECT_INDEX: ("index", Index, "DROP INDEX"),
            ObjectType.OBJECT_MATVIEW: (
                "materialized view",
                MaterializedView,
                "DROP MATERIALIZED VIEW",
            ),
        }
        if stmt.removeType == ObjectType.OBJECT_SCHEMA:
            for obj in stmt.objects:
                name = obj.sval
                if name not in cat.schemas:
                    if stmt.missing_ok:
                        continue
                    raise SQLError(f'schema "{name}" does not exist', "3F000")
                inside = [r for r in cat.relations.values() if r.schema == name]
                if inside and not stmt.behavior:
                    raise DependentObjects(
                        f"cannot drop schema {name} because other objects depend on it",
                        detail="\n".join(
                            f"{r.kind} {name}.{r.name} depends on schema {name}" for r in inside
                        ),
                        hint="Use DROP ... CASCADE to drop the dependent objects too.",
                    )
                for r in inside:
                    self._drop_relation(w, r, cascade=True)
                cat.drop_schema(name)
            return Result("DROP SCHEMA")
        if stmt.removeType not in kinds:
            raise FeatureNotSupported(
                f"DROP {stmt.removeType.name.removeprefix('OBJECT_')} is not supported"
            )
        word, cls, tag = kinds[stmt.removeType]
        notices = []
        for obj in stmt.objects:
            names = [n.sval for n in obj]
            schema, name = (names[-2], names[-1]) if len(names) > 1 else (None, names[-1])
            rel = cat.resolve(schema, name, self.s.search_path())
            if rel is None:
                if stmt.missing_ok:
                    notices.append(f'{word} "{name}" does not exist, skipping')
                    continue
                if word == "index":
                    raise UndefinedTable(f'index "{name}" does not exist')
                raise UndefinedTable(f'{word} "{name}" does not exist')
            if not isinstance(rel, cls):
                raise WrongObjectType(
                    f'"{name}" is not a {word}',
                    hint=f"Use DROP {rel.kind.upper()} to remove a {rel.kind}.",
                )
            dropped = self._drop_relation(w, rel, cascade=bool(stmt.behavior))
            notices.extend(_cascade_notices(dropped))
        return Result(tag, notices=notices)

    def _drop_relation(self, w: WriteTxn, rel: Relation, cascade: bool) -> list[Relation]:
        """Drop `rel` (and, with cascade, what depends on it); returns the dependents dropped."""
        cat = w.catalog
        if (rel.schema, rel.name) not in cat.relations:
            return []
        order = self._dependency_order(w, rel)
        if order and not cascade:
            raise DependentObjects(
                f"cannot drop {rel.kind} {rel.name} because other objects depend on it",
                detail="\n".join(
                    f"{d.kind} {d.name} depends on {p.kind} {p.name}" for d, p in order
                ),
                hint="Use DROP ... CASCADE to drop the dependent objects too.",
            )
        for d, _ in reversed(order):  # every dependent before what it depends on
            self._drop_relation(w, d, cascade=True)
        dropped = [d for d, _ in order]
        if isinstance(rel, Table):  # its indexes go with it
            for ix in [
                r for r in cat.relations.values() if isinstance(r, Index) and r.table_oid == rel.oid
            ]:
                cat.drop_relation(ix)
        if isinstance(rel, Index):
            table = cat.by_oid(rel.table_oid)
            if isinstance(table, Table) and any(k.name == rel.name for k in table.keys):
                cat.replace_relation(
                    replace(table, keys=tuple(k for k in table.keys if k.name != rel.name))
                )
        cat.drop_relation(rel)
        self.instance.view_deps.pop(rel.oid, None)
        if isinstance(rel, MaterializedView):
            w.dropped_matviews.append(rel.oid)
        if isinstance(rel, Table):
            Replica.drop_table(w.cur, rel.oid)
            w.changes.pop(rel.oid, None)
            w.touched.discard(rel.oid)
            w.dropped_logs.extend(self.instance.changelog.log_keys(rel.oid))
        return dropped

    # -- settings -------------------------------------------------------------------------
    def set_var(self, stmt: A.VariableSetStmt) -> Result:
        st = self.s.settings
        if stmt.kind == VariableSetKind.VAR_RESET_ALL:
            for k in list(st.values):
                st.reset(k)
            return Result("RESET")
        if stmt.kind == VariableSetKind.VAR_RESET:
            st.reset(stmt.name)
            return Result("RESET")
        if stmt.kind == VariableSetKind.VAR_SET_DEFAULT:
            st.reset(stmt.name)
            return Result("SET")
        if stmt.kind == VariableSetKind.VAR_SET_MULTI:
            return Result("SET")  # SET TRANSACTION ...: one isolation level is offered
        name = stmt.name
        if name in ("transaction_isolation", "default_transaction_isolation"):
            return Result("SET")
        value = ", ".join(_setting_value(a) for a in stmt.args or ())
        if name == "timezone" and stmt.kind == VariableSetKind.VAR_SET_VALUE and not stmt.args:
            value = "UTC"
        st.set(name, value)
        return Result("SET")

    def show_var(self, stmt: A.VariableShowStmt) -> Result:
        st = self.s.settings
        if stmt.name == "all":
            rows = [(k, v, "") for k, v in sorted(st.values.items())]
            text = ColumnType(TEXT)
            return Result(
                "SHOW",
                [Field("name", text), Field("setting", text), Field("description", text)],
                rows,
            )
        from headwater.server.settings import canonical

        key = canonical(stmt.name)
        value = st.get(key)
        return Result(
            "SHOW",
            [Field(stmt.name if stmt.name != "timezone" else "TimeZone", ColumnType(TEXT))],
            [(value,)],
        )


def _view_failed(name: object, error: str | None) -> SQLError:
    """A read of a view stopped by an error: the error's SQLSTATE and PostgreSQL's
    wording where storage/duckdb_errors.py knows them (division by zero: 22012)."""
    cause = translate(Exception(error or "unknown error"))
    return SQLError(
        f'materialized view "{name}" failed: {cause.message}',
        cause.sqlstate,
        hint=f"DROP MATERIALIZED VIEW {name} and create it again once the cause "
        "is fixed; headwater_catalog.views shows its status.",
    )


def _cascade_notices(dropped: list[Relation]) -> list[str | SQLError]:
    if not dropped:
        return []
    if len(dropped) == 1:
        return [f"drop cascades to {dropped[0].kind} {dropped[0].name}"]
    lines = "\n".join(f"drop cascades to {d.kind} {d.name}" for d in dropped)
    return [  # as PostgreSQL: the count in the message, the objects in DETAIL
        SQLError(
            f"drop cascades to {len(dropped)} other objects",
            "00000",
            detail=lines,
            severity="NOTICE",
        )
    ]


def duckdb_param(value: Any) -> Any:
    """A decoded parameter in a form DuckDB binds (intervals keep their months)."""
    if isinstance(value, Interval):
        return f"{value.months} months {value.days} days {value.microseconds} microseconds"
    return value


def returning_list(stmt: Any) -> Any:
    rc = stmt.returningClause
    return rc.exprs if rc is not None else None


class _NoKey:
    columns: tuple[str, ...] = ()


def _setting_value(node: Any) -> str:
    if isinstance(node, A.A_Const):
        v = node.val
        if isinstance(v, A.String):
            return v.sval
        if isinstance(v, A.Integer):
            return str(v.ival)
        if isinstance(v, A.Float):
            return v.fval
        if isinstance(v, A.Boolean):
            return "on" if v.boolval else "off"
    if isinstance(node, A.TypeCast):
        return _setting_value(node.arg)
    return deparse(node)


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
    positions = pa.table({"r": rids, "i": pa.array(range(t.num_rows), pa.int64())})
    first = positions.group_by("r").aggregate([("i", "min")]).column("i_min")
    return t.take(first.take(pc.sort_indices(first)))


def _duplicate_mask(t: pa.Table, cols: list[str]) -> pa.Array | None:
    """True for rows whose key (no NULLs) already appeared earlier in `t`."""
    if not cols or t.num_rows < 2:
        return None
    seen: set[tuple[Any, ...]] = set()
    out = []
    for key in zip(*(t.column(c).to_pylist() for c in cols), strict=True):
        if any(k is None for k in key):
            out.append(False)
        elif key in seen:
            out.append(True)
        else:
            seen.add(key)
            out.append(False)
    return pa.array(out, pa.bool_())


def consolidate(cur: duckdb.DuckDBPyConnection, parts: list[pa.Table]) -> pa.Table:
    """Sum the weights of equal change rows and drop those that cancel out."""
    if len(parts) == 1:
        return parts[0]
    t = pa.concat_tables(parts, promote_options="permissive")
    cur.register("_hw_parts", t)
    try:
        cols = ", ".join(quote(c) for c in t.column_names if c != WEIGHT)
        return cur.execute(
            f"SELECT {cols}, CAST(sum({WEIGHT}) AS BIGINT) AS {WEIGHT} FROM _hw_parts "
            f"GROUP BY ALL HAVING sum({WEIGHT}) <> 0 ORDER BY {RID}"
        ).to_arrow_table()
    finally:
        cur.unregister("_hw_parts")
