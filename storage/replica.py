"""The DuckDB serving replica: every table with its recent versions.

Each user table is stored as `hw.t{oid}` with three hidden columns:

    _hw_rid   row id, stable across UPDATEs (the change log's key)
    _hw_from  epoch the version became visible
    _hw_to    epoch it stopped being visible (LIVE while current)

A read at epoch E sees `_hw_from <= E < _hw_to`, so any retained epoch can be read
and rows of an epoch that is not yet durable stay invisible. A transaction with
explicit BEGIN stamps its rows PENDING (one lower after each SAVEPOINT, so that ROLLBACK
TO can tell what came after it) and restamps them with its epoch at COMMIT.
The replica is rebuilt from the change log at start (see `rebuild_table`).
"""

from __future__ import annotations

import os
import sys
import threading
from array import array
from collections.abc import Callable, Iterable
from pathlib import Path

import duckdb
import pyarrow as pa
from headwater.catalog.identifiers import quote
from headwater.catalog.objects import Table
from headwater.storage.changelog import EVENT_EPOCH, RID, WEIGHT
from headwater.storage.key_index import KeyIndex

LIVE = 2**63 - 1  # the `_hw_to` of a row version that is still current
PENDING = 2**63 - 2
PENDING_LOW = PENDING - 2**32  # the lowest stamp a block's SAVEPOINTs take
FROM = "_hw_from"
TO = "_hw_to"
HIDDEN = (RID, FROM, TO)
# Versions a statement retires named in its SQL up to this many: a constant list lets
# DuckDB skip row groups by their row-id ranges, where a semi-join with an Arrow table
# scans the whole table (100 k rows: ~0.5 against ~4 ms for one row)
INLINE_RIDS = 256


def physical(oid: int) -> str:
    return f"hw.t{oid}"


def column_list(table: Table) -> str:
    return ", ".join(quote(c.name) for c in table.columns)


def visible_at(epoch: int | str) -> str:
    return f"{FROM} <= {epoch} AND {TO} > {epoch}"


CURRENT = f"{TO} = {LIVE}"

# DuckDB checkpoints (compresses and rewrites) every row group a table's changes touched
# once its changes since the last one pass this size: at 16 MB (DuckDB's default), a
# batch of 4,000-row UPDATEs of TPC-H SF 0.1's lineitem (600 k rows, keys spread over
# every row group) paid a ~1 s checkpoint every ~10 statements (~110 ms of CPU per
# statement, and a COMMIT that waits ~1 s). Its cost follows the table, not the
# changes: 16 times the threshold, 16 times fewer. Meanwhile the changes wait
# uncompressed in memory. (The setting is the instance's: the views' state database
# ATTACHed to it, engine/engine.py, keeps up to as much WAL before its checkpoint.)
CHECKPOINT_THRESHOLD = 256 << 20


class _NoPandas:
    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> None:
        if name == "pandas":
            raise ImportError("pandas is not imported for pyarrow's pandas check")


def keep_pandas_unimported() -> None:
    """Keep pyarrow from importing pandas (0.5 s of CPU, 2-3 s at load 25) the first
    time it converts Python values (pa.array, pa.table, pa.scalar: its pandas shim looks
    for pandas objects, which the server never passes it). The shim tries the import
    once and remembers that it failed; pyarrow's pandas conversions (to_pandas,
    from_pandas) still import pandas when called. For the server process only."""
    if "pandas" in sys.modules:
        return
    sys.meta_path.insert(0, _NoPandas)
    try:
        pa.array([0])  # the shim's one try
    finally:
        sys.meta_path.remove(_NoPandas)


