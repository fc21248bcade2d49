"""A client session and its transaction state.

Transaction states follow ReadyForQuery: 'I' idle, 'T' in a transaction block,
'E' in a failed block (every statement gets 25P02 until ROLLBACK).

A transaction that writes holds the instance's write lock from its first write
until it ends (writers are serialised; readers never wait). Its DuckDB connection
runs one DuckDB transaction; rows it writes are stamped with its epoch, or with
PENDING inside an explicit block until COMMIT picks the epoch (one lower after each
SAVEPOINT: ROLLBACK TO forgets the versions stamped since, server/transactions.py).
"""

from __future__ import annotations

import datetime as dt
import itertools
import weakref
from collections import OrderedDict, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa
from headwater.catalog.catalog import Catalog
from headwater.catalog.pgtypes import SessionFormat
from headwater.catalog.pgtypes.session import date_order
from headwater.planner.functions.dates import XACT_START
from headwater.server.batcher import StagedWrites
from headwater.server.instance import Instance
from headwater.server.settings import Settings, setting_ms
from headwater.server.waits import Waits

_pids = itertools.count(1000)


@dataclass
class WriteTxn:
    cur: duckdb.DuckDBPyConnection
    explicit: bool
    stamp: int  # epoch (autocommit), or PENDING and lower after SAVEPOINTs (explicit block)
    epoch: int | None  # epoch joined with the committer, if any
    catalog: Catalog  # this transaction's copy; becomes current at COMMIT
    changes: dict[int, list[pa.Table]] = field(default_factory=lambda: defaultdict(list))
    touched: set[int] = field(default_factory=set)
    dropped_logs: list[bytes] = field(default_factory=list)
    # materialized views to backfill / to drop from the engine once the commit is durable
    created_matviews: list[int] = field(default_factory=list)
    dropped_matviews: list[int] = field(default_factory=list)
    # tables whose shape ALTER TABLE changed: their change log is rewritten at COMMIT
    # (server/alter.py), and the materialized views over them rebuilt (parents first)
    rewritten: set[int] = field(default_factory=set)
    rebuilt_matviews: list[int] = field(default_factory=list)
    # tables created or truncated since the block's last SAVEPOINT: COPY ... (FREEZE)
    # is allowed into them only, as in PostgreSQL
    fresh: set[int] = field(default_factory=set)
    # tables this transaction added versions to: only there can a version it retires
    # have been born under its own stamp (Replica.retire_versions)
    inserted: set[int] = field(default_factory=set)

    def mark(self) -> WriteMark:
        """A SAVEPOINT: what follows is stamped one lower (in a block)."""
        self.stamp -= 1
        self.fresh.clear()  # COPY FREEZE: tables fresh in this subtransaction only
        return WriteMark(
            self.stamp, {oid: len(parts) for oid, parts in self.changes.items()}, self.ddl()
        )

    def ddl(self) -> tuple[Any, ...]:
        changes = self.catalog.changes
        return (
            tuple((oid, id(obj)) for oid, obj in changes.items()),
            len(self.created_matviews),
            len(self.dropped_matviews),
            len(self.rewritten),
        )

    def schema_changed_since(self, mark: WriteMark) -> bool:
        return self.ddl() != mark.ddl


@dataclass
class WriteMark:
    """A writing transaction at a SAVEPOINT: what ROLLBACK TO goes back to."""

    stamp: int  # the stamp of the versions written after the savepoint (and lower)
    changes: dict[int, int]  # table oid -> change row parts recorded before it
    ddl: tuple[Any, ...]  # what tells a schema change since (not taken back: 0A000)


@dataclass
class Savepoint:
    name: str
    staged: Any  # StagedWrites.mark() when taken
    written: WriteMark | None  # None: taken before the writing transaction began


@dataclass
class Portal:
    name: str
    stmt: Any  # the prepared statement
    params: list[Any]
    result_formats: list[int]
    rows: list[tuple[Any, ...]] | None = None  # materialised result, consumed by Execute
    fields: list[Any] | None = None
    tag: str | None = None
    pos: int = 0


