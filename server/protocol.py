"""One client connection: startup, simple and extended query, COPY, cancellation.

Malformed bytes close only this connection. Errors in the extended protocol skip
messages until Sync, as PostgreSQL does.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import ssl
import struct
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import pglast.ast as A
from headwater.catalog.types import BY_OID, TEXT, ColumnType
from headwater.planner.extensions import (
    CopySubscribe,
    DeclareSelectAsOf,
    SelectAsOf,
    Subscribe,
    parse_extended,
)
from headwater.planner.params import count_params, infer_param_types
from headwater.server import auth, wire
from headwater.server.copy import CopyOptions, copy_options, format_copy_row, header_row, parse_copy
from headwater.server.executor import Executor, Field, Result
from headwater.server.instance import Instance
from headwater.server.session import Portal, Session
from headwater.server.settings import REPORTED
from headwater.server.subscribe import Subscription
from headwater.server.values import (
    SessionFormat,
    binary_decoder,
    binary_encoder,
    text_decoder,
    text_encoder,
)
from headwater.storage.duckdb_errors import name_statement
from pglast import parse_sql
from pglast.parser import ParseError
from pglast.parser import split as pglast_split

from headwater.errors import (
    FeatureNotSupported,
    InFailedTransaction,
    InvalidCatalogName,
    InvalidCursorName,
    InvalidPreparedStatement,
    ProtocolViolation,
    QueryCanceled,
    SQLError,
    SyntaxErr,
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


def _content_error(e: Exception) -> SQLError:
    if isinstance(e, UnicodeDecodeError):
        bad = e.object[e.start : e.start + 1].hex() if isinstance(e.object, bytes) else "?"
        return SQLError(f'invalid byte sequence for encoding "UTF8": 0x{bad}', "22021")
    return SQLError(f"invalid message format: {e}", "08P01")


def locate_column(err: SQLError, stmt: Any) -> None:
    """Point an unknown-column error at the reference, as PostgreSQL's cursor does."""
    if err.sqlstate != "42703" or err.position is not None or '"' not in err.message:
        return
    name = err.message.split('"')[1]
    found: list[int] = []

    def walk(node: Any) -> None:
        if isinstance(node, tuple | list):
            for n in node:
                walk(n)
        elif isinstance(node, A.Node):
            if isinstance(node, A.ColumnRef):
                last = node.fields[-1]
                if isinstance(last, A.String) and last.sval == name and node.location is not None:
                    found.append(node.location)
            for attr in node:
                walk(getattr(node, attr))

    walk(stmt)
    if found:
        err.position = min(found) + 1


def parse_statements(sql: str) -> list[tuple[Any, str]]:
    """pglast statements with their source text; syntax errors get PostgreSQL's fields."""
    try:
        raws = parse_sql(sql)
    except ParseError as e:
        return _parse_extended_statements(sql, e)
    out = []
    for r in raws:
        start = r.stmt_location or 0
        text = sql[start : start + r.stmt_len] if r.stmt_len else sql[start:]
        out.append((r.stmt, text))
    return out


def _startup_options(text: str) -> list[tuple[str, str]]:
    """The startup packet's `options` (libpq PGOPTIONS): `-c name=value` or
    `--name=value`, separated by spaces; a backslash escapes the next character."""
    words: list[str] = []
    cur: list[str] = []
    escaped = False
    for ch in text:
        if escaped:
            cur.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch.isspace():
            if cur:
                words.append("".join(cur))
                cur = []
        else:
            cur.append(ch)
    if cur:
        words.append("".join(cur))
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(words):
        w = words[i]
        if w == "-c" and i + 1 < len(words):
            w, i = words[i + 1], i + 1
        elif w.startswith("-c"):
            w = w[2:]
        elif w.startswith("--"):
            w = w[2:]
        else:
            i += 1
            continue
        if "=" in w:
            name, value = w.split("=", 1)
            out.append((name.replace("-", "_"), value))
        i += 1
    return out


