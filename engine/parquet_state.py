"""The state both executors share: Parquet files per state table, listed by a manifest.

Every state, output and change-log table of a view (`s{v}_{i}_x`, `o{v}`, `l{v}`)
lives in the engine's DuckDB database, where the DuckDB executor updates it in
place. When Spark runs a batch, it reads and writes the same tables as Parquet:

    {state_dir}/parquet/{table}/{generation}/part-*.parquet

The manifest `hw_parquet(tbl, dir)` (in the engine's DuckDB database) lists the
directories whose files together hold exactly a table's rows. It is changed in the
transaction that moves the views' frontiers, together with the DuckDB copy of every
table Spark wrote: a batch's state change and frontier commit atomically, whichever
executor ran it (docs/adr/003-shared-state.md). Directories the manifest no longer
lists are removed after the commit (or the rollback), and at start (after a crash).

A table the DuckDB executor changed has no manifest entry (its batch deletes it in
its own transaction); Spark's next batch exports it once (DuckDB -> Arrow ->
Parquet) and lists the export. Tables only appended to by Spark (change logs, join
states) get one more directory per batch; past `MAX_PARTS` they are rewritten as one.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import uuid
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

MAX_PARTS = 16  # directories per table before Spark rewrites it as one


class Manifest:
    """The live Parquet directories of each table, mirrored in memory; changes are
    made on the caller's cursor inside its transaction (`commit` / `rollback` after)."""

    def __init__(self, root: Path, cur: duckdb.DuckDBPyConnection) -> None:
        self.root = root / "parquet"
        self.root.mkdir(parents=True, exist_ok=True)
        cur.execute("CREATE TABLE IF NOT EXISTS hw_parquet (tbl VARCHAR, dir VARCHAR)")
        self.live: dict[str, list[str]] = {}
        self._load(cur)
        self._created: list[str] = []  # directories written in the open transaction
        self._dropped: list[str] = []  # directories unlisted in the open transaction
        # held while unlisted directories are deleted: a copy of the state for the object
        # store (engine/state_copy.py) holds it to link the files its transaction lists
        self.lock = threading.Lock()
        self.collect_garbage()

    def _load(self, cur: duckdb.DuckDBPyConnection) -> None:
        self.live.clear()
        for tbl, d in cur.execute("SELECT tbl, dir FROM hw_parquet ORDER BY rowid").fetchall():
            self.live.setdefault(tbl, []).append(d)

    def new_dir(self, table: str) -> str:
        """A directory for a new generation of `table`'s files (not listed yet)."""
        d = str(self.root / table / uuid.uuid4().hex)
        self._created.append(d)
        return d

    def files(self, table: str) -> list[str]:
        return sorted(str(p) for d in self.live.get(table, []) for p in Path(d).glob("*.parquet"))

    def replace(self, cur: duckdb.DuckDBPyConnection, table: str, d: str) -> None:
        self.forget(cur, [table])
        self.add(cur, table, d)

    def add(self, cur: duckdb.DuckDBPyConnection, table: str, d: str) -> None:
        cur.execute("INSERT INTO hw_parquet VALUES (?, ?)", [table, d])
        self.live.setdefault(table, []).append(d)

    def forget(self, cur: duckdb.DuckDBPyConnection, tables: list[str]) -> None:
        """The DuckDB copy of these tables changed (or they are gone): unlist them."""
        listed = [t for t in tables if t in self.live]
        if not listed:
            return
        marks = ", ".join("?" for _ in listed)
        cur.execute(f"DELETE FROM hw_parquet WHERE tbl IN ({marks})", listed)
        for t in listed:
            self._dropped.extend(self.live.pop(t))

    def export(self, cur: duckdb.DuckDBPyConnection, table: str) -> None:
        """List a Parquet copy of a DuckDB table (as the open transaction sees it)."""
        t = cur.sql(f"SELECT * FROM {table}").to_arrow_table()
        d = self.new_dir(table)
        write_arrow(t, d)
        self.replace(cur, table, d)

    def commit(self) -> None:
        with self.lock:
            for d in self._dropped:
                shutil.rmtree(d, ignore_errors=True)
        self._created.clear()
        self._dropped.clear()

    def rollback(self, cur: duckdb.DuckDBPyConnection) -> None:
        for d in self._created:
            shutil.rmtree(d, ignore_errors=True)
        self._created.clear()
        self._dropped.clear()
        self._load(cur)

    def collect_garbage(self) -> None:
        """Remove directories no table lists (a crash between write and commit)."""
        keep = {d for ds in self.live.values() for d in ds}
        for table_dir in self.root.iterdir():
            if not table_dir.is_dir():
                continue
            for d in table_dir.iterdir():
                if str(d) not in keep:
                    shutil.rmtree(d, ignore_errors=True)
            with contextlib.suppress(OSError):
                table_dir.rmdir()  # only if empty


def write_arrow(t: pa.Table, d: str) -> None:
    Path(d).mkdir(parents=True, exist_ok=True)
    pq.write_table(t, f"{d}/part-0.parquet")