class Session:
    def __init__(self, instance: Instance, user: str, database: str) -> None:
        self.instance = instance
        self.user = user  # the session user (who logged in)
        self.database = database
        # the current role: privileges follow it; the session user's (server/connection.py)
        # until SET ROLE (sync_role)
        self.role_oid = 0
        self.session_role_oid = 0
        self.pid = next(_pids)
        self.secret = 0
        self.settings = Settings()
        self.settings.values["session_authorization"] = user
        self.settings.values["headwater.retention"] = f"{instance.config.retention:g}s"
        self.status = "I"
        self.write: WriteTxn | None = None
        # a block's fast-path INSERTs, until COMMIT or its first other statement
        self.staged = StagedWrites()
        self.savepoints: list[Savepoint] = []  # the block's, innermost last
        self.xact_start = dt.datetime.now(dt.UTC)  # when the transaction block began
        self.last_write_epoch = 0  # freshness token of this session's newest commit
        self._read_cur: duckdb.DuckDBPyConnection | None = None
        self.prepared: dict[str, Any] = {}
        self.portals: dict[str, Portal] = {}
        self.cursors: dict[str, Any] = {}  # DECLAREd cursors (SELECT or SUBSCRIBE)
        # the SQL functions inlined into the running statement (server/user_functions.py),
        # and the inlined copies of the statements seen lately
        self.functions_used: frozenset[int] = frozenset()
        self.inlined_memo: OrderedDict[int, tuple[Any, ...]] = OrderedDict()
        # DuckDB connection -> the TimeZone and the block's start set on it (weakly: a
        # new cursor may take a closed one's id, and with it its entry, unset)
        self._zones: weakref.WeakKeyDictionary[Any, tuple[str, dt.datetime | None]] = (
            weakref.WeakKeyDictionary()
        )
        # temporary tables (server/temp_tables.py): the session's pg_temp_N schema, once
        # it made one, and each temporary table's ON COMMIT action by oid
        self.temp_schema: str | None = None
        self.temp_on_commit: dict[int, str] = {}
        self.on_close: list[Callable[[], None]] = []  # run by close(): temp tables go
        # what the running statement waits for, ended by a CancelRequest
        self.waits = Waits(self._lock_timeout_ms, instance.config.write_lock_timeout)

    def _lock_timeout_ms(self) -> float:
        raw = self.settings.values.get("lock_timeout", "0")
        return 0.0 if raw == "0" else setting_ms(raw)  # (the default: no parsing)

    @property
    def current_user(self) -> str:
        """current_user: the role SET ROLE chose, else the session user."""
        name = self.settings.values.get("role", "none")
        return self.user if name == "none" else name

    def sync_role(self) -> None:
        """The current role after the settings changed (SET [LOCAL] ROLE, RESET, a
        ROLLBACK or the end of the block undoing them)."""
        name = self.settings.values.get("role", "none")
        role = None if name == "none" else self.catalog.role(name)
        self.role_oid = role.oid if role is not None else self.session_role_oid
        me = self.catalog.roles.get(self.role_oid)
        if me is not None:
            self.settings.values["is_superuser"] = "on" if me.superuser else "off"

    def date_order(self) -> str:
        """How the session reads ambiguous dates: its DateStyle's 'MDY', 'DMY' or 'YMD'."""
        return date_order(self.settings.values.get("DateStyle", "ISO, MDY"))

    def text_format(self) -> SessionFormat:
        """The settings that shape values' text (TimeZone, DateStyle, ...)."""
        v = self.settings.values
        return SessionFormat(
            timezone=v.get("TimeZone", "UTC"),
            extra_float_digits=int(v.get("extra_float_digits", "1")),
            datestyle=v.get("DateStyle", "ISO, MDY"),
            intervalstyle=v.get("IntervalStyle", "postgres"),
            bytea_output=v.get("bytea_output", "hex"),
        )

    def read_cursor(self) -> duckdb.DuckDBPyConnection:
        if self._read_cur is None:
            self._read_cur = self.instance.replica.cursor()
        return self.in_session_zone(self._read_cur)

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """The connection this session's next statement runs on."""
        return self.in_session_zone(self.write.cur) if self.write else self.read_cursor()

    def in_session_zone(
        self, cur: duckdb.DuckDBPyConnection, *, fresh: bool = False
    ) -> duckdb.DuckDBPyConnection:
        """DuckDB evaluates timestamptz casts and arithmetic in the session's TimeZone,
        and now() (hw_now: planner/functions/dates.py) as the transaction block's start
        (outside a block, DuckDB's own: the statement's)."""
        tz = self.settings.values["TimeZone"]
        clock = self.xact_start if self.status != "I" else None
        was = None if fresh else self._zones.get(cur)
        if was is None or was[0] != tz:
            cur.execute("SET TimeZone = ?", [tz])
        if (was[1] if was is not None else None) != clock:
            if clock is None:
                cur.execute(f"RESET VARIABLE {XACT_START}")
            else:
                cur.execute(f"SET VARIABLE {XACT_START} = CAST(? AS TIMESTAMPTZ)", [clock])
        self._zones[cur] = (tz, clock)
        return cur

    @property
    def catalog(self) -> Catalog:
        return self.write.catalog if self.write else self.instance.catalog

    def search_path(self) -> tuple[str, ...]:
        """The schemas names are looked up in: the session's temporary schema first
        (or where `pg_temp` is listed), as in PostgreSQL."""
        path = self.settings.search_path()
        temp = self.temp_schema
        if temp is None or temp not in self.catalog.schemas:
            return path
        if "pg_temp" in path:
            return tuple(temp if p == "pg_temp" else p for p in path)
        return (temp, *path)

    def close(self) -> None:
        for callback in self.on_close:
            callback()
        self.on_close.clear()
        for c in self.cursors.values():
            c.close()
        self.cursors.clear()
        if self._read_cur is not None:
            self._read_cur.close()
            self._read_cur = None
