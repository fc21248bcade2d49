"""CREATE TYPE ... AS ENUM, ALTER TYPE ... ADD VALUE / RENAME VALUE, DROP TYPE.

An enum is a catalog object (catalog/objects.py UserType); a column of the type holds
its PgType, and the replica stores the values as DuckDB's ENUM of the labels, whose
positions give PostgreSQL's order. ALTER TYPE gives every column of the type the new
labels: the replica's columns are converted in place (their values are the same
labels), views' and materialized views' columns take the new type, and materialized
views over them are rebuilt at COMMIT (their state holds the old ENUM). RENAME VALUE
also rewrites the change logs of the tables it changes, whose history holds the old
label.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import duckdb
import pglast.ast as A
from headwater.catalog.identifiers import quote_ident
from headwater.catalog.objects import Column, MaterializedView, Relation, Table, UserType
from headwater.catalog.types import BY_NAME, PgType
from headwater.server import domains, view_deps
from headwater.server.results import Result
from headwater.server.session import Session, WriteTxn
from headwater.storage.duckdb_errors import translate
from headwater.storage.replica import physical, quote
from pglast.enums import ObjectType

from headwater.errors import (
    DependentObjects,
    DuplicateObject,
    FeatureNotSupported,
    InvalidParameterValue,
    SQLError,
    UndefinedObject,
)

_STATEMENTS = (A.CreateEnumStmt, A.AlterEnumStmt, A.CompositeTypeStmt, A.CreateDomainStmt)
_STATEMENTS += (A.AlterDomainStmt,)
NAMEDATALEN = 64


def handles(stmt: Any) -> bool:
    """CREATE TYPE, CREATE DOMAIN, ALTER TYPE (DROP TYPE: server/ddl.py)."""
    if isinstance(stmt, A.RenameStmt):
        return stmt.renameType == ObjectType.OBJECT_TYPE
    return isinstance(stmt, _STATEMENTS)


def execute(s: Session, w: WriteTxn, stmt: Any) -> Result:
    if isinstance(stmt, A.CreateEnumStmt):
        return _create(s, w, stmt)
    if isinstance(stmt, A.AlterEnumStmt):
        return _alter(s, w, stmt)
    if isinstance(stmt, A.RenameStmt):
        return _rename(s, w, stmt)
    if isinstance(stmt, A.CreateDomainStmt):
        return domains.create(s, w, stmt)
    if isinstance(stmt, A.AlterDomainStmt):
        return domains.alter(s, w, stmt)
    what = "composite types" if isinstance(stmt, A.CompositeTypeStmt) else "domains"
    raise FeatureNotSupported(f"{what} are not supported", hint="CREATE TYPE ... AS ENUM (...) is.")


def _names(names: Any) -> list[str]:
    return [n.sval for n in names]


def _create(s: Session, w: WriteTxn, stmt: A.CreateEnumStmt) -> Result:
    cat = w.catalog
    names = _names(stmt.typeName)
    schema = cat.creation_schema(names[0] if len(names) == 2 else None, s.search_path())
    name = names[-1]
    taken = cat.resolve_type(schema, name, ()) is not None or cat.resolve(schema, name, ())
    if taken or (schema == "pg_catalog" and name in BY_NAME):
        raise DuplicateObject(f'type "{name}" already exists')
    labels = tuple(v.sval for v in stmt.vals or ())
    for label in labels:
        _check_label(label)
    if len(set(labels)) != len(labels):
        dup = next(x for x in labels if labels.count(x) > 1)
        raise SQLError(f'enum label "{dup}" used more than once', "42710")
    oid = cat.allocate_oid()
    cat.put_type(UserType(oid, schema, name, labels, cat.allocate_oid()))
    return Result("CREATE TYPE")


def _check_label(label: str) -> None:
    if not label or len(label.encode()) > NAMEDATALEN - 1:
        raise InvalidParameterValue(
            f'invalid enum label "{label}"',
            detail=f"Labels must be {NAMEDATALEN - 1} bytes or less.",
        )


def find(s: Session, w: WriteTxn, names: list[str], missing_ok: bool = False) -> UserType | None:
    cat = w.catalog
    schema = names[0] if len(names) == 2 else None
    t = cat.resolve_type(schema, names[-1], s.search_path())
    if t is None and not missing_ok:
        raise UndefinedObject(f'type "{".".join(names)}" does not exist')
    return t


def _alter(s: Session, w: WriteTxn, stmt: A.AlterEnumStmt) -> Result:
    t = find(s, w, _names(stmt.typeName))
    assert t is not None
    labels = list(t.labels)
    if stmt.oldVal:  # RENAME VALUE old TO new
        if stmt.oldVal not in labels:
            raise InvalidParameterValue(f'"{stmt.oldVal}" is not an existing enum label')
        if stmt.newVal in labels:
            raise DuplicateObject(f'enum label "{stmt.newVal}" already exists')
        _check_label(stmt.newVal)
        quoted = "'" + stmt.oldVal.replace("'", "''") + "'"
        _refuse_if_named(
            w, f'enum label "{stmt.oldVal}" of type {t.name}', (quoted,), _reading(s, w, t)
        )
        labels[labels.index(stmt.oldVal)] = stmt.newVal
        _retype(s, w, t, replace(t, labels=tuple(labels)), {stmt.oldVal: stmt.newVal})
        return Result("ALTER TYPE")
    if stmt.newVal in labels:
        if stmt.skipIfNewValExists:
            return Result(
                "ALTER TYPE",
                notices=[f'enum label "{stmt.newVal}" already exists, skipping'],
            )
        raise DuplicateObject(f'enum label "{stmt.newVal}" already exists')
    _check_label(stmt.newVal)
    at = len(labels)
    if stmt.newValNeighbor:
        if stmt.newValNeighbor not in labels:
            raise InvalidParameterValue(f'"{stmt.newValNeighbor}" is not an existing enum label')
        at = labels.index(stmt.newValNeighbor) + (1 if stmt.newValIsAfter else 0)
    labels.insert(at, stmt.newVal)
    _retype(s, w, t, replace(t, labels=tuple(labels)), {})
    return Result("ALTER TYPE")


def _reading(s: Session, w: WriteTxn, t: UserType) -> set[int]:
    """The relations that may read a value of type `t`: those with a column of it, the
    views over them (directly or not), and any whose text names the type (a cast)."""
    out: set[int] = set()
    for rel, _ in users(w, t.oid):
        out.add(rel.oid)
        out.update(d.oid for d, _ in view_deps.dependency_order(s, w, rel))
    out.update(r.oid for r in w.catalog.relations.values() if t.name in _texts(r))
    return out


def _texts(rel: Relation) -> str:
    """The SQL text a relation keeps: a view's definition, CHECKs, defaults."""
    texts = [getattr(rel, "definition", "")]
    texts += [c.expr for c in getattr(rel, "checks", ())]
    texts += [c.default or "" for c in rel.columns]
    return "\n".join(texts)


