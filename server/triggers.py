"""CREATE TRIGGER / DROP TRIGGER, and the triggers applied to a write's new rows.

A BEFORE INSERT [OR UPDATE] ... FOR EACH ROW trigger runs a PL/pgSQL function that
assigns NEW's fields (the `updated_at` idiom of every migration framework); its body is
compiled to one SQL expression per assigned column (planner/plpgsql.py), and every
write's new row versions (INSERT, UPDATE, COPY, ON CONFLICT, foreign key actions:
server/writes.py `apply`) get those values before generated columns and constraints
are computed, in trigger-name order as PostgreSQL fires them. A table with triggers
takes the general write path. AFTER, statement-level and INSTEAD OF triggers, DELETE
and TRUNCATE events, `UPDATE OF columns` and trigger arguments are refused (0A000).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import duckdb
import pglast.ast as A
import pyarrow as pa
import pyarrow.compute as pc
from headwater.catalog.catalog import Catalog
from headwater.catalog.objects import Column, Function, Table, Trigger
from headwater.planner.dml import to_column_sql
from headwater.planner.plpgsql import OLD_PREFIX, compile_trigger, when_condition
from headwater.planner.relations import deparse
from headwater.planner.syntax import nodes
from headwater.server.checks import condition_sql
from headwater.server.duckdb_calls import fetch, unregister_quietly
from headwater.server.results import Result
from headwater.server.session import Session, WriteTxn
from headwater.storage.changelog import RID
from headwater.storage.replica import quote

from headwater.errors import (
    DuplicateObject,
    FeatureNotSupported,
    SQLError,
    UndefinedFunction,
    UndefinedObject,
    WrongObjectType,
)

# pglast's CreateTrigStmt: timing and events bits (PostgreSQL's TRIGGER_TYPE_*)
_BEFORE, _INSERT, _DELETE, _UPDATE, _TRUNCATE, _INSTEAD = 2, 4, 8, 16, 32, 64
_HINT = "Headwater runs BEFORE INSERT / UPDATE ... FOR EACH ROW triggers."


def create(s: Session, w: WriteTxn, stmt: A.CreateTrigStmt) -> Result:
    cat = w.catalog
    rv = stmt.relation
    table = cat.get_relation(rv.schemaname, rv.relname, s.search_path())
    if not isinstance(table, Table):
        raise WrongObjectType(
            f'"{rv.relname}" is not a table', detail="Triggers on views are not supported here."
        )
    refused = (
        (stmt.isconstraint, "CREATE CONSTRAINT TRIGGER"),
        (not stmt.row, "FOR EACH STATEMENT triggers"),
        (stmt.timing & _INSTEAD, "INSTEAD OF triggers"),
        (not stmt.timing & _BEFORE, "AFTER triggers"),
        (stmt.events & (_DELETE | _TRUNCATE), "DELETE and TRUNCATE triggers"),
        (bool(stmt.columns), "UPDATE OF columns triggers"),
        (bool(stmt.args), "trigger arguments"),
        (bool(stmt.transitionRels), "REFERENCING transition tables"),
    )
    for bad, what in refused:
        if bad:
            raise FeatureNotSupported(f"{what} are not supported", hint=_HINT)
    fn = _function(s, cat, [n.sval for n in stmt.funcname])
    events = ("i" if stmt.events & _INSERT else "") + ("u" if stmt.events & _UPDATE else "")
    when = deparse(stmt.whenClause) if stmt.whenClause is not None else None
    if when is not None:
        _check_when(stmt.whenClause, events, table)
    existing = next((t for t in table.triggers if t.name == stmt.trigname), None)
    if existing is not None and not stmt.replace:
        raise DuplicateObject(
            f'trigger "{stmt.trigname}" for relation "{table.name}" already exists'
        )
    oid = existing.oid if existing is not None else cat.allocate_oid()
    trigger = Trigger(oid, stmt.trigname, fn.oid, events, when)
    others = tuple(t for t in table.triggers if t.name != stmt.trigname)
    triggers = tuple(sorted((*others, trigger), key=lambda t: t.name))
    cat.replace_relation(replace(table, triggers=triggers))
    return Result("CREATE TRIGGER")


def _function(s: Session, cat: Catalog, names: list[str]) -> Function:
    schema = names[0] if len(names) == 2 else None
    found = [f for f in cat.find_functions(schema, names[-1], s.search_path()) if not f.params]
    if not found:
        raise UndefinedFunction(f"function {'.'.join(names)}() does not exist")
    fn = found[0]
    if fn.returns != "trigger":
        raise SQLError(f"function {fn.name} must return type trigger", "42P17")
    return fn


def _check_when(node: Any, events: str, table: Table) -> None:
    for n in nodes(node):
        if isinstance(n, A.ColumnRef) and len(n.fields) == 2:
            record = n.fields[0].sval if isinstance(n.fields[0], A.String) else ""
            if record == "old" and "i" in events:
                raise SQLError(
                    "INSERT trigger's WHEN condition cannot reference OLD values", "42P17"
                )
            column = n.fields[1]
            if record in ("new", "old") and isinstance(column, A.String):
                if table.column(column.sval) is None:
                    raise SQLError(f'column "{column.sval}" does not exist', "42703")


def drop(s: Session, w: WriteTxn, stmt: A.DropStmt) -> Result:
    cat = w.catalog
    notices: list[str | SQLError] = []
    for obj in stmt.objects:
        names = [n.sval for n in obj]
        *table_names, name = names
        table = cat.resolve(
            table_names[0] if len(table_names) == 2 else None, table_names[-1], s.search_path()
        )
        if table is None:
            if stmt.missing_ok:
                notices.append(f'relation "{".".join(table_names)}" does not exist, skipping')
                continue
            raise SQLError(f'relation "{".".join(table_names)}" does not exist', "42P01")
        triggers = getattr(table, "triggers", ())
        if not any(t.name == name for t in triggers):
            if stmt.missing_ok:
                notices.append(
                    f'trigger "{name}" for relation "{table.name}" does not exist, skipping'
                )
                continue
            raise UndefinedObject(f'trigger "{name}" for table "{table.name}" does not exist')
        cat.replace_relation(replace(table, triggers=tuple(t for t in triggers if t.name != name)))
    return Result("DROP TRIGGER", notices=notices)


def users(cat: Catalog, fn: Function) -> list[tuple[Table, Trigger]]:
    """The triggers that run `fn`, oldest first (DROP FUNCTION names them)."""
    found = [(t, trg) for t in cat.tables() for trg in t.triggers if trg.function == fn.oid]
    return sorted(found, key=lambda p: p[1].oid)


def without(cat: Catalog, table: Table, trigger: Trigger) -> None:
    cat.replace_relation(
        replace(table, triggers=tuple(t for t in table.triggers if t.oid != trigger.oid))
    )


# -- firing --------------------------------------------------------------------------------
def fire(
    cat: Catalog, table: Table, new: pa.Table, old: pa.Table | None, cur: duckdb.DuckDBPyConnection
) -> pa.Table:
    """`new` (a write's new row versions, with hidden columns) after the table's BEFORE
    row triggers: an UPDATE's rows are those of `old` (their old versions, by row id),
    the others an INSERT's (ON CONFLICT DO UPDATE writes both kinds at once)."""
    if old is None or not old.num_rows:
        return _fire(cat, table, "INSERT", new, None, cur)
    updated = pc.is_in(new.column(RID), value_set=old.column(RID).combine_chunks())
    if pc.all(updated).as_py():
        return _fire(cat, table, "UPDATE", new, old, cur)
    order = pa.array(range(new.num_rows), pa.int64())
    updated = updated.combine_chunks() if isinstance(updated, pa.ChunkedArray) else updated
    parts = [
        (
            _fire(cat, table, "INSERT", new.filter(pc.invert(updated)), None, cur),
            order.filter(pc.invert(updated)),
        ),
        (_fire(cat, table, "UPDATE", new.filter(updated), old, cur), order.filter(updated)),
    ]
    joined = pa.concat_tables([p for p, _ in parts])
    positions = pa.concat_arrays([o for _, o in parts])
    return joined.take(pc.sort_indices(positions))


def _fire(
    cat: Catalog,
    table: Table,
    event: str,
    new: pa.Table,
    old: pa.Table | None,
    cur: duckdb.DuckDBPyConnection,
) -> pa.Table:
    letter = event[0].lower()
    for trigger in table.triggers:
        if letter not in trigger.events or not trigger.enabled or not new.num_rows:
            continue
        fn = cat.function(trigger.function)
        if fn is None:
            continue
        assigns = compile_trigger(fn.name, fn.body).assigns[event]
        if assigns:
            new = _apply(table, trigger, assigns, new, old, cur)
    return new


def _apply(
    table: Table,
    trigger: Trigger,
    assigns: tuple[tuple[str, str], ...],
    new: pa.Table,
    old: pa.Table | None,
    cur: duckdb.DuckDBPyConnection,
) -> pa.Table:
    olds = [Column(OLD_PREFIX + c.name, c.type) for c in table.columns]
    columns = (*table.columns, *olds)
    when = None
    if trigger.when is not None:
        when = condition_sql(when_condition(trigger.when, [c.name for c in table.columns]), columns)
    exprs = {}
    for name, expr in assigns:
        col = table.column(name)
        if col is None:
            raise SQLError(
                f'record "new" has no field "{name}"',
                "42703",
                detail=f"trigger {trigger.name} on table {table.name}",
            )
        value = to_column_sql(condition_sql(expr, columns), col)
        if when is not None:
            value = f"CASE WHEN coalesce(({when}), false) THEN {value} ELSE _n.{quote(name)} END"
        exprs[name] = value
    select = ", ".join(
        f"{exprs[n]} AS {quote(n)}" if n in exprs else f"_n.{quote(n)}" for n in new.schema.names
    )
    sql = f"SELECT {select} FROM _hw_trig_new AS _n"
    cur.register("_hw_trig_new", new)
    try:
        if old is not None:
            renamed = old.select([RID, *[c.name for c in table.columns]]).rename_columns(
                [RID, *[c.name for c in olds]]
            )
            cur.register("_hw_trig_old", renamed)
            sql = (
                f"SELECT {select} FROM _hw_trig_new AS _n LEFT JOIN _hw_trig_old AS _o"
                f" ON _o.{RID} = _n.{RID}"
            )
        else:
            nulls = ", ".join(f"NULL AS {quote(c.name)}" for c in olds)
            sql = f"SELECT {select} FROM _hw_trig_new AS _n, (SELECT {nulls}) AS _o"
        out, _ = fetch(cur, sql)
    finally:
        unregister_quietly(cur, "_hw_trig_new")
        unregister_quietly(cur, "_hw_trig_old")
    return out.cast(new.schema)
