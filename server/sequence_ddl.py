"""CREATE / ALTER / DROP SEQUENCE, and the sequences of serial and identity columns.

The definitions are catalog objects, changed in the writing transaction like any DDL;
the values are the sequence manager's (server/sequences.py), which RESTART sets at
once (durably, as nextval does).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pglast.ast as A
from headwater.catalog.objects import Relation, Sequence, Table
from headwater.planner import sequences as plan
from headwater.planner.sequences import nextval_calls, parse_regclass
from headwater.server import temp_tables
from headwater.server.results import Result
from headwater.server.session import Session, WriteTxn
from headwater.storage.sequences import state_key
from pglast import parse_sql

from headwater.errors import DependentObjects, SQLError, UndefinedTable, WrongObjectType


def create(s: Session, w: WriteTxn, stmt: A.CreateSeqStmt) -> Result:
    cat = w.catalog
    rv = stmt.sequence
    if temp_tables.wants_temp(rv):  # CREATE TEMP SEQUENCE: in the session's pg_temp_N
        schema = temp_tables.creation_schema(s, w, rv)
    else:
        schema = cat.creation_schema(rv.schemaname, s.search_path())
    if cat.resolve(schema, rv.relname, ()) is not None:
        if stmt.if_not_exists:
            return Result(
                "CREATE SEQUENCE",
                notices=[f'relation "{rv.relname}" already exists, skipping'],
            )
        raise SQLError(f'relation "{rv.relname}" already exists', "42P07")
    seq = plan.new_sequence(cat.next_oid, schema, rv.relname)
    opts = plan.apply_options(seq, stmt.options, creating=True)
    seq = opts.sequence
    if opts.owned_by is not None:
        seq = replace(seq, owned_by=plan.resolve_owned_by(cat, seq, opts.owned_by, s.search_path()))
    cat.allocate_oid()
    cat.add_relation(seq)
    return Result("CREATE SEQUENCE")


def alter(s: Session, w: WriteTxn, stmt: A.AlterSeqStmt) -> Result:
    cat = w.catalog
    rv = stmt.sequence
    rel = cat.resolve(rv.schemaname, rv.relname, s.search_path())
    if rel is None:
        if stmt.missing_ok:
            return Result(
                "ALTER SEQUENCE",
                notices=[f'relation "{rv.relname}" does not exist, skipping'],
            )
        raise UndefinedTable(f'relation "{rv.relname}" does not exist')
    if not isinstance(rel, Sequence):
        raise WrongObjectType(f'"{rel.name}" is not a sequence')
    manager = s.instance.sequences
    last, _, _ = manager.peek(rel)
    opts = plan.apply_options(rel, stmt.options, creating=False, last_value=last)
    seq = opts.sequence
    if opts.owned_by is not None:
        seq = replace(seq, owned_by=plan.resolve_owned_by(cat, seq, opts.owned_by, s.search_path()))
    cat.replace_relation(seq)
    manager.altered(seq)
    if opts.restart is not None:
        manager.restart(seq, opts.restart)
    return Result("ALTER SEQUENCE")


# -- serial and identity columns --------------------------------------------------------
def column_sequences(
    s: Session,
    w: WriteTxn,
    stmt: A.CreateStmt | A.AlterTableStmt,
    schema: str,
    elts: Any = None,
    table_oid: int | None = None,
) -> dict[str, tuple[Sequence, str]]:
    """Create the sequences of the serial / identity columns of `stmt` (which become plain
    integer columns), owned by the table about to be created: column -> (sequence,
    identity kind). ALTER TABLE ... ADD COLUMN passes its ColumnDefs as `elts` and the
    table's oid."""
    cat = w.catalog
    sp = s.search_path()
    elts = stmt.tableElts if elts is None else elts
    plan.check_default_sequences(elts, lambda schema, name: cat.get_relation(schema, name, sp))
    specs = plan.expand_columns(elts, stmt.relation.relname)
    if not specs:
        return {}
    creating = table_oid is None
    if table_oid is None:
        table_oid = cat.next_oid + len(specs)  # the sequences come first, as in PostgreSQL
    made: dict[str, tuple[Sequence, str]] = {}
    for spec in specs:
        options = [o for o in spec.options if o.defname != "sequence_name"]
        named = [o for o in spec.options if o.defname == "sequence_name"]
        if named:
            names = [n.sval for n in named[0].arg]
            seq_schema = names[-2] if len(names) > 1 else schema
            name = names[-1]
        else:
            seq_schema = schema
            name = plan.choose_name(cat, schema, stmt.relation.relname, spec.column)
        seq = plan.new_sequence(cat.next_oid, seq_schema, name)
        seq = replace(seq, type_name=spec.type_name)
        as_type = A.DefElem(
            defname="as", arg=A.TypeName(names=(A.String(sval=spec.type_name),), typemod=-1)
        )
        seq = plan.apply_options(seq, [as_type, *options], creating=True).sequence
        seq = replace(seq, owned_by=(table_oid, spec.column), identity=bool(spec.identity))
        cat.allocate_oid()
        cat.add_relation(seq)
        made[spec.column] = (seq, spec.identity)
    assert not creating or cat.next_oid == table_oid
    return made


