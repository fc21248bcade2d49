"""ALTER ... RENAME [COLUMN | CONSTRAINT] and ALTER ... SET SCHEMA, as PostgreSQL 15.

A relation keeps its oid (its replica table is named by it), so RENAME TO and SET
SCHEMA change the catalog only; the views naming it follow (their definitions are
rewritten: planner/dependencies.py). Renaming a table's column changes its shape: the
table is rewritten as ALTER TABLE does (server/alter.py).
"""

from __future__ import annotations

from typing import Any

import duckdb
import pglast.ast as A
from headwater.catalog.objects import (
    ForeignKey,
    Index,
    MaterializedView,
    Relation,
    Table,
    View,
    replace,
)
from headwater.planner import dependencies as deps
from headwater.server import user_functions, view_deps
from headwater.server.alter import (
    KIND_WORDS,
    TAGS,
    TableChange,
    check_kind,
    finish,
    freeze_stars,
    lookup,
    skipped,
)
from headwater.server.foreign_keys import referencing_others
from headwater.server.results import Result
from headwater.server.session import Session, WriteTxn
from headwater.storage.duckdb_errors import translate
from headwater.storage.replica import HIDDEN, quote
from pglast.enums import ObjectType

from headwater.errors import (
    DuplicateColumn,
    DuplicateObject,
    FeatureNotSupported,
    InvalidSchemaName,
    SQLError,
    UndefinedColumn,
    UndefinedObject,
    WrongObjectType,
)

STATEMENTS = A.RenameStmt | A.AlterObjectSchemaStmt


def execute(s: Session, w: WriteTxn, stmt: Any) -> Result:
    if isinstance(stmt, A.RenameStmt) and stmt.renameType == ObjectType.OBJECT_FUNCTION:
        return user_functions.rename(s, w, stmt)
    """A RENAME or SET SCHEMA in the writing transaction `w` (blocking)."""
    try:
        if isinstance(stmt, A.RenameStmt):
            return _rename(s, w, stmt)
        return _set_schema(s, w, stmt)
    except duckdb.Error as e:
        raise translate(e) from None


def _rename(s: Session, w: WriteTxn, stmt: A.RenameStmt) -> Result:
    kind = stmt.renameType
    if kind in (ObjectType.OBJECT_COLUMN, ObjectType.OBJECT_TABCONSTRAINT):
        tag = TAGS.get(stmt.relationType, "ALTER TABLE")
        rel = lookup(s, w, stmt.relation, stmt.missing_ok)
        if rel is None:
            return skipped(tag, stmt.relation.relname)
        check_kind(rel, stmt.relationType)
        if kind == ObjectType.OBJECT_COLUMN:
            _rename_column(s, w, rel, stmt.subname, stmt.newname)
        else:
            _rename_constraint(w, rel, stmt.subname, stmt.newname)
        return Result(tag)
    if kind not in KIND_WORDS:
        raise FeatureNotSupported(f"ALTER {kind.name.removeprefix('OBJECT_')} is not supported")
    tag = TAGS[kind]
    if kind in (ObjectType.OBJECT_INDEX, ObjectType.OBJECT_TABLE) and _rename_key_index(
        s, w, stmt.relation, stmt.newname
    ):
        return Result(tag)
    rel = lookup(s, w, stmt.relation, stmt.missing_ok)
    if rel is None:
        return skipped(tag, stmt.relation.relname)
    check_kind(rel, kind)
    if kind == ObjectType.OBJECT_INDEX and not isinstance(rel, Index):
        raise WrongObjectType(f'"{rel.name}" is not an index')
    _move(s, w, rel, rel.schema, stmt.newname)
    return Result(tag)


def _rename_key_index(s: Session, w: WriteTxn, rv: A.RangeVar, new: str) -> bool:
    """ALTER INDEX t_pkey RENAME TO ...: the index behind a PRIMARY KEY or UNIQUE
    constraint (no relation of its own in Headwater's catalog) renames the constraint,
    as in PostgreSQL."""
    cat = w.catalog
    if cat.resolve(rv.schemaname, rv.relname, s.search_path()) is not None:
        return False
    schemas = [rv.schemaname] if rv.schemaname else list(s.search_path())
    for schema in schemas:
        for t in cat.tables():
            if t.schema == schema and any(k.name == rv.relname for k in t.keys):
                if cat.resolve(schema, new, ()) is not None or any(
                    k.name == new for tt in cat.tables() if tt.schema == schema for k in tt.keys
                ):
                    raise SQLError(f'relation "{new}" already exists', "42P07")
                keys = tuple(replace(k, name=new) if k.name == rv.relname else k for k in t.keys)
                cat.replace_relation(replace(t, keys=keys))
                return True
    return False


