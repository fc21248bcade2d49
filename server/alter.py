"""ALTER TABLE, as PostgreSQL 15 does it (RENAME and SET SCHEMA: server/renames.py).

An ALTER TABLE runs its subcommands in PostgreSQL's passes (drops, type changes,
added columns, column attributes, keys, checks), then, if the table's shape changed
(columns added, dropped, renamed or retyped), rewrites its replica table in the
writing transaction: every version of every row, so AS OF reads keep working, in
the new shape. New constraints are checked over the live rows afterwards.

Durability: the change log holds Arrow batches in the shape of their epoch. A table
whose shape changed has its log rewritten at COMMIT from the replica (server/
transactions.py: one blob of every version's events under the commit's epoch, which
supersedes the older entries; storage/changelog.py), so recovery rebuilds it in the
new shape, with the values (defaults, USING) the ALTER computed. Materialized views
over it are rebuilt (dropped from the engine before the epoch is spooled, backfilled
at the epoch), since the engine's spool holds batches of the old shape.

Views follow renames (their stored definitions are rewritten: planner/dependencies.py);
a column a view uses cannot be dropped (2BP01, unless CASCADE) nor retyped (0A000).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import duckdb
import pglast.ast as A
from headwater.catalog.objects import (
    Check,
    Column,
    ForeignKey,
    Index,
    IndexKey,
    Key,
    MaterializedView,
    Relation,
    Table,
    View,
    replace,
)
from headwater.catalog.types import BPCHAR, TEXT, VARCHAR, ColumnType
from headwater.planner import dependencies as deps
from headwater.planner import foreign_keys as fk_plan
from headwater.planner import pg_compat
from headwater.planner.ddl import (
    check_from,
    check_generated,
    check_key_columns,
    column_refs,
    constraint_word,
    generation_expression,
    type_of,
)
from headwater.planner.dml import default_sql, to_column_sql
from headwater.planner.foreign_keys import make_object_name
from headwater.planner.relations import deparse
from headwater.planner.scope import column_types
from headwater.planner.sequences import column_default, sequence_calls_by_oid
from headwater.server import ddl, domains, foreign_keys, sequence_ddl, slo, view_deps
from headwater.server.binders import user_types, write_binder
from headwater.server.checks import check_violation, condition_sql, failing_sql
from headwater.server.duckdb_calls import fetch
from headwater.server.owners import new_owner
from headwater.server.results import Result
from headwater.server.session import Session, WriteTxn
from headwater.storage.changelog import RID
from headwater.storage.duckdb_errors import translate
from headwater.storage.replica import CURRENT, FROM, HIDDEN, LIVE, TO, physical, quote
from pglast import parse_sql
from pglast.enums import AlterTableType as AT
from pglast.enums import ConstrType, ObjectType

from headwater.errors import (
    DatatypeMismatch,
    DependentObjects,
    DuplicateColumn,
    DuplicateObject,
    FeatureNotSupported,
    InvalidSchemaName,
    NotNullViolation,
    SQLError,
    StringTooLong,
    UndefinedColumn,
    UndefinedObject,
    UndefinedTable,
    UniqueViolation,
    WrongObjectType,
)

# PostgreSQL runs ALTER TABLE's subcommands in passes (tablecmds.c AT_PASS_*), not in
# the order written: `ADD COLUMN e ..., DROP COLUMN e` fails because drops come first.
_PASS = {
    AT.AT_DropColumn: 0,
    AT.AT_DropConstraint: 0,
    AT.AT_AlterColumnType: 1,
    AT.AT_AddColumn: 4,
    AT.AT_ColumnDefault: 5,
    AT.AT_AddIdentity: 5,
    AT.AT_DropNotNull: 5,
    AT.AT_SetNotNull: 5,
    AT.AT_AddConstraint: 7,
    AT.AT_ValidateConstraint: 9,
    # storage and planner tuning: accepted, nothing to do in Headwater's replica
    AT.AT_SetStatistics: 9,
    AT.AT_SetStorage: 9,
    AT.AT_SetCompression: 9,
    AT.AT_SetRelOptions: 9,
    AT.AT_ResetRelOptions: 9,
    AT.AT_ClusterOn: 9,
    AT.AT_DropCluster: 9,
    AT.AT_SetLogged: 9,
    AT.AT_SetUnLogged: 9,
    AT.AT_ReplicaIdentity: 9,
}
_TUNING_COLUMN = (AT.AT_SetStatistics, AT.AT_SetStorage, AT.AT_SetCompression)
_ACTION_WORDS = {
    AT.AT_AddColumn: "ADD COLUMN",
    AT.AT_DropColumn: "DROP COLUMN",
    AT.AT_AlterColumnType: "ALTER COLUMN TYPE",
    AT.AT_ColumnDefault: "ALTER COLUMN ... SET DEFAULT",
    AT.AT_AddIdentity: "ALTER COLUMN ... ADD IDENTITY",
    AT.AT_SetNotNull: "ALTER COLUMN ... SET NOT NULL",
    AT.AT_DropNotNull: "ALTER COLUMN ... DROP NOT NULL",
    AT.AT_AddConstraint: "ADD CONSTRAINT",
    AT.AT_DropConstraint: "DROP CONSTRAINT",
    AT.AT_ValidateConstraint: "VALIDATE CONSTRAINT",
}
KIND_WORDS = {
    ObjectType.OBJECT_TABLE: "table",
    ObjectType.OBJECT_VIEW: "view",
    ObjectType.OBJECT_MATVIEW: "materialized view",
    ObjectType.OBJECT_INDEX: "index",
}
TAGS = {
    ObjectType.OBJECT_TABLE: "ALTER TABLE",
    ObjectType.OBJECT_VIEW: "ALTER VIEW",
    ObjectType.OBJECT_MATVIEW: "ALTER MATERIALIZED VIEW",
    ObjectType.OBJECT_INDEX: "ALTER INDEX",
    ObjectType.OBJECT_COLUMN: "ALTER TABLE",
    ObjectType.OBJECT_TABCONSTRAINT: "ALTER TABLE",
}


def execute(s: Session, w: WriteTxn, stmt: A.AlterTableStmt) -> Result:
    """ALTER TABLE (VIEW, MATERIALIZED VIEW) in the writing transaction `w` (blocking)."""
    try:
        return _alter_table(s, w, stmt)
    except duckdb.Error as e:
        raise translate(e) from None


def lookup(s: Session, w: WriteTxn, rv: A.RangeVar, missing_ok: bool) -> Relation | None:
    rel = w.catalog.resolve(rv.schemaname, rv.relname, s.search_path())
    if rel is None and not missing_ok:
        if rv.schemaname is not None and rv.schemaname not in w.catalog.schemas:
            raise InvalidSchemaName(f'schema "{rv.schemaname}" does not exist')
        raise UndefinedTable(f'relation "{rv.relname}" does not exist')
    return rel


def skipped(tag: str, name: str) -> Result:
    return Result(tag, notices=[f'relation "{name}" does not exist, skipping'])


def check_kind(rel: Relation, objtype: Any) -> None:
    """ALTER VIEW on a table and the like: 42809, as PostgreSQL."""
    want = KIND_WORDS.get(objtype)
    if want is None or want == "table":  # ALTER TABLE accepts every relation kind here
        return
    if rel.kind != want:
        raise WrongObjectType(f'"{rel.name}" is not a {want}')


# -- ALTER TABLE -----------------------------------------------------------------------------
@dataclass
class TableChange:
    """One ALTER TABLE statement's state: the table as it becomes, and how each of its
    columns is computed from the replica table as it was (alias _hw_o)."""

    s: Session
    w: WriteTxn
    old: Table
    table: Table
    exprs: dict[str, str]
    reshaped: bool = False
    not_null: set[str] = field(default_factory=set)  # columns to check for NULLs
    lengths: set[str] = field(default_factory=set)  # retyped to varchar(n)/char(n)
    new_checks: list[Check] = field(default_factory=list)
    all_checks: bool = False  # a retyped column: every CHECK is checked again
    new_keys: list[Key] = field(default_factory=list)
    new_foreign_keys: list[ForeignKey] = field(default_factory=list)
    sequenced: set[str] = field(default_factory=set)  # added serial / identity columns
    notices: list[Any] = field(default_factory=list)

    def column(self, name: str, missing: str = "of relation") -> Column:
        c = self.table.column(name)
        if c is None:
            if missing == "of relation":
                raise UndefinedColumn(
                    f'column "{name}" of relation "{self.table.name}" does not exist'
                )
            raise UndefinedColumn(f'column "{name}" does not exist')
        return c

    def set_column(self, name: str, col: Column) -> None:
        self.table = replace(
            self.table, columns=tuple(col if c.name == name else c for c in self.table.columns)
        )


def _alter_table(s: Session, w: WriteTxn, stmt: A.AlterTableStmt) -> Result:
    tag = TAGS.get(stmt.objtype, "ALTER TABLE")
    rel = lookup(s, w, stmt.relation, stmt.missing_ok)
    if rel is None:
        return skipped(tag, stmt.relation.relname)
    check_kind(rel, stmt.objtype)
    cmds = list(stmt.cmds or ())
    if cmds and all(c.subtype == AT.AT_ChangeOwner for c in cmds):
        return _change_owner(s, w, rel, cmds[-1].newowner, tag)
    if isinstance(rel, MaterializedView) and slo.sets_options(cmds):  # SET (freshness = ...)
        w.catalog.replace_relation(replace(rel, freshness=slo.altered_freshness(rel, cmds)))
        return Result(tag)
    if not isinstance(rel, Table):
        first = cmds[0].subtype if cmds else None
        what = {"view": "views", "materialized view": "materialized views", "index": "indexes"}
        raise WrongObjectType(
            f"ALTER action {_ACTION_WORDS.get(first, 'this')} cannot be performed on relation "
            f'"{rel.name}"',
            detail=f"This operation is not supported for {what.get(rel.kind, rel.kind)}.",
        )
    for cmd in cmds:
        if cmd.subtype not in _PASS:
            raise FeatureNotSupported(
                f"ALTER TABLE {cmd.subtype.name.removeprefix('AT_')} is not supported"
            )
    work = TableChange(s, w, rel, rel, {c.name: quote(c.name) for c in rel.columns})
    for cmd in sorted(cmds, key=lambda c: _pass_of(c)):
        _ACTIONS[cmd.subtype](work, cmd)
    finish(work)
    return Result(tag, notices=work.notices)


def _change_owner(s: Session, w: WriteTxn, rel: Relation, spec: Any, tag: str) -> Result:
    """OWNER TO: the relation (and a table's indexes) belong to the role."""
    cat = w.catalog
    owner = new_owner(s, cat, spec)
    cat.replace_relation(replace(rel, owner=owner))
    for ix in [r for r in cat.relations.values() if isinstance(r, Index)]:
        if ix.table_oid == rel.oid:
            cat.replace_relation(replace(ix, owner=owner))
    return Result(tag)


def _pass_of(cmd: A.AlterTableCmd) -> int:
    if cmd.subtype == AT.AT_AddConstraint and cmd.def_.contype == ConstrType.CONSTR_CHECK:
        return 8
    return _PASS[cmd.subtype]


def _add_column(work: TableChange, cmd: A.AlterTableCmd) -> None:
    cd: A.ColumnDef = cmd.def_
    name = cd.colname
    table = work.table
    if table.column(name) is not None:
        msg = f'column "{name}" of relation "{table.name}" already exists'
        if cmd.missing_ok:
            work.notices.append(SQLError(msg + ", skipping", "42701", severity="NOTICE"))
            return
        raise DuplicateColumn(msg)
    if name in HIDDEN:
        raise FeatureNotSupported(f'column name "{name}" is reserved by Headwater')
    # serial / identity: the column's sequence (owned by the table), its nextval the default
    holder = A.AlterTableStmt(relation=A.RangeVar(relname=table.name))
    made = sequence_ddl.column_sequences(
        work.s, work.w, holder, table.schema, elts=[cd], table_oid=table.oid
    )
    col = Column(name, type_of(cd.typeName, user_types(work.s, work.w)), bool(cd.is_not_null))
    if name in made:
        seq, identity = made[name]
        col = Column(name, col.type, True, column_default(seq), identity)
        work.sequenced.add(name)
    keys: list[tuple[list[str], bool, str | None]] = []
    checks: list[A.Constraint] = []
    fks: list[A.Constraint] = []
    for con in cd.constraints or ():
        kind = con.contype
        if kind == ConstrType.CONSTR_NOTNULL:
            col = replace(col, not_null=True)
        elif kind == ConstrType.CONSTR_DEFAULT:
            col = replace(col, default=deparse(con.raw_expr))
        elif kind in (ConstrType.CONSTR_PRIMARY, ConstrType.CONSTR_UNIQUE):
            keys.append(([name], kind == ConstrType.CONSTR_PRIMARY, con.conname))
        elif kind == ConstrType.CONSTR_CHECK:
            checks.append(con)
        elif kind == ConstrType.CONSTR_FOREIGN:
            fks.append(con)
        elif kind == ConstrType.CONSTR_IDENTITY:
            pass  # its sequence is made above
        elif kind == ConstrType.CONSTR_GENERATED:
            col = replace(col, generated=generation_expression(con, name))
        elif kind != ConstrType.CONSTR_NULL:
            raise FeatureNotSupported(f"{constraint_word(kind)} constraints are not supported")
    if col.generated is not None and col.default is not None:
        raise SQLError(
            f'both default and generation expression specified for column "{name}"'
            f' of table "{table.name}"',
            "42601",
        )
    work.table = replace(table, columns=(*table.columns, col))
    if col.type.domain is not None:  # the domain's DEFAULT fills the rows there are
        work.table = domains.constrained(work.table, work.w.catalog)
        work.new_checks += [c for c in work.table.checks if c not in table.checks]
        col = work.table.columns[-1]
    check_generated(work.table.columns)
    if col.generated is not None:  # computed for the rows there are (the rewrite's)
        value = condition_sql(col.generated, work.table.columns)
        work.exprs[name] = to_column_sql(value, col)
    else:
        work.exprs[name] = default_sql(col, write_binder(work.s, work.w))
    work.reshaped = True
    if col.not_null:
        work.not_null.add(name)
    for cols, primary, conname in keys:
        _add_key(work, cols, primary, conname)
    for con in checks:
        _add_check(work, con)
    for con in fks:
        _add_foreign_key(work, con, name)


def _drop_column(work: TableChange, cmd: A.AlterTableCmd) -> None:
    name = cmd.name
    table = work.table
    if table.column(name) is None:
        msg = f'column "{name}" of relation "{table.name}" does not exist'
        if cmd.missing_ok:
            work.notices.append(msg + ", skipping")
            return
        raise UndefinedColumn(msg)
    computed = [c.name for c in table.columns if c.generated and name in _expr_columns(c.generated)]
    if computed:  # generated columns computed from it
        lines = [
            f"column {g} of table {table.name} depends on column {name} of table {table.name}"
            for g in computed
        ]
        raise (FeatureNotSupported if cmd.behavior else DependentObjects)(
            f"cannot drop column {name} of table {table.name} because other objects depend on it",
            detail="\n".join(lines),
            hint="Drop the generated columns first."
            if cmd.behavior
            else "Use DROP ... CASCADE to drop the dependent objects too.",
        )
    users = _views_using(work, name)
    if users:
        order: list[tuple[Relation, str]] = []
        for v in users:
            order.append((v, f"{v.kind} {v.name} depends on column {name} of table {table.name}"))
            for d, p in view_deps.dependency_order(work.s, work.w, v):
                order.append((d, f"{d.kind} {d.name} depends on {p.kind} {p.name}"))
        if not cmd.behavior:
            raise DependentObjects(
                f"cannot drop column {name} of table {table.name} because other objects "
                "depend on it",
                detail="\n".join(line for _, line in order),
                hint="Use DROP ... CASCADE to drop the dependent objects too.",
            )
        dropped: list[Relation | ddl.DroppedConstraint] = []
        for v in users:
            dropped.append(v)
            dropped += ddl.drop_relation(work.s, work.w, v, cascade=True)
        work.notices.extend(ddl.cascade_notices(dropped))
    for key in table.keys:
        if name in key.columns:
            what = f"column {name} of table {table.name}"
            _drop_referenced_key(work, key, bool(cmd.behavior), what)
    work.table = replace(
        table,
        columns=tuple(c for c in table.columns if c.name != name),
        keys=tuple(k for k in table.keys if name not in k.columns),
        checks=tuple(c for c in table.checks if name not in _expr_columns(c.expr)),
        foreign_keys=tuple(f for f in table.foreign_keys if name not in f.columns),
        index_keys=tuple(k for k in table.index_keys if name not in _index_columns(k)),
    )
    work.new_foreign_keys = [f for f in work.new_foreign_keys if name not in f.columns]
    cat = work.w.catalog
    for ix in [
        r
        for r in cat.relations.values()
        if isinstance(r, Index) and r.table_oid == table.oid and _index_uses(r, name)
    ]:  # its indexes go with it, as in PostgreSQL (those whose expressions name it too)
        cat.drop_relation(ix)
    sequence_ddl.drop_owned(work.w, table, name)  # and the sequence it owns (serial)
    work.new_keys = [k for k in work.new_keys if name not in k.columns]
    work.new_checks = [c for c in work.new_checks if c in work.table.checks]
    work.exprs.pop(name, None)
    work.not_null.discard(name)
    work.reshaped = True


def _index_uses(ix: Index, column: str) -> bool:
    texts = [e for e in (*ix.key_exprs, ix.predicate) if e]
    return column in ix.keys or any(column in _expr_columns(t) for t in texts)


def _index_columns(k: IndexKey) -> set[str]:
    """The columns a unique expression or partial index's keys and predicate name."""
    return set().union(*(_expr_columns(e) for e in (*k.keys, k.predicate or "true")))


def _alter_type(work: TableChange, cmd: A.AlterTableCmd) -> None:
    name = cmd.name
    col = work.column(name)
    cd: A.ColumnDef = cmd.def_
    new_type = type_of(cd.typeName, user_types(work.s, work.w))
    binder = write_binder(work.s, work.w)
    new_col = replace(col, type=new_type)
    if cd.raw_default is not None:  # USING: translated as a SELECT's expression
        using = A.SelectStmt(targetList=(A.ResTarget(val=pg_compat.copy_tree(cd.raw_default)),))
        types = column_types(using, binder.catalog, binder.search_path)
        pg_compat.rewrite(using, column_types=types)
        value = to_column_sql(binder.to_sql(using.targetList[0].val), new_col)
    else:
        if not _assignable(col.type, new_type):
            raise DatatypeMismatch(
                f'column "{name}" cannot be cast automatically to type {new_type.pg.sql_name}',
                hint=f'You might need to specify "USING {name}::{_hint_type(new_type)}".',
            )
        value = to_column_sql(work.exprs[name], new_col)
    users = _views_using(work, name)  # (after the cast check, as PostgreSQL)
    if users:
        v = users[0]
        raise FeatureNotSupported(
            "cannot alter type of a column used by a view or rule",
            detail=f'rule _RETURN on {v.kind} {v.name} depends on column "{name}"',
        )
    work.exprs[name] = value
    work.set_column(name, new_col)
    if new_type.length is not None:
        work.lengths.add(name)
    work.all_checks = True
    work.reshaped = True


def _hint_type(t: ColumnType) -> str:
    return t.sql() if t.length is None and t.precision_scale is None else t.pg.sql_name


def _assignable(old: ColumnType, new: ColumnType) -> bool:
    """PostgreSQL's assignment casts (what ALTER COLUMN TYPE applies without USING)."""
    if old.pg is new.pg:
        return True
    if new.pg in (TEXT, VARCHAR, BPCHAR):  # I/O conversion to a string type
        return True
    a, b = old.pg.category, new.pg.category
    if a == b == "N":
        return True
    if a == b == "D":  # date, timestamp, timestamptz, time among each other
        pair = {old.pg.name, new.pg.name}
        return not ({"date", "time"} <= pair or {"date", "timetz"} <= pair)
    if a == "S" and b == "S":
        return True
    return {old.pg.name, new.pg.name} == {"json", "jsonb"}


def _column_default(work: TableChange, cmd: A.AlterTableCmd) -> None:
    col = work.column(cmd.name)
    default = deparse(cmd.def_) if cmd.def_ is not None else None
    if default is not None:  # its errors (a column reference, a bad type) come now
        sql = default_sql(replace(col, default=default), write_binder(work.s, work.w))
        if not _calls_functions(cmd.def_):  # (a function might have effects: nextval)
            fetch(work.w.cur, f"SELECT {sql}")
        cat, sp = work.w.catalog, work.s.search_path()  # nextval('s') names s by oid
        default = (
            sequence_calls_by_oid(default, lambda schema, name: cat.get_relation(schema, name, sp))
            or default
        )
    work.set_column(cmd.name, replace(col, default=default))


def _add_identity(work: TableChange, cmd: A.AlterTableCmd) -> None:
    """ALTER COLUMN c ADD GENERATED { ALWAYS | BY DEFAULT } AS IDENTITY [(options)]
    (pg_dump's form of an identity column): its sequence, owned by the table."""
    col, table = work.column(cmd.name), work.table
    where = f'column "{cmd.name}" of relation "{table.name}"'
    if not col.not_null:
        raise SQLError(f"{where} must be declared NOT NULL before identity can be added", "55000")
    if col.identity:
        raise SQLError(f"{where} is already an identity column", "42P17")
    if col.default is not None:
        raise SQLError(f"{where} already has a default value", "42P17")
    type_name = A.TypeName(names=(A.String(sval=col.type.pg.name),), typemod=-1)
    cd = A.ColumnDef(colname=cmd.name, typeName=type_name, constraints=(cmd.def_,))
    holder = A.AlterTableStmt(relation=A.RangeVar(relname=table.name))
    made = sequence_ddl.column_sequences(
        work.s, work.w, holder, table.schema, elts=[cd], table_oid=table.oid
    )
    seq, identity = made[cmd.name]
    work.set_column(cmd.name, replace(col, default=column_default(seq), identity=identity))


def _calls_functions(node: Any) -> bool:
    if isinstance(node, tuple | list):
        return any(_calls_functions(n) for n in node)
    if isinstance(node, A.FuncCall | A.SubLink):
        return True
    return isinstance(node, A.Node) and any(_calls_functions(getattr(node, a)) for a in node)


def _set_not_null(work: TableChange, cmd: A.AlterTableCmd) -> None:
    col = work.column(cmd.name)
    if not col.not_null:
        work.not_null.add(cmd.name)
    work.set_column(cmd.name, replace(col, not_null=True))


def _drop_not_null(work: TableChange, cmd: A.AlterTableCmd) -> None:
    col = work.column(cmd.name)
    pk = work.table.primary_key
    if pk is not None and cmd.name in pk.columns:
        raise SQLError(f'column "{cmd.name}" is in a primary key', "42P16")
    work.not_null.discard(cmd.name)
    work.set_column(cmd.name, replace(col, not_null=False))


def _constraint_names(work: TableChange) -> set[str]:
    t = work.table
    checks = {c.name for c in t.checks if not c.domain}
    return {k.name for k in t.keys} | checks | {f.name for f in t.foreign_keys}


def _add_constraint(work: TableChange, cmd: A.AlterTableCmd) -> None:
    con: A.Constraint = cmd.def_
    if con.contype in (ConstrType.CONSTR_PRIMARY, ConstrType.CONSTR_UNIQUE):
        if con.indexname is not None:
            raise FeatureNotSupported("ADD CONSTRAINT ... USING INDEX is not supported")
        cols = [k.sval for k in con.keys or ()]
        _add_key(work, cols, con.contype == ConstrType.CONSTR_PRIMARY, con.conname)
    elif con.contype == ConstrType.CONSTR_CHECK:
        _add_check(work, con)
    elif con.contype == ConstrType.CONSTR_FOREIGN:
        _add_foreign_key(work, con, None)
    else:
        raise FeatureNotSupported(f"{constraint_word(con.contype)} constraints are not supported")


def _add_foreign_key(work: TableChange, con: A.Constraint, column: str | None) -> None:
    table = work.table
    cat = work.w.catalog
    fk = fk_plan.foreign_key_from(
        con,
        table,
        column,
        foreign_keys.resolver(cat, work.s.search_path()),
        _constraint_names(work),
        foreign_keys.constraint_names(cat, table.schema) | _constraint_names(work),
    )
    work.table = replace(table, foreign_keys=(*table.foreign_keys, fk))
    foreign_keys.refuse_set_default(work.table)
    if fk.valid:
        work.new_foreign_keys.append(fk)


def _add_key(work: TableChange, cols: list[str], primary: bool, conname: str | None) -> None:
    table = work.table
    for c in cols:
        if table.column(c) is None:
            raise UndefinedColumn(f'column "{c}" named in key does not exist')
    if len(set(cols)) != len(cols):
        raise SQLError(
            f"column appears twice in {'primary key' if primary else 'unique'} constraint",
            "42P10",
        )
    if primary and table.primary_key is not None:
        raise SQLError(f'multiple primary keys for table "{table.name}" are not allowed', "42P16")
    taken = _constraint_names(work) | {
        r.name for r in work.w.catalog.relations.values() if r.schema == table.schema
    }
    if conname is not None:
        if conname in _constraint_names(work):
            raise DuplicateObject(
                f'constraint "{conname}" for relation "{table.name}" already exists'
            )
        if conname in taken:
            raise SQLError(f'relation "{conname}" already exists', "42P07")
        name = conname
    else:
        label = "pkey" if primary else "key"
        joined = None if primary else "_".join(cols)
        name, n = make_object_name(table.name, joined, label), 0
        while name in taken:
            n += 1
            name = make_object_name(table.name, joined, f"{label}{n}")
    check_key_columns(table.columns, cols)
    key = Key(name, tuple(cols), primary)
    work.table = replace(table, keys=(*table.keys, key))
    work.new_keys.append(key)
    if primary:
        for c in cols:
            col = work.column(c)
            if not col.not_null:
                work.not_null.add(c)
                work.set_column(c, replace(col, not_null=True))


def _add_check(work: TableChange, con: A.Constraint) -> None:
    table = work.table
    names = {c.name for c in table.columns}
    taken = _constraint_names(work)
    if con.conname is not None and con.conname in taken:
        raise DuplicateObject(
            f'constraint "{con.conname}" for relation "{table.name}" already exists'
        )
    check = check_from(con, table.name, names, taken)
    work.table = replace(table, checks=(*table.checks, check))
    if check.valid:  # NOT VALID: only new rows are checked (VALIDATE CONSTRAINT later)
        work.new_checks.append(check)


def _validate_constraint(work: TableChange, cmd: A.AlterTableCmd) -> None:
    table = work.table
    check = next((c for c in table.checks if c.name == cmd.name and not c.domain), None)
    fk = next((f for f in table.foreign_keys if f.name == cmd.name), None)
    if fk is not None:
        if not fk.valid:
            fk = replace(fk, valid=True)
            work.table = replace(
                table,
                foreign_keys=tuple(fk if f.name == cmd.name else f for f in table.foreign_keys),
            )
            work.new_foreign_keys.append(fk)
        return
    if check is None:
        if any(k.name == cmd.name for k in table.keys):
            return  # keys are always valid
        raise UndefinedObject(f'constraint "{cmd.name}" of relation "{table.name}" does not exist')
    if not check.valid:
        check = replace(check, valid=True)
        work.table = replace(
            table, checks=tuple(check if c.name == cmd.name else c for c in table.checks)
        )
        work.new_checks.append(check)


def _drop_constraint(work: TableChange, cmd: A.AlterTableCmd) -> None:
    table = work.table
    name = cmd.name
    index_only = any(
        isinstance(r, Index) and r.table_oid == table.oid and r.name == name
        for r in work.w.catalog.relations.values()
    )
    key = next((k for k in table.keys if k.name == name), None)
    check = next((c for c in table.checks if c.name == name and not c.domain), None)
    fk = next((f for f in table.foreign_keys if f.name == name), None)
    if (key is None or index_only) and check is None and fk is None:
        msg = f'constraint "{name}" of relation "{table.name}" does not exist'
        if cmd.missing_ok:
            work.notices.append(msg + ", skipping")
            return
        raise UndefinedObject(msg)
    if key is not None and not index_only:
        _drop_referenced_key(work, key, bool(cmd.behavior))
    work.table = replace(
        table,
        keys=tuple(k for k in table.keys if k.name != name),
        checks=tuple(c for c in table.checks if c.name != name),
        foreign_keys=tuple(f for f in table.foreign_keys if f.name != name),
    )
    work.new_foreign_keys = [f for f in work.new_foreign_keys if f.name != name]
    work.new_keys = [k for k in work.new_keys if k.name != name]
    work.new_checks = [c for c in work.new_checks if c.name != name]


def _drop_referenced_key(
    work: TableChange, key: Key, cascade: bool, what: str | None = None
) -> None:
    """A key other tables' foreign keys use: 2BP01, or (CASCADE) those constraints go.
    (`what`: the object dropped, when not the key's constraint.)"""
    users = [
        (t, f)
        for t, f in fk_plan.referencing(work.w.catalog.tables(), work.table.oid)
        if set(f.ref_columns) == set(key.columns) and t.oid != work.table.oid
    ]
    if not users:
        return
    lines = [f"constraint {f.name} on table {t.name} depends on index {key.name}" for t, f in users]
    if not cascade:
        what = what or f"constraint {key.name} on table {work.table.name}"
        raise DependentObjects(
            f"cannot drop {what} because other objects depend on it",
            detail="\n".join(lines),
            hint="Use DROP ... CASCADE to drop the dependent objects too.",
        )
    for t, f in users:
        work.notices.append(f"drop cascades to constraint {f.name} on table {t.name}")
        foreign_keys.drop_constraint(work.w.catalog, t.oid, f.name)


def _tuning(work: TableChange, cmd: A.AlterTableCmd) -> None:
    """SET STATISTICS, SET STORAGE, SET (fillfactor ...), CLUSTER ON, SET LOGGED, ...:
    PostgreSQL's storage and planner settings have no counterpart; the column or
    index they name must exist."""
    if cmd.subtype in _TUNING_COLUMN and cmd.name is not None:
        work.column(cmd.name)
    if cmd.subtype == AT.AT_ClusterOn:
        names = {k.name for k in work.table.keys} | {
            r.name
            for r in work.w.catalog.relations.values()
            if isinstance(r, Index) and r.table_oid == work.table.oid
        }
        if cmd.name not in names:
            raise UndefinedObject(
                f'index "{cmd.name}" for table "{work.table.name}" does not exist'
            )


_ACTIONS = {
    AT.AT_AddColumn: _add_column,
    AT.AT_DropColumn: _drop_column,
    AT.AT_AlterColumnType: _alter_type,
    AT.AT_ColumnDefault: _column_default,
    AT.AT_AddIdentity: _add_identity,
    AT.AT_SetNotNull: _set_not_null,
    AT.AT_DropNotNull: _drop_not_null,
    AT.AT_AddConstraint: _add_constraint,
    AT.AT_DropConstraint: _drop_constraint,
    AT.AT_ValidateConstraint: _validate_constraint,
    **{t: _tuning for t in _PASS if _PASS[t] == 9 and t != AT.AT_ValidateConstraint},
}


def _expr_columns(expr: str) -> set[str]:
    return set(column_refs(parse_sql(f"SELECT ({expr})")[0].stmt.targetList[0].val))


def _views_using(work: TableChange, column: str) -> list[Relation]:
    """The views and materialized views (directly) using `column` of the table."""
    out = []
    for v in view_deps.dependents(work.s, work.w, work.old.oid):
        if not isinstance(v, View | MaterializedView):
            continue
        used = deps.columns_used(
            v.definition, work.w.catalog, (v.schema, *work.s.search_path()), work.old.oid
        )
        if column in used:
            out.append(v)
    return sorted(out, key=lambda r: r.oid)


def finish(work: TableChange) -> None:
    """Rewrite the replica table if its shape changed, check the new constraints over
    its live rows, and make the new table the transaction's."""
    w, cat = work.w, work.w.catalog
    had = set(work.table.checks)  # a column of a domain: the domain's constraints
    table = work.table = domains.constrained(work.table, cat)
    work.new_checks += [c for c in table.checks if c not in had]
    if work.reshaped:
        freeze_stars(work)
        _rewrite_replica(w, work.old, table, work.exprs, frozenset(work.sequenced))
        w.rewritten.add(table.oid)
        w.touched.add(table.oid)
        _plan_rebuilds(work)
    _validate(work)
    cat.replace_relation(table)


def freeze_stars(work: TableChange) -> None:
    """Views over the table that select `*` keep the columns they had (PostgreSQL
    expands `*` when a view is created)."""
    cat = work.w.catalog
    for v in view_deps.dependents(work.s, work.w, work.old.oid):
        if isinstance(v, View | MaterializedView):
            sp = (v.schema, *work.s.search_path())
            text = deps.expand_stars(v.definition, cat, sp, work.old.oid)
            if text != v.definition:
                cat.replace_relation(replace(v, definition=text))


def _plan_rebuilds(work: TableChange) -> None:
    """Materialized views over the table (and over those) are rebuilt at COMMIT."""
    w = work.w
    for d, _ in view_deps.dependency_order(work.s, w, work.old):
        if isinstance(d, MaterializedView) and d.oid not in w.rebuilt_matviews:
            w.rebuilt_matviews.append(d.oid)


def _rewrite_replica(
    w: WriteTxn, old: Table, table: Table, exprs: dict[str, str], sequenced: frozenset[str]
) -> None:
    """The replica table in its new shape: every version, columns computed from the old
    ones (an expression failing on a version no longer live gives NULL there). Added
    serial columns (`sequenced`) number the live rows only, oldest version first (as
    PostgreSQL numbers them in heap order, where an updated row moved to the end)."""
    cur = w.cur
    name = physical(table.oid)
    tmp = f"hw.t{table.oid}_hw_alter"
    cols = ", ".join(f"{quote(c.name)} {c.type.duckdb()}" for c in table.columns)
    sep = ", " if cols else ""
    cur.execute(f"DROP TABLE IF EXISTS {tmp}")
    cur.execute(f"CREATE TABLE {tmp} ({RID} BIGINT, {FROM} BIGINT, {TO} BIGINT{sep}{cols})")
    values = ", ".join(
        f"CASE WHEN {TO} = {LIVE} THEN {exprs[c.name]} END"
        if c.name in sequenced
        else f"CASE WHEN {TO} = {LIVE} THEN {exprs[c.name]} ELSE TRY({exprs[c.name]}) END"
        for c in table.columns
    )
    names = ", ".join(quote(c.name) for c in table.columns)
    source = f"(SELECT * FROM {name} ORDER BY {FROM}, {RID})" if sequenced else name
    cur.execute(
        f"INSERT INTO {tmp} ({RID}, {FROM}, {TO}{sep}{names}) "
        f"SELECT {RID}, {FROM}, {TO}{sep}{values} FROM {source} AS _hw_o"
    )
    cur.execute(f"DROP TABLE {name}")
    cur.execute(f"ALTER TABLE {tmp} RENAME TO t{table.oid}")


def _validate(work: TableChange) -> None:
    """New NOT NULLs, lengths, CHECKs and keys hold for the live rows (PostgreSQL's
    errors: 23502, 22001, 23514, 23505)."""
    cur, table = work.w.cur, work.table
    live = f"(SELECT * FROM {physical(table.oid)} WHERE {CURRENT})"
    for c in table.columns:
        if c.name in work.not_null:
            hit, _ = fetch(cur, f"SELECT 1 FROM {live} WHERE {quote(c.name)} IS NULL LIMIT 1")
            if hit.num_rows:
                raise NotNullViolation(
                    f'column "{c.name}" of relation "{table.name}" contains null values'
                )
    for c in table.columns:
        n = c.type.length
        if c.name in work.lengths and n is not None and c.type.pg is VARCHAR:
            hit, _ = fetch(cur, f"SELECT 1 FROM {live} WHERE length({quote(c.name)}) > {n} LIMIT 1")
            if hit.num_rows:
                raise StringTooLong(f"value too long for type {c.type.sql()}")
    checks = [c for c in table.checks if c.valid] if work.all_checks else work.new_checks
    for check in sorted(checks, key=lambda c: c.name):
        hit, _ = fetch(cur, f"SELECT 1 FROM ({failing_sql(check, table, live)}) LIMIT 1")
        if hit.num_rows:
            raise check_violation(table, check, None)
    for fk in work.new_foreign_keys:
        foreign_keys.check_existing(work.w.catalog, table, fk, cur)
    for key in work.new_keys:
        qcols = ", ".join(quote(c) for c in key.columns)
        notnull = " AND ".join(f"{quote(c)} IS NOT NULL" for c in key.columns)
        dup, _ = fetch(
            cur,
            f"SELECT {qcols} FROM {live} WHERE {notnull} GROUP BY {qcols} "
            "HAVING count(*) > 1 LIMIT 1",
        )
        if dup.num_rows:
            shown = ", ".join(str(v) for v in dup.to_pylist()[0].values())
            raise UniqueViolation(
                f'could not create unique index "{key.name}"',
                detail=f"Key ({', '.join(key.columns)})=({shown}) is duplicated.",
            )
