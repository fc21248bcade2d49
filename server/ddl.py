"""CREATE and DROP of schemas, tables, views, materialized views and indexes.

Each runs in the writing transaction on its copy of the catalog, which becomes the
instance's at COMMIT (server/transactions.py). DROP follows PostgreSQL's dependency
order; a materialized view is planned at CREATE (0A000 outside the engine's scope)
and backfilled once the transaction's epoch is durable.
"""

from __future__ import annotations

from collections.abc import Sequence as Seq
from dataclasses import dataclass
from typing import Any

import duckdb
import pglast.ast as A
from headwater.catalog.identifiers import quote_ident
from headwater.catalog.objects import (
    Column,
    Domain,
    Index,
    IndexKey,
    Key,
    MaterializedView,
    Relation,
    Sequence,
    Table,
    View,
    replace,
)
from headwater.planner import foreign_keys as fk_plan
from headwater.planner import pg_compat
from headwater.planner.ddl import check_key_columns, table_from_create
from headwater.planner.like_clause import expand_like
from headwater.planner.naming import name_targets, pg_column_name
from headwater.planner.relations import deparse
from headwater.planner.scope import column_types
from headwater.planner.sequences import with_sequence_defaults
from headwater.server import (
    constraints,
    domains,
    extensions,
    foreign_keys,
    generated,
    sequence_ddl,
    slo,
    temp_tables,
    triggers,
    type_ddl,
    user_functions,
)
from headwater.server.binders import user_types, write_binder
from headwater.server.duckdb_calls import fetch
from headwater.server.queries import with_sources
from headwater.server.results import Result, arrow_fields
from headwater.server.session import Session, WriteTxn
from headwater.server.view_deps import dependency_order
from headwater.server.writes import target_table
from headwater.storage.duckdb_errors import translate
from headwater.storage.replica import CURRENT, Replica, quote
from pglast import parse_sql
from pglast.enums import ObjectType

from headwater.errors import (
    DependentObjects,
    FeatureNotSupported,
    SQLError,
    UndefinedObject,
    UndefinedTable,
    UniqueViolation,
    WrongObjectType,
)


def execute(s: Session, w: WriteTxn, stmt: Any) -> Result:
    """A CREATE or DROP in the writing transaction `w` (blocking)."""
    cat = w.catalog
    sp = s.search_path()
    if isinstance(stmt, A.CreateStmt):
        temp_tables.check_on_commit(stmt.relation, stmt.oncommit)
        if temp_tables.wants_temp(stmt.relation):  # CREATE TEMP TABLE: server/temp_tables.py
            schema = temp_tables.creation_schema(s, w, stmt.relation)
        else:
            schema = cat.creation_schema(stmt.relation.schemaname, sp)
        if cat.resolve(schema, stmt.relation.relname, ()) is not None:
            if stmt.if_not_exists:
                return Result(
                    "CREATE TABLE",
                    notices=[f'relation "{stmt.relation.relname}" already exists, skipping'],
                )
        stmt = expand_like(stmt, cat, sp)  # LIKE source: its columns as if written
        made = sequence_ddl.column_sequences(s, w, stmt, schema)  # serial, identity
        table = with_sequence_defaults(
            table_from_create(stmt, cat.next_oid, schema, user_types(s, w)),
            made,
            lambda schema, name: cat.get_relation(schema, name, sp),
        )
        table = domains.constrained(table, cat)  # columns of a domain: its constraints
        table = fk_plan.from_create(
            stmt,
            table,
            foreign_keys.resolver(cat, sp),
            foreign_keys.constraint_names(cat, schema),
        )
        foreign_keys.refuse_set_default(table)
        cat.add_relation(table)
        cat.allocate_oid()
        w.fresh.add(table.oid)
        try:
            Replica.create_table(w.cur, table)
        except duckdb.Error as e:
            raise translate(e) from None
        generated.validate(table, w.cur)
        w.touched.add(table.oid)
        if temp_tables.wants_temp(stmt.relation):
            temp_tables.created(s, table, stmt.oncommit)
        return Result("CREATE TABLE")
    if isinstance(stmt, A.ViewStmt):
        return _create_view(s, w, stmt)
    if isinstance(stmt, A.CreateTableAsStmt):
        return _create_matview(s, w, stmt)
    if isinstance(stmt, A.CreateSchemaStmt):
        if stmt.schemaElts:
            raise FeatureNotSupported("CREATE SCHEMA with elements is not supported")
        if stmt.schemaname in cat.schemas and stmt.if_not_exists:
            return Result(
                "CREATE SCHEMA",
                notices=[f'schema "{stmt.schemaname}" already exists, skipping'],
            )
        cat.add_schema(stmt.schemaname)
        return Result("CREATE SCHEMA")
    if isinstance(stmt, A.DropStmt):
        return _drop(s, w, stmt)
    if isinstance(stmt, A.IndexStmt):
        return _create_index(s, w, stmt)
    if isinstance(stmt, A.CreateExtensionStmt):
        return extensions.create(s, w, stmt)
    if isinstance(stmt, A.CreateFunctionStmt):
        return user_functions.create(s, w, stmt)
    if isinstance(stmt, A.CreateTrigStmt):
        return triggers.create(s, w, stmt)
    if isinstance(stmt, A.CreateSeqStmt):
        return sequence_ddl.create(s, w, stmt)
    if isinstance(stmt, A.AlterSeqStmt):
        return sequence_ddl.alter(s, w, stmt)
    raise FeatureNotSupported(f"{type(stmt).__name__} is not supported")