def _parse_extended_statements(sql: str, error: ParseError) -> list[tuple[Any, str]]:
    """Statements when pglast refused the text: Headwater's own (SUBSCRIBE, AS OF, ...)
    are recognised one by one; any other statement keeps PostgreSQL's syntax error."""
    out: list[tuple[Any, str]] = []
    for piece in pglast_split(sql, with_parser=False):
        try:
            out.extend((r.stmt, piece) for r in parse_sql(piece))
            continue
        except ParseError:
            pass
        stmt = parse_extended(piece)
        if stmt is None:
            msg, loc = error.args[0], error.args[1] if len(error.args) > 1 else None
            raise SyntaxErr(msg, position=(loc + 1) if isinstance(loc, int) else None) from None
        out.append((stmt, piece))
    return out


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

    # -- plumbing -------------------------------------------------------------------
    def parse(self, sql: str) -> list[tuple[Any, str]]:
        """parse_statements, remembered for a text holding one SELECT."""
        stmts = self._parsed.get(sql)
        if stmts is not None:
            self._parsed.move_to_end(sql)
            if self.executor is not None:
                self.executor.plans.keep(stmts[0][0])
            return stmts
        stmts = parse_statements(sql)
        if (
            len(stmts) == 1
            and isinstance(stmts[0][0], A.SelectStmt)
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

    def send_error(self, err: SQLError) -> None:
        self.send(wire.error_response(err))

    def fmt(self) -> SessionFormat:
        st = self.session.settings.values if self.session else {}
        return SessionFormat(
            timezone=st.get("TimeZone", "UTC"),
            extra_float_digits=int(st.get("extra_float_digits", "1")),
            datestyle=st.get("DateStyle", "ISO, MDY"),
            intervalstyle=st.get("IntervalStyle", "postgres"),
            bytea_output=st.get("bytea_output", "hex"),
        )

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
                await self.executor._rollback_write()
            self.session.close()
            self.server.sessions.pop(self.session.pid, None)
        try:
            self.writer.close()
        except Exception:
            pass

    async def startup(self) -> bool:
        while True:
            code, r = await wire.read_startup(self.reader)
            if code == wire.SSL_REQUEST and self.server.tls is not None and not self.tls_active:
                if self.reader._buffer:  # bytes sent before the handshake: not to be trusted
                    raise ProtocolViolation("received unencrypted data after SSL request")
                self.writer.write(b"S")
                await self.writer.drain()
                await asyncio.wait_for(
                    self.writer.start_tls(self.server.tls.context), auth.AUTH_TIMEOUT
                )
                self.tls_active = True
                self.tls_end_point = self.server.tls.end_point
                continue
            if code in (wire.SSL_REQUEST, wire.GSSENC_REQUEST):
                self.send(b"N")
                await self.flush()
                continue
            if code == wire.CANCEL_REQUEST:
                pid, secret = r.int32(), r.int32()
                self.server.cancel(pid, secret)
                return False
            if code != wire.PROTOCOL_3:
                raise ProtocolViolation(
                    f"unsupported frontend protocol {code >> 16}.{code & 0xFFFF}: "
                    "server supports 3.0 to 3.0"
                )
            params: dict[str, str] = {}
            while True:
                key = r.cstr()
                if not key:
                    break
                params[key] = r.cstr()
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
            role = await auth.authenticate(self, user, database)
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
        s.role_oid = role.oid
        s.settings.values["is_superuser"] = "on" if role.superuser else "off"
        s.secret = secrets.randbits(31)
        for key, value in params.items():
            if key in ("user", "database", "replication"):
                continue
            pairs = _startup_options(value) if key == "options" else [(key, value)]
            for name, setting in pairs:
                try:
                    s.settings.set(name, setting)
                except SQLError:
                    pass
        self.session = s
        self.executor = Executor(s)
        self.server.sessions[s.pid] = self
        self.send(wire.auth_ok())
        for name in REPORTED:
            self.send(wire.parameter_status(name, s.settings.values[name]))
        self.send(wire.backend_key(s.pid, s.secret))
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
            except (IndexError, ValueError, UnicodeDecodeError, struct.error) as e:
                # The framing is intact (the length was right), so like PostgreSQL
                # report the bad content as an ERROR and keep the session.
                self.send_error(_content_error(e))
                if kind == "Q":
                    self.send_ready()
                else:
                    skipping = True
                    if self.executor:
                        await self.executor.fail()
                await self.flush()

    async def read_message(self) -> tuple[str, wire.Reader]:
        return await wire.read_message(self.reader, self.instance.config.max_message_size)

    def send_ready(self) -> None:
        assert self.session is not None
        for n in self.session.settings.take_notices():  # SET work_mem's answer
            self.send(wire.notice_response(n))
        self.send(wire.ready(self.session.status))

    # -- simple query ---------------------------------------------------------------
    async def simple_query(self, sql: str) -> None:
        assert self.session is not None
        try:
            stmts = self.parse(sql)
            if not stmts:
                self.send(wire.empty_query())
            for stmt, text in stmts:
                await self.run_statement(stmt, text, [], [], describe=True, max_rows=0)
        except ProtocolViolation:
            raise  # the framing is lost (a CopyData too long): the connection ends
        except SQLError as e:
            self.send_error(e)
            if self.executor:
                await self.executor.fail()
        self.send_ready()
        await self.flush()

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
            self.send(wire.notice_response(n))
        if result.fields is not None:
            if describe:
                self.send(wire.row_description(result.fields, formats))
            self.send_rows(result.fields, result.rows, formats)
        self.send(wire.command_complete(result.tag))
        self._report_epoch()

    def _report_epoch(self) -> None:
        s = self.session
        if s is not None and s.last_write_epoch and s.last_write_epoch != self._reported:
            self._reported = s.last_write_epoch
            self.send(wire.parameter_status("headwater_epoch", str(s.last_write_epoch)))

    def encoders(self, fields: list[Field], formats: list[int]) -> list[Any]:
        f = self.fmt()
        out = []
        for i, fld in enumerate(fields):
            fmt = formats[i] if i < len(formats) else (formats[0] if len(formats) == 1 else 0)
            out.append(
                binary_encoder(fld.type, session=f)
                if fmt == 1
                else text_encoder(fld.type, session=f)
            )
        return out

    def send_rows(
        self, fields: list[Field], rows: list[tuple[Any, ...]], formats: list[int]
    ) -> None:
        encs = self.encoders(fields, formats)
        data_row = wire.data_row
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
        self.send(wire.copy_in_response(len(cols)))
        await self.flush()
        chunks: list[bytes] = []
        failed: str | None = None
        while True:
            kind, r = await self.read_message()
            if kind == "d":
                chunks.append(r.rest())
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
        data = b"".join(chunks)
        del chunks  # the payload is held once, and not while the write is made durable
        # pyarrow's CSV reader, off the event loop: the other sessions go on meanwhile
        table = await asyncio.to_thread(parse_copy, data, len(cols), [c.name for c in cols], opts)
        del data
        result = await self.executor.copy_in(stmt, cols, table)
        self.send(wire.command_complete(result.tag))
        self._report_epoch()

    async def copy_out(self, stmt: A.CopyStmt, opts: Any, params: list[Any]) -> None:
        assert self.executor is not None
        result = await self.executor.copy_source(stmt, params)
        fields = result.fields or []
        self.send(wire.copy_out_response(len(fields)))
        f = self.fmt()
        encs = [text_encoder(fld.type, session=f) for fld in fields]
        if opts.header:
            self.send(wire.copy_data(header_row([fld.name for fld in fields], opts)))
        for row in result.rows:
            vals = [
                None if v is None else e(v).decode("utf-8") for e, v in zip(encs, row, strict=True)
            ]
            self.send(wire.copy_data(format_copy_row(vals, opts)))
        self.send(wire.copy_done())
        self.send(wire.command_complete(f"COPY {len(result.rows)}"))

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
            self.send(wire.copy_out_response(len(fields)))
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
                    self.send(wire.copy_data(format_copy_row(vals, opts)))
                sent += len(rows)
                if rows:
                    await self.flush()  # a slow client blocks here; its producer goes on
        finally:
            sub.close()
            self._subscription = None
        self.send(wire.copy_done())
        self.send(wire.command_complete(f"COPY {sent}"))

    # -- extended query -------------------------------------------------------------
    async def on_parse(self, r: wire.Reader) -> None:
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
                core, self.session.catalog, self.session.search_path(), declared, nparams
            )
            if stmt is not None
            else []
        )
        types: list[ColumnType] = []
        for i in range(nparams):
            if i < len(declared) and declared[i]:
                pg = BY_OID.get(declared[i])
                if pg is None:
                    raise FeatureNotSupported(
                        f"parameter type with OID {declared[i]} is not supported"
                    )
                types.append(ColumnType(pg))
            else:
                types.append(inferred[i] or ColumnType(TEXT))
        if name and name in self.session.prepared:
            raise SQLError(f'prepared statement "{name}" already exists', "42P05")
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
        self.send(wire.parse_complete())

    def on_bind(self, r: wire.Reader) -> None:
        assert self.session is not None
        portal_name = r.cstr()
        stmt_name = r.cstr()
        prep = self.session.prepared.get(stmt_name)
        if prep is None:
            raise InvalidPreparedStatement(f'prepared statement "{stmt_name}" does not exist')
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
            fmt = pformats[i] if i < len(pformats) else (pformats[0] if len(pformats) == 1 else 0)
            if fmt == 1:
                values.append(prep.binary_decoders[i](raw))
            else:
                values.append(prep.text_decoders[i](raw.decode("utf-8")))
        nres = r.int16()
        rformats = [r.int16() for _ in range(nres)]
        self.session.portals[portal_name] = Portal(portal_name, prep, values, rformats)
        self.send(wire.bind_complete())

    async def on_describe(self, r: wire.Reader) -> None:
        assert self.session is not None and self.executor is not None
        kind = r.byte()
        name = r.cstr()
        if kind == "S":
            prep = self.session.prepared.get(name)
            if prep is None:
                raise InvalidPreparedStatement(f'prepared statement "{name}" does not exist')
            self.send(wire.parameter_description([t.pg.oid for t in prep.param_types]))
            fields = await self.describe_fields(prep)
            self.send(wire.row_description(fields, []) if fields is not None else wire.no_data())
            return
        portal = self.session.portals.get(name)
        if portal is None:
            cursor = self.session.cursors.get(name)  # a DECLAREd cursor is a portal too
            if cursor is None:
                raise InvalidCursorName(f'portal "{name}" does not exist')
            self.send(wire.row_description(cursor.fields, []))  # (psycopg's named cursors)
            return
        await self.materialise(portal)
        if portal.fields is not None:
            self.send(wire.row_description(portal.fields, portal.result_formats))
        else:
            self.send(wire.no_data())

    async def describe_fields(self, prep: Prepared) -> list[Field] | None:
        assert self.executor is not None
        if prep.stmt is None:
            return None
        return await self.executor.describe(prep.stmt, len(prep.param_types))

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
            self.send(wire.notice_response(n))
        portal.fields = result.fields
        portal.rows = result.rows
        portal.tag = result.tag

    async def on_execute(self, r: wire.Reader) -> None:
        assert self.session is not None
        name = r.cstr()
        max_rows = r.int32()
        portal = self.session.portals.get(name)
        if portal is None:
            raise InvalidCursorName(f'portal "{name}" does not exist')
        await self.materialise(portal)
        if portal.tag == "":
            self.send(wire.empty_query())
            return
        if portal.fields is not None:
            rows = portal.rows or []
            end = len(rows) if max_rows <= 0 else min(len(rows), portal.pos + max_rows)
            self.send_rows(portal.fields, rows[portal.pos : end], portal.result_formats)
            portal.pos = end
            if end < len(rows):
                self.send(wire.portal_suspended())
                return
        tag = portal.tag or ""
        if portal.fields is not None and tag.startswith("SELECT"):
            tag = f"SELECT {len(portal.rows or [])}"
        self.send(wire.command_complete(tag))
        self._report_epoch()

    def on_close(self, r: wire.Reader) -> None:
        assert self.session is not None
        kind = r.byte()
        name = r.cstr()
        if kind == "S":
            self.session.prepared.pop(name, None)
        else:
            self.session.portals.pop(name, None)
        self.send(wire.close_complete())

    # -- cancellation and timeouts ---------------------------------------------------
    def _statement_timer(self) -> asyncio.TimerHandle | None:
        """statement_timeout: cancel the statement (as a cancel request does) when it is due."""
        self._timed_out = False
        assert self.session is not None
        ms = auth.setting_ms(self.session.settings.values.get("statement_timeout", "0"))
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
        ms = auth.setting_ms(s.settings.values.get("idle_in_transaction_session_timeout", "0"))
        return ms / 1000

    def terminate(self) -> None:
        """pg_terminate_backend: end the running statement and close the connection."""
        self.cancel()
        try:
            self.writer.write(
                wire.error_response(
                    SQLError(
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