def _refuse_if_named(
    w: WriteTxn, what: str, needles: tuple[str, ...], among: set[int] | None = None
) -> None:
    """Renaming what a view, CHECK or default names (an enum's label as a constant, the
    type in a cast): PostgreSQL's keep it by oid and follow the rename; Headwater keeps
    their text, which would then name something that no longer exists. (`among`: the
    relations to look at; a label as a string elsewhere is just a string.)"""
    for rel in w.catalog.relations.values():
        if among is not None and rel.oid not in among:
            continue
        if any(needle in _texts(rel) for needle in needles):
            raise FeatureNotSupported(
                f"cannot rename {what}: {rel.kind} {rel.name} names it",
                hint="Drop or change that definition first.",
            )


def _rename(s: Session, w: WriteTxn, stmt: A.RenameStmt) -> Result:
    """ALTER TYPE name RENAME TO new: the columns of the type show the new name."""
    t = find(s, w, [n.sval for n in stmt.object])
    assert t is not None
    cat = w.catalog
    if cat.resolve_type(t.schema, stmt.newname, ()) or cat.resolve(t.schema, stmt.newname, ()):
        raise DuplicateObject(f'type "{stmt.newname}" already exists')
    casts = (f"::{t.name}", f"::{quote_ident(t.name)}", f"AS {quote_ident(t.name)})")
    _refuse_if_named(w, f"type {t.name}", casts)
    cat.drop_type(t)
    _retype(s, w, t, replace(t, name=stmt.newname), {})
    return Result("ALTER TYPE")