def _create_view(s: Session, w: WriteTxn, stmt: A.ViewStmt) -> Result:
    cat = w.catalog
    rv = stmt.view
    definition, cols, depends = _view_columns(s, w, stmt.query, stmt.aliases, "CREATE VIEW")
    notices: list[str | SQLError] = []
    if rv.relpersistence != "t" and temp_tables.reads_temp(cat, depends):
        notices.append(f'view "{rv.relname}" will be a temporary view')
        rv.relpersistence = "t"
    if temp_tables.wants_temp(rv):  # a temporary view: server/temp_tables.py
        schema = temp_tables.creation_schema(s, w, rv)
    else:
        schema = cat.creation_schema(rv.schemaname, s.search_path())
    existing = cat.resolve(schema, rv.relname, ())
    if existing is not None and not (stmt.replace and isinstance(existing, View)):
        if stmt.replace:
            raise WrongObjectType(f'"{rv.relname}" is not a view')
        raise SQLError(f'relation "{rv.relname}" already exists', "42P07")
    if existing is not None:
        _refuse_if_maintained(s, w, existing)
        view = View(existing.oid, schema, rv.relname, cols, definition)
        cat.replace_relation(view)
    else:
        view = View(cat.allocate_oid(), schema, rv.relname, cols, definition)
        cat.add_relation(view)
    s.instance.view_deps[view.oid] = depends
    return Result("CREATE VIEW", notices=notices)


def _view_columns(
    s: Session, w: WriteTxn, query: Any, aliases: Any, what: str, params: Any = None
) -> tuple[str, tuple[Column, ...], set[int]]:
    """A view's definition text, its columns (names and types, as a SELECT of the
    query would describe them) and the relations it names. (`params`: CREATE TABLE AS's
    parameters, server/create_as.py.)"""
    binder = write_binder(s, w)
    name_targets(query)
    types = column_types(query, s.catalog, s.search_path())
    if s.date_order() != "MDY":  # (planned again later, in other sessions' orders)
        query = pg_compat.fixed_dates(query, types)
    definition = deparse(query)
    pg_compat.rewrite(query, column_types=types)
    sql = f"SELECT * FROM ({binder.to_sql(query)}) AS _hw_v LIMIT 0"
    probe, types = fetch(w.cur, sql, params or None)
    fields = with_sources(s, query, arrow_fields(probe.schema, types))
    names = [f.name for f in fields]
    if aliases:
        given = [a.sval for a in aliases]
        if len(given) > len(names):
            raise SQLError(f"{what} specifies more column names than columns", "42601")
        names[: len(given)] = given
    if len(set(names)) != len(names):
        dupe = next(n for n in names if names.count(n) > 1)
        raise SQLError(f'column "{dupe}" specified more than once', "42701")
    cols = tuple(Column(n, f.type) for n, f in zip(names, fields, strict=True))
    return definition, cols, set(binder.depends)