# -- DROP -------------------------------------------------------------------------------
def _default_uses(col_default: str | None, seq: Sequence, s: Session, w: WriteTxn) -> bool:
    if not col_default or "nextval" not in col_default:
        return False
    try:
        node = parse_sql(f"SELECT {col_default}")[0].stmt.targetList[0].val
    except Exception:  # noqa: BLE001
        return False
    for _, text in nextval_calls(node):
        if text.isdigit():  # as serial defaults and CREATE TABLE store them
            if int(text) == seq.oid:
                return True
        else:
            rel = w.catalog.resolve(*parse_regclass(text), s.search_path())
            if rel is not None and rel.oid == seq.oid:
                return True
    return False


def before_drop(s: Session, w: WriteTxn, rel: Relation, cascade: bool) -> list[str]:
    """Checks and side effects of dropping `rel`; returns the cascade notices.

    A sequence: an identity column's cannot go (2BP01); a column default that calls it
    goes with it under CASCADE, else 2BP01; its durable state is deleted with the
    epoch. A table: the sequences it owns are dropped with it."""
    cat = w.catalog
    notices: list[str] = []
    if isinstance(rel, Sequence):
        if rel.identity and rel.owned_by is not None:
            table = cat.by_oid(rel.owned_by[0])
            if table is not None:
                col = rel.owned_by[1]
                raise DependentObjects(
                    f"cannot drop sequence {rel.name} because column {col} of table "
                    f"{table.name} requires it",
                    hint=f"You can drop column {col} of table {table.name} instead.",
                )
        users = [
            (t, c)
            for t in list(cat.tables())
            for c in t.columns
            if _default_uses(c.default, rel, s, w)
        ]
        path = s.search_path()

        def shown(r: Relation) -> str:  # qualified when the search path does not reach it
            return r.name if r.schema in path else f"{r.schema}.{r.name}"

        if users and not cascade:
            raise DependentObjects(
                f"cannot drop sequence {shown(rel)} because other objects depend on it",
                detail="\n".join(
                    f"default value for column {c.name} of table {shown(t)} depends on "
                    f"sequence {shown(rel)}"
                    for t, c in users
                ),
                hint="Use DROP ... CASCADE to drop the dependent objects too.",
            )
        for t, c in users:
            table = cat.by_oid(t.oid)
            assert isinstance(table, Table)
            cols = tuple(replace(x, default=None) if x.name == c.name else x for x in table.columns)
            cat.replace_relation(replace(table, columns=cols))
            notices.append(
                f"drop cascades to default value for column {c.name} of table {shown(t)}"
            )
        w.dropped_logs.append(state_key(rel.oid))
    if isinstance(rel, Table):
        for seq in [
            r
            for r in cat.relations.values()
            if isinstance(r, Sequence) and r.owned_by and r.owned_by[0] == rel.oid
        ]:
            cat.drop_relation(seq)
            w.dropped_logs.append(state_key(seq.oid))
    return notices


def drop_owned(w: WriteTxn, table: Table, column: str) -> None:
    """ALTER TABLE ... DROP COLUMN: the sequences the column owns go with it."""
    cat = w.catalog
    for seq in [
        r
        for r in cat.relations.values()
        if isinstance(r, Sequence) and r.owned_by == (table.oid, column)
    ]:
        cat.drop_relation(seq)
        w.dropped_logs.append(state_key(seq.oid))