def users(w: WriteTxn, oid: int) -> list[tuple[Relation, Column]]:
    """The columns of relations whose type is the user type `oid`."""
    return [(r, c) for r in w.catalog.relations.values() for c in r.columns if c.type.pg.oid == oid]


def _retype(s: Session, w: WriteTxn, old: UserType, new: UserType, renamed: dict[str, str]) -> None:
    cat = w.catalog
    cat.put_type(new)
    pg = new.pg
    by_relation: dict[int, Relation] = {}
    for rel, _ in users(w, old.oid):
        by_relation[rel.oid] = rel
    relabeled = new.labels != old.labels  # (else renamed: the values stay as they are)
    for rel in by_relation.values():
        columns = tuple(_with_type(c, old.oid, pg) for c in rel.columns)
        if isinstance(rel, Table) and relabeled:
            for c in columns:
                if c.type.pg.oid == old.oid:
                    _convert(w, rel, c, renamed)
            w.touched.add(rel.oid)
            if renamed:  # the history holds the old label: the log is rewritten
                w.rewritten.add(rel.oid)
        if isinstance(rel, MaterializedView) and relabeled and rel.oid not in w.rebuilt_matviews:
            w.rebuilt_matviews.append(rel.oid)
        cat.replace_relation(replace(rel, columns=columns))


def _with_type(c: Column, oid: int, pg: PgType) -> Column:
    return replace(c, type=replace(c.type, pg=pg)) if c.type.pg.oid == oid else c


def _convert(w: WriteTxn, table: Table, col: Column, renamed: dict[str, str]) -> None:
    """The replica column as the new ENUM: every version's value is the same label (or
    its new name)."""
    q = quote(col.name)
    value = f"CAST({q} AS VARCHAR)"
    for before, after in renamed.items():
        value = f"CASE WHEN {q} = '{_sql(before)}' THEN '{_sql(after)}' ELSE {value} END"
    try:
        w.cur.execute(
            f"ALTER TABLE {physical(table.oid)} ALTER COLUMN {q} "
            f"SET DATA TYPE {col.type.duckdb()} USING {value}"
        )
    except duckdb.Error as e:
        raise translate(e) from None


def _sql(text: str) -> str:
    return text.replace("'", "''")


def drop(s: Session, w: WriteTxn, stmt: A.DropStmt) -> Result:
    """DROP TYPE [IF EXISTS] name [, ...] [CASCADE]: refused while a column has the type
    (CASCADE would drop those columns: not done)."""
    notices: list[str | SQLError] = []
    for tn in stmt.objects:
        names = _names(tn.names)
        t = find(s, w, names, missing_ok=bool(stmt.missing_ok))
        if t is None:
            notices.append(f'type "{".".join(names)}" does not exist, skipping')
            continue
        used = users(w, t.oid)
        if used:
            detail = "\n".join(domains.dependents(used, t.name))
            if stmt.behavior:
                raise FeatureNotSupported(
                    f"DROP TYPE {t.name} CASCADE would drop columns: not supported",
                    detail=detail,
                    hint="Drop or alter those columns first.",
                )
            raise DependentObjects(
                f"cannot drop type {t.name} because other objects depend on it",
                detail=detail,
                hint="Use DROP ... CASCADE to drop the dependent objects too.",
            )
        w.catalog.drop_type(t)
    return Result("DROP TYPE", notices=notices)