def _create_matview(s: Session, w: WriteTxn, stmt: A.CreateTableAsStmt) -> Result:
    """CREATE MATERIALIZED VIEW: planned now (0A000 outside the engine's scope),
    backfilled once this transaction's epoch is durable (transactions.commit_write).
    WITH NO DATA (pg_dump's, REFRESH coming later) is populated all the same."""
    cat = w.catalog
    into = stmt.into
    rv = into.rel
    if into.accessMethod or into.tableSpaceName:
        raise FeatureNotSupported("storage options on a materialized view are not supported")
    freshness = slo.view_options(into.options)  # WITH (freshness = '1s'): server/slo.py
    schema = cat.creation_schema(rv.schemaname, s.search_path())
    if cat.resolve(schema, rv.relname, ()) is not None:
        if stmt.if_not_exists:
            return Result(
                "CREATE MATERIALIZED VIEW",
                notices=[
                    SQLError(
                        f'relation "{rv.relname}" already exists, skipping',
                        "42P07",
                        severity="NOTICE",
                    )
                ],
            )
        raise SQLError(f'relation "{rv.relname}" already exists', "42P07")
    if not isinstance(stmt.query, A.SelectStmt):
        raise FeatureNotSupported("a materialized view must be defined by a SELECT")
    definition, cols, depends = _view_columns(
        s, w, stmt.query, into.colNames, "CREATE MATERIALIZED VIEW"
    )
    if temp_tables.reads_temp(cat, depends):
        raise FeatureNotSupported("materialized views must not use temporary tables or views")
    mv = s.instance.matviews
    plan = mv.plan(definition, cat, s.search_path())  # 0A000 names what is out of scope
    if len(plan.output) != len(cols):
        raise FeatureNotSupported("this materialized view's output columns")
    for c in cols:  # e.g. an array: the view's rows are stored and read as this type
        try:
            c.type.duckdb()
        except KeyError:
            raise FeatureNotSupported(
                f'type {c.type.sql()} (column "{c.name}") is not supported in materialized views'
            ) from None
    if w.explicit:  # fail here, as PostgreSQL does, not at a COMMIT that keeps the rest
        _evaluate(s, w, definition)
    view = MaterializedView(
        cat.allocate_oid(), schema, rv.relname, cols, definition, freshness=freshness
    )
    cat.add_relation(view)
    s.instance.view_deps[view.oid] = depends
    mv.open_engine()  # spooling starts before this epoch closes
    w.created_matviews.append(view.oid)
    notices = []
    if into.skipData:
        notices.append(
            "materialized views are always populated in Headwater; WITH NO DATA is ignored"
        )
    return Result("CREATE MATERIALIZED VIEW", notices=notices)


def _evaluate(s: Session, w: WriteTxn, definition: str) -> None:
    """Run a view's query over the transaction's data (every row and column: hashing
    the row keeps DuckDB from skipping any), so that its errors (22012, ...) come now."""
    query = parse_sql(definition)[0].stmt
    name_targets(query)
    pg_compat.rewrite(query, column_types=column_types(query, s.catalog, s.search_path()))
    sql = write_binder(s, w).to_sql(query)
    fetch(w.cur, f"SELECT count(*), max(hash(_hw_v)) FROM ({sql}) AS _hw_v")


def _create_index(s: Session, w: WriteTxn, stmt: A.IndexStmt) -> Result:
    cat = w.catalog
    rv = stmt.relation
    if isinstance(cat.resolve(rv.schemaname, rv.relname, s.search_path()), MaterializedView):
        raise FeatureNotSupported("CREATE INDEX on a materialized view is not supported")
    table = target_table(s, w, stmt.relation)
    shaped = stmt.whereClause is not None or any(e.expr is not None for e in stmt.indexParams)
    key_exprs: tuple[str, ...] = ()
    predicate = None
    if shaped:
        key_exprs, predicate = _index_texts(s, w, table, stmt)
    # an expression key is "" (attnum 0 in pg_index.indkey, as PostgreSQL has it)
    cols = tuple(e.name or "" for e in stmt.indexParams)
    for c in cols:
        if c and table.column(c) is None:
            raise SQLError(f'column "{c}" does not exist', "42703")
    names = [e.name or pg_column_name(e.expr) for e in stmt.indexParams]
    name = stmt.idxname or f"{table.name}_{'_'.join(names)}_idx"
    if cat.resolve(table.schema, name, ()) is not None:
        if stmt.if_not_exists:
            return Result("CREATE INDEX", notices=[f'relation "{name}" already exists, skipping'])
        raise SQLError(f'relation "{name}" already exists', "42P07")
    if stmt.unique and shaped:  # enforced by server/constraints.py
        texts = [e or quote_ident(c) for e, c in zip(key_exprs, cols, strict=True)]
        key = IndexKey(name, tuple(texts), predicate)
        dup = constraints.duplicate_index_key(w.cur, table, key)
        if dup is not None:
            raise UniqueViolation(
                f'could not create unique index "{name}"',
                detail=f"Key ({constraints.index_key_text(key)})=({dup}) is duplicated.",
            )
        table = replace(table, index_keys=(*table.index_keys, key))
        cat.replace_relation(table)
    elif stmt.unique:
        qcols = ", ".join(quote(c) for c in cols)
        notnull = " AND ".join(f"{quote(c)} IS NOT NULL" for c in cols)
        dup, _ = fetch(
            w.cur,
            f"SELECT {qcols} FROM {Replica.scan(table, CURRENT)} AS t WHERE {notnull} "
            f"GROUP BY {qcols} HAVING count(*) > 1 LIMIT 1",
        )
        if dup.num_rows:
            shown = ", ".join(str(v) for v in dup.to_pylist()[0].values())
            raise UniqueViolation(
                f'could not create unique index "{name}"',
                detail=f"Key ({', '.join(cols)})=({shown}) is duplicated.",
            )
        check_key_columns(table.columns, cols)
        table = replace(table, keys=table.keys + (Key(name, cols, False),))
        cat.replace_relation(table)
    cat.add_relation(
        Index(
            cat.allocate_oid(),
            table.schema,
            name,
            (),
            table.oid,
            cols,
            bool(stmt.unique),
            method=stmt.accessMethod or "btree",
            key_exprs=key_exprs,
            predicate=predicate,
        )
    )
    return Result("CREATE INDEX")


