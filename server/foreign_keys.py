"""FOREIGN KEY enforcement, as PostgreSQL's RI triggers do it at the end of a statement.

A table's new row versions must find their key in the referenced table (23503
'insert or update on table ... violates foreign key constraint'); a referenced
table's retired versions whose key is gone take the referencing rows' action: NO
ACTION / RESTRICT raise 23503 ('update or delete on table ...'), CASCADE deletes or
updates them, SET NULL clears their key columns. Both run after the statement's rows
are in the replica (server/writes.apply), on the writing transaction's cursor, so a
statement that inserts a parent and its child together passes, as in PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import count
from typing import Any

import duckdb
import pglast.ast as A
import pyarrow as pa
from headwater.catalog.catalog import Catalog
from headwater.catalog.constraints import typed_text
from headwater.catalog.objects import ForeignKey, Relation, Table, replace
from headwater.planner.foreign_keys import referencing
from headwater.server.duckdb_calls import fetch, unregister_quietly
from headwater.server.py_values import first_row
from headwater.storage.changelog import RID
from headwater.storage.replica import CURRENT, Replica, physical, quote

from headwater.errors import FeatureNotSupported, SQLError

Apply = Callable[[Any, Table, pa.Table | None, pa.Table | None], None]
_names = count()


def constraint_names(cat: Catalog, schema: str) -> set[str]:
    """Every constraint name of `schema` (ChooseConstraintName avoids them all)."""
    out: set[str] = set()
    for t in cat.tables():
        if t.schema == schema:
            out.update(k.name for k in t.keys)
            out.update(c.name for c in t.checks)
            out.update(f.name for f in t.foreign_keys)
    return out


def resolver(cat: Catalog, search_path: tuple[str, ...]) -> Callable[[A.RangeVar], Relation]:
    return lambda rv: cat.get_relation(rv.schemaname, rv.relname, search_path)


def refuse_set_default(table: Table) -> None:
    for fk in table.foreign_keys:
        if "d" in (fk.on_delete, fk.on_update):
            raise FeatureNotSupported("ON DELETE / ON UPDATE SET DEFAULT is not supported")


def _key(columns: Sequence[str]) -> str:
    return ", ".join(columns)


def missing_key(table: Table, fk: ForeignKey, ref: Table, values: Sequence[Any]) -> SQLError:
    return SQLError(
        f'insert or update on table "{table.name}" violates foreign key constraint "{fk.name}"',
        "23503",
        detail=f"Key ({_key(fk.columns)})=({typed_text(table, fk.columns, values)}) "
        f'is not present in table "{ref.name}".',
    )


def _still_referenced(ref: Table, fk: ForeignKey, child: Table, values: Sequence[Any]) -> SQLError:
    return SQLError(
        f'update or delete on table "{ref.name}" violates foreign key constraint "{fk.name}" '
        f'on table "{child.name}"',
        "23503",
        detail=f"Key ({_key(fk.ref_columns)})=({typed_text(ref, fk.ref_columns, values)}) "
        f'is still referenced from table "{child.name}".',
    )


def mixed_nulls(table: Table, fk: ForeignKey) -> SQLError:
    return SQLError(
        f'insert or update on table "{table.name}" violates foreign key constraint "{fk.name}"',
        "23503",
        detail="MATCH FULL does not allow mixing of null and nonnull key values.",
    )


def _orphans_sql(table: Table, fk: ForeignKey, ref: Table, source: str) -> str:
    """The first row of `source` (with fk's columns) whose key `ref` lacks."""
    cols = [quote(c) for c in fk.columns]
    notnull = " AND ".join(f"n.{c} IS NOT NULL" for c in cols)
    on = " AND ".join(f"p.{quote(r)} = n.{c}" for r, c in zip(fk.ref_columns, cols, strict=True))
    return (
        f"SELECT {', '.join(f'n.{c}' for c in cols)} FROM {source} AS n WHERE {notnull} "
        f"AND NOT EXISTS (SELECT 1 FROM {Replica.scan(ref, CURRENT)} AS p WHERE {on}) LIMIT 1"
    )


def _full_mixed_sql(fk: ForeignKey, source: str) -> str:
    cols = [quote(c) for c in fk.columns]
    some = " OR ".join(f"{c} IS NULL" for c in cols)
    every = " AND ".join(f"{c} IS NULL" for c in cols)
    return f"SELECT 1 FROM {source} WHERE ({some}) AND NOT ({every}) LIMIT 1"


def check_rows(cat: Catalog, table: Table, new: pa.Table, cur: duckdb.DuckDBPyConnection) -> None:
    """23503 for the first of `new`'s rows whose key is not in the referenced table."""
    if not table.foreign_keys or not new.num_rows:
        return
    name = f"_hw_fk_new{next(_names)}"
    cur.register(name, new)
    try:
        for fk in table.foreign_keys:  # creation order, as their triggers fire
            _check_source(cat, table, fk, name, cur)
    finally:
        unregister_quietly(cur, name)


def _check_source(
    cat: Catalog, table: Table, fk: ForeignKey, source: str, cur: duckdb.DuckDBPyConnection
) -> None:
    ref = cat.by_oid(fk.ref_table)
    assert isinstance(ref, Table)
    if fk.match == "f" and len(fk.columns) > 1:
        bad, _ = fetch(cur, _full_mixed_sql(fk, source))
        if bad.num_rows:
            raise mixed_nulls(table, fk)
    bad, _ = fetch(cur, _orphans_sql(table, fk, ref, source))
    if bad.num_rows:
        raise missing_key(table, fk, ref, first_row(bad))


def check_existing(
    cat: Catalog, table: Table, fk: ForeignKey, cur: duckdb.DuckDBPyConnection
) -> None:
    """ALTER TABLE ADD / VALIDATE CONSTRAINT: the table's live rows (23503 as an INSERT)."""
    live = f"(SELECT * FROM {physical(table.oid)} WHERE {CURRENT})"
    _check_source(cat, table, fk, live, cur)


def on_parent_change(
    w: Any, table: Table, old: pa.Table, new: pa.Table | None, apply: Apply
) -> None:
    """The referencing rows of `table`'s retired versions `old` whose key is gone
    (`new`: the statement's new versions, by row id, for ON UPDATE)."""
    cat: Catalog = w.catalog
    refs = referencing(cat.tables(), table.oid)
    if not refs or not old.num_rows:
        return
    cur = w.cur
    oname, nname = f"_hw_fk_old{next(_names)}", f"_hw_fk_upd{next(_names)}"
    cur.register(oname, old)
    cur.register(nname, new if new is not None and new.num_rows else old.slice(0, 0))
    try:
        for child_table, fk in refs:
            child = cat.by_oid(child_table.oid)  # as an earlier cascade may have left it
            if not isinstance(child, Table) or fk not in child.foreign_keys:
                continue
            _act(w, table, child, fk, oname, nname, apply)
    finally:
        unregister_quietly(cur, oname)
        unregister_quietly(cur, nname)


def _act(
    w: Any, parent: Table, child: Table, fk: ForeignKey, oname: str, nname: str, apply: Apply
) -> None:
    cur = w.cur
    pcols = [quote(c) for c in fk.ref_columns]
    ccols = [quote(c) for c in fk.columns]
    notnull = " AND ".join(f"o.{c} IS NOT NULL" for c in pcols)
    present = " AND ".join(f"p.{c} = o.{c}" for c in pcols)
    new_vals = ", ".join(f"u.{c} AS _hw_new{i}" for i, c in enumerate(pcols))
    gone = (
        f"SELECT {', '.join(f'o.{c}' for c in pcols)}, u.{RID} IS NOT NULL AS _hw_upd, "
        f"{new_vals} FROM {oname} AS o LEFT JOIN {nname} AS u ON u.{RID} = o.{RID} "
        f"WHERE {notnull} AND NOT EXISTS "
        f"(SELECT 1 FROM {Replica.scan(parent, CURRENT)} AS p WHERE {present})"
    )
    match = " AND ".join(f"c.{cc} = g.{pc}" for cc, pc in zip(ccols, pcols, strict=True))
    for updated, action in ((False, fk.on_delete), (True, fk.on_update)):
        flag = "g._hw_upd" if updated else "NOT g._hw_upd"
        if action in ("a", "r"):
            hit, _ = fetch(
                cur,
                f"SELECT {', '.join(f'g.{c}' for c in pcols)} FROM ({gone}) AS g "
                f"WHERE {flag} AND EXISTS (SELECT 1 FROM {Replica.scan(child, CURRENT)} AS c "
                f"WHERE {match}) LIMIT 1",
            )
            if hit.num_rows:
                raise _still_referenced(parent, fk, child, first_row(hit))
            continue
        rows_sql = (
            f"SELECT c.* FROM {Replica.scan_with_rid(child)} AS c "
            f"WHERE EXISTS (SELECT 1 FROM ({gone}) AS g WHERE {flag} AND {match})"
        )
        if action == "c" and not updated:
            old, _ = fetch(cur, rows_sql)
            if old.num_rows:
                apply(w, child, old, None)
            continue
        if action == "c":  # ON UPDATE CASCADE: the key's new values
            values = {cc: f"g._hw_new{i}" for i, cc in enumerate(ccols)}
            sets = ", ".join(
                f"{values[quote(c.name)]} AS {quote(c.name)}"
                if quote(c.name) in values
                else f"c.{quote(c.name)}"
                for c in child.columns
            )
            both_sql = (
                f"SELECT c.{RID}, {sets} FROM {Replica.scan_with_rid(child)} AS c "
                f"JOIN ({gone}) AS g ON g._hw_upd AND {match}"
            )
        else:  # SET NULL
            sets = ", ".join(
                f"CAST(NULL AS {c.type.duckdb()}) AS {quote(c.name)}"
                if quote(c.name) in ccols
                else f"c.{quote(c.name)}"
                for c in child.columns
            )
            both_sql = f"SELECT c.{RID}, {sets} FROM ({rows_sql}) AS c"
        old, _ = fetch(cur, rows_sql)
        if not old.num_rows:
            continue
        new, _ = fetch(cur, both_sql)
        apply(w, child, old, new)


def truncate_check(cat: Catalog, tables: list[Table], cascade: bool) -> list[Table]:
    """TRUNCATE of `tables`: with CASCADE, the tables referencing them (to truncate too);
    without, 0A000 when a table outside the list references one."""
    names = {t.oid for t in tables}
    extra: list[Table] = []
    todo = list(tables)
    while todo:
        t = todo.pop(0)
        for child, _ in referencing(cat.tables(), t.oid):
            if child.oid in names:
                continue
            if not cascade:
                raise SQLError(
                    "cannot truncate a table referenced in a foreign key constraint",
                    "0A000",
                    detail=f'Table "{child.name}" references "{t.name}".',
                    hint=f'Truncate table "{child.name}" at the same time, or use TRUNCATE'
                    " ... CASCADE.",
                )
            names.add(child.oid)
            extra.append(child)
            todo.append(child)
    return extra


def drop_constraint(cat: Catalog, table_oid: int, name: str) -> None:
    """Remove foreign key `name` of table `table_oid` (a DROP ... CASCADE took what it
    references)."""
    t = cat.by_oid(table_oid)
    if isinstance(t, Table):
        kept = tuple(f for f in t.foreign_keys if f.name != name)
        cat.replace_relation(replace(t, foreign_keys=kept))


def referencing_others(cat: Catalog, table: Table) -> list[tuple[Table, ForeignKey]]:
    """Foreign keys of other tables that reference `table` (DROP TABLE's dependents)."""
    return [(t, f) for t, f in referencing(cat.tables(), table.oid) if t.oid != table.oid]
