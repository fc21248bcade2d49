"""Statement dispatch: a session's statements, each to the module of its kind.

SELECT: server/queries.py (epochs: server/epoch_choice.py; reuse: server/read_plans.py;
FOR UPDATE/SHARE: server/row_locks.py); PREPARE, EXECUTE, DEALLOCATE: server/prepared.py;
VACUUM, ANALYZE: server/maintenance.py; LISTEN, NOTIFY: server/notify.py;
INSERT, UPDATE, DELETE, TRUNCATE, COPY FROM: server/writes.py; CREATE and DROP:
server/ddl.py; roles and GRANT: server/auth/roles.py; BEGIN, COMMIT, ROLLBACK, savepoints
and the writing transaction: server/transactions.py; DECLARE, FETCH, CLOSE:
server/cursors.py; SET, SHOW: server/set_show.py. Blocking DuckDB work runs in worker
threads; the event loop only coordinates.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import Any

import pglast.ast as A
import pyarrow as pa
from headwater.catalog.objects import Column, Relation, Sequence
from headwater.catalog.types import ColumnType
from headwater.planner.extensions import (
    AsOf,
    CopySubscribe,
    CreateSink,
    DeclareSelectAsOf,
    DeclareSubscribe,
    DropSink,
    ExplainMatview,
    ExplainSelectAsOf,
    FetchTimeout,
    SelectAsOf,
    Subscribe,
)
from headwater.planner.functions.literals import DATE_ORDER
from headwater.planner.params import with_param_types
from headwater.planner.relations import ReadPlans
from headwater.server import (
    alter,
    backend_signals,
    comments,
    copy,
    create_as,
    cursors,
    ddl,
    explain,
    maintenance,
    notify,
    owners,
    plpgsql_exec,
    point_reads,
    prepared,
    queries,
    read_only,
    renames,
    routine_calls,
    row_locks,
    scanned_writes,
    sequence_ddl,
    set_show,
    sink_ddl,
    temp_tables,
    transactions,
    type_ddl,
    user_functions,
    writes,
)
from headwater.server.auth import privilege_checks, roles
from headwater.server.duckdb_calls import duckdb_param
from headwater.server.results import Field, Result
from headwater.server.session import Session, WriteTxn
from pglast.enums import DiscardMode, ObjectType, VariableSetKind

from headwater.errors import FeatureNotSupported, InFailedTransaction, SQLError

# CREATE and DROP (server/ddl.py); CREATE MATERIALIZED VIEW is a CreateTableAsStmt
_DDL = A.CreateStmt | A.ViewStmt | A.CreateSchemaStmt | A.DropStmt | A.IndexStmt
_DDL = _DDL | A.CreateSeqStmt | A.AlterSeqStmt  # server/sequence_ddl.py
_DDL = _DDL | A.CreateExtensionStmt  # server/extensions.py
_DDL = _DDL | A.CreateFunctionStmt  # server/user_functions.py
_DDL = _DDL | A.CreateTrigStmt  # server/triggers.py
# statements that leave a block's staged writes staged (writes.fast_insert, fast_point):
# INSERT, UPDATE and DELETE stage theirs too or apply them first (_write); the others
# read no table (psycopg sends DEALLOCATE ALL after ROLLBACK TO SAVEPOINT); so does a
# SELECT without one, and a point read of a table without staged INSERTs
_KEEPS_STAGED = A.InsertStmt | A.UpdateStmt | A.DeleteStmt | A.DeallocateStmt
_KEEPS_STAGED = _KEEPS_STAGED | A.VariableSetStmt | A.VariableShowStmt
_KEEPS_STAGED = _KEEPS_STAGED | A.ListenStmt | A.UnlistenStmt | A.NotifyStmt


def _keeps_staged(stmt: Any) -> bool:
    if isinstance(stmt, _KEEPS_STAGED):
        return True
    return isinstance(stmt, A.SelectStmt) and stmt.intoClause is None and not _reads(stmt)


def _reads(node: Any) -> bool:
    """Whether a SELECT names a relation or a subquery anywhere (`SELECT nextval('s')`,
    an ORM's key fetch, and `SELECT 1` do not)."""
    if isinstance(node, A.RangeVar | A.SubLink | A.RangeSubselect | A.WithClause):
        return True
    if isinstance(node, A.Node):
        return any(_reads(getattr(node, name)) for name in node)
    if isinstance(node, tuple | list):
        return any(_reads(n) for n in node)
    return False


log = logging.getLogger(__name__)
_ENDING: set[asyncio.Task[None]] = set()  # temporary tables being dropped (held)


class Executor:
    def __init__(self, session: Session) -> None:
        self.s = session
        self.instance = session.instance
        self.waits = session.waits
        self.plans = ReadPlans()  # SELECTs bound once for statements the client reuses
        self.last_fast = False  # the last write went through a fast path (not its text's)
        session.on_close.append(self._drop_temp_tables)

    def _drop_temp_tables(self) -> None:
        """The session ended (Session.close): its temporary tables go, in a writing
        transaction of their own once the connection's has been rolled back."""
        if self.s.temp_schema is not None:
            task = asyncio.get_running_loop().create_task(self._end_temp())
            _ENDING.add(task)
            task.add_done_callback(_ENDING.discard)

    async def _end_temp(self) -> None:
        self.s.status = "I"
        try:
            await self._drop_temp("DROP TABLE")
        except Exception:  # the server is stopping: a restart forgets them anyway
            log.exception("could not drop the temporary tables of session %d", self.s.pid)
        else:
            temp_tables.release(self.s)

    async def _drop_temp(self, tag: str) -> Result:
        s = self.s

        def drop_one(s: Session, w: WriteTxn, rel: Relation, cascade: bool) -> None:
            if isinstance(rel, Sequence):
                sequence_ddl.before_drop(s, w, rel, cascade)
            ddl.drop_relation(s, w, rel, cascade)

        def drop(w: WriteTxn) -> Result:
            temp_tables.drop_all(s, w, drop_one)
            return Result(tag)

        return await transactions.in_write(s, drop)

    async def _discard(self, stmt: A.DiscardStmt) -> Result:
        """DISCARD ALL | TEMP drops the session's temporary tables; PLANS and SEQUENCES
        have nothing to forget here."""
        tag = f"DISCARD {stmt.target.name.removeprefix('DISCARD_')}"
        if stmt.target == DiscardMode.DISCARD_ALL and self.s.status != "I":
            raise SQLError("DISCARD ALL cannot run inside a transaction block", "25001")
        if stmt.target in (DiscardMode.DISCARD_ALL, DiscardMode.DISCARD_TEMP):
            if self.s.temp_schema is not None:
                return await self._drop_temp(tag)
        return Result(tag)

    def interrupt(self) -> None:
        """CancelRequest (or statement_timeout): a statement waiting for lagging views,
        a future epoch or SUBSCRIBE rows ends with 57014 (when idle: nothing)."""
        self.waits.interrupt()

    # -- entry ----------------------------------------------------------------------
    async def execute(self, stmt: Any, params: list[Any]) -> Result:
        s = self.s
        DATE_ORDER.set(s.date_order())  # constants like '01/02/2020'::date (planner)
        if isinstance(stmt, A.TransactionStmt):
            try:
                result = await transactions.transaction(s, stmt)
            except BaseException:
                notify.transaction_ended(s, None)
                raise
            notify.transaction_ended(s, result.tag)  # LISTEN/NOTIFY take effect at COMMIT
            return result
        if user_functions.calls_plpgsql(s, stmt):  # SELECT f(1): PL/pgSQL's, run first
            try:
                stmt, params = await routine_calls.evaluated(self, stmt, params)
            except BaseException:
                await self.fail()
                raise
        stmt = user_functions.inlined(s, stmt)  # CREATE FUNCTION ... LANGUAGE sql
        if s.status == "E":
            raise InFailedTransaction(
                "current transaction is aborted, commands ignored until end of transaction block"
            )
        params = [duckdb_param(p) for p in params] if params else params
        try:
            read_only.refuse_writes(s, stmt)  # 25006 in a read-only transaction
            if s.staged and not _keeps_staged(stmt):
                if not point_reads.over_staged(s, stmt, params):
                    await self._unstage()
            if isinstance(stmt, A.SelectStmt) and row_locks.has_locks(stmt):  # FOR UPDATE
                result = await row_locks.select(self, stmt, params)
            else:
                if not isinstance(stmt, A.PrepareStmt):  # PREPARE: checked at EXECUTE, as PG
                    privilege_checks.check(s, stmt)  # 42501; a dict lookup for superusers
                temp_tables.check_access(s, stmt)  # another session's pg_temp_N: 0A000
                result = await self._dispatch(stmt, params)
        except BaseException:
            await self.fail()
            raise
        notify.statement_ended(s)  # outside a block, its LISTEN/NOTIFY take effect now
        return result

    async def fail(self) -> None:
        """An error: end an autocommit write, or mark the block failed."""
        s = self.s
        if s.status == "T":
            s.status = "E"
        else:
            notify.abort(s)  # an autocommit statement's LISTEN/NOTIFY go with it
            if s.write is not None and not s.write.explicit:
                await transactions.rollback_write(s)

    async def run(self, stmt: Any, params: list[Any]) -> Result:
        """A statement inside another one (EXPLAIN ANALYZE of a write), its checks done."""
        return await self._dispatch(stmt, params)

    async def _dispatch(self, stmt: Any, params: list[Any]) -> Result:
        s = self.s
        read_only.refuse_writes(s, stmt)  # also EXPLAIN ANALYZE's and EXECUTE's statement
        if isinstance(stmt, A.InsertStmt | A.UpdateStmt | A.DeleteStmt | A.TruncateStmt):
            return await self._write(stmt, params)  # first: the most frequent by far
        if isinstance(stmt, SelectAsOf):
            privilege_checks.check(s, stmt.stmt)  # the privileges of the SELECT it wraps
            return await self.select(stmt.stmt, params, as_of=stmt.as_of)
        if isinstance(stmt, DeclareSubscribe | DeclareSelectAsOf | A.DeclareCursorStmt):
            return await cursors.declare(self, stmt, params)
        if isinstance(stmt, A.FetchStmt | FetchTimeout):
            return await cursors.fetch(self, stmt)
        if isinstance(stmt, A.ExplainStmt | ExplainMatview | ExplainSelectAsOf):  # explain.py
            return await explain.explain(self, stmt, params)
        if isinstance(stmt, A.ClosePortalStmt):
            return cursors.close(s, stmt.portalname)
        if isinstance(stmt, Subscribe | CopySubscribe):
            raise FeatureNotSupported(
                "SUBSCRIBE is delivered through COPY (SUBSCRIBE ...) TO STDOUT or "
                "DECLARE c CURSOR FOR SUBSCRIBE ...; FETCH",
                hint="psql streams it with COPY; drivers use a cursor in a transaction.",
            )
        if isinstance(stmt, CreateSink | DropSink):  # server/sink_ddl.py
            return await sink_ddl.execute(self, stmt)
        if isinstance(stmt, A.SelectStmt):
            if create_as.into_clause(stmt):  # SELECT INTO: CREATE TABLE AS (create_as.py)
                ctas = create_as.from_select_into(stmt)
                privilege_checks.check(s, ctas)  # CREATE on the schema, as CREATE TABLE AS
                return await transactions.in_write(s, partial(create_as.execute, s), ctas, params)
            stmt = set_show.apply_set_config(s.settings, stmt, params)
            signal = backend_signals.signal_call(stmt, params)
            if signal is not None:
                return backend_signals.signal_backend(self, *signal)
            if notify.calls_functions(stmt):  # pg_notify(), pg_listening_channels()
                return await notify.select(self, stmt, params)
            return await self.select(stmt, params)
        if isinstance(stmt, _DDL):  # (recorded: the SQL functions a view or default holds)
            run = partial(user_functions.recorded, s, partial(ddl.execute, s))
            return await transactions.in_write(s, run, stmt)
        if isinstance(stmt, A.AlterTableStmt):
            run = partial(user_functions.recorded, s, partial(alter.execute, s))
            return await transactions.in_write(s, run, stmt)
        if type_ddl.handles(stmt):
            return await transactions.in_write(s, partial(type_ddl.execute, s), stmt)
        if isinstance(stmt, renames.STATEMENTS):
            return await transactions.in_write(s, partial(renames.execute, s), stmt)
        if isinstance(stmt, A.AlterFunctionStmt) or (
            isinstance(stmt, A.AlterOwnerStmt) and stmt.objectType == ObjectType.OBJECT_FUNCTION
        ):
            return await transactions.in_write(s, partial(user_functions.alter, s), stmt)
        if isinstance(stmt, A.CommentStmt):
            return await transactions.in_write(s, partial(comments.execute, s), stmt)
        if owners.handles(stmt):  # ALTER TYPE | DOMAIN | SCHEMA ... OWNER TO
            return await transactions.in_write(s, partial(owners.execute, s), stmt)
        if isinstance(stmt, roles.ROLE_STMTS):
            return await transactions.in_write(s, partial(roles.execute, self), stmt)
        if isinstance(stmt, A.VariableSetStmt):
            done = read_only.set_mode(s, stmt)  # SET TRANSACTION READ ONLY, ...
            if done is not None:
                return done
            if stmt.name == "role" and stmt.kind == VariableSetKind.VAR_SET_VALUE:
                roles.check_set_role(s, set_show.setting_text(stmt))
            result = set_show.set_var(s.settings, stmt, in_block=s.status != "I")
            read_only.after_set(s)
            s.sync_role()
            return result
        if isinstance(stmt, A.VariableShowStmt):
            return set_show.show_var(s.settings, stmt)
        if isinstance(stmt, A.CreateTableAsStmt):
            if stmt.objtype == ObjectType.OBJECT_MATVIEW:
                run = partial(user_functions.recorded, s, partial(ddl.execute, s))
                return await transactions.in_write(s, run, stmt)
            return await transactions.in_write(s, partial(create_as.execute, s), stmt, params)
        if isinstance(stmt, A.RefreshMatViewStmt):
            return Result(
                "REFRESH MATERIALIZED VIEW",
                notices=[
                    "materialized views are always up to date in Headwater; REFRESH does nothing"
                ],
            )
        if isinstance(stmt, A.DiscardStmt):
            result = await self._discard(stmt)  # 25001 in a block; temporary tables
            if stmt.target == DiscardMode.DISCARD_ALL:  # its DEALLOCATE ALL and UNLISTEN *
                prepared.deallocate(self, A.DeallocateStmt(isall=True))
                notify.unlisten(s, A.UnlistenStmt())
            return result
        if isinstance(stmt, A.ListenStmt):
            return notify.listen(s, stmt)
        if isinstance(stmt, A.UnlistenStmt):
            return notify.unlisten(s, stmt)
        if isinstance(stmt, A.NotifyStmt):
            return notify.notify(s, stmt)
        if isinstance(stmt, A.LockStmt):
            return await transactions.lock_table(s, stmt)
        if isinstance(stmt, A.CallStmt):  # a procedure
            return await routine_calls.call(self, stmt, params)
        if isinstance(stmt, A.DoStmt):  # PL/pgSQL, a statement at a time
            return await plpgsql_exec.run(self, stmt)
        if isinstance(stmt, A.VacuumStmt):
            return await maintenance.vacuum(s, stmt)
        if isinstance(stmt, A.PrepareStmt):
            return await prepared.prepare(self, stmt)
        if isinstance(stmt, A.ExecuteStmt):
            return await prepared.execute(self, stmt, params)
        if isinstance(stmt, A.DeallocateStmt):  # also psycopg evicting its statements
            return prepared.deallocate(self, stmt)
        raise FeatureNotSupported(f"statement {type(stmt).__name__} is not supported")

    async def _write(self, stmt: Any, params: list[Any]) -> Result:
        """INSERT (an autocommitted one of constants through the batcher), UPDATE,
        DELETE, TRUNCATE."""
        s = self.s
        self.last_fast = False
        if not temp_tables.targets_temp(s, stmt):
            fast = await self._fast(stmt, params)
            if fast is not None:
                self.last_fast = True
                return fast
            fast = await scanned_writes.scanned_write(s, stmt, params)
            if fast is not None:
                s.instance.write_paths["scanned"] += 1
                return fast
        if s.staged:
            await self._unstage()
        s.instance.write_paths["general"] += 1  # statements per path, for /metrics
        return await transactions.in_write(s, partial(writes.change, s), stmt, params)

    async def _fast(self, stmt: Any, params: list[Any]) -> Result | None:
        """The statement through the batcher's fast INSERT or point-write path, or None."""
        fast = await writes.fast_insert(self.s, stmt, params)
        if fast is not None:
            self.s.instance.write_paths["insert"] += 1
            return fast
        fast = await writes.fast_point(self.s, stmt, params)
        if fast is not None:
            self.s.instance.write_paths["point"] += 1
        return fast

    async def fast_write(self, stmt: Any, params: list[Any]) -> Result | None:
        """A write of a text shape a fast path took before (server/literal_shapes.py), with
        its literals as `params`, if a fast path takes it again; None when the text must
        run as usual: also for a data error or one about names (the fast paths write
        nothing before they raise), which the text gives with its literal's position."""
        s = self.s
        if s.status == "E" or s.write is not None or s.staged and not _keeps_staged(stmt):
            return None
        stmt = user_functions.inlined(s, stmt)
        try:
            read_only.refuse_writes(s, stmt)
            privilege_checks.check(s, stmt)
            if temp_tables.targets_temp(s, stmt):
                return None
            result = await self._fast(stmt, params)
        except SQLError as e:
            if e.sqlstate[:2] in ("22", "42"):
                return None
            await self.fail()
            raise
        except BaseException:
            await self.fail()
            raise
        if result is not None:
            notify.statement_ended(s)
        return result

    async def _unstage(self) -> None:
        """The block's staged INSERTs into its writing transaction, where the statement
        about to run reads and writes."""
        await transactions.in_write(self.s, partial(writes.apply_staged, self.s))

    async def select(
        self, stmt: A.SelectStmt, params: list[Any], as_of: AsOf | None = None
    ) -> Result:
        if as_of is None and row_locks.has_locks(stmt):  # DECLARE ... FOR UPDATE
            return await row_locks.select(self, stmt, params)
        return await queries.select(self.s, self.waits, self.plans, stmt, params, as_of)

    async def describe(self, stmt: Any, param_types: list[ColumnType]) -> list[Field] | None:
        """Result columns of a statement without running it (Describe of a statement),
        its parameters of the types announced for them."""
        nparams = len(param_types)
        stmt = user_functions.inlined(self.s, stmt)
        if isinstance(stmt, SelectAsOf):
            stmt = stmt.stmt
        if isinstance(stmt, A.SelectStmt) and create_as.into_clause(stmt) is None:
            if row_locks.has_locks(stmt):
                stmt = row_locks.without_locks(stmt)
            stmt = set_show.apply_set_config(self.s.settings, stmt, None)
            stmt = with_param_types(stmt, param_types) if nparams else stmt
            if notify.calls_functions(stmt):
                return await notify.describe(self, stmt, nparams)
            return await queries.describe(self.s, self.waits, stmt, nparams)
        if isinstance(stmt, A.ExecuteStmt):
            return await prepared.describe(self, stmt)
        if isinstance(stmt, A.FetchStmt | FetchTimeout):
            return None if getattr(stmt, "ismove", False) else cursors.fields(self.s, stmt)
        if isinstance(stmt, A.InsertStmt | A.UpdateStmt | A.DeleteStmt) and writes.returning_list(
            stmt
        ):
            typed = with_param_types(stmt, param_types) if nparams else stmt
            return await writes.describe_returning(self.s, typed, nparams)
        if isinstance(stmt, A.VariableShowStmt):
            return set_show.show_var(self.s.settings, stmt).fields
        if isinstance(stmt, A.CallStmt):  # a procedure's OUT parameters
            return routine_calls.out_fields(self.s, stmt)
        if isinstance(stmt, A.ExplainStmt | ExplainMatview | ExplainSelectAsOf):
            return explain.describe(stmt)
        return None

    # -- COPY (server/protocol.py runs its data exchange) ---------------------------------
    async def copy_target(self, stmt: A.CopyStmt) -> list[Column]:
        read_only.refuse_writes(self.s, stmt)
        return writes.copy_target(self.s, stmt)

    async def copy_in(self, stmt: A.CopyStmt, cols: list[Column], data: pa.Table) -> Result:
        """COPY FROM STDIN: the strings in `data` become rows of the table."""
        try:
            if self.s.staged:
                await self._unstage()
            return await transactions.in_write(
                self.s, partial(writes.copy_rows, self.s), stmt, cols, data
            )
        except BaseException:
            await self.fail()
            raise

    async def copy_source(self, stmt: A.CopyStmt, params: list[Any]) -> Result:
        return await self.execute(copy.source_query(stmt), params)

    async def rollback_write(self) -> None:
        """The session ends (server/connection.py): its writing transaction goes."""
        await transactions.rollback_write(self.s)