def _index_texts(
    s: Session, w: WriteTxn, table: Table, stmt: A.IndexStmt
) -> tuple[tuple[str, ...], str | None]:
    """An expression or partial index's key expressions ("" for a column) and predicate
    as written, after checking that they bind over the table (PostgreSQL's 42703 for a
    missing column)."""
    exprs = tuple("" if e.expr is None else _deparse_expr(e.expr) for e in stmt.indexParams)
    key_text = ", ".join(
        x or quote_ident(e.name) for x, e in zip(exprs, stmt.indexParams, strict=True)
    )
    where = _deparse_expr(stmt.whereClause) if stmt.whereClause is not None else None
    # (the texts are deparsed trees, the table's name quoted)
    probe = parse_sql(
        f"SELECT {key_text} FROM {quote(table.schema)}.{quote(table.name)}"
        f" WHERE {where or 'true'} LIMIT 0"
    )[0].stmt
    name_targets(probe)
    pg_compat.rewrite(probe, column_types=column_types(probe, s.catalog, s.search_path()))
    try:
        fetch(w.cur, write_binder(s, w).to_sql(probe))
    except duckdb.Error as e:
        raise translate(e) from None
    return exprs, where


def _deparse_expr(node: Any) -> str:
    return deparse(A.SelectStmt(targetList=(A.ResTarget(val=node),))).removeprefix("SELECT ")


def _refuse_if_maintained(s: Session, w: WriteTxn, view: View) -> None:
    """CREATE OR REPLACE of a view that a materialized view reads, directly or not:
    PostgreSQL keeps the materialized view's rows until REFRESH; Headwater's views are
    maintained, and their state was built from the old definition, so it refuses."""
    for dependent, _ in dependency_order(s, w, view):
        if isinstance(dependent, MaterializedView):
            raise FeatureNotSupported(
                f'cannot replace view "{view.name}" because materialized view'
                f' "{dependent.name}" depends on it',
                hint="Drop the materialized view, replace the view, then create the"
                " materialized view again.",
            )


