"""A consistent copy of the engine's state on local disk, to ship to the object store.

What a server started on an empty data directory needs to go on where this one was
(docs/storage.md "Object storage"):
- the engine's DuckDB database (registry, frontiers, every state, output and change-log
  table, the Parquet manifest `hw_parquet`), copied in one DuckDB transaction;
- the Parquet files that manifest lists, as that same transaction sees it
  (engine/parquet_state.py: Spark's copy of the states);
- Spark's checkpoint of the stage's streaming query (its offset and commit logs).

They describe one state. The checkpoint is copied first: a batch it records as
committed had committed its views' frontiers before (Spark writes `commits/N` after
`foreachBatch` returns), so the database copied after it reflects every such batch; a
batch found only in `offsets/` is replayed after a restore and views skip the epochs
their frontier covers. The Parquet files are hard-linked while the manifest holds its
deletions (`Manifest.lock`) and after the copy's transaction began, so each file that
transaction lists is still there, even if a batch unlists and deletes it meanwhile.

Everything lands in one staging directory, relative paths as under the state
directory, so that `relocate` can put a fetched copy back in place.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
from headwater.engine.engine import ATTACHED, Engine

DATABASE = "engine.duckdb"  # the DuckDB copy, relative to the staging directory
CHECKPOINT = "checkpoint"  # Spark's checkpoint, as under the state directory
PARQUET = "parquet"  # Manifest.root's name


@dataclass(frozen=True)
class StateCopy:
    root: Path  # the staging directory
    # relative path -> immutable (the name never holds other bytes: Parquet generations
    # are uuid directories); the rest (the database, the checkpoint) may be rewritten
    files: dict[str, bool]
    fingerprint: tuple[Any, ...]  # what the copy reflects (an equal one: nothing changed)
    last_epoch: int  # the newest epoch the stage processed
    frontiers: tuple[int, int] | None  # lowest and highest frontier of running views


def capture(engine: Engine, into: Path, previous: tuple[Any, ...] | None) -> StateCopy | None:
    """Copy the engine's state into `into` (emptied first); None when its fingerprint
    equals `previous` (no batch, view or Parquet generation since that copy)."""
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    files: dict[str, bool] = {}
    ck = engine.state_dir / CHECKPOINT
    for path in sorted(ck.rglob("*")) if ck.is_dir() else []:
        # hidden files are Spark's temporary files and checksums (optional on read)
        if path.is_file() and not path.name.startswith("."):
            rel = path.relative_to(engine.state_dir).as_posix()
            if _link(path, into / rel):
                files[rel] = False
    cur = engine._db.cursor()
    snap = into / DATABASE
    db = ATTACHED if engine.schema else _current_database(cur)
    try:
        cur.execute(f"ATTACH '{_literal(snap)}' AS hw_state_copy")
        cur.execute("BEGIN")
        try:
            with engine.manifest.lock:  # unlisted generations are not deleted meanwhile
                listed = cur.execute(f"SELECT tbl, dir FROM {db}.hw_parquet ORDER BY ALL")
                parquet = [(str(t), str(d)) for t, d in listed.fetchall()]
                for _, d in parquet:
                    found = sorted(Path(d).glob("*.parquet"))
                    if not found or not all(_link(f, into / _parquet_rel(f)) for f in found):
                        raise RuntimeError(f"the Parquet files of {d} are missing")
                    files.update((_parquet_rel(f), True) for f in found)
            row = cur.execute(f"SELECT max(v) FROM {db}.hw_stage WHERE k = 'end'").fetchone()
            last = int(row[0]) if row and row[0] is not None else 0
            registry = tuple(
                cur.execute(
                    f"SELECT view, frontier, status FROM {db}.hw_views ORDER BY view"
                ).fetchall()
            )
            fingerprint = (last, registry, tuple(parquet))
            if fingerprint == previous:
                cur.execute("ROLLBACK")
                return None
            cur.execute(f"COPY FROM DATABASE {db} TO hw_state_copy")
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        finally:
            cur.execute("DETACH hw_state_copy")
    finally:
        cur.close()
    files[DATABASE] = False
    fronts = [int(f) for _, f, status in registry if status == "running"]
    return StateCopy(into, files, fingerprint, last, (min(fronts), max(fronts)) if fronts else None)


def relocate(state_dir: Path) -> tuple[int, int]:
    """A copy fetched into `state_dir`: point its Parquet manifest at the files here
    (it names them by the absolute paths of the server that copied them). A table whose
    files are not all here loses its listing: its DuckDB copy is complete, and Spark
    exports it again. Returns (tables listed, tables unlisted)."""
    db = duckdb.connect(str(state_dir / DATABASE))
    kept = dropped = 0
    try:
        tables = {r[0] for r in db.execute("SHOW TABLES").fetchall()}
        if "hw_parquet" not in tables:
            return 0, 0
        rows = db.execute("SELECT rowid, tbl, dir FROM hw_parquet").fetchall()
        missing: set[str] = set()
        for rowid, tbl, d in rows:
            here = state_dir / PARQUET / Path(d).parent.name / Path(d).name
            if not any(here.glob("*.parquet")):
                missing.add(tbl)
            db.execute("UPDATE hw_parquet SET dir = ? WHERE rowid = ?", [str(here), rowid])
        for tbl in missing:
            db.execute("DELETE FROM hw_parquet WHERE tbl = ?", [tbl])
        kept = len({r[1] for r in rows} - missing)
        dropped = len(missing)
    finally:
        db.close()
    return kept, dropped


def _parquet_rel(f: Path) -> str:
    """`parquet/{table}/{generation}/{file}`, wherever the state directory is."""
    return f"{PARQUET}/{f.parent.parent.name}/{f.parent.name}/{f.name}"


def _link(src: Path, dst: Path) -> bool:
    """Hard-link (a copy across file systems); False when `src` is gone."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except FileNotFoundError:
        return False
    except OSError:
        try:
            shutil.copyfile(src, dst)
        except FileNotFoundError:
            return False
    return True


def _current_database(cur: duckdb.DuckDBPyConnection) -> str:
    row = cur.execute("SELECT current_database()").fetchone()
    assert row is not None
    return str(row[0])


def _literal(path: Path) -> str:
    return str(path).replace("'", "''")