def _rename_column(s: Session, w: WriteTxn, rel: Relation, old: str, new: str) -> None:
    if rel.column(old) is None:
        raise UndefinedColumn(f'column "{old}" does not exist')
    if rel.column(new) is not None:
        raise DuplicateColumn(f'column "{new}" of relation "{rel.name}" already exists')
    if isinstance(rel, View | MaterializedView):
        _rename_view_column(s, w, rel, old, new)
        return
    if not isinstance(rel, Table):
        raise WrongObjectType(f'"{rel.name}" is not a table, view or materialized view')
    if new in HIDDEN:
        raise FeatureNotSupported(f'column name "{new}" is reserved by Headwater')
    work = TableChange(s, w, rel, rel, {c.name: quote(c.name) for c in rel.columns})
    freeze_stars(work)
    cat = w.catalog
    for v in view_deps.dependents(s, w, rel.oid):  # views follow the rename
        if isinstance(v, View | MaterializedView):
            v = cat.by_oid(v.oid) or v
            sp = (v.schema, *s.search_path())
            text = deps.rename_column(v.definition, cat, sp, rel.oid, old, new)
            if text != v.definition:
                cat.replace_relation(replace(v, definition=text))
    work.table = replace(
        rel,
        columns=tuple(
            replace(
                c,
                name=new if c.name == old else c.name,
                generated=c.generated and deps.rename_in_expression(c.generated, old, new),
            )
            for c in rel.columns
        ),
        keys=tuple(
            replace(k, columns=tuple(new if c == old else c for c in k.columns)) for k in rel.keys
        ),
        checks=tuple(
            replace(c, expr=deps.rename_in_expression(c.expr, old, new)) for c in rel.checks
        ),
        index_keys=tuple(
            replace(
                k,
                keys=tuple(deps.rename_in_expression(e, old, new) for e in k.keys),
                predicate=k.predicate and deps.rename_in_expression(k.predicate, old, new),
            )
            for k in rel.index_keys
        ),
        foreign_keys=tuple(
            _renamed_in_fk(f, old, new, own=True, referenced=f.ref_table == rel.oid)
            for f in rel.foreign_keys
        ),
    )
    for t, f in referencing_others(cat, rel):  # foreign keys of other tables follow
        t = cat.by_oid(t.oid) or t
        assert isinstance(t, Table)
        kept = tuple(
            _renamed_in_fk(g, old, new, own=False, referenced=True) if g == f else g
            for g in t.foreign_keys
        )
        cat.replace_relation(replace(t, foreign_keys=kept))
    work.exprs = {(new if n == old else n): e for n, e in work.exprs.items()}
    for ix in [
        r for r in cat.relations.values() if isinstance(r, Index) and r.table_oid == rel.oid
    ]:  # (an expression's or predicate's text names it too)
        cat.replace_relation(
            replace(
                ix,
                keys=tuple(new if k == old else k for k in ix.keys),
                key_exprs=tuple(e and deps.rename_in_expression(e, old, new) for e in ix.key_exprs),
                predicate=ix.predicate and deps.rename_in_expression(ix.predicate, old, new),
            )
        )
    work.reshaped = True
    finish(work)