# -- DROP and dependencies --------------------------------------------------------------------
def _drop(s: Session, w: WriteTxn, stmt: A.DropStmt) -> Result:
    cat = w.catalog
    kinds = {
        ObjectType.OBJECT_TABLE: ("table", Table, "DROP TABLE"),
        ObjectType.OBJECT_VIEW: ("view", View, "DROP VIEW"),
        ObjectType.OBJECT_INDEX: ("index", Index, "DROP INDEX"),
        ObjectType.OBJECT_SEQUENCE: ("sequence", Sequence, "DROP SEQUENCE"),
        ObjectType.OBJECT_MATVIEW: (
            "materialized view",
            MaterializedView,
            "DROP MATERIALIZED VIEW",
        ),
    }
    if stmt.removeType == ObjectType.OBJECT_SCHEMA:
        notices: list[str | SQLError] = []
        for obj in stmt.objects:
            name = obj.sval
            if name not in cat.schemas:
                if stmt.missing_ok:
                    continue
                raise SQLError(f'schema "{name}" does not exist', "3F000")
            inside = [r for r in cat.relations.values() if r.schema == name]
            path = s.search_path()
            fks = [  # foreign keys of tables elsewhere that reference tables inside
                (r, t, f)
                for r in inside
                if isinstance(r, Table)
                for t, f in foreign_keys.referencing_others(cat, r)
                if t.schema != name
            ]
            fk_lines = [
                f"constraint {f.name} on table "
                f"{t.name if t.schema in path else f'{t.schema}.{t.name}'}"
                for _, t, f in fks
            ]
            types = [t for t in cat.types.values() if t.schema == name]  # CREATE TYPE
            types += [d for d in cat.domains.values() if d.schema == name]  # CREATE DOMAIN
            exts = [e for e in cat.extensions.values() if e.schema == name]
            funcs = user_functions.in_schema(cat, name)
            if (inside or types or exts or funcs) and not stmt.behavior:
                raise DependentObjects(
                    f"cannot drop schema {name} because other objects depend on it",
                    detail="\n".join(
                        [
                            f"{r.kind} {'' if r in exts else name + '.'}{r.name}"
                            + (f"({r.identity})" if r in funcs else "")
                            + f" depends on schema {name}"
                            for r in sorted([*inside, *types, *exts, *funcs], key=lambda r: r.oid)
                        ]
                        + [
                            f"{line} depends on table {name}.{r.name}"
                            for line, (r, _, _) in zip(fk_lines, fks, strict=True)
                        ]
                    ),
                    hint="Use DROP ... CASCADE to drop the dependent objects too.",
                )
            if fks:  # PostgreSQL's notice lists these with the schema's objects
                shown = [
                    DroppedConstraint(f"{name}.{r.name}", r.kind)
                    for r in inside
                    if not isinstance(r, Index | Sequence)
                ]
                shown += [DroppedConstraint(line.removeprefix("constraint ")) for line in fk_lines]
                notices.extend(_cascade_notices(shown))
            for r in inside:
                drop_relation(s, w, r, cascade=True, dropping=frozenset(x.oid for x in inside))
            for k in [k for k in cat.sinks.values() if k.schema == name]:
                cat.drop_sink(k)
            for t in types:
                cat.drop_domain(t) if isinstance(t, Domain) else cat.drop_type(t)
            for e in exts:
                cat.drop_extension(e)
            for f in funcs:
                cat.drop_function(f)
            cat.drop_schema(name)
        return Result("DROP SCHEMA", notices=notices)
    if stmt.removeType == ObjectType.OBJECT_TYPE:
        return type_ddl.drop(s, w, stmt)
    if stmt.removeType == ObjectType.OBJECT_DOMAIN:
        return domains.drop(s, w, stmt)
    if stmt.removeType == ObjectType.OBJECT_EXTENSION:
        return extensions.drop(w, stmt)
    if stmt.removeType == ObjectType.OBJECT_TRIGGER:
        return triggers.drop(s, w, stmt)
    if stmt.removeType in (ObjectType.OBJECT_FUNCTION, ObjectType.OBJECT_PROCEDURE):
        return user_functions.drop(s, w, stmt, drop_relation)
    if stmt.removeType not in kinds:
        raise FeatureNotSupported(
            f"DROP {stmt.removeType.name.removeprefix('OBJECT_')} is not supported"
        )
    word, cls, tag = kinds[stmt.removeType]
    notices = []
    named = frozenset(
        r.oid
        for obj in stmt.objects
        if (r := cat.resolve(*_schema_and_name(obj), s.search_path())) is not None
    )
    for obj in stmt.objects:
        names = [n.sval for n in obj]
        schema, name = (names[-2], names[-1]) if len(names) > 1 else (None, names[-1])
        rel = cat.resolve(schema, name, s.search_path())
        if rel is None:
            if stmt.missing_ok:
                notices.append(f'{word} "{name}" does not exist, skipping')
                continue
            if word == "index":  # (PostgreSQL's code for an index is 42704)
                raise UndefinedObject(f'index "{name}" does not exist')
            raise UndefinedTable(f'{word} "{name}" does not exist')
        if not isinstance(rel, cls):
            raise WrongObjectType(
                f'"{name}" is not a {word}',
                hint=f"Use DROP {rel.kind.upper()} to remove a {rel.kind}.",
            )
        if isinstance(rel, Sequence):
            notices.extend(sequence_ddl.before_drop(s, w, rel, bool(stmt.behavior)))
        dropped = drop_relation(s, w, rel, cascade=bool(stmt.behavior), dropping=named)
        notices.extend(_cascade_notices(dropped))
    return Result(tag, notices=notices)