def machine_memory() -> int:
    """Bytes of memory this process may use: the machine's, or its cgroup's limit if lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(limit).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return total


def default_memory_limit() -> int:
    """Half the memory, in whole MB: DuckDB's own default (80%) leaves too little for the
    rest of the server (result rows and COPY buffers in Python, SlateDB, the Spark JVM)."""
    return (machine_memory() // 2) >> 20 << 20


class Replica:
    def __init__(
        self,
        memory_limit: int | None = None,
        temp_directory: Path | None = None,
        install_functions: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
    ) -> None:
        """memory_limit: bytes DuckDB may use for the tables and every query's operators;
        beyond it, table data, sorts, joins and aggregates spill to temp_directory.
        install_functions: adds the functions the planner's SQL calls (PostgreSQL
        semantics DuckDB lacks: planner/pg_compat.py), passed in from above."""
        self._db = duckdb.connect(":memory:")
        if install_functions is not None:
            install_functions(self._db)
        self.memory_limit = memory_limit or default_memory_limit()
        self._db.execute("SET memory_limit = ?", [f"{self.memory_limit}B"])
        self._db.execute(f"SET checkpoint_threshold = '{CHECKPOINT_THRESHOLD}B'")
        if temp_directory is not None:
            # Not DuckDB's default for an in-memory database (./.tmp, wherever the server
            # was started); DuckDB removes the files of a crashed process itself.
            self._db.execute("SET temp_directory = ?", [str(temp_directory)])
        self._db.execute("CREATE SCHEMA hw")
        self._lock = threading.Lock()
        self.keys = KeyIndex()  # rows by key for point reads, kept by Committer.on_durable

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A connection of its own (thread-safe to use from one thread at a time)."""
        with self._lock:
            cur = self._db.cursor()
        # PostgreSQL semantics where DuckDB differs by default.
        cur.execute("SET integer_division = true")
        return cur

    # -- DDL ------------------------------------------------------------------------
    @staticmethod
    def create_table(cur: duckdb.DuckDBPyConnection, table: Table) -> None:
        cols = ", ".join(f"{quote(c.name)} {c.type.duckdb()}" for c in table.columns)
        sep = ", " if cols else ""
        hidden = f"{RID} BIGINT, {FROM} BIGINT, {TO} BIGINT"
        cur.execute(f"CREATE TABLE {physical(table.oid)} ({hidden}{sep}{cols})")

    @staticmethod
    def drop_table(cur: duckdb.DuckDBPyConnection, oid: int) -> None:
        cur.execute(f"DROP TABLE IF EXISTS {physical(oid)}")

    # -- reads ----------------------------------------------------------------------
    @staticmethod
    def scan(table: Table, predicate: str) -> str:
        """A subquery yielding the table's user columns under `predicate`."""
        cols = column_list(table)
        return f"(SELECT {cols} FROM {physical(table.oid)} WHERE {predicate})"

    @staticmethod
    def key_lookup(table: Table, key: tuple[str, ...]) -> str:
        """The rows whose `key` columns equal $1.. at epoch $n+1, each with the epoch its
        version began first (a point read's miss: storage/key_index.py)."""
        cols = column_list(table)
        sep = ", " if cols else ""
        match = " AND ".join(f"{quote(c)} = ${i}" for i, c in enumerate(key, 1))
        e = f"${len(key) + 1}"
        return (
            f"SELECT {FROM}{sep}{cols} FROM {physical(table.oid)} "
            f"WHERE {match} AND {FROM} <= {e} AND {TO} > {e}"
        )

    @staticmethod
    def rows_at(table: Table) -> str:
        """Every row at epoch $1, each with the epoch its version began first (a bulk
        read of the point-read cache: storage/key_index.py)."""
        cols = column_list(table)
        sep = ", " if cols else ""
        return f"SELECT {FROM}{sep}{cols} FROM {physical(table.oid)} WHERE {visible_at('$1')}"

    @staticmethod
    def scan_with_rid(table: Table) -> str:
        """The writer's current rows of a table, with their row ids."""
        cols = column_list(table)
        sep = ", " if cols else ""
        return f"(SELECT {RID}{sep}{cols} FROM {physical(table.oid)} WHERE {CURRENT})"

    # -- writes ---------------------------------------------------------------------
    @staticmethod
    def insert_versions(
        cur: duckdb.DuckDBPyConnection, table: Table, rows: pa.Table, stamp: int | None
    ) -> None:
        """Add `rows` (_hw_rid + user columns) as versions starting at `stamp` (None: at
        each row's own `_hw_from`, a column of `rows`, and ending at its `_hw_to` if
        `rows` has one)."""
        if rows.num_rows == 0:
            return
        # DuckDB reads the local variable by its name (a replacement scan): registering
        # and unregistering a view would be two more catalog changes, ~1 ms of CPU
        _hw_new_versions = rows  # noqa: F841
        cols = column_list(table)
        sep = ", " if cols else ""
        until = TO if stamp is None and TO in rows.column_names else LIVE
        cur.execute(
            f"INSERT INTO {physical(table.oid)} ({RID}, {FROM}, {TO}{sep}{cols}) "
            f"SELECT {RID}, {FROM if stamp is None else stamp}, {until}{sep}{cols} "
            "FROM _hw_new_versions"
        )

    @staticmethod
    def retire_versions(
        cur: duckdb.DuckDBPyConnection,
        table: Table,
        rids: pa.Array,
        stamp: int,
        born: bool = True,
    ) -> None:
        """End the live versions of `rids` at `stamp`, and drop those born at `stamp`
        (`born` False: the caller knows none was, so that is not looked for)."""
        if len(rids) == 0:
            return
        t = physical(table.oid)
        if len(rids) <= INLINE_RIDS:  # row ids are integers we made: nothing to escape
            match = f"{CURRENT} AND {RID} IN ({', '.join(map(str, rids.to_pylist()))})"
        else:  # read by its name (a replacement scan), as in insert_versions
            _hw_retired = pa.table({RID: rids})  # noqa: F841
            match = f"{CURRENT} AND {RID} IN (SELECT {RID} FROM _hw_retired)"
        # DuckDB's DELETE scans even when it matches nothing (at 600 k rows ~250 ms
        # the first time, ~3 ms after); a statement mostly retires older versions
        if born:
            probe = f"SELECT 1 FROM {t} WHERE {FROM} = {stamp} AND {CURRENT} LIMIT 1"
            born = cur.execute(probe).fetchone() is not None
        if born:
            cur.execute(f"DELETE FROM {t} WHERE {FROM} = {stamp} AND {match}")
        cur.execute(f"UPDATE {t} SET {TO} = {stamp} WHERE {match}")

    @staticmethod
    def retire_at(cur: duckdb.DuckDBPyConnection, table: Table, ends: dict[int, list[int]]) -> None:
        """End the live versions of each epoch's row ids at that epoch, none of them
        born at it (the batcher knows): one statement for up to INLINE_RIDS rows."""
        rids = [r for rs in ends.values() for r in rs]
        if len(ends) == 1 or len(rids) > INLINE_RIDS:
            for epoch, some in ends.items():
                Replica.retire_versions(cur, table, pa.array(some, pa.int64()), epoch, False)
            return
        cases = " ".join(
            f"WHEN {RID} IN ({', '.join(map(str, rs))}) THEN {epoch}" for epoch, rs in ends.items()
        )
        cur.execute(
            f"UPDATE {physical(table.oid)} SET {TO} = CASE {cases} END "
            f"WHERE {CURRENT} AND {RID} IN ({', '.join(map(str, rids))})"
        )

    @staticmethod
    def restamp(cur: duckdb.DuckDBPyConnection, oids: Iterable[int], epoch: int) -> None:
        """At COMMIT: a transaction's pending versions take its epoch (one statement a
        table: each costs ~1 ms whatever it changes)."""
        pending = f"BETWEEN {PENDING_LOW} AND {PENDING}"
        for oid in oids:
            cur.execute(
                f"UPDATE {physical(oid)} SET "
                f"{FROM} = CASE WHEN {FROM} {pending} THEN {epoch} ELSE {FROM} END, "
                f"{TO} = CASE WHEN {TO} {pending} THEN {epoch} ELSE {TO} END "
                f"WHERE {FROM} {pending} OR {TO} {pending}"
            )

    @staticmethod
    def undo_stamps(cur: duckdb.DuckDBPyConnection, oids: Iterable[int], stamp: int) -> None:
        """ROLLBACK TO SAVEPOINT: forget the versions a block added at stamps <= `stamp`
        (those after the savepoint) and make the ones it ended there live again."""
        since = f"BETWEEN {PENDING_LOW} AND {stamp}"
        for oid in oids:
            t = physical(oid)
            cur.execute(f"DELETE FROM {t} WHERE {FROM} {since}")
            cur.execute(f"UPDATE {t} SET {TO} = {LIVE} WHERE {TO} {since}")

    def undo_epochs(self, oids: Iterable[int], first_epoch: int) -> None:
        """Forget every version written by epochs >= first_epoch (they never became durable)."""
        cur = self.cursor()
        try:
            since = f"BETWEEN {first_epoch} AND {PENDING_LOW - 1}"
            for oid in oids:
                t = physical(oid)
                cur.execute(f"DELETE FROM {t} WHERE {FROM} {since}")
                cur.execute(f"UPDATE {t} SET {TO} = {LIVE} WHERE {TO} {since}")
        finally:
            cur.close()

    def vacuum(self, oids: Iterable[int], horizon: int) -> int:
        """Forget versions no read at an epoch >= horizon can see; returns rows removed."""
        cur = self.cursor()
        removed = 0
        try:
            for oid in oids:
                row = cur.execute(f"DELETE FROM {physical(oid)} WHERE {TO} <= {horizon}").fetchone()
                removed += int(row[0]) if row else 0
        finally:
            cur.close()
        return removed

    @staticmethod
    def history(cur: duckdb.DuckDBPyConnection, table: Table) -> pa.Table:
        """Every version of the table as change-log events, each with its epoch
        (_hw_epoch): +1 where it begins, -1 where it ends. A rewritten table's log
        (storage/changelog.py); `rebuild_table` turns it back into these versions."""
        cols = column_list(table)
        sep = ", " if cols else ""
        t = physical(table.oid)
        return cur.execute(
            f"SELECT {RID}{sep}{cols}, CAST(1 AS BIGINT) AS {WEIGHT}, {FROM} AS {EVENT_EPOCH} "
            f"FROM {t} UNION ALL "
            f"SELECT {RID}{sep}{cols}, CAST(-1 AS BIGINT) AS {WEIGHT}, {TO} AS {EVENT_EPOCH} "
            f"FROM {t} WHERE {TO} <> {LIVE} ORDER BY {EVENT_EPOCH}, {RID}"
        ).to_arrow_table()

    # -- recovery -------------------------------------------------------------------
    def rebuild_table(self, table: Table, log: list[tuple[int, pa.Table]]) -> int:
        """Rebuild a table's versions from its change log; returns live rows."""
        cur = self.cursor()
        try:
            self.create_table(cur, table)
            if not log:
                return 0
            # every event's epoch (a rewrite's events carry theirs: storage/changelog.py);
            # from a buffer, since pa.array() would import pandas (0.5 s of CPU at start
            # that no recovery needs)
            parts = []
            for e, t in log:
                if EVENT_EPOCH not in t.column_names:
                    n = t.num_rows
                    epochs = array("q", [e]) * n
                    col = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(epochs)])
                    t = t.append_column(EVENT_EPOCH, col)
                parts.append(t)
            events = pa.concat_tables(parts, promote_options="permissive")
            cur.register("_hw_events", events)
            cols = column_list(table)
            sep = ", " if cols else ""
            # A +1 event opens a version; the next -1 event of its row id at a later epoch
            # closes it (a window per row id, not a correlated subquery per event).
            cur.execute(
                f"""INSERT INTO {physical(table.oid)} ({RID}, {FROM}, {TO}{sep}{cols})
                SELECT {RID}, _hw_epoch, coalesce(_hw_until, {LIVE}){sep}{cols} FROM (
                    SELECT {RID}, _hw_epoch, {WEIGHT}{sep}{cols},
                           min(CASE WHEN {WEIGHT} < 0 THEN _hw_epoch END) OVER (
                               PARTITION BY {RID} ORDER BY _hw_epoch
                               RANGE BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING
                           ) AS _hw_until
                    FROM _hw_events
                ) WHERE {WEIGHT} > 0"""
            )
            cur.unregister("_hw_events")
            row = cur.execute(
                f"SELECT count(*) FROM {physical(table.oid)} WHERE {CURRENT}"
            ).fetchone()
            return int(row[0]) if row else 0
        finally:
            cur.close()

    def max_rid(self, oids: Iterable[int]) -> int:
        """The largest row id stored in any of the tables (0 if none)."""
        cur = self.cursor()
        try:
            top = 0
            for oid in oids:
                row = cur.execute(f"SELECT max({RID}) FROM {physical(oid)}").fetchone()
                top = max(top, int(row[0] or 0) if row else 0)
            return top
        finally:
            cur.close()