def _renamed_in_fk(f: ForeignKey, old: str, new: str, own: bool, referenced: bool) -> ForeignKey:
    def swap(cols: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(new if c == old else c for c in cols)

    return replace(
        f,
        columns=swap(f.columns) if own else f.columns,
        ref_columns=swap(f.ref_columns) if referenced else f.ref_columns,
    )


def _rename_view_column(
    s: Session, w: WriteTxn, view: View | MaterializedView, old: str, new: str
) -> None:
    """A view's output column renamed: its definition's target is named anew, and the
    views over it follow."""
    cat = w.catalog
    for v in view_deps.dependents(s, w, view.oid):
        if isinstance(v, View | MaterializedView):
            v = cat.by_oid(v.oid) or v
            sp = (v.schema, *s.search_path())
            text = deps.rename_column(
                deps.expand_stars(v.definition, cat, sp, view.oid), cat, sp, view.oid, old, new
            )
            if text != v.definition:
                cat.replace_relation(replace(v, definition=text))
    pos = next(i for i, c in enumerate(view.columns) if c.name == old)
    sp = (view.schema, *s.search_path())
    definition = deps.expand_stars(view.definition, cat, sp, None)
    definition = deps.rename_output(definition, pos, new)
    cols = tuple(replace(c, name=new) if c.name == old else c for c in view.columns)
    cat.replace_relation(replace(view, columns=cols, definition=definition))
    if isinstance(view, MaterializedView) and view.oid not in w.rebuilt_matviews:
        w.rebuilt_matviews.append(view.oid)  # its output columns are named anew
        for d, _ in view_deps.dependency_order(s, w, view):
            if isinstance(d, MaterializedView) and d.oid not in w.rebuilt_matviews:
                w.rebuilt_matviews.append(d.oid)


def _rename_constraint(w: WriteTxn, rel: Relation, old: str, new: str) -> None:
    if not isinstance(rel, Table):
        raise WrongObjectType(f'"{rel.name}" is not a table')
    names = {k.name for k in rel.keys} | {c.name for c in rel.checks}
    names |= {f.name for f in rel.foreign_keys}
    if old not in names:
        raise UndefinedObject(f'constraint "{old}" for table "{rel.name}" does not exist')
    if new in names:
        raise DuplicateObject(f'constraint "{new}" for relation "{rel.name}" already exists')
    w.catalog.replace_relation(
        replace(
            rel,
            keys=tuple(replace(k, name=new) if k.name == old else k for k in rel.keys),
            checks=tuple(replace(c, name=new) if c.name == old else c for c in rel.checks),
            foreign_keys=tuple(
                replace(f, name=new) if f.name == old else f for f in rel.foreign_keys
            ),
        )
    )


def _move(s: Session, w: WriteTxn, rel: Relation, schema: str, name: str) -> None:
    """RENAME TO and SET SCHEMA: the relation under its new name; the views naming it
    follow (their definitions are rewritten); a table's indexes move with it."""
    cat = w.catalog
    if cat.resolve(schema, name, ()) is not None:
        raise SQLError(f'relation "{name}" already exists', "42P07")
    moved_schema = schema if schema != rel.schema else None
    for v in view_deps.dependents(s, w, rel.oid):
        if isinstance(v, View | MaterializedView):
            v = cat.by_oid(v.oid) or v
            sp = (v.schema, *s.search_path())
            text = deps.rename_relation(v.definition, cat, sp, rel.oid, name, moved_schema)
            if text != v.definition:
                cat.replace_relation(replace(v, definition=text))
    cat.drop_relation(rel)
    cat.add_relation(replace(rel, schema=schema, name=name))
    if isinstance(rel, Index):
        table = cat.by_oid(rel.table_oid)
        if isinstance(table, Table):  # the unique key (or index key) it enforces follows

            def renamed(k: Any) -> Any:
                return replace(k, name=name) if k.name == rel.name else k

            keys = tuple(renamed(k) for k in table.keys)
            index_keys = tuple(renamed(k) for k in table.index_keys)
            cat.replace_relation(replace(table, keys=keys, index_keys=index_keys))
    if isinstance(rel, Table) and moved_schema is not None:
        for ix in [
            r for r in cat.relations.values() if isinstance(r, Index) and r.table_oid == rel.oid
        ]:
            cat.drop_relation(ix)
            cat.add_relation(replace(ix, schema=schema))


def _set_schema(s: Session, w: WriteTxn, stmt: A.AlterObjectSchemaStmt) -> Result:
    kind = stmt.objectType
    if kind not in KIND_WORDS or kind == ObjectType.OBJECT_INDEX:
        raise FeatureNotSupported(
            f"ALTER {kind.name.removeprefix('OBJECT_')} ... SET SCHEMA is not supported"
        )
    tag = TAGS[kind]
    rel = lookup(s, w, stmt.relation, stmt.missing_ok)
    if rel is None:
        return skipped(tag, stmt.relation.relname)
    check_kind(rel, kind)
    if stmt.newschema not in w.catalog.schemas:
        raise InvalidSchemaName(f'schema "{stmt.newschema}" does not exist')
    if stmt.newschema != rel.schema:
        _move(s, w, rel, stmt.newschema, rel.name)
    return Result(tag)