def _schema_and_name(obj: Any) -> tuple[str | None, str]:
    names = [n.sval for n in obj]
    return (names[-2], names[-1]) if len(names) > 1 else (None, names[-1])


def drop_relation(
    s: Session, w: WriteTxn, rel: Relation, cascade: bool, dropping: frozenset[int] = frozenset()
) -> list[Relation | DroppedConstraint]:
    """Drop `rel` (and, with cascade, what depends on it); returns the dependents dropped.
    (`dropping`: the other tables the same DROP names, whose foreign keys do not count.)"""
    cat = w.catalog
    if (rel.schema, rel.name) not in cat.relations:
        return []
    order = dependency_order(s, w, rel)
    fks = []
    if isinstance(rel, Table):
        fks = [
            (t, f) for t, f in foreign_keys.referencing_others(cat, rel) if t.oid not in dropping
        ]
    if (order or fks) and not cascade:
        lines = [f"{d.kind} {d.name} depends on {p.kind} {p.name}" for d, p in order]
        lines += [
            f"constraint {f.name} on table {t.name} depends on table {rel.name}" for t, f in fks
        ]
        raise DependentObjects(
            f"cannot drop {rel.kind} {rel.name} because other objects depend on it",
            detail="\n".join(lines),
            hint="Use DROP ... CASCADE to drop the dependent objects too.",
        )
    sinks = [k for k in cat.sinks.values() if k.source == rel.oid]  # CREATE SINK
    if sinks and not cascade:
        raise DependentObjects(
            f"cannot drop {rel.kind} {rel.name} because other objects depend on it",
            detail="\n".join(f"sink {k.name} depends on {rel.kind} {rel.name}" for k in sinks),
            hint="Use DROP ... CASCADE to drop the dependent objects too.",
        )
    for k in sinks:
        cat.drop_sink(k)
    for d, _ in reversed(order):  # every dependent before what it depends on
        drop_relation(s, w, d, cascade=True)
    dropped: list[Relation | DroppedConstraint] = [d for d, _ in order]
    for t, f in fks:
        foreign_keys.drop_constraint(cat, t.oid, f.name)
        dropped.append(DroppedConstraint(f"{f.name} on table {t.name}"))
    if isinstance(rel, Table):  # its indexes and the sequences it owns go with it
        sequence_ddl.before_drop(s, w, rel, cascade)
        for ix in [
            r for r in cat.relations.values() if isinstance(r, Index) and r.table_oid == rel.oid
        ]:
            cat.drop_relation(ix)
    if isinstance(rel, Index):
        table = cat.by_oid(rel.table_oid)
        if isinstance(table, Table) and any(k.name == rel.name for k in table.keys):
            cat.replace_relation(
                replace(table, keys=tuple(k for k in table.keys if k.name != rel.name))
            )
        if isinstance(table, Table) and any(k.name == rel.name for k in table.index_keys):
            kept = tuple(k for k in table.index_keys if k.name != rel.name)
            cat.replace_relation(replace(table, index_keys=kept))
    cat.drop_relation(rel)
    s.instance.view_deps.pop(rel.oid, None)
    if isinstance(rel, MaterializedView):
        w.dropped_matviews.append(rel.oid)
    if isinstance(rel, Table):
        Replica.drop_table(w.cur, rel.oid)
        w.changes.pop(rel.oid, None)
        w.touched.discard(rel.oid)
        w.dropped_logs.extend(s.instance.changelog.log_keys(rel.oid))
    return dropped


@dataclass(frozen=True)
class DroppedConstraint:
    """A foreign key a DROP ... CASCADE removed, as its notice names it."""

    name: str
    kind: str = "constraint"


def _cascade_notices(dropped: Seq[Relation | DroppedConstraint]) -> list[str | SQLError]:
    if not dropped:
        return []
    if len(dropped) == 1:
        return [f"drop cascades to {dropped[0].kind} {dropped[0].name}"]
    lines = "\n".join(f"drop cascades to {d.kind} {d.name}" for d in dropped)
    return [  # as PostgreSQL: the count in the message, the objects in DETAIL
        SQLError(
            f"drop cascades to {len(dropped)} other objects",
            "00000",
            detail=lines,
            severity="NOTICE",
        )
    ]


def cascade_notices(dropped: Seq[Relation | DroppedConstraint]) -> list[str | SQLError]:
    return _cascade_notices(dropped)
