"""One client connection: startup, simple and extended query, COPY, cancellation.

The connection's state machine and statement dispatch; the bytes of each message
are server/pgwire/, the authentication exchange server/auth/exchange.py.

Malformed bytes close only this connection. Errors in the extended protocol skip
messages until Sync, as PostgreSQL does.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import ssl
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pglast.ast as A
from headwater.catalog.pgtypes import (
    SessionFormat,
    binary_decoder,
    binary_encoder,
    text_decoder,
    text_encoder,
)
from headwater.catalog.types import PARAM_TYPES, TEXT, ColumnType
from headwater.planner.extensions import (
    CopySubscribe,
    DeclareSelectAsOf,
    SelectAsOf,
    Subscribe,
)
from headwater.planner.params import (
    CAST_PARAMS_UPTO,
    cast_function_params,
    count_params,
    infer_param_types,
)
from headwater.server import notify, user_functions
from headwater.server.auth.exchange import AUTH_TIMEOUT, authenticate
from headwater.server.copy import CopyIn, CopyOptions, copy_options, format_copy_row, header_row
from headwater.server.executor import Executor
from headwater.server.instance import Instance
from headwater.server.literal_shapes import LiteralShapes
from headwater.server.pgwire import messages
from headwater.server.pgwire.framing import Reader, buffered_message, read_message
from headwater.server.pgwire.startup import (
    CANCEL_REQUEST,
    GSSENC_REQUEST,
    PROTOCOL_3,
    SSL_REQUEST,
    read_startup,
    startup_options,
    startup_parameters,
)
from headwater.server.results import (
    COLUMNWISE_ROWS,
    ArrowRows,
    Field,
    Result,
    data_rows,
)
from headwater.server.session import Portal, Session
from headwater.server.settings import REPORTED, setting_ms, shows
from headwater.server.statements import locate_column, parse_statements
from headwater.server.subscribe import Subscription
from headwater.storage.duckdb_errors import name_statement

from headwater.errors import (
    FeatureNotSupported,
    InFailedTransaction,
    InvalidCatalogName,
    InvalidCursorName,
    InvalidPreparedStatement,
    ProtocolViolation,
    QueryCanceled,
    SQLError,
    utf8,
)

log = logging.getLogger("headwater.server")

DEFAULT_DATABASE = "headwater"
RESERVED_SUPERUSER_CONNECTIONS = 3  # superuser_reserved_connections, as in PostgreSQL
PARSED_TEXTS = 16  # SELECT texts (of up to PARSED_TEXT_CHARS) a connection keeps trees of
PARSED_TEXT_CHARS = 8192


@dataclass
class Prepared:
    name: str
    sql: str
    param_types: list[ColumnType]
    stmt: Any  # the parsed statement (None if empty); passes restore it after use
    text_decoders: list[Any]
    binary_decoders: list[Any]


def _no_statement(name: str) -> SQLError:
    if not name:
        return InvalidPreparedStatement("unnamed prepared statement does not exist")
    return InvalidPreparedStatement(f'prepared statement "{name}" does not exist')


class Connection:
    def __init__(
        self, server: Any, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.server = server
        self.instance: Instance = server.instance
        self.reader = reader
        self.writer = writer
        self.session: Session | None = None
        self.executor: Executor | None = None
        self._reported = 0  # newest headwater_epoch sent as ParameterStatus
        self._reported_settings: dict[str, str] = {}  # REPORTED values the client was sent
        self._out: list[bytes] = []
        self._out_size = 0
        peer = writer.get_extra_info("peername")
        self.peer_host: str = peer[0] if isinstance(peer, tuple) else "127.0.0.1"
        self.tls_active = False
        self.tls_end_point: bytes | None = None  # channel binding data once TLS is up
        self._timed_out = False  # the running statement hit statement_timeout
        self._subscription: Subscription | None = None  # a COPY (SUBSCRIBE) streaming
        # SELECT texts this connection sent, with their trees: a text sent again reuses
        # its tree, and with it the SQL the executor bound for it (executor.plans)
        self._parsed: OrderedDict[str, list[tuple[Any, str]]] = OrderedDict()
        # trees with integer parameters cast for the functions they are given to, by
        # (text, parameter types): the same tree each time keeps its read plan
        self._typed: OrderedDict[tuple[str, tuple[int, ...]], Any] = OrderedDict()
        self._idle = False  # ReadyForQuery sent, no message since: notifications go out now
        self._shapes = LiteralShapes()  # point reads and fast writes sent as text

    # -- plumbing -------------------------------------------------------------------
    def parse(self, sql: str) -> list[tuple[Any, str]]:
        """parse_statements, remembered for a text holding one SELECT, or one INSERT with
        parameters (a driver's unnamed statement is parsed again at each execution;
        the same tree also finds the INSERT fast path's shape, server/batcher.py)."""
        stmts = self._parsed.get(sql)
        if stmts is not None:
            self._parsed.move_to_end(sql)
            if self.executor is not None and isinstance(stmts[0][0], A.SelectStmt):
                self.executor.plans.keep(stmts[0][0])
            return stmts
        stmts = parse_statements(sql)
        if (
            len(stmts) == 1
            and (
                isinstance(stmts[0][0], A.SelectStmt)
                or (isinstance(stmts[0][0], A.InsertStmt) and "$" in sql)
            )
            and len(sql) <= PARSED_TEXT_CHARS
        ):
            self._parsed[sql] = stmts
            while len(self._parsed) > PARSED_TEXTS:
                self._parsed.popitem(last=False)
        return stmts

    def send(self, data: bytes) -> None:
        """Queue a message; one socket write per flush point, not per message."""
        self._out.append(data)
        self._out_size += len(data)
        if self._out_size > 1 << 16:
            self.writer.write(b"".join(self._out))
            self._out.clear()
            self._out_size = 0

    async def flush(self) -> None:
        if self._out:
            self.writer.write(b"".join(self._out))
            self._out.clear()
            self._out_size = 0
        await self.writer.drain()

    def send_notice(self, message: str | SQLError) -> None:
        """A NoticeResponse, unless client_min_messages is above its level."""
        severity = message.severity if isinstance(message, SQLError) else "NOTICE"
        if self.session is None or shows(self.session.settings, severity):
            self.send(messages.notice_response(message))

    def notice_now(self, message: str | SQLError) -> None:
        """A NOTICE sent while the statement runs (what it is about to wait for)."""
        self.send_notice(message)
        self.writer.write(b"".join(self._out))
        self._out.clear()
        self._out_size = 0

    def send_error(self, err: SQLError) -> None:
        self.send(messages.error_response(err))

    def fmt(self) -> SessionFormat:
        return self.session.text_format() if self.session else SessionFormat()

    # -- lifecycle ------------------------------------------------------------------
    async def run(self) -> None:
        try:
            if not await self.startup():
                return
            await self.loop()
        except (asyncio.IncompleteReadError, ConnectionError, BrokenPipeError):
            pass
        except (ssl.SSLError, TimeoutError) as e:
            log.info("TLS connection from %s failed: %s", self.peer_host, e)
        except ProtocolViolation as e:
            try:
                self.send_error(
                    SQLError(str(e), e.sqlstate, detail=e.detail, hint=e.hint, severity="FATAL")
                )
                await self.flush()
            except Exception:
                pass
        except Exception:
            log.exception("connection failed")
        finally:
            await self.cleanup()

    async def cleanup(self) -> None:
        if self.session is not None:
            if self.executor is not None and self.session.write is not None:
                await self.executor.rollback_write()
            self.session.close()
            self.server.sessions.pop(self.session.pid, None)
        try:
            self.writer.close()
        except Exception:
            pass

    async def startup(self) -> bool:
        while True:
            code, r = await read_startup(self.reader)
            if code == SSL_REQUEST and self.server.tls is not None and not self.tls_active:
                if self.reader._buffer:  # bytes sent before the handshake: not to be trusted
                    raise ProtocolViolation("received unencrypted data after SSL request")
                # No read between the answer and the handshake: a ClientHello read into
                # the stream's buffer would never reach TLS (uvloop reads eagerly)
                self.writer.transport.pause_reading()
                self.writer.write(b"S")
                await self.writer.drain()
                await asyncio.wait_for(self.writer.start_tls(self.server.tls.context), AUTH_TIMEOUT)
                self.tls_active = True
                self.tls_end_point = self.server.tls.end_point
                continue
            if code in (SSL_REQUEST, GSSENC_REQUEST):
                self.send(b"N")
                await self.flush()
                continue
            if code == CANCEL_REQUEST:
                pid, secret = r.int32(), r.int32()
                self.server.cancel(pid, secret)
                return False
            if code != PROTOCOL_3:
                raise ProtocolViolation(
                    f"unsupported frontend protocol {code >> 16}.{code & 0xFFFF}: "
                    "server supports 3.0 to 3.0"
                )
            params = startup_parameters(r)
            break
        user = params.get("user")
        if not user:
            self.send_error(
                SQLError(
                    "no PostgreSQL user name specified in startup packet", "28000", severity="FATAL"
                )
            )
            await self.flush()
            return False
        database = params.get("database", user)
        if database != DEFAULT_DATABASE:
            self.send_error(
                InvalidCatalogName(f'database "{database}" does not exist', severity="FATAL")
            )
            await self.flush()
            return False
        try:
            role = await authenticate(self, user, database)
        except SQLError as e:
            self.send_error(e)
            await self.flush()
            return False
        limit = self.instance.config.max_connections
        if len(self.server.sessions) >= limit and not role.superuser:
            self.send_error(SQLError("sorry, too many clients already", "53300", severity="FATAL"))
            await self.flush()
            return False
        if len(self.server.sessions) >= limit + RESERVED_SUPERUSER_CONNECTIONS:
            self.send_error(
                SQLError(
                    "remaining connection slots are reserved for superusers",
                    "53300",
                    severity="FATAL",
                )
            )
            await self.flush()
            return False
        s = Session(self.instance, user, database)
        s.settings.values["max_connections"] = str(limit)
        s.settings.server_wide(self.instance)
        s.role_oid = s.session_role_oid = role.oid
        s.settings.values["is_superuser"] = "on" if role.superuser else "off"
        s.secret = secrets.randbits(31)
        for key, value in params.items():
            if key in ("user", "database", "replication"):
                continue
            pairs = startup_options(value) if key == "options" else [(key, value)]
            for name, setting in pairs:
                try:
                    s.settings.set(name, setting)
                except SQLError:
                    pass
        self.session = s
        self.executor = Executor(s)
        self.executor.waits.tell = self.notice_now
        self.server.sessions[s.pid] = self
        self.send(messages.auth_ok())
        self._report_settings()
        self.send(messages.backend_key(s.pid, s.secret))
        self.send_ready()
        await self.flush()
        return True

    async def loop(self) -> None:
        skipping = False  # after an extended-protocol error, until Sync
        while True:
            idle = self._idle_in_transaction_timeout()
            if idle:
                try:
                    kind, r = await asyncio.wait_for(self.read_message(), idle)
                except TimeoutError:
                    self.send_error(
                        SQLError(
                            "terminating connection due to idle-in-transaction timeout",
                            "25P03",
                            severity="FATAL",
                        )
                    )
                    await self.flush()
                    return
            else:
                kind, r = await self.read_message()
            if kind == "X":
                return
            if skipping and kind not in ("S",):
                continue
            try:
                if kind == "Q":
                    await self.simple_query(r.cstr())
                elif kind == "P":
                    await self.on_parse(r)
                elif kind == "B":
                    self.on_bind(r)
                elif kind == "D":
                    await self.on_describe(r)
                elif kind == "E":
                    await self.on_execute(r)
                elif kind == "S":
                    skipping = False
                    if self.session and self.session.status == "I":
                        self.session.portals.clear()
                    self.send_ready()
                    await self.flush()
                elif kind == "C":
                    self.on_close(r)
                elif kind == "H":
                    await self.flush()
                elif kind in ("d", "c", "f"):
                    pass  # copy messages outside COPY are ignored, as PostgreSQL does
                else:
                    raise ProtocolViolation(f"invalid frontend message type {ord(kind)}")
            except ProtocolViolation:
                raise
            except SQLError as e:
                self.send_error(e)
                if kind != "Q":
                    skipping = True
                    if self.executor:
                        await self.executor.fail()
                await self.flush()
            except (ConnectionError, asyncio.IncompleteReadError):
                raise  # the client is gone
            except Exception as e:  # a bug: the statement fails, the session goes on
                log.exception("internal error in a %r message", kind)
                self.send_error(SQLError(f"internal error: {type(e).__name__}: {e}", "XX000"))
                if self.executor:
                    await self.executor.fail()
                if kind == "Q":
                    self.send_ready()
                else:
                    skipping = True
                await self.flush()

    async def read_message(self) -> tuple[str, Reader]:
        limit = self.instance.config.max_message_size
        message = buffered_message(self.reader, limit) or await read_message(self.reader, limit)
        self._idle = False
        return message

    def send_ready(self) -> None:
        assert self.session is not None
        for n in self.session.settings.take_notices():  # SET work_mem's answer
            self.send_notice(n)
        self._report_settings()
        self.deliver_notifications()
        self.send(messages.ready(self.session.status))
        self._idle = True

    def deliver_notifications(self, *, idle: bool = False) -> None:
        """LISTEN (server/notify.py): send the session's NotificationResponses, outside a
        transaction block only. Before ReadyForQuery; with `idle`, when another session
        commits a NOTIFY: written at once if this one waits for its next query."""
        s = self.session
        if s is None or s.status != "I" or (idle and not self._idle):
            return
        for pid, channel, payload in notify.take(s):
            self.send(messages.notification_response(pid, channel, payload))
        if idle and self._out:
            self.writer.write(b"".join(self._out))
            self._out.clear()
            self._out_size = 0

    # -- simple query ---------------------------------------------------------------
    async def simple_query(self, sql: str) -> None:
        assert self.session is not None and self.executor is not None
        try:
            if not await self._known_shape(sql):
                stmts = self.parse(sql)
                if not stmts:
                    self.send(messages.empty_query())
                elif len(stmts) == 1:
                    self._shapes.learn(self.session, sql, stmts[0][0])
                self.executor.last_fast = False
                for stmt, text in stmts:
                    await self.run_statement(stmt, text, [], [], describe=True, max_rows=0)
                if len(stmts) == 1 and self.executor.last_fast:
                    self._shapes.learn_write(self.session, sql)
        except ProtocolViolation:
            raise  # the framing is lost (a CopyData too long): the connection ends
        except SQLError as e:
            self.send_error(e)
            if self.executor:
                await self.executor.fail()
        self.send_ready()
        await self.flush()

    async def _known_shape(self, sql: str) -> bool:
        """Run `sql` as the remembered tree of its text's shape (server/literal_shapes.py):
        a point read, or a write a fast path takes again. False: parse and run it."""
        assert self.session is not None and self.executor is not None
        known = self._shapes.lookup(self.session, sql)
        if known is None:
            return False
        tree, values = known
        if isinstance(tree, A.SelectStmt):
            await self.run_statement(tree, sql, values, [], describe=True, max_rows=0)
            return True
        timer = self._statement_timer()
        try:
            result = await self.executor.fast_write(tree, values)
        finally:
            if timer is not None:
                timer.cancel()
        if result is None:
            return False
        self.send_result(result, [], describe=True)
        return True

    async def run_statement(
        self,
        stmt: Any,
        text: str,
        params: list[Any],
        formats: list[int],
        *,
        describe: bool,
        max_rows: int,
    ) -> None:
        assert self.executor is not None and self.session is not None
        if isinstance(stmt, A.CopyStmt):
            await self.copy(stmt, params)
            return
        if isinstance(stmt, CopySubscribe | Subscribe):
            await self.copy_subscribe(stmt.subscribe if isinstance(stmt, CopySubscribe) else stmt)
            return
        timer = self._statement_timer()
        try:
            result = await self.executor.execute(stmt, params)
        except SQLError as e:
            self._timeout_message(e)
            locate_column(e, stmt)
            name_statement(e, text)
            raise
        except Exception as e:  # a bug: the statement fails, the session goes on
            log.exception("internal error in %s", type(stmt).__name__)
            raise SQLError(f"internal error: {type(e).__name__}: {e}", "XX000") from None
        finally:
            if timer is not None:
                timer.cancel()
        self.send_result(result, formats, describe=describe)

    def send_result(self, result: Result, formats: list[int], *, describe: bool) -> None:
        for n in result.notices:
            self.send_notice(n)
        if result.fields is not None:
            if describe:
                self.send(messages.row_description(result.fields, formats))
            self.send_rows(result.fields, result.rows, formats)
        self.send(messages.command_complete(result.tag))
        self._report_epoch()

    def _report_settings(self) -> None:
        """ParameterStatus for each reported setting whose value the client has not seen:
        all at startup, then those a SET, RESET or rollback changed (PostgreSQL sends them
        before ReadyForQuery; psycopg decodes timestamptz in the reported TimeZone)."""
        assert self.session is not None
        values = self.session.settings.values
        for name in REPORTED:
            value = values[name]
            if self._reported_settings.get(name) != value:
                self._reported_settings[name] = value
                self.send(messages.parameter_status(name, value))

    def _report_epoch(self) -> None:
        s = self.session
        if s is not None and s.last_write_epoch and s.last_write_epoch != self._reported:
            self._reported = s.last_write_epoch
            self.send(messages.parameter_status("headwater_epoch", str(s.last_write_epoch)))

    def encoders(self, fields: list[Field], formats: list[int]) -> list[Any]:
        f = self.fmt()
        out = []
        for i, fld in enumerate(fields):
            fmt = messages.format_code(formats, i)
            out.append(
                binary_encoder(fld.type, session=f)
                if fmt == 1
                else text_encoder(fld.type, session=f)
            )
        return out

    def send_rows(
        self, fields: list[Field], rows: Sequence[tuple[Any, ...]], formats: list[int]
    ) -> None:
        if isinstance(rows, ArrowRows) and len(rows) >= COLUMNWISE_ROWS:  # a column at a time
            for chunk in data_rows(rows.table, fields, formats, self.fmt()):
                self.send(chunk)
            return
        encs = self.encoders(fields, formats)
        data_row = messages.data_row
        send = self.send
        for row in rows:
            send(data_row([None if v is None else e(v) for e, v in zip(encs, row, strict=True)]))

    # -- COPY -----------------------------------------------------------------------
    async def copy(self, stmt: A.CopyStmt, params: list[Any]) -> None:
        assert self.executor is not None and self.session is not None
        if stmt.filename is not None:
            raise FeatureNotSupported(
                "COPY to or from a file is not supported",
                hint="Use COPY ... FROM STDIN or TO STDOUT (psql's \\copy).",
            )
        opts = copy_options(stmt)
        if stmt.is_from:
            await self.copy_in(stmt, opts)
        else:
            await self.copy_out(stmt, opts, params)

    async def copy_in(self, stmt: A.CopyStmt, opts: Any) -> None:
        assert self.executor is not None
        cols = await self.executor.copy_target(stmt)
        self.send(messages.copy_in_response(len(cols)))
        await self.flush()
        rel = stmt.relation
        target = f"{rel.schemaname}.{rel.relname}" if rel.schemaname else rel.relname
        # on the progress board (console, headwater_catalog.progress) while it runs
        with self.instance.progress.task("copy", target, "receiving", "lines") as task:
            # parsed off the event loop as it arrives: the other sessions go on meanwhile
            data = CopyIn(len(cols), [c.name for c in cols], opts)
            failed: str | None = None
            received = 0
            while True:
                kind, r = await self.read_message()
                if kind == "d":
                    chunk = r.rest()
                    data.feed(chunk)
                    received += len(chunk)
                    task.done += chunk.count(b"\n")
                    task.detail = f"{received / 1e6:,.1f} MB"
                elif kind == "c":
                    break
                elif kind == "f":
                    failed = r.cstr()
                    break
                elif kind in ("H", "S"):
                    continue
                else:
                    raise ProtocolViolation(
                        f"unexpected message type 0x{ord(kind):02x} during COPY from stdin"
                    )
            if failed is not None:
                raise SQLError(f"COPY from stdin failed: {failed}", "57014")
            task.phase = "parsing"
            table = await data.table()
            del data  # the payload is not held while the write is made durable
            task.phase, task.unit, task.done = "writing", "rows", table.num_rows
            result = await self.executor.copy_in(stmt, cols, table)
        self.send(messages.command_complete(result.tag))
        self._report_epoch()

    async def copy_out(self, stmt: A.CopyStmt, opts: Any, params: list[Any]) -> None:
        assert self.executor is not None
        result = await self.executor.copy_source(stmt, params)
        fields = result.fields or []
        self.send(messages.copy_out_response(len(fields)))
        f = self.fmt()
        encs = [text_encoder(fld.type, session=f) for fld in fields]
        if opts.header:
            self.send(messages.copy_data(header_row([fld.name for fld in fields], opts)))
        for row in result.rows:
            vals = [
                None if v is None else e(v).decode("utf-8") for e, v in zip(encs, row, strict=True)
            ]
            self.send(messages.copy_data(format_copy_row(vals, opts)))
        self.send(messages.copy_done())
        self.send(messages.command_complete(f"COPY {len(result.rows)}"))

    async def copy_subscribe(self, spec: Subscribe) -> None:
        """COPY (SUBSCRIBE ...) TO STDOUT (and a bare SUBSCRIBE, as Materialize does):
        rows stream as epochs close, until UP TO, a cancel, or the client goes away."""
        assert self.executor is not None and self.session is not None
        if self.session.status == "E":
            raise InFailedTransaction(
                "current transaction is aborted, commands ignored until end of transaction block"
            )
        sub = Subscription(self.executor, spec)
        fields = await sub.open()
        self._subscription = sub
        sent = 0
        try:
            self.send(messages.copy_out_response(len(fields)))
            await self.flush()
            f = self.fmt()
            encs = [text_encoder(fld.type, session=f) for fld in fields]
            opts = CopyOptions()
            while not sub.done:
                rows = await sub.take(None, 1.0)
                if self.reader.at_eof() or self.writer.is_closing():  # the client went away
                    raise ConnectionResetError("client closed the connection during SUBSCRIBE")
                for row in rows:
                    vals = [
                        None if v is None else e(v).decode("utf-8")
                        for e, v in zip(encs, row, strict=True)
                    ]
                    self.send(messages.copy_data(format_copy_row(vals, opts)))
                sent += len(rows)
                if rows:
                    await self.flush()  # a slow client blocks here; its producer goes on
        finally:
            sub.close()
            self._subscription = None
        self.send(messages.copy_done())
        self.send(messages.command_complete(f"COPY {sent}"))

    # -- extended query -------------------------------------------------------------
    async def on_parse(self, r: Reader) -> None:
        assert self.session is not None
        name = r.cstr()
        sql = r.cstr()
        n = r.int16()
        declared = [r.uint32() for _ in range(n)]
        stmts = self.parse(sql)
        if len(stmts) > 1:
            raise SQLError("cannot insert multiple commands into a prepared statement", "42601")
        stmt = stmts[0][0] if stmts else None
        core = stmt.stmt if isinstance(stmt, SelectAsOf) else stmt
        if isinstance(stmt, DeclareSelectAsOf):
            core = stmt.select.stmt
        nparams = max(count_params(core), len(declared)) if core is not None else 0
        inferred = (
            infer_param_types(
                user_functions.typed_call(self.session, core),  # a function's parameter types
                self.session.catalog,
                self.session.search_path(),
                declared,
                nparams,
            )
            if stmt is not None
            else []
        )
        types: list[ColumnType] = []
        for i in range(nparams):
            if i < len(declared) and declared[i]:
                pg = PARAM_TYPES.get(declared[i])
                if pg is None:
                    raise FeatureNotSupported(
                        f"parameter type with OID {declared[i]} is not supported"
                    )
                types.append(ColumnType(pg))
            else:
                types.append(inferred[i] or ColumnType(TEXT))
        if name and name in self.session.prepared:
            raise SQLError(f'prepared statement "{name}" already exists', "42P05")
        if stmt is not None and stmt is core and 0 < len(types) <= CAST_PARAMS_UPTO:
            stmt = self._typed_tree(sql, stmt, types)
        self.session.prepared[name] = Prepared(
            name,
            sql,
            types,
            stmt,
            [text_decoder(t, session=self.fmt()) for t in types],
            [binary_decoder(t, session=self.fmt()) for t in types],
        )
        if isinstance(stmt, A.SelectStmt) and self.executor is not None:
            self.executor.plans.keep(stmt)  # bound at its first Execute, reused after
        self.send(messages.parse_complete())

    def _typed_tree(self, sql: str, stmt: Any, types: list[ColumnType]) -> Any:
        key = (sql, tuple(t.pg.oid for t in types))
        typed = self._typed.get(key)
        if typed is None or typed[0] is not stmt:
            typed = (stmt, cast_function_params(stmt, types))
            self._typed[key] = typed
            while len(self._typed) > PARSED_TEXTS:
                self._typed.popitem(last=False)
        self._typed.move_to_end(key)
        return typed[1]

    def on_bind(self, r: Reader) -> None:
        assert self.session is not None
        portal_name = r.cstr()
        stmt_name = r.cstr()
        prep = self.session.prepared.get(stmt_name)
        if prep is None:
            raise _no_statement(stmt_name)
        nfmt = r.int16()
        pformats = [r.int16() for _ in range(nfmt)]
        n = r.int16()
        if n != len(prep.param_types):
            raise SQLError(
                f'bind message supplies {n} parameters, but prepared statement "{stmt_name}" '
                f"requires {len(prep.param_types)}",
                "08P01",
            )
        values: list[Any] = []
        for i in range(n):
            length = r.int32()
            if length == -1:
                values.append(None)
                continue
            raw = r.bytes_(length)
            fmt = messages.format_code(pformats, i)
            if fmt == 1:
                values.append(prep.binary_decoders[i](raw))
            else:
                values.append(prep.text_decoders[i](utf8(raw)))
        nres = r.int16()
        rformats = [r.int16() for _ in range(nres)]
        self.session.portals[portal_name] = Portal(portal_name, prep, values, rformats)
        self.send(messages.bind_complete())

    async def on_describe(self, r: Reader) -> None:
        assert self.session is not None and self.executor is not None
        kind = r.byte()
        name = r.cstr()
        if kind == "S":
            prep = self.session.prepared.get(name)
            if prep is None:
                raise _no_statement(name)
            self.send(messages.parameter_description([t.pg.oid for t in prep.param_types]))
            fields = await self.describe_fields(prep)
            self.send(
                messages.row_description(fields, []) if fields is not None else messages.no_data()
            )
            return
        portal = self.session.portals.get(name)
        if portal is None:
            cursor = self.session.cursors.get(name)  # a DECLAREd cursor is a portal too
            if cursor is None:
                raise InvalidCursorName(f'portal "{name}" does not exist')
            self.send(messages.row_description(cursor.fields, []))  # (psycopg's named cursors)
            return
        await self.materialise(portal)
        if portal.fields is not None:
            self.send(messages.row_description(portal.fields, portal.result_formats))
        else:
            self.send(messages.no_data())

    async def describe_fields(self, prep: Prepared) -> list[Field] | None:
        assert self.executor is not None
        if prep.stmt is None:
            return None
        return await self.executor.describe(prep.stmt, prep.param_types)

    async def materialise(self, portal: Portal) -> None:
        """Run the portal's statement once; Execute then streams its rows."""
        if portal.tag is not None:
            return
        assert self.executor is not None
        stmt = portal.stmt.stmt
        if stmt is None:
            portal.tag = ""
            return
        if isinstance(stmt, A.CopyStmt):
            raise FeatureNotSupported("COPY in the extended query protocol is not supported")
        timer = self._statement_timer()
        try:
            result = await self.executor.execute(stmt, portal.params)
        except SQLError as e:
            self._timeout_message(e)
            name_statement(e, portal.stmt.sql)
            raise
        finally:
            if timer is not None:
                timer.cancel()
        for n in result.notices:
            self.send_notice(n)
        portal.fields = result.fields
        portal.rows = result.rows
        portal.tag = result.tag

    async def on_execute(self, r: Reader) -> None:
        assert self.session is not None
        name = r.cstr()
        max_rows = r.int32()
        portal = self.session.portals.get(name)
        if portal is None:
            raise InvalidCursorName(f'portal "{name}" does not exist')
        await self.materialise(portal)
        if portal.tag == "":
            self.send(messages.empty_query())
            return
        if portal.fields is not None:
            rows = portal.rows or []
            end = len(rows) if max_rows <= 0 else min(len(rows), portal.pos + max_rows)
            self.send_rows(portal.fields, rows[portal.pos : end], portal.result_formats)
            portal.pos = end
            if end < len(rows):
                self.send(messages.portal_suspended())
                return
        tag = portal.tag or ""
        if portal.fields is not None and tag.startswith("SELECT"):
            tag = f"SELECT {len(portal.rows or [])}"
        self.send(messages.command_complete(tag))
        self._report_epoch()

    def on_close(self, r: Reader) -> None:
        assert self.session is not None
        kind = r.byte()
        name = r.cstr()
        if kind == "S":
            self.session.prepared.pop(name, None)
        else:
            self.session.portals.pop(name, None)
        self.send(messages.close_complete())

    # -- cancellation and timeouts ---------------------------------------------------
    def _statement_timer(self) -> asyncio.TimerHandle | None:
        """statement_timeout: cancel the statement (as a cancel request does) when it is due."""
        self._timed_out = False
        assert self.session is not None
        raw = self.session.settings.values.get("statement_timeout", "0")
        if raw == "0":  # the default: no parsing per statement
            return None
        ms = setting_ms(raw)
        if not ms:
            return None
        return asyncio.get_running_loop().call_later(ms / 1000, self._on_statement_timeout)

    def _on_statement_timeout(self) -> None:
        self._timed_out = True
        self.cancel()

    def _timeout_message(self, err: SQLError) -> None:
        if self._timed_out and err.sqlstate == "57014":
            err.message = "canceling statement due to statement timeout"

    def _idle_in_transaction_timeout(self) -> float:
        s = self.session
        if s is None or s.status == "I":
            return 0.0
        ms = setting_ms(s.settings.values.get("idle_in_transaction_session_timeout", "0"))
        return ms / 1000

    def terminate(self, error: SQLError | None = None) -> None:
        """pg_terminate_backend (or the server stopping for `error`): end the running
        statement and close the connection."""
        self.cancel()
        try:
            self.writer.write(
                messages.error_response(
                    error
                    or SQLError(
                        "terminating connection due to administrator command",
                        "57P01",
                        severity="FATAL",
                    )
                )
            )
            self.writer.close()
        except Exception:
            pass

    def cancel(self) -> None:
        s = self.session
        if s is None:
            return
        if self._subscription is not None:
            self._subscription.cancel()
        if self.executor is not None:  # a statement waiting for views, epochs or rows
            self.executor.interrupt()
        for cur in (s.write.cur if s.write else None, s._read_cur):
            if cur is not None:
                try:
                    cur.interrupt()
                except Exception:
                    pass


__all__ = ["Connection", "QueryCanceled"]
